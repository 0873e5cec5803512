"""The data, options and scores of the attnspan lm-eval tasks (no lm-eval run here)."""

from __future__ import annotations

import json
import math

import pytest

from attentionspan_datasets import generate
from attentionspan_datasets.instructions import INSTRUCTIONS
from attentionspan_datasets.presets import PRESETS
from lm_eval_tasks import dataset
from lm_eval_tasks.dataset import custom_dataset, nanmean, process_results, split_metadata


@pytest.fixture(scope="module")
def reversal_ood():
    return custom_dataset("reversal_ood", version=1.0, config_source="x.yaml")


def test_splits_are_the_generator_streams(reversal_ood):
    test, fewshot = reversal_ood["test"], reversal_ood["fewshot"]
    assert (len(test), len(fewshot)) == (dataset.DEFAULT_SIZE, dataset.DEFAULT_FEWSHOT_SIZE)
    for split, stream in ((test, "test"), (fewshot, "fewshot")):
        for i in (0, 7, len(split) - 1):
            instance = generate("reversal_ood", seed=dataset.DEFAULT_SEED, index=i, stream=stream)
            row = split[i]
            assert (row["index"], row["prompt"], row["target"]) == (
                i,
                instance.prompt,
                instance.target,
            )
            assert json.loads(row["params"]) == instance.params
            assert row["length"] == instance.params["length"]
    assert set(test["prompt"]).isdisjoint(fewshot["prompt"])


def test_every_run_builds_the_same_instances(reversal_ood):
    again = custom_dataset("reversal_ood", version=1.0)
    assert again["test"]["prompt"] == reversal_ood["test"]["prompt"]


def test_length_bins_cover_the_test_set(reversal_ood):
    test = reversal_ood["test"]
    names = test[0]["length_bins"]
    assert names[0] == "exact_match_len_11_14" and names[-1] == "exact_match_len_47_50"
    assert len(names) == 10
    for row in test:
        assert row["length_bin"] in names
        first, last = (int(x) for x in row["length_bin"].split("_len_")[1].split("_"))
        assert first <= row["length"] <= last


def test_metadata_options_and_task_fields():
    data = custom_dataset("reversal_id", seed=7, size=5, fewshot_size=3, max_length=3)
    assert (len(data["test"]), len(data["fewshot"])) == (5, 3)
    assert data["test"]["prompt"][0] == generate("reversal_id", 7, 0, "test", max_length=3).prompt
    assert max(data["test"]["length"]) <= 3
    # strings from a JSON --metadata are converted like command-line values
    assert custom_dataset("reversal_id", size="4", max_length="2")["test"].num_rows == 4


def test_instruction_option():
    default = custom_dataset("reversal_id", size=1, fewshot_size=1)["test"][0]
    assert default["instruction"] == INSTRUCTIONS["string_reversal"]
    assert custom_dataset("reversal_id", size=1, instruction="")["test"][0]["instruction"] == ""
    with pytest.raises(ValueError, match="instruction"):
        custom_dataset("reversal_id", instruction="two\nlines")


def test_unknown_metadata_key_lists_the_allowed_ones():
    with pytest.raises(ValueError) as error:
        custom_dataset("reversal_id", sede=3)
    message = str(error.value)
    assert "'sede'" in message
    for allowed in ("seed", "size", "fewshot_size", "instruction", "min_length", "max_length"):
        assert allowed in message


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [("size", 0, "size"), ("seed", "x", "seed"), ("size", 2.5, "size"), ("max_length", 0, "")],
)
def test_bad_values_name_the_key(key, value, field):
    with pytest.raises(ValueError, match=field or key):
        custom_dataset("reversal_id", **{key: value})


def test_a_field_of_another_task_is_left_to_that_task(caplog):
    # One --metadata serves every task of a group run: num_operands belongs to addition.
    options, overrides = split_metadata("reversal_id", {"num_operands": 3})
    assert overrides == {} and "num_operands" in caplog.text


def _split_inside_simple_evaluate(metadata, model_args):
    """Call split_metadata from a function that looks like lm-eval's simple_evaluate."""
    scope = {"__name__": "lm_eval.evaluator", "split_metadata": split_metadata}
    exec(
        "def simple_evaluate(model_args, metadata):\n"
        "    return split_metadata('reversal_id', metadata)\n",
        scope,
    )
    return scope["simple_evaluate"](model_args, metadata)


def test_model_arguments_mixed_into_metadata_are_ignored():
    # lm-eval hands custom_dataset `model_args | metadata`: max_length is also an HFLM argument
    model_args = {"pretrained": "/m", "dtype": "float32", "max_length": 2048}
    options, overrides = _split_inside_simple_evaluate(dict(model_args, size=9), model_args)
    assert options["size"] == 9 and overrides == {}
    # the user's own value wins the merge, and differs from the model argument: it is ours
    _, overrides = _split_inside_simple_evaluate(dict(model_args, max_length=4), model_args)
    assert overrides == {"max_length": 4}
    # the CLI may pass model_args as a string
    options, _ = _split_inside_simple_evaluate({"pretrained": "/m"}, "pretrained=/m")
    assert options["size"] == dataset.DEFAULT_SIZE
    # outside simple_evaluate nothing is a model argument
    with pytest.raises(ValueError, match="pretrained"):
        split_metadata("reversal_id", {"pretrained": "/m"})


def _doc(target):
    bins = ["exact_match_len_01", "exact_match_len_02"]
    return {"target": target, "length_bin": "exact_match_len_02", "length_bins": bins}


@pytest.mark.parametrize(
    ("answer", "exact", "partial"),
    [
        ("ba", 1.0, 1.0),
        ("bx", 0.0, 0.5),
        ("", 0.0, 0.0),
        ("ba" * 40, 0.0, 1.0),
        ("  ba </s> junk", 1.0, 1.0),
        ("ba<|im_end|>", 1.0, 1.0),
        ("ba\nmore lines", 1.0, 1.0),
    ],
)
def test_process_results(answer, exact, partial):
    scores = process_results(_doc("ba"), [answer])
    assert scores["exact_match"] == exact and scores["partial_acc"] == partial
    assert scores["exact_match_len_02"] == exact
    assert math.isnan(scores["exact_match_len_01"])
    assert set(scores) == {"exact_match", "partial_acc", "exact_match_len_01", "exact_match_len_02"}


def test_a_length_outside_the_listed_bins_gets_its_own_metric():
    data = custom_dataset("reversal_id", size=20, min_length=12, max_length=12)
    row = data["test"][0]
    assert row["length_bin"] == "exact_match_len_12"
    assert "exact_match_len_12" not in row["length_bins"]
    scores = process_results(row, [row["target"]])
    assert scores["exact_match_len_12"] == 1.0
    assert all(math.isnan(scores[name]) for name in row["length_bins"])


def test_nanmean():
    assert nanmean([1.0, math.nan, 0.0]) == 0.5
    assert math.isnan(nanmean([math.nan]))
    assert math.isnan(nanmean([]))


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_preset_builds(preset):
    data = custom_dataset(preset, size=20, fewshot_size=2)
    row = data["test"][0]
    assert row["prompt"].endswith("=") and row["target"]
    assert row["instruction"] and "\n" not in row["instruction"]
    assert row["length_bin"] in row["length_bins"]
