"""Cost of `attnspan-hf`'s `attention=true` in an lm-eval run.

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/lm_eval_attention.py [--num 32] [--rounds 3]
    OMP_NUM_THREADS=1 PYTHONPATH=/other/checkout python benchmarks/lm_eval_attention.py \\
        --modes off          # the same run on another tree's code (before / after a change)

`lm_eval.simple_evaluate` on `attnspan_reversal_ood` (`--num` test instances, batch 8) with
the default scratch Llama (4 layers, hidden 128, 4 heads, random weights: its answers run to
the generation budget) saved to a temporary folder, with `attention=false` ("off") and
`attention=true` ("on"). Time is this process's CPU time for the whole evaluation (dataset,
generation, measurement, metrics), median over rounds that alternate the modes. Target: "on"
at most 1.3x "off". Run "off" on the tree before a change (PYTHONPATH: the installed
package's start-up hook imports the editable install's code otherwise; the first line says
which code ran) to compare what `attnspan-hf` costs without the measurement.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time

TARGET = 1.3
TASK = "attnspan_reversal_ood"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num", type=int, default=32, help="test instances (lm-eval --limit)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--modes", nargs="+", choices=("off", "on"), default=["off", "on"])
    args = parser.parse_args(argv)

    import lm_eval
    import torch
    from lm_eval.tasks import TaskManager

    import lm_eval_tasks
    from harness.foundation.models import ScratchConfig, build_scratch
    from lm_eval_tasks.models import AttnspanHFLM

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    folder = tempfile.mkdtemp(prefix="lm_eval_attention_")
    model, tokenizer = build_scratch(ScratchConfig())
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    print(f"code: {lm_eval_tasks.__file__}; {platform.processor() or platform.machine()}")

    def run(mode: str) -> float:
        model_args = {"pretrained": folder, "device": "cpu", "dtype": "float32"}
        if mode == "on":
            model_args["attention"] = True
        lm = AttnspanHFLM(batch_size=args.batch, **model_args)
        manager = TaskManager(
            include_path=lm_eval_tasks.TASKS_DIR, include_defaults=False, metadata=model_args
        )
        started = time.process_time()
        results = lm_eval.simple_evaluate(
            model=lm,
            tasks=[TASK],
            task_manager=manager,
            limit=args.num,
            bootstrap_iters=0,
            log_samples=True,
        )
        seconds = time.process_time() - started
        answers = [s["filtered_resps"][0] for s in results["samples"][TASK]]
        lengths.append(statistics.mean(len(a) for a in answers))
        shown = results["results"][TASK].get("ref_share,none")
        if (mode == "on") != (shown is not None):
            raise SystemExit(f"mode {mode}: ref_share is {shown!r}")
        return seconds

    times: dict[str, list[float]] = {mode: [] for mode in args.modes}
    lengths: list[float] = []
    run(args.modes[0])  # warm-up: imports, first dataset build
    for _ in range(args.rounds):
        for mode in args.modes:
            times[mode].append(run(mode))
    median = {mode: statistics.median(values) for mode, values in times.items()}
    for mode, values in times.items():
        rounds = ", ".join(f"{v:.2f}" for v in values)
        print(f"{mode:>3}: median {median[mode]:.2f} s CPU ({rounds}) for {args.num} instances")
    print(f"answers: {statistics.mean(lengths):.1f} characters on average")
    if "on" in median and "off" in median:
        ratio = median["on"] / median["off"]
        verdict = "met" if ratio <= TARGET else "MISSED"
        print(f"attention=true / attention=false: {ratio:.2f}x (target <= {TARGET}x: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
