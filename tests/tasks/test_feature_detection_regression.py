"""T1-T7 data is reproducible by contract: (config, seed, index) fixes the instance forever.

The digests below were computed from the generator as it stood at commit 847f802, before
its speed-ups; every later optimisation must leave the instances
byte for byte the same: prompt, target, every mask variant, params. A digest covers 40
instances from each of two seeds (one at a large start index) per mask variant, plus three
single instances through `generate`. Regenerate only for a deliberate change of the data:

    python tests/tasks/test_feature_detection_regression.py   # prints GOLDEN
"""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from attentionspan_datasets import generate, iter_instances
from attentionspan_datasets.presets import PRESETS, RETRIEVAL_TASKS
from attentionspan_datasets.tasks import _feature_vectors as fv

PER_STREAM = 40
# Configs beyond the presets: the T1 training distribution, other mapping seeds, background
# rates 0 / 37 / 100, no and many exclusions, length steps and the extreme lengths.
EXTRA = {
    "t1_ood+train": ("t1_ood", {"single_occurrence": False}),
    "t3_id+map7": ("t3_id", {"mapping_seed": 7}),
    "t5_ood+map123456": ("t5_ood", {"mapping_seed": 123456}),
    "t7_len30+map99": ("t7_len30", {"mapping_seed": 99}),
    "t2_id+p100": ("t2_id", {"background_percent": 100}),
    "t6_id+p0": ("t6_id", {"background_percent": 0}),
    "t4_len25+p37": ("t4_len25", {"background_percent": 37}),
    "t5_id+excl0": ("t5_id", {"min_excluded": 0, "max_excluded": 0}),
    "t7_id+excl30": ("t7_id", {"min_excluded": 30, "max_excluded": 30}),
    "t6+2-200step3": ("t6", {"min_length": 2, "max_length": 200, "length_step": 3}),
    "t2+len2": ("t2", {"min_length": 2, "max_length": 2}),
    "t1+150-200": ("t1", {"min_length": 150, "max_length": 200}),
}


def cases() -> dict[str, tuple[str, dict]]:
    presets = {p: (p, {}) for p in PRESETS if PRESETS[p].short in RETRIEVAL_TASKS}
    return {**presets, **EXTRA}


def digest(config: str, overrides: dict) -> str:
    h = hashlib.sha256()
    for mask in ("paper", "sufficient", "minimal"):
        rows = [
            *iter_instances(config, seed=0, stop=PER_STREAM, mask=mask, **overrides),
            *iter_instances(
                config, seed=1234, start=10**12, stop=10**12 + PER_STREAM, mask=mask, **overrides
            ),
            *(generate(config, seed=42, index=i, mask=mask, **overrides) for i in (0, 5, 77)),
        ]
        for row in rows:
            h.update(json.dumps(row.to_dict(), sort_keys=True).encode())
            h.update(b"\n")
    return h.hexdigest()[:20]


GOLDEN = {
    "t1_len5": "1cf601bf48d6be3b3357",
    "t1_len10": "17318e17a21c2cfa4fa2",
    "t1_len15": "88b39e26d0828b16be17",
    "t1_len20": "b49733274fbc3b6627cb",
    "t1_len25": "0b76d4dcd3171e55f21f",
    "t1_len30": "ac16002df2b9f3d8d134",
    "t1_id": "9dc8b2add13e68f1d594",
    "t1_ood": "97cef0737818bc5dc6d5",
    "t2_len5": "49fcca45f13fee19572f",
    "t2_len10": "fd34209c699c28091114",
    "t2_len15": "41ab086b95450be02318",
    "t2_len20": "3c2064c4132e326ed11c",
    "t2_len25": "d51baabc417444aa4402",
    "t2_len30": "5699b792859f19a641c0",
    "t2_id": "44e174efc6121e98f579",
    "t2_ood": "7ca8bd585b08bc75f388",
    "t3_len5": "23269040ef2ed4e27c4a",
    "t3_len10": "b76d8bde80240b56e664",
    "t3_len15": "64dffcf89542a8e30c3f",
    "t3_len20": "4e292cd0032275a9c9ac",
    "t3_len25": "e832e094a66e33d1c393",
    "t3_len30": "a29af66775074ddf5143",
    "t3_id": "7db9416c3080108423f0",
    "t3_ood": "0863309b9653e53807d7",
    "t4_len5": "6a00f87dd106d099fe92",
    "t4_len10": "afe6faf9d3d8002d0343",
    "t4_len15": "7320de00a75248b26381",
    "t4_len20": "e4b09e8f5c5d28d625c4",
    "t4_len25": "795a02f43036d24c08e2",
    "t4_len30": "50622d025225372e602e",
    "t4_id": "77b4c67c35c473a0c99c",
    "t4_ood": "aa145653029208af1e41",
    "t5_len5": "9c4fb75c9766c5e3b885",
    "t5_len10": "4df55950b7b8bae3373e",
    "t5_len15": "ac2a404176e362a82ca5",
    "t5_len20": "212c23d4c79f2f0aba9e",
    "t5_len25": "a82b3bf6554a9d1a4d46",
    "t5_len30": "4113bdbfebe93acd3631",
    "t5_id": "f46f3936e54c4653916f",
    "t5_ood": "f80c5e7ffcd7e229a20a",
    "t6_len5": "9a0d519abc0b04f11373",
    "t6_len10": "36a4d3c5277f3c7a5ed5",
    "t6_len15": "bc2bfed51b12a8f617da",
    "t6_len20": "ec9888d3962b9e52c653",
    "t6_len25": "a459834ca61777820b02",
    "t6_len30": "885e4445b5fca0d0c699",
    "t6_id": "e621496abde597ca37e3",
    "t6_ood": "3a3e9622411a19e86eb9",
    "t7_len5": "a1f14110c8ca383b066d",
    "t7_len10": "8639eb3d906cfb1df122",
    "t7_len15": "16644f3acd43749c4639",
    "t7_len20": "6c3c3c19377668c8695d",
    "t7_len25": "9eafbe815360c86465d9",
    "t7_len30": "4a34b22cdabee0dd4d7a",
    "t7_id": "fb84a9beae68cc23560a",
    "t7_ood": "fb8832aeafd78bc03231",
    "t1_ood+train": "cc173ea9aee1624a597d",
    "t3_id+map7": "07654b6dae4a59b224c4",
    "t5_ood+map123456": "a35fea04d4251fcb1d8e",
    "t7_len30+map99": "a6d5de140e0fe0bfdcf2",
    "t2_id+p100": "66e324106b71809d4aca",
    "t6_id+p0": "8b993e6890ef0ef54b3f",
    "t4_len25+p37": "d86b253a30cbfd1d5d69",
    "t5_id+excl0": "b4558cc444ccb4b7dd33",
    "t7_id+excl30": "381e643b5222a44f0662",
    "t6+2-200step3": "a9cbc19d9d1d1ccc953b",
    "t2+len2": "11de78988a5060328390",
    "t1+150-200": "cc257945848d9d39bd2b",
}


@pytest.mark.parametrize("name", sorted(cases()))
def test_instances_are_unchanged(name):
    config, overrides = cases()[name]
    assert digest(config, overrides) == GOLDEN[name], f"{name}: the generated data changed"


def test_every_retrieval_preset_is_covered():
    assert set(GOLDEN) == set(cases())


# The inline draws of the generator against random.py's own functions: if a Python release
# changes how randrange or sample draw, these fail (and the digests above with them).


@pytest.mark.parametrize("n", [1, 2, 3, 5, 17, 21, 22, 30, 36, 64, 200])
def test_below_and_two_positions_draw_as_random_py(n):
    for seed in range(200):
        ours, theirs = random.Random(seed), random.Random(seed)
        assert fv.randbelow(ours, n) == theirs.randrange(n)
        if n >= 2:
            assert list(fv.two_positions(ours, n)) == theirs.sample(range(n), 2)
        assert ours.getrandbits(32) == theirs.getrandbits(32)  # the same draws consumed


@pytest.mark.parametrize("low, high, step", [(10, 10, 1), (20, 30, 10), (2, 200, 3), (5, 30, 1)])
def test_draw_length_draws_as_random_py(low, high, step):
    config = fv.FeatureConfig(min_length=low, max_length=high, length_step=step)
    for seed in range(200):
        ours, theirs = random.Random(seed), random.Random(seed)
        expected = low if low == high else theirs.randrange(low, high + 1, step)
        assert fv.draw_length(ours, config) == expected
        assert ours.getrandbits(32) == theirs.getrandbits(32)


@pytest.mark.parametrize("percent", [0, 20, 37, 100])
@pytest.mark.parametrize("keep", [0, 1 << 12])
def test_build_draws_as_its_readable_helpers(percent, keep):
    """`build` inlines `_exclusions` and `_bernoulli_bits`: the same features and cells."""
    config = fv.FeatureConfig(min_length=7, max_length=7, background_percent=percent)
    controlled, planted = {3, 30}, [(3, 2), (30, 6)]
    mask = sum(1 << f for f in controlled)
    for seed in range(100):
        instance = fv.build(
            random.Random(seed), config, "t", 7, [3], [3, 30], 1, "c", planted, mask, (3, 30),
            None, fv.NO_EXTRA, keep,
        )  # fmt: skip
        rng = random.Random(seed)
        excluded = fv._exclusions(rng, config, controlled | ({12} if keep else set()))
        bits = fv._bernoulli_bits(rng, fv.SLOT * 7, percent)
        off = set(excluded) | controlled
        vectors = [
            [f for f in range(fv.NUM_FEATURES) if f not in off and bits >> (fv.SLOT * t + f) & 1]
            for t in range(7)
        ]
        for f, t in planted:
            vectors[t] = sorted({*vectors[t], f})
        assert instance.params["excluded"] == excluded
        assert instance.params["vectors"] == vectors


def test_memo_computes_once_and_forgets_past_its_limit():
    calls = []
    memo = fv.Memo(lambda key: calls.append(key) or key * 2, 2)
    assert (memo[1], memo[1], memo[2]) == (2, 2, 4) and calls == [1, 2]
    assert memo[3] == 6 and dict(memo) == {3: 6}  # full at 2 keys: cleared, then 3 added
    table = fv.mappings("ordered_feature_detection", 1)
    assert table[7] == fv.mapping("ordered_feature_detection", 7, 1)


if __name__ == "__main__":
    print("GOLDEN = {")
    for name, (config, overrides) in cases().items():
        print(f"    {name!r}: {digest(config, overrides)!r},")
    print("}")
