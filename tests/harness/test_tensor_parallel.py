"""Tensor parallelism on two CPU processes (torchrun, gloo): a model loaded with `--tp-plan
auto` gives each process half of every layer's heads, and the analysis gives what one
process gives on the whole model: capture records, the head ranking, every intervention
mode, the dose ladder's rows, the diagnosis and the verdict (a Llama, a grouped-query
Qwen2, Gemma 3), and the `heads`, `attention`, `eval` and `reproduce` commands' records.
The refusals come before any weight is read.

Not bit for bit: each process multiplies by its half of every projection (a smaller
matmul, whose kernel may sum in another order), and the row-parallel output projections
sum their two halves across the processes (an all-reduce) in another order than one matmul
does, so weights move by rounding: at most 6e-8 on any recorded weight of the three tiny
models, logits 4.5e-8. Records agree within 1e-6, absolute or relative (a head's score
sums many rows: `ATOL`, `RTOL`); what is discrete (generated
ids, the ranking's order, exact match, the chosen dose, the diagnosis's counts, the
verdict) is equal, and both processes hold the same records bit for bit.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.cli import main
from harness.foundation.dispatch import (
    Placement,
    TensorShard,
    check_tensor_parallel,
    tensor_parallel_of,
)
from tests.harness.conftest import ARCHITECTURES, save_tiny_model
from tests.harness.tensor_parallel_battery import battery, compare

REPO = Path(__file__).resolve().parents[2]


def torchrun(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc-per-node 2 ARGS` from the repository root (a free
    port each time: other test runs may be launching beside this one)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc-per-node", "2", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, env=env, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("tp_models")
    return {kind: str(save_tiny_model(kind, root / kind)) for kind in ARCHITECTURES}


@pytest.fixture(scope="module")
def sharded(folders, tmp_path_factory):
    """Each process's battery of every family, from one launch."""
    out = tmp_path_factory.mktemp("tp_battery")
    torchrun("-m", "tests.harness.tensor_parallel_battery", str(out), *folders.values())
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(2)]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ARCHITECTURES)
def test_two_processes_measure_what_one_does(kind, folders, sharded):
    from harness.foundation.models import load_model

    folder = folders[kind]
    # both processes hold the whole record (gathered), the same to the bit
    assert compare(sharded[0][folder], sharded[1][folder], atol=0.0) == []
    assert "readers (training's supervision) see one process's heads" in sharded[0][folder].pop(
        "readers"
    )
    model, tokenizer = load_model(folder)
    alone = battery(model, tokenizer)
    assert compare(alone, sharded[0][folder]) == []
    # what the comparison reads is there: every head's rows, every mode's records
    rows = sharded[0][folder]["forced/plain"]["head_rows"]
    assert rows.shape[-2:] == (2, 4) and not rows.nan_to_num(0).eq(0).all()
    assert len(sharded[0][folder]["modes"]) == 8
    assert sharded[0][folder]["verdict"]["verdict"]


def _close_json(a, b, skip=("seconds", "time_s", "cpu_s")) -> list[str]:
    """Where two JSON values differ (floats by more than 1e-6, absolute or relative;
    timings left out)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = (set(a) | set(b)) - set(skip)
        return [d for k in sorted(keys) for d in _close_json(a.get(k), b.get(k), skip)]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for x, y in zip(a, b) for d in _close_json(x, y, skip)]
    if isinstance(a, float) and isinstance(b, (int, float)):
        close = abs(a - b) <= 1e-6 * (1 + abs(b))
        return [] if (math.isnan(a) and math.isnan(b)) or close else [f"{a} {b}"]
    return [] if a == b else [f"{a!r} != {b!r}"]


QUIET = ["--no-progress", "--threads", "1"]


@pytest.mark.slow
def test_heads_under_torchrun_gives_the_single_process_ranking(folders, tmp_path):
    options = ["--model", folders["qwen2"], "--config", "reversal_id", "-n", "6", *QUIET]
    assert main(["heads", *options, "--output", str(tmp_path / "one.json")]) == 0
    done = torchrun(
        "-m", "harness.cli", "heads", *options, "--tp-plan", "auto",
        "--output", str(tmp_path / "two.json"),
    )  # fmt: skip
    one, two = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two"))
    assert two["order"] == one["order"]
    assert (one["source"]["processes"], two["source"]["processes"]) == (1, 2)  # recorded
    assert _close_json(one, two, ("seconds", "time_s", "processes")) == []
    assert done.stdout.count("target rows of 6") == 1  # printed by the main process only


@pytest.mark.slow
def test_attention_under_torchrun_gives_the_single_process_records(folders, tmp_path):
    options = ["--model", folders["gemma3"], "--configs", "reversal_id", "reversal_ood"]
    options += ["-n", "4", "--batch-size", "4", "--viewer-num", "2", *QUIET]
    assert main(["attention", *options, "--output", str(tmp_path / "one")]) == 0
    torchrun(
        "-m", "harness.cli", "attention", *options, "--tp-plan", "auto",
        "--output", str(tmp_path / "two"),
    )  # fmt: skip
    one, two = (json.loads((tmp_path / n / "attention.json").read_text()) for n in ("one", "two"))
    skip = ("seconds", "time_s", "command", "processes")
    assert _close_json(one, two, skip) == []
    assert (tmp_path / "two" / "attention.html").is_file()


@pytest.mark.slow
def test_eval_under_torchrun_gives_the_single_process_answers(folders, tmp_path):
    options = ["--model", folders["qwen2"], "--configs", "reversal_id", "reversal_ood"]
    options += ["-n", "6", "--batch-size", "4", *QUIET]
    assert main(["eval", *options, "--output", str(tmp_path / "one")]) == 0
    torchrun(
        "-m", "harness.cli", "eval", *options, "--tp-plan", "auto",
        "--output", str(tmp_path / "two"),
    )  # fmt: skip
    for name in ("predictions-reversal_id.jsonl", "predictions-reversal_ood.jsonl"):
        assert (tmp_path / "one" / name).read_text() == (tmp_path / "two" / name).read_text()
    one, two = (json.loads((tmp_path / n / "results.json").read_text()) for n in ("one", "two"))
    assert one["results"] == two["results"]
    assert (one["processes"], two["processes"]) == (1, 2)


@pytest.mark.slow
def test_reproduce_under_torchrun_gives_the_single_process_results(folders, tmp_path):
    options = ["--model", folders["llama"], "--config", "reversal", "--num-heads", "4"]
    options += ["--num-validation", "4", "--num-test", "4", "--num-attention", "3"]
    options += ["--batch-size", "4", "--counts", "1", "2", "--strengths", "1.0"]
    options += ["--control-seeds", "0", "--ood", "max_length=12", *QUIET]
    assert main(["reproduce", *options, "--output", str(tmp_path / "one")]) == 0
    torchrun(
        "-m", "harness.cli", "reproduce", *options, "--tp-plan", "auto",
        "--output", str(tmp_path / "two"),
    )  # fmt: skip
    one, two = (
        json.loads((tmp_path / n / "reversal" / "results.json").read_text()) for n in ("one", "two")
    )
    assert _close_json(one, two) == []
    for part in ("dose", "diagnosis", "verdict", "sweep"):
        assert one[part] and two[part]
    # report.md's command runs sharded as written: the launch and its process count
    made = (tmp_path / "two" / "report.md").read_text().split("```bash\n", 1)[1]
    assert made.startswith("attentionspan launch --multi_gpu --num_processes 2 reproduce ")
    assert json.loads((tmp_path / "two" / "settings.json").read_text())["processes"] == 2


# --- refusals, before any weight is read ---------------------------------------------------
def test_the_plan_must_be_auto_and_excludes_a_device_map():
    with pytest.raises(ValueError, match=r"--tp-plan must be one of \('auto',\), got 'rows'"):
        Placement(tp_plan="rows")
    with pytest.raises(ValueError, match="--tp-plan and --device-map exclude each other"):
        Placement(device_map="auto", tp_plan="auto")
    assert Placement(tp_plan="auto").tensor_parallel
    assert Placement().load_kwargs() == {}


def test_one_process_is_refused_not_silently_unsharded(folders, tmp_path, capsys, monkeypatch):
    """Without a launcher the model would load whole: a rerun of a sharded run's command
    read as it, unsharded, without a word."""
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ValueError, match="--tp-plan shards the model over several processes"):
        Placement(tp_plan="auto").load_kwargs()
    out = tmp_path / "h.json"
    options = ["--model", folders["llama"], "--config", "reversal_id", "-n", "2"]
    assert main(["heads", *options, "--tp-plan", "auto", "--output", str(out)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("attentionspan heads: error: --tp-plan shards the model over several")
    assert "attentionspan launch --num_processes N" in line and not out.exists()


@pytest.mark.parametrize("value", ["abc", "0", "-2", "2.5", "\u00b2"])
def test_a_world_size_that_is_no_count_is_one_line_naming_it(value, folders, capsys, monkeypatch):
    from harness.foundation.dispatch import launched_processes

    monkeypatch.setenv("WORLD_SIZE", value)
    with pytest.raises(ValueError, match="the environment variable WORLD_SIZE is"):
        launched_processes()
    options = ["--model", folders["llama"], "--configs", "reversal_id", "-n", "2"]
    assert main(["eval", *options]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        f"attentionspan eval: error: the environment variable WORLD_SIZE is {value!r}"
    )
    assert "invalid literal" not in line


def test_a_recorded_command_carries_the_launch_of_several_processes(monkeypatch):
    from harness.foundation.dispatch import launch_words
    from harness.pipeline.settings import ReproduceConfig
    from harness.report.report_md import command_for

    assert launch_words(1) == ["attentionspan"]
    assert launch_words(4) == ["attentionspan", "launch", "--multi_gpu", "--num_processes", "4"]
    cfg = ReproduceConfig(model="m", config="reversal", tp_plan="auto", output="out")
    assert command_for(cfg, processes=2).startswith(
        "attentionspan launch --multi_gpu --num_processes 2 reproduce "
    )
    assert "--tp-plan auto" in command_for(cfg, processes=2)
    monkeypatch.setenv("WORLD_SIZE", "2")  # inside a launched process: its own count
    assert command_for(cfg).startswith("attentionspan launch --multi_gpu --num_processes 2 ")


def _config(kind: str, **overrides):
    from harness.foundation.tokenization import make_char_tokenizer
    from tests.tiny_models import tiny_config

    return tiny_config(kind, make_char_tokenizer("ab"), **overrides)


def test_a_family_without_a_plan_and_heads_the_processes_do_not_divide_are_refused():
    with pytest.raises(ValueError, match="model_type 'gpt2' has no tensor-parallel plan"):
        check_tensor_parallel(_config("gpt2"), 2)
    with pytest.raises(ValueError, match="its 4 attention heads per layer cannot be split over 3"):
        check_tensor_parallel(_config("llama"), 3)
    # 4 query heads split over 4 processes, but 2 key/value heads cannot be
    with pytest.raises(ValueError, match="its 2 key/value heads per layer cannot be split over 4"):
        check_tensor_parallel(_config("qwen2"), 4)
    check_tensor_parallel(_config("qwen2"), 2)
    check_tensor_parallel(_config("gemma3"), 2)


def test_load_model_refuses_before_reading_the_weights(tmp_path, monkeypatch):
    from harness.foundation.models import load_model

    folder = save_tiny_model("llama", tmp_path / "llama")
    (folder / "model.safetensors").write_bytes(b"not read")  # reading it would fail otherwise
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(ValueError, match="4 attention heads per layer cannot be split over 3"):
        load_model(str(folder), placement=Placement(tp_plan="auto"))
    with pytest.raises(ValueError, match="--tp-plan needs a model folder or name, not scratch"):
        load_model("scratch", placement=Placement(tp_plan="auto"))


def test_commands_refuse_in_one_line(tmp_path, capsys):
    from harness.pipeline.settings import ReproduceConfig

    code = main(["heads", "--model", "scratch", "--config", "reversal_id", "--tp-plan", "auto",
                  "--device-map", "auto", "--output", str(tmp_path / "h.json")])  # fmt: skip
    assert code == 2
    assert "--tp-plan and --device-map exclude each other" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--tp-plan needs --model"):
        ReproduceConfig(quick=True, tp_plan="auto", output=str(tmp_path / "r"))
    with pytest.raises(ValueError, match="give --device cpu or --tp-plan, not both"):
        ReproduceConfig(model="m", tp_plan="auto", device="cpu", output=str(tmp_path / "r"))
    code = main(["heads", "--model", "scratch", "--config", "reversal_id", "--tp-plan", "auto",
                 "--device", "cpu", "--output", str(tmp_path / "h.json")])  # fmt: skip
    assert code == 2 and "give --device cpu or --tp-plan, not both" in capsys.readouterr().err


def test_one_process_holds_no_shard():
    from harness.foundation.models import ScratchConfig, build_scratch

    model, _ = build_scratch(ScratchConfig(hidden_size=32, num_layers=1, num_heads=2))
    assert tensor_parallel_of(model) is None
    assert TensorShard(1, 2).heads(8) == (4, 4)
    assert TensorShard(0, 4).heads(8) == (0, 2)
