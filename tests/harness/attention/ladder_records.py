"""A teacher-forced record of one instance, as the scoring engine writes it, built from a
prediction string: the dose-ladder tests' hand-made inputs, whose scores are known exactly."""

from __future__ import annotations

from attentionspan_datasets.tasks.base import Instance


def record(x: Instance, prediction: str) -> dict:
    right = [p == g for p, g in zip(prediction, x.target)]
    return {
        "config": x.config,
        "index": x.index,
        "length": len(x.target),
        "target_len": len(x.target),
        "tf_token_acc": sum(right) / len(right),
        "tf_exact": all(right),
        "tf_prediction": list(prediction),
    }
