"""The data, options and scores of the attnspan lm-eval tasks (no lm-eval run here)."""

from __future__ import annotations

import json
import math

import pytest

from attentionspan_datasets.instructions import INSTRUCTIONS
from attentionspan_datasets.metrics import aggregate, record
from attentionspan_datasets.presets import PRESETS
from attentionspan_datasets.splits import split_instance, split_of
from lm_eval_tasks import dataset
from lm_eval_tasks.dataset import custom_dataset, nanmean, process_results, split_metadata


def ours(**options):
    """lm-eval's metadata with our options in their namespace."""
    return {"attnspan": options}


@pytest.fixture(scope="module")
def reversal_ood():
    return custom_dataset("reversal_ood", version=1.0, config_source="x.yaml")


def test_splits_are_the_split_rows(reversal_ood):
    test, fewshot = reversal_ood["test"], reversal_ood["fewshot"]
    assert (len(test), len(fewshot)) == (dataset.DEFAULT_SIZE, dataset.DEFAULT_FEWSHOT_SIZE)
    for split, stream in ((test, "test"), (fewshot, "fewshot")):
        for i in (0, 7, len(split) - 1):
            instance = split_instance("reversal_ood", dataset.DEFAULT_SEED, stream, i)
            row = split[i]
            assert (row["index"], row["prompt"], row["target"]) == (
                i,
                instance.prompt,
                instance.target,
            )
            assert json.loads(row["params"]) == instance.params
            assert row["length"] == instance.params["length"]
    assert set(test["prompt"]).isdisjoint(fewshot["prompt"])
    assert all(split_of(p) == "train" for p in fewshot["prompt"])


@pytest.mark.parametrize("preset", ["reversal_id", "successor_id", "addition_id"])
def test_the_docs_are_load_datasets_test_split_in_order(tmp_path, preset):
    import warnings

    import datasets

    import attentionspan_datasets  # noqa: F401  (registers the bare name)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the small-space warning: tested in test_builder
        test = datasets.load_dataset(
            "attentionspan", preset, split="test", cache_dir=str(tmp_path), num_train=10
        )
    docs = custom_dataset(preset)["test"]
    assert test[: dataset.DEFAULT_SIZE]["prompt"] == docs["prompt"]
    assert test[: dataset.DEFAULT_SIZE]["target"] == docs["target"]


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
    data = custom_dataset("reversal_id", **ours(seed=7, size=5, fewshot_size=3, max_length=3))
    assert (len(data["test"]), len(data["fewshot"])) == (5, 3)
    first = split_instance("reversal_id", 7, "test", 0, max_length=3)
    assert data["test"]["prompt"][0] == first.prompt
    assert max(data["test"]["length"]) <= 3
    # strings from a JSON --metadata are converted like command-line values
    assert custom_dataset("reversal_id", **ours(size="4", max_length="2"))["test"].num_rows == 4


def test_instruction_option():
    default = custom_dataset("reversal_id", **ours(size=1, fewshot_size=1))["test"][0]
    assert default["instruction"] == INSTRUCTIONS["string_reversal"]
    plain = custom_dataset("reversal_id", **ours(size=1, instruction=""))
    assert plain["test"][0]["instruction"] == ""
    with pytest.raises(ValueError, match="instruction"):
        custom_dataset("reversal_id", **ours(instruction="two\nlines"))


def test_unknown_metadata_key_lists_the_allowed_ones():
    with pytest.raises(ValueError) as error:
        custom_dataset("reversal_id", **ours(sede=3))
    message = str(error.value)
    assert "'sede'" in message
    for allowed in ("seed", "size", "fewshot_size", "instruction", "min_length", "max_length"):
        assert allowed in message


def test_our_options_at_the_top_level_are_refused_with_the_namespaced_form():
    with pytest.raises(ValueError) as error:
        custom_dataset("reversal_id", instruction="", size=3)
    assert str(error.value) == (
        "attnspan_reversal_id: --metadata key(s) 'instruction', 'size' must be inside "
        """'attnspan': --metadata '{"attnspan": {"instruction": "", "size": 3}}'"""
    )
    with pytest.raises(ValueError, match="must be a JSON object"):
        custom_dataset("reversal_id", attnspan=[1])


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("size", 0, "'size' must be an integer >= 1, got 0"),
        ("size", -5, "'size' must be an integer >= 1, got -5"),
        ("size", 2.5, "'size' must be an integer >= 1, got 2.5"),
        ("size", True, "'size' must be an integer >= 1, got True"),
        ("size", float("nan"), "'size' must be an integer >= 1, got nan"),
        ("size", None, "'size' must be an integer >= 1, got None"),
        ("size", [5], "'size' must be an integer >= 1, got [5]"),
        ("size", 10**9, "'size' is 1,000,000,000, above the cap of 100,000 test instances"),
        ("size", "1000000", "'size' is 1,000,000, above the cap of 100,000 test instances"),
        ("size", "9" * 5000, "'size' must be an integer"),
        ("fewshot_size", 0, "'fewshot_size' must be an integer >= 1"),
        ("fewshot_size", 10**6, "'fewshot_size' is 1,000,000, above the cap of 10,000"),
        ("seed", "x", "'seed' must be an integer >= 0, got 'x'"),
        ("seed", -1, "'seed' must be an integer >= 0, got -1"),
        ("seed", 2**64, "'seed' is 18,446,744,073,709,551,616, above the cap of"),
        ("instruction", 3, "'instruction' must be one line of text, got 3"),
        ("instruction", "a\nb", "'instruction' must be one line of text"),
        ("instruction", "Reverse\x1b[2J it", "'instruction' must be printable text; it holds "),
        ("max_length", 0, "'max_length'"),
        ("charset", "ab\x01", "'charset'"),
    ],
)
def test_bad_values_name_the_key(key, value, field):
    with pytest.raises(ValueError) as error:
        custom_dataset("reversal_id", **ours(**{key: value}))
    message = str(error.value)
    assert message.startswith("attnspan_reversal_id: ") and "\n" not in message
    assert field in message, message


def test_a_huge_size_is_refused_within_a_second():
    import time

    started = time.perf_counter()
    with pytest.raises(ValueError, match="cap of 100,000"):
        custom_dataset("reversal_ood", **ours(size=10**12))
    assert time.perf_counter() - started < 1


def test_under_the_lm_eval_command_a_refusal_is_one_line_and_status_2(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["/venv/bin/lm_eval", "--tasks", "attnspan_reversal_id"])
    monkeypatch.delenv("ATTENTIONSPAN_TRACEBACK", raising=False)
    assert dataset.under_lm_eval_command()
    with pytest.raises(SystemExit) as done:
        custom_dataset("reversal_id", instruction="x")
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        "lm_eval: error: attnspan_reversal_id: --metadata key(s) 'instruction' must be "
        """inside 'attnspan': --metadata '{"attnspan": {"instruction": "x"}}'\n"""
    )
    monkeypatch.setenv("ATTENTIONSPAN_TRACEBACK", "1")  # the traceback instead
    with pytest.raises(ValueError, match="must be inside 'attnspan'"):
        custom_dataset("reversal_id", instruction="x")
    monkeypatch.setattr("sys.argv", ["python", "-c"])  # an API caller gets the ValueError
    monkeypatch.delenv("ATTENTIONSPAN_TRACEBACK")
    assert not dataset.under_lm_eval_command()
    with pytest.raises(ValueError, match="must be inside 'attnspan'"):
        custom_dataset("reversal_id", instruction="x")


def test_preflight_checks_the_namespace_without_a_preset():
    """What the TaskManager hook runs before lm-eval loads the model."""
    dataset.preflight({"pretrained": "m", "size": 3})  # top-level keys are left alone
    dataset.preflight({"attnspan": {"size": 3, "max_length": 9, "num_operands": 2}})
    with pytest.raises(ValueError, match="'size' is 1,000,000,000, above the cap"):
        dataset.preflight({"attnspan": {"size": 10**9}})
    with pytest.raises(ValueError) as error:
        dataset.preflight({"attnspan": {"sise": 3}})
    assert "unknown --metadata 'attnspan' key(s) 'sise'; allowed: seed, size" in str(error.value)
    with pytest.raises(ValueError, match="must be a JSON object"):
        dataset.preflight({"attnspan": "size=3"})


def test_the_task_manager_hook_runs_the_preflight():
    from lm_eval_tasks import registration

    registration.patch_task_manager()
    from lm_eval.tasks import TaskManager

    with pytest.raises(ValueError, match="'fewshot_size' is 20,000, above the cap of 10,000"):
        TaskManager(include_defaults=False, metadata={"attnspan": {"fewshot_size": 20000}})


def test_a_field_of_another_task_is_left_to_that_task(caplog):
    # One --metadata serves every task of a group run: num_operands belongs to addition.
    options, overrides = split_metadata("reversal_id", ours(num_operands=3))
    assert overrides == {} and "num_operands" in caplog.text


def test_model_arguments_at_the_top_level_are_not_ours():
    # lm-eval hands custom_dataset `model_args | metadata`: max_length is also an HFLM
    # argument, and a reversal field; at the top level it is the model's.
    metadata = {"pretrained": "/m", "dtype": "float32", "max_length": 2048, "version": 2.0}
    options, overrides = split_metadata("reversal_id", {**metadata, **ours(size=9)})
    assert options["size"] == 9 and overrides == {}
    _, overrides = split_metadata("reversal_id", {**metadata, **ours(max_length=4)})
    assert overrides == {"max_length": 4}


def _run_folder(folder, prompt):
    import json as _json

    folder.mkdir(exist_ok=True)
    (folder / dataset.RUN_FILE).write_text(_json.dumps({"train": {}, "prompt": prompt}))
    return str(folder)


def test_the_prompt_layout_saved_with_a_model_is_used(tmp_path, caplog):
    folder = _run_folder(tmp_path / "m", {"instruction": None, "num_fewshot": 0, "chat": False})
    options, _ = split_metadata("reversal_id", {"pretrained": folder})
    assert options["instruction"] == ""
    folder = _run_folder(tmp_path / "n", {"instruction": "Reverse it.", "num_fewshot": 2})
    data = custom_dataset("reversal_id", pretrained=folder, **ours(size=2))
    assert data["test"]["instruction"] == ["Reverse it.", "Reverse it."]
    assert "--num_fewshot 2: pass the same to lm_eval" in caplog.text
    # an explicit instruction wins; a Hub name or a folder without a run file changes nothing
    options, _ = split_metadata("reversal_id", {"pretrained": folder, **ours(instruction="X")})
    assert options["instruction"] == "X"
    for model in ("HuggingFaceTB/SmolLM2-135M", str(tmp_path)):
        assert "instruction" not in split_metadata("reversal_id", {"pretrained": model})[0]
    (tmp_path / "n" / dataset.RUN_FILE).write_text("{not json")
    with pytest.raises(ValueError, match=r"attentionspan_run.json: cannot read the saved prompt"):
        split_metadata("reversal_id", {"pretrained": folder})


HUGE_NUMBER = "9" * 5000  # past Python's int-from-text limit


@pytest.mark.parametrize(
    "num_fewshot", ["-1", "1000000", "2.5", '"3"', "true", "[1]", "NaN", HUGE_NUMBER]
)
def test_a_saved_num_fewshot_out_of_range_names_the_file_and_the_cap(tmp_path, num_fewshot):
    folder = tmp_path / "m"
    folder.mkdir()
    text = f'{{"prompt": {{"instruction": "", "num_fewshot": {num_fewshot}}}}}'
    (folder / dataset.RUN_FILE).write_text(text)
    with pytest.raises(ValueError) as error:
        custom_dataset("reversal_id", pretrained=str(folder))
    message = str(error.value)
    assert str(folder / dataset.RUN_FILE) in message and "\n" not in message
    if num_fewshot == HUGE_NUMBER:  # not readable JSON for Python
        assert "cannot read the saved prompt layout" in message
    else:  # the harness's run-file reader checks the field (an integer, 0 to its cap)
        assert "'prompt': num_fewshot must be" in message


def test_a_saved_num_fewshot_above_the_pool_says_how_to_widen_it(tmp_path, caplog):
    folder = _run_folder(tmp_path / "m", {"instruction": "", "num_fewshot": 150})
    split_metadata("reversal_id", {"pretrained": folder})
    assert """--num_fewshot 150 --metadata '{"attnspan": {"fewshot_size": 150}}'""" in caplog.text


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


def test_a_length_outside_the_listed_bins_gets_its_own_metric(caplog):
    data = custom_dataset("reversal_id", **ours(size=20, min_length=12, max_length=12))
    # said once, with the task, the lengths and the bins (lm-eval's per-metric warning is
    # dropped: test_lm_eval_registration.py)
    notes = [r.getMessage() for r in caplog.records if "outside the preset" in r.getMessage()]
    assert notes == [
        "attnspan_reversal_id: lengths 12 lie outside the preset's length bins (1-10); each "
        "gets a metric of its own (exact_match_len_XX), the mean over the documents of that length"
    ]
    row = data["test"][0]
    assert row["length_bin"] == "exact_match_len_12"
    assert "exact_match_len_12" not in row["length_bins"]
    scores = process_results(row, [row["target"]])
    assert scores["exact_match_len_12"] == 1.0
    assert all(math.isnan(scores[name]) for name in row["length_bins"])


def test_lm_eval_numbers_are_the_aggregate_of_metrics():
    # What lm-eval prints (mean of process_results per metric, nanmean for bins) equals
    # metrics.aggregate over the same records with the preset's bins.
    docs = list(custom_dataset("reversal_ood", **ours(size=60))["test"])
    answers = [doc["target"] if i % 3 else doc["target"][:-1] for i, doc in enumerate(docs)]
    per_doc = [process_results(doc, [a]) for doc, a in zip(docs, answers)]
    lm_eval_numbers = {
        "exact_match": sum(r["exact_match"] for r in per_doc) / len(per_doc),
        "partial_acc": sum(r["partial_acc"] for r in per_doc) / len(per_doc),
    }
    for name in docs[0]["length_bins"]:
        value = nanmean([r[name] for r in per_doc])
        if not math.isnan(value):
            lm_eval_numbers[name] = value
    records = [record(a, doc["target"], doc["length"]) for doc, a in zip(docs, answers)]
    expected = aggregate(records, bins=dataset.default_bins("reversal_ood")).flat()
    assert lm_eval_numbers == expected


def test_nanmean():
    assert nanmean([1.0, math.nan, 0.0]) == 0.5
    assert math.isnan(nanmean([math.nan]))
    assert math.isnan(nanmean([]))


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_preset_builds(preset):
    data = custom_dataset(preset, **ours(size=20, fewshot_size=2))
    row = data["test"][0]
    assert row["prompt"].endswith("=") and row["target"]
    assert row["instruction"] and "\n" not in row["instruction"]
    assert row["length_bin"] in row["length_bins"]


@pytest.mark.parametrize("value", [[], 0, None, "", False, [1]])
def test_an_attnspan_value_that_is_no_object_is_refused(value):
    """`--metadata '{"attnspan": []}'` (or 0, null) was read as no options at all."""
    for check in (
        lambda: dataset.preflight({"attnspan": value}),
        lambda: custom_dataset("reversal_id", attnspan=value),
    ):
        with pytest.raises(ValueError) as error:
            check()
        message = str(error.value)
        assert "--metadata 'attnspan' must be a JSON object of options and task fields" in message
        assert f"got {json.dumps(value)}" in message and "\n" not in message
    dataset.preflight({"attnspan": {}})  # an empty object is no options: fine


def test_metadata_values_are_typed_as_ood_and_param_type_them():
    """One rule turns text into a task field's value (TaskConfig.parse_value, by the
    field's declared type): lm-eval's metadata gets what `reproduce --ood` gets."""
    from harness.pipeline.settings import TaskValue, parse_overrides

    ffml = TaskValue.of("ffml_id")
    given = {"use_flip": "false", "min_instructions": "3", "max_instructions": "12"}
    _, overrides = split_metadata("ffml_id", ours(**given))
    assert overrides == parse_overrides(ffml, given)
    assert overrides["use_flip"] is False and overrides["max_instructions"] == 12
    typed = {"use_flip": True, "max_instructions": 12}  # values JSON already typed are kept
    assert split_metadata("ffml_id", ours(**typed))[1] == parse_overrides(ffml, typed)
    for value, message in (
        ("maybe", "field 'use_flip' must be true or false, got 'maybe'"),
        (1.5, "field 'use_flip' must be of type bool, got float 1.5"),
    ):
        with pytest.raises(ValueError, match=message):
            custom_dataset("ffml_id", **ours(use_flip=value))
        with pytest.raises(ValueError, match=message):
            parse_overrides_then_resolve("ffml_id", {"use_flip": value})


def parse_overrides_then_resolve(preset, overrides):
    from attentionspan_datasets.generation import resolve_config
    from harness.pipeline.settings import TaskValue, parse_overrides

    return resolve_config(preset, **parse_overrides(TaskValue.of(preset), overrides))


@pytest.mark.parametrize(
    ("metadata", "num_fewshot", "message"),
    [
        (ours(max_length=-3), None, "attnspan_reversal_id: --metadata 'attnspan': string_rev"),
        (ours(max_lenght=3), None, "unknown --metadata 'attnspan' key(s) 'max_lenght'"),
        ({"instruction": "x"}, None, "--metadata key(s) 'instruction' must be inside"),
        (ours(fewshot_size=1), 3, "--num_fewshot 3 is more than the 1 few-shot rows"),
        ({}, "101", "--num_fewshot 101 is more than the 100 few-shot rows"),
        ({}, -1, "--num_fewshot must be an integer >= 0, got -1"),
        ({}, "x", "--num_fewshot must be an integer >= 0, got 'x'"),
    ],
)
def test_preflight_tasks_refuses_what_the_tasks_would(metadata, num_fewshot, message):
    """What the `lm_eval` command's TaskManager hook checks for the named tasks before the
    model loads: the same refusals custom_dataset and lm-eval's sampler make later."""
    with pytest.raises(ValueError) as error:
        dataset.preflight_tasks(["reversal_id", "addition_id"], metadata, num_fewshot)
    assert message in str(error.value) and "\n" not in str(error.value)
    assert str(error.value).startswith("attnspan_reversal_id: ")


def test_preflight_tasks_passes_what_the_tasks_take():
    dataset.preflight_tasks(["reversal_id", "addition_id"], ours(max_length=4), 3)
    dataset.preflight_tasks(["reversal_id"], ours(fewshot_size=5), "5")
    dataset.preflight_tasks(["reversal_id"], {"pretrained": "m", "max_length": 9}, None)
