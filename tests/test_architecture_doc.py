"""docs/architecture.md cannot drift from the code, and the repository explains itself.

    python -m pytest -q tests/test_architecture_doc.py

Checked: every repository path the page names exists; every folder of the harness is
described there by its path, and every harness module by its path or (in its folder's line)
its file name; README.md links the page; no file of the repository cites a design document
kept outside it.
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


def test_nothing_cites_a_design_document_outside_the_repository():
    # spelt in two parts, so this file does not cite them either
    outside = ("DESIGN" + ".md", "/work/" + "shared", "FINDINGS" + ".md")
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    citing = []
    for name in files:
        path = REPO / name
        if path.suffix not in {".py", ".md", ".cfg", ".toml", ".yaml", ".yml", ".sh", ""}:
            continue
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        citing += [f"{name}: {word}" for word in outside if word in text]
    assert not citing, citing
