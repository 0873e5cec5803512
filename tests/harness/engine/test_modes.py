"""The intervention modes (harness.engine.modes): the registry, what each mode does to a row
of weights, the one set of parameter rules, and a new mode added as one module and one line."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest
import torch

from harness.engine import modes
from harness.engine.capture import AttentionPlan, Intervention, capture_attention
from harness.engine.modes import MODES, ModeArgs, check_parameter

LAYERS, HEADS = 2, 4


def test_the_registry_names_every_mode_without_loading_torch():
    assert modes.INTERVENTION_MODES == (
        "standard",
        "conditional",
        "knockout",
        "restore",
        "rescale",
    )
    assert modes.SWEEP_MODES == ("standard", "conditional")
    code = "import sys, harness.engine.modes; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"  # `attentionspan reproduce --help` reads the names


def row_weights():
    """[1, 2, 1, 4]: two heads, one query row each, summing to 1."""
    return torch.tensor([[[[0.1, 0.2, 0.3, 0.4]], [[0.4, 0.3, 0.2, 0.1]]]])


def args(strength=0.0, threshold=0.0, levels=None):
    column = torch.tensor(float(strength)).reshape(1, 1, 1, 1)
    return ModeArgs(column, torch.tensor(float(threshold)).reshape(1, 1, 1, 1), levels)


def test_each_mode_changes_its_cells_and_nothing_else():
    weights = row_weights()
    cells = torch.zeros(1, 2, 1, 4, dtype=torch.bool)
    cells[0, 0, 0, [1, 3]] = True  # head 0 only
    out = MODES["standard"].apply(weights, cells, args(strength=0.5))
    assert out[0, 0, 0].tolist() == pytest.approx([0.1, 0.7, 0.3, 0.9])
    assert torch.equal(out[0, 1], weights[0, 1])
    out = MODES["conditional"].apply(weights, cells, args(strength=0.5, threshold=0.3))
    assert out[0, 0, 0].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.9])  # 0.2 is not above
    out = MODES["knockout"].apply(weights, cells, args())
    assert out[0, 0, 0].tolist() == pytest.approx([0.1, 0.0, 0.3, 0.0])
    assert torch.equal(out[0, 1], weights[0, 1])
    levels = torch.tensor([0.9, 0.5]).reshape(1, 2, 1, 1)
    out = MODES["restore"].apply(weights, cells, args(levels=levels))
    assert float(out[0, 0, 0, [1, 3]].sum()) == pytest.approx(0.9)  # the level, on the cells
    assert float(out[0, 0, 0].sum()) == pytest.approx(1.0)  # and the row still sums to 1
    assert out[0, 0, 0, 1] / out[0, 0, 0, 3] == pytest.approx(0.5)  # spread as it was
    assert torch.equal(out[0, 1], weights[0, 1])  # a head without cells is left alone


def test_the_parameter_rules_name_the_field():
    for bad in (float("nan"), float("inf"), -0.5):
        with pytest.raises(ValueError, match="C must be finite and >= 0"):
            check_parameter("C", "strength", bad)
    for bad in (float("nan"), 1.5, -0.1):
        with pytest.raises(ValueError, match=r"thr must be finite and in \[0, 1\]"):
            check_parameter("thr", "threshold", bad)
    with pytest.raises(ValueError, match="lv must be"):
        check_parameter("lv", "levels", torch.tensor([[0.2, 1.2]]))
    check_parameter("C", "strength", torch.tensor([0.0, 2.0]))
    check_parameter("thr", "threshold", 1.0)


def test_an_intervention_checks_every_value_it_holds():
    heads = torch.ones(LAYERS, HEADS, dtype=torch.bool)
    with pytest.raises(ValueError, match="Intervention.strength must be finite"):
        Intervention(heads, strength=float("nan"))
    with pytest.raises(ValueError, match="Intervention.strength must be finite and >= 0"):
        Intervention(heads, strength=-1.0, mode="knockout")
    with pytest.raises(ValueError, match="Intervention.threshold"):
        Intervention(heads, mode="conditional", threshold=float("nan"))
    rows = torch.stack([heads, heads])
    with pytest.raises(ValueError, match="Intervention.strength"):
        Intervention(rows, strength=torch.tensor([1.0, -2.0]))
    with pytest.raises(ValueError, match="Intervention.levels is required with mode 'restore'"):
        Intervention(rows, mode=["standard", "restore"])
    with pytest.raises(ValueError, match="levels is required with mode"):
        Intervention(rows, levels=torch.zeros(LAYERS, HEADS))  # no row restores
    with pytest.raises(ValueError, match=r"\[batch, layers, heads\] or \[layers, heads\]"):
        Intervention(rows, mode="restore", levels=torch.zeros(3, LAYERS, HEADS))
    # Per row: levels per row, or one [layers, heads] for every row.
    Intervention(rows, mode=["standard", "restore"], levels=torch.zeros(2, LAYERS, HEADS))
    Intervention(rows, mode=["standard", "restore"], levels=torch.zeros(LAYERS, HEADS))


def test_a_new_mode_is_one_module_and_one_line(tiny_models, monkeypatch):
    """A toy mode, `halve` (the weights at the cells halved), written as a user would: one
    module defining MODE, and one line adding it to the registry. Capture takes it without
    any other change (the sweep's settings too: tests/harness/attention/test_setting.py)."""
    halve = types.ModuleType("halve")  # the new module

    def apply(weights, cells, args):
        return torch.where(cells, weights / 2, weights)

    halve.MODE = modes.Mode("halve", apply)
    monkeypatch.setitem(MODES, halve.MODE.name, halve.MODE)  # the registry line

    model = tiny_models["llama"]
    ids = torch.randint(5, 90, (1, 8), generator=torch.Generator().manual_seed(0))
    ref = torch.zeros(1, 8, 8, dtype=torch.bool)
    ref[0, 5, [1, 3]] = ref[0, 7, 2] = True
    heads = torch.zeros(LAYERS, HEADS, dtype=torch.bool)
    heads[0, 1] = True
    with torch.no_grad():
        eager = model(input_ids=ids, output_attentions=True).attentions[0]
        iv = Intervention(heads, mode="halve")
        plan = AttentionPlan(reference=ref, intervention=iv, patterns=(0,))
        with capture_attention(model, plan) as record:
            model(input_ids=ids)
    got = record.patterns["blocks.0.attn.hook_pattern"]
    expected = eager.clone()
    expected[0, 1][ref[0]] /= 2
    torch.testing.assert_close(got, expected, atol=0, rtol=0)


@pytest.mark.parametrize("mass", [0.99, 0.999])
def test_restore_is_exact_in_bf16(mass):
    """Restore divides by the actual sum of the other cells, in float32: with 1 - mass in
    bf16 a row holding 0.99 on its cells came back summing to 0.94, and one holding 0.999
    (1.0 in bf16) was not restored at all."""
    rest = (1 - mass) / 3
    weights = torch.tensor([mass, rest, rest, rest]).reshape(1, 1, 1, 4).to(torch.bfloat16)
    cells = torch.tensor([True, False, False, False]).reshape(1, 1, 1, 4)
    levels = torch.tensor([0.5]).reshape(1, 1, 1, 1)
    out = MODES["restore"].apply(weights, cells, args(levels=levels))
    assert out.dtype == torch.bfloat16
    row = out[0, 0, 0].float()
    assert float(row[0]) == pytest.approx(0.5, abs=4e-3)  # the level, to bf16's precision
    assert float(row.sum()) == pytest.approx(1.0, abs=8e-3)
    assert float(row[1]) == pytest.approx(float(row[2]))  # the rest spread as it was


def test_rescale_keeps_the_weights_and_scales_the_selected_rows_output():
    weights = row_weights()
    cells = torch.zeros(1, 2, 1, 4, dtype=torch.bool)
    assert MODES["rescale"].apply(weights, cells, args()) is weights  # the pattern untouched
    values = torch.tensor([[[[3.0, 4.0]], [[0.0, 0.0]], [[1.0, 0.0]]]]).reshape(1, 3, 1, 2)
    rows = torch.tensor([True, True, False]).reshape(1, 3, 1, 1)
    norms = ModeArgs(norms=torch.tensor([10.0, 10.0, 10.0]).reshape(1, 3, 1, 1))
    out = MODES["rescale"].output(values, rows, norms)
    assert out[0, 0, 0].tolist() == pytest.approx([6.0, 8.0])  # length 10, same direction
    assert out[0, 1, 0].tolist() == [0.0, 0.0]  # no direction to keep: left as it is
    assert out[0, 2, 0].tolist() == [1.0, 0.0]  # not a selected row
