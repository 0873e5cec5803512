"""Helpers for tests that install the package as a user would: copy the sources, build,
and install into a fresh virtual environment."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# What a wheel build reads: the metadata files and the packages setup.cfg lists.
BUILD_INPUTS = ["setup.py", "setup.cfg", "pyproject.toml", "README.md", "LICENSE"]
PACKAGES = ["attentionspan_datasets", "lm_eval_tasks", "harness"]


def copy_sources(destination: Path) -> Path:
    """What a build reads, copied, so that building never touches the working tree."""
    destination.mkdir(parents=True)
    for name in BUILD_INPUTS:
        if (REPO / name).exists():
            shutil.copy2(REPO / name, destination / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for package in PACKAGES:
        if (REPO / package).is_dir():
            shutil.copytree(REPO / package, destination / package, ignore=ignore)
    return destination


def run(*command: str | Path) -> str:
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"{command} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


def fresh_venv(folder: Path, *install: str | Path) -> Path:
    """A venv without pip, `pip install --no-deps *install` into it, and a `.pth` line that
    appends the dev venv's site-packages (torch, datasets, ...: nothing is reinstalled;
    `--system-site-packages` would point at the base interpreter, not this venv)."""
    run(sys.executable, "-m", "venv", "--without-pip", folder)
    python = folder / "bin" / "python"
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    dev_site_packages = sysconfig.get_paths()["purelib"]
    Path(purelib.strip(), "zz_attentionspan_dev_venv.pth").write_text(dev_site_packages + "\n")
    # First the .pth: an editable install builds with this venv's python (setuptools).
    run(*PIP, "--python", python, "install", "--no-deps", "--no-build-isolation", *install)
    return python
