"""lm-eval's log lines about the attnspan tasks that tell a user nothing, dropped.

    from lm_eval_tasks.quiet import quiet_lm_eval_warnings
    quiet_lm_eval_warnings()      # once: a filter on two of lm-eval's loggers

`registration.patch_task_manager` and `dataset` (which lm-eval imports while it reads our
YAML) both install it, so it works with the start-up hooks on or off. Imports nothing but
logging.
"""

from __future__ import annotations

import logging

# lm-eval's log lines that say nothing to a user of our tasks (see _AttnspanRecordFilter).
KWARGS_WARNING = "Custom kwargs can be passed to `--metadata`"
AGGREGATION_WARNING = "No aggregation function defined for metric exact_match_len_"
COUNTS_WARNING = "Metrics were not scored on the same number of documents"


class _AttnspanRecordFilter:
    """Drops three of lm-eval's log records when they are about an attnspan task:
    - "attnspan_x: Custom kwargs can be passed to `--metadata` ... For example
      --metadata='{"max_seq_lengths":[4096, 8192]}'", logged for every task with a
      `custom_dataset` on every run, with another task's example; our options are
      `--metadata '{"attnspan": ...}'` (lm_eval_tasks/README.md), and a wrong one stops the
      run with the list of allowed keys;
    - "[attnspan_x] No aggregation function defined for metric exact_match_len_NN. Using
      mean.", once per length outside the preset's bins when task fields are changed:
      the YAML's metric list cannot name lengths known only at run time, `mean` is the
      right aggregation (only that length's documents report the metric), and the task
      says so itself in one line (dataset._note_lengths_outside_bins);
    - "[attnspan_x] Metrics were not scored on the same number of documents (...)", which
      follows from the same metrics (each is scored on its length's documents only); the
      group averages exact_match and partial_acc, which every document reports, unweighted.
    Records about other tasks pass unchanged."""

    attnspan_filter = True

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if KWARGS_WARNING in message:
            return not message.startswith("attnspan")
        if AGGREGATION_WARNING in message or COUNTS_WARNING in message:
            return not message.startswith("[attnspan")
        return True


def quiet_lm_eval_warnings() -> None:
    """Install _AttnspanRecordFilter on the two lm-eval loggers that log them (once)."""
    for name in ("lm_eval.api.task", "lm_eval.evaluator_utils"):
        logger = logging.getLogger(name)
        if not any(getattr(f, "attnspan_filter", False) for f in logger.filters):
            logger.addFilter(_AttnspanRecordFilter())
