"""Batching rows for a torch DataLoader: `reference` is ragged, so the default collate fails.

    from torch.utils.data import DataLoader
    from attentionspan_datasets import collate_references
    loader = DataLoader(train, batch_size=32, num_workers=2, collate_fn=collate_references)
    loader = DataLoader(train, batch_size=32, collate_fn=partial(collate_references, dense=True))

A batch is a dict of columns: `index` a tensor, every other column a list (strings as they
are, `reference` as lists of lists). With `dense=True` it also has `reference_mask`, a bool
tensor [batch, longest target, longest prompt + target]: `reference_mask[b, i, p]` is True
when predicting `target[i]` of row b must attend to character position p; rows past a
target's end are all False. torch is imported only when a batch is made.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def collate_references(rows: Sequence[Mapping[str, Any]], dense: bool = False) -> dict[str, Any]:
    """Columns of `rows` (dicts as `load_dataset("attentionspan", ...)` yields them, or
    `Instance.to_dict()`); see the module docstring."""
    import torch

    if not rows:
        raise ValueError("collate_references: an empty batch")
    batch: dict[str, Any] = {name: [row[name] for row in rows] for name in rows[0]}
    if "index" in batch:
        batch["index"] = torch.tensor(batch["index"], dtype=torch.long)
    if "params" in batch:  # a JSON string in datasets, a dict from Instance.to_dict()
        batch["params"] = [p if isinstance(p, str) else json.dumps(p) for p in batch["params"]]
    if dense:
        batch["reference_mask"] = reference_mask(rows)
    return batch


def reference_mask(rows: Sequence[Mapping[str, Any]]):
    """bool [batch, longest target, longest prompt + target] from the rows' `reference`."""
    import torch

    steps = max(len(row["reference"]) for row in rows)
    width = max(len(row["prompt"]) + len(row["target"]) for row in rows)
    mask = torch.zeros((len(rows), steps, width), dtype=torch.bool)
    for b, row in enumerate(rows):
        for i, positions in enumerate(row["reference"]):
            if positions:
                mask[b, i, list(positions)] = True
    return mask
