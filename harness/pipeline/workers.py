"""Calls run in spawned worker processes, never more submitted than there are workers.

    for i, result in in_workers([(train, (config_a,)), (train, (config_b,))], jobs=2):
        ...

`concurrent.futures.ProcessPoolExecutor` hands a call to its workers' queue before a worker is
free, and a call in that queue can no longer be cancelled: after Ctrl-C (which reaches the
workers too: they checkpoint and stop) the workers went on to start the queued models, and
the command waited for them. Here a call is submitted only when a worker is free, so an
interruption or a failed call ends the run once the calls already running have returned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any


def in_workers(calls: Sequence[tuple[Callable, tuple]], jobs: int) -> Iterator[tuple[int, Any]]:
    """(i, what calls[i] returned), in the order the calls finish, from up to `jobs` spawned
    processes (no forked torch state). A call that raises ends the iteration with its error
    after the running ones return; the calls not yet started never start."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    context = multiprocessing.get_context("spawn")
    waiting = list(enumerate(calls))
    with ProcessPoolExecutor(jobs, mp_context=context) as pool:
        running: dict[Any, int] = {}
        try:
            while waiting or running:
                while waiting and len(running) < jobs:
                    i, (function, args) = waiting.pop(0)
                    running[pool.submit(function, *args)] = i
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    i = running.pop(future)
                    yield i, future.result()  # a call's error: nothing more is submitted
        except KeyboardInterrupt:
            # Ctrl-C reaches the workers with the terminal's process group; `kill -INT` of
            # this process alone does not, and the pool would wait for their whole calls:
            # pass it on, so that they too checkpoint and stop before the pool is shut.
            interrupt(pool, running)
            raise


def interrupt(pool, running) -> None:
    """SIGINT to the workers still running a call (each stops as Ctrl-C stops it)."""
    import contextlib
    import os
    import signal

    if not running:
        return
    for process in list(getattr(pool, "_processes", {}).values()):
        if process.is_alive():
            with contextlib.suppress(OSError):
                os.kill(process.pid, signal.SIGINT)
