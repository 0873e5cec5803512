"""Instance sources and batches: a split of the generator or a `datasets` dataset, padded,
with the reference masks made dense only here, per batch.

    source = GeneratorSource("reversal_id", seed=0, split="train")
    instances = [source[i] for i in range(8)]
    batch = collate([encode_instance(char_tok, x) for x in instances], pad_id, "right")

Row i of `GeneratorSource(config, seed, split)` is `attentionspan_datasets.splits.
split_instance(config, seed, split, i)`, the row `load_dataset("attentionspan", config,
split=split)` holds at i: training reads "train", its periodic evaluation "validation",
`attentionspan eval` "test", and no prompt is in two of them. Every source is indexed, so a
training run stores the next index and resumes there, and any process of a distributed run
can take its share without talking to the others.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from attentionspan_datasets.generation import DEFAULT_SEED, resolve_config
from attentionspan_datasets.splits import FEWSHOT, SPLITS, split_instance
from attentionspan_datasets.tasks.base import Instance, TaskConfig
from harness.foundation.tokenization import IGNORE_INDEX, CharTokenizer, Encoding, encode_instance

PADDING_SIDES = ("left", "right")


@dataclass
class GeneratorSource:
    """Rows of one split of a preset or task config: (config, seed, split, index)."""

    config: str | TaskConfig
    seed: int = DEFAULT_SEED
    split: str = "test"
    size: int | None = None  # None: endless
    # resolved once: validating the config at every row cost a tenth of a training step
    resolved: TaskConfig = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        self.resolved = resolve_config(self.config)  # an unknown name fails now, with the list

    def __getitem__(self, index: int) -> Instance:
        if self.size is not None and not 0 <= index < self.size:
            raise IndexError(index)
        return split_instance(self.resolved, seed=self.seed, split=self.split, index=index)

    def __len__(self) -> int:
        if self.size is None:
            raise TypeError("an endless generator source has no length")
        return self.size


@dataclass
class PromptConfig:
    """How an instance is shown to the model; saved with every run and reused by eval."""

    instruction: str | None = None
    num_fewshot: int = 0
    chat: bool = False
    fewshot_seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        from harness.foundation.caps import MAX_FEWSHOT, check_int

        # each instance draws its own examples: a billion hung before the first was scored
        check_int("num_fewshot", self.num_fewshot, 0, MAX_FEWSHOT)
        if self.instruction is not None and not isinstance(self.instruction, str):
            raise ValueError(f"instruction must be a string or None, got {self.instruction!r}")
        if self.instruction and ("\n" in self.instruction or "\r" in self.instruction):
            # lm-eval's tasks set the instruction apart from the task text by a newline: a
            # model trained on one that holds a newline could not be scored there
            raise ValueError(
                f"instruction must be one line of text (no newline), got {self.instruction!r}"
            )
        if not isinstance(self.chat, bool):
            raise ValueError(f"chat must be true or false, got {self.chat!r}")

    def fewshot_for(self, instance: Instance) -> list[Instance]:
        """k examples of the instance's own config, fixed by its index, from the few-shot
        stream (train prompts only: never a validation or test prompt)."""
        if not self.num_fewshot:
            return []
        k = self.num_fewshot
        return [
            split_instance(
                instance.config or instance.task,
                seed=self.fewshot_seed,
                split=FEWSHOT,
                index=max(instance.index, 0) * k + j,
            )
            for j in range(k)
        ]

    def encode(self, char_tok: CharTokenizer, instance: Instance, add_eos: bool = True):
        return encode_instance(
            char_tok,
            instance,
            instruction=self.instruction,
            fewshot=self.fewshot_for(instance),
            chat=self.chat,
            add_eos=add_eos,
        )


# The data contract's columns (docs/tasks.md): what a dataset for training must hold.
REQUIRED_COLUMNS = ("task", "prompt", "target", "reference")
OPTIONAL_COLUMNS = ("config", "index", "params")
CHECKED_ROWS = 50  # rows whose characters are checked against the tokenizer before training


def instance_from_row(row: dict[str, Any], where: str = "the row") -> Instance:
    """A `datasets` row of the data contract (docs/tasks.md) as an Instance; ValueError
    naming `where` and the column when a value is missing or of the wrong type."""
    missing = [name for name in REQUIRED_COLUMNS if name not in row]
    if missing:
        raise ValueError(
            f"{where} has no column(s) {', '.join(map(repr, missing))}; "
            f"expected: {', '.join(REQUIRED_COLUMNS)}"
        )
    for name in ("task", "prompt", "target", "config"):
        value = row.get(name, "")
        if not isinstance(value, str):
            raise ValueError(
                f"{where}: column {name!r} must be a string, got {type(value).__name__} "
                f"{_short(value)}"
            )
    reference = row["reference"]
    if not (
        isinstance(reference, list)
        and all(isinstance(r, list) for r in reference)
        and all(
            isinstance(k, int) and not isinstance(k, bool) and k >= 0 for r in reference for k in r
        )
    ):
        raise ValueError(
            f"{where}: column 'reference' must be a list of lists of positions (integers "
            f">= 0), got {_short(reference)}"
        )
    params = row.get("params", {})
    if params is None:
        params = {}
    if isinstance(params, str):
        from attentionspan_datasets.jsonfile import parse_json

        # a foreign dataset's column: torn, or nested deep enough to end json in RecursionError
        params = parse_json(params, f"{where}: column 'params'") if params else {}
    if not isinstance(params, dict):
        raise ValueError(f"{where}: column 'params' must be a JSON object, got {_short(params)}")
    index = row.get("index", -1)
    if isinstance(index, bool) or not isinstance(index, int):
        raise ValueError(f"{where}: column 'index' must be an integer, got {_short(index)}")
    return Instance(
        task=row["task"],
        prompt=row["prompt"],
        target=row["target"],
        reference=[list(r) for r in reference],
        params=dict(params),
        config=row.get("config", ""),
        index=index,
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(feature: Any) -> str:
    """A `datasets` feature in words: "string", "int64", "list of list of int32", "struct"."""
    inner = getattr(feature, "feature", None)
    if inner is not None:
        return f"list of {_kind(inner)}"
    if isinstance(feature, dict):
        return "struct"
    return str(getattr(feature, "dtype", type(feature).__name__))


_INTEGERS = {f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64)}
_STRINGS = {"string", "large_string"}
_UNTYPED = {"null", "list of null", "list of list of null"}
# column -> (allowed kinds, in words)
_COLUMN_KINDS = {
    "task": (_STRINGS, "string"),
    "prompt": (_STRINGS, "string"),
    "target": (_STRINGS, "string"),
    "config": (_STRINGS, "string"),
    "index": (_INTEGERS, "integer"),
    "reference": ({f"list of list of {i}" for i in _INTEGERS}, "list of list of integers"),
    "params": (_STRINGS | {"struct"}, "JSON string or struct"),
}


def check_columns(dataset: Any, where: str = "the dataset") -> None:
    """ValueError naming the missing columns, or a column of the wrong type, of a dataset
    that is to be read as Instances (the data contract, docs/tasks.md)."""
    columns = list(getattr(dataset, "column_names", None) or [])
    missing = [name for name in REQUIRED_COLUMNS if name not in columns]
    if missing:
        raise ValueError(
            f"{where} lacks the column(s) {', '.join(missing)}: a dataset to train on needs "
            f"the data contract's columns {', '.join(REQUIRED_COLUMNS)} (optional: "
            f"{', '.join(OPTIONAL_COLUMNS)}; docs/tasks.md), it has: "
            f"{', '.join(columns) or 'none'}"
        )
    features = getattr(dataset, "features", None) or {}
    for name, (allowed, words) in _COLUMN_KINDS.items():
        # a column of nulls or of empty lists has no type yet: its rows are checked as read
        if name in features and _kind(features[name]) not in allowed | _UNTYPED:
            raise ValueError(
                f"{where}: column {name!r} holds {_kind(features[name])} values, expected "
                f"{words} (docs/tasks.md)"
            )


class DatasetSource:
    """Instances from a `datasets.Dataset` (map-style, so it can be indexed), its columns
    checked when it is made: the data contract's (docs/tasks.md), of the right types."""

    def __init__(self, dataset: Any, where: str = "the dataset"):
        check_columns(dataset, where)
        self.dataset = dataset
        self.where = where
        self.size = len(dataset)
        if not self.size:
            raise ValueError(f"{where} has no rows")

    @classmethod
    def load(cls, path: str, name: str | None = None, split: str = "train", **kwargs: Any):
        import os

        from datasets import load_dataset
        from datasets.utils import logging as datasets_logging

        where = f"--dataset {path!r}" + (f" (split {split!r})" if split != "train" else "")
        # A local folder is read into Arrow in seconds: its "Generating train split" bars
        # would only stand between a refusal and its one line. A Hub download keeps them.
        quiet = os.path.exists(path) and datasets_logging.is_progress_bar_enabled()
        if quiet:
            datasets_logging.disable_progress_bar()
        try:
            dataset = load_dataset(path, name, split=split, **kwargs)
        except (ConnectionError, FileNotFoundError) as error:
            # no such folder, and no such dataset on the Hub (or no Hub to ask): one line,
            # not datasets' traceback (DatasetNotFoundError is a FileNotFoundError)
            first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
            raise ValueError(f"{where} cannot be loaded: {first}") from None
        finally:
            if quiet:
                datasets_logging.enable_progress_bar()
        return cls(dataset, where)

    def __getitem__(self, index: int) -> Instance:
        return instance_from_row(self.dataset[int(index)], f"{self.where}, row {int(index)}")

    def __len__(self) -> int:
        return self.size


def source_text(source: Any, prompt: PromptConfig | None = None, rows: int = CHECKED_ROWS) -> str:
    """The characters of the first `rows` instances of `source` (and of few-shot examples
    under `prompt`), each once: what is checked against a tokenizer and a model's vocabulary
    before training. Reading them checks a dataset's rows too."""
    count = rows if source_size(source) is None else min(rows, source_size(source))
    chars: set[str] = set()
    drawn: set[str] = set()  # configs whose few-shot examples were read
    for i in range(count):
        instance = source[i]
        chars.update(instance.text)
        # the examples of one row per config: enough to see its characters (and a config
        # that is none of ours), at most num_fewshot draws each
        config = instance.config or instance.task
        if prompt is None or not prompt.num_fewshot or config in drawn:
            continue
        drawn.add(config)
        try:
            shots = prompt.fewshot_for(instance)
        except ValueError as error:  # a dataset row whose config is no config of ours
            where = getattr(source, "where", "the source")
            raise ValueError(
                f"{where}, row {i}: its few-shot examples (num_fewshot) are drawn from its "
                f"'config' (else 'task') column: {error}"
            ) from None
        for shot in shots:
            chars.update(shot.text)
    return "".join(sorted(chars))


def source_size(source: Any) -> int | None:
    """len(source), or None for an endless one."""
    try:
        return len(source)
    except TypeError:
        return None


def shard_indices(start: int, count: int, num_processes: int, process_index: int) -> range:
    """This process's contiguous share of `start, ..., start + count - 1` (sizes differ by at
    most one, earlier processes take the extra ones)."""
    base, extra = divmod(count, num_processes)
    first = start + process_index * base + min(process_index, extra)
    return range(first, first + base + (1 if process_index < extra else 0))


def training_indices(
    next_index: int, batch_size: int, num_processes: int, process_index: int
) -> Iterator[range]:
    """The stream indices of this process's micro-batches, from `next_index` on.

    Micro-batch m of the run covers indices `next_index + m * batch_size * num_processes`
    onwards, each process taking `batch_size` of them; so after a resume at any index the
    data order is the one an uninterrupted run would have seen.
    """
    step = batch_size * num_processes
    start = next_index
    while True:
        first = start + process_index * batch_size
        yield range(first, first + batch_size)
        start += step


def collate(
    encodings: Sequence[Encoding],
    pad_id: int,
    padding_side: str = "right",
    masks: bool = False,
) -> dict[str, Any]:
    """Tensors for a batch: input_ids, attention_mask, position_ids, labels (and with
    `masks=True`, `reference_mask` [batch, query_pos, key_pos], bool).

    `reference_mask[b, q, k]` is True when key position k is referenced by the target token
    that query q predicts, i.e. the token at q + 1. `target_start[b]` is where the answer
    starts in row b (after padding), the split point for generation.
    """
    import torch

    if padding_side not in PADDING_SIDES:
        raise ValueError(f"padding_side must be one of {PADDING_SIDES}, got {padding_side!r}")
    length = max(len(e.input_ids) for e in encodings)
    batch = len(encodings)
    input_ids = torch.full((batch, length), pad_id, dtype=torch.long)
    labels = torch.full((batch, length), IGNORE_INDEX, dtype=torch.long)
    attention = torch.zeros((batch, length), dtype=torch.long)
    shifts = []
    for b, enc in enumerate(encodings):
        n = len(enc.input_ids)
        shift = length - n if padding_side == "left" else 0
        shifts.append(shift)
        input_ids[b, shift : shift + n] = torch.tensor(enc.input_ids)
        labels[b, shift : shift + n] = torch.tensor(enc.labels)
        attention[b, shift : shift + n] = 1
    # Positions count real tokens only, so a left-padded row sees the positions it would
    # see alone (transformers does the same in generate()).
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    out = {
        "input_ids": input_ids,
        "attention_mask": attention,
        "position_ids": position_ids,
        "labels": labels,
        "target_start": torch.tensor([s + e.target_offset for s, e in zip(shifts, encodings)]),
    }
    if masks:
        out["reference_mask"] = reference_mask(encodings, shifts, length)
    return out


def reference_mask(encodings: Sequence[Encoding], shifts: Sequence[int], length: int):
    """The one reference-mask builder (training collate, inference batches, capture plans).

    bool [batch, length, length]: [b, q, k] when the query at q (predicting the token at
    q + 1) must attend key k; row b's token position t sits at column `shifts[b] + t`.
    References past `length`, or after the query that predicts their token, raise.
    """
    import torch

    rows, queries, keys = [], [], []
    for b, (enc, shift) in enumerate(zip(encodings, shifts)):
        for i, row in enumerate(enc.reference):
            query = shift + enc.target_offset + i - 1  # the position that predicts target[i]
            rows += [b] * len(row)
            queries += [query] * len(row)
            keys += [shift + k for k in row]
    mask = torch.zeros((len(encodings), length, length), dtype=torch.bool)
    if rows:
        q = torch.tensor(queries)
        k = torch.tensor(keys)
        if int(q.max()) >= length or int(k.max()) >= length:
            need = max(int(q.max()), int(k.max())) + 1
            raise ValueError(f"length={length} is too short for the references (need {need})")
        if bool((k > q).any()):
            raise ValueError("a reference points after the query that predicts its token")
        mask[torch.tensor(rows), q, k] = True
    return mask


LONGEST_DRAWS = 256  # draws at the largest sizes; enough to see every carry / extra digit


def longest_text(config: str, seed: int = DEFAULT_SEED) -> int:
    """The length of the longest `prompt + target` the config can make, in characters.

    Every range the task config declares (`TaskConfig.ranges`) is raised to its top (the
    sizes the config allows at most) and the longest of LONGEST_DRAWS draws at those sizes
    is taken; what still varies there (a carry digit, a random number's width) shows up
    within a few draws. Reads only the config, so it works for any task.
    """
    from attentionspan_datasets.generation import generate

    base = resolve_config(config)
    try:
        widest = base.largest()
    except ValueError:  # a task whose ranges are coupled otherwise: draw from the config
        widest = base
    return max(
        len(x.prompt) + len(x.target)
        for x in (
            generate(widest, seed=seed, index=i, stream="longest") for i in range(LONGEST_DRAWS)
        )
    )


def longest_encoding(char_tok: CharTokenizer, config: str, prompt: PromptConfig) -> int:
    """Tokens of the longest sequence a model sees for `config` under `prompt`: the layout
    (BOS, instruction, chat template), the longest task text, EOS, and as many few-shot
    examples of the longest length as the layout asks for."""
    from attentionspan_datasets.generation import generate

    chars = longest_text(config)
    # Task text is one token per character, so any of the config's characters will do.
    char = generate(config).prompt[0]
    probe = Instance(task="", prompt=char * (chars - 1), target=char, reference=[[]], params={})
    plain = PromptConfig(instruction=prompt.instruction, num_fewshot=0, chat=prompt.chat)
    shots = prompt.num_fewshot * (chars + 1)  # each example and its separator
    return len(plain.encode(char_tok, probe).input_ids) + shots


def check_context(model, char_tok: CharTokenizer, config: str, prompt: PromptConfig) -> None:
    """ValueError when the model's context is shorter than the config's longest sequence."""
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if not limit:
        return
    needed = longest_encoding(char_tok, config, prompt)
    if needed > limit:
        name = config if isinstance(config, str) else getattr(config, "label", "") or "it"
        raise ValueError(
            f"the model's context (max_position_embeddings = {limit}; for a scratch model "
            f"--scratch-max-positions) is shorter than the longest sequence of {name!r}: "
            f"{needed} tokens with this prompt layout; use a longer context or a config "
            f"with shorter instances"
        )
