"""`attentionspan launch`: `accelerate launch` of a harness command, its errors in one line.

    attentionspan launch --multi_gpu --num_processes 2 train --model scratch --output runs/rev
    attentionspan launch --config_file docs/accelerate/fsdp_cpu.yaml train --model scratch ...
    python -m harness.commands.launch --multi_gpu --num_processes 2 eval --model runs/rev/final
    attentionspan launch --num_processes 2 heads --model M --config reversal_id --tp-plan auto

`accelerate launch -m harness.commands.train ...` starts the same processes, but when one of
them refuses (its one line, status 2) torch elastic's launcher adds its ERROR lines and a
`ChildFailedError` traceback and exits 1, which no child can prevent. Here, instead:
1. COMMAND's options are parsed by its own parser and checked by its `check` (what it refuses
   before any work, writing nothing) in this process, so `--lr nan` or a user's files in
   --output are one line and status 2 before any process starts;
2. accelerate's launcher starts the processes (`launch_command`, what `accelerate launch`
   runs), with its log lines off: torch elastic's, and accelerate's note of the defaults it
   used (`--debug` keeps them, and the traceback);
3. a process that fails after all has printed its one line (the main process does: the
   others exit alike, quietly), and this exits with its status, adding nothing.

Tensor parallelism (`--tp-plan auto` in COMMAND's options) is launched the same way, and
checked further before any process starts (`check_tensor_parallel_launch`): --num_processes
N given and at least 2, no --device-map and no --device beside it, and the model's family and
heads (query and key/value) that N shards (its config.json alone read). Under torchrun the
same refusals come from every process after the start, and torch elastic's ChildFailedError
report follows them (exit 1). The processes are torch.distributed's (`--multi_gpu`, set here:
gloo on a CPU, NCCL on GPUs).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import warnings

from attentionspan_datasets import guard
from harness.foundation.options import PROG, UsageError, run_guarded

# The commands that run over several processes (each shares its work, or its model, between
# them); the others run as one process.
COMMANDS = ("train", "eval", "attention", "heads", "reproduce")
TENSOR_PARALLEL = ("eval", "attention", "heads", "reproduce")  # the ones with --tp-plan

# The launcher's loggers: accelerate's defaults used (one machine, no mixed precision, no
# dynamo: ours), and torch elastic's (which rank failed, SIGTERM sent to the others,
# OMP_NUM_THREADS set). A failure is said by the process's own line and the exit status.
LAUNCHER_LOGGERS = (
    "accelerate.commands.launch",
    "torch.distributed.elastic",
    "torch.distributed.launcher",
    "torch.distributed.run",
)

HELP = f"""\
usage: {PROG} launch [LAUNCHER OPTIONS] COMMAND [COMMAND OPTIONS]

Run COMMAND ({", ".join(COMMANDS)}) over several processes with
accelerate's launcher (`accelerate launch`), its errors read as the command's own: one line
and its exit status. COMMAND's options are checked before any process starts (`--lr nan`,
an --output holding your files: one line, status 2); a process that fails later prints its
one line, and the launcher adds nothing (no ChildFailedError traceback, no log lines).

Launcher options (accelerate launch's, given before COMMAND; `accelerate launch --help`
lists them all):
  --config_file FILE   an accelerate config, e.g. docs/accelerate/fsdp_cpu.yaml (FSDP2 on
                       two processes)
  --multi_gpu          torch.distributed over the processes: GPUs, or the CPU (gloo) on a
                       machine without GPUs (`--cpu --num_processes 2` starts only one
                       process in accelerate 1.15)
  --num_processes N    how many processes
  --debug              accelerate's debug mode; also shows the launcher's log lines and
                       torch's traceback of a failure

COMMAND's options follow it: `{PROG} COMMAND --help` lists them.

Examples:
  {PROG} launch --multi_gpu --num_processes 2 train --model scratch \\
      --config reversal_id --output runs/rev          # DDP: two processes (CPU or GPUs)
  {PROG} launch --config_file docs/accelerate/fsdp_cpu.yaml train --model scratch \\
      --config reversal_id --output runs/rev-fsdp     # FSDP2
  {PROG} launch --multi_gpu --num_processes 2 eval --model runs/rev/final \\
      --configs reversal_id reversal_ood              # the instances shared out
  {PROG} launch --multi_gpu --num_processes 2 attention --model runs/rev/final \\
      --output runs/rev/attention
  {PROG} launch --num_processes 2 heads --model M --config reversal_id \\
      --tp-plan auto                                  # tensor parallelism: heads sharded
  {PROG} launch --num_processes 8 reproduce --model M --config reversal \\
      --tp-plan auto --output runs/m                  # one model over 8 GPUs, by heads

With --tp-plan, --num_processes N (at least 2) is the processes the model is sharded over;
the model's family and its heads are checked against N before any process starts.

`accelerate launch [options] -m harness.commands.COMMAND ...` works too, but prints the
launcher's own traceback when a process fails.
"""


def add_parser(subparsers) -> None:
    # Every word after `launch` is kept as given (no prefix characters: `--config_file` is a
    # word here, not an option) and parsed by accelerate's launcher parser in `launch`.
    parser = subparsers.add_parser(
        "launch",
        help="run train, eval, attention, heads or reproduce over several processes "
        "(accelerate launch, one-line errors)",
        add_help=False,
        prefix_chars="\0",
    )
    parser.add_argument("words", nargs=argparse.REMAINDER)
    parser.set_defaults(func=run_command)


def run_command(args) -> int:
    return launch(args.words)


def launcher_parser() -> argparse.ArgumentParser:
    """accelerate launch's parser, its errors in one line as every other command's."""
    from accelerate.commands.launch import launch_command_parser

    parser = launch_command_parser()
    prog = f"{PROG} launch"

    def error(message: str):
        if "training_script" in message:  # no COMMAND after the launcher options
            message = f"give COMMAND ({', '.join(COMMANDS)}) after the launcher options"
        parser.exit(2, f"{prog}: error: {message} (see {prog} --help)\n")

    parser.error = error
    return parser


def launch(words: list[str]) -> int:
    """Check COMMAND's options, then start its processes: COMMAND's exit status."""
    command = next((i for i, word in enumerate(words) if word in COMMANDS), len(words))
    if {"-h", "--help"} & set(words[:command]):
        print(HELP, end="")
        return 0
    args = launcher_parser().parse_args(words)
    if args.training_script not in COMMANDS:
        raise UsageError(
            f"unknown command {args.training_script!r}: launch runs "
            f"{', '.join(COMMANDS[:-1])} or {COMMANDS[-1]}, given after the launcher options"
        )
    status = check(args.training_script, args.training_script_args, args)
    if status:
        return status
    args.module, args.no_python, args.quiet = True, False, False  # `-m harness.commands.X`
    args.training_script = f"harness.commands.{args.training_script}"
    return run_launcher(args)


def check(command: str, words: list[str], launcher=None) -> int:
    """COMMAND's options parsed and checked as the command does before its work: 0, or its
    one-line refusal's status (a parse error, or `--help`, exits here as the command would).
    `launcher`: the launcher's parsed options (tensor parallelism is checked against them)."""
    module = importlib.import_module(f"harness.commands.{command}")
    parser = guard.OneLineParser(prog=f"{PROG} {command}")
    module.add_arguments(parser)
    args = parser.parse_args(words)
    args.argv = list(words)

    def checked(parsed) -> int:
        if launcher is not None:
            check_tensor_parallel_launch(parsed, launcher)
        module.check(parsed)
        return 0

    # the data layer's guard, not harness.foundation.options.run_guarded: that one sets the
    # thread count (OMP_NUM_THREADS, before torch is imported), which the processes would
    # inherit as a choice of the user's
    return guard.run_guarded(command, checked, args)


def check_tensor_parallel_launch(parsed, launcher) -> None:
    """With --tp-plan in COMMAND's options: what each process would refuse after the start,
    refused once here, before any (one line, status 2; under torchrun each process refuses
    and torch elastic's report follows). Sets `launcher.multi_gpu`: the processes must be
    torch.distributed's."""
    if getattr(parsed, "tp_plan", None) is None:
        return
    from harness.foundation.dispatch import Placement, check_tensor_parallel_processes
    from harness.foundation.models import check_tensor_parallel_spec

    if launcher.config_file or launcher.use_fsdp or launcher.use_deepspeed:
        raise UsageError(
            "--tp-plan shards the model by heads over plain processes: give --num_processes N "
            "without an accelerate config file, FSDP or DeepSpeed"
        )
    if launcher.num_processes is None:
        raise UsageError(
            "--tp-plan shards the model over the launched processes: give --num_processes N "
            "(N >= 2, dividing the model's heads) before the command"
        )
    Placement.of(parsed)  # a plan other than auto, --device-map beside it
    device = getattr(parsed, "device", "auto")
    if device != "auto":  # each process's shard goes to its own device
        raise ValueError(f"give --device {device} or --tp-plan, not both")
    check_tensor_parallel_processes(launcher.num_processes)
    model = getattr(parsed, "model", None)
    if model:  # reproduce without --model: its own check refuses --tp-plan
        check_tensor_parallel_spec(model, processes=launcher.num_processes)
    launcher.multi_gpu = True


def quiet_launcher() -> None:
    """The launcher's loggers off (torch elastic's set their own levels when they are made,
    on import: so each is set, once imported)."""
    import accelerate.commands.launch  # noqa: F401
    import torch.distributed.elastic.multiprocessing.api  # noqa: F401
    import torch.distributed.run  # noqa: F401

    for name, logger in logging.root.manager.loggerDict.items():
        if name.startswith(LAUNCHER_LOGGERS) and isinstance(logger, logging.Logger):
            logger.setLevel(logging.CRITICAL + 1)
    # A busy default port (another launch on this machine) is handled by accelerate itself,
    # which finds a free one; its warning about it is launcher noise, not the command's line.
    warnings.filterwarnings("ignore", message=r"Port `\d+` is already in use", category=UserWarning)


def status(exitcode: int) -> int:
    """A process's exit status as a shell says it: killed by signal N (-N) is 128 + N."""
    return exitcode if exitcode >= 0 else 128 - exitcode


def failed_status(failures) -> int:
    """The status of the process that failed on its own (the first to exit with a status):
    the launcher ended the others (SIGTERM, exit code -15). `failures`: torch elastic's."""
    ordered = sorted(failures, key=lambda failure: failure.timestamp)
    own = [failure.exitcode for failure in ordered if failure.exitcode > 0]
    return own[0] if own else status(ordered[0].exitcode)


def run_launcher(args) -> int:
    """accelerate's launcher with `args` (its parser's): 0, or the failed process's status."""
    import subprocess

    from accelerate.commands.launch import launch_command
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    if not args.debug:
        quiet_launcher()
    try:
        launch_command(args)
    except ChildFailedError as error:  # several processes (torch.distributed.run)
        if args.debug:
            raise
        return failed_status(error.failures.values())
    except subprocess.CalledProcessError as error:  # one process, run as a subprocess
        return status(error.returncode)
    except SignalException as signal:  # Ctrl-C or SIGTERM: the launcher ended the processes
        return 128 + int(signal.sigval)
    except KeyboardInterrupt:  # Ctrl-C while one process ran: it says so itself
        return 130
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m harness.commands.launch`: every word is the launcher's or COMMAND's."""
    words = sys.argv[1:] if argv is None else argv
    return run_guarded("launch", run_command, argparse.Namespace(words=list(words)))


if __name__ == "__main__":
    sys.exit(main())
