"""A verdict's rule version: a hash of the code that reads it.

    from harness.attention.verdicts.rule_version import rule_version, supervision_rule_version
    rule_version()              # 'r-3f9a1c2b7d40': the calibrated verdict's, in settings.json
                                #   and every reproduce digest
    supervision_rule_version()  # 's-...': the supervision study's, in its verdicts and digests

A digest is a measurement under one rule: the words, thresholds and choices of
`calibrated` and what it reads (where the lookup reads, where the errors look, the dose
ladder's choices). The version is a SHA-256 over those modules' syntax trees with comments
and docstrings left out, so a reworded comment or docstring keeps the version while any
change to code or thresholds moves it. `attentionspan results-doc --check` says when a run
and a digest were read under different versions: their verdicts are then two measurements,
not one that failed to reproduce.

The supervision study (`harness.attention.verdicts.supervision`) reads its word by another
rule, from pooled figures the study hands it; its version (`s-`) covers that module, the
words and thresholds it reads (`vocabulary`) and the interval tests it applies
(`harness.foundation.stats`). The weight's choice on validation is the study's measurement,
recorded in its results, not part of this rule.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
from pathlib import Path

# The modules whose code decides a calibrated verdict, from the lookup to the word.
RULE_MODULES = (
    "harness.attention.lookup",
    "harness.attention.heads",
    "harness.attention.dose",
    "harness.attention.diagnosis",
    "harness.attention.evidence",
    "harness.attention.controls.output_scale",
    "harness.attention.verdicts.calibrated",
    "harness.attention.verdicts.exists",
    "harness.attention.verdicts.vocabulary",
)
# The modules whose code turns the supervision study's pooled figures into its word.
SUPERVISION_RULE_MODULES = (
    "harness.attention.verdicts.supervision",
    "harness.attention.verdicts.vocabulary",
    "harness.foundation.stats",
)


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return tree


# Fields Python added to the syntax tree after 3.11 (generic type parameters, 3.12): empty in
# code 3.11 can parse, and left out of the text below so that the version is the same on
# every Python the project supports.
_NEWER_FIELDS = frozenset({"type_params"})
_MISSING = object()


def _tree_text(node: object) -> str:
    """The tree as Python 3.11's `ast.dump(node, annotate_fields=False)` writes it, on any
    Python: `ast.dump` itself changed its text in 3.12 (the new fields) and 3.13 (empty
    fields left out), which would give the same rule another version on another Python.
    Fields are positional until the first missing or empty optional one, then named."""
    if isinstance(node, ast.AST):
        cls, args, named = type(node), [], False
        for name in node._fields:
            value = getattr(node, name, _MISSING)
            if value is _MISSING:
                named = True
                continue
            if name in _NEWER_FIELDS and not value:
                continue
            if value is None and getattr(cls, name, ...) is None:  # an optional field, absent
                named = True
                continue
            text = _tree_text(value)
            args.append(f"{name}={text}" if named else text)
        return f"{cls.__name__}({', '.join(args)})"
    if isinstance(node, list):
        return "[" + ", ".join(_tree_text(x) for x in node) + "]"
    return repr(node)


def module_digest(source: str) -> str:
    """SHA-256 of one module's code: its syntax tree without docstrings (comments and
    formatting never reach the tree), written the same way on every Python version."""
    tree = _without_docstrings(ast.parse(source))
    return hashlib.sha256(_tree_text(tree).encode()).hexdigest()


def modules_version(modules: tuple[str, ...], prefix: str) -> str:
    """`prefix` and the first 12 hex digits of the SHA-256 over `modules`' code, in order."""
    total = hashlib.sha256()
    for name in modules:
        spec = importlib.util.find_spec(name)
        source = Path(spec.origin).read_text(encoding="utf-8")  # found without importing it
        total.update(f"{name}:{module_digest(source)}\n".encode())
    return prefix + total.hexdigest()[:12]


@functools.lru_cache(maxsize=1)
def rule_version() -> str:
    """The calibrated verdict's version: `r-` and 12 hex digits over RULE_MODULES' code."""
    return modules_version(RULE_MODULES, "r-")


@functools.lru_cache(maxsize=1)
def supervision_rule_version() -> str:
    """The supervision study's verdict's version: `s-` and 12 hex digits over
    SUPERVISION_RULE_MODULES' code."""
    return modules_version(SUPERVISION_RULE_MODULES, "s-")
