"""What the start-up hook's .pth line costs each interpreter start (target: under 2 ms).

    python benchmarks/startup_hook.py [--starts 50]

Runs fresh interpreters with the installed line switched off by its environment variable,
then executes the same line by hand (as `site` does) and times it with `perf_counter`.
Python's own start (site, the editable finder) is outside the figure: only the line's cost
is ours. Prints the median, minimum and maximum over the starts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

TARGET_MS = 2.0
CODE = """
import time
line = {line!r}
t = time.perf_counter(); exec(line, {{}}); dt = time.perf_counter() - t
print(dt * 1e3)
"""


def main() -> int:
    from attentionspan_datasets.startup import ENV_DISABLE, PTH_LINE

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=50)
    args = parser.parse_args()
    code = CODE.format(line=PTH_LINE.replace(f"os.environ.get({ENV_DISABLE!r}) or ", ""))
    env = {**os.environ, ENV_DISABLE: "1"}  # the copy site runs is off; the timed one runs
    runs = []
    for _ in range(args.starts):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        runs.append(float(out.stdout))
    median = statistics.median(runs)
    print(f"load average {os.getloadavg()[0]:.2f}; {args.starts} interpreter starts")
    print(
        f".pth line: median {median:.3f} ms, min {min(runs):.3f} ms, max {max(runs):.3f} ms "
        f"(target under {TARGET_MS} ms: {'ok' if median < TARGET_MS else 'missed'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
