"""The datasets builder, instantiated directly with cache_dir=tmp_path (no registration)."""

from __future__ import annotations

import json
import warnings
from itertools import islice

import datasets
import pytest

from attentionspan_datasets import builder as builder_module
from attentionspan_datasets.builder import (
    FEATURES,
    NUM_SHARDS,
    STREAM_SHARD_SPAN,
    AttentionSpan,
    params_json,
    source_hash,
)
from attentionspan_datasets.generation import generate
from attentionspan_datasets.presets import PRESETS, SHORT_NAMES
from attentionspan_datasets.splits import SmallSpaceWarning, iter_split, split_of
from attentionspan_datasets.tasks import TASKS

REGISTERED_PRESETS = [name for name, preset in PRESETS.items() if preset.task in TASKS]
SMALL = {"num_train": 40, "num_validation": 10, "num_test": 10}


def build(tmp_path, config="reversal_ood", num_proc=None, **kwargs):
    builder = AttentionSpan(config_name=config, cache_dir=str(tmp_path), **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # small-space warnings: tested below
        builder.download_and_prepare(num_proc=num_proc)
    return builder.as_dataset()


def stream(tmp_path, config="reversal_ood", split="train", **kwargs):
    builder = AttentionSpan(config_name=config, cache_dir=str(tmp_path), **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return builder.as_streaming_dataset(split=split)


def test_configs_cover_presets_tasks_and_short_names():
    names = [config.name for config in AttentionSpan.BUILDER_CONFIGS]
    assert len(names) == len(set(names))
    expected = set(REGISTERED_PRESETS) | set(TASKS)
    expected |= {short for short, full in SHORT_NAMES.items() if full in TASKS}
    assert set(names) == expected
    assert AttentionSpan.DEFAULT_CONFIG_NAME in names


@pytest.mark.parametrize("config", REGISTERED_PRESETS)
def test_every_preset_builds_rows_of_the_contract(tmp_path, config):
    ds = build(tmp_path, config, **SMALL)
    assert set(ds) == {"train", "validation", "test"}
    assert {split: ds[split].num_rows for split in ds} == {
        "train": 40,
        "validation": 10,
        "test": 10,
    }
    for split in ds:
        assert ds[split].features == FEATURES
        rows = ds[split].to_list()
        assert [row["index"] for row in rows] == list(range(len(rows)))
        for row in rows:
            assert row["config"] == config
            assert row["prompt"].endswith("=")
            assert len(row["reference"]) == len(row["target"])
            text_length = len(row["prompt"]) + len(row["target"])
            assert all(0 <= pos < text_length for refs in row["reference"] for pos in refs)
            assert "length" in json.loads(row["params"])


def test_rows_are_the_split_rows_of_splits_py(tmp_path):
    ds = build(tmp_path, "reversal_ood", **SMALL)
    for split in ds:
        rows = list(iter_split("reversal_ood", builder_module.DEFAULT_SEED, split, stop=5))
        for row, instance in zip(ds[split].select(range(5)), rows):
            assert row["index"] == instance.index
            assert (row["prompt"], row["target"]) == (instance.prompt, instance.target)
            assert row["reference"] == instance.reference
            assert json.loads(row["params"]) == instance.params
            assert split_of(row["prompt"]) == split
    # Different streams: the three splits do not start with the same instance.
    assert len({ds[split][0]["prompt"] for split in ds}) == 3


def test_seed_changes_rows_and_the_same_seed_repeats_them(tmp_path):
    a = build(tmp_path / "a", "reversal_ood", seed=1, **SMALL)["train"]["prompt"]
    b = build(tmp_path / "b", "reversal_ood", seed=1, **SMALL)["train"]["prompt"]
    c = build(tmp_path / "c", "reversal_ood", seed=2, **SMALL)["train"]["prompt"]
    assert a == b
    assert a != c


def test_default_split_sizes():
    config = AttentionSpan.builder_configs["reversal_id"]
    assert [config.split_size(split) for split in ("train", "validation", "test")] == [
        10_000,
        1_000,
        1_000,
    ]
    assert config.split_size("train", streaming=True) is None  # unlimited


@pytest.mark.parametrize("config", ["reversal_id", "successor_id", "addition_id"])
def test_test_split_is_iter_split_in_order_and_shares_no_prompt(tmp_path, config):
    builder = AttentionSpan(config_name=config, cache_dir=str(tmp_path), num_train=3000)
    with pytest.warns(SmallSpaceWarning, match=rf"'{config}'.*length \d+: about \d+ prompts"):
        builder.download_and_prepare()
    ds = builder.as_dataset()
    expected = [i.to_dict() for i in iter_split(config, split="test", stop=1000)]
    assert ds["test"].to_list() == [
        {**row, "params": params_json(row["params"])} for row in expected
    ]
    train, validation, test = (set(ds[s]["prompt"]) for s in ("train", "validation", "test"))
    assert ds["train"].num_rows == 3000
    assert not train & (validation | test)
    assert not test & validation
    # The dataset's own description says it too.
    assert "small input space" in ds["test"].info.description


def test_the_warning_points_at_the_callers_line(tmp_path):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        build_here = AttentionSpan(config_name="reversal_id", cache_dir=str(tmp_path), **SMALL)
        build_here.download_and_prepare()
    [warning] = [w for w in record if issubclass(w.category, SmallSpaceWarning)]
    assert warning.filename == __file__


def test_a_space_with_no_test_prompt_is_refused_naming_the_config(tmp_path):
    # Six one-character prompts: at most a few hash into test; a config whose every prompt
    # is a train prompt cannot hold a test split.
    charset = next(
        c
        for c in ("abcdef", "ghijkl", "mnopqr", "stuvwx", "ABCDEF", "GHIJKL")
        if not any(split_of(f"{ch}=") == "test" for ch in c)
    )
    builder = AttentionSpan(
        config_name="reversal", cache_dir=str(tmp_path), max_length=1, charset=charset, **SMALL
    )
    with pytest.raises(ValueError, match="'reversal'.*no test prompt"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SmallSpaceWarning)
            builder.download_and_prepare()


def test_large_space_gives_no_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        AttentionSpan(
            config_name="reversal_ood", cache_dir=str(tmp_path), **SMALL
        ).download_and_prepare()


def test_a_huge_split_is_refused_at_once_unless_forced(tmp_path):
    import time

    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"'num_train' is 1,000,000,000,000, above the cap of"):
        AttentionSpan(config_name="reversal_id", cache_dir=str(tmp_path), num_train=10**12)
    assert time.perf_counter() - start < 1
    forced = AttentionSpan(
        config_name="reversal_id", cache_dir=str(tmp_path), num_train=10**12, force=True
    )
    assert forced.config.split_size("train") == 10**12
    with pytest.raises(ValueError, match="'force' must be True or False"):
        AttentionSpan(config_name="reversal_id", cache_dir=str(tmp_path), force="yes")


def test_kwargs_reach_the_task_and_key_the_cache(tmp_path):
    plain = AttentionSpan(config_name="reversal", cache_dir=str(tmp_path))
    short = AttentionSpan(
        config_name="reversal", cache_dir=str(tmp_path), max_length=3, mask="sufficient"
    )
    other = AttentionSpan(config_name="reversal", cache_dir=str(tmp_path), max_length=4)
    assert short.config.max_length == 3 and plain.config.max_length == 10
    assert short.config.task_config().mask == "sufficient"
    assert len({plain.cache_dir, short.cache_dir, other.cache_dir}) == 3
    assert "max_length=3" in short.config_id
    again = AttentionSpan(
        config_name="reversal", cache_dir=str(tmp_path), mask="sufficient", max_length=3
    )
    assert again.cache_dir == short.cache_dir
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        short.download_and_prepare()
    lengths = {json.loads(p)["length"] for p in short.as_dataset()["train"]["params"]}
    assert lengths <= {1, 2, 3}


def test_preset_values_are_readable_and_overridable():
    config = AttentionSpan.builder_configs["reversal_ood"]
    assert (config.min_length, config.max_length) == (11, 50)
    builder = AttentionSpan(config_name="reversal_ood", max_length=20)
    assert builder.config.task_config().min_length == 11
    assert builder.config.task_config().max_length == 20


def test_cache_keys_on_the_generator_sources(tmp_path, monkeypatch):
    builder = AttentionSpan(config_name="reversal_id", cache_dir=str(tmp_path))
    assert source_hash() in builder.cache_dir
    module = tmp_path / "fake_task_source.py"
    module.write_text("# a task module\n")
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("fake_task_source", module)
    monkeypatch.setitem(sys.modules, "fake_task_source", importlib.util.module_from_spec(spec))
    before = source_hash()
    task = next(iter(TASKS.values()))
    fake_generate = type("F", (), {"__module__": "fake_task_source"})()
    monkeypatch.setitem(
        TASKS, "fake", type(task)("fake", task.config_class, fake_generate, task.oracle, "")
    )
    with_task = source_hash()
    module.write_text("# a task module, edited\n")
    assert len({before, with_task, source_hash()}) == 3


@pytest.mark.parametrize(
    ("config", "kwargs", "message"),
    [
        (
            "reversal_idd",
            {},
            r"unknown config 'reversal_idd' \(did you mean 'reversal_id'\?\); allowed: reversal_id",
        ),
        ("reversal", {"max_lenght": 3}, r"allowed keys: min_length, max_length.*'max_lenght'"),
        ("reversal", {"max_length": "3"}, r"field 'max_length' must be of type int"),
        ("reversal", {"max_length": 0}, r"invalid value 0 for field 'max_length'"),
        ("reversal", {"num_train": -1}, r"'num_train' must be a non-negative integer or None"),
        ("reversal", {"num_test": 2.5}, r"'num_test' must be a non-negative integer, got 2.5"),
        ("reversal", {"seed": "1"}, r"'seed' must be an int"),
        ("reversal", {"mask": "full"}, r"'full' for field 'mask': allowed values: 'paper'"),
    ],
)
def test_bad_input_names_the_problem_and_the_allowed_values(tmp_path, config, kwargs, message):
    with pytest.raises(ValueError, match=message):
        AttentionSpan(config_name=config, cache_dir=str(tmp_path), **kwargs)


def test_num_proc_2_writes_the_same_rows_as_num_proc_1(tmp_path):
    sizes = {"num_train": 1500, "num_validation": 300, "num_test": 300}
    one = build(tmp_path / "one", "reversal_id", **sizes)
    two = build(tmp_path / "two", "reversal_id", num_proc=2, **sizes)
    for split in one:
        assert two[split].to_list() == one[split].to_list()
    # ... and the build really was split in two jobs (shards written per job).
    assert len(two["train"].cache_files) == 2


def test_shards_are_contiguous_blocks_or_unlimited_spans():
    assert builder_module._shards(10) == [(0, 10)]
    assert builder_module._shards(2500) == [(0, 833), (833, 1666), (1666, 2500)]
    blocks = builder_module._shards(1_000_000)
    assert len(blocks) == NUM_SHARDS
    assert blocks[0][0] == 0 and blocks[-1][1] == 1_000_000
    assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
    assert builder_module._shards(0) == [(0, 0)]
    spans = builder_module._shards(None)
    assert spans[1] == (STREAM_SHARD_SPAN, 2 * STREAM_SHARD_SPAN)
    assert spans[-1] == ((NUM_SHARDS - 1) * STREAM_SHARD_SPAN, None)


# --- streaming ----------------------------------------------------------------------------


def test_streamed_train_is_unlimited_and_starts_as_the_built_train(tmp_path):
    built = build(tmp_path, "reversal_ood", **SMALL)["train"].to_list()
    sizes = {"num_validation": 10, "num_test": 10}
    train = stream(tmp_path, "reversal_ood", **sizes)
    assert train.num_shards == NUM_SHARDS
    assert list(train.take(40)) == built
    # It goes on beyond the 10,000 rows of a built train split.
    cheap = stream(tmp_path, "reversal", max_length=2, num_validation=0, num_test=0)
    assert [row["index"] for row in cheap.skip(10_000).take(3)] == [10_000, 10_001, 10_002]


def test_streamed_validation_and_test_are_finite_and_equal_the_built_ones(tmp_path):
    built = build(tmp_path, "reversal_ood", **SMALL)
    for split in ("validation", "test"):
        rows = list(stream(tmp_path, "reversal_ood", split=split, **SMALL))
        assert rows == built[split].to_list()


def test_stream_take_skip_shuffle_map(tmp_path):
    train = stream(tmp_path, "reversal_ood", num_validation=5, num_test=5)
    first = [row["index"] for row in train.take(10)]
    assert first == list(range(10))
    assert [row["index"] for row in train.skip(3).take(2)] == [3, 4]
    shuffled = [row["index"] for row in train.shuffle(seed=0, buffer_size=50).take(20)]
    again = [row["index"] for row in train.shuffle(seed=0, buffer_size=50).take(20)]
    assert shuffled == again and len(set(shuffled)) == 20 and shuffled != list(range(20))
    mapped = train.map(lambda row: {"text": row["prompt"] + row["target"]}).take(3)
    for row in mapped:
        assert row["text"] == row["prompt"] + row["target"]
    assert [row["index"] for row in train.filter(lambda row: row["index"] % 2).take(3)] == [
        1,
        3,
        5,
    ]


def test_torch_dataloader_workers_get_different_rows(tmp_path):
    torch = pytest.importorskip("torch")
    train = stream(tmp_path, "reversal_ood", num_validation=5, num_test=5)
    loader = torch.utils.data.DataLoader(
        train.select_columns(["index", "prompt"]), batch_size=None, num_workers=2
    )
    indices = []
    for row in loader:
        indices.append(int(row["index"]))
        if len(indices) == 200:
            break
    assert len(set(indices)) == 200
    # Each worker reads its own shards: both halves of the shard range appear.
    assert min(indices) < STREAM_SHARD_SPAN <= max(indices)


@pytest.mark.parametrize("world_size", [2, 3])
def test_split_dataset_by_node_gives_disjoint_rows(tmp_path, world_size):
    from datasets.distributed import split_dataset_by_node

    train = stream(tmp_path, "reversal_ood", num_validation=5, num_test=5)
    seen = []
    for rank in range(world_size):
        node = split_dataset_by_node(train, rank=rank, world_size=world_size)
        # islice, not take(): on a node split by steps, datasets applies take() to the
        # whole stream before the split.
        seen.append({row["prompt"] + str(row["index"]) for row in islice(node, 100)})
    union = set().union(*seen)
    assert len(union) == 100 * world_size  # no row is read by two nodes


def test_stream_of_a_finite_train_split(tmp_path):
    rows = list(stream(tmp_path, "reversal_ood", **SMALL))
    assert [row["index"] for row in rows] == list(range(40))


def test_features_are_the_data_contract():
    assert list(FEATURES) == [
        "task",
        "config",
        "index",
        "prompt",
        "target",
        "reference",
        "params",
    ]
    assert FEATURES["reference"] == datasets.List(datasets.List(datasets.Value("int32")))
    assert FEATURES["index"] == datasets.Value("int64")


@pytest.mark.parametrize("config", REGISTERED_PRESETS)
def test_params_json_is_json_dumps_sorted(config):
    for index in range(20):
        params = generate(config, index=index).params
        assert builder_module.params_json(params) == json.dumps(params, sort_keys=True)


def test_a_split_of_size_zero_is_left_out(tmp_path):
    ds = build(tmp_path, "reversal_ood", num_train=5, num_validation=0, num_test=2)
    assert ds.num_rows == {"train": 5, "test": 2}


def test_params_json_cache_is_exact():
    """cached_params_json caches by marshal.dumps(params): True, 1 and 1.0 (equal in Python) keep
    their own JSON; values marshal cannot write are encoded directly."""

    class Count(int):
        pass

    encode = builder_module.cached_params_json(max_cached=8)
    for config in REGISTERED_PRESETS[:12]:
        for index in range(30):
            params = generate(config, index=index).params
            assert encode(params) == json.dumps(params, sort_keys=True)
    for value in (1, True, 1.0, Count(2), 1, True):
        params = {"b": [value], "a": value}
        assert encode(params) == json.dumps(params, sort_keys=True)


def test_stream_resumes_from_its_state_and_batches(tmp_path):
    """The streamed rows' keys are plain (shard, index) tuples: datasets' resuming,
    batching and Arrow formatting work on them."""
    train = stream(tmp_path, "addition_ood")
    rows = iter(train)
    for _ in range(5):
        next(rows)
    state = train.state_dict()
    after = [next(rows)["index"] for _ in range(3)]
    train.load_state_dict(state)
    assert [row["index"] for row in islice(iter(train), 3)] == after == [5, 6, 7]
    assert [batch["index"] for batch in train.batch(4).take(2)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    table = next(iter(train.with_format("arrow")))
    assert table.column("index").to_pylist() == [0]


def test_split_names_in_datasets_syntax_still_load(tmp_path):
    """builder.check_split_name refuses unknown names up front and lets datasets' slices
    and sums through."""
    import attentionspan_datasets as api

    sizes = {"num_train": 10, "num_validation": 4, "num_test": 4, "cache_dir": str(tmp_path)}
    assert len(api.load("reversal_ood", split="train[:5]", **sizes)) == 5
    assert len(api.load("reversal_ood", split="validation+test", **sizes)) == 8
    assert len(api.load("reversal_ood", split="test[50%:]", **sizes)) == 2
