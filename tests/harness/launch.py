"""Command-line pieces the harness tests launch with."""

import sys

# `--cpu --num_processes 2` starts ONE process in accelerate 1.15 (its multi-CPU path is
# mpirun); `--multi_gpu` on a machine without GPUs runs torch.distributed on CPU (gloo).
ACCELERATE_TWO_CPU_PROCESSES = [
    "--multi_gpu",
    "--num_processes",
    "2",
    "--num_machines",
    "1",
    "--mixed_precision",
    "no",
    "--dynamo_backend",
    "no",
]

# A scratch model small enough for a test to train in seconds.
TINY_SCRATCH_ARGS = [
    "--scratch-hidden-size",
    "32",
    "--scratch-num-layers",
    "2",
    "--scratch-num-heads",
    "2",
    "--scratch-intermediate-size",
    "64",
]

# FSDP2 on two processes, from the config file README documents; without GPUs they talk
# over gloo (harness.training.fsdp.make_accelerator puts back the FSDP that accelerate drops there).
ACCELERATE_TWO_CPU_FSDP_PROCESSES = ["--config_file", "docs/accelerate/fsdp_cpu.yaml"]


def launch_train(launch: list[str], *options: str) -> list[str]:
    """`accelerate launch LAUNCH -m harness.commands.train OPTIONS` as a command to run from
    the repository root."""
    accelerate = [sys.executable, "-m", "accelerate.commands.launch", *launch]
    return [*accelerate, "-m", "harness.commands.train", *options]
