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
read with the harness's own readers, `harness.foundation.runs.read_run_file` and `saved_prompt`),
and
its instruction is used unless "attnspan" sets one.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

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
from harness.foundation.runs import RUN_CONFIG_FILE, read_run_file, saved_prompt
from lm_eval_tasks.attention import MODEL_ARG as ATTENTION_ARG
from lm_eval_tasks.attention import flag
from lm_eval_tasks.attention import metrics as attention_metrics
from lm_eval_tasks.command import under_lm_eval_command
from lm_eval_tasks.quiet import quiet_lm_eval_warnings

log = logging.getLogger(__name__)

DEFAULT_SEED = generation.DEFAULT_SEED
DEFAULT_SIZE = 500
DEFAULT_FEWSHOT_SIZE = 100
# Caps, checked before anything is drawn. A test row costs about 20 draws (the test split
# is 5% of prompts) and lm-eval one generation: 100,000 rows are hours of a small model's
# time already; 10,000 few-shot rows are far more than any prompt can hold.
MAX_SIZE = 100_000
MAX_FEWSHOT_SIZE = 10_000
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


def refuse(message: str) -> NoReturn:
    """A bad option: ValueError(message) for API callers; in the `lm_eval` command one line
    on stderr and exit status 2, where lm-eval would print a 50-line traceback ending in the
    same sentence (ATTENTIONSPAN_TRACEBACK=1 shows the traceback)."""
    if under_lm_eval_command() and not os.environ.get("ATTENTIONSPAN_TRACEBACK"):
        print(f"lm_eval: error: {message}", file=sys.stderr, flush=True)
        raise SystemExit(2)
    raise ValueError(message)


def custom_dataset(preset: str, **metadata: Any):
    """The `datasets.DatasetDict` of one task: splits "test" and "fewshot".

    `metadata` is what lm-eval passes: the task's YAML metadata (`version`), the user's
    `--metadata` JSON and, merged into the same dict, the `--model_args`. Our options and
    the task's config fields come from `metadata["attnspan"]`; see `split_metadata`. A bad
    option is a ValueError (one line in the `lm_eval` command: `refuse`).
    """
    try:
        return _custom_dataset(preset, metadata)
    except ValueError as error:
        refuse(_task_message(preset, error))


def _task_message(preset: str, error: ValueError) -> str:
    """A task's refusal in one line that names the task (and `--metadata 'attnspan'` when
    the message is a task field's own check)."""
    message = " ".join(str(error).split("\n"))
    if not message.startswith(f"attnspan_{preset}"):
        message = f"attnspan_{preset}: --metadata {NAMESPACE!r}: {message}"
    return message


def preflight_tasks(presets: list[str], metadata: dict[str, Any], num_fewshot: Any = None) -> None:
    """What `custom_dataset` and lm-eval's few-shot sampler would refuse, checked for the
    tasks of `presets` before anything is drawn or loaded (the `lm_eval` command's
    TaskManager hook, registration.patch_task_manager, calls it before lm-eval loads the
    model): our options, the task fields and their values (the config is made, no instance
    drawn), and `--num_fewshot` against the few-shot pool (`fewshot_size`)."""
    for preset in presets:
        try:
            options, overrides = split_metadata(preset, metadata)
            generation.resolve_config(preset, **overrides)
            check_num_fewshot(preset, num_fewshot, options["fewshot_size"])
        except ValueError as error:
            refuse(_task_message(preset, error))


def check_num_fewshot(preset: str, num_fewshot: Any, fewshot_size: int) -> None:
    """ValueError when lm-eval's sampler cannot draw `num_fewshot` examples: it takes them
    from the task's few-shot split, `fewshot_size` rows (and would fail with "Sample larger
    than population" after the model loaded)."""
    if num_fewshot is None:
        return
    text = str(num_fewshot).strip()
    number = int(text) if text.lstrip("-").isdigit() else None
    if number is None or number < 0:
        raise ValueError(
            f"attnspan_{preset}: --num_fewshot must be an integer >= 0, got {num_fewshot!r}"
        )
    if number > fewshot_size:
        widened = json.dumps({NAMESPACE: {"fewshot_size": number}})
        raise ValueError(
            f"attnspan_{preset}: --num_fewshot {number} is more than the {fewshot_size} "
            f"few-shot rows the examples are drawn from (--metadata {NAMESPACE!r} "
            f"'fewshot_size'); allowed: --num_fewshot <= {fewshot_size}, or widen the pool "
            f"with --metadata '{widened}'"
        )


def _custom_dataset(preset: str, metadata: dict[str, Any]):
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
    _note_lengths_outside_bins(preset, splits["test"], listed)
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
    options = check_options(metadata, f"attnspan_{preset}")
    ours = metadata.get(NAMESPACE, {})
    overrides: dict[str, Any] = {}
    unknown = []
    for key, value in ours.items():
        if key in OPTIONS:
            continue  # check_options read it
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


def check_options(
    metadata: dict[str, Any], label: str = NAMESPACE, strict: bool = False
) -> dict[str, Any]:
    """Our options under `metadata["attnspan"]` (seed, size, fewshot_size, instruction),
    checked and with their defaults; the checks that need no preset. The task fields there
    are checked per task (`split_metadata`); `strict` refuses a key that is neither an
    option nor a field of any task."""
    # `[]`, `0` or `null` is no set of options: refused, not read as none
    ours = metadata.get(NAMESPACE, {})
    if not isinstance(ours, dict):
        example = json.dumps({NAMESPACE: {"size": DEFAULT_SIZE}})
        raise ValueError(
            f"{label}: --metadata {NAMESPACE!r} must be a JSON object of options and task "
            f"fields (e.g. --metadata '{example}'), got {json.dumps(ours, default=str)}"
        )
    options: dict[str, Any] = {
        "seed": DEFAULT_SEED,
        "size": DEFAULT_SIZE,
        "fewshot_size": DEFAULT_FEWSHOT_SIZE,
    }
    for key, value in ours.items():
        if key in OPTIONS:
            options[key] = _option(label, key, value)
    every_field = {f for t in TASKS.values() for f in t.config_class.field_names()}
    unknown = sorted(key for key in ours if key not in OPTIONS and key not in every_field)
    if unknown and strict:
        raise ValueError(
            f"{label}: unknown --metadata {NAMESPACE!r} key(s) "
            f"{', '.join(map(repr, unknown))}; allowed: {', '.join(OPTIONS)} and the fields "
            f"of the tasks' configs (lm_eval_tasks/README.md)"
        )
    return options


def preflight(metadata: Any) -> None:
    """Check `--metadata '{"attnspan": ...}'` when lm-eval's TaskManager is made, before
    the model is loaded (registration.patch_task_manager calls it): a bad value then
    costs a second, not a model load. Top-level keys are left to the tasks: they may
    belong to another task of the run."""
    if not isinstance(metadata, dict) or NAMESPACE not in metadata:
        return
    try:
        check_options(metadata, strict=True)
    except ValueError as error:
        refuse(str(error))


def saved_prompt_layout(model: Any) -> dict[str, Any] | None:
    """The prompt layout `attentionspan train` saved in a local model folder, as
    {"instruction": str ("" for none), "num_fewshot": int, "chat": bool}; None when `model`
    is not a local folder with a run file. A few-shot count or chat template that lm-eval
    must be told (it does not say what it was given) is logged once."""
    if not isinstance(model, (str, Path)) or not str(model):
        return None
    folder = Path(model).expanduser()
    path = folder / RUN_FILE
    try:
        # The harness's reader: the file checked as `attentionspan eval` checks it.
        info = read_run_file(folder)
        if info is None:
            return None
        prompt = saved_prompt(info, folder)
        instruction = prompt.instruction or ""
        num_fewshot, chat = int(prompt.num_fewshot), bool(prompt.chat)
    except (OSError, ValueError, AttributeError, TypeError) as error:
        raise ValueError(f"{path}: cannot read the saved prompt layout ({error})") from None
    if not isinstance(instruction, str) or "\n" in instruction:
        raise ValueError(f"{path}: 'prompt.instruction' must be one line of text")
    flags = (f" --num_fewshot {num_fewshot}" if num_fewshot else "") + (
        " --apply_chat_template" if chat else ""
    )
    if num_fewshot > DEFAULT_FEWSHOT_SIZE:  # lm-eval samples them from the fewshot split
        flags += f""" --metadata '{{"{NAMESPACE}": {{"fewshot_size": {num_fewshot}}}}}'"""
    message = f"attnspan: using the prompt layout saved in {path} (instruction {instruction!r})"
    if flags:
        message += f"; it was trained with{flags}: pass the same to lm_eval"
    _log_once(message)
    return {"instruction": instruction, "num_fewshot": num_fewshot, "chat": chat}


# (low, high, what the cap counts) of the integer options
_OPTION_RANGES = {
    "seed": (0, generation.SEED_RANGE[1], ""),
    "size": (1, MAX_SIZE, " test instances"),
    "fewshot_size": (1, MAX_FEWSHOT_SIZE, " few-shot rows"),
}


def _option(label: str, key: str, value: Any) -> Any:
    if key == "instruction":
        if not isinstance(value, str) or "\n" in value:
            raise ValueError(
                f"{label}: --metadata 'instruction' must be one line of text, got {value!r}"
            )
        hidden = sorted({f"U+{ord(c):04X}" for c in value if not c.isprintable()})
        if hidden:
            raise ValueError(
                f"{label}: --metadata 'instruction' must be printable text; it holds "
                f"{', '.join(hidden)}"
            )
        return value
    low, high, unit = _OPTION_RANGES[key]
    try:  # "200" from a command line is 200; 2.5, True and "x" are refused
        number = int(value) if isinstance(value, (int, str)) else None
    except ValueError:
        number = None
    if number is None or isinstance(value, bool):
        raise ValueError(f"{label}: --metadata {key!r} must be an integer >= {low}, got {value!r}")
    if number < low:
        raise ValueError(f"{label}: --metadata {key!r} must be an integer >= {low}, got {number}")
    if number > high:
        raise ValueError(
            f"{label}: --metadata {key!r} is {number:,}, above the cap of {high:,}{unit}"
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


def _note_lengths_outside_bins(preset: str, rows: list[dict[str, Any]], bins) -> None:
    """Say once per task which lengths have a metric of their own (task fields changed
    with --metadata): lm-eval's metric list, fixed in the YAML, cannot name them, and
    lm-eval would warn once per such metric that it averages it with `mean` (which is
    right: only that length's documents report it). quiet.quiet_lm_eval_warnings drops
    those."""
    outside = sorted({row["length"] for row in rows if bin_of(row["length"], bins) is None})
    if outside:
        shown = ", ".join(map(str, outside[:10])) + (" ..." if len(outside) > 10 else "")
        _log_once(
            f"attnspan_{preset}: lengths {shown} lie outside the preset's length bins "
            f"({bins[0][0]}-{bins[-1][1]}); each gets a metric of its own "
            f"(exact_match_len_XX), the mean over the documents of that length"
        )


# lm-eval imports this module while it reads our YAML (`!function`), before it builds a
# task: from here its hints about our tasks are dropped, start-up hooks on or off.
quiet_lm_eval_warnings()


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
