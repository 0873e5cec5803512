"""harness.pipeline.workers: calls in spawned processes, none queued ahead of a free worker.
The calls are builtins (a spawned worker imports them without this test module)."""

from __future__ import annotations

import os
import time

import pytest

from harness.pipeline.workers import in_workers


def test_every_call_returns_its_result_under_its_index():
    calls = [(pow, (2, k)) for k in range(5)]
    assert sorted(in_workers(calls, jobs=2)) == [(k, 2**k) for k in range(5)]


def test_a_failed_call_starts_no_call_still_waiting(tmp_path):
    """The first call fails at once while the second runs: the third, fourth and fifth
    never start (a plain ProcessPoolExecutor would have queued, and run, some of them)."""
    later = [tmp_path / f"started-{k}" for k in range(3)]
    calls = [(int, ("not a number",)), (time.sleep, (1.0,))]
    calls += [(os.mkdir, (str(path),)) for path in later]
    with pytest.raises(ValueError, match="not a number"):
        list(in_workers(calls, jobs=2))
    assert not any(path.exists() for path in later)


def test_an_interrupt_of_the_main_process_reaches_the_running_workers():
    """`kill -INT` of the main process alone (not the terminal's process group): the workers
    are sent SIGINT too, so their calls stop now instead of the pool waiting them out."""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    started = time.perf_counter()
    try:
        signal.alarm(8)  # the spawned workers are running their 60 s sleeps by then
        with pytest.raises(KeyboardInterrupt):
            list(in_workers([(time.sleep, (60.0,)), (time.sleep, (60.0,))], jobs=2))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert time.perf_counter() - started < 40
