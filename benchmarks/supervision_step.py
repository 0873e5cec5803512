"""The cost of attention supervision: a training step with it against one without.

    OMP_NUM_THREADS=1 python benchmarks/supervision_step.py [--steps 40] [--rounds 3]
    OMP_NUM_THREADS=1 python benchmarks/supervision_step.py --heads top:... --loss mass

Target: a supervised step costs at most 1.3x an unsupervised one. Both runs are
`harness.training.train.train` on the default scratch Llama (4 layers, hidden 128, 4 heads; one
token
per character) on reversal_id, batch 32, from the same weights over the same batches; the
supervised one adds `--attention-supervision layer:1` (every head of layer 1, the loss read
inside the capture attention function on the training forward: no second pass). Step time
is this process's CPU time per step from the run's own log (the machine is shared; one
thread each); rounds alternate, medians are reported.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

TARGET = 1.3


def step_seconds(config, steps: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) per optimizer step of `steps` steps of `config`."""
    from harness.training.train import train

    with tempfile.TemporaryDirectory() as tmp:
        run = dataclasses.replace(config, output=tmp, max_steps=steps, log_every=steps, eval_size=1)
        train(run, progress=False)
        record = [
            json.loads(line)
            for line in Path(tmp, "log.jsonl").read_text().splitlines()
            if '"loss"' in line
        ][-1]
    return record["cpu_s"] / steps, record["elapsed_s"] / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--config", default="reversal_id")
    parser.add_argument("--heads", default="layer:1", help="--attention-supervision")
    parser.add_argument("--loss", default="ce", choices=("ce", "mass"))
    args = parser.parse_args()

    import torch
    from transformers.utils import logging

    from harness.training.train import TrainConfig

    logging.disable_progress_bar()
    torch.set_num_threads(1)
    plain = TrainConfig(
        model="scratch",
        config=args.config,
        lr=1e-3,
        batch_size=args.batch_size,
        mixed_precision="no",
    )
    supervised = dataclasses.replace(
        plain, attention_supervision=args.heads, supervision_loss=args.loss
    )
    print(
        f"scratch Llama (4 layers, hidden 128, 4 heads), {args.config}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread, load average {os.getloadavg()[0]:.2f}; {args.steps} "
        f"steps of batch {args.batch_size} per round; supervised: {args.heads}, {args.loss}"
    )
    ratios, wall_ratios, times = [], [], {"plain": [], "supervised": []}
    for round_ in range(args.rounds):
        plain_cpu, plain_wall = step_seconds(plain, args.steps)
        ours_cpu, ours_wall = step_seconds(supervised, args.steps)
        times["plain"].append(plain_cpu)
        times["supervised"].append(ours_cpu)
        ratios.append(ours_cpu / plain_cpu)
        wall_ratios.append(ours_wall / plain_wall)
        print(
            f"round {round_ + 1}: plain {plain_cpu * 1e3:.1f} ms/step (CPU), supervised "
            f"{ours_cpu * 1e3:.1f} ms/step, ratio {ratios[-1]:.3f}, wall ratio "
            f"{wall_ratios[-1]:.3f}"
        )
    ratio = statistics.median(ratios)
    print(
        f"median: plain {statistics.median(times['plain']) * 1e3:.1f} ms/step, supervised "
        f"{statistics.median(times['supervised']) * 1e3:.1f} ms/step, ratio {ratio:.3f} "
        f"(target <= {TARGET:.1f}: {'ok' if ratio <= TARGET else 'missed'}), wall ratio "
        f"{statistics.median(wall_ratios):.3f}; load average {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
