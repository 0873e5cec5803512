"""Checkpoints of a training run: what one holds (`run_info`), writing one
(`save_checkpoint`), and resuming from the latest, its parts and the run's log checked against
each other before any model loads.

    attentionspan train --output runs/rev --resume          # after an interruption
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attentionspan_datasets.atomic import atomic_write_text
from attentionspan_datasets.jsonfile import parse_json, read_json
from harness.foundation.options import option
from harness.foundation.runs import (
    LOG_FILE,
    RUN_CONFIG_FILE,
    TRAIN_CONFIG_FILE,
    TRAINING_STATE_FILE,
    TrainState,
    check_checkpoint,
    latest_checkpoint,
    load_training_state,
    prune_checkpoints,
    read_run_file,
    save_folder,
    section,
    versions,
)
from harness.training.config import TrainConfig, flat_options
from harness.training.fsdp import optimizer_state

if TYPE_CHECKING:
    from harness.training.setup import Run

# the open log window's supervision loss, kept in training_state.pt
SUPERVISION_WINDOW = "supervision_window"


def run_info(config: TrainConfig, state: TrainState, **extra) -> dict[str, Any]:
    """What `attentionspan_run.json` holds: the options, the prompt layout, the scratch
    model, where the run stands, and the library versions."""
    return {
        "train": {k: v for k, v in config.to_dict().items() if k not in ("prompt", "scratch")},
        "prompt": dataclasses.asdict(config.prompt),
        "scratch": dataclasses.asdict(config.scratch),
        "state": dataclasses.asdict(state),
        "versions": versions(),
        **extra,
    }


def save_checkpoint(run: Run, name: str, with_optimizer: bool = True, **extra) -> Path:
    """Write `output/name` atomically and keep the newest `keep_checkpoints` checkpoints."""
    training_state = (
        {"optimizer": optimizer_state(run), "scheduler": run.scheduler.state_dict()}
        if with_optimizer
        else None
    )
    if training_state is not None and run.heads is not None:
        # The open log window's supervision loss, as TrainState keeps its LM loss: a
        # resumed run logs the mean the uninterrupted one does.
        training_state[SUPERVISION_WINDOW] = {
            "loss": run.window.supervision,
            "steps": run.window.supervised_steps,
        }
    run.state.elapsed_s = time.perf_counter() - run.started
    run.state.window_loss = run.window.loss
    run.state.window_steps = run.window.steps
    target = save_folder(
        run.accelerator,
        run.model,
        run.tokenizer,
        run.output / name,
        run_info(run.config, run.state, **extra),
        training_state,
    )
    if run.main:
        prune_checkpoints(run.output, run.config.keep_checkpoints)
    return target


def load_resume(output: Path) -> tuple[TrainConfig, TrainState, Path, dict[str, Any]]:
    """(config, state, checkpoint folder, training state) of the latest checkpoint, its
    parts checked against each other and against the run folder before any model loads."""
    checkpoint = latest_checkpoint(output)
    if checkpoint is None:
        raise ValueError(
            f"--resume: no checkpoint to resume in {str(output)!r} (checkpoints are "
            f"written on Ctrl-C / SIGTERM and every --save-every N steps)"
        )
    info = read_run_file(checkpoint)
    training_state = load_training_state(checkpoint)
    if isinstance(info.get("state"), dict):  # a bad value is named before any comparison
        section(info, "state", TrainState, checkpoint)
    check_checkpoint(checkpoint, info, training_state)
    values = {
        **info.get("train", {}),
        "prompt": info.get("prompt", {}),
        "scratch": info.get("scratch", {}),
    }
    try:
        config = TrainConfig.from_dict(values)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{checkpoint / RUN_CONFIG_FILE}: {error}") from None
    config.output = str(output)
    check_foreign(checkpoint, config, output / TRAIN_CONFIG_FILE)
    check_log(output / LOG_FILE)  # before any model loads
    state = section(info, "state", TrainState, checkpoint)
    scheduler = training_state["scheduler"]
    if isinstance(scheduler, dict) and scheduler.get("last_epoch", state.step) != state.step:
        raise ValueError(
            f"{checkpoint / TRAINING_STATE_FILE}: the scheduler stands at step "
            f"{scheduler.get('last_epoch')!r}, the run file at {state.step}: edited, or parts "
            "of different runs"
        )
    return config, state, checkpoint, training_state


def check_foreign(checkpoint: Path, config: TrainConfig, run_config: Path) -> None:
    """ValueError when the checkpoint's options are not the run folder's (a checkpoint of
    another run copied in). A folder without a readable train_config.json is not judged:
    the checkpoint's own run file is then all there is."""
    try:
        folder = TrainConfig.from_dict(read_json(run_config, expect=dict))
    except (ValueError, TypeError):  # torn, deep (read_json), or options of another version
        return
    ours, theirs = flat_options(config), flat_options(folder)
    differ = [k for k in ours if k != "output" and ours[k] != theirs.get(k)]
    if differ:
        key = differ[0]
        raise ValueError(
            f"{checkpoint} is not a checkpoint of this run: its {option(key)} is "
            f"{ours[key]!r}, the run's ({run_config}) {theirs.get(key)!r}; resume the run "
            "it came from, or start a new --output"
        )


def saved_supervision_window(training_state: dict[str, Any] | None) -> dict[str, Any]:
    """The supervision part of the log window a checkpoint saved (none: a fresh window)."""
    saved = (training_state or {}).get(SUPERVISION_WINDOW)
    if not isinstance(saved, dict):
        return {}
    return {
        "supervision": float(saved.get("loss", 0.0)),
        "supervised_steps": int(saved.get("steps", 0)),
    }


def check_supervised_heads(path: Path, heads) -> None:
    """On a resume, refuse heads other than those the log's first record names (top:N
    reads a heads.json that may have changed since: the run would go on supervising other
    heads than it started with)."""
    pairs = heads.nonzero().tolist()
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            record = parse_json(line, str(path))
        except ValueError:  # a line cut short (trim_log drops it), or absurdly nested
            continue
        if isinstance(record, dict) and record.get("supervised_heads", pairs) != pairs:
            raise ValueError(
                f"--resume: --attention-supervision now selects the heads {pairs}, the run "
                f"was trained on {record['supervised_heads']} ({path}): restore the "
                "--supervision-ranking file it read, or start a new --output"
            )


def trim_log(path: Path, step: int) -> None:
    """Drop log lines past `step`: a resumed run logs those steps again (a run killed
    after logging step 30 but checkpointed at 20 would otherwise repeat 21-30)."""
    if not path.is_file():
        return
    lines = path.read_text().splitlines(keepends=True)
    kept = [line for line in lines if _logged_step(line) <= step]
    if len(kept) != len(lines):
        atomic_write_text(path, "".join(kept))


def check_log(path: Path) -> None:
    """ValueError naming the line when a log line that is not a JSON record has whole lines
    after it: only the last line can be cut short (a full disk, a kill mid-write), and
    trim_log drops that one; a broken line before others was edited or corrupted, and
    dropping it silently lost a logged step."""
    if not path.is_file():
        return
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for number, line in enumerate(lines[:-1], 1):
        if _logged_step(line) == math.inf:
            raise ValueError(
                f"--resume: {path} line {number} is not a JSON record, and whole lines follow "
                "it (edited or corrupt, not cut short by a crash); restore it, or start a new "
                "--output"
            )


def _logged_step(line: str) -> float:
    """The step of a log line; a line cut short (a full disk, a crash mid-write) is
    past every step, so it is dropped."""
    try:
        step = parse_json(line, LOG_FILE).get("step", 0)  # deep: ValueError, not recursion
    except (ValueError, AttributeError):
        return math.inf
    # a step that is no number is no record the run wrote
    return step if isinstance(step, (int, float)) and not isinstance(step, bool) else math.inf
