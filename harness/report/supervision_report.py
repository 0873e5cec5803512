"""OUT/report.md of `attentionspan supervision`, and its figure per task.

    from harness.report.supervision_report import write_report
    run_study(cfg, report=write_report)      # harness.commands.supervision hands it in
    write_report(Path("runs/sup"), cfg, {"reversal": results}, seconds=1500.0)

Reads only the task results the pipeline made (`harness.pipeline.supervision_study`); writes
OUT/report.md and OUT/<task>/ood-by-length.png (OOD accuracy by length per arm, 95% bands
over seeds and instances).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from attentionspan_datasets.atomic import atomic_write_text
from harness.attention.sweep import SELECT_METRICS
from harness.foundation.stats import format_gain, format_number
from harness.pipeline.supervision_settings import REPORT_FILE, ROLES, SupervisionConfig

PLOT_FILE = "ood-by-length.png"
CLASSES = ("on_reference", "diluted", "misdirected", "elsewhere", "diffuse")
INTERVALS = (
    "Intervals: 95%, over seeds and instances: within a seed run the instances are the "
    "independent unit (every arm is scored on the same ones, so gains are paired per "
    "instance); the figure is the mean of the per-seed means, its interval a bootstrap that "
    "resamples instances within each seed (conditional on the models trained, so each "
    "seed's figure is listed too)."
)


def command_for(cfg: SupervisionConfig) -> str:
    """The command line that runs a study with these settings."""
    from harness.foundation.options import config_words

    words = config_words(cfg, SupervisionConfig(), always=("tasks", "seeds", "output"))
    return shlex.join(["attentionspan", "supervision", *words])


def interval(value: dict[str, Any] | None, digits: int = 3) -> str:
    """`0.512 [0.470, 0.555]` of a pooled mean (n/a without one)."""
    if not value or value.get("mean") is None:
        return "n/a"
    return (
        f"{value['mean']:.{digits}f} [{format_number(value['low'], digits)}, "
        f"{format_number(value['high'], digits)}]"
    )


def per_seed(values: list | None, points: bool = True) -> str:
    """Each seed run's figure: `+3.1, -0.4` (points of a gain), or `0.512, 0.498` (a mean)."""
    shown = [
        "n/a" if v is None else f"{v * 100:+.1f}" if points else format_number(v)
        for v in values or []
    ]
    return ", ".join(shown) or "n/a"


def verdict_line(task: str, results: dict[str, Any]) -> str:
    """The task's verdict, why, what it rules out, and the rule that read it (its version,
    where the study recorded one)."""
    verdict = results["verdict"]
    rule = f" (rule {verdict['rule_version']})" if verdict.get("rule_version") else ""
    return (
        f"**{task}: {verdict['verdict']}**: {verdict['reason']}. What this rules out: "
        f"{verdict['rules_out']}.{rule}"
    )


# --- sections of one task ---------------------------------------------------------------------
def arms_section(results: dict[str, Any]) -> list[str]:
    lines = ["### Arms", "", "| arm | role | what | model of seed run 0 |", "|---|---|---|---|"]
    for name, arm in results["arms"].items():
        lines.append(f"| {name} | {arm['role']} | {arm['description']} | `{arm['models'][0]}` |")
    heads = "; ".join(
        f"run {s['run']} (init {s['init_seed']}, data {s['data_seed']}): supervised "
        f"{_heads(s['supervised_heads'])}, random {_heads(s['random_heads'])}"
        for s in results["seeds"]
    )
    return [*lines, "", f"Heads (layer.head): {heads}.", ""]


def _heads(pairs) -> str:
    return ",".join(f"{la}.{h}" for la, h in pairs)


def selection_section(results: dict[str, Any]) -> list[str]:
    selection = results["selection"]
    metric = selection["metric"]
    lines = [
        f"### The weight, chosen on OOD validation ({metric})",
        "",
        f"| arm | {metric} | per seed |",
        "|---|---|---|",
    ]
    for name, value in selection["validation"].items():
        mark = " (chosen)" if name == selection["chosen"] else ""
        lines.append(
            f"| {name}{mark} | {interval(value)} | {per_seed(value['seeds'], points=False)} |"
        )
    return [*lines, ""]


def accuracy_section(results: dict[str, Any]) -> list[str]:
    metric = results["metric"]
    lines = [
        "### Accuracy with no intervention (test splits)",
        "",
        f"| arm | ID exact | ID partial | OOD exact | OOD partial | OOD {metric} gain "
        "(points) | per seed |",
        "|---|---|---|---|---|---|---|",
    ]
    accuracy, gains = results["accuracy"], results["gains"]["ood"]
    for name in results["arms"]:
        gain = gains.get(name, {}).get(metric)
        lines.append(
            f"| {name} | {interval(accuracy['id'][name]['exact_match'])} | "
            f"{interval(accuracy['id'][name]['partial_acc'])} | "
            f"{interval(accuracy['ood'][name]['exact_match'])} | "
            f"{interval(accuracy['ood'][name]['partial_acc'])} | "
            f"{format_gain(gain) if gain else '-'} | {per_seed(gain['seeds']) if gain else '-'} |"
        )
    return [*lines, ""]


def length_section(results: dict[str, Any], folder: Path) -> list[str]:
    from harness.report import plots

    metric = results["metric"]
    by_arm = results["accuracy"]["ood"]
    labels = list(next(iter(by_arm.values()))["per_length"])
    lines = ["### OOD accuracy by length", ""]
    if labels:
        centres = [sum(map(int, label.split("-"))) / len(label.split("-")) for label in labels]
        series = {}
        for name, table in by_arm.items():
            cells = [table["per_length"][label][metric] for label in labels]
            series[name] = {
                key: [c[key] if c[key] is not None else float("nan") for c in cells]
                for key in ("mean", "low", "high")
            }
        path = plots.accuracy_by_length(
            centres,
            series,
            folder / PLOT_FILE,
            title=f"{results['task']}: OOD test {metric.replace('_', ' ')} by length, per arm",
            ylabel=f"OOD {metric.replace('_', ' ')}",
            xlabel="input length (characters; centre of each bin)",
        )
        lines += [f"![OOD accuracy by length]({path.relative_to(folder.parent)})", ""]
    for shown in SELECT_METRICS:  # partial accuracy first, then exact match
        lines += [
            f"OOD {shown.replace('_', ' ')} per length bin (mean over seeds):",
            "",
            "| arm | " + " | ".join(labels) + " |",
            "|---|" + "---|" * len(labels),
        ]
        for name, table in by_arm.items():
            cells = [format_number(table["per_length"][label][shown]["mean"]) for label in labels]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def controls_section(results: dict[str, Any]) -> list[str]:
    metric, chosen = results["metric"], results["chosen"]
    lines = [
        f"### {chosen} against each control (OOD test {metric}, points)",
        "",
        "| control | role | chosen - control | per seed |",
        "|---|---|---|---|",
    ]
    for name, table in results["versus_controls"].items():
        gain = table[metric]
        role = results["arms"][name]["role"]
        lines.append(f"| {name} | {role} | {format_gain(gain)} | {per_seed(gain['seeds'])} |")
    wrong = next(n for n, a in results["arms"].items() if a["role"] == "wrong_mask")
    on_id = results["gains"]["id"][wrong]["exact_match"]
    from harness.foundation.stats import below_zero

    hurts = "hurts ID" if below_zero(on_id) else "does not hurt ID (no interval below 0)"
    drawn = results.get("random_heads_mass_gain") or {}
    lines += [
        "",
        f"- Wrong mask on ID: exact match {format_gain(on_id)} points over the baseline: it "
        f"{hurts}.",
    ]
    if drawn:
        lines.append(
            "- Random heads: their own reference mass rose "
            f"{format_gain(drawn['id'])} points on ID and {format_gain(drawn['ood'])} OOD."
        )
    return [*lines, ""]


def attention_section(results: dict[str, Any]) -> list[str]:
    ood = results["ood"]
    lines = [
        "### Attention on the reference (no intervention)",
        "",
        "The supervised heads' mean weight per target row on the reference (ID level: in the "
        "arm's own ID ranking), and Table 2 on the OOD test split: the rollout share of the "
        "correct and the wrong tokens, teacher-forced, with each seed's instance-aware "
        "direction.",
        "",
        "| arm | heads' mass ID | heads' mass OOD | OOD mass gain (points) | ID level per seed "
        "| Table 2 OOD: correct / wrong | directions |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in results["arms"]:
        gain = results["mass_gains"]["ood"].get(name)
        rows = [t.get(ood, {}).get("teacher_forced") or {} for t in results["table2"][name]]
        correct = _mean([r.get("correct") for r in rows])
        wrong = _mean([r.get("wrong") for r in rows])
        directions = "; ".join(r.get("direction") or "n/a" for r in rows)
        lines.append(
            f"| {name} | {interval(results['mass']['id'][name]['supervised'])} | "
            f"{interval(results['mass']['ood'][name]['supervised'])} | "
            f"{format_gain(gain) if gain else '-'} | "
            f"{per_seed(results['level'][name], points=False)} | "
            f"{format_number(correct)} / {format_number(wrong)} | {directions} |"
        )
    return [*lines, ""]


def _mean(values) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def diagnosis_section(results: dict[str, Any]) -> list[str]:
    lines = [
        "### Where the supervised heads look when the model errs (OOD test)",
        "",
        "Shares of the wrong instances (`harness.attention.diagnosis`; on_reference: as much "
        "weight on the reference as in distribution), pooled over seeds.",
        "",
        "| arm | wrong instances | wrong tokens | " + " | ".join(CLASSES) + " |",
        "|---|---|---|" + "---|" * len(CLASSES),
    ]
    for name, found in results["diagnosis"].items():
        ood = found["ood"]
        shares = [format_number(ood["shares"].get(k), 2) for k in CLASSES]
        lines.append(
            f"| {name} | {ood['instances']} | {ood['tokens']} | " + " | ".join(shares) + " |"
        )
    return [*lines, ""]


def task_section(results: dict[str, Any], folder: Path) -> list[str]:
    return [
        f"## {results['task']}",
        "",
        verdict_line(results["task"], results),
        "",
        f"ID preset {results['id']}, OOD preset {results['ood']}"
        + (f" with {results['ood_overrides']}" if results.get("ood_overrides") else "")
        + f"; {results['seconds']:.0f} s.",
        "",
        *arms_section(results),
        *selection_section(results),
        *accuracy_section(results),
        *length_section(results, folder),
        *controls_section(results),
        *attention_section(results),
        *diagnosis_section(results),
    ]


def write_report(
    out: Path, cfg: SupervisionConfig, tasks: dict[str, dict[str, Any]], seconds: float = 0.0
) -> Path:
    """OUT/report.md and each task's figure; returns the report's path."""
    out = Path(out)
    lines = [
        "# Does attention supervised in distribution generalise?",
        "",
        "The reference masks are used only while training on ID data (an auxiliary loss on "
        "the chosen heads, `attentionspan train --attention-supervision`); every model is then "
        "tested with no intervention. The arms:",
        "",
        *[f"- {role}: {what}." for role, what in ROLES.items()],
        "",
        f"Made by `{command_for(cfg)}` in {seconds:.0f} s. {INTERVALS}",
        "",
        "## Findings",
        "",
        *[f"- {verdict_line(task, results)}" for task, results in tasks.items()],
        "",
    ]
    for task, results in tasks.items():
        lines += task_section(results, out / task)
    path = out / REPORT_FILE
    atomic_write_text(path, "\n".join(lines).rstrip() + "\n")
    return path
