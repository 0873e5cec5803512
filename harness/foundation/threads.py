"""How many torch CPU threads a model command uses, chosen here so the user need not know.

    threads = choose_threads()                 # the rule below
    threads = choose_threads(requested=4)      # --threads 4 (capped at the cores)
    configure_threads("train", args)           # once, at the start of a model command

The rule (measured in docs/performance.md, "Threads"): torch's default, one thread per core,
made the README's scratch `train` 10x slower on a 2-core machine that other work shared
(0.25 against 2.6 steps/s): threads that wait on each other at every operation lose badly
to one when a core is taken. So a command uses

    cores      = the CPUs this process may run on (sched_getaffinity, not the machine's)
    processes  = the processes accelerate starts on this machine (LOCAL_WORLD_SIZE)
    free       = cores - the 1-minute load average (what other work leaves us)
    threads    = round(free / processes), at least 1, at most cores // processes

An explicit OMP_NUM_THREADS is the user's choice and is kept (torch reads it too), and
`--threads N` overrides both. The load average is host-wide in a container, so a busy host
only ever lowers the count: the safe direction, since one thread too few costs at most the
parallel share and one too many cost 10x here.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping

# The commands that run torch models; the data commands never import torch.
MODEL_COMMANDS = ("train", "eval", "attention", "heads", "reproduce", "baselines", "supervision")
MAX_THREADS = 1024  # beyond any machine's cores: a larger --threads is a typo


def available_cores() -> int:
    """The CPUs this process may run on (a container's or taskset's share, not the host's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def launched_processes() -> int:
    """Processes of this run (torchrun's and accelerate launch's WORLD_SIZE; 1 alone);
    ValueError naming the variable when it holds no count (`WORLD_SIZE=abc` read as
    "invalid literal for int()", from whichever library read it first)."""
    text = os.environ.get("WORLD_SIZE", "").strip()
    if not text:
        return 1
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise ValueError(
            f"the environment variable WORLD_SIZE is {text[:40]!r}: it must be a whole number "
            ">= 1 (the processes a launcher started); unset it to run one process"
        )
    return int(text)


def local_processes(environ: Mapping[str, str] = os.environ) -> int:
    """Processes of this run on this machine: accelerate and torchrun set LOCAL_WORLD_SIZE."""
    for name in ("LOCAL_WORLD_SIZE", "WORLD_SIZE"):
        value = environ.get(name, "")
        if value.isdigit() and int(value) >= 1:
            return int(value)
    return 1


def load_average() -> float:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average: assume a quiet machine
        return 0.0


def check_threads(value, name: str = "--threads") -> int:
    """`value` as a thread count, or ValueError naming `name` and the allowed range."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer from 1 to {MAX_THREADS}, got {value!r}")
    if not 1 <= value <= MAX_THREADS:
        raise ValueError(f"{name} must be from 1 to {MAX_THREADS}, got {value}")
    return value


def choose_threads(
    requested: int | None = None,
    environ: Mapping[str, str] = os.environ,
    cores: int | None = None,
    load: float | None = None,
) -> int:
    """The thread count by the rule in the module docstring; `requested` (--threads) wins,
    capped at the cores this process may use."""
    cores = available_cores() if cores is None else cores
    if requested is not None:
        return min(check_threads(requested), cores)
    explicit = environ.get("OMP_NUM_THREADS", "").strip()
    if explicit.isdigit() and int(explicit) >= 1:
        return min(int(explicit), MAX_THREADS)
    processes = local_processes(environ)
    load = load_average() if load is None else load
    share = max(1, cores // processes)
    free = max(0.0, cores - load)
    return max(1, min(share, math.floor(free / processes + 0.5)))


def configure_threads(command: str, args) -> int | None:
    """Set torch's thread count for a model command (args.threads: --threads, or None);
    return it (None for a data command, which never imports torch)."""
    if command not in MODEL_COMMANDS:
        return None
    requested = getattr(args, "threads", None)
    if requested == 0:  # `--threads 0`: the rule, as reproduce's help and settings say
        requested = None
    threads = choose_threads(requested)
    if requested is not None and threads < requested:
        print(
            f"attentionspan {command}: --threads {requested} is more than the {threads} "
            f"core(s) this process may use; using {threads}",
            file=sys.stderr,
        )
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    else:
        # torch sizes its thread pool from this when it starts; setting it here spares a
        # refusal that comes before any model work the 0.5 s of importing torch.
        os.environ["OMP_NUM_THREADS"] = str(threads)
    return threads
