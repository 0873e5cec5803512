"""Where the model looks when it errs: the lookup heads' own attention on every wrong answer
token, with no intervention at all.

    from harness.attention.diagnosis import where_errors_look
    found = where_errors_look(scorer, instances, records, heads=ranking.top(4), shift=0)
    found["shares"]      # {"on_reference": .., "misdirected": .., "diffuse": .., "elsewhere": ..}
    found["basis"]       # "first wrong row of each instance"
    found["all_rows"]    # the same over every wrong row, for the reader

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
- for each wrong token i the chosen heads' weights on its query row (the token before it)
  are averaged over the heads and taken over the task-text columns as shares (instruction,
  chat template and BOS left out, as the rollout score does);
- the row is classified, with R the reference keys of row i moved by the ranking's `shift`,
  `level` the heads' own mean weight on R per row where the model works (the ID level of
  the head ranking, `ranking.offsets`), checked in this order:

  misdirected   the keys outside R that would make the model write what it wrote hold at
                least `dominance` of the row together (and more than R): for each key, the
                task's function on the keys moved there (the task's oracle on the text
                displaced by that key's offset from the nearest reference key), and the keys
                whose result is the written character counted together, so that a character
                that sits twice in the text (in the prompt and in the answer already
                written, usual in reversal) is one target split over two keys: the lookup
                found the wrong key and the rest of the model computed on it;
  elsewhere     one key outside R dominates, but the written character is not its result;
  on_reference  the heads' weight on R is at least (1 - `tolerance`) x `level`: they looked
                at the right keys as much as where the model works, and it still wrote
                wrong (a failure downstream of the lookup). With a level per head
                (`id_levels`), *each* head that looks up in distribution (a level at least
                half the largest) must: a decoy that looks at the reference sharply and
                writes nothing cannot hide the dilution of the head that is read; without a
                level, a share of at
                least `dominance` on R;
  diluted       less than that, but R still holds more than any other key: a lookup that
                prefers the right key, too weakly (what a small push can mend);
  diffuse       nothing stands out and R is not first: no lookup to speak of.

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
DEFAULT_DOMINANCE = 0.5  # a key (or the reference set) "stands out" with half the row or more
# "as much as where the model works": within 5% of the ID level (the planted dilution errs
# at 0.88 of its 0.93 ID mass, the planted downstream failure at 0.995 of 0.999)
DEFAULT_TOLERANCE = 0.05
# A key holding less than this share of a row is not asked what it would make the model
# write (it cannot matter to a group that needs half the row; it keeps the oracle calls few).
MIN_KEY_SHARE = 0.01
BASIS = "first wrong row of each instance"


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
    """The class of one wrong row (module docstring).

    `shares`: character position -> share of the heads' weight (task-text columns summing to
    1); `reference`: the row's reference positions; `answer_at(offset)`: what the task gives
    on the reference moved by `offset` (`displaced_answer`); `mass`: the heads' plain weight
    on the (shifted) reference, compared with `level`, their ID weight there."""
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
    if group >= dominance and group > on:
        return "misdirected"
    if top is not None and top_share >= dominance and top_share > on:
        return "elsewhere"
    if level is not None and mass is not None:
        looked = mass >= (1 - tolerance) * level
    else:
        looked = on >= dominance
    if looked:
        return "on_reference"
    # every reference key counts together against the largest other key
    return "diluted" if on > top_share else "diffuse"


def where_errors_look(
    scorer,
    instances: Sequence[Any],
    records: Sequence[Mapping[str, Any]],
    heads: Sequence[tuple[int, int]],
    shift: int = 0,
    dominance: float = DEFAULT_DOMINANCE,
    level: float | Sequence[float] | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> dict[str, Any]:
    """Classify every wrong answer token of `records` (free-running records with `index`
    and `prediction`) by where `heads` looked as the model wrote it (module docstring),
    one forward per batch of `scorer`'s. `level`: the heads' mean weight per row on the
    (shifted) reference where the model works (`id_level(ranking, heads, shift)`), or one
    level per head (`id_levels`: each head that looks up in distribution is compared with
    its own level, the row on the reference only when every one of them is); None compares
    shares with `dominance`."""
    lens = _lens(heads, shift, dominance, level, tolerance)
    wrong = _wrong_answers(instances, records)

    def classify_batch(chunk, encodings):
        return _classify_batch(scorer, lens, wrong, chunk, encodings)

    forced = [forced_instance(x, prediction) for x, prediction, _ in wrong.values()]
    found = [c for counts in scorer.run(forced, classify_batch) for c in counts]
    out = _summary(lens, found)
    # per instance index, the class of its first wrong row (a validation stream is split by
    # kind with it), and the eval's count of wrong answers, over-long ones included
    out["instance_kinds"] = {str(i): first for i, (first, _) in zip(wrong, found)}
    out["answers"] = answer_counts(instances, records, len(wrong))
    return out


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
    """What every wrong row is read with: the heads (and their layers), the ranking's shift,
    the thresholds, and the ID level: one for the heads together (`level`, None: shares
    against `dominance`), or one per head (`per_head`: `levels`, of which the heads that
    look up in distribution, `looking`, are each compared with their own)."""

    heads: Sequence[tuple[int, int]]
    shift: int
    dominance: float
    tolerance: float
    level: float | Sequence[float] | None
    per_head: bool
    levels: list[float]
    looking: list[int]

    @property
    def layers(self) -> list[int]:
        return sorted({layer for layer, _ in self.heads})


def _lens(heads, shift, dominance, level, tolerance) -> _Lens:
    """The checked options of `where_errors_look` (ValueError naming the one out of range)."""
    dominance = check_dominance(dominance)
    per_head = level is not None and not isinstance(level, (int, float))
    levels = [float(v) for v in level] if per_head else []
    if per_head and len(levels) != len(heads):
        raise ValueError(f"level needs one value per head ({len(heads)}), got {len(levels)}")
    for value in levels if per_head else ([] if level is None else [level]):
        if not 0 <= value <= 1:
            raise ValueError(f"level must be in [0, 1], got {value}")
    # with a level per head: the heads that look up in distribution, each against its own
    looking = [j for j, v in enumerate(levels) if v > 0 and v >= 0.5 * max(levels)]
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    if not heads:
        raise ValueError("where_errors_look needs at least one head")
    return _Lens(heads, shift, dominance, tolerance, level, per_head, levels, looking)


def _wrong_answers(instances, records) -> dict[int, tuple[Any, str, list[int]]]:
    """index -> (instance, the model's answer, its wrong rows), for the instances with one."""
    by_index = {r["index"]: r for r in records}
    wrong: dict[int, tuple[Any, str, list[int]]] = {}
    for instance in instances:
        record = by_index.get(instance.index)
        if record is None:
            raise ValueError(f"no record for instance index {instance.index}")
        rows = _wrong_rows(instance.target, record["prediction"])
        if rows:
            wrong[instance.index] = (instance, record["prediction"], rows)
    return wrong


def _classify_batch(scorer, lens: _Lens, wrong, chunk, encodings) -> list[tuple]:
    """Per instance of the batch (its answer teacher-forced): (the class of its first wrong
    row, the count of each class over its wrong rows)."""
    from harness.engine.capture import PATTERN_NAME, AttentionPlan
    from harness.engine.positions import task_columns
    from harness.engine.scoring import collate_left

    batch = collate_left(encodings, scorer.char_tok.pad_id)
    # only the attention is read: one column of logits (Gemma's 262k-word output layer
    # would cost more than its layers over every column), the maps unchanged
    plan = AttentionPlan(patterns=range(len(chunk)))
    record = scorer.forward(batch, plan, attention_only=True)
    maps = {layer: record.patterns[PATTERN_NAME.format(layer=layer)] for layer in lens.layers}
    columns = task_columns(batch)  # bool [batch, T]
    out = []
    for b, (forced, enc) in enumerate(zip(chunk, encodings)):
        instance, prediction, rows = wrong[forced.index]
        # the task-text columns of this row and the character position of each
        cols = columns[b].nonzero().flatten().tolist()
        char_of = {c: _char_position(enc, c - batch.shifts[b]) for c in cols}
        counts = dict.fromkeys(CLASSES, 0)
        first = None
        for i in rows:
            shares, mass, row_level = _row_weights(lens, maps, batch, b, cols, char_of, forced, i)
            kind = classify_row(
                shares,
                instance.reference[i],
                lens.shift,
                _written(prediction, i),
                functools.partial(displaced_answer, instance, forced.text, i),
                lens.dominance,
                mass=mass,
                level=row_level,
                tolerance=lens.tolerance,
            )
            counts[kind] += 1
            first = first or kind
        out.append((first, counts))
    return out


def _row_weights(lens: _Lens, maps, batch, b: int, cols, char_of, forced, i: int):
    """(shares, mass, level) of wrong row `i` of batch row `b` (`classify_row`'s): the
    heads' shares over the task-text characters up to its query (the token before it), and
    their weight on the (shifted) reference with the level it is compared with (with a
    level per head: the least a lookup head keeps of its own, against 1)."""
    import torch

    enc, shift_b = batch.encodings[b], batch.shifts[b]
    query = shift_b + enc.target_offset + i - 1
    weights = torch.stack([maps[la][b, h, query] for la, h in lens.heads]).mean(0)
    total = float(weights[cols].sum()) or 1.0
    shares = {char_of[c]: float(weights[c]) / total for c in cols if c <= query}
    keys = [p + lens.shift for p in forced.reference[i]]
    cells = [
        shift_b + enc.position(k)
        for k in keys
        if 0 <= k < len(forced.text) and shift_b + enc.position(k) <= query
    ]
    mass = sum(float(weights[c]) for c in cells)
    row_level = lens.level
    if lens.per_head:  # the least a lookup head keeps of its own level
        row_level = 1.0
        mass = (
            min(
                sum(float(maps[lens.heads[j][0]][b, lens.heads[j][1], query, c]) for c in cells)
                / lens.levels[j]
                for j in lens.looking
            )
            if lens.looking
            else None
        )
    return shares, mass, row_level


def _summary(lens: _Lens, found) -> dict[str, Any]:
    """The shares of the classes over instances (each instance's first wrong row, the
    verdict's basis) and, for the reader, over every wrong row."""
    firsts = [first for first, _ in found]
    per_instance = [c for _, c in found]
    tokens = {k: sum(c[k] for c in per_instance) for k in CLASSES}
    shares = [{k: v / sum(c.values()) for k, v in c.items()} for c in per_instance]
    n = len(shares)
    return {
        "heads": [list(h) for h in lens.heads],
        "shift": lens.shift,
        "dominance": lens.dominance,
        "level": lens.levels if lens.per_head else lens.level,
        "tolerance": lens.tolerance,
        "basis": BASIS,
        "instances": n,
        "tokens": n,
        # the verdict's basis: each instance's first wrong row, so a share of instances
        "shares": {k: (firsts.count(k) / n if n else None) for k in CLASSES},
        "token_counts": {k: firsts.count(k) for k in CLASSES},
        "all_rows": {
            "basis": "every wrong row (an instance counts once: the mean of its rows)",
            "tokens": sum(tokens.values()),
            "shares": {k: (sum(p[k] for p in shares) / n if n else None) for k in CLASSES},
            "token_counts": tokens,
        },
    }


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
