"""Peak memory of one long instance: a plain forward, attention capture and an intervention.

    OMP_NUM_THREADS=1 python benchmarks/long_input_memory.py             # SmolLM2, fetched
    OMP_NUM_THREADS=1 python benchmarks/long_input_memory.py --scratch   # a tiny stand-in
    OMP_NUM_THREADS=1 python benchmarks/long_input_memory.py --chars 2000 1000 500

Target: on one string-reversal instance of `--chars` characters (prompt
plus target; 2,000 by default) fed as the harness feeds it (one token per character, left
collated, teacher-forced over prompt + target + EOS, full logits), the peak memory of
- `capture`: recording each head's mass on the reference (`AttentionPlan(reference,
  head_mass=True)`, what the head ranking records), at most 1.3x the plain eager forward's
  (judged on the pass's own memory, `extra`; the process's `peak` ratio is shown beside);
- `intervention`: a standard intervention (C = 1) on 8 heads, at most 1.3x as well;
beside them, without targets: `sdpa` (the model's default attention: no L x L weights at
all), `eager` (the base: capture computes eager attention) and `capture+rollout` (what
`attentionspan attention` records: the head mass plus every layer's head-mean map, which
grows as layers x L^2).

Each mode runs in a fresh process: the model is loaded, one short pass warms it up, the peak
resident set is reset (/proc/self/clear_refs) and read after the long pass (VmHWM): `peak`
is the process's peak resident set during the pass (model included), `extra` that peak less
the resident set just before it. glibc's mmap threshold is fixed, so the large tensors a
pass frees go back to the system and the resident set follows what the pass holds
(tracemalloc does not see torch's allocations).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

MODEL = "smollm2-135m-instruct"
MODES = ("sdpa", "eager", "capture", "intervention", "capture+rollout")
TARGETS = {"capture": 1.3, "intervention": 1.3}  # x the eager forward's peak
HEADS = 8  # heads under intervention


def load(scratch: bool):
    from harness.foundation.models import ScratchConfig, build_scratch, load_model

    if scratch:
        model, tokenizer = build_scratch(ScratchConfig(max_positions=8192))
    else:
        model, tokenizer = load_model(MODEL)
    return model.eval(), tokenizer


def instance(chars: int):
    """A reversal instance whose prompt + target is `chars` characters (string + "=" +
    reversed string), its reference in the instance (one mirrored position per row)."""
    from attentionspan_datasets.generation import generate

    length = max(1, (chars - 1) // 2)
    return generate("reversal", index=0, min_length=length, max_length=length)


def pass_fn(mode: str, model, tokenizer, chars: int):
    """A zero-argument function running one teacher-forced pass of `mode` on the instance."""
    import torch

    from harness.engine.capture import AttentionPlan, Intervention, capture_attention
    from harness.engine.inference import model_shape, teacher_forced_batch
    from harness.engine.scoring import Scorer, collate_left
    from harness.foundation.data import PromptConfig

    scorer = Scorer(model, tokenizer, PromptConfig(), batch_size=1)
    encodings = scorer.encode([instance(chars)])
    char_tok = scorer.char_tok
    model.set_attn_implementation("sdpa" if mode == "sdpa" else "eager")
    batch = collate_left(encodings, char_tok.pad_id, with_answer=True)  # what the pass feeds
    if mode in ("sdpa", "eager"):

        def run():
            return teacher_forced_batch(model, char_tok, encodings)

        run.tokens = batch.input_ids.shape[1]
        return run
    reference = batch.reference_mask()
    if mode == "intervention":
        layers, heads = model_shape(model)
        chosen = torch.zeros(layers, heads, dtype=torch.bool)
        draw = torch.randperm(layers * heads, generator=torch.Generator().manual_seed(0))
        chosen.view(-1)[draw[:HEADS]] = True
        plan = dict(reference=reference, head_mass=False, intervention=Intervention(chosen, 1.0))
    else:
        plan = dict(reference=reference, head_mass=True, rollout=mode == "capture+rollout")

    def run():
        with capture_attention(model, AttentionPlan(**plan)) as record:
            teacher_forced_batch(model, char_tok, encodings)
        return record

    run.tokens = batch.input_ids.shape[1]
    return run


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(mode: str, chars: int, scratch: bool) -> dict:
    """One mode in this (fresh) process: peak and extra resident memory of the long pass."""
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    model, tokenizer = load(scratch)
    with torch.inference_mode():
        pass_fn(mode, model, tokenizer, 32)()  # lazy initialisation is not the pass's memory
        fn = pass_fn(mode, model, tokenizer, chars)
        before = _status_kib("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM (the peak resident set) back to the current one
        start = time.perf_counter()
        fn()
        seconds = time.perf_counter() - start
        peak = _status_kib("VmHWM")
    return {
        "tokens": fn.tokens,
        "peak_mib": peak / 1024,
        "extra_mib": (peak - before) / 1024,
        "seconds": seconds,
    }


def in_child(mode: str, chars: int, scratch: bool) -> dict:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    cmd = [sys.executable, __file__, "--child", mode, "--chars", str(chars)]
    cmd += ["--scratch"] if scratch else []
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{mode} at {chars} characters failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _verdict(ratio: float, target: float | None) -> str:
    if target is None:
        return ""
    return "ok" if ratio <= target else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--chars", type=int, nargs="+", default=[2000], help="prompt + target characters"
    )
    parser.add_argument(
        "--scratch",
        action="store_true",
        help="the default scratch Llama (4 x 128, random) instead of SmolLM2",
    )
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.chars[0], args.scratch)))
        return
    if not args.scratch:
        from harness.foundation.models import known_model_dir

        if not (known_model_dir(MODEL) / "config.json").is_file():
            raise SystemExit(
                f"{MODEL} is not fetched: run `attentionspan models fetch {MODEL}`, or pass "
                "--scratch for the tiny stand-in"
            )
    import torch

    name = "scratch Llama 4x128 (random)" if args.scratch else MODEL
    print(
        f"# {platform.machine()}, python {platform.python_version()}, torch {torch.__version__}"
        f", OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"# {name}; one reversal instance, batch 1, teacher-forced, full logits")
    rows = []
    for chars in args.chars:
        results = {mode: in_child(mode, chars, args.scratch) for mode in args.modes}
        base = results.get("eager")
        tokens = next(iter(results.values()))["tokens"]
        print(f"\n## {chars} characters (prompt + target): L = {tokens} tokens")
        print(
            f"{'mode':16} {'peak MiB':>9} {'x eager':>8} {'extra MiB':>10} {'x eager':>8} "
            f"{'target (extra)':>15} {'s':>6}"
        )
        for mode, r in results.items():
            ratio = r["peak_mib"] / base["peak_mib"] if base else float("nan")
            extra = r["extra_mib"] / base["extra_mib"] if base else float("nan")
            target = TARGETS.get(mode)
            shown = f"<= {target}: {_verdict(extra, target)}" if target else ""
            print(
                f"{mode:16} {r['peak_mib']:9.0f} {ratio:8.2f} {r['extra_mib']:10.0f} "
                f"{extra:8.2f} {shown:>15} {r['seconds']:6.1f}"
            )
            rows.append({"chars": chars, "mode": mode, **r, "x_eager": ratio, "x_extra": extra})
    print(f"\n# load average after: {os.getloadavg()[0]:.2f}")
    if os.environ.get("LONG_INPUT_BENCH_JSON"):
        with open(os.environ["LONG_INPUT_BENCH_JSON"], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
