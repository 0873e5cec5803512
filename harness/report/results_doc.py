"""Put a `reproduce` run's findings into docs/results.md, generated, never typed.

    attentionspan reproduce --quick --output runs/quick
    attentionspan results-doc runs/quick --date 2026-11-24 \\
        --machine "2-core CPU" --command "attentionspan reproduce --quick --output runs/quick"

    # a second run in a block of its own (digest docs/quick-run-value_assignment.json)
    attentionspan results-doc runs/quick-va --block value_assignment ...

    # does a new run reproduce a committed digest? (exit 1 naming what moved, and the
    # package versions and model weights that differ)
    attentionspan results-doc runs/quick --check docs/quick-run.json

Reads the run's per-task `results.json` and `attention/attention.json`, keeps the numbers the
findings rest on in a digest (`docs/quick-run.json`, committed), and rewrites the block
between the `quick-findings` markers of docs/results.md from that digest alone (`write`;
the command's parser is harness/commands/results_doc.py). A test
renders every committed digest again and compares it with its block, so the figures in the
doc are the command's output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attentionspan_datasets.atomic import atomic_write_text
from attentionspan_datasets.jsonfile import (
    dumps_compact,
    read_json,  # noqa: F401  (re-exported)
)
from attentionspan_datasets.metrics import METRICS
from harness.attention.controls import at_dose, dose_field
from harness.attention.lookup import recorded_lookup
from harness.foundation.runs import accelerator_words
from harness.foundation.stats import format_gain, overall
from harness.report import blocks, pretrained_table
from harness.report.findings import seed_agreement, seed_groups, task_findings, verdict_name
from harness.report.replication_md import replication_heading, task_replication_cell
from harness.report.results_summary import json_safe, write_summary
from harness.report.stability_md import HEADING as STABILITY
from harness.report.stability_md import task_cell

BEGIN = (
    "<!-- quick-findings: generated from the run below by harness/report/results_doc.py; "
    "do not edit -->"
)
END = "<!-- /quick-findings -->"
DIGEST = "docs/quick-run.json"
PROG = "attentionspan results-doc"  # harness/commands/results_doc.py


def markers(block: str = "") -> tuple[str, str]:
    """The (begin, end) markers of a block: the unnamed one, or `quick-findings:NAME`."""
    if not block:
        return BEGIN, END
    return BEGIN.replace("quick-findings:", f"quick-findings:{block}:", 1), END.replace(
        "quick-findings", f"quick-findings:{block}", 1
    )


def digest_path(block: str = "") -> str:
    return DIGEST if not block else DIGEST.replace(".json", f"-{block}.json")


def digest(out: Path) -> dict[str, Any]:
    """The numbers the findings and the table read, per task, from a reproduce folder.

    ValueError naming the file when a `results.json` is torn (not JSON), names no task, or
    holds no finished sweep (its metric, chosen setting and that setting's test gain)."""
    out = Path(out)
    if not out.is_dir():
        what = "is a file" if out.exists() else "does not exist"
        raise ValueError(f"the run folder {str(out)!r} {what}; give a reproduce --output folder")
    tasks = {}
    for path in sorted(out.glob("*/results.json")):
        result = _object(read_json(path), str(path))
        name = result.get("task")
        if not isinstance(name, str) or not name:
            raise ValueError(
                f"{path}: no 'task' (the task's name, a string): not a reproduce task result"
            )
        sweep = finished_sweep(result, path)
        test = _object(sweep.get("test"), f"{path}: 'sweep.test'")
        kept = set(test) & {"baseline", sweep.get("chosen_name")}
        lookups = _lookups(result, path)
        tasks[name] = {
            "model_sha256": result.get("model_sha256"),
            "seed_run": result.get("seed_run"),  # --seeds: task, run, init and data seed
            # the calibrated verdict with the numbers it read (dose, gains, error shares)
            "verdict": result.get("verdict"),
            # what it read, per instance: `results-doc --rederive` reads the verdict again
            # from these alone (`verdicts.readings`; absent: made before they were kept)
            "readings": result.get("readings"),
            "diagnosis": _diagnosis(result.get("diagnosis"), f"{path}: 'diagnosis'"),
            # the ladder's N and every control at the verdict's dose (the table's row)
            "controls_at_dose": controls_at_dose(result.get("dose"), result.get("verdict")),
            # CPU seconds per stage (user + system), as measured when each was computed
            "cpu_s": result.get("cpu_s"),
            "eval": result.get("eval"),
            "ood": result.get("ood"),
            "attention": {"results": _attention(path.parent / "attention" / "attention.json")},
            "sweep": {
                "metric": sweep.get("metric"),
                "chosen_name": sweep.get("chosen_name"),
                "test": {
                    k: overall(_object(v, f"{path}: 'sweep.test.{k}'"))
                    for k, v in test.items()
                    if k in kept
                },
                "test_gains": {
                    k: {m: v[m] for m in METRICS if m in v} for k, v in sweep["test_gains"].items()
                },
                "id": {
                    k: overall(_object(v, f"{path}: 'sweep.id.{k}'"))
                    for k, v in _object(sweep.get("id"), f"{path}: 'sweep.id'").items()
                },
                "verdict": sweep.get("verdict"),
            },
        }
        if lookups:  # a near tie or a split: both candidate lookups' judgements
            tasks[name]["lookups"] = lookups
    if not tasks:
        raise ValueError(f"{out} holds no <task>/results.json: is it a reproduce output folder?")
    return json_safe(tasks)


# each share beside its null (the same reading on the rows the model gets right), and
# whether the dominant kind changes with the head set read (top 1, top 4, N)
DIAGNOSIS = ("instances", "tokens", "shares", "null", "level", "kind_changes")
# fields a digest gained after some were committed: `check` compares them only where the
# committed digest has them (a figure it never held is not a figure that moved); `cpu_s`
# is how long a run took, never compared
ADDED_FIELDS = ("controls_at_dose", "cpu_s", "lookups", "readings")
UNCOMPARED = ("seed_run", "cpu_s")


def _diagnosis(value: Any, where: str) -> dict[str, Any]:
    return {
        key: {k: _object(v, f"{where[:-1]}.{key}'").get(k) for k in DIAGNOSIS}
        for key, v in _object(value, where).items()
    }


def controls_at_dose(dose: Any, verdict: Any) -> dict[str, Any] | None:
    """The ladder's N, and at the calibrated verdict's dose on the OOD test curve the
    reference push's gain, each shifted push's gain and following gain (and its rows), the
    random other heads' draws (best, mean, how many), the output-scale control's gain
    (where it was measured) and ID teacher-forced exact match against the baseline's;
    {"n", "C": None} when no dose was chosen; None when the run has
    no ladder (made before it)."""
    if not isinstance(dose, dict) or not isinstance(verdict, dict):
        return None
    chosen = (verdict.get("numbers") or {}).get("dose") or {}
    out: dict[str, Any] = {"n": dose.get("n"), "C": chosen.get("C")}
    if chosen.get("C") is None:
        return out
    test = dose.get("test") or {}
    for entry in test.get("doses") or []:
        if entry.get("strength") != chosen["C"] or entry.get("threshold") != chosen.get(
            "threshold"
        ):
            continue
        drawn = at_dose(entry, "other_heads") or {}
        # the output-scale control's gain, where the run measured it (a run made before it
        # has none: the key is left out, never invented)
        rescaled = at_dose(entry, "output_scale")
        if rescaled is not None:
            out[dose_field("output_scale")] = rescaled.get("gain")
        # each control under the field it writes in the curve (`controls.dose_field`)
        return out | {
            "threshold": chosen.get("threshold"),
            "reference": entry.get("reference"),
            dose_field("pointer"): {
                k: {
                    "gain": p.get("gain"),
                    "following": ((p.get("following") or {}).get("gain")),
                    "rows": (p.get("following") or {}).get("rows"),
                }
                for k, p in (at_dose(entry, "pointer") or {}).items()
            },
            dose_field("other_heads"): {k: drawn.get(k) for k in ("max", "mean", "count")},
            f"{dose_field('other_heads')}_available": (test.get("random_draws") or {}).get(
                "available"
            ),
            "id": {
                "baseline": ((test.get("baseline") or {}).get("id") or {}).get("tf_exact"),
                "at_dose": (entry.get("id") or {}).get("tf_exact"),
            },
        }
    return out


def _lookups(result: dict[str, Any], path: Path) -> list[dict[str, Any]] | None:
    """Each candidate lookup a near tie or a split made the run judge (the run's own
    first): offset, ID mass, stages, N, verdict, OOD diagnosis and controls at its dose;
    None with one."""
    lookups = result.get("lookups")
    if not isinstance(lookups, list) or len(lookups) < 2:
        return None
    out = []
    for i, entry in enumerate(lookups):
        entry = _object(entry, f"{path}: 'lookups[{i}]'")
        dose = entry.get("dose") if i else result.get("dose")
        out.append(
            {
                "offset": recorded_lookup(entry)["offset"],
                "mass": entry.get("mass"),
                "stage": entry.get("stage"),
                **({"text": entry["text"]} if entry.get("text") else {}),
                "verdict": entry.get("verdict"),
                # the run's own (the first) are the task's `readings`, kept once
                **({"readings": entry.get("readings")} if i else {}),
                "diagnosis": _diagnosis(
                    entry.get("diagnosis"), f"{path}: 'lookups[{i}].diagnosis'"
                ),
                "controls_at_dose": controls_at_dose(dose, entry.get("verdict")),
                **({"cpu_s": entry["cpu_s"]} if entry.get("cpu_s") else {}),
            }
        )
    return out


def _object(value: Any, where: str) -> dict[str, Any]:
    """`value` if it is a JSON object, {} if it is absent (null); else ValueError."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a JSON object, got {_short(value)}")
    return value


def finished_sweep(result: dict[str, Any], path: Path) -> dict[str, Any]:
    """The result's sweep, with what the table reads: its metric, its chosen setting and
    that setting's OOD test gain; ValueError naming the file when the sweep is missing or
    unfinished (a run stopped before its sweep stage)."""
    sweep = _object(result.get("sweep"), f"{path}: 'sweep'")
    metric, chosen = sweep.get("metric"), sweep.get("chosen_name")
    gains = _object(sweep.get("test_gains"), f"{path}: 'sweep.test_gains'")
    chosen_gains = gains.get(chosen) if isinstance(chosen, str) else None
    if not (isinstance(metric, str) and isinstance(chosen_gains, dict) and metric in chosen_gains):
        raise ValueError(
            f"{path}: no finished sweep (needs 'sweep' with 'metric', 'chosen_name' and "
            "'test_gains' of the chosen setting): the run stopped before its sweep stage; "
            "finish it (reproduce resumes) or leave this task out"
        )
    for name, value in gains.items():
        _object(value, f"{path}: 'sweep.test_gains.{name}'")
    return sweep


def _attention(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = _object(read_json(path), str(path))
    configs = _object(data.get("configs"), f"{path}: 'configs'")
    out = {}
    for name, result in configs.items():
        result = _object(result, f"{path}: 'configs.{name}'")
        keep = {k: result[k] for k in ("rollout", "instance_aware") if k in result}
        generate = _object(result.get("generate"), f"{path}: 'configs.{name}.generate'")
        if generate:
            keep["generate"] = {
                k: generate[k] for k in ("rollout", "instance_aware") if k in generate
            }
        out[name] = keep
    return out


def render(
    tasks: dict[str, Any],
    command: str,
    machine: str,
    date: str,
    block: str = "",
    versions: dict[str, str] | None = None,
    model: str | None = None,
    cpu: dict[str, Any] | None = None,
    rule_version: str | None = None,
    accelerator: dict[str, Any] | None = None,
) -> str:
    """The block: the command, the findings, one row per task with the controls. `model`:
    the pretrained model a --pretrained run fine-tuned (None: tiny scratch models); `cpu`,
    `accelerator` (a GPU run's GPU) and `rule_version`, where the digest records them: the
    kernels and the verdict rule under which it reproduces bit for bit."""
    begin, end = markers(block)
    digest_name = Path(digest_path(block)).name
    packages = ", ".join(f"{k} {v}" for k, v in (versions or {}).items())
    what = f", {model} fine-tuned on each task there" if model else ""
    kernels = f"torch's {cpu['kernels']} kernels; " if cpu and cpu.get("kernels") else ""
    if accelerator:  # a GPU run: its kernels rounded the floats, not the CPU's
        kernels = f"{accelerator_words(accelerator)}; "
    rule = f"; verdict rule {rule_version}" if rule_version else ""
    about = f" ({kernels}{packages}{rule})" if packages else ""
    lines = [
        begin,
        "",
        f"Measured {date} on {machine}{what}{about}:",
        "",
        "```bash",
        command,
        "```",
        "",
    ]
    groups = seed_groups(tasks)
    last_runs = {runs[-1][0]: task for task, runs in groups.items()}
    for name, task in tasks.items():
        lines += [f"- {line}" for line in task_findings(name, task)]
        if name in last_runs:  # after a task's last seed run: do its verdicts agree
            lines.append(f"- {seed_agreement(last_runs[name], groups[last_runs[name]])}")
    lines += [
        "",
        "| task | chosen | OOD gain | restore gain | pointer following at ref-3 / ref+3 "
        "(without) | ID exact: baseline -> chosen | repair or pointer | calibrated verdict | "
        f"{STABILITY} |" + replication_heading(),
        "|---|---|---|---|---|---|---|---|---|" + "---|",
    ]
    for name, task in tasks.items():
        sweep = task["sweep"]
        metric = sweep["metric"]
        verdict = sweep.get("verdict") or {}
        numbers = verdict.get("numbers") or {}
        restore = numbers.get("restore_gain")
        follows = numbers.get("follows") or {}
        shown = []
        for k in ("-3", "3"):
            f = follows.get(k) or {}
            if f.get("rate") is None:
                shown.append("n/a")
            else:
                shown.append(f"{f['rate']:.2f} ({f.get('baseline_rate') or 0:.2f})")
        ident = sweep.get("id") or {}
        chosen = sweep["chosen_name"]
        id_cell = (
            f"{ident['baseline']['exact_match']:.3f} -> {ident[chosen]['exact_match']:.3f}"
            if chosen in ident and "baseline" in ident
            else "-"
        )
        lines.append(
            f"| {name} | {chosen} | {format_gain(sweep['test_gains'][chosen][metric])} | "
            f"{format_gain(restore) if restore else '-'} | {' / '.join(shown)} | {id_cell} | "
            f"{verdict.get('verdict', '-')} | "
            f"{verdict_name(task) if task.get('verdict') else '-'} | "
            f"{task_cell(task)} |" + f" {task_replication_cell(task)} |"
        )
    lines += [
        "",
        f"Gains: OOD test {tasks and next(iter(tasks.values()))['sweep']['metric']}, points, "
        "paired per instance with bootstrap 95% intervals; the digest of the run is "
        f"[{digest_name}]({digest_name}).",
        "",
        end,
    ]
    return "\n".join(lines)


def run_settings(out: Path) -> dict[str, Any]:
    """A reproduce run's settings.json ({} if it has none); ValueError naming it when it is
    there but torn, absurdly nested or no object (the digest's versions come from it)."""
    path = out / "settings.json"
    if not path.exists():
        return {}
    return read_json(path, expect=dict)


def run_versions(out: Path) -> dict[str, str]:
    """The package versions a reproduce run recorded in its settings.json ({} if none)."""
    versions = run_settings(out).get("versions")
    return versions if isinstance(versions, dict) else {}  # a hand-edited number: none


def differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where two digests' figures differ, as `path: expected X, got Y` lines (numbers equal
    to 12 significant digits count as equal: JSON round trips, not a different result)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = []
        for key in sorted(set(expected) | set(actual), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in actual:
                out.append(f"{where}: expected {_short(expected[key])}, missing")
            elif key not in expected:
                out.append(f"{where}: not expected, got {_short(actual[key])}")
            else:
                out += differences(expected[key], actual[key], where)
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [
            d
            for i, (a, b) in enumerate(zip(expected, actual))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    if _is_number(expected) and _is_number(actual):
        if f"{expected:.12g}" == f"{actual:.12g}":
            return []
    elif type(expected) is type(actual) and expected == actual:  # True is not 1 here
        return []
    return [f"{path}: expected {_short(expected)}, got {_short(actual)}"]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _figures(task: dict[str, Any], saved: dict[str, Any] | None = None) -> dict[str, Any]:
    """The figures `check` compares: not how the run was run or how long it took, and of
    the fields added later (ADDED_FIELDS) only those the committed digest `saved` holds."""
    out = {
        k: v
        for k, v in task.items()
        if k not in UNCOMPARED and (saved is None or k in saved or k not in ADDED_FIELDS)
    }
    if isinstance(out.get("lookups"), list):  # each candidate lookup's time: not compared
        out["lookups"] = [
            {k: v for k, v in lookup.items() if k not in UNCOMPARED}
            if isinstance(lookup, dict)
            else lookup
            for lookup in out["lookups"]
        ]
    return out if saved is None else without_unrecorded(out, saved)


# Fields a verdict gained after digests were committed: compared only where the committed
# verdict holds them (a figure the digest never held has not moved).
VERDICT_ADDED = ("stability", "replication", "readings")
# ... and fields a replication record gained after it (the same rule, one level down)
REPLICATION_ADDED = ("stability", "readings")


def without_unrecorded(task: dict[str, Any], saved: dict[str, Any]) -> dict[str, Any]:
    """`task` without the fields of VERDICT_ADDED its verdicts carry where the committed
    digest's verdicts (`saved`) hold none: the run's own and each candidate lookup's alike."""

    def strip(verdict: Any, kept: Any, added=VERDICT_ADDED) -> Any:
        if not isinstance(verdict, dict):
            return verdict
        kept = kept if isinstance(kept, dict) else {}
        out = {k: v for k, v in verdict.items() if k not in added or k in kept}
        if added is VERDICT_ADDED and "replication" in out:
            out["replication"] = strip(out["replication"], kept["replication"], REPLICATION_ADDED)
        return out

    out = dict(task)
    if "verdict" in task:
        out["verdict"] = strip(task["verdict"], saved.get("verdict"))
    lookups, before = task.get("lookups"), saved.get("lookups")
    if isinstance(lookups, list) and isinstance(before, list) and len(lookups) == len(before):
        out["lookups"] = [
            {**e, "verdict": strip(e.get("verdict"), (b or {}).get("verdict"))}
            if isinstance(e, dict) and "verdict" in e
            else e
            for e, b in zip(lookups, before)
        ]
    return out


def moved_lines(moved: list[str], digest_file) -> list[str]:
    """The head of a check's answer: how many figures moved, the first 20 of them."""
    lines = [f"{len(moved)} figure(s) differ from {digest_file}:", *moved[:20]]
    if len(moved) > 20:
        lines.append(f"... and {len(moved) - 20} more")
    return lines


def version_changes(then: dict[str, str], now: dict[str, str]) -> list[str]:
    """`name before -> after` for each package whose version differs between two runs."""
    return [
        f"{name} {then.get(name, '?')} -> {now.get(name, '?')}"
        for name in sorted(set(then) | set(now))
        if then.get(name) != now.get(name)
    ]


def check(out: Path, digest_file: Path) -> list[str]:
    """What a run at `out` does not reproduce of the committed digest: the figures that
    moved, then the versions and model weights that differ (empty: it reproduces)."""
    saved = read_digest(Path(digest_file))
    tasks = digest(out)
    wanted = {name: saved["tasks"][name] for name in tasks if name in saved["tasks"]}
    if not wanted:
        return [f"the run holds none of the digest's tasks ({', '.join(saved['tasks'])})"]
    # which seed run of how many a task was is how it was run, not what it measured
    moved = differences(
        {name: _figures(task) for name, task in wanted.items()},
        {name: _figures(tasks[name], wanted[name]) for name in wanted},
    )
    if not moved:
        return []
    lines = moved_lines(moved, digest_file)
    then, now = saved["meta"].get("versions") or {}, run_versions(out)
    changed = version_changes(then, now)
    if not then:
        lines.append("the digest records no versions (made before they were recorded)")
    elif changed:
        lines.append("versions that differ: " + ", ".join(changed))
    else:
        lines.append("the package versions are the same")
    settings = run_settings(out)
    then_gpu, now_gpu = saved["meta"].get("accelerator"), settings.get("accelerator")
    if then_gpu or now_gpu:  # a GPU on either side: the device decides, not the CPU
        lines.append(device_line(then_gpu, now_gpu))
    else:
        lines.append(cpu_line(saved["meta"].get("cpu"), settings.get("cpu")))
    lines.append(rule_line(saved["meta"].get("rule_version"), settings.get("rule_version")))
    for name in wanted:
        before, after = wanted[name].get("model_sha256"), tasks[name].get("model_sha256")
        if before is None:
            lines.append(f"{name}: the digest records no model hash")
        elif before != after:
            lines.append(f"{name}: the model's weights differ (model_sha256)")
    return lines


# The first words of `check`'s lines when the run is a new measurement rather than a failed
# reproduction: other kernels round floats otherwise, another rule reads otherwise.
OTHER_CPU = "made on another kind of CPU"
OTHER_KERNELS = "made with other kernels on the same processor"
OTHER_DEVICE = "made on another device"
OTHER_RULE = "read under another verdict rule"


def cpu_line(then: Any, now: Any) -> str:
    """Whether the digest's CPU and the run's compute alike (the kernel set torch takes:
    `harness.foundation.runs.cpu_kind`); bit for bit is promised only on the same kind."""
    if not isinstance(then, dict) or not isinstance(now, dict):
        side = "the digest" if not isinstance(then, dict) else "the run"
        return f"{side} records no CPU kind (made before it was recorded)"
    kinds = [f"{c.get('kernels')} kernels on {c.get('processor')}" for c in (then, now)]
    if then.get("kernels") != now.get("kernels"):
        # the same processor told to take other kernels (ATEN_CPU_CAPABILITY) is no other CPU
        same = then.get("processor") is not None and then.get("processor") == now.get("processor")
        return (
            f"{OTHER_KERNELS if same else OTHER_CPU}: the digest's {kinds[0]}, this run's "
            f"{kinds[1]}: float sums round otherwise there, so training gives other weights "
            "and the figures are a new measurement; the digest reproduces bit for bit on its "
            "own kind"
        )
    return f"the same kind of CPU ({kinds[1]})"


def device_line(then: Any, now: Any) -> str:
    """Whether the digest and the run computed on the same GPU (`accelerator` in settings.json:
    `harness.foundation.runs.accelerator_kind`; None: the CPU)."""
    if then == now:
        return f"the same GPU ({accelerator_words(now)})"
    return (
        f"{OTHER_DEVICE}: the digest's {accelerator_words(then)}, "
        f"this run's {accelerator_words(now)}: "
        "float sums round otherwise there, so training gives other weights and the figures "
        "are a new measurement; the digest reproduces bit for bit on its own kind"
    )


def rule_line(then: Any, now: Any) -> str:
    """Whether the digest and the run were read under the same verdict rule
    (`harness.attention.verdicts.rule_version`)."""
    if not then or not now:
        side = "the digest" if not then else "the run"
        return f"{side} records no rule version (made before it was recorded)"
    if then != now:
        return f"{OTHER_RULE}: the digest's {then}, this run's {now}"
    return f"the same verdict rule ({now})"


def read_digest(path: Path, option: str = "--check") -> dict[str, Any]:
    """A digest this module wrote (`--check DIGEST`, `--rederive DIGEST`: `option`):
    {"meta": {...}, "tasks": {name: {...}}} with at least one task; ValueError naming the
    option and the file otherwise."""
    data = read_json(path, option)
    where = f"{option} {str(path)!r}"
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), dict) or not data["tasks"]:
        raise ValueError(
            f"{where} is not a results_doc digest: it needs a 'tasks' object with at least "
            f"one task, as {PROG} writes it (e.g. {DIGEST})"
        )
    for name, task in data["tasks"].items():
        if not isinstance(task, dict):  # null too: a task's figures, never absent
            raise ValueError(
                f"{where}: task {name!r} must be a JSON object (its figures), got {_short(task)}"
            )
    meta = _object(data.get("meta"), f"{where}: 'meta'")
    versions = _object(meta.get("versions"), f"{where}: 'meta.versions'")
    for package, version in versions.items():
        if not isinstance(version, str):
            raise ValueError(
                f"{where}: 'meta.versions' maps package names to version strings; "
                f"{package!r} is {_short(version)}"
            )
    # digests written before `json_safe` may hold NaN: read as the writer now writes
    return {"meta": meta, "tasks": json_safe(data["tasks"])}


def check_output(path: Path, option: str) -> None:
    """ValueError when `path` cannot be written as a file: it is a folder, or lies under a
    file (checked before anything is written)."""
    if path.is_dir():
        raise ValueError(f"{option} {str(path)!r} is a folder; give the file to write")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(
                    f"{option} {str(path)!r} lies under {str(parent)!r}, which is a file"
                )
            break


def replace_block(text: str, rendered: str, block: str = "") -> str:
    """`text` with the block named `block` (the unnamed one: "") replaced by `rendered`."""
    return blocks.replace_block(text, rendered, *markers(block))


def write(
    run: Path,
    doc: Path,
    digest_file: Path,
    *,
    command: str,
    machine: str,
    date: str,
    block: str = "",
) -> str:
    """Write the run's digest to `digest_file` and its block (named `block`; a --pretrained
    run: its row of the pretrained table) into `doc`, then the page's summary; returns what
    was written, in words. Every input and both outputs are checked before anything is
    written (ValueError naming the option: --digest, --doc)."""
    check_output(digest_file, "--digest")
    tasks = digest(run)
    meta = {"command": command, "machine": machine, "date": date}
    settings = run_settings(run)
    meta["versions"] = settings.get("versions") or {}
    for key in ("cpu", "accelerator", "rule_version"):  # what `check` needs to compare
        if settings.get(key):
            meta[key] = settings[key]
    pretrained = settings.get("pretrained")
    if pretrained:  # a --pretrained run: its models are that model fine-tuned here
        meta["model"] = pretrained
    if block:
        meta["block"] = block
    if doc.is_dir() or not doc.exists():
        what = "is a folder" if doc.is_dir() else "does not exist"
        raise ValueError(
            f"--doc {str(doc)!r} {what}; give the Markdown file that holds the block's "
            "markers (default docs/results.md)"
        )
    text = doc.read_text(encoding="utf-8")
    if pretrained:
        # every --pretrained run is a row of one table (harness.report.pretrained_table),
        # not a block of its own: the doc needs that table's markers
        if pretrained_table.BEGIN not in text:
            raise ValueError(
                f"--doc {str(doc)!r} has no markers {pretrained_table.BEGIN!r} .. "
                f"{pretrained_table.END!r}: a --pretrained run's digest goes into that table"
            )
        what = "the pretrained-models table"
    else:
        try:
            text = replace_block(text, render(tasks, **meta), block)
        except ValueError as error:
            raise ValueError(f"--doc {str(doc)!r}: {error}") from None
        what = "the quick-findings block"
    digest_file.parent.mkdir(parents=True, exist_ok=True)
    text_out = dumps_compact({"meta": meta, "tasks": tasks})
    atomic_write_text(digest_file, text_out + "\n")
    atomic_write_text(doc, text)
    if pretrained:
        pretrained_table.write_table(doc, digest_file.parent)
    # the page's opening conclusion is generated from every digest: it follows this one
    summary = write_summary(doc, digest_file.parent)
    return f"wrote {digest_file} and {what} of {doc}" + (" (and its summary)" if summary else "")


if __name__ == "__main__":  # the form this command had before it moved to harness/commands/
    from harness.foundation.options import moved_command

    moved_command("harness.report.results_doc", "results-doc")
