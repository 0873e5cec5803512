"""harness.foundation.threads: the rule that picks torch's thread count, --threads, and the one
place
every model command applies it (harness.foundation.options.run_guarded)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest
import torch

from harness.foundation.threads import (
    MAX_THREADS,
    MODEL_COMMANDS,
    check_threads,
    choose_threads,
    configure_threads,
    local_processes,
)


@pytest.fixture
def keep_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(
    "cores,load,environ,expected",
    [
        (2, 0.0, {}, 2),  # a quiet 2-core machine: one thread per core
        (2, 0.3, {}, 2),
        (2, 1.0, {}, 1),  # another process on one core: the measured winner is one thread
        (2, 6.0, {}, 1),  # a busy machine never gets fewer than one
        (16, 2.0, {}, 14),
        (16, 0.0, {"LOCAL_WORLD_SIZE": "2"}, 8),  # two processes share the cores
        (16, 0.0, {"WORLD_SIZE": "4"}, 4),
        (16, 10.0, {"LOCAL_WORLD_SIZE": "2"}, 3),
        (2, 0.0, {"LOCAL_WORLD_SIZE": "4"}, 1),  # more processes than cores
        (2, 0.0, {"OMP_NUM_THREADS": "1"}, 1),  # the user's explicit choice is kept
        (2, 6.0, {"OMP_NUM_THREADS": "2"}, 2),
        (2, 6.0, {"OMP_NUM_THREADS": "abc"}, 1),  # not a number: the rule
        (2, 0.0, {"LOCAL_WORLD_SIZE": "x"}, 2),
    ],
)
def test_the_rule(cores, load, environ, expected):
    assert choose_threads(environ=environ, cores=cores, load=load) == expected


def test_threads_requested_win_and_are_capped_at_the_cores():
    assert choose_threads(1, environ={"OMP_NUM_THREADS": "2"}, cores=2, load=0.0) == 1
    assert choose_threads(2, environ={}, cores=2, load=9.0) == 2  # load does not matter
    assert choose_threads(8, environ={}, cores=2, load=0.0) == 2


@pytest.mark.parametrize("value", [0, -1, MAX_THREADS + 1, 10**9, 1.5, "2", None, True])
def test_bad_thread_counts_name_the_option_and_the_range(value):
    with pytest.raises(ValueError, match=f"--threads must be .*from 1 to {MAX_THREADS}"):
        check_threads(value)


def test_local_processes_reads_accelerate_s_variables():
    assert local_processes({}) == 1
    assert local_processes({"LOCAL_WORLD_SIZE": "3", "WORLD_SIZE": "6"}) == 3


def test_model_commands_set_torch_s_threads_and_data_commands_do_not(keep_threads, capsys):
    torch.set_num_threads(1)
    assert configure_threads("generate", argparse.Namespace(threads=2)) is None
    assert torch.get_num_threads() == 1
    cores = len(os.sched_getaffinity(0))
    assert configure_threads("eval", argparse.Namespace(threads=cores)) == cores
    assert torch.get_num_threads() == cores
    assert configure_threads("train", argparse.Namespace(threads=cores + 1)) == cores
    assert f"--threads {cores + 1} is more than the {cores} core(s)" in capsys.readouterr().err
    assert set(MODEL_COMMANDS) == {
        "train",
        "eval",
        "attention",
        "heads",
        "reproduce",
        "baselines",
        "supervision",
    }
    # --threads 0 is the rule itself (reproduce's help says so), not a refusal
    assert configure_threads("reproduce", argparse.Namespace(threads=0)) == choose_threads()


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_every_model_command_has_threads_and_refuses_a_bad_one_first(command, monkeypatch):
    """`--threads -1` is refused in one line before the command's own work starts."""
    from harness import cli

    parser = cli.build_parser(command)
    action = next(
        a
        for a in parser._subparsers._group_actions[0].choices[command]._actions
        if a.dest == "threads"
    )
    assert action.default is None and "docs/performance.md" in action.help
    args = argparse.Namespace(threads=-1, func=lambda args: pytest.fail("the work started"))
    from harness.foundation.options import run_guarded

    assert run_guarded(command, args.func, args) == 2


def test_a_fresh_command_process_runs_with_the_chosen_threads(tmp_path):
    """In a process that has not imported torch, the count goes through OMP_NUM_THREADS,
    which torch reads when it starts."""
    script = (
        "import argparse, os; from harness.foundation.threads import configure_threads; "
        "configure_threads('eval', argparse.Namespace(threads=1)); import torch; "
        "print(torch.get_num_threads(), os.environ['OMP_NUM_THREADS'])"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.split() == ["1", "1"]
