"""collate_references: ragged reference lists batched; the usage doc's DataLoader snippet runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attentionspan_datasets import collate_references, iter_split

torch = pytest.importorskip("torch")
DOC = Path(__file__).resolve().parents[1] / "docs" / "usage_datasets.md"


def test_lists_stay_lists_and_index_is_a_tensor():
    rows = [i.to_dict() for i in iter_split("reversal_id", split="train", stop=4)]
    batch = collate_references(rows)
    assert batch["reference"] == [row["reference"] for row in rows]
    assert batch["prompt"] == [row["prompt"] for row in rows]
    assert torch.equal(batch["index"], torch.tensor([0, 1, 2, 3]))
    assert all(isinstance(p, str) for p in batch["params"])
    assert "reference_mask" not in batch


def test_dense_mask_marks_exactly_the_references():
    rows = [
        {"index": 0, "prompt": "ab=", "target": "ba", "reference": [[1], [0]]},
        {"index": 1, "prompt": "abc=", "target": "c", "reference": [[2, 0]]},
    ]
    mask = collate_references(rows, dense=True)["reference_mask"]
    assert mask.shape == (2, 2, 5) and mask.dtype == torch.bool
    assert mask[0, 0].nonzero().flatten().tolist() == [1]
    assert mask[0, 1].nonzero().flatten().tolist() == [0]
    assert mask[1, 0].nonzero().flatten().tolist() == [0, 2]
    assert not mask[1, 1].any()  # past the target's end
    assert int(mask.sum()) == 4


def test_an_empty_batch_is_refused():
    with pytest.raises(ValueError, match="empty batch"):
        collate_references([])


@pytest.mark.slow  # two DataLoaders with two worker processes each
def test_the_usage_docs_dataloader_snippet_runs_as_written(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    [snippet] = [
        block for block in blocks if "collate_references" in block and "DataLoader(" in block
    ]
    env = dict(os.environ, HF_DATASETS_CACHE=str(tmp_path / "cache"), HF_HUB_OFFLINE="1")
    result = subprocess.run(
        [sys.executable, "-c", snippet], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "tensor([" in lines[0]
    assert lines[-1] == "torch.Size([32, " + lines[-1].split("[32, ")[1]  # batch of 32
    assert lines[-1].endswith("torch.bool")
