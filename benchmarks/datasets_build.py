"""Non-streaming builds: num_proc=2 vs num_proc=1, and parquet bytes per instance per preset.

    python benchmarks/datasets_build.py [--config addition_ood] [--rows 100000] [--repeats 2]
    python benchmarks/datasets_build.py --parquet-only [--parquet-rows 5000]

Targets: building 100,000 addition_ood train rows with num_proc=2 is at least 1.6x
faster than with num_proc=1 (wall clock, each build into a fresh cache folder; validation
and test keep their default 1,000 rows). Parquet bytes per instance, masks included, are
recorded for every preset (no target: the figure for docs/performance.md).

The machine's load average is printed before and after: a build with two processes can only
be faster on two cores when the second core is free.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

TARGET_SPEEDUP = 1.6


def build_seconds(config: str, rows: int, num_proc: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and its workers) of one build."""
    from attentionspan_datasets.builder import AttentionSpan

    with tempfile.TemporaryDirectory() as cache:
        builder = AttentionSpan(config_name=config, cache_dir=cache, num_train=rows)
        before, start = os.times(), time.perf_counter()
        builder.download_and_prepare(num_proc=num_proc)
        wall, after = time.perf_counter() - start, os.times()
    cpu = sum(after[i] - before[i] for i in range(4))  # user, system, children's both
    return wall, cpu


def parquet_bytes_per_instance(rows: int) -> None:
    from attentionspan_datasets.builder import AttentionSpan
    from attentionspan_datasets.hub_export import build_config

    print(f"\nparquet bytes per instance ({rows:,} train rows, masks included, default codec)")
    print(f"{'preset':<22}{'bytes/instance':>15}{'reference ints/instance':>25}")
    presets = [name for name in AttentionSpan.builder_configs if name.endswith(("_id", "_ood"))]
    with tempfile.TemporaryDirectory() as folder:
        for preset in presets:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                train = build_config(preset, folder, num_train=rows, num_validation=0, num_test=0)[
                    "train"
                ]
            path = Path(folder, f"{preset}.parquet")
            train.to_parquet(str(path))
            refs = sum(len(row) for refs in train["reference"] for row in refs) / len(train)
            print(f"{preset:<22}{path.stat().st_size / len(train):>15,.1f}{refs:>25,.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="addition_ood")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=2, help="builds per num_proc")
    parser.add_argument("--parquet-rows", type=int, default=5_000)
    parser.add_argument("--parquet-only", action="store_true")
    args = parser.parse_args()

    import attentionspan_datasets

    print(
        f"python {platform.python_version()}, {os.cpu_count()} cores, "
        f"attentionspan {attentionspan_datasets.__version__}"
    )
    if not args.parquet_only:
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        times, cpus = {1: [], 2: []}, {1: [], 2: []}
        for _ in range(args.repeats):  # alternate, so a change of load hits both alike
            for num_proc in (1, 2):
                wall, cpu = build_seconds(args.config, args.rows, num_proc)
                times[num_proc].append(wall)
                cpus[num_proc].append(cpu)
        one, two = statistics.median(times[1]), statistics.median(times[2])
        speedup = one / two
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        print(f"{args.config}, {args.rows:,} train rows (+1,000 validation, +1,000 test):")
        for num_proc, median in ((1, one), (2, two)):
            runs = ", ".join(f"{t:.1f}" for t in times[num_proc])
            cpu = statistics.median(cpus[num_proc])
            print(f"  num_proc={num_proc}: {median:.1f} s wall (runs: {runs}), {cpu:.1f} CPU s")
        verdict = "ok" if speedup >= TARGET_SPEEDUP else "MISSED"
        print(f"  speedup {speedup:.2f}x   target >= {TARGET_SPEEDUP}x {verdict}")
    parquet_bytes_per_instance(args.parquet_rows)


if __name__ == "__main__":
    main()
