"""The task contract: an Instance, a self-validating config base class, and the registry.

Every task module defines a `@dataclass` config deriving from `TaskConfig`, a pure
`generate(rng, config) -> Instance`, an `oracle(visible, params, i) -> str` that recomputes
`target[i]` from the characters a `sufficient` mask references, and registers all three
with `register_task`. Nothing here knows about models, tokenizers, torch or datasets.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import random
import sys
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from attentionspan_datasets.registry import LazyRegistry

# minimal <= paper <= sufficient, row by row (docs/tasks.md, "The contract"). A config's
# `mask` field has this type; TaskConfig checks every Literal field against its values.
MaskVariant = Literal["paper", "sufficient", "minimal"]
MASK_VARIANTS: tuple[str, ...] = typing.get_args(MaskVariant)
MAX_CHARSET = 10_000  # characters in a charset or alphabet field


@dataclass
class Instance:
    """One row of the data contract (see docs/tasks.md).

    `reference[i]` lists the positions in `prompt + target` that predicting `target[i]`
    must attend to; positions are character indices, one character per token.
    """

    task: str
    prompt: str
    target: str
    reference: list[list[int]]
    params: dict[str, Any] = field(default_factory=dict)
    config: str = ""
    index: int = -1

    @property
    def text(self) -> str:
        return self.prompt + self.target

    def to_dict(self) -> dict[str, Any]:
        """A plain row with its own copies, columns in the data contract's order."""
        return {
            "task": self.task,
            "config": self.config,
            "index": self.index,
            "prompt": self.prompt,
            "target": self.target,
            "reference": [list(row) for row in self.reference],
            "params": json.loads(json.dumps(self.params)),
        }


def _short(value: Any) -> str:
    """repr(value), cut short: an error message must stay one readable line."""
    if isinstance(value, int) and value.bit_length() > 200:
        # repr of an int over 4300 digits raises; the size is what the reader needs.
        return f"(an integer of about {int(value.bit_length() * 0.30103) + 1} digits)"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", str(annotation))


@functools.cache
def _field_types(cls: type) -> tuple[tuple[str, type, tuple], ...]:
    """(name, type, Literal choices) of each field of a config class, resolved once per class:
    `typing.get_type_hints` evaluates the string annotations anew at every call, which made
    it most of the cost of `split_instance(name, ...)` (it resolves the name at each call)."""
    hints = typing.get_type_hints(cls)
    fields = []
    for f in dataclasses.fields(cls):
        expected = hints[f.name]
        # A Literal field (`mask`): a value of the type of its values, then one of them.
        choices = typing.get_args(expected) if typing.get_origin(expected) is Literal else ()
        fields.append((f.name, type(choices[0]) if choices else expected, choices))
    return tuple(fields)


@dataclass
class TaskConfig:
    """Base class of every task config: type checks, range checks, conversion from text.

    Subclasses add fields and override `check()` to validate ranges; every error is a
    `ValueError` that names the field and what is allowed.
    """

    mask: MaskVariant = "paper"

    task_name: ClassVar[str] = ""
    # (low, high) of int fields, checked before `check()`. Every size a task draws has a
    # cap here, so that no value makes generation hang or exhaust memory (docs/tasks.md).
    limits: ClassVar[dict[str, tuple[int, int]]] = {}
    # The ranges an instance's sizes are drawn from, by name: {"digits": ("min_digits",
    # "max_digits")}, low and high field. Declared, as reasoning-gym's curricula declare
    # their range attributes, not guessed from field names: what a sweep or a curriculum
    # moves, and what `largest()` raises. tests/test_registry.py checks every task's.
    ranges: ClassVar[dict[str, tuple[str, str]]] = {}

    def __post_init__(self) -> None:
        self._check_types()
        for name, (low, high) in self.limits.items():
            self.check_range(name, low, high)
        self.check()

    # --- subclasses override -------------------------------------------------------
    def check(self) -> None:
        """Validate value ranges and consistency; raise ValueError naming the field."""

    def length_bucket(self, params: dict[str, Any]) -> int:
        """The length an instance is bucketed by in per-length metrics (see docs/tasks.md)."""
        return int(params["length"])

    # --- helpers for subclasses ----------------------------------------------------
    def fail(self, name: str, allowed: str) -> None:
        value = getattr(self, name)
        raise ValueError(
            f"{self.task_name}: invalid value {_short(value)} for field '{name}': {allowed}"
        )

    def check_range(self, name: str, low: int, high: int | None = None) -> None:
        value = getattr(self, name)
        if value < low or (high is not None and value > high):
            allowed = f"allowed: {low} <= {name}" + (f" <= {high}" if high is not None else "")
            self.fail(name, allowed)

    def check_min_max(self, low_name: str, high_name: str) -> None:
        low, high = getattr(self, low_name), getattr(self, high_name)
        if low > high:
            raise ValueError(
                f"{self.task_name}: '{low_name}' ({low}) must not exceed '{high_name}' ({high})"
            )

    def check_charset(self, name: str, minimum: int, reserved: str = "") -> None:
        """A charset: distinct, printable, non-whitespace characters, none reserved."""
        chars = getattr(self, name)
        if len(set(chars)) != len(chars):
            self.fail(name, "characters must be distinct")
        if any(c.isspace() for c in chars):
            self.fail(name, "whitespace characters are not allowed")
        # A control or invisible character (U+0001, ESC, a zero-width space) would reach a
        # terminal, a JSON line and a tokenizer as something other than one visible symbol.
        hidden = sorted({f"U+{ord(c):04X}" for c in chars if not c.isprintable()})
        if hidden:
            self.fail(name, f"non-printable characters are not allowed: {', '.join(hidden)}")
        bad = sorted(set(chars) & set(reserved))
        if bad:
            self.fail(name, f"must not contain the reserved characters {''.join(bad)!r}")
        if len(chars) < minimum:
            self.fail(name, f"needs at least {minimum} distinct characters")
        if len(chars) > MAX_CHARSET:
            self.fail(name, f"at most {MAX_CHARSET} characters, got {len(chars)}")

    def _check_types(self) -> None:
        for name, expected, choices in _field_types(type(self)):
            value = getattr(self, name)
            # bool is an int subclass; a flag and a count must not be confused.
            ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
            if not ok:
                raise ValueError(
                    f"{self.task_name}: field '{name}' must be of type "
                    f"{_type_name(expected)}, got {type(value).__name__} {_short(value)}"
                )
            if choices and value not in choices:
                self.fail(name, f"allowed values: {', '.join(map(repr, choices))}")

    # --- construction from user input ---------------------------------------------
    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> TaskConfig:
        """Build a config, refusing unknown keys with the list of allowed ones."""
        allowed = cls.field_names()
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise ValueError(
                f"{cls.task_name}: unknown parameter(s) {', '.join(map(repr, unknown))}; "
                f"allowed: {', '.join(allowed)}"
            )
        return cls(**params)

    @classmethod
    def parse_value(cls, name: str, text: str) -> Any:
        """Convert a command-line string to the field's type (`max_length=12`)."""
        hints = typing.get_type_hints(cls)
        if name not in hints or name not in cls.field_names():
            raise ValueError(
                f"{cls.task_name}: unknown parameter {name!r}; "
                f"allowed: {', '.join(cls.field_names())}"
            )
        expected = hints[name]
        if expected is bool:
            lowered = text.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError(f"{cls.task_name}: field '{name}' must be true or false, got {text!r}")
        if expected is int:
            try:
                return int(text)
            except ValueError:
                digits = text.strip().lstrip("+-")
                if digits.isdigit():
                    # A number past Python's int-from-text limit (4300 digits) is past every
                    # cap: say the cap, not "must be an integer".
                    if name in cls.limits:
                        low, high = cls.limits[name]
                        raise ValueError(
                            f"{cls.task_name}: invalid value (a {len(digits)}-digit number) "
                            f"for field '{name}': allowed: {low} <= {name} <= {high}"
                        ) from None
                    # No declared limit: a stand-in as large, refused by the config's check.
                    return -(10**4300) if text.strip().startswith("-") else 10**4300
                raise ValueError(
                    f"{cls.task_name}: field '{name}' must be an integer, got {text!r}"
                ) from None
        return text

    def to_params(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def largest(self) -> TaskConfig:
        """This config with every range at its top (`min_digits` raised to `max_digits`): the
        largest sizes it allows, same label. ValueError if the task forbids that."""
        tops = {low: getattr(self, high) for low, high in self.ranges.values()}
        return type(self).from_params({**self.to_params(), **tops}).labelled(self.label)

    # --- the label: what the config is called -------------------------------------
    # Not a field: the name says where the config came from, it is no parameter of the task,
    # so it stays out of to_params(), equality and the builder's cache keys.
    @property
    def label(self) -> str:
        """The name this config was resolved from (`addition_ood`, `addition`), else the
        task's registry name: what its instances carry in their `config` column.
        `resolve_config(config, **overrides)` keeps it; `dataclasses.replace` does not."""
        return self.__dict__.get("_label") or self.task_name

    def labelled(self, label: str) -> TaskConfig:
        """A copy of this config (already valid: not checked again) that carries `label`."""
        labelled = copy.copy(self)
        labelled.__dict__["_label"] = label
        return labelled


REJECTED = 255  # a byte value `uniform_bytes` maps to no index


@functools.lru_cache(maxsize=256)
def _byte_table(m: int) -> bytes:
    # Bytes below the largest multiple of m map to b % m (uniform); the rest are rejected.
    limit = 256 - 256 % m
    return bytes(b % m if b < limit else REJECTED for b in range(256))


def uniform_bytes(rng: random.Random, m: int, count: int) -> bytes:
    """`count` indices drawn uniformly from range(m) (1 <= m <= 255), as one bytes object.

    A few C calls (random bytes, a translation table, rejection of the bytes past the last
    multiple of m) instead of one `rng.choices` step per index: a program or a string of
    100 symbols costs about a microsecond instead of ten."""
    if not 1 <= m < REJECTED:
        raise ValueError(f"uniform_bytes draws from 1 to {REJECTED - 1} values, not {m}")
    table, reject = _byte_table(m), bytes([REJECTED])
    drawn = rng.randbytes(count).translate(table).replace(reject, b"")
    while len(drawn) < count:  # only when 256 is not a multiple of m
        drawn += rng.randbytes(count - len(drawn)).translate(table).replace(reject, b"")
    return drawn


GenerateFn = Callable[[random.Random, Any], Instance]
OracleFn = Callable[[list, dict, int], str]


@dataclass(frozen=True)
class Task:
    name: str
    config_class: type[TaskConfig]
    generate: GenerateFn
    oracle: OracleFn
    description: str
    # True when `reference` is a function of the config, `params` and the lengths of prompt
    # and target alone (the layout): writers may then serialise it once per layout
    # (rendering.JsonLines).
    layout_masks: bool = False
    # The one-line instruction addressed to a model (instructions.instruction_for); None:
    # `description`.
    instruction: str | None = None
    # The harness's recipes for the task, plain data: "quick" (`reproduce --quick`) and
    # "pretrained" (`reproduce --pretrained`), each the options of a training run ({"max_steps":
    # 2000, "lr": 1e-3, "scratch": {"num_layers": 2}}) over the general ones; "quick_ood", the
    # parameters over the OOD preset that --quick and --pretrained analyse ({"max_length": 20}).
    recipes: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))


# name -> Task. Plugins (attentionspan_datasets.plugins) are loaded before its first read.
TASKS: dict[str, Task] = LazyRegistry()
RECIPE_KINDS = ("quick", "pretrained", "quick_ood")


def register_task(
    name: str,
    config_class: type,
    generate: GenerateFn,
    oracle: OracleFn,
    layout_masks: bool = False,
    *,
    instruction: str | None = None,
    recipes: dict[str, dict[str, Any]] | None = None,
) -> Task:
    """Add a task to the registry; refuses duplicates and configs that are not dataclasses.

    `instruction` is the line a model is told (default: the module docstring's first line);
    `recipes` the training options of `reproduce --quick` / `--pretrained` for this task
    (default: the harness's general recipe) and `quick_ood`, their OOD preset's overrides
    (`Task.recipes`). The built-in tasks and those of other packages declare them alike,
    here, in the task's own file (docs/own_task.md)."""
    if dict.__contains__(TASKS, name):  # no plugin loading from inside a registration
        raise ValueError(f"task {name!r} is already registered")
    if not (
        isinstance(config_class, type)
        and dataclasses.is_dataclass(config_class)
        and issubclass(config_class, TaskConfig)
    ):
        raise TypeError(f"config of task {name!r} must be a TaskConfig dataclass")
    owner = next((t.name for t in dict.values(TASKS) if t.config_class is config_class), None)
    if owner is not None:  # the class names its task (`task_name`): one class, one task
        raise ValueError(
            f"task {name!r}: {config_class.__name__} is already the config of task "
            f"{owner!r}; give each task a config class of its own (a subclass will do)"
        )
    if not callable(generate) or not callable(oracle):
        raise TypeError(f"task {name!r}: 'generate' and 'oracle' must be functions")
    if instruction is not None and (
        not isinstance(instruction, str) or not instruction.strip() or "\n" in instruction
    ):
        raise ValueError(f"task {name!r}: 'instruction' must be one non-empty line of text")
    recipes = dict(recipes or {})
    for kind, recipe in recipes.items():
        if kind not in RECIPE_KINDS or not isinstance(recipe, dict):
            raise ValueError(
                f"task {name!r}: 'recipes' maps {' or '.join(map(repr, RECIPE_KINDS))} to a "
                f"dict of training options, got {kind!r}: {_short(recipe)}"
            )
    config_class.task_name = name
    doc = sys.modules[generate.__module__].__doc__ or ""
    summary = doc.strip().splitlines()[0] if doc else ""
    frozen = MappingProxyType({kind: copy.deepcopy(r) for kind, r in recipes.items()})
    task = Task(name, config_class, generate, oracle, summary, layout_masks, instruction, frozen)
    TASKS[name] = task
    return task


def randbelow(rng: random.Random, n: int) -> int:
    """`rng.randrange(n)`, the same number, without randrange's and randint's Python-level
    argument checks (three calls per draw: a fifth of a multiplication instance)."""
    k = n.bit_length()
    r = rng.getrandbits(k)
    while r >= n:
        r = rng.getrandbits(k)
    return r


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; allowed: {', '.join(sorted(TASKS))}")
    return TASKS[name]


def visible_text(instance: Instance, row: int) -> list[str | None]:
    """`prompt + target` with every character not referenced by `reference[row]` hidden.

    This is what an oracle sees: it must recompute `target[row]` from it alone.
    """
    shown = set(instance.reference[row])
    return [c if i in shown else None for i, c in enumerate(instance.text)]
