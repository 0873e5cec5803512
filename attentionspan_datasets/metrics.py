"""Scoring answers against targets, and the one aggregate of those scores (no model, no torch).

    from attentionspan_datasets.metrics import aggregate, record, score
    score("8916", "8916")                    # {'exact_match': 1.0, 'partial_acc': 1.0}
    records = [record("8916", "8916", length=4), record("891", "8916", length=4)]
    result = aggregate(records)              # overall, per exact length, per length bin
    result.exact_match, result.per_length[4].partial_acc     # 0.5, 0.875
    result.flat()    # {'exact_match': 0.5, 'partial_acc': 0.875, 'exact_match_len_04': 0.5}

`attentionspan eval`, lm-eval's `process_results` and the `evaluate` metric all score with
`score` and summarise with `aggregate`, so a number means the same wherever it is printed:
an overall figure is the mean over instances; a per-length figure the mean over the
instances of that exact length (`params["length"]`, the task's length bucket); a per-bin
figure the mean over the instances whose length falls in the bin (`length_bins`: at most 10
equal-width bins, lm-eval's `exact_match_len_XX[_YY]` metrics).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# End-of-sequence texts that models print; everything from the first one on is dropped.
EOS_TEXTS = ("</s>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<eos>", "<end_of_turn>")


def clean_prediction(prediction: str | None, eos_texts: tuple[str, ...] = EOS_TEXTS) -> str:
    """Cut the answer at the first EOS text or line break, then strip outer whitespace.

    Inner spaces are kept: some targets (successor) contain them.
    """
    text = prediction or ""
    for eos in eos_texts:
        text = text.split(eos, 1)[0]
    text = text.strip()
    return text.split("\n", 1)[0].rstrip()


def exact_match(prediction: str, target: str) -> float:
    """1.0 when the cleaned answer equals the target exactly, else 0.0."""
    return float(clean_prediction(prediction) == target)


def partial_accuracy(prediction: str, target: str) -> float:
    """The share of target characters that the answer has right at their position.

    The paper's "OOD partial accuracy". Missing characters count as wrong; characters past
    the target's end are ignored here (exact_match penalises them). An empty target scores
    1.0 only for an empty answer.
    """
    answer = clean_prediction(prediction)
    if not target:
        return float(answer == "")
    hits = sum(1 for a, t in zip(answer, target) if a == t)
    return hits / len(target)


def score(prediction: str, target: str) -> dict[str, float]:
    return {
        "exact_match": exact_match(prediction, target),
        "partial_acc": partial_accuracy(prediction, target),
    }


def bucket_metric_name(metric: str, bucket: int, last: int | None = None) -> str:
    """The name of a per-length metric, e.g. `exact_match_len_07`, or for a bucket of
    lengths `bucket..last`, `exact_match_len_11_14`."""
    if last is None or last == bucket:
        return f"{metric}_len_{bucket:02d}"
    return f"{metric}_len_{bucket:02d}_{last:02d}"


def length_bins(lengths: Iterable[int], max_bins: int = 10) -> list[tuple[int, int]]:
    """Split the range min(lengths)..max(lengths) into at most `max_bins` equal-width bins.

    A range of at most `max_bins` lengths gets one bin per length; a wider one (string
    reversal OOD: 11-50) gets bins of ceil(span / max_bins) lengths, so each bin holds
    enough instances to be worth a number. Bins that hold no length are left out (the
    retrieval OOD presets have 20 and 30 vectors only: two bins, not six with four empty).
    Returns inclusive (first, last) pairs.
    """
    if max_bins < 1:
        raise ValueError(f"max_bins must be >= 1, got {max_bins}")
    values = list(lengths)
    if not values:
        return []
    low, high = min(values), max(values)
    width = -(-(high - low + 1) // max_bins)
    present = {(value - low) // width for value in values}
    return [(low + k * width, min(low + (k + 1) * width - 1, high)) for k in sorted(present)]


def bin_of(length: int, bins: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
    """The bin that holds `length`, or None when it lies outside all of them."""
    for first, last in bins:
        if first <= length <= last:
            return first, last
    return None


# The one list of metric names, in the order every table and record lists them: the two
# scores of an answer (`score`), then the teacher-forced token accuracy that the harness
# adds (it needs a model: `harness.evaluation.evaluate`). Every other list of metrics derives from
# it.
ALL_METRICS = ("exact_match", "partial_acc", "tf_token_acc")
METRICS = ALL_METRICS[:2]  # what `score` gives an answer and `aggregate` means


def record(prediction: str | None, target: str, length: int) -> dict[str, float | int]:
    """One instance's scores with its length: the input `aggregate` expects."""
    return {"length": length, **score(prediction or "", target)}


@dataclass(frozen=True)
class Scores:
    """Means of a group of instances; NaN for an empty group."""

    count: int
    exact_match: float
    partial_acc: float

    @classmethod
    def of(cls, rows: Sequence[Mapping[str, float]]) -> Scores:
        if not rows:
            return cls(0, math.nan, math.nan)
        # sum / count, as lm-eval's `mean` aggregation computes it, to the last bit
        means = [sum(float(row[m]) for row in rows) / len(rows) for m in METRICS]
        return cls(len(rows), *means)

    def to_dict(self) -> dict[str, float | int]:
        return {
            "count": self.count,
            "exact_match": self.exact_match,
            "partial_acc": self.partial_acc,
        }


@dataclass(frozen=True)
class Aggregate:
    """What `aggregate` returns: overall means, and the same per exact length and per bin."""

    overall: Scores
    per_length: dict[int, Scores] = field(default_factory=dict)
    per_bin: dict[tuple[int, int], Scores] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return self.overall.count

    @property
    def exact_match(self) -> float:
        return self.overall.exact_match

    @property
    def partial_acc(self) -> float:
        return self.overall.partial_acc

    def flat(self) -> dict[str, float]:
        """lm-eval's metric names: exact_match, partial_acc and exact_match per bin
        (`exact_match_len_07`, `exact_match_len_11_14`); bins without instances left out."""
        out = {"exact_match": self.exact_match, "partial_acc": self.partial_acc}
        for (first, last), scores in self.per_bin.items():
            if scores.count:
                out[bucket_metric_name("exact_match", first, last)] = scores.exact_match
        return out

    def to_dict(self) -> dict:
        """JSON-ready: {"count", "exact_match", "partial_acc", "per_length": {"4": {...}},
        "per_bin": {"11-14": {...}}} (JSON keys are strings)."""
        return {
            **self.overall.to_dict(),
            "per_length": {str(k): v.to_dict() for k, v in self.per_length.items()},
            "per_bin": {
                (f"{a}" if a == b else f"{a}-{b}"): v.to_dict()
                for (a, b), v in self.per_bin.items()
            },
        }


def aggregate(
    records: Iterable[Mapping[str, float]],
    length_key: str = "length",
    bins: Sequence[tuple[int, int]] | None = None,
    max_bins: int = 10,
) -> Aggregate:
    """Overall, per exact length and per length bin means of `exact_match` and
    `partial_acc` over `records` (mappings with those keys and `length_key`; see `record`).

    `bins`: inclusive (first, last) length bins, e.g. a preset's fixed lm-eval bins; by
    default `length_bins` of the records' lengths (at most `max_bins`). A length outside the
    given bins gets a bin of its own. Groups are in length order.
    """
    rows = list(records)
    for row in rows:
        missing = [key for key in (*METRICS, length_key) if key not in row]
        if missing:
            raise ValueError(f"aggregate: a record lacks {', '.join(missing)}: {dict(row)!r}")
    lengths = [int(row[length_key]) for row in rows]
    by_length: dict[int, list] = {}
    for length, row in sorted(zip(lengths, rows), key=lambda pair: pair[0]):
        by_length.setdefault(length, []).append(row)
    bins = list(bins) if bins is not None else length_bins(lengths, max_bins)
    by_bin: dict[tuple[int, int], list] = {tuple(b): [] for b in bins}
    for length, group in by_length.items():
        found = bin_of(length, bins) or (length, length)
        by_bin.setdefault(found, []).extend(group)
    return Aggregate(
        overall=Scores.of(rows),
        per_length={length: Scores.of(group) for length, group in by_length.items()},
        per_bin={b: Scores.of(by_bin[b]) for b in sorted(by_bin)},
    )
