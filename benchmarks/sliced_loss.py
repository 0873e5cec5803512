"""`--pretrained` fine-tuning steps with logits only where the loss reads them, against the
full projection (`harness.training.loss`).

    OMP_NUM_THREADS=1 python benchmarks/sliced_loss.py                 # SmolLM2 and Gemma 3
    OMP_NUM_THREADS=1 python benchmarks/sliced_loss.py --models gemma3-270m --tasks addition

Target: a sliced step at most 0.9x a full one on Gemma-3-270M (262k-word output layer), no
slower on SmolLM2-135M-Instruct (49k words), the logged losses equal to 1e-4. Each run is
`harness.training.train.train` with the task's `reproduce --pretrained` recipe (its prompt, batch 4,
bf16 autocast, one thread) for --steps steps from the fetched model; the full projection is
forced by raising `SLICED_FROM_VOCABULARY`. Throughput is CPU seconds a step, from the run's
log (`cpu_s`, this process's CPU time: the machine is shared), the first --skip steps
(warm-up) left out; rounds alternate, medians are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

TARGETS = {"gemma3-270m": 0.9, "smollm2-135m-instruct": 1.0}


def run(model: str, task: str, steps: int, skip: int, full: bool, folder: Path):
    """(CPU seconds a step after the warm-up, the logged losses) of one short fine-tune."""
    import harness.training.loss as train_loss
    from harness.pipeline.prepare import task_train_config
    from harness.pipeline.settings import ReproduceConfig
    from harness.training.train import train

    cfg = ReproduceConfig(pretrained=model, tasks=[task], output=str(folder))
    config = task_train_config(cfg, cfg.task_values[0], folder)
    config.max_steps, config.train_size, config.log_every = steps, 4 * steps, 1
    config.save_every, config.eval_size = steps, 4
    saved = train_loss.SLICED_FROM_VOCABULARY
    train_loss.SLICED_FROM_VOCABULARY = 10**12 if full else saved
    try:
        train(config, progress=False)
    finally:
        train_loss.SLICED_FROM_VOCABULARY = saved
    lines = [json.loads(x) for x in (folder / "log.jsonl").read_text().splitlines()]
    lines = [x for x in lines if "loss" in x and "cpu_s" in x]
    per_step = (lines[-1]["cpu_s"] - lines[skip - 1]["cpu_s"]) / (steps - skip)
    return per_step, [x["loss"] for x in lines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["smollm2-135m-instruct", "gemma3-270m"])
    parser.add_argument("--tasks", nargs="+", default=["addition"])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--skip", type=int, default=2, help="warm-up steps left out")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"{'model':<24} {'task':<10} {'full s/step':>11} {'sliced':>8} {'ratio':>7}  target")
    for model in args.models:
        for task in args.tasks:
            times = {False: [], True: []}
            losses = {}
            for _ in range(args.rounds):
                for full in (True, False):
                    with tempfile.TemporaryDirectory() as tmp:
                        seconds, logged = run(model, task, args.steps, args.skip, full, Path(tmp))
                    times[full].append(seconds)
                    losses[full] = logged
            full_s, sliced_s = statistics.median(times[True]), statistics.median(times[False])
            ratio = sliced_s / full_s
            same = all(
                abs(a - b) <= 1e-4 * max(abs(a), 1e-8) for a, b in zip(losses[True], losses[False])
            )
            target = TARGETS.get(model, 1.0)
            verdict = "met" if ratio <= target and same else "MISSED"
            print(
                f"{model:<24} {task:<10} {full_s:>11.2f} {sliced_s:>8.2f} {ratio:>6.2f}x  "
                f"<= {target}x, losses equal: {verdict}{'' if same else ' (losses differ)'}"
            )


if __name__ == "__main__":
    main()
