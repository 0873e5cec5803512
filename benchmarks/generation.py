"""Generation throughput per preset, masks included, on one core.

    python benchmarks/generation.py [--seconds 1.0] [--mask paper|sufficient|both]

Rates are per CPU-second of this process (pinned to one core), so other work on the
machine slows the wall clock but not the figure.

Target (issue 2): every `_ood` preset >= 20,000 instances/s on one core; mask storage grows
with the number of references (sparse index lists), never with length squared.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from attentionspan_datasets import PRESETS, iter_instances  # noqa: E402

TARGET_OOD = 20_000


def measure(preset: str, mask: str, seconds: float) -> dict:
    stream = iter_instances(preset, seed=0, mask=mask)
    count = tokens = refs = dense = 0
    # CPU time of this process: the machine is shared, and the target is per core.
    start = time.process_time()
    deadline = start + seconds
    while True:
        for _ in range(200):
            instance = next(stream)
            count += 1
            tokens += len(instance.target)
            refs += sum(len(row) for row in instance.reference)
            dense += len(instance.target) * len(instance.text)
        if time.process_time() >= deadline:
            break
    elapsed = time.process_time() - start
    return {
        "inst_s": count / elapsed,
        "tok_s": tokens / elapsed,
        "refs": refs / count,
        "dense_cells": dense / count,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per preset")
    parser.add_argument("--mask", choices=["paper", "sufficient", "both"], default="both")
    args = parser.parse_args()
    masks = ["paper", "sufficient"] if args.mask == "both" else [args.mask]
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as the target says
    print(
        f"# {platform.processor() or platform.machine()}, python {platform.python_version()},"
        f" one core, {args.seconds:.1f} CPU-s per preset, load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'preset':24} {'mask':10} {'inst/s':>10} {'target tok/s':>13} "
        f"{'refs/inst':>10} {'dense cells':>12}  target"
    )
    failures = 0
    for preset in PRESETS:
        for mask in masks:
            r = measure(preset, mask, args.seconds)
            target = ""
            if preset.endswith("_ood"):
                ok = r["inst_s"] >= TARGET_OOD
                failures += not ok
                target = f">= {TARGET_OOD:,} inst/s {'ok' if ok else 'MISSED'}"
            print(
                f"{preset:24} {mask:10} {r['inst_s']:10,.0f} {r['tok_s']:13,.0f} "
                f"{r['refs']:10.1f} {r['dense_cells']:12.0f}  {target}"
            )
    print(
        f"# stored mask = refs/inst integers; a dense mask would need 'dense cells'. "
        f"{failures} target(s) missed."
    )


if __name__ == "__main__":
    main()
