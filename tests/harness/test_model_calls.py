"""One model pass: no module outside harness/engine/ calls a causal LM itself.

    python -m pytest -q tests/harness/test_model_calls.py

A static scan of every module of the harness and of lm_eval_tasks (functions included) for
the forms a model call takes in this code base: `model(...)`, and `.generate(...)` or
`.forward(...)` on `model` or on `<anything>.model`. Generation, teacher forcing, prefills
and their cache copies, capture probes and the training forward are engine functions
(harness/engine/inference.py, harness/engine/capture.py); a module that needs a pass calls
one of them. The exceptions below are named with their reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENGINE = REPO / "harness" / "engine"
ALLOWED = {
    # The causality probe of every loaded model: the foundation lies below the engine (it
    # cannot import it), and a model that attends forward is refused as it is loaded.
    "harness/foundation/models.py": "check_causal",
    # The discrete-retrieval paper's own small networks (not causal LMs), trained and scored
    # by their own loop: the engine's passes are for language models.
    "harness/baselines/train.py": "*",
}


def _is_model(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "model") or (
        isinstance(node, ast.Attribute) and node.attr == "model"
    )


def model_calls(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, enclosing function, call) of every model call in `tree`."""
    found = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Call):
            func = node.func
            direct = isinstance(func, ast.Name) and func.id == "model"
            method = (
                isinstance(func, ast.Attribute)
                and func.attr in ("generate", "forward")
                and _is_model(func.value)
            )
            if direct or method:
                found.append((node.lineno, function, ast.unparse(func)))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "")
    return found


def test_the_scan_finds_each_form_of_a_model_call():
    source = (
        "def f(model, scorer):\n"
        "    model(input_ids=ids)\n"
        "    scorer.model.generate(ids)\n"
        "    model.forward(ids)\n"
        "    scorer.generate(rows)\n"  # the engine's Scorer: allowed
        "    build_model(config)\n"
    )
    calls = model_calls(ast.parse(source))
    assert [(line, call) for line, _, call in calls] == [
        (2, "model"),
        (3, "scorer.model.generate"),
        (4, "model.forward"),
    ]


def test_no_module_outside_the_engine_calls_a_model():
    offenders = []
    for package in ("harness", "lm_eval_tasks"):
        for path in sorted((REPO / package).rglob("*.py")):
            if ENGINE in path.parents:
                continue
            name = path.relative_to(REPO).as_posix()
            for line, function, call in model_calls(ast.parse(path.read_text())):
                if ALLOWED.get(name) in ("*", function):
                    continue
                offenders.append(f"{name}:{line} ({function}): {call}(...)")
    assert not offenders, "model calls outside harness/engine/:\n" + "\n".join(offenders)
