"""Put a supervision study's findings into docs/results.md, generated, never typed.

    attentionspan supervision --tasks reversal --seeds 3 --output runs/sup-reversal
    attentionspan supervision-doc runs/sup-reversal --doc docs/results.md \\
        --digest docs/supervision-reversal.json --date 2026-12-01 --machine "2-core CPU" \\
        --command "attentionspan supervision --tasks reversal --seeds 3 --output runs/sup-reversal"

Reads the run's `<task>/results.json`, keeps the numbers the block shows in a digest (the
`--digest` file, committed), and rewrites the block between the digest's markers in the doc
(`<!-- supervision-reversal: ... -->` .. `<!-- /supervision-reversal -->` for
docs/supervision-reversal.json) from that digest alone (`render`), so a test can render the
committed digest again and compare it with its block. The command's parser is
harness/commands/supervision_doc.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attentionspan_datasets.atomic import atomic_write_text
from harness.attention.verdicts.vocabulary import NOT_BOTTLENECK
from harness.foundation.stats import format_gain, format_number
from harness.report import blocks
from harness.report.results_doc import check_output, read_json, run_versions


def markers(name: str) -> tuple[str, str]:
    """The (begin, end) markers of the block of the digest named `name` (its file's stem)."""
    return (
        f"<!-- {name}: generated from the run below by harness/report/supervision_doc.py; "
        "do not edit -->",
        f"<!-- /{name} -->",
    )


def task_digest(results: dict[str, Any], path: Path) -> dict[str, Any]:
    """The figures the block shows of one task's results.json (ValueError naming the file
    when it is not a supervision study's)."""
    missing = [
        k for k in ("task", "arms", "verdict", "accuracy", "gains", "metric") if k not in results
    ]
    if missing:
        raise ValueError(
            f"{path}: no {missing[0]!r}: not the results of `attentionspan supervision`"
        )
    metric = results["metric"]
    arms = {}
    bases = set()
    for name, arm in results["arms"].items():
        gain = results["gains"]["ood"].get(name, {}).get(metric)
        diagnosis = results["diagnosis"][name]["ood"]
        bases.add(diagnosis.get("basis"))
        arms[name] = {
            "role": arm["role"],
            "weight": arm["weight"],
            "steps": arm["steps"],
            "model_sha256": arm["model_sha256"],
            "id_exact": results["accuracy"]["id"][name]["exact_match"],
            "ood_exact": results["accuracy"]["ood"][name]["exact_match"],
            "ood_partial": results["accuracy"]["ood"][name]["partial_acc"],
            "ood_gain": gain,
            "mass_ood": results["mass"]["ood"][name]["supervised"],
            "on_reference": diagnosis["shares"].get("on_reference"),
            "wrong_instances": diagnosis["instances"],
        }
    return {
        "metric": metric,
        # which wrong rows the diagnosis read ("first wrong row of each instance"); None:
        # a study made before the round-2 rule, which read every wrong row
        "basis": bases.pop() if len(bases) == 1 else None,
        "chosen": results["chosen"],
        "seeds": len(results["seeds"]),
        "verdict": results["verdict"],
        "versus_controls": {k: v[metric] for k, v in results["versus_controls"].items()},
        "arms": arms,
    }


def digest(out: Path) -> dict[str, Any]:
    """Per task, the figures of a supervision run folder (ValueError naming what is wrong)."""
    out = Path(out)
    if not out.is_dir():
        raise ValueError(f"the run folder {str(out)!r} does not exist or is not a folder")
    tasks = {}
    for path in sorted(out.glob("*/results.json")):
        results = read_json(path)
        if isinstance(results, dict) and "arms" in results:
            tasks[results.get("task", path.parent.name)] = task_digest(results, path)
    if not tasks:
        raise ValueError(f"{out} holds no <task>/results.json of `attentionspan supervision`")
    return tasks


def rule_of(tasks: dict[str, Any]) -> str | None:
    """The version of the rule that read the tasks' verdicts (`supervision_rule_version`,
    recorded in each verdict by the study); several when runs made under different rules
    are digested together; None: a study made before versions were recorded."""
    found = sorted({t["verdict"].get("rule_version") for t in tasks.values()} - {None})
    return ", ".join(found) or None


def rule_line(meta: dict[str, Any]) -> str:
    """The block's words for the rule that read its verdicts, from the digest's meta: the
    version, and how it was read when the digest was read again after the study
    (`rule_read`); empty for a digest without one."""
    if not meta.get("rule_version"):
        return ""
    read = f" ({meta['rule_read']})" if meta.get("rule_read") else ""
    return f"Verdicts read under rule {meta['rule_version']}{read}."


def _mean(value: dict[str, Any] | None) -> str:
    return format_number(value.get("mean")) if value else "n/a"


def basis_line(found: dict[str, Any]) -> str:
    """Which wrong rows *errors on reference* read, from the digest's own `basis`; a digest
    without one predates the round-2 rule and says so (its runs are not kept to re-read)."""
    basis = found.get("basis")
    if basis:
        return (
            f"*Errors on reference* (the diagnosis read the {basis}): the share of wrong OOD "
            "instances on which the supervised heads looked at the reference as much as in "
            "distribution."
        )
    return (
        "*Errors on reference* predates the round-2 diagnosis rule: it reads every wrong row "
        "of an instance (an instance counts once, the mean of its rows), later rows reading "
        "the model's own wrong characters, not each instance's first error; this digest "
        f"records no basis, so any *{NOT_BOTTLENECK}* verdict, which reads it, rests on the "
        "older rule until the study is run again."
    )


def render(data: dict[str, Any], name: str) -> str:
    """The block of a digest ({"meta": ..., "tasks": ...}) named `name`: the command, a
    verdict line per task and its table of arms."""
    begin, end = markers(name)
    meta = data["meta"]
    packages = ", ".join(f"{k} {v}" for k, v in (meta.get("versions") or {}).items())
    lines = [
        begin,
        "",
        f"Measured {meta['date']} on {meta['machine']}"
        + (f" ({packages})" if packages else "")
        + ":",
        "",
        "```bash",
        meta["command"],
        "```",
        "",
    ]
    if rule_line(meta):
        lines += [rule_line(meta), ""]
    for task, found in data["tasks"].items():
        verdict = found["verdict"]
        metric = found["metric"]
        lines += [
            f"- **{task}: {verdict['verdict']}** ({found['seeds']} seed runs per arm): "
            f"{verdict['reason']}. What this rules out: {verdict['rules_out']}.",
            "",
            f"| arm | role | ID exact | OOD exact | OOD partial | OOD {metric} gain | "
            "heads' OOD mass | errors on reference |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for arm, row in found["arms"].items():
            chosen = " (chosen)" if arm == found["chosen"] else ""
            gain = format_gain(row["ood_gain"]) if row["ood_gain"] else "-"
            lines.append(
                f"| {arm}{chosen} | {row['role']} | {_mean(row['id_exact'])} | "
                f"{_mean(row['ood_exact'])} | {_mean(row['ood_partial'])} | {gain} | "
                f"{_mean(row['mass_ood'])} | {format_number(row['on_reference'], 2)} |"
            )
        versus = "; ".join(f"{k} {format_gain(v)}" for k, v in found["versus_controls"].items())
        lines += ["", f"{found['chosen']} minus each control (points): {versus}.", ""]
        lines += [basis_line(found), ""]
    lines += [
        f"Gains in points, 95% intervals over seeds and instances (paired per instance within "
        f"a seed run, instances resampled within each seed); the digest is "
        f"[{name}.json]({name}.json).",
        "",
        end,
    ]
    return "\n".join(lines)


def reread(digest_file: Path, doc: Path, *, date: str) -> str:
    """Read a committed digest's verdicts again from the figures it keeps under today's rule
    (`harness.report.rederive.supervision_line`) and record the rule's version in each
    verdict and in meta, with `rule_read` saying when and that the study was not run
    again; then rewrite its block in `doc`. Only when every verdict, word and reason,
    comes out as recorded: otherwise ValueError naming the task, and nothing is written."""
    from harness.attention.verdicts.rule_version import supervision_rule_version
    from harness.report.rederive import supervision_line

    data = read_json(digest_file, "--digest")
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if (
        not isinstance(tasks, dict)  # first: `data` may be no object at all
        or not tasks
        or not isinstance(data.get("meta"), dict)
        or not all(
            isinstance(t, dict) and "arms" in t and isinstance(t.get("verdict"), dict)
            for t in tasks.values()
        )
    ):
        raise ValueError(
            f"--digest {str(digest_file)!r} is not a supervision study's digest: it needs "
            "'meta' and 'tasks' whose every task has 'arms' and a 'verdict', as "
            "`attentionspan supervision-doc` writes it"
        )
    for task, found in tasks.items():
        line, agree = supervision_line(task, found)
        if not agree:
            raise ValueError(f"--digest {str(digest_file)!r}: {line}; nothing re-read")
    version = supervision_rule_version()
    for found in data["tasks"].values():
        found["verdict"]["rule_version"] = version
    data["meta"]["rule_version"] = version
    data["meta"]["rule_read"] = (
        f"read again {date} from the figures below, the same words and reasons as the "
        f"study's own reading of {data['meta']['date']}; the study was not run again"
    )
    text = replace_block(
        doc.read_text(encoding="utf-8"), render(data, digest_file.stem), digest_file.stem
    )
    atomic_write_text(digest_file, json.dumps(data, indent=1) + "\n")
    atomic_write_text(doc, text)
    return f"re-read {digest_file} under rule {version} and its block in {doc}"


def replace_block(text: str, rendered: str, name: str) -> str:
    """`text` with the block of the digest named `name` replaced by `rendered`."""
    return blocks.replace_block(text, rendered, *markers(name))


def write(run: Path, doc: Path, digest_file: Path, *, command: str, machine: str, date: str) -> str:
    """Write the study's digest to `digest_file` and its block (named by the file's stem)
    into `doc`; returns what was written, in words. Every input is checked before anything
    is written (ValueError naming the option: --digest, --doc)."""
    check_output(digest_file, "--digest")
    tasks = digest(run)
    meta = {
        "command": command,
        "machine": machine,
        "date": date,
        "versions": run_versions(run),
        "rule_version": rule_of(tasks),
    }
    data = {"meta": meta, "tasks": tasks}
    if not doc.is_file():
        raise ValueError(f"--doc {str(doc)!r} is not a file; give the Markdown file to update")
    try:
        text = replace_block(
            doc.read_text(encoding="utf-8"), render(data, digest_file.stem), digest_file.stem
        )
    except ValueError as error:
        raise ValueError(f"--doc {str(doc)!r}: {error}") from None
    digest_file.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(digest_file, json.dumps(data, indent=1) + "\n")
    atomic_write_text(doc, text)
    return f"wrote {digest_file} and its block in {doc}"


if __name__ == "__main__":  # the form this command had before it moved to harness/commands/
    from harness.foundation.options import moved_command

    moved_command("harness.report.supervision_doc", "supervision-doc")
