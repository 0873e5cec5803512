"""A verdict under the stability threshold is never shown as one word; a verdict recorded
before stability was measured says "not recorded", never a figure."""

import json
from pathlib import Path

from harness.report import results_doc
from harness.report.findings import verdict_name
from harness.report.stability_md import (
    shown_word,
    stability_cell,
    stability_sentence,
)

REPO = Path(__file__).resolve().parents[3]


def _verdict(share, words, margin=None):
    stability = {
        "word": "nudge-repairable",
        "share": share,
        "words": words,
        "resamples": 1000,
        "sizes": {"validation": 40, "test": 64},
        "reported_as": "unstable: nudge-repairable / inconclusive (0.62 / 0.35)",
        "held_fixed": ["the lookup", "the choice of N"],
        "rechosen": ["the dose C"],
    }
    if margin is not None:
        stability["flip_margin"] = margin
    return {"verdict": "nudge-repairable", "reasons": ["r"], "numbers": {}, "stability": stability}


MARGIN = {
    "margin": 2,
    "exact": False,
    "reported_as": "at most 2 instances",
    "changes": [
        {"stream": "test", "position": 5, "copy_of": 12},
        {"stream": "test", "position": 9, "copy_of": 12},
    ],
    "to": "inconclusive",
    "calls": 140,
    "budget": 1000,
    "resamples": 1000,
}


def test_under_the_threshold_the_verdict_is_unstable_between_its_words():
    unstable = _verdict(0.62, {"nudge-repairable": 0.62, "inconclusive": 0.35, "x": 0.03})
    assert shown_word(unstable) == "unstable: nudge-repairable / inconclusive"
    assert verdict_name({"verdict": unstable}) == "unstable: nudge-repairable / inconclusive"
    # most taken first, even when that is not the sample's own word
    other = _verdict(0.40, {"inconclusive": 0.55, "nudge-repairable": 0.40})
    assert shown_word(other) == "unstable: inconclusive / nudge-repairable"
    stable = _verdict(0.8, {"nudge-repairable": 0.8, "inconclusive": 0.2})
    assert shown_word(stable) == "nudge-repairable"


def test_the_cell_is_share_and_flip_margin():
    assert stability_cell(_verdict(0.93, {}, MARGIN)) == "0.93 (at most 2)"
    exact = {**MARGIN, "margin": 1, "exact": True}
    assert stability_cell(_verdict(0.62, {}, exact)) == "0.62 (exactly 1)"
    none = {**MARGIN, "margin": None, "changes": []}
    assert stability_cell(_verdict(1.0, {}, none)) == "1.00 (none in 1000)"
    assert stability_cell(_verdict(0.9, {})) == "0.90 (margin not recorded)"


def test_a_verdict_read_before_stability_says_not_recorded():
    old = {"verdict": "downstream", "reasons": ["r"], "numbers": {}}
    assert shown_word(old) == "downstream" and stability_cell(old) == "not recorded"
    assert stability_cell(None) == "not recorded" and shown_word(None) == "none"
    assert stability_sentence(old).startswith("Stability not recorded")


def test_the_report_sentence_says_what_was_resampled_held_and_the_margin():
    text = stability_sentence(
        _verdict(0.62, {"nudge-repairable": 0.62, "inconclusive": 0.35}, MARGIN)
    )
    assert "0.62 of 1000 bootstrap resamples" in text
    assert "validation 40, test 64 instances" in text
    assert "said as **unstable: nudge-repairable / inconclusive (0.62 / 0.35)**" in text
    assert "held fixed: the lookup; the choice of N" in text
    assert "chosen again on each resample: the dose C" in text
    said = "Flip margin: at most 2 instances (test 5 -> a copy of 12, test 9 -> a copy of 12"
    assert said in text


def test_results_md_rows_show_the_unstable_verdict_and_its_stability():
    # a committed digest's task given a stability: its row never says the one word
    data = json.loads((REPO / "docs" / "quick-run-t6.json").read_text())
    name, task = next(iter(data["tasks"].items()))
    task.pop("lookups", None)  # one lookup: its row says the verdict's word alone
    word = task["verdict"]["verdict"]
    stability = {"word": word, "share": 0.55, "words": {word: 0.55, "no lookup": 0.45}}
    task["verdict"]["stability"] = {**stability, "flip_margin": MARGIN}
    block = results_doc.render({name: task}, **data["meta"])
    (row,) = [line for line in block.splitlines() if line.startswith(f"| {name} |")]
    assert f"| unstable: {word} / no lookup | 0.55 (at most 2) |" in row, row
    assert f"**unstable: {word} / no lookup**" in block  # the findings too


def test_the_per_task_report_shows_the_unstable_verdict_and_its_stability(tmp_path):
    from harness.report.report_md import dose_section

    gain = {"gain": 0.1, "low": 0.0, "high": 0.2, "n": 10}
    test = {
        "n": 2,
        "instances": 10,
        "heads": [[0, 0]],
        "doses": [{"strength": 0.5, "reference": gain}],
    }
    verdict = _verdict(0.62, {"nudge-repairable": 0.62, "inconclusive": 0.35}, MARGIN)
    verdict["numbers"] = {"dose": {"C": 0.5}}
    task = {"task": "reversal", "dose": {"validation": {"instances": 10}, "test": test}}
    lines = dose_section({**task, "verdict": verdict}, tmp_path / "reversal", "reproduce")
    said = [line for line in lines if line.startswith("**Calibrated verdict")]
    assert said[0].startswith("**Calibrated verdict: unstable: nudge-repairable / inconclusive**")
    assert any(line.startswith("Stability: 0.62 of 1000") for line in lines)
    del verdict["stability"]  # read before stability was measured
    lines = dose_section({**task, "verdict": verdict}, tmp_path / "reversal", "reproduce")
    assert any(line.startswith("**Calibrated verdict: nudge-repairable**") for line in lines)
    assert any(line.startswith("Stability not recorded") for line in lines)


def test_two_candidate_lookups_each_give_their_cell():
    from harness.report.stability_md import task_cell

    own = _verdict(0.93, {}, MARGIN)
    second = _verdict(0.55, {}, {**MARGIN, "margin": 1, "exact": True})
    task = {"verdict": own, "lookups": [{"offset": 0}, {"offset": 1, "verdict": second}]}
    assert task_cell(task) == "0.93 (at most 2) / 0.55 (exactly 1)"
    older = {"verdict": {"verdict": "x"}, "lookups": [{"offset": 0}, {"verdict": {}}]}
    assert task_cell(older) == "not recorded"
    assert task_cell({"verdict": own}) == "0.93 (at most 2)"
