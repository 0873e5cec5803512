"""`attentionspan results-doc --rederive DIGEST`: every verdict of a digest read again from
the readings it keeps; a digest made before readings were kept says so and fails nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.commands import results_doc as command
from harness.report.rederive import (
    NOT_RECORDED,
    REPLICATION_NOT_RECORDED,
    REPLICATION_NOT_RUN,
    rederive_digest,
)
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
def test_every_committed_verdict_is_rederived_from_its_digest_alone(name, capsys):
    """A committed digest that keeps readings: every verdict in it (each lookup's, each
    replication's) is derived again from them alone and agrees. One made before readings
    were kept: each model's line says not recorded, and nothing is invented or failed."""
    tasks = json.loads((REPO / "docs" / name).read_text())["tasks"]
    assert command.main(["--rederive", str(REPO / "docs" / name)]) == 0
    out = capsys.readouterr().out
    if any(t.get("readings") for t in tasks.values()):
        assert "DISAGREE" not in out and out.count(": agree") >= len(tasks), out
        assert "every verdict with readings is re-derived from them alone" in out
        return
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
    assert lines[::2][:3] == [
        "reversal: recorded nudge-repairable, rederived nudge-repairable: agree "
        f"(recorded under rule r-test, rederived under {_rule()})",
        "reversal (lookup at ref+1): recorded nudge-repairable, rederived nudge-repairable: "
        f"agree (recorded under rule r-test, rederived under {_rule()})",
        f"successor: recorded no lookup; {NOT_RECORDED}",
    ]
    # each followed by its replication's line: none recorded in these
    assert lines[1] == f"reversal (replication): {REPLICATION_NOT_RECORDED}"
    tasks["reversal"]["verdict"]["verdict"] = "downstream"
    lines, agree = rederive_digest(_digest(tmp_path / "d.json", tasks))
    assert not agree
    assert lines[0].startswith("reversal: recorded downstream, rederived nudge-repairable: ")
    assert "DISAGREE" in lines[0]


def test_the_replications_verdict_is_rederived_from_the_readings_its_record_keeps(tmp_path):
    """Each verdict's replication has its own line, from the readings its record keeps;
    a disagreement there fails as one of the verdict's does; a verdict without a record or
    read with --no-replicate says so and fails nothing."""
    readings = hand_readings()  # its verdict: nudge-repairable
    record = {"verdict": "nudge-repairable", "agrees": True, "readings": readings}
    reversal = _task("nudge-repairable", readings)
    reversal["verdict"]["replication"] = record
    skipped = _task("no lookup")
    skipped["verdict"]["replication"] = {"skipped": "--no-replicate: not read again"}
    tasks = {"reversal": reversal, "successor": _task("no lookup"), "addition": skipped}
    lines, agree = rederive_digest(_digest(tmp_path / "d.json", tasks))
    assert agree, lines
    rule = f"(recorded under rule r-test, rederived under {_rule()})"
    assert lines[1] == (
        "reversal (replication): recorded nudge-repairable, rederived nudge-repairable: agree "
        + rule
    )
    assert f"successor (replication): {REPLICATION_NOT_RECORDED}" in lines
    assert f"addition (replication): {REPLICATION_NOT_RUN}" in lines
    record["verdict"] = "downstream"
    lines, agree = rederive_digest(_digest(tmp_path / "d.json", tasks))
    assert not agree
    assert lines[0].endswith(f"agree {rule}")  # the first reading still agrees
    assert lines[1].startswith(
        "reversal (replication): recorded downstream, rederived nudge-repairable: DISAGREE"
    )
    # a record made before the replication kept readings: said, and nothing failed
    del record["readings"]
    lines, agree = rederive_digest(_digest(tmp_path / "d.json", tasks))
    assert agree and lines[1] == f"reversal (replication): recorded downstream; {NOT_RECORDED}"


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


SUPERVISION = sorted(p.name for p in (REPO / "docs").glob("supervision-*.json"))


@pytest.mark.parametrize("name", SUPERVISION)
def test_every_committed_supervision_verdict_is_rederived_from_its_digest_alone(name, capsys):
    """A supervision study's digest: each task's word and reason read again from the pooled
    figures it keeps, under the rule whose version it records."""
    from harness.attention.verdicts.rule_version import supervision_rule_version

    tasks = json.loads((REPO / "docs" / name).read_text())["tasks"]
    assert command.main(["--rederive", str(REPO / "docs" / name)]) == 0
    out = capsys.readouterr().out
    for task, found in tasks.items():
        word = found["verdict"]["verdict"]
        assert f"{task}: recorded {word}, rederived {word}: agree\n" in out, out
        assert found["verdict"]["rule_version"] == supervision_rule_version()


def test_a_supervision_verdict_its_figures_do_not_give_fails(tmp_path):
    from tests.harness.report.test_supervision_doc import read_verdict

    verdict = read_verdict(on_reference=0.9)  # attention is not the bottleneck
    arms = {"w0.3": {"role": "ladder"}, "wrong3-w0.3": {"role": "wrong_mask"}}
    tasks = {"successor": {"verdict": verdict, "arms": arms}}
    lines, agree = rederive_digest(_digest(tmp_path / "d.json", tasks))
    assert agree and lines[0].startswith(
        "successor: recorded attention is not the bottleneck, rederived attention is not "
        "the bottleneck: agree (recorded before rule versions were, rederived under s-"
    )
    verdict["numbers"]["on_reference"] = 0.1  # no longer on most wrong instances
    lines, agree = rederive_digest(_digest(tmp_path / "d.json", tasks))
    assert not agree and "rederived supervision did not take: DISAGREE" in lines[0]
    verdict["numbers"]["on_reference"] = 0.9
    verdict["reason"] = "another reason"  # the same word, another reason: a disagreement
    lines, agree = rederive_digest(_digest(tmp_path / "d.json", tasks))
    assert not agree and "(the reason differs: " in lines[0]
    del verdict["numbers"]
    lines, agree = rederive_digest(_digest(tmp_path / "d.json", tasks))
    assert not agree and "the figures cannot be read again" in lines[0]


@pytest.mark.parametrize("path", sorted((REPO / "docs").glob("*.json")), ids=lambda p: p.name)
def test_every_committed_digest_that_holds_a_verdict_records_its_rule_version(path):
    """A calibrated verdict's digest records `r-...`, a supervision study's `s-...`, in meta
    and beside each verdict; a digest of figures alone (the scratch walkthrough) holds no
    verdict to version."""
    data = json.loads(path.read_text())
    tasks = data.get("tasks") or {}
    if not tasks:
        assert '"verdict"' not in path.read_text()
        return
    prefix = "s-" if path.name.startswith("supervision-") else "r-"
    assert data["meta"]["rule_version"].startswith(prefix)
    for task in tasks.values():
        beside = (task.get("readings") or task["verdict"])["rule_version"]
        assert beside == data["meta"]["rule_version"]
