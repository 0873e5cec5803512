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


def run_pth_line(tmp_path: Path, package_dir: Path | None, then: str = "", **env: str):
    """Run the .pth line as site does (exec of the line), with only `package_dir` on the
    path (-S: no site, so the dev venv's packages are not visible), then the code `then`."""
    code = f"exec({startup.PTH_LINE!r}); import sys; print(sorted(m for m in sys.modules "
    code += "if m.startswith('attentionspan')), getattr(sys.meta_path[0], '__name__', "
    code += "type(sys.meta_path[0]).__name__))\n" + then
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


def fake_site(tmp_path: Path, startup_source: str | None = None) -> Path:
    """site/ with a fake `datasets` and a package whose registration hook prints a word."""
    site = tmp_path / "site"
    package = site / "attentionspan_datasets"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "registration.py").write_text("def register():\n    print('REGISTERED')\n")
    (package / "startup.py").write_text(startup_source or Path(startup.__file__).read_text())
    (site / "datasets.py").write_text("VALUE = 1\n")
    return site


def test_pth_line_only_puts_a_boot_finder_first(tmp_path):
    site = fake_site(tmp_path)
    (site / "attentionspan_datasets" / "__init__.py").write_text("raise RuntimeError('no')\n")
    result = run_pth_line(tmp_path, site)
    assert result.returncode == 0, result.stderr
    # nothing is loaded at start: no file read, no package imported
    assert result.stdout.split() == ["[]", "_AttnspanBoot"]
    assert result.stderr == ""


def test_the_first_watched_import_loads_startup_and_runs_the_hook(tmp_path):
    then = (
        "import datasets\n"
        "print(datasets.VALUE, type(sys.meta_path[0]).__name__)\n"
        "print(any(getattr(f, 'attentionspan_boot', False) for f in sys.meta_path))\n"
    )
    result = run_pth_line(tmp_path, fake_site(tmp_path), then)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == ["REGISTERED", "1 _PostImportFinder", "False"]
    assert result.stderr == ""


def test_pth_line_never_breaks_start_up_or_the_import(tmp_path):
    site = fake_site(tmp_path, startup_source="def broken(:\n")
    result = run_pth_line(tmp_path, site, "import datasets\nprint(datasets.VALUE)\n")
    assert result.returncode == 0
    assert result.stdout.splitlines()[-1] == "1"
    assert "attentionspan start-up hook failed" in result.stderr
    assert "SyntaxError" in result.stderr


def test_pth_line_is_silent_when_the_package_is_gone(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "datasets.py").write_text("VALUE = 1\n")
    result = run_pth_line(tmp_path, tmp_path / "site", "import datasets\nprint(datasets.VALUE)\n")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith("[]") and result.stdout.splitlines()[-1] == "1"


def test_pth_line_respects_the_environment_variable(tmp_path):
    result = run_pth_line(tmp_path, fake_site(tmp_path), **{startup.ENV_DISABLE: "1"})
    assert result.returncode == 0 and result.stdout.startswith("[]")
    assert "_AttnspanBoot" not in result.stdout


def test_pth_line_costs_well_under_2_ms(tmp_path):
    # The line's own run time in fresh interpreters; the best of five, as load varies.
    code = (
        "import time\n"
        f"line = {startup.PTH_LINE!r}\n"
        "t = time.perf_counter(); exec(line); print((time.perf_counter() - t) * 1e3)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != startup.ENV_DISABLE}
    env[startup.ENV_DISABLE] = ""  # the copy site ran is off; the timed exec runs
    times = []
    for _ in range(5):
        out = subprocess.run(
            [sys.executable, "-c", code.replace("exec(line)", "exec(line, {})")],
            capture_output=True, text=True, env=env, cwd=tmp_path, check=True,
        ).stdout  # fmt: skip
        times.append(float(out))
    assert min(times) < 2.0, times


def test_a_package_in_the_current_directory_is_never_executed(tmp_path):
    # A folder holding its own attentionspan_datasets/ and lm_eval_tasks/ packages: the hook
    # must import the installed ones, by path.
    for name in ("attentionspan_datasets", "lm_eval_tasks"):
        (tmp_path / name).mkdir()
        marker = tmp_path / f"MARKER_{name}"
        (tmp_path / name / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    code = (
        "import datasets.load\n"
        "from attentionspan_datasets.registration import is_registered\n"
        "import attentionspan_datasets\n"
        "print(is_registered(), attentionspan_datasets.__file__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != startup.ENV_DISABLE}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert result.returncode == 0, result.stderr
    registered, path = result.stdout.split()
    assert registered == "True"
    assert Path(path).parent == Path(startup.__file__).parent
    assert not list(tmp_path.glob("MARKER_*"))


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
