"""The Findings that open `report.md`: sentences written from the numbers by fixed rules.

    from harness.report.findings import task_findings
    for line in task_findings("reversal", task_results):
        print("-", line)

Nothing here is written by hand: each rule reads one number (or a pair) of a task's results
(`harness.pipeline.reproduce.TaskRun.run`) and says what it means, including what goes
against the paper. A rule whose numbers are missing says nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.attention.controls import roles_of
from harness.attention.lookup import recorded_lookup
from harness.attention.verdicts.vocabulary import ID_TOLERANCE
from harness.foundation.stats import (
    MIN_KIND_INSTANCES,
    above_zero,
    below_zero,
    format_gain,
    scarce_kind,
)
from harness.foundation.stats import format_number as _n
from harness.report.stability_md import candidate_verdicts, shown_word

# ID exact match falling more than the verdicts tolerate is reported as a cost
ID_COST = ID_TOLERANCE
ALPHA = 0.05


def accuracy_findings(task: Mapping[str, Any]) -> list[str]:
    """ID solved or not, OOD failed or not (Table 1)."""
    rows = task.get("eval") or {}
    if len(rows) != 2:
        return []
    (id_name, id_row), (ood_name, ood_row) = rows.items()
    solved = "solves" if id_row["exact_match"] >= 0.9 else "does not solve"
    fails = "fails" if ood_row["exact_match"] <= 0.1 else "partly solves"
    return [
        f"The model {solved} the in-distribution task ({id_name} exact match "
        f"{_n(id_row['exact_match'])}) and {fails} the longer inputs ({ood_name} exact match "
        f"{_n(ood_row['exact_match'])}, partial accuracy {_n(ood_row['partial_acc'])})."
    ]


def attention_findings(task: Mapping[str, Any]) -> list[str]:
    """Correct against wrong tokens' attention on the reference (Table 2), read from the
    instance-aware figures (`harness.foundation.stats.correct_vs_wrong`: a cluster bootstrap over
    instances for the direction, the length- and position-matched permutation test beside
    it); the paper's pooled token test only where those are missing, and said so."""
    out = []
    results = (task.get("attention") or {}).get("results") or {}
    for name, result in results.items():
        block = result.get("generate") or result
        rollout = block.get("rollout") or {}
        correct = (rollout.get("correct") or {}).get("mean")
        wrong = (rollout.get("error") or {}).get("mean")
        if correct is None or wrong is None:
            continue
        pass_name = "free-running" if "generate" in result else "teacher-forced"
        aware = block.get("instance_aware") or {}
        boot = aware.get("cluster_bootstrap") or {}
        few = _too_few(boot, aware.get("n_instances"))
        if few:
            out.append(f"{name} ({pass_name}): {few}.")
            continue
        if boot.get("low") is not None and boot.get("high") is not None:
            evidence = (
                f"difference {boot['difference']:+.3f}, 95% interval over "
                f"{aware.get('n_instances')} instances [{boot['low']:+.3f}, {boot['high']:+.3f}]"
            )
            higher, lower = boot["low"] > 0, boot["high"] < 0
        else:
            p = rollout.get("welch_p")
            evidence = f"pooled Welch p = {_n(p, 3)} over tokens, instances not accounted for"
            higher = p is not None and p < ALPHA and correct > wrong
            lower = p is not None and p < ALPHA and correct < wrong
        if higher:
            reading = "correct tokens attend more to their reference than wrong ones, as the paper"
        elif lower:
            reading = (
                "wrong tokens attend more to their reference than correct ones, opposite to "
                "the paper"
            )
        else:
            reading = "correct and wrong tokens' attention on the reference does not differ"
        line = (
            f"{name} ({pass_name}): {reading} ({_n(correct, 4)} against {_n(wrong, 4)}; {evidence})"
        )
        matched = aware.get("matched") or {}
        if matched.get("difference") is not None and matched.get("p") is not None:
            held = matched["p"] < ALPHA
            if (higher or lower) and not held:
                line += (
                    f"; with length and position held fixed the difference is "
                    f"{matched['difference']:+.4f} (p = {_n(matched['p'], 3)}): not significant"
                )
            else:
                line += (
                    f"; with length and position held fixed {matched['difference']:+.4f} "
                    f"(p = {_n(matched['p'], 3)})"
                )
        out.append(line + ".")
    return out


def _too_few(boot: Mapping[str, Any], n_instances: int | None) -> str:
    """Why correct and wrong tokens cannot be compared, where too few instances hold one
    kind (`harness.foundation.stats.scarce_kind`); empty where they can."""
    kind = scarce_kind(boot)
    if kind is None:
        return ""
    return (
        f"too few instances hold a {kind} token to compare attention "
        f"({boot[f'instances_{kind}']} of {n_instances}; an interval over instances needs "
        f"{MIN_KIND_INSTANCES})"
    )


def intervention_findings(task: Mapping[str, Any]) -> list[str]:
    """The chosen setting's gain, its cost in distribution, what its controls say."""
    sweep = task.get("sweep")
    if not sweep:
        return []
    out = []
    chosen = sweep["chosen_name"]
    gains = sweep["test_gains"]
    metric = sweep.get("metric", "partial_acc")
    gain = gains[chosen][metric]
    label = metric.replace("_", " ")
    if above_zero(gain):
        out.append(f"The chosen setting {chosen} lifts OOD {label} by {format_gain(gain)} points.")
    elif below_zero(gain):
        out.append(f"The chosen setting {chosen} lowers OOD {label}: {format_gain(gain)} points.")
    else:
        out.append(f"The chosen setting {chosen} gives no OOD gain: {format_gain(gain)} points.")
    test = sweep["test"]
    stuck = test[chosen]["exact_match"] <= 0.01 and test["baseline"]["exact_match"] <= 0.01
    if stuck and above_zero(gain):
        out.append("OOD exact match stays at 0: the gain is in single characters, not answers.")
    roles = roles_of(chosen, gains)
    randoms = [
        f"{name}: {format_gain(control[metric])}"
        for name, control in gains.items()
        if roles[name] == "random_heads" and above_zero(control[metric])
    ]
    if randoms:
        out.append(
            f"Random heads also gain ({'; '.join(randoms)}): the effect is not specific to the "
            "ranked heads."
        )
    ident = sweep.get("id") or {}
    if chosen in ident and "baseline" in ident:
        before, after = ident["baseline"]["exact_match"], ident[chosen]["exact_match"]
        if after < before - ID_COST:
            out.append(
                f"The chosen setting costs the in-distribution task: ID exact {_n(before)} -> "
                f"{_n(after)}."
            )
        else:
            out.append(
                f"ID exact match holds under the chosen setting ({_n(before)} -> {_n(after)})."
            )
    restored = [name for name in ident if name != "baseline" and roles.get(name) == "restore"]
    for name in restored:
        before, after = ident["baseline"]["exact_match"], ident[name]["exact_match"]
        if after < before - ID_COST:
            out.append(
                f"Restore is not neutral in distribution ({name}: ID exact {_n(before)} -> "
                f"{_n(after)}): giving each head its mean ID weight breaks rows that had "
                "another, so its OOD result says little."
            )
    verdict = sweep.get("verdict")
    if verdict:
        out.append(
            "At the grid's chosen setting the repair-or-pointer rule says "
            f"**{verdict['verdict']}**: " + "; ".join(verdict["reasons"]) + "."
        )
    calibrated = task.get("verdict")
    lookups = task.get("lookups") or []
    if calibrated and len(lookups) >= 2:
        # a near tie or a split: both candidate lookups judged, both verdicts said, none picked
        out.append(f"{two_lookups_headline(task)}.")
        for entry in lookups:
            verdict = entry.get("verdict") or {}
            out.append(
                f"Calibrated verdict at {where(recorded_lookup(entry)['offset'])} (dose-response "
                "and where "
                f"the errors look): **{shown_word(verdict)}**: "
                + "; ".join(verdict.get("reasons") or [])
                + "."
            )
    elif calibrated:
        out.append(
            f"Calibrated verdict (dose-response and where the errors look): "
            f"**{shown_word(calibrated)}**: " + "; ".join(calibrated["reasons"]) + "."
        )
    return out


def where(offset: int | None) -> str:
    """ "the reference", "ref+1": where a lookup reads."""
    return "the reference" if not offset else f"ref{int(offset):+d}"


def lookup_verdicts(task: Mapping[str, Any]) -> list[tuple[int, str]]:
    """[(offset, calibrated verdict)] of each candidate lookup a near tie or a split made
    the run judge (the run's own first); [] when it judged one."""
    return [
        (int(recorded_lookup(e)["offset"] or 0), shown_word(v)) for e, v in candidate_verdicts(task)
    ]


def two_lookups_headline(task: Mapping[str, Any]) -> str:
    """The headline of a run that judged two candidate lookups: both offsets with their ID
    mass, and whether the verdicts agree (never one of them picked)."""
    lookups = task["lookups"]
    recorded = [recorded_lookup(e) for e in lookups]
    masses = " and ".join(
        f"{where(e['offset'])} (ID mass {e['mass']:.2f})"
        if e.get("mass") is not None
        else where(e["offset"])
        for e in recorded
    )
    judged = lookup_verdicts(task)
    words = {v for _, v in judged}
    if len(words) == 1:
        return f"Two candidate lookups, {masses}: both read **{next(iter(words))}**"
    said = ", ".join(f"**{v}** at {where(k)}" for k, v in judged)
    return f"Two candidate lookups, {masses}: the verdicts differ: {said}"


# --- seed runs (`reproduce --quick --seeds K`) ------------------------------------------------
def seed_groups(
    tasks: Mapping[str, Mapping[str, Any]],
) -> dict[str, list[tuple[str, Mapping[str, Any]]]]:
    """task -> its seed runs [(name in `tasks`, results)] in run order, for the tasks run
    with --seeds K > 1 (their results carry "seed_run": task, run, init_seed, data_seed)."""
    groups: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for name, task in tasks.items():
        run = task.get("seed_run")
        if run:
            groups.setdefault(run["task"], []).append((name, task))
    return {
        task: sorted(runs, key=lambda item: item[1]["seed_run"]["run"])
        for task, runs in groups.items()
    }


def verdict_name(task: Mapping[str, Any]) -> str:
    """The run's calibrated verdict (or, in a run made before it, the repair-or-pointer
    verdict of the grid's chosen setting), or `none` where it has none. Two candidate
    lookups whose verdicts differ: both, each with its offset ("no lookup at the reference
    / no attention effect at ref+1")."""
    judged = lookup_verdicts(task)
    if len({v for _, v in judged}) > 1:
        return " / ".join(f"{v} at {where(k)}" for k, v in judged)
    # under STABLE a calibrated verdict is "unstable: w1 / w2", never one word
    verdict = task.get("verdict") or (task.get("sweep") or {}).get("verdict") or {}
    return shown_word(verdict)


def _runs_text(runs: list[int]) -> str:
    words = [str(r) for r in runs]
    listed = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return f"seed run{'s' if len(words) > 1 else ''} {listed}"


def seed_agreement(task: str, runs: list[tuple[str, Mapping[str, Any]]]) -> str:
    """One sentence: whether the seed runs of `task` reach the same verdict, and where they
    do not, which verdict each run reached."""
    by_verdict: dict[str, list[int]] = {}
    for _, results in runs:
        by_verdict.setdefault(verdict_name(results), []).append(results["seed_run"]["run"])
    first = runs[0][1]["seed_run"]
    # --pretrained: every seed run starts from the pretrained weights
    init = "the pretrained weights" if first["init_seed"] == "pretrained" else "init seed k"
    head = f"{task} over {len(runs)} seed runs (seed run k: {init}, data seed "
    head += f"{first['data_seed']} + k)"
    if len(by_verdict) == 1:
        return f"{head}: the verdicts agree, all **{next(iter(by_verdict))}**."
    parts = "; ".join(f"**{v}** in {_runs_text(r)}" for v, r in by_verdict.items())
    return f"{head}: the verdicts differ: {parts}."


def task_findings(name: str, task: Mapping[str, Any]) -> list[str]:
    """Every finding of one task, each prefixed with the task's name."""
    lines = accuracy_findings(task) + attention_findings(task) + intervention_findings(task)
    return [f"{name}: {line}" for line in lines]


def findings_section(tasks: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """`## Findings` with one bullet per finding of every task."""
    lines = ["## Findings", ""]
    groups = seed_groups(tasks)
    last_runs = {runs[-1][0]: task for task, runs in groups.items()}
    for name, task in tasks.items():
        lines += [f"- {line}" for line in task_findings(name, task)]
        if name in last_runs:  # after a task's last seed run: do its verdicts agree
            lines.append(f"- {seed_agreement(last_runs[name], groups[last_runs[name]])}")
    lines.append("")
    lines.append(
        "Each finding is written from the numbers below by a rule (harness/report/findings.py); "
        "the verdict rule is stated in docs/usage_analysis.md."
    )
    return lines + [""]
