"""The committed quick digest reproduces: the smallest quick task is run again from nothing
and compared with docs/quick-run.json, figure by figure (`results_doc.check`).

A digest reproduces under the package versions, the kind of CPU (torch's kernel set) and
the verdict rule it records. Under other versions (a fresh install may get newer ones), on
another kind of CPU (AVX512 kernels sum floats in another order than the AVX2 ones the
digest was made with, so training gives other weights) or under another rule, a difference
is reported, with what differs, as a skip rather than a failure: the figures are then a new
measurement, not a broken one, and the docs say where theirs come from. With the same
versions, kind and rule every figure must match.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.report import results_doc

REPO = Path(__file__).resolve().parents[3]
DIGEST = REPO / "docs" / "quick-run.json"
TASK = "reversal"  # the quickest of --quick's tasks to train and analyse (about 2 CPU-min)


@pytest.mark.slow
def test_the_smallest_quick_task_reproduces_its_committed_digest(tmp_path):
    from harness.commands.reproduce import main

    saved = json.loads(DIGEST.read_text())
    if TASK not in saved["tasks"] or not saved["meta"].get("versions"):
        pytest.skip(f"{DIGEST.name} predates recorded versions or lacks {TASK}")
    out = tmp_path / "quick"
    argv = ["--quick", "--tasks", TASK, "--output", str(out), "--no-progress", "--threads", "1"]
    assert main(argv) == 0
    problems = results_doc.check(out, DIGEST)
    elsewhere = (
        "versions that differ",
        results_doc.OTHER_CPU,
        results_doc.OTHER_KERNELS,
        results_doc.OTHER_DEVICE,
        results_doc.OTHER_RULE,
    )
    if problems and any(line.startswith(elsewhere) for line in problems):
        pytest.skip("a new measurement, not a reproduction: " + "; ".join(problems[-4:]))
    assert not problems, "\n".join(problems)
