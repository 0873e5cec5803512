"""One-feature detection (T1): is the query's feature active in some vector before '?'?

Sorodoc, Boleda and Baroni (2021), task T1. The query is one feature; the answer is yes
(`1`) when some input vector has it active. Format and masks: _feature_vectors.py.

Examples:
    3a|07kz||5?k= -> 1
    3a|07z||5?k= -> 0

Recipe (Section 3.2): the query feature is drawn uniformly; the answer is yes or no with
probability 1/2 each; yes plants the feature in one vector drawn uniformly, no keeps it out.
The paper's test data has the queried feature exactly once, its training data possibly
more often (in the other vectors with the background probability): `single_occurrence`
(default true, the test condition) chooses; pass `single_occurrence=False` for the
paper's training distribution. 1-6 other features are excluded per instance; the rest are
active with p = 0.2.

Mask rule: `minimal`: the query and, for a yes, one occurrence of each feature it needs.
`paper`: the query and every occurrence of its feature (none for a no);
`sufficient` adds the whole input for a no (absence is read from every vector).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from attentionspan_datasets.tasks import _feature_vectors as fv
from attentionspan_datasets.tasks.base import Instance, register_task

NAME = "one_feature_detection"


@dataclass
class OneFeatureConfig(fv.FeatureConfig):
    single_occurrence: bool = True


def generate(rng: random.Random, config: OneFeatureConfig) -> Instance:
    length = fv.draw_length(rng, config)
    f = fv.query_feature(rng)
    if not rng.getrandbits(1):
        return fv.build(rng, config, NAME, length, [f], [f], 0, "absent", [], 1 << f, ())
    planted = [(f, fv.randbelow(rng, length))]
    if config.single_occurrence:
        return fv.build(rng, config, NAME, length, [f], [f], 1, "present", planted, 1 << f, (f,))
    # Planted once, and left in the background elsewhere (the paper's training data).
    return fv.build(
        rng,
        config,
        NAME,
        length,
        [f],
        [f],
        1,
        "present",
        planted,
        0,
        (f,),
        None,
        fv.NO_EXTRA,
        1 << f,
    )


def oracle(visible: list, params: dict, i: int) -> str | None:
    query, inputs = fv.read_visible(visible, 1)
    if query is None:
        return None
    return fv.answer(query[0] in fv.present(inputs))


register_task(
    NAME,
    OneFeatureConfig,
    generate,
    oracle,
    instruction="Write 1 if the feature after '?' is active in some vector before it, else 0.",
)
fv.register_retrieval_presets("t1", NAME)
