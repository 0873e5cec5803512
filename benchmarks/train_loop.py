"""Our training loop against a bare PyTorch loop on the same model and batches.

    OMP_NUM_THREADS=1 python benchmarks/train_loop.py [--steps 60] [--rounds 3] [--batch-size 32]
    OMP_NUM_THREADS=1 python benchmarks/train_loop.py --mixed-precision bf16   # bf16 vs fp32

Target: `harness.training.train.train` keeps at least 90% of the bare loop's tokens/s, so
instance generation, encoding, collation, accelerate and logging cost little. Both train the
default scratch Llama (4 layers, hidden 128; one token per character) on reversal_id from
the same initial weights, with the same AdamW, clipping and batches; the bare loop gets its
batches collated in advance (outside the timing) and does forward, backward, clip, step and
nothing else. Throughput is tokens per second of this process's CPU time (the machine is
shared; one thread each), wall-clock figures beside; rounds alternate, medians are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

TARGET = 0.90


def bare_loop(config, steps: int) -> tuple[float, float, int]:
    """(cpu seconds, wall seconds, tokens) of `steps` plain optimizer steps."""
    import torch

    from harness.engine.inference import autocast
    from harness.foundation.data import GeneratorSource, collate, training_indices
    from harness.foundation.models import load_model
    from harness.foundation.tokenization import CharTokenizer
    from harness.training.setup import TRAIN_SPLIT, make_optimizer, make_scheduler

    model, tokenizer = load_model(config.model, scratch=config.scratch)
    char_tok = CharTokenizer(tokenizer)
    source = GeneratorSource(
        config.config, seed=config.seed, split=TRAIN_SPLIT, size=config.train_size
    )
    order = training_indices(0, config.batch_size, 1, 0)
    batches = []
    for _ in range(steps):
        encodings = [config.prompt.encode(char_tok, source[i]) for i in next(order)]
        batch = collate(encodings, char_tok.pad_id, padding_side="right")
        batches.append(
            {k: batch[k] for k in ("input_ids", "attention_mask", "position_ids", "labels")}
        )
    optimizer = make_optimizer(model, config)
    scheduler = make_scheduler(optimizer, config, steps)
    model.train()
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)
    wall, cpu = time.perf_counter(), time.process_time()
    for batch in batches:
        with autocast(config.mixed_precision, torch.device("cpu")):
            loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    return time.process_time() - cpu, time.perf_counter() - wall, tokens


def our_loop(config, steps: int) -> tuple[float, float, int]:
    """The same from `train`'s own log (one log window over all steps)."""
    import dataclasses

    from harness.training.train import train

    with tempfile.TemporaryDirectory() as tmp:
        run = dataclasses.replace(config, output=tmp, max_steps=steps, log_every=steps, eval_size=1)
        train(run, progress=False)
        record = [
            json.loads(line)
            for line in Path(tmp, "log.jsonl").read_text().splitlines()
            if '"loss"' in line
        ][-1]
    return record["cpu_s"], record["elapsed_s"], record["tokens"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--config", default="reversal_id")
    parser.add_argument("--model", default="scratch", help="any model `attentionspan train` takes")
    parser.add_argument("--mixed-precision", choices=("no", "bf16"), default="no")
    args = parser.parse_args()

    import torch
    from transformers.utils import logging

    from harness.training.train import TrainConfig

    logging.disable_progress_bar()
    torch.set_num_threads(1)
    config = TrainConfig(
        model=args.model,
        config=args.config,
        lr=1e-3,
        batch_size=args.batch_size,
        mixed_precision=args.mixed_precision,
    )
    print(
        f"{args.model}, mixed precision {args.mixed_precision}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread, load average {os.getloadavg()[0]:.2f}; "
        f"{args.steps} steps of batch {args.batch_size} per round"
    )
    ratios, wall_ratios, rates = [], [], {"bare": [], "ours": []}
    for round_ in range(args.rounds):
        bare_cpu, bare_wall, bare_tokens = bare_loop(config, args.steps)
        our_cpu, our_wall, our_tokens = our_loop(config, args.steps)
        assert bare_tokens == our_tokens, (bare_tokens, our_tokens)  # the same batches
        rates["bare"].append(bare_tokens / bare_cpu)
        rates["ours"].append(our_tokens / our_cpu)
        ratios.append((our_tokens / our_cpu) / (bare_tokens / bare_cpu))
        wall_ratios.append((our_tokens / our_wall) / (bare_tokens / bare_wall))
        print(
            f"round {round_ + 1}: bare {bare_tokens / bare_cpu:,.0f} tok/s (CPU), "
            f"ours {our_tokens / our_cpu:,.0f} tok/s (CPU), ratio {ratios[-1]:.3f}, "
            f"wall ratio {wall_ratios[-1]:.3f}"
        )
    ratio = statistics.median(ratios)
    print(
        f"median ({args.mixed_precision}): bare {statistics.median(rates['bare']):,.0f} tok/s, "
        f"ours "
        f"{statistics.median(rates['ours']):,.0f} tok/s, ratio {ratio:.3f} "
        f"(target >= {TARGET:.2f}: {'ok' if ratio >= TARGET else 'missed'}), "
        f"wall ratio {statistics.median(wall_ratios):.3f}; load average "
        f"{os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
