"""Rule G of the calibrated verdict: a lookup exists before it is judged.

    from harness.attention.verdicts.exists import lookup_gate
    figures, failed = lookup_gate(test_curve, lookup.evidence)
    failed            # [] when the model works in distribution and a lookup head beats its null

Where the OOD errors look and what a push does locate a failure of the lookup only when the
model has one: a model that fails in distribution has no working lookup to compare its OOD
errors with (its ID levels are a failing model's), and heads that weigh the reference no
more than attention spread evenly over the same keys, or only by coincidence (a
previous-token head whose weight lands on the reference on one row per answer), read *on
the reference* out of distribution for the same reason they do in distribution: nothing.
Each figure is kept beside its bar or its null, so the digest shows what was read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.attention.verdicts.vocabulary import ID_WORKS, NULL_MARGIN


def lookup_gate(
    test: Mapping[str, Any], lookup: Mapping[str, Any] | None
) -> tuple[dict[str, Any], list[str]]:
    """Rule G: (the figures read, each beside its bar or null; what fails). The model works
    in distribution when the test curve's baseline ID exact match (teacher-forced on the ID
    test stream) is ID_WORKS or more; a lookup exists when a head at the offset beats its
    null (`lookup`: `Lookup.evidence`). A figure not measured fails nothing (None)."""
    id_exact = ((test.get("baseline") or {}).get("id") or {}).get("tf_exact")
    works = None if id_exact is None else id_exact >= ID_WORKS
    exists = (lookup or {}).get("exists")
    figures = {"id_exact": id_exact, "id_works": ID_WORKS, "works": works, "lookup": lookup}
    failed = []
    if works is False:
        failed.append(
            f"the model does not work in distribution: ID exact match {id_exact:.2f}, under "
            f"{ID_WORKS:g}: there is no working lookup whose failure out of distribution to judge"
        )
    if exists is False:
        null = lookup["null"]
        top = (lookup.get("heads") or [{}])[0]
        offset = int(lookup.get("offset", 0))
        where = "the reference" if offset == 0 else f"ref{offset:+d}"
        level = (
            f"the top head's ID level {top['level']:.3f}, " if top.get("level") is not None else ""
        )
        failed.append(
            f"no head at {where} beats its null: {level}attention spread evenly over the same "
            f"keys gives {null:.3f}, and a lookup head needs "
            f"{null + NULL_MARGIN * (1 - null):.3f} ({NULL_MARGIN:g} of the way to all of it)"
        )
    return figures, failed
