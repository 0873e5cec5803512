"""Every import points down a layer: no cycles among the project's modules, and nothing in
attentionspan_datasets imports (or names for importlib) harness or lm_eval_tasks.

A static scan of the source (every `import` statement, also those inside functions), so a
cycle that only bites when a command runs is caught too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("attentionspan_datasets", "harness", "lm_eval_tasks")
UPPER = ("harness", "lm_eval_tasks")  # what the data layer must never reach


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def runtime_nodes(tree: ast.AST):
    """Every node, except those under `if TYPE_CHECKING:` (never imported at run time)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            test = child.test if isinstance(child, ast.If) else None
            name = getattr(test, "id", None) or getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                todo.extend(child.orelse)
                continue
            todo.append(child)


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports (resolving relative imports and `from a import
    b` where b is a module)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in runtime_nodes(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            # `import a.b.c` reaches a.b.c; `from a.b import c` reaches a.b.c if it is a
            # module, else a.b.
            while target and target not in modules:
                target = target.rpartition(".")[0]
            # A package is imported before its modules anyway: an edge from a module to
            # its own ancestor package (`from attentionspan_datasets import __version__`
            # in attentionspan_datasets.builder) cannot make a cycle at run time.
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a list of modules, or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_scan_sees_imports():
    edges = graph()
    assert "harness.scoring" in edges["harness.evaluate"]
    assert "attentionspan_datasets.commands.generate" not in edges["harness.cli"]  # a string
    assert "harness.tokenization" in edges["harness.models"]  # an import inside a function
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_data_layer_never_imports_the_layers_above():
    bad = {
        name: sorted(t for t in targets if t.split(".")[0] in UPPER)
        for name, targets in graph().items()
        if name.split(".")[0] == "attentionspan_datasets"
    }
    assert not {k: v for k, v in bad.items() if v}


def test_the_data_layer_names_no_upper_module_for_importlib():
    """`importlib.import_module("harness.cli")` is an import too."""
    pattern = re.compile(r"^(" + "|".join(UPPER) + r")(\.\w+)*$")
    found = []
    for name, path in project_modules().items():
        if not name.startswith("attentionspan_datasets"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if pattern.match(node.value):
                    found.append(f"{name}: {node.value!r}")
    assert not found
