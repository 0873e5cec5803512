"""Ordered feature detection (T6): does the query's first feature precede its second?

Sorodoc, Boleda and Baroni (2021), task T6. A fixed mapping, drawn from `mapping_seed`,
gives each of the 36 query features an ordered pair of input features (one of 0-17, one of
18-35; each feature in 2 queries). The answer is yes (`1`) when the first feature is active
in an earlier vector than the second. Format and masks: _feature_vectors.py; the mapping:
`mapping()` there.

With mapping_seed 0, query `0` asks about `k` before `3`.

Examples:
    0k|3a||5?0= -> 1
    3a|0k||5?0= -> 0

Recipe (Section 3.2): yes or no with probability 1/2 each. Yes: two vectors drawn, the
first feature in the earlier one, the second in the later. No: both in the wrong order, or
at most one of them (drawn uniformly; at most one: one of them in one vector, or neither,
uniformly). 1-6 other features are excluded, the rest active with p = 0.2.

Mask rule: `minimal`: the query and, for a yes, one occurrence of each feature it needs.
`paper`: the query and every occurrence of the pair's features (the occurrences
whose order decides); `sufficient` adds, for a yes, the "|" after the first feature's vector
(it shows the two are in different vectors) and, for a no, the whole input.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from attentionspan_datasets.tasks import _feature_vectors as fv
from attentionspan_datasets.tasks._recipes import SHALLOW_WIDE, SLOW_CONSTANT_LR
from attentionspan_datasets.tasks.base import Instance, register_task

NAME = "ordered_feature_detection"
MAPPINGS = fv.mappings(NAME, 1)  # mapping_seed -> fv.mapping(NAME, seed, 1)


@dataclass
class OrderedFeatureConfig(fv.MappedConfig):
    pass


def generate(rng: random.Random, config: OrderedFeatureConfig) -> Instance:
    length = fv.draw_length(rng, config)
    q = fv.query_feature(rng, config.num_queries)
    ((a, b),) = MAPPINGS[config.mapping_seed][q]
    plan = fv.ordered_plan(rng, length, a, b)
    return fv.build_one_pair(rng, config, NAME, length, q, a, b, plan)


def oracle(visible: list, params: dict, i: int) -> str | None:
    query, inputs = fv.read_visible(visible, 1)
    if query is None:
        return None
    ((a, b),) = fv.mapping(NAME, params["mapping_seed"], 1)[query[0]]
    return fv.answer(fv.precedes(inputs, a, b))


register_task(
    NAME,
    OrderedFeatureConfig,
    generate,
    oracle,
    instruction=(
        "Write 1 if the first input feature that the query after '?' stands for is active in an "
        "earlier vector than its second, else 0."
    ),
    recipes={
        # the query set grows 2, 4, 8, 16, 36 on inputs of 2-3 vectors (a new query takes
        # ~8,000 instances to learn, so the stage of all 36 is the longest), then longer
        # inputs: from all 36 queries at once a model stays at chance (docs/usage_analysis.md,
        # "Recipes")
        "quick": {
            "max_steps": 12000,
            **SLOW_CONSTANT_LR,
            "curriculum": (
                "500:num_queries=2,min_length=2,max_length=3;"
                "500:num_queries=4,min_length=2,max_length=3;"
                "1000:num_queries=8,min_length=2,max_length=3;"
                "2000:num_queries=16,min_length=2,max_length=3;"
                "5000:min_length=2,max_length=3;"
                "1000:min_length=2,max_length=6"
            ),
            "scratch": SHALLOW_WIDE,
        },
    },
)
fv.register_retrieval_presets("t6", NAME)
