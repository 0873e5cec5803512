"""Attention on reference tokens, correct versus wrong (paper v2 Section 4.2, Table 2,
Figure 1, Appendix C): the measurement behind `attentionspan attention`.

    attentionspan attention --model runs/rev/final --configs reversal_id reversal_ood \\
        -n 200 --output OUT
    accelerate launch -m harness.commands.attention --model runs/rev/final ...   # sharded
    from harness.attention.analysis import AnalysisConfig, analyse_model
    results, figures = analyse_model(model, tokenizer, AnalysisConfig(configs=[...]))
    AnalysisConfig(configs=[...], score_convention="authors")     # as their released code
    records = written_records(scorer, instances, encodings, ids, finished)  # given answers

For each config, `num` instances of the `test` split (`attentionspan_datasets.splits`) go
through two passes with capture on (`harness.engine.capture`, eager attention):
- teacher-forced (as the authors): one forward over prompt + target; token i is correct
  when it is the argmax given the true prefix, from that same forward;
- free-running: greedy generation (the tokens the model actually wrote, the EOS too),
  recorded while it runs (tests/harness/attention: KV-cached rows equal those of one forward
  over prompt + generated tokens); the i-th written token uses the gold reference row i and
  is correct when it equals target[i].
Per scored token: the paper's score, the share of its rollout row (Abnar and Zuidema: per
layer the head mean plus the identity, rows renormalised, multiplied over layers) on its
reference positions, over the task-text columns only (instruction, few-shot block, chat
template and BOS left out, as the paper's text says: `score_convention="paper"`); and each
head's post-softmax share on the reference. Tokens whose reference is empty are counted
apart, not as zeros. `score_convention="authors"` computes the score as the authors'
released code does instead (`harness.attention.scores`: string reversal's denominator
leaves out prompt[0], the chat template's columns before the answer count, and rows without
a reference score 0), and adds their EOS row: one more token per instance (position
`target_len`, share 0, correct when the model predicts EOS there). Correct versus wrong:
means, counts, Welch's t-test and Hedges' g, overall and per length, with the
instance-aware figures beside; per head the mean share (a layer x head table).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from attentionspan_datasets.generation import DEFAULT_SEED
from harness.attention.scores import Convention, check_convention
from harness.foundation.options import cli

MODES = ("teacher_forced", "generate")  # the passes (interventions have INTERVENTION_MODES)
FIGURE_KINDS = ("correct", "wrong")  # one Figure 1 instance of each kind per config
MAX_FIGURE_COLUMNS = 120  # the Figure 1 map shows the last columns of longer texts


@dataclass
class AnalysisConfig:
    # `attentionspan attention`'s options are declared on these fields (harness.commands.
    # attention adds --model, --output, --viewer-num and the shared ones).
    configs: list[str] = field(
        default_factory=list,
        metadata=cli(
            "presets to score (default: the model's training preset and its OOD twin)",
            shared="configs",
        ),
    )
    num: int = field(default=200, metadata=cli("instances per config", shared="num"))
    seed: int = field(default=DEFAULT_SEED, metadata=cli("seed of the data", shared="seed"))
    split: str = field(
        default="test",
        metadata=cli("split the instances come from", choices=("train", "validation", "test")),
    )
    batch_size: int = field(default=16, metadata=cli("instances per batch", shared="batch_size"))
    modes: Sequence[str] = field(
        default=MODES,
        metadata=cli(
            "teacher_forced (as the authors) and/or generate (free-running greedy answers)",
            choices=MODES,
        ),
    )
    mixed_precision: str = field(
        default="no", metadata=cli("bf16 autocast, or none", shared="mixed_precision")
    )
    # "paper": the paper's text (v2 Appendix C); "authors": their released code.
    score_convention: Convention = field(
        default="paper",
        metadata=cli(
            "the attention score of Table 2: paper (the paper's text, v2 Appendix C) or "
            "authors (as their released code computes it: three differences, "
            "harness.attention.scores)",
            shared="score_convention",
        ),
    )

    def __post_init__(self) -> None:
        from harness.foundation.caps import MAX_BATCH, MAX_INSTANCES, check_int, check_unique

        check_int("-n/--num", self.num, 1, MAX_INSTANCES)
        check_int("--batch-size", self.batch_size, 1, MAX_BATCH)
        check_unique("--configs", self.configs)
        check_unique("--modes", self.modes)
        bad = [m for m in self.modes if m not in MODES]
        if bad or not self.modes:
            raise ValueError(f"modes must be among {', '.join(MODES)}, got {list(self.modes)}")
        check_convention(self.score_convention)


# --- the instances ------------------------------------------------------------------------
def load_instances(config: str, num: int, seed: int, split: str, start: int = 0, stop=None):
    """Rows `start..stop` of the config's split (ValueError naming an unknown config)."""
    from attentionspan_datasets.splits import iter_split

    stop = num if stop is None else stop
    instances = list(iter_split(config, seed=seed, split=split, start=start, stop=stop))
    for instance in instances:
        instance.config = config
    return instances


def check_has_masks(config: str, seed: int, split: str, probe: int = 20) -> None:
    """ValueError unless the config's instances carry reference positions."""
    instances = load_instances(config, probe, seed, split)
    if not any(any(row) for x in instances for row in x.reference):
        raise ValueError(
            f"config {config!r} has no reference masks (its instances carry no reference "
            "positions), so there is no attention on references to measure"
        )


# --- per-token records -------------------------------------------------------------------
def _token_records(instances, width, correct_rows, reference, shares, head_rows, mode, lengths):
    """One record per scored token: where it is, whether it is right, its rollout share
    (`shares[b, row]`: nan where the convention does not score the row) and its per-head
    shares ([layers, heads] float32, or None without a reference). In the shared layout the
    query that predicts target[i] is column `width - 1 + i`; a row of `correct_rows` one
    longer than the target holds the EOS row's correctness (the authors' convention): its
    record is position `target_len` with `eos` True. `lengths` is the engine's length rule
    (`harness.engine.scoring.LengthRule`)."""
    records = []
    for b, instance in enumerate(instances):
        length = lengths(instance)
        for i, correct in enumerate(correct_rows[b]):
            row = width - 1 + i
            has_ref = bool(reference[b, row].any())
            record = {
                "index": instance.index,
                "length": length,
                "mode": mode,
                "position": i,
                "correct": bool(correct),
                "share": float(shares[b, row]),
                "heads": head_rows[b, row].numpy().astype("float32") if has_ref else None,
            }
            if i == len(instance.target):
                record["eos"] = True
            records.append(record)
    return records


def _figure_case(instance, enc, batch, b, rolled, reference, correct, predicted):
    """Figure 1's data for one instance: the rollout rows of its target tokens over its
    task-text columns (the last MAX_FIGURE_COLUMNS), the reference cells, and labels
    (a wrong row shows gold->predicted)."""
    width, shift, n = batch.prompt_width, batch.shifts[b], enc.target_len
    start = shift + enc.prompt_offset
    columns = [*range(start, start + enc.prompt_len), *range(width, width + n)]
    rows = [width - 1 + i for i in range(n)]
    # Each row as a share of its task-text mass: the quantity the score is a part of (a deep
    # model's rollout puts almost everything on BOS and the instruction).
    shares = rolled[b][rows][:, columns]
    shares = shares / shares.sum(-1, keepdim=True).clamp_min(1e-30)
    columns = columns[-MAX_FIGURE_COLUMNS:]
    shares = shares[:, -len(columns) :]
    text = instance.prompt + instance.target
    return {
        "kind": "correct" if all(correct) else "wrong",
        "index": instance.index,
        "prompt": instance.prompt,
        "target": instance.target,
        "matrix": shares.tolist(),
        "mask": reference[b][rows][:, columns].tolist(),
        "keys": list(text)[-len(columns) :],
        "queries": [
            t if ok else f"{t}\u2192{p}" for t, ok, p in zip(instance.target, correct, predicted)
        ],
        "wrong_rows": [i for i, ok in enumerate(correct) if not ok],
    }


# --- the passes ---------------------------------------------------------------------------
def _shares(batch, rolled, reference, tasks, convention, length=None):
    """[batch, T]: the rollout score of every row under `convention` (`scores`: nan where
    the convention does not score a row)."""
    from harness.attention import scores

    columns = scores.score_columns(batch, convention, length, tasks=tasks)
    rows = scores.score_rows(batch, length) if convention == "authors" else None
    return scores.rollout_scores(rolled, reference, columns, convention, rows)


def analyse_batch(model, char_tok, instances, prompt, config: AnalysisConfig, want=(), scorer=None):
    """(token records of one batch for every pass, Figure 1 cases (kind, data): for each
    kind in `want`, the batch's shortest instance of that kind in the teacher-forced pass).
    The passes are the engine's (`harness.engine.scoring.Scorer`) under capture plans."""
    from harness.engine.scoring import Scorer

    if scorer is None:
        scorer = Scorer(model, char_tok, prompt, config.batch_size, config.mixed_precision)
    return _analyse(scorer, instances, scorer.encode(instances), config, want)


def _analyse(scorer, instances, encodings, config: AnalysisConfig, want=()):
    """(token records, figure cases) of one batch under each of `config.modes`."""
    records, figures = [], []
    if "teacher_forced" in config.modes:
        forced_records, figures = _teacher_forced(
            scorer, instances, encodings, config.score_convention, want
        )
        records += forced_records
    if "generate" in config.modes:
        records += _generated(scorer, instances, encodings, config.score_convention)
    return records, figures


def _teacher_forced(scorer, instances, encodings, convention: str, want):
    """The teacher-forced token records of one batch, and per kind in `want` the batch's
    best figure candidate (`_figure_rank`) as (kind, case)."""
    from harness.attention import scores
    from harness.engine.capture import AttentionPlan
    from harness.engine.scoring import collate_left

    char_tok = scorer.char_tok
    tasks = [x.task for x in instances]
    # teacher_forced_batch collates exactly this batch; the mask is built for it.
    batch = collate_left(encodings, char_tok.pad_id, with_answer=True)
    reference = batch.reference_mask()
    forced, rec = scorer.teacher_force(encodings, AttentionPlan(reference=reference, rollout=True))
    rolled = scores.rollout(rec.layer_maps)
    shares = _shares(batch, rolled, reference, tasks, convention)
    correct = forced.correct
    if convention == "authors":  # their EOS row: a token, right when EOS is predicted
        correct = [[*row, eos] for row, eos in zip(correct, forced.eos_correct)]
    records = _token_records(
        instances,
        batch.prompt_width,
        correct,
        reference,
        shares,
        rec.head_rows,
        "teacher_forced",
        scorer.length,
    )
    # Per kind, the batch's best candidate by `_figure_rank`.
    best: dict[str, int] = {}
    best_rank: dict[str, tuple[int, int]] = {}
    for b, instance in enumerate(instances):
        kind = "correct" if all(forced.correct[b]) else "wrong"
        rank = _figure_rank({"kind": kind, "target": instance.target, "index": instance.index})
        if kind in want and (kind not in best or rank < best_rank[kind]):
            best[kind], best_rank[kind] = b, rank
    figures = []
    for kind, b in best.items():
        predicted = [char_tok.decode([p]) for p in forced.predicted[b]]
        case = _figure_case(
            instances[b], encodings[b], batch, b, rolled, reference, forced.correct[b], predicted
        )
        figures.append((kind, case))
    return records, figures


def _generated(scorer, instances, encodings, convention: str) -> list[dict[str, Any]]:
    """The free-running token records of one batch (each with its instance's exact match),
    then one "generate-instance" record per instance."""
    from attentionspan_datasets.metrics import score
    from harness.engine.capture import AttentionPlan
    from harness.engine.scoring import answer_text, collate_left, max_new_tokens

    char_tok = scorer.char_tok
    max_new = max_new_tokens(encodings)
    # Recorded while generating: KV-cached rows equal those of one forward over prompt +
    # generated ids (tests/harness/attention), so no second pass is needed. Rows run up
    # to the last token fed back, past every scored one (<= prompt_width + target - 2).
    layout = collate_left(encodings, char_tok.pad_id, with_answer=False)
    full = layout.reference_mask(length=layout.prompt_width + max_new)
    plan = AttentionPlan(reference=full, rollout=True)
    generated, rec = scorer.generate(encodings, plan, max_new)
    tokens = written_records(
        scorer,
        instances,
        encodings,
        generated.ids,
        generated.finished,
        capture=(generated.batch, rec, full),
        convention=convention,
    )
    # Exact match as `attentionspan eval` scores it (the answer cut at target + 1).
    exact = {
        x.index: score(answer_text(char_tok, generated.ids[b], encodings[b]), x.target)[
            "exact_match"
        ]
        for b, x in enumerate(instances)
    }
    for r in tokens:
        r["exact"] = exact[r["index"]]
    return tokens + [
        {"index": x.index, "mode": "generate-instance", "exact": exact[x.index]} for x in instances
    ]


def written_records(
    scorer,
    instances,
    encodings,
    ids,
    finished,
    capture=None,
    lengths=None,
    convention: str = "paper",
) -> list[dict[str, Any]]:
    """Token records ("generate" mode) of answers the model wrote: the free-running pass's
    scoring, for the answers `generate` just wrote under capture (`capture`) or for answers
    written elsewhere (lm-eval's, `lm_eval_tasks.attention`), so the two cannot drift.

    `ids[b]`: the tokens the model wrote for `encodings[b]` before its stop (its EOS not
    included); `finished[b]`: an EOS followed them. The i-th written token uses the gold
    reference row i and is correct when it equals target[i]; an EOS within the target's
    length is a written (wrong) token, nothing past the target's length is scored.
    `capture`: (batch, record, mask) of a pass that already recorded these tokens under
    `AttentionPlan(reference=mask, rollout=True)`; without it, one forward over prompt +
    answer (`Scorer.forward`) records them: its rows equal those of the cached generation
    (tests/harness/attention). `lengths`: the length rule (default `scorer.length`).
    `convention`: the score's columns and rows (`scores.Convention`); under "authors" a
    model that wrote a whole answer's worth gets its EOS row too, right when the next token
    it wrote was EOS.
    """
    from harness.attention import scores

    scores.check_convention(convention)
    written = []
    for b, enc in enumerate(encodings):
        row = list(ids[b])
        gold = enc.input_ids[enc.target_offset : enc.target_offset + enc.target_len]
        count = min(len(row) + int(finished[b]), enc.target_len)
        correct = [i < len(row) and row[i] == gold[i] for i in range(count)]
        if convention == "authors" and len(row) >= enc.target_len:
            # Generation runs one token past every target, so this row was written.
            correct.append(len(row) == enc.target_len and bool(finished[b]))
        written.append(correct)
    if capture is None:
        capture = _answer_forward(scorer, encodings, ids, written)
    batch, rec, mask = capture
    length = rec.length
    reference = mask[:, :length, :length]
    rolled = scores.rollout(rec.layer_maps)
    # Only the authors' columns depend on the task (string reversal drops prompt[0]).
    tasks = [x.task for x in instances] if convention == "authors" else None
    shares = _shares(batch, rolled, reference, tasks, convention, length)
    return _token_records(
        instances,
        batch.prompt_width,
        written,
        reference,
        shares,
        rec.head_rows,
        "generate",
        lengths or scorer.length,
    )


def _answer_forward(scorer, encodings, ids, written):
    """(batch, record, mask) of one forward over each prompt and its written tokens, under
    the plan the free-running pass uses. Only the queries of scored tokens matter: the
    last scored token's query is the token before it, so the inputs stop there."""
    import dataclasses

    from harness.engine.capture import AttentionPlan
    from harness.engine.scoring import collate_left, max_new_tokens
    from harness.foundation.tokenization import IGNORE_INDEX

    rows = []
    for enc, row, scored in zip(encodings, ids, written):
        fed = enc.input_ids[: enc.target_offset] + list(row)[: max(len(scored) - 1, 0)]
        rows.append(dataclasses.replace(enc, input_ids=fed, labels=[IGNORE_INDEX] * len(fed)))
    batch = collate_left(rows, scorer.char_tok.pad_id, with_answer=True)
    # Sized as the free-running pass sizes it, so the same reference rows are kept.
    mask = batch.reference_mask(length=batch.prompt_width + max_new_tokens(encodings))
    plan = AttentionPlan(reference=mask, rollout=True)
    return batch, scorer.forward(batch, plan, attention_only=True), mask


# --- statistics ---------------------------------------------------------------------------
def _clean(value):
    """JSON-safe: nan and inf become None, recursively."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def compare(shares: Sequence[float], correct: Sequence[bool]) -> dict[str, Any]:
    """`scores.compare` (means, n, std per group, Welch t and p, Cohen's d, Hedges' g) with
    nan written as None."""
    from harness.attention import scores

    return _clean(scores.compare(list(shares), [bool(c) for c in correct]))


def summarise(records: list[dict[str, Any]], num_layers: int, num_heads: int) -> dict[str, Any]:
    """The numbers of one (config, mode): token accuracy, rollout correct vs error, the mean
    share per head, and the same per length and per target position."""
    import numpy as np

    from harness.attention import scores

    def block(rows, heads=True, aware=True):
        # Rows with a reference (the authors' convention also scores rows without one, 0).
        scored = [r for r in rows if r.get("heads") is not None]
        out = {
            "tokens": len(rows),
            "token_accuracy": sum(r["correct"] for r in rows) / len(rows) if rows else None,
            "rollout": compare([r["share"] for r in rows], [r["correct"] for r in rows]),
        }
        if aware:
            # Counting instances, not tokens: cluster bootstrap, paired, matched; direction.
            # (Only on the whole block: its matched test already holds length and position.)
            out["instance_aware"] = scores.table2_statistics(rows)
        if heads:
            table = np.full((num_layers, num_heads), np.nan)
            if scored:
                table = np.nanmean(np.stack([r["heads"] for r in scored]).astype(float), 0)
            out["heads"] = [[_clean(v) for v in layer] for layer in table.tolist()]
        return out

    out = block(records)
    by_length, by_position = defaultdict(list), defaultdict(list)
    for r in records:
        by_length[r["length"]].append(r)
        by_position[r["position"]].append(r)
    out["by_length"] = {
        str(k): block(by_length[k], heads=False, aware=False) for k in sorted(by_length)
    }
    out["by_position"] = {
        str(k): block(by_position[k], heads=False, aware=False)["rollout"]
        for k in sorted(by_position)
    }
    return out


# --- the run over configs -----------------------------------------------------------------
def analyse_model(
    model,
    tokenizer,
    config: AnalysisConfig,
    prompt=None,
    accelerator=None,
    progress: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(results per config, plot data per config). With an accelerator, each process takes
    a contiguous share of every config's instances (`harness.foundation.data.shard_indices`) and
    every
    process gets the gathered results."""
    from tqdm.auto import tqdm

    from harness.engine.scoring import Processes, Scorer, check_texts, eval_mode, model_shape
    from harness.foundation.data import shard_indices

    scorer = Scorer(model, tokenizer, prompt, config.batch_size, config.mixed_precision)
    procs = Processes.of(accelerator)
    num_layers, num_heads = model_shape(model)
    for name in config.configs:
        check_has_masks(name, config.seed, config.split)
    share = procs.share(config.num)
    # The main process counts its own share; the others work at the same pace.
    batches = math.ceil(len(shard_indices(0, config.num, procs.world, 0)) / config.batch_size)
    bar = tqdm(
        total=batches * len(config.configs),
        desc="attention",
        unit="batch",
        disable=not (progress and procs.main),
        dynamic_ncols=True,
    )
    results, plots = {}, {}
    try:
        with eval_mode(model):
            for name in config.configs:
                started = time.perf_counter()
                instances = load_instances(
                    name, config.num, config.seed, config.split, share.start, share.stop
                )
                check_texts(scorer.char_tok, instances)  # before any model call
                mine, figures = [], {}
                for chunk, encodings in scorer.batches(instances):
                    records, found = _analyse(scorer, chunk, encodings, config, FIGURE_KINDS)
                    mine += records
                    for kind, case in found:  # keep the best candidate of each kind only
                        figures[kind] = min(figures.get(kind, case), case, key=_figure_rank)
                    bar.update(1)
                mine = procs.gather_list(mine)
                figures = procs.gather_list(list(figures.items()))
                results[name], plots[name] = _config_results(
                    mine, figures, config, num_layers, num_heads
                )
                results[name]["seconds"] = round(time.perf_counter() - started, 2)
    finally:
        bar.close()
    return results, plots


def _figure_rank(case) -> tuple[int, int]:
    """Figure 1 shows the longest instance the model gets right and the shortest it gets
    wrong (ties: the lowest index): the most informative maps that stay readable."""
    length = len(case["target"])
    return (-length if case["kind"] == "correct" else length), case["index"]


def _config_results(records, figures, config, num_layers, num_heads):
    records.sort(key=lambda r: (r["mode"], r["index"], r.get("position", 0)))
    result: dict[str, Any] = {"instances": config.num, "split": config.split}
    for mode in config.modes:
        rows = [r for r in records if r["mode"] == mode]
        summary = summarise(rows, num_layers, num_heads)
        if mode == "generate":
            answers = [r for r in records if r["mode"] == "generate-instance"]
            summary["exact_match"] = (
                sum(r["exact"] for r in answers) / len(answers) if answers else None
            )
            result["generate"] = summary
        else:
            result.update(summary)
    chosen = {}
    for kind, case in sorted(figures, key=lambda f: _figure_rank(f[1])):
        chosen.setdefault(kind, case)  # the same choice whatever the sharding
    plot = {
        "figures": chosen,
        "tokens": {
            mode: [
                (r["position"], r["share"], r["correct"])
                for r in records
                if r["mode"] == mode and math.isfinite(r["share"])
            ]
            for mode in config.modes
        },
    }
    return result, plot
