"""`attentionspan supervision`'s parser and its one-line errors (the study itself:
tests/harness/pipeline/test_supervision_study.py)."""

from __future__ import annotations

import pytest

from harness.foundation.options import MODEL_OPTIONS, cli_fields


def parser():
    from harness.cli import build_parser

    return build_parser("supervision")._subparsers._group_actions[0].choices["supervision"]


def test_every_option_is_a_field_of_the_config():
    from harness.pipeline.supervision_settings import SupervisionConfig

    declared = {f.name for f in cli_fields(SupervisionConfig)}
    dests = {action.dest for action in parser()._actions}
    assert declared <= dests
    assert dests - declared <= set(MODEL_OPTIONS) | {"help"}
    assert all(action.help for action in parser()._actions)
    import dataclasses

    assert {f.name for f in dataclasses.fields(SupervisionConfig)} - declared == {"progress"}


def test_the_defaults_are_the_configs():
    from harness.commands.supervision import config_from_args
    from harness.pipeline.supervision_settings import SupervisionConfig

    args = parser().parse_args([])
    assert config_from_args(args) == SupervisionConfig()
    given = config_from_args(parser().parse_args(["--weights", "0.5", "--ood", "max_length=15"]))
    assert given.weights == [0.5] and given.ood == {"max_length": 15}
    assert "0 is the unsupervised baseline" in " ".join(parser().format_help().split())


@pytest.mark.parametrize(
    "argv,line",
    [
        (["--tasks", "nope"], "nope"),
        (["--seeds", "0"], "'seeds' must be >= 1, got 0"),
        (["--weights", "0", "-0.5"], "'weights' must be in [0, 100]"),
        (["--weights", "0"], "'weights' must hold at least one weight > 0"),
        (["--heads", "0"], "'heads' must be >= 1, got 0"),
        (["--extra-steps", "-1"], "'extra_steps' must be in (0, 10], got -1"),
        (["--wrong-shift", "0"], "'wrong_shift' must not be 0"),
        (["--ood", "max_length"], "--ood expects KEY=VALUE"),
        (["--metric", "bleu"], "invalid choice"),
    ],
)
def test_bad_options_are_one_line_and_status_2(argv, line, capsys, tmp_path):
    from harness.cli import main

    try:
        status = main(["supervision", "--output", str(tmp_path / "out"), *argv])
    except SystemExit as stop:  # argparse's own refusals (a choice not offered)
        status = stop.code
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("attentionspan supervision: error:")
    assert line in err
    assert not (tmp_path / "out").exists()  # refused before any work
