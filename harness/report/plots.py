"""The report's figures, drawn with matplotlib (Agg: no display needed) from plain arrays.

    from harness.report import plots
    plots.rollout_map(rollout, "fig/rollout.png", mask=reference, keys=list(text))
    plots.head_heatmap({"reversal_id": id_heads, "reversal_ood": ood_heads}, "fig/heads.png")
    plots.score_distribution({"reversal_ood": {"correct": c, "wrong": w}}, "fig/scores.png")
    plots.score_by_position({"correct": (pos_c, c), "wrong": (pos_w, w)}, "fig/position.png")
    plots.accuracy_by_length(lengths, {"baseline": {"mean": m, "low": lo, "high": hi}}, "len.png")
    plots.sweep_heatmap(acc, n_values, c_values, "fig/sweep.png", baseline=0.21)
    plots.dose_response(curve, "fig/dose.png", title="reversal_ood")  # harness.attention.dose

Every function checks its inputs (ValueError naming the argument), writes one PNG
atomically (a temporary file in the same folder, then a rename: a reader never sees half a
figure) and returns its path. Arrays may be numpy arrays, torch tensors or lists.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, never a window

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from attentionspan_datasets.atomic import atomic_path  # noqa: E402

DPI = 110
MAX_LABELS = 80  # token labels on an axis beyond this are thinned (unreadable anyway)
CORRECT_COLOUR, WRONG_COLOUR = "#2b8cbe", "#e34a33"


# --- input checks ---------------------------------------------------------------------
def _array(value: Any, name: str, ndim: int | None = None, dtype=float) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().float().cpu().numpy() if dtype is float else value.cpu().numpy()
    try:
        array = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError):
        raise ValueError(f"{name!r} must be numeric, got {type(value).__name__}") from None
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name!r} must have {ndim} dimension(s), got shape {array.shape}")
    return array


def _labels(labels: Sequence[str] | None, size: int, name: str) -> list[str] | None:
    if labels is None:
        return None
    labels = [str(label) for label in labels]
    if len(labels) != size:
        raise ValueError(f"{name!r} has {len(labels)} labels for {size} positions")
    return labels


def _nonempty_mapping(value: Any, name: str) -> Mapping:
    if not isinstance(value, Mapping) or not value:
        raise ValueError(f"{name!r} must be a non-empty mapping of series name -> data")
    return value


def _printable(token: str) -> str:
    """Token labels as drawn: a space as a visible box, control characters escaped, long
    pieces cut."""
    shown = "".join(
        "\u2423" if c == " " else c if c.isprintable() else repr(c)[1:-1] for c in token
    )
    return shown if len(shown) <= 8 else shown[:7] + "\u2026"


def _save(fig, path: str | os.PathLike) -> Path:
    """`fig` as a PNG at `path`, through `attentionspan_datasets.atomic.atomic_path`: its
    temporary (`.NAME.partial-PID-XXXX`) goes on any exception, and one a killed process
    left is removed by the next write of the same figure."""
    path = Path(path)
    try:
        with atomic_path(path) as temp:
            fig.savefig(temp, dpi=DPI, bbox_inches="tight", format="png")
    finally:
        plt.close(fig)
    return path


def _tick_labels(ax, axis: str, labels: list[str]) -> None:
    step = max(1, math.ceil(len(labels) / MAX_LABELS))
    ticks = list(range(0, len(labels), step))
    shown = [_printable(labels[i]) for i in ticks]
    size = 7 if len(ticks) <= 40 else 5
    if axis == "x":
        ax.set_xticks(ticks)
        ax.set_xticklabels(shown, rotation=90, fontsize=size, family="monospace")
    else:
        ax.set_yticks(ticks)
        ax.set_yticklabels(shown, fontsize=size, family="monospace")


# --- Figure 1: a rollout map with the reference mask ---------------------------------------
def rollout_map(
    matrix: Any,
    path: str | os.PathLike,
    mask: Any = None,
    keys: Sequence[str] | None = None,
    queries: Sequence[str] | None = None,
    title: str | None = None,
    wrong_rows: Sequence[int] = (),
    label: str = "attention (rollout)",
) -> Path:
    """An attention (rollout) map `matrix` [queries, keys] as a heat map, with the cells of
    the boolean reference `mask` (same shape) outlined, token labels on both axes (`keys`,
    `queries`), and the rows in `wrong_rows` (whose token came out wrong) marked with a red
    tick, as in the paper's Figure 1."""
    values = _array(matrix, "matrix", ndim=2)
    if values.size == 0:
        raise ValueError(f"'matrix' is empty (shape {values.shape})")
    rows, cols = values.shape
    outline = None
    if mask is not None:
        outline = _array(mask, "mask", ndim=2, dtype=bool)
        if outline.shape != values.shape:
            raise ValueError(f"'mask' has shape {outline.shape}, 'matrix' has {values.shape}")
    key_labels = _labels(keys, cols, "keys")
    query_labels = _labels(queries, rows, "queries")
    bad_rows = [int(r) for r in wrong_rows]
    if any(r < 0 or r >= rows for r in bad_rows):
        raise ValueError(f"'wrong_rows' must lie in [0, {rows}), got {bad_rows}")

    width = min(16.0, 2.5 + 0.16 * cols)
    height = min(16.0, 2.0 + 0.16 * rows)
    fig, ax = plt.subplots(figsize=(width, height))
    image = ax.imshow(values, cmap="viridis", aspect="auto", interpolation="nearest")
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02, label=label)
    if outline is not None:
        for q, k in zip(*np.nonzero(outline)):
            ax.add_patch(
                Rectangle((k - 0.5, q - 0.5), 1, 1, fill=False, edgecolor="#ff3030", linewidth=1.2)
            )
    for r in bad_rows:
        ax.plot([-0.5], [r], marker=">", color=WRONG_COLOUR, markersize=6, clip_on=False)
    if key_labels:
        _tick_labels(ax, "x", key_labels)
    if query_labels:
        _tick_labels(ax, "y", query_labels)
    ax.set_xlabel("key (attended token)")
    ax.set_ylabel("query (predicts the next token)")
    if title:
        ax.set_title(title, fontsize=10)
    # A legend for the marks, so the figure reads without the report's text.
    marks = []
    if outline is not None and outline.any():
        marks.append(Rectangle((0, 0), 1, 1, fill=False, edgecolor="#ff3030", label="reference"))
    if bad_rows:
        (wrong,) = ax.plot([], [], ">", color=WRONG_COLOUR, label="wrong token (gold->predicted)")
        marks.append(wrong)
    if marks:
        ax.legend(
            handles=marks, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=8
        )
    return _save(fig, path)


# --- the layer x head map ------------------------------------------------------------------
def head_heatmap(
    panels: Mapping[str, Any] | Any,
    path: str | os.PathLike,
    title: str | None = None,
    label: str = "mean share on reference",
    annotate: bool | None = None,
) -> Path:
    """Layer x head heat maps, one panel per entry of `panels` (name -> [layers, heads]),
    side by side on one colour scale (ID next to OOD). A bare array is one panel."""
    if not isinstance(panels, Mapping):
        panels = {"": panels}
    _nonempty_mapping(panels, "panels")
    arrays = {name: _array(v, f"panels[{name!r}]", ndim=2) for name, v in panels.items()}
    shapes = {a.shape for a in arrays.values()}
    if len(shapes) != 1:
        raise ValueError(f"'panels' must share one [layers, heads] shape, got {sorted(shapes)}")
    layers, heads = shapes.pop()
    if layers == 0 or heads == 0:
        raise ValueError("'panels' arrays are empty")
    finite = np.concatenate([a[np.isfinite(a)] for a in arrays.values()])
    vmax = float(finite.max()) if finite.size else 1.0
    vmin = min(0.0, float(finite.min())) if finite.size else 0.0
    if annotate is None:
        annotate = layers * heads <= 144
    count = len(arrays)
    fig, axes = plt.subplots(
        1,
        count,
        figsize=(min(7.0, 1.5 + 0.45 * heads) * count + 1.0, min(12.0, 1.5 + 0.35 * layers)),
        squeeze=False,
    )
    image = None
    for ax, (name, values) in zip(axes[0], arrays.items()):
        image = ax.imshow(values, cmap="magma", aspect="auto", vmin=vmin, vmax=vmax)
        ax.set_xticks(range(heads))
        ax.set_yticks(range(layers))
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        if name:
            ax.set_title(name, fontsize=10)
        if annotate:
            for (layer, head), v in np.ndenumerate(values):
                if np.isfinite(v):
                    colour = "black" if v > vmin + 0.6 * (vmax - vmin) else "white"
                    ax.text(
                        head, layer, f"{v:.2f}", ha="center", va="center", fontsize=6, color=colour
                    )
    fig.colorbar(image, ax=list(axes[0]), fraction=0.03, pad=0.02, label=label)
    if title:
        fig.suptitle(title, fontsize=10, y=1.03)  # above the panels' own titles
    return _save(fig, path)


# --- scores of correct and wrong tokens -----------------------------------------------------
def score_distribution(
    panels: Mapping[str, Mapping[str, Any]],
    path: str | os.PathLike,
    title: str | None = None,
    xlabel: str = "rollout share on reference tokens",
    bins: int = 30,
) -> Path:
    """Histograms (density) of the per-token scores, one panel per entry of `panels`
    (e.g. a config), one series per entry inside it (e.g. "correct", "wrong"), with each
    series' mean marked and its count in the legend."""
    _nonempty_mapping(panels, "panels")
    data: dict[str, dict[str, np.ndarray]] = {}
    for name, series in panels.items():
        _nonempty_mapping(series, f"panels[{name!r}]")
        data[name] = {
            label: _array(v, f"panels[{name!r}][{label!r}]", ndim=1) for label, v in series.items()
        }
    everything = np.concatenate([a for s in data.values() for a in s.values()] or [np.zeros(0)])
    everything = everything[np.isfinite(everything)]
    if everything.size == 0:
        raise ValueError("'panels' holds no finite score")
    low, high = float(everything.min()), float(everything.max())
    if high <= low:
        high = low + 1e-6
    edges = np.linspace(low, high, bins + 1)
    colours = {"correct": CORRECT_COLOUR, "wrong": WRONG_COLOUR, "error": WRONG_COLOUR}
    fig, axes = plt.subplots(1, len(data), figsize=(4.6 * len(data), 3.4), squeeze=False)
    for ax, (name, series) in zip(axes[0], data.items()):
        for i, (label, values) in enumerate(series.items()):
            values = values[np.isfinite(values)]
            colour = colours.get(label, f"C{i}")
            if values.size == 0:
                ax.plot([], [], color=colour, label=f"{label} (n=0)")
                continue
            ax.hist(
                values,
                bins=edges,
                density=True,
                alpha=0.5,
                color=colour,
                label=f"{label} (n={values.size}, mean {values.mean():.3f})",
            )
            ax.axvline(values.mean(), color=colour, linestyle="--", linewidth=1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("density")
        if name:
            ax.set_title(name, fontsize=10)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def score_by_position(
    series: Mapping[str, tuple[Any, Any]],
    path: str | os.PathLike,
    title: str | None = None,
    xlabel: str = "target position (0 = first answer character)",
    ylabel: str = "mean rollout share on reference",
) -> Path:
    """Mean score per target position, one line per series (name -> (positions, scores),
    two 1-D arrays of one length, one entry per token), with the token count per
    position as a faint bar chart underneath."""
    _nonempty_mapping(series, "series")
    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    counts_ax = ax.twinx()
    plotted = 0
    for i, (name, pair) in enumerate(series.items()):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"series[{name!r}] must be a (positions, scores) pair")
        positions = _array(pair[0], f"series[{name!r}] positions", ndim=1)
        scores = _array(pair[1], f"series[{name!r}] scores", ndim=1)
        if positions.shape != scores.shape:
            raise ValueError(
                f"series[{name!r}]: {positions.size} positions but {scores.size} scores"
            )
        keep = np.isfinite(scores) & np.isfinite(positions)
        positions, scores = positions[keep].astype(int), scores[keep]
        if positions.size == 0:
            continue
        xs = np.unique(positions)
        means = np.array([scores[positions == x].mean() for x in xs])
        counts = np.array([(positions == x).sum() for x in xs])
        colour = {"correct": CORRECT_COLOUR, "wrong": WRONG_COLOUR}.get(name, f"C{i}")
        ax.plot(xs, means, marker="o", markersize=3, color=colour, label=name, zorder=3)
        counts_ax.bar(xs, counts, width=0.8, color=colour, alpha=0.12, zorder=1)
        plotted += 1
    if not plotted:
        raise ValueError("'series' holds no finite score")
    ax.set_zorder(counts_ax.get_zorder() + 1)
    ax.patch.set_visible(False)
    counts_ax.set_ylabel("tokens", color="grey")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    return _save(fig, path)


# --- accuracy by length (Figure 2) and the sweep map ---------------------------------------
def accuracy_by_length(
    lengths: Any,
    series: Mapping[str, Mapping[str, Any]],
    path: str | os.PathLike,
    title: str | None = None,
    ylabel: str = "OOD partial accuracy",
    xlabel: str = "input length (characters)",
) -> Path:
    """Accuracy against length, one line per series (name -> {"mean": [...], and optional
    "low", "high" interval bounds drawn as a band}), every array as long as `lengths`:
    the analogue of the paper's Figure 2 (baseline, intervention, control)."""
    xs = _array(lengths, "lengths", ndim=1)
    if xs.size == 0:
        raise ValueError("'lengths' is empty")
    _nonempty_mapping(series, "series")
    fig, ax = plt.subplots(figsize=(7.0, 3.8))
    for i, (name, values) in enumerate(series.items()):
        if not isinstance(values, Mapping) or "mean" not in values:
            raise ValueError(f"series[{name!r}] must be a mapping with a 'mean' array")
        arrays = {}
        for key in ("mean", "low", "high"):
            if values.get(key) is None:
                continue
            arrays[key] = _array(values[key], f"series[{name!r}][{key!r}]", ndim=1)
            if arrays[key].shape != xs.shape:
                raise ValueError(
                    f"series[{name!r}][{key!r}] has {arrays[key].size} values for {xs.size} lengths"
                )
        if ("low" in arrays) != ("high" in arrays):
            raise ValueError(f"series[{name!r}] needs both 'low' and 'high' for a band")
        (line,) = ax.plot(xs, arrays["mean"], marker="o", markersize=3, label=name, color=f"C{i}")
        if "low" in arrays:
            ax.fill_between(xs, arrays["low"], arrays["high"], color=line.get_color(), alpha=0.2)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    return _save(fig, path)


def sweep_heatmap(
    values: Any,
    n_values: Sequence[Any],
    c_values: Sequence[Any],
    path: str | os.PathLike,
    baseline: float | None = None,
    title: str | None = None,
    label: str = "OOD partial accuracy",
    chosen: tuple[int, int] | None = None,
) -> Path:
    """The N x C sweep: `values` [len(n_values), len(c_values)] (rows: number of heads,
    columns: strength C), each cell annotated; with `baseline`, the colour scale is centred
    on it (blue: better than no intervention, red: worse); `chosen` (row, column) outlines
    the selected setting."""
    grid = _array(values, "values", ndim=2)
    rows, cols = len(n_values), len(c_values)
    if grid.shape != (rows, cols):
        raise ValueError(
            f"'values' has shape {grid.shape}, expected ({rows}, {cols}) from "
            "'n_values' x 'c_values'"
        )
    if rows == 0 or cols == 0:
        raise ValueError("'n_values' and 'c_values' must not be empty")
    if chosen is not None and not (0 <= chosen[0] < rows and 0 <= chosen[1] < cols):
        raise ValueError(f"'chosen' {chosen} lies outside the {rows} x {cols} grid")
    finite = grid[np.isfinite(grid)]
    fig, ax = plt.subplots(figsize=(1.6 + 0.75 * cols, 1.4 + 0.5 * rows))
    if baseline is not None and finite.size:
        spread = max(float(np.abs(finite - baseline).max()), 1e-6)
        image = ax.imshow(
            grid, cmap="RdBu", vmin=baseline - spread, vmax=baseline + spread, aspect="auto"
        )
        label = f"{label} (baseline {baseline:.3f})"
    else:
        image = ax.imshow(grid, cmap="viridis", aspect="auto")
    for (r, c), v in np.ndenumerate(grid):
        if np.isfinite(v):
            ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=7)
    if chosen is not None:
        ax.add_patch(
            Rectangle(
                (chosen[1] - 0.5, chosen[0] - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2
            )
        )
    ax.set_xticks(range(cols))
    ax.set_xticklabels([str(c) for c in c_values])
    ax.set_yticks(range(rows))
    ax.set_yticklabels([str(n) for n in n_values])
    ax.set_xlabel("strength C")
    ax.set_ylabel("heads N")
    fig.colorbar(image, ax=ax, label=label, fraction=0.05, pad=0.03)
    if title:
        ax.set_title(title, fontsize=10)
    return _save(fig, path)


# --- the dose-response ladder ---------------------------------------------------------------
def dose_response(
    curve: Mapping[str, Any], path: str | os.PathLike, title: str | None = None
) -> Path:
    """One task's dose-response ladder (`harness.attention.dose.dose_curve`) against C on a
    log scale. Top panel: the gain in teacher-forced token accuracy at the reference with
    its interval band (0 marked), and the ladder controls' gain lines (`Series`, each
    control's own: each pointer shift's gain, the farthest on each side of the reference
    drawn full and the nearer ones lighter, the random other-heads' mean with their min-max
    band); bottom panel: their rates (how often the answer follows each pointer shift),
    and ID exact match (teacher-forced) under the same push. In a mode with a threshold,
    one set of lines per threshold (line styles)."""
    groups = _dose_groups(curve)
    styles = ("-", "--", ":", "-.")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.0, 6.4), sharex=True)
    for g, (threshold, rows) in enumerate(groups.items()):
        rows = sorted(rows, key=lambda r: r["strength"])
        xs = np.asarray([float(r["strength"]) for r in rows])
        style = styles[g % len(styles)]
        suffix = f" (thr {threshold:g})" if len(groups) > 1 and threshold is not None else ""
        ref = _values(rows, lambda r: r["reference"]["gain"])
        top.plot(xs, ref, style, marker="o", markersize=3, color="C0", label=f"reference{suffix}")
        top.fill_between(
            xs,
            _values(rows, lambda r: r["reference"]["low"]),
            _values(rows, lambda r: r["reference"]["high"]),
            color="C0",
            alpha=0.2,
        )
        _plot_ladder_controls(top, bottom, curve, rows, xs, style, suffix)
        if any(r.get("id") for r in rows):
            bottom.plot(
                xs,
                _values(rows, lambda r: (r.get("id") or {}).get("tf_exact")),
                style,
                marker="o",
                markersize=3,
                color="C1",
                label=f"ID exact match (teacher-forced){suffix}",
            )
    top.axhline(0.0, color="black", linewidth=0.8)
    top.set_ylabel("gain in token accuracy (TF)")
    top.grid(alpha=0.3)
    top.legend(fontsize=7)
    bottom.set_ylim(-0.02, 1.02)
    bottom.set_ylabel("rate")
    bottom.set_xscale("log")
    bottom.set_xlabel("strength C")
    bottom.grid(alpha=0.3)
    if bottom.get_legend_handles_labels()[0]:
        bottom.legend(fontsize=7)
    if title:
        top.set_title(title, fontsize=10)
    return _save(fig, path)


def _dose_groups(curve: Mapping[str, Any]) -> dict[Any, list[Mapping[str, Any]]]:
    """The curve's doses by threshold (None: a mode without one), each checked to have a
    strength C > 0 (the x axis is a log scale)."""
    if not isinstance(curve, Mapping) or not curve.get("doses"):
        raise ValueError("'curve' must be a dose curve with a non-empty 'doses' list")
    doses = curve["doses"]
    for entry in doses:
        strength = entry.get("strength") if isinstance(entry, Mapping) else None
        if not isinstance(strength, (int, float)) or not strength > 0:
            raise ValueError(f"'curve' doses need a strength C > 0 (log scale), got {strength!r}")
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for entry in doses:
        groups.setdefault(entry.get("threshold"), []).append(entry)
    return groups


def _values(rows, get):
    """`get(row)` of each row as a float array, nan where it is None."""
    out = []
    for row in rows:
        value = get(row)
        out.append(np.nan if value is None else float(value))
    return np.asarray(out, dtype=float)


def _plot_ladder_controls(top, bottom, curve, rows, xs, style: str, suffix: str) -> None:
    """Every control of the registry that runs on the ladder draws its own lines (and
    bands), each in its panel: gains on top, rates below."""
    from harness.attention.controls import ladder_controls

    for control in ladder_controls():
        for line in control.ladder.series(curve, rows):
            axis = top if line.panel == "gain" else bottom
            axis.plot(
                xs,
                _values(rows, line.value),
                style,
                marker=line.marker,
                markersize=3,
                color=line.colour,
                alpha=line.alpha,
                label=f"{line.label}{suffix}",
            )
            if line.band:
                low, high = line.band
                axis.fill_between(
                    xs, _values(rows, low), _values(rows, high), color=line.colour, alpha=0.2
                )
