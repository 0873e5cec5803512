"""What the tensor-parallel tests compare: one battery of every measurement the analysis
makes on a model, run once in this process on the whole model and once under `torchrun
--nproc-per-node 2` on the model sharded by heads (`--tp-plan auto`).

    python -m tests.harness.tensor_parallel_battery OUT MODEL_DIR ...   # under torchrun

Under torchrun every process writes what it measured to OUT/rank<r>.pt ({model folder:
battery}); the tests check that both processes hold the same and that it equals the
single-process battery (`compare`).
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

CONFIG = "reversal_id"
INSTANCES = 4
BATCH = 4
# Settings of every intervention mode (harness.engine.modes) on heads spread over both
# processes' blocks: the top 3 of the ranking, random heads, and the positions control.
MODE_SETTINGS = (
    dict(heads="top", n=3, strength=1.0, mode="standard"),
    dict(heads="top", n=3, strength=1.0, mode="standard", renormalise=True),
    dict(heads="top", n=3, strength=2.0, mode="conditional", threshold=0.05),
    dict(heads="top", n=3, mode="knockout"),
    dict(heads="top", n=3, mode="restore"),
    dict(heads="random", n=4, strength=1.0, seed=1),
    dict(heads="top", n=2, strength=1.0, positions="random", seed=2),
)
# Records agree to this across the two runs, absolutely or relatively (a sum of many rows):
# test_tensor_parallel.py says why not 0.
ATOL = RTOL = 1e-6


def battery(model, tokenizer) -> dict[str, Any]:
    """Every measurement of the analysis on `model`: capture records teacher-forced and
    free-running (per-head reference mass, named references, rollout maps, full patterns),
    the head ranking, every intervention mode's records, the dose ladder's rows, the
    diagnosis of where errors look and the calibrated verdict."""
    import torch

    from attentionspan_datasets.splits import iter_split
    from harness.attention.diagnosis import id_level, where_errors_look
    from harness.attention.dose import run_dose_ladder
    from harness.attention.heads import rank_heads
    from harness.attention.interventions import score_settings
    from harness.attention.lookup import Lookup
    from harness.attention.setting import Setting
    from harness.attention.sweep import BASELINE
    from harness.attention.verdicts.calibrated import calibrated_verdict
    from harness.engine.capture import AttentionPlan, Intervention, Reference
    from harness.engine.positions import shift_mask
    from harness.engine.scoring import Scorer, collate_left, eval_mode
    from harness.foundation.data import PromptConfig

    torch.manual_seed(0)
    prompt = PromptConfig()
    instances = list(iter_split(CONFIG, seed=0, split="validation", stop=INSTANCES))
    scorer = Scorer(model, tokenizer, prompt, BATCH)
    out: dict[str, Any] = {}
    encodings = scorer.encode(instances)
    batch = collate_left(encodings, scorer.char_tok.pad_id)
    reference = batch.reference_mask()
    plan = dict(
        reference=reference,
        rollout=True,
        patterns=(0, 2),
        references={"ref+1": Reference(shift_mask(reference, 1), 0.05)},
    )
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    chosen = torch.zeros(layers, heads, dtype=torch.bool)
    chosen[0, 0] = chosen[1, heads - 1] = chosen[1, 1] = True  # on both processes' blocks
    per_row = Intervention(
        heads=chosen.expand(len(instances), -1, -1).clone(),
        strength=torch.tensor([1.0, 0.0, 2.0, 0.0]),
        threshold=torch.tensor([0.0, 0.0, 0.1, 0.0]),
        mode=("standard", "knockout", "conditional", "restore"),
        renormalise=(False, True, False, False),
        levels=torch.full((layers, heads), 0.3),
    )
    with torch.inference_mode(), eval_mode(model):
        for name, intervention in (("plain", None), ("per-row", per_row)):
            forced, record = scorer.teacher_force(
                encodings, AttentionPlan(**plan, intervention=intervention)
            )
            out[f"forced/{name}"] = {
                "predicted": forced.predicted,
                **_record(record),
            }
            gen, record = scorer.generate(
                encodings, AttentionPlan(**plan, intervention=intervention)
            )
            out[f"generate/{name}"] = {"ids": gen.ids, **_record(record)}
    ranking = rank_heads(model, tokenizer, instances, prompt, batch_size=BATCH)
    ranking.source.pop("time_s")
    out["ranking"] = ranking.to_dict()
    settings = [BASELINE, *(Setting(**s) for s in MODE_SETTINGS)]
    out["modes"] = score_settings(
        model, tokenizer, instances, settings, ranking, prompt=prompt, batch_size=BATCH
    )
    ood = list(iter_split("reversal_ood", seed=0, split="validation", stop=INSTANCES))
    ladder = run_dose_ladder(
        model,
        tokenizer,
        prompt,
        Lookup.of(ranking),
        2,
        ood,
        instances,
        BATCH,
        draws=1,
        n_resamples=50,
    )
    out["dose"] = ladder
    heads_top = ranking.top(2)
    records = score_settings(
        model, tokenizer, ood, [BASELINE], ranking, prompt=prompt, batch_size=BATCH
    )[BASELINE.name]
    level = id_level(ranking, heads_top)
    out["diagnosis"] = where_errors_look(scorer, ood, records, heads_top, level=level)
    out["verdict"] = calibrated_verdict(ladder, ladder, out["diagnosis"])
    return out


def _record(record) -> dict[str, Any]:
    """The tensors of a capture record (named, on the CPU)."""
    return {
        "head_rows": record.head_rows,
        "named": dict(record.named_rows),
        "maps": list(record.layer_maps or []),
        "patterns": dict(record.patterns),
        "calls": record.calls,
        "length": record.length,
    }


def compare(a: Any, b: Any, where: str = "", atol: float = ATOL) -> list[str]:
    """Where `a` and `b` differ: tensors and floats by more than `atol` plus RTOL of `b` when
    `atol` is not 0 (nan only against nan), everything else (ids, counts, names, texts,
    bools) exactly."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return [f"{where}: {type(a).__name__} vs {type(b).__name__}"]
        if a.shape != b.shape:
            return [f"{where}: shape {tuple(a.shape)} vs {tuple(b.shape)}"]
        rtol = RTOL if atol else 0.0
        if not torch.allclose(a.float(), b.float(), rtol=rtol, atol=atol, equal_nan=True):
            gap = (a.float() - b.float()).abs().nan_to_num(0).max()
            return [f"{where}: differs by {float(gap):.3g}"]
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(map(str, a))} vs {sorted(map(str, b))}"]
        return [d for k in a for d in compare(a[k], b[k], f"{where}/{k}", atol)]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{where}: length {len(a)} vs {len(b)}"]
        pairs = enumerate(zip(a, b))
        return [d for i, (x, y) in pairs for d in compare(x, y, f"{where}[{i}]", atol)]
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        rtol = RTOL if atol else 0.0
        same = (math.isnan(a) and math.isnan(b)) or abs(a - b) <= atol + rtol * abs(b)
        return [] if same else [f"{where}: {a!r} vs {b!r}"]
    return [] if a == b else [f"{where}: {a!r} vs {b!r}"]


def refusal(model) -> str:
    """What capture says to a plan with readers (training's supervision) on a sharded model."""
    from harness.engine.capture import AttentionCaptureError, AttentionPlan, capture_attention

    try:
        with capture_attention(model, AttentionPlan(readers=[lambda *a: None])):
            pass
    except AttentionCaptureError as error:
        return str(error)
    return ""


def main(argv: list[str]) -> int:
    """Under torchrun: the battery of each model folder, loaded with `--tp-plan auto`."""
    import torch

    from harness.foundation.dispatch import Placement, tensor_parallel_of
    from harness.foundation.models import load_model

    out, folders = Path(argv[0]), argv[1:]
    results = {}
    for folder in folders:
        model, tokenizer = load_model(folder, placement=Placement(tp_plan="auto"))
        shard = tensor_parallel_of(model)
        assert shard is not None and shard.size == int(os.environ["WORLD_SIZE"])
        results[folder] = battery(model, tokenizer)
        results[folder]["readers"] = refusal(model)
    torch.save(results, out / f"rank{os.environ['RANK']}.pt")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
