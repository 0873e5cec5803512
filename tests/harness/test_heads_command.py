"""`attentionspan heads`: where heads.json goes (where the user
asked; never into the model's folder, which may be read-only or shared)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from harness.cli import main


def _run(model, *extra):
    return main(
        ["heads", "--model", str(model), "--config", "reversal_id", "-n", "2", "--no-progress"]
        + list(extra)
    )


@pytest.fixture
def read_only_model(tiny_model_dirs, tmp_path):
    import shutil

    model = shutil.copytree(tiny_model_dirs["llama"], tmp_path / "model")
    before = sorted(os.listdir(model))
    model.chmod(stat.S_IRUSR | stat.S_IXUSR)
    yield model, before
    model.chmod(stat.S_IRWXU)


def test_the_default_output_is_heads_json_in_the_current_folder(
    read_only_model, tmp_path, monkeypatch, capsys
):
    model, before = read_only_model
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert _run(model) == 0
    out = capsys.readouterr().out
    ranking = json.loads((work / "heads.json").read_text())
    assert ranking["source"]["config"] == "reversal_id"
    assert sorted(os.listdir(model)) == before  # the model's folder is not written
    assert out.rstrip().endswith("heads.json)")


def test_output_names_the_file(tiny_model_dirs, tmp_path, capsys):
    target = tmp_path / "rankings" / "ref1.json"
    assert _run(tiny_model_dirs["llama"], "--shift", "1", "--output", str(target)) == 0
    assert json.loads(target.read_text())["source"]["config"] == "reversal_id"
    assert not (tiny_model_dirs["llama"] / "heads.json").exists()
    assert str(target) in capsys.readouterr().out


def test_help_says_where_heads_json_goes(capsys):
    with pytest.raises(SystemExit):
        main(["heads", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "heads.json in the current folder" in text and "never the model's folder" in text
