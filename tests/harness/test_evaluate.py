"""harness.evaluation.evaluate: metrics checked exactly with stand-in models whose answers are
known; reports; and two processes under accelerate give the one-process results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from harness.evaluation.evaluate import (
    EvalConfig,
    evaluate_model,
    score_instances,
    summarise,
)
from harness.foundation.data import PromptConfig
from harness.foundation.tokenization import CharTokenizer
from harness.report.eval_report import markdown_table, write_reports
from tests.harness.launch import ACCELERATE_TWO_CPU_PROCESSES

REPO = Path(__file__).resolve().parents[2]


class StandInLM(torch.nn.Module):
    """A "model" that answers `answer(instance)` and, teacher-forced, predicts the true next
    token except where `tf_wrong(i, target)` says; enough to check the metric plumbing."""

    def __init__(self, char_tok, instances, answer, tf_wrong=lambda i, target: False):
        super().__init__()
        self.char_tok = char_tok
        self.by_prompt = {tuple(char_tok.encode_chars(x.prompt)): x for x in instances}
        self.answer, self.tf_wrong = answer, tf_wrong
        self.vocab = len(char_tok.tokenizer)
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def _instance(self, ids):
        for n in range(len(ids), 0, -1):
            for start in range(len(ids) - n + 1):
                x = self.by_prompt.get(tuple(ids[start : start + n]))
                if x is not None and start + n == len(ids):
                    return x
        raise AssertionError("unknown prompt")

    def generate(self, input_ids, attention_mask, max_new_tokens, **kwargs):
        rows = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            real = [i for i, m in zip(ids, mask) if m]
            new = self.char_tok.encode_chars(self.answer(self._instance(real)))
            new = (new + [self.char_tok.eos_id])[:max_new_tokens]
            new += [self.char_tok.pad_id] * (max_new_tokens - len(new))
            rows.append(ids + new)
        return torch.tensor(rows)

    def forward(self, input_ids, attention_mask, position_ids=None):
        logits = torch.zeros(*input_ids.shape, self.vocab)
        for b, ids in enumerate(input_ids.tolist()):
            for q in range(len(ids) - 1):
                logits[b, q, ids[q + 1]] = 1.0
        # Mark the chosen target characters wrong: find each row's target after its prompt.
        for b, ids in enumerate(input_ids.tolist()):
            mask = attention_mask[b].tolist()
            real = [i for i, m in zip(ids, mask) if m]
            first = mask.index(1)  # real tokens are contiguous (left padding)
            for x in self.by_prompt.values():
                p = self.char_tok.encode_chars(x.prompt)
                t = self.char_tok.encode_chars(x.target)
                if real[-len(t) - 1 - len(p) : -len(t) - 1] == p and real[-len(t) - 1 : -1] == t:
                    start = first + len(real) - len(t) - 1
                    for i in range(len(t)):
                        if self.tf_wrong(i, x.target):
                            logits[b, start + i - 1] = 0
                            logits[b, start + i - 1, self.char_tok.eos_id] = 1.0
        return SimpleNamespace(logits=logits)

    @property
    def device(self):
        return torch.device("cpu")


def run_stand_in(char_tokenizer, answer, tf_wrong=lambda i, t: False, num=12, config="reversal_id"):
    char_tok = CharTokenizer(char_tokenizer)
    from harness.foundation.data import GeneratorSource

    source = GeneratorSource(config, split="test")
    instances = [source[i] for i in range(num)]
    model = StandInLM(char_tok, instances, answer, tf_wrong)
    results, records = evaluate_model(
        model, char_tokenizer, [config], num, batch_size=5, prompt=PromptConfig()
    )
    return instances, results[config], records[config]


def test_eval_reports_through_the_shared_aggregate(char_tokenizer):
    """Overall, per length and per bin numbers are `metrics.aggregate`'s (lm-eval's)."""
    from attentionspan_datasets.metrics import aggregate

    def answer(x):  # right on even indices, one wrong character on odd ones
        return x.target if x.index % 2 == 0 else x.target[:-1] + "#"

    _, res, records = run_stand_in(char_tokenizer, answer, num=40, config="reversal_ood")
    shared = aggregate(records).to_dict()
    assert any("-" in name for name in res["per_bin"])  # 11-50 characters: bins of lengths
    for key in ("count", "exact_match", "partial_acc"):
        assert res[key] == shared[key]
        for group in ("per_length", "per_bin"):
            kept = {k: v for k, v in shared[group].items() if v["count"]}
            assert {k: v[key] for k, v in res[group].items()} == {
                k: v[key] for k, v in kept.items()
            }
    for name, row in res["per_bin"].items():
        first, _, last = name.partition("-")
        rows = [r for r in records if int(first) <= r["length"] <= int(last or first)]
        assert row["tf_token_acc"] == pytest.approx(
            sum(r["tf_token_acc"] for r in rows) / len(rows)
        )


def test_metrics_of_a_perfect_model(char_tokenizer):
    instances, res, records = run_stand_in(char_tokenizer, lambda x: x.target)
    assert (res["exact_match"], res["partial_acc"], res["tf_token_acc"]) == (1.0, 1.0, 1.0)
    assert [r["index"] for r in records] == list(range(12))
    assert all(r["gen_correct"] == [1] * len(r["target"]) for r in records)


def test_metrics_of_a_model_wrong_on_the_last_character(char_tokenizer):
    def answer(x):
        return x.target[:-1] + ("a" if x.target[-1] != "a" else "b")

    instances, res, records = run_stand_in(
        char_tokenizer, answer, tf_wrong=lambda i, t: i == len(t) - 1
    )
    assert res["exact_match"] == 0.0
    expected = sum((len(x.target) - 1) / len(x.target) for x in instances) / len(instances)
    assert res["partial_acc"] == pytest.approx(expected)
    assert res["tf_token_acc"] == pytest.approx(expected)
    for r in records:
        assert r["tf_correct"] == [1] * (len(r["target"]) - 1) + [0]
        assert r["gen_correct"] == r["tf_correct"]
    # Per length: the mean over the instances of that length.
    by_length = {}
    for x in instances:
        by_length.setdefault(x.params["length"], []).append((len(x.target) - 1) / len(x.target))
    for length, values in by_length.items():
        row = res["per_length"][str(length)]
        assert row["count"] == len(values)
        assert row["partial_acc"] == pytest.approx(sum(values) / len(values))


def test_metrics_of_empty_and_too_long_answers(char_tokenizer):
    _, res, _ = run_stand_in(char_tokenizer, lambda x: "")
    assert (res["exact_match"], res["partial_acc"]) == (0.0, 0.0)
    _, res, records = run_stand_in(char_tokenizer, lambda x: x.target + "zz")
    # Generation stops one token past the target: already wrong, still fully "partial".
    assert (res["exact_match"], res["partial_acc"]) == (0.0, 1.0)
    assert all(r["prediction"] == r["target"] + "z" for r in records)


def test_reports(tmp_path, char_tokenizer):
    _, res, records = run_stand_in(char_tokenizer, lambda x: x.target)
    config = EvalConfig(model="m", configs=["reversal_id"], num=12, output=str(tmp_path))
    write_reports(tmp_path, config, {"reversal_id": res}, {"reversal_id": records}, 1.5)
    report = json.loads((tmp_path / "results.json").read_text())
    assert report["results"]["reversal_id"]["exact_match"] == 1.0
    lines = (tmp_path / "predictions-reversal_id.jsonl").read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == list(range(12))
    table = (tmp_path / "results.md").read_text()
    assert "| reversal_id | 12 | 1.000 | 1.000 | 1.000 |" in table
    assert table == markdown_table({"reversal_id": res})
    assert summarise(records)["count"] == 12


def test_eval_config_is_validated():
    with pytest.raises(ValueError, match="--num"):
        EvalConfig(model="m", num=0)
    with pytest.raises(ValueError, match="mixed_precision"):
        EvalConfig(model="m", mixed_precision="fp8")


def test_default_configs_add_the_ood_twin_of_an_id_preset_only():
    from harness.evaluation.evaluate import default_configs

    def run(config):
        return {"train": {"config": config}}

    assert default_configs(run("reversal_id")) == ["reversal_id", "reversal_ood"]
    assert default_configs(run("t6_id")) == ["t6_id", "t6_ood"]
    for alone in ("reversal_ood", "reversal", "string_reversal", "t6_len10"):
        assert default_configs(run(alone)) == [alone]
    assert default_configs(None) == []


@pytest.mark.slow
def test_two_processes_give_the_one_process_results(tmp_path, tiny_model_dirs):
    from harness.commands.eval import run

    model = str(tiny_model_dirs["llama"])
    configs = ["reversal_id", "reversal_ood"]
    run(EvalConfig(model=model, configs=configs, num=9, batch_size=4, output=str(tmp_path / "one")))
    two = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            *ACCELERATE_TWO_CPU_PROCESSES,
            "-m",
            "harness.commands.eval",
            "--model",
            model,
            "--configs",
            *configs,
            "-n",
            "9",
            "--batch-size",
            "4",
            "--output",
            str(tmp_path / "two"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert two.returncode == 0, two.stderr[-3000:]
    assert "on 2 process(es)" in two.stdout
    for name in ("predictions-reversal_id.jsonl", "predictions-reversal_ood.jsonl"):
        assert (tmp_path / "one" / name).read_text() == (tmp_path / "two" / name).read_text()
    results = [
        json.loads((tmp_path / d / "results.json").read_text())["results"] for d in ("one", "two")
    ]
    assert results[0] == results[1]


@pytest.mark.parametrize("preset", ["reversal_id", "successor_id", "addition_id"])
def test_eval_scores_the_rows_of_the_datasets_test_split(preset, tmp_path, char_tokenizer):
    """`attentionspan eval` and `load_dataset("attentionspan", preset, split="test")` see the
    same rows in the same order (the builder is built directly, as tests/test_builder.py)."""
    import warnings

    from attentionspan_datasets.builder import AttentionSpan
    from harness.foundation.data import instance_from_row

    builder = AttentionSpan(
        config_name=preset, cache_dir=str(tmp_path), num_train=20, num_validation=5, num_test=12
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # small-space notes
        builder.download_and_prepare()
    test = builder.as_dataset(split="test")
    rows = [instance_from_row(r) for r in test]
    model = StandInLM(CharTokenizer(char_tokenizer), rows, lambda x: x.target)
    results, records = evaluate_model(model, char_tokenizer, [preset], 12, batch_size=5)
    assert [r["prompt"] for r in records[preset]] == test["prompt"]
    assert [r["target"] for r in records[preset]] == test["target"]
    assert [r["index"] for r in records[preset]] == test["index"]
    assert results[preset]["exact_match"] == 1.0 and results[preset]["count"] == 12


def test_progress_counts_only_scored_instances(char_tokenizer):
    """The bar advances after a batch is scored: a failure in the second batch leaves it at
    the first batch's size (it used to reach 100% while the last batch was still running)."""
    from harness.foundation.data import GeneratorSource

    char_tok = CharTokenizer(char_tokenizer)
    source = GeneratorSource("reversal_id", split="test")
    instances = [source[i] for i in range(10)]
    model = StandInLM(char_tok, instances, lambda x: x.target)
    calls, generate = [], model.generate

    def second_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("stop")
        return generate(*args, **kwargs)

    model.generate = second_fails
    bar = SimpleNamespace(n=0)
    bar.update = lambda k: setattr(bar, "n", bar.n + k)
    with pytest.raises(RuntimeError, match="stop"):
        score_instances(model, char_tok, instances, PromptConfig(), 5, bar=bar)
    assert bar.n == 5
