"""Head ranking: the mass on references of a model whose attention is known by hand."""

from __future__ import annotations

import pytest
import torch

from attentionspan_datasets.splits import iter_split
from harness.attention import heads as heads_module
from harness.attention.controls import restore_levels
from harness.attention.heads import HeadRanking, rank_heads, shift_mask
from harness.attention.lookup import ranked_offset
from harness.engine.inference import collate_left
from harness.foundation.tokenization import CharTokenizer, encode_instance
from tests.harness.attention_models import build_tiny


def uniform_model(tokenizer):
    """Every query projection zero: every head spreads its weight evenly over the keys it
    may see, so the mass on any set of cells is (cells) / (visible keys) per row."""
    model = build_tiny("llama", tokenizer)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.zero_()
    return model


def expected_mass(tokenizer, instances, shift: int = 0) -> float:
    char_tok = CharTokenizer(tokenizer)
    batch = collate_left([encode_instance(char_tok, x) for x in instances], char_tok.pad_id)
    ref = shift_mask(batch.reference_mask(), shift)
    total = 0.0
    for b in range(len(instances)):
        for q in range(batch.total_len):
            cells = [k for k in ref[b, q].nonzero().flatten().tolist() if k <= q]
            cells = [k for k in cells if batch.attention_mask[b, k]]
            if cells:
                total += len(cells) / (q - batch.shifts[b] + 1)
    return total


@pytest.fixture(scope="module")
def instances():
    return list(iter_split("reversal_id", split="validation", stop=6))


def test_uniform_heads_have_the_hand_computed_mass(attn_tokenizer, instances):
    model = uniform_model(attn_tokenizer)
    ranking = rank_heads(model, attn_tokenizer, instances, batch_size=4)
    want = expected_mass(attn_tokenizer, instances)
    assert torch.allclose(torch.tensor(ranking.scores), torch.full((2, 4), want), rtol=1e-4)
    rows = sum(len(x.target) for x in instances)
    assert ranking.rows == rows
    assert ranking.per_row[0][0] == pytest.approx(want / rows, rel=1e-4)
    assert ranking.profile(0, 0)["0"] == pytest.approx(want / rows, rel=1e-4)
    # Ties keep (layer, head) order.
    assert ranking.order[:3] == [(0, 0), (0, 1), (0, 2)]


def test_shift_ranks_at_ref_plus_k(attn_tokenizer, instances):
    model = uniform_model(attn_tokenizer)
    ranking = rank_heads(model, attn_tokenizer, instances, shift=1, batch_size=4)
    want = expected_mass(attn_tokenizer, instances, shift=1)
    assert ranking.scores[1][3] == pytest.approx(want, rel=1e-4)
    assert ranking.profile(1, 3)["1"] == pytest.approx(want / ranking.rows, rel=1e-4)
    assert ranked_offset(ranking) == 1


def test_threshold_counts_only_weights_above_it(attn_tokenizer, instances):
    model = uniform_model(attn_tokenizer)
    plain = rank_heads(model, attn_tokenizer, instances[:2], batch_size=2)
    # Uniform weights are 1/visible >= 1/40 here: a threshold below keeps all, above none.
    low = rank_heads(model, attn_tokenizer, instances[:2], threshold=1e-3, batch_size=2)
    high = rank_heads(model, attn_tokenizer, instances[:2], threshold=0.9, batch_size=2)
    assert low.scores[0][1] == pytest.approx(plain.scores[0][1], rel=1e-4)
    assert high.scores == [[0.0] * 4, [0.0] * 4]
    # The offsets stay the plain weights, the ranking's shift included: they are the level
    # restore gives back (a thresholded count there turned a planted repair inconclusive).
    assert torch.allclose(torch.tensor(high.offsets["0"]), torch.tensor(plain.offsets["0"]))
    levels = restore_levels(high, 0)
    assert torch.allclose(levels, torch.tensor(plain.offsets["0"]))
    assert float(levels.sum()) > 0


def test_order_follows_scores_and_saves(monkeypatch, tmp_path, attn_tokenizer, instances):
    known = torch.tensor([[1.0, 5.0, 0.5, 2.0], [4.0, 0.0, 3.0, 6.0]])
    masses = {"0": known.clone()}, torch.ones_like(known)  # (masses, output norms summed)
    monkeypatch.setattr(heads_module, "_batch_masses", lambda *args, **kwargs: masses)
    model = build_tiny("llama", attn_tokenizer)
    ranking = rank_heads(model, attn_tokenizer, instances[:2], batch_size=2, offsets=(0,))
    assert ranking.top(3) == [(1, 3), (0, 1), (1, 0)]
    assert ranking.bottom(2) == [(1, 1), (0, 2)]
    path = ranking.save(tmp_path)
    again = HeadRanking.load(path)
    assert again.order == ranking.order and again.scores == ranking.scores
    assert again.to_dict()["top"][0] == {
        "layer": 1,
        "head": 3,
        "score": 6.0,
        "per_row": ranking.per_row[1][3],
        "offsets": {"0": ranking.per_row[1][3]},
    }


def test_bad_input_names_the_field(attn_tokenizer, instances):
    model = build_tiny("llama", attn_tokenizer)
    with pytest.raises(ValueError, match="threshold"):
        rank_heads(model, attn_tokenizer, instances, threshold=-1)
    with pytest.raises(ValueError, match="at least one instance"):
        rank_heads(model, attn_tokenizer, [])


def test_every_offset_and_the_threshold_cost_one_forward_per_batch(attn_tokenizer, instances):
    """Capture once, score many: five offsets and the thresholded shift are recorded in one
    teacher-forced forward per batch, and each equals a ranking of that offset alone."""
    model = build_tiny("llama", attn_tokenizer)
    calls = []
    hook = model.register_forward_pre_hook(lambda *args: calls.append(1))
    try:
        ranking = rank_heads(model, attn_tokenizer, instances, threshold=0.05, batch_size=4)
    finally:
        hook.remove()
    assert len(calls) == 2  # 6 instances in batches of 4
    for k in (-2, 1):
        alone = rank_heads(model, attn_tokenizer, instances, shift=k, offsets=(k,), batch_size=4)
        assert torch.allclose(
            torch.tensor(ranking.offsets[str(k)]), torch.tensor(alone.offsets[str(k)]), atol=1e-6
        )
    thresholded = rank_heads(model, attn_tokenizer, instances, threshold=0.05, offsets=())
    assert torch.allclose(torch.tensor(ranking.scores), torch.tensor(thresholded.scores))


# --- where the lookup reads ------------------------------------------------------------------
def profile_ranking(offsets, shift=0):
    """A ranking over 1 x len(heads) heads with the given offset profile {k: [per head]}."""
    from harness.attention.heads import HeadRanking

    values = offsets[shift]
    order = sorted(range(len(values)), key=lambda h: -values[h])
    return HeadRanking(
        scores=[values],
        per_row=[values],
        order=[(0, h) for h in order],
        offsets={str(k): [v] for k, v in offsets.items()},
        source={"shift": shift},
    )


def test_the_offset_is_where_the_top_heads_weigh_most_and_the_reference_wins_near_ties():
    from harness.attention.heads import lookup_offset

    # the quick reversal model's case: the top heads read ref+1
    ranking = profile_ranking({-1: [0.1, 0.0], 0: [0.2, 0.14], 1: [0.9, 0.72], 2: [0.0, 0.1]})
    found = lookup_offset(ranking, n=2)
    assert found["offset"] == 1 and found["mass"] == pytest.approx(0.81)
    assert found["text"] == "the lookup reads ref+1: ID mass 0.81, at the reference 0.17"
    # a near tie (within 10% of the reference's mass) stays at the reference
    near = profile_ranking({0: [0.436], 1: [0.455], 2: [0.26]})
    assert lookup_offset(near, n=1)["offset"] == 0
    assert lookup_offset(near, n=1)["text"] == (
        "the lookup reads the reference: ID mass 0.44; ref+1 0.46 is within 10% of it, too "
        "close to move the lookup away from the reference"
    )


def test_a_near_tie_gives_a_second_candidate_lookup_and_only_one():
    """Offsets whose top heads' ID mass is within OFFSET_MARGIN (10%) of the largest are
    near-tied; the chosen offset is judged first and the near-tied one with the largest mass
    other than it second; at most two."""
    from harness.attention.heads import lookup_offset, second_lookup

    # SmolLM2 on reversal: the reference chosen by the margin, ref+1 the second candidate
    near = profile_ranking({0: [0.436], 1: [0.455], 2: [0.26]})
    assert lookup_offset(near, n=1)["offset"] == 0
    second = second_lookup(near, 0, n=1)
    assert second["offset"] == 1 and second["mass"] == pytest.approx(0.455)
    assert second["text"] == (
        "two candidate lookups: the reference (ID mass 0.44) and ref+1 (0.46), both within "
        "10% of the largest: both are judged"
    )
    # three near-tied offsets: the chosen one and the heaviest other (ref-1 0.44 beats ref+2)
    three = profile_ranking({-1: [0.44], 0: [0.45], 1: [0.47], 2: [0.43]})
    assert lookup_offset(three, n=1)["offset"] == 0
    assert second_lookup(three, 0, n=1)["offset"] == 1
    # the best offset chosen away from the reference: the next within 10% of it is second
    moved = profile_ranking({0: [0.1], 1: [0.5], 2: [0.47], -1: [0.44]})
    assert lookup_offset(moved, n=1)["offset"] == 1
    assert second_lookup(moved, 1, n=1)["offset"] == 2
    # equal masses: the nearer the reference, then the smaller offset
    assert second_lookup(profile_ranking({-1: [0.5], 0: [0.5], 1: [0.5]}), 0, n=1)["offset"] == -1
    # exactly at the margin counts (0.55 <= 1.1 x 0.5); just past it does not
    assert second_lookup(profile_ranking({0: [0.5], 1: [0.55]}), 0, n=1)["offset"] == 1
    assert second_lookup(profile_ranking({0: [0.5], 1: [0.5501]}), 1, n=1) is None
    # no near tie (the quick reversal model: 0.81 at ref+1, 0.17 at the reference): one lookup
    clear = profile_ranking({-1: [0.1, 0.0], 0: [0.2, 0.14], 1: [0.9, 0.72], 2: [0.0, 0.1]})
    assert second_lookup(clear, 1, n=2) is None
    # no weight anywhere: nothing to judge twice
    assert second_lookup(profile_ranking({0: [0.0], 1: [0.0]}), 0, n=1) is None


def test_lookup_heads_are_those_with_half_the_top_heads_weight_at_the_offset():
    ranking = profile_ranking({0: [0.9, 0.5, 0.44, 0.0]})
    assert ranking.lookup() == [(0, 0), (0, 1)]
    assert profile_ranking({0: [0.0, 0.0]}).lookup() == []
    with pytest.raises(ValueError, match="share"):
        ranking.lookup(0)


@pytest.mark.parametrize("shift", [0, 1])
def test_rank_lookup_finds_the_planted_offset_and_shift_overrides(shift):
    from harness.attention.heads import rank_lookup
    from tests.planted import build

    model, tokenizer, ids, _, truth = build("dilution", shift)
    ranking, found = rank_lookup(model, tokenizer, ids, batch_size=16)
    assert found["offset"] == shift and found["found"]
    assert ranked_offset(ranking) == shift and ranking.top(1) == [truth.lookup_heads[0]]
    given, told = rank_lookup(model, tokenizer, ids, shift=1 - shift, batch_size=16)
    assert told["offset"] == 1 - shift and not told["found"] and "--shift" in told["text"]
    assert ranked_offset(given) == 1 - shift


def test_ties_are_broken_by_the_offset_profile_not_the_index(
    monkeypatch, attn_tokenizer, instances
):
    """Heads with the same score at the reference: the one that weighs more near it (its
    whole offset profile) ranks first, whatever its index; equal on both, index order."""
    from harness.engine.scoring import model_shape

    model = build_tiny("llama", attn_tokenizer)
    layers, heads = model_shape(model)

    def masses(scorer, batch, reference, wanted, shift, threshold):
        out = {str(k): torch.zeros(layers, heads) for k in wanted}
        out["0"][0, 0] = out["0"][0, 1] = 1.0  # a tie at the reference
        out["1"][0, 1] = 0.5  # head 1 weighs ref+1 too
        return out, torch.zeros(layers, heads)  # and the output norms, summed

    monkeypatch.setattr(heads_module, "_batch_masses", masses)
    ranking = rank_heads(model, attn_tokenizer, instances[:2])
    assert ranking.order[:2] == [(0, 1), (0, 0)]
    assert ranking.order[2:] == sorted(ranking.order[2:])  # equal on both: index order


# --- each head against its null ----------------------------------------------------------------
def test_the_null_is_what_heads_spreading_their_weight_evenly_measure(attn_tokenizer, instances):
    """Uniform heads weigh each row's ref + k cells cells / visible keys: the null the
    ranking records at every offset is exactly their level there."""
    model = uniform_model(attn_tokenizer)
    ranking = rank_heads(model, attn_tokenizer, instances, batch_size=4)
    assert set(ranking.nulls) == set(ranking.offsets)
    for k, values in ranking.offsets.items():
        assert ranking.nulls[k] > 0
        assert values[1][3] == pytest.approx(ranking.nulls[k], rel=1e-4), k
    assert ranking.nulls["0"] == pytest.approx(
        expected_mass(attn_tokenizer, instances) / ranking.rows, rel=1e-4
    )
    again = HeadRanking.from_dict(ranking.to_dict())
    assert again.nulls == ranking.nulls


def test_uniform_heads_give_no_offset_and_no_near_tie():
    """Heads at their null (0.095 at the reference and at ref+1, a model with no lookup)
    lift no offset: no lookup to read, and no second candidate from a 'near tie'."""
    from harness.attention.heads import lookup_offset, offset_masses, second_lookup

    flat = profile_ranking({0: [0.095] * 4, 1: [0.095] * 4})
    assert second_lookup(flat, 0) is not None  # without nulls: the tie the report headlined
    flat.nulls = {"0": 0.095, "1": 0.095}
    assert offset_masses(flat) == {0: 0.0, 1: 0.0}
    found = lookup_offset(flat)
    assert found["offset"] == 0 and found["mass"] == 0.0
    assert found["text"].startswith("no head beats its null at any offset")
    assert second_lookup(flat, 0) is None


def test_a_previous_token_head_does_not_lift_the_reference():
    """A previous-token head at 0.165 (its weight on row 0's reference), against a null of
    0.095, is not a lookup head: the reference's mass is the lookup heads' alone."""
    from harness.attention.heads import offset_masses

    ranking = profile_ranking({0: [0.9, 0.165, 0.095, 0.095], 1: [0.0, 0.0, 0.095, 0.095]})
    assert offset_masses(ranking)[0] == pytest.approx((0.9 + 0.165 + 0.095 + 0.095) / 4)
    ranking.nulls = {"0": 0.095, "1": 0.095}
    assert offset_masses(ranking) == {0: pytest.approx(0.9), 1: 0.0}
    assert ranking.lookup() == [(0, 0)]


def test_a_lookup_split_across_two_offsets_is_judged_at_each():
    """Half the heads read the reference, half ref+1: with a previous-token head the top
    four at the reference outweighed ref+1 past the margin and the ref+1 half was never
    judged; counting only heads beating their null, each half is a candidate."""
    from harness.attention.heads import lookup_offset, own_heads, second_lookup

    nulls = {"0": 0.1, "1": 0.1}
    split = profile_ranking(
        {0: [0.9, 0.85, 0.0, 0.0, 0.17, 0.1], 1: [0.0, 0.0, 0.88, 0.8, 0.0, 0.1]}
    )
    assert second_lookup(split, 0) is None  # the old profile: ref+1 never judged
    split.nulls = nulls
    assert lookup_offset(split)["offset"] == 0
    second = second_lookup(split, 0)
    assert second["offset"] == 1 and second["text"].startswith("two candidate lookups")
    # a weaker ref+1 half (0.5, outside the 10% margin) with heads of its own: still judged
    weaker = profile_ranking({0: [0.9, 0.85, 0.0, 0.0], 1: [0.0, 0.0, 0.5, 0.45]})
    weaker.nulls = nulls
    assert own_heads(weaker, 1, 0) == [(0, 2), (0, 3)]
    second = second_lookup(weaker, 0)
    assert second["offset"] == 1 and second["split"]
    assert second["text"] == (
        "a lookup split across two offsets: the reference (ID mass 0.88) and ref+1 (0.47); "
        "heads (0, 2), (0, 3) look up at ref+1 and not at the reference: both are judged"
    )
    # the same heads weighing both offsets are one lookup, not a split; nor is a half under
    # half the chosen offset's mass
    broad = profile_ranking({0: [0.6, 0.55], 1: [0.4, 0.38]})
    broad.nulls = nulls
    assert own_heads(broad, 1, 0) == [] and second_lookup(broad, 0) is None
    faint = profile_ranking({0: [0.9, 0.85, 0.0], 1: [0.0, 0.0, 0.4]})
    faint.nulls = nulls
    assert own_heads(faint, 1, 0) == [(0, 2)] and second_lookup(faint, 0) is None


# --- each head's ID output norm (the output-scale control's target) ----------------------------
def test_the_id_output_norm_is_the_mean_over_answer_rows_of_each_heads_output(
    attn_tokenizer, instances
):
    """`output_norms[l][h]`: the L2 norm of the head's output (what o_proj reads, per head)
    averaged over the rows with a reference (the answer rows), measured by hand here with a
    hook on o_proj over one batch of every instance."""
    model = build_tiny("llama", attn_tokenizer)
    ranking = rank_heads(model, attn_tokenizer, instances, batch_size=len(instances))
    char_tok = CharTokenizer(attn_tokenizer)
    batch = collate_left([encode_instance(char_tok, x) for x in instances], char_tok.pad_id)
    rows = batch.reference_mask().any(-1)  # [b, L]
    heads = model.config.num_attention_heads
    seen = {}

    def keep(layer):
        def hook(_module, args):
            x = args[0]
            seen[layer] = x.reshape(*x.shape[:2], heads, -1).float().norm(dim=-1)  # [b, L, h]

        return hook

    layers = model.model.layers
    hooks = [b.self_attn.o_proj.register_forward_pre_hook(keep(i)) for i, b in enumerate(layers)]
    try:
        with torch.no_grad():
            model(**batch.model_inputs())
    finally:
        for h in hooks:
            h.remove()
    by_hand = torch.stack([seen[i][rows].mean(0) for i in range(len(layers))])  # [layers, h]
    assert ranking.rows == int(rows.sum())
    torch.testing.assert_close(torch.tensor(ranking.output_norms), by_hand, rtol=1e-4, atol=1e-6)
    # saved with the ranking; a ranking saved before it was measured loads without it
    data = ranking.to_dict()
    assert HeadRanking.from_dict(data).output_norms == ranking.output_norms
    del data["output_norms"]
    assert HeadRanking.from_dict(data).output_norms == []
