"""Where `reproduce --pretrained`'s analysis spends its forwards: every stage after the
fine-tune, counted per stage.

    python benchmarks/pretrained_analysis.py [--model FOLDER] [--task reversal]
                                            [--num-validation 64] [--num-test 64] [--json OUT]

Runs `TaskRun.run` (harness.pipeline.reproduce: eval, attention, heads, sweep, dose,
diagnosis, verdict, stability, at_dose, replication and its stability, viewer, and a second
candidate lookup where a near tie or a split makes one) at --pretrained's sizes (its grid,
controls, ladder and batch, `PRETRAINED_SIZES`; 64 validation and 64 test instances, the
sizes its verdicts need) into a fresh temporary folder (nothing cached), and reports per
stage, counted by a hook on the model's forward (no caller is changed):
- forwards: calls of the model (one per batch pass; a generation is one per new token);
- rows: batch rows over those calls; tokens: rows x columns forwarded (the work a forward
  does grows with it; a cached decode step forwards one column a row);
- generated: tokens written by `generate` (rows x decode steps);
- CPU s: this process's user + system seconds in the stage (one torch thread).
The temporary folder is kept (its path is --json's "work"): two runs' stage files can be
compared, as performance.md's before and after were.

Without --model a tiny random Llama shaped as SmolLM2-135M's attention (30 layers x 9
heads, hidden 72) is built in memory and saved to the temporary folder, with the task's
instruction as its prompt (no chat template: SmolLM2's adds about 30 prompt tokens a row):
the counts of forwards and rows are what a SmolLM2 run does at the same sizes (a random
model writes every answer to the end and errs everywhere, so generation and the diagnosis
are counted at their most), the CPU seconds are not. A random model's lookup heads are
every head, so its ladder would choose N = 270, outside which no head is left for the
random-heads draws; the ladder's N is fixed at --ladder-n (default 4 on the tiny model, a
fine-tuned model's own choice with --model) after every count is laddered on validation,
so the test ladder has the draws a fine-tuned model's has. With --model (a fine-tuned model's
final/ folder, e.g. OUT/models/reversal/final of a `reproduce --pretrained` run) the same
stages run on it with its saved prompt: the coordinator's SmolLM2 and Gemma figures.

Targets: the analysis at most 15 CPU-minutes on SmolLM2 and 25 on Gemma 3 (what this
measures); a seed run at most 35 and 60, fine-tune included.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

SMOLLM2_TARGET_MIN = 35  # a SmolLM2 seed run, CPU-minutes (fine-tune + analysis)
GEMMA_TARGET_MIN = 60
SMOLLM2_ANALYSIS_TARGET_MIN = 15  # the analysis alone (what this script measures)
GEMMA_ANALYSIS_TARGET_MIN = 25
STAGES = (  # TaskRun's methods, in the order run() takes them, and each one's stage name
    ("run_eval", "eval"),
    ("run_attention", "attention"),
    ("run_heads", "heads"),
    ("run_sweep", "sweep"),
    ("run_dose", "dose"),
    ("run_diagnosis", "diagnosis"),
    ("calibrated_verdict", "verdict"),
    ("run_stability", "stability"),
    ("run_at_dose", "at_dose"),
    ("run_replication", "replication"),
    ("run_replication_stability", "replication_stability"),
    ("run_viewer", "viewer"),
    # a second candidate lookup (a near tie or a split): every stage it runs counts here,
    # not in the first lookup's rows
    ("judge_second", "second_lookup"),
)


class Counter:
    """Forwards, rows, tokens and generated tokens per stage, from a forward pre-hook on
    the model and a wrapper around its `generate`; CPU seconds per stage."""

    def __init__(self) -> None:
        self.stage = "other"
        self.in_generate = False
        self.figures: dict[str, dict[str, float]] = {}

    def row(self, stage: str) -> dict[str, float]:
        return self.figures.setdefault(
            stage,
            {
                "forwards": 0,
                "rows": 0,
                "tokens": 0,
                "generate_forwards": 0,
                "generated": 0,
                "cpu_s": 0.0,
            },
        )

    def attach(self, model) -> None:
        def hook(module, args, kwargs):
            ids = kwargs.get("input_ids", args[0] if args else None)
            if ids is None:
                return
            rows, columns = int(ids.shape[0]), int(ids.shape[1])
            figures = self.row(self.stage)
            figures["forwards"] += 1
            figures["rows"] += rows
            figures["tokens"] += rows * columns
            if self.in_generate:
                figures["generate_forwards"] += 1
                figures["generated"] += rows

        model.register_forward_pre_hook(hook, with_kwargs=True)
        plain = model.generate

        def generate(*args, **kwargs):
            self.in_generate = True
            try:
                return plain(*args, **kwargs)
            finally:
                self.in_generate = False

        model.generate = generate

    def wrap(self, task_run, method: str, stage: str) -> None:
        """Count `method`'s forwards and CPU time under `stage` (nested calls, such as the
        diagnosis's scoring of the baseline, stay in the outer stage)."""
        plain = getattr(task_run, method)

        def counted(*args, **kwargs):
            if self.stage != "other":
                return plain(*args, **kwargs)
            self.stage = stage
            started = time.process_time()
            try:
                return plain(*args, **kwargs)
            finally:
                self.row(stage)["cpu_s"] += time.process_time() - started
                self.stage = "other"

        setattr(task_run, method, counted)


def tiny_smollm2_shape(folder: Path) -> Path:
    """A random Llama with SmolLM2-135M's attention layout (30 layers x 9 heads: 270 heads,
    so the same head counts and lookup offsets), hidden 72, saved with its character
    tokenizer to `folder`."""
    from harness.foundation.models import ScratchConfig, build_scratch

    model, tokenizer = build_scratch(
        ScratchConfig(hidden_size=72, num_layers=30, num_heads=9, intermediate_size=128)
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def run(args) -> dict:
    import torch

    from harness.foundation.data import PromptConfig
    from harness.pipeline.reproduce import Processes, TaskRun
    from harness.pipeline.settings import (
        PRETRAINED_SIZES,
        QUICK_OOD,
        ReproduceConfig,
        TaskValue,
    )
    from harness.report.report_md import pipeline_writers

    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="pretrained-analysis-"))
    folder = args.model or str(tiny_smollm2_shape(work / "model"))
    sizes = {**PRETRAINED_SIZES, "num_validation": args.num_validation, "num_test": args.num_test}
    cfg = ReproduceConfig(
        model=folder,
        config=args.task,
        output=str(work / "out"),
        ood=QUICK_OOD.get(TaskValue.of(args.task).short, {}),
        device="cpu",
        progress=False,
        **sizes,
    )
    procs = Processes("cpu")
    task_run = TaskRun(cfg, cfg.task_values[0], folder, work / "out", procs, pipeline_writers())
    task_run.log = lambda message: None
    counter = Counter()
    loaded = time.process_time()
    task_run.load()
    loaded = time.process_time() - loaded
    if not args.model:  # --pretrained's instruction line (the tiny tokenizer has no template)
        task_run.prompt = PromptConfig(instruction=cfg.task_values[0].instruction)
    counter.attach(task_run.model)
    ladder_n = args.ladder_n if args.ladder_n is not None else (0 if args.model else 4)
    if ladder_n:
        _fix_ladder_n(ladder_n)
    for method, stage in STAGES:
        counter.wrap(task_run, method, stage)
    started = time.process_time()
    results = task_run.run()
    total = time.process_time() - started
    dose = results.get("dose") or {}
    return {
        "model": args.model or "tiny random Llama, SmolLM2's 30 x 9 heads, hidden 72",
        "task": args.task,
        "sizes": sizes,
        "prompt_columns": _prompt_columns(task_run),
        "ladder_counts": sorted(int(n) for n in dose.get("counts", {})),
        "ladder_n": dose.get("n"),
        "ladder_n_fixed": bool(ladder_n),
        "dose_chosen": (results.get("verdict") or {}).get("numbers", {}).get("dose"),
        "work": str(work),
        "stages": {stage: counter.row(stage) for _, stage in STAGES},
        "other": counter.figures.get("other"),
        "load_cpu_s": round(loaded, 1),
        "analysis_cpu_s": round(total, 1),
        "load_average": round(os.getloadavg()[0], 1),
    }


def _fix_ladder_n(n: int) -> None:
    """The ladder's N fixed at `n` (one of the laddered counts), its summary of every count
    kept: `choose_count` as the dose stage calls it, wrapped."""
    from harness.attention.verdicts import calibrated

    plain = calibrated.choose_count

    def fixed(curves, lookup=0):
        _, summary = plain(curves, lookup=lookup)
        if n not in curves:
            raise ValueError(f"--ladder-n {n} is not among the laddered counts {sorted(curves)}")
        return n, summary

    calibrated.choose_count = fixed


def _prompt_columns(task_run) -> int:
    """Prompt tokens of the first OOD test instance (the work a full forward repeats)."""
    from harness.foundation.tokenization import CharTokenizer

    instance = task_run.instances("test", 1, share=False)[0]
    encoding = task_run.prompt.encode(CharTokenizer(task_run.tokenizer), instance)
    return int(encoding.target_offset)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a model folder (default: tiny Llama)")
    parser.add_argument("--task", default="reversal")
    parser.add_argument("--num-validation", type=int, default=64)
    parser.add_argument("--num-test", type=int, default=64)
    parser.add_argument(
        "--ladder-n",
        type=int,
        default=None,
        help="fix the ladder's N (default: 4 on the tiny model, the model's choice with --model; "
        "0: the model's choice)",
    )
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    out = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    print(
        f"model: {out['model']}; {args.task}, {out['sizes']['num_validation']} validation, "
        f"{out['sizes']['num_test']} test, batch {out['sizes']['batch_size']}, "
        f"{out['prompt_columns']} prompt columns; ladder counts {out['ladder_counts']}, "
        f"N = {out['ladder_n']}{' (fixed)' if out['ladder_n_fixed'] else ''}; "
        f"load average {out['load_average']}"
    )
    heading = ("stage", "forwards", "rows", "tokens", "generated", "CPU s")
    print("{:<21} {:>9} {:>8} {:>10} {:>10} {:>8}".format(*heading))
    sums = dict.fromkeys(("forwards", "rows", "tokens", "generated", "cpu_s"), 0.0)
    for stage, f in out["stages"].items():
        print(
            f"{stage:<21} {f['forwards']:>9,} {f['rows']:>8,} {f['tokens']:>10,} "
            f"{f['generated']:>10,} {f['cpu_s']:>8.1f}"
        )
        for key in sums:
            sums[key] += f[key]
    print(
        f"{'all':<21} {int(sums['forwards']):>9,} {int(sums['rows']):>8,} "
        f"{int(sums['tokens']):>10,} {int(sums['generated']):>10,} {sums['cpu_s']:>8.1f}"
    )
    print(
        f"analysis: {out['analysis_cpu_s'] / 60:.1f} CPU-min on this model (+{out['load_cpu_s']} s "
        f"loading); targets: the analysis <= {SMOLLM2_ANALYSIS_TARGET_MIN} CPU-min on SmolLM2, "
        f"<= {GEMMA_ANALYSIS_TARGET_MIN} on Gemma 3; a seed run <= {SMOLLM2_TARGET_MIN} and "
        f"<= {GEMMA_TARGET_MIN}, fine-tune included"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
