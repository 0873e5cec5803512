"""Calibration models that behave like real ones: hand-set Llamas whose mechanism is known by
construction, with the properties the planted models of tests/planted.py lack.

    from tests.calibration_models import MODELS, build
    spec = MODELS["dilution_keeps_writing"]
    model, tokenizer, id_instances, ood_instances, truth = build(spec)
    spec.verdict            # "nudge-repairable": the verdict its construction implies
    spec.why                # why that verdict is the right one

They reuse tests/planted.py's geometry (string reversal on characters that name their
positions, content lookup in the RoPE pairs that barely rotate, an output channel the
unembedding reads with gain g against a default token) and add what real models do:
- keep writing after the first error: the default token of a failed row is a junk character
  J (name 63, in no prompt), not the end of the answer. A small MLP tells a lookup that found
  its key weakly (J wins) from one that found nothing (the last row of a right answer: EOS
  wins); J's own query asks for nothing, so every later row attends uniformly and writes J
  again: the later rows read the model's own wrong characters and have nothing to look up;
- a slip to a character that is also elsewhere in the text: names share slots modulo 11 and
  the *smallest* name of a slot wins, so row i >= 11 finds name i - 11, which sits in the
  prompt and, already written, in the answer: the weight splits between the two copies;
- two redundant lookup heads, each writing half of the copy;
- a decoy head ranked first: it looks at the reference more sharply than the lookup, at every
  length, and writes nothing;
- a model that does not fail; a model whose OOD failures are half dilution and half a broken
  readout (which one depends on the variant of the character due at the first OOD name);
- a dilution on a task whose reference never holds the answer: the answer is the other
  variant of the referenced character (a task of its own, `partner_task`, registered only
  while its model is judged);
- a lookup that reads ref+1 (shift 1), which the tool must find without being told.

Every model is built in well under a second; `tests/harness/test_calibration.py` runs each
through the calls `attentionspan reproduce` makes and checks the verdict against `verdict`.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

from tests import planted as p

JUNK = p.char_of(p.NAMES - 1, 0)  # name 63: in no prompt (lengths <= 50)
# keep writing: the MLP's threshold on a character's copied mass, its gain, and the junk
# token's constant logit and self-continuation bonus (module docstring; numbers in _junk_mlp)
FOUND_THRESHOLD = 0.5
FOUND_GAIN = 20.0
MLP_SHARPNESS = 100.0
JUNK_BONUS = 10.0
DECOY_KAPPA = 12.0
NO_FAILURE_KAPPA = 10.0


@dataclass(frozen=True)
class Spec:
    """One calibration model: its mechanism (as tests/planted.py's, plus `repeat_slip`,
    `none` and `mixed`), the offset its lookup reads, its extra properties, and the verdict
    its construction implies with the reason."""

    name: str
    mechanism: str
    verdict: str
    why: str
    shift: int = 0
    keep_writing: bool = False
    redundant: bool = False
    decoy: bool = False
    kinds: tuple[str, ...] = ()  # for a mixed failure: the kinds the verdict must name
    partner: bool = False  # the answer is the other variant of the referenced character


def _specs() -> dict[str, Spec]:
    repair = (
        "the lookup finds the right key at every length, with less weight among more keys; "
        "a small push at the key it reads restores the weight over the readout's threshold, "
        "a push elsewhere is not followed at that dose, other heads do nothing, ID holds"
    )
    slip = (
        "OOD rows find an alias key (a name sharing the reference's slot) and copy it: the "
        "lookup is misdirected; the rest of the model computes right on what it reads"
    )
    downstream = (
        "the lookup puts ~all its weight on the right key at every length; the unembedding "
        "writes the other variant of names >= 10: the failure is after the lookup"
    )
    no_lookup = (
        "the copy head attends uniformly (no key stands out) and a bigram guesses the name; "
        "a push anywhere makes the model write what is there"
    )
    specs = [
        Spec("dilution", "dilution", "nudge-repairable", repair),
        Spec("dilution_ref+1", "dilution", "nudge-repairable", repair + " (at ref+1)", shift=1),
        Spec(
            "dilution_keeps_writing",
            "dilution",
            "nudge-repairable",
            repair + "; after its first error it writes junk whose rows find nothing: only "
            "the first error of each instance tells where the failure is",
            keep_writing=True,
        ),
        Spec(
            "dilution_keeps_writing_ref+1",
            "dilution",
            "nudge-repairable",
            repair + " (at ref+1, keeps writing junk after its first error)",
            shift=1,
            keep_writing=True,
        ),
        Spec(
            "dilution_redundant",
            "dilution",
            "nudge-repairable",
            repair + "; two heads carry the lookup, each writes half: N must hold both, and "
            "no random draw may be one of them",
            redundant=True,
        ),
        Spec(
            "dilution_decoy",
            "dilution",
            "nudge-repairable",
            repair + "; a decoy head ranked first looks at the reference more sharply and "
            "writes nothing: pushing it alone gains nothing",
            decoy=True,
        ),
        Spec(
            "dilution_redundant_ref+1",
            "dilution",
            "nudge-repairable",
            repair + " (two heads at ref+1)",
            shift=1,
            redundant=True,
        ),
        Spec(
            "dilution_redundant_decoy_keeps_writing",
            "dilution",
            "nudge-repairable",
            repair + "; a decoy ranked first, two heads sharing the lookup, and junk written "
            "after the first error: every property at once",
            keep_writing=True,
            redundant=True,
            decoy=True,
        ),
        Spec(
            "dilution_answer_not_at_the_reference",
            "dilution",
            "nudge-repairable",
            repair + "; the task's answer is the other variant of the referenced character, so "
            "the reference never holds the answer: a push there cannot hand the answer over, "
            "and a shifted push is followed only by writing the other variant of what is there",
            partner=True,
        ),
        Spec("slip", "slip", "misdirected lookup", slip),
        Spec("slip_ref+1", "slip", "misdirected lookup", slip + " (at ref+1)", shift=1),
        Spec(
            "slip_to_a_repeated_character",
            "repeat_slip",
            "misdirected lookup",
            slip + "; the alias sits twice in the text (the prompt, and the answer already "
            "written): the weight splits between the two copies of the character it writes",
        ),
        Spec("no_lookup", "no_lookup", "no lookup", no_lookup),
        Spec("downstream", "downstream", "downstream", downstream),
        Spec("downstream_ref+1", "downstream", "downstream", downstream + " (at ref+1)", shift=1),
        Spec(
            "no_failure",
            "none",
            "no failure",
            "a sharp lookup and a right readout at every length: no OOD answer is wrong",
        ),
        Spec(
            "dilution_and_downstream",
            "mixed",
            "mixed failure",
            "from name 10 on, keys of variant 0 are found weakly (a dilution a push repairs) "
            "and characters of variant 1 are written crossed (a readout failure): the first "
            "OOD error of about half the instances is each kind",
            kinds=("diluted", "on_reference"),
        ),
    ]
    return {s.name: s for s in specs}


MODELS = _specs()


def _junk_mlp(model, layout, block, tau: float, gain: float) -> None:
    """Keep writing: logit(J) = j0 + FOUND_GAIN x sum_c relu(out(c) - FOUND_THRESHOLD) (an
    MLP unit per character, silu with a steep gate) + JUNK_BONUS when the current token is J;
    logit(EOS) = j0 + 1. j0 is set so that the copied character beats J exactly at mass tau:
    a weakly found key (mass in [0.55, tau)) writes J, a key not found at all (every mass <=
    0.5) writes EOS, and J, once written, is written again."""
    import torch

    j0 = gain * tau - FOUND_GAIN * (tau - FOUND_THRESHOLD)
    hidden = layout.hidden
    mlp = block.mlp
    units = [t for c, t in layout.chars.items() if c != JUNK]
    found = layout.prev(layout.chars[JUNK])  # a residual dimension nothing else writes
    with torch.no_grad():
        mlp.gate_proj.weight.zero_()
        mlp.up_proj.weight.zero_()
        mlp.down_proj.weight.zero_()
        assert mlp.gate_proj.weight.shape == (len(units) + 1, hidden)
        for u, t in enumerate(units):
            mlp.gate_proj.weight[u, layout.out(t)] = MLP_SHARPNESS
            mlp.gate_proj.weight[u, layout.anchor] = -MLP_SHARPNESS * FOUND_THRESHOLD / p.ANCHOR
            mlp.up_proj.weight[u, layout.anchor] = 1.0 / p.ANCHOR
            mlp.down_proj.weight[found, u] = FOUND_GAIN / MLP_SHARPNESS
        w = model.lm_head.weight
        junk = layout.chars[JUNK]
        w[junk, found] = 1.0
        w[junk, layout.anchor] = j0 / p.ANCHOR
        w[junk, layout.tok(junk)] = JUNK_BONUS
        w[layout.eos, layout.anchor] = (j0 + 1.0) / p.ANCHOR


def build(spec: Spec | str) -> p.Planted:
    """(model, tokenizer, id_instances, ood_instances, truth) of one calibration model."""
    import torch

    if isinstance(spec, str):
        if spec not in MODELS:
            raise ValueError(f"model must be one of {', '.join(MODELS)}, got {spec!r}")
        spec = MODELS[spec]
    char_tok = p.planted_tokenizer()
    layout = p._Layout(char_tok)
    layers = 1 + spec.shift
    model = _blank(char_tok, layout, layers, spec.keep_writing)
    layer = spec.shift
    source = layout.prev if spec.shift else layout.tok
    head = (layer, p.MECHANISM_HEAD)
    partner_head = (layer, 3)
    decoy_head = (layer, 0)
    previous = ((0, p.PREVIOUS_HEAD),) if spec.shift else ()
    used = {head, *previous}
    if spec.redundant:
        used.add(partner_head)
    if spec.decoy:
        used.add(decoy_head)

    def identity(n: int) -> int:
        return n

    def alias(n: int) -> int:
        return n % p.SLIP_PERIOD

    def one(n: int) -> float:
        return 1.0

    def furthest(n: int) -> float:
        return p.SLIP_BASE + p.SLIP_SLOPE * n

    def nearest(n: int) -> float:  # the smallest name of a slot wins
        return p.SLIP_BASE + p.SLIP_SLOPE * (p.NAMES - n)

    kappa, slot_of, weight, tau, crossed = p.DILUTION_KAPPA, identity, one, p.DILUTION_TAU, None
    if spec.mechanism == "slip":
        kappa, slot_of, weight, tau = 1.0, alias, furthest, p.SHARP_TAU
    elif spec.mechanism == "repeat_slip":
        kappa, slot_of, weight, tau = 1.0, alias, nearest, p.SHARP_TAU
    elif spec.mechanism == "downstream":
        kappa, tau, crossed = p.DOWNSTREAM_KAPPA, p.SHARP_TAU, p.LIMIT
    elif spec.mechanism == "none":
        kappa, tau = NO_FAILURE_KAPPA, p.SHARP_TAU
    elif spec.mechanism == "mixed":  # sharp keys but variant 0 from name 10 (_mixed_keys)
        kappa = p.DOWNSTREAM_KAPPA
    with torch.no_grad():
        for at, block in enumerate(model.model.layers):
            for h in range(p.NUM_HEADS):
                if (at, h) not in used:
                    p._sink_head(block.self_attn, layout, h)
        if spec.shift:
            p._previous_token_head(model.model.layers[0].self_attn, layout, p.PREVIOUS_HEAD)
        attn = model.model.layers[layer].self_attn
        if spec.mechanism == "no_lookup":
            return _no_lookup(model, char_tok, layout, attn, source, spec, head)
        heads = [head, partner_head] if spec.redundant else [head]
        for h in heads:
            _lookup(attn, layout, h[1], source, slot_of, weight, kappa, 1.0 / len(heads))
        if spec.mechanism == "mixed":
            _mixed_keys(attn, layout, source)
            crossed = p.LIMIT
        if spec.decoy:
            # same keys, a sharper query, and an output nobody reads (o_proj stays 0)
            _lookup(attn, layout, decoy_head[1], source, slot_of, weight, DECOY_KAPPA, 0.0)
        if spec.partner:  # every character written as its other variant
            crossed = 0
        _readout(model, layout, p.COPY_GAIN, p.COPY_GAIN * tau, crossed, spec.mechanism)
        if spec.keep_writing:
            _junk_mlp(model, layout, model.model.layers[layer], tau, p.COPY_GAIN)
    truth = p.Truth(
        spec.mechanism if spec.mechanism in p.MECHANISMS else "dilution",
        spec.shift,
        lookup_heads=tuple(heads if spec.mechanism != "no_lookup" else ()),
        copy_heads=tuple(heads),
        previous_token_heads=previous,
        tau=tau,
        repairable=spec.verdict == "nudge-repairable",
    )
    ids, oods = p.id_instances(), p.ood_instances()
    if spec.partner:
        ids, oods = partner_instances(ids), partner_instances(oods)
    return p.Planted(model, char_tok, ids, oods, truth)


# --- a task whose reference never holds the answer ---------------------------------------------
PARTNER_TASK = "calibration_partner_reversal"


def partner_oracle(visible: list, params: dict, i: int) -> str:
    """The partner task's function: the other variant of the referenced character (string
    reversal's reference, a name character)."""
    char = visible[params["length"] - 1 - i]
    if char is None or char == p.SEPARATOR:
        raise ValueError("no name character there")
    return p.partner(char)


def partner_instances(instances):
    """The instances with the partner task's answers: each target character's other
    variant (the reference is unchanged, and never holds the answer)."""
    import dataclasses

    return [
        dataclasses.replace(x, task=PARTNER_TASK, target="".join(map(p.partner, x.target)))
        for x in instances
    ]


@contextlib.contextmanager
def partner_task():
    """The partner task registered while the block runs (the oracle the ladder's pointers
    and the diagnosis read), and removed after it: no other test sees it."""
    from dataclasses import dataclass as make_dataclass

    from attentionspan_datasets.tasks import base
    from attentionspan_datasets.tasks.string_reversal import ReversalConfig, generate

    if PARTNER_TASK in base.TASKS:
        yield
        return

    @make_dataclass
    class PartnerConfig(ReversalConfig):
        pass

    base.register_task(PARTNER_TASK, PartnerConfig, generate, partner_oracle)
    try:
        yield
    finally:
        del base.TASKS[PARTNER_TASK]


def _blank(char_tok, layout, layers: int, mlp: bool):
    """tests/planted.py's blank model, with an MLP wide enough for `_junk_mlp` when asked."""
    if not mlp:
        return p._blank_model(char_tok, layout, layers)
    import torch
    from transformers import LlamaForCausalLM

    base = p._blank_model(char_tok, layout, layers)
    config = base.config
    config.intermediate_size = len(layout.chars)  # a unit per character but J
    model = LlamaForCausalLM(config)
    model.set_attn_implementation("eager")
    state = {k: v for k, v in base.state_dict().items() if ".mlp." not in k}
    model.load_state_dict(state, strict=False)
    with torch.no_grad():
        for block in model.model.layers:
            for proj in (block.mlp.gate_proj, block.mlp.up_proj, block.mlp.down_proj):
                proj.weight.zero_()
    return model.eval()


def _lookup(attn, layout, h, source, slot_of, key_weight, kappa, write: float) -> None:
    """tests/planted.py's lookup head, its output scaled by `write` (0: writes nothing)."""
    q, k, base = attn.q_proj.weight, attn.k_proj.weight, h * p.HEAD_DIM
    gain = kappa * math.sqrt(p.HEAD_DIM)
    q[base + p._slot(slot_of(0)), layout.tok(layout.separator)] = gain
    for char, t in layout.chars.items():
        n = p.name_of(char)
        if n + 1 < p.NAMES:
            q[base + p._slot(slot_of(n + 1)), layout.tok(t)] = gain
        k[p._slot(slot_of(n)), source(t)] = key_weight(n)
    p._values(attn, layout, source)
    if write:
        for t in p.written(layout):  # not the values' shared component (p.MEAN_VALUE)
            attn.o_proj.weight[layout.out(t), h * p.HEAD_DIM + layout.value(t)] = write


def _mixed_keys(attn, layout, source) -> None:
    """Keys of variant 0 from name 10 on answer with half the weight: a score of 5 (the
    planted dilution's), so their mass falls under tau out of distribution only."""
    for char, t in layout.chars.items():
        n = p.name_of(char)
        if n >= p.LIMIT and (ord(char) - p.FIRST_CHAR) % 2 == 0:
            attn.k_proj.weight[p._slot(n), source(t)] = 0.5


def _readout(model, layout, gain, eos, crossed_from, mechanism) -> None:
    """logit(c) = gain x out(c) (crossed for names >= crossed_from; in a mixed model, only
    variant 1 is crossed); logit(EOS) = eos."""
    w = model.lm_head.weight
    for char, t in layout.chars.items():
        n = p.name_of(char)
        cross = crossed_from is not None and n >= crossed_from
        if mechanism == "mixed":
            cross = cross and (ord(char) - p.FIRST_CHAR) % 2 == 1
        w[layout.chars[p.partner(char)] if cross else t, layout.out(t)] = gain
    w[layout.eos, layout.anchor] = eos / p.ANCHOR


def _no_lookup(model, char_tok, layout, attn, source, spec, head):
    """tests/planted.py's no_lookup: a uniform copy head and a bigram prior."""
    p._values(attn, layout, source)
    p._write(attn, layout, head[1], layout.out)
    p._readout(model, layout, p.NO_LOOKUP_GAIN, p.NO_LOOKUP_EOS)
    w = model.lm_head.weight
    for char, t in layout.chars.items():
        n = p.name_of(char)
        if n == 0:
            w[t, layout.tok(layout.separator)] = p.NO_LOOKUP_BIGRAM
        elif n < p.LIMIT:
            for v in (0, 1):
                w[t, layout.tok(layout.chars[p.char_of(n - 1, v)])] = p.NO_LOOKUP_BIGRAM
    truth = p.Truth("no_lookup", spec.shift, lookup_heads=(), copy_heads=(head,))
    return p.Planted(model, char_tok, p.id_instances(), p.ood_instances(), truth)


# --- the calls `attentionspan reproduce` makes --------------------------------------------------
LADDER = {"doses": (0.1, 0.3, 1.0, 2.0), "batch_size": 32}
DRAWS = 3


def judge(
    built: p.Planted,
    counts=(1, 2, 4),
    seed: int = 0,
    every: int = 3,
    shift: int | None = None,
    count_sets=None,
) -> dict:
    """The calibrated verdict of one model through the calls `reproduce` makes, in its order:
    rank on ID finding the lookup's offset (`rank_lookup`, no --shift), the dose ladder of
    every count (the grid's, and the N that holds every lookup head) on OOD validation
    (reference and ID rungs), `choose_count` (ties go to the N holding every lookup head in
    distribution), the chosen N's ladder with its controls on OOD test, where the errors
    look (`where_errors_look`: the first wrong row of each instance, at the found offset,
    each lookup head against its own ID level; with no gain, the lookup heads in
    distribution), the verdict, then the push at the chosen dose free-running. `seed`: the
    OOD instances' seed (validation and test are two other seeds); `every`: keep every k-th
    OOD instance; `shift`: --shift (None: found). `count_sets`: other sets of counts a grid
    could sweep (each a subset of `counts`), judged from the same ladders: {"by_counts":
    {set: the verdict's word}} is added."""
    ids = built.id_instances
    validation = p.ood_instances(seed=2 * seed + 1)[::every]
    test = p.ood_instances(seed=2 * seed + 2)[::every]
    if ids[0].task == PARTNER_TASK:
        validation, test = partner_instances(validation), partner_instances(test)
        with partner_task():
            return _judge(built, ids, validation, test, counts, shift, count_sets)
    return _judge(built, ids, validation, test, counts, shift, count_sets)


def _judge(built, ids, validation, test, counts, shift, count_sets) -> dict:
    from harness.attention import diagnosis
    from harness.attention.dose import run_dose_ladder
    from harness.attention.heads import rank_lookup
    from harness.attention.interventions import score_settings
    from harness.attention.lookup import Lookup
    from harness.attention.sweep import BASELINE, Setting
    from harness.attention.verdicts.calibrated import calibrated_verdict, choose_count
    from harness.engine.scoring import Scorer

    model, tokenizer = built.model, built.tokenizer
    ranking, offset = rank_lookup(model, tokenizer, ids, shift=shift, batch_size=32)
    shift = offset["offset"]
    read = Lookup.of(ranking, offset)  # the value the pipeline passes its stages
    lookup = ranking.lookup()
    covering = max((ranking.order.index(h) + 1 for h in lookup), default=0)

    def capped(values):  # as reproduce: the grid's counts, and the N holding the lookup heads
        return sorted({min(int(n), ranking.total) for n in (*values, covering) if n})

    by_count = {
        n: run_dose_ladder(
            model,
            tokenizer,
            None,
            read,
            n,
            validation,
            ids,
            pointer_shifts=(),
            draws=0,
            output_scale=False,
            **LADDER,
        )
        for n in capped(counts)
    }
    baseline = score_settings(model, tokenizer, test, [BASELINE], None, batch_size=32)
    judged: dict[int, dict] = {}

    def at_count(n: int, summary) -> dict:
        if n in judged:
            return judged[n]
        curve = run_dose_ladder(model, tokenizer, None, read, n, test, ids, draws=DRAWS, **LADDER)
        gains = any(v is not None for v in summary.values())
        heads = ranking.top(n) if gains or not lookup else lookup
        found = diagnosis.where_errors_look(
            Scorer(model, tokenizer, batch_size=32),
            test,
            baseline["baseline"],
            heads,
            shift=shift,
            level=diagnosis.id_levels(ranking, heads, shift),
        )
        verdict = calibrated_verdict(by_count[n], curve, found)
        judged[n] = {"verdict": verdict, "diagnosis": found, "heads": heads}
        return judged[n]

    n, summary = choose_count(by_count, lookup=covering)
    out = at_count(n, summary)
    verdict = out["verdict"]
    repaired = None
    dose = verdict["numbers"]["dose"]
    if dose:
        push = Setting(heads="top", n=n, strength=dose["C"], shift=shift)
        free = score_settings(model, tokenizer, test, [BASELINE, push], ranking, batch_size=32)
        wrong = [i for i, r in enumerate(free["baseline"]) if not r["exact_match"]]
        fixed = [i for i in wrong if free[push.name][i]["exact_match"]]
        repaired = len(fixed) / len(wrong) if wrong else None
    result = {
        "verdict": verdict,
        "offset": offset,
        "n": n,
        "counts": summary,
        "lookup": lookup,
        "diagnosis": out["diagnosis"],
        "repaired": repaired,
    }
    if count_sets:
        result["by_counts"] = {}
        for chosen_set in count_sets:
            curves = {k: by_count[k] for k in capped(chosen_set)}
            k, sub = choose_count(curves, lookup=covering)
            result["by_counts"][tuple(chosen_set)] = at_count(k, sub)["verdict"]["verdict"]
    return result
