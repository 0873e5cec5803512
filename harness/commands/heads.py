"""`attentionspan heads`: rank a model's attention heads by their weight on reference tokens.

    attentionspan heads --model runs/rev/final --config reversal_id -n 30
    attentionspan heads --model runs/rev/final --config reversal_id --shift 1 --output ref1.json
    attentionspan heads --model BIG --config reversal_id --device-map auto --max-memory 0=20GiB
    torchrun --nproc-per-node 2 -m harness.commands.heads --model M --tp-plan auto ...

Prints the top heads with their offset profiles (mean weight per target row at ref-2 ..
ref+2) and writes the ranking to --output (default: `heads.json` in the current folder;
never into the model's folder, which may be read-only or shared by other runs) for the
Python API (`harness.attention.heads.HeadRanking.load`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from attentionspan_datasets.generation import DEFAULT_SEED
from harness.attention.heads import DEFAULT_NUM
from harness.foundation.dispatch import placement_field
from harness.foundation.options import (
    add_config_arguments,
    add_model_arguments,
    cli,
    main_for,
    quiet_transformers,
)


@dataclass
class HeadsOptions:
    """The options of `attentionspan heads`: what to rank on, how, and where it goes."""

    model: str | None = field(
        default=None,
        metadata=cli("a trained model folder or a known name", shared="model", required=True),
    )
    config: str | None = field(
        default=None, metadata=cli("ID preset to rank on", shown="the model's training one")
    )
    num: int = field(default=DEFAULT_NUM, metadata=cli("ID instances (paper: 30)", shared="num"))
    seed: int = field(default=DEFAULT_SEED, metadata=cli("seed of the data", shared="seed"))
    split: str = field(
        default="validation",
        metadata=cli("split the instances come from", choices=("train", "validation", "test")),
    )
    threshold: float = field(default=0.0, metadata=cli("count only weights above this (0: all)"))
    shift: int = field(default=0, metadata=cli("rank by the weight at ref + shift"))
    batch_size: int = field(default=16, metadata=cli("instances per batch", shared="batch_size"))
    top: int = field(default=10, metadata=cli("heads to print"))
    output: str = field(
        default="heads.json",  # harness.attention.heads.HEADS_FILE, in the current folder
        metadata=cli(
            "file the ranking is written to; never the model's folder unless asked (it may "
            "be read-only or shared)",
            shown="heads.json in the current folder",
        ),
    )
    device_map: str | None = placement_field("device_map")
    max_memory: str | None = placement_field("max_memory")
    offload_folder: str | None = placement_field("offload_folder")
    tp_plan: str | None = placement_field("tp_plan")


def add_arguments(parser) -> None:
    """HeadsOptions' options (with --device-map, --max-memory, --offload-folder, --tp-plan),
    and the shared --device, --no-progress and --threads."""
    add_config_arguments(parser, HeadsOptions, defaults=True)
    add_model_arguments(parser, "device", "no_progress", "threads", device={"default": "auto"})


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "heads",
        help="rank attention heads by their weight on reference tokens (Appendix G)",
        description="Sum each head's post-softmax weight on the reference positions of every "
        "target row over ID instances (teacher-forced), rank, and write heads.json.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def run_command(args) -> int:
    import os
    from pathlib import Path

    import torch

    from attentionspan_datasets.splits import iter_split
    from harness.attention.heads import rank_heads
    from harness.evaluation.evaluate import saved_run_config
    from harness.foundation.caps import check_shift
    from harness.foundation.data import longest_text
    from harness.foundation.dispatch import (
        Placement,
        check_capture_placement,
        launched_processes,
        place_model,
    )
    from harness.foundation.models import resolve_model
    from harness.foundation.outputs import writing
    from harness.foundation.runs import load_model_checked, saved_prompt

    quiet_transformers()
    check_heads_options(args)
    placement = Placement.of(args)
    if placement.dispatched and args.device != "auto":
        raise ValueError(f"give --device {args.device} or --device-map, not both")
    if placement.tensor_parallel and args.device != "auto":
        # transformers puts each process's shard on its own device (cuda:LOCAL_RANK or cpu)
        raise ValueError(f"give --device {args.device} or --tp-plan, not both")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda, but no CUDA device is available")
    resolve_model(args.model)  # a missing folder is named before its missing saved config
    saved = saved_run_config(args.model) if Path(args.model).is_dir() else None
    config = args.config or (saved or {}).get("train", {}).get("config")
    if not config:
        raise ValueError("no --config given and the model has no saved training config")
    check_shift("--shift", args.shift, {config: longest_text(config)})  # before loading
    seed = args.seed
    instances = list(iter_split(config, seed=seed, split=args.split, stop=args.num))
    prompt = saved_prompt(saved, args.model)
    model, tokenizer = load_model_checked(args.model, [config], prompt, placement=placement)
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    place_model(model, "cuda" if cuda else "cpu")  # a dispatched model stays where it is
    check_capture_placement(model, f"model {args.model!r}")
    # Tensor parallelism: every process ranks every instance with its heads (capture gathers
    # them), so every process holds the whole ranking; the main one writes and prints it.
    main = int(os.environ.get("RANK", "0")) == 0
    ranking = rank_heads(
        model,
        tokenizer,
        instances,
        prompt,
        threshold=args.threshold,
        shift=args.shift,
        batch_size=args.batch_size,
        source={
            "model": args.model,
            "config": config,
            "split": args.split,
            "seed": seed,
            "indices": [0, args.num],
            # the processes that ranked (several: sharded by heads under --tp-plan)
            "processes": launched_processes(),
        },
        progress=not args.no_progress and main,
    )
    if not main:
        return 0
    output = Path(args.output)
    with writing(output, file=True):  # a full disk by now: one line naming the file
        path = ranking.save(output)
    print("rank\tlayer\thead\tper_row\t" + "\t".join(f"ref{int(k):+d}" for k in ranking.offsets))
    for rank, (layer, head) in enumerate(ranking.top(args.top), 1):
        profile = "\t".join(f"{v:.3f}" for v in ranking.profile(layer, head).values())
        print(f"{rank}\t{layer}\t{head}\t{ranking.per_row[layer][head]:.3f}\t{profile}")
    print(f"({ranking.rows} target rows of {len(instances)} {config} instances; {path})")
    return 0


def check(args) -> None:
    """What heads refuses before any work, writing nothing (`attentionspan launch` runs it
    before it starts processes)."""
    check_heads_options(args)


def check_heads_options(args) -> None:
    """Every option value that can be judged without the model, before it is loaded."""
    from harness.foundation.caps import MAX_BATCH, MAX_INSTANCES, check_fraction, check_int
    from harness.foundation.outputs import check_output_file
    from harness.foundation.ownership import check_own_file, json_with

    check_int("-n/--num", args.num, 1, MAX_INSTANCES)
    check_int("--batch-size", args.batch_size, 1, MAX_BATCH)
    check_int("--top", args.top, 1, MAX_INSTANCES)
    check_fraction("--threshold", args.threshold)
    check_output_file("--output", args.output)  # also: a read-only folder, a full disk
    # a ranking is replaced; a user's file of the same name is not
    check_own_file("--output", args.output, "heads", json_with("scores", "per_row", "order"))


def main(argv: list[str] | None = None) -> int:
    return main_for("heads", add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
