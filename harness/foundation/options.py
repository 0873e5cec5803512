"""Command-line pieces shared by the harness commands (train, eval, models, ...).

    from harness.foundation.options import add_config_arguments, add_model_arguments, cli
    num: int = field(default=200, metadata=cli("instances per config", shared="num"))
    add_config_arguments(parser, EvalConfig, defaults=True)   # one option per `cli` field
    add_model_arguments(parser, "no_progress", "threads", "prompt")   # the shared ones
    sys.exit(main_for("train", add_arguments, run_command))   # python -m harness.commands.train

Every harness command builds its parser this one way: the `cli` fields of its config
dataclasses (a small dataclass of the command's own for options that configure nothing
below it, such as --output or --top, or for a document command's run folder and files), and
the options the model commands share (`add_model_arguments`: MODEL_OPTIONS and the prompt
group). `config_values` reads a config
back from the parsed options, `config_words` writes one as a command line.

`run_guarded` (one copy, in the data layer: `attentionspan_datasets.guard`) is the one place
that turns a user's mistake into one line and exit status 2 (`attentionspan COMMAND: error:
...`); `harness.cli.main` and `python -m harness.commands.train` / `-m harness.commands.eval`
(what `accelerate launch` runs) all go through it. `MODEL_OPTIONS` declares the options the
model commands share, `cli` an option on a config dataclass's field. Nothing here imports
torch, and nothing of the harness: every layer may use it.
"""

from __future__ import annotations

import argparse
import collections.abc
import contextlib
import dataclasses
import math
import sys
import typing
from collections.abc import Callable

from attentionspan_datasets import guard
from attentionspan_datasets.guard import (  # noqa: F401  (re-exported: one copy, data layer)
    PROG,
    USER_ERRORS,
    OneLineParser,
    UsageError,
)


def run_guarded(command: str, func: Callable[[argparse.Namespace], int | None], args) -> int:
    """The data layer's guard (`attentionspan_datasets.guard.run_guarded`: one line and
    status 2 for a user's mistake) around `func`, with torch's thread count chosen first for
    a model command (`harness.foundation.threads`), so every entry point gets the same rule."""

    def configured(parsed):
        from harness.foundation.threads import configure_threads, launched_processes

        launched_processes()  # WORLD_SIZE=abc: one line naming it, before a library's int()
        configure_threads(command, parsed)  # before any model work
        return func(parsed)

    return guard.run_guarded(command, configured, args)


def refuse_device_option(parser, command: str) -> None:
    """`--device` on a command that has none (eval, attention: accelerate places the model):
    argparse read it as an abbreviation of --device-map, so `--device cpu` dispatched the
    model as a device map, and beside --tp-plan was refused as "--tp-plan and --device-map
    exclude each other" though no --device-map was given. One line saying so instead."""

    class Refuse(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            parser.error(
                f"{command} has no --device option (argparse would read it as --device-map "
                f"{values}): {command} runs on the GPU when there is one, else on the CPU; "
                "under --tp-plan each process's shard goes to its own device; --device-map "
                "splits a model across devices"
            )

    parser.add_argument(
        "--device", action=Refuse, default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )


def moved_command(module: str, command: str) -> None:
    """What `python -m MODULE` does where a command's parser moved out of MODULE into
    harness/commands/: one line naming the command, status 2 (the old form exited 0 having
    done nothing, which reads as success)."""
    new = f"python -m harness.commands.{command.replace('-', '_')}"
    print(
        f"{PROG}: error: python -m {module} runs nothing since the command moved: "
        f"run `{PROG} {command}` (or {new})",
        file=sys.stderr,
    )
    sys.exit(2)


# `--instruction default`: the standard line of attentionspan_datasets.instructions.
DEFAULT_INSTRUCTION = "default"


def option(name: str) -> str:
    """The flag of a dataclass field: `max_grad_norm` -> `--max-grad-norm`."""
    return "--" + name.replace("_", "-")


def scalar_type(annotation):
    """int / float / str for `int`, `float`, `str | None` annotations; the type of the
    values of a `Literal["a", "b"]`."""
    if annotation in (int, float, str):
        return annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Literal:
        return type(args[0])
    return scalar_type(args[0]) if args else str


def check_finite(owner: str, values: dict[str, object]) -> None:
    """ValueError naming the first float field that is inf or nan (`--lr inf` would train a
    NaN model; `--max-grad-norm nan` would silently turn clipping off)."""
    for name, value in values.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{owner}'{name}' must be a finite number, got {value}")


# The options the model commands share, declared once: flags and argparse keywords. A command
# takes the ones it has, with its own defaults (`add_model_arguments`), so `--no-progress` or
# `--mixed-precision` read the same in `eval`, `attention`, `heads`, `train` and `reproduce`.
MODEL_OPTIONS: dict[str, tuple[tuple[str, ...], dict[str, typing.Any]]] = {
    "model": (
        ("--model",),
        {
            "help": "a model folder (e.g. runs/rev/final), a fetched model name "
            "(smollm2-135m-instruct, gemma3-270m) or a Hub name"
        },
    ),
    "configs": (
        ("--configs",),
        {
            "nargs": "+",
            "default": [],
            "metavar": "CONFIG",
            "help": "presets to score (default: the model's training preset and its OOD twin)",
        },
    ),
    "num": (("-n", "--num"), {"type": int, "help": "instances per config"}),
    "seed": (("--seed",), {"type": int, "help": "seed of the data"}),
    "batch_size": (("--batch-size",), {"type": int, "help": "instances per batch"}),
    "mixed_precision": (
        ("--mixed-precision",),
        {"choices": ("no", "bf16"), "help": "bf16 autocast, or none"},
    ),
    "device": (
        ("--device",),
        {"choices": ("auto", "cpu", "cuda"), "help": "auto: cuda if present"},
    ),
    "threads": (
        ("--threads",),
        {
            "type": int,
            "help": "torch CPU threads (default, or 0: chosen from the cores this process may "
            "use, the processes on this machine and the load; an explicit OMP_NUM_THREADS is "
            "kept; docs/performance.md)",
        },
    ),
    "no_progress": (("--no-progress",), {"action": "store_true", "help": "no progress bar"}),
    # harness.foundation.ownership: what a command wrote in --output, and only that
    "overwrite": (
        ("--overwrite",),
        {
            "action": "store_true",
            "help": "replace what an earlier run of this command recorded writing in --output "
            "(only that: other files are never removed, whatever their names); the earlier "
            "run moves aside and goes only when the new one is whole: an error or an "
            "interruption puts it back",
        },
    ),
    # harness.attention.scores.CONVENTIONS (tests/harness/test_options.py checks they agree).
    "score_convention": (
        ("--score-convention",),
        {
            "choices": ("paper", "authors"),
            "help": "the attention score of Table 2: paper (the paper's text, v2 Appendix C) "
            "or authors (as their released code computes it: three differences, "
            "harness.attention.scores)",
        },
    ),
}


def add_model_arguments(parser, *names: str, **overrides: dict[str, typing.Any]) -> None:
    """The shared options `names` (keys of MODEL_OPTIONS, in that order; "prompt" adds
    --instruction / --num-fewshot / --chat, `prompt={"saved_default": True}` says the
    default is what was saved with the model). `overrides[name]` changes argparse keywords
    of one option for this command: its default, a longer help, `required`. A default that
    is not None or False is shown in the help."""
    unknown = set(names) - set(MODEL_OPTIONS) - {"prompt"}
    if unknown:
        raise ValueError(f"unknown shared option(s) {', '.join(sorted(unknown))}")
    for name in names:
        if name == "prompt":
            add_prompt_arguments(parser, **overrides.get("prompt", {}))
            continue
        flags, keywords = MODEL_OPTIONS[name]
        keywords = {**keywords, **overrides.get(name, {})}
        default = keywords.get("default")
        if default is not None and default is not False and "(default" not in keywords["help"]:
            keywords["help"] += " (default: %(default)s)"
        parser.add_argument(*flags, **keywords)


def field_defaults(cls) -> dict[str, typing.Any]:
    """The default of every field of the dataclass `cls` that has one (a factory called)."""
    values = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            values[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            values[f.name] = f.default_factory()
    return values


# --- options declared on a config dataclass ------------------------------------------------
def cli(
    help: str,
    *,
    shared: str | None = None,
    group: str | None = None,
    shown: str | None = None,
    **keywords: typing.Any,
) -> dict[str, typing.Any]:
    """Field metadata that makes a dataclass field a command-line option, declared once for
    the parser, the config built from it and the command line written back:

        num_heads: int = field(default=30, metadata=cli("ID instances to rank", group="sizes"))

    `shared`: the flag and keywords of MODEL_OPTIONS[shared] (its help replaced by `help`);
    `group`: an argument group's title; `shown`: the default as the help prints it (else the
    field's own default); `positional`: an argument named by its place, not a flag (a run
    folder, the files to read); other keywords go to argparse (choices, metavar)."""
    return {"cli": {"help": help, "shared": shared, "group": group, "shown": shown, **keywords}}


def cli_fields(cls) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if "cli" in f.metadata]


def cli_flag(f: dataclasses.Field) -> str:
    shared = f.metadata["cli"]["shared"]
    return MODEL_OPTIONS[shared][0][-1] if shared else option(f.name)


def _shown(value) -> str | None:
    if value is None or value is False or value in ([], {}):
        return None
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(value)


def add_config_arguments(parser, cls, *, defaults: bool = False, prefix: str = "") -> None:
    """One option per `cli` field of the dataclass `cls` (dest: `prefix` + the field's name,
    flag `--prefix-name` unless the field is `shared`), typed from its annotation: `list[int]`
    (or a sequence) takes one or more ints, `bool` is a switch, a dict is a repeatable
    KEY=VALUE. Every default is None, so that `config_values` can tell what was given, unless
    `defaults`: then each option's default is its field's. The help shows the field's own
    default either way. Every model command's parser is built so: its config dataclasses
    through this, plus the shared options of `add_model_arguments`."""
    hints = typing.get_type_hints(cls)
    values = field_defaults(cls)
    groups: dict[str, typing.Any] = {}
    for f in cli_fields(cls):
        meta = dict(f.metadata["cli"])
        shared, group, shown = meta.pop("shared"), meta.pop("group"), meta.pop("shown")
        positional = meta.pop("positional", False)
        name = prefix + f.name
        flags, keywords = MODEL_OPTIONS[shared] if shared else ((option(name),), {})
        default = values.get(f.name) if defaults else None
        hint = hints[f.name]
        origin = typing.get_origin(hint) or hint  # `dict` as well as `dict[str, Any]`
        keywords = {**keywords, **meta, "dest": name, "default": default}
        if hint is bool:
            keywords["action"] = "store_true"
        elif origin in (list, tuple, collections.abc.Sequence):
            keywords.setdefault("nargs", "+")
            keywords.setdefault("type", typing.get_args(hint)[0])
            if isinstance(default, tuple):  # what argparse gives: a list
                keywords["default"] = list(default)
        elif origin is dict:
            keywords.setdefault("action", "append")
            keywords["default"] = None  # KEY=VALUE texts: the command makes them a dict
        else:
            keywords.setdefault("type", scalar_type(hint))
        shown = shown if shown is not None else _shown(values.get(f.name))
        help_text = keywords["help"] + (f" (default: {shown})" if shown else "")
        keywords["help"] = help_text.replace("%", "%%")  # argparse %-formats help
        if positional:  # named by its place: argparse takes the name as its dest
            flags = (keywords.pop("dest"),)
            keywords.pop("default")
        if group and group not in groups:
            groups[group] = parser.add_argument_group(group)
        (groups[group] if group else parser).add_argument(*flags, **keywords)


def config_values(args: argparse.Namespace, cls, prefix: str = "") -> dict[str, typing.Any]:
    """The `cli` fields of `cls` that `args` gives (those not None), by field name."""
    values = {f.name: getattr(args, prefix + f.name, None) for f in cli_fields(cls)}
    return {k: v for k, v in values.items() if v is not None}


def config_words(config, default, always: tuple[str, ...] = (), skip=()) -> list[str]:
    """The options that give `config` where it differs from `default` (or is in `always`),
    the inverse of `add_config_arguments` + `config_values`: `["--num-test", "50", ...]`."""
    words: list[str] = []
    for f in cli_fields(type(config)):
        value = getattr(config, f.name)
        if f.name in skip or value is None:
            continue
        if value == getattr(default, f.name) and f.name not in always:
            continue
        flag = cli_flag(f)
        if isinstance(value, bool):
            words += [flag] if value else []
        elif isinstance(value, dict):
            for key, item in value.items():
                words += [flag, f"{key}={item}"]
        elif isinstance(value, (list, tuple)):
            words += [flag, *map(str, value)] if value else []
        else:
            words += [flag, str(value)]
    return words


def parser_words(
    add_arguments: Callable, values: dict[str, typing.Any], always: tuple[str, ...] = ()
) -> list[str]:
    """The options of the parser `add_arguments` builds that give `values` (by dest), where
    they differ from its defaults or are in `always`: the command line of a run, written
    from the parser rather than from a second list of its options."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    words: list[str] = []
    for action in parser._actions:
        value = values.get(action.dest)
        if not action.option_strings or value is None:
            continue
        if value == action.default and action.dest not in always:
            continue
        flag = max(action.option_strings, key=len)
        if isinstance(action, argparse.BooleanOptionalAction):
            words.append(action.option_strings[0] if value else action.option_strings[1])
        elif action.nargs == 0:
            words += [flag] if value else []
        elif isinstance(value, (list, tuple)):
            words += [flag, *map(str, value)]
        else:
            words += [flag, str(value)]
    return words


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


def explicit_options(add_arguments: Callable, argv: list[str]) -> set[str]:
    """The dests of the options `argv` gives explicitly (a default given on purpose
    included), found by parsing again with every default suppressed."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    given, _ = parser.parse_known_args(argv)
    return set(vars(given))


@contextlib.contextmanager
def one_line(*kinds: type[BaseException]):
    """Errors of `kinds` (a torn file, an unreadable folder, a failed step) read as a user's
    mistake: `run_guarded` prints them in one line and exits with status 2."""
    try:
        yield
    except kinds as error:
        raise UsageError(" ".join(str(error).split())) from error


def main_for(
    command: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int | None],
    argv: list[str] | None = None,
) -> int:
    """`python -m harness.commands.<command>`: the options and one-line errors of `attentionspan
    COMMAND`, without building the whole command line."""
    parser = OneLineParser(prog=f"{PROG} {command}")
    add_arguments(parser)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    args.argv = list(argv)  # for commands that need to know what was given explicitly
    return run_guarded(command, run, args)
