"""Cost of attention capture and interventions against plain eager attention.

    OMP_NUM_THREADS=1 python benchmarks/attention_capture.py [--rounds 5] [--device cuda]

Targets, on the default scratch Llama (4 layers, hidden 128, 4 heads,
random weights), batch 8:
- teacher-forced pass over 256 tokens recording per-head sums on the references and the
  head-mean maps for rollout (`harness.engine.capture`): at most 1.3x the time and 1.3x
  the peak memory of the same pass with plain eager attention; beside it the naive way
  (`output_attentions=True`, then the same sums and head means from the full maps);
- greedy generation (128-token prompts, 128 new tokens) with the same recording: at most
  1.2x plain eager generation; with a standard intervention on N heads (no recording): at
  most 1.15x.

Time is this process's CPU time (GPU: wall clock after synchronising), median over rounds
that alternate the modes. Peak memory: on the CPU each mode runs once in a fresh process
whose peak RSS is reset (/proc/self/clear_refs) just before the pass and read after it
(VmHWM minus the RSS before); on a GPU, `torch.cuda.max_memory_allocated` over the pass.
The reference is reversal-shaped: each answer row refers to its mirrored prompt position.

    OMP_NUM_THREADS=1 python benchmarks/attention_capture.py --commands [--model NAME] \
        [--num 32] [--batch 16]

The commands through the scoring engine, on `--num` reversal_ood test instances
(default: the scratch Llama; `--model smollm2-135m-instruct` after `attentionspan models
fetch smollm2-135m-instruct`), CPU time of this process:
- `eval` (`evaluate_model`: generation + teacher forcing) against the attention analysis
  (`analyse_model`, both passes; target: at most 1.2x eval) and its teacher-forced pass alone;
- the head ranking with its five offsets on as many reversal_id instances: forward passes per
  batch (target: 1).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

BATCH, LENGTH, PROMPT, NEW = 8, 256, 128, 128
TARGETS = {
    "capture": ("plain", 1.3, 1.3),
    "naive": ("plain", None, None),
    "generate+capture": ("generate", 1.2, None),
    "generate+intervention": ("generate", 1.15, None),
}
TF_MODES = ("plain", "capture", "naive")
GEN_MODES = ("generate", "generate+capture", "generate+intervention")


def setup(device: str):
    import torch

    from harness.foundation.models import ScratchConfig, build_scratch

    model, _ = build_scratch(ScratchConfig())
    model.set_attn_implementation("eager")
    model = model.to(device).eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, 100, (BATCH, LENGTH), generator=g)
    # Reversal-shaped references: answer row q (predicting q + 1) refers to the prompt
    # position mirrored around the prompt's end.
    ref = torch.zeros(BATCH, LENGTH, LENGTH, dtype=torch.bool)
    for i in range(LENGTH - PROMPT):
        ref[:, PROMPT - 1 + i, PROMPT - 1 - i] = True
    mask = torch.ones_like(ids)
    return model, ids.to(device), mask.to(device), ref.to(device)


def pass_fn(mode: str, model, ids, mask, ref, heads: int):
    """A zero-argument function running one pass of `mode`."""
    import torch

    from harness.engine.capture import AttentionPlan, Intervention, capture_attention

    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    layers = model.config.num_hidden_layers
    num_heads = model.config.num_attention_heads
    if mode == "plain":
        return lambda: model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
    if mode == "capture":

        def run():
            plan = AttentionPlan(reference=ref, rollout=True)
            with capture_attention(model, plan) as record:
                model(input_ids=ids, attention_mask=mask, position_ids=positions)
            return record

        return run
    if mode == "naive":

        def run():
            out = model(
                input_ids=ids, attention_mask=mask, position_ids=positions, output_attentions=True
            )
            refs = ref[:, None].to(out.attentions[0].dtype)
            mass = torch.stack([(a * refs).sum(-1) for a in out.attentions], -1)  # [b,h,q,l]
            maps = [a.mean(1) for a in out.attentions]
            return mass, maps

        return run
    prompt, prompt_mask = ids[:, :PROMPT], mask[:, :PROMPT]
    gen_ref = ref[:, : PROMPT + NEW, : PROMPT + NEW]

    def generate():
        return model.generate(
            input_ids=prompt,
            attention_mask=prompt_mask,
            max_new_tokens=NEW,
            min_new_tokens=NEW,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )

    if mode == "generate":
        return generate
    if mode == "generate+capture":
        plan_kwargs = dict(reference=gen_ref, rollout=True)
    else:
        chosen = torch.zeros(layers, num_heads, dtype=torch.bool)
        chosen.view(-1)[
            torch.randperm(layers * num_heads, generator=torch.Generator().manual_seed(0))[:heads]
        ] = True
        plan_kwargs = dict(
            reference=gen_ref, head_mass=False, intervention=Intervention(chosen, strength=1.0)
        )

    def run():
        with capture_attention(model, AttentionPlan(**plan_kwargs)):
            return generate()

    return run


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_modes(args, modes) -> dict[str, float]:
    import torch

    model, ids, mask, ref = setup(args.device)
    fns = {m: pass_fn(m, model, ids, mask, ref, args.heads) for m in modes}
    times: dict[str, list[float]] = {m: [] for m in modes}
    clock = time.perf_counter if args.device.startswith("cuda") else time.process_time
    with torch.inference_mode():
        for m in modes:  # warm-up
            fns[m]()
        for r in range(args.rounds):
            order = modes if r % 2 == 0 else modes[::-1]
            for m in order:
                _sync(args.device)
                start = clock()
                fns[m]()
                _sync(args.device)
                times[m].append(clock() - start)
    return {m: statistics.median(t) for m, t in times.items()}


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def peak_memory(args, mode: str) -> float:
    """Peak extra memory of one pass of `mode`, in MiB."""
    import torch

    model, ids, mask, ref = setup(args.device)
    fn = pass_fn(mode, model, ids, mask, ref, args.heads)
    with torch.inference_mode():
        fn()  # warm-up: lazy initialisation is not the pass's memory
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            fn()
            torch.cuda.synchronize()
            return (torch.cuda.max_memory_allocated() - before) / 2**20
        before = _rss_kib("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM (the peak RSS) to the current RSS
        fn()
        return (_rss_kib("VmHWM") - before) / 1024


def memory_in_child(args, mode: str) -> float:
    if args.device.startswith("cuda"):
        return peak_memory(args, mode)
    env = dict(os.environ)
    # A fixed mmap threshold: large tensors go to mmap and back to the OS when freed, so
    # RSS follows what the pass holds (glibc otherwise raises the threshold after frees).
    env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    cmd = [sys.executable, __file__, "--child-memory", mode, "--heads", str(args.heads)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--heads", type=int, default=4, help="heads under intervention")
    parser.add_argument("--child-memory", help=argparse.SUPPRESS)
    parser.add_argument("--commands", action="store_true", help="eval vs analysis, ranking")
    parser.add_argument("--model", default=None, help="with --commands: a model name or folder")
    parser.add_argument("--num", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    import torch

    if args.commands:
        commands(args)
        return

    if args.child_memory:
        print(peak_memory(args, args.child_memory))
        return
    if args.device == "cpu":
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    load = os.getloadavg()[0]
    print(
        f"# {platform.machine()}, python {platform.python_version()}, torch {torch.__version__},"
        f" device {args.device}, threads {torch.get_num_threads()}, load average {load:.2f}"
    )
    print(
        f"# scratch Llama 4x128, batch {BATCH}; teacher-forced length {LENGTH}; "
        f"generation {PROMPT}+{NEW}; intervention on {args.heads} heads; {args.rounds} rounds"
    )
    times = time_modes(args, TF_MODES)
    times.update(time_modes(args, GEN_MODES))
    memory = {m: memory_in_child(args, m) for m in TF_MODES}
    rows = []
    print(
        f"{'mode':24} {'time s':>8} {'x':>6} {'target':>7}   {'peak MiB':>9} {'x':>6} {'target':>7}"
    )
    for mode in (*TF_MODES, *GEN_MODES):
        base, t_target, m_target = TARGETS.get(mode, (mode, None, None))
        ratio = times[mode] / times[base]
        line = f"{mode:24} {times[mode]:8.3f} {ratio:6.2f} "
        line += f"{_verdict(ratio, t_target):>7}"
        m_ratio = None
        if mode in memory:
            m_ratio = memory[mode] / memory[base]
            line += f"   {memory[mode]:9.1f} {m_ratio:6.2f} {_verdict(m_ratio, m_target):>7}"
        print(line)
        rows.append(
            {
                "mode": mode,
                "seconds": times[mode],
                "time_ratio": ratio,
                "peak_mib": memory.get(mode),
                "memory_ratio": m_ratio,
            }
        )
    naive = times["naive"] / times["capture"]
    print(
        f"# naive / capture: time {naive:.2f}x, memory {memory['naive'] / memory['capture']:.2f}x"
    )
    print(f"# load average after: {os.getloadavg()[0]:.2f}")
    if os.environ.get("ATTENTION_BENCH_JSON"):
        with open(os.environ["ATTENTION_BENCH_JSON"], "w") as f:
            json.dump(rows, f, indent=1)


ANALYSIS_TARGET = 1.2  # the attention analysis, both passes, against eval


def commands(args) -> None:
    """eval, the analysis and the ranking on the same instances (see the module docstring)."""
    import math

    import torch

    from attentionspan_datasets.splits import iter_split
    from harness.attention.analysis import AnalysisConfig, analyse_model
    from harness.attention.heads import OFFSETS, rank_heads
    from harness.evaluation.evaluate import evaluate_model
    from harness.foundation.models import ScratchConfig, build_scratch, load_model

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if args.model:
        model, tokenizer = load_model(args.model)
    else:
        model, tokenizer = build_scratch(ScratchConfig())
    model.eval()
    name = args.model or "scratch Llama 4x128 (random weights)"
    load = os.getloadavg()[0]
    print(
        f"# {platform.machine()}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"load average {load:.2f}; {name}; {args.num} reversal_ood instances, batch {args.batch}"
    )

    def timed(fn):
        start = time.process_time()
        fn()
        return time.process_time() - start

    configs = ["reversal_ood"]

    def analysis(modes):
        config = AnalysisConfig(configs=configs, num=args.num, batch_size=args.batch, modes=modes)
        return lambda: analyse_model(model, tokenizer, config)

    evaluate_model(model, tokenizer, configs, min(args.num, 2), batch_size=2)  # warm-up
    t_eval = timed(
        lambda: evaluate_model(model, tokenizer, configs, args.num, batch_size=args.batch)
    )
    t_both = timed(analysis(("teacher_forced", "generate")))
    t_tf = timed(analysis(("teacher_forced",)))
    ratio = t_both / t_eval
    print(f"{'eval':32} {t_eval:8.2f} CPU s")
    print(
        f"{'attention, both passes':32} {t_both:8.2f} CPU s  {ratio:.2f}x eval  "
        f"{_verdict(ratio, ANALYSIS_TARGET)}"
    )
    print(f"{'attention, teacher-forced only':32} {t_tf:8.2f} CPU s  {t_tf / t_eval:.2f}x eval")
    ids = list(iter_split("reversal_id", split="test", stop=args.num))
    calls = []
    hook = model.register_forward_pre_hook(lambda *a: calls.append(1))
    try:
        t_rank = timed(lambda: rank_heads(model, tokenizer, ids, batch_size=args.batch))
    finally:
        hook.remove()
    per_batch = len(calls) / math.ceil(len(ids) / args.batch)
    print(
        f"{'heads, offsets ' + ','.join(map(str, OFFSETS)):32} {t_rank:8.2f} CPU s  "
        f"{per_batch:g} forward(s) per batch  target 1 " + ("ok" if per_batch == 1 else "MISS")
    )


def _verdict(ratio: float, target: float | None) -> str:
    if target is None:
        return ""
    return f"<={target} " + ("ok" if ratio <= target else "MISS")


if __name__ == "__main__":
    main()
