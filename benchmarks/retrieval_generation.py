"""Generation throughput of every discrete-retrieval preset (T1-T7), masks included, on one core.

    python benchmarks/retrieval_generation.py [--seconds 0.5] [--rounds 5]
                                              [--mask paper|sufficient|minimal|all]
                                              [--presets t7_len30,t1_ood] [--profile t7_len30]

Covers `t<k>_len5` ... `t<k>_len30`, `t<k>_id` and `t<k>_ood` for k = 1-7 (56 presets) and
each mask variant. Rates are instances per CPU-second of this process, pinned to one core,
through `iter_instances` (what the CLI, the builder and lm-eval draw from). Each figure is
the median of `--rounds` rounds; a round measures every preset and mask once, in turn, so
a burst of load on the shared machine lowers one round of every preset rather than every
round of one. The minimum over rounds is printed beside the median, and the load average
before and after.

Target: every preset at least 20,000 instances/s on one core,
printed beside each figure against the median. `--profile PRESET` prints a cProfile of
that preset instead (paper mask unless --mask says otherwise).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from attentionspan_datasets import PRESETS, iter_instances  # noqa: E402
from attentionspan_datasets.presets import RETRIEVAL_TASKS  # noqa: E402

TARGET = 20_000  # instances/s, every retrieval preset and mask
MASKS = ("paper", "sufficient", "minimal")


def retrieval_presets() -> list[str]:
    return [name for name, preset in PRESETS.items() if preset.short in RETRIEVAL_TASKS]


def rate(preset: str, mask: str, seconds: float) -> float:
    """Instances per CPU-second of `iter_instances(preset, seed=0, mask=mask)`."""
    stream = iter_instances(preset, seed=0, mask=mask)
    count = 0
    start = time.process_time()
    deadline = start + seconds
    while True:
        for _ in range(250):
            next(stream)
        count += 250
        now = time.process_time()
        if now >= deadline:
            return count / (now - start)


def profile(preset: str, mask: str, count: int) -> None:
    stream = iter_instances(preset, seed=0, mask=mask)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(count):
        next(stream)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="CPU-s per preset, mask, round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the median counts")
    parser.add_argument("--mask", choices=[*MASKS, "all"], default="all")
    parser.add_argument("--presets", default="", help="comma-separated (default: all 56)")
    parser.add_argument("--profile", default="", help="cProfile this preset instead")
    args = parser.parse_args()
    masks = list(MASKS) if args.mask == "all" else [args.mask]
    if args.profile:
        profile(args.profile, masks[0], 20_000)
        return
    presets = [p for p in args.presets.split(",") if p] or retrieval_presets()
    unknown = [p for p in presets if p not in PRESETS]
    if unknown:
        parser.error(f"--presets: unknown {', '.join(unknown)}; allowed: {', '.join(PRESETS)}")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as the target says
    print(
        f"# {platform.processor() or platform.machine()}, python {platform.python_version()},"
        f" one core, {args.rounds} rounds x {args.seconds:.2f} CPU-s per preset and mask,"
        f" load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores",
        flush=True,
    )
    cases = [(p, m) for p in presets for m in masks]
    rates: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
    for _ in range(args.rounds):
        for preset, mask in cases:
            rates[(preset, mask)].append(rate(preset, mask, args.seconds))
    print(f"{'preset':10} {'mask':10} {'median/s':>10} {'min/s':>10}  target")
    missed = 0
    for preset, mask in cases:
        median, low = statistics.median(rates[(preset, mask)]), min(rates[(preset, mask)])
        ok = median >= TARGET
        missed += not ok
        print(
            f"{preset:10} {mask:10} {median:10,.0f} {low:10,.0f}  "
            f">= {TARGET:,}/s {'ok' if ok else 'MISSED'}"
        )
    slowest = min(cases, key=lambda c: statistics.median(rates[c]))
    print(
        f"# {len(cases) - missed}/{len(cases)} figures meet the target; slowest median:"
        f" {slowest[0]} {slowest[1]} {statistics.median(rates[slowest]):,.0f}/s;"
        f" load average now {os.getloadavg()[0]:.2f}"
    )
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
