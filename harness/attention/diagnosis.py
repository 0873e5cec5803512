"""Where the model looks when it errs: the lookup heads' own attention on every wrong answer
token, with no intervention at all, each reading beside its null (the same reading on the
rows the model gets right).

    from harness.attention.diagnosis import where_errors_look
    found = where_errors_look(scorer, instances, records, heads=ranking.top(4), shift=0,
                              id_rows=(id_instances, id_records),
                              compare={"top-1": ranking.top(1)})
    found["shares"]      # {"on_reference": .., "diluted": .., "misdirected": .., ...}
    found["null"]        # the same classes on the rows the model gets right (ID; OOD)
    found["basis"]       # "first wrong row of each instance"
    found["all_rows"]    # the same over every wrong row, for the reader
    found["head_sets"]   # the diagnosis with other head sets, and whether its kind changes
    found["per_instance"]  # each instance's kind, wrong, over-long; the null per ID instance

A push at the reference gains on a model whose failure is elsewhere too (a push supplies the
position), so the gain alone cannot say where the failure is. This reads it from the model's
own attention instead, as it wrote its answer:
- the answer the model generated (`records[k]["prediction"]`) is teacher-forced after its
  prompt, which reproduces the generation's attention exactly (each row sees only the tokens
  before it, the model's own);
- a wrong token is a wrong character, or the end of an answer that stops short (the model
  wrote its end-of-sequence where a character was due);
- the verdict reads the *first* wrong row of each instance (BASIS): every row after it reads
  the model's own wrong characters, and where the lookup is keyed by what was just written
  such rows have nothing to look up; they would swamp the errors the model made on its own
  (a model that keeps writing after its first error has many of them per instance). The
  classes of every wrong row are kept beside it (`all_rows`), for the reader;
- for each row i the chosen heads' weights on its query row (the token before it) are
  averaged over the heads and taken over the task-text columns as shares (instruction, chat
  template and BOS left out, as the rollout score does), and each head's plain weight on the
  reference keys R of row i moved by the ranking's `shift` is kept (its *mass*).

The classes, checked in this order:

  misdirected   the keys outside R that would make the model write what it wrote hold at
                least `dominance` of the row together (and more than R): for each key, the
                task's function on the keys moved there (the task's oracle on the text
                displaced by that key's offset from the nearest reference key), and the keys
                whose result is the written character counted together, so that a character
                that sits twice in the text (in the prompt and in the answer already
                written, usual in reversal) is one target split over two keys: the lookup
                found the wrong key and the rest of the model computed on it;
  elsewhere     one key outside R dominates, but the written character is not its result;
  on_reference  the heads look at R as they do where the model works. With the ID rows
                (`id_rows`, the pipeline's reading), per row: each lookup head's mass over
                its own mean on correct ID rows (its level; the lookup heads: a level at
                least half the largest, so a decoy that looks at the reference sharply and
                writes nothing cannot hide the dilution of the head that is read), the least
                of these ratios over the lookup heads, against a threshold that correct ID
                rows pass by construction: the smaller of 1 - `tolerance` (within 5% of the
                level, for heads whose weight barely varies row to row) and the ratio that
                the lowest NULL_QUANTILE of correct ID rows reach (for heads whose weight
                varies: about half of a head's own rows fall below its mean, so "95% of the
                mean" for every one of many heads fails most rows where the model works).
                Without ID rows: the same ratio against 1 - `tolerance` with the `level`
                given (one per head, or one for the heads' mean mass); without a level, a
                share of at least `dominance` on R;
  diluted       less than that, but R leads: the reference keys' weight *per key* is above
                every other key's (a lookup that prefers the right key, too weakly: what a
                small push can mend);
  diffuse       nothing stands out and R does not lead: no lookup to speak of.

Diluted and diffuse compare the reference per key, so uniform attention reads *diffuse*
whatever the reference's size: summed, two reference keys under uniform attention hold
twice any other key and would read diluted (addition, successor) where one reads diffuse
(reversal), and cross-task contrasts would be confounded with the reference's size.

The null. Every reading is also made, with the same heads, shift, levels and threshold, on
the rows the model gets right: the rows before the first error of every ID instance
(`id_rows`) and of every OOD instance (an exact answer: all its rows). `null["id"]` and
`null["ood"]` give each class's share of those rows. A kind of lookup failure (diluted,
misdirected, elsewhere, diffuse) is evidence only where its share of the first wrong rows
exceeds its ID null share (the calibrated verdict reads it so: `vocabulary.NULL_EXCESS`);
on reference needs no excess, its null is the threshold's calibration (correct ID rows
pass it by construction). Reading every row and every head set costs no second forward per
row: the same teacher-forced forward per batch, now over every instance (right ones too),
plus one forward over the ID rows for the null (none more when they are the rows diagnosed).

Head sets (`compare`): the same rows read with other heads (top-1, top-4 beside the chosen
N), each against its own null, in the same forwards; `head_sets` gives each one's shares and
its dominant kind, and `kind_changes` whether the dominant kind differs between them.

Shares are over instances: the class of each instance's first wrong row (`all_rows`: the
mean of the classes of all its wrong rows, with their token counts). No oracle push, so
this answers the objection that reinforcement needs the true pattern where it applies: it
needs the reference only to name the keys, not to change the model.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

CLASSES = ("on_reference", "diluted", "misdirected", "elsewhere", "diffuse")
# the kinds that say the lookup failed; on_reference says it worked and the model still erred
LOOKUP_FAILURES = ("diluted", "misdirected", "elsewhere", "diffuse")
DEFAULT_DOMINANCE = 0.5  # a key (or the reference set) "stands out" with half the row or more
# "as much as where the model works": within 5% of the ID level (the planted dilution errs
# at 0.88 of its 0.93 ID mass, the planted downstream failure at 0.995 of 0.999)
DEFAULT_TOLERANCE = 0.05
# ... or as much as the lowest 5% of the correct ID rows reach: at least 95% of the rows
# where the model works pass, however many heads are read and however much each varies
NULL_QUANTILE = 0.05
# A key holding less than this share of a row is not asked what it would make the model
# write (it cannot matter to a group that needs half the row; it keeps the oracle calls few).
MIN_KEY_SHARE = 0.01
BASIS = "first wrong row of each instance"
NULL_BASIS = "rows the model gets right: every row before an instance's first error"
MAIN = "N"  # the head set the verdict reads, beside `compare`'s


def check_dominance(value: float) -> float:
    value = float(value)
    if not 0 < value <= 1:
        raise ValueError(f"dominance must be in (0, 1], got {value}")
    return value


def forced_instance(instance, prediction: str):
    """`instance` with the model's own answer as its target: the answer cut or completed
    with the gold characters to the gold length, so every reference row keeps its meaning
    (rows past the model's answer are never read: attention is causal)."""
    length = len(instance.target)
    head = prediction[:length]
    return dataclasses.replace(instance, target=head + instance.target[len(head) :])


def displaced_answer(instance, text: str, row: int, offset: int) -> str | None:
    """What the task's function gives for target row `row` when everything it reads is read
    `offset` characters away: the task's oracle on the text moved by `offset` (the oracle
    reads the positions of the `sufficient` mask, which may be more than the reference the
    heads were ranked on, such as the carry of addition; all of them move together). None
    when a key it needs leaves the text or the oracle cannot compute on what it sees."""
    from attentionspan_datasets.tasks.base import get_task

    visible = [text[p + offset] if 0 <= p + offset < len(text) else None for p in range(len(text))]
    try:
        return get_task(instance.task).oracle(visible, instance.params, row)
    except Exception:  # a key moved off the text, a letter where a digit was
        return None


@dataclasses.dataclass(frozen=True)
class RowReading:
    """What one row's shares say before the on-reference test: `pointed` ("misdirected" or
    "elsewhere" when a wrong key holds the row, else None), whether the reference leads per
    key (`leads`), the reference's share (`on`) and each head's mass on it (`masses`)."""

    pointed: str | None
    leads: bool
    on: float
    masses: tuple[float, ...] = ()


def read_row(
    shares: Mapping[int, float],
    reference: Sequence[int],
    shift: int,
    written: str,
    answer_at: Callable[[int], str | None],
    dominance: float = DEFAULT_DOMINANCE,
) -> RowReading:
    """The part of a row's class its shares decide (module docstring): a wrong key holding
    the row, and whether the reference leads per key."""
    keys = {p + shift for p in reference}
    on = sum(shares.get(k, 0.0) for k in keys)
    others = {k: v for k, v in shares.items() if k not in keys}
    top = max(others, key=lambda k: (others[k], -k)) if others else None
    top_share = others[top] if top is not None else 0.0

    def gives_written(key: int) -> bool:
        nearest = min(keys, key=lambda k: (abs(key - k), k)) if keys else key
        return answer_at(key - nearest) == written

    # the keys that would make the model write what it wrote, counted together
    group = 0.0
    if written and sum(others.values()) >= dominance:  # else no group can reach it
        group = sum(v for k, v in others.items() if v >= MIN_KEY_SHARE and gives_written(k))
    pointed = None
    if group >= dominance and group > on:
        pointed = "misdirected"
    elif top is not None and top_share >= dominance and top_share > on:
        pointed = "elsewhere"
    # per key, so that uniform attention never leads, whatever the reference's size
    seen = [k for k in keys if k in shares] or list(keys)
    leads = bool(seen) and round(on / len(seen) - top_share, 12) > 0  # a tie does not lead
    return RowReading(pointed, leads, on)


def class_of(reading: RowReading, looked: bool) -> str:
    """The class of a row from its reading and whether its heads looked at the reference as
    where the model works (`OnReference.passes`)."""
    if reading.pointed:
        return reading.pointed
    if looked:
        return "on_reference"
    return "diluted" if reading.leads else "diffuse"


def classify_row(
    shares: Mapping[int, float],
    reference: Sequence[int],
    shift: int,
    written: str,
    answer_at: Callable[[int], str | None],
    dominance: float = DEFAULT_DOMINANCE,
    mass: float | None = None,
    level: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> str:
    """The class of one row with one level (module docstring).

    `shares`: character position -> share of the heads' weight (task-text columns summing to
    1); `reference`: the row's reference positions; `answer_at(offset)`: what the task gives
    on the reference moved by `offset` (`displaced_answer`); `mass`: the heads' plain weight
    on the (shifted) reference, compared with `level`, their ID weight there (within
    `tolerance`); without them the reference's share against `dominance`."""
    reading = read_row(shares, reference, shift, written, answer_at, dominance)
    if level is not None and mass is not None:
        looked = mass >= (1 - tolerance) * level
    else:
        looked = reading.on >= dominance
    return class_of(reading, looked)


@dataclasses.dataclass(frozen=True)
class OnReference:
    """The on-reference test of one head set: each head's `levels` (its mean mass on the
    shifted reference), the `looking` heads (a level at least half the largest), a row's
    ratio (the least mass / level over them; `pooled`: the heads' mean mass over one level)
    and the `threshold` it must reach; `quantile`: the ratio the lowest NULL_QUANTILE of
    correct ID rows reach (None: no ID rows, the threshold is 1 - tolerance alone)."""

    levels: tuple[float, ...]
    looking: tuple[int, ...]
    threshold: float
    quantile: float | None = None
    pooled: bool = False

    def ratio(self, masses: Sequence[float]) -> float | None:
        if self.pooled:
            level = self.levels[0]
            return sum(masses) / len(masses) / level if level > 0 else None
        if not self.looking:
            return None
        return min(masses[j] / self.levels[j] for j in self.looking)

    def passes(self, masses: Sequence[float]) -> bool:
        ratio = self.ratio(masses)
        return ratio is not None and ratio >= self.threshold

    def record(self) -> dict[str, Any]:
        return {
            "levels": list(self.levels),
            "looking": list(self.looking),
            "threshold": self.threshold,
            "id_quantile": self.quantile,
            "basis": "given level" if self.quantile is None else "correct ID rows",
        }


def looking_heads(levels: Sequence[float]) -> tuple[int, ...]:
    """The heads that look up in distribution: a level at least half the largest."""
    top = max(levels, default=0.0)
    return tuple(j for j, v in enumerate(levels) if v > 0 and v >= 0.5 * top)


def calibrate(masses: Sequence[Sequence[float]], tolerance: float) -> OnReference | None:
    """The on-reference test from the heads' masses on correct ID rows (one tuple per row):
    each head's level is its mean there, the threshold the smaller of 1 - tolerance and the
    NULL_QUANTILE quantile of the rows' own ratios, so that at least 1 - NULL_QUANTILE of
    them pass. None without rows."""
    if not masses:
        return None
    heads = len(masses[0])
    levels = tuple(sum(m[j] for m in masses) / len(masses) for j in range(heads))
    draft = OnReference(levels, looking_heads(levels), 1 - tolerance)
    ratios = sorted(r for r in (draft.ratio(m) for m in masses) if r is not None)
    if not ratios:
        return draft
    quantile = ratios[int(NULL_QUANTILE * len(ratios))]  # the lowest 5% lie below it
    return dataclasses.replace(draft, threshold=min(1 - tolerance, quantile), quantile=quantile)


def given_levels(level, heads: int, tolerance: float) -> OnReference | None:
    """The on-reference test from levels given (`where_errors_look`'s `level`): one per head
    (each lookup head against its own) or one for the heads' mean mass; None without."""
    if level is None:
        return None
    if isinstance(level, (int, float)):
        return OnReference((float(level),), (0,), 1 - tolerance, pooled=True)
    levels = tuple(float(v) for v in level)
    if len(levels) != heads:
        raise ValueError(f"level needs one value per head ({heads}), got {len(levels)}")
    return OnReference(levels, looking_heads(levels), 1 - tolerance)


def where_errors_look(
    scorer,
    instances: Sequence[Any],
    records: Sequence[Mapping[str, Any]],
    heads: Sequence[tuple[int, int]],
    shift: int = 0,
    dominance: float = DEFAULT_DOMINANCE,
    level: float | Sequence[float] | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    id_rows: tuple[Sequence[Any], Sequence[Mapping[str, Any]]] | None = None,
    compare: Mapping[str, Sequence[tuple[int, int]]] | None = None,
) -> dict[str, Any]:
    """Classify every wrong answer token of `records` (free-running records with `index`
    and `prediction`) by where `heads` looked as the model wrote it, and the rows it got
    right beside them (module docstring), one forward per batch of `scorer`'s.

    `id_rows`: (ID instances, their free-running records): the on-reference test is
    calibrated on their correct rows and their classes are the ID null (the pipeline's
    reading). Without them, `level`: the heads' mean weight per row on the (shifted)
    reference where the model works (`id_level`), or one level per head (`id_levels`);
    None compares shares with `dominance`. `compare`: other head sets ({"top-1": heads}),
    read on the same rows and reported in `head_sets`."""
    lenses = _lenses(heads, compare, shift, dominance, level, tolerance)
    id_read = _read(scorer, lenses, *id_rows) if id_rows is not None else None
    tests = {}
    for name, lens in lenses.items():
        correct = [row[name].masses for x in id_read or () for row in x.correct]
        tests[name] = (calibrate(correct, tolerance) if id_read is not None else None) or (
            given_levels(level if name == MAIN else None, len(lens.heads), tolerance)
        )
    same = id_rows is not None and id_rows[0] is instances and id_rows[1] is records
    read = id_read if same else _read(scorer, lenses, instances, records)  # ID: read once
    found = {
        name: _summary(lens, tests[name], name, read, id_read) for name, lens in lenses.items()
    }
    out = found[MAIN]
    out["head_sets"] = {
        name: {
            "heads": f["heads"],
            "shares": f["shares"],
            "null": (f["null"]["id"] or f["null"]["ood"] or {}).get("shares"),
            "dominant": _dominant(f["shares"]),
        }
        for name, f in found.items()
    }
    kinds = {entry["dominant"] for entry in out["head_sets"].values()} - {None}
    out["kind_changes"] = len(kinds) > 1
    # per instance index, the class of its first wrong row (a validation stream is split by
    # kind with it), and the eval's count of wrong answers, over-long ones included
    lens, test = lenses[MAIN], tests[MAIN]
    out["instance_kinds"] = {
        str(x.index): class_of(r.wrong[0][MAIN], _looked(test, r.wrong[0][MAIN], lens.dominance))
        for x, r in zip(instances, read)
        if r.wrong
    }
    out["answers"] = answer_counts(instances, records, out["instances"])
    out["per_instance"] = instance_readings(instances, records, out["instance_kinds"])
    # the ID null's rows per ID instance, beside (None: no ID rows)
    out["per_instance"]["id_null"] = (
        _null_counts(test, lens, id_rows[0], id_read) if id_read is not None else None
    )
    return out


def _null_counts(test, lens: _Lens, id_instances, id_read: Sequence[_Read]) -> dict[str, Any]:
    """The ID null's rows per ID instance (its correct rows' count of each class, in
    CLASSES order): `_null` pools the rows of every instance, so a resample by instance sums
    the counts of the instances drawn."""
    kinds = [
        [class_of(r[MAIN], _looked(test, r[MAIN], lens.dominance)) for r in x.correct]
        for x in id_read
    ]
    return {
        "keys": [[x.config, x.index] for x in id_instances],
        "classes": list(CLASSES),
        "counts": [[k.count(c) for c in CLASSES] for k in kinds],
    }


def instance_readings(instances, records, kinds: Mapping[str, str]) -> dict[str, Any]:
    """Per instance, in the stream's order: its key (config, index), the kind of its first
    wrong row (None: none), and whether the eval counts its answer wrong and over-long
    (None each where the records carry no exact match): what `shares` and `answers` count,
    kept so that a reader can count them again over a resample of the instances."""
    by_index = {r["index"]: r for r in records}
    scored = all("exact_match" in by_index[x.index] for x in instances)

    def over_long(x) -> bool:
        answer = by_index[x.index]["prediction"]
        return len(answer) > len(x.target) and answer.startswith(x.target)

    return {
        "keys": [[x.config, x.index] for x in instances],
        "kind": [kinds.get(str(x.index)) for x in instances],
        "wrong": [not by_index[x.index]["exact_match"] for x in instances] if scored else None,
        "over_long": [(not by_index[x.index]["exact_match"]) and over_long(x) for x in instances]
        if scored
        else None,
    }


def answer_counts(instances, records, diagnosed: int) -> dict[str, int] | None:
    """How many answers the eval counts wrong (`exact_match`), how many of them have a wrong
    row to classify (`diagnosed`), and how many are over-long (the right answer, then more:
    wrong, with no wrong row). None when the records carry no exact match (not measured)."""
    by_index = {r["index"]: r for r in records}
    if any("exact_match" not in by_index[x.index] for x in instances):
        return None
    wrong = [(x, by_index[x.index]) for x in instances if not by_index[x.index]["exact_match"]]
    over = sum(
        1
        for x, r in wrong
        if len(r["prediction"]) > len(x.target) and r["prediction"].startswith(x.target)
    )
    return {"total": len(instances), "wrong": len(wrong), "diagnosed": diagnosed, "over_long": over}


@dataclasses.dataclass(frozen=True)
class _Lens:
    """What every row is read with: the heads (and their layers), the ranking's shift and
    the dominance threshold."""

    heads: tuple[tuple[int, int], ...]
    shift: int
    dominance: float
    tolerance: float


@dataclasses.dataclass
class _Read:
    """One instance's rows as each head set read them: `correct` (the rows before its first
    error) and `wrong` (its wrong rows, the first first), each {head set: RowReading}."""

    correct: list[dict[str, RowReading]]
    wrong: list[dict[str, RowReading]]


def _lenses(heads, compare, shift, dominance, level, tolerance) -> dict[str, _Lens]:
    """The checked options of `where_errors_look` (ValueError naming the one out of range):
    the head sets by name, the verdict's (MAIN) first."""
    dominance = check_dominance(dominance)
    if level is not None:
        given = [level] if isinstance(level, (int, float)) else list(level)
        for value in given:
            if not 0 <= float(value) <= 1:
                raise ValueError(f"level must be in [0, 1], got {value}")
        given_levels(level, len(heads), tolerance)  # one per head, when a list
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    sets = {MAIN: heads, **{k: v for k, v in (compare or {}).items() if k != MAIN}}
    for name, chosen in sets.items():
        if not chosen:
            raise ValueError(f"where_errors_look needs at least one head ({name})")
    return {
        name: _Lens(tuple(tuple(h) for h in chosen), shift, dominance, tolerance)
        for name, chosen in sets.items()
    }


def _read(scorer, lenses, instances, records) -> list[_Read]:
    """Every instance's correct rows (before its first error) and wrong rows, read by each
    head set, the model's answer teacher-forced."""
    by_index = {r["index"]: r for r in records}
    answers = {}
    for instance in instances:
        record = by_index.get(instance.index)
        if record is None:
            raise ValueError(f"no record for instance index {instance.index}")
        answers[instance.index] = (instance, record["prediction"])

    def read_batch(chunk, encodings):
        return _read_batch(scorer, lenses, answers, chunk, encodings)

    forced = [forced_instance(x, prediction) for x, prediction in answers.values()]
    return [x for batch in scorer.run(forced, read_batch) for x in batch]


def _read_batch(scorer, lenses, answers, chunk, encodings) -> list[_Read]:
    """Per instance of the batch: its rows as each head set read them (`_Read`)."""
    from harness.engine.capture import PATTERN_NAME, AttentionPlan
    from harness.engine.positions import task_columns
    from harness.engine.scoring import collate_left

    batch = collate_left(encodings, scorer.char_tok.pad_id)
    # only the attention is read: one column of logits (Gemma's 262k-word output layer
    # would cost more than its layers over every column), the maps unchanged
    plan = AttentionPlan(patterns=range(len(chunk)))
    record = scorer.forward(batch, plan, attention_only=True)
    layers = sorted({la for lens in lenses.values() for la, _ in lens.heads})
    maps = {layer: record.patterns[PATTERN_NAME.format(layer=layer)] for layer in layers}
    columns = task_columns(batch)  # bool [batch, T]
    out = []
    for b, (forced, enc) in enumerate(zip(chunk, encodings)):
        instance, prediction = answers[forced.index]
        wrong = _wrong_rows(instance.target, prediction)
        first = wrong[0] if wrong else len(instance.target)
        # the task-text columns of this row and the character position of each
        cols = columns[b].nonzero().flatten().tolist()
        char_of = {c: _char_position(enc, c - batch.shifts[b]) for c in cols}

        readings = [
            {
                name: _row_reading(
                    lens, maps, batch, b, cols, char_of, instance, forced, prediction, i
                )
                for name, lens in lenses.items()
            }
            for i in (*range(first), *wrong)
        ]
        out.append(_Read(readings[:first], readings[first:]))
    return out


def _row_reading(
    lens, maps, batch, b, cols, char_of, instance, forced, prediction, i: int
) -> RowReading:
    """Row `i` of batch row `b` read by one head set: the heads' mean shares over the
    task-text characters up to its query (the token before it), what they say
    (`read_row`), and each head's plain weight on the (shifted) reference."""
    import torch

    enc, shift_b = batch.encodings[b], batch.shifts[b]
    query = shift_b + enc.target_offset + i - 1
    per_head = torch.stack([maps[la][b, h, query] for la, h in lens.heads])
    weights = per_head.mean(0)
    total = float(weights[cols].sum()) or 1.0
    shares = {char_of[c]: float(weights[c]) / total for c in cols if c <= query}
    keys = [p + lens.shift for p in forced.reference[i]]
    cells = [
        shift_b + enc.position(k)
        for k in keys
        if 0 <= k < len(forced.text) and shift_b + enc.position(k) <= query
    ]
    masses = tuple(float(per_head[:, cells].sum(1)[j]) for j in range(len(lens.heads)))
    answer_at = functools.partial(displaced_answer, instance, forced.text, i)
    written = _written(prediction, i)
    row = read_row(shares, forced.reference[i], lens.shift, written, answer_at, lens.dominance)
    return dataclasses.replace(row, masses=masses)


def _looked(test: OnReference | None, reading: RowReading, dominance: float) -> bool:
    """Whether a row's heads looked at the reference as where the model works: the test's
    ratio against its threshold; without a test (or a lookup head), a share of `dominance`."""
    ratio = test.ratio(reading.masses) if test is not None else None
    return reading.on >= dominance if ratio is None else ratio >= test.threshold


def _null(test, name: str, read: Sequence[_Read] | None, dominance: float) -> dict | None:
    """Each class's share of the correct rows of `read` (None without rows)."""
    if read is None:
        return None
    kinds = [class_of(r[name], _looked(test, r[name], dominance)) for x in read for r in x.correct]
    if not kinds:
        return None
    return {"rows": len(kinds), "shares": {k: kinds.count(k) / len(kinds) for k in CLASSES}}


def _summary(lens: _Lens, test, name: str, read, id_read) -> dict[str, Any]:
    """The shares of the classes over instances (each instance's first wrong row, the
    verdict's basis), beside the null (the correct rows, ID and OOD) and, for the reader,
    over every wrong row."""

    def kind(row) -> str:
        return class_of(row[name], _looked(test, row[name], lens.dominance))

    erred = [x for x in read if x.wrong]
    firsts = [kind(x.wrong[0]) for x in erred]
    per_instance = [{k: [kind(r) for r in x.wrong].count(k) for k in CLASSES} for x in erred]
    tokens = {k: sum(c[k] for c in per_instance) for k in CLASSES}
    shares = [{k: v / sum(c.values()) for k, v in c.items()} for c in per_instance]
    n = len(shares)
    level = None if test is None else (test.levels[0] if test.pooled else list(test.levels))
    return {
        "heads": [list(h) for h in lens.heads],
        "shift": lens.shift,
        "dominance": lens.dominance,
        "level": level,
        "tolerance": lens.tolerance,
        "on_reference": None if test is None else test.record(),
        "basis": BASIS,
        "instances": n,
        "tokens": n,
        # the verdict's basis: each instance's first wrong row, so a share of instances
        "shares": {k: (firsts.count(k) / n if n else None) for k in CLASSES},
        "token_counts": {k: firsts.count(k) for k in CLASSES},
        "null": {
            "basis": NULL_BASIS,
            "id": _null(test, name, id_read, lens.dominance),
            "ood": _null(test, name, read, lens.dominance),
        },
        "all_rows": {
            "basis": "every wrong row (an instance counts once: the mean of its rows)",
            "tokens": sum(tokens.values()),
            "shares": {k: (sum(p[k] for p in shares) / n if n else None) for k in CLASSES},
            "token_counts": tokens,
        },
    }


def _dominant(shares: Mapping[str, float | None]) -> str | None:
    """The kind holding the most first wrong rows (None without errors)."""
    held = {k: v for k, v in shares.items() if v}
    return max(held, key=lambda k: (held[k], -CLASSES.index(k))) if held else None


def id_level(ranking, heads: Sequence[tuple[int, int]], shift: int = 0) -> float | None:
    """The heads' mean weight per row on `ref + shift` over the ranking's ID instances (its
    offset profile): how much they look there where the model works. None when the ranking
    has no profile at that offset."""
    values = ranking.offsets.get(str(shift))
    if values is None or not heads:
        return None
    return sum(values[layer][head] for layer, head in heads) / len(heads)


def id_levels(ranking, heads: Sequence[tuple[int, int]], shift: int = 0) -> list[float] | None:
    """Each head's mean weight per row on `ref + shift` over the ranking's ID instances (the
    per-head levels `where_errors_look` compares each lookup head with); None when the
    ranking has no profile at that offset."""
    values = ranking.offsets.get(str(shift))
    if values is None or not heads:
        return None
    return [values[layer][head] for layer, head in heads]


def _wrong_rows(target: str, prediction: str) -> list[int]:
    """Target rows the model wrote wrong: each wrong character, and the row where an answer
    that stops short wrote its end instead of a character (the rows after it were never
    written: no query of the model's own exists for them)."""
    rows = [i for i in range(min(len(target), len(prediction))) if prediction[i] != target[i]]
    return rows + ([len(prediction)] if len(prediction) < len(target) else [])


def _written(prediction: str, row: int) -> str:
    """What the model wrote at `row`: its character, or "" where it ended the answer."""
    return prediction[row] if row < len(prediction) else ""


def _char_position(encoding, token: int) -> int:
    """The character position in `prompt + target` of a task-text token position."""
    if encoding.prompt_offset <= token < encoding.prompt_offset + encoding.prompt_len:
        return token - encoding.prompt_offset
    return encoding.prompt_len + token - encoding.target_offset
