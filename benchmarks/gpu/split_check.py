"""A model split across devices gives the same numbers as the model whole, and what it costs.

    python benchmarks/gpu/split_check.py --device cuda              # on a GPU machine
    python benchmarks/gpu/split_check.py --device cuda --model FOLDER --offload cpu
    OMP_NUM_THREADS=1 python benchmarks/gpu/split_check.py --device cpu   # here: cpu + disk

The device split on a GPU: "a cuda:0 + cpu split gives the same numbers as cuda:0 alone;
record the time". The model (a folder, or by default a from-scratch Llama of --layers x
--hidden built here and saved, nothing to carry) is loaded twice: whole on --device, and
dispatched by accelerate with the embeddings and the first half of its layers on --device
and the rest (the final norm and output layer too) offloaded to --offload: "cpu" beside a
GPU (the weights live in CPU memory and run on cuda:0, loaded by accelerate's hooks at each
forward), "disk" on a CPU machine. Both then run what the analysis runs: the ID/OOD
attention records (Table 2), the head ranking, intervention settings (standard, random
heads, conditional) and eval. Every record must be equal; the script prints each stage's
seconds whole and split, and exits 1 when a record differs.

Target: equal records (no tolerance: the same weights run the same kernels on the same
device). The split's time has no target (offloaded weights are copied to the device at every
forward); it is recorded in docs/performance.md beside the device.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

CONFIG = "reversal_id"


def scratch_folder(folder: Path, layers: int, hidden: int) -> str:
    """A random from-scratch Llama (heads of 64 dimensions) saved as safetensors."""
    import torch

    from harness.foundation.models import ScratchConfig, build_scratch

    torch.manual_seed(0)
    config = ScratchConfig(
        hidden_size=hidden,
        num_layers=layers,
        num_heads=max(1, hidden // 64),
        intermediate_size=4 * hidden,
    )
    model, tokenizer = build_scratch(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def split_map(model, device: str, offload: str) -> dict[str, object]:
    """The embeddings and the first half of the layers on `device`, the rest on `offload`
    (the module names of Llama, Qwen, Mistral and Gemma causal LMs: model.layers.N)."""
    from harness.engine.inference import model_shape

    layers, _ = model_shape(model)
    main: object = 0 if device.startswith("cuda") else "cpu"
    names = {name for name, _ in model.named_modules()}
    if "model.layers.0" not in names:
        raise SystemExit(f"{type(model).__name__}: no model.layers.N modules to split")
    mapping: dict[str, object] = {"model.embed_tokens": main}
    if "model.rotary_emb" in names:
        mapping["model.rotary_emb"] = main
    for layer in range(layers):
        mapping[f"model.layers.{layer}"] = main if layer < layers // 2 else offload
    mapping["model.norm"] = offload
    # a tied output layer is the embeddings' weight: it stays where they are
    tied = getattr(model.config, "tie_word_embeddings", False)
    mapping["lm_head"] = main if tied else offload
    return mapping


def stages(model, tokenizer, num: int, batch_size: int) -> dict[str, tuple[float, object]]:
    """{stage: (seconds, records without timings)} of what the analysis runs."""
    from harness.attention.analysis import AnalysisConfig, analyse_model, load_instances
    from harness.attention.heads import rank_heads
    from harness.attention.interventions import score_settings
    from harness.attention.setting import BASELINE, Setting
    from harness.evaluation.evaluate import evaluate_model
    from harness.foundation.data import PromptConfig

    out: dict[str, tuple[float, object]] = {}

    def timed(name, run):
        start = time.perf_counter()
        result = run()
        out[name] = (time.perf_counter() - start, result)
        return result

    config = AnalysisConfig(configs=[CONFIG], num=num, batch_size=batch_size)
    timed(
        "attention (Table 2)",
        lambda: _untimed(analyse_model(model, tokenizer, config, PromptConfig())[0]),
    )
    instances = load_instances(CONFIG, num, 1234, "validation")
    ranking = timed(
        "head ranking", lambda: rank_heads(model, tokenizer, instances, batch_size=batch_size)
    )
    out["head ranking"] = (out["head ranking"][0], _ranked(ranking))
    settings = [
        BASELINE,
        Setting(heads="top", n=3, strength=1.0),
        Setting(heads="random", n=2, strength=2.0, seed=1),
        Setting(heads="top", n=2, strength=0.5, mode="conditional", threshold=0.05),
    ]
    timed(
        "interventions (4 settings)",
        lambda: score_settings(
            model, tokenizer, instances, settings, ranking, batch_size=batch_size
        ),
    )
    timed("eval", lambda: evaluate_model(model, tokenizer, [CONFIG], num, batch_size=batch_size))
    return out


def _untimed(results: dict) -> dict:
    return {
        name: {k: v for k, v in block.items() if k != "seconds"} for name, block in results.items()
    }


def _ranked(ranking) -> dict:
    data = ranking.to_dict()
    return data | {"source": {k: v for k, v in data["source"].items() if k != "time_s"}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="where the whole model runs (cuda, cpu)")
    parser.add_argument(
        "--offload",
        default=None,
        help="where half the layers go: cpu (default beside a GPU) or disk",
    )
    parser.add_argument(
        "--model", default=None, help="a model folder (default: a random scratch Llama)"
    )
    parser.add_argument("--layers", type=int, default=8, help="the scratch model's layers")
    parser.add_argument("--hidden", type=int, default=512, help="the scratch model's width")
    parser.add_argument("--num", type=int, default=32, help="instances per stage")
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args(argv)
    offload = args.offload or ("cpu" if args.device.startswith("cuda") else "disk")

    import torch

    from harness.foundation.dispatch import Placement, is_dispatched, place_model
    from harness.foundation.runs import load_model_checked

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.model or scratch_folder(Path(tmp) / "model", args.layers, args.hidden)
        whole, tokenizer = load_model_checked(folder, [CONFIG])
        place_model(whole.eval(), args.device)
        mapping = split_map(whole, args.device, offload)
        placement = Placement(json.dumps(mapping), None, str(Path(tmp) / "offload"))
        split, _ = load_model_checked(folder, [CONFIG], placement=placement)
        assert is_dispatched(split.eval())
        params = sum(p.numel() for p in whole.parameters())
        device = (
            torch.cuda.get_device_name(0)
            if args.device.startswith("cuda")
            else platform.processor() or "cpu"
        )
        name = folder if args.model else "scratch"
        print(f"model: {name} ({params / 1e6:.1f}M parameters); device: {device}")
        print(f"split: first half of the layers on {args.device}, the rest offloaded to {offload}")
        with torch.inference_mode():
            for model in (whole, split):  # warm-up (kernels, allocator), not timed
                stages(model, tokenizer, min(args.num, 4), args.batch_size)
            a = stages(whole, tokenizer, args.num, args.batch_size)
            b = stages(split, tokenizer, args.num, args.batch_size)
    print(f"{'stage':<28} {'whole s':>9} {'split s':>9} {'ratio':>7}  equal (target: yes)")
    failed = 0
    for name, (seconds, records) in a.items():
        split_seconds, split_records = b[name]
        equal = json.dumps(records, sort_keys=True, default=str) == json.dumps(
            split_records, sort_keys=True, default=str
        )
        failed += not equal
        ratio = split_seconds / seconds if seconds else float("nan")
        mark = "yes" if equal else "NO"
        print(f"{name:<28} {seconds:>9.2f} {split_seconds:>9.2f} {ratio:>6.2f}x  {mark}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
