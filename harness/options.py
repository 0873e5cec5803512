"""Command-line pieces shared by the harness commands (train, eval, models, ...).

    from harness.options import add_prompt_arguments, run_guarded
    add_prompt_arguments(parser)              # --instruction / --num-fewshot / --chat
    sys.exit(main_for("train", add_arguments, run_command))   # python -m harness.train

`run_guarded` is the one place that turns a user's mistake into one line and exit status 2
(`attentionspan COMMAND: error: ...`); `harness.cli.main` and `python -m harness.train` /
`-m harness.evaluate` (what `accelerate launch` runs) both go through it. Nothing here
imports torch.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import typing
from collections.abc import Callable

# `--instruction default`: the standard line of attentionspan_datasets.instructions.
DEFAULT_INSTRUCTION = "default"
PROG = "attentionspan"


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other refusal: the usage
    block argparse prints before them is pages long for some commands (train), and the
    line that matters came last. Subparsers inherit the class."""

    def error(self, message: str) -> typing.NoReturn:
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


def option(name: str) -> str:
    """The flag of a dataclass field: `max_grad_norm` -> `--max-grad-norm`."""
    return "--" + name.replace("_", "-")


def scalar_type(annotation):
    """int / float / str for `int`, `float`, `str | None` annotations."""
    if annotation in (int, float, str):
        return annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if args else str


def add_dataclass_arguments(
    parser,
    cls,
    skip: tuple[str, ...] = (),
    helps: dict[str, str] | None = None,
    choices: dict[str, tuple[str, ...]] | None = None,
    prefix: str = "",
    shown: dict[str, str] | None = None,
) -> None:
    """One `--flag` per field of `cls` (dest `prefix + name`), typed from the annotation;
    `shown` replaces the printed default of a field (a long string, say)."""
    hints = typing.get_type_hints(cls)
    helps, choices, shown = helps or {}, choices or {}, shown or {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        text = f"{helps.get(f.name, '')} (default: {shown.get(f.name, repr(default))})".lstrip()
        parser.add_argument(
            option(prefix + f.name),
            dest=prefix + f.name,
            type=scalar_type(hints[f.name]),
            default=default,
            choices=choices.get(f.name),
            # argparse %-formats help: a default such as string.printable holds "%".
            help=text.replace("%", "%%"),
        )


def dataclass_values(args: argparse.Namespace, cls, skip: tuple[str, ...] = (), prefix: str = ""):
    return {
        f.name: getattr(args, prefix + f.name)
        for f in dataclasses.fields(cls)
        if f.name not in skip
    }


def check_finite(owner: str, values: dict[str, object]) -> None:
    """ValueError naming the first float field that is inf or nan (`--lr inf` would train a
    NaN model; `--max-grad-norm nan` would silently turn clipping off)."""
    for name, value in values.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{owner}'{name}' must be a finite number, got {value}")


def add_prompt_arguments(parser, saved_default: bool = False) -> None:
    suffix = " (default: as saved with the model)" if saved_default else ""
    parser.add_argument(
        "--instruction",
        default=None,
        help="a line before the task text, tokenised normally; 'default' is the task's "
        "standard instruction, the one the lm-eval tasks use" + suffix,
    )
    parser.add_argument(
        "--num-fewshot",
        type=int,
        default=None,
        help="solved examples before the task text" + suffix,
    )
    parser.add_argument(
        "--chat",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="wrap the text in the tokenizer's chat template" + suffix,
    )


def resolve_instruction(instruction: str | None, configs: list[str]) -> str | None:
    """`default` becomes the standard instruction of the configs' task (one task only)."""
    if instruction != DEFAULT_INSTRUCTION:
        return instruction
    from attentionspan_datasets.generation import resolve_config
    from attentionspan_datasets.instructions import instruction_for

    tasks = {resolve_config(name).task_name for name in configs}
    if len(tasks) != 1:
        found = ", ".join(sorted(tasks)) or "none"
        raise ValueError(f"--instruction default needs configs of one task, got {found}")
    return instruction_for(tasks.pop())


def quiet_transformers() -> None:
    """No per-file "Loading weights" bars: the command prints its own progress."""
    from transformers.utils import logging

    logging.disable_progress_bar()


class UsageError(Exception):
    """A problem with the user's input that is not a bad value of a library call."""


def user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the input is wrong", printed as one line: ours and the data
    layer's UsageError."""
    errors: tuple[type[BaseException], ...] = (
        ValueError,
        UsageError,
        FileNotFoundError,
        FileExistsError,
    )
    try:
        from attentionspan_datasets.cli import UsageError as DataUsageError
    except ImportError:  # the data layer's CLI renamed it: ValueError still covers most
        return errors
    return (*errors, DataUsageError)


def run_guarded(command: str, func: Callable[[argparse.Namespace], int | None], args) -> int:
    """Run a command: a user's mistake is one line and status 2, a closed pipe is quiet
    (status 0), Ctrl-C is one line and status 130. ATTENTIONSPAN_TRACEBACK=1 shows the
    traceback instead."""
    try:
        return func(args) or 0
    except user_errors() as error:
        if os.environ.get("ATTENTIONSPAN_TRACEBACK"):
            raise
        text = " ".join(str(error).split("\n")) or type(error).__name__
        print(f"{PROG} {command}: error: {text}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `attentionspan generate ... | head`: the reader is gone, which is not an error.
        # Point stdout at devnull so the interpreter's final flush does not complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"{PROG} {command}: interrupted", file=sys.stderr)
        return 130


def explicit_options(add_arguments: Callable, argv: list[str]) -> set[str]:
    """The dests of the options `argv` gives explicitly (a default given on purpose
    included), found by parsing again with every default suppressed."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    given, _ = parser.parse_known_args(argv)
    return set(vars(given))


def main_for(
    command: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int | None],
    argv: list[str] | None = None,
) -> int:
    """`python -m harness.<module>`: the options and one-line errors of `attentionspan
    COMMAND`, without building the whole command line."""
    parser = OneLineParser(prog=f"{PROG} {command}")
    add_arguments(parser)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    args.argv = list(argv)  # for commands that need to know what was given explicitly
    return run_guarded(command, run, args)
