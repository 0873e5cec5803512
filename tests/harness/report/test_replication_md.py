"""The replication beside the verdict in words: a digest made before it says "not recorded"
(never a word made up), a recorded one its word and whether it agrees, in the report's line,
docs/results.md's tables and its summary."""

from __future__ import annotations

import json
from pathlib import Path

from harness.report import pretrained_table, results_doc
from harness.report.replication_md import (
    NOT_RECORDED,
    replication_cell,
    replication_counts,
    replication_line,
    stability_phrase,
    task_replication_cell,
)

REPO = Path(__file__).resolve().parents[3]


def _record(word="no lookup", agrees=True):
    return {
        "stream": "test split rows 64..127 of data seed 1234",
        "indices": [64, 128],
        "instances": 64,
        "shared_prompts": {"reversal_ood": 0, "reversal_id": 2},
        "rule_version": "r-0123456789ab",
        "verdict": word,
        "reasons": ["a reason"],
        "numbers": {},
        "agrees": agrees,
    }


def test_the_cell_says_the_word_and_whether_it_agrees_or_that_none_was_recorded():
    assert replication_cell({"verdict": "no lookup"}) == NOT_RECORDED == "not recorded"
    assert replication_cell(None) == "-"  # no calibrated verdict at all
    recorded = {"verdict": "no lookup", "replication": _record()}
    assert replication_cell(recorded) == "no lookup (agrees)"
    differs = {"verdict": "downstream", "replication": _record("inconclusive", agrees=False)}
    assert replication_cell(differs) == "inconclusive (differs)"
    skipped = {"verdict": "no lookup", "replication": {"skipped": "--no-replicate"}}
    assert replication_cell(skipped) == "not run (--no-replicate)"


def test_a_near_tie_names_each_lookups_replication_with_its_offset():
    """Two candidate lookups: each lookup's replication in the verdict column's order and
    form, never both lookups' words run together into one list."""
    first = {"verdict": "no attention effect", "replication": _record("no attention effect")}
    second = {"verdict": "downstream", "replication": _record("mixed failure", agrees=False)}
    task = {
        "verdict": first,
        "lookups": [{"offset": 0, "mass": 0.4}, {"offset": 2, "mass": 0.38, "verdict": second}],
    }
    assert task_replication_cell(task) == (
        "no attention effect (agrees) at the reference / mixed failure (differs) at ref+2"
    )
    # the same cell for both: said once, as for one lookup
    task["lookups"][1]["verdict"] = {**first}
    assert task_replication_cell(task) == "no attention effect (agrees)"
    assert task_replication_cell({"verdict": first}) == replication_cell(first)


def test_the_reports_line_names_the_instances_the_word_the_stream_and_the_rule():
    assert replication_line({"verdict": "no lookup"}) is None  # a run made before it
    line = replication_line({"verdict": "downstream", "replication": _record("x", False)})
    assert line.startswith(
        "Read again on 64 fresh instances: **x**, stability not recorded (differs from the verdict"
    )
    for part in (
        "rows 64..127",
        "prompts a first-stream row also wrote: reversal_id 2",
        "r-0123456789ab",
    ):
        assert part in line, part
    assert line.endswith(": a reason.")
    skipped = {"verdict": "x", "replication": {"skipped": "--no-replicate"}}
    assert "--no-replicate" in replication_line(skipped)


def _stable(share: float, words: dict) -> dict:
    return {"share": share, "words": words, "flip_margin": {"margin": 2, "exact": share < 0.8}}


def test_the_replications_own_stability_is_shown_and_an_unstable_word_never_alone():
    """Its stability, from its own readings, shown beside its word: under 0.8 the word is
    said as unstable between the words its resamples take, in the line and in the cell."""
    stable = _record("no lookup") | {"stability": _stable(0.93, {"no lookup": 0.93})}
    line = replication_line({"verdict": "no lookup", "replication": stable})
    assert line.startswith(
        "Read again on 64 fresh instances: **no lookup**, stable 0.93 (flip margin at most 2) "
        "(agrees with the verdict above;"
    )
    words = {"downstream": 0.55, "inconclusive": 0.45}
    shaky = _record("downstream") | {"stability": _stable(0.55, words)}
    line = replication_line({"verdict": "downstream", "replication": shaky})
    assert line.startswith(
        "Read again on 64 fresh instances: **unstable: downstream / inconclusive**, only 0.55 "
        "of the resamples give downstream (flip margin exactly 2)"
    )
    assert replication_cell({"verdict": "downstream", "replication": shaky}) == (
        "unstable: downstream / inconclusive (agrees)"
    )
    assert stability_phrase(_record()) == "stability not recorded"  # resamples 0, or older


def test_the_summary_counts_agreements_and_says_when_none_was_recorded():
    none = replication_counts([{"verdict": "a"}, {"verdict": "b"}, None])
    assert "not recorded in these digests" in none
    mixed = replication_counts(
        [
            {"verdict": "a", "replication": _record("a")},
            {"verdict": "b", "replication": _record("c", agrees=False)},
            {"verdict": "d"},
        ]
    )
    assert "the 3 verdicts: 1 agrees, 1 differs, 1 not recorded." in mixed
    assert replication_counts([None]) == ""
    # a run that judged two candidate lookups gives two verdicts: the models said beside them
    two = [{"verdict": "a", "replication": _record("a")}] * 3
    said = replication_counts(two, models=2)
    assert "the 3 verdicts of the 2 models (each candidate lookup's where a run" in said
    assert "the 3 verdicts: 3 agree." in replication_counts(two, models=3)


def test_the_quick_block_and_the_pretrained_table_show_it_beside_the_verdict(tmp_path):
    committed = json.loads((REPO / "docs" / "quick-run.json").read_text())["tasks"]
    task = committed["reversal"]  # a committed digest's task, made as before the replication
    added = ("replication", "stability")
    task["verdict"] = {k: v for k, v in task["verdict"].items() if k not in added}
    task["verdict"]["verdict"] = "downstream"
    old = json.loads(json.dumps(task))
    task["verdict"]["replication"] = _record("inconclusive", agrees=False)
    block = results_doc.render(
        {"reversal": task, "successor": old}, command="c", machine="m", date="d"
    )
    rows = [line for line in block.splitlines() if line.startswith("| ")]
    assert rows[0].endswith(
        "| calibrated verdict | stability (flip margin) | read again on fresh instances |"
    )
    assert rows[1].endswith("| downstream | not recorded | inconclusive (differs) |")
    assert rows[2].endswith("| downstream | not recorded | not recorded |")
    digest = {"meta": {"model": "m", "date": "d", "command": "c"}, "tasks": {"reversal": task}}
    (tmp_path / "quick-run-m-reversal.json").write_text(json.dumps(digest))
    table = pretrained_table.render_table(tmp_path)
    rows = [line for line in table.splitlines() if line.startswith("| m | reversal | 0 ")]
    assert rows[-1].endswith("| inconclusive (differs) |"), rows


def test_check_compares_a_replication_only_where_the_committed_digest_holds_one():
    run = {"verdict": {"verdict": "a", "replication": _record("a")}, "eval": {}}
    before = {"verdict": {"verdict": "a"}, "eval": {}}
    assert results_doc.without_unrecorded(run, before) == before
    # a committed replication is a figure: compared, so a changed word is seen
    assert results_doc.without_unrecorded(run, run) == run
    lookups = {"lookups": [{"verdict": run["verdict"]}], "verdict": run["verdict"]}
    saved = {"lookups": [{"verdict": {"verdict": "a"}}], "verdict": {"verdict": "a"}}
    assert results_doc.without_unrecorded(lookups, saved) == saved
    assert results_doc.without_unrecorded({"eval": {}}, before) == {"eval": {}}
    # a committed replication made before it kept readings and stability: the rest compared
    grown = {
        "verdict": {"verdict": "a", "replication": _record("a") | {"readings": {}}},
        "eval": {},
    }
    grown["verdict"]["replication"]["stability"] = {"share": 1.0}
    assert results_doc.without_unrecorded(grown, run) == run
    assert results_doc.without_unrecorded(grown, grown) == grown
