"""Scoring a model's answer against an instance's target, as text (no model, no torch).

    from attentionspan_datasets.metrics import score
    score("8916", "8916")  # {'exact_match': 1.0, 'partial_acc': 1.0}

Both lm-eval's `process_results` and the harness's evaluation call these functions, so a
number means the same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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
    enough instances to be worth a number. Returns inclusive (first, last) pairs.
    """
    if max_bins < 1:
        raise ValueError(f"max_bins must be >= 1, got {max_bins}")
    values = list(lengths)
    if not values:
        return []
    low, high = min(values), max(values)
    width = -(-(high - low + 1) // max_bins)
    return [(start, min(start + width - 1, high)) for start in range(low, high + 1, width)]


def bin_of(length: int, bins: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
    """The bin that holds `length`, or None when it lies outside all of them."""
    for first, last in bins:
        if first <= length <= last:
            return first, last
    return None
