"""Shared fixtures. `installed_python`: the package as a user gets it from a wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# What a wheel build reads: the metadata files and the packages setup.cfg lists.
BUILD_INPUTS = ["setup.py", "setup.cfg", "pyproject.toml", "README.md", "LICENSE"]
PACKAGES = ["attentionspan_datasets", "lm_eval_tasks", "harness"]


@pytest.fixture(scope="session")
def installed_python(tmp_path_factory) -> Path:
    """The python of a fresh venv with the wheel of this checkout installed (not editable).

    Built once per session: a copy of the sources (so a build never touches the working
    tree), `pip wheel`, `python -m venv --without-pip`, `pip --python VENV install
    --no-deps WHEEL`. A `.pth` line appends the dev venv's site-packages, so torch and
    datasets are importable without installing them again (`--system-site-packages`
    would point at the base interpreter, not this venv). The wheel's own start-up `.pth`
    runs because it sits in the new venv's site-packages.
    """
    root = tmp_path_factory.mktemp("installed")
    source = root / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        if (REPO / name).exists():
            shutil.copy2(REPO / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for package in PACKAGES:
        if (REPO / package).is_dir():
            shutil.copytree(REPO / package, source / package, ignore=ignore)

    def run(*command: str | Path) -> None:
        result = subprocess.run([str(c) for c in command], capture_output=True, text=True)
        if result.returncode:
            raise RuntimeError(f"{command} failed:\n{result.stdout}\n{result.stderr}")

    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    run(*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", root / "dist", source)
    (wheel,) = (root / "dist").glob("attentionspan-*.whl")
    venv = root / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    run(*pip, "--python", python, "install", "--no-deps", wheel)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dev_site_packages = sysconfig.get_paths()["purelib"]
    Path(purelib, "zz_attentionspan_dev_venv.pth").write_text(dev_site_packages + "\n")
    return python
