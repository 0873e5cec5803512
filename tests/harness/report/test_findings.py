"""Findings are written from the numbers by rules: each rule on numbers whose reading is
known."""

from harness.report import findings

GAIN_UP = {"gain": 0.13, "low": 0.08, "high": 0.18, "n": 50}
GAIN_NONE = {"gain": 0.01, "low": -0.02, "high": 0.04, "n": 50}


def task(**changes):
    base = {
        "eval": {
            "reversal_id": {"n": 50, "exact_match": 1.0, "partial_acc": 1.0},
            "reversal_ood": {"n": 50, "exact_match": 0.0, "partial_acc": 0.21},
        },
        "attention": {
            "results": {
                "reversal_ood": {
                    "rollout": {
                        "correct": {"mean": 0.44, "n": 100},
                        "error": {"mean": 0.545, "n": 300},
                        "welch_p": 1e-6,
                    }
                }
            }
        },
        "sweep": {
            "metric": "partial_acc",
            "chosen_name": "top4-C2",
            "test": {
                "baseline": {"exact_match": 0.0, "partial_acc": 0.21},
                "top4-C2": {"exact_match": 0.0, "partial_acc": 0.34},
            },
            "test_gains": {
                "top4-C2": {"partial_acc": GAIN_UP},
                "random4-C2-s0": {"partial_acc": GAIN_UP},
                "random4-C2-s1": {"partial_acc": GAIN_NONE},
            },
            "id": {"baseline": {"exact_match": 1.0}, "top4-C2": {"exact_match": 0.0}},
            "verdict": {"verdict": "pointer", "reasons": ["at ref+3 the model writes ..."]},
        },
    }
    base.update(changes)
    return base


def with_instance_aware(aware):
    """The task with the instance-aware figures of its reversal_ood comparison."""
    t = task()
    t["attention"]["results"]["reversal_ood"]["instance_aware"] = aware
    return t


def test_every_rule_fires_on_its_numbers():
    lines = findings.task_findings("reversal", task())
    text = "\n".join(lines)
    assert all(line.startswith("reversal: ") for line in lines)
    assert "solves the in-distribution task (reversal_id exact match 1.000)" in text
    assert "fails the longer inputs" in text
    assert (
        "wrong tokens attend more to their reference than correct ones, opposite to the paper"
        in text
    )
    assert "pooled Welch p" in text  # no instance-aware figures given: says which test
    assert "lifts OOD partial acc by +13.0 [+8.0, +18.0] points" in text
    assert "OOD exact match stays at 0" in text
    assert "Random heads also gain (random4-C2-s0: +13.0" in text and "random4-C2-s1" not in text
    assert text.count("Random heads also gain") == 1  # one finding for every seed that gains
    assert "costs the in-distribution task: ID exact 1.000 -> 0.000" in text
    assert "the repair-or-pointer rule says **pointer**" in text
    assert "Calibrated verdict" not in text  # a run made before the ladder has none
    calibrated = task() | {"verdict": {"verdict": "downstream", "reasons": ["errors: x"]}}
    text = "\n".join(findings.task_findings("reversal", calibrated))
    assert "Calibrated verdict (dose-response and where the errors look): **downstream**" in text
    assert findings.verdict_name(calibrated) == "downstream"
    assert findings.verdict_name(task()) == "pointer"


def test_instance_aware_interval_decides_over_the_pooled_test():
    t = with_instance_aware(
        {
            "n_instances": 40,
            "cluster_bootstrap": {"difference": -0.1, "low": -0.3, "high": 0.05},
            "matched": {"difference": -0.01, "p": 0.4},
        }
    )
    text = "\n".join(findings.attention_findings(t))
    assert "does not differ" in text and "interval over 40 instances" in text
    assert "held fixed -0.0100 (p = 0.400)" in text


def test_a_pooled_direction_that_the_matched_test_does_not_hold_is_said():
    t = with_instance_aware(
        {
            "n_instances": 40,
            "cluster_bootstrap": {"difference": 0.05, "low": 0.03, "high": 0.07},
            "matched": {"difference": 0.0017, "p": 0.28},
        }
    )
    text = "\n".join(findings.attention_findings(t))
    assert "correct tokens attend more" in text and "not significant" in text


def test_a_kind_in_too_few_instances_is_said_instead_of_a_direction():
    t = with_instance_aware(
        {
            "n_instances": 32,
            "cluster_bootstrap": {
                "difference": 0.014,
                "instances_correct": 32,
                "instances_wrong": 1,
            },
            "matched": {"difference": 0.015, "p": 0.8},
        }
    )
    (line,) = findings.attention_findings(t)
    assert line == (
        "reversal_ood (teacher-forced): too few instances hold a wrong token to compare "
        "attention (1 of 32; an interval over instances needs 5)."
    )


def test_no_gain_and_holding_id_are_said_as_such():
    t = task()
    t["sweep"]["test_gains"] = {"top4-C2": {"partial_acc": GAIN_NONE}}
    t["sweep"]["id"]["top4-C2"]["exact_match"] = 0.98
    text = "\n".join(findings.intervention_findings(t))
    assert "gives no OOD gain" in text
    assert "single characters" not in text  # no gain: nothing to place in characters
    assert "ID exact match holds under the chosen setting (1.000 -> 0.980)" in text
    assert "Random heads" not in text


def test_missing_numbers_say_nothing():
    assert findings.task_findings("x", {}) == []
    section = findings.findings_section({"reversal": task()})
    assert section[0] == "## Findings" and any(s.startswith("- reversal: ") for s in section)


def seed_runs(*verdicts, data_seed=1234):
    """The results of one task's seed runs (`reproduce --quick --seeds K`), one verdict each."""
    out = {}
    for k, verdict in enumerate(verdicts):
        t = task()
        t["sweep"]["verdict"]["verdict"] = verdict
        t["seed_run"] = {"task": "reversal", "run": k, "init_seed": k, "data_seed": data_seed + k}
        out["reversal" if k == 0 else f"reversal-seed{k}"] = t
    return out


def test_seed_runs_say_whether_their_verdicts_agree():
    runs = seed_runs("pointer", "pointer", "pointer")
    groups = findings.seed_groups(runs)
    assert list(groups) == ["reversal"]
    assert [name for name, _ in groups["reversal"]] == [
        "reversal",
        "reversal-seed1",
        "reversal-seed2",
    ]
    assert findings.seed_agreement("reversal", groups["reversal"]) == (
        "reversal over 3 seed runs (seed run k: init seed k, data seed 1234 + k): the verdicts "
        "agree, all **pointer**."
    )
    runs = seed_runs("repair", "pointer", "repair")
    sentence = findings.seed_agreement("reversal", findings.seed_groups(runs)["reversal"])
    assert sentence.endswith(
        "the verdicts differ: **repair** in seed runs 0 and 2; **pointer** in seed run 1."
    )
    # a run without a verdict counts as none, not as agreeing
    del runs["reversal-seed2"]["sweep"]["verdict"]
    sentence = findings.seed_agreement("reversal", findings.seed_groups(runs)["reversal"])
    assert "**none** in seed run 2" in sentence
    # Findings: the sentence once, after the task's last seed run; none without --seeds
    section = findings.findings_section(runs)
    (line,) = [s for s in section if "seed runs" in s]
    assert (
        section.index(line)
        == max(i for i, s in enumerate(section) if s.startswith("- reversal-seed2: ")) + 1
    )
    assert findings.seed_groups({"reversal": task()}) == {}
    assert not any("seed run" in s for s in findings.findings_section({"reversal": task()}))


def test_restore_that_breaks_the_in_distribution_task_is_said_to_say_little():
    t = task()
    t["sweep"]["test_gains"]["top4-restore"] = {"partial_acc": GAIN_NONE}
    t["sweep"]["id"]["top4-restore"] = {"exact_match": 0.234}
    text = "\n".join(findings.task_findings("addition", t))
    assert "Restore is not neutral in distribution (top4-restore: ID exact 1.000 -> 0.234)" in text
    t["sweep"]["id"]["top4-restore"] = {"exact_match": 0.98}  # within the tolerance: silent
    assert "Restore is not neutral" not in "\n".join(findings.task_findings("addition", t))


def test_two_candidate_lookups_are_both_said_and_never_one_picked():
    """A near tie judged at two offsets: the headline names both offsets with their ID
    mass and says whether the verdicts agree; where they differ, every verdict name (seed
    agreement, tables) carries both."""

    def judged(first: str, second: str) -> dict:
        out = task()
        out["verdict"] = {"verdict": first, "reasons": ["a"], "numbers": {}}
        out["lookups"] = [
            {"offset": 0, "mass": 0.436, "verdict": out["verdict"]},
            {"offset": 1, "mass": 0.455, "verdict": {"verdict": second, "reasons": ["b"]}},
        ]
        return out

    differ = judged("no lookup", "no attention effect")
    assert findings.two_lookups_headline(differ) == (
        "Two candidate lookups, the reference (ID mass 0.44) and ref+1 (ID mass 0.46): the "
        "verdicts differ: **no lookup** at the reference, **no attention effect** at ref+1"
    )
    assert findings.verdict_name(differ) == (
        "no lookup at the reference / no attention effect at ref+1"
    )
    lines = findings.intervention_findings(differ)
    assert lines[-3].startswith("Two candidate lookups, ")
    assert lines[-2] == (
        "Calibrated verdict at the reference (dose-response and where the errors look): "
        "**no lookup**: a."
    )
    assert lines[-1].startswith("Calibrated verdict at ref+1 ") and lines[-1].endswith(": b.")
    agree = judged("downstream", "downstream")
    assert findings.two_lookups_headline(agree).endswith("both read **downstream**")
    assert findings.verdict_name(agree) == "downstream"
    # one lookup (no near tie): as before
    one = task()
    one["verdict"] = {"verdict": "downstream", "reasons": ["c"], "numbers": {}}
    assert findings.lookup_verdicts(one) == [] and findings.verdict_name(one) == "downstream"
