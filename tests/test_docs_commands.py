"""What the README and the docs name exists: commands and their options, modules, links.

    python -m pytest -q tests/test_docs_commands.py

A new user copies these lines; a renamed option or a moved module must fail here, not in
their shell. Checked: every `attentionspan COMMAND --option` line (code blocks and inline
code) against the real parser, every `python -m MODULE` / `-m MODULE` and
`python benchmarks/*.py`, every relative Markdown link (and its #anchor), every dotted name
of ours (`harness.x.y`), and that no doc cites a file outside the repository (the team's
notebook, FINDINGS).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    REPO / "lm_eval_tasks" / "README.md",
]
OURS = ("harness", "attentionspan_datasets", "lm_eval_tasks")


def _ids(paths):
    return [str(p.relative_to(REPO)) for p in paths]


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order."""
    blocks, language, body = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if language is None:
                language, body = line[3:].strip(), []
            else:
                blocks.append((language, "\n".join(body)))
                language = None
        elif language is not None:
            body.append(line)
    return blocks


def command_lines(text: str) -> list[str]:
    """Shell lines of fenced blocks (continuations joined) and inline code spans."""
    lines = []
    prose = []
    for language, body in fenced_blocks(text):
        if language in ("bash", "sh", "console", ""):
            joined = re.sub(r"\\\n\s*", " ", body)
            lines += [line.strip().removeprefix("$ ") for line in joined.splitlines()]
    for index, part in enumerate(text.split("```")):
        if index % 2 == 0:
            prose.append(part)
    lines += re.findall(r"`([^`\n]+)`", "\n".join(prose))
    return [line for line in lines if line]


def _tokens(line: str) -> list[str]:
    line = line.split(" #", 1)[0]
    try:
        return shlex.split(line)
    except ValueError:  # an inline span cut mid-quote
        return line.split()


def attentionspan_calls(text: str) -> list[list[str]]:
    calls = []
    for line in command_lines(text):
        for part in re.split(r"&&|\|", line):
            tokens = _tokens(part.strip())
            if tokens[:1] == ["attentionspan"] and len(tokens) > 1:
                calls.append(tokens[1:])
    return calls


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@pytest.fixture(scope="module")
def commands() -> dict[str, argparse.ArgumentParser]:
    from harness.cli import build_parser

    return _subparsers(build_parser())


def _launched(words, commands):
    """(COMMAND, its words, a problem or None) of `attentionspan launch WORDS`: the launcher's
    options are accelerate launch's own."""
    from harness.commands.launch import COMMANDS, launcher_parser

    at = next((i for i, word in enumerate(words) if word in COMMANDS), None)
    if at is None:
        return "", [], f"no command of {COMMANDS}"
    known = {s for action in launcher_parser()._actions for s in action.option_strings}
    unknown = [w for w in words[:at] if w.startswith("--") and w.split("=", 1)[0] not in known]
    if unknown:
        return "", [], f"no launcher option {unknown[0]}"
    return words[at], words[at + 1 :], None


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_attentionspan_commands_and_options_exist(doc, commands):
    problems = []
    for call in attentionspan_calls(doc.read_text()):
        name, rest = call[0], call[1:]
        if name.startswith("-"):
            continue  # `attentionspan --help`
        if name not in commands:
            problems.append(f"attentionspan {name}: no such command")
            continue
        parser = commands[name]
        if name == "launch":  # accelerate's options, then COMMAND and its own options
            name, rest, problem = _launched(rest, commands)
            if problem:
                problems.append(f"attentionspan launch {' '.join(call[1:])}: {problem}")
                continue
            parser = commands[name]
        nested = _subparsers(parser)
        if nested and rest and not rest[0].startswith("-"):
            if rest[0] not in nested:
                problems.append(f"attentionspan {name} {rest[0]}: no such action")
                continue
            parser, rest = nested[rest[0]], rest[1:]
        known = {s for action in parser._actions for s in action.option_strings}
        for token in rest:
            option = token.split("=", 1)[0]
            if option.startswith("--") and option != "--" and option not in known:
                problems.append(f"attentionspan {' '.join(call)}: no option {option}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_modules_and_scripts_exist(doc):
    problems = []
    for line in command_lines(doc.read_text()):
        for module in re.findall(r"(?:^|\s)-m\s+([A-Za-z_][\w.]*)", line):
            if module.split(".")[0] in OURS and importlib.util.find_spec(module) is None:
                problems.append(f"python -m {module}: no such module")
        for script in re.findall(r"python3? (benchmarks/[\w/]+\.py)", line):
            if not (REPO / script).is_file():
                problems.append(f"python {script}: no such file")
    assert not problems, "\n".join(problems)


def _anchors(path: Path) -> set[str]:
    """GitHub's heading slugs: lower case, punctuation dropped, spaces to '-'."""
    slugs = set()
    for heading in re.findall(r"^#+ (.+)$", path.read_text(), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        slugs.add(slug)
    return slugs


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_relative_links_resolve(doc):
    problems = []
    for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto
        path, _, anchor = target.partition("#")
        resolved = (doc.parent / path).resolve() if path else doc
        if not resolved.exists():
            problems.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            problems.append(f"{target}: no heading #{anchor}")
    assert not problems, "\n".join(problems)


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(obj, attribute):
                return False
            obj = getattr(obj, attribute)
        return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_dotted_names_of_ours_exist(doc):
    pattern = r"`((?:" + "|".join(OURS) + r")(?:\.[A-Za-z_]\w*)+)`"
    missing = [name for name in re.findall(pattern, doc.read_text()) if not _resolves(name)]
    assert not missing, missing


ALL_DOCS = sorted({*DOCS, *(REPO / "docs").rglob("*.md")})


@pytest.mark.parametrize("doc", ALL_DOCS, ids=_ids(ALL_DOCS))
def test_docs_stand_alone(doc):
    """The team's notebook (FINDINGS) is not part of the repository."""
    lines = [line for line in doc.read_text().splitlines() if "FINDINGS" in line]
    assert not lines, lines
