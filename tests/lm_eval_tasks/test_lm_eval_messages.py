"""What the `lm_eval` command prints for the attnspan tasks: a bad option is one line and
exit status 2 (a bad `attnspan` value before the model is loaded), and a run whose task
fields move lengths outside the preset's bins shows one line of ours per task instead of
lm-eval's per-metric warnings and its "Custom kwargs" hint.

Each run spends seconds indexing lm-eval's own task folders, so they are few. The code is
this checkout's (PYTHONPATH), found by the start-up hook as an installed copy would be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def run_lm_eval(model, tasks, metadata, cwd, model_type="hf", extra=()):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = str(ROOT)
    env.pop("ATTENTIONSPAN_NO_AUTOREGISTER", None)
    env.pop("ATTENTIONSPAN_TRACEBACK", None)
    command = [sys.executable, "-m", "lm_eval", "--model", model_type, "--device", "cpu"]
    command += ["--model_args", f"pretrained={model},dtype=float32", "--tasks", tasks]
    command += ["--limit", "4", "--gen_kwargs", "max_gen_toks=4"]
    command += ["--metadata", json.dumps(metadata), *extra]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)


def lines_of(stderr):
    """stderr without progress bars, INFO lines, lm-eval's own --limit and gen_kwargs
    notices, and git's complaint that the folder is no repository."""
    noise = (" INFO ", "--limit SHOULD ONLY", "generation_kwargs:", "fatal: not a git repo")
    return [
        line
        for line in stderr.splitlines()
        if line.strip() and "it/s]" not in line and not any(n in line for n in noise)
    ]


def test_a_top_level_option_is_one_line(tiny_model_dir, tmp_path):
    result = run_lm_eval(tiny_model_dir, "attnspan_reversal_id", {"instruction": "x"}, tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert lines_of(result.stderr) == [
        "lm_eval: error: attnspan_reversal_id: --metadata key(s) 'instruction' must be "
        """inside 'attnspan': --metadata '{"attnspan": {"instruction": "x"}}'"""
    ]


def test_a_huge_size_is_refused_before_the_model_loads(tiny_model_dir, tmp_path):
    metadata = {"attnspan": {"size": 10**9}}
    result = run_lm_eval(tiny_model_dir, "attnspan_reversal_id", metadata, tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Loading weights" not in result.stderr and "Traceback" not in result.stderr
    assert lines_of(result.stderr) == [
        "lm_eval: error: attnspan: --metadata 'size' is 1,000,000,000, above the cap of "
        "100,000 test instances"
    ]


def test_lengths_outside_the_bins_are_one_line_per_task(tiny_model_dir, tmp_path):
    metadata = {"attnspan": {"size": 30, "max_length": 60}}
    tasks = "attnspan_reversal_ood,attnspan_reversal_id"
    result = run_lm_eval(tiny_model_dir, tasks, metadata, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    shown = lines_of(result.stderr)
    assert all("lie outside the preset's length bins" in line for line in shown), shown
    assert sorted(line.split(":")[0] for line in shown) == sorted(tasks.split(","))
    assert "Custom kwargs" not in result.stderr and "No aggregation" not in result.stderr
    assert "exact_match_len_" in result.stdout


# Refused in one line before the model loads (lm-eval's command builds its
# TaskManager, where our hook checks the named tasks, before simple_evaluate loads it).
BEFORE_THE_MODEL = [
    (
        "num-fewshot-past-the-pool",
        {"attnspan": {"fewshot_size": 1}},
        ["--num_fewshot", "3"],
        "lm_eval: error: attnspan_reversal_id: --num_fewshot 3 is more than the 1 few-shot "
        "rows the examples are drawn from (--metadata 'attnspan' 'fewshot_size'); allowed: "
        "--num_fewshot <= 1, or widen the pool with --metadata "
        """'{"attnspan": {"fewshot_size": 3}}'""",
    ),
    (
        "attnspan-a-list",
        {"attnspan": []},
        [],
        "lm_eval: error: attnspan: --metadata 'attnspan' must be a JSON object of options and "
        """task fields (e.g. --metadata '{"attnspan": {"size": 500}}'), got []""",
    ),
    (
        "a-task-field-out-of-range",
        {"attnspan": {"max_length": 0}},
        [],
        "lm_eval: error: attnspan_reversal_id: --metadata 'attnspan': string_reversal: invalid "
        "value 0 for field 'max_length': allowed: 1 <= max_length <= 100000",
    ),
]


@pytest.mark.parametrize(
    "metadata,extra,line", [r[1:] for r in BEFORE_THE_MODEL], ids=[r[0] for r in BEFORE_THE_MODEL]
)
def test_a_task_parameter_is_refused_before_the_model_loads(
    tiny_model_dir, tmp_path, metadata, extra, line
):
    result = run_lm_eval(tiny_model_dir, "attnspan_reversal_id", metadata, tmp_path, extra=extra)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    # simple_evaluate, which loads the model, has not started (its first log lines)
    assert "Initializing hf model" not in result.stderr and "Setting random seed" not in (
        result.stderr
    )
    assert lines_of(result.stderr) == [line]


def test_an_unknown_model_arg_of_attnspan_hf_is_one_line(tmp_path):
    # --model_args pretrained=FOLDER,colour=red,dtype=float32: the folder does not even exist
    model = f"{tmp_path / 'no-model'},colour=red"
    result = run_lm_eval(model, "attnspan_reversal_id", {}, tmp_path, "attnspan-hf")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "TypeError" not in result.stderr
    shown = lines_of(result.stderr)
    assert len(shown) == 1 and shown[0].startswith(
        "lm_eval: error: attnspan-hf: unknown --model_args key(s) 'colour'"
    ), shown
