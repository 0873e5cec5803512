"""Every import points down a layer: no cycles among the project's modules, each harness
module in its layer of LAYERS importing only its own layer and those below, lm_eval_tasks
beside the harness (it may use the harness's data layer, the harness never imports it), and
nothing in attentionspan_datasets imports (or names for importlib) harness or lm_eval_tasks.

A static scan of the source (every `import` statement, also those inside functions), so a
cycle or an arrow up that only bites when a command runs is caught too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("attentionspan_datasets", "harness", "lm_eval_tasks")
UPPER = ("harness", "lm_eval_tasks")  # what the data layer must never reach
# The layers, top first (docs/architecture.md): one folder a layer, nothing else. A module
# belongs to the layer of its folder; it may import its own layer and the layers below.
LAYERS = (
    ("cli", ("harness.cli",)),
    # one module per console command: parsers and the glue that runs a command
    ("commands", ("harness.commands",)),
    # everything that writes Markdown, PNG, HTML or JSON for people
    ("report", ("harness.report",)),
    # the reproduce pipeline: stages, recipes, its config; hands its results to the writers
    ("pipeline", ("harness.pipeline",)),
    # returns data, writes no report
    (
        "measurement",
        ("harness.attention", "harness.evaluation", "harness.training", "harness.baselines"),
    ),
    # one model pass: batching, collation, generation, teacher forcing, capture, modes
    ("engine", ("harness.engine",)),
    # instances, tokens, run folders, model files, options, threads, statistics
    ("foundation", ("harness", "harness.foundation")),
    ("datasets", ("attentionspan_datasets",)),
)
# At harness/'s top level: the package and the console script, nothing else.
TOP_LEVEL = {"__init__.py", "cli.py"}
# lm_eval_tasks sits beside the harness: it may import these layers of it, and no harness
# module imports it. The measurement and engine layers only for `attnspan-hf`'s
# `attention=true` (lm_eval_tasks/attention.py): its metrics must be the harness's own
# measurement (`analysis.written_records` on the scoring engine), not a copy of it.
LM_EVAL_MAY_USE = ("foundation", "datasets", "engine", "measurement")


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
    """Every node, except those under `if TYPE_CHECKING:` (never imported at run time). An
    `if __name__ == "__main__":` block counts: `python -m` runs the module as a program, and
    an import there closes a circle as surely as one at the top."""
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
    assert "harness.engine.scoring" in edges["harness.evaluation.evaluate"]
    assert "attentionspan_datasets.commands.generate" not in edges["harness.cli"]  # a string
    assert (
        "harness.foundation.tokenization" in edges["harness.foundation.models"]
    )  # an import inside a function
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


def layer_of(module: str) -> str | None:
    """The layer of the longest prefix of `module` in LAYERS; None when none matches."""
    best, found = -1, None
    for layer, prefixes in LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), layer
    return found


RANK = {layer: rank for rank, (layer, _) in enumerate(LAYERS)}


def arrows_up(edges: dict[str, set[str]]) -> list[str]:
    """`a (layer) -> b (layer)` for every import of a module in a higher layer, a harness
    import of lm_eval_tasks, and an lm_eval_tasks import outside LM_EVAL_MAY_USE."""
    found = []
    for source, targets in sorted(edges.items()):
        for target in sorted(targets):
            if source.startswith("lm_eval_tasks") or target.startswith("lm_eval_tasks"):
                if source.startswith("lm_eval_tasks") == target.startswith("lm_eval_tasks"):
                    continue  # within lm_eval_tasks
                bad = source.startswith("harness") or layer_of(target) not in LM_EVAL_MAY_USE
            else:
                bad = RANK[layer_of(target)] < RANK[layer_of(source)]
            if bad:
                found.append(f"{source} ({layer_of(source)}) -> {target} ({layer_of(target)})")
    return found


def test_every_harness_module_has_a_layer():
    missing = [
        name for name in project_modules() if name.startswith("harness") and not layer_of(name)
    ]
    assert not missing, f"add these modules to LAYERS: {missing}"


def test_the_layer_check_sees_an_arrow_up():
    assert layer_of("harness.engine.capture") == "engine"
    assert layer_of("harness.pipeline.reproduce") == "pipeline"
    assert layer_of("harness.attention.heads") == "measurement"
    assert layer_of("harness.report.plots") == "report"
    edges = {
        "harness.attention.heads": {"harness.pipeline.stages", "harness.foundation.data"},
        "harness.commands.eval": {"harness.evaluation.evaluate"},
        "lm_eval_tasks.dataset": {
            "harness.foundation.runs",
            "harness.evaluation.evaluate",
            "harness.report.plots",
        },
        "harness.foundation.data": {"lm_eval_tasks.dataset"},
    }
    assert arrows_up(edges) == [
        "harness.attention.heads (measurement) -> harness.pipeline.stages (pipeline)",
        "harness.foundation.data (foundation) -> lm_eval_tasks.dataset (None)",
        "lm_eval_tasks.dataset (None) -> harness.report.plots (report)",
    ]
    main_only = ast.parse('if __name__ == "__main__":\n    import harness.cli\n')
    assert [n for n in runtime_nodes(main_only) if isinstance(n, ast.Import)]
    assert arrows_up({"harness.pipeline.reproduce": {"harness.report.report_md"}}) == [
        "harness.pipeline.reproduce (pipeline) -> harness.report.report_md (report)"
    ]


def test_every_import_points_down_a_layer():
    assert arrows_up(graph()) == []


def test_every_harness_module_sits_in_a_layer_folder():
    """A layer is a folder: harness/'s top level holds only the package and the console
    script, and LAYERS names folders (or those two modules), never a loose module."""
    loose = {p.name for p in (REPO / "harness").glob("*.py")}
    assert loose <= TOP_LEVEL, f"move into a layer folder: {sorted(loose - TOP_LEVEL)}"
    for _layer, prefixes in LAYERS:
        for prefix in prefixes:
            path = REPO / prefix.replace(".", "/")
            assert path.is_dir() or path.with_suffix(".py").name in TOP_LEVEL, prefix
