"""docs/results.md's quick-run block is the command's output: rendered again from the
committed digest it must equal the doc, and the digest keeps what the findings read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.commands import results_doc as command
from harness.report import results_doc, results_summary

REPO = Path(__file__).resolve().parents[3]
DIGEST = REPO / "docs" / "quick-run.json"
DOC = REPO / "docs" / "results.md"


def _write_run(out: Path) -> dict:
    """A reproduce folder with one task, reversal, holding what the digest reads."""
    gain = {"gain": 0.1, "low": 0.05, "high": 0.15, "n": 4}
    folder = out / "reversal"
    (folder / "attention").mkdir(parents=True)
    result = {
        "task": "reversal",
        "ood": {"max_length": 20},
        "eval": {"reversal_id": {"n": 4, "exact_match": 1.0, "partial_acc": 1.0}},
        "sweep": {
            "metric": "partial_acc",
            "chosen_name": "top1-C1",
            "test": {
                "baseline": {"n": 4, "exact_match": 0.0, "per_length": {}},
                "top1-C1": {"n": 4, "exact_match": 0.0, "per_length": {}},
                "random1-C1-s0": {"n": 4, "exact_match": 0.0, "per_length": {}},
            },
            "test_gains": {"top1-C1": {"partial_acc": gain, "exact_match": gain, "per_length": {}}},
            "id": {"baseline": {"exact_match": 1.0, "per_length": {}}},
            "verdict": {"verdict": "inconclusive", "reasons": ["x"], "numbers": {}},
            "records": {"test": {}},
        },
    }
    (folder / "results.json").write_text(json.dumps(result))
    configs = {"reversal_ood": {"rollout": {"correct": {"mean": 0.1}}, "heads": [[0.1]]}}
    (folder / "attention" / "attention.json").write_text(json.dumps({"configs": configs}))
    return gain


def _scratch_digests() -> list[str]:
    """The committed digests with a block of their own (a --pretrained run's digest is a row
    of the pretrained table instead: tests/harness/report/test_pretrained_table.py)."""
    paths = sorted(DIGEST.parent.glob("quick-run*.json"))
    return [p.name for p in paths if not json.loads(p.read_text())["meta"].get("model")]


@pytest.mark.parametrize("digest", _scratch_digests(), ids=str)
def test_the_doc_block_is_rendered_from_the_committed_digest(digest):
    data = json.loads((DIGEST.parent / digest).read_text())
    block = results_doc.render(data["tasks"], **data["meta"])
    assert results_doc.digest_path(data["meta"].get("block", "")).endswith(digest)
    begin, end_marker = results_doc.markers(data["meta"].get("block", ""))
    text = DOC.read_text()
    start, end = text.index(begin), text.index(end_marker)
    assert text[start : end + len(end_marker)] == block
    # Every task of the run has a verdict and at least one finding in the doc.
    for name, task in data["tasks"].items():
        assert task["sweep"]["verdict"]["verdict"] in ("repair", "pointer", "inconclusive")
        assert f"- {name}: " in block


def test_a_named_block_has_markers_and_a_digest_of_its_own(tmp_path, capsys):
    begin, end = results_doc.markers("value_assignment")
    assert "quick-findings:value_assignment:" in begin and end == (
        "<!-- /quick-findings:value_assignment -->"
    )
    assert results_doc.markers("") == (results_doc.BEGIN, results_doc.END)
    assert results_doc.digest_path("value_assignment") == "docs/quick-run-value_assignment.json"
    # a doc without the block's markers is refused in one line, and nothing is written
    doc = tmp_path / "results.md"
    doc.write_text(f"{results_doc.BEGIN}\n{results_doc.END}\n")
    run = tmp_path / "run"
    _write_run(run)
    argv = [str(run), "--command", "c", "--machine", "m", "--date", "d", "--doc", str(doc)]
    digest_file = tmp_path / "d.json"
    code = command.main([*argv, "--block", "va", "--digest", str(digest_file)])
    assert code == 2 and not digest_file.exists()
    assert "quick-findings:va" in capsys.readouterr().err
    # the unnamed block is rewritten, the named one left alone
    assert command.main([*argv, "--digest", str(digest_file)]) == 0
    assert "- reversal: " in doc.read_text() and digest_file.exists()


def test_digest_reads_a_reproduce_folder(tmp_path):
    gain = _write_run(tmp_path)
    tasks = results_doc.digest(tmp_path)
    sweep = tasks["reversal"]["sweep"]
    assert set(sweep["test"]) == {"baseline", "top1-C1"}  # controls live in test_gains
    assert "per_length" not in sweep["test"]["baseline"]
    assert sweep["test_gains"]["top1-C1"] == {"partial_acc": gain, "exact_match": gain}
    kept = tasks["reversal"]["attention"]["results"]["reversal_ood"]
    assert kept == {"rollout": {"correct": {"mean": 0.1}}}  # the per-head table is left out
    with pytest.raises(ValueError, match="the run folder '.*nothing' does not exist"):
        results_doc.digest(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no <task>/results.json"):
        results_doc.digest(tmp_path / "empty")


def _ladder_run(out: Path) -> None:
    """_write_run's task with a dose ladder, its calibrated verdict at C = 1, a second
    candidate lookup and CPU seconds."""
    gain = {"gain": 0.3, "low": 0.2, "high": 0.4, "n": 4}
    entry = {
        "strength": 1.0,
        "threshold": None,
        "reference": gain,
        "pointers": {
            "-3": {
                "setting": "s",
                "gain": {"gain": 0.1},
                "following": {"gain": {"gain": 0.05}, "rows": 30},
            },
        },
        "random_heads": {"draws": [], "count": 2, "mean": 0.01, "max": 0.02, "min": 0.0},
        "id": {"tf_exact": 0.9},
    }
    dose = {
        "n": 2,
        "test": {
            "doses": [dict(entry, strength=0.5), entry],
            "baseline": {"id": {"tf_exact": 1.0}},
            "random_draws": {"available": 6},
        },
    }
    verdict = {
        "verdict": "downstream",
        "reasons": ["r"],
        "numbers": {"dose": {"C": 1.0, "threshold": None}},
    }
    second = {"verdict": "no lookup", "reasons": ["s"], "numbers": {"dose": None}}
    path = out / "reversal" / "results.json"
    result = json.loads(path.read_text())
    result |= {
        "dose": dose,
        "verdict": verdict,
        "diagnosis": {
            "reversal_ood": {
                "instances": 3,
                "tokens": 5,
                "shares": {},
                "level": 0.5,
                "all_rows": {},
            }
        },
        "cpu_s": {"eval": 1.5, "total": 1.5},
        "lookups": [
            {"offset": 0, "mass": 0.44, "stage": "reversal", "verdict": verdict, "diagnosis": {}},
            {
                "offset": 1,
                "mass": 0.46,
                "stage": "reversal-lookup+1",
                "text": "two",
                "verdict": second,
                "diagnosis": {},
                "dose": {"n": 4},
                "cpu_s": {"heads": 0.5},
            },
        ],
    }
    path.write_text(json.dumps(result))


def test_the_digest_keeps_the_controls_at_the_dose_the_lookups_and_the_cpu_time(tmp_path):
    _write_run(tmp_path)
    _ladder_run(tmp_path)
    task = results_doc.digest(tmp_path)["reversal"]
    assert task["controls_at_dose"] == {
        "n": 2,
        "C": 1.0,
        "threshold": None,
        "reference": {"gain": 0.3, "low": 0.2, "high": 0.4, "n": 4},
        "pointers": {"-3": {"gain": {"gain": 0.1}, "following": {"gain": 0.05}, "rows": 30}},
        "random_heads": {"max": 0.02, "mean": 0.01, "count": 2},
        "random_heads_available": 6,
        "id": {"baseline": 1.0, "at_dose": 0.9},
    }
    assert task["cpu_s"] == {"eval": 1.5, "total": 1.5}
    assert "all_rows" not in task["diagnosis"]["reversal_ood"]
    first, second = task["lookups"]
    assert (first["offset"], first["mass"], first["controls_at_dose"]["C"]) == (0, 0.44, 1.0)
    assert second["controls_at_dose"] == {"n": 4, "C": None}  # its own ladder: no dose
    assert (second["text"], second["cpu_s"]) == ("two", {"heads": 0.5})
    # a run without a ladder (made before it): None
    assert results_doc.controls_at_dose(None, {"verdict": "x"}) is None
    # what each verdict read, per instance (`verdicts.readings`): the run's own once, the
    # second lookup's beside its verdict; a run made before they were kept: None
    assert task["readings"] is None and "readings" not in first
    assert second["readings"] is None
    path = tmp_path / "reversal" / "results.json"
    result = json.loads(path.read_text())
    result["readings"] = {"format": 1}
    result["lookups"][1]["readings"] = {"format": 2}
    path.write_text(json.dumps(result))
    task = results_doc.digest(tmp_path)["reversal"]
    assert task["readings"] == {"format": 1} and task["lookups"][1]["readings"] == {"format": 2}


def test_the_digest_keeps_each_shifted_push_of_the_ladder_at_the_dose(tmp_path):
    """The ladder pushes at ref+-1, +-2 and +-3: the digest keeps each one's gain, following
    gain and rows at the verdict's dose, and the verdict's numbers (which shifts are
    followed) as the run wrote them."""
    _write_run(tmp_path)
    _ladder_run(tmp_path)
    path = tmp_path / "reversal" / "results.json"
    result = json.loads(path.read_text())
    six = ("-3", "-2", "-1", "+1", "+2", "+3")
    for entry in result["dose"]["test"]["doses"]:
        entry["pointers"] = {
            k: {
                "setting": f"top2-C1-shift{k}",
                "gain": {"gain": 0.01 * i},
                "following": {"gain": {"gain": 0.1 * i}, "rows": 20 + i, "rate": 0.5},
            }
            for i, k in enumerate(six)
        }
    result["verdict"]["numbers"]["followed"] = {"+1": 0.3}
    path.write_text(json.dumps(result))
    task = results_doc.digest(tmp_path)["reversal"]
    assert task["controls_at_dose"]["pointers"] == {
        k: {"gain": {"gain": 0.01 * i}, "following": {"gain": 0.1 * i}, "rows": 20 + i}
        for i, k in enumerate(six)
    }
    assert task["verdict"]["numbers"]["followed"] == {"+1": 0.3}


def test_check_compares_only_the_fields_a_digest_holds_and_never_the_time(tmp_path, capsys):
    """A digest committed before a field existed reproduces on the fields it has; how long
    a run took (cpu_s) is never a figure that moved."""
    run = tmp_path / "run"
    _write_run(run)
    _ladder_run(run)
    digest_file = tmp_path / "old.json"
    tasks = results_doc.digest(run)
    older = {k: v for k, v in tasks["reversal"].items() if k not in results_doc.ADDED_FIELDS}
    digest_file.write_text(json.dumps({"meta": {}, "tasks": {"reversal": older}}))
    assert results_doc.check(run, digest_file) == []
    tasks["reversal"]["cpu_s"] = {"eval": 99.0, "total": 99.0}  # another run's time
    tasks["reversal"]["lookups"][1]["cpu_s"] = {"heads": 9.0}  # a second lookup's too
    digest_file.write_text(json.dumps({"meta": {}, "tasks": tasks}))
    assert results_doc.check(run, digest_file) == []
    tasks["reversal"]["lookups"][1]["offset"] = 2  # a figure it holds moved: said
    digest_file.write_text(json.dumps({"meta": {}, "tasks": tasks}))
    assert "reversal.lookups[1].offset: expected 2, got 1" in results_doc.check(run, digest_file)


def test_a_figure_not_measured_is_null_in_the_digest_never_nan(tmp_path):
    """A following gain over no rows is NaN in the run; the digest holds null (strict JSON,
    which every JSON reader parses), and a digest written before that, holding NaN, reads
    and compares as the fresh one."""
    run = tmp_path / "run"
    _write_run(run)
    _ladder_run(run)
    path = run / "reversal" / "results.json"
    result = json.loads(path.read_text())
    nan = float("nan")
    pushed = result["dose"]["test"]["doses"][1]["pointers"]["-3"]["following"]
    pushed["gain"] = {"gain": nan, "low": nan, "high": nan, "n": 0}
    path.write_text(json.dumps(result))
    tasks = results_doc.digest(run)
    follow = tasks["reversal"]["controls_at_dose"]["pointers"]["-3"]["following"]
    assert follow == {"gain": None, "low": None, "high": None, "n": 0}
    doc = tmp_path / "results.md"
    doc.write_text(f"{results_doc.BEGIN}\n{results_doc.END}\n")
    digest_file = tmp_path / "quick.json"
    argv = [str(run), "--command", "c", "--machine", "m", "--date", "d", "--doc", str(doc)]
    assert command.main([*argv, "--digest", str(digest_file)]) == 0

    def strict(constant):
        raise ValueError(f"not strict JSON: {constant}")

    json.loads(digest_file.read_text(), parse_constant=strict)  # no NaN written
    # an older digest that holds NaN where the run measured nothing still reproduces
    older = json.loads(digest_file.read_text())
    older["tasks"]["reversal"]["controls_at_dose"]["pointers"]["-3"]["following"]["gain"] = nan
    digest_file.write_text(json.dumps(older))
    assert results_doc.check(run, digest_file) == []
    (tmp_path / "quick-run-older.json").write_text(json.dumps(older))
    (read,) = results_summary.read_digests(tmp_path)  # as the table and the summary read it
    assert read["tasks"]["reversal"]["controls_at_dose"]["pointers"]["-3"]["following"] == (follow)
    assert results_summary.json_safe([1.0, {"a": float("inf")}, "x", None]) == [
        1.0,
        {"a": None},
        "x",
        None,
    ]


def test_differences_name_the_figures_that_moved():
    same = {"a": {"b": [1, 0.1 + 0.2], "c": "x"}, "n": None}
    assert results_doc.differences(same, {"a": {"b": [1, 0.3], "c": "x"}, "n": None}) == []
    moved = results_doc.differences(
        {"a": {"b": [1, 0.5], "c": "x"}, "gone": 1}, {"a": {"b": [1, 0.25], "c": "y"}, "new": 2}
    )
    assert moved == [
        "a.b[1]: expected 0.5, got 0.25",
        'a.c: expected "x", got "y"',
        "gone: expected 1, missing",
        "new: not expected, got 2",
    ]
    assert results_doc.differences(True, 1) == [": expected true, got 1"]


def test_check_says_whether_a_run_reproduces_its_digest(tmp_path, capsys):
    run = tmp_path / "run"
    _write_run(run)
    result = json.loads((run / "reversal" / "results.json").read_text())
    (run / "reversal" / "results.json").write_text(json.dumps(result | {"model_sha256": "a" * 64}))
    (run / "settings.json").write_text(json.dumps({"versions": {"torch": "2.13.0"}}))
    doc = tmp_path / "results.md"
    doc.write_text(f"{results_doc.BEGIN}\n{results_doc.END}\n")
    digest_file = tmp_path / "quick.json"
    argv = [str(run), "--command", "c", "--machine", "m", "--date", "d", "--doc", str(doc)]
    assert command.main([*argv, "--digest", str(digest_file)]) == 0
    saved = json.loads(digest_file.read_text())
    assert saved["meta"]["versions"] == {"torch": "2.13.0"}
    capsys.readouterr()
    assert command.main([str(run), "--check", str(digest_file)]) == 0
    assert "reproduces" in capsys.readouterr().out
    # a figure moves and a package changes: both named, exit 1
    result = json.loads((run / "reversal" / "results.json").read_text())
    result["sweep"]["test_gains"]["top1-C1"]["partial_acc"]["gain"] = 0.2
    result["model_sha256"] = "f" * 64
    (run / "reversal" / "results.json").write_text(json.dumps(result))
    (run / "settings.json").write_text(json.dumps({"versions": {"torch": "2.14.0"}}))
    assert command.main([str(run), "--check", str(digest_file)]) == 1
    out = capsys.readouterr().out
    assert "reversal.sweep.test_gains.top1-C1.partial_acc.gain: expected 0.1, got 0.2" in out
    assert "versions that differ: torch 2.13.0 -> 2.14.0" in out
    assert "reversal: the model's weights differ" in out
    # writing needs the run's description; checking does not
    assert command.main([str(run)]) == 2
    assert "--command, --machine, --date required" in capsys.readouterr().err


DEEP = '{"a": ' * 100_000 + "1" + "}" * 100_000  # nested 100,000 deep


def _break(run: Path, how: str) -> None:
    """Spoil the run folder written by _write_run in one way."""
    path = run / "reversal" / "results.json"
    result = json.loads(path.read_text())
    if how == "no-task":
        del result["task"]
    elif how == "no-sweep":
        del result["sweep"]
    elif how == "sweep-list":
        result["sweep"] = []
    elif how == "unfinished-sweep":
        result["sweep"]["test_gains"] = {}
    if how == "torn":
        path.write_text(json.dumps(result)[:40])
    elif how == "torn-attention":
        (run / "reversal" / "attention" / "attention.json").write_text('{"configs": {"rev')
    elif how == "deep":  # json's decoder recursed: a RecursionError traceback
        path.write_text(DEEP)
    elif how == "deep-settings":
        (run / "settings.json").write_text(DEEP)
    elif how == "list-settings":
        (run / "settings.json").write_text("[]")
    else:
        path.write_text(json.dumps(result))


# (id, how the run is spoilt, the arguments after the run folder, fragments of the one line)
BAD_ROWS = [
    ("no-task", "no-task", [], ["reversal/results.json: no 'task'", "not a reproduce task"]),
    ("no-sweep", "no-sweep", [], ["results.json: no finished sweep", "'metric', 'chosen_name'"]),
    ("sweep-list", "sweep-list", [], ["results.json: 'sweep' must be a JSON object, got []"]),
    ("unfinished-sweep", "unfinished-sweep", [], ["no finished sweep", "reproduce resumes"]),
    ("torn", "torn", [], ["reversal/results.json: not valid JSON (torn or cut short?)"]),
    ("torn-attention", "torn-attention", [], ["attention/attention.json: not valid JSON"]),
    ("deep", "deep", [], ["reversal/results.json: nested more than 100 levels deep"]),
    ("deep-settings", "deep-settings", [], ["run/settings.json: nested more than 100 levels"]),
    ("list-settings", "list-settings", [], ["settings.json: expected a JSON object, got list"]),
    ("check-deep", "", ["--check", "{tmp}/deep.json"], ["--check '{tmp}/deep.json': nested"]),
    (
        "check-null-task",
        "",
        ["--check", "{tmp}/null.json"],
        ["task 'reversal' must be a JSON object (its figures), got null"],
    ),
    ("doc-missing", "", ["--doc", "{tmp}/nope.md"], ["--doc '{tmp}/nope.md' does not exist"]),
    ("doc-a-folder", "", ["--doc", "{tmp}"], ["--doc '{tmp}' is a folder"]),
    ("doc-no-markers", "", ["--doc", "{tmp}/plain.md"], ["--doc '{tmp}/plain.md': the doc has"]),
    ("digest-a-folder", "", ["--digest", "{tmp}"], ["--digest '{tmp}' is a folder"]),
    (
        "digest-under-a-file",
        "",
        ["--digest", "{tmp}/plain.md/d.json"],
        ["--digest '{tmp}/plain.md/d.json' lies under '{tmp}/plain.md', which is a file"],
    ),
    ("check-missing", "", ["--check", "{tmp}/nope.json"], ["--check '{tmp}/nope.json' does not"]),
    ("check-a-folder", "", ["--check", "{tmp}"], ["--check '{tmp}' is a folder"]),
    ("check-torn", "", ["--check", "{tmp}/torn.json"], ["--check '{tmp}/torn.json': not valid"]),
    (
        "check-a-list",
        "",
        ["--check", "{tmp}/list.json"],
        ["is not a results_doc digest", "'tasks'"],
    ),
    ("check-no-tasks", "", ["--check", "{tmp}/empty.json"], ["is not a results_doc digest"]),
    ("check-meta-list", "", ["--check", "{tmp}/meta.json"], ["'meta' must be a JSON object"]),
    ("check-run-no-task", "no-task", ["--check", "{tmp}/good.json"], ["no 'task'"]),
]


@pytest.mark.parametrize(
    "how,extra,fragments", [r[1:] for r in BAD_ROWS], ids=[r[0] for r in BAD_ROWS]
)
def test_a_bad_input_is_one_line_naming_the_file_and_nothing_is_written(
    tmp_path, capsys, how, extra, fragments
):
    run = tmp_path / "run"
    _write_run(run)
    doc = tmp_path / "results.md"
    doc.write_text(f"{results_doc.BEGIN}\n{results_doc.END}\n")
    (tmp_path / "plain.md").write_text("no markers\n")
    (tmp_path / "torn.json").write_text('{"meta": {"command": "c"}, "tas')
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "empty.json").write_text('{"meta": {}, "tasks": {}}')
    (tmp_path / "meta.json").write_text('{"meta": [], "tasks": {"reversal": {}}}')
    (tmp_path / "deep.json").write_text(DEEP)
    (tmp_path / "null.json").write_text('{"meta": {}, "tasks": {"reversal": null}}')
    good = tmp_path / "good.json"
    write = [str(run), "--command", "c", "--machine", "m", "--date", "d", "--doc", str(doc)]
    assert command.main([*write, "--digest", str(good)]) == 0
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    capsys.readouterr()
    _break(run, how)
    before.update({p: p.read_bytes() for p in run.rglob("*") if p.is_file()})
    args = [a.format(tmp=tmp_path) for a in extra]
    written = [*write, "--digest", str(tmp_path / "new.json")]
    code = command.main([str(run), *args] if "--check" in args else [*written, *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("attentionspan results-doc: error: "), err[0]
    for fragment in fragments:
        assert fragment.format(tmp=tmp_path) in err[0], (fragment, err[0])
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before  # nothing written, nothing changed


def _digest_a_run(tmp_path: Path, settings: dict) -> tuple[Path, Path, Path]:
    """_write_run's run under `settings`, written by `results-doc` into a digest and a bare
    doc's block; returns (run, doc, digest)."""
    run = tmp_path / "run"
    _write_run(run)
    (run / "settings.json").write_text(json.dumps(settings))
    doc = tmp_path / "results.md"
    doc.write_text(f"{results_doc.BEGIN}\n{results_doc.END}\n")
    digest_file = tmp_path / "quick.json"
    argv = [str(run), "--command", "c", "--machine", "m", "--date", "d", "--doc", str(doc)]
    assert command.main([*argv, "--digest", str(digest_file)]) == 0
    return run, doc, digest_file


def _move_a_figure(run: Path) -> None:
    """One figure of the run moves (a sweep gain 0.1 -> 0.2): `--check` then names why."""
    result = json.loads((run / "reversal" / "results.json").read_text())
    result["sweep"]["test_gains"]["top1-C1"]["partial_acc"]["gain"] = 0.2
    (run / "reversal" / "results.json").write_text(json.dumps(result))


def test_check_says_when_the_cpu_kind_or_the_rule_differ(tmp_path, capsys):
    """A digest reproduces bit for bit on its own kind of CPU and under its own rule: `--check`
    says which it saw, so a difference elsewhere reads as a new measurement."""
    avx2 = {"kernels": "AVX2", "bf16_units": False, "processor": "AMD EPYC"}
    settings = {"versions": {"torch": "2.13.0"}, "cpu": avx2, "rule_version": "r-000000000001"}
    run, _, digest_file = _digest_a_run(tmp_path, settings)
    meta = json.loads(digest_file.read_text())["meta"]
    assert meta["cpu"] == avx2 and meta["rule_version"] == "r-000000000001"
    _move_a_figure(run)
    capsys.readouterr()
    assert command.main([str(run), "--check", str(digest_file)]) == 1
    out = capsys.readouterr().out
    assert "the same kind of CPU (AVX2 kernels on AMD EPYC)" in out
    assert "the same verdict rule (r-000000000001)" in out
    avx512 = {"kernels": "AVX512", "bf16_units": True, "processor": "Intel Xeon"}
    settings |= {"cpu": avx512, "rule_version": "r-000000000002"}
    (run / "settings.json").write_text(json.dumps(settings))
    assert command.main([str(run), "--check", str(digest_file)]) == 1
    out = capsys.readouterr().out
    assert (
        "made on another kind of CPU: the digest's AVX2 kernels on AMD EPYC, this run's "
        "AVX512 kernels on Intel Xeon" in out
    )
    assert "read under another verdict rule: the digest's r-000000000001, this run's r-0000" in out


def test_other_kernels_on_the_same_processor_are_said_as_such():
    """ATEN_CPU_CAPABILITY=avx2 on an AVX512 machine: the same processor, other kernels."""
    avx512 = {"kernels": "AVX512", "processor": "Intel Xeon"}
    line = results_doc.cpu_line(avx512, {**avx512, "kernels": "AVX2"})
    assert line.startswith(
        "made with other kernels on the same processor: the digest's AVX512 kernels on Intel "
        "Xeon, this run's AVX2 kernels on Intel Xeon"
    )
    assert (
        results_doc.cpu_line(avx512, dict(avx512))
        == "the same kind of CPU (AVX512 kernels on Intel Xeon)"
    )


def test_cpu_and_rule_lines_say_what_was_not_recorded():
    assert results_doc.cpu_line(None, {"kernels": "AVX2"}).startswith("the digest records no CPU")
    assert results_doc.rule_line("r-1", None).startswith("the run records no rule version")


def test_check_compares_stability_only_where_the_digest_holds_it(tmp_path):
    """A verdict's stability, measured after the digests were committed, is no figure that
    moved against a digest without it; where the digest holds it, it is compared."""
    run = tmp_path / "run"
    _write_run(run)
    _ladder_run(run)
    path = run / "reversal" / "results.json"
    result = json.loads(path.read_text())
    measured = {"word": "downstream", "share": 0.9, "words": {"downstream": 0.9}}
    result["verdict"]["stability"] = measured
    result["lookups"][1]["verdict"]["stability"] = {**measured, "word": "no lookup"}
    path.write_text(json.dumps(result))
    tasks = results_doc.digest(run)
    assert tasks["reversal"]["verdict"]["stability"]["share"] == 0.9  # the digest keeps it
    older = json.loads(json.dumps(tasks))
    del older["reversal"]["verdict"]["stability"]
    del older["reversal"]["lookups"][1]["verdict"]["stability"]
    digest_file = tmp_path / "old.json"
    digest_file.write_text(json.dumps({"meta": {}, "tasks": older}))
    assert results_doc.check(run, digest_file) == []
    tasks["reversal"]["verdict"]["stability"]["share"] = 0.7
    digest_file.write_text(json.dumps({"meta": {}, "tasks": tasks}))
    moved = results_doc.check(run, digest_file)
    assert "reversal.verdict.stability.share: expected 0.7, got 0.9" in moved


def test_the_digest_keeps_the_output_scale_where_it_was_measured():
    """The output-scale control's gain at the verdict's dose goes in the digest under its
    curve field; a run made before the control has none, and the key is left out."""
    gain = {"gain": 0.04, "low": 0.01, "high": 0.08, "n": 14}
    entry = {"strength": 0.3, "threshold": None, "reference": {"gain": 0.9}}
    dose = {"n": 1, "test": {"doses": [entry | {"output_scale": {"gain": gain}}]}}
    verdict = {"numbers": {"dose": {"C": 0.3, "threshold": None}}}
    assert results_doc.controls_at_dose(dose, verdict)["output_scale"] == gain
    before = {"n": 1, "test": {"doses": [entry]}}
    assert "output_scale" not in results_doc.controls_at_dose(before, verdict)


def test_a_gpu_run_is_a_new_measurement_beside_a_cpu_digest(tmp_path, capsys):
    """A digest made on the CPU, a run made on a GPU (or the other way): `--check` names the
    device, not the CPU the GPU machine also has, and the block says which GPU computed."""
    xeon = {"kernels": "AVX512", "bf16_units": True, "processor": "Intel Xeon"}
    h200 = {"name": "NVIDIA H200", "cuda": "13.0"}
    settings = {"versions": {"torch": "2.11.0"}, "cpu": xeon, "accelerator": h200}
    run, doc, gpu_digest = _digest_a_run(tmp_path, settings)
    assert json.loads(gpu_digest.read_text())["meta"]["accelerator"] == h200
    assert "(NVIDIA H200 GPU, CUDA 13.0; torch 2.11.0)" in doc.read_text()
    _move_a_figure(run)
    capsys.readouterr()
    assert command.main([str(run), "--check", str(gpu_digest)]) == 1
    assert "the same GPU (NVIDIA H200 GPU, CUDA 13.0)" in capsys.readouterr().out
    (run / "settings.json").write_text(json.dumps({"versions": {}, "cpu": xeon}))
    assert command.main([str(run), "--check", str(gpu_digest)]) == 1
    out = capsys.readouterr().out
    assert (
        "made on another device: the digest's NVIDIA H200 GPU, CUDA 13.0, this run's CPU: " in out
    )
    assert "kind of CPU" not in out  # the GPU machine's own CPU did not round the floats
