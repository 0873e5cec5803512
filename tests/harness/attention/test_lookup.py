"""The lookup as one value (harness.attention.lookup): made from a ranking once, at the offset
it was ranked at, with the lookup heads, their ID levels there and how the offset was found;
a ranking saved and reloaded (a stage file) gives the same value."""

from __future__ import annotations

import dataclasses

import pytest

from harness.attention.heads import HeadRanking
from harness.attention.lookup import Lookup, lookup_heads, profile_at, ranked_offset

FOUND = {
    "offset": 1,
    "mass": 0.81,
    "masses": {"-1": 0.05, "0": 0.17, "+1": 0.81},
    "heads": 4,
    "found": True,
    "text": "the lookup reads ref+1: ID mass 0.81, at the reference 0.17",
}


def ranking(shift: int = 1, found=FOUND, threshold: float = 0.0) -> HeadRanking:
    """2 x 3 heads ranked at ref + shift: (1, 2) and (0, 1) look up there, (0, 0) weighs the
    reference instead; per_row is the thresholded count when a threshold is given."""
    profile = {
        "0": [[0.6, 0.05, 0.0], [0.1, 0.0, 0.02]],
        "1": [[0.0, 0.5, 0.1], [0.2, 0.0, 0.9]],
    }
    at = profile[str(shift)]
    per_row = [[v * 0.5 for v in layer] for layer in at] if threshold else at
    flat = [(v, (la, h)) for la, layer in enumerate(at) for h, v in enumerate(layer)]
    order = [pair for _, pair in sorted(flat, key=lambda x: -x[0])]
    source = {"shift": shift, "threshold": threshold}
    if found:
        source["lookup_offset"] = found
    return HeadRanking(
        scores=at, per_row=per_row, order=order, offsets=profile, rows=10, source=source
    )


def test_the_lookup_holds_its_offset_heads_levels_and_how_it_was_found():
    lookup = Lookup.of(ranking())
    assert lookup.offset == 1
    assert lookup.heads == ((1, 2), (0, 1))  # ranking order; 0.2 < half of 0.9 is left out
    assert lookup.levels == (0.9, 0.5)
    assert lookup.text == FOUND["text"] and lookup.mass == 0.81
    assert lookup.masses == {-1: 0.05, 0: 0.17, 1: 0.81}  # the offsets as numbers, not keys
    assert lookup.candidate == 1
    assert lookup.covering == 2  # the top 2 ranked heads hold both lookup heads
    assert lookup.key == [list(h) for h in lookup.ranking.order]
    assert lookup.top(1) == [(1, 2)]
    assert lookup.levels_of([(0, 0), (1, 2)]) == [0.0, 0.9]  # the profile at ref+1


def test_the_levels_are_the_profile_at_the_offset_not_a_thresholded_count():
    plain, counted = Lookup.of(ranking()), Lookup.of(ranking(threshold=0.3))
    assert counted.levels == plain.levels == (0.9, 0.5)
    assert counted.levels_of([(0, 1)]) == [0.5]


def test_a_lookup_at_the_reference_reads_the_reference():
    lookup = Lookup.of(ranking(shift=0, found={"offset": 0, "text": "at the reference"}))
    assert lookup.offset == 0 and lookup.heads == ((0, 0),)
    assert lookup.levels == (0.6,)
    assert lookup.levels_of([(1, 2)]) == [0.02]


def test_a_ranking_without_a_found_record_still_gives_its_lookup():
    lookup = Lookup.of(ranking(found=None))
    assert lookup.offset == 1 and lookup.heads == ((1, 2), (0, 1))
    assert lookup.found == {} and lookup.text == "" and lookup.mass is None
    given = Lookup.of(ranking(found=None), {"offset": 1, "candidate": 2, "text": "second"})
    assert given.candidate == 2 and given.text == "second"


def test_a_reloaded_ranking_gives_the_same_lookup(tmp_path):
    first = Lookup.of(ranking())
    path = first.ranking.save(tmp_path)
    again = Lookup.of(HeadRanking.load(path))
    assert (again.offset, again.heads, again.levels) == (first.offset, first.heads, first.levels)
    assert again.found == first.found and again.covering == first.covering


def test_the_offset_must_be_the_one_the_ranking_was_ranked_at():
    lookup = Lookup.of(ranking())
    with pytest.raises(ValueError, match="ranked at ref\\+1"):
        dataclasses.replace(lookup, offset=0)
    with pytest.raises(ValueError, match="one level per lookup head"):
        dataclasses.replace(lookup, levels=(0.9,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        lookup.offset = 0


def test_the_ranking_helpers_read_the_offset_and_the_profile():
    ranked = ranking()
    assert ranked_offset(ranked) == 1
    assert ranked_offset(HeadRanking([[0.0]], [[0.0]], [(0, 0)])) == 0  # none recorded
    assert profile_at(ranked, 0) == ranked.offsets["0"] and profile_at(ranked, 2) is None
    assert lookup_heads(ranked) == [(1, 2), (0, 1)] == ranked.lookup()
    assert lookup_heads(ranked, offset=0) == [(0, 0)]  # another offset, asked for
    assert lookup_heads(ranked, share=0.2) == [(1, 2), (0, 1), (1, 0)]
    with pytest.raises(ValueError, match="share"):
        lookup_heads(ranked, share=0)


def test_recorded_lookup_reads_the_offset_from_each_stage_that_records_it():
    from harness.attention.lookup import recorded_lookup

    found = {"offset": 1, "mass": 0.8, "text": "the lookup reads ref+1", "heads": 4}
    ranking = {"source": {"shift": 1, "lookup_offset": found}, "offsets": {"1": []}}
    assert recorded_lookup(ranking) == found
    assert recorded_lookup({"source": {"shift": 2}}) == {"offset": 2}  # before the profile
    given = {"offset": -1, "found": False}
    assert recorded_lookup({"offset": given, "shift": -1}) == given  # the verdict's numbers
    assert recorded_lookup({"offset": {}, "shift": 3}) == {"offset": 3}
    assert recorded_lookup({"offset": 0, "mass": 0.4, "n": 2}) == {"offset": 0, "mass": 0.4}
    assert recorded_lookup({"shift": -2, "heads": [[0, 1]]}) == {"offset": -2}  # a diagnosis
    assert recorded_lookup({}) == {"offset": None}


def test_the_report_reads_the_offset_only_through_recorded_lookup():
    # a report module that picks the offset out of a key itself reads one of the places the
    # stages record it and misses the others (a ranking's source, the verdict's numbers)
    import re
    from pathlib import Path

    keys = re.compile(r"""get\(["'](shift|offset)["']|\[["']shift["']\]|lookup_offset""")
    report = Path(__file__).resolve().parents[3] / "harness" / "report"
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(report.glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if keys.search(line)
    ]
    assert found == []


# --- a lookup beats its null ------------------------------------------------------------------
def with_nulls(ranked: HeadRanking, nulls: dict[str, float]) -> HeadRanking:
    return dataclasses.replace(ranked, nulls=nulls)


def test_a_head_beats_its_null_a_quarter_of_the_way_to_all_of_the_weight():
    from harness.attention.lookup import beats_null
    from harness.attention.verdicts.vocabulary import NULL_MARGIN

    assert NULL_MARGIN == 0.25
    # the previous-token head of a model that works nowhere: 0.165 against a null of 0.095
    assert not beats_null(0.165, 0.095)
    assert not beats_null(0.095, 0.095)  # a head spreading its weight evenly reads its null
    bar = 0.095 + 0.25 * (1 - 0.095)
    assert beats_null(bar + 1e-9, 0.095) and not beats_null(bar - 1e-6, 0.095)
    assert beats_null(0.42, 0.01)  # the weakest lookup measured on a trained model


def test_only_heads_beating_their_null_look_up_and_the_lookup_keeps_each_beside_it():
    ranked = with_nulls(ranking(), {"0": 0.1, "1": 0.2})
    # ref+1's bar: 0.2 + 0.25 x 0.8 = 0.4; (0, 1) at 0.5 still looks up, (1, 2) at 0.9 too
    lookup = Lookup.of(ranked)
    assert lookup.heads == ((1, 2), (0, 1)) and lookup.null == 0.2 and lookup.exists
    assert lookup.evidence == {
        "offset": 1,
        "null": 0.2,
        "margin": 0.25,
        "exists": True,
        "heads": [
            {"head": [1, 2], "level": 0.9, "null": 0.2, "beats": True},
            {"head": [0, 1], "level": 0.5, "null": 0.2, "beats": True},
        ],
    }
    # a higher null: (0, 1) at 0.5 no longer beats it (bar 0.55), though half the top's
    assert Lookup.of(with_nulls(ranking(), {"1": 0.4})).heads == ((1, 2),)


def test_no_head_beating_its_null_is_no_lookup_and_an_unmeasured_null_claims_nothing():
    # every head within a quarter of the way from a null of 0.88 to 1: none looks up
    lookup = Lookup.of(with_nulls(ranking(), {"1": 0.88}))
    assert lookup.heads == () and lookup.levels == () and lookup.exists is False
    assert lookup.covering == 0
    # the top head is named beside its null even when it does not beat it
    assert lookup.evidence["heads"] == [
        {"head": [1, 2], "level": 0.9, "null": 0.88, "beats": False}
    ]
    # a ranking saved before nulls were measured: the heads as before, existence unknown
    old = Lookup.of(ranking())
    assert old.null is None and old.exists is None and old.heads == ((1, 2), (0, 1))
    assert old.evidence["heads"][0]["beats"] is None


def test_the_nulls_survive_a_save_and_a_reload(tmp_path):
    first = Lookup.of(with_nulls(ranking(), {"0": 0.1, "1": 0.2}))
    again = Lookup.of(HeadRanking.load(first.ranking.save(tmp_path)))
    assert again.null == 0.2 and again.evidence == first.evidence
