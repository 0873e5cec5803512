"""Streaming through `load_dataset("attentionspan", ..., streaming=True)` vs the raw generator.

    python benchmarks/datasets_streaming.py [--configs addition_ood reversal_ood] [--rows 2000]

Target: iterating the streamed train split row by row keeps at least 70% of the
raw generator's instances/s (`iter_instances` over the same split stream). The two are
measured in alternating rounds in one process; rates are instances per second of CPU time
of this process (`time.process_time`), so other work on a busy machine does not skew the
ratio; wall-clock rates are printed beside them. The figure is the median of the per-round
ratios ('rounds': their range).

The streamed train split pays for the split rule (attentionspan_datasets.splits): a train
row is the first draw of its sub-streams that hashes into train, about 1.11 draws and one
BLAKE2b hash a row; the raw stream is one draw a row.
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
from itertools import islice

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

TARGET = 0.70


def rate(iterable, rows: int) -> tuple[float, float]:
    """(instances per CPU second, instances per wall second)."""
    cpu, wall = time.process_time(), time.perf_counter()
    count = sum(1 for _ in islice(iterable, rows))
    return count / (time.process_time() - cpu), count / (time.perf_counter() - wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["addition_ood", "reversal_ood"])
    parser.add_argument("--rows", type=int, default=2_000, help="rows per round")
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()

    from datasets import load_dataset

    import attentionspan_datasets  # registers the bare name
    from attentionspan_datasets import iter_instances

    print(
        f"python {platform.python_version()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}, attentionspan {attentionspan_datasets.__version__}"
    )
    print(
        f"{'config':<16}{'raw inst/s':>12}{'stream inst/s':>15}{'ratio':>8}{'rounds':>12}  target"
        f"{'':>14}wall: raw, stream, ratio"
    )
    failed = False
    with tempfile.TemporaryDirectory() as cache:
        for config in args.configs:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                stream = load_dataset("attentionspan", config, streaming=True, cache_dir=cache)
            train = stream["train"]
            raw_rows, stream_rows = iter_instances(config, stream="train"), iter(train)
            rounds = []
            for _ in range(args.rounds):  # short alternating rounds over the same two streams
                raw = rate(raw_rows, args.rows)
                streamed = rate(stream_rows, args.rows)
                rounds.append((raw, streamed))
            raw_cpu = statistics.median(r[0][0] for r in rounds)
            stream_cpu = statistics.median(r[1][0] for r in rounds)
            ratios = [r[1][0] / r[0][0] for r in rounds]
            ratio = statistics.median(ratios)
            wall = [statistics.median(r[i][1] for r in rounds) for i in (0, 1)]
            wall_ratio = statistics.median(r[1][1] / r[0][1] for r in rounds)
            ok = ratio >= TARGET
            failed |= not ok
            print(
                f"{config:<16}{raw_cpu:>12,.0f}{stream_cpu:>15,.0f}{ratio:>8.2f}"
                f"{f'{min(ratios):.2f}-{max(ratios):.2f}':>12}  >= {TARGET:.2f} "
                f"{'ok    ' if ok else 'MISSED'}    "
                f"{wall[0]:,.0f}, {wall[1]:,.0f}, {wall_ratio:.2f}"
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
