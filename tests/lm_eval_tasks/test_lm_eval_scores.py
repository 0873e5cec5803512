"""The tasks run inside lm-eval and score exactly: stand-in models whose answers are known.

Each `simple_evaluate` costs a few seconds, so one module-scoped TaskManager is shared and
each stand-in model runs once.
"""

from __future__ import annotations

import math

import pytest

from lm_eval_tasks.dataset import custom_dataset

lm_eval = pytest.importorskip("lm_eval")
from lm_eval.api.model import LM  # noqa: E402
from lm_eval.api.registry import register_model  # noqa: E402

TASKS = ["attnspan_reversal_id", "attnspan_addition_ood"]
LIMIT = 24


def answer(mode: str, target: str) -> str:
    if mode == "right":
        return target
    if mode == "last_wrong":
        return target[:-1] + ("x" if target[-1] != "x" else "y")
    if mode == "empty":
        return ""
    if mode == "too_long":
        return target * 10 + "junk"
    if mode == "noisy":  # stray whitespace and an EOS text with junk after it
        return f"  {target}\t</s> 12345"
    raise ValueError(mode)


@register_model("attnspan-test-standin")
class StandIn(LM):
    """Answers every request from the document's target, transformed by `mode`."""

    def __init__(self, mode: str = "right", **model_args):
        super().__init__()
        self.mode = mode
        self.model_args = model_args
        self.contexts: list[str] = []

    def generate_until(self, requests, disable_tqdm: bool = False):
        self.contexts += [r.args[0] for r in requests]
        return [answer(self.mode, r.doc["target"]) for r in requests]

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError


@pytest.fixture(scope="module")
def task_manager(task_manager_for):
    return task_manager_for()


def expected_scores(task: str, mode: str) -> dict[str, float]:
    """The numbers computed by hand from the documents, not by the metric code."""
    docs = list(custom_dataset(task.removeprefix("attnspan_"))["test"])[:LIMIT]
    per_doc = []
    for doc in docs:
        target = doc["target"]
        exact = float(mode in ("right", "noisy"))
        partial = {
            "right": 1.0,
            "noisy": 1.0,
            "too_long": 1.0,
            "empty": 0.0,
            "last_wrong": (len(target) - 1) / len(target),
        }[mode]
        per_doc.append((doc["length_bin"], exact, partial))
    out = {
        "exact_match": sum(e for _, e, _ in per_doc) / len(docs),
        "partial_acc": sum(p for _, _, p in per_doc) / len(docs),
    }
    for name in docs[0]["length_bins"]:
        values = [e for b, e, _ in per_doc if b == name]
        out[name] = sum(values) / len(values) if values else math.nan
    return out


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["right", "last_wrong", "empty", "too_long", "noisy"])
def test_scores_are_exact(task_manager, mode):
    results = lm_eval.simple_evaluate(
        model=StandIn(mode),
        tasks=TASKS,
        task_manager=task_manager,
        limit=LIMIT,
        bootstrap_iters=0,
    )
    for task in TASKS:
        reported = results["results"][task]
        expected = expected_scores(task, mode)
        assert results["n-samples"][task]["effective"] == LIMIT
        for metric, value in expected.items():
            got = reported[f"{metric},none"]
            if math.isnan(value):
                assert math.isnan(got), (task, metric)
            else:
                assert got == pytest.approx(value, abs=1e-12), (task, metric)
        assert expected["exact_match"] != expected["partial_acc"] or mode != "last_wrong"


@pytest.mark.slow
def test_prompt_layout_zero_and_few_shot(task_manager):
    model = StandIn("right")
    lm_eval.simple_evaluate(
        model=model, tasks=["attnspan_reversal_id"], task_manager=task_manager, limit=2
    )
    doc = custom_dataset("reversal_id")["test"][0]
    assert model.contexts[0] == f"{doc['instruction']}\n{doc['prompt']}"

    model = StandIn("right")
    lm_eval.simple_evaluate(
        model=model,
        tasks=["attnspan_reversal_id"],
        task_manager=task_manager,
        limit=2,
        num_fewshot=3,
    )
    fewshot = {r["prompt"] + r["target"] for r in custom_dataset("reversal_id")["fewshot"]}
    lines = model.contexts[0].split("\n")
    assert lines[0] == doc["instruction"] and lines[-1] == doc["prompt"]
    assert len(lines) == 5 and all(line in fewshot for line in lines[1:4])


def test_metadata_and_model_args_through_lm_eval(task_manager_for):
    """As the CLI does it: the TaskManager gets `model_args | metadata` as its metadata."""
    model_args = {"mode": "right", "max_length": 2048}  # max_length: a reversal field too
    results = lm_eval.simple_evaluate(
        model="attnspan-test-standin",
        model_args=model_args,
        tasks=["attnspan_reversal_id"],
        task_manager=task_manager_for(model_args | {"attnspan": {"size": 5, "seed": 3}}),
        bootstrap_iters=0,
        log_samples=True,
    )
    assert results["n-samples"]["attnspan_reversal_id"]["effective"] == 5
    assert results["results"]["attnspan_reversal_id"]["exact_match,none"] == 1.0
    docs = [s["doc"] for s in results["samples"]["attnspan_reversal_id"]]
    assert max(d["length"] for d in docs) <= 10  # the preset's range, not 2048
    first = custom_dataset("reversal_id", attnspan={"seed": 3})["test"][0]
    assert docs[0]["prompt"] == first["prompt"]


def test_unknown_metadata_is_refused_by_name(task_manager_for):
    with pytest.raises(ValueError, match="unknown --metadata 'attnspan' key.*'sise'.*allowed"):
        lm_eval.simple_evaluate(
            model=StandIn("right"),
            tasks=["attnspan_reversal_id"],
            task_manager=task_manager_for({"attnspan": {"sise": 5}}),
        )


def test_a_trained_model_folders_saved_prompt_layout_is_used_by_hf(
    task_manager_for, tmp_path, save_llama, caplog
):
    """`--model hf --model_args pretrained=DIR` on a folder `attentionspan train` wrote: the
    tasks read its attentionspan_run.json and prompt without an instruction, as it trained."""
    import json

    from tests.lm_eval_tasks.conftest import make_char_tokenizer

    folder = save_llama(tmp_path / "final", make_char_tokenizer())
    run = {"train": {}, "prompt": {"instruction": None, "num_fewshot": 0, "chat": False}}
    (tmp_path / "final" / "attentionspan_run.json").write_text(json.dumps(run))
    model_args = {"pretrained": folder, "device": "cpu", "dtype": "float32"}
    results = lm_eval.simple_evaluate(
        model="hf",
        model_args=model_args,
        tasks=["attnspan_reversal_id"],
        task_manager=task_manager_for(model_args),  # what simple_evaluate builds itself
        limit=2,
        gen_kwargs="max_gen_toks=4",
        bootstrap_iters=0,
        log_samples=True,
    )
    samples = results["samples"]["attnspan_reversal_id"]
    contexts = [s["arguments"][0][0] for s in samples]  # [(context, gen_kwargs)] per sample
    assert contexts == [s["doc"]["prompt"] for s in samples]  # the bare prompt, no instruction
    assert "using the prompt layout saved in" in caplog.text
