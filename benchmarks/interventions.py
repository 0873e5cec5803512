"""Generation with an intervention against plain eager generation, and the shared prefill.

    python benchmarks/interventions.py [--model runs/rev/final] [--batch 32] [--repeats 5]
                                       [--heads 4] [--settings 6] [--ood-max-length 20]

Times (CPU seconds of this process, one torch thread: the machine is shared) for one batch
of OOD reversal prompts, greedy, KV-cached:
- eager: `generate()` with transformers' eager attention, no capture;
- intervention: the capture function adding C to the top-N heads' reference weights at
  every generated token (target: at most 1.15x eager);
- a sweep of K settings (default 9) as one batched generation per batch (rows = instances x
  settings, one setting per row, the prompt prefix prefilled once), against K separate
  generations (`batched=False, reuse_prefill=False`); target: at most 0.4x.
Without --model a tiny random Llama (4 layers x 4 heads, hidden 128) is built in memory.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

TARGET_RATIO = 1.15
SWEEP_TARGET = 0.4  # a batched sweep of 9 settings against 9 separate generations


def cpu_time(fn, repeats: int) -> float:
    """Best of `repeats` CPU-time measurements (the least disturbed run)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def build(model_path: str | None):
    """The fetched/trained model at `model_path`, or the harness's default scratch Llama
    (4 layers x 4 heads, hidden 128, seed 0): the same model `train --model scratch` starts from."""
    from harness.foundation.models import ScratchConfig, build_scratch, load_model

    if model_path:
        return load_model(model_path)
    model, tokenizer = build_scratch(ScratchConfig())
    return model.eval(), tokenizer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--settings", type=int, default=9)
    parser.add_argument("--ood-max-length", type=int, default=20)
    args = parser.parse_args()

    import torch

    from attentionspan_datasets.splits import iter_split
    from harness.attention.heads import HeadRanking
    from harness.attention.interventions import intervention_for, score_settings
    from harness.attention.sweep import BASELINE, Setting
    from harness.engine.capture import AttentionPlan, capture_attention
    from harness.engine.inference import collate_left, generate_batch
    from harness.foundation.data import PromptConfig
    from harness.foundation.tokenization import CharTokenizer

    torch.set_num_threads(1)
    model, tokenizer = build(args.model)
    model.eval()
    char_tok = CharTokenizer(tokenizer)
    instances = list(
        iter_split("reversal_ood", split="test", stop=args.batch, max_length=args.ood_max_length)
    )
    encodings = [PromptConfig().encode(char_tok, x) for x in instances]
    max_new = max(e.target_len for e in encodings) + 1
    layers = model.config.num_hidden_layers
    heads = model.config.num_attention_heads
    scores = [[float(la * heads + h) for h in range(heads)] for la in range(layers)]
    order = sorted(
        ((la, h) for la in range(layers) for h in range(heads)), key=lambda x: -scores[x[0]][x[1]]
    )
    ranking = HeadRanking(scores=scores, per_row=scores, order=order)
    full = collate_left(encodings, char_tok.pad_id)
    reference = full.reference_mask()
    allowed = full.attention_mask.bool().clone()
    allowed[:, full.prompt_width :] = True
    setting = Setting(heads="top", n=args.heads, strength=1.0)
    plan = AttentionPlan(
        reference=reference,
        head_mass=False,
        intervention=intervention_for(setting, ranking, reference, allowed),
    )

    def eager():
        model.set_attn_implementation("eager")
        generate_batch(model, char_tok, encodings, max_new)

    def intervened():
        with capture_attention(model, plan):
            generate_batch(model, char_tok, encodings, max_new)

    eager()  # warm-up
    intervened()
    t_eager = cpu_time(eager, args.repeats)
    t_iv = cpu_time(intervened, args.repeats)

    settings = [BASELINE] + [
        Setting(heads="top", n=args.heads, strength=0.25 * (i + 1))
        for i in range(args.settings - 1)
    ]

    def sweep(batched: bool):
        return lambda: score_settings(
            model,
            tokenizer,
            instances,
            settings,
            ranking,
            batch_size=args.batch,
            teacher_forced=False,
            reuse_prefill=batched,
            batched=batched,
        )

    t_batched = cpu_time(sweep(True), max(1, args.repeats // 2))
    t_separate = cpu_time(sweep(False), max(1, args.repeats // 2))
    load = os.getloadavg()[0]
    name = args.model or "tiny random Llama 4x4, hidden 128"
    print(
        f"model: {name}; batch {args.batch}, {max_new} new tokens, prompts of "
        f"{full.prompt_width} columns; top-{args.heads} heads; load average {load:.1f}"
    )
    print(f"eager generate:          {t_eager:.3f} CPU s")
    ratio = t_iv / t_eager
    verdict = "meets" if ratio <= TARGET_RATIO else "misses"
    print(
        f"with intervention:       {t_iv:.3f} CPU s  ({ratio:.2f}x eager; "
        f"target <= {TARGET_RATIO}x: {verdict})"
    )
    ratio = t_batched / t_separate
    verdict = "meets" if ratio <= SWEEP_TARGET else "misses"
    print(f"sweep of {len(settings)}, separate: {t_separate:.3f} CPU s")
    print(
        f"sweep of {len(settings)}, batched:  {t_batched:.3f} CPU s  ({ratio:.2f}x separate; "
        f"target <= {SWEEP_TARGET}x: {verdict})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
