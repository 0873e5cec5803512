"""Data, prompts and scores of the `attnspan_<preset>` lm-eval tasks.

    lm_eval --model hf --model_args pretrained=DIR --tasks attnspan_reversal_ood \\
        --metadata '{"attnspan": {"seed": 7, "size": 200, "max_length": 60}}'

lm-eval calls `custom_dataset(preset=..., **metadata)` (the YAML's `dataset_kwargs` give the
preset) and `process_results(doc, results)` for every answer. The test split is rows
`0 .. size-1` of `attentionspan_datasets.splits.iter_split(preset, seed, "test")`, the rows of
`load_dataset("attentionspan", preset, split="test")` in order, and the few-shot split the
first `fewshot_size` rows of the "fewshot" stream (train prompts only), both with a fixed
default seed: every run of the same task version scores the same instances, and a few-shot
example is never a test prompt. Scores are `attentionspan_datasets.metrics` (`score`, and
`aggregate` for the same numbers outside lm-eval).

Options travel in one namespaced `--metadata` key, "attnspan", because lm-eval hands
`custom_dataset` the user's `--metadata` merged with `--model_args` (`model_args | metadata`
in `simple_evaluate`): top-level keys are the model's (`pretrained`, `max_length`, ...) and
are left alone. The one model argument read is `pretrained`: a folder written by
`attentionspan train` holds its prompt layout (`attentionspan_run.json`, section "prompt",
read with the harness's own reader, `harness.runs.read_run_file`), and its instruction is
used unless "attnspan" sets one.
"""

from __future__ import annotations

import json
import logging
import math
from functools import cache
from pathlib import Path
from typing import Any

from attentionspan_datasets import generation
from attentionspan_datasets.instructions import instruction_for
from attentionspan_datasets.metrics import (
    bin_of,
    bucket_metric_name,
    length_bins,
    record,
)
from attentionspan_datasets.splits import FEWSHOT, iter_split
from attentionspan_datasets.tasks import TASKS

# The harness's run-folder reader (its data layer: no torch, nothing of its commands).
from harness.runs import RUN_CONFIG_FILE, read_run_file, section
from lm_eval_tasks.attention import MODEL_ARG as ATTENTION_ARG
from lm_eval_tasks.attention import flag
from lm_eval_tasks.attention import metrics as attention_metrics

log = logging.getLogger(__name__)

DEFAULT_SEED = generation.DEFAULT_SEED
DEFAULT_SIZE = 500
DEFAULT_FEWSHOT_SIZE = 100
TEST_SPLIT = "test"
FEWSHOT_STREAM = FEWSHOT
MAX_BINS = 10
NAMESPACE = "attnspan"  # --metadata '{"attnspan": {...}}'
RUN_FILE = RUN_CONFIG_FILE  # what `attentionspan train` saves beside a model

# Options of the lm-eval tasks themselves; every other accepted key under "attnspan" is a
# field of the task's config (`max_length`, `num_operands`, ...).
OPTIONS = {
    "seed": "generator seed of both splits (default 1234)",
    "size": f"number of test instances (default {DEFAULT_SIZE})",
    "fewshot_size": f"number of instances few-shot examples are drawn from "
    f"(default {DEFAULT_FEWSHOT_SIZE})",
    "instruction": 'the instruction line before the examples ("" for none)',
}
_LOGGED: set[str] = set()


def _log_once(message: str) -> None:
    # One --metadata serves every task of a run: say a thing once, not once per task.
    if message not in _LOGGED:
        _LOGGED.add(message)
        log.warning(message)


def custom_dataset(preset: str, **metadata: Any):
    """The `datasets.DatasetDict` of one task: splits "test" and "fewshot".

    `metadata` is what lm-eval passes: the task's YAML metadata (`version`), the user's
    `--metadata` JSON and, merged into the same dict, the `--model_args`. Our options and
    the task's config fields come from `metadata["attnspan"]`; see `split_metadata`.
    """
    import datasets

    options, overrides = split_metadata(preset, metadata)
    config = generation.resolve_config(preset, **overrides)
    instruction = options.get("instruction", instruction_for(config.task_name))
    listed = default_bins(preset)
    names = [bucket_metric_name("exact_match", *b) for b in listed]
    splits = {
        "test": _rows(preset, config, options["seed"], options["size"], TEST_SPLIT),
        "fewshot": _rows(preset, config, options["seed"], options["fewshot_size"], FEWSHOT),
    }
    # `attention=true` in --model_args (merged into metadata): process_results refuses answers
    # that carry no measurement (a model type that cannot measure).
    attention = flag(metadata.get(ATTENTION_ARG, False))
    for rows in splits.values():
        for row in rows:
            row["instruction"] = instruction
            row[ATTENTION_ARG] = attention
            row["length_bin"] = _bin_metric(row["length"], listed)
            row["length_bins"] = names
    return datasets.DatasetDict(
        {name: datasets.Dataset.from_list(rows) for name, rows in splits.items()}
    )


def split_metadata(preset: str, metadata: dict[str, Any]) -> tuple[dict, dict]:
    """(our options with defaults, config overrides) from lm-eval's metadata dict.

    - `metadata["attnspan"]`: our options and the task's fields; a field of another task
      is that task's (warned once), anything else is refused with the allowed keys;
    - a top-level key that is one of our options (`{"instruction": ""}`) is refused with the
      namespaced form to use: at the top level it cannot be told from a model argument;
    - `metadata["pretrained"]` (lm-eval's merged `--model_args`): the model folder whose
      saved prompt layout gives the instruction unless "attnspan" sets one;
    - every other top-level key (model arguments, lm-eval's `version`) is not ours.
    """
    task_name = generation.resolve_config(preset).task_name
    config_class = TASKS[task_name].config_class
    fields = config_class.field_names()
    other_fields = {f for t in TASKS.values() for f in t.config_class.field_names()}
    misplaced = sorted(key for key in metadata if key in OPTIONS)
    if misplaced:
        example = json.dumps({NAMESPACE: {key: metadata[key] for key in misplaced}}, default=str)
        raise ValueError(
            f"attnspan_{preset}: --metadata key(s) {', '.join(map(repr, misplaced))} must be "
            f"inside {NAMESPACE!r}: --metadata '{example}'"
        )
    ours = metadata.get(NAMESPACE) or {}
    if not isinstance(ours, dict):
        raise ValueError(
            f"attnspan_{preset}: --metadata {NAMESPACE!r} must be a JSON object, got {ours!r}"
        )
    options: dict[str, Any] = {
        "seed": DEFAULT_SEED,
        "size": DEFAULT_SIZE,
        "fewshot_size": DEFAULT_FEWSHOT_SIZE,
    }
    overrides: dict[str, Any] = {}
    unknown = []
    for key, value in ours.items():
        if key in OPTIONS:
            options[key] = _option(preset, key, value)
        elif key in fields:
            if isinstance(value, str):  # "12" for an int field: convert as the CLI does
                value = config_class.parse_value(key, value)
            overrides[key] = value
        elif key in other_fields:
            _log_once(
                f"attnspan: --metadata {NAMESPACE}.{key} is not a field of every task; "
                f"tasks without it ignore it"
            )
        else:
            unknown.append(key)
    if unknown:
        allowed = list(OPTIONS) + fields
        raise ValueError(
            f"attnspan_{preset}: unknown --metadata {NAMESPACE!r} key(s) "
            f"{', '.join(repr(k) for k in sorted(unknown))}; allowed: {', '.join(allowed)}"
        )
    if "instruction" not in options:
        saved = saved_prompt_layout(metadata.get("pretrained"))
        if saved is not None:
            options["instruction"] = saved["instruction"]
    return options, overrides


def saved_prompt_layout(model: Any) -> dict[str, Any] | None:
    """The prompt layout `attentionspan train` saved in a local model folder, as
    {"instruction": str ("" for none), "num_fewshot": int, "chat": bool}; None when `model`
    is not a local folder with a run file. A few-shot count or chat template that lm-eval
    must be told (it does not say what it was given) is logged once."""
    if not isinstance(model, (str, Path)) or not str(model):
        return None
    from harness.data import PromptConfig

    folder = Path(model).expanduser()
    path = folder / RUN_FILE
    try:
        # The harness's reader: the file checked as `attentionspan eval` checks it.
        info = read_run_file(folder)
        if info is None:
            return None
        prompt = section(info, "prompt", PromptConfig, folder)
        instruction = prompt.instruction or ""
        num_fewshot, chat = int(prompt.num_fewshot), bool(prompt.chat)
    except (OSError, ValueError, TypeError) as error:
        raise ValueError(f"{path}: cannot read the saved prompt layout ({error})") from None
    if not isinstance(instruction, str) or "\n" in instruction:
        raise ValueError(f"{path}: 'prompt.instruction' must be one line of text")
    flags = (f" --num_fewshot {num_fewshot}" if num_fewshot else "") + (
        " --apply_chat_template" if chat else ""
    )
    message = f"attnspan: using the prompt layout saved in {path} (instruction {instruction!r})"
    if flags:
        message += f"; it was trained with{flags}: pass the same to lm_eval"
    _log_once(message)
    return {"instruction": instruction, "num_fewshot": num_fewshot, "chat": chat}


def _option(preset: str, key: str, value: Any) -> Any:
    if key == "instruction":
        if not isinstance(value, str) or "\n" in value:
            raise ValueError(
                f"attnspan_{preset}: --metadata 'instruction' must be one line of text, "
                f"got {value!r}"
            )
        return value
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    low = 0 if key == "seed" else 1
    if number is None or isinstance(value, (bool, float)) or number < low:
        raise ValueError(
            f"attnspan_{preset}: --metadata {key!r} must be an integer >= {low}, got {value!r}"
        )
    return number


def _rows(preset: str, config, seed: int, size: int, split: str) -> list[dict[str, Any]]:
    rows = []
    for instance in iter_split(config, seed=seed, split=split, stop=size):
        if "\n" in instance.prompt or "\n" in instance.target:
            # The prompt layout separates examples with line breaks and generation stops
            # at the first one.
            raise ValueError(f"attnspan_{preset}: task text must not contain a line break")
        rows.append(
            {
                "index": instance.index,
                "prompt": instance.prompt,
                "target": instance.target,
                "length": config.length_bucket(instance.params),
                "params": json.dumps(instance.params, sort_keys=True),
                # gold reference positions per target character (attention=true)
                "reference": [list(row) for row in instance.reference],
            }
        )
    return rows


@cache
def default_bins(preset: str) -> tuple[tuple[int, int], ...]:
    """The length bins of a preset: at most 10 bins over the lengths of its default test
    set. The YAML's metric list is made from them (make_yamls.py), so they must not depend
    on anything but the preset."""
    config = generation.resolve_config(preset)
    instances = iter_split(config, seed=DEFAULT_SEED, split=TEST_SPLIT, stop=DEFAULT_SIZE)
    return tuple(length_bins((config.length_bucket(i.params) for i in instances), MAX_BINS))


def _bin_metric(length: int, bins) -> str:
    # A length outside the preset's bins (task parameters overridden) gets its own metric,
    # which lm-eval averages without a metric_list entry.
    found = bin_of(length, bins) or (length, length)
    return bucket_metric_name("exact_match", *found)


def process_results(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    """exact_match, partial_acc, and exact_match of the document's length bin; with
    `attention=true`, the attention metrics of `lm_eval_tasks.attention.metrics` too.

    The other bins of the task get NaN, which `nanmean` skips: lm-eval wants the same
    metrics from every document, and a bin with no document in the sample reports NaN.
    lm-eval's means of these are `metrics.aggregate(records, bins=default_bins(preset))`'s
    numbers (tests/lm_eval_tasks/test_lm_eval_dataset.py checks it).
    """
    prediction = results[0] if results else ""
    scores = record(prediction, doc["target"], doc.get("length", 0))
    out = dict.fromkeys(doc["length_bins"], math.nan)
    out[doc["length_bin"]] = scores["exact_match"]
    out.update(attention_metrics(doc, prediction))  # {} without attention=true
    return {"exact_match": scores["exact_match"], "partial_acc": scores["partial_acc"], **out}


def nanmean(values: list[float]) -> float:
    """The mean of the values that are not NaN (as `metrics.Scores`: sum / count); NaN when
    there are none."""
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan
