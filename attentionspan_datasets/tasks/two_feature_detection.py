"""Two-feature detection (T2): are both query features active somewhere before '?'?

Sorodoc, Boleda and Baroni (2021), task T2. The query has two features (any of the
36 * 35 / 2 = 630 pairs); the answer is yes (`1`) when each is active in some input vector,
the same one or two different ones. Format and masks: _feature_vectors.py.

Examples:
    3a|07kz||5?5k= -> 1
    3a|07z||5?5k= -> 0

Recipe (Section 3.2): yes or no with probability 1/2 each. Yes: the two features in the
same vector or in two different vectors (drawn uniformly). No: one of them in one vector,
or neither (drawn uniformly). The queried features appear only where planted; 1-6 other
features are excluded per instance and the rest are active with p = 0.2.

Mask rule: `minimal`: the query and, for a yes, one occurrence of each feature it needs.
`paper`: the two query characters and every occurrence of a queried feature;
`sufficient` adds the whole input for a no.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from attentionspan_datasets.tasks import _feature_vectors as fv
from attentionspan_datasets.tasks.base import Instance, register_task

NAME = "two_feature_detection"


@dataclass
class TwoFeatureConfig(fv.FeatureConfig):
    pass


def generate(rng: random.Random, config: TwoFeatureConfig) -> Instance:
    length = fv.draw_length(rng, config)
    a, b = fv.two_positions(rng, fv.NUM_FEATURES)
    if a > b:
        a, b = b, a
    answer, case, planted, decisive = fv.two_feature_plan(rng, length, a, b)
    controlled = 1 << a | 1 << b
    return fv.build(
        rng, config, NAME, length, [a, b], [a, b], answer, case, planted, controlled, decisive
    )


def oracle(visible: list, params: dict, i: int) -> str | None:
    query, inputs = fv.read_visible(visible, 2)
    if query is None:
        return None
    return fv.answer(set(query) <= fv.present(inputs))


register_task(
    NAME,
    TwoFeatureConfig,
    generate,
    oracle,
    instruction="Write 1 if both features after '?' are active in the vectors before it, else 0.",
)
fv.register_retrieval_presets("t2", NAME)
