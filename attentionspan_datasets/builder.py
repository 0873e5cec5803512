"""The `datasets` builder behind `load_dataset("attentionspan", CONFIG, **params)`.

    from datasets import load_dataset
    ds = load_dataset("attentionspan", "addition_ood")                 # train / validation / test
    ds = load_dataset("attentionspan", "addition", num_operands=3, min_digits=5,
                      max_digits=12, mask="sufficient", num_train=50_000)
    train = load_dataset("attentionspan", "addition_ood", streaming=True)["train"]  # unlimited

Configs: every preset (`addition_ood`), every registered task (`long_addition`) and its short
name (`addition`). Keyword arguments set the task's config fields (validated by the task),
`mask`, `seed` and the split sizes `num_train`, `num_validation`, `num_test`. The cache keys
on all of them (datasets appends them to the config id) and on `source_hash()`, a hash of the
generator sources, so a code change never serves stale cached data.

Splits. `attentionspan_datasets.splits` owns them: a prompt belongs to train, validation or
test by a hash of the prompt alone, and row `index` of split S is
`splits.split_instance(config, seed, S, index)`, the row lm-eval, `attentionspan train` and
`attentionspan eval` read too. No train prompt equals a validation or test prompt, by
construction, for every split size and in the unlimited stream. Where a preset's input space
is small at some lengths (reversal of one character, successor_id), a `SmallSpaceWarning`
and the dataset's description say which lengths and how many prompts each split holds.

Sizes. Each split holds at most MAX_SPLIT_ROWS rows (10 million) unless `force=True`:
`num_train=10**12` is refused at once, naming the field and the cap. The streamed train split
(no `num_train`) is unlimited.

Sharding. A finite split is cut into up to 64 contiguous blocks of indices (of at least 1,000
rows), so a build with `num_proc=2` writes the same rows in the same order as `num_proc=1`.
The streamed `train` split is unlimited: shard s covers indices [s * 2**40, (s + 1) * 2**40)
and the last shard never ends. One process reads shard 0 (indices 0, 1, 2, ... as in a built
split); DataLoader workers and `split_dataset_by_node` ranks read disjoint shards, so they
never share a row.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from json.encoder import c_make_encoder, encode_basestring_ascii
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
from datasets.builder import Key
from datasets.download.streaming_download_manager import StreamingDownloadManager
from datasets.iterable_dataset import ExamplesIterable

from attentionspan_datasets import __version__
from attentionspan_datasets.generation import (
    DEFAULT_SEED,
    SEED_RANGE,
    config_names,
    resolve_config,
    unknown_config_message,
)
from attentionspan_datasets.presets import PRESETS, SHORT_NAMES
from attentionspan_datasets.rendering import marshal_cached
from attentionspan_datasets.splits import (
    SPLITS,
    iter_split,
    small_space_report,
    split_instance,
    warn_small_space,
)
from attentionspan_datasets.tasks import TASKS
from attentionspan_datasets.tasks.base import MaskVariant, TaskConfig

DATASET_NAME = "attentionspan"
DEFAULT_SPLIT_SIZES = {"train": 10_000, "validation": 1_000, "test": 1_000}
NUM_SHARDS = 64  # enough for num_proc, DataLoader workers and nodes to divide the work
MIN_SHARD_ROWS = 1_000  # smaller finite shards cost more in process start-up than they save
STREAM_SHARD_SPAN = 2**40  # indices per shard of the unlimited train stream
# Rows per split without `force=True`: 10 million addition_ood rows are about 2 GB of Arrow
# and 10 minutes of one core; a larger number is far more often a typo than a plan.
MAX_SPLIT_ROWS = 10_000_000
BATCH_SIZE = 256  # rows per Arrow table: large enough to amortise, small for a quick first row
VERSION = datasets.Version(__version__)

# The implemented text is an anonymous ACL submission (papers/attend-or-perish-v1, -v2):
# no authors or identifier are invented here.
CITATION = """\
@misc{attend_or_perish,
  title  = {Attend or Perish: Benchmarking Attention in Algorithmic Reasoning},
  author = {Anonymous},
  note   = {Anonymous ACL submission},
}
"""

FEATURES = datasets.Features(
    {
        "task": datasets.Value("string"),
        "config": datasets.Value("string"),
        "index": datasets.Value("int64"),
        "prompt": datasets.Value("string"),
        "target": datasets.Value("string"),
        # reference[i]: positions in prompt + target that predicting target[i] must attend to
        "reference": datasets.List(datasets.List(datasets.Value("int32"))),
        "params": datasets.Value("string"),  # JSON of the sampled parameters ("length", ...)
    }
)


def _unserialisable(value: Any) -> None:
    raise TypeError(f"params value {value!r} is not JSON serialisable")


# json.dumps builds a new C encoder for every call: a few microseconds, a third of the cost
# of an addition instance. Built once, it gives exactly json.dumps(params, sort_keys=True).
_ENCODE_PARAMS = (
    c_make_encoder(
        None, _unserialisable, encode_basestring_ascii, None, ": ", ", ", True, False, True
    )
    if c_make_encoder is not None
    else None
)


def params_json(params: dict[str, Any]) -> str:
    """`json.dumps(params, sort_keys=True)`, faster."""
    if _ENCODE_PARAMS is None:
        return json.dumps(params, sort_keys=True)
    return "".join(_ENCODE_PARAMS(params, 0))


def cached_params_json(max_cached: int = 4096) -> Callable[[dict[str, Any]], str]:
    """`params_json` for a stream of rows, cached by `marshal.dumps(params)`
    (`rendering.marshal_cached`: exact, and about three times cheaper than the encoder; a
    preset has a few hundred distinct params)."""
    return marshal_cached(params_json, max_cached)


def source_hash() -> str:
    """SHA-256 over the sources that decide the rows: this builder, generation, presets,
    the task contract and every registered task's module."""
    names = {
        __name__,
        "attentionspan_datasets.generation",
        "attentionspan_datasets.splits",
        "attentionspan_datasets.presets",
        "attentionspan_datasets.tasks.base",
        *(task.generate.__module__ for task in TASKS.values()),
    }
    digest = hashlib.sha256(__version__.encode())
    for name in sorted(names):
        digest.update(name.encode())
        digest.update(Path(sys.modules[name].__file__).read_bytes())
    return digest.hexdigest()


def _check_count(config_name: str, name: str, value: Any, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        allowed = "a non-negative integer" + (" or None" if optional else "")
        raise ValueError(
            f"attentionspan config {config_name!r}: '{name}' must be {allowed}, got {value!r}"
        )


@dataclass
class AttentionSpanConfig(datasets.BuilderConfig):
    """One config: a preset or task name plus overrides of the task's fields.

    Besides the fields below, every field of the task's config (`max_digits`, ...) reads
    and writes as an attribute, which is how `load_dataset(..., max_digits=12)` reaches
    the task; the task validates the result (`task_config()`).
    """

    source: str = ""  # a name resolve_config accepts; defaults to the config name
    task_params: dict = field(default_factory=dict)
    mask: MaskVariant = "paper"  # checked with the task's fields (task_config())
    seed: int = DEFAULT_SEED
    num_train: int | None = None  # None: 10,000 when built, unlimited when streamed
    num_validation: int = DEFAULT_SPLIT_SIZES["validation"]
    num_test: int = DEFAULT_SPLIT_SIZES["test"]
    force: bool = False  # allow splits larger than MAX_SPLIT_ROWS

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.source:
            self.source = self.name

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN_FIELDS or name.startswith("_") or name not in self._task_fields():
            self._check_own(name, value)
            object.__setattr__(self, name, value)
        else:  # a task field: an override the task validates in task_config()
            object.__setattr__(self, "task_params", {**self.task_params, name: value})

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: task fields read from the overrides or
        # the preset's value, so `hasattr(config, "max_digits")` holds for the task's fields.
        if not name.startswith("_") and name in self._task_fields():
            params = self.__dict__.get("task_params", {})
            return params[name] if name in params else getattr(resolve_config(self.source), name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self) -> str:
        # datasets puts this in its error for an unknown keyword: list what is allowed.
        keys = [*self._task_fields(), *_SETTABLE_FIELDS]
        return (
            f"AttentionSpanConfig(name={self.name!r}, params={self.task_params!r}; "
            f"allowed keys: {', '.join(keys)})"
        )

    def _task_fields(self) -> list[str]:
        source = self.__dict__.get("source")
        if not source:
            return []
        try:
            names = resolve_config(source).field_names()
        except ValueError:
            return []
        return [name for name in names if name != "mask"]

    def _check_own(self, name: str, value: Any) -> None:
        label = self.__dict__.get("name", "?")
        if name in ("num_validation", "num_test"):
            _check_count(label, name, value)
        elif name == "num_train":
            _check_count(label, name, value, optional=True)
        elif name == "seed" and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(
                f"attentionspan config {label!r}: 'seed' must be an int, got {value!r}"
            )
        elif name == "seed" and not SEED_RANGE[0] <= value <= SEED_RANGE[1]:
            raise ValueError(
                f"attentionspan config {label!r}: 'seed' must be in [{SEED_RANGE[0]}, "
                f"{SEED_RANGE[1]}], got {value}"
            )
        elif name == "force" and not isinstance(value, bool):
            raise ValueError(
                f"attentionspan config {label!r}: 'force' must be True or False, got {value!r}"
            )

    def overrides(self) -> dict[str, Any]:
        """The task fields set on top of `source` (mask included)."""
        return {**self.task_params, "mask": self.mask}

    def task_config(self) -> TaskConfig:
        """The validated task config (raises ValueError naming a bad field)."""
        return resolve_config(self.source, **self.overrides())

    def check_sizes(self) -> None:
        """Refuse a split larger than MAX_SPLIT_ROWS unless `force` (before any work)."""
        if self.force:
            return
        for split in SPLITS:
            size = getattr(self, f"num_{split}")
            if size is not None and size > MAX_SPLIT_ROWS:
                raise ValueError(
                    f"attentionspan config {self.name!r}: 'num_{split}' is {size:,}, above the "
                    f"cap of {MAX_SPLIT_ROWS:,} rows per split; pass force=True "
                    f"(--force) to build it anyway"
                )

    def split_size(self, split: str, streaming: bool = False) -> int | None:
        """Rows of `split`; None means unlimited (the streamed train split by default)."""
        size = getattr(self, f"num_{split}")
        if size is None and not streaming:
            return DEFAULT_SPLIT_SIZES[split]
        return size


_OWN_FIELDS = {f.name for f in fields(AttentionSpanConfig)}
_SETTABLE_FIELDS = ["mask", "seed", "num_train", "num_validation", "num_test", "force"]


def check_config_name(name: Any) -> None:
    """A config name is a str (or None for the default); anything else is a ValueError."""
    if name is not None and not isinstance(name, str):
        raise ValueError(
            f"attentionspan: the config must be a preset or task name (a str) such as "
            f"'reversal_id', got {type(name).__name__} {_short(name)}"
        )


def check_cache_dir(cache_dir: Any, option: str = "cache_dir") -> Path:
    """`cache_dir` as a Path to a folder this process can write, created if missing; else a
    ValueError naming it (a file, a read-only folder, a path under a file)."""
    label = option if option.startswith("--") else f"'{option}'"
    if isinstance(cache_dir, bool) or not isinstance(cache_dir, (str, os.PathLike)):
        raise ValueError(f"{label} must be a folder path, got {type(cache_dir).__name__}")
    if not str(cache_dir):
        raise ValueError(f"{label} must be a folder path, got an empty string")
    path = Path(cache_dir).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{label} {str(path)!r} exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        # Creating a file is the test the writes to come cannot disagree with (os.access
        # misses ACLs and network file systems).
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ValueError(f"{label} {str(path)!r} cannot be written: {reason}") from None
    return path


def check_num_proc(num_proc: Any, option: str = "num_proc") -> int | None:
    """None, or an int in [1, NUM_SHARDS]: more processes than a split's shards idle."""
    if num_proc is None:
        return None
    if isinstance(num_proc, bool) or not isinstance(num_proc, int) or num_proc < 1:
        raise ValueError(f"'{option}' must be an integer >= 1 or None, got {num_proc!r}")
    if num_proc > NUM_SHARDS:
        raise ValueError(
            f"'{option}' is {num_proc}, above the cap of {NUM_SHARDS} (a split has at most "
            f"{NUM_SHARDS} shards, so more processes would idle)"
        )
    return num_proc


def check_split_name(split: Any) -> None:
    """None, or a split in datasets' syntax over SPLITS ("test", "train[:10%]",
    "train+validation"): checked before the build, which datasets would do first."""
    if split is None:
        return
    if not isinstance(split, str):
        raise ValueError(f"'split' must be one of {', '.join(SPLITS)} (a str), got {split!r}")
    names = [part.split("[", 1)[0].strip() for part in split.split("+")]
    unknown = [name for name in names if name not in SPLITS]
    if unknown:
        raise ValueError(
            f"unknown split {unknown[0]!r} in 'split' {split!r}; allowed: {', '.join(SPLITS)} "
            f"(with datasets' slices such as 'train[:10%]')"
        )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def _shards(size: int | None) -> list[tuple[int, int | None]]:
    """[start, stop) index blocks; stop None means the block never ends."""
    if size is None:
        spans = [(s * STREAM_SHARD_SPAN, (s + 1) * STREAM_SHARD_SPAN) for s in range(NUM_SHARDS)]
        spans[-1] = (spans[-1][0], None)
        return spans
    count = max(1, min(NUM_SHARDS, -(-size // MIN_SHARD_ROWS)))
    bounds = [size * s // count for s in range(count + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _description(name: str) -> str:
    if name in PRESETS:
        preset = PRESETS[name]
        shown = ", ".join(f"{key}={value}" for key, value in preset.params.items())
        return f"preset: {preset.task} with {shown}"
    task = TASKS[SHORT_NAMES.get(name, name)]
    return f"task {task.name} with its default parameters: {task.description}"


class AttentionSpan(datasets.ArrowBasedBuilder):
    """Algorithmic tasks with reference attention masks ("Attend or Perish").

    Why not a plain GeneratorBasedBuilder: datasets encodes and decodes every yielded
    example against the features, which for the nested `reference` lists costs several
    times the generation itself (measured streaming addition_ood: 3.2k rows/s against 17.5k
    from the generator alone; docs/performance.md). So a build writes Arrow tables made in
    batches (`_generate_tables`), and a stream yields the rows as plain Python, already of
    the feature types (`_get_examples_iterable_for_split` marks them typed). `__init__`
    only adds defaults for direct use.
    """

    VERSION = VERSION
    BUILDER_CONFIG_CLASS = AttentionSpanConfig
    BUILDER_CONFIGS = [
        AttentionSpanConfig(name=name, version=VERSION, description=_description(name))
        for name in config_names()
    ]
    DEFAULT_CONFIG_NAME = "reversal_id"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # datasets would fail on these with a TypeError or an OSError deep inside; say what
        # is wrong with the argument instead (load_dataset passes both by keyword).
        name = kwargs.get("config_name")
        check_config_name(name)
        if name is not None and name not in self.builder_configs:
            # datasets' own "BuilderConfig ... not found" lists the names as a Python list
            # and suggests none: the one-line error of resolve_config instead.
            raise ValueError(f"attentionspan: {unknown_config_message(name)}")
        if kwargs.get("cache_dir") is not None:
            kwargs["cache_dir"] = str(check_cache_dir(kwargs["cache_dir"]))
        # Built directly (not through load_dataset), the builder still keys its cache on
        # the sources and names its cache folder "attentionspan", not "builder".
        kwargs.setdefault("hash", source_hash())
        kwargs.setdefault("dataset_name", DATASET_NAME)
        super().__init__(*args, **kwargs)

    def download_and_prepare(self, *args: Any, **kwargs: Any) -> None:
        # datasets reads num_proc=0 as "one process", silently: refused as the CLIs do
        check_num_proc(kwargs.get("num_proc"))
        super().download_and_prepare(*args, **kwargs)

    def as_dataset(self, split: Any = None, *args: Any, **kwargs: Any) -> Any:
        self._check_asked(split)
        return super().as_dataset(split, *args, **kwargs)

    def as_streaming_dataset(self, split: Any = None, *args: Any, **kwargs: Any) -> Any:
        self._check_asked(split)
        return super().as_streaming_dataset(split, *args, **kwargs)

    def _check_asked(self, split: Any) -> None:
        """A split asked for whose size is 0 (`split="train"` with num_train=0): say so, not
        datasets' "Unknown split 'train'" (a split of no rows is not built)."""
        if not isinstance(split, str):
            return
        for part in split.split("+"):
            name = part.split("[")[0].strip()
            if name in SPLITS and getattr(self.config, f"num_{name}") == 0:
                raise ValueError(
                    f"split {name!r} was asked for, but 'num_{name}' is 0, so it has no rows; "
                    f"give num_{name} >= 1 or ask for another split"
                )

    def _info(self) -> datasets.DatasetInfo:
        self.config.task_config()  # a bad parameter fails here, before anything is generated
        self.config.check_sizes()
        return datasets.DatasetInfo(
            description=(
                "Algorithmic reasoning tasks with reference attention masks: `reference[i]` "
                "lists the positions in prompt + target that predicting target[i] must "
                "attend to (one position per character)."
            ),
            features=FEATURES,
            citation=CITATION,
            license="apache-2.0",
        )

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        streaming = isinstance(dl_manager, StreamingDownloadManager)
        config = self.config
        task_config = config.task_config()
        sizes = {split: config.split_size(split, streaming) for split in SPLITS}

        for split in SPLITS:
            if sizes[split] != 0:
                # A split its config cannot fill fails here, as a ValueError naming the
                # config, not later inside datasets' generation error.
                split_instance(config.source, config.seed, split, 0, **config.overrides())
        report = small_space_report(task_config, config.seed, name=config.name)
        if report:
            warn_small_space(report)
            self.info.description = f"{self.info.description} {report}."
        return [
            datasets.SplitGenerator(
                name=split,
                gen_kwargs={
                    "split": split,
                    "shards": _shards(sizes[split]),
                    "task_config": task_config,
                },
            )
            for split in SPLITS
            if sizes[split] != 0  # datasets cannot read back an empty split: leave it out
        ]

    def _get_examples_iterable_for_split(self, split_generator: datasets.SplitGenerator):
        return _TypedRows(self._generate_rows, split_generator.gen_kwargs)

    def _generate_rows(
        self, split: str, shards: list, task_config: TaskConfig
    ) -> Iterator[tuple[tuple[int, int], dict[str, Any]]]:
        """The rows of `split`, one shard after the other; Python values of FEATURES.
        Keyed (shard, index): streaming only passes the key on (str() of it is str() of
        datasets' Key, which costs a dataclass per row)."""
        name, seed, encode = self.config.name, self.config.seed, cached_params_json()
        for position, (start, stop) in enumerate(shards):
            for instance in iter_split(task_config, seed, split, start, stop):
                index = instance.index
                yield (
                    (position, index),
                    {
                        "task": instance.task,
                        "config": name,
                        "index": index,
                        "prompt": instance.prompt,
                        "target": instance.target,
                        "reference": instance.reference,
                        "params": encode(instance.params),
                    },
                )

    def _generate_tables(
        self, split: str, shards: list, task_config: TaskConfig
    ) -> Iterator[tuple[Key, pa.Table]]:
        """The same rows as Arrow tables of up to BATCH_SIZE rows, keyed (shard, batch)."""
        schema = FEATURES.arrow_schema
        for position, shard in enumerate(shards):
            rows = self._generate_rows(split, [shard], task_config)
            for batch_id in itertools.count():
                batch = [row for _, row in itertools.islice(rows, BATCH_SIZE)]
                if not batch:
                    break
                columns = {name: [row[name] for row in batch] for name in FEATURES}
                yield Key(position, batch_id), pa.Table.from_pydict(columns, schema=schema)


class _TypedRows(ExamplesIterable):
    """Rows that already have the feature types: datasets passes them through unchanged
    (no per-row encode/decode). Sharding and shuffling keep the class."""

    @property
    def is_typed(self) -> bool:
        return True

    @property
    def features(self) -> datasets.Features:
        return FEATURES

    def _retyped(self, iterable: ExamplesIterable) -> _TypedRows:
        iterable.__class__ = _TypedRows
        return iterable

    def shuffle_data_sources(self, generator: Any) -> _TypedRows:
        return self._retyped(super().shuffle_data_sources(generator))

    def shard_data_sources(self, num_shards: int, index: int, contiguous: bool = True):
        return self._retyped(super().shard_data_sources(num_shards, index, contiguous))

    def reshard_data_sources(self) -> _TypedRows:
        return self._retyped(super().reshard_data_sources())


def load(
    config: str,
    *,
    split: str | None = None,
    streaming: bool = False,
    cache_dir: str | None = None,
    num_proc: int | None = None,
    download_mode: str | None = None,
    **config_kwargs: Any,
):
    """What `load_dataset("attentionspan", config, ...)` returns, through public builder
    methods only (no registration needed): a DatasetDict, or a Dataset for one `split`;
    IterableDataset(Dict) when `streaming`."""
    check_num_proc(num_proc)
    check_split_name(split)
    if not isinstance(streaming, bool):  # "no" would be truthy
        raise ValueError(f"'streaming' must be True or False, got {streaming!r}")
    builder = AttentionSpan(config_name=config, cache_dir=cache_dir, **config_kwargs)
    if streaming:
        return builder.as_streaming_dataset(split=split)
    builder.download_and_prepare(num_proc=num_proc, download_mode=download_mode)
    return builder.as_dataset(split=split)
