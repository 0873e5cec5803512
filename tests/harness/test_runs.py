"""harness.foundation.runs: the run file is checked (one line naming the file), checkpoints are
found
and pruned, training state is never unpickled, and a run folder is locked."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import pytest
import torch

from harness.foundation.runs import (
    LOCK_FILE,
    RUN_CONFIG_FILE,
    TRAINING_STATE_FILE,
    RunLock,
    accelerator_kind,
    checkpoints,
    invocation_cpu,
    latest_checkpoint,
    load_model_checked,
    load_training_state,
    prune_checkpoints,
    read_run_file,
)


def write_run(folder, info):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RUN_CONFIG_FILE).write_text(info if isinstance(info, str) else json.dumps(info))
    return folder


def test_no_run_file_is_none(tmp_path):
    assert read_run_file(tmp_path) is None


@pytest.mark.parametrize(
    "content,message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ({"prompt": {"instruction": None, "colour": 1}}, "unknown key(s) prompt.colour"),
        ({"scratch": {"hidden": 3}}, "unknown key(s) scratch.hidden"),
        ({"state": {"step": 1, "epoch": 2}}, "unknown key(s) state.epoch"),
        ({"train": {}, "extra": 1}, "unknown key(s) extra"),
        ({"prompt": "plain"}, "'prompt' must be an object"),
    ],
)
def test_a_bad_run_file_is_one_line_naming_the_file(tmp_path, content, message):
    write_run(tmp_path, content)
    with pytest.raises(ValueError) as error:
        read_run_file(tmp_path)
    text = str(error.value)
    assert message in text and str(tmp_path / RUN_CONFIG_FILE) in text
    assert "\n" not in text


def test_checkpoints_are_listed_and_pruned(tmp_path):
    for step in (2, 10, 4):
        write_run(tmp_path / f"checkpoint-{step}", {})
    (tmp_path / "checkpoint-6").mkdir()  # no run file: half written, never picked
    (tmp_path / "checkpoint-x").mkdir()
    assert [s for s, _ in checkpoints(tmp_path)] == [2, 4, 10]
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-10"
    prune_checkpoints(tmp_path, keep=2)
    assert [s for s, _ in checkpoints(tmp_path)] == [4, 10]
    assert latest_checkpoint(tmp_path / "nothing") is None


class Payload:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_a_pickled_training_state_is_refused_unrun(tmp_path):
    with open(tmp_path / TRAINING_STATE_FILE, "wb") as f:
        pickle.dump({"optimizer": Payload(), "scheduler": {}}, f)
    with pytest.raises(ValueError, match="refused to unpickle") as error:
        load_training_state(tmp_path)
    assert "\n" not in str(error.value)
    torch.save({"optimizer": {"state": {}}, "scheduler": {"last_epoch": 3}}, tmp_path / "ok.pt")
    os.replace(tmp_path / "ok.pt", tmp_path / TRAINING_STATE_FILE)
    assert load_training_state(tmp_path)["scheduler"] == {"last_epoch": 3}
    with pytest.raises(ValueError, match="is missing"):
        load_training_state(tmp_path / "none")


def test_pickled_model_weights_are_refused_in_one_line(tmp_path, tiny_model_dirs):
    import shutil

    from safetensors.torch import load_file

    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dirs["llama"], folder)
    weights = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    weights["payload"] = Payload()
    with open(folder / "pytorch_model.bin", "wb") as f:
        pickle.dump(weights, f)
    with pytest.raises(ValueError, match="refused to unpickle") as error:
        load_model_checked(str(folder))
    assert "\n" not in str(error.value)


def test_a_second_run_in_a_folder_is_refused(tmp_path):
    with RunLock(tmp_path):
        assert (tmp_path / LOCK_FILE).read_text().startswith(f"pid {os.getpid()} on ")
        with pytest.raises(ValueError, match=r"is in use by pid \d+ on .*use another --output"):
            RunLock(tmp_path).acquire()
    # Released: the next run takes the folder.
    with RunLock(tmp_path):
        pass


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    (tmp_path / LOCK_FILE).write_text(f"pid {dead.stdout.strip()} on somewhere\n")
    with RunLock(tmp_path):
        assert (tmp_path / LOCK_FILE).read_text().startswith(f"pid {os.getpid()} ")


def test_a_lock_held_by_another_live_process_is_refused(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from harness.foundation.runs import RunLock; "
            f"lock = RunLock({str(tmp_path)!r}).acquire(); "
            "print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match=f"in use by pid {holder.pid} "):
            RunLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    with RunLock(tmp_path):  # the holder died: its lock went with it
        pass


@pytest.mark.parametrize(
    "prompt,message",
    [
        ({"num_fewshot": 10**9}, "num_fewshot must be <= 1,000 (the cap)"),
        ({"num_fewshot": -1}, "num_fewshot must be >= 0"),
        ({"num_fewshot": "3"}, "num_fewshot must be an integer"),
        ({"chat": "yes"}, "chat must be true or false"),
        ({"instruction": 3}, "instruction must be a string or None"),
    ],
)
def test_a_run_file_s_prompt_is_capped_naming_the_file(tmp_path, prompt, message):
    from harness.foundation.data import PromptConfig
    from harness.foundation.runs import section

    write_run(tmp_path, {"prompt": prompt})
    info = read_run_file(tmp_path)
    with pytest.raises(ValueError) as error:
        section(info, "prompt", PromptConfig, tmp_path)
    assert message in str(error.value) and RUN_CONFIG_FILE in str(error.value)


@pytest.mark.parametrize(
    "state,message",
    [
        ({"step": -1}, "'step' must be an integer >= 0"),
        ({"step": 1.5}, "'step' must be an integer >= 0"),
        ({"step": 5, "total_steps": 4}, "'step' (5) is past 'total_steps' (4)"),
        ({"step": 2, "window_steps": 3}, "'window_steps' must be in [0, step]"),
        ({"window_loss": float("nan")}, "'window_loss' must be finite"),
        ({"run_id": 7}, "'run_id' must be a string"),
    ],
)
def test_a_bad_train_state_is_named(tmp_path, state, message):
    from harness.foundation.runs import TrainState, section

    write_run(tmp_path, {"state": state})
    with pytest.raises(ValueError) as error:
        section(read_run_file(tmp_path), "state", TrainState, tmp_path)
    assert message in str(error.value) and RUN_CONFIG_FILE in str(error.value)


def test_the_saved_prompt_layout_is_the_run_file_s_or_the_default(tmp_path):
    from harness.foundation.data import PromptConfig
    from harness.foundation.runs import saved_prompt

    assert saved_prompt(None, tmp_path) == PromptConfig()  # no run file
    plain = write_run(tmp_path / "plain", {"versions": {}})
    assert saved_prompt(read_run_file(plain), plain) == PromptConfig()  # no prompt section
    layout = {"instruction": "Add.", "num_fewshot": 2, "chat": True}
    run = write_run(tmp_path / "run", {"prompt": layout})
    assert saved_prompt(read_run_file(run), run) == PromptConfig(**layout)
    bad = write_run(tmp_path / "bad", {"prompt": {"num_fewshot": -1}})
    with pytest.raises(ValueError) as error:
        saved_prompt(read_run_file(bad), bad)
    assert "num_fewshot must be >= 0" in str(error.value)
    assert str(bad / RUN_CONFIG_FILE) in str(error.value)


def test_weights_sha256_is_the_weight_files_and_versions_name_the_stack(tmp_path):
    import hashlib

    from harness.foundation.runs import versions, weights_sha256

    assert weights_sha256(tmp_path) is None  # no weights: nothing to name
    (tmp_path / "model.safetensors").write_bytes(b"abc")
    (tmp_path / "config.json").write_text("{}")  # not a weight file: not hashed
    expected = hashlib.sha256(b"model.safetensors\0abc").hexdigest()
    assert weights_sha256(tmp_path) == expected
    (tmp_path / "config.json").write_text('{"changed": 1}')
    assert weights_sha256(tmp_path) == expected
    (tmp_path / "model.safetensors").write_bytes(b"abd")
    assert weights_sha256(tmp_path) != expected
    stack = versions()
    assert {"python", "torch", "transformers", "attentionspan"} <= set(stack)


def test_each_invocation_of_a_resumed_training_is_read_from_its_log(tmp_path):
    """A log line's cpu_s counts from its invocation's start: where it falls, a resumed
    invocation began. The log of the SmolLM2 reversal seed-2 fine-tune had this shape
    (interrupted at steps 34 and about 150)."""
    log = tmp_path / "log.jsonl"
    rows = [(20, 38.4), (40, 14.8), (60, 56.4), (140, 230.3), (160, 13.5), (400, 523.0)]
    lines = [json.dumps({"step": s, "loss": 0.1, "cpu_s": c}) for s, c in rows]
    log.write_text("\n".join([*lines[:2], "not json", '{"step": 50}', *lines[2:]]) + "\n")
    assert invocation_cpu(log) == [38.4, 230.3, 523.0]
    assert invocation_cpu(tmp_path / "none.jsonl") == []


def test_a_cpu_run_records_no_accelerator_and_a_gpu_run_its_name_and_cuda(monkeypatch):
    """A digest reproduces bit for bit only where floats round alike: a GPU run records the
    GPU (its kernels round), a CPU run nothing beside its CPU kind."""
    assert accelerator_kind(None) is None
    assert accelerator_kind(torch.device("cpu")) is None
    assert accelerator_kind("cpu") is None
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    assert accelerator_kind(torch.device("cuda", 0)) == {"name": "NVIDIA H200", "cuda": "13.0"}
