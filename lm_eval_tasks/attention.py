"""Attention on reference tokens as lm-eval metrics: `--model_args ...,attention=true`.

    lm_eval --model attnspan-hf --model_args pretrained=DIR,attention=true \\
        --tasks attnspan_reversal_ood

For every answer lm-eval generated, the tokens the model wrote are scored with the
harness's own measurement, `harness.attention.analysis.written_records` (the records of
`attentionspan attention`'s free-running pass): `AttentionMeter.during_generation` runs
lm-eval's generation of a batch under `capture_attention` with the gold reference mask and
rollout, as the analysis records its own generation; a batch that is not in the harness's
layout (another task's rows in it) is measured after by `AttentionMeter.measure`, one
forward over prompt + answer under the same plan (its rows equal the cached generation's).
The i-th written token uses reference row i, the share is over the task-text columns.
The values travel to
`process_results` inside the answer itself: generate_until returns `Answer`s, `str`s that
carry their measurement (`.attention`), and lm-eval's default `take_first` filter hands the
same object on (README.md: why this extension point). `metrics(doc, answer)` turns them
into per-document values and `token_mean` / `best_head` aggregate them token by token, so
the task's numbers are the analysis's:

- `ref_share`: mean rollout share on the reference over all scored answer tokens
  (`generate.rollout` of `attentionspan attention`, correct and error pooled);
- `ref_share_correct` / `ref_share_wrong`: the same over the correct / wrong tokens
  (`correct_mean` / `wrong_mean`: NaN, said once in the log, where a task's answers have
  no token of that kind, e.g. no wrong token on an ID task the model has learnt);
- `ref_share_best_head`: the largest per-head mean share (max of its `generate.heads`);
- `ref_share_len_XX[_YY]`: `ref_share` of the instances in each length bin.
Tokens whose reference is empty are left out (the analysis counts them apart).
"""

from __future__ import annotations

import logging
import math
from typing import Any

SHARE = "ref_share"
CORRECT = "ref_share_correct"
WRONG = "ref_share_wrong"
BEST_HEAD = "ref_share_best_head"
MODEL_ARG = "attention"  # --model_args ...,attention=true
# Why a correct/wrong mean is NaN, said where lm-eval shows the number (its log, before the
# results table): a model that gets an ID task right has no wrong token to average.
NAN_NOTES = {
    WRONG: f"{WRONG} is NaN where a task's answers have no wrong target token (every scored "
    "answer token right, as on an ID task the model has learnt): nothing to average",
    CORRECT: f"{CORRECT} is NaN where a task's answers have no correct target token (every "
    "scored answer token wrong): nothing to average",
}

log = logging.getLogger(__name__)
_NOTED: set[str] = set()


class Answer(str):
    """An answer that carries the measurement of its tokens (`attention`, see
    `token_payload`). A `str`, so lm-eval's generate_until contract holds and every
    consumer that does not know it (filters that keep the object, logs, caches) sees the
    text."""

    attention: dict[str, Any]

    def __new__(cls, text: str, attention: dict[str, Any]) -> Answer:
        answer = super().__new__(cls, text)
        answer.attention = attention
        return answer

    def __reduce__(self):  # pickled by lm-eval's --use_cache: keep the measurement
        return (Answer, (str(self), self.attention))


def flag(value: Any) -> bool:
    """The `attention` model argument as a bool (lm-eval parses "true" / "false")."""
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, bool) or value in (0, 1):
        return bool(value)
    raise ValueError(f"--model_args {MODEL_ARG} must be true or false, got {value!r}")


def token_payload(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What an `Answer` carries, from the token records of one answer
    (`analysis.written_records`): per scored token its share (None: empty reference) and
    whether it is right; per head the summed share over the tokens with a reference and
    their count (a head table of means needs sums, not a mean of means)."""
    shares, correct, sums, counted = [], [], None, 0
    for r in sorted(records, key=lambda r: r["position"]):
        finite = math.isfinite(r["share"])
        shares.append(r["share"] if finite else None)
        correct.append(bool(r["correct"]))
        if finite:
            heads = r["heads"].astype("float64")
            sums = heads if sums is None else sums + heads
            counted += 1
    return {
        "shares": shares,
        "correct": correct,
        "head_sums": sums.tolist() if sums is not None else None,
        "head_tokens": counted,
    }


def metrics(doc: dict[str, Any], answer: str) -> dict[str, Any]:
    """Per-document values of the attention metrics ({} for an answer without a
    measurement, unless the run asked for one: then ValueError). Shares are lists of the
    document's token shares (a bin other than the document's gets []), the head value is
    {"sums", "tokens"}; `token_mean` and `best_head` aggregate them."""
    if not isinstance(answer, Answer):
        if doc.get(MODEL_ARG):
            raise ValueError(
                f"attnspan: --model_args {MODEL_ARG}=true, but the answers carry no attention "
                "values: only --model attnspan-hf measures them (and a --use_cache database "
                "written without attention=true serves answers without them)"
            )
        return {}
    found = answer.attention
    pairs = [(s, c) for s, c in zip(found["shares"], found["correct"]) if s is not None]
    shares = [s for s, _ in pairs]
    out: dict[str, Any] = {
        SHARE: shares,
        CORRECT: [s for s, c in pairs if c],
        WRONG: [s for s, c in pairs if not c],
        BEST_HEAD: {"sums": found["head_sums"], "tokens": found["head_tokens"]},
    }
    # The bins of exact match, renamed (`exact_match_len_11_14` -> `ref_share_len_11_14`).
    for name in doc["length_bins"]:
        out[bin_name(name)] = []
    out[bin_name(doc["length_bin"])] = shares
    return out


def bin_name(exact_match_bin: str) -> str:
    """`ref_share_len_XX[_YY]` for the exact-match bin metric `exact_match_len_XX[_YY]`."""
    return SHARE + exact_match_bin.removeprefix("exact_match")


def token_mean(items: list[list[float]]) -> float:
    """The mean over every token of every document (NaN when there is none): the
    analysis's token-level mean, not a mean of document means."""
    values = [v for item in items for v in item]
    return sum(values) / len(values) if values else math.nan


def correct_mean(items: list[list[float]]) -> float:
    """`token_mean` of `ref_share_correct`, saying once per run why it is NaN when it is."""
    return _group_mean(CORRECT, items)


def wrong_mean(items: list[list[float]]) -> float:
    """`token_mean` of `ref_share_wrong`, saying once per run why it is NaN when it is."""
    return _group_mean(WRONG, items)


def _group_mean(metric: str, items: list[list[float]]) -> float:
    value = token_mean(items)
    # Once per run, not once per task: a group of 68 tasks would repeat it 68 times.
    if math.isnan(value) and metric not in _NOTED:
        _NOTED.add(metric)
        log.warning("attnspan: %s (lm_eval_tasks/README.md)", NAN_NOTES[metric])
    return value


def best_head(items: list[dict[str, Any]]) -> float:
    """The largest per-head mean share, each head's mean over every token with a reference
    (NaN when there is none)."""
    import numpy as np

    kept = [item for item in items if item["tokens"]]
    if not kept:
        return math.nan
    sums = np.sum([np.asarray(item["sums"], dtype=np.float64) for item in kept], axis=0)
    return float((sums / sum(item["tokens"] for item in kept)).max())


class AttentionMeter:
    """The measurement of `attnspan-hf` with `attention=true`: the harness's scoring engine
    and free-running records on lm-eval's model. Refuses, in one line, a model whose
    attention capture cannot serve (`AttentionCaptureError`), before anything runs."""

    def __init__(self, model, char_tok, batch_size: int = 16):
        from harness.engine.scoring import Scorer

        check_capture(model, char_tok)
        self.scorer = Scorer(model, char_tok, batch_size=batch_size)

    def during_generation(self, pairs, context, attention_mask, generate, written):
        """(lm-eval's generated ids, one payload per row, or None where the batch is not
        the harness's layout): `generate()` run under capture with the batch's reference
        mask and rollout, and the rows scored by `analysis.written_records` as
        `attentionspan attention`'s free-running pass scores them (its rows recorded while
        generating equal those of one forward over prompt + answer). `pairs`: (instance,
        encoding) per row; `written(b, new_ids)`: the row's (written ids, finished)."""
        import torch

        from harness.attention.analysis import written_records
        from harness.engine.capture import AttentionPlan, capture_attention
        from harness.engine.scoring import collate_left, max_new_tokens

        instances, encodings = zip(*pairs)
        layout = collate_left(encodings, self.scorer.char_tok.pad_id, with_answer=False)
        same = torch.equal(layout.input_ids, context.cpu()) and (
            attention_mask is None or torch.equal(layout.attention_mask, attention_mask.cpu())
        )
        if not same:
            return generate(), None
        # Sized as the analysis sizes it: rows past the longest answer have no reference.
        mask = layout.reference_mask(length=layout.prompt_width + max_new_tokens(encodings))
        with capture_attention(
            self.scorer.model, AttentionPlan(reference=mask, rollout=True)
        ) as rec:
            out = generate()
        width = layout.prompt_width
        ids, finished = zip(*(written(b, out[b, width:].tolist()) for b in range(len(pairs))))
        records = written_records(
            self.scorer,
            instances,
            encodings,
            ids,
            finished,
            capture=(layout, rec, mask),
            lengths=_doc_length,
        )
        return out, [
            token_payload([r for r in records if r["index"] == x.index]) for x in instances
        ]

    def measure(self, items: list[tuple[Any, Any, list[int], bool]]) -> list[dict[str, Any]]:
        """One payload (`token_payload`) per (instance, encoding, written ids, finished),
        batch by batch, the longest prompt + answer together (least padding)."""
        from harness.attention.analysis import written_records
        from harness.engine.scoring import eval_mode

        order = sorted(range(len(items)), key=lambda j: -_fed_length(items[j]))
        payloads: list[dict[str, Any]] = [{}] * len(items)
        size = self.scorer.batch_size
        with eval_mode(self.scorer.model):
            for first in range(0, len(order), size):
                chosen = order[first : first + size]
                instances, encodings, ids, finished = zip(*(items[j] for j in chosen))
                records = written_records(
                    self.scorer, instances, encodings, ids, finished, lengths=_doc_length
                )
                for j, instance in zip(chosen, instances):
                    mine = [r for r in records if r["index"] == instance.index]
                    payloads[j] = token_payload(mine)
        return payloads


def _fed_length(item) -> int:
    # Prompt ids plus the written tokens the forward is fed.
    _, encoding, ids, _ = item
    return encoding.target_offset + len(ids)


def _doc_length(instance) -> int:
    # The document's own length bucket (custom_dataset computed it with the task's rule).
    return int(instance.length)


def check_capture(model, char_tok) -> None:
    """AttentionCaptureError (one line) unless one forward under `capture_attention`
    dispatches through the capture function."""
    import torch

    from harness.engine.capture import AttentionCaptureError, check_dispatch
    from harness.foundation.dispatch import input_device

    ids = torch.tensor([[char_tok.eos_id]], device=input_device(model))
    try:
        check_dispatch(model, ids)
    except AttentionCaptureError as error:
        raise AttentionCaptureError(
            f"attnspan-hf: --model_args {MODEL_ARG}=true cannot be served: {error}"
        ) from None
