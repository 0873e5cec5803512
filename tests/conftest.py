"""Shared fixtures. `installed_python`: the package as a user gets it from a wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.install_helpers import PIP, copy_sources, fresh_venv, run


@pytest.fixture(scope="session")
def installed_python(tmp_path_factory) -> Path:
    """The python of a fresh venv with the wheel of this checkout installed (not editable).

    Built once per session from a copy of the sources: `pip wheel`, then `fresh_venv`. The
    wheel's own start-up `.pth` runs because it sits in the new venv's site-packages.
    """
    root = tmp_path_factory.mktemp("installed")
    source = copy_sources(root / "source")
    run(*PIP, "wheel", "--no-deps", "--no-build-isolation", "-w", root / "dist", source)
    (wheel,) = (root / "dist").glob("attentionspan-*.whl")
    return fresh_venv(root / "venv", wheel)
