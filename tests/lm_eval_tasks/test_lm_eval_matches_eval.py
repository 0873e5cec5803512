"""The same trained model gets the same scores from `attentionspan eval` and from lm-eval:
same test rows (splits.py), same saved prompt layout, same greedy answers, same
metric aggregate."""

from __future__ import annotations

import json
import math

import pytest

from harness.cli import main
from tests.harness.launch import TINY_SCRATCH_ARGS

lm_eval = pytest.importorskip("lm_eval")

N = 12


@pytest.mark.slow
def test_eval_and_lm_eval_give_the_same_scores(tmp_path, task_manager_for):
    run = tmp_path / "run"
    # One step: an (almost) untrained model writes long non-empty answers, compared one by one.
    train = ["train", "--model", "scratch", "--output", str(run), "--max-steps", "1"]
    train += ["--lr", "3e-3", "--batch-size", "16", "--eval-size", "4", "--no-progress"]
    assert main([*train, *TINY_SCRATCH_ARGS]) == 0
    model = str(run / "final")
    out = tmp_path / "eval"
    eval_args = ["eval", "--model", model, "--configs", "reversal_id", "-n", str(N)]
    assert main([*eval_args, "--output", str(out)]) == 0
    ours = json.loads((out / "results.json").read_text())["results"]["reversal_id"]
    lines = (out / "predictions-reversal_id.jsonl").read_text().splitlines()
    our_answers = [json.loads(line)["prediction"] for line in lines]

    model_args = {"pretrained": model, "device": "cpu", "dtype": "float32"}
    results = lm_eval.simple_evaluate(
        model="hf",
        model_args=model_args,
        tasks=["attnspan_reversal_id"],
        task_manager=task_manager_for(model_args),
        limit=N,
        bootstrap_iters=0,
        log_samples=True,
    )
    samples = sorted(results["samples"]["attnspan_reversal_id"], key=lambda s: s["doc_id"])
    # eval keeps each answer up to one character past its target: enough to decide exact
    # match and partial accuracy; lm-eval generates up to max_gen_toks.
    their_answers = [s["filtered_resps"][0][: len(s["doc"]["target"]) + 1] for s in samples]
    assert [s["doc"]["prompt"] for s in samples] == [json.loads(x)["prompt"] for x in lines]
    assert any(our_answers) and their_answers == our_answers
    theirs = results["results"]["attnspan_reversal_id"]
    for metric in ("exact_match", "partial_acc"):
        assert math.isclose(theirs[f"{metric},none"], ours[metric], abs_tol=1e-12), metric
