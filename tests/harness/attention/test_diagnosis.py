"""Where the model looks when it errs: the row rule on shares whose class is known exactly,
the displaced answer through the tasks' own oracles, and the whole pass against attention
read by hand from transformers' eager `output_attentions`."""

from __future__ import annotations

import pytest

from attentionspan_datasets.splits import iter_split
from attentionspan_datasets.tasks.base import Instance
from harness.attention import diagnosis
from harness.attention.diagnosis import classify_row, displaced_answer, forced_instance
from harness.engine.scoring import Scorer
from tests.harness.attention_models import build_tiny


def reversal(chars: str, index: int = 0) -> Instance:
    n = len(chars)
    return Instance(
        "string_reversal",
        chars + "=",
        chars[::-1],
        [[n - 1 - i] for i in range(n)],
        {"length": n},
        "",
        index,
    )


def never(_offset):
    raise AssertionError("the displaced answer is read only for a dominant wrong key")


def test_a_row_on_its_reference_is_on_reference_whatever_it_wrote():
    shares = {0: 0.1, 1: 0.1, 2: 0.8}
    assert classify_row(shares, [2], 0, "x", never) == ("on_reference", True)
    # several reference keys count together: 0.3 + 0.3 >= 0.5 though no single key does
    shares = {0: 0.3, 1: 0.3, 2: 0.2, 3: 0.2}
    assert classify_row(shares, [0, 1], 0, "x", never) == ("on_reference", True)


def test_the_shift_moves_the_keys_that_count():
    shares = {0: 0.1, 1: 0.1, 2: 0.1, 3: 0.7}
    assert classify_row(shares, [2], 1, "x", never)[0] == "on_reference"  # reads ref+1
    # at shift 0 key 3 is a wrong key: its offset from the reference (2) is +1
    offsets = []
    kind, first = classify_row(shares, [2], 0, "q", lambda k: offsets.append(k) or "q")
    assert (kind, first, offsets) == ("misdirected", False, [1])


def test_a_dominant_wrong_key_whose_result_was_not_written_is_elsewhere():
    shares = {0: 0.6, 1: 0.2, 2: 0.2}
    assert classify_row(shares, [2], 0, "x", lambda k: "y") == ("elsewhere", False)
    assert classify_row(shares, [2], 0, "x", lambda k: None) == ("elsewhere", False)


def test_no_key_standing_out_is_diffuse_and_says_whether_the_reference_led():
    shares = {0: 0.2, 1: 0.2, 2: 0.35, 3: 0.25}
    assert classify_row(shares, [2], 0, "x", never) == ("diffuse", True)
    assert classify_row(shares, [3], 0, "x", never) == ("diffuse", False)
    # the dominance threshold decides: at 0.3 the reference's 0.35 is enough
    assert classify_row(shares, [2], 0, "x", never, dominance=0.3)[0] == "on_reference"


def test_displaced_answer_is_the_oracle_on_the_moved_keys():
    x = reversal("abcd")  # "abcd=" -> "dcba"; row i reads key 3 - i
    assert displaced_answer(x, x.text, 0, 0) == "d"
    assert displaced_answer(x, x.text, 0, -1) == "c"  # key 2
    assert displaced_answer(x, x.text, 1, 2) == "="
    assert displaced_answer(x, x.text, 3, -1) is None  # key -1: off the text
    # addition: the answer is not at the reference; the oracle computes on the moved digits
    add = next(iter_split("addition_id", split="test", stop=1))
    for row in range(len(add.target)):
        assert displaced_answer(add, add.text, row, 0) == add.target[row]


def test_forced_instance_keeps_the_gold_length():
    x = reversal("abcd")
    assert forced_instance(x, "dcbaXX").target == "dcba"
    assert forced_instance(x, "dz").target == "dzba"
    assert forced_instance(x, "dz").reference == x.reference


def test_dominance_is_checked():
    with pytest.raises(ValueError, match="dominance"):
        diagnosis.check_dominance(0)
    with pytest.raises(ValueError, match="dominance"):
        diagnosis.check_dominance(1.5)


def by_hand(model, tokenizer, instance, prediction, heads, shift, dominance):
    """The classes of one instance's wrong rows from eager output_attentions, unbatched."""
    import torch

    from harness.tokenization import CharTokenizer, encode_instance

    forced = forced_instance(instance, prediction)
    enc = encode_instance(CharTokenizer(tokenizer), forced)
    with torch.no_grad():
        out = model(torch.tensor([enc.input_ids]), output_attentions=True)
    task_cols = [enc.position(p) for p in range(len(forced.text))]
    kinds = []
    for i in range(min(len(instance.target), len(prediction))):
        if prediction[i] == instance.target[i]:
            continue
        query = enc.target_offset + i - 1
        row = torch.stack([out.attentions[la][0, h, query] for la, h in heads]).mean(0)
        cols = [c for c in task_cols if c <= query]
        total = float(row[cols].sum())
        shares = {p: float(row[enc.position(p)]) / total for p in range(len(forced.text))}
        shares = {p: s for p, s in shares.items() if enc.position(p) <= query}
        kinds.append(
            classify_row(
                shares,
                instance.reference[i],
                shift,
                forced.text[len(instance.prompt) + i],
                lambda k, i=i: displaced_answer(instance, forced.text, i, k),
                dominance,
            )[0]
        )
    return kinds


@pytest.mark.parametrize("shift", [0, 1])
def test_where_errors_look_matches_attention_read_by_hand(attn_tokenizer, shift):
    model = build_tiny("llama", attn_tokenizer)
    instances = list(iter_split("reversal_ood", split="validation", stop=6, max_length=14))
    # answers with known wrong rows: the gold answer with some characters replaced, and one
    # cut short (rows past its end were never written)
    predictions = [
        x.target[:2] + "9" + x.target[3:] if k % 2 else "0" * len(x.target)
        for k, x in enumerate(instances)
    ]
    predictions[-1] = predictions[-1][:3]
    records = [{"index": x.index, "prediction": p} for x, p in zip(instances, predictions)]
    heads = [(0, 1), (1, 2)]
    scorer = Scorer(model, attn_tokenizer, batch_size=4)
    found = diagnosis.where_errors_look(
        scorer, instances, records, heads, shift=shift, dominance=0.2
    )
    expected = [
        by_hand(model, attn_tokenizer, x, p, heads, shift, 0.2)
        for x, p in zip(instances, predictions)
    ]
    expected = [kinds for kinds in expected if kinds]
    assert found["instances"] == len(expected)
    assert found["tokens"] == sum(len(k) for k in expected)
    counts = {c: sum(k.count(c) for k in expected) for c in diagnosis.CLASSES}
    assert found["token_counts"] == counts
    assert sum(v > 0 for v in counts.values()) >= 3  # the rows here exercise the classes
    for c in diagnosis.CLASSES:
        mean = sum(k.count(c) / len(k) for k in expected) / len(expected)
        assert found["shares"][c] == pytest.approx(mean)
    assert sum(found["shares"].values()) == pytest.approx(1.0)


def test_a_record_missing_for_an_instance_is_refused(attn_tokenizer):
    model = build_tiny("llama", attn_tokenizer)
    x = next(iter_split("reversal_ood", split="validation", stop=1))
    with pytest.raises(ValueError, match="no record"):
        diagnosis.where_errors_look(Scorer(model, attn_tokenizer), [x], [], [(0, 0)])
