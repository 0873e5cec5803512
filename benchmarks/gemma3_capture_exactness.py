"""Capture on the real Gemma-3-270M: logits with capture on equal plain eager attention's,
and KV-cached greedy generation under capture writes the same tokens as under eager.

    attentionspan models fetch gemma3-270m        # once
    python benchmarks/gemma3_capture_exactness.py [--model gemma3-270m] [--fewshot 12]

Two left-padded batches of reversal_ood instances: a short one (a one-line instruction) and
a long one whose few-shot block pushes the sequences past Gemma 3's sliding window of 512
tokens, so that 15 of the 18 layers really slide. Capture records what the analysis records
(per-head mass on the references and the head-mean maps for rollout), so the check covers
the recording path, not only a pass-through. Prints one JSON object; the target is a max
absolute logit difference of at most 1e-4 (fp32) and identical generated tokens.
Also run by tests/harness/test_models.py (slow, skipped when the model is not fetched).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

TOLERANCE = 1e-4
KEEP_LOGITS = 48  # the last positions' logits only: 262k vocabulary x 600 positions is 1.2 GB


def check(model, tokenizer, num: int = 2, fewshot: int = 12, max_new: int = 8) -> dict:
    import torch

    from attentionspan_datasets.splits import iter_split
    from harness.engine.capture import AttentionPlan, capture_attention
    from harness.engine.inference import collate_left, generate_batch
    from harness.engine.positions import reference_mask
    from harness.foundation.data import PromptConfig
    from harness.foundation.tokenization import CharTokenizer

    char_tok = CharTokenizer(tokenizer)
    instances = list(iter_split("reversal_ood", split="test", stop=num))
    window = getattr(model.config, "sliding_window", None)
    report = {"model": type(model).__name__, "sliding_window": window, "batches": []}
    for name, prompt in (
        ("short", PromptConfig(instruction="Reverse the string.")),
        ("long", PromptConfig(instruction="Reverse the string.", num_fewshot=fewshot)),
    ):
        encodings = [prompt.encode(char_tok, x) for x in instances]
        batch = collate_left(encodings, char_tok.pad_id)
        inputs = batch.model_inputs(model.device)
        plan = AttentionPlan(reference=reference_mask(batch), rollout=True)
        start = time.perf_counter()
        with torch.no_grad():
            model.set_attn_implementation("eager")
            eager = model(**inputs, logits_to_keep=KEEP_LOGITS).logits
            with capture_attention(model, plan) as record:
                captured = model(**inputs, logits_to_keep=KEEP_LOGITS).logits
        model.set_attn_implementation("eager")
        plain = generate_batch(model, char_tok, encodings, max_new)
        with capture_attention(model, AttentionPlan()):
            under_capture = generate_batch(model, char_tok, encodings, max_new)
        report["batches"].append(
            {
                "batch": name,
                "size": len(encodings),
                "tokens": batch.total_len,
                "past_sliding_window": bool(window and batch.total_len > window),
                "max_abs_logit_diff": float((eager - captured).abs().max()),
                "logit_scale": float(eager.abs().max()),
                "recorded_rows": int(record.target_rows.sum()),
                "same_generated_tokens": plain.ids == under_capture.ids,
                "generated": plain.texts,
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    report["max_abs_logit_diff"] = max(b["max_abs_logit_diff"] for b in report["batches"])
    report["ok"] = report["max_abs_logit_diff"] <= TOLERANCE and all(
        b["same_generated_tokens"] for b in report["batches"]
    )
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--num", type=int, default=2, help="instances per batch")
    parser.add_argument("--fewshot", type=int, default=12, help="few-shot examples (long batch)")
    args = parser.parse_args()

    from harness.foundation.models import load_model

    model, tokenizer = load_model(args.model)
    model.eval()
    report = check(model, tokenizer, num=args.num, fewshot=args.fewshot)
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
