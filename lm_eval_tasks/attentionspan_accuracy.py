"""The attnspan scores as an `evaluate` metric, loadable offline from this file's path.

    import evaluate, lm_eval_tasks
    metric = evaluate.load(lm_eval_tasks.EVALUATE_METRIC)
    metric.compute(predictions=["8916", "891"], references=["8916", "8916"], lengths=[4, 4])
    # {'exact_match': 0.5, 'partial_acc': 0.875, 'exact_match_len_04': 0.5}

It wraps `attentionspan_datasets.metrics`, the functions the lm-eval tasks and the harness
score with, so the three report the same numbers.
"""

from __future__ import annotations

import datasets
import evaluate

from attentionspan_datasets.metrics import bin_of, bucket_metric_name, length_bins, score

_DESCRIPTION = """\
Exact match and partial accuracy of answers to AttentionSpan tasks ("Attend or Perish:
Benchmarking Attention in Algorithmic Reasoning"). An answer is cleaned first: cut at the
first EOS text (</s>, <|endoftext|>, <|im_end|>, ...) or line break, outer whitespace
stripped. exact_match: the cleaned answer equals the target. partial_acc: the share of
target characters that the answer has right at their position (the paper's OOD partial
accuracy). With `lengths`, exact match per length bin as well: at most `max_bins` (10)
equal-width bins over the range of the given lengths, named exact_match_len_07 or
exact_match_len_11_14.
"""

_KWARGS_DESCRIPTION = """\
Args:
    predictions (list of str): model answers, as generated.
    references (list of str): targets.
    lengths (list of int, optional): each instance's length (`params["length"]`).
    max_bins (int, optional): most length bins to report, default 10.
Returns:
    exact_match (float), partial_acc (float), and exact_match_len_* (float) per length bin.
Examples:
    >>> metric = evaluate.load(lm_eval_tasks.EVALUATE_METRIC)
    >>> metric.compute(predictions=["cba </s>"], references=["cba"])
    {'exact_match': 1.0, 'partial_acc': 1.0}
"""

_CITATION = """\
@article{attend-or-perish,
  title = {Attend or Perish: Benchmarking Attention in Algorithmic Reasoning},
  year = {2025}
}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class AttentionspanAccuracy(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(self, predictions, references, lengths=None, max_bins=10):
        if not references:
            raise ValueError("attentionspan_accuracy: no predictions to score")
        rows = [score(p, r) for p, r in zip(predictions, references)]
        result = {
            name: sum(row[name] for row in rows) / len(rows)
            for name in ("exact_match", "partial_acc")
        }
        if lengths is None:
            return result
        if len(lengths) != len(rows):
            raise ValueError(
                f"attentionspan_accuracy: got {len(lengths)} lengths for {len(rows)} predictions"
            )
        bins = length_bins(lengths, max_bins)
        per_bin: dict[tuple[int, int], list[float]] = {b: [] for b in bins}
        for length, row in zip(lengths, rows):
            per_bin[bin_of(length, bins)].append(row["exact_match"])
        for b, values in per_bin.items():
            if values:
                result[bucket_metric_name("exact_match", *b)] = sum(values) / len(values)
        return result
