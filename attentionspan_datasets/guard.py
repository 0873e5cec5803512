"""How every `attentionspan` command runs: a user's mistake is one line, not a traceback.

    from attentionspan_datasets.guard import OneLineParser, UsageError, run_guarded
    sys.exit(run_guarded("generate", args.func, args))

A user's mistake (`ValueError`, `UsageError`, `FileNotFoundError`, `FileExistsError`) prints
`attentionspan COMMAND: error: ...` on one line and returns status 2; a plugin package's
failing code (`PluginError`) is one such line naming the package, status 1; a closed pipe
(`attentionspan generate ... | head`) is quiet, status 0; Ctrl-C is one line, status 130.
`ATTENTIONSPAN_TRACEBACK=1` shows the traceback instead. The data commands
(`python -m attentionspan_datasets`) and the harness's (`harness.foundation.options`, `harness.cli`)
share this one copy, and one `OneLineParser` (argparse errors in one line that names the
subcommand and its --help); they live here because the data layer imports nothing above it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import NoReturn

PROG = "attentionspan"


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other refusal: the usage
    block argparse prints before them is pages long for some commands (train), and the
    line that matters came last. Subparsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    # argparse hands a subcommand's unknown options up to the top parser, whose error would
    # name `attentionspan`, not the command whose --help lists the options. The innermost
    # parser that left some unrecognised records its prog in the namespace.
    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(namespace, "_unrecognized_prog"):
            namespace._unrecognized_prog = self.prog
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        prog = vars(namespace).pop("_unrecognized_prog", self.prog)
        if extras:
            message = f"unrecognized arguments: {' '.join(extras)}"
            self.exit(2, f"{prog}: error: {message} (see {prog} --help)\n")
        return namespace


class UsageError(Exception):
    """A problem with the user's input that is not a bad value of a library call."""


class PluginError(Exception):
    """Code of an installed plugin package failed (its task's generator raised, or returned
    something other than an Instance): not the user's input, so never a ValueError, and one
    line naming the package, status 1."""


# Exceptions that mean "the input is wrong", printed as one line.
USER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    UsageError,
    FileNotFoundError,
    FileExistsError,
)


OTHER_RANK_GRACE_S = 3.0  # seconds; the main process refuses in milliseconds


def main_process() -> bool:
    """Not one of the other processes of an `accelerate launch` / torchrun (their RANK is
    set and not 0): they exit with the same status, without printing the same line again."""
    return os.environ.get("RANK", "0").strip() in ("0", "")


def answer_interrupts() -> None:
    """SIGINT raises KeyboardInterrupt even where the process started with it ignored (the
    background job of a script, which a shell starts so): train's loop always answered it,
    the rest of a command did not, so whether a SIGINT stopped `supervision --jobs 2` (and
    exited 130) or was lost (exit 0, the study written) hung on where it landed."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def run_guarded(
    command: str, func: Callable[[argparse.Namespace], int | None], args, prog: str = PROG
) -> int:
    """Run `func(args)` as `prog command`: its status, 2 for a user's mistake (one line on
    stderr), 1 for a plugin's failure (one line naming the package), 0 for a closed pipe,
    130 for Ctrl-C (143 for SIGTERM raised as an interruption)."""
    answer_interrupts()
    try:
        return func(args) or 0
    except USER_ERRORS as error:
        if os.environ.get("ATTENTIONSPAN_TRACEBACK"):
            raise
        text = " ".join(str(error).split("\n")) or type(error).__name__
        if main_process():  # every process of a launch refuses alike: the line once
            print(f"{prog} {command}: error: {text}", file=sys.stderr)
        else:
            # the launcher ends every process when one exits: were this one first, the main
            # process would be killed before it printed the line. Leave it the time to.
            import time

            time.sleep(OTHER_RANK_GRACE_S)
        return 2
    except PluginError as error:
        if os.environ.get("ATTENTIONSPAN_TRACEBACK"):
            raise
        if main_process():
            print(f"{prog} {command}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `attentionspan generate ... | head`: the reader is gone, which is not an error.
        # Point stdout at devnull so the interpreter's final flush does not complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt as interrupt:
        if main_process():
            print(f"{prog} {command}: interrupted", file=sys.stderr)
        # 130 for Ctrl-C; an interruption that stands for SIGTERM carries its own (143)
        return getattr(interrupt, "exit_status", 130)
