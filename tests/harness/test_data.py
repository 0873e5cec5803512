"""harness.foundation.data: indexed sources, shares per process, resumable order, collation and the
dense reference masks built per batch."""

from __future__ import annotations

import pytest
import torch

from attentionspan_datasets import generate, iter_instances
from attentionspan_datasets.splits import split_instance, split_of
from harness.foundation.data import (
    DatasetSource,
    GeneratorSource,
    PromptConfig,
    collate,
    instance_from_row,
    shard_indices,
    training_indices,
)
from harness.foundation.tokenization import IGNORE_INDEX, CharTokenizer, encode_instance


@pytest.mark.parametrize("count,world", [(10, 1), (10, 2), (7, 2), (5, 3), (1, 2)])
def test_shards_cover_the_range_once(count, world):
    shares = [shard_indices(3, count, world, rank) for rank in range(world)]
    assert [i for share in shares for i in share] == list(range(3, 3 + count))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_training_order_survives_a_resume_and_splits_between_processes():
    def take(iterator, n):
        return [list(next(iterator)) for _ in range(n)]

    full = take(training_indices(0, 4, 1, 0), 6)
    assert full[3:] == take(training_indices(12, 4, 1, 0), 3)
    two = [take(training_indices(0, 2, 2, rank), 3) for rank in range(2)]
    # Two processes with batch 2 see, step by step, what one process with batch 4 sees.
    assert [a + b for a, b in zip(*two)] == full[:3]


def test_generator_source_is_the_generator():
    source = GeneratorSource("reversal_id", seed=5, split="train", size=3)
    assert source[2] == split_instance("reversal_id", seed=5, split="train", index=2)
    assert source[2].config == "reversal_id" and source[2].index == 2
    assert len(source) == 3
    with pytest.raises(IndexError):
        source[3]
    with pytest.raises(
        ValueError, match="unknown config 'reversal_idd' .*; allowed: .*reversal_id"
    ):
        GeneratorSource("reversal_idd")
    with pytest.raises(ValueError, match="split must be one of train, validation, test"):
        GeneratorSource("reversal_id", split="fewshot")


def test_rows_of_the_data_contract_become_instances(tmp_path):
    import json

    from datasets import Dataset

    instances = list(iter_instances("reversal_ood", stop=4))
    rows = [{**x.to_dict(), "params": json.dumps(x.params)} for x in instances]
    assert [instance_from_row(r) for r in rows] == instances
    source = DatasetSource(Dataset.from_list(rows))
    assert len(source) == 4 and source[3] == instances[3]


def test_fewshot_examples_are_fixed_and_from_their_own_stream():
    prompt = PromptConfig(num_fewshot=2, instruction="Reverse.")
    instance = split_instance("reversal_id", split="test", index=4)
    shots = prompt.fewshot_for(instance)
    assert shots == prompt.fewshot_for(instance) and len(shots) == 2
    assert shots[0] == split_instance("reversal_id", split="fewshot", index=8)
    assert all(split_of(x.prompt) == "train" for x in shots)  # never a test prompt
    with pytest.raises(ValueError, match="num_fewshot"):
        PromptConfig(num_fewshot=-1)


@pytest.mark.parametrize("side", ["left", "right"])
def test_collate_pads_and_shifts_masks(side, char_tokenizer):
    char_tok = CharTokenizer(char_tokenizer)
    instances = [generate("reversal_id", index=i) for i in range(6)]
    encodings = [encode_instance(char_tok, x, instruction="Rev") for x in instances]
    batch = collate(encodings, char_tok.pad_id, padding_side=side, masks=True)
    length = max(len(e.input_ids) for e in encodings)
    assert batch["input_ids"].shape == (6, length)
    mask = batch["reference_mask"]
    assert mask.shape == (6, length, length) and mask.dtype == torch.bool
    for b, (x, enc) in enumerate(zip(instances, encodings)):
        row = batch["attention_mask"][b]
        real = row.nonzero().flatten().tolist()
        assert batch["input_ids"][b, real].tolist() == enc.input_ids
        assert (real[0] == 0) if side == "right" else (real[-1] == length - 1)
        assert batch["position_ids"][b, real].tolist() == list(range(len(enc.input_ids)))
        labels = batch["labels"][b]
        assert labels[row == 0].eq(IGNORE_INDEX).all()
        start = int(batch["target_start"][b])
        assert batch["input_ids"][b, start : start + len(x.target)].tolist() == (
            char_tok.encode_chars(x.target)
        )
        for i, ref in enumerate(x.reference):
            query = start + i - 1  # predicts target[i]
            keys = mask[b, query].nonzero().flatten().tolist()
            assert [char_tok.decode([batch["input_ids"][b, k]]) for k in keys] == [
                x.text[p] for p in sorted(ref)
            ]
        assert int(mask[b].sum()) == sum(len(r) for r in x.reference)
    with pytest.raises(ValueError, match="padding_side"):
        collate(encodings, 0, padding_side="middle")


def test_a_dataset_without_the_contract_s_columns_is_named_with_the_expected_ones():
    from datasets import Dataset

    from harness.foundation.data import check_columns

    with pytest.raises(ValueError) as caught:
        DatasetSource(Dataset.from_list([{"question": "ab", "answer": "ba"}]), "--dataset 'q'")
    message = str(caught.value)
    assert message.startswith("--dataset 'q' lacks the column(s) task, prompt, target, reference")
    assert "it has: question, answer" in message and "optional: config, index, params" in message
    typed = Dataset.from_list([{"task": "t", "prompt": 12, "target": "x", "reference": [[0]]}])
    with pytest.raises(ValueError, match="column 'prompt' holds int64 values, expected string"):
        check_columns(typed)
    flat = Dataset.from_list([{"task": "t", "prompt": "a", "target": "x", "reference": [0]}])
    with pytest.raises(ValueError, match="'reference' holds list of int64 values, expected list"):
        check_columns(flat)
    empty = Dataset.from_dict({"task": [], "prompt": [], "target": [], "reference": []})
    with pytest.raises(ValueError, match="the dataset has no rows"):
        DatasetSource(empty)


@pytest.mark.parametrize(
    "change,message",
    [
        ({"prompt": None}, "column 'prompt' must be a string, got NoneType None"),
        ({"target": 5}, "column 'target' must be a string, got int 5"),
        ({"reference": [[0, -1]]}, "column 'reference' must be a list of lists of positions"),
        ({"reference": "0"}, "column 'reference' must be a list of lists"),
        ({"params": "{torn"}, "column 'params': not valid JSON"),
        ({"params": "DEEP"}, "column 'params': nested more than 100"),  # json recursed
        ({"params": "[1]"}, "column 'params' must be a JSON object"),
        ({"index": "3"}, "column 'index' must be an integer, got '3'"),
    ],
)
def test_a_row_of_the_wrong_types_is_named(change, message):
    if change.get("params") == "DEEP":  # built here: a 200,000-character test id otherwise
        change = {"params": "[" * 100_000 + "]" * 100_000}
    row = {**generate("reversal_id").to_dict(), **change}
    with pytest.raises(ValueError, match=f"row 7: {message}".replace("(", r"\(")):
        instance_from_row(row, "row 7")
    del row["task"]
    with pytest.raises(ValueError, match="row 7 has no column.*'task'; expected: task, prompt"):
        instance_from_row(row, "row 7")


def test_source_text_reads_the_rows_and_their_fewshot_examples():
    from datasets import Dataset

    from harness.foundation.data import source_text

    rows = [{**x.to_dict(), "params": "{}"} for x in iter_instances("addition_id", stop=3)]
    source = DatasetSource(Dataset.from_list(rows), "--dataset 'd'")
    assert set(source_text(source)) == {c for x in rows for c in x["prompt"] + x["target"]}
    generated = GeneratorSource("reversal_id", size=2)
    assert source_text(generated) == "".join(sorted(set(generated[0].text + generated[1].text)))
    foreign = [{**rows[0], "config": "", "task": "nope"}]
    fewshot = PromptConfig(num_fewshot=1)
    with pytest.raises(ValueError, match=r"--dataset 'd', row 0: its few-shot examples .*'nope'"):
        source_text(DatasetSource(Dataset.from_list(foreign), "--dataset 'd'"), fewshot)
    source_text(DatasetSource(Dataset.from_list(foreign), "--dataset 'd'"))  # no shots: fine
