"""The dose-response ladder (harness.attention.dose): its settings as declared, the curve's
arithmetic on hand-made records, the teacher-forced-only scoring path against the generate
path, random heads drawn outside the chosen ones, and a planted dilution's curve."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from attentionspan_datasets.tasks.base import Instance
from harness.attention.controls import LADDER_POINTER_SHIFTS, POINTER_SHIFTS, ladder_controls
from harness.attention.dose import (
    DEFAULT_DOSES,
    ROLE_DOSE,
    Ladder,
    Rung,
    dose_curve,
    dose_ladder,
    dose_settings,
    run_dose_ladder,
    run_dose_ladders,
)
from harness.attention.heads import HeadRanking
from harness.attention.interventions import other_pool, other_seeds, score_settings, select_heads
from harness.attention.lookup import Lookup
from harness.attention.setting import BASELINE, Setting
from harness.foundation.stats import paired_gain
from tests.harness.attention.ladder_records import record


def fake_ranking(layers: int = 4, heads: int = 8) -> HeadRanking:
    scores = [[float(layer * heads + head) for head in range(heads)] for layer in range(layers)]
    order = sorted(
        ((la, h) for la in range(layers) for h in range(heads)), key=lambda x: -scores[x[0]][x[1]]
    )
    # one head looks up in distribution (the top one): the others weigh the reference little
    top = order[0]
    level = [[0.9 if (la, h) == top else 0.01 for h in range(heads)] for la in range(layers)]
    return HeadRanking(scores=scores, per_row=scores, order=order, offsets={"0": level})


# --- settings ----------------------------------------------------------------------------
def test_the_ladder_holds_per_dose_the_push_its_pointers_and_the_draws():
    assert DEFAULT_DOSES == (0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0)
    # the ladder pushes at ref+-1, +-2 and +-3; the grid keeps +-3 (its own default)
    assert LADDER_POINTER_SHIFTS == (-3, -2, -1, 1, 2, 3) and POINTER_SHIFTS == (-3, 3)
    settings = dose_settings(2, (0.1, 1.0), shift=1, random_seeds=(0, 3))
    # the output scale has no C: one setting, made with the first rung, for every rung
    rescale = "top2-rescale-shift+1"
    assert [s.name for s in settings] == ["baseline", *names_at(0.1), rescale, *names_at(1)]
    roles = [s.role for s in settings]
    # each control's settings carry its role (`harness.attention.controls`)
    assert roles[:11] == [
        "baseline",
        ROLE_DOSE,
        *["pointer"] * 6,
        *["other_heads"] * 2,
        "output_scale",
    ]
    # the values are carried by rung: the curve never reads a name back
    ladder = dose_ladder(2, (0.1, 1.0), shift=1, random_seeds=(0, 3))
    assert ladder.settings == settings and [r.top.strength for r in ladder.rungs] == [0.1, 1.0]
    assert [s.seed for s in ladder.rungs[0].of("other_heads")] == [0, 3]
    assert ladder.id_settings == [BASELINE, *(r.top for r in ladder.rungs)]
    # Conditional: each threshold x each dose; a threshold is required.
    conditional = dose_settings(
        4, (0.5, 2.0), mode="conditional", thresholds=(0.1, 0.2), pointer_shifts=(3,)
    )
    assert [s.name for s in conditional] == [
        "baseline",
        "top4-C0.5-thr0.1",
        "top4-C0.5-thr0.1-shift+3",
        "top4-rescale",
        "top4-C2-thr0.1",
        "top4-C2-thr0.1-shift+3",
        "top4-C0.5-thr0.2",
        "top4-C0.5-thr0.2-shift+3",
        "top4-C2-thr0.2",
        "top4-C2-thr0.2-shift+3",
    ]
    # the controls only at the rungs asked (`controlled`), the push at every rung
    sparse = dose_ladder(2, (0.1, 1.0), shift=1, random_seeds=(0, 3), controlled=[(1.0, 0.0)])
    assert [s.name for s in sparse.settings] == [
        "baseline",
        "top2-C0.1-shift+1",
        *names_at(1),
        "top2-rescale-shift+1",
    ]
    # the output scale off (the validation ladder): no rescale setting anywhere
    off = dose_ladder(2, (0.1, 1.0), shift=1, random_seeds=(0, 3), output_scale=False)
    names = [s.name for s in settings]
    assert [s.name for s in off.settings] == [n for n in names if "rescale" not in n]
    assert sparse.rungs[0].controls == () and sparse.rungs[1] == ladder.rungs[1]
    picked = dose_ladder(
        4, (0.5, 2.0), mode="conditional", thresholds=(0.1, 0.2), controlled=[(0.5, 0.2)]
    )
    assert [bool(r.controls) for r in picked.rungs] == [False, False, True, False]
    with pytest.raises(ValueError, match="needs at least one threshold"):
        dose_settings(4, mode="conditional")
    with pytest.raises(ValueError, match="a mode with a strength"):
        dose_settings(4, mode="knockout")
    with pytest.raises(ValueError, match="non-zero"):
        dose_settings(4, pointer_shifts=(0, 3))
    with pytest.raises(ValueError, match="strength"):
        dose_settings(4, (float("nan"),))


def names_at(strength) -> list[str]:
    """The names of the push and its controls at one rung of the first test's ladder."""
    c = f"{strength:g}"
    return [
        f"top2-C{c}-shift+1",
        # the pushes at ref + 1 + k, k = -3, -2, -1, +1, +2, +3 (the ladder's default)
        # (at ref + 1 - 1 the name carries no shift)
        *(f"top2-C{c}" + (f"-shift{1 + k:+d}" if k != -1 else "") for k in (-3, -2, -1, 1, 2, 3)),
        f"other2-C{c}-shift+1-s0",
        f"other2-C{c}-shift+1-s3",
    ]


def test_other_heads_are_never_the_chosen_ones_and_draws_differ():
    ranking = fake_ranking()
    for n in (1, 4, 8, 12):
        chosen = set(ranking.top(n))
        drawn = other_seeds(ranking.total, n, 8)
        assert drawn["requested"] == 8 and len(drawn["seeds"]) == 8 and not drawn["exhausted"]
        sets = [
            tuple(select_heads(Setting(heads="other", n=n, strength=1.0, seed=s), ranking))
            for s in drawn["seeds"]
        ]
        assert len(set(sets)) == 8  # distinct head sets
        for heads in sets:
            assert len(set(heads)) == n and not chosen & set(heads)
    # n = 16 of 32 heads: one set lies outside the top 16.
    assert other_seeds(ranking.total, 16, 8) | {"seeds": None} == {
        "seeds": None,
        "requested": 8,
        "available": 1,
        "exhausted": True,
    }
    # A model with few heads: every distinct set, and the result says so.
    small = fake_ranking(1, 4)
    drawn = other_seeds(small.total, 1, 8)
    assert drawn["available"] == 3 and drawn["exhausted"]
    picks = {select_heads(Setting(heads="other", n=1, seed=s), small)[0] for s in drawn["seeds"]}
    assert picks == {(0, 0), (0, 1), (0, 2)}  # top(1) is (0, 3)
    assert other_seeds(small.total, 3, 4)["available"] == 0  # 1 head outside the top 3
    with pytest.raises(ValueError, match="heads outside the top 3"):
        select_heads(Setting(heads="other", n=3, seed=0), small)
    # Two heads look up in distribution: with n = 1 the partner of the top head is never
    # drawn (it would gain as much), and the pool is one head smaller.
    twins = fake_ranking(1, 4)
    twins.offsets = {"0": [[0.0, 0.0, 0.45, 0.9]]}  # (0, 3) ranks first, (0, 2) is its twin
    assert twins.lookup() == [(0, 3), (0, 2)]
    assert other_pool(twins, 1) == [(0, 0), (0, 1)]
    drawn = other_seeds(twins.total, 1, 8, pool=len(other_pool(twins, 1)))
    assert drawn["available"] == 2
    picks = {select_heads(Setting(heads="other", n=1, seed=s), twins)[0] for s in drawn["seeds"]}
    assert picks == {(0, 0), (0, 1)}
    # The random-heads control of before is unchanged: it draws from every head.
    assert Setting(heads="random", n=4, strength=1.0, seed=2).name == "random4-C1-s2"


# --- the curve's arithmetic --------------------------------------------------------------
def instance(prompt: str, index: int) -> Instance:
    chars = prompt.removesuffix("=")
    length = len(chars)
    reference = [[length - 1 - i] for i in range(length)]
    return Instance(
        "string_reversal", prompt, chars[::-1], reference, {"length": length}, "rev", index
    )


def test_the_curve_on_records_whose_answer_is_known():
    """Three reversal instances; the displaced answer of row i at offset k is the text's
    character at L - 1 - i + k (or none when that leaves the text)."""
    a, b, c = instance("abcdef=", 0), instance("wxyz=", 1), instance("pq=", 2)
    xs = [a, b, c]
    predictions = {
        # baseline: a's row 1 writes what ref+1 holds (f); c's row 1 is wrong (x)
        "baseline": ["ffdcba", "zyxw", "qx"],
        "top2-C0.1": ["fedcba", "zyxw", "qp"],
        # every row writes the character one to the right (the displaced answer at +1)
        "top2-C0.1-shift+1": ["=fedcb", "=zyx", "=q"],
        # every row that has one writes the character one to the left; the last keeps gold
        "top2-C0.1-shift-1": ["edcbaa", "yxww", "pp"],
        "other2-C0.1-s0": ["ffdcba", "zyxw", "qx"],
        "other2-C0.1-s5": ["fedcba", "zyxw", "qp"],
        "top2-C1": ["fedcba", "zyxw", "qp"],
    }
    records = {name: [record(x, p) for x, p in zip(xs, ps)] for name, ps in predictions.items()}
    id_x = [instance("mn=", 7), instance("uv=", 8)]
    id_records = {
        "baseline": [record(id_x[0], "nm"), record(id_x[1], "vu")],
        "top2-C0.1": [record(id_x[0], "nm"), record(id_x[1], "vx")],
    }
    ladder = hand_ladder()
    assert {s.name for s in ladder.settings} == set(records)
    curve = dose_curve(xs, ladder, records, id_records=id_records)
    json.dumps(curve)  # serialisable
    assert curve["n"] == 2 and curve["mode"] == "standard" and curve["pointer_shifts"] == [-1, 1]
    assert curve["instances"] == 3 and curve["id_instances"] == 2
    low, high = curve["doses"]
    assert (low["strength"], high["strength"], low["threshold"]) == (0.1, 1.0, None)

    def close(value, fraction):
        assert value == pytest.approx(float(Fraction(fraction)), abs=1e-12)

    # reference: per-instance gains 1/6, 0, 1/2 -> 2/9, the interval of paired_gain
    ref = low["reference"]
    close(ref["gain"], "2/9")
    close(ref["baseline"], "7/9")  # (5/6 + 1 + 1/2) / 3
    close(ref["treated"], 1)
    expected = paired_gain([5 / 6, 1.0, 0.5], [1.0, 1.0, 1.0])
    assert (ref["low"], ref["high"], ref["n"]) == (expected["low"], expected["high"], 3)
    # +1: 6 + 4 + 2 eligible rows; the baseline follows 1 of a's 6 rows
    plus = low["pointers"]["+1"]
    close(plus["gain"]["gain"], "-7/9")  # token accuracy: -(5/6 + 1 + 1/2) / 3
    follow = plus["following"]
    assert (follow["rows"], follow["instances"]) == (12, 3)
    close(follow["rate"], 1)
    close(follow["baseline"], "1/18")
    close(follow["gain"]["gain"], "17/18")
    # -1: 5 + 3 + 1 eligible rows (the last row of each has no key to its left)
    minus = low["pointers"]["-1"]
    close(minus["gain"]["gain"], "-17/36")  # (1/6 - 5/6, 1/4 - 1, 1/2 - 1/2) / 3
    follow = minus["following"]
    assert (follow["rows"], follow["instances"]) == (9, 3)
    assert follow["rate"] == 1.0 and follow["baseline"] == 0.0
    assert follow["gain"] == {"gain": 1.0, "low": 1.0, "high": 1.0, "n": 3}
    assert curve["baseline"]["following"] == pytest.approx({"-1": 0.0, "+1": 1 / 18})
    # random other heads: one draw gains nothing, the other 2/9
    rand = low["random_heads"]
    assert [d["seed"] for d in rand["draws"]] == [0, 5] and rand["count"] == 2
    close(rand["draws"][0]["gain"], 0)
    close(rand["mean"], "1/9")
    close(rand["min"], 0)
    close(rand["max"], "2/9")
    # ID at the same dose; none recorded for C = 1
    assert low["id"]["n"] == 2 and low["id"]["tf_exact"] == 0.5
    assert low["id"]["tf_token_acc"] == 0.75
    assert curve["baseline"]["id"] == {"n": 2, "tf_exact": 1.0, "tf_token_acc": 1.0}
    assert high["id"] is None and high["pointers"] == {} and high["random_heads"]["count"] == 0
    close(high["reference"]["gain"], "2/9")
    with pytest.raises(ValueError, match="missing \\['baseline'\\]"):
        dose_curve(xs, ladder, {k: v for k, v in records.items() if k != "baseline"})


def hand_ladder() -> Ladder:
    """The ladder of the hand-made records: at C = 0.1 the push, pointers at -1 and +1 and
    two draws; at C = 1 the push alone (a control may make nothing at a dose)."""
    low = Setting(heads="top", n=2, strength=0.1, role=ROLE_DOSE)
    high = Setting(heads="top", n=2, strength=1.0, role=ROLE_DOSE)
    pointers = tuple(Setting(heads="top", n=2, strength=0.1, shift=k) for k in (-1, 1))
    draws = tuple(Setting(heads="other", n=2, strength=0.1, seed=s) for s in (0, 5))
    return Ladder(
        n=2,
        shift=0,
        mode="standard",
        rungs=(
            Rung(low, (("pointer", pointers), ("other_heads", draws))),
            Rung(high, (("pointer", ()), ("other_heads", ()))),
        ),
        controls=ladder_controls(),
    )


# --- the teacher-forced-only path ----------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(attn_tokenizer):
    from attentionspan_datasets.splits import iter_split
    from harness.attention.heads import rank_heads
    from tests.harness.attention_models import build_tiny

    model = build_tiny("llama", attn_tokenizer)
    instances = list(iter_split("reversal_ood", split="validation", stop=5, max_length=14))
    ids = list(iter_split("reversal_id", split="validation", stop=8))
    ranking = rank_heads(model, attn_tokenizer, ids, batch_size=8)
    return model, instances, ranking


def test_the_teacher_forced_path_scores_as_the_generate_path(attn_tokenizer, tiny):
    model, instances, ranking = tiny
    settings = [
        BASELINE,
        Setting(heads="top", n=2, strength=2.0),
        Setting(heads="top", n=2, strength=0.5, shift=3),
        Setting(heads="other", n=2, strength=5.0, seed=1),
        Setting(heads="top", n=4, strength=1.0, mode="conditional", threshold=0.05),
    ]
    both = score_settings(model, attn_tokenizer, instances, settings, ranking, batch_size=3)
    forced = score_settings(
        model, attn_tokenizer, instances, settings, ranking, batch_size=3, generate=False
    )
    alone = score_settings(
        model,
        attn_tokenizer,
        instances,
        settings,
        ranking,
        batch_size=3,
        generate=False,
        batched=False,
    )
    assert forced == alone
    # The pushes change the teacher-forced answers (the comparison is not vacuous).
    assert any(forced[s.name] != forced["baseline"] for s in settings[1:])
    assert list(forced) == [s.name for s in settings]
    for name, rows in forced.items():
        assert len(rows) == len(instances)
        for x, tf, gen in zip(instances, rows, both[name]):
            assert set(tf) == {
                "config",
                "index",
                "length",
                "target_len",
                "tf_token_acc",
                "tf_exact",
                "tf_prediction",
            }
            for key in ("config", "index", "length", "target_len", "tf_token_acc"):
                assert tf[key] == gen[key], (name, key)
            assert len(tf["tf_prediction"]) == len(x.target)
            right = [p == g for p, g in zip(tf["tf_prediction"], x.target)]
            assert tf["tf_token_acc"] == sum(right) / len(right)
            assert tf["tf_exact"] == all(right)
    with pytest.raises(ValueError, match="teacher_forced must be True"):
        score_settings(
            model,
            attn_tokenizer,
            instances,
            settings[:1],
            ranking,
            teacher_forced=False,
            generate=False,
        )


def test_ladders_of_several_counts_scored_together_equal_each_alone(attn_tokenizer, tiny):
    """The ladders of every N (the choice of N on validation) scored in one pass,
    the baseline and each batch's prefill once for all of them, give each N the curve its
    ladder alone gives, controls and ID included, in fewer forwards."""
    model, instances, ranking = tiny
    ids = instances[:3]
    options = dict(doses=(0.3, 2.0), draws=2, batch_size=3)
    forwards = []
    handle = model.register_forward_pre_hook(lambda *args: forwards.append(1))
    try:
        together = run_dose_ladders(
            model, attn_tokenizer, None, Lookup.of(ranking), [1, 2, 4], instances, ids, **options
        )
        shared = len(forwards)
        alone = {
            n: run_dose_ladder(
                model, attn_tokenizer, None, Lookup.of(ranking), n, instances, ids, **options
            )
            for n in (1, 2, 4)
        }
    finally:
        handle.remove()
    assert list(together) == [1, 2, 4]
    assert json.dumps(together, sort_keys=True) == json.dumps(alone, sort_keys=True)
    assert together[1]["doses"] != together[4]["doses"]  # not vacuous
    assert shared < len(forwards) - shared  # one prefill a batch, not one per count
    with pytest.raises(ValueError, match="at least one head count"):
        run_dose_ladders(model, attn_tokenizer, None, Lookup.of(ranking), [], instances)


def test_controls_at_some_rungs_read_there_what_the_whole_ladder_reads(attn_tokenizer, tiny):
    """The analysis runs the controls only where the verdict reads them. At those
    rungs the curve is the whole ladder's, number for number (a setting's records do not
    depend on the settings beside it); elsewhere their fields are None and the table says
    "-"; fewer settings are scored."""
    model, instances, ranking = tiny
    lookup = Lookup.of(ranking)
    options = dict(doses=(0.3, 2.0), draws=2, batch_size=3)
    whole = run_dose_ladder(model, attn_tokenizer, None, lookup, 2, instances, **options)
    sparse = run_dose_ladder(
        model, attn_tokenizer, None, lookup, 2, instances, controlled=[(2.0, 0.0)], **options
    )
    assert json.dumps(sparse["doses"][1], sort_keys=True) == json.dumps(
        whole["doses"][1], sort_keys=True
    )
    low = sparse["doses"][0]
    assert low["pointers"] is None and low["random_heads"] is None
    assert low["reference"] == whole["doses"][0]["reference"]
    assert whole["doses"][0]["pointers"] and whole["doses"][0]["random_heads"]["count"] == 2
    cells = [column.cell(low) for c in ladder_controls() for column in c.ladder.columns(sparse)]
    assert cells == ["-"] * 8  # six shifted pushes, the random heads and the output scale
    assert sparse["pointer_shifts"] == list(LADDER_POINTER_SHIFTS)
    assert low["output_scale"] is None
    # the output scale does not depend on C: one setting, scored once, read at every rung
    rescaled = [d["output_scale"] for d in whole["doses"]]
    assert rescaled[0] == rescaled[1] and rescaled[0]["setting"] == "top2-rescale"
    assert sparse["baseline"] == whole["baseline"]


# --- a planted dilution ----------------------------------------------------------------------
def test_a_planted_dilution_gains_at_the_reference_from_a_small_dose():
    """The dilution's lookup is right but weak (tests/planted.py): pushing the lookup head
    at the reference repairs it from a small C, idle heads (the only ones outside the top 1)
    change nothing, ID stays solved, and a small push at ref +- 1, 2 or 3 is neither followed
    nor gains like the reference push."""
    from harness.attention.heads import rank_heads
    from tests.planted import build

    p = build("dilution", 0)
    ranking = rank_heads(p.model, p.tokenizer, p.id_instances, shift=0)
    curve = run_dose_ladder(
        p.model,
        p.tokenizer,
        None,
        Lookup.of(ranking),
        1,
        p.ood_instances[::4],
        p.id_instances,
        batch_size=64,
        doses=(0.05, 0.3, 2.0),
    )
    json.dumps(curve)
    assert curve["heads"] == [list(p.truth.lookup_heads[0])]
    drawn = curve["random_draws"]
    assert drawn["exhausted"] and drawn["available"] == 3 and len(drawn["seeds"]) == 3
    assert "all of them are used" in drawn["note"]
    assert sorted(d["heads"] for d in drawn["draws"]) == [[[0, 0]], [[0, 1]], [[0, 3]]]
    by_c = {d["strength"]: d for d in curve["doses"]}
    assert curve["baseline"]["tf_exact"] == 0.0
    for c, dose in by_c.items():
        assert dose["reference"]["low"] > 0, c  # above 0 from the smallest dose
        assert dose["random_heads"]["count"] == 3
        assert dose["random_heads"]["min"] == dose["random_heads"]["max"] == 0.0
        assert dose["id"]["tf_exact"] == 1.0 and dose["id"]["tf_token_acc"] == 1.0
    assert by_c[0.3]["reference"]["treated"] == 1.0  # every OOD row over tau
    assert by_c[0.05]["reference"]["gain"] < by_c[0.3]["reference"]["gain"]
    assert list(by_c[0.3]["pointers"]) == ["-3", "-2", "-1", "+1", "+2", "+3"]
    for k, push in by_c[0.3]["pointers"].items():
        # next to the reference too: the neighbour's character is not what the lookup wants
        small = push["following"]
        assert small["rows"] > 0 and small["rate"] == 0.0, k
        assert push["gain"]["high"] < by_c[0.3]["reference"]["low"], k


def test_a_subsets_curve_carries_the_whole_curves_id_figures():
    """A kind's curve is scored on some OOD instances without ID; ID under a push does not
    depend on which OOD instances are read, so it takes the whole curve's, rung by rung."""
    from harness.attention.dose import with_id_of

    whole = {
        "baseline": {"id": {"tf_exact": 1.0}},
        "id_instances": 30,
        "doses": [
            {"strength": 0.3, "threshold": None, "id": {"tf_exact": 0.98}},
            {"strength": 2.0, "threshold": None, "id": {"tf_exact": 0.4}},
        ],
    }
    part = {
        "baseline": {"tf_exact": 0.0},
        "id_instances": 0,
        "doses": [
            {"strength": 2.0, "threshold": None, "id": None},
            {"strength": 0.5, "threshold": None, "id": None},
        ],
    }
    out = with_id_of(part, whole)
    assert out["baseline"]["id"] == {"tf_exact": 1.0} and out["id_instances"] == 30
    assert [d["id"] for d in out["doses"]] == [{"tf_exact": 0.4}, None]
