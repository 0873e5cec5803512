"""Batched greedy generation (left padding) against one instance at a time.

    OMP_NUM_THREADS=1 python benchmarks/generation_batched.py [--model runs/rev/final] \
        [--config reversal_id] [-n 128] [--batch-size 32] [--rounds 3]

Target: on the tiny model, batched generation evaluates at least 4x more
instances per second than one-at-a-time generation. Both call
`harness.engine.inference.generate_batch` (what `attentionspan eval` runs) on the same instances
with the same cap (the longest target in the call + 1); a batch of one is the
one-at-a-time case. Without --model, the default scratch Llama (4 layers, hidden 128) with
random weights is used. Rates are instances per second of this process's CPU time (one
thread; the machine is shared), wall clock beside; rounds alternate, medians reported.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

TARGET = 4.0


def timed(model, char_tok, encodings, batch_size: int) -> tuple[float, float]:
    from harness.engine.inference import generate_batch

    wall, cpu = time.perf_counter(), time.process_time()
    for first in range(0, len(encodings), batch_size):
        chunk = encodings[first : first + batch_size]
        generate_batch(model, char_tok, chunk, max(e.target_len for e in chunk) + 1)
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="scratch")
    parser.add_argument("--config", default="reversal_id")
    parser.add_argument("-n", "--num", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import torch
    from transformers.utils import logging

    from harness.evaluation.evaluate import saved_run_config
    from harness.foundation.data import GeneratorSource, PromptConfig
    from harness.foundation.models import load_model
    from harness.foundation.tokenization import CharTokenizer

    logging.disable_progress_bar()
    torch.set_num_threads(1)
    model, tokenizer = load_model(args.model)
    model.eval()
    saved = saved_run_config(args.model) if os.path.isdir(args.model) else None
    prompt = PromptConfig(**saved["prompt"]) if saved else PromptConfig()
    char_tok = CharTokenizer(tokenizer)
    source = GeneratorSource(args.config, split="test")
    encodings = [prompt.encode(char_tok, source[i]) for i in range(args.num)]
    timed(model, char_tok, encodings[:4], 2)  # warm-up
    print(
        f"model {args.model} ({sum(p.numel() for p in model.parameters()):,} parameters), "
        f"{args.num} {args.config} instances, batch {args.batch_size}, torch "
        f"{torch.__version__}, 1 thread, load average {os.getloadavg()[0]:.2f}"
    )
    ratios, wall_ratios, single_rates, batched_rates = [], [], [], []
    for round_ in range(args.rounds):
        one_cpu, one_wall = timed(model, char_tok, encodings, 1)
        many_cpu, many_wall = timed(model, char_tok, encodings, args.batch_size)
        single_rates.append(args.num / one_cpu)
        batched_rates.append(args.num / many_cpu)
        ratios.append(one_cpu / many_cpu)
        wall_ratios.append(one_wall / many_wall)
        print(
            f"round {round_ + 1}: one at a time {args.num / one_cpu:,.1f} inst/s (CPU), "
            f"batched {args.num / many_cpu:,.1f} inst/s (CPU), speed-up {ratios[-1]:.2f}x, "
            f"wall {wall_ratios[-1]:.2f}x"
        )
    ratio = statistics.median(ratios)
    print(
        f"median: one at a time {statistics.median(single_rates):,.1f} inst/s, batched "
        f"{statistics.median(batched_rates):,.1f} inst/s, speed-up {ratio:.2f}x (target >= "
        f"{TARGET:.0f}x: {'ok' if ratio >= TARGET else 'missed'}), wall "
        f"{statistics.median(wall_ratios):.2f}x; load average {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
