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
        assert task_folder(tmp_path, f"{task.short}-seed1", results).name == f"{task.short}-seed1"
        assert task_folder(tmp_path, task, {}).name == task.short
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
