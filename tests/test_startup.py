"""The generic post-import hook, on throw-away modules written into tmp_path."""

from __future__ import annotations

import importlib
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attentionspan_datasets import startup

CALLS: list[str] = []
COUNTER = itertools.count()


def record() -> None:
    CALLS.append("called")


def fail() -> None:
    raise RuntimeError("patch exploded")


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A fresh importable module `as_host_N` and its hook entry; cleaned up afterwards."""
    name = f"as_host_module_{next(COUNTER)}"
    (tmp_path / f"{name}.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    CALLS.clear()
    monkeypatch.delenv(startup.ENV_DISABLE, raising=False)
    monkeypatch.setitem(startup.POST_IMPORT_HOOKS, name, f"{__name__}:record")
    assert startup.arm()
    yield name
    sys.modules.pop(name, None)


def test_hook_runs_once_right_after_the_first_import(host):
    assert CALLS == []
    module = importlib.import_module(host)
    assert module.VALUE == 42
    assert CALLS == ["called"]
    importlib.import_module(host)
    assert CALLS == ["called"]
    # Afterwards the module shows its real loader, not the wrapper.
    assert type(module.__loader__).__name__ == "SourceFileLoader"
    assert module.__spec__.loader is module.__loader__


def test_a_failing_hook_warns_and_the_import_still_works(host, monkeypatch):
    monkeypatch.setitem(startup.POST_IMPORT_HOOKS, host, f"{__name__}:fail")
    with pytest.warns(RuntimeWarning, match="patch exploded"):
        module = importlib.import_module(host)
    assert module.VALUE == 42


def test_a_missing_hook_function_warns(host, monkeypatch):
    monkeypatch.setitem(startup.POST_IMPORT_HOOKS, host, f"{__name__}:no_such_function")
    with pytest.warns(RuntimeWarning, match="no_such_function"):
        importlib.import_module(host)


def test_the_host_import_error_is_the_hosts_own(host, tmp_path):
    (tmp_path / f"{host}.py").write_text("1 / 0\n")
    importlib.invalidate_caches()
    with pytest.raises(ZeroDivisionError):
        importlib.import_module(host)
    assert CALLS == []


def test_an_already_imported_module_gets_its_hook_at_arm(host, monkeypatch):
    importlib.import_module(host)
    CALLS.clear()
    monkeypatch.setitem(startup.POST_IMPORT_HOOKS, host, f"{__name__}:record")
    startup.arm()
    assert CALLS == ["called"]


def test_arm_installs_one_finder(host):
    startup.arm()
    startup.arm()
    finders = [f for f in sys.meta_path if getattr(f, "attentionspan_post_import_hooks", 0)]
    assert len(finders) == 1


def test_environment_variable_turns_it_off(host, monkeypatch):
    monkeypatch.setenv(startup.ENV_DISABLE, "1")
    assert startup.arm() is False
    importlib.import_module(host)
    assert CALLS == []


def test_a_module_without_a_hook_is_untouched(tmp_path, monkeypatch):
    (tmp_path / "as_plain_module.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        module = importlib.import_module("as_plain_module")
        assert type(module.__loader__).__name__ == "SourceFileLoader"
    finally:
        sys.modules.pop("as_plain_module", None)


def test_the_datasets_entry_is_in_the_table():
    assert startup.POST_IMPORT_HOOKS["datasets"] == ("attentionspan_datasets.registration:register")


def test_pth_line_is_one_import_line():
    assert startup.PTH_LINE.startswith("import ")
    assert startup.PTH_LINE.count("\n") == 1 and startup.PTH_LINE.endswith("\n")


def run_pth_line(tmp_path: Path, package_dir: Path | None, **env: str):
    """Run the .pth line as site does (exec of the line), with only `package_dir` on the
    path (-S: no site, so the dev venv's packages are not visible)."""
    code = f"exec({startup.PTH_LINE!r}); import sys; print(sorted(m for m in sys.modules "
    code += "if m.startswith('attentionspan')), sys.meta_path[0].__class__.__name__)"
    environment = {"PATH": os.environ.get("PATH", ""), **env}
    if package_dir is not None:
        environment["PYTHONPATH"] = str(package_dir)
    return subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
    )


def test_pth_line_arms_the_hook_without_importing_the_package(tmp_path):
    package = tmp_path / "site" / "attentionspan_datasets"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('the package was imported')\n")
    (package / "startup.py").write_text(Path(startup.__file__).read_text())
    result = run_pth_line(tmp_path, package.parent)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["['attentionspan_datasets.startup']", "_PostImportFinder"]
    assert result.stderr == ""


def test_pth_line_never_breaks_start_up(tmp_path):
    package = tmp_path / "site" / "attentionspan_datasets"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "startup.py").write_text("def broken(:\n")
    result = run_pth_line(tmp_path, package.parent)
    assert result.returncode == 0
    assert "attentionspan start-up hook failed" in result.stderr
    assert "SyntaxError" in result.stderr


def test_pth_line_is_silent_when_the_package_is_gone(tmp_path):
    result = run_pth_line(tmp_path, None)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith("[]")


def test_pth_line_respects_the_environment_variable(tmp_path):
    package = tmp_path / "site" / "attentionspan_datasets"
    package.mkdir(parents=True)
    (package / "startup.py").write_text(Path(startup.__file__).read_text())
    result = run_pth_line(tmp_path, package.parent, **{startup.ENV_DISABLE: "1"})
    assert result.returncode == 0 and result.stdout.startswith("[]")


def test_package_imported_before_datasets_registers_through_the_hook(tmp_path):
    code = (
        "import sys, attentionspan_datasets\n"
        "assert 'datasets' not in sys.modules\n"
        "import datasets.load\n"
        "from attentionspan_datasets.registration import is_registered\n"
        "print(is_registered())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != startup.ENV_DISABLE}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert result.stdout.strip() == "True", result.stderr
