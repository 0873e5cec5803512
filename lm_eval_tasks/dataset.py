"""Data, prompts and scores of the `attnspan_<preset>` lm-eval tasks.

    lm_eval --model hf --model_args pretrained=DIR --tasks attnspan_reversal_ood \\
        --metadata '{"seed": 7, "size": 200, "max_length": 60}'

lm-eval calls `custom_dataset(preset=..., **metadata)` (the YAML's `dataset_kwargs` give the
preset) and `process_results(doc, results)` for every answer. The test split is the first
`size` instances of the generator's "test" stream and the few-shot split the first
`fewshot_size` of its "fewshot" stream, both with a fixed default seed: every run of the same
task version scores the same instances, and few-shot examples never come from the test
stream. The scores are `attentionspan_datasets.metrics`, the one definition the harness uses.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from functools import cache
from typing import Any

from attentionspan_datasets import generation
from attentionspan_datasets.instructions import instruction_for
from attentionspan_datasets.metrics import (
    bin_of,
    bucket_metric_name,
    length_bins,
    score,
)
from attentionspan_datasets.tasks import TASKS

log = logging.getLogger(__name__)

DEFAULT_SEED = generation.DEFAULT_SEED
DEFAULT_SIZE = 500
DEFAULT_FEWSHOT_SIZE = 100
TEST_STREAM = "test"
FEWSHOT_STREAM = "fewshot"
MAX_BINS = 10

# Options of the lm-eval tasks themselves; every other accepted --metadata key is a field of
# the task's config (`max_length`, `num_operands`, ...).
OPTIONS = {
    "seed": "generator seed of both splits (default 1234)",
    "size": f"number of test instances (default {DEFAULT_SIZE})",
    "fewshot_size": f"number of instances few-shot examples are drawn from "
    f"(default {DEFAULT_FEWSHOT_SIZE})",
    "instruction": 'the instruction line before the examples ("" for none)',
}
# Keys lm-eval itself puts into the metadata it hands to custom_dataset.
LM_EVAL_KEYS = {"version", "config_source"}


def custom_dataset(preset: str, **metadata: Any):
    """The `datasets.DatasetDict` of one task: splits "test" and "fewshot".

    `metadata` is what lm-eval passes: the task's YAML metadata (`version`), the user's
    `--metadata` JSON and, mixed into the same dict, the `--model_args`. Our options and the
    task's config fields are used, lm-eval's own keys and the model arguments are ignored,
    and anything else is refused with the list of allowed keys.
    """
    import datasets

    options, overrides = split_metadata(preset, metadata)
    config = generation.resolve_config(preset, **overrides)
    instruction = options.get("instruction", instruction_for(config.task_name))
    listed = default_bins(preset)
    names = [bucket_metric_name("exact_match", *b) for b in listed]
    splits = {
        "test": _rows(preset, config, options["seed"], options["size"], TEST_STREAM),
        "fewshot": _rows(preset, config, options["seed"], options["fewshot_size"], FEWSHOT_STREAM),
    }
    for rows in splits.values():
        for row in rows:
            row["instruction"] = instruction
            row["length_bin"] = _bin_metric(row["length"], listed)
            row["length_bins"] = names
    return datasets.DatasetDict(
        {name: datasets.Dataset.from_list(rows) for name, rows in splits.items()}
    )


def split_metadata(preset: str, metadata: dict[str, Any]) -> tuple[dict, dict]:
    """(our options with defaults, config overrides) from lm-eval's metadata dict."""
    task_name = generation.resolve_config(preset).task_name
    config_class = TASKS[task_name].config_class
    fields = config_class.field_names()
    other_fields = {f for t in TASKS.values() for f in t.config_class.field_names()}
    model_args = _model_arguments()
    options: dict[str, Any] = {
        "seed": DEFAULT_SEED,
        "size": DEFAULT_SIZE,
        "fewshot_size": DEFAULT_FEWSHOT_SIZE,
    }
    overrides: dict[str, Any] = {}
    unknown = []
    for key, value in metadata.items():
        if key in LM_EVAL_KEYS:
            continue
        # lm-eval merges --model_args into the metadata; a value that still equals the
        # model argument came from there (`max_length` is both an HFLM argument and a field).
        if key in model_args and model_args[key] == value:
            continue
        if key in OPTIONS:
            options[key] = _option(preset, key, value)
        elif key in fields:
            if isinstance(value, str):  # "12" for an int field: convert as the CLI does
                value = config_class.parse_value(key, value)
            overrides[key] = value
        elif key in other_fields:
            # One --metadata serves every task of a run: a field of another task is theirs.
            log.warning(
                "attnspan_%s: ignoring --metadata key %r (not a field of %s)",
                preset,
                key,
                task_name,
            )
        else:
            unknown.append(key)
    if unknown:
        allowed = list(OPTIONS) + fields
        raise ValueError(
            f"attnspan_{preset}: unknown --metadata key(s) "
            f"{', '.join(repr(k) for k in sorted(unknown))}; allowed: {', '.join(allowed)}"
        )
    return options, overrides


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


def _model_arguments() -> dict[str, Any]:
    """The model arguments of the `lm_eval.evaluator.simple_evaluate` call that is building
    this task, or {} when there is none (a TaskManager used on its own).

    lm-eval passes `--model_args` to custom_dataset in the same dict as `--metadata`; only
    simple_evaluate still holds them apart, so we read its frame instead of guessing.
    """
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "simple_evaluate" and frame.f_globals.get("__name__") == (
            "lm_eval.evaluator"
        ):
            args = frame.f_locals.get("model_args")
            if isinstance(args, str):
                from lm_eval.utils import simple_parse_args_string

                return simple_parse_args_string(args)
            return dict(args) if isinstance(args, dict) else {}
        frame = frame.f_back
    return {}


def _rows(preset: str, config, seed: int, size: int, stream: str) -> list[dict[str, Any]]:
    rows = []
    for instance in generation.iter_instances(config, seed=seed, stop=size, stream=stream):
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
            }
        )
    return rows


@cache
def default_bins(preset: str) -> tuple[tuple[int, int], ...]:
    """The length bins of a preset: at most 10 bins over the lengths of its default test
    set. The YAML's metric list is made from them (make_yamls.py), so they must not depend
    on anything but the preset."""
    config = generation.resolve_config(preset)
    instances = generation.iter_instances(
        config, seed=DEFAULT_SEED, stop=DEFAULT_SIZE, stream=TEST_STREAM
    )
    return tuple(length_bins((config.length_bucket(i.params) for i in instances), MAX_BINS))


def _bin_metric(length: int, bins) -> str:
    # A length outside the preset's bins (task parameters overridden) gets its own metric,
    # which lm-eval averages without a metric_list entry.
    found = bin_of(length, bins) or (length, length)
    return bucket_metric_name("exact_match", *found)


def process_results(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    """exact_match, partial_acc, and exact_match of the document's length bin.

    The other bins of the task get NaN, which `nanmean` skips: lm-eval wants the same
    metrics from every document, and a bin with no document in the sample reports NaN.
    """
    prediction = results[0] if results else ""
    scores = score(prediction, doc["target"])
    out = dict.fromkeys(doc["length_bins"], math.nan)
    out[doc["length_bin"]] = scores["exact_match"]
    return {**scores, **out}


def nanmean(values: list[float]) -> float:
    """The mean of the values that are not NaN; NaN when there are none."""
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan
