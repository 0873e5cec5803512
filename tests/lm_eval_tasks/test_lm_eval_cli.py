"""The `lm_eval` command on a tiny random Llama, from a wheel installed into a fresh venv.

Two runs (each spends seconds indexing lm-eval's own task folders, so they are few), both
with the installed start-up hooks on, as a user gets them after `pip install`:
- the `hf` model, every preset by the glob 'attnspan_*', with no flag pointing at our tasks;
- the `attnspan-hf` model, the group `attnspan`, one few-shot example and the chat
  template, with `--include_path` naming the installed folder as well (not indexed twice).
The include path with the hooks off is checked in test_lm_eval_registration.py.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from attentionspan_datasets.presets import PRESETS

pytestmark = pytest.mark.slow
LIMIT = 3


def installed_tasks_dir(python, cwd) -> str:
    command = [str(python), "-c", "import lm_eval_tasks; print(lm_eval_tasks.TASKS_DIR)"]
    tasks_dir = subprocess.run(command, capture_output=True, text=True, check=True, cwd=cwd)
    assert "site-packages" in tasks_dir.stdout
    return tasks_dir.stdout.strip()


def run_lm_eval(python, args, cwd):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.pop("PYTHONPATH", None)  # only what the wheel installed
    env.pop("ATTENTIONSPAN_NO_AUTOREGISTER", None)
    out = cwd / "out"
    command = [str(python), "-m", "lm_eval", "--device", "cpu", "--batch_size", "8"]
    command += ["--limit", str(LIMIT), "--output_path", str(out), *args]
    # A random model never stops early: a short budget keeps the run quick.
    command += ["--gen_kwargs", "max_gen_toks=12"]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    (path,) = out.rglob("results_*.json")
    return json.loads(path.read_text()), result.stdout


def expected_metrics(task: str) -> set[str]:
    from lm_eval_tasks.dataset import custom_dataset

    row = custom_dataset(task.removeprefix("attnspan_"), attnspan={"size": 1, "fewshot_size": 1})[
        "test"
    ][0]
    return {"exact_match", "partial_acc", *row["length_bins"]}


def check_every_task_reported(results):
    tasks = {f"attnspan_{p}" for p in PRESETS}
    assert set(results["n-samples"]) == tasks  # each task once
    for task in tasks:
        assert results["n-samples"][task]["effective"] == LIMIT
        reported = {
            k.removesuffix(",none")
            for k in results["results"][task]
            if k.endswith(",none") and "_stderr" not in k
        }
        assert reported == expected_metrics(task), task
        numbers = results["results"][task]
        assert 0.0 <= numbers["exact_match,none"] <= numbers["partial_acc,none"] <= 1.0


def test_hf_model_all_presets_by_glob_without_flags(installed_python, tiny_model_dir, tmp_path):
    args = ["--model", "hf", "--model_args", f"pretrained={tiny_model_dir},dtype=float32"]
    args += ["--tasks", "attnspan_*"]
    results, stdout = run_lm_eval(installed_python, args, tmp_path)
    check_every_task_reported(results)
    assert "attnspan" not in results.get("groups", {})  # the glob does not pull in the group
    assert "|attnspan_reversal_ood" in stdout and "exact_match_len_47_50" in stdout


def test_attnspan_hf_group_few_shot_chat(installed_python, tiny_model_dir, tmp_path):
    args = ["--model", "attnspan-hf", "--model_args", f"pretrained={tiny_model_dir},dtype=float32"]
    args += ["--tasks", "attnspan", "--num_fewshot", "1", "--apply_chat_template", "--log_samples"]
    args += ["--include_path", installed_tasks_dir(installed_python, tmp_path)]
    results, stdout = run_lm_eval(installed_python, args, tmp_path)
    check_every_task_reported(results)
    group = results["groups"]["attnspan"]
    assert 0.0 <= group["exact_match,none"] <= group["partial_acc,none"] <= 1.0
    (samples,) = (tmp_path / "out").rglob("samples_attnspan_reversal_id_*.jsonl")
    first = json.loads(samples.read_text().splitlines()[0])
    context = first["arguments"]["gen_args_0"]["arg_0"]
    doc = first["doc"]
    assert context.endswith(doc["prompt"]) and doc["instruction"] in context
