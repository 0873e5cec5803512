"""Reinforce (or knock out) the reference attention of chosen heads while a model answers.

    from harness.attention.interventions import score_settings
    records = score_settings(model, tokenizer, instances, [setting, ...], ranking)
    records["top4-C1"][0]   # {'index', 'length', 'prediction', 'exact_match', 'partial_acc', ...}

For each batch the answers come from free-running, KV-cached greedy generation with the
intervention active at every generated token (the i-th generated token is predicted by the
query at `prompt_width + i - 1`, which uses reference row i of the gold instance), and the
teacher-forced token accuracy from one forward over prompt + gold answer with the same
intervention. The heads come from a `HeadRanking` (top, bottom) or are drawn at random; the
cells are the reference (optionally `ref + shift`) or, for the positions control, as many
random non-reference keys per row. One prefill of the prompt (all but its last token, a part
no setting changes: no reference row lies there) is computed once per batch and copied for
every setting (`harness.engine.prefill.setting_groups`, which runs the groups and their
passes; this module says what each group's plan is and reads its records), and continued by
both passes: the generation and the teacher-forced forward each forward only a row's last
prompt column and its answer (the forced pass used to forward every row's whole prompt
again). The settings of
a batch run together, as nnsight batches its invokes: one generation (and one
teacher-forced forward) whose rows are instances x settings, each row under its own setting
(a per-row capture `Intervention`), up to `MAX_ROWS` rows; `batched=False` runs one
generation per setting instead, with the same records. `generate=False` runs the
teacher-forced forward alone (teacher-forced records: the dose ladder,
`harness.attention.dose`), continuing the same shared prefill. The `other` heads are drawn
outside the top n (`other_seeds` gives seeds whose head sets differ), and never from the
heads that look up in distribution (`other_pool`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from harness.attention.controls import id_norms, restore_levels
from harness.attention.heads import HeadRanking, causal_valid, shift_mask
from harness.attention.sweep import Setting
from harness.engine.modes import MODES

MAX_ROWS = 256  # rows (instances x settings) of one batched generation


def select_heads(setting: Setting, ranking: HeadRanking) -> list[tuple[int, int]]:
    """The (layer, head) pairs a setting acts on."""
    if setting.is_baseline:
        return []
    if setting.n > ranking.total:
        raise ValueError(f"n must be <= {ranking.total} (the model's heads), got {setting.n}")
    if setting.heads == "top":
        return ranking.top(setting.n)
    if setting.heads == "bottom":
        return ranking.bottom(setting.n)
    every = [(la, h) for la in range(ranking.num_layers) for h in range(ranking.num_heads)]
    if setting.heads == "other":
        others = other_pool(ranking, setting.n)
        if setting.n > len(others):
            raise ValueError(
                f"n must be <= {len(others)} for heads='other' (the heads outside the top "
                f"{setting.n} that do not look up in distribution), got {setting.n}"
            )
        return sorted(others[i] for i in _other_draw(len(others), setting.n, setting.seed))
    # A string seed is hashed the same way in every process (random's SHA-512 path).
    return sorted(random.Random(f"heads/{setting.seed}").sample(every, setting.n))


def other_pool(ranking: HeadRanking, n: int) -> list[tuple[int, int]]:
    """The heads an `other` setting draws from, in (layer, head) order: outside the top n,
    and not among the heads that look up in distribution (`HeadRanking.lookup`: a redundant
    partner of a lookup head would gain as much as the ranked one, so it is no control).
    Where fewer than n heads would be left (a model whose heads all weigh the reference
    alike, such as an untrained one, has no lookup heads to set apart), the heads outside the
    top n."""
    every = [(la, h) for la in range(ranking.num_layers) for h in range(ranking.num_heads)]
    outside = [pair for pair in every if pair not in set(ranking.top(n))]
    lookup = set(ranking.lookup())
    kept = [pair for pair in outside if pair not in lookup]
    return kept if len(kept) >= n else outside


def _other_draw(count: int, n: int, seed: int) -> list[int]:
    """The indices (into the sorted heads outside the top n, `count` of them) of the `n`
    heads that an `other` setting with `seed` draws: they depend on (count, n, seed) only."""
    return sorted(random.Random(f"other/{seed}").sample(range(count), n))


def other_seeds(
    total: int, n: int, draws: int, max_tries: int = 10_000, pool: int | None = None
) -> dict[str, Any]:
    """Seeds of `draws` `other` settings (heads drawn outside the top n of a model with
    `total` heads) whose head sets all differ: the first seeds 0, 1, ... that give a new
    set. When fewer distinct sets exist (C(pool, n) < draws, a model with few heads),
    all of them: {"seeds", "requested", "available" (how many distinct sets exist),
    "exhausted" (True when every distinct set is used and that is fewer than requested)}."""
    import math

    if draws < 0:
        raise ValueError(f"draws must be >= 0, got {draws}")
    if not 1 <= n <= total:
        raise ValueError(f"n must be in 1..{total} (the model's heads), got {n}")
    pool = total - n if pool is None else pool  # the heads drawn from (`other_pool`)
    available = math.comb(pool, n)  # 0 when fewer than n heads are left to draw from
    wanted = min(draws, available)
    seeds: list[int] = []
    seen: set[tuple[int, ...]] = set()
    for seed in range(max_tries):
        if len(seeds) == wanted:
            break
        drawn = tuple(_other_draw(pool, n, seed))
        if drawn not in seen:
            seen.add(drawn)
            seeds.append(seed)
    return {
        "seeds": seeds,
        "requested": draws,
        "available": available,
        "exhausted": available < draws,
    }


def heads_tensor(pairs: Sequence[tuple[int, int]], num_layers: int, num_heads: int):
    import torch

    mask = torch.zeros(num_layers, num_heads, dtype=torch.bool)
    for layer, head in pairs:
        mask[layer, head] = True
    return mask


def random_positions(reference, allowed_keys, seed: int, avoid=None):
    """bool [batch, L, L]: per query row with r reference keys, r keys drawn uniformly from
    the keys it may attend (`allowed_keys` [batch, L], causal) that are not references
    (nor in `avoid`, e.g. the unshifted reference when `reference` is ref + k).

    The positions control: the same heads, the same C, the same number of cells per row,
    none of them a reference. Rows with fewer candidates than references get them all.
    """
    import torch

    batch, length, _ = reference.shape
    candidates = causal_valid(torch.ones_like(reference), allowed_keys) & ~reference
    if avoid is not None:
        candidates &= ~avoid
    counts = reference.sum(-1, keepdim=True)  # [b, q, 1]
    generator = torch.Generator().manual_seed(int(seed))
    noise = torch.rand(reference.shape, generator=generator)
    noise = noise.masked_fill(~candidates, -1.0)
    # Rank of every key among its row's candidates by the noise: keep the first `counts`.
    rank = noise.argsort(-1, descending=True).argsort(-1)
    return (rank < counts) & candidates


def intervention_for(setting: Setting, ranking: HeadRanking, reference, allowed_keys):
    """A capture `Intervention` for `setting` on one batch, or None for the baseline."""
    from harness.engine.capture import Intervention

    if setting.is_baseline:
        return None
    heads = heads_tensor(select_heads(setting, ranking), ranking.num_layers, ranking.num_heads)
    cells = causal_valid(shift_mask(reference, setting.shift), allowed_keys)
    if setting.positions == "random":
        cells = random_positions(cells, allowed_keys, setting.seed, avoid=reference)
    # A mode that reads levels (restore) gets each head's ID level at the setting's cells;
    # one that reads norms (rescale) each head's ID output norm.
    reads = MODES[setting.mode].reads
    levels = restore_levels(ranking, setting.shift) if "levels" in reads else None
    norms = id_norms(ranking) if "norms" in reads else None
    return Intervention(
        heads=heads,
        strength=setting.strength,
        mode=setting.mode,
        levels=levels,
        norms=norms,
        threshold=setting.threshold,
        renormalise=setting.renormalise,
        # The row predicting target[0] is the last prompt row: it is reinforced too (the
        # prefix before it has no reference rows, so nothing else in the prompt changes).
        prefill=True,
        positions=cells,
    )


def per_row_intervention(interventions, rows: int, reference):
    """One capture `Intervention` carrying one setting per row, for `rows` instances each
    repeated once per setting (row `b * S + s` is instance b under setting s); None when no
    setting intervenes. A baseline row selects no head, so nothing changes in it."""
    import torch

    from harness.engine.capture import Intervention

    real = [iv for iv in interventions if iv is not None]
    if not real:
        return None
    count = len(interventions)
    shape = tuple(real[0].heads.shape)
    none = torch.zeros(shape, dtype=torch.bool)

    def rows_of(values):  # per setting -> instance-major rows
        return [v for _ in range(rows) for v in values]

    heads = torch.stack(rows_of([iv.heads if iv else none for iv in interventions]))
    # Cells per setting ([rows, L, L]; a baseline's are never used), instance-major.
    cells = [iv.positions if iv is not None else reference for iv in interventions]
    positions = torch.stack(cells, dim=1)  # [rows, S, L, L]

    def per_head(name):  # a restore's levels, a rescale's norms: other rows never read them
        if all(getattr(iv, name) is None for iv in real):
            return None
        zero = torch.zeros(shape)
        given = [getattr(iv, name) if iv is not None else None for iv in interventions]
        return torch.stack(rows_of([zero if v is None else v for v in given]))

    return Intervention(
        heads=heads,
        strength=torch.tensor(rows_of([float(iv.strength) if iv else 0.0 for iv in interventions])),
        mode=tuple(rows_of([iv.mode if iv else "standard" for iv in interventions])),
        threshold=torch.tensor(
            rows_of([float(iv.threshold) if iv else 0.0 for iv in interventions])
        ),
        renormalise=torch.tensor(
            rows_of([bool(iv.renormalise) if iv else False for iv in interventions])
        ),
        prefill=any(iv.prefill for iv in real),
        positions=positions.reshape(rows * count, *positions.shape[2:]),
        levels=per_head("levels"),
        norms=per_head("norms"),
    )


def score_batch(
    model,
    char_tok,
    chunk: Sequence[Any],
    encodings,
    settings: Sequence[Setting],
    ranking: HeadRanking | None,
    teacher_forced: bool = True,
    reuse_prefill: bool = True,
    batched: bool = True,
    generate: bool = True,
) -> dict[str, list[dict[str, Any]]]:
    """Records of one batch under every setting. `batched`: all settings in one generation
    (and one teacher-forced forward) whose rows are instances x settings, one setting per
    row; else one generation per setting. The records are the same either way.

    `generate=False`: the teacher-forced forward alone (no generation; the shared prefill
    continued), with
    records {config, index, length, target_len, tf_token_acc, tf_exact (every target
    character right; the EOS row is not a character), tf_prediction (the argmax, decoded one
    token per target position: a list of strings, the tokenizer's text for a special
    token)}: a dose ladder's settings cost one forward per batch. The engine runs the passes
    (`harness.engine.prefill.setting_groups`: the groups, the shared prefill, its copies);
    this says what each group's plan is and reads its records."""
    from harness.engine.prefill import setting_groups
    from harness.engine.scoring import Scorer, collate_left

    for setting in settings:
        if not setting.is_baseline and ranking is None:
            raise ValueError(f"setting {setting.name} needs a head ranking")
    if not generate and not teacher_forced:
        raise ValueError(
            "generate=False scores the teacher-forced pass: teacher_forced must be True"
        )
    scorer = Scorer(model, char_tok)
    full = collate_left(encodings, char_tok.pad_id, with_answer=True)
    reference = full.reference_mask()
    # Keys a query may use: the prompt's real tokens, and every answer column (in
    # generation those hold what the model wrote; in teacher forcing the gold answer).
    allowed = full.attention_mask.bool().clone()
    allowed[:, full.prompt_width :] = True
    interventions = [
        intervention_for(s, ranking, reference, allowed) if ranking else None for s in settings
    ]

    def plan_of(members: list[int]):
        return _group_plan([interventions[i] for i in members], reference, len(encodings))

    # Settings per pass: all of them (rows = instances x settings) up to MAX_ROWS rows, so
    # that a large grid does not hold one huge KV cache; unbatched, one at a time.
    per_group = max(1, MAX_ROWS // len(encodings)) if batched else 1
    groups = setting_groups(
        scorer,
        encodings,
        len(settings),
        plan_of,
        per_group=per_group,
        generate=generate,
        teacher_forced=teacher_forced,
        reuse_prefill=reuse_prefill,
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for group in groups:
        for s, index in enumerate(group.members):
            rows = [(x, enc, group.row(b, s)) for b, (x, enc) in enumerate(zip(chunk, encodings))]
            if generate:
                records = [_answer_record(scorer, x, enc, group, row) for x, enc, row in rows]
            else:
                records = [
                    _forced_record(scorer, x, enc, group.forced, row) for x, enc, row in rows
                ]
            out[settings[index].name] = records
    return out


def _group_plan(interventions, reference, instances: int):
    """The capture plan of one group of settings: one setting's own intervention, or one
    per row (`per_row_intervention`) over the instances repeated once per setting."""
    from harness.engine.capture import AttentionPlan

    if len(interventions) == 1:
        return AttentionPlan(reference=reference, head_mass=False, intervention=interventions[0])
    iv = per_row_intervention(interventions, instances, reference)
    repeated = reference.repeat_interleave(len(interventions), dim=0)
    return AttentionPlan(reference=repeated, head_mass=False, intervention=iv)


def _answer_record(scorer, instance, encoding, group, row: int) -> dict[str, Any]:
    """The free-running record of one row (and its teacher-forced token accuracy, when the
    group was forced too)."""
    from harness.engine.scoring import token_accuracy

    answer = scorer.answer_record(instance, encoding, group.generation.ids[row])
    record = {
        "config": answer["config"],
        "index": answer["index"],
        "length": answer["length"],
        "target_len": encoding.target_len,
        "prediction": answer["prediction"],
        "exact_match": answer["exact_match"],
        "partial_acc": answer["partial_acc"],
    }
    if group.forced is not None:
        record["tf_token_acc"] = token_accuracy(group.forced.correct[row])
    return record


def _forced_record(scorer, instance, encoding, forced, row: int) -> dict[str, Any]:
    """The teacher-forced record of one row (`score_batch` with generate=False)."""
    from harness.engine.scoring import token_accuracy

    correct = forced.correct[row]
    return {
        "config": instance.config,
        "index": instance.index,
        "length": scorer.length(instance),
        "target_len": encoding.target_len,
        "tf_token_acc": token_accuracy(correct),
        "tf_exact": all(correct),
        "tf_prediction": [scorer.char_tok.decode([t]) for t in forced.predicted[row]],
    }


def score_settings(
    model,
    tokenizer,
    instances: Sequence[Any],
    settings: Sequence[Setting],
    ranking: HeadRanking | None = None,
    prompt=None,
    batch_size: int = 16,
    teacher_forced: bool = True,
    reuse_prefill: bool = True,
    on_batch: Callable[[int], None] | None = None,
    batched: bool = True,
    generate: bool = True,
) -> dict[str, list[dict[str, Any]]]:
    """Per-instance records of every setting on `instances` (same instances, same order,
    so any two settings pair up for `harness.foundation.stats.gain_table`). `batched`: every setting
    of a batch in one generation (rows = instances x settings), else one per setting.
    `generate=False`: the teacher-forced forward only, with teacher-forced records
    (`score_batch`)."""
    from harness.engine.scoring import Scorer

    names = [s.name for s in settings]
    if len(set(names)) != len(names):
        raise ValueError(f"settings must be distinct, got {names}")
    scorer = Scorer(model, tokenizer, prompt, batch_size)
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in names}

    def one_batch(chunk, encodings):
        batch = score_batch(
            model,
            scorer.char_tok,
            chunk,
            encodings,
            settings,
            ranking,
            teacher_forced,
            reuse_prefill,
            batched,
            generate=generate,
        )
        for name, rows in batch.items():
            out[name].extend(rows)

    scorer.run(instances, one_batch, on_batch)
    return out
