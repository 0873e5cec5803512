"""The split rule (attentionspan_datasets.splits): one prompt, one split, in every layer."""

from __future__ import annotations

import hashlib
import itertools

import pytest

from attentionspan_datasets import generate
from attentionspan_datasets.splits import (
    HASH_MODULUS,
    SPLIT_RANGES,
    SPLITS,
    iter_split,
    small_space_report,
    split_instance,
    split_of,
)


def _bucket(prompt: str) -> int:
    digest = hashlib.blake2b(prompt.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % HASH_MODULUS


def test_split_of_follows_the_documented_ranges():
    ranges = sorted(SPLIT_RANGES.values())
    assert ranges[0][0] == 0 and ranges[-1][1] == HASH_MODULUS
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # no gap, no overlap
    for n in range(3000):
        prompt = f"{n}+{n * 7}="
        low, high = SPLIT_RANGES[split_of(prompt)]
        assert low <= _bucket(prompt) < high


def test_split_shares_are_about_5_5_90():
    counts = {split: 0 for split in SPLITS}
    for n in range(20_000):
        counts[split_of(str(n))] += 1
    assert 800 <= counts["test"] <= 1200
    assert 800 <= counts["validation"] <= 1200
    assert counts["train"] >= 17_000


def test_split_of_is_stable_across_releases():
    # Changing the rule silently reshuffles every published split: this pins it.
    assert [_bucket(p) for p in ("8=", "0421+5334=", "abc=", "")] == [12, 467, 959, 756]
    assert split_of("8=") == "test"
    assert split_of("0421+5334=") == "train"


@pytest.mark.parametrize("split", [*SPLITS, "fewshot"])
def test_rows_belong_to_their_split_and_are_random_access(split):
    rows = list(iter_split("addition_ood", seed=3, split=split, start=5, stop=25))
    assert [row.index for row in rows] == list(range(5, 25))
    wanted = "train" if split == "fewshot" else split
    assert all(split_of(row.prompt) == wanted for row in rows)
    for row in rows[::6]:
        alone = split_instance("addition_ood", 3, split, row.index)
        assert alone.to_dict() == row.to_dict()
        assert alone.config == "addition_ood"


def test_first_draw_kept_when_it_is_in_the_split():
    # Attempt 0 is the plain generator stream named after the split.
    for index in range(50):
        first = generate("reversal_ood", seed=1, index=index, stream="train")
        if split_of(first.prompt) == "train":
            assert split_instance("reversal_ood", 1, "train", index).prompt == first.prompt


def test_same_partition_for_every_seed_and_mask():
    test_prompts = {row.prompt for row in iter_split("addition_id", seed=1, stop=300)}
    train = iter_split("addition_id", seed=2, split="train", stop=3000, mask="sufficient")
    assert not test_prompts & {row.prompt for row in train}


@pytest.mark.parametrize("preset", ["reversal_id", "successor_id", "addition_id"])
def test_100k_training_rows_share_no_prompt_with_test(preset):
    test = {row.prompt for row in iter_split(preset, split="test", stop=1000)}
    validation = {row.prompt for row in iter_split(preset, split="validation", stop=1000)}
    assert not test & validation
    train = {row.prompt for row in iter_split(preset, split="train", stop=100_000)}
    assert not train & test
    assert not train & validation
    assert all(split_of(prompt) == "train" for prompt in train)


def test_bad_split_names_the_allowed_ones():
    with pytest.raises(ValueError, match="allowed: train, validation, test"):
        split_instance("addition_id", 0, "tset", 0)
    with pytest.raises(ValueError, match="invalid split"):
        next(iter_split("addition_id", split="dev"))


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"index": -1}, "index"),
        ({"index": 1.5}, "index"),
        ({"seed": True}, "seed"),
        ({"seed": [1, 2]}, "seed"),
        ({"seed": "1"}, "seed"),
    ],
)
def test_bad_index_and_seed_are_refused(kwargs, field):
    args = {"seed": 0, "index": 0, **kwargs}
    with pytest.raises(ValueError, match=f"'{field}'"):
        split_instance("addition_id", args["seed"], "test", args["index"])


def test_a_split_that_cannot_be_filled_names_the_config():
    # A successor config with one start has one prompt; find one outside the test split.
    for start in range(1, 200):
        config = dict(min_start=start, max_start=start, min_count=2, max_count=2)
        if split_of(generate("successor", **config).prompt) != "test":
            break
    with pytest.raises(ValueError, match="'successor'.*no test prompt"):
        split_instance("successor", 0, "test", 0, **config)


def test_small_space_report_names_small_lengths_only():
    report = small_space_report("reversal_id")
    assert report and "'reversal_id'" in report and "length 1:" in report
    assert "length 5:" not in report
    assert small_space_report("addition_ood") is None


def test_iter_split_is_unlimited_without_stop():
    rows = list(itertools.islice(iter_split("reversal_id", split="train"), 3))
    assert [row.index for row in rows] == [0, 1, 2]


@pytest.mark.parametrize("split", [*SPLITS, "fewshot"])
@pytest.mark.parametrize("config", ["addition_id", "successor_id", "ffml_ood"])
def test_streamed_rows_equal_random_access_rows_where_the_first_draw_misses(config, split):
    """iter_split draws attempt 0 inline and hands a miss to the drawer from attempt 1:
    every row, missed first draws included, equals split_instance and lies in its split."""
    stop = 400 if split == "train" else 60
    rows = list(iter_split(config, seed=5, split=split, stop=stop))
    wanted = "train" if split == "fewshot" else split
    missed = 0
    for row in rows:
        first = generate(config, seed=5, index=row.index, stream=split)
        missed += first.prompt != row.prompt
        assert row == split_instance(config, 5, split, row.index)
        assert split_of(row.prompt) == wanted
    assert missed > 0  # the test reaches the hand-over


def test_split_of_matches_the_hash_rule_on_many_prompts():
    prompts = [row.prompt for row in iter_split("addition_ood", split="train", stop=500)]
    prompts += [row.prompt for row in iter_split("ffml_ood", split="test", stop=50)]
    prompts += ["", "é=", "\u0001", "a" * 300]
    for prompt in prompts:
        low, high = SPLIT_RANGES[split_of(prompt)]
        assert low <= _bucket(prompt) < high
