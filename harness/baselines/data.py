"""Instances of T1-T7 -> the baselines' tensors, from the suite's splits.

    from harness.baselines.data import load_split
    batch = load_split("t6_len10", "train", size=1000, seed=0)
    batch.vectors  # float [N, n, 36]; batch.query [N, 36]; batch.labels [N]
    batch.reference  # bool [N, n]: the vectors the paper mask points into

Rows come from `attentionspan_datasets.splits.iter_split`, so train, validation and test
never share a prompt, as everywhere in the suite. T1's training split is drawn with
`single_occurrence=False` (the paper: the queried feature may repeat during training, once
at test time).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attentionspan_datasets.generation import resolve_config
from attentionspan_datasets.splits import iter_split
from attentionspan_datasets.tasks.base import Instance, TaskConfig

NUM_FEATURES = 36
VECTOR_SEPARATOR = "|"


@dataclass
class FeatureBatch:
    vectors: torch.Tensor  # float [N, n, 36]
    query: torch.Tensor  # float [N, 36]
    labels: torch.Tensor  # float [N]
    reference: torch.Tensor  # bool [N, n]: vectors holding a paper-mask position
    # long [N, 2]: (earlier, later) vector of the two features of the decisive pair when
    # they sit in two different vectors, else (-1, -1): the paper's Table 3 compares the
    # decoder attention on the later and the earlier one.
    carriers: torch.Tensor

    def __len__(self) -> int:
        return self.labels.shape[0]

    def to(self, device: str | torch.device) -> FeatureBatch:
        fields = (self.vectors, self.query, self.labels, self.reference, self.carriers)
        return FeatureBatch(*(t.to(device) for t in fields))

    def take(self, index: torch.Tensor) -> FeatureBatch:
        return FeatureBatch(
            self.vectors[index],
            self.query[index],
            self.labels[index],
            self.reference[index],
            self.carriers[index],
        )


def reference_vectors(instance: Instance) -> list[int]:
    """Indices of the vectors that the answer's reference row points into (the query and
    separators excluded)."""
    prompt = instance.prompt
    end = prompt.index("?")
    vectors = set()
    for position in instance.reference[0]:
        if position < end and prompt[position] != VECTOR_SEPARATOR:
            vectors.add(prompt.count(VECTOR_SEPARATOR, 0, position))
    return sorted(vectors)


def carrier_vectors(instance: Instance) -> tuple[int, int]:
    """(earlier, later) vector of the decisive pair's two features (T2, T4-T7: the query's
    pair, or for T5 and T7 the drawn one), when each occurs once and in different vectors;
    else (-1, -1)."""
    params = instance.params
    features = params["features"]
    if "pair" in params:
        features = features[params["pair"]]
    if len(features) != 2 or isinstance(features[0], list):
        return -1, -1
    where = [[t for t, v in enumerate(params["vectors"]) if f in v] for f in features]
    if any(len(w) != 1 for w in where) or where[0] == where[1]:
        return -1, -1
    first, second = sorted(w[0] for w in where)
    return first, second


def to_batch(instances: list[Instance]) -> FeatureBatch:
    """Multi-hot tensors of equal-length instances (one preset has one length per batch)."""
    n = instances[0].params["length"]
    if any(x.params["length"] != n for x in instances):
        raise ValueError("to_batch needs instances of one length (one vector count)")
    rows = [
        (
            x.params["vectors"],
            x.params["query"],
            float(x.target),
            reference_vectors(x),
            carrier_vectors(x),
        )
        for x in instances
    ]
    return make_batch(n, rows)


def make_batch(n: int, rows: list[tuple]) -> FeatureBatch:
    """A FeatureBatch of `rows`, each (vectors: n lists of active feature ids, query
    features, label 0.0/1.0, indices of the reference vectors, (earlier, later) carrier
    vectors or (-1, -1)): what our instances (`to_batch`) and the authors' files
    (authors_data.py) both become."""
    size = len(rows)
    vectors = torch.zeros(size, n, NUM_FEATURES)
    query = torch.zeros(size, NUM_FEATURES)
    reference = torch.zeros(size, n, dtype=torch.bool)
    carriers = torch.full((size, 2), -1, dtype=torch.long)
    at_rows, at_cols, feats = [], [], []
    for i, (row_vectors, row_query, _, row_reference, row_carriers) in enumerate(rows):
        for t, vector in enumerate(row_vectors):
            at_rows += [i] * len(vector)
            at_cols += [t] * len(vector)
            feats += vector
        query[i, row_query] = 1.0
        reference[i, row_reference] = True
        carriers[i] = torch.tensor(row_carriers)
    vectors[at_rows, at_cols, feats] = 1.0
    labels = torch.tensor([row[2] for row in rows])
    return FeatureBatch(vectors, query, labels, reference, carriers)


def task_config(task: str, length: int) -> TaskConfig:
    """The config of task `t1` ... `t7` with `length` vectors (any length the task allows,
    not only the presets' 5-30); a bad length is a ValueError naming the field."""
    return resolve_config(task, min_length=length, max_length=length)


def load_split(
    config: str | TaskConfig, split: str, size: int, seed: int, mask: str = "paper"
) -> FeatureBatch:
    """`size` rows of `split` of a T1-T7 preset (validated: a task of the suite with vectors)."""
    cfg = resolve_config(config, mask=mask)
    if not hasattr(cfg, "background_percent"):
        raise ValueError(
            f"baselines need a discrete-retrieval preset (t1_len10 ... t7_ood), got {config!r}"
        )
    overrides = {}
    if split == "train" and hasattr(cfg, "single_occurrence"):
        overrides["single_occurrence"] = False
    return to_batch(list(iter_split(cfg, seed=seed, split=split, stop=size, **overrides)))
