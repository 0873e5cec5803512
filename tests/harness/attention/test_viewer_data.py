"""The viewer's data: quantisation, the mask, and the scores `attentionspan attention` gives."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.attention import viewer_data
from harness.attention.analysis import AnalysisConfig, analyse_batch, load_instances
from harness.foundation.data import PromptConfig
from harness.foundation.tokenization import CharTokenizer
from tests.harness.attention_models import build_tiny


@pytest.fixture(scope="module")
def model(attn_tokenizer):
    return build_tiny("llama", attn_tokenizer)


@pytest.fixture(scope="module")
def instances():
    return load_instances("reversal_id", 6, 1234, "test") + load_instances(
        "reversal_ood", 3, 1234, "test"
    )


@pytest.fixture(scope="module")
def data(model, attn_tokenizer, instances):
    return viewer_data.build_viewer_data(model, attn_tokenizer, instances, batch_size=4)


def test_quantise_round_trip_within_one_255th_of_the_row_max():
    rng = np.random.default_rng(0)
    values = rng.random((5, 9)) ** 3
    lengths = [9, 3, 0, 5, 1]
    values[1] = 0.0  # an all-zero row stays zero
    data, maxima = viewer_data.quantise(values, lengths)
    assert data.dtype == np.uint8 and len(data) == sum(lengths)
    back = viewer_data.dequantise(data, maxima, lengths, 9)
    for i, n in enumerate(lengths):
        top = values[i, :n].max() if n else 0.0
        assert np.all(np.abs(back[i, :n] - values[i, :n]) <= top / 510 + 1e-7)
        assert np.all(back[i, n:] == 0)
        if n:
            assert maxima[i] == np.float32(top)


def test_views_cover_the_rollout_every_layer_and_all_heads_of_a_small_model(data):
    names = [v["name"] for v in data["views"]]
    assert names[0] == "rollout"
    assert names[1:3] == ["L0 mean", "L1 mean"]
    assert len(names) == 1 + 2 + 2 * 4  # tiny llama: 2 layers x 4 heads, all kept


def test_maps_decode_to_the_captured_attention(model, attn_tokenizer, instances, data):
    """The stored head maps equal the eager attention the model computes (within 1/255 of the
    row max), on the answer rows and task-text columns only."""
    import torch

    char_tok = CharTokenizer(attn_tokenizer)
    j = 7  # an OOD instance, alone in its batch-free forward
    x = instances[j]
    enc = PromptConfig().encode(char_tok, x)
    ids = torch.tensor([enc.input_ids])
    with torch.inference_mode():
        attn = model(input_ids=ids, output_attentions=True).attentions
    maps = viewer_data.decode_maps(data, j)["baseline"]
    rows = [enc.target_offset - 1 + i for i in range(enc.target_len)]
    cols = [enc.position(c) for c in range(len(x.text))]
    inst = data["instances"][j]
    for v, view in enumerate(data["views"]):
        if view["kind"] != "head":
            continue
        full = attn[view["layer"]][0, view["head"]][rows][:, cols].numpy()
        for i, n in enumerate(inst["lengths"]):
            assert np.all(full[i, n:] == 0)  # only the causal part is dropped
            tol = full[i, :n].max() / 510 + 2e-6
            assert np.abs(maps[v, i, :n] - full[i, :n]).max() <= tol


def test_mask_equals_the_instance_reference(instances, data):
    for x, inst in zip(instances, data["instances"]):
        assert inst["text"] == x.prompt + x.target
        assert inst["mask"] == [sorted(row) for row in x.reference]
        block = inst["settings"]["baseline"]
        assert len(block["predicted"]) == len(block["correct"]) == len(x.target)
        assert block["correct"] == [p == t for p, t in zip(block["predicted"], x.target)]


def test_scores_equal_the_analysis_records(model, attn_tokenizer, instances, data):
    """Per answer row, the score stored is the one `attentionspan attention` records (its
    teacher-forced pass on the same batches)."""
    char_tok = CharTokenizer(attn_tokenizer)
    config = AnalysisConfig(configs=["reversal_id"], modes=("teacher_forced",))
    records = []
    for first in range(0, len(instances), 4):
        found, _ = analyse_batch(
            model, char_tok, instances[first : first + 4], PromptConfig(), config
        )
        records += found
    shown = [
        (s, ok)
        for inst in data["instances"]
        for s, ok in zip(
            inst["settings"]["baseline"]["scores"], inst["settings"]["baseline"]["correct"]
        )
    ]
    assert len(shown) == len(records)
    for (s, ok), r in zip(shown, records):
        assert ok == r["correct"]
        if math.isnan(r["share"]):
            assert s is None
        else:
            assert s == pytest.approx(r["share"], abs=1e-6)


def test_head_rule_ranking_and_shares():
    from harness.attention.heads import HeadRanking

    assert len(viewer_data.choose_heads(2, 4)) == 8  # small: every head
    shares = np.arange(30 * 9, dtype=float).reshape(30, 9)
    top = viewer_data.choose_heads(30, 9, shares=shares)
    assert len(top) == viewer_data.DEFAULT_TOP_K == 16
    assert top[:10] == [(29, h) for h in range(8, -1, -1)] + [(28, 8)]  # largest share first
    order = [(3, 1), (0, 0), (2, 2)]
    ranking = HeadRanking(scores=[[0.0] * 3] * 4, per_row=[[0.0] * 3] * 4, order=order)
    assert viewer_data.choose_heads(4, 3, ranking, top_k=2) == [(3, 1), (0, 0)]
    with pytest.raises(ValueError, match="ranking is for"):
        viewer_data.choose_heads(5, 3, ranking, top_k=2)
    with pytest.raises(ValueError, match="top_k"):
        viewer_data.choose_heads(5, 3, shares=shares, top_k=-1)


def test_an_intervention_setting_sits_beside_the_baseline(model, attn_tokenizer, instances):
    import torch

    from harness.engine.capture import Intervention

    heads = torch.zeros(2, 4, dtype=torch.bool)
    heads[1, 0] = True
    iv = Intervention(heads=heads, strength=5.0)
    data = viewer_data.build_viewer_data(model, attn_tokenizer, instances[:3], setting=iv)
    assert data["settings"] == ["baseline", "intervention"]
    maps = viewer_data.decode_maps(data, 0)
    v = next(i for i, view in enumerate(data["views"]) if view["name"] == "L1H0")
    inst = data["instances"][0]
    # C = 5 on the reference cells of L1H0: those cells now hold most of the (unnormalised) row.
    for i, cols in enumerate(inst["mask"]):
        if cols:
            assert maps["intervention"][v, i, cols].sum() > 5.0 * 0.99
            assert maps["baseline"][v, i, cols].sum() < 1.0 + 1e-6


def test_bad_input_is_named(model, attn_tokenizer, instances):
    with pytest.raises(ValueError, match="instances"):
        viewer_data.build_viewer_data(model, attn_tokenizer, [])
    with pytest.raises(ValueError, match="batch_size"):
        viewer_data.build_viewer_data(model, attn_tokenizer, instances, batch_size=0)
    with pytest.raises(ValueError, match="setting"):
        viewer_data.build_viewer_data(model, attn_tokenizer, instances, setting="top4")
