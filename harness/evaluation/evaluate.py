"""Evaluate a causal LM on ID and OOD presets: greedy generation and teacher forcing.

    attentionspan eval --model runs/rev/final --configs reversal_id reversal_ood -n 500
    accelerate launch --multi_gpu --num_processes 2 -m harness.commands.eval --model ...

For each config: exact match and partial accuracy of the greedy answer (the definitions in
`attentionspan_datasets.metrics`, shared with lm-eval), teacher-forced token accuracy (the
share of target characters that are the argmax when the true prefix is given), all three
per length (`params["length"]`), and one record per instance (its answer, and which target
tokens were right under generation and under teacher forcing). It writes no files: the
command is `harness.commands.eval`, the files (`results.json`, `results.md`,
`predictions-<config>.jsonl`) are `harness.report.eval_report`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attentionspan_datasets.generation import DEFAULT_SEED
from attentionspan_datasets.metrics import aggregate
from harness.engine.scoring import Processes, Scorer, check_texts, token_accuracy
from harness.foundation.caps import (
    MAX_BATCH,
    MAX_INSTANCES,
    check_int,
    check_output_dir,
    check_unique,
)
from harness.foundation.data import GeneratorSource, PromptConfig, shard_indices
from harness.foundation.dispatch import Placement, placement_field
from harness.foundation.options import cli
from harness.foundation.runs import read_run_file
from harness.foundation.tokenization import CharTokenizer

EVAL_SPLIT = "test"  # train reads "train", its periodic evaluation "validation"


@dataclass
class EvalConfig:
    # `attentionspan eval`'s options are declared on these fields (the prompt options are
    # the shared ones: harness.commands.eval).
    model: str = field(
        default="",
        metadata=cli(
            "a model folder (e.g. runs/rev/final), a fetched model name "
            "(smollm2-135m-instruct, gemma3-270m) or a Hub name",
            shared="model",
            required=True,
        ),
    )
    configs: list[str] = field(
        default_factory=list,
        metadata=cli(
            "presets to score (default: the model's training preset and its OOD twin)",
            shared="configs",
        ),
    )
    num: int = field(default=200, metadata=cli("instances per config", shared="num"))
    seed: int = field(default=DEFAULT_SEED, metadata=cli("seed of the test split", shared="seed"))
    split: str = EVAL_SPLIT
    batch_size: int = field(default=32, metadata=cli("instances per batch", shared="batch_size"))
    output: str | None = field(
        default=None,
        metadata=cli("folder for results.json, results.md and predictions-*.jsonl"),
    )
    mixed_precision: str = field(  # "no" or "bf16"
        default="no", metadata=cli("bf16 autocast, or none", shared="mixed_precision")
    )
    prompt: PromptConfig | None = None  # None: the one saved with the model, else plain
    device_map: str | None = placement_field("device_map")
    max_memory: str | None = placement_field("max_memory")
    offload_folder: str | None = placement_field("offload_folder")
    tp_plan: str | None = placement_field("tp_plan")

    def __post_init__(self) -> None:
        Placement.of(self)  # ValueError naming --device-map, --max-memory, --offload-folder
        check_int("-n/--num", self.num, 1, MAX_INSTANCES)
        check_int("--batch-size", self.batch_size, 1, MAX_BATCH)
        check_unique("--configs", self.configs)
        check_output_dir("--output", self.output)
        if self.mixed_precision not in ("no", "bf16"):
            raise ValueError(
                f"mixed_precision must be 'no' or 'bf16', got {self.mixed_precision!r}"
            )


def saved_run_config(model_dir: str | Path) -> dict[str, Any] | None:
    """The run file saved with a model folder (checked), or None."""
    return read_run_file(model_dir) if Path(model_dir).is_dir() else None


def default_configs(run: dict[str, Any] | None) -> list[str]:
    """The training config and its OOD twin (`reversal_id` -> `reversal_ood`)."""
    from attentionspan_datasets.presets import PRESETS

    if not run:
        return []
    name = run["train"]["config"]
    configs = [name]
    preset = PRESETS.get(name)  # None for a bare task name (`reversal`)
    if preset is not None and preset.role == "id":
        configs.append(preset.twin.name)
    return configs


# --- one batch ------------------------------------------------------------------------
def score_instances(
    model,
    char_tok: CharTokenizer,
    instances,
    prompt: PromptConfig,
    batch_size: int,
    mixed_precision: str = "no",
    bar=None,
) -> list[dict[str, Any]]:
    """One record per instance: answer, exact match, partial accuracy, token correctness
    (the engine's generation and teacher forcing, `harness.engine.scoring`)."""
    scorer = Scorer(model, char_tok, prompt, batch_size, mixed_precision)

    def one_batch(chunk, encodings):
        generated, _ = scorer.generate(encodings)
        forced, _ = scorer.teacher_force(encodings)
        records = []
        for instance, enc, ids, tf in zip(chunk, encodings, generated.ids, forced.correct):
            record = scorer.answer_record(instance, enc, ids)
            answer = record.pop("prediction")
            records.append(
                {
                    "config": record["config"],
                    "index": record["index"],
                    "length": record["length"],
                    "prompt": instance.prompt,
                    "target": instance.target,
                    "prediction": answer,
                    "exact_match": record["exact_match"],
                    "partial_acc": record["partial_acc"],
                    "tf_token_acc": token_accuracy(tf),
                    "gen_correct": [
                        int(i < len(answer) and answer[i] == t)
                        for i, t in enumerate(instance.target)
                    ],
                    "tf_correct": [int(x) for x in tf],
                }
            )
        return records

    on_batch = bar.update if bar is not None else None
    return [r for part in scorer.run(instances, one_batch, on_batch) for r in part]


# --- aggregation and reports --------------------------------------------------------------
def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Overall, per length and per length bin means, grouped by `metrics.aggregate` (the
    one aggregate lm-eval and the `evaluate` metric report through); teacher-forced token
    accuracy is averaged over exactly the groups it made."""
    result = aggregate(records)
    lengths = [int(r["length"]) for r in records]

    def with_tf(scores, keep) -> dict[str, Any]:
        rows = [r["tf_token_acc"] for r, length in zip(records, lengths) if keep(length)]
        tf = sum(rows) / len(rows) if rows else math.nan
        return {**scores.to_dict(), "tf_token_acc": tf}

    return {
        **with_tf(result.overall, lambda length: True),
        "per_length": {
            str(n): with_tf(s, lambda length, n=n: length == n)
            for n, s in result.per_length.items()
        },
        "per_bin": {
            (f"{a}" if a == b else f"{a}-{b}"): with_tf(
                s, lambda length, a=a, b=b: a <= length <= b
            )
            for (a, b), s in result.per_bin.items()
            if s.count  # as lm-eval's metrics: a bin without instances is left out
        },
    }


# --- the run ------------------------------------------------------------------------------
def evaluate_model(
    model,
    tokenizer,
    configs: list[str],
    num: int,
    seed: int = DEFAULT_SEED,
    split: str = EVAL_SPLIT,
    batch_size: int = 32,
    prompt: PromptConfig | None = None,
    mixed_precision: str = "no",
    accelerator=None,
    progress: bool = False,
) -> tuple[dict, dict]:
    """(results per config, records per config). With an accelerator, each process scores
    a share of the instances and every process gets the gathered results."""
    from tqdm.auto import tqdm

    char_tok = CharTokenizer(tokenizer)
    procs = Processes.of(accelerator)
    # The main process counts its own share; the others score theirs at the same pace.
    bar = tqdm(
        total=sum(len(shard_indices(0, num, procs.world, 0)) for _ in configs),
        desc="eval",
        disable=not (progress and procs.main),
        dynamic_ncols=True,
    )
    prompt = prompt or PromptConfig()
    sources = {name: GeneratorSource(name, seed=seed, split=split) for name in configs}
    results, all_records = {}, {}
    try:
        for name, source in sources.items():
            instances = [source[i] for i in range(num)]
            check_texts(char_tok, instances)  # every config's, before its first batch
            mine = [instances[i] for i in procs.share(num)]
            records = score_instances(
                model, char_tok, mine, prompt, batch_size, mixed_precision, bar
            )
            records = procs.gather({name: records})[name]
            records.sort(key=lambda r: r["index"])
            results[name] = summarise(records)
            all_records[name] = records
    finally:
        bar.close()
    return results, all_records
