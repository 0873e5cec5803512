"""The lookup a head ranking found, as one value: where it reads and which heads read there.

    from harness.attention.lookup import Lookup
    lookup = Lookup.of(ranking)      # a `HeadRanking`, fresh or reloaded from a stage file
    lookup.offset                    # 1: the lookup reads ref+1
    lookup.heads, lookup.levels      # the heads that look up in distribution, each one's ID level
    lookup.null                      # what attention spread evenly would weigh there
    lookup.evidence                  # each head's level beside its null: does a lookup exist?
    lookup.text                      # "the lookup reads ref+1: ID mass 0.81, at the reference 0.17"

The offset decides the headline verdict: the ladder pushes at it, the controls move it, the
diagnosis reads each wrong row there and the verdict says it first. So it is read from the
ranking once, here (`ranked_offset`: the offset the ranking was ranked at, which
`harness.attention.heads.rank_lookup` makes the offset where the lookup reads), and every
stage after the ranking receives this value instead of reading the offset back out of the
ranking's `source` or a stage file's name.

A head counts as looking up only where it beats its null (`beats_null`): the weight
attention spread evenly over the same visible keys would put on the reference keys
(`HeadRanking.nulls`), by NULL_MARGIN of the way from that null to all of the row's weight
(`harness.attention.verdicts.vocabulary`). A previous-token head whose weight lands on the
reference on one row per answer, or a head that spreads its weight evenly, has a level but
no lookup.

The module sits below `harness.attention.heads` (the ranking's `lookup()` reads its heads
here), so it names `HeadRanking` only for type checking and reads the ranking through its
fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.attention.verdicts.vocabulary import NULL_MARGIN

if TYPE_CHECKING:
    from harness.attention.heads import HeadRanking

LOOKUP_SHARE = 0.5  # a head looks up in distribution with half the top head's weight or more


def ranked_offset(ranking: HeadRanking) -> int:
    """The offset k the ranking was ranked at (its scores are the weight on `ref + k`): the
    only place the offset is read from a ranking's record of how it was made."""
    return int(ranking.source.get("shift", 0))


def profile_at(ranking: HeadRanking, offset: int) -> list[list[float]] | None:
    """[layer][head] mean ID weight per row at `ref + offset` (the ranking's offset
    profile, keyed by the offset as text in the saved ranking), or None where unmeasured."""
    return ranking.offsets.get(str(int(offset)))


def null_at(ranking: HeadRanking, offset: int) -> float | None:
    """What attention spread evenly over each row's visible keys would weigh at
    `ref + offset`, averaged as a head's level is (`HeadRanking.nulls`); None where the
    ranking did not measure it (one saved before nulls were)."""
    null = ranking.nulls.get(str(int(offset)))
    return None if null is None else float(null)


def beats_null(level: float, null: float, margin: float | None = None) -> bool:
    """True when a head's ID level at an offset lies `margin` (default NULL_MARGIN) of the
    way from its null to all of the row's weight or further (level - null >= margin x
    (1 - null))."""
    margin = NULL_MARGIN if margin is None else margin
    return level - null >= margin * (1.0 - null)


def lookup_heads(
    ranking: HeadRanking, share: float = LOOKUP_SHARE, offset: int | None = None
) -> list[tuple[int, int]]:
    """The heads that look up in distribution, in ranking order: ID weight per row at the
    ranking's offset (or `offset`) at least `share` of the top head's and beating its null
    there (`beats_null`; no null check in a ranking without nulls); none when no head weighs
    anything there."""
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share}")
    where = ranked_offset(ranking) if offset is None else offset
    values = profile_at(ranking, where) or ranking.per_row
    null = null_at(ranking, where)
    top = max((v for layer in values for v in layer), default=0.0)
    if top <= 0:
        return []
    return [
        (la, h)
        for la, h in ranking.top(ranking.total)
        if values[la][h] >= share * top and (null is None or beats_null(values[la][h], null))
    ]


@dataclass(frozen=True)
class Lookup:
    """What the head ranking found. `ranking`: the ranking at the lookup's offset;
    `offset`: where the lookup reads (`ref + offset`); `heads`: the heads that look up in
    distribution, in ranking order (`lookup_heads`); `levels`: each one's mean ID weight
    per row at the offset; `found`: how the offset was found (`heads.lookup_offset`'s
    record: "mass", "masses", "text", "found", and "candidate": 2 for the second candidate
    of a near tie or split), empty for a ranking without one; `null`: what attention spread evenly
    over the same keys would weigh at the offset (`null_at`; None where unmeasured), every
    lookup head beats it. Build it with `Lookup.of`."""

    ranking: HeadRanking = field(repr=False)
    offset: int
    heads: tuple[tuple[int, int], ...]
    levels: tuple[float, ...]
    found: Mapping[str, Any] = field(default_factory=dict, repr=False)
    null: float | None = None

    def __post_init__(self):
        if self.offset != ranked_offset(self.ranking):
            raise ValueError(
                f"a lookup at ref{self.offset:+d} needs the ranking ranked there, got one "
                f"ranked at ref{ranked_offset(self.ranking):+d}"
            )
        if len(self.levels) != len(self.heads):
            raise ValueError(f"one level per lookup head ({len(self.heads)}), got {self.levels}")

    @classmethod
    def of(cls, ranking: HeadRanking, found: Mapping[str, Any] | None = None) -> Lookup:
        """The lookup of `ranking`: at the offset it was ranked at, with `found` (default: the
        record the pipeline keeps in the ranking's source, "lookup_offset")."""
        offset = ranked_offset(ranking)
        if found is None:
            found = ranking.source.get("lookup_offset") or {}
        heads = tuple(lookup_heads(ranking, offset=offset))
        values = profile_at(ranking, offset) or ranking.per_row
        levels = tuple(float(values[la][h]) for la, h in heads)
        return cls(ranking, offset, heads, levels, dict(found), null_at(ranking, offset))

    @property
    def exists(self) -> bool | None:
        """True when a head looks up at the offset beating its null, False when none does,
        None when the null was not measured (a ranking saved before it was)."""
        if self.null is None:
            return None
        return bool(self.heads)

    @property
    def evidence(self) -> dict[str, Any]:
        """Whether a lookup exists, as the verdict reads it and the digest keeps it: the
        offset, its null, the margin, and the top head and every lookup head each with its
        ID level beside the null (the top head named even when it does not beat it)."""
        values = profile_at(self.ranking, self.offset) or self.ranking.per_row
        named = list(dict.fromkeys([*self.top(1), *self.heads]))
        return {
            "offset": self.offset,
            "null": self.null,
            "margin": NULL_MARGIN,  # read when called: a test may set another
            "exists": self.exists,
            "heads": [
                {
                    "head": [la, h],
                    "level": float(values[la][h]),
                    "null": self.null,
                    "beats": None if self.null is None else beats_null(values[la][h], self.null),
                }
                for la, h in named
            ],
        }

    @property
    def text(self) -> str:
        """The sentence saying where the lookup reads ("" when the ranking has no record)."""
        return str(self.found.get("text", ""))

    @property
    def mass(self) -> float | None:
        """The top heads' mean ID weight per row at the offset, as `lookup_offset` found it."""
        return self.found.get("mass")

    @property
    def masses(self) -> dict[int, float]:
        """{offset: the top heads' mean ID mass there} (`heads.offset_masses`, as found)."""
        return {int(k): float(v) for k, v in (self.found.get("masses") or {}).items()}

    @property
    def candidate(self) -> int:
        """1: the run's own lookup; 2: the second candidate of a near tie or split."""
        return int(self.found.get("candidate", 1))

    @property
    def key(self) -> list[list[int]]:
        """The ranking's order as JSON lists: what a stage pushing ranked heads depends on."""
        return [list(h) for h in self.ranking.order]

    @property
    def covering(self) -> int:
        """How many of the top ranked heads it takes to hold every lookup head: the count
        the ladder always sweeps and a tie goes to (0 without lookup heads)."""
        order = [tuple(h) for h in self.ranking.order]
        return max((order.index(h) + 1 for h in self.heads), default=0)

    def top(self, n: int) -> list[tuple[int, int]]:
        return self.ranking.top(n)

    def levels_of(self, heads: Sequence[tuple[int, int]]) -> list[float] | None:
        """Each of `heads`' mean ID weight per row at the offset (the levels the diagnosis
        compares each head with); None when the ranking has no profile there or no heads."""
        values = profile_at(self.ranking, self.offset)
        if values is None or not heads:
            return None
        return [values[layer][head] for layer, head in heads]


def recorded_lookup(record: Mapping[str, Any]) -> dict[str, Any]:
    """Where the lookup read, as a results file records it: the one reader of the offset
    from a stage's saved dict, so that the report never picks it out of a key itself.
    Returns {"offset": k (None where not recorded)} with what finding it recorded beside
    it ("mass", "masses", "text", "heads"; "found": False where --shift gave it).

    `record`: a saved head ranking (its source: ranked at "shift", found as
    "lookup_offset"), the verdict's numbers (the "offset" record, else "shift"), an entry
    of the results' "lookups" ("offset", "mass") or a diagnosis ("shift")."""
    source = record.get("source")
    if isinstance(source, Mapping):  # a saved ranking: its own offset, then how it was found
        return {**(source.get("lookup_offset") or {}), "offset": source.get("shift")}
    found = record.get("offset")
    if isinstance(found, Mapping):  # the verdict's numbers
        return {**found, "offset": found.get("offset", record.get("shift"))}
    offset = record.get("shift") if found is None else found
    return {"offset": offset, **({"mass": record["mass"]} if "mass" in record else {})}
