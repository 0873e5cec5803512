"""Contextualised ordered set member detection (T7): does either ordered pair of the query hold?

Sorodoc, Boleda and Baroni (2021), task T7. A fixed mapping, drawn from `mapping_seed`,
gives each of the 36 query features two feature-disjoint ordered pairs of input features
(each pair one of 0-17 and one of 18-35; each feature in 4 queries). The answer is yes
(`1`) when, for at least one pair, the first feature is active in an earlier vector than
the second. Format and masks: _feature_vectors.py; the mapping: `mapping()` there.

With mapping_seed 0, query `0` asks about the pairs (3 before p) and (x before h).

Examples:
    3a|07p||5?0= -> 1
    0p|3a||5h?0= -> 0

Recipe (Section 3.2): one of the query's two pairs is drawn and goes through T6's recipe
(yes: in order in two vectors; no: wrong order, or at most one of them); of the other pair,
one feature (drawn) is kept out of the sequence and the other stays in the background, so
the other pair never holds. 1-6 other features are excluded, the rest active with p = 0.2.

Mask rule: `minimal`: the query and, for a yes, one occurrence of each feature it needs.
`paper`: the query and every occurrence of the drawn pair's features (and, for
a no, of the other pair's background feature); `sufficient` adds, for a yes, the "|" after
the first feature's vector and, for a no, the whole input.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from attentionspan_datasets.tasks import _feature_vectors as fv
from attentionspan_datasets.tasks.base import Instance, register_task

NAME = "contextual_ordered_set_member_detection"
MAPPINGS = fv.mappings(NAME, 2)  # mapping_seed -> fv.mapping(NAME, seed, 2)


@dataclass
class ContextualOrderedSetMemberConfig(fv.MappedConfig):
    pass


def generate(rng: random.Random, config: ContextualOrderedSetMemberConfig) -> Instance:
    length = fv.draw_length(rng, config)
    q = fv.query_feature(rng, config.num_queries)
    pairs = MAPPINGS[config.mapping_seed][q]
    return fv.build_two_pairs(rng, config, NAME, length, q, pairs, fv.ordered_plan)


def oracle(visible: list, params: dict, i: int) -> str | None:
    query, inputs = fv.read_visible(visible, 1)
    if query is None:
        return None
    pairs = fv.mapping(NAME, params["mapping_seed"], 2)[query[0]]
    return fv.answer(any(fv.precedes(inputs, a, b) for a, b in pairs))


register_task(
    NAME,
    ContextualOrderedSetMemberConfig,
    generate,
    oracle,
    instruction=(
        "Write 1 if, for either ordered feature pair that the query after '?' stands for, the "
        "first is active in an earlier vector than the second, else 0."
    ),
)
fv.register_retrieval_presets("t7", NAME)
