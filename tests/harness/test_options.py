"""harness.foundation.options: the shared model options, options declared on dataclass fields
(parser,
config and command line from one declaration), and the command line written back from a
parser; and that the commands share what they should."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import pytest

from harness.foundation.options import (
    MODEL_OPTIONS,
    add_config_arguments,
    add_model_arguments,
    cli,
    cli_fields,
    config_values,
    config_words,
    parser_words,
)


@dataclass
class Toy:
    name: str = field(default="a", metadata=cli("a name"))
    count: int = field(default=3, metadata=cli("how many", group="sizes"))
    ratios: list[float] = field(default_factory=lambda: [0.5, 1.0], metadata=cli("ratios"))
    fast: bool = field(default=False, metadata=cli("go fast"))
    extra: dict = field(default_factory=dict, metadata=cli("KEY=VALUE", metavar="KEY=VALUE"))
    batch_size: int = field(default=8, metadata=cli("rows per batch", shared="batch_size"))
    limit: float | None = field(default=None, metadata=cli("at most this"))
    hidden: int = 7  # no metadata: not an option


def toy_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Toy)
    return parser


def test_options_come_from_the_fields():
    parser = toy_parser()
    args = parser.parse_args(
        ["--count", "5", "--ratios", "2", "3", "--fast", "--batch-size", "4", "--limit", "0.5"]
    )
    assert config_values(args, Toy) == {
        "count": 5,
        "ratios": [2.0, 3.0],
        "fast": True,
        "batch_size": 4,
        "limit": 0.5,
    }
    assert config_values(parser.parse_args([]), Toy) == {}  # nothing given: every default None
    assert "--hidden" not in parser.format_help()
    assert [f.name for f in cli_fields(Toy)] == [
        "name",
        "count",
        "ratios",
        "fast",
        "extra",
        "batch_size",
        "limit",
    ]


def test_the_help_shows_each_fields_own_default():
    text = " ".join(toy_parser().format_help().split())
    assert "--ratios RATIOS [RATIOS ...] ratios (default: 0.5 1.0)" in text
    assert "--count COUNT how many (default: 3)" in text
    assert "sizes:" in text  # the group
    assert "--batch-size BATCH_SIZE rows per batch (default: 8)" in text
    assert "--fast go fast --extra" in text and "--limit LIMIT at most this --" not in text


def test_the_command_line_round_trips():
    config = Toy(name="b c", count=3, ratios=[1.5], fast=True, extra={"k": 2}, limit=0.25)
    words = config_words(config, Toy())
    assert words == ["--name", "b c", "--ratios", "1.5", "--fast", "--extra", "k=2"] + [
        "--limit",
        "0.25",
    ]
    args = toy_parser().parse_args(shlex.split(shlex.join(words)))
    values = config_values(args, Toy)
    values["extra"] = dict(text.split("=") for text in values["extra"])
    values["extra"] = {k: int(v) for k, v in values["extra"].items()}
    assert Toy(**values) == config
    assert config_words(config, Toy(), always=("count",), skip=("fast",))[2:4] == ["--count", "3"]


@dataclass
class Passes:
    convention: Literal["paper", "authors"] = field(
        default="paper", metadata=cli("how", choices=("paper", "authors"))
    )
    modes: Sequence[str] = field(default=("a", "b"), metadata=cli("passes", choices=("a", "b")))
    scale: float | None = field(default=None, metadata=cli("a scale", shown="none"))


def test_with_defaults_the_namespace_holds_each_fields_default():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Toy, defaults=True)
    add_config_arguments(parser, Passes, defaults=True, prefix="p_")
    args = parser.parse_args([])
    # a dict stays None (its KEY=VALUE texts are the command's to read): the field's default
    assert Toy(**config_values(args, Toy)) == Toy()
    assert args.fast is False and args.ratios == [0.5, 1.0]
    assert (args.p_convention, args.p_modes, args.p_scale) == ("paper", ["a", "b"], None)
    args = parser.parse_args(["--p-convention", "authors", "--p-modes", "b", "--p-scale", "2"])
    assert config_values(args, Passes, prefix="p_") == {
        "convention": "authors",
        "modes": ["b"],
        "scale": 2.0,
    }
    text = " ".join(parser.format_help().split())
    assert "passes (default: a b)" in text and "a scale (default: none)" in text


def test_shared_options_take_a_commands_defaults():
    parser = argparse.ArgumentParser()
    add_model_arguments(
        parser,
        "model",
        "batch_size",
        "no_progress",
        "prompt",
        model={"required": True},
        batch_size={"default": 16},
    )
    args = parser.parse_args(["--model", "m", "--no-progress", "--no-chat"])
    assert (args.model, args.batch_size, args.no_progress, args.chat) == ("m", 16, True, False)
    assert "instances per batch (default: 16)" in " ".join(parser.format_help().split())
    with pytest.raises(ValueError, match="unknown shared option"):
        add_model_arguments(argparse.ArgumentParser(), "nope")
    assert MODEL_OPTIONS["batch_size"][1] == {"type": int, "help": "instances per batch"}


def test_parser_words_write_what_differs_from_the_defaults():
    def add(parser):
        parser.add_argument("-n", "--num", type=int, default=3)
        parser.add_argument("--names", nargs="+", default=[])
        parser.add_argument("--chat", action=argparse.BooleanOptionalAction, default=None)
        parser.add_argument("--quiet", action="store_true")
        parser.add_argument("--out", default=None)

    values = {"num": 3, "names": ["a", "b"], "chat": False, "quiet": True, "out": None}
    assert parser_words(add, values) == ["--names", "a", "b", "--no-chat", "--quiet"]
    assert parser_words(add, values, always=("num",))[:2] == ["--num", "3"]


COMMANDS = ("train", "eval", "attention", "heads", "reproduce", "baselines")


def subparsers():
    from harness.cli import build_parser

    return build_parser("--help")._subparsers._group_actions[0].choices


@pytest.mark.parametrize("command", COMMANDS)
def test_every_model_command_has_no_progress(command):
    actions = {a.dest: a for a in subparsers()[command]._actions}
    assert actions["no_progress"].option_strings == ["--no-progress"]
    assert actions["no_progress"].default is False


def test_shared_options_read_the_same_in_every_command():
    """The choices of a shared option do not drift between commands."""
    for command, parser in subparsers().items():
        for action in parser._actions:
            for flags, keywords in MODEL_OPTIONS.values():
                if action.option_strings != list(flags) or command == "baselines":
                    continue  # baselines' --device names any torch device (cuda:1)
                if action.help == argparse.SUPPRESS:
                    continue  # eval's and attention's --device: refused (they have none)
                # train adds "auto" (bf16 where the model is large and bf16 is fast)
                assert set(keywords.get("choices") or ()) <= set(action.choices or ()), command


def test_reproduce_declares_each_option_once_on_its_config():
    from harness.attention.sweep import DEFAULT_STRENGTHS
    from harness.pipeline.settings import ReproduceConfig

    names = {f.name for f in dataclasses.fields(ReproduceConfig)}
    assert names - {f.name for f in cli_fields(ReproduceConfig)} == {"progress"}
    text = " ".join(subparsers()["reproduce"].format_help().split())
    shown = " ".join(map(str, DEFAULT_STRENGTHS))
    assert f"C values (default: {shown})" in text


def test_the_score_convention_choices_are_the_scores_modules():
    from harness.attention.scores import CONVENTIONS

    assert MODEL_OPTIONS["score_convention"][1]["choices"] == CONVENTIONS
    for command in ("attention", "reproduce"):
        actions = {a.dest: a for a in subparsers()[command]._actions}
        assert actions["score_convention"].choices == CONVENTIONS


# Where each command's options are declared: (module, dataclass, prefix of the dests).
DECLARED = {
    "train": [
        ("harness.training.train", "TrainConfig", ""),
        ("harness.foundation.models", "ScratchConfig", "scratch_"),
        ("harness.commands.train", "TrainCommand", ""),
    ],
    "eval": [("harness.evaluation.evaluate", "EvalConfig", "")],
    "attention": [
        ("harness.attention.analysis", "AnalysisConfig", ""),
        ("harness.commands.attention", "AttentionOutput", ""),
    ],
    "heads": [("harness.commands.heads", "HeadsOptions", "")],
    "reproduce": [("harness.pipeline.settings", "ReproduceConfig", "")],
    "baselines": [("harness.commands.baselines", "BaselinesOptions", "")],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_is_a_config_field_or_a_shared_one(command):
    """One way to build a parser: the `cli` fields of the command's dataclasses, and the
    shared model options (MODEL_OPTIONS and the prompt group), each with its help."""
    declared = {
        prefix + f.name
        for module, name, prefix in DECLARED[command]
        for f in cli_fields(getattr(importlib.import_module(module), name))
    }
    actions = subparsers()[command]._actions
    dests = {action.dest for action in actions}
    assert declared <= dests
    shared = set(MODEL_OPTIONS) | {"instruction", "num_fewshot", "chat", "help"}
    assert dests - declared <= shared, dests - declared - shared
    for action in actions:
        assert action.help, (command, action.dest)


@dataclass
class Files:
    paths: list[str] = field(default_factory=list, metadata=cli("files", positional=True))
    folder: str = field(default="", metadata=cli("a folder", positional=True))
    doc: str = field(default="x.md", metadata=cli("the page"))


def test_a_positional_field_is_named_by_its_place():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Files, defaults=True)
    args = parser.parse_args(["a.json", "b.json", "out", "--doc", "y.md"])
    assert (args.paths, args.folder, args.doc) == (["a.json", "b.json"], "out", "y.md")
    with pytest.raises(SystemExit):
        parser.parse_args(["--doc", "y.md"])  # positional: required


# The document commands (and the actions of the nested ones): one dataclass each.
DOCUMENT_COMMANDS = {
    ("results-doc",): ("harness.commands.results_doc", "ResultsDocOptions"),
    ("supervision-doc",): ("harness.commands.supervision_doc", "SupervisionDocOptions"),
    ("baselines-table",): ("harness.commands.baselines_table", "BaselinesTableOptions"),
    ("scratch-doc", "run"): ("harness.commands.scratch_doc", "RunOptions"),
    ("scratch-doc", "check"): ("harness.commands.scratch_doc", "CheckOptions"),
    ("scratch-doc", "render"): ("harness.commands.scratch_doc", "RenderOptions"),
    ("models", "fetch"): ("harness.commands.models", "FetchOptions"),
}


@pytest.mark.parametrize("path", DOCUMENT_COMMANDS, ids=" ".join)
def test_a_document_commands_options_are_its_dataclass_fields(path):
    module, name = DOCUMENT_COMMANDS[path]
    parser = subparsers()[path[0]]
    for action in path[1:]:
        nested = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = nested.choices[action]
    declared = {f.name for f in cli_fields(getattr(importlib.import_module(module), name))}
    assert {a.dest for a in parser._actions} == declared | {"help"}
    assert all(action.help for action in parser._actions)


@pytest.mark.parametrize(
    "module, command",
    [
        ("harness.report.results_doc", "results-doc"),
        ("harness.report.scratch_doc", "scratch-doc"),
        ("harness.report.supervision_doc", "supervision-doc"),
        ("harness.baselines.table", "baselines-table"),
    ],
)
def test_the_old_form_of_a_moved_command_is_one_line_and_status_2(module, command):
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", module], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"attentionspan: error: python -m {module} runs nothing"), line
    assert f"run `attentionspan {command}`" in line
