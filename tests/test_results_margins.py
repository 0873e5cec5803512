"""A verdict whose flip margin is 3 instances or fewer is read on 128 test instances or more.

Each calibrated verdict of a committed digest (every candidate lookup's) and each one's
replication carries its stability and flip margin (`harness.attention.verdicts.stability`);
where the margin is 3 or fewer, the few instances that would change the word are too few
for 64 test instances, and the verdict is read again on 128 or more (docs/results.md says
the cost). A verdict that is not yet is named below with why; the list fails when an entry
no longer applies, so it only shrinks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.attention.verdicts.readings import streams
from harness.report.rederive import labelled_verdicts

REPO = Path(__file__).resolve().parents[1]
DIGESTS = sorted((REPO / "docs").glob("quick-run*.json"))
MARGIN = 3  # at most this many instances from another word ...
MINIMUM = 128  # ... wants at least this many test instances

NOT_YET = {  # (digest, verdict's label): why it is still read on fewer
    ("quick-run-reversal-gpu.json", "reversal (replication)"): (
        "made on the H200 GPU: reading it again at 128 needs the GPU, not lent since"
    ),
}


def readings_of(path: Path):
    """(label, flip margin, test instances) of every verdict and replication with both."""
    tasks = json.loads(path.read_text())["tasks"]
    for name, task in tasks.items():
        for label, verdict, readings in labelled_verdicts(name, task):
            if not isinstance(verdict, dict):
                continue
            record = verdict.get("replication")
            pairs = [(label, verdict, readings)]
            if isinstance(record, dict):
                pairs.append((f"{label} (replication)", record, record.get("readings")))
            for said, found, kept in pairs:
                margin = ((found.get("stability") or {}).get("flip_margin") or {}).get("margin")
                if margin is not None and isinstance(kept, dict):
                    yield said, margin, streams(kept)["test"]


def short_readings() -> set[tuple[str, str]]:
    return {
        (path.name, label)
        for path in DIGESTS
        for label, margin, test in readings_of(path)
        if margin <= MARGIN and test < MINIMUM
    }


@pytest.mark.parametrize("path", DIGESTS, ids=lambda p: p.name)
def test_a_small_flip_margin_is_read_on_128_instances_or_named(path):
    short = {key for key in short_readings() if key[0] == path.name}
    unnamed = sorted(short - set(NOT_YET))
    assert not unnamed, f"flip margin <= {MARGIN} on fewer than {MINIMUM} test instances"


def test_every_named_exception_still_applies():
    stale = sorted(set(NOT_YET) - short_readings())
    assert not stale, f"read on {MINIMUM} or more now, or gone: drop from NOT_YET: {stale}"


def test_the_check_reads_each_margin_and_its_instances(tmp_path):
    """The reading the test relies on: each verdict's margin beside its test instances."""
    digest = json.loads((REPO / "docs" / "quick-run-smollm2-reversal.json").read_text())
    path = tmp_path / "quick-run-x.json"
    path.write_text(json.dumps(digest))
    found = set(readings_of(path))
    assert ("reversal-seed2 (lookup at ref+1)", 1, 128) in found  # exactly 1 instance
    assert ("reversal-seed2 (lookup at ref+1) (replication)", 2, 128) in found
    assert not any(label == "reversal-seed1" for label, _, _ in found)  # none found: no margin
    margin = digest["tasks"]["reversal-seed2"]["lookups"][1]["verdict"]["stability"]
    margin["flip_margin"]["margin"] = 9
    path.write_text(json.dumps(digest))
    assert ("reversal-seed2 (lookup at ref+1)", 9, 128) in set(readings_of(path))
