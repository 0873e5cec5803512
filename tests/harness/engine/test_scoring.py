"""The scoring engine's shared rules: model shape, length rule, answers, texts, eval mode,
processes, and the batch loop."""

from __future__ import annotations

import string

import pytest

from harness.engine.scoring import (
    LengthRule,
    Processes,
    Scorer,
    answer_text,
    check_texts,
    eval_mode,
    max_new_tokens,
    model_shape,
    token_accuracy,
)
from harness.foundation.tokenization import CharTokenizer, make_char_tokenizer


@pytest.fixture(scope="module")
def char_tok():
    return CharTokenizer(make_char_tokenizer(string.printable))


def test_model_shape_reads_the_text_config_of_a_gemma3_style_config():
    """A multimodal config keeps layers and heads in `text_config`; a text config holds them
    itself: both give the language model's shape (capture and heads used to differ)."""
    from transformers import Gemma3Config, Gemma3TextConfig, LlamaConfig

    text = Gemma3TextConfig(
        num_hidden_layers=3, num_attention_heads=5, num_key_value_heads=1, hidden_size=40
    )
    assert model_shape(Gemma3Config(text_config=text.to_dict())) == (3, 5)
    assert model_shape(text) == (3, 5)
    llama = LlamaConfig(num_hidden_layers=2, num_attention_heads=4)
    assert model_shape(llama) == (2, 4)

    class Model:  # anything with a .config
        config = Gemma3Config(text_config=text.to_dict())

    assert model_shape(Model()) == (3, 5)


def test_length_rule_is_the_tasks_length_bucket():
    from attentionspan_datasets.generation import resolve_config
    from attentionspan_datasets.splits import split_instance

    rule = LengthRule()
    for name in ("reversal_ood", "t3_id"):
        x = split_instance(name, split="test", index=2)
        assert rule(x) == resolve_config(name).length_bucket(x.params) == x.params["length"]


def test_answer_is_cut_at_target_length_plus_one(char_tok):
    from attentionspan_datasets.tasks.base import Instance
    from harness.foundation.data import PromptConfig
    from harness.foundation.tokenization import Encoding  # noqa: F401  (the type encode returns)

    x = Instance("string_reversal", "abc=", "cba", [[2], [1], [0]], {"length": 3})
    enc = PromptConfig().encode(char_tok, x)
    ids = [char_tok.tokenizer.convert_tokens_to_ids(c) for c in "cbaXYZ"]
    assert answer_text(char_tok, ids, enc) == "cbaX"
    assert max_new_tokens([enc]) == 4
    assert token_accuracy([True, False, True, True]) == 0.75
    assert token_accuracy([]) == 1.0


def test_check_texts_names_the_character(char_tok):
    from attentionspan_datasets.tasks.base import Instance

    bad = Instance("string_reversal", "ab\u00e9=", "\u00e9ba", [[2], [1], [0]], {"length": 3})
    with pytest.raises(ValueError, match="\u00e9"):
        check_texts(char_tok, [bad])


def test_eval_mode_restores_training_mode():
    import torch

    model = torch.nn.Linear(2, 2)
    model.train()
    with pytest.raises(RuntimeError):
        with eval_mode(model):
            assert not model.training
            raise RuntimeError("inside")
    assert model.training


def test_processes_alone_share_everything_and_gather_nothing():
    procs = Processes.of(None)
    assert (procs.world, procs.rank, procs.main) == (1, 0, True)
    assert procs.share(7) == range(0, 7)
    records = {"a": [{"index": 2}, {"index": 1}]}
    assert procs.gather(records) is records
    assert procs.gather_list([3, 1]) == [3, 1]
    assert Processes("cpu").device.type == "cpu"


def test_processes_is_re_exported_where_it_was():
    from harness.pipeline.reproduce import Processes as Old

    assert Old is Processes


def test_scorer_runs_batches_in_order_and_checks_texts_first(char_tok):
    import torch

    from attentionspan_datasets.tasks.base import Instance

    model = torch.nn.Linear(2, 2)
    model.train()
    xs = [
        Instance("string_reversal", f"{c}b=", f"b{c}", [[1], [0]], {"length": 2}, index=i)
        for i, c in enumerate("abcde")
    ]
    scorer = Scorer(model, char_tok, batch_size=2)
    seen = []
    out = scorer.run(xs, lambda chunk, encs: [x.index for x in chunk], seen.append)
    assert out == [[0, 1], [2, 3], [4]] and seen == [2, 2, 1] and model.training
    bad = [*xs, Instance("string_reversal", "\u00e9=", "\u00e9", [[0]], {"length": 1})]
    calls = []
    with pytest.raises(ValueError):
        scorer.run(bad, lambda chunk, encs: calls.append(1))
    assert not calls  # nothing ran before the check
    with pytest.raises(ValueError, match="batch_size"):
        Scorer(model, char_tok, batch_size=0)
