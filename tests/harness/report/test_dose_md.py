"""harness.report.dose_md: the two-lookups section says why the run judged both (a near tie
or a split lookup), in the second lookup's own words, never a near tie it was not."""

from __future__ import annotations

import json
from pathlib import Path

from harness.report.dose_md import lookups_section

REPO = Path(__file__).resolve().parents[3]


def _task(digest: str, name: str) -> dict:
    return json.loads((REPO / "docs" / digest).read_text())["tasks"][name]


def test_a_split_lookup_is_said_as_one_and_not_as_a_near_tie():
    split = _task("quick-run-ffml.json", "ffml")  # the reference 0.98, ref+2 0.64
    first = lookups_section(split, "attentionspan reproduce")[0]
    assert "(a lookup split across two offsets: the reference (ID mass 0.98) and ref+2" in first
    assert "near tie" not in first and "within 10%" not in first
    tie = _task("quick-run.json", "successor")  # ref-1 0.81, ref-2 0.78
    first = lookups_section(tie, "attentionspan reproduce")[0]
    assert "(two candidate lookups: ref-1 (ID mass 0.81) and ref-2 (0.78), both within 10%" in first


def test_one_lookup_has_no_section_and_an_older_record_a_plain_reason():
    tie = _task("quick-run.json", "successor")
    assert lookups_section({**tie, "lookups": tie["lookups"][:1]}, "x") == []
    older = [tie["lookups"][0], {k: v for k, v in tie["lookups"][1].items() if k != "text"}]
    first = lookups_section({**tie, "lookups": older}, "x")[0]
    assert "(the second candidate lookup is judged too)" in first
