"""Evaluate a causal LM on ID and OOD presets: greedy generation and teacher forcing.

    attentionspan eval --model runs/rev/final --configs reversal_id reversal_ood -n 500
    accelerate launch --multi_gpu --num_processes 2 -m harness.evaluate --model runs/rev/final ...

For each config: exact match and partial accuracy of the greedy answer (the definitions in
`attentionspan_datasets.metrics`, shared with lm-eval), teacher-forced token accuracy (the
share of target characters that are the argmax when the true prefix is given), all three
per length (`params["length"]`). Writes `results.json`, `results.md` and one
`predictions-<config>.jsonl` per config (every instance, its answer, and which target tokens
were right under generation and under teacher forcing) for later analysis.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attentionspan_datasets.atomic import atomic_write_text
from attentionspan_datasets.generation import DEFAULT_SEED, resolve_config
from attentionspan_datasets.metrics import aggregate, score
from harness.caps import MAX_BATCH, MAX_INSTANCES, check_int, check_output_dir, check_unique
from harness.data import GeneratorSource, PromptConfig, shard_indices
from harness.inference import generate_batch, teacher_forced_batch
from harness.options import add_prompt_arguments, main_for, quiet_transformers, resolve_instruction
from harness.runs import load_model_checked, read_run_file, section
from harness.threads import add_threads_argument
from harness.tokenization import CharTokenizer

EVAL_SPLIT = "test"  # train reads "train", its periodic evaluation "validation"


@dataclass
class EvalConfig:
    model: str = ""
    configs: list[str] = field(default_factory=list)
    num: int = 200  # instances per config
    seed: int = DEFAULT_SEED
    split: str = EVAL_SPLIT
    batch_size: int = 32
    output: str | None = None
    mixed_precision: str = "no"  # "no" or "bf16"
    prompt: PromptConfig | None = None  # None: the one saved with the model, else plain

    def __post_init__(self) -> None:
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
    if name.endswith("_id") and name[:-3] + "_ood" in PRESETS:
        configs.append(name[:-3] + "_ood")
    return configs


# --- one batch ------------------------------------------------------------------------
def length_bucket(cache: dict, instance) -> int:
    """The length an instance is reported under (the task's rule, as in lm-eval)."""
    name = instance.config or instance.task
    if name not in cache:
        cache[name] = resolve_config(name)
    return cache[name].length_bucket(instance.params)


def score_instances(
    model,
    char_tok: CharTokenizer,
    instances,
    prompt: PromptConfig,
    batch_size: int,
    mixed_precision: str = "no",
    bar=None,
) -> list[dict[str, Any]]:
    """One record per instance: answer, exact match, partial accuracy, token correctness."""
    records = []
    buckets = {}  # config name -> its TaskConfig, whose length_bucket lm-eval also uses
    for first in range(0, len(instances), batch_size):
        chunk = instances[first : first + batch_size]
        encodings = [prompt.encode(char_tok, x) for x in chunk]
        # One token past the longest target decides exact match for every row: an answer
        # that goes on without EOS is already wrong at that token.
        max_new = max(e.target_len for e in encodings) + 1
        generated = generate_batch(model, char_tok, encodings, max_new, mixed_precision).ids
        forced = teacher_forced_batch(model, char_tok, encodings, mixed_precision).correct
        for instance, enc, ids, tf in zip(chunk, encodings, generated, forced):
            # Each answer is cut at its own target length + 1, so that what is saved does
            # not depend on which other instances shared the batch.
            answer = char_tok.decode(ids[: enc.target_len + 1], skip_special_tokens=True)
            scores = score(answer, instance.target)
            records.append(
                {
                    "config": instance.config,
                    "index": instance.index,
                    "length": length_bucket(buckets, instance),
                    "prompt": instance.prompt,
                    "target": instance.target,
                    "prediction": answer,
                    "exact_match": scores["exact_match"],
                    "partial_acc": scores["partial_acc"],
                    "tf_token_acc": sum(tf) / len(tf) if tf else 1.0,
                    "gen_correct": [
                        int(i < len(answer) and answer[i] == t)
                        for i, t in enumerate(instance.target)
                    ],
                    "tf_correct": [int(x) for x in tf],
                }
            )
        if bar is not None:  # after the batch is scored, so 100% means done
            bar.update(len(chunk))
    return records


# --- aggregation and reports --------------------------------------------------------------
METRICS = ("exact_match", "partial_acc", "tf_token_acc")


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


def _table(title: str, rows: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        f"| {title} | n | exact match | partial acc | TF token acc |",
        "|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name} | {row['count']} | {row['exact_match']:.3f} | "
            f"{row['partial_acc']:.3f} | {row['tf_token_acc']:.3f} |"
        )
    return lines


def markdown_table(results: dict[str, dict[str, Any]]) -> str:
    lines = _table("config", results)
    for name, res in results.items():
        lines += ["", f"Per length, {name}:", "", *_table("length", res["per_length"])]
        if any("-" in name for name in res["per_bin"]):  # some bin holds several lengths
            lines += ["", f"Per length bin, {name}:", "", *_table("lengths", res["per_bin"])]
    return "\n".join(lines) + "\n"


def write_reports(
    out_dir: Path, config: EvalConfig, results, records_by_config, elapsed: float
) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {
        "eval_config": dataclasses.asdict(config),
        "results": results,
        "time_s": round(elapsed, 2),
    }
    atomic_write_text(out_dir / "results.json", json.dumps(report, indent=2) + "\n")
    atomic_write_text(out_dir / "results.md", markdown_table(results))
    for name, records in records_by_config.items():
        lines = "".join(json.dumps(r) + "\n" for r in records)
        atomic_write_text(out_dir / f"predictions-{name}.jsonl", lines)


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
    main = accelerator is None or accelerator.is_main_process
    world = accelerator.num_processes if accelerator is not None else 1
    # The main process counts its own share; the others score theirs at the same pace.
    bar = tqdm(
        total=sum(len(shard_indices(0, num, world, 0)) for _ in configs),
        desc="eval",
        disable=not (progress and main),
        dynamic_ncols=True,
    )
    prompt = prompt or PromptConfig()
    sources = {name: GeneratorSource(name, seed=seed, split=split) for name in configs}
    was_training = model.training
    model.eval()
    results, all_records = {}, {}
    try:
        for name, source in sources.items():
            instances = [source[i] for i in range(num)]
            for x in instances:  # fail before any model call, naming the character
                char_tok.check_text(x.text)
            if accelerator is not None and accelerator.num_processes > 1:
                share = shard_indices(0, num, accelerator.num_processes, accelerator.process_index)
                mine = score_instances(
                    model,
                    char_tok,
                    [instances[i] for i in share],
                    prompt,
                    batch_size,
                    mixed_precision,
                    bar,
                )
                from accelerate.utils import gather_object

                records = gather_object([mine])
                records = [r for part in records for r in part]
            else:
                records = score_instances(
                    model, char_tok, instances, prompt, batch_size, mixed_precision, bar
                )
            records.sort(key=lambda r: r["index"])
            results[name] = summarise(records)
            all_records[name] = records
    finally:
        bar.close()
        model.train(was_training)
    return results, all_records


def run(config: EvalConfig) -> dict[str, Any]:
    """Load the model, evaluate every config, write the reports (main process only)."""
    from accelerate import Accelerator

    from harness.models import resolve_model

    resolve_model(config.model)  # a missing folder is named before anything else
    run_config = saved_run_config(config.model)
    if config.prompt is None:
        config.prompt = (
            section(run_config, "prompt", PromptConfig, config.model)
            if run_config
            else PromptConfig()
        )
    if not config.configs:
        config.configs = default_configs(run_config)
        if not config.configs:
            raise ValueError("no --configs given and the model has no saved training config")
    for name in config.configs:
        GeneratorSource(name)  # unknown preset: one line, before loading the model
    accelerator = Accelerator(cpu=True) if _cpu_only() else Accelerator()
    model, tokenizer = load_model_checked(config.model, config.configs, config.prompt)
    model.to(accelerator.device)
    start = time.perf_counter()
    results, records = evaluate_model(
        model,
        tokenizer,
        config.configs,
        config.num,
        config.seed,
        config.split,
        config.batch_size,
        config.prompt,
        config.mixed_precision,
        accelerator,
        progress=True,
    )
    elapsed = time.perf_counter() - start
    if accelerator.is_main_process:
        if config.output:
            write_reports(Path(config.output), config, results, records, elapsed)
        print(markdown_table(results), end="")
        print(
            f"({sum(r['count'] for r in results.values())} instances in {elapsed:.1f} s on "
            f"{accelerator.num_processes} process(es))"
        )
    return results


def _cpu_only() -> bool:
    import torch

    return not torch.cuda.is_available()


# --- the command ------------------------------------------------------------------------
def add_arguments(parser) -> None:
    parser.add_argument(
        "--model",
        required=True,
        help="a model folder (e.g. runs/rev/final), a fetched model name, ...",
    )
    parser.add_argument(
        "--configs",
        nargs="+",
        default=[],
        metavar="CONFIG",
        help="presets to evaluate (default: the training preset and its OOD twin)",
    )
    parser.add_argument("-n", "--num", type=int, default=200, help="instances per config")
    parser.add_argument("--seed", type=int, default=None, help="seed of the test split")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--output", default=None, help="folder for results.json, results.md and predictions-*.jsonl"
    )
    parser.add_argument("--mixed-precision", choices=("no", "bf16"), default="no")
    add_prompt_arguments(parser, saved_default=True)
    add_threads_argument(parser)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="exact match, partial and teacher-forced accuracy on ID/OOD presets",
        description="Evaluate a model with batched greedy generation and teacher forcing. "
        "Also: accelerate launch -m harness.evaluate ...",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def run_command(args) -> int:
    quiet_transformers()
    prompt = None
    if args.instruction is not None or args.num_fewshot is not None or args.chat is not None:
        saved = saved_run_config(args.model)
        base = section(saved, "prompt", PromptConfig, args.model) if saved else PromptConfig()
        configs = args.configs or default_configs(saved)
        prompt = dataclasses.replace(
            base,
            **{
                k: v
                for k, v in (
                    ("instruction", resolve_instruction(args.instruction, configs)),
                    ("num_fewshot", args.num_fewshot),
                    ("chat", args.chat),
                )
                if v is not None
            },
        )
    config = EvalConfig(
        model=args.model,
        configs=args.configs,
        num=args.num,
        seed=DEFAULT_SEED if args.seed is None else args.seed,
        batch_size=args.batch_size,
        output=args.output,
        mixed_precision=args.mixed_precision,
        prompt=prompt,
    )
    run(config)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main_for("eval", add_arguments, run_command))
