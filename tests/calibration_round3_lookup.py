"""Calibration models for whether a lookup exists before it is judged: hand-set Llamas, on
tests/planted.py's geometry (string reversal on characters that name their positions), each
with a property that used to fool the calibrated verdict or the offset profile.

    from tests.calibration_round3_lookup import MODELS, build, judge
    spec = MODELS["works_nowhere"]
    out = judge(build(spec), seed=0)
    out["verdicts"]         # {offset: the verdict there}: every lookup the run judges
    spec.verdicts           # {offset: the verdict its construction implies}
    spec.why                # why

- `works_nowhere`: two layers whose attention is uniform but for a previous-token head, and
  a readout that always ends the answer: it writes an empty answer on every instance. The
  previous-token head's whole weight lands on row 0's reference (its query is the
  separator, the key before it the last prompt character): ranked first at the reference,
  and every first wrong row (row 0) keeps its level there, so every instance read *on
  reference* and the verdict said *downstream*. Nothing works in distribution: no lookup.
- `uniform_heads`: every head of one layer spreads its weight evenly over the keys it may
  see; one copies what it sees and a bigram prior picks the name (tests/planted.py's
  no_lookup readout), so it works in distribution. Its heads weigh the reference and ref+1
  exactly as their null (0.095 each): a "near tie" judged two lookups of a model that has
  none.
- `previous_token_top`: tests/planted.py's two-layer no_lookup (a previous-token head in
  layer 0, a uniform copy head and a bigram in layer 1), judged without --shift: the
  previous-token head ranks first at the reference on row 0 alone (0.165 against a null of
  0.095) and was read as a lookup there.
- `split_lookup`: a lookup split across two offsets, each half writing half of the copy:
  layer 0's head reads the reference (its keys the token), layer 1's reads ref+1 (its keys
  the previous character, from layer 0's previous-token head). Both are sharp at every
  length and the readout writes the other variant of names >= 10 (a failure downstream of
  the lookup). The previous-token head's 0.165 at the reference made the top four heads
  there outweigh ref+1 past the 10% margin, so the ref+1 half was never judged; each half
  is judged, downstream at each.

The calls are those of tests/calibration_models.py's `judge` (the calls `reproduce`
makes), with the lookup's evidence (`Lookup.evidence`: each lookup head's ID level beside
its null) handed to the verdict as `harness.pipeline.lookup_stages.calibrated_verdict`
does, and the second candidate lookup (`heads.second_lookup`) judged at its offset as
`reproduce` does.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field

from tests import calibration_models as cm
from tests import planted as p

EMPTY_EOS = 10.0  # works_nowhere: EOS's logit; every character's is 0


@dataclass(frozen=True)
class Spec:
    name: str
    verdicts: dict[int, str]  # {offset: the verdict there}, one entry per lookup judged
    why: str
    layers: int = 1
    extra: dict = field(default_factory=dict)


MODELS: dict[str, Spec] = {
    s.name: s
    for s in (
        Spec(
            "works_nowhere",
            {0: "no lookup"},
            "the model writes an empty answer on every ID instance (ID exact match 0): there "
            "is no working lookup to judge; its top head is a previous-token head whose "
            "weight lands on row 0's reference by coincidence, and every first wrong row "
            "(row 0) keeps it, which read *on reference* and so *downstream*",
            layers=2,
        ),
        Spec(
            "uniform_heads",
            {0: "no lookup"},
            "every head spreads its weight evenly: each weighs the reference and ref+1 at "
            "exactly its null, so no head looks up and no offset ties with another; the "
            "model works in distribution through a bigram, not a lookup",
        ),
        Spec(
            "previous_token_top",
            {0: "no lookup"},
            "the previous-token head ranks first at the reference on row 0 alone (1 / mean "
            "answer length, under a quarter of the way from its null to all of the weight); "
            "the copy head is uniform: there is no lookup at any offset, found without "
            "--shift",
            layers=2,
        ),
        Spec(
            "split_lookup",
            {0: "downstream", 1: "downstream"},
            "half the lookup reads the reference, half ref+1, both sharp at every length, and "
            "the readout writes the other variant of names >= 10: at each offset the heads "
            "look where they do in distribution and the model still writes wrong; the "
            "previous-token head (0.165 at the reference) is not a lookup head and must not "
            "hide the ref+1 half",
            layers=2,
        ),
    )
}


def build(spec: Spec | str) -> p.Planted:
    """(model, tokenizer, id_instances, ood_instances, truth) of one model."""
    import torch

    if isinstance(spec, str):
        if spec not in MODELS:
            raise ValueError(f"model must be one of {', '.join(MODELS)}, got {spec!r}")
        spec = MODELS[spec]
    if spec.name == "previous_token_top":
        return p.build("no_lookup", 1)
    char_tok = p.planted_tokenizer()
    layout = p._Layout(char_tok)
    model = p._blank_model(char_tok, layout, spec.layers)
    previous = ((0, p.PREVIOUS_HEAD),) if spec.layers == 2 else ()
    with torch.no_grad():
        if previous:
            p._previous_token_head(model.model.layers[0].self_attn, layout, p.PREVIOUS_HEAD)
        if spec.name == "works_nowhere":
            # every other head's query is 0: uniform attention; nothing is written but EOS
            model.lm_head.weight[layout.eos, layout.anchor] = EMPTY_EOS / p.ANCHOR
            truth = p.Truth("no_lookup", 0, (), (), previous_token_heads=previous)
        elif spec.name == "uniform_heads":
            attn = model.model.layers[0].self_attn
            return cm._no_lookup(
                model,
                char_tok,
                layout,
                attn,
                layout.tok,
                cm.MODELS["no_lookup"],
                (0, p.MECHANISM_HEAD),
            )
        else:  # split_lookup
            truth = _split(model, layout)
    return p.Planted(model, char_tok, p.id_instances(), p.ood_instances(), truth)


def _split(model, layout) -> p.Truth:
    """Layer 0's head 2 reads the reference, layer 1's head 2 reads ref+1 (keys from the
    previous character), each sharp and writing half of the copy; every other head but the
    previous-token head sinks on BOS; names >= 10 are written crossed."""
    heads = ((0, p.MECHANISM_HEAD), (1, p.MECHANISM_HEAD))
    for at, block in enumerate(model.model.layers):
        for h in range(p.NUM_HEADS):
            if (at, h) not in heads and (at, h) != (0, p.PREVIOUS_HEAD):
                p._sink_head(block.self_attn, layout, h)
    for (at, h), source in zip(heads, (layout.tok, layout.prev)):
        attn = model.model.layers[at].self_attn
        cm._lookup(attn, layout, h, source, _same, _one, p.DOWNSTREAM_KAPPA, 0.5)
    cm._readout(model, layout, p.COPY_GAIN, p.COPY_GAIN * p.SHARP_TAU, p.LIMIT, "downstream")
    return p.Truth(
        "downstream",
        0,
        lookup_heads=heads,
        copy_heads=heads,
        previous_token_heads=((0, p.PREVIOUS_HEAD),),
        tau=p.SHARP_TAU,
    )


def _same(n: int) -> int:
    return n


def _one(n: int) -> float:
    return 1.0


# --- the calls `reproduce` makes, with the lookup's evidence -------------------------------------
@contextlib.contextmanager
def _with_evidence(evidence: dict):
    """tests/calibration_models.py's `judge` with the verdict given the lookup's evidence, as
    `harness.pipeline.lookup_stages.calibrated_verdict` gives it."""
    from unittest import mock

    from harness.attention.verdicts import calibrated

    rule = functools.partial(calibrated.calibrated_verdict, lookup=evidence)
    with mock.patch.object(calibrated, "calibrated_verdict", rule):
        yield


def judge(built: p.Planted, seed: int = 0, counts=(1, 2, 4)) -> dict:
    """Every lookup the run judges (its own, and the second candidate of a near tie or a
    split, `heads.second_lookup`), each through `calibration_models.judge` at its offset with
    the lookup's evidence: {"verdicts": {offset: word}, "first": ..., "second": ... or None,
    "lookups": {offset: Lookup}, "candidate": the second's record or None}."""
    from harness.attention.heads import rank_lookup, second_lookup
    from harness.attention.lookup import Lookup

    ranking, found = rank_lookup(built.model, built.tokenizer, built.id_instances, batch_size=32)
    first = Lookup.of(ranking, found)
    with _with_evidence(first.evidence):
        out = {"first": cm.judge(built, counts=counts, seed=seed)}
    out["lookups"] = {first.offset: first}
    candidate = second_lookup(ranking, first.offset)
    out["candidate"] = candidate
    out["second"] = None
    if candidate is not None:
        k = candidate["offset"]
        at, told = rank_lookup(
            built.model, built.tokenizer, built.id_instances, shift=k, batch_size=32
        )
        second = Lookup.of(at, {**told, "candidate": 2})
        with _with_evidence(second.evidence):
            out["second"] = cm.judge(built, counts=counts, seed=seed, shift=k)
        out["lookups"][k] = second
    out["verdicts"] = {
        first.offset: out["first"]["verdict"]["verdict"],
        **({candidate["offset"]: out["second"]["verdict"]["verdict"]} if candidate else {}),
    }
    return out
