"""Interventions through the orchestration: C = 0 is no intervention, controls are what
they claim (random heads are not the top heads; random positions keep each row's count and
avoid the reference), and the shared prefill changes nothing."""

from __future__ import annotations

import pytest
import torch

from attentionspan_datasets.splits import iter_split
from harness.attention.heads import HeadRanking, causal_valid, rank_heads
from harness.attention.interventions import (
    intervention_for,
    random_positions,
    score_settings,
    select_heads,
)
from harness.attention.sweep import BASELINE, Setting
from harness.engine.inference import collate_left
from harness.foundation.tokenization import CharTokenizer, encode_instance
from tests.harness.attention_models import build_tiny


def fake_ranking(layers: int = 4, heads: int = 8) -> HeadRanking:
    scores = [[float(layer * heads + head) for head in range(heads)] for layer in range(layers)]
    order = sorted(
        ((la, h) for la in range(layers) for h in range(heads)), key=lambda x: -scores[x[0]][x[1]]
    )
    return HeadRanking(scores=scores, per_row=scores, order=order)


@pytest.fixture(scope="module")
def setup(attn_tokenizer):
    model = build_tiny("llama", attn_tokenizer)
    instances = list(iter_split("reversal_ood", split="validation", stop=6, max_length=14))
    ids = list(iter_split("reversal_id", split="validation", stop=8))
    ranking = rank_heads(model, attn_tokenizer, ids, batch_size=8)
    return model, instances, ranking


def test_zero_strength_is_no_intervention(attn_tokenizer, setup):
    model, instances, ranking = setup
    settings = [BASELINE, Setting(heads="top", n=4, strength=0.0)]
    records = score_settings(model, attn_tokenizer, instances, settings, ranking, batch_size=3)
    assert records["baseline"] == records["top4-C0"]
    strong = Setting(heads="top", n=8, strength=50.0)
    changed = score_settings(model, attn_tokenizer, instances, [strong], ranking, batch_size=3)
    assert [r["prediction"] for r in changed[strong.name]] != [
        r["prediction"] for r in records["baseline"]
    ]


def test_shared_prefill_gives_the_same_records(attn_tokenizer, setup):
    model, instances, ranking = setup
    settings = [BASELINE, Setting(heads="top", n=2, strength=2.0)]
    shared = score_settings(model, attn_tokenizer, instances, settings, ranking, batch_size=3)
    alone = score_settings(
        model, attn_tokenizer, instances, settings, ranking, batch_size=3, reuse_prefill=False
    )
    assert shared == alone
    # The teacher-forced ladder continues the same prefill: records equal a full forward's.
    settings.append(Setting(heads="top", n=4, strength=1.0, shift=3))
    forced = {
        reuse: score_settings(
            model,
            attn_tokenizer,
            instances,
            settings,
            ranking,
            batch_size=3,
            generate=False,
            reuse_prefill=reuse,
        )
        for reuse in (True, False)
    }
    assert forced[True] == forced[False]
    assert forced[True]["baseline"] != forced[True]["top4-C1-shift+3"]  # not vacuous


def test_random_heads_differ_from_top_heads_and_follow_their_seed():
    ranking = fake_ranking()
    top = select_heads(Setting(heads="top", n=4, strength=1.0), ranking)
    assert top == [(3, 7), (3, 6), (3, 5), (3, 4)]
    draws = [
        select_heads(Setting(heads="random", n=4, strength=1.0, seed=s), ranking) for s in range(3)
    ]
    assert all(len(set(d)) == 4 for d in draws)
    assert all(set(d) != set(top) for d in draws)
    assert draws[0] != draws[1]
    assert draws[0] == select_heads(Setting(heads="random", n=4, strength=1.0, seed=0), ranking)
    assert select_heads(Setting(heads="bottom", n=2, strength=1.0), ranking) == [(0, 0), (0, 1)]
    with pytest.raises(ValueError, match="n must be <= 32"):
        select_heads(Setting(heads="top", n=33, strength=1.0), ranking)


def test_random_positions_keep_the_count_and_avoid_the_reference(attn_tokenizer):
    char_tok = CharTokenizer(attn_tokenizer)
    instances = list(iter_split("reversal_ood", split="test", stop=5, max_length=16))
    batch = collate_left([encode_instance(char_tok, x) for x in instances], char_tok.pad_id)
    allowed = batch.attention_mask.bool()
    reference = causal_valid(batch.reference_mask(), allowed)
    for seed in (0, 1):
        cells = random_positions(reference, allowed, seed)
        assert torch.equal(cells.sum(-1), reference.sum(-1))
        assert not (cells & reference).any()
        assert torch.equal(cells, causal_valid(cells, allowed))  # causal, no padding key
    assert not torch.equal(
        random_positions(reference, allowed, 0), random_positions(reference, allowed, 1)
    )


def test_intervention_carries_heads_cells_and_mode(attn_tokenizer):
    char_tok = CharTokenizer(attn_tokenizer)
    instances = list(iter_split("reversal_id", split="test", stop=3))
    batch = collate_left([encode_instance(char_tok, x) for x in instances], char_tok.pad_id)
    allowed = batch.attention_mask.bool()
    reference = batch.reference_mask()
    ranking = fake_ranking(2, 4)
    iv = intervention_for(Setting(heads="top", n=2, strength=1.5), ranking, reference, allowed)
    assert iv.heads.sum() == 2 and iv.heads[1, 3] and iv.heads[1, 2]
    assert torch.equal(iv.positions, causal_valid(reference, allowed))
    assert iv.strength == 1.5 and iv.mode == "standard"
    knock = intervention_for(
        Setting(heads="top", n=2, mode="knockout"), ranking, reference, allowed
    )
    assert knock.mode == "knockout"
    shifted = intervention_for(
        Setting(heads="top", n=1, strength=1.0, shift=1), ranking, reference, allowed
    )
    assert not (shifted.positions & reference).all()
    assert intervention_for(BASELINE, ranking, reference, allowed) is None
    control = Setting(heads="top", n=1, strength=1.0, shift=1, positions="random")
    moved = intervention_for(control, ranking, reference, allowed).positions
    assert not (moved & reference).any() and not (moved & shifted.positions).any()
    assert torch.equal(moved.sum(-1), shifted.positions.sum(-1))


def test_conditional_above_every_weight_is_no_intervention(attn_tokenizer, setup):
    """No post-softmax weight exceeds 1, so a conditional threshold of 1 changes nothing,
    while a threshold of 0 acts like the standard intervention."""
    model, instances, ranking = setup
    never = Setting(heads="top", n=8, strength=50.0, mode="conditional", threshold=1.0)
    always = Setting(heads="top", n=8, strength=50.0, mode="conditional", threshold=0.0)
    standard = Setting(heads="top", n=8, strength=50.0)
    settings = [BASELINE, never, always, standard]
    records = score_settings(model, attn_tokenizer, instances, settings, ranking, batch_size=6)
    assert records[never.name] == records["baseline"]
    assert records[always.name] == records[standard.name]


SETTINGS = [
    BASELINE,
    Setting(heads="top", n=2, strength=1.0),
    Setting(heads="top", n=3, strength=0.5, mode="conditional", threshold=0.1),
    Setting(heads="random", n=2, strength=2.0, seed=1),
    Setting(heads="top", n=2, strength=1.0, positions="random", seed=0),
    Setting(heads="top", n=2, strength=1.0, shift=-1),
    Setting(heads="top", n=2, mode="knockout"),
    Setting(heads="bottom", n=2, strength=2.0, renormalise=True),
    Setting(heads="top", n=4, strength=1.5),
]


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_settings_batched_per_row_equal_separate_generations(attn_tokenizer, kind):
    """Nine settings as one generation per batch (rows = instances x settings, one setting
    per row) give the records of nine separate generations. Greedy answers are compared
    exactly: on these tiny models no argmax is tied within float round-off (a batched matmul
    may differ by ~1e-7, which could flip an exact tie on another model)."""
    model = build_tiny(kind, attn_tokenizer)
    ids = list(iter_split("reversal_id", split="validation", stop=6))
    ranking = rank_heads(model, attn_tokenizer, ids, batch_size=6)
    instances = list(iter_split("reversal_ood", split="validation", stop=5))
    calls = []
    hook = model.register_forward_pre_hook(lambda *args: calls.append(1))
    try:
        together = score_settings(model, attn_tokenizer, instances, SETTINGS, ranking, batch_size=3)
    finally:
        hook.remove()
    separate = score_settings(
        model, attn_tokenizer, instances, SETTINGS, ranking, batch_size=3, batched=False
    )
    assert together == separate
    # Per batch: the prefix, the prefill and decode steps of ONE generation, ONE forced pass.
    steps = max(len(x.target) for x in instances) + 1
    assert len(calls) <= 2 * (1 + steps + 1)
    # The settings do act (the comparison is not between identical baselines).
    assert together["top2-C1"] != together["baseline"]


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_the_forced_pass_beside_a_generation_continues_the_shared_prefill(attn_tokenizer, kind):
    """The teacher-forced pass scored beside each generation continues the batch's
    shared prefill instead of forwarding every row's whole prompt again. Every setting's
    records (the teacher-forced token accuracy among them) equal those of passes with no
    prefill at all, and the forced forward reads only each row's last prompt column and
    its answer."""
    model = build_tiny(kind, attn_tokenizer)
    ids = list(iter_split("reversal_id", split="validation", stop=6))
    ranking = rank_heads(model, attn_tokenizer, ids, batch_size=6)
    instances = list(iter_split("reversal_ood", split="validation", stop=3))
    shapes = []

    def hook(module, args, kwargs):
        shapes.append(tuple(kwargs["input_ids"].shape))

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        shared = score_settings(model, attn_tokenizer, instances, SETTINGS, ranking, batch_size=3)
    finally:
        handle.remove()
    alone = score_settings(
        model, attn_tokenizer, instances, SETTINGS, ranking, batch_size=3, reuse_prefill=False
    )
    assert shared == alone
    assert all("tf_token_acc" in r for rows in shared.values() for r in rows)
    assert shared["top2-C1"] != shared["baseline"]  # not vacuous
    char_tok = CharTokenizer(attn_tokenizer)
    full = collate_left([encode_instance(char_tok, x) for x in instances], char_tok.pad_id)
    rows = len(instances) * len(SETTINGS)
    # the last forward is the forced pass: every row, from the last prompt column on
    assert shapes[-1] == (rows, full.total_len - full.prompt_width + 1)
    assert max(columns for n, columns in shapes if n == rows) < full.total_len


def test_settings_split_into_groups_of_max_rows(attn_tokenizer, setup, monkeypatch):
    """A grid larger than MAX_ROWS rows runs in several batched generations, same records."""
    from harness.attention import interventions

    model, instances, ranking = setup
    chosen = SETTINGS[:5]
    together = score_settings(model, attn_tokenizer, instances, chosen, ranking, batch_size=3)
    monkeypatch.setattr(interventions, "MAX_ROWS", 7)  # 2 settings x 3 instances per group
    grouped = score_settings(model, attn_tokenizer, instances, chosen, ranking, batch_size=3)
    assert grouped == together
