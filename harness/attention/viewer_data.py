"""The data behind the interactive attention viewer (`harness.report.viewer`): per instance,
teacher-forced, the answer rows of the rollout, of each layer's head mean and of a few heads,
over the task-text columns only, quantised to 8 bits.

    from harness.attention.viewer_data import build_viewer_data
    data = build_viewer_data(model, tokenizer, instances, prompt, ranking=None, setting=None)
    data["instances"][0]["settings"]["baseline"]["scores"]   # rollout score per answer row
    decode_maps(data, 0)["baseline"]                         # float [views, rows, cols]

What is stored, per instance (`instances[j]`): the task text (`prompt + target`), the reference
mask on the answer rows (row i predicts `target[i]`; its query is the token before it) as
lists of task-text column indices, and per setting ("baseline", and the intervention's name
when one is given): the predicted character per row, whether it is right, the rollout score
per row (exactly the number `attentionspan attention` scores: `scores.rollout_scores`, the
rollout's share on the reference over the task-text columns; None for a row without a
reference), and the maps. `predicted[i]` is the decoded argmax token of row i (a special
token such as EOS decodes to its name).

Maps: one matrix per view (`data["views"]`: the rollout, then layer 0..L-1's head mean, then
the chosen heads), rows the answer rows, columns the task-text columns. Only the causal part
is kept: row i holds the `lengths[i]` task-text columns at or before its query (the rest are 0
by construction), so `maps` is, per view, the rows' prefixes one after another. Quantisation:
per row and view, `uint8 = round(255 * value / row max)` with the row max (over the stored
columns) as float32 in `row_max`; decoding gives each value within `row max / 510`, i.e.
within 1/255 of the row's largest value. `maps` and `row_max` (little-endian float32) are
view-major, each zlib-compressed (`encoding: "deflate"`; the page inflates them with the
browser's own DecompressionStream) and base64-encoded: 8-bit heat maps compress about 2.7x.

Heads: every head when the model has at most `ALL_HEADS` (32) of them; otherwise the top
`top_k` (default 16): the ranking's order when a `HeadRanking` is given, else the heads with
the largest mean share on the reference over these instances' answer rows. Size: about
views x sum over rows of (prompt length + row) bytes before compression; 50 reversal_ood
instances (11-50 characters) of SmolLM2-135M (30 layers x 9 heads, 16 heads kept: 47 views)
make a file of 2.24 MB, built in 22 s on one CPU thread (benchmarks/attention_viewer.py;
the budget is 5 MB).

Memory: the capture keeps every head's full map of the batch (`AttentionPlan(patterns=...)`,
[batch, heads, T, T] per layer); `batch_size` bounds it (a 2,000-token text wants 1).
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Sequence
from typing import Any

ALL_HEADS = 32  # up to this many heads in the model, the viewer keeps every one
DEFAULT_TOP_K = 16
BASELINE = "baseline"
FORMAT = 1
ENCODING = "deflate"  # zlib streams, as the browser's DecompressionStream("deflate") reads


def quantise(values, lengths: Sequence[int]):
    """(uint8 bytes, float32 row maxima) of a [rows, cols] array keeping row i's first
    `lengths[i]` columns: each value as round(255 * value / row max)."""
    import numpy as np

    values = np.asarray(values, dtype=np.float64)
    parts, maxima = [], []
    for i, n in enumerate(lengths):
        row = np.clip(values[i, :n], 0.0, None)  # weights are >= 0; -0.0 and rounding noise
        top = float(row.max()) if n else 0.0
        maxima.append(top)
        scaled = np.zeros(n) if top <= 0 else row / top * 255.0
        parts.append(np.rint(scaled).astype(np.uint8))
    data = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    return data.astype(np.uint8), np.asarray(maxima, dtype="<f4")


def dequantise(data, row_max, lengths: Sequence[int], cols: int):
    """float32 [rows, cols] from `quantise`'s output (zeros past each row's length)."""
    import numpy as np

    out = np.zeros((len(lengths), cols), dtype=np.float32)
    start = 0
    for i, n in enumerate(lengths):
        out[i, :n] = np.asarray(data[start : start + n], dtype=np.float32) / 255.0 * row_max[i]
        start += n
    return out


def _pack(array) -> str:
    """base64 of the zlib-compressed bytes of `array`."""
    return base64.b64encode(zlib.compress(array.tobytes(), 9)).decode("ascii")


def _unpack(text: str) -> bytes:
    return zlib.decompress(base64.b64decode(text))


def decode_maps(data: dict[str, Any], j: int) -> dict[str, Any]:
    """{setting: float32 [views, rows, cols]} of instance j (the inverse of the storage)."""
    import numpy as np

    inst = data["instances"][j]
    lengths, cols = inst["lengths"], len(inst["text"])
    views = len(data["views"])
    out = {}
    for name, block in inst["settings"].items():
        raw = np.frombuffer(_unpack(block["maps"]), dtype=np.uint8)
        maxima = np.frombuffer(_unpack(block["row_max"]), dtype="<f4")
        size = sum(lengths)
        rows = len(lengths)
        out[name] = (
            np.stack(
                [
                    dequantise(
                        raw[v * size : (v + 1) * size],
                        maxima[v * rows : (v + 1) * rows],
                        lengths,
                        cols,
                    )
                    for v in range(views)
                ]
            )
            if views
            else np.zeros((0, rows, cols), np.float32)
        )
    return out


def choose_heads(num_layers: int, num_heads: int, ranking=None, shares=None, top_k=None):
    """The (layer, head) pairs the viewer keeps (the rule in the module docstring).
    `shares`: float [layers, heads] mean share on the reference, used without a ranking."""
    import numpy as np

    total = num_layers * num_heads
    k = DEFAULT_TOP_K if top_k is None else int(top_k)
    if k < 0:
        raise ValueError(f"top_k must be >= 0, got {top_k}")
    if top_k is None and total <= ALL_HEADS:
        return [(la, h) for la in range(num_layers) for h in range(num_heads)]
    k = min(k, total)
    if ranking is not None:
        if (ranking.num_layers, ranking.num_heads) != (num_layers, num_heads):
            raise ValueError(
                f"ranking is for [layers, heads] = [{ranking.num_layers}, {ranking.num_heads}], "
                f"the model has [{num_layers}, {num_heads}]"
            )
        return [tuple(x) for x in ranking.top(k)]
    if shares is None:
        raise ValueError("choose_heads needs a ranking or the heads' shares")
    flat = np.nan_to_num(np.asarray(shares, dtype=np.float64), nan=-1.0).reshape(-1)
    order = sorted(range(total), key=lambda i: (-flat[i], i))[:k]
    return [(i // num_heads, i % num_heads) for i in order]


def _intervention(setting, ranking, batch, reference):
    """A capture Intervention for this batch: from a sweep `Setting` (with the ranking) or a
    capture `Intervention` given as is (its cells: the reference unless it names its own)."""
    from harness.engine.capture import Intervention

    if isinstance(setting, Intervention):
        return setting
    from harness.attention.interventions import intervention_for

    allowed = batch.attention_mask.bool().clone()
    allowed[:, batch.prompt_width :] = True
    return intervention_for(setting, ranking, reference, allowed)


def _pass(scorer, encodings, iv=None):
    """One teacher-forced forward under capture (`Scorer.teacher_force`): (batch, forced,
    record, rollout, reference, rollout scores [batch, T]), as `analysis.analyse_batch`
    computes them."""
    from harness.attention import scores
    from harness.engine.capture import AttentionPlan
    from harness.engine.inference import collate_left
    from harness.engine.positions import reference_mask, task_columns

    batch = collate_left(encodings, scorer.char_tok.pad_id, with_answer=True)
    reference = reference_mask(batch)
    plan = AttentionPlan(
        reference=reference,
        rollout=True,
        patterns=range(len(encodings)),
        intervention=iv(batch, reference) if iv else None,
    )
    forced, rec = scorer.teacher_force(encodings, plan)
    rolled = scores.rollout(rec.layer_maps)
    shares = scores.rollout_scores(rolled, reference, task_columns(batch))
    return batch, forced, rec, rolled, reference, shares


def _crop(instance, enc, batch, b, forced, rec, rolled, reference, shares, char_tok):
    """One instance of one pass: rows/columns, its mask, per-row numbers and the float maps
    (rollout [rows, cols], layer means [L, rows, cols], every head [L, H, rows, cols])."""
    import numpy as np
    import torch

    from harness.engine.capture import PATTERN_NAME

    width, shift, n = batch.prompt_width, batch.shifts[b], enc.target_len
    start = shift + enc.prompt_offset
    cols = torch.tensor([*range(start, start + enc.prompt_len), *range(width, width + n)])
    rows = torch.tensor([width - 1 + i for i in range(n)], dtype=torch.long)
    # Row i sees the text columns at or before its query: the causal part that is stored.
    lengths = [int((cols <= r).sum()) for r in rows.tolist()]

    def take(matrix):
        return matrix[rows][:, cols].numpy().astype(np.float32)

    layers = [take(m[b]) for m in rec.layer_maps]
    heads = np.stack(
        [
            rec.patterns[PATTERN_NAME.format(layer=la)][b][:, rows][:, :, cols].numpy()
            for la in range(rec.num_layers)
        ]
    ).astype(np.float32)
    mask = reference[b][rows][:, cols]
    row_scores = [
        float(shares[b, r]) if bool(reference[b, r].any()) else None for r in rows.tolist()
    ]
    return {
        "lengths": lengths,
        "mask": [torch.nonzero(m).flatten().tolist() for m in mask],
        # One string per row: a predicted special token decodes to several characters.
        "predicted": [char_tok.decode([p]) for p in forced.predicted[b]],
        "correct": [bool(c) for c in forced.correct[b]],
        "scores": row_scores,
        "rollout": take(rolled[b]),
        "layers": np.stack(layers) if layers else np.zeros((0, n, len(cols)), np.float32),
        "heads": heads,
    }


def build_viewer_data(
    model,
    tokenizer,
    instances: Sequence[Any],
    prompt=None,
    ranking=None,
    setting=None,
    top_k: int | None = None,
    batch_size: int = 8,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The viewer's data (module docstring) for `instances`, teacher-forced through the
    scoring engine (`Scorer`: texts checked first, eval mode, batches). `setting`: an
    intervention to show beside the baseline, a `harness.attention.sweep.Setting` (needs
    `ranking`) or a `capture.Intervention`; `top_k`: heads kept (default: the module's rule).
    """
    import numpy as np

    from harness.engine.capture import model_shape
    from harness.engine.scoring import Scorer

    if not instances:
        raise ValueError("instances must not be empty")
    scorer = Scorer(model, tokenizer, prompt, batch_size=batch_size)  # refuses batch_size < 1
    setting, names = _shown_settings(setting, ranking)
    num_layers, num_heads = model_shape(model)
    share_sum = np.zeros((num_layers, num_heads))
    share_rows = 0

    def one_batch(chunk, encodings) -> list[dict[str, Any]]:
        nonlocal share_rows
        cases: list[dict[str, Any]] = [{} for _ in chunk]
        for name in names:
            iv = None
            if name != BASELINE:
                iv = lambda batch, ref: _intervention(setting, ranking, batch, ref)  # noqa: E731
            batch, forced, rec, rolled, reference, shares = _pass(scorer, encodings, iv)
            if name == BASELINE:
                rows = rec.head_rows.reshape(-1, num_layers, num_heads)
                rows = rows[~rows[:, 0, 0].isnan()].double().numpy()
                share_sum[...] += rows.sum(0)
                share_rows += len(rows)
            for b, enc in enumerate(encodings):
                cases[b][name] = _crop(
                    chunk[b], enc, batch, b, forced, rec, rolled, reference, shares, scorer.char_tok
                )
        return cases

    # Texts checked first, the model in eval mode throughout: the engine's loop.
    cases = [case for part in scorer.run(instances, one_batch) for case in part]
    heads = choose_heads(
        num_layers, num_heads, ranking, share_sum / max(share_rows, 1), top_k=top_k
    )
    views = [{"name": "rollout", "kind": "rollout"}]
    views += [{"name": f"L{la} mean", "kind": "layer", "layer": la} for la in range(num_layers)]
    views += [{"name": f"L{la}H{h}", "kind": "head", "layer": la, "head": h} for la, h in heads]
    return {
        "format": FORMAT,
        "layers": num_layers,
        "heads": num_heads,
        "settings": names,
        "views": views,
        "quantisation": "uint8 = round(255 * value / row max); row_max float32 per row",
        "encoding": ENCODING,
        "meta": dict(meta or {}),
        "instances": [_instance_entry(x, case, names, heads) for x, case in zip(instances, cases)],
    }


def _shown_settings(setting, ranking) -> tuple[Any, list[str]]:
    """(the intervention shown beside the baseline, or None; the settings' names, the
    baseline's first), `setting` checked (ValueError: neither a sweep Setting nor a capture
    Intervention, or a Setting without a ranking)."""
    from harness.attention.sweep import Setting
    from harness.engine.capture import Intervention

    if setting is not None and not isinstance(setting, (Setting, Intervention)):
        raise ValueError(
            f"setting must be a sweep Setting or a capture Intervention, got {type(setting)}"
        )
    if isinstance(setting, Setting) and setting.is_baseline:
        setting = None
    if isinstance(setting, Setting) and ranking is None:
        raise ValueError(f"setting {setting.name} needs a head ranking")
    names = [BASELINE]
    if setting is not None:
        names.append(setting.name if isinstance(setting, Setting) else "intervention")
    return setting, names


def _instance_entry(x, case, names, heads) -> dict[str, Any]:
    """One instance of the viewer's data: its text and mask, and per setting its answer,
    scores and quantised maps (the rollout, every layer's mean, the chosen heads)."""
    import numpy as np

    base = case[BASELINE]
    entry = {
        "config": x.config or x.task,
        "index": int(x.index),
        "prompt": x.prompt,
        "target": x.target,
        "text": x.prompt + x.target,
        "lengths": base["lengths"],
        "mask": base["mask"],
        "settings": {},
    }
    for name in names:
        c = case[name]
        stack = [c["rollout"], *c["layers"], *(c["heads"][la, h] for la, h in heads)]
        data, maxima = zip(*(quantise(m, base["lengths"]) for m in stack))
        entry["settings"][name] = {
            "predicted": c["predicted"],
            "correct": c["correct"],
            "scores": [None if s is None else round(s, 7) for s in c["scores"]],
            "maps": _pack(np.concatenate(data)),
            "row_max": _pack(np.concatenate(maxima)),
        }
    return entry
