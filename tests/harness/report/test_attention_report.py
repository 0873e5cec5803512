"""harness.report.attention_report: Table 2 rows, attention.md and attention.json from
results written by hand (every number in a row is the one given, formatted)."""

from __future__ import annotations

import json

from harness.report.attention_report import (
    _number,
    markdown_report,
    table2_notes,
    table2_rows,
    write_outputs,
)


def rollout(correct, n_correct, error, n_error, t, p, g):
    return {
        "correct": {"mean": correct, "n": n_correct},
        "error": {"mean": error, "n": n_error},
        "welch_t": t,
        "welch_p": p,
        "hedges_g": g,
    }


# The shape of `scores.table2_statistics` (harness.foundation.stats.correct_vs_wrong + paper_test).
INSTANCE_AWARE = {
    "direction": "correct > wrong",
    "n_instances": 4,
    "n_tokens": 22,
    "cluster_bootstrap": {"difference": 0.0219, "low": 0.0051, "high": 0.03876},
    "paired": {
        "mean_difference": 0.00642,
        "low": -0.001,
        "high": 0.012,
        "wilcoxon_p": 0.25,
        "n_instances": 3,
    },
    "matched": {"difference": 0.018, "p": 0.0412},
    "paper_test": {"welch_p": 0.0001234},
}
RESULTS = {
    "reversal_ood": {
        "instances": 4,
        "token_accuracy": 0.5,
        "rollout": rollout(0.0455, 10, 0.0236, 12, 3.14159, 0.0001234, 0.5),
        "instance_aware": INSTANCE_AWARE,
        "heads": [[0.1, 0.4], [None, 0.3]],
        "by_length": {
            "12": {
                "tokens": 22,
                "token_accuracy": 0.5,
                "rollout": rollout(0.0455, 10, 0.0236, 12, 3.1, 0.02, 0.5),
            }
        },
        "generate": {
            "token_accuracy": 0.25,
            "exact_match": 0.0,
            "rollout": rollout(0.05, 5, None, 0, None, None, None),
            "heads": [[0.2, 0.2], [0.2, 0.2]],
            # One kind of token only: no difference, no interval, no pair.
            "instance_aware": {
                "direction": "no wrong tokens to compare",
                "cluster_bootstrap": {"difference": None, "low": None, "high": None},
                "paired": {"mean_difference": None, "n_instances": 0},
                "matched": {"difference": None, "p": None},
            },
        },
    }
}
META = {
    "model": "runs/rev/final",
    "model_name": "rev",
    "command": "attentionspan attention --model runs/rev/final",
    "instances": 4,
    "split": "test",
    "seed": 1234,
    "prompt": "no instruction",
}


def test_numbers():
    assert [_number(None), _number(0.0001234), _number(0.0), _number(0.5, 3), _number(7)] == [
        "-",
        "1.2e-04",
        "0.0000",
        "0.500",
        "7",
    ]


def test_table2_rows():
    rows = table2_rows("rev", RESULTS)
    assert rows[0].endswith(
        "| Welch t | p (pooled tokens, paper's test) | Hedges g | "
        "difference [95% CI over instances] | paired (n) | matched p |"
    )
    assert rows[1].count("---") == rows[0].count("|") - 1
    assert rows[2:4] == [
        "| rev | reversal_ood | teacher-forced | 0.500 | - | 0.0455 | 10 | 0.0236 | 12 | 3.14 "
        "| 1.2e-04 | 0.50 | +0.0219 [+0.0051, +0.0388] | +0.0064 (3) | 0.041 |",
        "| rev | reversal_ood | free-running | 0.250 | 0.000 | 0.0500 | 5 | - | 0 | - | - | - "
        "| - | - (0) | - |",
    ]
    # the free-running pass has no wrong token: a note after the table says so
    assert rows[4:] == ["", *table2_notes(RESULTS)]
    # Results written before the instance-aware figures: dashes, not an error.
    old = {"x": {k: v for k, v in RESULTS["reversal_ood"].items() if k != "instance_aware"}}
    assert table2_rows("rev", old)[2].endswith("| 0.50 | - | - | - |")


def test_the_score_convention_is_stated():
    text = markdown_report(META, RESULTS, [])
    assert "Score convention: paper (the paper's text), over the task-text columns" in text
    assert "bootstrap over instances" in text and "paper's, kept for comparison" in text
    authors = markdown_report({**META, "score_convention": "authors"}, RESULTS, [])
    assert "Score convention: authors (their released code), " in authors
    assert "leaves out the prompt's first character" in authors


def test_markdown_report_lists_lengths_top_heads_and_figures():
    text = markdown_report(META, RESULTS, ["heads.png"])
    assert "| 12 | 22 | 0.500 | 0.0455 | 10 | 0.0236 | 12 | 0.020 |" in text
    assert "highest mean share on the reference: L0H1 0.400, L1H1 0.300, L0H0 0.100." in text
    assert "![heads.png](heads.png)" in text and META["command"] in text


def test_write_outputs(tmp_path):
    plots_data = {
        "reversal_ood": {
            "figures": {},
            "tokens": {"teacher_forced": [(0, 0.1, True), (1, 0.05, False)], "generate": []},
        }
    }
    written = write_outputs(tmp_path, META, RESULTS, plots_data)
    names = [p.name for p in written]
    assert names[-2:] == ["attention.json", "attention.md"]
    assert {"heads.png", "heads-generate.png", "scores.png", "position-reversal_ood.png"} <= set(
        names
    )
    document = json.loads((tmp_path / "attention.json").read_text())
    assert document["configs"] == RESULTS and document["settings"] == META
    assert document["figures"] == names[:-2]
    assert (tmp_path / "attention.md").read_text() == markdown_report(META, RESULTS, names[:-2])


# --- a mean with no token behind it is explained where it is shown ----------------------------


def test_a_group_without_tokens_is_explained_under_the_table():
    assert table2_notes(RESULTS) == [
        "Attn score (error) is - with n 0 for reversal_ood free-running: no wrong target "
        "token there (every token right, as on an ID config the model has learnt), so there "
        "is no mean and nothing to compare it with (Welch t, p and the differences are - too)."
    ]
    every_token_wrong = {
        "x_id": {
            "token_accuracy": 0.0,
            "rollout": rollout(float("nan"), 0, 0.02, 7, float("nan"), float("nan"), None),
        }
    }
    rows = table2_rows("rev", every_token_wrong)
    assert "| rev | x_id | teacher-forced | 0.000 | - | - | 0 | 0.0200 | 7 | - | - | - |" in rows[2]
    assert rows[-1].startswith("Attn score (correct) is - with n 0 for x_id teacher-forced: ")
    both_kinds = {"x": {**RESULTS["reversal_ood"], "generate": None}}
    assert table2_notes(both_kinds) == [] and table2_rows("rev", both_kinds)[-1].startswith("|")


def test_the_report_and_the_printed_table_carry_the_note(tmp_path):
    text = markdown_report(META, RESULTS, [])
    assert table2_notes(RESULTS)[0] in text
    assert text.index(table2_notes(RESULTS)[0]) < text.index("Difference: mean attn score")
    by_length = {**RESULTS["reversal_ood"]["by_length"]["12"]}
    by_length["rollout"] = rollout(0.0455, 22, None, 0, None, None, None)
    lonely = {"reversal_ood": {**RESULTS["reversal_ood"], "by_length": {"3": by_length}}}
    text = markdown_report(META, lonely, [])
    assert "| 3 | 22 | 0.500 | 0.0455 | 22 | - | 0 | - |" in text
    assert "no token of that kind (correct or wrong) at that length" in text
