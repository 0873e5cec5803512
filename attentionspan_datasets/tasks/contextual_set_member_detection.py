"""Contextualised set member detection (T5): is either feature pair of the query active?

Sorodoc, Boleda and Baroni (2021), task T5. A fixed mapping, drawn from `mapping_seed`,
gives each of the 36 query features two feature-disjoint pairs of input features (each
pair one of 0-17 and one of 18-35; each feature in 4 queries). The answer is yes (`1`) when
both features of at least one pair are active somewhere, in one vector or two.
Format and masks: _feature_vectors.py; the mapping: `mapping()` there.

With mapping_seed 0, query `0` asks about the pairs (3, q) and (i, g).

Examples:
    3a|07kq||5?0= -> 1
    3a|07k||5g?0= -> 0

Recipe (Section 3.2): one of the query's two pairs is drawn and goes through T2's recipe
(yes: both in one vector or in two; no: one of them, or neither); of the other pair, one
feature (drawn) is kept out of the sequence and the other stays in the background, so the
other pair never holds. 1-6 other features are excluded, the rest active with p = 0.2.

Mask rule: `minimal`: the query and, for a yes, one occurrence of each feature it needs.
`paper`: the query and every occurrence of the drawn pair's features (and, for a
no, of the other pair's background feature); `sufficient` adds the whole input for a no.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from attentionspan_datasets.tasks import _feature_vectors as fv
from attentionspan_datasets.tasks.base import Instance, register_task

NAME = "contextual_set_member_detection"
MAPPINGS = fv.mappings(NAME, 2)  # mapping_seed -> fv.mapping(NAME, seed, 2)


@dataclass
class ContextualSetMemberConfig(fv.MappedConfig):
    pass


def generate(rng: random.Random, config: ContextualSetMemberConfig) -> Instance:
    length = fv.draw_length(rng, config)
    q = fv.query_feature(rng, config.num_queries)
    pairs = MAPPINGS[config.mapping_seed][q]
    return fv.build_two_pairs(rng, config, NAME, length, q, pairs, fv.two_feature_plan)


def oracle(visible: list, params: dict, i: int) -> str | None:
    query, inputs = fv.read_visible(visible, 1)
    if query is None:
        return None
    seen = fv.present(inputs)
    pairs = fv.mapping(NAME, params["mapping_seed"], 2)[query[0]]
    return fv.answer(any(a in seen and b in seen for a, b in pairs))


register_task(
    NAME,
    ContextualSetMemberConfig,
    generate,
    oracle,
    instruction=(
        "Write 1 if both features of either feature pair that the query after '?' stands for are "
        "active before it, else 0."
    ),
)
fv.register_retrieval_presets("t5", NAME)
