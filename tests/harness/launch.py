"""Command-line pieces the harness tests launch with."""

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
