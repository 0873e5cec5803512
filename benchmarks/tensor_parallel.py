"""Two processes sharing one model by heads (tensor parallelism, `--tp-plan auto`) against
one process holding it whole, on this CPU: time and peak memory per process.

    OMP_NUM_THREADS=1 python benchmarks/tensor_parallel.py            # builds its own model
    python benchmarks/tensor_parallel.py --model FOLDER --num 32

The model (a folder, or by default a from-scratch Llama of --layers x --hidden with heads of
64 dimensions, built and saved here) is analysed twice, each run in fresh processes so that
each one's peak memory is its own: `python THIS --worker` (one process, the model whole),
then `torchrun --nproc-per-node 2 THIS --worker` (gloo on a CPU). Each worker times what the
analysis runs (Table 2's attention records, the head ranking, three intervention settings
teacher-forced and free-running) at one thread, and reports its peak resident memory
(getrusage) and the bytes of the weights it holds. The records of the two runs must agree
within 1e-6, absolute or relative (the sharded matmuls and the all-reduce round
differently; a head's score sums hundreds of rows, so it moves by 2e-6 at 17); the chosen
heads and the answers are equal.

Targets (set before measuring): each of the two processes holds at most 0.6x the weights of
one (the embeddings and norms are not split), its peak memory is at most one process's, and
the two processes take at most 2x one's wall time (each layer all-reduces twice over gloo;
two processes on two shared cores are not expected to be faster). Exits 1 when a record
differs or a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

CONFIG = "reversal_id"
ATOL = RTOL = 1e-6
TARGETS = {"weights": 0.6, "peak": 1.0, "time": 2.0}


def scratch_folder(folder: Path, layers: int, hidden: int) -> str:
    """A random from-scratch Llama (heads of 64 dimensions) saved as safetensors."""
    import torch

    from harness.foundation.models import ScratchConfig, build_scratch

    torch.manual_seed(0)
    config = ScratchConfig(
        hidden_size=hidden,
        num_layers=layers,
        num_heads=max(2, hidden // 64),
        intermediate_size=4 * hidden,
    )
    model, tokenizer = build_scratch(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def held_bytes(model) -> int:
    """Bytes of the weights this process holds (a sharded weight: its local part)."""
    total = 0
    for param in model.parameters():
        local = param.to_local() if hasattr(param, "to_local") else param
        total += local.numel() * local.element_size()
    return total


def worker(folder: str, num: int, batch: int, out: Path) -> None:
    """One process of a run: load (sharded when launched by torchrun), time each stage."""
    import torch

    from attentionspan_datasets.splits import iter_split
    from harness.attention.analysis import AnalysisConfig, analyse_model
    from harness.attention.heads import rank_heads
    from harness.attention.interventions import score_settings
    from harness.attention.setting import Setting
    from harness.attention.sweep import BASELINE
    from harness.foundation.data import PromptConfig
    from harness.foundation.dispatch import Placement
    from harness.foundation.models import load_model

    torch.set_num_threads(1)
    rank = int(os.environ.get("RANK", "0"))
    sharded = int(os.environ.get("WORLD_SIZE", "1")) > 1
    placement = Placement(tp_plan="auto") if sharded else Placement()
    started = time.perf_counter()
    model, tokenizer = load_model(folder, placement=placement)
    seconds = {"load": time.perf_counter() - started}
    prompt = PromptConfig()
    instances = list(iter_split(CONFIG, seed=0, split="validation", stop=num))
    records: dict[str, object] = {}

    def timed(name, run):
        start = time.perf_counter()
        records[name] = run()
        seconds[name] = time.perf_counter() - start

    config = AnalysisConfig(configs=[CONFIG], num=num, batch_size=batch)
    timed("attention", lambda: analyse_model(model, tokenizer, config, prompt)[0])
    timed("ranking", lambda: rank_heads(model, tokenizer, instances, prompt, batch_size=batch))
    ranking = records["ranking"]
    settings = [
        BASELINE,
        Setting(heads="top", n=4, strength=1.0),
        Setting(heads="top", n=4, mode="knockout"),
    ]
    timed(
        "interventions",
        lambda: score_settings(
            model, tokenizer, instances, settings, ranking, prompt=prompt, batch_size=batch
        ),
    )
    ranking.source.pop("time_s", None)
    records["ranking"] = ranking.to_dict()
    report = {
        "seconds": seconds,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "weights_mib": held_bytes(model) / 2**20,
    }
    (out / f"report{rank}.json").write_text(json.dumps(report))
    if rank == 0:
        (out / "records.json").write_text(json.dumps(records, default=float))


def launch(command: list[str], out: Path) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return time.perf_counter() - start


def differences(a, b, where="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = (set(a) | set(b)) - {"time_s", "seconds"}
        return [d for k in sorted(keys) for d in differences(a.get(k), b.get(k), f"{where}/{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, where)]
    if isinstance(a, float) and isinstance(b, (int, float)):
        both_nan = a != a and b != b
        close = abs(a - b) <= ATOL + RTOL * abs(b)
        return [] if both_nan or close else [f"{where}: {a} vs {b}"]
    return [] if a == b else [f"{where}: {a!r} vs {b!r}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a model folder (default: a scratch Llama built here)")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--num", type=int, default=32, help="instances")
    parser.add_argument("--batch-size", type=int, default=16)
    # positional after the flag: torchrun's own parser reads abbreviations of its options
    # (--num would be --numa-binding) even after the script
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        folder, out, num, batch = args.worker
        worker(folder, int(num), int(batch), Path(out))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = args.model or scratch_folder(root / "model", args.layers, args.hidden)
        sizes = [str(args.num), str(args.batch_size)]
        runs = {}
        for name, launcher in (
            ("one", [sys.executable]),
            ("two", [sys.executable, "-m", "torch.distributed.run", "--standalone",
                     "--nproc-per-node", "2"]),
        ):  # fmt: skip
            out = root / name
            out.mkdir()
            wall = launch([*launcher, __file__, "--worker", folder, str(out), *sizes], out)
            reports = [json.loads(p.read_text()) for p in sorted(out.glob("report*.json"))]
            records = json.loads((out / "records.json").read_text())
            runs[name] = {"wall": wall, "reports": reports, "records": records}
    one, two = runs["one"], runs["two"]
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"load average {os.getloadavg()[0]:.2f} at the end; one thread per process")  # fmt: skip
    print("| stage | one process s | two processes s (rank 0) | ratio |")
    print("|---|---|---|---|")
    for stage, alone in one["reports"][0]["seconds"].items():
        shared = two["reports"][0]["seconds"][stage]
        print(f"| {stage} | {alone:.2f} | {shared:.2f} | {shared / alone:.2f}x |")
    ratio = two["wall"] / one["wall"]
    print(f"| wall (launch to exit) | {one['wall']:.1f} | {two['wall']:.1f} | {ratio:.2f}x |")
    base = one["reports"][0]
    ok = True
    for rank, report in enumerate(two["reports"]):
        weights = report["weights_mib"] / base["weights_mib"]
        peak = report["peak_mib"] / base["peak_mib"]
        print(
            f"process {rank}: weights {report['weights_mib']:.1f} MiB ({weights:.2f}x of "
            f"{base['weights_mib']:.1f}; target <= {TARGETS['weights']}x), peak "
            f"{report['peak_mib']:.0f} MiB ({peak:.2f}x of {base['peak_mib']:.0f}; target "
            f"<= {TARGETS['peak']}x)"
        )
        ok = ok and weights <= TARGETS["weights"] and peak <= TARGETS["peak"]
    print(f"wall time: {ratio:.2f}x one process's (target <= {TARGETS['time']}x)")
    ok = ok and ratio <= TARGETS["time"]
    diff = differences(one["records"], two["records"])
    equal = "equal within 1e-6 (absolute or relative)"
    print("records: " + (equal if not diff else f"{len(diff)} differ: {diff[:3]}"))
    return 0 if ok and not diff else 1


if __name__ == "__main__":
    sys.exit(main())
