"""`attention.md`, `attention.json` and the figures of `attentionspan attention` (and of the
attention section of `attentionspan reproduce`), from what `harness.attention.analysis`
measured: the measurement returns data, this module writes it for people.

    from harness.report.attention_report import table2_rows, write_outputs
    results, plots_data = analyse_model(model, tokenizer, AnalysisConfig(configs=[...]))
    written = write_outputs("OUT", meta, results, plots_data)   # the paths it wrote
    print("\n".join(table2_rows("my-model", results)))           # the paper's Table 2 layout

`meta` names the model (`model`, `model_name`), the command, the instances, split, seed,
prompt and score convention (`score_convention`, "paper" when absent); it is saved as the
`settings` of attention.json.
"""

from __future__ import annotations

import math
from typing import Any

# The two passes in the order the tables show them, with the names people read.
MODE_TITLES = {"teacher_forced": "teacher-forced", "generate": "free-running"}
# The score conventions (`harness.attention.scores`) as the reports name them.
CONVENTION_TITLES = {
    "paper": "paper (the paper's text)",
    "authors": "authors (their released code)",
}
CONVENTION_DETAILS = {
    "paper": "over the task-text columns (paper v2 Appendix C: instruction, few-shot block, "
    "chat template and BOS left out), rows without a reference counted apart",
    "authors": "which differs from the paper's text in three ways: string reversal's "
    "denominator leaves out the prompt's first character, the chat template's columns "
    "between prompt and answer count, and rows without a reference score 0, the row that "
    "predicts EOS among them (one more token per instance, right when the model predicts EOS)",
}


def convention_line(meta: dict[str, Any]) -> str:
    """`Score convention: paper (the paper's text), over the task-text columns ...`."""
    name = meta.get("score_convention") or "paper"
    return f"Score convention: {CONVENTION_TITLES[name]}, {CONVENTION_DETAILS[name]}."


def _number(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"  # attention.json holds null where the analysis had NaN (no token)
    if isinstance(value, float) and (abs(value) < 1e-3 and value != 0):
        return f"{value:.1e}"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _signed(value, digits: int = 4) -> str:
    return "-" if value is None else f"{value:+.{digits}f}"


def instance_columns(aware: dict[str, Any] | None) -> list[str]:
    """The instance-aware cells of a Table 2 row (`harness.foundation.stats.correct_vs_wrong`): the
    correct-minus-wrong difference with its cluster-bootstrap 95% interval over instances,
    the within-instance paired mean difference (instances with both kinds of token), and
    the length- and position-matched permutation p."""
    if not aware:
        return ["-", "-", "-"]
    boot = aware.get("cluster_bootstrap") or {}
    paired = aware.get("paired") or {}
    matched = aware.get("matched") or {}
    difference = _signed(boot.get("difference"))
    if boot.get("low") is not None and boot.get("high") is not None:
        difference += f" [{_signed(boot['low'])}, {_signed(boot['high'])}]"
    n = paired.get("n_instances") or 0
    return [
        difference,
        f"{_signed(paired.get('mean_difference'))} ({n})",
        _number(matched.get("p"), 3),
    ]


def table2_rows(model_name: str, results: dict[str, Any]) -> list[str]:
    """Markdown rows in the paper's Table 2 layout, one per (config, pass), with the
    instance-aware figures beside the paper's pooled test (it counts tokens as if they
    were independent); then, where a row has no correct or no wrong token, a blank line and
    the note that says why its mean is "-" (`table2_notes`)."""
    lines = [
        "| model | config | pass | token acc | exact match | attn score (correct) | n | "
        "attn score (error) | n | Welch t | p (pooled tokens, paper's test) | Hedges g | "
        "difference [95% CI over instances] | paired (n) | matched p |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, result in results.items():
        for mode in MODE_TITLES:
            block = result if mode == "teacher_forced" else result.get("generate")
            if block is None or "rollout" not in block:
                continue
            r = block["rollout"]
            aware = " | ".join(instance_columns(block.get("instance_aware")))
            lines.append(
                f"| {model_name} | {name} | {MODE_TITLES[mode]} | "
                f"{_number(block['token_accuracy'], 3)} | {_number(block.get('exact_match'), 3)} | "
                f"{_number(r['correct']['mean'])} | {r['correct']['n']} | "
                f"{_number(r['error']['mean'])} | {r['error']['n']} | "
                f"{_number(r['welch_t'], 2)} | {_number(r['welch_p'], 3)} | "
                f"{_number(r['hedges_g'], 2)} | {aware} |"
            )
    notes = table2_notes(results)
    return [*lines, "", *notes] if notes else lines


def table2_notes(results: dict[str, Any]) -> list[str]:
    """One line per kind of token that some (config, pass) has none of: its mean shows "-"
    with n 0, and without a word a reader takes it for a failure. The common case: no
    wrong token on an ID config the model has learnt."""
    empty: dict[str, list[str]] = {"error": [], "correct": []}
    for name, result in results.items():
        for mode in MODE_TITLES:
            block = result if mode == "teacher_forced" else result.get("generate")
            if block is None or "rollout" not in block:
                continue
            for group, places in empty.items():
                if not block["rollout"][group]["n"]:
                    places.append(f"{name} {MODE_TITLES[mode]}")
    why = {
        "error": "no wrong target token there (every token right, as on an ID config the "
        "model has learnt)",
        "correct": "no correct target token there (every token wrong)",
    }
    return [
        f"Attn score ({group}) is - with n 0 for {', '.join(places)}: {why[group]}, so "
        "there is no mean and nothing to compare it with (Welch t, p and the differences "
        "are - too)."
        for group, places in empty.items()
        if places
    ]


BY_LENGTH_NOTE = (
    "A mean shown as - with n 0: no token of that kind (correct or wrong) at that length."
)


TABLE2_NOTE = (
    "Difference: mean attn score of correct minus wrong tokens, its 95% interval from a "
    "bootstrap over instances (the tokens of one instance are not independent); paired: the "
    "mean within-instance difference over the n instances with both kinds of token; matched "
    "p: a permutation test holding length and target position. The pooled Welch test is the "
    "paper's, kept for comparison: it counts tokens as independent and overstates precision."
)


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
        "positions (paper v2 Appendix C), mean over tokens; correct versus wrong tokens. "
        "Teacher-forced: the true prefix is given (as the authors); free-running: the tokens "
        "of the greedy answer. The paper's Table 2 has Llama-3.2-1B on string reversal at "
        "0.0455 (correct) versus 0.0236 (error).",
        "",
        convention_line(meta),
        "",
        *table2_rows(meta["model_name"], results),
        "",
        TABLE2_NOTE,
        "",
    ]
    for name, result in results.items():
        lines += [
            f"## {name}, teacher-forced, by length",
            "",
            "| length | tokens | token acc | attn (correct) | n | attn (error) | n | "
            "p (pooled tokens) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        empty_group = False
        for length, block in result.get("by_length", {}).items():
            r = block["rollout"]
            empty_group |= not r["correct"]["n"] or not r["error"]["n"]
            lines.append(
                f"| {length} | {block['tokens']} | {_number(block['token_accuracy'], 3)} | "
                f"{_number(r['correct']['mean'])} | {r['correct']['n']} | "
                f"{_number(r['error']['mean'])} | {r['error']['n']} | "
                f"{_number(r['welch_p'], 3)} |"
            )
        if empty_group:
            lines += ["", BY_LENGTH_NOTE]
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

    from attentionspan_datasets.atomic import atomic_write_text

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [
        *_rollout_figures(out, plots_data),
        *_head_figures(out, results, plots_data),
        *_position_figures(out, plots_data),
    ]
    names = [p.name for p in written]
    document = {"model": meta["model"], "settings": meta, "configs": results, "figures": names}
    atomic_write_text(out / "attention.json", json.dumps(document, indent=2) + "\n")
    atomic_write_text(out / "attention.md", markdown_report(meta, results, names))
    return [*written, out / "attention.json", out / "attention.md"]


def _rollout_figures(out, plots_data: dict[str, Any]) -> list:
    """Per config, the rollout map of each example instance (`rollout-<config>-<kind>.png`)."""
    from harness.report import plots

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
    return written


def _head_figures(out, results: dict[str, Any], plots_data: dict[str, Any]) -> list:
    """Per scoring mode (teacher-forced, free-running), the head heatmap and the score
    distributions of correct and wrong tokens (`heads*.png`, `scores*.png`)."""
    import numpy as np

    from harness.report import plots

    written = []
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
    return written


def _position_figures(out, plots_data: dict[str, Any]) -> list:
    """Per config, the score by target position of correct and wrong tokens."""
    from harness.report import plots

    written = []
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
    return written
