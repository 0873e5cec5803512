"""The attnspan scores as an `evaluate` metric, loadable offline from this file's path.

    import evaluate, lm_eval_tasks
    metric = evaluate.load(lm_eval_tasks.EVALUATE_METRIC)
    metric.compute(predictions=["8916", "891"], references=["8916", "8916"], lengths=[4, 4])
    # {'exact_match': 0.5, 'partial_acc': 0.875, 'exact_match_len_04': 0.5}

It scores with `attentionspan_datasets.metrics.score` and summarises with
`metrics.aggregate` (overall and per length bin), the functions the lm-eval tasks and
`attentionspan eval` report through, so the three print the same numbers.
"""

from __future__ import annotations

import datasets
import evaluate

from attentionspan_datasets.metrics import aggregate, record

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
        if lengths is None:
            # Without lengths there are no bins: one group holds every answer.
            records = [record(p, r, 0) for p, r in zip(predictions, references)]
            result = aggregate(records, bins=[])
            return {"exact_match": result.exact_match, "partial_acc": result.partial_acc}
        if len(lengths) != len(references):
            raise ValueError(
                f"attentionspan_accuracy: got {len(lengths)} lengths for "
                f"{len(references)} predictions"
            )
        records = [record(p, r, n) for p, r, n in zip(predictions, references, lengths)]
        return aggregate(records, max_bins=max_bins).flat()
