"""docs/architecture.md cannot drift from the code, and the repository explains itself.

    python -m pytest -q tests/test_architecture_doc.py

Checked: every repository path the page names exists; every folder of the harness is
described there by its path, and every harness module by its path or (in its folder's line)
its file name; every name the page puts in a module (on the module's line, as "`Name` in
`path.py`", or dotted) is defined there; README.md links the page; no file of the repository
cites a design document kept outside it or the project's own issue numbers.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
ROOTS = ("harness", "lm_eval_tasks", "attentionspan_datasets", "tests", "docs", "benchmarks")
# a path of ours as the page writes it, in code spans or links
PATH = re.compile(r"(?<![\w/.])((?:" + "|".join(ROOTS) + r")/[\w./-]*[\w/])(?![\w*.-])")


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def test_every_path_the_page_names_exists():
    named = set(PATH.findall(_text()))
    assert len(named) > 50, "the page names the modules by their paths"
    missing = sorted(p for p in named if not (REPO / p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_harness_folder_and_module_is_described():
    text = _text()
    folders = sorted(
        p.parent.relative_to(REPO).as_posix() + "/" for p in (REPO / "harness").rglob("__init__.py")
    )
    undescribed = [f for f in folders if f"`{f}" not in text]
    assert not undescribed, f"docs/architecture.md does not describe {undescribed}"
    modules = [
        p.relative_to(REPO).as_posix()
        for p in sorted((REPO / "harness").rglob("*.py"))
        if p.name != "__init__.py"
    ]
    unnamed = [m for m in modules if f"`{m}`" not in text and f"`{Path(m).name}`" not in text]
    assert not unnamed, f"docs/architecture.md does not name {unnamed}"


def test_the_readme_links_the_page():
    assert "(docs/architecture.md)" in (REPO / "README.md").read_text(encoding="utf-8")


def _tracked_texts(suffixes: set[str]) -> list[tuple[str, str]]:
    """(name, text) of every file git tracks or would track whose suffix is in `suffixes`."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    paths = [(name, REPO / name) for name in files]
    return [
        (name, path.read_text(encoding="utf-8", errors="replace"))
        for name, path in paths
        if path.suffix in suffixes and path.is_file()
    ]


def test_nothing_cites_a_design_document_outside_the_repository():
    # spelt in two parts, so this file does not cite them either
    outside = ("DESIGN" + ".md", "/work/" + "shared", "FINDINGS" + ".md")
    suffixes = {".py", ".md", ".cfg", ".toml", ".yaml", ".yml", ".sh", ""}
    citing = [
        f"{name}: {word}"
        for name, text in _tracked_texts(suffixes)
        for word in outside
        if word in text
    ]
    assert not citing, citing


# "issue" or "issues" and a number: the project's own tracker, whose numbers say nothing to
# a reader of the file (the reason goes there instead). Another project's issue
# ("lm-eval issue #3104") or a link to it says where to read on, and stays.
ISSUE = re.compile(r"\b[Ii]ssues?[ _-]?#?\d+")
UPSTREAM = re.compile(r"(lm-eval|transformers|torch|accelerate|datasets|pytest)\s+[Ii]ssues?")


def _issue_citations(text: str) -> list[str]:
    return [
        line.strip()
        for line in text.splitlines()
        if ISSUE.search(line) and "github.com/" not in line and not UPSTREAM.search(line)
    ]


def test_no_text_cites_the_projects_own_issue_numbers():
    word = "iss" + "ue"  # spelt in two parts, so this file does not cite one either
    assert _issue_citations(f"Target ({word} 45): at most 35 CPU-minutes")
    assert _issue_citations(f"# --- I{word[1:]}s 10 and 11: the capture")
    assert _issue_citations(f"see {word} #3")
    assert not _issue_citations("no output type carries it (lm-eval issue #3104), and")
    assert not _issue_citations("see https://github.com/huggingface/transformers/issues/123")
    # JSON: recorded outputs (the digests), which a document re-renders byte for byte
    suffixes = {".py", ".md", ".cfg", ".toml", ".yaml", ".yml", ".sh", ".txt", ""}
    citing = [
        f"{name}: {line}"
        for name, text in _tracked_texts(suffixes)
        for line in _issue_citations(text)
    ]
    assert not citing, citing


# --- each room holds what the page says it holds ------------------------------------------------
IDENTIFIER = re.compile(r"`([A-Za-z_][A-Za-z_0-9]*)(?:\(\))?`")
BULLET = re.compile(r"^- `((?:harness|attentionspan_datasets|lm_eval_tasks)/[\w/]+\.py)`:")
# "`Name` in `path.py`", "`Name` (`path.py`" and "(`Name`, `path.py`)"
NAMED_IN = re.compile(r"`([A-Za-z_][A-Za-z_0-9]*)`(?: in| \(|,) ?`([\w/]+\.py)`")
DOTTED = re.compile(r"`((?:harness|attentionspan_datasets|lm_eval_tasks)(?:\.\w+)+)`")
# words in code spans that are not names in the module: transformers' keyword options
NOT_NAMES = {"true", "false", "device_map", "max_memory"}


def _commands() -> set[str]:
    """Command names (`eval`, `reproduce`): the page names a module's command in code spans."""
    from harness.cli import COMMAND_MODULES

    return {c for commands in COMMAND_MODULES.values() for c in commands}


def _defined(path: Path) -> set[str]:
    """Top-level names a module defines (functions, classes, assignments, imports)."""
    import ast

    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _claims() -> list[tuple[str, str]]:
    """(module path, name) for every name the page puts in a module: a bullet
    "- `path.py`: ... `Name` ..." (its continuation lines included), and "`Name` in `path.py`"
    anywhere."""
    claims: list[tuple[str, str]] = []
    module = None
    for line in _text().splitlines():
        bullet = BULLET.match(line)
        if bullet:
            module = bullet.group(1)
            line = line[bullet.end() :]
        elif not line.startswith("  ") or not line.strip():
            module = None
        if module is not None:
            spans = re.sub(r"`[^`]*[/.][^`]*`", "", line)  # paths and file names are not names
            claims += [(module, n) for n in IDENTIFIER.findall(spans) if n not in NOT_NAMES]
    claims += [(m, n) for n, m in NAMED_IN.findall(" ".join(_text().split()))]
    for dotted in DOTTED.findall(_text()):  # `harness.report.report_md.pipeline_writers`
        parts = dotted.split(".")
        module = "/".join(parts[:-1]) + ".py"
        if (REPO / module).is_file():
            claims.append((module, parts[-1]))
    return claims


def test_every_module_defines_the_names_the_page_gives_it():
    claims = [(m, n) for m, n in _claims() if n not in _commands()]
    assert len(claims) > 15, "the page names what its modules define"
    missing = sorted(
        f"{module}: {name}"
        for module, name in set(claims)
        if (REPO / module).is_file() and name not in _defined(REPO / module)
    )
    assert not missing, f"docs/architecture.md puts names in modules that lack them: {missing}"
