"""`attentionspan generate` / `show`: output formats, overrides and one-line errors."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import time
from itertools import islice

import pytest

from attentionspan_datasets import PRESETS, generate, iter_instances, resolve_config
from attentionspan_datasets.cli import main
from attentionspan_datasets.rendering import JsonLines, render_mask, to_json_line


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_jsonl_matches_library(capsys):
    code, out, _ = run_cli(capsys, "generate", "reversal_id", "-n", "3", "--seed", "7")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["index"] for r in rows] == [0, 1, 2]
    assert rows[2] == generate("reversal_id", seed=7, index=2).to_dict()


def test_generate_text_and_param_override(capsys):
    code, out, _ = run_cli(
        capsys,
        "generate",
        "reversal",
        "-n",
        "4",
        "--format",
        "text",
        "--param",
        "min_length=3",
        "--param",
        "max_length=3",
    )
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 4
    for line in lines:
        text, mask = line.split("\t")
        assert len(text) == 7  # 3 chars, '=', 3 reversed chars
        assert json.loads(mask) == [[2], [1], [0]]


@pytest.mark.parametrize("command", ["generate", "show"])
def test_the_name_is_resolved_once_and_rows_keep_it(capsys, monkeypatch, command):
    from attentionspan_datasets import generation, splits
    from attentionspan_datasets.commands import generate as command_module

    names = []
    real = generation.resolve_config

    def counting(name, **overrides):
        if isinstance(name, str):
            names.append(name)
        return real(name, **overrides)

    for module in (generation, splits, command_module):
        monkeypatch.setattr(module, "resolve_config", counting)
    argv = [command, "addition_ood", "-n", "2", "--param", "max_digits=6"]
    code, out, _ = run_cli(capsys, *argv, *(["--split", "test"] if command == "show" else []))
    assert code == 0 and names == ["addition_ood"]
    if command == "generate":
        assert [json.loads(line)["config"] for line in out.splitlines()] == ["addition_ood"] * 2


def test_generate_start_offsets_the_index(capsys):
    _, out, _ = run_cli(capsys, "generate", "reversal_id", "-n", "1", "--start", "5")
    assert json.loads(out)["index"] == 5


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["generate", "reversal", "--param", "max_length=ten"], "'max_length' must be an integer"),
        (["generate", "reversal", "--param", "max_lenght=3"], "unknown parameter 'max_lenght'"),
        (["generate", "reversal", "--param", "max_length"], "KEY=VALUE"),
        (["generate", "reversal", "--param", "min_length=0"], "'min_length'"),
        (["generate", "nope_ood"], "unknown config 'nope_ood'"),
        (["generate", "reversal_id", "-n", "-1"], "-n/--num must be >= 0"),
        (["show", "reversal_id", "--index", "-2"], "--index must be >= 0"),
        (["show", "reversal_id", "--all"], "either CONFIG or --all, not both"),
    ],
)
def test_bad_input_is_one_line_and_status_2(capsys, argv, needle):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert needle in err


def test_show_draws_the_mask_grid(capsys):
    code, out, _ = run_cli(
        capsys,
        "show",
        "reversal",
        "--param",
        "min_length=3",
        "--param",
        "max_length=3",
        "--seed",
        "1",
    )
    assert code == 0
    instance = generate("reversal", seed=1, index=0, min_length=3, max_length=3)
    lines = out.splitlines()
    grid = lines[lines.index("   " + instance.text) + 1 :]
    assert grid[0].endswith("..#.")  # target[0] mirrors position 2, sees positions 0-3
    assert grid[2].split()[1].startswith("#")


def test_console_script_errors_without_traceback():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "attentionspan_datasets.cli",
            "generate",
            "reversal",
            "--param",
            "charset=ab=c",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "'charset'" in proc.stderr and "reserved" in proc.stderr


def test_a_closed_pipe_is_not_an_error():
    """`attentionspan generate ... | head -1`: exit 0, no traceback."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attentionspan_datasets.cli",
            "generate",
            "reversal_ood",
            "-n",
            "200000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert json.loads(first)["index"] == 0
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr


# --- sizes are capped, refused at once -------------------------------------------------


@pytest.mark.parametrize(
    "argv, field",
    [
        (["reversal", "--param", "min_length=1000000000", "--param", "max_length=1000000000"],
         "min_length"),
        (["value_assignment", "--param", "max_length=1000000000"], "max_length"),
        (["successor", "--param", "max_count=1000000000"], "max_count"),
        (["ffml", "--param", "max_instructions=1000000000"], "max_instructions"),
        (["successor", "--param", "max_start=" + "9" * 5001], "max_start"),
    ],
)  # fmt: skip
def test_huge_sizes_are_refused_within_a_second_naming_the_cap(capsys, argv, field):
    started = time.perf_counter()
    code, out, err = run_cli(capsys, "generate", *argv, "-n", "1")
    assert time.perf_counter() - started < 1
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert f"'{field}'" in err and "<=" in err and "must be an integer" not in err


def test_show_draws_a_huge_instance_quickly_within_the_width(capsys, monkeypatch):
    """20,000 characters once took over 90 s; now the grid is cut and wrapped."""
    monkeypatch.setenv("COLUMNS", "80")
    started = time.perf_counter()
    code, out, _ = run_cli(
        capsys, "show", "reversal", "--param", "min_length=10000", "--param", "max_length=10000"
    )
    assert code == 0 and time.perf_counter() - started < 5
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "(drawn: target rows 0-199 of 10000" in out.replace("\n", " ")


# --- a legend, the terminal width, any split's rows ---------------------------------------


def test_show_all_has_a_legend_and_fits_the_terminal(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "72")
    code, out, _ = run_cli(capsys, "show", "--all")
    assert code == 0
    assert out.startswith("How to read a grid")
    # 1,500 lines scroll the legend away: it is printed again after the last grid
    assert out.count("How to read a grid") == 2
    assert "How to read a grid" in out.split("t7_ood #0 ")[1]
    assert out.rstrip().endswith("One config: attentionspan show CONFIG")
    assert "'#' marks" in out and "'.' marks" in out
    assert max(len(line) for line in out.splitlines()) <= 72
    for preset in PRESETS:
        assert f"{preset} #0 " in out


def test_a_wrapped_grid_keeps_every_mark(capsys, monkeypatch):
    """Panels of columns hold the same cells as the unwrapped grid."""
    instance = generate("ffml_ood", index=3)
    wide = render_mask(instance)
    narrow = render_mask(instance, width=40)
    header = f"{instance.config} #{instance.index}"
    marks = sum(map(len, instance.reference)) + 1  # the header's "#"
    assert header in wide and header in narrow
    assert wide.count("#") == narrow.count("#") == marks
    assert max(len(line) for line in narrow.splitlines()) <= 40


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_show_draws_the_rows_of_a_split(capsys, split):
    from attentionspan_datasets.splits import split_instance

    code, out, _ = run_cli(capsys, "show", "addition_id", "--split", split, "--index", "3")
    assert code == 0
    instance = split_instance("addition_id", 1234, split, 3)
    assert f"prompt: {instance.prompt}\n" in out
    assert render_mask(instance, width=shutil.get_terminal_size().columns) in out


def test_show_warns_about_a_small_input_space(capsys):
    code, _, err = run_cli(capsys, "show", "successor_id", "--split", "test")
    assert code == 0
    assert err.startswith("warning: ") and "small input space" in err


def test_json_lines_equal_json_dumps_of_the_row():
    for preset in PRESETS:
        for instance in iter_instances(preset, stop=20):
            expected = json.dumps(instance.to_dict(), ensure_ascii=False)
            assert to_json_line(instance) == expected
    # The CLI's writer caches each layout's reference: the same lines, variants included.
    for config, overrides in [
        ("addition", {"padding": True, "num_operands": 5}),
        ("multiplication", {"padding": True}),
        ("successor", {"min_start": 0, "max_start": 10**6, "max_count": 30}),
        ("multiplication_ood", {"mask": "sufficient"}),
        ("successor_ood", {"mask": "minimal"}),
        ("ffml_ood", {}),
    ]:
        resolved = resolve_config(config, **overrides)
        writer = JsonLines(resolved)
        for instance in iter_instances(resolved, stop=1500):
            assert writer(instance) == json.dumps(instance.to_dict(), ensure_ascii=False)
    odd = generate("reversal", charset='a"\\\u00e9b', min_length=20, max_length=20)
    # A charset cannot hold a control character any more; a row can (json escapes it).
    odd = dataclasses.replace(odd, prompt="\u0001" + odd.prompt)
    assert json.loads(to_json_line(odd)) == odd.to_dict()


def _dumps(instance):
    return json.dumps(instance.to_dict(), ensure_ascii=False) + "\n"


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_json_lines_in_batches_equal_json_dumps(preset):
    """JsonLines.lines, as the CLI calls it (iterators of 100 fresh rows), over enough rows
    that layouts repeat and the cache serves most of them."""
    expected = "".join(map(_dumps, iter_instances(preset, stop=500)))
    for use_orjson in (True, False):
        writer = JsonLines(resolve_config(preset))
        if not use_orjson:
            writer.orjson = None  # the stdlib path (layout tasks never use orjson)
        stream = iter_instances(preset, stop=500)
        text = "".join(writer.lines(islice(stream, 100)) for _ in range(5))
        assert text == expected
        assert writer.lines(iter([])) == ""


def test_json_lines_cache_keeps_types_and_falls_back():
    """The layout cache is keyed by marshal.dumps(params): True and 1 (equal in Python)
    get their own lines; params marshal cannot write, and a row of another config in the
    same batch, are encoded the plain way."""

    class Count(int):  # JSON writes it as an int; marshal refuses it
        pass

    base = generate("reversal_id", index=0)
    variants = []
    for value in (1, True, 1.0, Count(1), 1):
        variants.append(dataclasses.replace(base, params={**base.params, "x": value}))
    other = dataclasses.replace(base, config="elsewhere", index=9)
    writer = JsonLines(resolve_config("reversal_id"))
    batch = [*variants, other, base]
    assert writer.lines(iter(batch)) == "".join(map(_dumps, batch))
    assert '"x": true' in writer.lines(iter(variants[1:2]))


@pytest.mark.parametrize("use_orjson", [True, False])
def test_json_lines_batched_references_fall_back_when_the_separator_repeats(use_orjson):
    """Tasks without layout masks encode a batch's references in one C call, separated by
    a string, and split there; a reference holding that string makes the split unsafe, so
    the batch is encoded row by row: still json.dumps's lines. Odd params and prompts,
    and rows of other labels, too."""
    from attentionspan_datasets.rendering import _SEP

    rows = list(iter_instances("ffml_ood", stop=45))
    rows[2] = dataclasses.replace(rows[2], params={"nested": {"task": "x"}, "t": True})
    rows[3] = dataclasses.replace(rows[3], prompt='a, "\\u0000", b\n\x00')
    rows[25] = dataclasses.replace(rows[25], reference=[[1], _SEP, [2]])
    rows[30] = dataclasses.replace(rows[30], config="elsewhere")
    writer = JsonLines(resolve_config("ffml_ood"))
    if use_orjson:
        assert writer.orjson is not None, "orjson is a requirement (setup.cfg)"
    else:
        writer.orjson = None  # the stdlib path, as where orjson is missing
    # to_json_line: json.dumps of the fields (to_dict would copy the string as a list)
    assert writer.lines(iter(rows)) == "".join(to_json_line(row) + "\n" for row in rows)
    assert writer.lines(iter(rows[:20])) == "".join(map(_dumps, rows[:20]))


def test_generate_writes_every_row_once(capsys):
    """Rows are encoded and written in batches of BATCH (references AT_ONCE at a time):
    counts that are not multiples of either still give exactly the rows asked for."""
    from attentionspan_datasets.commands import generate as command

    num = 3 * command.BATCH + JsonLines.AT_ONCE + 7
    code, out, _ = run_cli(capsys, "generate", "value_assignment_ood", "-n", str(num))
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == num and out.endswith("\n")
    assert [json.loads(line)["index"] for line in lines] == list(range(num))
    assert lines[-1] + "\n" == _dumps(generate("value_assignment_ood", index=num - 1))


@pytest.mark.parametrize(
    "reference",
    [
        [[1, 2], [3]],
        [],
        [[]],
        [[-1, 0], [2**63 - 1]],
        [[2**64]],  # beyond orjson's integers
        [[1.0, 2]],
        [[True, 0]],
        [[None]],
        [["1, 2"]],
        [[1], {"a": 1}],
        [[[1, 2]], [[3]]],
        [(1, 2)],
    ],
)
def test_orjson_reference_is_json_dumps(reference):
    """orjson's compact text, commas spaced, only when it is lists of integers; anything
    else goes to json's encoder: the same text as json.dumps either way."""
    from attentionspan_datasets.rendering import _orjson_dumps, _orjson_reference

    assert _orjson_reference(_orjson_dumps(), reference) == json.dumps(reference)


# --- what generate and show say --------------------------------------------------------------


def test_show_prints_its_legend_after_a_draw_never_before_an_error(capsys):
    code, out, err = run_cli(capsys, "show", "--all", "--param", "charset=abc")
    assert code == 2 and out == "" and err.count("\n") == 1
    code, out, err = run_cli(capsys, "show", "reversal", "--param", "max_length=0")
    assert code == 2 and out == "" and "'max_length'" in err
    code, out, _ = run_cli(capsys, "show", "reversal_id", "-n", "2")
    assert code == 0 and out.startswith("How to read a grid") and out.count("How to") == 2
    assert "reversal_id #0 " in out and "How to" in out.split("reversal_id #1 ")[1]
    code, out, _ = run_cli(capsys, "show", "reversal_id")
    assert code == 0 and out.startswith("How to read a grid") and out.count("How to") == 1


def test_show_wraps_params_never_cuts_them(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "show", "t5_len30")
    assert code == 0
    instance = generate("t5_len30")
    header = out.split("\n\n", 1)[1].split("\nprompt: ", 1)[0]
    assert max(len(line) for line in header.splitlines()) <= 80
    assert " ".join(header.split()) == " ".join(f"t5_len30 #0  params={instance.params}".split())
    assert "characters)" not in header


@pytest.mark.parametrize("command", ["generate", "show"])
def test_help_states_the_default_seed(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "stream seed (default 1234)" in text
    if command == "generate":
        assert "at most 10,000,000 without --force" in text


def _stderr_on_a_terminal(argv, columns):
    """What `attentionspan ARGV` writes to its stderr when that is a terminal of
    `columns` columns (0: a terminal that reports a size of 0 x 0), and its stdout."""
    import fcntl
    import os
    import pty
    import struct
    import tempfile
    import termios

    master, slave = pty.openpty()
    if columns:  # else the size a new pty has: 0 x 0
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("COLUMNS", None)
    stdout = tempfile.TemporaryFile()  # a pipe nobody reads while the terminal is read
    run = subprocess.Popen(
        [sys.executable, "-m", "attentionspan_datasets", *argv],
        stdout=stdout, stderr=slave, env=env,
    )  # fmt: skip
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    assert run.wait(60) == 0
    os.close(master)
    stdout.seek(0)
    return shown.decode(errors="replace"), stdout.read()


@pytest.mark.parametrize("columns", [80, 0])
def test_generate_shows_a_progress_bar_on_a_terminal(columns):
    """The README's `generate addition_ood -n 100000 > file` shows a bar on stderr, also on
    a terminal that reports a size of 0 x 0 (where tqdm would hide it)."""
    shown, out = _stderr_on_a_terminal(["generate", "reversal_id", "-n", "20000"], columns)
    assert out.count(b"\n") == 20000
    assert "generate reversal_id: 100%" in shown and "20000/20000" in shown


def test_generate_shows_no_bar_when_stderr_is_not_a_terminal():
    result = subprocess.run(
        [sys.executable, "-m", "attentionspan_datasets", "generate", "reversal_id"]
        + ["-n", "20000"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stderr == ""


@pytest.mark.parametrize(
    "argv", [["generate", "reversal", "-n", "3"], ["generate", "addition"], ["show", "reversal"]]
)
def test_a_full_disk_under_stdout_is_one_line(argv):
    """`attentionspan generate ... > file` on a full disk (/dev/full: every write fails
    with ENOSPC): one line and status 2, not a traceback or "Exception ignored"."""
    import os

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "attentionspan_datasets", *argv],
            stdout=full, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr == (
        f"attentionspan {argv[0]}: error: cannot write to standard output: "
        "No space left on device\n"
    )


# --- the main job's output keeps its explanation in view -----------------------------------


def test_show_without_a_config_draws_one_grid_per_task_between_two_legends(capsys, monkeypatch):
    from attentionspan_datasets.commands.generate import summary_configs
    from attentionspan_datasets.presets import PAIRS, SHORT_NAMES

    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = run_cli(capsys, "show")
    assert code == 0 and err == ""
    assert summary_configs() == [f"{short}_id" for short in PAIRS]
    assert len(summary_configs()) == len(SHORT_NAMES)  # every task, once
    headers = [line.split()[0] for line in out.splitlines() if " #0  params=" in line]
    assert headers == summary_configs()
    # Short enough to read, and the legend both before the first grid and after the last:
    # the end of an output is what stays on the screen.
    lines = out.splitlines()
    assert len(lines) < 250, len(lines)
    assert out.startswith("How to read a grid")
    tail = out.split(f"{summary_configs()[-1]} #0 ")[1]
    assert "How to read a grid" in tail and "'#' marks" in tail
    assert lines[-3:] == [
        "Every preset: attentionspan show --all",
        "Another instance: attentionspan show CONFIG --index N",
        "The configs: attentionspan show --help",
    ]
    assert max(len(line) for line in lines) <= 100


def test_show_summary_draws_the_same_grids_as_show_config(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    _, summary, _ = run_cli(capsys, "show", "--seed", "3", "--index", "2")
    _, alone, _ = run_cli(capsys, "show", "ffml_id", "--seed", "3", "--index", "2")
    grid = alone.split("\n\n", 1)[1]  # the legend before it, nothing after
    assert grid.rstrip("\n") in summary
