"""The planted-mechanism models (tests/planted.py) have the mechanism they claim, measured
through the project's own engine: `score_settings` (generation and teacher forcing),
`Scorer.teacher_force` under an `AttentionPlan` (per-row mass and full maps of the planted
head) and `rank_heads`."""

from __future__ import annotations

import pytest

from tests.planted import (
    MECHANISMS,
    OOD_LENGTHS,
    SHIFTS,
    build,
    id_instances,
    name_of,
    ood_instances,
    partner,
)

CASES = [(m, s) for m in MECHANISMS for s in SHIFTS]
PUSH = 0.3  # the small standard push that repairs a dilution


@pytest.fixture(scope="module")
def planted():
    """Each planted model built once for the module, on demand."""
    built = {}

    def get(mechanism, shift):
        if (mechanism, shift) not in built:
            built[mechanism, shift] = build(mechanism, shift)
        return built[mechanism, shift]

    return get


def mean(records, key):
    return sum(r[key] for r in records) / len(records)


def baseline_records(p, instances):
    from harness.attention.interventions import score_settings
    from harness.attention.sweep import BASELINE

    return score_settings(p.model, p.tokenizer, instances, [BASELINE], batch_size=64)["baseline"]


def observe(p, instances):
    """Per target row of each instance, teacher-forced under a capture plan on the planted
    head (`truth.copy_heads[0]`) with the reference moved by `truth.shift`: the head's mass
    on that key (`head_rows`), the key it weighs most (from the full map, as a character
    position of prompt + target; -1 is BOS), the predicted and the gold character."""
    from harness.engine.capture import AttentionPlan
    from harness.engine.inference import collate_left
    from harness.engine.positions import causal_valid, shift_mask
    from harness.engine.scoring import Scorer

    truth = p.truth
    layer, head = truth.copy_heads[0]
    scorer = Scorer(p.model, p.tokenizer, batch_size=64)
    char_tok = scorer.char_tok

    def one_batch(chunk, encodings):
        batch = collate_left(encodings, char_tok.pad_id, with_answer=True)
        cells = causal_valid(shift_mask(batch.reference_mask(), truth.shift), batch.attention_mask)
        plan = AttentionPlan(reference=cells, patterns=tuple(range(len(encodings))))
        forced, record = scorer.teacher_force(encodings, plan)
        maps = record.patterns[f"blocks.{layer}.attn.hook_pattern"][:, head]
        rows = []
        for b, (x, enc) in enumerate(zip(chunk, encodings)):
            length = len(x.target)
            for i in range(length):
                q = batch.column(b, enc.target_offset - 1 + i)
                keys = int(batch.attention_mask[b, : q + 1].sum())
                at = batch.column(b, enc.position(truth.key_position(length, i)))
                rows.append(
                    {
                        "length": length,
                        "row": i,
                        "keys": keys,
                        "mass": float(record.head_rows[b, q, layer, head]),
                        "at_key": float(maps[b, q, at]),
                        "argmax": int(maps[b, q].argmax()) - batch.shifts[b] - enc.prompt_offset,
                        "text": x.text,
                        "predicted": char_tok.decode([forced.predicted[b][i]]),
                        "gold": x.target[i],
                    }
                )
        return rows

    return [row for rows in scorer.run(instances, one_batch) for row in rows]


def test_the_instances_are_string_reversal_rows_whose_characters_name_their_places():
    from attentionspan_datasets.generation import resolve_config

    xs, ys = id_instances(), ood_instances()
    assert [len(x.target) for x in xs] == list(range(1, 11)) * 3
    assert [len(y.target) for y in ys] == list(OOD_LENGTHS)
    for x in xs + ys:
        length = len(x.target)
        config = resolve_config(x.config)
        assert config.length_bucket(x.params) == length
        assert x.prompt == x.target[::-1] + "=" and x.task == "string_reversal"
        assert x.reference == [[length - 1 - i] for i in range(length)]
        assert [name_of(c) for c in x.target] == list(range(length))
    # Both variants occur, so an answer is right only when the model copies.
    assert len({c for x in xs for c in x.target}) > 15
    assert [x.text for x in id_instances()] == [x.text for x in xs]  # fixed seeds


def test_building_twice_gives_the_same_weights():
    import torch

    one, two = build("slip", 1).model.state_dict(), build("slip", 1).model.state_dict()
    assert one.keys() == two.keys()
    assert all(torch.equal(one[k], two[k]) for k in one)


@pytest.mark.parametrize("mechanism, shift", CASES)
def test_id_is_solved_and_ood_is_not(planted, mechanism, shift):
    p = planted(mechanism, shift)
    id_records = baseline_records(p, p.id_instances)
    ood_records = baseline_records(p, p.ood_instances)
    assert mean(id_records, "exact_match") >= 0.9
    assert mean(id_records, "tf_token_acc") == 1.0
    assert mean(ood_records, "exact_match") <= 0.1
    assert mean(ood_records, "partial_acc") < 0.5


@pytest.mark.parametrize("mechanism, shift", CASES)
def test_the_planted_head_attends_as_planted(planted, mechanism, shift):
    p = planted(mechanism, shift)
    truth = p.truth
    id_rows, ood_rows = observe(p, p.id_instances), observe(p, p.ood_instances)
    for rows in (id_rows, ood_rows):
        # The recorded mass is the map's weight at the planted key (ref + shift).
        assert all(r["mass"] == pytest.approx(r["at_key"], abs=1e-6) for r in rows)
    key = truth.key_position
    if mechanism == "no_lookup":
        # Uniform: every visible key (BOS included) gets 1/N; ID answers are still right.
        for r in id_rows + ood_rows:
            assert r["mass"] == pytest.approx(1 / r["keys"], rel=1e-4)
        assert all(r["predicted"] == r["gold"] for r in id_rows)
        return
    # ID: the planted key is the argmax of every row, with most of the mass.
    assert all(r["argmax"] == key(r["length"], r["row"]) for r in id_rows)
    assert all(r["predicted"] == r["gold"] for r in id_rows)
    id_low = min(r["mass"] for r in id_rows)
    if mechanism == "dilution":
        # OOD: still the argmax, with less mass (lower with every distractor), written
        # wrong wherever it falls under tau.
        assert id_low > truth.tau > 0.8
        assert all(r["argmax"] == key(r["length"], r["row"]) for r in ood_rows)
        assert mean(ood_rows, "mass") < id_low
        assert min(r["mass"] for r in ood_rows) < 0.65
        for r in ood_rows:
            assert (r["predicted"] == r["gold"]) == (r["mass"] > truth.tau)
    elif mechanism == "slip":
        assert id_low > 0.99
        slipped = [r for r in ood_rows if _alias(truth, r) is not None]
        assert len(slipped) > len(ood_rows) / 2
        for r in slipped:
            alias = _alias(truth, r)
            assert r["argmax"] == alias and r["mass"] < 0.05
            # ... and the model copies the alias key's character (for shift 1, the
            # character that key carries: the one before it).
            assert r["predicted"] == r["text"][alias - truth.shift] != r["gold"]
        kept = [r for r in ood_rows if _alias(truth, r) is None]
        assert all(r["argmax"] == key(r["length"], r["row"]) for r in kept)
    else:  # downstream: on the reference at every length, written crossed from the limit
        assert min(r["mass"] for r in ood_rows) > 0.99
        assert all(r["argmax"] == key(r["length"], r["row"]) for r in ood_rows)
        for r in ood_rows:
            crossed = name_of(r["gold"]) >= truth.limit
            assert r["predicted"] == (partner(r["gold"]) if crossed else r["gold"])


def _alias(truth, r):
    return truth.alias_position(r["length"], r["row"])


@pytest.mark.parametrize("mechanism, shift", CASES)
def test_rank_heads_puts_the_planted_head_first(planted, mechanism, shift):
    from harness.attention.heads import rank_heads

    p = planted(mechanism, shift)
    ranking = rank_heads(p.model, p.tokenizer, p.id_instances, shift=shift)
    assert ranking.top(1) == [p.truth.copy_heads[0]]
    assert set(p.truth.lookup_heads) <= set(ranking.top(1))


@pytest.mark.parametrize("mechanism", ["dilution", "slip", "downstream"])
@pytest.mark.parametrize("shift", SHIFTS)
def test_a_small_push_repairs_the_dilution_only(planted, mechanism, shift):
    """A standard push of C = 0.3 on the lookup head at ref + shift: the diluted lookup
    gets its mass back over tau; a slip keeps its alias, a downstream failure its readout."""
    from harness.attention.heads import HeadRanking
    from harness.attention.interventions import score_settings
    from harness.attention.sweep import BASELINE, Setting

    p = planted(mechanism, shift)
    instances = p.ood_instances[::4]  # lengths 11, 15, ..., 47
    (layer, head), num_heads = p.truth.lookup_heads[0], p.model.config.num_attention_heads
    layers = p.model.config.num_hidden_layers
    order = [(layer, head)] + [
        (la, h) for la in range(layers) for h in range(num_heads) if (la, h) != (layer, head)
    ]
    scores = [[float((la, h) == (layer, head)) for h in range(num_heads)] for la in range(layers)]
    ranking = HeadRanking(scores=scores, per_row=scores, order=order, rows=1)
    push = Setting(heads="top", n=1, strength=PUSH, shift=shift)
    records = score_settings(
        p.model, p.tokenizer, instances, [BASELINE, push], ranking, batch_size=64
    )
    before, after = records["baseline"], records[push.name]
    assert mean(before, "exact_match") == 0.0
    if mechanism == "dilution":
        assert mean(after, "exact_match") == 1.0
    else:
        assert mean(after, "partial_acc") == mean(before, "partial_acc")
