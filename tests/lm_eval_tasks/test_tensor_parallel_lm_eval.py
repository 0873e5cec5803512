"""`attnspan-hf` with lm-eval's own tensor parallelism (`tp_plan=auto` in --model_args,
under `torchrun --nproc-per-node 2` on the CPU, gloo): the attention metrics (and the
answers' scores) of the model sharded by heads equal the whole model's, within 1e-6 (the
sharded matmuls and the all-reduce round differently: tests/harness/test_tensor_parallel.py);
a family without a plan, or heads the processes do not divide, is refused in one line."""

from __future__ import annotations

import json

import pytest

lm_eval = pytest.importorskip("lm_eval")

from lm_eval_tasks.models import AttnspanHFLM  # noqa: E402
from tests.harness.test_tensor_parallel import torchrun  # noqa: E402
from tests.lm_eval_tasks.tensor_parallel_lm_eval import metrics  # noqa: E402
from tests.lm_eval_tasks.test_parallelize import model_dir, same  # noqa: E402, F401


@pytest.mark.slow
def test_sharded_by_heads_gives_the_whole_models_attention_metrics(model_dir, tmp_path):  # noqa: F811
    whole = AttnspanHFLM(pretrained=model_dir, device="cpu", batch_size=4, attention=True)
    expected = metrics(whole)
    assert "ref_share" in expected and "ref_share_best_head" in expected
    torchrun("-m", "tests.lm_eval_tasks.tensor_parallel_lm_eval", str(tmp_path), model_dir)
    assert same(json.loads((tmp_path / "metrics.json").read_text()), expected)


def test_what_cannot_be_sharded_is_refused_before_loading(model_dir, tmp_path, monkeypatch):  # noqa: F811
    from transformers import GPT2LMHeadModel

    from tests.lm_eval_tasks.conftest import make_char_tokenizer
    from tests.tiny_models import tiny_config

    with pytest.raises(ValueError, match=r"tp_plan must be one of \('auto',\), got 'rows'"):
        AttnspanHFLM(pretrained=model_dir, tp_plan="rows")
    tokenizer = make_char_tokenizer()
    GPT2LMHeadModel(tiny_config("gpt2", tokenizer)).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="'gpt2' has no tensor-parallel plan .* without tp_plan"):
        AttnspanHFLM(pretrained=str(tmp_path), tp_plan="auto")
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(ValueError, match="2 attention heads per layer cannot be split over 3"):
        AttnspanHFLM(pretrained=model_dir, tp_plan="auto")


@pytest.mark.slow
def test_the_cli_logs_each_line_once_under_torchrun(model_dir, tmp_path):  # noqa: F811
    """Every process runs lm-eval's CLI; the other processes' INFO lines are off."""
    done = torchrun(
        "-m", "lm_eval", "--model", "attnspan-hf", "--model_args",
        f"pretrained={model_dir},tp_plan=auto", "--tasks", "attnspan_reversal_id",
        "--limit", "2", "--gen_kwargs", "max_gen_toks=8",
    )  # fmt: skip
    info = [line.split(" ", 1)[1] for line in done.stderr.splitlines() if " INFO " in line]
    assert info and len(info) == len(set(info)), info  # no line twice (one per process)
