"""`attentionspan results-doc --rederive DIGEST`: every verdict of a digest read again from
the readings it keeps; a digest made before readings were kept says so and fails nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.commands import results_doc as command
from harness.report.rederive import NOT_RECORDED, rederive_digest
from tests.harness.attention.verdicts.test_readings import hand_readings

REPO = Path(__file__).resolve().parents[3]
COMMITTED = sorted(p.name for p in (REPO / "docs").glob("quick-run*.json"))


def _digest(path: Path, tasks: dict) -> Path:
    path.write_text(json.dumps({"meta": {"versions": {}}, "tasks": tasks}))
    return path


def _task(word: str, readings=None, **extra) -> dict:
    return {
        "verdict": {"verdict": word, "reasons": [], "numbers": {}},
        "readings": readings,
    } | extra


@pytest.mark.parametrize("name", COMMITTED)
def test_a_digest_made_before_readings_were_kept_says_so_and_passes(name, capsys):
    """The committed digests predate readings: each model's line says not recorded, and
    nothing is invented or failed."""
    tasks = json.loads((REPO / "docs" / name).read_text())["tasks"]
    if any(t.get("readings") for t in tasks.values()):
        pytest.skip(f"{name} keeps readings: the run's own test re-derives it")
    assert command.main(["--rederive", str(REPO / "docs" / name)]) == 0
    out = capsys.readouterr().out
    for task in tasks:
        assert f"{task}: recorded " in out
    assert out.count(NOT_RECORDED) >= len(tasks)
    assert "nothing re-derived" in out


def test_each_verdict_with_readings_is_rederived_and_a_disagreement_fails(tmp_path):
    readings = hand_readings()  # its verdict: nudge-repairable
    second = {"offset": 1, "verdict": {"verdict": "nudge-repairable"}, "readings": readings}
    tasks = {
        "reversal": _task("nudge-repairable", readings, lookups=[{"offset": 0}, second]),
        "successor": _task("no lookup"),  # made before readings were kept
    }
    lines, agree = rederive_digest(_digest(tmp_path / "d.json", tasks))
    assert agree, lines
    assert lines[:3] == [
        "reversal: recorded nudge-repairable, rederived nudge-repairable: agree "
        f"(recorded under rule r-test, rederived under {_rule()})",
        "reversal (lookup at ref+1): recorded nudge-repairable, rederived nudge-repairable: "
        f"agree (recorded under rule r-test, rederived under {_rule()})",
        f"successor: recorded no lookup; {NOT_RECORDED}",
    ]
    tasks["reversal"]["verdict"]["verdict"] = "downstream"
    lines, agree = rederive_digest(_digest(tmp_path / "d.json", tasks))
    assert not agree
    assert lines[0].startswith("reversal: recorded downstream, rederived nudge-repairable: ")
    assert "DISAGREE" in lines[0]


def test_readings_that_cannot_be_read_fail_naming_why(tmp_path, capsys):
    broken = hand_readings() | {"format": 99}
    path = _digest(tmp_path / "d.json", {"reversal": _task("no lookup", broken)})
    assert command.main(["--rederive", str(path)]) == 1
    assert "reversal: recorded no lookup; the readings cannot be read again" in (
        capsys.readouterr().out
    )


def test_writing_and_checking_still_need_the_run_folder(capsys):
    assert command.main(["--check", "docs/quick-run.json"]) == 2
    assert "give the reproduce --output folder" in capsys.readouterr().err


def _rule() -> str:
    from harness.attention.verdicts.rule_version import rule_version

    return rule_version()


def test_a_file_that_is_no_digest_is_one_line_naming_the_option(tmp_path, capsys):
    (tmp_path / "x.json").write_text(json.dumps({"figures": {}}))
    assert command.main(["--rederive", str(tmp_path / "x.json")]) == 2
    assert "error: --rederive" in capsys.readouterr().err
