"""Results of `attentionspan baselines` beside the paper's Table 2, as Markdown.

    attentionspan baselines-table runs/baselines/t6_len10_a.json runs/baselines/t6_len10_b.json

Runs of one configuration may be spread over several JSON files (e.g. models trained in
parallel processes); they are pooled by (config, model), and a (config, model, seed) given
twice is an error. Each cell is the mean test accuracy (%) +- the sample s.d. over seeds,
with the paper's figure (5 seeds, sequence length 10) beside it and the difference marked
when it exceeds the issue's 3-point tolerance. The command's parser is
harness/commands/baselines_table.py.
"""

from __future__ import annotations

import statistics

from attentionspan_datasets.presets import PRESETS
from harness.baselines.models import TRANSFORMERS

# Sorodoc, Boleda and Baroni (2021), Table 2: sequence length 10, mean and s.d. over 5 seeds.
PAPER_TABLE_2 = {
    "t1": {"t-pos-att": (91.3, 2.8), "t+pos-att": (96.1, 2.9), "t-pos+att": (96.5, 1.7),
           "t+pos+att": (98.7, 1.1)},
    "t2": {"t-pos-att": (83.4, 0.2), "t+pos-att": (84.7, 0.5), "t-pos+att": (83.2, 0.2),
           "t+pos+att": (84.9, 1.5)},
    "t3": {"t-pos-att": (98.7, 1.2), "t+pos-att": (100.0, 0.0), "t-pos+att": (99.4, 0.9),
           "t+pos+att": (100.0, 0.0)},
    "t4": {"t-pos-att": (86.2, 0.6), "t+pos-att": (87.7, 0.3), "t-pos+att": (86.4, 0.6),
           "t+pos+att": (87.7, 0.2)},
    "t5": {"t-pos-att": (77.4, 0.4), "t+pos-att": (77.7, 1.2), "t-pos+att": (78.8, 2.5),
           "t+pos+att": (77.8, 1.1)},
    "t6": {"t-pos-att": (56.6, 1.0), "t+pos-att": (80.2, 0.4), "t-pos+att": (92.1, 0.3),
           "t+pos+att": (90.7, 1.9)},
    "t7": {"t-pos-att": (57.5, 0.4), "t+pos-att": (65.8, 0.8), "t-pos+att": (78.6, 0.6),
           "t+pos+att": (67.6, 0.6)},
}  # fmt: skip
TOLERANCE = 3.0  # points


def pool_runs(documents: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """(config, model) -> its runs, over every document; a seed given twice is a ValueError."""
    pooled: dict[tuple[str, str], list[dict]] = {}
    for document in documents:
        for run in document["runs"]:
            runs = pooled.setdefault((run["config"], run["model"]), [])
            if any(r["seed"] == run["seed"] for r in runs):
                raise ValueError(f"{run['config']} {run['model']} seed {run['seed']} appears twice")
            runs.append(run)
    return pooled


def cell(runs: list[dict]) -> tuple[float, float]:
    """Mean and sample s.d. (0 for one seed) of test accuracy, in %."""
    scores = [100 * r["test_accuracy"] for r in runs]
    return statistics.fmean(scores), statistics.stdev(scores) if len(scores) > 1 else 0.0


def markdown(documents: list[dict]) -> str:
    pooled = pool_runs(documents)
    configs = list(dict.fromkeys(config for config, _ in pooled))
    head = ["task"] + [part for kind in TRANSFORMERS for part in (kind, "paper")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for config in configs:
        # The paper's figures are for 10 vectors: a preset of that one length (t6_len10).
        preset = PRESETS.get(config)  # None for a length with no preset (t6_len12)
        params = preset.params if preset is not None else {}
        at_10 = params.get("min_length") == params.get("max_length") == 10
        paper = PAPER_TABLE_2.get(preset.short, {}) if at_10 else {}
        row = [config]
        for kind in TRANSFORMERS:
            runs = pooled.get((config, kind))
            if not runs:
                row += ["-", _paper(paper.get(kind))]
                continue
            mean, sd = cell(runs)
            text = f"{mean:.1f} ± {sd:.1f} ({len(runs)})"
            if kind in paper and abs(mean - paper[kind][0]) > TOLERANCE:
                text += f" **{mean - paper[kind][0]:+.1f}**"
            row += [text, _paper(paper.get(kind))]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _paper(figure: tuple[float, float] | None) -> str:
    return "-" if figure is None else f"{figure[0]:.1f} ± {figure[1]:.1f}"


if __name__ == "__main__":  # the form this command had before it moved to harness/commands/
    from harness.foundation.options import moved_command

    moved_command("harness.baselines.table", "baselines-table")
