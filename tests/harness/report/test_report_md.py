"""The command written into report.md reproduces the run's settings."""

from __future__ import annotations

import argparse
import dataclasses
import shlex

import pytest

from harness.commands.reproduce import add_arguments, config_from_args
from harness.pipeline.reproduce import QUICK_SIZES, ReproduceConfig, TaskValue
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
    assert "chosen setting: pointer**" in text and "| ref+3 | 40 | 0.600 | 0.050 | 0.550 |" in text
    assert verdict_lines(None) == []


def test_command_round_trips_seeds():
    config = ReproduceConfig(quick=True, output="q", tasks=["reversal"], seeds=3, **QUICK_SIZES)
    again = parse(command_for(config))
    assert again.seeds == 3 and "--seeds 3" in command_for(config)
    assert "--seeds" not in command_for(ReproduceConfig(quick=True, output="q", **QUICK_SIZES))


def test_seed_runs_get_a_table_an_agreement_line_and_their_own_folders(tmp_path):
    from harness.report.report_md import seeds_section, task_folder, task_title
    from tests.harness.report.test_findings import seed_runs

    runs = seed_runs("repair", "pointer")
    runs["reversal-seed1"]["sweep"]["id"]["top4-C2"]["exact_match"] = 0.5
    text = "\n".join(seeds_section(runs))
    assert "### reversal: 2 seed runs" in text
    assert "| OOD gain partial acc (95% CI) |" in text
    row0, row1 = [
        line for line in text.splitlines() if line.startswith("| 0 (") or line.startswith("| 1 (")
    ]
    assert row0.startswith(
        "| 0 (`reversal`) | 0 | 1234 | 1.000 | 0.000 | 0.210 | top4-C2 | +13.0 ["
    )
    # both random seeds' gains; a verdict read before stability was measured says so
    assert row0.endswith("| +13.0, +1.0 | 0.000 | **repair** | not recorded |")
    assert row1.startswith("| 1 (`reversal-seed1`) | 1 | 1235 |")
    assert row1.endswith("| 0.500 | **pointer** | not recorded |")
    assert "the verdicts differ: **repair** in seed run 0; **pointer** in seed run 1." in text
    assert seeds_section({"reversal": runs["reversal"] | {"seed_run": None}}) == []
    values = {"reversal": TaskValue.of("reversal"), "reversal_id": TaskValue.of("reversal_id")}
    assert task_folder(tmp_path, values, "reversal-seed1", runs["reversal-seed1"]) == (
        tmp_path / "reversal-seed1"
    )
    assert task_folder(tmp_path, values, "reversal", runs["reversal"]) == tmp_path / "reversal"
    # without --seeds
    assert task_folder(tmp_path, values, "reversal_id", {}) == tmp_path / "reversal"
    assert task_title("reversal-seed1", runs["reversal-seed1"]) == (
        "## reversal-seed1: seed run 1 (init seed 1, data seed 1235)"
    )
    assert task_title("reversal", {}) == "## reversal"


def test_the_diagnosis_section_shows_each_share_beside_its_null_and_the_head_sets():
    """The OOD first wrong rows, the same reading on the correct ID rows (the null) and on
    the correct OOD rows, the on-reference threshold as calibrated, and the dominant kind
    with each head set read."""
    from harness.report.report_md import diagnosis_section

    kinds = ("on_reference", "diluted", "misdirected", "elsewhere", "diffuse")

    def shares(**given):
        return {k: given.get(k, 0.0) for k in kinds}

    found = {
        "heads": [[0, 2], [0, 3]],
        "shift": 0,
        "dominance": 0.5,
        "tolerance": 0.05,
        "level": [0.9, 0.8],
        "on_reference": {
            "levels": [0.9, 0.8],
            "looking": [0, 1],
            "threshold": 0.87,
            "id_quantile": 0.87,
            "basis": "correct ID rows",
        },
        "basis": "first wrong row of each instance",
        "instances": 14,
        "tokens": 14,
        "shares": shares(diluted=1.0),
        "null": {
            "id": {"rows": 165, "shares": shares(on_reference=0.96, diluted=0.04)},
            "ood": {"rows": 50, "shares": shares(on_reference=0.5, diluted=0.5)},
        },
        "head_sets": {
            "N": {"heads": [[0, 2], [0, 3]], "dominant": "diluted"},
            "top-1": {"heads": [[0, 2]], "dominant": "diffuse"},
        },
        "kind_changes": True,
    }
    text = "\n".join(diagnosis_section({"task": "rev", "diagnosis": {"rev_ood": found}}, "x"))
    assert "| rev_ood | first wrong rows | 14 | 14 | 0.000 | 1.000 |" in text
    assert "| rev_ood | correct ID rows (null): 165 | | | 0.960 | 0.040 |" in text
    assert "| rev_ood | correct rows here: 50 | | | 0.500 | 0.500 |" in text
    assert "at least 0.870 x its mean on the correct ID rows (0.900, 0.800)" in text
    assert "exceeds the ID null's by 0.1" in text
    assert "N (2 heads): diluted; top-1 (1 head): diffuse (the kind changes" in text
