"""The checks of any task (attentionspan_datasets.checks): each rule on instances with known
faults, and whole tasks, one sound and one broken in known ways."""

from __future__ import annotations

import dataclasses
import random
import re

import pytest

from attentionspan_datasets import checks, generate, presets
from attentionspan_datasets.tasks import Instance, register_task
from attentionspan_datasets.tasks.base import TASKS
from attentionspan_datasets.tasks.string_reversal import ReversalConfig
from attentionspan_datasets.tasks.string_reversal import generate as reverse


def reversal(mask: str = "sufficient") -> Instance:
    return generate("reversal_ood", seed=0, index=1, mask=mask)


def test_a_sound_instance_has_no_problems():
    instance = reversal()
    assert checks.contract_problems(instance) == []
    assert checks.oracle_problems(instance) == []
    variants = [reversal(m) for m in ("minimal", "paper", "sufficient")]
    assert checks.nesting_problems(*variants) == []


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"prompt": "abc"}, "does not end with '='"),
        ({"target": "", "reference": []}, "empty target"),
        ({"reference": [[2], [1]]}, "2 reference rows for 3 target characters"),
        ({"reference": [[2], [1, 0], [0]]}, r"reference\[1\] is not sorted"),
        ({"reference": [[2], [1, 1], [0]]}, r"reference\[1\] is not sorted without duplicates"),
        # position len(prompt) + i is target[i] itself: not an earlier position
        ({"reference": [[2], [1], [6]]}, r"reference\[2\] points at \[6\].*0 to 5"),
        ({"reference": [[2], [1], [-1]]}, r"reference\[2\] points at \[-1\]"),
        ({"reference": [[2], [1], ["0"]]}, r"reference\[2\] is not a list of ints"),
        ({"params": {"length": "3"}}, r"params\['length'\] must be an int"),
        ({"params": {"length": 3, "x": {1, 2}}}, "do not serialise as JSON"),
    ],
)
def test_each_broken_rule_is_one_problem(change, needle):
    fields = {
        "task": "string_reversal",
        "prompt": "abc=",
        "target": "cba",
        "reference": [[2], [1], [0]],
        "params": {"length": 3},
        **change,
    }
    problems = checks.contract_problems(Instance(**fields))
    assert len(problems) == 1 and re.search(needle, problems[0]), problems


def test_the_oracle_check_names_each_character_it_misses():
    instance = Instance("string_reversal", "abc=", "cba", [[2], [0], [1]], {"length": 3})
    problems = checks.oracle_problems(instance)
    assert len(problems) == 2
    assert "target[1] = 'b' from reference [0]" in problems[0]
    hidden = Instance("string_reversal", "abc=", "cba", [[2], [], [0]], {"length": 3})
    assert "oracle gave None for target[1]" in checks.oracle_problems(hidden)[0]


def test_masks_that_do_not_nest_are_named():
    paper = Instance("string_reversal", "abc=", "cba", [[2], [1], [0]], {"length": 3})
    sufficient = dataclasses.replace(paper, reference=[[2], [0], [0]])
    problems = checks.nesting_problems(paper, paper, sufficient)
    assert problems == [
        "reference[1]: paper [1] is not inside sufficient [0]: paper has [1] that sufficient lacks"
    ]
    minimal = dataclasses.replace(paper, reference=[[0, 2], [1], [0]])
    problems = checks.nesting_problems(minimal, paper, paper)
    assert problems == [
        "reference[0]: minimal [0, 2] is not inside paper [2]: minimal has [0] that paper lacks"
    ]


@pytest.mark.parametrize(
    "variant, reference, needle",
    [
        ("minimal", [[2], [], [0]], r"minimal reference\[1\] names no position"),
        ("paper", [[2], [1], [6]], r"paper reference\[2\] points at \[6\], not an earlier"),
        ("minimal", [[2], [1]], "2 minimal reference rows for 3 target characters"),
        ("sufficient", [[2], [1, 0], [0]], r"sufficient reference\[1\] is not sorted"),
    ],
)
def test_every_variant_keeps_the_row_rules(variant, reference, needle):
    """Not only paper's rows (the contract check's): each variant's, named in the line."""
    sound = Instance("string_reversal", "abc=", "cba", [[2], [1], [0]], {"length": 3})
    variants = {v: sound for v in ("minimal", "paper", "sufficient")}
    variants[variant] = dataclasses.replace(sound, reference=reference)
    problems = checks.nesting_problems(*variants.values())
    assert len(problems) == 1 and re.search(needle, problems[0]), problems


def test_variants_that_change_the_text_show_where():
    paper = Instance("string_reversal", "x" * 70 + "abc=", "cba", [[2], [1], [0]], {"length": 3})
    other = dataclasses.replace(paper, prompt="x" * 70 + "abd=")
    (problem,) = checks.nesting_problems(paper, other, paper)
    assert "text differs from character 72: sufficient 'c=cba', paper 'd=cba'" in problem


@pytest.mark.parametrize(
    "left, right, says",
    [
        # the same text, another reference: the row, never the two equal texts
        (
            {"text": "ab=", "reference": [[0], [1]]},
            {"text": "ab=", "reference": [[0], [0]]},
            "reference[1] differs: streamed [1], alone [0]",
        ),
        (
            {"prompt": "q" * 100 + "A="},
            {"prompt": "q" * 100 + "B="},
            "prompt differs from character 100: streamed 'A=', alone 'B='",
        ),
        (
            {"params": {"length": 3, "draw": 7}},
            {"params": {"length": 3, "draw": 9}},
            "params differs: streamed {'length': 3, 'draw': 7}, alone {'length': 3, 'draw': 9}",
        ),
    ],
)
def test_a_difference_is_shown_where_it_is(left, right, says):
    assert checks.first_difference(left, right, "streamed", "alone").startswith(says)


def test_a_built_in_task_passes_every_check():
    results = list(checks.check_task("reversal", instances=60, other_process=False))
    assert all(r.ok for r in results), [r.line for r in results if not r.ok]
    lines = [r.line for r in results]
    assert "ok   string_reversal: presets reversal_id, reversal_ood" in lines
    for check in ("contract", "oracle", "nesting", "determinism", "one-target", "splits"):
        assert any(line.startswith(f"ok   {check} reversal_ood") for line in lines), check


@pytest.fixture
def broken_task():
    """A task registered for one test: references past the target character, an oracle
    that is wrong for odd lengths, draws from the global generator, no presets. Removed
    afterwards."""
    name = "broken_reversal_for_checks"

    @dataclasses.dataclass
    class BrokenConfig(ReversalConfig):
        pass

    def broken_generate(rng, config):
        instance = reverse(rng, config)
        random.random()  # the global generator: refused by the determinism check
        instance.task = name
        instance.reference[-1] = [len(instance.prompt) + len(instance.target) - 1]
        return instance

    def broken_oracle(visible, params, i):
        return "?" if params["length"] % 2 else visible[params["length"] - 1 - i]

    register_task(name, BrokenConfig, broken_generate, broken_oracle)
    yield name
    dict.__delitem__(TASKS, name)


def test_a_broken_task_fails_with_one_line_per_instance(broken_task):
    results = list(checks.check_task(broken_task, instances=40, other_process=False))
    failed = [r.line for r in results if not r.ok]
    # no presets: a warning (the data can be right without them), not a failure
    assert results[0].ok and results[0].note
    assert results[0].line.startswith(f"warn {broken_task}: no ID/OOD presets")
    assert "register_pair" in results[0].line
    contract = [line for line in failed if line.startswith("FAIL contract")]
    # every instance fails: MAX_SHOWN lines naming one each, then the count of the rest
    assert len(contract) == checks.MAX_SHOWN + 1
    assert contract[0].startswith(f"FAIL contract {broken_task}#0 (seed 1, mask paper): ")
    assert "not an earlier position" in contract[0]
    assert contract[-1] == f"FAIL contract {broken_task}: and 35 more instances"
    oracle = [line for line in failed if line.startswith("FAIL oracle")]
    assert oracle and all("mask sufficient" in line for line in oracle[:-1])
    assert any("global `random` generator" in line for line in failed)
    assert all("\n" not in line for line in failed)


@pytest.fixture
def drifting_task():
    """Its params draw from the global generator, its text does not: the determinism line
    must show the params that differ, not two equal texts."""
    name = "drifting_reversal_for_checks"

    @dataclasses.dataclass
    class DriftConfig(ReversalConfig):
        pass

    def drifting_generate(rng, config):
        instance = reverse(rng, config)
        instance.task = name
        instance.params["draw"] = random.randrange(10**9)
        return instance

    register_task(name, DriftConfig, drifting_generate, TASKS["string_reversal"].oracle)
    yield name
    dict.__delitem__(TASKS, name)


def test_a_determinism_failure_shows_what_differs(drifting_task):
    results = list(checks.check_task(drifting_task, instances=5, other_process=False))
    lines = [r.line for r in results if r.line.startswith("FAIL determinism")]
    assert lines, [r.line for r in results]
    first = lines[0]
    assert "does not fix the instance: params differs: streamed {" in first, first
    shown = re.findall(r"'draw': (\d+)", first)
    assert len(shown) == 2 and shown[0] != shown[1], first


@pytest.fixture
def same_wrong_variants():
    """paper and minimal wrong in the same way (the first target character's row points at
    the last prompt character, inside the right sufficient row): no generic check can see
    it, so the run must say what it did not check."""
    name = "same_wrong_for_checks"

    @dataclasses.dataclass
    class SameWrongConfig(ReversalConfig):
        pass

    def generate_it(rng, config):
        instance = reverse(rng, dataclasses.replace(config, mask="sufficient"))
        instance.task = name
        if config.mask != "sufficient":
            instance.reference = [[len(instance.prompt) - 2] for _ in instance.target]
        else:
            last = len(instance.prompt) - 2
            instance.reference = [sorted({*row, last}) for row in instance.reference]
        return instance

    register_task(name, SameWrongConfig, generate_it, TASKS["string_reversal"].oracle)
    yield name
    dict.__delitem__(TASKS, name)


def test_what_cannot_be_checked_is_said(same_wrong_variants):
    results = list(checks.check_task(same_wrong_variants, instances=20, other_process=False))
    assert all(r.ok for r in results), [r.line for r in results if not r.ok]
    notes = [r.line for r in results if r.note]
    assert notes[-1].startswith(f"note {same_wrong_variants}: not checked: whether paper ")
    assert "no oracle for them" in notes[-1]
    assert f"attentionspan show {same_wrong_variants} --param mask=minimal" in notes[-1]


def test_task_of_accepts_task_short_and_preset_names():
    assert checks.task_of("reversal") == checks.task_of("reversal_ood") == "string_reversal"
    assert checks.task_of("string_reversal") == "string_reversal"
    with pytest.raises(ValueError, match="unknown config 'reversl'.*did you mean 'reversal'"):
        checks.task_of("reversl")
    assert checks.configs_of("string_reversal") == [p.name for p in presets.pair("reversal")]
