"""The supervision study's block of docs/results.md: rendered from its digest alone, and
written by `attentionspan supervision-doc`. (Once a digest is committed, a test
renders it again and compares it with its block, as tests/harness/report/test_results_doc.py
does for reproduce.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.commands.supervision_doc import main
from harness.report.supervision_doc import digest, markers, render, replace_block


def pooled(mean: float, spread: float = 0.05) -> dict:
    return {"mean": mean, "low": mean - spread, "high": mean + spread, "n": 256}


def gain(value: float) -> dict:
    return {
        "gain": value,
        "low": value - 0.02,
        "high": value + 0.02,
        "n": 384,
        "seeds": [value] * 3,
    }


ARMS = {
    "baseline": ("baseline", 0.0),
    "w0.3": ("ladder", 0.3),
    "wrong3-w0.3": ("wrong_mask", 0.3),
    "random-w0.3": ("random_heads", 0.3),
    "steps-x1.5": ("extra_steps", 0.0),
}


def fake_results() -> dict:
    """The parts of a task's results.json the digest reads."""
    names = list(ARMS)
    return {
        "task": "reversal",
        "metric": "partial_acc",
        "chosen": "w0.3",
        "seeds": [{"run": k} for k in range(3)],
        "arms": {
            n: {"role": r, "weight": w, "steps": 600, "model_sha256": ["ab"] * 3}
            for n, (r, w) in ARMS.items()
        },
        "accuracy": {
            s: {n: {"exact_match": pooled(0.4), "partial_acc": pooled(0.6)} for n in names}
            for s in ("id", "ood")
        },
        "gains": {"ood": {n: {"partial_acc": gain(0.1)} for n in names[1:]}},
        "mass": {"ood": {n: {"supervised": pooled(0.5)} for n in names}},
        "diagnosis": {
            n: {"ood": {"instances": 40, "shares": {"on_reference": 0.25}}} for n in names
        },
        "versus_controls": {n: {"partial_acc": gain(0.05)} for n in names[2:]},
        "verdict": {
            "verdict": "supervision generalises",
            "reason": "w0.3's OOD partial_acc gain +10.0 [+8.0, +12.0] points",
            "rules_out": "rules out that the failure is downstream",
        },
    }


def test_render_a_digest():
    data = {
        "meta": {
            "command": "attentionspan supervision --tasks reversal --output runs/sup",
            "machine": "a 2-core CPU",
            "date": "2026-12-01",
            "versions": {"torch": "2.13.0"},
        },
        "tasks": {"reversal": digest_of(fake_results())},
    }
    text = render(data, "supervision-reversal")
    begin, end = markers("supervision-reversal")
    assert text.startswith(begin) and text.endswith(end)
    assert "Measured 2026-12-01 on a 2-core CPU (torch 2.13.0):" in text
    assert "attentionspan supervision --tasks reversal --output runs/sup" in text
    assert "- **reversal: supervision generalises** (3 seed runs per arm): w0.3's OOD" in text
    assert (
        "| w0.3 (chosen) | ladder | 0.400 | 0.400 | 0.600 | +10.0 [+8.0, +12.0] | 0.500 |" in text
    )
    assert "| baseline | baseline | 0.400 | 0.400 | 0.600 | - | 0.500 | 0.25 |" in text
    assert "w0.3 minus each control (points): wrong3-w0.3 +5.0 [+3.0, +7.0]" in text
    assert "[supervision-reversal.json](supervision-reversal.json)" in text
    # no basis in the digest (a study made before the round-2 rule): said plainly
    assert data["tasks"]["reversal"]["basis"] is None
    assert (
        "*Errors on reference* predates the round-2 diagnosis rule: it reads every wrong row"
    ) in text
    assert "any *attention is not the bottleneck* verdict, which reads it, rests on" in text
    # a study under the round-2 rule: its basis, from the results, and nothing predates
    results = fake_results()
    for arm in results["diagnosis"].values():
        arm["ood"]["basis"] = "first wrong row of each instance"
    data["tasks"]["reversal"] = digest_of(results)
    assert data["tasks"]["reversal"]["basis"] == "first wrong row of each instance"
    text = render(data, "supervision-reversal")
    assert "predates" not in text
    assert (
        "*Errors on reference* (the diagnosis read the first wrong row of each instance): the "
        "share of wrong OOD instances on which the supervised heads looked at the reference"
    ) in text
    doc = f"intro\n{begin}\nold\n{end}\noutro\n"
    assert replace_block(doc, text, "supervision-reversal") == f"intro\n{text}\noutro\n"
    with pytest.raises(ValueError, match="no markers .*add both lines"):
        replace_block("no block here", text, "supervision-reversal")


def digest_of(results: dict) -> dict:
    from pathlib import Path

    from harness.report.supervision_doc import task_digest

    return task_digest(results, Path("results.json"))


def test_the_writer_writes_the_digest_and_the_block(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "reversal").mkdir(parents=True)
    (run / "reversal" / "results.json").write_text(json.dumps(fake_results()))
    (run / "settings.json").write_text(json.dumps({"versions": {"torch": "2.13.0"}}))
    begin, end = markers("supervision-reversal")
    doc = tmp_path / "results.md"
    doc.write_text(f"# Results\n\n{begin}\n{end}\n")
    written = tmp_path / "docs" / "supervision-reversal.json"
    argv = [str(run), "--doc", str(doc), "--digest", str(written), "--date", "2026-12-01"]
    argv += ["--machine", "a CPU", "--command", "attentionspan supervision --tasks reversal"]
    assert main(argv) == 0
    data = json.loads(written.read_text())
    assert data["meta"]["versions"] == {"torch": "2.13.0"}
    assert data["tasks"] == digest(run) and list(data["tasks"]) == ["reversal"]
    assert render(data, "supervision-reversal") in doc.read_text()

    # a doc without the digest's markers: one line, nothing written
    other = tmp_path / "other.md"
    other.write_text("# nothing\n")
    assert main([*argv[:1], "--doc", str(other), *argv[3:]]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "has no markers" in err
    assert other.read_text() == "# nothing\n"
    # a folder that is not a supervision run
    assert main([str(tmp_path / "missing"), *argv[1:]]) == 2
    assert "does not exist" in capsys.readouterr().err


REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    "path", sorted((REPO / "docs").glob("supervision-*.json")), ids=lambda p: p.name
)
def test_the_doc_block_is_rendered_from_the_committed_digest(path):
    """docs/results.md's block of each committed supervision digest is that digest rendered:
    the figures are the command's output."""
    data = json.loads(path.read_text())
    block = render(data, path.stem)
    begin, end = markers(path.stem)
    text = (REPO / "docs" / "results.md").read_text()
    assert text[text.index(begin) : text.index(end) + len(end)] == block


def read_verdict(on_reference: float = 0.9) -> dict:
    """A verdict as the study reads it (`study_verdict`), on figures whose word is known:
    no gain, the heads on the reference on `on_reference` of the wrong instances."""
    from harness.attention.verdicts.supervision import study_verdict

    flat = {"gain": 0.0, "low": -0.02, "high": 0.02, "n": 384, "seeds": [0.0] * 3}
    return study_verdict(
        chosen="w0.3",
        metric="partial_acc",
        gain=flat,
        versus_controls={"wrong3-w0.3": flat},
        mass_gain=flat,
        on_reference=on_reference,
        control_roles={"wrong3-w0.3": "wrong_mask"},
    )


def test_the_digest_and_its_block_name_the_rule_that_read_the_verdicts():
    from harness.report.supervision_doc import rule_line, rule_of

    results = fake_results()
    results["verdict"]["rule_version"] = "s-0123456789ab"
    tasks = {"reversal": digest_of(results), "successor": digest_of(fake_results())}
    assert rule_of(tasks) == "s-0123456789ab"  # a task without one adds nothing
    assert rule_of({"successor": tasks["successor"]}) is None
    tasks["successor"]["verdict"]["rule_version"] = "s-ffffffffffff"
    assert rule_of(tasks) == "s-0123456789ab, s-ffffffffffff"  # both, never one for all
    assert rule_line({"rule_version": "s-0123456789ab"}) == (
        "Verdicts read under rule s-0123456789ab."
    )
    assert rule_line({}) == ""
    meta = {"command": "c", "machine": "m", "date": "2026-12-01", "rule_version": "s-1"}
    assert "\nVerdicts read under rule s-1.\n" in render({"meta": meta, "tasks": tasks}, "x")


def test_rereading_a_digest_records_todays_rule_only_when_every_verdict_comes_out_alike(
    tmp_path,
):
    """`reread`: each verdict read again from the digest's figures with today's rule; when
    word and reason agree, the rule's version goes into each verdict and meta, with when it
    was read and that the study was not run again, and the block is rewritten; when one
    differs, ValueError naming the task and nothing is written."""
    from harness.attention.verdicts.rule_version import supervision_rule_version
    from harness.report.supervision_doc import reread

    results = fake_results()
    results["verdict"] = read_verdict(on_reference=0.9)
    assert results["verdict"]["verdict"] == "attention is not the bottleneck"
    meta = {"command": "c", "machine": "m", "date": "2026-11-27", "versions": {}}
    data = {"meta": meta, "tasks": {"reversal": digest_of(results)}}
    path, doc = tmp_path / "supervision-reversal.json", tmp_path / "results.md"
    begin, end = markers(path.stem)
    path.write_text(json.dumps(data, indent=1) + "\n")
    doc.write_text(f"{begin}\n{end}\n")
    reread(path, doc, date="2026-11-30")
    again = json.loads(path.read_text())
    version = supervision_rule_version()
    assert again["tasks"]["reversal"]["verdict"]["rule_version"] == version
    assert again["meta"]["rule_version"] == version
    assert again["meta"]["rule_read"] == (
        "read again 2026-11-30 from the figures below, the same words and reasons as the "
        "study's own reading of 2026-11-27; the study was not run again"
    )
    assert doc.read_text() == render(again, path.stem) + "\n"
    assert f"Verdicts read under rule {version} (read again 2026-11-30" in doc.read_text()

    # a recorded word today's rule does not give: refused, nothing written
    data["tasks"]["reversal"]["verdict"]["verdict"] = "supervision did not take"
    path.write_text(json.dumps(data, indent=1) + "\n")
    before = doc.read_text()
    with pytest.raises(
        ValueError,
        match="reversal: recorded supervision did not take, "
        "rederived attention is not the bottleneck: DISAGREE",
    ):
        reread(path, doc, date="2026-11-30")
    assert json.loads(path.read_text()) == data and doc.read_text() == before

    # a file that is no supervision digest (a reproduce digest's task has no arms): named
    path.write_text(json.dumps({"meta": meta, "tasks": {"reversal": {"verdict": {}}}}))
    with pytest.raises(ValueError, match="is not a supervision study's digest: it needs"):
        reread(path, doc, date="2026-11-30")
    path.write_text("[1, 2]")  # JSON, but no object
    with pytest.raises(ValueError, match="is not a supervision study's digest"):
        reread(path, doc, date="2026-11-30")
    assert doc.read_text() == before
