"""Rows per second of the splits (attentionspan_datasets.splits) against the raw generator.

    python benchmarks/splits.py [--configs addition_ood reversal_id] [--rows 20000]

A train row is the first draw of its sub-streams whose prompt hashes into train (90% of
prompts): about 1.11 draws and one BLAKE2b hash per row. A test row accepts 5% of prompts:
about 20 draws per row. Rates are rows per second of this process's CPU time, measured in
alternating rounds (raw, train, test) so that load on a shared machine hits all three alike;
the figures are medians over rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

CONFIGS = [
    "reversal_id",
    "reversal_ood",
    "addition_id",
    "addition_ood",
    "multiplication_ood",
    "ffml_ood",
    "value_assignment_ood",
    "successor_ood",
]


def rate(rows) -> float:
    start = time.process_time()
    count = sum(1 for _ in rows)
    return count / (time.process_time() - start)


def main() -> int:
    from attentionspan_datasets import iter_instances
    from attentionspan_datasets.splits import iter_split

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=CONFIGS)
    parser.add_argument("--rows", type=int, default=4_000, help="train rows per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| config | raw inst/s | train rows/s | ratio | test rows/s |")
    print("|---|---|---|---|---|")
    n = args.rows
    for config in args.configs:
        raws, trains, tests, ratios = [], [], [], []
        for r in range(args.rounds):
            raws.append(rate(iter_instances(config, stream="train", start=r * n, stop=(r + 1) * n)))
            trains.append(rate(iter_split(config, split="train", start=r * n, stop=(r + 1) * n)))
            tests.append(
                rate(iter_split(config, split="test", start=r * n // 20, stop=(r + 1) * n // 20))
            )
            ratios.append(trains[-1] / raws[-1])
        raw, train, test = (statistics.median(x) for x in (raws, trains, tests))
        ratio = statistics.median(ratios)
        print(f"| {config} | {raw:,.0f} | {train:,.0f} | {ratio:.2f} | {test:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
