"""Contextualised two-feature detection (T4): are both input features of the query active?

Sorodoc, Boleda and Baroni (2021), task T4. A fixed mapping, drawn from `mapping_seed`,
gives each of the 36 query features a pair of input features (one of 0-17, one of 18-35;
each feature in 2 queries, so it matters only beside one of two partners). The answer is
yes (`1`) when both features of the pair are active somewhere, in one vector or two.
Format and masks: _feature_vectors.py; the mapping: `mapping()` there.

With mapping_seed 0, query `0` asks about features 7 and z.

Examples:
    3a|07kz||5?0= -> 1
    3a|07k||5?0= -> 0

Recipe (Section 3.2: "similar to T2" with the mapped pair): yes or no with probability 1/2
each. Yes: both in one vector or in two (drawn uniformly). No: one of them in one vector,
or neither (drawn uniformly). 1-6 other features are excluded, the rest active with p = 0.2.

Mask rule: `minimal`: the query and, for a yes, one occurrence of each feature it needs.
`paper`: the query and every occurrence of the pair's features;
`sufficient` adds the whole input for a no.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from attentionspan_datasets.tasks import _feature_vectors as fv
from attentionspan_datasets.tasks.base import Instance, register_task

NAME = "contextual_two_feature_detection"
MAPPINGS = fv.mappings(NAME, 1)  # mapping_seed -> fv.mapping(NAME, seed, 1)


@dataclass
class ContextualTwoFeatureConfig(fv.MappedConfig):
    pass


def generate(rng: random.Random, config: ContextualTwoFeatureConfig) -> Instance:
    length = fv.draw_length(rng, config)
    q = fv.query_feature(rng, config.num_queries)
    ((a, b),) = MAPPINGS[config.mapping_seed][q]
    plan = fv.two_feature_plan(rng, length, a, b)
    return fv.build_one_pair(rng, config, NAME, length, q, a, b, plan)


def oracle(visible: list, params: dict, i: int) -> str | None:
    query, inputs = fv.read_visible(visible, 1)
    if query is None:
        return None
    ((a, b),) = fv.mapping(NAME, params["mapping_seed"], 1)[query[0]]
    seen = fv.present(inputs)
    return fv.answer(a in seen and b in seen)


register_task(
    NAME,
    ContextualTwoFeatureConfig,
    generate,
    oracle,
    instruction=(
        "Write 1 if both input features that the query after '?' stands for are active before it, "
        "else 0."
    ),
)
fv.register_retrieval_presets("t4", NAME)
