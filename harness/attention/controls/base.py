"""What a control is: a value that says where it runs (at the grid's chosen setting, at every
dose of the ladder, or both), the settings it makes there, and, on the ladder, what the dose
curve, the dose table, the dose figure and the calibrated verdict read from it.

Nothing here imports torch or a report library: the figure and the table are described as
data (`Series`, `Column`) that `harness.report` draws and writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

GRID, LADDER = "grid", "ladder"  # where a control runs (`Control.runs_at`)
Reader = Callable[[Mapping[str, Any]], Any]  # a value from one dose entry of the curve


def int_tuple(values) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


@dataclass(frozen=True)
class Option:
    """One option a control declares: its name (the keyword the sweep or the ladder takes,
    and the attribute the control reads from `Options`), its default, and how a given value
    is made one (`convert`, also applied to the default)."""

    name: str
    default: Any
    convert: Callable[[Any], Any] = int_tuple


class Options:
    """What the sweep (`ControlOptions`) or the ladder (`LadderOptions`) passes its controls:
    one value per option the controls declare (`Control.options`, `AtDose.options`), read as
    an attribute (`options.seeds`). Controls that declare the same name share one value, and
    must agree on its default; a name no control declares is refused, so a misspelt option
    never goes unread."""

    def __init__(self, declared: Iterable[Option], **values: Any) -> None:
        by_name: dict[str, Option] = {}
        for option in declared:
            known = by_name.setdefault(option.name, option)
            if known.default != option.default:
                raise ValueError(
                    f"two controls declare option {option.name!r} with different defaults: "
                    f"{known.default!r} and {option.default!r}"
                )
        unknown = sorted(set(values) - set(by_name))
        if unknown:
            raise ValueError(f"no control declares the option(s) {unknown}: {sorted(by_name)}")
        self._values = {
            name: option.convert(values.get(name, option.default))
            for name, option in by_name.items()
        }

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(f"no control declares the option {name!r}") from None

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._values == self._values

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"{type(self).__name__}({fields})"


@dataclass
class LadderContext:
    """What a ladder control's readers get: the OOD instances, the baseline's and every
    setting's teacher-forced records (by name), the ranking's shift, the metric, and the
    bootstrap options; `cache` keeps what a control computes once per curve."""

    instances: Sequence[Any]
    baseline: Sequence[Mapping[str, Any]]
    records: Mapping[str, Sequence[Mapping[str, Any]]]
    shift: int
    metric: str
    stats: dict[str, Any]
    cache: dict[Any, Any] = field(default_factory=dict)

    def paired(self, treated: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The paired gain of the metric over the baseline, per instance, with its bootstrap
        interval and both means beside it."""
        return paired_means(self.baseline, treated, self.metric, **self.stats)


def paired_means(baseline, treated, metric: str, **stats) -> dict[str, Any]:
    """paired_gain of `metric` over instances, with both means beside it."""
    from harness.foundation.stats import pair_records, paired_gain

    pairs = pair_records(baseline, treated)
    before = [float(a[metric]) for a, _ in pairs]
    after = [float(b[metric]) for _, b in pairs]
    return {
        **paired_gain(before, after, **stats),
        "baseline": mean_or_none(before),
        "treated": mean_or_none(after),
    }


def mean_or_none(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class Column:
    """One column of the dose table: its heading, and its cell from one dose entry."""

    heading: str
    cell: Reader


@dataclass(frozen=True)
class Series:
    """One line of the dose figure: its panel ("gain", the top one, or "rate"), its legend
    entry, its value at one dose entry (None: no point), an optional band (low, high), its
    marker and colour, and its opacity (`alpha`: below 1 for a line drawn lighter than the
    control's main ones, such as the pointer's nearer pushes)."""

    panel: str
    label: str
    value: Reader
    marker: str
    colour: str
    band: tuple[Reader, Reader] | None = None
    alpha: float = 1.0


@dataclass(frozen=True)
class Reading:
    """One number the calibrated verdict reads from a control: its key in the verdict's
    numbers, the dose it is read at ("chosen": the dose chosen on validation, on the test
    curve; "top": the ladder's top dose), and how it is read from that dose's entry (None
    when there is no such dose)."""

    name: str
    at: str
    read: Callable[[Mapping[str, Any] | None], Any]


@dataclass(frozen=True)
class AtDose:
    """How a control runs at every dose of the ladder.

    key: its field in each dose entry of the curve; make(top, options): its settings beside
    the top-n push `top` at one dose; read(context, top, settings): that field's value from
    its settings' records; columns(curve): its dose-table columns; series(curve, entries):
    its lines in the dose figure for one set of entries (one threshold); numbers: what the
    verdict reads from it; curve_fields and baseline_fields (context, every setting it
    made): fields it adds to the curve and to the curve's baseline; options: what it reads
    from the ladder's `Options` (`make(top, options)`), with their defaults."""

    key: str
    make: Callable[[Any, Options], list[Any]]
    read: Callable[[LadderContext, Any, list[Any]], Any]
    columns: Callable[[Mapping[str, Any]], list[Column]]
    series: Callable[[Mapping[str, Any], Sequence[Mapping[str, Any]]], list[Series]]
    numbers: tuple[Reading, ...] = ()
    curve_fields: Callable[[LadderContext, list[Any]], dict[str, Any]] | None = None
    baseline_fields: Callable[[LadderContext, list[Any]], dict[str, Any]] | None = None
    options: tuple[Option, ...] = ()


@dataclass(frozen=True)
class Control:
    """One control. `role` is what its settings carry (`Setting.role`) and reports read to
    find them (never the format of a name). At the grid's chosen setting (`make` given):
    `make(chosen, options)` returns its settings of a chosen (non-baseline) setting, and
    `legend` is its entry in a report's list of controls, and `options` what it reads from
    the sweep's `Options`, with their defaults. At every dose of the ladder (`ladder`
    given): `AtDose`."""

    role: str
    make: Callable[[Any, Options], list[Any]] | None
    legend: str = ""
    ladder: AtDose | None = None
    options: tuple[Option, ...] = ()

    def __post_init__(self) -> None:
        if self.make is None and self.ladder is None:
            raise ValueError(f"control {self.role!r} must run somewhere: give make or ladder")
        if self.make is not None and not self.legend:
            raise ValueError(f"control {self.role!r} runs at the grid: give its legend")

    @property
    def runs_at(self) -> tuple[str, ...]:
        return tuple(w for w, part in ((GRID, self.make), (LADDER, self.ladder)) if part)
