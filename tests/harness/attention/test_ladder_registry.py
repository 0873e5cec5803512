"""One control system: a control added as one module (tests/harness/attention/toy_control.py)
and one registry line runs at every dose of the ladder, and shows in the dose table, the
dose figure's legend and the calibrated verdict's numbers; the registry says where each
control runs."""

from __future__ import annotations

import pytest

from attentionspan_datasets.tasks.base import Instance
from harness.attention import controls
from harness.attention.dose import dose_curve, dose_ladder
from harness.attention.verdicts.calibrated import calibrated_verdict
from harness.report import plots
from harness.report.report_md import dose_section
from tests.harness.attention import toy_control
from tests.harness.attention.ladder_records import record


@pytest.fixture
def with_toy(monkeypatch):
    monkeypatch.setattr(controls, "CONTROLS", (*controls.CONTROLS, toy_control.CONTROL))  # the line


def test_the_registry_says_where_each_control_runs():
    where = {c.role: c.runs_at for c in controls.CONTROLS}
    assert where == {
        "random_heads": ("grid",),
        "random_positions": ("grid",),
        "bottom_heads": ("grid",),
        "knockout": ("grid",),
        "pointer": ("grid", "ladder"),
        "restore": ("grid",),
        "other_heads": ("ladder",),
        "output_scale": ("ladder",),
    }
    assert [r.name for r in controls.ladder_readings()] == [
        "followed",
        "followed_at_top",
        "random_heads_max",
        "output_scale",
    ]
    with pytest.raises(ValueError, match="must run somewhere"):
        controls.Control("nowhere", None)


def reversal(chars: str, index: int) -> Instance:
    n = len(chars)
    return Instance(
        "string_reversal", chars + "=", chars[::-1], [[n - 1 - i] for i in range(n)], {}, "r", index
    )


def test_a_toy_control_reaches_the_dose_table_the_figure_and_the_verdict(
    with_toy, tmp_path, monkeypatch
):
    xs = [reversal("abcdefgh"[i : i + 5], i) for i in range(4)]
    ladder = dose_ladder(2, (0.5, 2.0), pointer_shifts=(3,), random_seeds=(0,))
    made = [s for rung in ladder.rungs for s in rung.of("toy_bottom")]
    assert [(s.name, s.role) for s in made] == [
        ("bottom2-C0.5", "toy_bottom"),
        ("bottom2-C2", "toy_bottom"),
    ]

    def answer(setting, x):  # the push repairs every row, the toy's heads half of them
        if setting.role == "dose":
            return x.target
        if setting.role == "toy_bottom":
            return x.target[:2] + "?" * (len(x.target) - 2)
        return "?" * len(x.target)

    records = {s.name: [record(x, answer(s, x)) for x in xs] for s in ladder.settings}
    ids = {s.name: [record(x, x.target) for x in xs] for s in ladder.id_settings}
    curve = dose_curve(xs, ladder, records, ids, n_resamples=200)
    assert curve["doses"][0]["bottom"]["gain"] == pytest.approx(0.4)

    diagnosis = {"shares": {"diluted": 1.0}, "instances": 4}
    verdict = calibrated_verdict(curve, curve, diagnosis)
    assert verdict["numbers"]["toy_bottom_gain"] == pytest.approx(0.4)

    figures = []
    save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or save(fig, path))
    task = {
        "task": "reversal",
        "dose": {"validation": curve, "test": curve | {"heads": [[0, 0], [0, 1]]}},
        "verdict": verdict,
    }
    lines = dose_section(task, tmp_path / "reversal", "reproduce")
    header = next(line for line in lines if line.startswith("| C |"))
    assert header == (
        "| C | reference gain | push at ref+3: gain, following | random other heads: mean (max) "
        "| output scaled to ID norm: gain | toy bottom heads: gain | ID exact |"
    )
    row = next(line for line in lines if line.startswith("| 0.5"))
    assert row.count("|") == header.count("|") and "+40.0 [" in row.split("|")[6]
    labels = [t.get_text() for t in figures[0].axes[0].get_legend().get_texts()]
    assert labels == [
        "reference",
        "pointer ref+3",
        "random other heads (1 draws)",
        "output scaled to ID norm",
        "toy bottom heads",
    ]
