"""`attentionspan attention`: the files it writes from a tiny model folder, one-line errors
for bad input, and (slow) two processes under `accelerate launch` giving the one-process
results."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from tests.harness.launch import ACCELERATE_TWO_CPU_PROCESSES

REPO = Path(__file__).resolve().parents[2]
CONFIGS = ["reversal_id", "reversal_ood"]


def test_writes_json_markdown_and_figures(tiny_model_dirs, tmp_path, capsys):
    out = tmp_path / "attention"
    model = str(tiny_model_dirs["gemma3"])  # GQA and sliding windows through capture
    code = main(
        [
            "attention",
            "--model",
            model,
            "--configs",
            *CONFIGS,
            "-n",
            "5",
            "--batch-size",
            "3",
            "--instruction",
            "Reverse the string.",
            "--output",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "| reversal_ood | teacher-forced |" in printed and "| free-running |" in printed
    document = json.loads((out / "attention.json").read_text())
    for name in CONFIGS:
        config = document["configs"][name]
        for block in (config, config["generate"]):
            rollout = block["rollout"]
            assert rollout["correct"]["n"] + rollout["error"]["n"] > 0
            assert {"mean", "n"} <= set(rollout["error"]) and "welch_p" in rollout
            assert len(block["heads"]) == 2 and len(block["heads"][0]) == 4
        assert set(config["by_length"]) and config["instances"] == 5
    settings = document["settings"]
    assert settings["prompt_config"]["instruction"] == "Reverse the string."
    assert "--instruction 'Reverse the string.'" in settings["command"]
    assert "--score-convention paper" in settings["command"]  # said, though the default
    assert settings["score_convention"] == "paper"
    for name in document["figures"]:
        assert (out / name).read_bytes().startswith(b"\x89PNG")
    assert {"heads.png", "scores.png", "heads-generate.png"} <= set(document["figures"])
    table = (out / "attention.md").read_text()
    assert "attn score (correct)" in table and "0.0455" in table  # the paper's number beside
    # The viewer: linked, and its scores are attention.json's (the same 5 instances per config).
    assert "[attention.html](attention.html)" in table
    page = (out / "attention.html").read_text()
    found = re.search(r'id="viewer-data">(.*?)</script>', page, re.S)
    data = json.loads(found.group(1))
    assert len(data["instances"]) == 10
    for name in CONFIGS:
        rollout = document["configs"][name]["rollout"]
        for group, right in (("correct", True), ("error", False)):
            values = [
                score
                for inst in data["instances"]
                if inst["config"] == name
                for score, ok in zip(
                    inst["settings"]["baseline"]["scores"], inst["settings"]["baseline"]["correct"]
                )
                if score is not None and ok == right
            ]
            assert len(values) == rollout[group]["n"]
            if values:
                assert sum(values) / len(values) == pytest.approx(rollout[group]["mean"], abs=1e-6)


def test_the_authors_convention_end_to_end(tiny_model_dirs, tmp_path):
    """`--score-convention authors` on a tiny model: attention.json's correct and wrong
    means are those of `scores.rollout_scores(..., "authors")` computed by hand on the same
    batches (every answer row and the EOS row); the convention is in the settings, stated
    in attention.md, and the command written there parses back to it."""
    import argparse
    import shlex

    import torch

    from harness.attention.analysis import load_instances
    from harness.commands.attention import add_arguments
    from harness.engine.inference import collate_left, teacher_forced_batch
    from harness.foundation.data import PromptConfig
    from harness.foundation.models import load_model
    from harness.foundation.tokenization import CharTokenizer
    from tests.harness.attention_models import authors_shares_by_hand

    out = tmp_path / "authors"
    model_dir = str(tiny_model_dirs["llama"])
    argv = ["--model", model_dir, "--configs", "reversal_ood", "-n", "5", "--batch-size", "3"]
    argv += ["--modes", "teacher_forced", "--score-convention", "authors"]
    code = main(["attention", *argv, "--viewer-num", "0", "--output", str(out), "--no-progress"])
    assert code == 0
    document = json.loads((out / "attention.json").read_text())
    settings = document["settings"]
    assert settings["score_convention"] == "authors"
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    words = shlex.split(settings["command"])
    assert words[:2] == ["attentionspan", "attention"]
    assert parser.parse_args(words[2:]).score_convention == "authors"
    text = (out / "attention.md").read_text()
    assert "Score convention: authors (their released code)" in text
    assert settings["command"] in text

    model, tokenizer = load_model(model_dir)
    char_tok = CharTokenizer(tokenizer)
    prompt = PromptConfig(**settings["prompt_config"])
    chunk = load_instances("reversal_ood", 5, settings["seed"], "test")
    groups = {True: [], False: []}
    for first in range(0, 5, 3):
        part = chunk[first : first + 3]
        encodings = [prompt.encode(char_tok, x) for x in part]
        batch = collate_left(encodings, char_tok.pad_id)
        shares = authors_shares_by_hand(model, batch, [x.task for x in part])
        forced = teacher_forced_batch(model, char_tok, encodings)
        for b in range(len(part)):
            rights = [*forced.correct[b], forced.eos_correct[b]]  # the EOS row is a token
            for i, right in enumerate(rights):
                groups[right].append(float(shares[b, batch.prompt_width - 1 + i]))
    rollout = document["configs"]["reversal_ood"]["rollout"]
    assert document["configs"]["reversal_ood"]["tokens"] == sum(len(x.target) + 1 for x in chunk)
    assert rollout["empty"] == 0  # the authors score every row, 0 without a reference
    for group, right in (("correct", True), ("error", False)):
        assert rollout[group]["n"] == len(groups[right])
        if groups[right]:
            mean = float(torch.tensor(groups[right], dtype=torch.float64).mean())
            assert rollout[group]["mean"] == pytest.approx(mean, abs=1e-6)
    assert 0.0 in groups[False] or 0.0 in groups[True]  # the EOS rows, scored 0


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--configs", "reversal_idd"], "reversal_idd"),
        (["--configs", "reversal_id", "-n", "0"], "-n/--num must be >= 1"),
    ],
)
def test_bad_arguments_are_one_line(tiny_model_dirs, argv, message, capsys):
    code = main(["attention", "--model", str(tiny_model_dirs["llama"]), *argv, "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attentionspan attention: error:")
    assert message in err[0]


@pytest.mark.parametrize("command", ["attention", "reproduce"])
def test_a_bad_score_convention_is_one_line_naming_the_allowed_values(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--model", "m", "--score-convention", "author"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"attentionspan {command}: error: ")
    assert (
        "--score-convention: invalid choice: 'author' (choose from 'paper', 'authors')" in (err[0])
    )
    # The Python API refuses it the same way, naming the field and the allowed values.
    from harness.attention.analysis import AnalysisConfig
    from harness.pipeline.settings import ReproduceConfig

    for make in (AnalysisConfig, lambda **kw: ReproduceConfig(model="m", **kw)):
        with pytest.raises(ValueError, match="score convention must be one of paper, authors"):
            make(score_convention="Paper")


def test_a_model_that_is_not_a_causal_lm_is_one_line(tmp_path, capsys):
    from transformers import DistilBertConfig

    DistilBertConfig(dim=32, n_layers=1, n_heads=2, hidden_dim=32).save_pretrained(
        tmp_path / "encoder"
    )
    code = main(["attention", "--model", str(tmp_path / "encoder"), "--configs", "reversal_id"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "not a causal language model" in err[0]
    code = main(["attention", "--model", str(tmp_path / "missing"), "--configs", "reversal_id"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "does not exist" in err[0]


@pytest.mark.slow
def test_two_processes_give_the_one_process_results(tiny_model_dirs, tmp_path):
    model = str(tiny_model_dirs["llama"])
    common = [
        "--model",
        model,
        "--configs",
        *CONFIGS,
        "-n",
        "7",
        "--batch-size",
        "3",
        "--no-progress",
    ]
    assert main(["attention", *common, "--output", str(tmp_path / "one")]) == 0
    two = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            *ACCELERATE_TWO_CPU_PROCESSES,
            "-m",
            "harness.commands.attention",
            *common,
            "--output",
            str(tmp_path / "two"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert two.returncode == 0, two.stderr[-3000:]
    assert "on 2 process(es)" in two.stdout
    one, other = (json.loads((tmp_path / d / "attention.json").read_text()) for d in ("one", "two"))
    for name in CONFIGS:
        a, b = one["configs"][name], other["configs"][name]
        a.pop("seconds"), b.pop("seconds")
        assert _close(a, b)  # the batches differ (padding), so equal up to float noise
    assert sorted(one["figures"]) == sorted(other["figures"])


def _close(a, b, tol=1e-5) -> bool:
    """Equal up to float noise (a batch of different rows rounds differently)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        return all(_close(a[k], b[k], tol) for k in a)
    if isinstance(a, list):
        assert len(a) == len(b)
        return all(_close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=tol, abs=tol)
        return True
    assert a == b
    return True
