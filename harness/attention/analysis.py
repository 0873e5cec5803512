"""Attention on reference tokens, correct versus wrong (paper v2 Section 4.2, Table 2,
Figure 1, Appendix C): the measurement behind `attentionspan attention`.

    attentionspan attention --model runs/rev/final --configs reversal_id reversal_ood \\
        -n 200 --output OUT
    accelerate launch -m harness.commands.attention --model runs/rev/final ...   # sharded
    from harness.attention.analysis import AnalysisConfig, analyse_model
    results, figures = analyse_model(model, tokenizer, AnalysisConfig(configs=[...]))

For each config, `num` instances of the `test` split (`attentionspan_datasets.splits`) go
through two passes with capture on (`harness.attention.capture`, eager attention):
- teacher-forced (as the authors): one forward over prompt + target; token i is correct
  when it is the argmax given the true prefix, from that same forward;
- free-running: greedy generation (the tokens the model actually wrote, the EOS too), then
  one forward over prompt + generated tokens (tests/harness/attention: its rows equal those of
  KV-cached generation); the i-th written token uses the gold reference row i and is
  correct when it equals target[i].
Per scored token: the paper's score, the share of its rollout row (Abnar and Zuidema: per
layer the head mean plus the identity, rows renormalised, multiplied over layers) on its
reference positions, over the task-text columns only (instruction, few-shot block, chat
template and BOS left out, as the authors do); and each head's post-softmax share on the
reference. Tokens whose reference is empty are counted apart, not as zeros. Correct versus
wrong: means, counts, Welch's t-test and Hedges' g, overall and per length; per head the
mean share (a layer x head table).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from attentionspan_datasets.generation import DEFAULT_SEED

MODES = ("teacher_forced", "generate")
MODE_TITLES = {"teacher_forced": "teacher-forced", "generate": "free-running"}
FIGURE_KINDS = ("correct", "wrong")  # one Figure 1 instance of each kind per config
MAX_FIGURE_COLUMNS = 120  # the Figure 1 map shows the last columns of longer texts


@dataclass
class AnalysisConfig:
    configs: list[str] = field(default_factory=list)
    num: int = 200  # instances per config
    seed: int = DEFAULT_SEED
    split: str = "test"
    batch_size: int = 16
    modes: Sequence[str] = MODES
    mixed_precision: str = "no"

    def __post_init__(self) -> None:
        from harness.caps import MAX_BATCH, MAX_INSTANCES, check_int, check_unique

        check_int("-n/--num", self.num, 1, MAX_INSTANCES)
        check_int("--batch-size", self.batch_size, 1, MAX_BATCH)
        check_unique("--configs", self.configs)
        check_unique("--modes", self.modes)
        bad = [m for m in self.modes if m not in MODES]
        if bad or not self.modes:
            raise ValueError(f"modes must be among {', '.join(MODES)}, got {list(self.modes)}")


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
def _attention_only(model) -> dict[str, Any]:
    """Forward options for a pass run only for its attention: one position of logits
    (Gemma 3's 262k-word output layer costs as much as its layers over a whole batch)."""
    import inspect

    accepted = inspect.signature(model.forward).parameters
    return {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}


def _token_records(instances, width, correct_rows, reference, shares, head_rows, mode):
    """One record per scored token: where it is, whether it is right, its rollout share
    (nan without a reference) and its per-head shares ([layers, heads] float32, or None).
    In the shared layout the query that predicts target[i] is column `width - 1 + i`."""
    records = []
    for b, instance in enumerate(instances):
        length = int(instance.params.get("length", len(instance.prompt)))
        for i, correct in enumerate(correct_rows[b]):
            row = width - 1 + i
            has_ref = bool(reference[b, row].any())
            records.append(
                {
                    "index": instance.index,
                    "length": length,
                    "mode": mode,
                    "position": i,
                    "correct": bool(correct),
                    "share": float(shares[b, row]) if has_ref else math.nan,
                    "heads": head_rows[b, row].numpy().astype("float32") if has_ref else None,
                }
            )
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
def analyse_batch(model, char_tok, instances, prompt, config: AnalysisConfig, want=()):
    """(token records of one batch for every mode, Figure 1 cases (kind, data): for each
    kind in `want`, the batch's shortest instance of that kind in the teacher-forced pass)."""
    import torch

    from attentionspan_datasets.metrics import score
    from harness.attention import scores
    from harness.attention.capture import AttentionPlan, capture_attention
    from harness.attention.positions import reference_mask, task_columns
    from harness.inference import collate_left, generate_batch, teacher_forced_batch

    encodings = [prompt.encode(char_tok, x) for x in instances]
    records, figures = [], []
    if "teacher_forced" in config.modes:
        # teacher_forced_batch collates exactly this batch; the mask is built for it.
        batch = collate_left(encodings, char_tok.pad_id, with_answer=True)
        reference = reference_mask(batch)
        with capture_attention(model, AttentionPlan(reference=reference, rollout=True)) as rec:
            forced = teacher_forced_batch(model, char_tok, encodings, config.mixed_precision)
        rolled = scores.rollout(rec.layer_maps)
        shares = scores.rollout_scores(rolled, reference, task_columns(batch))
        records += _token_records(
            instances,
            batch.prompt_width,
            forced.correct,
            reference,
            shares,
            rec.head_rows,
            "teacher_forced",
        )
        # Per kind, the batch's best candidate by `_figure_rank`.
        best: dict[str, int] = {}
        best_rank: dict[str, tuple[int, int]] = {}
        for b, instance in enumerate(instances):
            kind = "correct" if all(forced.correct[b]) else "wrong"
            rank = _figure_rank({"kind": kind, "target": instance.target, "index": instance.index})
            if kind in want and (kind not in best or rank < best_rank[kind]):
                best[kind], best_rank[kind] = b, rank
        for kind, b in best.items():
            predicted = [char_tok.decode([p]) for p in forced.predicted[b]]
            case = _figure_case(
                instances[b],
                encodings[b],
                batch,
                b,
                rolled,
                reference,
                forced.correct[b],
                predicted,
            )
            figures.append((kind, case))
    if "generate" in config.modes:
        max_new = max(e.target_len for e in encodings) + 1
        # Generation runs under the same (eager) attention function as the analysis pass.
        with capture_attention(model, AttentionPlan()):
            generated = generate_batch(model, char_tok, encodings, max_new, config.mixed_precision)
        batch = generated.batch
        length = batch.total_len
        reference = reference_mask(batch, length=batch.prompt_width + max_new)
        reference = reference[:, :length, :length].contiguous()
        with (
            torch.inference_mode(),
            capture_attention(model, AttentionPlan(reference=reference, rollout=True)) as rec,
        ):
            model(**batch.model_inputs(model.device), **_attention_only(model))
        rolled = scores.rollout(rec.layer_maps)
        shares = scores.rollout_scores(rolled, reference, task_columns(batch))
        written = []
        for b, enc in enumerate(encodings):
            ids = generated.ids[b]
            gold = enc.input_ids[enc.target_offset : enc.target_offset + enc.target_len]
            # The tokens the model wrote, its EOS included (an early EOS is a wrong token).
            count = min(len(ids) + int(generated.finished[b]), enc.target_len)
            written.append([i < len(ids) and ids[i] == gold[i] for i in range(count)])
        tokens = _token_records(
            instances, batch.prompt_width, written, reference, shares, rec.head_rows, "generate"
        )
        # Exact match as `attentionspan eval` scores it (the answer cut at target + 1).
        exact = {
            x.index: score(
                char_tok.decode(generated.ids[b][: len(x.target) + 1], skip_special_tokens=True),
                x.target,
            )["exact_match"]
            for b, x in enumerate(instances)
        }
        for r in tokens:
            r["exact"] = exact[r["index"]]
        records += tokens
        records += [
            {"index": x.index, "mode": "generate-instance", "exact": exact[x.index]}
            for x in instances
        ]
    return records, figures


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

    def block(rows, heads=True):
        scored = [r for r in rows if math.isfinite(r["share"])]
        out = {
            "tokens": len(rows),
            "token_accuracy": sum(r["correct"] for r in rows) / len(rows) if rows else None,
            "rollout": compare([r["share"] for r in rows], [r["correct"] for r in rows]),
        }
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
    out["by_length"] = {str(k): block(by_length[k], heads=False) for k in sorted(by_length)}
    out["by_position"] = {
        str(k): block(by_position[k], heads=False)["rollout"] for k in sorted(by_position)
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
    a contiguous share of every config's instances (`harness.data.shard_indices`) and every
    process gets the gathered results."""
    from tqdm.auto import tqdm

    from harness.attention.capture import model_shape
    from harness.data import PromptConfig, shard_indices
    from harness.tokenization import CharTokenizer

    char_tok = CharTokenizer(tokenizer)
    prompt = prompt or PromptConfig()
    world = accelerator.num_processes if accelerator is not None else 1
    rank = accelerator.process_index if accelerator is not None else 0
    num_layers, num_heads = model_shape(model)
    for name in config.configs:
        check_has_masks(name, config.seed, config.split)
    share = shard_indices(0, config.num, world, rank)
    # The main process counts its own share; the others work at the same pace.
    batches = math.ceil(len(shard_indices(0, config.num, world, 0)) / config.batch_size)
    bar = tqdm(
        total=batches * len(config.configs),
        desc="attention",
        unit="batch",
        disable=not (progress and rank == 0),
        dynamic_ncols=True,
    )
    was_training = model.training
    model.eval()
    results, plots = {}, {}
    try:
        for name in config.configs:
            started = time.perf_counter()
            instances = load_instances(
                name, config.num, config.seed, config.split, share.start, share.stop
            )
            for x in instances:  # fail before any model call, naming the character
                char_tok.check_text(x.text)
            mine, figures = [], {}
            for first in range(0, len(instances), config.batch_size):
                chunk = instances[first : first + config.batch_size]
                records, found = analyse_batch(model, char_tok, chunk, prompt, config, FIGURE_KINDS)
                mine += records
                for kind, case in found:  # keep the best candidate of each kind only
                    figures[kind] = min(figures.get(kind, case), case, key=_figure_rank)
                bar.update(1)
            figures = list(figures.items())
            if world > 1:
                from accelerate.utils import gather_object

                mine = [r for part in gather_object([mine]) for r in part]
                figures = [f for part in gather_object([figures]) for f in part]
            results[name], plots[name] = _config_results(
                mine, figures, config, num_layers, num_heads
            )
            results[name]["seconds"] = round(time.perf_counter() - started, 2)
    finally:
        bar.close()
        model.train(was_training)
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


# --- the reports --------------------------------------------------------------------------
def _number(value, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and (abs(value) < 1e-3 and value != 0):
        return f"{value:.1e}"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def table2_rows(model_name: str, results: dict[str, Any]) -> list[str]:
    """Markdown rows in the paper's Table 2 layout, one per (config, pass)."""
    lines = [
        "| model | config | pass | token acc | exact match | attn score (correct) | n | "
        "attn score (error) | n | Welch t | p | Hedges g |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, result in results.items():
        for mode in MODES:
            block = result if mode == "teacher_forced" else result.get("generate")
            if block is None or "rollout" not in block:
                continue
            r = block["rollout"]
            lines.append(
                f"| {model_name} | {name} | {MODE_TITLES[mode]} | "
                f"{_number(block['token_accuracy'], 3)} | {_number(block.get('exact_match'), 3)} | "
                f"{_number(r['correct']['mean'])} | {r['correct']['n']} | "
                f"{_number(r['error']['mean'])} | {r['error']['n']} | "
                f"{_number(r['welch_t'], 2)} | {_number(r['welch_p'], 3)} | "
                f"{_number(r['hedges_g'], 2)} |"
            )
    return lines


def markdown_report(meta: dict[str, Any], results: dict[str, Any], figures: list[str]) -> str:
    """attention.md: the Table 2 analogue, per-length tables, the top heads, the figures."""
    lines = [
        "# Attention on reference tokens",
        "",
        f"Model: `{meta['model']}`; {meta['instances']} instances per config from the "
        f"`{meta['split']}` split (seed {meta['seed']}); prompt: {meta['prompt']}.",
        "",
        "```bash",
        meta["command"],
        "```",
        "",
        "Attn score: the share of a target token's attention rollout on its reference "
        "positions, over the task-text columns (paper v2 Appendix C; instruction, few-shot and "
        "template columns left out), mean over tokens; correct versus wrong tokens with "
        "Welch's t-test. Teacher-forced: the true prefix is given (as the authors); "
        "free-running: the tokens of the greedy answer. The paper's Table 2 has "
        "Llama-3.2-1B on string reversal at 0.0455 (correct) versus 0.0236 (error).",
        "",
        *table2_rows(meta["model_name"], results),
        "",
    ]
    for name, result in results.items():
        lines += [
            f"## {name}, teacher-forced, by length",
            "",
            "| length | tokens | token acc | attn (correct) | n | attn (error) | n | p |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for length, block in result.get("by_length", {}).items():
            r = block["rollout"]
            lines.append(
                f"| {length} | {block['tokens']} | {_number(block['token_accuracy'], 3)} | "
                f"{_number(r['correct']['mean'])} | {r['correct']['n']} | "
                f"{_number(r['error']['mean'])} | {r['error']['n']} | "
                f"{_number(r['welch_p'], 3)} |"
            )
        heads = result.get("heads")
        if heads:
            flat = [
                (v, layer, head)
                for layer, row in enumerate(heads)
                for head, v in enumerate(row)
                if v is not None
            ]
            top = ", ".join(f"L{ly}H{hd} {v:.3f}" for v, ly, hd in sorted(flat, reverse=True)[:8])
            lines += ["", f"Heads with the highest mean share on the reference: {top}.", ""]
    if figures:
        lines += ["## Figures", ""] + [f"![{f}]({f})" for f in figures] + [""]
    return "\n".join(lines)


def write_outputs(
    out_dir, meta: dict[str, Any], results: dict[str, Any], plots_data: dict[str, Any]
) -> list:
    """attention.json, attention.md and the PNGs in `out_dir`; returns the written paths."""
    import json
    from pathlib import Path

    import numpy as np

    from attentionspan_datasets.atomic import atomic_write_text
    from harness.report import plots

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in plots_data.items():
        for kind, case in data["figures"].items():
            title = (
                f"{name} #{case['index']} ({kind}, teacher-forced): {case['prompt']} -> "
                f"{case['target']}"
            )
            written.append(
                plots.rollout_map(
                    case["matrix"],
                    out / f"rollout-{name}-{kind}.png",
                    mask=case["mask"],
                    keys=case["keys"],
                    queries=case["queries"],
                    title=title if len(title) < 110 else title[:107] + "...",
                    wrong_rows=case["wrong_rows"],
                    label="rollout, share of the row's task-text mass",
                )
            )
    for mode, suffix in (("teacher_forced", ""), ("generate", "-generate")):
        blocks = {
            name: (r if mode == "teacher_forced" else r.get("generate"))
            for name, r in results.items()
        }
        blocks = {k: v for k, v in blocks.items() if v and v.get("heads")}
        if not blocks:
            continue
        panels = {k: np.array(v["heads"], dtype=float) for k, v in blocks.items()}
        written.append(
            plots.head_heatmap(
                panels,
                out / f"heads{suffix}.png",
                title=f"mean share of each head's attention on the reference ({MODE_TITLES[mode]})",
            )
        )
        distributions = {
            name: {
                "correct": [s for _, s, ok in plots_data[name]["tokens"][mode] if ok],
                "wrong": [s for _, s, ok in plots_data[name]["tokens"][mode] if not ok],
            }
            for name in blocks
        }
        if any(len(v) for d in distributions.values() for v in d.values()):
            written.append(
                plots.score_distribution(
                    distributions,
                    out / f"scores{suffix}.png",
                    title=f"rollout share on reference tokens ({MODE_TITLES[mode]})",
                )
            )
    for name, data in plots_data.items():
        series = {}
        for mode in data["tokens"]:
            tokens = data["tokens"][mode]
            for label, ok in (("correct", True), ("wrong", False)):
                chosen = [(p, s) for p, s, c in tokens if c == ok]
                if chosen:
                    key = label if len(data["tokens"]) == 1 else f"{label}, {MODE_TITLES[mode]}"
                    series[key] = ([p for p, _ in chosen], [s for _, s in chosen])
        if series:
            written.append(
                plots.score_by_position(
                    series, out / f"position-{name}.png", title=f"{name}: score by target position"
                )
            )
    names = [p.name for p in written]
    document = {"model": meta["model"], "settings": meta, "configs": results, "figures": names}
    atomic_write_text(out / "attention.json", json.dumps(document, indent=2) + "\n")
    atomic_write_text(out / "attention.md", markdown_report(meta, results, names))
    return [*written, out / "attention.json", out / "attention.md"]
