"""The command written into report.md reproduces the run's settings."""

from __future__ import annotations

import argparse
import dataclasses
import shlex

import pytest

from harness.commands.reproduce import add_arguments, config_from_args
from harness.pipeline.reproduce import QUICK_SIZES, ReproduceConfig
from harness.report.report_md import command_for


def parse(command: str) -> ReproduceConfig:
    words = shlex.split(command)
    assert words[:2] == ["attentionspan", "reproduce"]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return config_from_args(parser.parse_args(words[2:]))


@pytest.mark.parametrize(
    "config",
    [
        ReproduceConfig(model="runs/rev/final", output="out"),
        ReproduceConfig(
            model="runs/a b/final",
            config="addition",
            output="o",
            num_test=50,
            counts=[1, 3],
            strengths=[0.5, 2.0],
            mode="conditional",
            thresholds=[0.02],
            shift=1,
            control_seeds=[4],
            ood={"max_digits": 7},
            device="cpu",
            threads=2,
            id_guard=0.05,
            score_convention="authors",
        ),
        ReproduceConfig(quick=True, output="q", tasks=["reversal"], train_steps=100, **QUICK_SIZES),
        ReproduceConfig(quick=True, output="q", **{**QUICK_SIZES, "num_test": 10}),
    ],
)
def test_command_round_trips(config):
    again = parse(command_for(config))
    assert dataclasses.replace(again, progress=config.progress) == config


def test_each_stage_says_its_lengths_and_overlong_answers_are_counted():
    from harness.report.report_md import lengths_of, overlong, verdict_lines

    assert lengths_of([{"length": 14}, {"length": 11}, {"length": 20}]) == "11-20"
    assert lengths_of([{"length": 7}]) == "7" and lengths_of([]) == "none"
    records = [
        {"prediction": "abc", "target_len": 3},
        {"prediction": "abcd", "target_len": 3},  # runs past the gold answer
        {"prediction": "a", "target_len": 3},
    ]
    assert overlong(records) == 1
    verdict = {
        "verdict": "pointer",
        "reasons": ["at ref+3 ..."],
        "numbers": {
            "follows": {"3": {"tokens": 40, "rate": 0.6, "baseline_rate": 0.05, "excess": 0.55}},
            "answer_at_reference": 1.0,
        },
    }
    text = "\n".join(verdict_lines(verdict))
    assert "**Verdict: pointer**" in text and "| ref+3 | 40 | 0.600 | 0.050 | 0.550 |" in text
    assert verdict_lines(None) == []
