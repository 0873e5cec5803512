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
    """No key would make the model write what it wrote."""
    return None


def test_a_row_on_its_reference_is_on_reference_whatever_it_wrote():
    shares = {0: 0.1, 1: 0.1, 2: 0.8}
    assert classify_row(shares, [2], 0, "x", never) == "on_reference"
    # several reference keys count together: 0.3 + 0.3 >= 0.5 though no single key does
    shares = {0: 0.3, 1: 0.3, 2: 0.2, 3: 0.2}
    assert classify_row(shares, [0, 1], 0, "x", never) == "on_reference"


def test_with_a_level_on_reference_means_as_much_as_where_the_model_works():
    shares = {0: 0.05, 1: 0.05, 2: 0.9}
    # ID level 0.93: 0.9 is within 5% of it (0.8835 or more) ...
    assert classify_row(shares, [2], 0, "x", never, mass=0.9, level=0.93) == "on_reference"
    # ... 0.85 is not: the reference still leads, weaker than where the model works
    assert classify_row(shares, [2], 0, "x", never, mass=0.85, level=0.93) == "diluted"
    # a low level (a head that looks there rarely) is met by a low weight
    low = {0: 0.4, 1: 0.45, 2: 0.15}
    assert classify_row(low, [2], 0, "x", never, mass=0.15, level=0.1) == "on_reference"
    assert classify_row(low, [2], 0, "x", never, mass=0.15, level=0.5) == "diffuse"
    assert classify_row(low, [2], 0, "x", never, mass=0.15, level=0.5, tolerance=0.8) == (
        "on_reference"
    )


def test_the_shift_moves_the_keys_that_count():
    shares = {0: 0.1, 1: 0.1, 2: 0.1, 3: 0.7}
    assert classify_row(shares, [2], 1, "x", never) == "on_reference"  # reads ref+1
    # at shift 0 key 3 is a wrong key: its offset from the reference (2) is +1
    offsets = []
    kind = classify_row(shares, [2], 0, "q", lambda k: offsets.append(k) or "q")
    assert kind == "misdirected" and 1 in offsets


def test_a_dominant_wrong_key_whose_result_was_not_written_is_elsewhere():
    shares = {0: 0.6, 1: 0.2, 2: 0.2}
    assert classify_row(shares, [2], 0, "x", lambda k: "y") == "elsewhere"
    assert classify_row(shares, [2], 0, "x", lambda k: None) == "elsewhere"
    # a dominant wrong key wins over a level the reference weight meets
    assert classify_row(shares, [2], 0, "x", lambda k: "x", mass=0.2, level=0.1) == ("misdirected")


def test_keys_that_would_give_the_written_character_count_together():
    """A slip to a character that sits twice in the text (the prompt and the answer already
    written): 0.49 + 0.49 on its two copies, 0.02 on the reference. No single key holds
    half the row, but both would make the model write what it wrote."""
    shares = {0: 0.49, 7: 0.49, 3: 0.02}
    gives = {-3: "q", 4: "q"}  # key 0 is 3 before the reference (3), key 7 is 4 after
    assert classify_row(shares, [3], 0, "q", gives.get) == "misdirected"
    # the same weights with another written character: no group, and no key dominates
    assert classify_row(shares, [3], 0, "z", gives.get) == "diffuse"
    # keys under MIN_KEY_SHARE are not asked
    asked = []
    classify_row({0: 0.6, 1: 0.395, 2: 0.005}, [1], 0, "q", lambda k: asked.append(k) or "q")
    assert asked == [-1]  # key 0, not key 2


def test_no_key_standing_out_is_diluted_when_the_reference_leads_else_diffuse():
    shares = {0: 0.2, 1: 0.2, 2: 0.35, 3: 0.25}
    assert classify_row(shares, [2], 0, "x", never) == "diluted"
    assert classify_row(shares, [3], 0, "x", never) == "diffuse"
    uniform = {k: 0.25 for k in range(4)}  # a tie is not leading
    assert classify_row(uniform, [2], 0, "x", never) == "diffuse"
    # the dominance threshold decides: at 0.3 the reference's 0.35 is enough
    assert classify_row(shares, [2], 0, "x", never, dominance=0.3) == "on_reference"


def test_uniform_attention_reads_diffuse_whatever_the_references_size():
    """Summed, two reference keys under uniform attention hold twice any other key: the old
    rule read that diluted (addition, successor) where one key reads diffuse (reversal). Per
    key the reference never leads under uniform attention, so both read diffuse."""
    uniform = {k: 0.1 for k in range(10)}
    for reference in ([4], [4, 5], [2, 4, 6]):
        assert classify_row(uniform, reference, 0, "x", never) == "diffuse", reference
        assert classify_row(uniform, reference, 0, "x", never, mass=0.1, level=0.9) == "diffuse"
    # a reference of two keys that leads per key (0.2 each against 0.075) is diluted ...
    leading = {k: 0.075 for k in range(8)} | {8: 0.2, 9: 0.2}
    assert classify_row(leading, [8, 9], 0, "x", never, mass=0.4, level=0.9) == "diluted"
    # ... and one whose sum leads but whose keys do not (0.12 each against 0.13) is diffuse
    summed = {k: 0.095 for k in range(8)} | {8: 0.12, 9: 0.12}
    summed[0] = 0.13
    assert classify_row(summed, [8, 9], 0, "x", never, mass=0.24, level=0.9) == "diffuse"


def test_the_on_reference_test_is_calibrated_so_correct_id_rows_pass():
    """Eight heads whose ID mass varies row to row (each row's mass 0.2-1.0 x the head's mean,
    independently): 95% of its own mean for every head fails most rows where the model works;
    the calibrated threshold passes at least 1 - NULL_QUANTILE of them by construction."""
    import random

    rng = random.Random(0)
    rows = [tuple(0.5 * rng.uniform(0.2, 1.8) for _ in range(8)) for _ in range(400)]
    test = diagnosis.calibrate(rows, diagnosis.DEFAULT_TOLERANCE)
    assert test.looking == tuple(range(8))
    assert test.levels == pytest.approx([sum(r[j] for r in rows) / 400 for j in range(8)])
    old = diagnosis.OnReference(test.levels, test.looking, 1 - diagnosis.DEFAULT_TOLERANCE)
    assert sum(old.passes(r) for r in rows) / len(rows) < 0.05  # the confound
    passed = sum(test.passes(r) for r in rows) / len(rows)
    assert passed >= 1 - diagnosis.NULL_QUANTILE
    assert test.threshold == test.quantile < 1 - diagnosis.DEFAULT_TOLERANCE
    # the same threshold still fails a head that lost most of its weight
    assert not test.passes((0.5,) * 7 + (0.02,))
    # heads whose weight barely varies keep the old rule: within 5% of the mean
    tight = [(0.93 + 0.001 * (k % 3), 0.5) for k in range(100)]
    test = diagnosis.calibrate(tight, diagnosis.DEFAULT_TOLERANCE)
    assert test.threshold == 1 - diagnosis.DEFAULT_TOLERANCE
    assert test.passes((0.9, 0.5)) and not test.passes((0.85, 0.5))
    # a decoy (a head with a level under half the largest) is not a lookup head
    assert diagnosis.calibrate([(0.8, 0.1), (0.8, 0.3)], 0.05).looking == (0,)
    assert diagnosis.calibrate([], 0.05) is None


def test_given_levels_are_the_old_rule():
    """Without ID rows: a level per head (each lookup head within `tolerance` of its own) or
    one level for the heads' mean mass."""
    per_head = diagnosis.given_levels([0.9, 0.1, 0.6], 3, 0.05)
    assert per_head.looking == (0, 2) and per_head.threshold == 0.95
    assert per_head.passes((0.86, 0.0, 0.58)) and not per_head.passes((0.86, 0.0, 0.5))
    pooled = diagnosis.given_levels(0.5, 3, 0.05)
    assert pooled.passes((0.9, 0.0, 0.6)) and not pooled.passes((0.9, 0.0, 0.5))
    assert diagnosis.given_levels(None, 3, 0.05) is None
    with pytest.raises(ValueError, match="one value per head"):
        diagnosis.given_levels([0.5], 3, 0.05)


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


def test_dominance_level_and_tolerance_are_checked(attn_tokenizer):
    with pytest.raises(ValueError, match="dominance"):
        diagnosis.check_dominance(0)
    with pytest.raises(ValueError, match="dominance"):
        diagnosis.check_dominance(1.5)
    model = build_tiny("llama", attn_tokenizer)
    x = next(iter_split("reversal_ood", split="validation", stop=1))
    records = [{"index": x.index, "prediction": ""}]
    for bad in ({"level": 1.5}, {"level": -0.1}, {"tolerance": 1.0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            diagnosis.where_errors_look(
                Scorer(model, attn_tokenizer), [x], records, [(0, 0)], **bad
            )


def by_hand(model, tokenizer, instance, prediction, heads, shift, dominance, level=None):
    """The classes of one instance's wrong rows from eager output_attentions, unbatched."""
    import torch

    from harness.foundation.tokenization import CharTokenizer, encode_instance

    forced = forced_instance(instance, prediction)
    enc = encode_instance(CharTokenizer(tokenizer), forced)
    with torch.no_grad():
        out = model(torch.tensor([enc.input_ids]), output_attentions=True)
    task_cols = [enc.position(p) for p in range(len(forced.text))]
    kinds = []
    rows = [i for i in range(min(len(instance.target), len(prediction)))]
    rows += [len(prediction)] if len(prediction) < len(instance.target) else []
    for i in rows:
        written = prediction[i] if i < len(prediction) else ""  # "": the answer ended
        if written == instance.target[i]:
            continue
        query = enc.target_offset + i - 1
        row = torch.stack([out.attentions[la][0, h, query] for la, h in heads]).mean(0)
        cols = [c for c in task_cols if c <= query]
        total = float(row[cols].sum())
        shares = {p: float(row[enc.position(p)]) / total for p in range(len(forced.text))}
        shares = {p: s for p, s in shares.items() if enc.position(p) <= query}
        keys = [p + shift for p in instance.reference[i]]
        mass = sum(
            float(row[enc.position(k)])
            for k in keys
            if 0 <= k < len(forced.text) and enc.position(k) <= query
        )
        kinds.append(
            classify_row(
                shares,
                instance.reference[i],
                shift,
                written,
                lambda k, i=i: displaced_answer(instance, forced.text, i, k),
                dominance,
                mass=mass,
                level=level,
            )
        )
    return kinds


@pytest.mark.parametrize("shift, level", [(0, None), (1, None), (0, 0.05)])
def test_where_errors_look_matches_attention_read_by_hand(attn_tokenizer, shift, level):
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
        scorer, instances, records, heads, shift=shift, dominance=0.2, level=level
    )
    expected = [
        by_hand(model, attn_tokenizer, x, p, heads, shift, 0.2, level)
        for x, p in zip(instances, predictions)
    ]
    expected = [kinds for kinds in expected if kinds]
    assert found["instances"] == found["tokens"] == len(expected)
    assert found["basis"] == diagnosis.BASIS
    # the verdict's basis: each instance's first wrong row
    firsts = [k[0] for k in expected]
    assert found["token_counts"] == {c: firsts.count(c) for c in diagnosis.CLASSES}
    for c in diagnosis.CLASSES:
        assert found["shares"][c] == pytest.approx(firsts.count(c) / len(firsts))
    assert sum(found["shares"].values()) == pytest.approx(1.0)
    # every wrong row, for the reader
    every = found["all_rows"]
    assert every["tokens"] == sum(len(k) for k in expected)
    counts = {c: sum(k.count(c) for k in expected) for c in diagnosis.CLASSES}
    assert every["token_counts"] == counts
    assert sum(v > 0 for v in counts.values()) >= 3  # the rows here exercise the classes
    for c in diagnosis.CLASSES:
        mean = sum(k.count(c) / len(k) for k in expected) / len(expected)
        assert every["shares"][c] == pytest.approx(mean)


def test_the_diagnosis_forward_keeps_one_column_of_logits(attn_tokenizer, monkeypatch):
    """The diagnosis reads attention only, so its forward computes one column of
    logits (a large vocabulary's output layer over every column cost more than the layers),
    and what it finds is what the forward with every column's logits finds."""
    model = build_tiny("llama", attn_tokenizer)
    instances = list(iter_split("reversal_ood", split="validation", stop=4, max_length=14))
    records = [{"index": x.index, "prediction": "0" * len(x.target)} for x in instances]
    scorer = Scorer(model, attn_tokenizer, batch_size=3)
    kept = []
    handle = model.register_forward_pre_hook(
        lambda module, args, kwargs: kept.append(kwargs.get("logits_to_keep")), with_kwargs=True
    )
    try:
        found = diagnosis.where_errors_look(scorer, instances, records, [(0, 1), (1, 2)])
    finally:
        handle.remove()
    assert kept == [1, 1]  # two batches, one logit column each
    plain = Scorer.forward
    monkeypatch.setattr(Scorer, "forward", lambda self, b, plan, **_: plain(self, b, plan))
    assert diagnosis.where_errors_look(scorer, instances, records, [(0, 1), (1, 2)]) == found


def test_a_record_missing_for_an_instance_is_refused(attn_tokenizer):
    model = build_tiny("llama", attn_tokenizer)
    x = next(iter_split("reversal_ood", split="validation", stop=1))
    with pytest.raises(ValueError, match="no record"):
        diagnosis.where_errors_look(Scorer(model, attn_tokenizer), [x], [], [(0, 0)])


# What each planted mechanism's errors must look like (tests/planted.py builds them).
PLANTED = {
    "dilution": "diluted",  # the right key still leads, below its ID weight
    "slip": "misdirected",  # one alias key holds the row, and its character is written
    "no_lookup": "diffuse",  # uniform attention: nothing stands out
    "downstream": "on_reference",  # the lookup is right, the readout breaks
}


@pytest.mark.parametrize("null", [False, True])
@pytest.mark.parametrize("shift", [0, 1])
@pytest.mark.parametrize("mechanism", sorted(PLANTED))
def test_planted_mechanisms_err_where_they_were_built_to(mechanism, shift, null):
    """Calibration on models whose truth is known: the ranking's top head, at the ranking's
    shift, with the level the ranking measured in distribution (or, `null`, calibrated on
    the correct ID rows as the pipeline reads it), classifies most wrong tokens of each
    planted mechanism as what it was built to do, and with the null the kind exceeds its
    share of the correct ID rows."""
    from harness.attention.heads import rank_heads
    from harness.attention.interventions import score_settings
    from harness.attention.sweep import BASELINE
    from tests.planted import build

    model, tokenizer, ids, ood, truth = build(mechanism, shift)
    ranking = rank_heads(model, tokenizer, ids, shift=shift, batch_size=16)
    heads = ranking.top(1)
    records = score_settings(model, tokenizer, ood, [BASELINE], None, batch_size=16)
    options = {"level": diagnosis.id_level(ranking, heads, shift)}
    if null:
        id_records = score_settings(model, tokenizer, ids, [BASELINE], None, batch_size=16)
        options = {"id_rows": (ids, id_records["baseline"])}
    found = diagnosis.where_errors_look(
        Scorer(model, tokenizer, batch_size=16),
        ood,
        records["baseline"],
        heads,
        shift=shift,
        **options,
    )
    shares = found["shares"]
    assert max(shares, key=shares.get) == PLANTED[mechanism], shares
    assert shares[PLANTED[mechanism]] >= 0.6, shares
    if null and PLANTED[mechanism] != "on_reference":
        excess = shares[PLANTED[mechanism]] - found["null"]["id"]["shares"][PLANTED[mechanism]]
        assert excess >= 0.5, (shares, found["null"])


def masses_by_hand(model, tokenizer, instance, prediction, heads, shift):
    """Each head's plain weight on the shifted reference, on every row before the first
    error of `prediction`, from eager output_attentions, unbatched."""
    import torch

    from harness.foundation.tokenization import CharTokenizer, encode_instance

    forced = forced_instance(instance, prediction)
    enc = encode_instance(CharTokenizer(tokenizer), forced)
    with torch.no_grad():
        out = model(torch.tensor([enc.input_ids]), output_attentions=True)
    wrong = [i for i, (a, b) in enumerate(zip(prediction, instance.target)) if a != b]
    if len(prediction) < len(instance.target):
        wrong.append(len(prediction))
    first = min(wrong, default=len(instance.target))
    rows = []
    for i in range(first):
        query = enc.target_offset + i - 1
        cells = [
            enc.position(p + shift)
            for p in instance.reference[i]
            if 0 <= p + shift < len(forced.text) and enc.position(p + shift) <= query
        ]
        rows.append(tuple(float(out.attentions[la][0, h, query, cells].sum()) for la, h in heads))
    return rows


def test_the_null_is_the_same_reading_on_the_rows_the_model_gets_right(attn_tokenizer):
    """With ID rows: the on-reference test is calibrated on their correct rows (levels and
    threshold as read by hand), each class's share of those rows is the ID null, the OOD
    rows before each first error the OOD null, and another head set is read on the same
    rows, its dominant kind beside the chosen one's."""
    model = build_tiny("llama", attn_tokenizer)
    ids = list(iter_split("reversal_id", split="validation", stop=8))
    ood = list(iter_split("reversal_ood", split="validation", stop=6, max_length=14))
    # ID: right answers but one; OOD: wrong from the third row on, one right answer
    id_records = [{"index": x.index, "prediction": x.target} for x in ids]
    id_records[0]["prediction"] = "#" * len(ids[0].target)
    predictions = [x.target[:2] + "9" * (len(x.target) - 2) for x in ood]
    predictions[0] = ood[0].target
    records = [{"index": x.index, "prediction": p} for x, p in zip(ood, predictions)]
    heads, top1 = [(0, 1), (1, 2)], [(1, 2)]
    scorer = Scorer(model, attn_tokenizer, batch_size=4)
    found = diagnosis.where_errors_look(
        scorer, ood, records, heads, id_rows=(ids, id_records), compare={"top-1": top1}
    )
    rows = [
        m
        for x, r in zip(ids, id_records)
        for m in masses_by_hand(model, attn_tokenizer, x, r["prediction"], heads, 0)
    ]
    expected = diagnosis.calibrate(rows, diagnosis.DEFAULT_TOLERANCE)
    read = found["on_reference"]
    assert read["basis"] == "correct ID rows"
    assert read["levels"] == pytest.approx(list(expected.levels), abs=1e-5)
    assert read["threshold"] == pytest.approx(expected.threshold, abs=1e-5)
    null = found["null"]
    assert null["id"]["rows"] == len(rows) == sum(len(x.target) for x in ids[1:])
    assert null["ood"]["rows"] == len(ood[0].target) + 2 * (len(ood) - 1)
    for which in ("id", "ood"):
        assert sum(null[which]["shares"].values()) == pytest.approx(1.0)
    # rows on the reference or pointed elsewhere: the test passes at least 95% of ID rows
    passed = sum(expected.passes(m) for m in rows) / len(rows)
    assert passed >= 1 - diagnosis.NULL_QUANTILE
    assert found["instances"] == len(ood) - 1
    # the ID stream diagnosed with its own null: read once, its correct rows the same
    own = diagnosis.where_errors_look(scorer, ids, id_records, heads, id_rows=(ids, id_records))
    assert own["null"]["id"] == own["null"]["ood"] == null["id"] and own["instances"] == 1
    # the other head set: what reading it alone finds, in the same forwards
    alone = diagnosis.where_errors_look(scorer, ood, records, top1, id_rows=(ids, id_records))
    sets = found["head_sets"]
    assert sets["top-1"]["shares"] == alone["shares"]
    assert sets["top-1"]["null"] == alone["null"]["id"]["shares"]
    assert sets["N"]["shares"] == found["shares"] and sets["N"]["heads"] == [[0, 1], [1, 2]]
    assert found["kind_changes"] == (sets["N"]["dominant"] != sets["top-1"]["dominant"])
    # without ID rows there is no ID null, and the levels are the ones given
    plain = diagnosis.where_errors_look(scorer, ood, records, heads, level=[0.3, 0.2])
    assert plain["null"]["id"] is None
    assert plain["null"]["ood"]["rows"] == null["ood"]["rows"]
    assert plain["on_reference"]["basis"] == "given level" and plain["level"] == [0.3, 0.2]
