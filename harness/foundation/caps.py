"""The caps on sizes a harness command accepts, and the checks of option values that must
come before any work. Each cap is generous (well past what the paper or a long run uses) but
refuses at once a value that would hang or exhaust memory (`-n 1000000000` generated a
billion instances before scoring the first).

    check_int("-n/--num", 500, 1, MAX_INSTANCES)
    check_unique("--configs", ["reversal_id", "reversal_id"])   # ValueError: listed twice
    check_output_dir("--output", "runs/rev/eval")               # ValueError if it is a file

The caps (the README's Troubleshooting table points here):
- instances per config (eval, attention, heads `-n`; train `--eval-size`; reproduce
  `--num-*`): 100,000. Every instance and its record is held in memory, and 100,000 take
  hours on a CPU.
- generated training instances (`--train-size` x `--epochs` without `--max-steps`) and
  optimizer steps (`--max-steps`): 10,000,000, the builder's split cap; more is days on any
  machine. `--epochs`: 10,000.
- few-shot examples (`--num-fewshot`, a run file's `num_fewshot`): 1,000. Each instance
  draws its own; 1,000 examples are already past every model's context here.
- batch sizes: 65,536. Values in a swept list (`--counts`, `--strengths`, ...): 1,000.
- `--seeds` (baselines): 100; each seed trains every model (6 x about 10 minutes).
- a scratch model: 1,000,000,000 parameters (16 GB with AdamW's state), 1,024 layers.
- `--threads`: 1,024 (harness.foundation.threads.MAX_THREADS), and no more than the cores.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

MAX_INSTANCES = 100_000
MAX_TRAIN_INSTANCES = 10_000_000
MAX_STEPS = 10_000_000
MAX_EPOCHS = 10_000
MAX_FEWSHOT = 1_000
MAX_BATCH = 65_536
MAX_SEEDS = 100
MAX_SCRATCH_PARAMS = 1_000_000_000
MAX_SCRATCH_LAYERS = 1_024
MAX_SCRATCH_POSITIONS = 1 << 20
MAX_LIST = 1_000  # values in a swept list option (--counts, --strengths, --control-seeds)


def check_int(name: str, value, low: int, high: int) -> int:
    """`value` if it is an integer in [low, high], else ValueError naming `name` and the
    range (`high` is the cap)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    if value > high:
        raise ValueError(f"{name} must be <= {high:,} (the cap), got {value:,}")
    return value


def check_unique(name: str, values: Iterable) -> None:
    """ValueError naming the first value `name` lists twice (it would be run twice)."""
    seen = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{name} lists {value!r} twice")
        seen.add(value)


def check_output_dir(name: str, path: str | Path | None) -> None:
    """ValueError when `path` (a folder to write into) is a file or lies under one."""
    if path is None:
        return
    if str(path) == "":
        raise ValueError(f"{name} must not be empty")
    path = Path(path)
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                what = "is a file" if folder == path else f"lies under the file {str(folder)!r}"
                raise ValueError(f"{name} {str(path)!r} {what}; give a folder")
            return


def check_output_file(name: str, path: str | Path | None) -> None:
    """ValueError when `path` (a file to write) is a folder or lies under a file."""
    if path is None:
        return
    path = Path(path)
    if str(path) == "":
        raise ValueError(f"{name} must not be empty")
    if path.is_dir():
        raise ValueError(f"{name} {str(path)!r} is a folder; give a file name")
    check_output_dir(name, path.parent)


def check_fraction(name: str, value) -> float:
    """`value` if it is a finite number in [0, 1), else ValueError naming `name`."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not 0 <= value < 1:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return value


def check_shift(name: str, shift: int, lengths: dict[str, int]) -> None:
    """ValueError when `ref + shift` falls outside every sequence of a config: `lengths`
    maps each config to its longest `prompt + target` (harness.foundation.data.longest_text)."""
    check_int(name, shift, -MAX_INSTANCES, MAX_INSTANCES)
    for config, longest in lengths.items():
        if abs(shift) >= longest:
            raise ValueError(
                f"{name} {shift} is outside every sequence of {config!r} (the longest is "
                f"{longest} characters): use |{name}| < {longest}"
            )


def scratch_parameters(vocab: int, hidden: int, layers: int, intermediate: int) -> int:
    """Parameters of a scratch Llama with tied embeddings (attention 4 h^2, MLP 3 h i,
    two norms per layer, the embedding and the final norm)."""
    per_layer = 4 * hidden * hidden + 3 * hidden * intermediate + 2 * hidden
    return vocab * hidden + layers * per_layer + hidden
