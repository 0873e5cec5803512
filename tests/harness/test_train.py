"""harness.training.train on a tiny scratch Llama: files written, resume equals an uninterrupted
run,
data from `datasets`, gradient accumulation, bad input, and two DDP processes."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from harness.foundation.data import PromptConfig
from harness.foundation.models import ScratchConfig
from harness.training.train import TrainConfig, train
from tests.harness.launch import ACCELERATE_TWO_CPU_PROCESSES, TINY_SCRATCH_ARGS

REPO = Path(__file__).resolve().parents[2]
TINY = ScratchConfig(
    hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_positions=128
)


def tiny_config(output, **overrides) -> TrainConfig:
    values = dict(
        model="scratch",
        output=str(output),
        config="reversal_id",
        lr=1e-3,
        batch_size=4,
        max_steps=6,
        log_every=2,
        eval_size=8,
        eval_batch_size=8,
        scratch=TINY,
    )
    return TrainConfig(**{**values, **overrides})


def log_lines(output):
    return [json.loads(line) for line in (Path(output) / "log.jsonl").read_text().splitlines()]


def weights(folder):
    return load_file(str(Path(folder) / "model.safetensors"))


def test_a_run_writes_model_config_log_and_keeps_the_last_checkpoints(tmp_path):
    final = train(tiny_config(tmp_path, save_every=2, keep_checkpoints=2), progress=False)
    assert final == tmp_path / "final"
    names = sorted(p.name for p in tmp_path.iterdir() if p.name != ".lock")
    assert names == ["checkpoint-4", "checkpoint-6", "final", "log.jsonl", "train_config.json"]
    run = json.loads((final / "attentionspan_run.json").read_text())
    assert run["state"]["step"] == 6 and run["state"]["next_index"] == 24
    assert run["train"]["lr"] == 1e-3 and run["scratch"]["hidden_size"] == 32
    assert set(run["final_eval"]) == {"count", "exact_match", "partial_acc", "tf_token_acc"}
    assert (final / "model.safetensors").is_file() and (final / "tokenizer.json").is_file()
    assert not (final / "training_state.pt").exists()
    assert (tmp_path / "checkpoint-6" / "training_state.pt").is_file()
    steps = [r for r in log_lines(tmp_path) if "loss" in r]
    assert [r["step"] for r in steps] == [2, 4, 6]
    assert [r["next_index"] for r in steps] == [8, 16, 24]
    assert all(r["tokens_per_s"] > 0 and r["loss"] > 0 for r in steps)
    assert steps[-1]["lr"] == 0.0  # linear decay to zero


def test_resume_gives_the_uninterrupted_run(tmp_path):
    straight = train(tiny_config(tmp_path / "a", save_every=3), progress=False)
    interrupted = tiny_config(tmp_path / "b", save_every=3)
    # Killed after step 4: step 4 is logged, but the last checkpoint is at step 3.
    train(interrupted, stop_after=4, progress=False)
    assert not (tmp_path / "b" / "final").exists()
    assert [r["step"] for r in log_lines(tmp_path / "b")] == [2, 4]
    resumed = train(TrainConfig(output=str(tmp_path / "b")), resume=True, progress=False)
    a, b = weights(straight), weights(resumed)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-6), name
    # The log does not repeat step 4, its mean over steps 3-4 is the uninterrupted one (the
    # window of step 3 was saved), and the token count goes on from the checkpoint.
    logs = [[r for r in log_lines(tmp_path / d) if "loss" in r] for d in "ab"]
    for key in ("step", "next_index", "tokens", "loss", "lr"):
        assert [r[key] for r in logs[0]] == [r[key] for r in logs[1]], key
    states = [
        json.loads((d / "attentionspan_run.json").read_text())["state"] for d in (straight, resumed)
    ]
    assert states[0]["tokens"] == states[1]["tokens"] == logs[0][-1]["tokens"] > 0
    # the tokenizer and config files too: a resumed tokenizer is loaded from a folder, and
    # transformers recorded that ("is_local": true) in its tokenizer_config.json
    names = sorted(p.name for p in straight.iterdir() if p.suffix == ".json")
    assert names == sorted(p.name for p in resumed.iterdir() if p.suffix == ".json")
    for name in set(names) - {"attentionspan_run.json"}:  # that one holds times and ids
        assert (straight / name).read_bytes() == (resumed / name).read_bytes(), name


def test_the_data_are_the_train_split_and_validation_the_validation_split(tmp_path):
    from attentionspan_datasets.splits import split_instance
    from harness.training.setup import make_source
    from harness.training.train import VALIDATION_SPLIT

    source = make_source(tiny_config(tmp_path, seed=3))
    assert [source[i] for i in range(5)] == [
        split_instance("reversal_id", seed=3, split="train", index=i) for i in range(5)
    ]
    assert VALIDATION_SPLIT == "validation"


def test_a_loss_that_becomes_inf_or_nan_stops_the_run_keeping_the_last_checkpoint(tmp_path):
    # A finite but absurd learning rate blows the weights up within a few steps.
    config = tiny_config(tmp_path, lr=1e30, max_grad_norm=0.0, save_every=1, max_steps=40)
    with pytest.raises(
        ValueError, match=r"became (nan|inf|-inf) at step (\d+); the run stopped"
    ) as error:
        train(config, progress=False)
    failed = int(re.search(r"at step (\d+)", str(error.value)).group(1))
    assert failed >= 2 and "\n" not in str(error.value)
    kept = sorted(int(p.name.split("-")[1]) for p in tmp_path.glob("checkpoint-*"))
    assert kept[-1] == failed - 1  # nothing saved for the bad step
    assert f"the last good checkpoint is {tmp_path / f'checkpoint-{failed - 1}'}" in str(
        error.value
    )
    assert not (tmp_path / "final").exists()


def test_a_model_with_a_short_context_is_refused(tmp_path):
    short = ScratchConfig(**{**TINY.__dict__, "max_positions": 16})
    with pytest.raises(ValueError, match=r"context \(max_position_embeddings = 16.*23 tokens"):
        train(tiny_config(tmp_path, scratch=short), progress=False)


def test_resume_without_checkpoint_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no checkpoint to resume"):
        train(tiny_config(tmp_path), resume=True, progress=False)


def test_train_from_a_dataset_with_a_prompt(tmp_path):
    from datasets import Dataset

    from attentionspan_datasets import iter_instances
    from harness.commands.eval import run
    from harness.evaluation.evaluate import EvalConfig

    rows = [
        {**x.to_dict(), "params": json.dumps(x.params)}
        for x in iter_instances("reversal_id", stop=12, stream="elsewhere")
    ]
    (tmp_path / "data").mkdir()
    Dataset.from_list(rows).to_parquet(str(tmp_path / "data" / "train.parquet"))
    prompt = PromptConfig(instruction="Reverse.", num_fewshot=1)
    config = tiny_config(
        tmp_path / "run",
        dataset=str(tmp_path / "data"),
        max_steps=0,
        epochs=2,
        prompt=prompt,
        grad_accum=2,
        batch_size=3,
    )
    final = train(config, progress=False)
    state = json.loads((final / "attentionspan_run.json").read_text())["state"]
    assert state["step"] == 4  # 2 epochs of 12 rows, 6 rows per optimizer step
    assert state["next_index"] == 24
    # eval reuses the prompt the model was trained with
    run(EvalConfig(model=str(final), configs=["reversal_id"], num=4, output=str(tmp_path / "eval")))
    report = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert report["eval_config"]["prompt"]["instruction"] == "Reverse."
    assert report["eval_config"]["prompt"]["num_fewshot"] == 1


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("lr", 0.0, "'lr' must be > 0"),
        ("beta1", 1.0, r"'beta1' must be in \[0, 1\)"),
        ("batch_size", 0, "'batch_size' must be >= 1"),
        ("schedule", "step", "'schedule' must be one of linear, cosine, constant"),
        ("mixed_precision", "fp8", "'mixed_precision' must be one of auto, no, bf16"),
        ("loss_on", "prompt", "'loss_on' must be one of target, all"),
        ("curriculum", "100", "'curriculum' expects STEPS:KEY=VALUE"),
        ("curriculum", "0:max_length=2", r"STEPS >= 1"),
        ("curriculum", "5:max_length", "'curriculum' expects STEPS:KEY=VALUE"),
        ("curriculum", "5:max_lenght=2", "'curriculum' for reversal_id: .*max_lenght"),
    ],
)
def test_options_are_validated(tmp_path, field, value, match):
    with pytest.raises(ValueError, match=match):
        tiny_config(tmp_path, **{field: value})


def test_loss_on_all_labels_every_real_token_and_target_only_the_answer(tmp_path):
    from attentionspan_datasets.tasks.base import Instance
    from harness.foundation.models import build_scratch
    from harness.foundation.tokenization import IGNORE_INDEX, CharTokenizer
    from harness.training.train import training_batch

    _, tokenizer = build_scratch(TINY)
    char_tok = CharTokenizer(tokenizer)
    # A flip-flop program: the mid-program read "r01" shows the bit the final read asks for.
    long = Instance("flip_flop", "w01r01r0=", "1", [[2]], {})
    short = Instance("flip_flop", "w01r0=", "1", [[2]], {})
    # BOS, the prompt, the target "1", EOS: 12 and 9 tokens
    ids = [PromptConfig().encode(char_tok, x).input_ids for x in (long, short)]
    assert ids[0][-2:] == ids[1][-2:] == [*char_tok.encode_chars("1"), char_tok.eos_id]
    target = training_batch(tiny_config(tmp_path), char_tok, [long, short])
    every = training_batch(tiny_config(tmp_path, loss_on="all"), char_tok, [long, short])
    assert every["input_ids"].tolist() == target["input_ids"].tolist()
    pad = [IGNORE_INDEX] * 3
    assert every["labels"].tolist() == [ids[0], ids[1] + pad]
    assert target["labels"].tolist() == [
        [IGNORE_INDEX] * 10 + ids[0][10:],
        [IGNORE_INDEX] * 7 + ids[1][7:] + pad,
    ]


def test_a_curriculum_trains_its_stages_first_then_the_config(tmp_path):
    from harness.training.config import parse_curriculum
    from harness.training.setup import set_up
    from harness.training.train import batch_instances

    text = "2:min_length=1,max_length=1; 3:min_length=2,max_length=2"
    assert parse_curriculum(text) == [
        (2, {"min_length": 1, "max_length": 1}),
        (3, {"min_length": 2, "max_length": 2}),
    ]
    # a text field keeps its text even where it reads as a number
    digits = parse_curriculum("5:output_alphabet=0123456789", "value_assignment_id")
    assert digits == [(5, {"output_alphabet": "0123456789"})]
    # a bool field reads as --param reads it; a value the field cannot take is refused
    assert parse_curriculum("5:sorted_keys=true", "value_assignment_id") == [
        (5, {"sorted_keys": True})
    ]
    with pytest.raises(ValueError, match="'use_flip' must be true or false, got 'maybe'"):
        parse_curriculum("5:use_flip=maybe", "ffml_id")
    run = set_up(tiny_config(tmp_path, curriculum=text), False, False, None)
    try:
        lengths = []
        for step in range(7):
            run.state.step = step
            batch = batch_instances(run, range(4 * step, 4 * step + 4))
            lengths.append({x.params["length"] for x in batch})
    finally:
        run.lock.release()
    assert lengths[:5] == [{1}, {1}, {2}, {2}, {2}]
    assert all(max(n) > 2 for n in lengths[5:])  # reversal_id itself: 1-10 characters
    # and a run with one trains and finishes
    final = train(tiny_config(tmp_path / "run", curriculum="3:max_length=2"), progress=False)
    info = json.loads((final / "attentionspan_run.json").read_text())
    assert info["train"]["curriculum"] == "3:max_length=2" and info["state"]["step"] == 6


def test_a_curriculum_with_a_typed_field_trains(tmp_path):
    """Value assignment's recipe (`1500:sorted_keys=true`): each stage's context check must
    read the stage's values by their field's type, as the stages themselves do (it read
    'true' as text and refused the recipe)."""
    config = tiny_config(
        tmp_path / "run", config="value_assignment_id", curriculum="2:sorted_keys=true"
    )
    final = train(config, progress=False)
    info = json.loads((final / "attentionspan_run.json").read_text())
    assert info["train"]["curriculum"] == "2:sorted_keys=true" and info["state"]["step"] == 6


def test_a_character_the_tokenizer_lacks_is_named(tmp_path):
    scratch = ScratchConfig(**{**TINY.__dict__, "charset": "0123456789="})
    with pytest.raises(ValueError, match=r"no single token for the character '[A-Za-z]'"):
        train(tiny_config(tmp_path, scratch=scratch), progress=False)


def test_out_of_memory_suggests_a_smaller_batch(tmp_path, monkeypatch):
    import harness.training.train

    def no_memory(*args, **kwargs):
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: "
            "can't allocate memory: you tried to allocate 123456789 bytes"
        )

    monkeypatch.setattr(harness.training.train, "collate", no_memory)
    with pytest.raises(
        ValueError, match="out of memory at --batch-size 4; try --batch-size 2 --grad-accum 2"
    ):
        train(tiny_config(tmp_path), progress=False)


@pytest.mark.slow
def test_two_ddp_processes_train_and_evaluate(tmp_path):
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        *ACCELERATE_TWO_CPU_PROCESSES,
        "-m",
        "harness.commands.train",
        "--model",
        "scratch",
        "--output",
        str(tmp_path),
        "--lr",
        "1e-3",
        "--max-steps",
        "4",
        "--batch-size",
        "2",
        "--log-every",
        "2",
        "--eval-size",
        "6",
        "--save-every",
        "2",
        "--no-progress",
        *TINY_SCRATCH_ARGS,
    ]
    done = subprocess.run(
        command,
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((tmp_path / "final" / "attentionspan_run.json").read_text())
    # Two processes of batch 2: 4 instances per step, each process its own share.
    assert run["state"]["next_index"] == 16
    assert run["final_eval"]["count"] == 6  # the evaluation was gathered from both processes
    steps = [r for r in log_lines(tmp_path) if "loss" in r]
    assert [r["next_index"] for r in steps] == [8, 16]
    # A checkpoint written by two processes resumes in one.
    final = train(TrainConfig(output=str(tmp_path)), resume=True, progress=False)
    assert json.loads((final / "attentionspan_run.json").read_text())["state"]["step"] == 4


@pytest.mark.parametrize("kind", ["llama", "qwen2", "gemma3"])
def test_fine_tunes_a_local_folder(kind, tmp_path, tiny_model_dirs):
    before = weights(tiny_model_dirs[kind])
    final = train(
        tiny_config(tmp_path, model=str(tiny_model_dirs[kind]), max_steps=2), progress=False
    )
    after = weights(final)
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    run = json.loads((final / "attentionspan_run.json").read_text())
    assert run["train"]["model"] == str(tiny_model_dirs[kind])


# --- resume: the same log, finished runs, checkpoints whose parts disagree


def test_ctrl_c_in_the_last_step_is_an_interruption_not_a_finished_run(tmp_path, monkeypatch):
    """SIGINT during the last step set the stop flag after the loop had stopped reading it:
    the run wrote final/ and exited 0 (one of four Ctrl-C of supervision --jobs).
    Now it ends as any interruption: KeyboardInterrupt (130), a checkpoint, no final/."""
    import signal

    import harness.training.train

    real_step = harness.training.train.train_step

    def last_step_interrupted(run, stop_requested):
        result = real_step(run, stop_requested)
        if run.state.step == run.state.total_steps:
            signal.raise_signal(signal.SIGINT)  # the handler only sets the flag
        return result

    monkeypatch.setattr(harness.training.train, "train_step", last_step_interrupted)
    with pytest.raises(KeyboardInterrupt) as interrupted:
        train(tiny_config(tmp_path, save_every=4), progress=False)
    assert getattr(interrupted.value, "exit_status", 130) == 130
    assert not (tmp_path / "final").exists()
    assert (tmp_path / "checkpoint-6").is_dir()  # the trained steps are kept, resumable


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_run_interrupted_by_a_signal_resumes_to_the_same_log(tmp_path, monkeypatch, signal_name):
    """Ctrl-C or SIGTERM after step 3 (between log lines at 2 and 4): the resumed run logs
    the same steps, losses, learning rates, indices and tokens as the uninterrupted one (the
    window of step 3 is carried in the checkpoint)."""
    import signal

    import harness.training.train

    straight = train(tiny_config(tmp_path / "a"), progress=False)
    real_step = harness.training.train.train_step

    def step_then_interrupt(run, stop_requested):
        result = real_step(run, stop_requested)
        if run.state.step == 3:
            signal.raise_signal(getattr(signal, signal_name))  # the loop stops after this step
            return result[0], result[1], True
        return result

    monkeypatch.setattr(harness.training.train, "train_step", step_then_interrupt)
    with pytest.raises(KeyboardInterrupt) as interrupted:
        train(tiny_config(tmp_path / "b"), progress=False)
    # the command's status: 130 for Ctrl-C, 143 for SIGTERM (as an unhandled SIGTERM's)
    status = getattr(interrupted.value, "exit_status", 130)
    assert status == {"SIGINT": 130, "SIGTERM": 143}[signal_name]
    monkeypatch.setattr(harness.training.train, "train_step", real_step)
    assert [p.name for p in (tmp_path / "b").glob("checkpoint-*")] == ["checkpoint-3"]
    resumed = train(TrainConfig(output=str(tmp_path / "b")), resume=True, progress=False)
    keys = ("step", "loss", "lr", "next_index", "tokens")
    logs = [
        [{k: r[k] for k in keys} for r in log_lines(d) if "loss" in r]
        for d in (tmp_path / "a", tmp_path / "b")
    ]
    assert [r["step"] for r in logs[0]] == [2, 4, 6]
    assert logs[0] == logs[1]
    a, b = weights(straight), weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_of_a_finished_run_is_a_no_op_that_says_so(tmp_path, capsys):
    final = train(tiny_config(tmp_path, save_every=2, keep_checkpoints=1), progress=False)
    assert (tmp_path / "checkpoint-6").is_dir()  # the leftover checkpoint
    before = {p: p.stat().st_mtime_ns for p in final.iterdir()}
    log = (tmp_path / "log.jsonl").read_text()
    capsys.readouterr()
    assert train(TrainConfig(output=str(tmp_path)), resume=True, progress=False) == final
    assert "is finished" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in final.iterdir()} == before
    assert (tmp_path / "log.jsonl").read_text() == log


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Runs killed after step 2 (checkpoint-2): `a`, `b` of another shape and lr, `c` of
    the same shapes on other data."""
    root = tmp_path_factory.mktemp("runs")
    wide = ScratchConfig(**{**TINY.__dict__, "hidden_size": 64})
    runs = (("a", TINY, 1e-3, 1234), ("b", wide, 2e-3, 1234), ("c", TINY, 1e-3, 7))
    for name, scratch, lr, seed in runs:
        config = tiny_config(root / name, scratch=scratch, lr=lr, seed=seed, save_every=2)
        train(config, stop_after=2, progress=False)
    return root


def break_checkpoint(root, tmp_path, how):
    """A copy of run `a` whose checkpoint-2 is broken in one way; the file a refusal names."""
    import shutil

    run = Path(shutil.copytree(root / "a", tmp_path / "run"))
    checkpoint, other = run / "checkpoint-2", root / "b" / "checkpoint-2"
    state_file, run_file = checkpoint / "training_state.pt", checkpoint / "attentionspan_run.json"
    info = json.loads(run_file.read_text())
    if how == "state-of-another-shape":  # the case that corrupted the heap
        shutil.copy(other / "training_state.pt", state_file)
        return run, state_file
    if how == "old-state-of-another-shape":  # no fingerprint: the shapes alone tell
        state = torch.load(other / "training_state.pt", weights_only=True)
        del state["run"], state["weights_sha256"]
        torch.save(state, state_file)
        return run, state_file
    if how == "weights-of-another-run":  # same shapes, other values
        shutil.copy(root / "c" / "checkpoint-2" / "model.safetensors", checkpoint)
        return run, checkpoint
    if how == "weights-of-another-shape":
        shutil.copy(other / "model.safetensors", checkpoint)
        return run, checkpoint
    if how == "run-file-of-another-run":
        shutil.copy(root / "c" / "checkpoint-2" / "attentionspan_run.json", run_file)
        return run, run_file
    if how in ("edited-step", "edited-next-index", "negative-next-index"):
        key, value = {
            "edited-step": ("step", 3),
            "edited-next-index": ("next_index", 4),
            "negative-next-index": ("next_index", -8),
        }[how]
        info["state"][key] = value
        run_file.write_text(json.dumps(info))
        return run, run_file
    if how == "edited-scheduler":
        state = torch.load(state_file, weights_only=True)
        state["scheduler"]["last_epoch"] = 5
        torch.save(state, state_file)
        return run, state_file
    if how == "foreign-checkpoint":  # run b's checkpoint in run a's folder
        shutil.rmtree(checkpoint)
        shutil.copytree(other, checkpoint)
        return run, checkpoint
    if how == "final-as-checkpoint":
        info.pop("state")
        run_file.write_text(json.dumps(info))
        return run, run_file
    if how in ("truncated-state", "empty-state"):
        data = state_file.read_bytes()
        state_file.write_bytes(data[: len(data) // 2] if how == "truncated-state" else b"")
        return run, state_file
    if how in ("truncated-weights", "empty-weights"):
        path = checkpoint / "model.safetensors"
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if how == "truncated-weights" else b"")
        return run, checkpoint
    raise AssertionError(how)


BROKEN = [
    ("state-of-another-shape", "disagree on 'run_id'"),
    ("old-state-of-another-shape", "has shape"),
    ("weights-of-another-run", "are not the ones training_state.pt was saved with"),
    ("weights-of-another-shape", "are not the ones training_state.pt was saved with"),
    ("run-file-of-another-run", "disagree on 'run_id'"),
    ("edited-step", "state.step is 3 but the folder is checkpoint-2"),
    ("edited-next-index", "disagree on 'next_index' (4 against 8)"),
    ("negative-next-index", "'next_index' must be an integer >= 0, got -8"),
    ("edited-scheduler", "the scheduler stands at step 5, the run file at 2"),
    ("foreign-checkpoint", "is not a checkpoint of this run: its --lr is 0.002"),
    ("final-as-checkpoint", "not a training checkpoint"),
    ("truncated-state", "truncated or corrupt"),
    ("empty-state", "truncated or corrupt"),
    ("truncated-weights", "are not the ones training_state.pt was saved with"),
    ("empty-weights", "are not the ones training_state.pt was saved with"),
]


def test_a_smaller_model_s_optimizer_state_is_refused_before_it_corrupts_memory(two_runs, tmp_path):
    """The state of run a (hidden 32) in run b's checkpoint (hidden 64), without the
    fingerprint older checkpoints lack: torch loaded it, and the fused AdamW step then
    aborted the process ("corrupted double-linked list")."""
    import shutil

    run = Path(shutil.copytree(two_runs / "b", tmp_path / "run"))
    state_file = run / "checkpoint-2" / "training_state.pt"
    state = torch.load(two_runs / "a" / "checkpoint-2" / "training_state.pt", weights_only=True)
    del state["run"], state["weights_sha256"]
    torch.save(state, state_file)
    with pytest.raises(ValueError, match="has shape .*, the model's is .*: a state of another"):
        train(TrainConfig(output=str(run)), resume=True, progress=False)


@pytest.mark.parametrize("how,message", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_checkpoint_whose_parts_disagree_is_refused_naming_the_file(
    two_runs, tmp_path, monkeypatch, how, message
):
    import harness.training.setup

    run, named = break_checkpoint(two_runs, tmp_path, how)

    def never(*args, **kwargs):
        raise AssertionError("the optimizer state was loaded")

    if how != "old-state-of-another-shape":  # that one is found after the model is built
        monkeypatch.setattr(harness.training.setup, "load_model_checked", never)
    monkeypatch.setattr(torch.optim.AdamW, "load_state_dict", never)
    with pytest.raises(ValueError) as error:
        train(TrainConfig(output=str(run)), resume=True, progress=False)
    text = str(error.value)
    assert message in text and str(named) in text and "\n" not in text, text


def test_a_model_whose_vocabulary_is_smaller_than_its_tokenizer_is_refused(tmp_path):
    """A model folder holding another (larger) tokenizer: an IndexError in the first
    forward before; now one line naming the character and the allowed ids."""
    import string

    from transformers import AutoModelForCausalLM

    from harness.foundation.tokenization import make_char_tokenizer
    from tests.tiny_models import tiny_config as model_config

    tokenizer = make_char_tokenizer(string.printable)
    model = AutoModelForCausalLM.from_config(model_config("llama", tokenizer, vocab_size=20))
    model.save_pretrained(tmp_path / "small")
    tokenizer.save_pretrained(tmp_path / "small")
    config = tiny_config(tmp_path / "run", model=str(tmp_path / "small"))
    with pytest.raises(ValueError, match=r"vocabulary \(20 tokens.*allowed: ids 0 to 19"):
        train(config, progress=False)
    assert not (tmp_path / "run" / "final").exists()


@pytest.mark.parametrize(
    "rows,message",
    [
        ([{"question": "ab", "answer": "ba"}], "lacks the column(s) task, prompt, target, refer"),
        (
            [{"task": "reversal", "prompt": 12, "target": 21, "reference": [[0]]}],
            "column 'prompt' holds int64 values, expected string",
        ),
        (
            [{"task": "reversal", "prompt": "ab=", "target": None, "reference": [[1], [0]]}],
            "row 0: column 'target' must be a string, got NoneType None",
        ),
    ],
)
def test_a_foreign_dataset_is_refused_before_the_model_loads(tmp_path, monkeypatch, rows, message):
    from datasets import Dataset

    import harness.training.setup

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded before the dataset was checked")

    monkeypatch.setattr(harness.training.setup, "load_model_checked", never)
    (tmp_path / "data").mkdir()
    Dataset.from_list(rows).to_parquet(str(tmp_path / "data" / "train.parquet"))
    config = tiny_config(tmp_path / "run", dataset=str(tmp_path / "data"))
    with pytest.raises(ValueError) as caught:
        train(config, progress=False)
    assert f"--dataset '{tmp_path / 'data'}'" in str(caught.value)
    assert message in str(caught.value)


# --- attention supervision (--attention-supervision; harness.engine.supervision)


def reference_mass(model, tokenizer) -> torch.Tensor:
    """float [layers, heads]: each head's mean weight per target row on the reference, over
    16 validation instances (`attentionspan heads`' measure, capture's head mass)."""
    from attentionspan_datasets.splits import split_instance
    from harness.attention.heads import rank_heads

    instances = [split_instance("reversal_id", split="validation", index=i) for i in range(16)]
    return torch.tensor(rank_heads(model, tokenizer, instances).per_row)


@pytest.fixture(scope="module")
def supervision_runs(tmp_path_factory):
    """The same 30 steps from the same weights, with layer 1 supervised and without."""
    root = tmp_path_factory.mktemp("supervision")
    finals = {}
    for name, extra in (("plain", {}), ("supervised", {"attention_supervision": "layer:1"})):
        config = tiny_config(root / name, lr=1e-2, max_steps=30, log_every=10, **extra)
        finals[name] = train(config, progress=False)
    return finals


def test_supervision_moves_the_supervised_heads_mass_onto_the_mask(supervision_runs):
    from harness.foundation.models import load_model

    before = reference_mass(*load_model("scratch", scratch=TINY))  # the runs' first weights
    gain = {
        name: reference_mass(*load_model(str(final))) - before
        for name, final in supervision_runs.items()
    }
    # layer 1's two heads: about 0.09 -> 0.19 supervised; unsupervised within 0.01 of 0.09
    assert (gain["supervised"][1] > 0.05).all(), gain
    assert (gain["plain"][1].abs() < 0.03).all(), gain
    assert (gain["supervised"][1] > gain["plain"][1] + 0.05).all(), gain


def test_the_log_records_the_supervision_loss_of_each_logged_step(supervision_runs):
    supervised = log_lines(supervision_runs["supervised"].parent)
    assert supervised[0] == {"step": 0, "supervised_heads": [[1, 0], [1, 1]]}
    steps = [r for r in supervised if "loss" in r]
    assert [r["step"] for r in steps] == [10, 20, 30]
    assert all(r["supervision_weight"] == 1.0 for r in steps)
    losses = [r["supervision_loss"] for r in steps]
    assert all(isinstance(x, float) and x > 0 for x in losses) and losses[-1] < losses[0]
    plain = [r for r in log_lines(supervision_runs["plain"].parent) if "loss" in r]
    assert not any("supervision_loss" in r or "supervised_heads" in r for r in plain)
    # the options travel with the model: the run file eval, attention and reproduce read
    final = supervision_runs["supervised"]
    run = json.loads((final / "attentionspan_run.json").read_text())
    saved = json.loads((final.parent / "train_config.json").read_text())
    for options in (run["train"], saved):
        assert options["attention_supervision"] == "layer:1"
        assert options["supervision_loss"] == "ce" and options["supervision_weight"] == 1.0


def test_supervision_of_weight_0_is_exactly_the_unsupervised_run(tmp_path):
    plain = train(tiny_config(tmp_path / "a", max_steps=4), progress=False)
    zero = tiny_config(
        tmp_path / "b",
        max_steps=4,
        attention_supervision="layer:1",
        supervision_weight=0.0,
        supervision_mask="sufficient",
    )
    zero = train(zero, progress=False)
    keys = ("step", "loss", "lr", "next_index", "tokens")
    logs = [[r for r in log_lines(d) if "loss" in r] for d in (tmp_path / "a", tmp_path / "b")]
    assert [{k: r[k] for k in keys} for r in logs[0]] == [{k: r[k] for k in keys} for r in logs[1]]
    assert all(r["supervision_loss"] is None and r["supervision_weight"] == 0.0 for r in logs[1])
    a, b = weights(plain), weights(zero)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_supervised_run_resumes_to_the_same_log_and_refuses_other_supervision(tmp_path):
    supervised = dict(attention_supervision="0.1,1.0", supervision_schedule="linear", save_every=3)
    straight = train(tiny_config(tmp_path / "a", **supervised), progress=False)
    train(tiny_config(tmp_path / "b", **supervised), stop_after=4, progress=False)
    for changed, shown in (
        (
            {"attention_supervision": "layer:0"},
            "--attention-supervision 'layer:0' (saved: '0.1,1.0')",
        ),
        (
            {"attention_supervision": "0.1,1.0", "supervision_loss": "mass"},
            "--supervision-loss 'mass' (saved: 'ce')",
        ),
    ):
        with pytest.raises(ValueError, match="these options differ from it") as error:
            train(TrainConfig(output=str(tmp_path / "b"), **changed), resume=True, progress=False)
        assert shown in str(error.value)
    resumed = train(TrainConfig(output=str(tmp_path / "b")), resume=True, progress=False)
    keys = ("step", "loss", "lr", "tokens", "supervision_loss", "supervision_weight")
    logs = [
        [{k: r[k] for k in keys} for r in log_lines(d) if "loss" in r]
        for d in (tmp_path / "a", tmp_path / "b")
    ]
    assert [r["step"] for r in logs[0]] == [2, 4, 6]
    assert [r["supervision_weight"] for r in logs[0]] == [5 / 6, 3 / 6, 1 / 6]  # linear
    assert logs[0] == logs[1]
    a, b = weights(straight), weights(resumed)
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def save_ranking(path, order, layers=2, heads=4):
    from harness.attention.heads import HeadRanking

    zeros = [[0.0] * heads for _ in range(layers)]
    return HeadRanking(scores=zeros, per_row=zeros, order=order).save(path)


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_supervises_the_top_heads_of_a_ranking_on_a_local_folder(kind, tmp_path, tiny_model_dirs):
    """A pretrained folder takes the same path: a tiny Llama (grouped-query attention), and
    a Gemma3 whose sliding window of 16 keys leaves the first characters out of the last
    rows' reach (those cells are not supervised: no -log of a weight that must be 0)."""
    order = [(1, 2), (0, 3)] + [(la, h) for la in range(2) for h in range(4)][:6]
    ranking = save_ranking(tmp_path / "heads.json", order)
    config = tiny_config(
        tmp_path / "run",
        model=str(tiny_model_dirs[kind]),
        max_steps=2,
        attention_supervision="top:2",
        supervision_ranking=str(ranking),
        supervision_loss="mass",
        supervision_shift=1,
    )
    final = train(config, progress=False)
    lines = log_lines(tmp_path / "run")
    assert lines[0]["supervised_heads"] == [[0, 3], [1, 2]]
    steps = [r for r in lines if "loss" in r]
    assert steps and all(0 < r["supervision_loss"] < 10 for r in steps)  # -log(tiny) is 87
    run = json.loads((final / "attentionspan_run.json").read_text())
    assert run["train"]["supervision_ranking"] == str(ranking)


@pytest.mark.parametrize(
    "heads,ranking,match",
    [
        ("layer:2", None, r"'layer:2': layer 2 is out of range; the model has 2 layers \(0-1\)"),
        ("0.2", None, r"head 0.2 is out of range; the model has 2 heads per layer \(0-1\)"),
        ("top:2", "missing", r"'supervision_ranking' '.*heads.json' does not exist"),
        ("top:2", (3, 3), r"of \[layers, heads\] = \[3, 3\], this one has \[2, 2\]"),
        ("top:5", (2, 2), r"the ranking holds 4 heads \(2 layers x 2 heads\), fewer than 5"),
    ],
)
def test_supervised_heads_the_model_lacks_are_refused_before_training(
    tmp_path, heads, ranking, match
):
    extra = {"attention_supervision": heads}
    if ranking is not None:
        extra["supervision_ranking"] = str(tmp_path / "heads.json")
    if isinstance(ranking, tuple):
        layers, per_layer = ranking
        order = [(la, h) for la in range(layers) for h in range(per_layer)]
        save_ranking(tmp_path / "heads.json", order, layers, per_layer)
    with pytest.raises(ValueError, match=match) as error:
        train(tiny_config(tmp_path / "run", **extra), progress=False)
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "values,match",
    [
        ({"attention_supervision": "layer:x"}, "'attention_supervision' must be layer:L"),
        ({"supervision_weight": 2.0}, "'supervision_weight' is given without 'attention_sup"),
        ({"supervision_loss": "kl"}, "'supervision_loss' must be one of ce, mass, got 'kl'"),
        ({"supervision_mask": "full"}, "'supervision_mask' must be one of paper, sufficient, "),
        ({"supervision_schedule": "cosine"}, "'supervision_schedule' must be one of constant, "),
        ({"supervision_shift": 40}, r"'supervision_shift' must be <= 32 \(the cap\), got 40"),
        ({"supervision_shift": -40}, "'supervision_shift' must be >= -32, got -40"),
        ({"supervision_weight": -1.0}, "'supervision_weight' must be a number >= 0, got -1.0"),
        ({"supervision_weight": math.inf}, "'supervision_weight' must be a finite number"),
        ({"supervision_warmup": 0.0}, r"'supervision_warmup' must be in \(0, 1\], got 0.0"),
        ({"attention_supervision": "top:2"}, "needs 'supervision_ranking'"),
        ({"supervision_ranking": "h.json"}, "'supervision_ranking' is read only by .* top:N"),
        ({"dataset": "data", "supervision_mask": "minimal"}, "a --dataset's rows are supervised"),
    ],
)
def test_supervision_options_are_validated(tmp_path, values, match):
    values = {"attention_supervision": "layer:0", **values}
    if values.get("supervision_weight") == 2.0:
        values["attention_supervision"] = ""
    with pytest.raises(ValueError, match=match):
        tiny_config(tmp_path, **values)
