"""What the pointer control measures: how often the answer follows a shifted push, and how
often the reference holds the answer at all (the repair-or-pointer verdict reads both,
`harness.attention.verdicts.repair_or_pointer`).

    from harness.attention.controls.following import answer_at_reference, pointer_following
    follow = pointer_following(instances, records["top4-C2-shift+3"], 3, records["baseline"])
    follow["excess"]                        # writes the pointed-at character more often
    answer_at_reference(instances)          # 1.0 on reversal, low on addition

The *pointer-following rate* is counted only on rows where the character at ref + k differs
from the gold one (where they agree, following and answering look the same), and compared
with the same rows without intervention. `answer_at_reference` is near 1 on copy tasks
(reversal), low where the reference is not the answer (addition's operand digits), where a
pointer cannot hand the answer over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _pointed_rows(instance, shift: int) -> list[tuple[int, str]]:
    """(target position i, the character at ref + shift) for every row whose reference is a
    single key, whose shifted key is a real earlier character, and whose pointed-at character
    differs from the gold one (where they agree, following and answering look the same)."""
    text = instance.prompt + instance.target
    first_query = len(instance.prompt) - 1  # the key before target[0] in text coordinates
    rows = []
    for i, keys in enumerate(instance.reference):
        if len(keys) != 1:
            continue
        key = keys[0] + shift
        if not 0 <= key <= first_query + i:  # the query predicting target[i] sits there
            continue
        if text[key] != instance.target[i]:
            rows.append((i, text[key]))
    return rows


def pointer_following(
    instances: Sequence[Any],
    records: Sequence[Mapping[str, Any]],
    shift: int,
    baseline: Sequence[Mapping[str, Any]] | None = None,
    field: str = "prediction",
) -> dict[str, Any]:
    """How often the answer holds the character at `ref + shift` instead of the gold one.

    `records` (and `baseline`) are per-instance records with `index` and `field`, the
    answer (free-running `prediction`, or teacher-forced `tf_prediction`). `rate`: the
    share of eligible rows (see `_pointed_rows`) whose answer character is the pointed-at
    one; `instance_rate`: the mean of per-instance rates (each instance counts once);
    `baseline_rate` and `excess` (rate - baseline_rate) on the same rows when a baseline is
    given. None where no row is eligible (e.g. every reference row has several keys).
    """
    by_index = {x.index: x for x in instances}
    base = {r["index"]: r for r in baseline} if baseline is not None else None

    def counts(rows_of):
        hits = total = 0
        per_instance = []
        for record in rows_of:
            instance = by_index.get(record["index"])
            if instance is None:
                raise ValueError(f"record index {record['index']} is not among the instances")
            rows = _pointed_rows(instance, shift)
            answer = record[field]
            mine = sum(1 for i, char in rows if i < len(answer) and answer[i] == char)
            hits += mine
            total += len(rows)
            if rows:
                per_instance.append(mine / len(rows))
        return hits, total, per_instance

    hits, total, per_instance = counts(records)
    out: dict[str, Any] = {
        "shift": shift,
        "tokens": total,
        "instances": len(per_instance),
        "rate": hits / total if total else None,
        "instance_rate": sum(per_instance) / len(per_instance) if per_instance else None,
    }
    if base is not None:
        missing = [r["index"] for r in records if r["index"] not in base]
        if missing:
            raise ValueError(f"baseline records lack instances {missing[:5]}")
        b_hits, b_total, _ = counts([base[r["index"]] for r in records])
        out["baseline_rate"] = b_hits / b_total if b_total else None
        out["excess"] = out["rate"] - out["baseline_rate"] if total and b_total else None
    return out


def answer_at_reference(instances: Sequence[Any]) -> float | None:
    """The share of target characters (with a reference) equal to a character at one of
    their reference keys: 1.0 for reversal, where a pointer could hand the answer over."""
    hits = total = 0
    for x in instances:
        text = x.prompt + x.target
        for i, keys in enumerate(x.reference):
            if keys:
                total += 1
                hits += any(text[k] == x.target[i] for k in keys)
    return hits / total if total else None
