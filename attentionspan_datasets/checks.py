"""What every task must satisfy, checked for any task: `attentionspan check-task NAME`.

    from attentionspan_datasets import checks
    checks.contract_problems(instance)      # [] or one line per broken rule of the contract
    checks.oracle_problems(instance)        # [] when the oracle recomputes every target char
    for result in checks.check_task("string_reversal", instances=1000):
        print(result.line)                  # "ok ..." or "FAIL <instance>: <what>"

The rules (docs/tasks.md, "The contract"; docs/own_task.md): every prompt ends with '=', the
target is not empty, `reference` has one sorted row without duplicates per target character
and points only at earlier positions, `params` is JSON with an int "length"; the `sufficient`
mask's oracle recomputes every target character from the referenced characters alone;
every variant's reference keeps the row rules above and names at least one position per
row (predicting a character attends to something); `minimal` <= `paper` <= `sufficient` row
by row; (config, seed, index) fixes an instance, in this process and under another
PYTHONHASHSEED, and no global generator is touched; a prompt has one target; the train,
validation and test rows share no prompt and each row is its split's. The built-in tasks'
tests (tests/test_registry.py, tests/test_splits.py) call the same functions. Nothing here
needs a model.

What no generic check can tell is said in a `note` line, never passed over: only
`sufficient` has an oracle, so whether `paper` follows the published rule and `minimal`
names where each answer's value comes from is checked only as far as the rules above go
(two wrong variants that nest inside a right `sufficient` pass them). A task without ID/OOD
presets is a `warn` line, not a failure: its data can be right without them (generate, show,
export, load_dataset and train take the task's name), but reproduce, eval's defaults and
the lm-eval tasks need the pair (docs/own_task.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from attentionspan_datasets.generation import (
    generate,
    iter_instances,
    resolve_config,
    unknown_config_message,
)
from attentionspan_datasets.presets import PRESETS, SHORT_NAMES
from attentionspan_datasets.splits import SPLITS, iter_split, split_instance, split_of
from attentionspan_datasets.tasks import TASKS, Instance, get_task, visible_text

DEFAULT_INSTANCES = 1000  # per preset and check
DEFAULT_SEED = 1  # the seed of the checked streams (a check seed, not the data's default)
NESTING_INSTANCES = 300  # three variants each: the nesting is a rule of the code, not of luck
SPLIT_ROWS = 200  # validation and test rows per preset (a row costs about 20 draws)
ACCESS_SAMPLE = 10  # rows regenerated alone, per stream
DIGEST_INSTANCES = 30  # per preset, compared with a process under another PYTHONHASHSEED
MAX_SHOWN = 5  # failure lines per check and preset; the rest are counted on one line


@dataclass(frozen=True)
class Result:
    """One line of a check's outcome: `ok` lines summarise, FAIL lines name an instance,
    `warn` and `note` lines (ok, `note` True) say what is missing or was not checked."""

    ok: bool
    line: str
    note: bool = False


def instance_name(instance: Instance, seed: int, mask: str, split: str | None = None) -> str:
    """`rotation_id#17 (seed 1, mask sufficient)`: what regenerates the instance."""
    where = f", split {split}" if split else ""
    return f"{instance.config}#{instance.index} (seed {seed}, mask {mask}{where})"


# --- rules of one instance ---------------------------------------------------------------
def contract_problems(instance: Instance) -> list[str]:
    """The data contract of one instance: [] or one line per broken rule."""
    problems = []
    if not instance.prompt.endswith("="):
        problems.append(f"prompt does not end with '=': {_cut(instance.prompt)}")
    if not instance.target:
        problems.append("empty target")
    problems += reference_problems(instance)
    length = instance.params.get("length") if isinstance(instance.params, dict) else None
    if isinstance(length, bool) or not isinstance(length, int):
        problems.append(f"params['length'] must be an int, got {_cut(length)}")
    try:
        json.dumps(instance.params)
    except (TypeError, ValueError) as error:
        problems.append(f"params do not serialise as JSON: {error}")
    return problems


def reference_problems(instance: Instance, variant: str = "") -> list[str]:
    """The row rules of one instance's reference (its mask `variant`, named in each line
    when given): one row per target character, each a sorted list of earlier positions
    without duplicates."""
    name = f"{variant} " if variant else ""
    problems = []
    if len(instance.reference) != len(instance.target):
        problems.append(
            f"{len(instance.reference)} {name}reference rows for {len(instance.target)} "
            "target characters"
        )
    for i, row in enumerate(instance.reference):
        if not isinstance(row, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) for p in row
        ):
            problems.append(f"{name}reference[{i}] is not a list of ints: {_cut(row)}")
            continue
        if row != sorted(set(row)):
            problems.append(f"{name}reference[{i}] is not sorted without duplicates: {_cut(row)}")
        late = [p for p in row if not 0 <= p < len(instance.prompt) + i]
        if late:
            problems.append(
                f"{name}reference[{i}] points at {_cut(late)}, not an earlier position "
                f"(allowed: 0 to {len(instance.prompt) + i - 1})"
            )
    return problems


def oracle_problems(instance: Instance) -> list[str]:
    """[] when the task's oracle, shown only the characters `reference[i]` names, gives
    `target[i]` for every i; else one line per character it misses."""
    oracle = get_task(instance.task).oracle
    problems = []
    for i, expected in enumerate(instance.target):
        try:
            got = oracle(visible_text(instance, i), instance.params, i)
        except Exception as error:  # a hidden character the oracle needed, typically
            reason = _cut(" ".join(str(error).split()))
            problems.append(
                f"oracle raised {type(error).__name__} on target[{i}] = {expected!r} from "
                f"reference {_cut(instance.reference[i])} (a character it needs not "
                f"referenced?): {reason}"
            )
            continue
        if got != expected:
            problems.append(
                f"oracle gave {_cut(got)} for target[{i}] = {expected!r} from reference "
                f"{_cut(instance.reference[i])}"
            )
    return problems


def nesting_problems(minimal: Instance, paper: Instance, sufficient: Instance) -> list[str]:
    """Every variant's rows keep the row rules and name a position each; `minimal` <=
    `paper` <= `sufficient` row by row, over the same text. A line names the variants and
    the positions that break it."""
    variants = {"minimal": minimal, "paper": paper, "sufficient": sufficient}
    for variant, instance in variants.items():
        if instance.text != sufficient.text:
            where = first_difference(
                {"text": sufficient.text}, {"text": instance.text}, "sufficient", variant
            )
            return [f"the mask variants change the text, not only the reference: {where}"]
    problems = []
    for variant, instance in variants.items():
        problems += reference_problems(instance, variant)
        empty = [i for i, row in enumerate(instance.reference) if not row]
        if empty:
            problems.append(
                f"{variant} reference[{empty[0]}] names no position (predicting a character "
                f"attends to something){f'; {len(empty) - 1} more rows' if len(empty) > 1 else ''}"
            )
    if problems:
        return problems
    rows = zip(minimal.reference, paper.reference, sufficient.reference)
    for i, (row_m, row_p, row_s) in enumerate(rows):
        for inner, outer, small, large in (
            ("minimal", "paper", row_m, row_p),
            ("paper", "sufficient", row_p, row_s),
        ):
            outside = sorted(set(small) - set(large))
            if outside:
                problems.append(
                    f"reference[{i}]: {inner} {_cut(small)} is not inside {outer} "
                    f"{_cut(large)}: {inner} has {_cut(outside)} that {outer} lacks"
                )
    return problems


def first_difference(a: dict[str, Any], b: dict[str, Any], name_a: str, name_b: str) -> str:
    """Where two instances' fields first differ, shown so the reader sees the difference:
    the field, the character or row where it starts, and both values from there (two whole
    strings alike up to a cut would read as identical)."""
    for key in a:
        left, right = a[key], b.get(key)
        if left == right:
            continue
        if isinstance(left, str) and isinstance(right, str):
            at = next((i for i, (x, y) in enumerate(zip(left, right)) if x != y), None)
            at = min(len(left), len(right)) if at is None else at
            return (
                f"{key} differs from character {at}: {name_a} {_cut(left[at : at + 30])}, "
                f"{name_b} {_cut(right[at : at + 30])} (lengths {len(left)} and {len(right)})"
            )
        if isinstance(left, list) and isinstance(right, list):
            at = next((i for i, (x, y) in enumerate(zip(left, right)) if x != y), None)
            if at is None:
                return f"{key} has {len(left)} rows in {name_a}, {len(right)} in {name_b}"
            return f"{key}[{at}] differs: {name_a} {_cut(left[at])}, {name_b} {_cut(right[at])}"
        return f"{key} differs: {name_a} {_cut(left)}, {name_b} {_cut(right)}"
    return "they differ"


def _cut(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


# --- a whole task ------------------------------------------------------------------------
def task_of(name: str) -> str:
    """The registry name of a task named by itself, its short name or one of its presets."""
    if name in PRESETS:
        return PRESETS[name].task
    task = SHORT_NAMES.get(name, name)
    if task not in TASKS:
        raise ValueError(unknown_config_message(name))
    return task


def configs_of(task: str) -> list[str]:
    """The presets of `task`, in the catalogue's order; the bare task name when it has none."""
    return [name for name, preset in PRESETS.items() if preset.task == task] or [task]


def check_task(
    name: str,
    instances: int = DEFAULT_INSTANCES,
    seed: int = DEFAULT_SEED,
    other_process: bool = True,
) -> Iterator[Result]:
    """Every check of the task `name` (a task, short or preset name) over each of its
    presets, `instances` instances per preset and check. `other_process`: also compare the
    instances with a process started under another PYTHONHASHSEED."""
    task = task_of(name)
    configs = configs_of(task)
    roles = {PRESETS[c].role for c in configs if c in PRESETS}
    if {"id", "ood"} <= roles:
        yield Result(True, f"ok   {task}: presets {', '.join(configs)}")
    else:  # the data can be right without them: a warning, not a failure (module docstring)
        yield Result(
            True,
            f"warn {task}: no ID/OOD presets: generate, show, export, load_dataset and train "
            "take the task's name, but reproduce, eval's defaults and the lm-eval tasks need "
            "them (declare them with attentionspan_datasets.presets.register_pair)",
            note=True,
        )
    for config in configs:
        try:
            resolve_config(config)
        except ValueError as error:
            yield Result(False, f"FAIL {config}: {error}")
            continue
        for check in CONFIG_CHECKS:
            yield from check(config, instances, seed)
    if other_process:
        yield from check_other_process(configs, seed)
    yield Result(True, f"note {task}: {UNCHECKED}; {MASK_LOOK.format(config=configs[0])}", True)


# What check_task cannot check, said on every run (the module docstring says why).
UNCHECKED = (
    "not checked: whether paper follows the published rule and minimal names only where "
    "each answer's value comes from (no oracle for them: they were checked for the row rules "
    "and for nesting inside sufficient)"
)
MASK_LOOK = "look at them: attentionspan show {config} --param mask=minimal"


def _run(
    check: str, config: str, what: str, rows: Iterable[tuple[str, list[str]]]
) -> Iterator[Result]:
    """The results of one check over (instance name, problems) pairs: each failing instance
    one line (the first MAX_SHOWN; the rest counted), or one `ok` line naming `what`."""
    failed = 0
    try:
        for instance, problems in rows:
            if problems:
                failed += 1
                if failed <= MAX_SHOWN:
                    count = len(problems) - 1
                    more = f" (and {count} more in this instance)" if count else ""
                    yield Result(False, f"FAIL {check} {instance}: {problems[0]}{more}")
    except Exception as error:  # the task's generator raised: the check cannot go on
        failed += 1
        reason = " ".join(f"{type(error).__name__}: {error}".split())
        yield Result(False, f"FAIL {check} {config}: generation raised {reason}")
    if failed > MAX_SHOWN:
        yield Result(False, f"FAIL {check} {config}: and {failed - MAX_SHOWN} more instances")
    if not failed:
        yield Result(True, f"ok   {check} {config}: {what}")


def check_contract(config: str, instances: int, seed: int) -> Iterator[Result]:
    rows = (
        (instance_name(x, seed, "paper"), contract_problems(x))
        for x in iter_instances(config, seed, stop=instances)
    )
    yield from _run("contract", config, f"{instances} instances", rows)


def check_oracle(config: str, instances: int, seed: int) -> Iterator[Result]:
    rows = (
        (instance_name(x, seed, "sufficient"), oracle_problems(x))
        for x in iter_instances(config, seed, stop=instances, mask="sufficient")
    )
    what = f"the sufficient mask's oracle recomputes every target character of {instances}"
    yield from _run("oracle", config, what + " instances", rows)


def check_nesting(config: str, instances: int, seed: int) -> Iterator[Result]:
    count = min(instances, NESTING_INSTANCES)
    streams = [iter_instances(config, seed, stop=count, mask=m) for m in _VARIANTS]
    rows = (
        (instance_name(s, seed, "minimal, paper and sufficient"), nesting_problems(m, p, s))
        for m, p, s in zip(*streams)
    )
    what = f"every variant's rows, minimal <= paper <= sufficient on {count}"
    yield from _run("nesting", config, what, rows)


_VARIANTS = ("minimal", "paper", "sufficient")


def check_determinism(config: str, instances: int, seed: int) -> Iterator[Result]:
    """An instance regenerated alone, in another order, equals the streamed one; no draw
    from Python's global generator."""
    count = min(instances, ACCESS_SAMPLE)
    state = random.getstate()

    def rows() -> Iterator[tuple[str, list[str]]]:
        streamed = list(iter_instances(config, seed, stop=count))
        for instance in reversed(streamed):
            alone = generate(config, seed, instance.index)
            again = generate(config, seed, instance.index)
            problems = []
            if alone.to_dict() != instance.to_dict():
                where = first_difference(instance.to_dict(), alone.to_dict(), "streamed", "alone")
                problems.append(f"(config, seed, index) does not fix the instance: {where}")
            elif again.to_dict() != alone.to_dict():
                where = first_difference(alone.to_dict(), again.to_dict(), "first", "second")
                problems.append(
                    f"(config, seed, index) does not fix the instance: generated twice, {where}"
                )
            yield instance_name(instance, seed, "paper"), problems
        if random.getstate() != state:
            yield config, ["generation draws from Python's global `random` generator"]

    yield from _run("determinism", config, f"{count} instances regenerated alone", rows())


def check_well_posed(config: str, instances: int, seed: int) -> Iterator[Result]:
    targets: dict[str, str] = {}

    def rows() -> Iterator[tuple[str, list[str]]]:
        for instance in iter_instances(config, seed, stop=instances):
            known = targets.setdefault(instance.prompt, instance.target)
            problems = []
            if known != instance.target:
                problems.append(
                    f"prompt {_cut(instance.prompt)} has two targets: {_cut(known)} and "
                    f"{_cut(instance.target)}"
                )
            yield instance_name(instance, seed, "paper"), problems

    yield from _run("one-target", config, f"one target per prompt over {instances}", rows())


def check_splits(config: str, instances: int, seed: int) -> Iterator[Result]:
    """Each row is in its split (by the prompt's hash), rows regenerated alone equal the
    streamed ones, and no prompt is in two splits."""
    sizes = {"train": instances, "validation": min(instances, SPLIT_ROWS)}
    sizes["test"] = sizes["validation"]
    owner: dict[str, str] = {}

    def rows() -> Iterator[tuple[str, list[str]]]:
        for split in SPLITS:
            streamed = []
            for row in iter_split(config, seed, split, stop=sizes[split]):
                problems = []
                if split_of(row.prompt) != split:
                    problems.append(f"row of {split} has a {split_of(row.prompt)} prompt")
                first = owner.setdefault(row.prompt, split)
                if first != split:
                    problems.append(f"prompt {_cut(row.prompt)} is in {first} and {split}")
                if len(streamed) < ACCESS_SAMPLE:
                    streamed.append(row)
                yield instance_name(row, seed, "paper", split), problems
            for row in streamed:
                alone = split_instance(config, seed, split, row.index)
                if alone.to_dict() != row.to_dict():
                    where = first_difference(row.to_dict(), alone.to_dict(), "streamed", "alone")
                    yield (
                        instance_name(row, seed, "paper", split),
                        [f"row regenerated alone differs from the streamed row: {where}"],
                    )

    shown = ", ".join(f"{size} {split}" for split, size in sizes.items())
    yield from _run("splits", config, f"disjoint, each row its split's ({shown} rows)", rows())


CONFIG_CHECKS: tuple[Callable[[str, int, int], Iterator[Result]], ...] = (
    check_contract,
    check_oracle,
    check_nesting,
    check_determinism,
    check_well_posed,
    check_splits,
)


def digest(configs: list[str], seed: int, count: int = DIGEST_INSTANCES) -> str:
    """SHA-256 of the first `count` instances of each config (their JSON)."""
    h = hashlib.sha256()
    for config in configs:
        for instance in iter_instances(config, seed, stop=count):
            h.update(json.dumps(instance.to_dict(), sort_keys=True).encode())
    return h.hexdigest()


def check_other_process(configs: list[str], seed: int) -> Iterator[Result]:
    """The same instances in a fresh process under another PYTHONHASHSEED: a generator that
    iterates a set of strings, or uses hash(), differs there."""
    code = (
        "import sys, json; from attentionspan_datasets.checks import digest; "
        "print(digest(json.loads(sys.argv[1]), int(sys.argv[2])))"
    )
    # The child sees this process's path, so it finds the same task (a plugin put on the
    # path by hand included).
    path = os.pathsep.join(p for p in sys.path if p)
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": path}
    label = f"{configs[0]}..{configs[-1]}" if len(configs) > 1 else configs[0]
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(configs), str(seed)],
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        last = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        yield Result(False, f"FAIL processes {label}: the other process failed: {last}")
        return
    if out.stdout.strip() != digest(configs, seed):
        yield Result(
            False,
            f"FAIL processes {label}: instances 0-{DIGEST_INSTANCES - 1} differ in a process "
            "with another PYTHONHASHSEED (a set iterated, or hash() used, in generate?)",
        )
        return
    yield Result(True, f"ok   processes {label}: the same instances under another hash seed")
