"""Calibration models for the calibrated verdict's third round: hand-set Llamas (the geometry
of tests/planted.py and tests/calibration_models.py) whose verdict rests on a condition the
rule used to claim without reading it.

    from tests.calibration_round3_verdict import MODELS, build, judge_by_kind
    built = build("dilution_and_misdirection")
    out = judge_by_kind(built, seed=0)
    out["verdict"]["verdict"]        # "mixed failure"
    MODELS["dilution_and_misdirection"].kinds   # each kind's reading, at its own dose

- `dilution_and_misdirection`: a mixed failure whose kinds need different doses. The lookup
  is the planted dilution's (score 5 on the right key), and names share slots modulo 31,
  with a name of 31 or more answering with score 10: a row whose name has an alias 31
  further on (present only in answers of length 32 or more) copies the alias. So every
  answer of length 31 or less fails diluted (a push of C = 0.3 at the reference mends every
  row, and at C = 0.3 a shifted push is not followed), and every longer one fails
  misdirected at row 0 (only C >= 1 outweighs the alias's 0.99; at C = 1 a shifted push is
  followed too). On the whole validation curve C = 1 gains most (it mends both kinds);
  read there, the diluted kind's shifted pushes are followed and it reads *inconclusive*.
  Read at the dose its own validation instances choose (0.3), it is *nudge-repairable*.
- `over_long`: a sharp lookup that writes every answer right, but whose last row, asking
  for a name the prompt lacks, finds name 0 (a weaker second query from names of 10 or
  more, which only OOD answers write) and keeps writing: every OOD answer is wrong and none
  has a wrong row. The diagnosis has nothing to look at; the eval says every answer fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tests import calibration_models as cm
from tests import planted as p

ALIAS_PERIOD = 31  # names >= 31 share the slot of name - 31 (answers of length >= 32 only)
ALIAS_WEIGHT = 2.0  # their key weight: score 10 against the reference's 5
STOP_SCORE = 8.0  # over_long: the second query's score on name 0 (the right key scores 10)


@dataclass(frozen=True)
class Spec:
    """One model: the verdict its construction implies, why, and for a mixed failure each
    named kind's own reading ({kind: word}) with the dose it must be read at ({kind: C})."""

    name: str
    verdict: str
    why: str
    kinds: tuple[tuple[str, str], ...] = ()
    doses: tuple[tuple[str, float], ...] = ()
    reason: str = ""  # a phrase the verdict's reasons must carry


MODELS = {
    s.name: s
    for s in (
        Spec(
            "dilution_and_misdirection",
            "mixed failure",
            "answers of length 31 or less fail diluted (C = 0.3 mends them, and a shifted push "
            "is not followed there); longer ones fail misdirected at row 0 (only C >= 1 "
            "outweighs the alias): each kind is read at the dose its own validation instances "
            "choose, so the diluted kind reads nudge-repairable at 0.3, where at the whole "
            "curve's dose (C = 1) its shifted pushes are followed",
            kinds=(("diluted", "nudge-repairable"), ("misdirected", "misdirected lookup")),
            doses=(("diluted", 0.3), ("misdirected", 1.0)),
        ),
        Spec(
            "over_long",
            "inconclusive",
            "every OOD answer is the right one and then more: wrong by the eval, with no wrong "
            "row for the diagnosis to read; the verdict must not say no failure, and cannot "
            "say where the heads fail",
            reason="over-long",
        ),
    )
}


def build(name: str) -> p.Planted:
    """(model, tokenizer, id_instances, ood_instances, truth) of one model of MODELS."""
    import torch

    if name not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {name!r}")
    char_tok = p.planted_tokenizer()
    layout = p._Layout(char_tok)
    model = cm._blank(char_tok, layout, 1, False)
    head = (0, p.MECHANISM_HEAD)
    with torch.no_grad():
        attn = model.model.layers[0].self_attn
        for h in range(p.NUM_HEADS):
            if h != head[1]:
                p._sink_head(attn, layout, h)
        if name == "dilution_and_misdirection":
            cm._lookup(attn, layout, head[1], layout.tok, _alias, _alias_weight, 5.0, 1.0)
            tau = p.DILUTION_TAU
        else:
            cm._lookup(attn, layout, head[1], layout.tok, _same, _one, p.DOWNSTREAM_KAPPA, 1.0)
            _keep_going(attn, layout, head[1])
            tau = p.SHARP_TAU
        cm._readout(model, layout, p.COPY_GAIN, p.COPY_GAIN * tau, None, "dilution")
    truth = p.Truth("dilution", 0, lookup_heads=(head,), copy_heads=(head,), tau=tau)
    return p.Planted(model, char_tok, p.id_instances(), p.ood_instances(), truth)


def _alias(n: int) -> int:
    return n % ALIAS_PERIOD


def _alias_weight(n: int) -> float:
    return ALIAS_WEIGHT if n >= ALIAS_PERIOD else 1.0


def _same(n: int) -> int:
    return n


def _one(n: int) -> float:
    return 1.0


def _keep_going(attn, layout, h: int) -> None:
    """Queries from names of 10 or more (written by OOD answers only) also ask for name 0,
    weaker than for the name due: where that name is in the text it wins (its mass stays
    over tau), and on the last row, which asks for a name the prompt lacks, name 0 does, so
    the answer goes on instead of ending."""
    gain = STOP_SCORE * math.sqrt(p.HEAD_DIM)
    for char, t in layout.chars.items():
        if p.name_of(char) >= p.LIMIT:
            attn.q_proj.weight[h * p.HEAD_DIM + p._slot(0), layout.tok(t)] = gain


# --- the calls `reproduce` makes, with the validation stream split by kind --------------------
def judge_by_kind(built: p.Planted, seed: int = 0, every: int = 3, counts=(1, 2, 4)) -> dict:
    """The calibrated verdict through the calls `reproduce` makes (`lookup_stages.run_dose`
    and `run_diagnosis`): rank on ID finding the offset, the validation ladder of every
    count (reference and ID rungs), N chosen, where the heads look on each wrong validation
    answer and that N's validation ladder on each kind's instances (`dose.with_id_of`), the
    test ladder with its controls at the rungs the verdict reads (`reading_rungs`, each
    kind's dose among them), where the test errors look, the verdict."""
    from harness.attention import diagnosis
    from harness.attention.dose import run_dose_ladder, with_id_of
    from harness.attention.heads import rank_lookup
    from harness.attention.interventions import score_settings
    from harness.attention.lookup import Lookup
    from harness.attention.sweep import BASELINE
    from harness.attention.verdicts.calibrated import (
        calibrated_verdict,
        choose_count,
        reading_rungs,
    )
    from harness.engine.scoring import Scorer

    model, tokenizer, ids = built.model, built.tokenizer, built.id_instances
    validation = p.ood_instances(seed=2 * seed + 1)[::every]
    test = p.ood_instances(seed=2 * seed + 2)[::every]
    ranking, offset = rank_lookup(model, tokenizer, ids, batch_size=32)
    shift = offset["offset"]
    read = Lookup.of(ranking, offset)
    covering = max((ranking.order.index(h) + 1 for h in ranking.lookup()), default=0)
    ladder = dict(cm.LADDER)

    def curve(n, instances, id_instances=(), **controls):
        return run_dose_ladder(
            model, tokenizer, None, read, n, instances, id_instances, **ladder, **controls
        )

    by_count = {
        n: curve(n, validation, ids, pointer_shifts=(), draws=0)
        for n in sorted({min(n, ranking.total) for n in (*counts, covering) if n})
    }
    n, summary = choose_count(by_count, lookup=covering)
    gains = any(v is not None for v in summary.values())
    heads = ranking.top(n) if gains or not ranking.lookup() else ranking.lookup()

    def where(instances):
        records = score_settings(model, tokenizer, instances, [BASELINE], None, batch_size=32)
        return diagnosis.where_errors_look(
            Scorer(model, tokenizer, batch_size=32),
            instances,
            records[BASELINE.name],
            heads,
            shift=shift,
            level=diagnosis.id_levels(ranking, heads, shift),
        )

    kinds = where(validation)["instance_kinds"]
    by_kind = {
        kind: with_id_of(
            curve(
                n,
                [x for x in validation if kinds[str(x.index)] == kind],
                draws=0,
                pointer_shifts=(),
            ),
            by_count[n],
        )
        for kind in sorted(set(kinds.values()))
    }
    rungs = reading_rungs(by_count[n], by_kind)
    tested = curve(n, test, ids, draws=cm.DRAWS, controlled=rungs)
    found = where(test)
    return {
        "verdict": calibrated_verdict(by_count[n], tested, found, by_kind),
        "unsplit": calibrated_verdict(by_count[n], tested, found),
        "n": n,
        "rungs": rungs,
        "validation": by_count[n],
        "by_kind": by_kind,
        "diagnosis": found,
        "validation_kinds": {k: sum(1 for v in kinds.values() if v == k) for k in by_kind},
        "test": tested,
    }
