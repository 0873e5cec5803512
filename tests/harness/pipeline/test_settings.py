"""The task as one value (harness/pipeline/settings.py's TaskValue): resolved once from its
name where the reproduce config is made, then read, never looked up again."""

from __future__ import annotations

import pickle

from attentionspan_datasets import presets
from harness.pipeline import settings
from harness.pipeline.settings import ReproduceConfig, TaskValue


def test_the_config_resolves_each_task_once_and_the_stages_read_the_value(tmp_path, monkeypatch):
    from harness.pipeline.prepare import task_model_folder, task_train_config
    from harness.report.report_md import task_folder

    looked_up = []
    pair = presets.pair
    monkeypatch.setattr(presets, "pair", lambda name: looked_up.append(name) or pair(name))
    cfg = ReproduceConfig(quick=True, tasks=["reversal", "addition_id"], seeds=2)
    assert looked_up == ["reversal", "addition_id"]  # the one resolution, of each name given
    assert cfg.task_values == ["reversal", "addition_id"]  # still the names as given
    looked_up.clear()
    for task in cfg.task_values:
        train = task_train_config(cfg, task, tmp_path, 1)
        assert train.config == task.id.name and train.max_steps == task.recipe(False)["max_steps"]
        assert task_model_folder(tmp_path, task, 1).name == f"{task.short}-seed1"
        assert cfg.ood_for(task) == dict(task.recipes["quick_ood"])
        results = {"seed_run": {"task": task, "run": 1}}
        values = {str(task): task}
        seeded = task_folder(tmp_path, values, f"{task.short}-seed1", results)
        assert seeded.name == f"{task.short}-seed1"
        assert task_folder(tmp_path, values, task, {}).name == task.short
    assert looked_up == []  # not one name turned into a preset again


def test_a_value_holds_what_its_task_file_declared():
    addition = TaskValue.of("addition_ood")
    assert TaskValue.of(addition) is addition  # a value passes as it is
    assert addition == "addition_ood" and isinstance(addition, str)  # the name as given
    assert (addition.task_name, addition.short) == ("long_addition", "addition")
    assert addition.presets == ("addition_id", "addition_ood") and addition.ood.role == "ood"
    quick = addition.recipe(pretrained=False)
    assert quick["max_steps"] == 3000 and quick["eval_size"] == settings.QUICK_TRAIN["eval_size"]
    assert quick["scratch"]["hidden_size"] == 256  # its own scratch model
    assert addition.recipe(pretrained=True)["max_steps"] == 800
    assert TaskValue.of("multiplication").recipe(pretrained=True) == settings.PRETRAINED_TRAIN
    assert TaskValue.of("reversal").run_name(0) == "reversal"
    assert TaskValue.of("reversal").run_name(3) == "reversal-seed3"
    copied = pickle.loads(pickle.dumps(addition))  # sent to a worker process
    assert type(copied) is TaskValue and copied == addition and copied.id is addition.id


# Every call in harness/ that turns a task's or preset's name into its presets, with the
# reason it may. The pipeline passes TaskValues; a new lookup by name belongs in a value.
# (`resolve_config` is the dataset's constructor: a preset's TaskConfig with overrides, which
# the commands that take a --config build; it is not a reading of the run's task.)
ALLOWED_LOOKUPS = {
    # the one resolution: a name to its pair of presets, its task file and recipes
    ("harness/pipeline/settings.py", "TaskValue.of", "presets.pair"),
    # where the run's names become values, once, when the reproduce config is made
    ("harness/pipeline/settings.py", "ReproduceConfig.__post_init__", "TaskValue.of"),
    # the viewer reads instances from a file, of any config (a caller's own too): only the
    # role of each config it holds, to open on an OOD instance
    ("harness/report/viewer.py", "_role", "presets.get"),
}
LOOKUPS = {"TaskValue.of", "presets.pair", "presets.get"}


def _lookups(path) -> set[tuple[str, str, str]]:
    """(file, the function holding the call, the call) for each lookup by name in `path`."""
    import ast

    found = set()

    def visit(node, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, [*scope, child.name])
                continue
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                owner = child.func.value
                name = f"{owner.id}.{child.func.attr}" if isinstance(owner, ast.Name) else ""
                if name in LOOKUPS:
                    found.add((path.as_posix(), ".".join(scope), name))
            visit(child, scope)

    visit(ast.parse(path.read_text()), [])
    return found


def test_names_are_looked_up_only_where_listed():
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    found = set()
    for path in sorted((root / "harness").rglob("*.py")):
        found |= {(p[len(str(root)) + 1 :], *rest) for p, *rest in _lookups(path)}
    assert found == ALLOWED_LOOKUPS  # a new one: pass the value (`cfg.task_values`) instead
    assert len(found) <= 3
