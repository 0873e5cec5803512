"""Training options shared by several tasks' recipes (`register_task(..., recipes=...)`).

Plain data, read by the harness (harness.pipeline.settings merges a task's recipe over its
general QUICK_TRAIN or PRETRAINED_TRAIN): the data layer imports nothing of the harness.
"""

# the optimiser of the recipes that needed a low, steady learning rate (flip-flop, T6): at
# 1e-3 and above flip-flop's short programs stayed near 0.85 (docs/usage_analysis.md)
SLOW_CONSTANT_LR = {
    "batch_size": 64,
    "lr": 3e-4,
    "beta1": 0.9,
    "schedule": "constant",
    "warmup_ratio": 0.0,
    "weight_decay": 0.01,
}
# the tiny scratch Llama made shallow and wide (addition, T6): ScratchConfig fields
SHALLOW_WIDE = {"num_layers": 2, "hidden_size": 256, "num_heads": 8, "intermediate_size": 1024}
