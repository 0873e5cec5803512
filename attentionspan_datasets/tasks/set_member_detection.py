"""Set member detection (T3): is either input feature that the query stands for active?

Sorodoc, Boleda and Baroni (2021), task T3. A fixed mapping, drawn from `mapping_seed`,
gives each of the 36 query features a pair of input features (one of 0-17, one of 18-35;
each feature in 2 queries). The answer is yes (`1`) when at least one of the pair is active
in some vector. Format and masks: _feature_vectors.py; the mapping: `mapping()` there.

With mapping_seed 0, query `0` asks about features u and a.

Examples:
    3a|07kz||5?0= -> 1
    3|07kz||5?0= -> 0

Recipe (Section 3.2): yes or no with probability 1/2 each. Yes: one of the pair (drawn) in
one vector, or both (drawn uniformly), then in the same vector or two (drawn uniformly).
No: neither appears. 1-6 other features are excluded, the rest active with p = 0.2.

Mask rule: `minimal`: the query and, for a yes, one occurrence of each feature it needs.
`paper`: the query and every occurrence of the pair's features;
`sufficient` adds the whole input for a no.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from attentionspan_datasets.tasks import _feature_vectors as fv
from attentionspan_datasets.tasks.base import Instance, register_task

NAME = "set_member_detection"
MAPPINGS = fv.mappings(NAME, 1)  # mapping_seed -> fv.mapping(NAME, seed, 1)


@dataclass
class SetMemberConfig(fv.MappedConfig):
    pass


def generate(rng: random.Random, config: SetMemberConfig) -> Instance:
    length = fv.draw_length(rng, config)
    q = fv.query_feature(rng, config.num_queries)
    ((a, b),) = MAPPINGS[config.mapping_seed][q]
    if not rng.getrandbits(1):
        answer, case, planted, decisive = 0, "none_present", [], ()
    elif rng.getrandbits(1):
        one = a if rng.getrandbits(1) else b
        planted = [(one, fv.randbelow(rng, length))]
        answer, case, decisive = 1, "one_present", (one,)
    else:
        answer, case, planted, decisive = fv.two_feature_plan_positive(rng, length, a, b)
        case = "both_" + case  # both_same_vector or both_different_vectors
    return fv.build_one_pair(rng, config, NAME, length, q, a, b, (answer, case, planted, decisive))


def oracle(visible: list, params: dict, i: int) -> str | None:
    query, inputs = fv.read_visible(visible, 1)
    if query is None:
        return None
    ((a, b),) = fv.mapping(NAME, params["mapping_seed"], 1)[query[0]]
    seen = fv.present(inputs)
    return fv.answer(a in seen or b in seen)


register_task(
    NAME,
    SetMemberConfig,
    generate,
    oracle,
    instruction=(
        "Write 1 if either of the two input features that the query after '?' stands for is active "
        "before it, else 0."
    ),
)
fv.register_retrieval_presets("t3", NAME)
