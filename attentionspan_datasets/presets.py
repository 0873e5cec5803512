"""The preset catalogue: every named config, its task, its parameters and its role.

    from attentionspan_datasets import presets
    presets.get("addition_ood")             # Preset(name='addition_ood', task='long_addition', ...)
    presets.get("addition_ood").role        # 'ood'
    presets.get("addition_ood").twin.name   # 'addition_id'
    presets.pair("reversal")                # (reversal_id, reversal_ood) as Presets
    presets.SHORT_NAMES["ffml"]             # 'flip_flop'

A preset is (task, parameters) under a name. `<task>_id` and `<task>_ood` are the paper's
Appendix F pairs (role "id" / "ood"); the retrieval tasks' `t<k>_len<n>` have no role. The
names are built here from (short name, role) and never taken apart again: code that needs a
preset's task, role or twin asks the catalogue. The bare task names (`addition`,
`long_addition`) are not presets: they take the task's defaults (generation.resolve_config).

A task of another package declares its presets with `register_pair` (and `register_preset`
for presets without a role), after its `register_task` (docs/own_task.md):

    register_pair("rotation", "string_rotation", {"max_length": 8}, {"min_length": 9, ...})
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from attentionspan_datasets.registry import LazyRegistry

Role = Literal["id", "ood"]
ROLES: tuple[str, ...] = get_args(Role)

# The user writes `addition`, `reversal`, `ffml`; the registry names say what the task does.
PAPER_TASKS = {
    "reversal": "string_reversal",
    "addition": "long_addition",
    "multiplication": "long_multiplication",
    "ffml": "flip_flop",
    "value_assignment": "value_assignment",
    "successor": "successor",
}
# The discrete-retrieval tasks under the paper's names (Sorodoc, Boleda and Baroni 2021, T1-T7).
RETRIEVAL_TASKS = {
    "t1": "one_feature_detection",
    "t2": "two_feature_detection",
    "t3": "set_member_detection",
    "t4": "contextual_two_feature_detection",
    "t5": "contextual_set_member_detection",
    "t6": "ordered_feature_detection",
    "t7": "contextual_ordered_set_member_detection",
}
# short name -> registry name; plugins (attentionspan_datasets.plugins) add theirs at its first
# read, as they do to PRESETS and PAIRS
SHORT_NAMES: dict[str, str] = LazyRegistry({**PAPER_TASKS, **RETRIEVAL_TASKS})
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")  # of new names (plugins)
RETRIEVAL_LENGTHS = (5, 10, 15, 20, 25, 30)


@dataclass(frozen=True)
class Preset:
    """One named config: `task` (a registry name) with `params` on top of its defaults."""

    name: str
    short: str  # the task's short name, the stem of `name` (`addition` for `addition_ood`)
    task: str
    params: MappingProxyType = field(hash=False)  # read-only: one catalogue for everyone
    role: Role | None = None  # "id" / "ood" for a pair's presets; None for `t<k>_len<n>`

    @property
    def twin(self) -> Preset:
        """The other preset of this one's ID/OOD pair (`addition_id` <-> `addition_ood`)."""
        if self.role is None:
            raise ValueError(f"preset {self.name!r} has no ID/OOD twin (it is neither ID nor OOD)")
        id_preset, ood_preset = PAIRS[self.short]
        return ood_preset if self.role == "id" else id_preset

    def __reduce__(self) -> tuple:
        # By name (a mappingproxy cannot be pickled): a copy or an unpickled preset is the
        # catalogue's own.
        return get, (self.name,)


PRESETS: dict[str, Preset] = LazyRegistry()
PAIRS: dict[str, tuple[Preset, Preset]] = LazyRegistry()  # short -> (ID preset, OOD preset)


def _add(short: str, suffix: str, params: dict[str, Any], role: Role | None = None) -> None:
    name = f"{short}_{suffix}"
    PRESETS[name] = Preset(name, short, SHORT_NAMES[short], MappingProxyType(params), role)


def _add_pair(short: str, id_params: dict[str, Any], ood_params: dict[str, Any]) -> None:
    _add(short, "id", id_params, "id")
    _add(short, "ood", ood_params, "ood")
    PAIRS[short] = (PRESETS[f"{short}_id"], PRESETS[f"{short}_ood"])


# F.4: 1-10 characters in distribution, 11-50 out; a charset of at least 50 characters.
_add_pair("reversal", {"min_length": 1, "max_length": 10}, {"min_length": 11, "max_length": 50})
# F.1: two operands of 1-4 digits in distribution, 5-10 digits out.
_add_pair(
    "addition",
    {"num_operands": 2, "min_digits": 1, "max_digits": 4},
    {"num_operands": 2, "min_digits": 5, "max_digits": 10},
)
# F.3: each operand 1-3 digits in distribution, 4-6 digits out.
_add_pair("multiplication", {"min_digits": 1, "max_digits": 3}, {"min_digits": 4, "max_digits": 6})
# F.2: flip command on, two registers, 10 instructions in distribution, 11-100 out.
_add_pair(
    "ffml",
    {"num_registers": 2, "min_instructions": 10, "max_instructions": 10, "use_flip": True},
    {"num_registers": 2, "min_instructions": 11, "max_instructions": 100, "use_flip": True},
)
# F.6: a table of 5 pairs and strings of 5 symbols in distribution; 10-50 and 10-20 out.
_add_pair(
    "value_assignment",
    {"min_table_size": 5, "max_table_size": 5, "min_length": 5, "max_length": 5},
    {"min_table_size": 10, "max_table_size": 50, "min_length": 10, "max_length": 20},
)
# F.5: start 1-90 and 2-4 numbers in distribution; start 100-900 and 5-6 numbers out.
_add_pair(
    "successor",
    {"min_start": 1, "max_start": 90, "min_count": 2, "max_count": 4},
    {"min_start": 100, "max_start": 900, "min_count": 5, "max_count": 6},
)

# The discrete-retrieval tasks (Sorodoc, Boleda and Baroni 2021, Section 3.2): for each of
# T1-T7, `t<k>_len<n>` with n vectors for the paper's lengths 5-30, and an ID/OOD pair
# (train on 10 vectors, test on 20 and 30). The paper's split sizes (100k / 10k / 10k) are
# builder arguments: load_dataset("attentionspan", "t6_len10", num_train=100_000,
# num_validation=10_000, num_test=10_000).
for _short in RETRIEVAL_TASKS:
    for _n in RETRIEVAL_LENGTHS:
        _add(_short, f"len{_n}", {"min_length": _n, "max_length": _n})
    _add_pair(
        _short,
        {"min_length": 10, "max_length": 10},
        {"min_length": 20, "max_length": 30, "length_step": 10},
    )


def did_you_mean(name: Any, allowed: Iterable[str]) -> str:
    """` (did you mean 'addition_ood'?)` for a misspelt `name`: the closest of `allowed`
    (difflib's ratio, case ignored; ties within 0.05 of the best shown together, at most
    three), or "" when none is close. The unknown-name errors put it before their list of
    100 allowed names, where it is read."""
    if not isinstance(name, str) or not name:
        return ""
    by_folded = {}
    for candidate in allowed:
        by_folded.setdefault(candidate.lower(), candidate)
    folded = name.lower()
    close = difflib.get_close_matches(folded, list(by_folded), n=3, cutoff=0.6)
    if not close:
        return ""
    best = difflib.SequenceMatcher(None, folded, close[0]).ratio()
    close = [c for c in close if difflib.SequenceMatcher(None, folded, c).ratio() >= best - 0.05]
    shown = [repr(by_folded[c]) for c in close]
    listed = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
    return f" (did you mean {listed}?)"


def get(name: str) -> Preset:
    """The preset called `name`; ValueError listing the presets for any other name."""
    if name not in PRESETS:
        raise ValueError(
            f"unknown preset {name!r}{did_you_mean(name, PRESETS)}; allowed: {', '.join(PRESETS)}"
        )
    return PRESETS[name]


def pair(name: str) -> tuple[Preset, Preset]:
    """(ID preset, OOD preset) of a task, named by its short name (`reversal`), its registry
    name (`string_reversal`) or either preset of the pair (`reversal_id`, `reversal_ood`)."""
    preset = PRESETS.get(name)
    if preset is not None and preset.role is not None:
        return PAIRS[preset.short]
    short = name if name in PAIRS else _SHORT_OF_TASK.get(name)
    if short not in PAIRS:
        # A preset without a role (`t6_len10`) is spelt right: no suggestion for it.
        accepted = [*PAIRS, *_SHORT_OF_TASK, *(n for n, p in PRESETS.items() if p.role)]
        hint = "" if name in PRESETS else did_you_mean(name, accepted)
        raise ValueError(
            f"config {name!r} has no ID/OOD presets{hint}; allowed: {', '.join(sorted(PAIRS))}"
        )
    return PAIRS[short]


_SHORT_OF_TASK = {task: short for short, task in SHORT_NAMES.items()}


def register_pair(
    short: str, task: str, id_params: dict[str, Any], ood_params: dict[str, Any]
) -> tuple[Preset, Preset]:
    """Declare the ID/OOD presets of a registered task: `<short>_id` and `<short>_ood`, each
    the task's defaults with these parameters on top. `short` becomes a name of the task
    (`attentionspan generate <short>`, `reproduce --tasks <short>`). Refused (ValueError):
    a name already taken, an unknown task, parameters the task's config refuses."""
    check_new_name("short name", short, task)
    for suffix, params in (("id", id_params), ("ood", ood_params)):
        _check_preset(f"{short}_{suffix}", task, params)
    SHORT_NAMES[short] = task
    _SHORT_OF_TASK.setdefault(task, short)
    _add_pair(short, dict(id_params), dict(ood_params))
    return PAIRS[short]


def register_preset(name: str, task: str, params: dict[str, Any]) -> Preset:
    """Declare a preset without an ID/OOD role (as `t6_len10`): `task` with `params`."""
    _check_preset(name, task, params)
    short = _SHORT_OF_TASK.get(task, task)
    PRESETS[name] = Preset(name, short, task, MappingProxyType(dict(params)), None)
    return PRESETS[name]


def check_new_name(kind: str, name: Any, task: str | None = None) -> None:
    """ValueError unless `name` is free to be a new task, short or preset name: a-z, 0-9
    and '_' (it names files, lm-eval tasks and dataset configs), and no task, short name or
    preset uses it already (`task` may share its own name with its short name)."""
    from attentionspan_datasets.tasks.base import TASKS

    if not isinstance(name, str) or not name or not set(name) <= NAME_CHARS:
        raise ValueError(f"{kind} {name!r} must be a non-empty string of a-z, 0-9 and '_'")
    # dict's own methods: a registration reads no registry through the plugin loader
    if dict.__contains__(TASKS, name) and name != task:
        raise ValueError(f"{kind} {name!r} is taken: a task is called so")
    if dict.__contains__(SHORT_NAMES, name):
        raise ValueError(
            f"{kind} {name!r} is taken: the short name of task "
            f"{dict.__getitem__(SHORT_NAMES, name)!r}"
        )
    if dict.__contains__(PRESETS, name):
        raise ValueError(f"{kind} {name!r} is taken: a preset is called so")


def _check_preset(name: str, task: str, params: Any) -> None:
    from attentionspan_datasets.tasks.base import TASKS

    check_new_name("preset name", name)
    if not isinstance(task, str) or not dict.__contains__(TASKS, task):
        raise ValueError(f"preset {name!r}: task {task!r} is not registered (register it first)")
    if not isinstance(params, dict):
        raise ValueError(f"preset {name!r}: parameters must be a dict, got {type(params).__name__}")
    try:
        dict.__getitem__(TASKS, task).config_class.from_params(params)
    except (TypeError, ValueError) as error:
        raise ValueError(f"preset {name!r}: {error}") from None
