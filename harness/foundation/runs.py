"""Run folders: the run file, checkpoints, resume and the lock, in one place.

    runs/rev/                        attentionspan train --output runs/rev ...
      .lock                          "pid N on HOST" while a process trains here (flock-held)
      train_config.json              the options of the run
      log.jsonl                      one line per logged step and per evaluation
      checkpoint-200/                model + tokenizer + attentionspan_run.json + training_state.pt
      final/                         model + tokenizer + attentionspan_run.json

    info = read_run_file("runs/rev/final")      # None when the folder has no run file
    prompt = saved_prompt(info, "runs/rev/final")   # its prompt layout (default without one)
    checkpoint = latest_checkpoint(Path("runs/rev"))

Every folder is written under a temporary name and renamed, so a reader (or a resume after
`kill -9`) sees a whole checkpoint or none. Nothing here unpickles: optimizer state is read
with `torch.load(weights_only=True)` and weights only from safetensors or the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import pickle
import shutil
import socket
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attentionspan_datasets.atomic import atomic_path, atomic_write_text
from attentionspan_datasets.jsonfile import parse_json, read_json

if TYPE_CHECKING:
    from harness.foundation.data import PromptConfig

RUN_CONFIG_FILE = "attentionspan_run.json"  # beside every checkpoint and final model
TRAINING_STATE_FILE = "training_state.pt"  # optimizer and scheduler state (tensors only)
TRAIN_CONFIG_FILE = "train_config.json"
LOG_FILE = "log.jsonl"
LOCK_FILE = ".lock"
CHECKPOINT_PREFIX = "checkpoint-"
FINAL = "final"
# The sections of a run file; "train" is checked by harness.training.train.TrainConfig.
RUN_FILE_SECTIONS = ("train", "prompt", "scratch", "state", "versions", "final_eval", "stopped")


@dataclasses.dataclass
class TrainState:
    """Where a run stands; saved in every checkpoint's run file."""

    step: int = 0  # optimizer steps done
    next_index: int = 0  # the first stream index not yet trained on
    total_steps: int = 0
    elapsed_s: float = 0.0
    tokens: int = 0  # tokens trained on (all processes), up to `step`
    # The log window open at the checkpoint (loss summed over processes, and steps, since
    # the last log line), so a resumed run logs the mean the uninterrupted one does. Its
    # tokens are not kept: they time this invocation's tokens per second.
    window_loss: float = 0.0
    window_steps: int = 0
    run_id: str = ""  # drawn when the run starts; a checkpoint's parts must all carry it

    def __post_init__(self) -> None:
        for name in ("step", "next_index", "total_steps", "tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"'{name}' must be an integer >= 0, got {value!r}")
        if isinstance(self.window_steps, bool) or not isinstance(self.window_steps, int):
            raise ValueError(f"'window_steps' must be an integer, got {self.window_steps!r}")
        if not 0 <= self.window_steps <= self.step:
            raise ValueError(f"'window_steps' must be in [0, step], got {self.window_steps}")
        for name in ("elapsed_s", "window_loss"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"'{name}' must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"'{name}' must be finite, got {value}")
        if not isinstance(self.run_id, str):
            raise ValueError(f"'run_id' must be a string, got {self.run_id!r}")
        if self.total_steps and self.step > self.total_steps:
            raise ValueError(f"'step' ({self.step}) is past 'total_steps' ({self.total_steps})")


# --- the run file -----------------------------------------------------------------------
def read_run_file(folder: str | Path) -> dict[str, Any] | None:
    """The run file of a model folder, checked; None when there is none.

    ValueError naming the file for a file that is not a JSON object (torn, nested absurdly
    deep, foreign), an unknown section or an unknown key in the prompt, scratch or state
    sections.
    """
    from harness.foundation.data import PromptConfig
    from harness.foundation.models import ScratchConfig

    path = Path(folder) / RUN_CONFIG_FILE
    if not path.is_file():
        return None
    info = read_json(path, expect=dict)  # torn, deep, not an object: one line naming it
    _check_keys(path, "", info, RUN_FILE_SECTIONS)
    for section, cls in (
        ("prompt", PromptConfig),
        ("scratch", ScratchConfig),
        ("state", TrainState),
    ):
        if section in info:
            values = info[section]
            if not isinstance(values, dict):
                raise ValueError(f"{path}: '{section}' must be an object")
            _check_keys(path, section + ".", values, [f.name for f in dataclasses.fields(cls)])
    return info


def _check_keys(path: Path, prefix: str, values: dict, allowed) -> None:
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ValueError(
            f"{path}: unknown key(s) {', '.join(prefix + k for k in unknown)}; "
            f"allowed: {', '.join(prefix + k for k in allowed)}"
        )


def section(info: dict[str, Any], name: str, cls, folder: str | Path):
    """`cls(**info[name])`, with a bad value reported as one line naming the run file."""
    try:
        return cls(**info.get(name, {}))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{Path(folder) / RUN_CONFIG_FILE}: '{name}': {error}") from None


def saved_prompt(info: dict[str, Any] | None, folder: str | Path) -> PromptConfig:
    """The prompt layout saved with the model in `folder` (`info`: its run file, as
    `read_run_file` gives it, or None); the default layout when there is no run file or it
    has no prompt section. The one reader of that section."""
    from harness.foundation.data import PromptConfig

    return section(info, "prompt", PromptConfig, folder) if info else PromptConfig()


def write_run_file(folder: Path, info: dict[str, Any]) -> None:
    atomic_write_text(folder / RUN_CONFIG_FILE, json.dumps(info, indent=2) + "\n")


def append_line(path: Path, line: str) -> None:
    """Append `line` (with its newline) to `path`; a write that fails (a full disk) cuts the
    file back to where it was, so the log never ends in half a line."""
    data = memoryview(line.encode("utf-8"))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        size = os.fstat(fd).st_size
        try:
            while data:
                data = data[os.write(fd, data) :]
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def versions() -> dict[str, str]:
    """The versions a result depends on: Python, the model stack and this package (recorded
    in run files and reproduce digests, so a figure that moved can be traced to a package)."""
    import platform

    import accelerate
    import numpy
    import scipy
    import torch
    import transformers

    from attentionspan_datasets import __version__

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "accelerate": accelerate.__version__,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "attentionspan": __version__,
    }


def cpu_kind() -> dict[str, Any]:
    """The kind of CPU a result was computed on, as far as it decides float rounding: torch's
    kernel set (`AVX2`, `AVX512`: which vectorised code paths ATen takes), whether the CPU
    has bf16 units, and its model name. Training the same recipe on another kernel set gives
    other weights (another order of float sums), so a digest reproduces bit for bit only on
    its own kind (recorded beside the versions in settings.json and the digests)."""
    import platform

    import torch

    processor = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                processor = line.split(":", 1)[1].strip()
                break
    try:
        bf16 = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        bf16 = False
    return {
        "kernels": torch.backends.cpu.get_cpu_capability(),
        "bf16_units": bf16,
        "processor": processor,
    }


def accelerator_kind(device: Any) -> dict[str, Any] | None:
    """The GPU a run computed on, as far as it decides float rounding: its name and CUDA
    version (None where the run computed on the CPU, whose kind `cpu_kind` records). Training
    on a GPU sums floats in another order than any CPU kernel set, so a digest made there
    reproduces bit for bit only on the same GPU and CUDA."""
    import torch

    if device is None or torch.device(device).type != "cuda":
        return None
    return {"name": torch.cuda.get_device_name(device), "cuda": torch.version.cuda}


def accelerator_words(accelerator: Any) -> str:
    """An `accelerator_kind` record in words, as every report writes it: "NVIDIA H200 GPU,
    CUDA 13.0" ("CPU" for None: a run that recorded no GPU)."""
    if not isinstance(accelerator, Mapping):
        return "CPU"
    return f"{accelerator.get('name')} GPU, CUDA {accelerator.get('cuda')}"


def weights_sha256(folder: Path) -> str | None:
    """SHA-256 over a model folder's weight files (`*.safetensors`, by name, in name order):
    two folders with this digest hold the same weights. None when there are none."""
    import hashlib

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


# --- checkpoints ------------------------------------------------------------------------
def checkpoints(output: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every whole checkpoint in `output`, oldest first."""
    found = []
    for path in Path(output).glob(f"{CHECKPOINT_PREFIX}*"):
        suffix = path.name[len(CHECKPOINT_PREFIX) :]
        if suffix.isdigit() and (path / RUN_CONFIG_FILE).is_file():
            found.append((int(suffix), path))
    return sorted(found)


def latest_checkpoint(output: Path) -> Path | None:
    found = checkpoints(output)
    return found[-1][1] if found else None


def prune_checkpoints(output: Path, keep: int) -> None:
    """Keep the newest `keep` checkpoints."""
    for _, path in checkpoints(output)[:-keep] if keep > 0 else checkpoints(output):
        shutil.rmtree(path, ignore_errors=True)


def save_folder(
    accelerator,
    model,
    tokenizer,
    target: Path,
    run_info: dict[str, Any],
    training_state: dict[str, Any] | None = None,
) -> Path:
    """Write model, tokenizer, run file (and training state) to `target` atomically: a
    staging folder renamed into place. Every process must call it (the state dict gathers
    across processes); the main process writes."""
    import torch

    from harness.foundation.outputs import writing

    accelerator.wait_for_everyone()
    state_dict = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        # a full disk fails in safetensors or torch.save, neither an OSError: one line
        with writing(target), atomic_path(target, directory=True) as staging:
            accelerator.unwrap_model(model).save_pretrained(
                staging, state_dict=state_dict, safe_serialization=True
            )
            save_tokenizer(tokenizer, staging)
            if training_state is not None:
                # What the weights and the run file hold, so that a resume can tell a
                # checkpoint whose parts come from different runs or were edited.
                training_state = {
                    **training_state,
                    "run": dict(run_info.get("state", {})),
                    "weights_sha256": weights_digest(staging),
                }
                torch.save(training_state, staging / TRAINING_STATE_FILE)
            write_run_file(staging, run_info)
    accelerator.wait_for_everyone()
    return target


# What transformers records in a tokenizer's init_kwargs about how it found its files (a
# local folder, offline): saved, they made a resumed run's tokenizer_config.json differ from
# an uninterrupted run's, whose tokenizer was built, not loaded.
LOAD_ONLY_KEYS = ("is_local", "local_files_only")


def save_tokenizer(tokenizer, folder: Path) -> None:
    """`tokenizer.save_pretrained(folder)` without LOAD_ONLY_KEYS (the tokenizer keeps them)."""
    kwargs = getattr(tokenizer, "init_kwargs", {})
    held = {key: kwargs.pop(key) for key in LOAD_ONLY_KEYS if key in kwargs}
    try:
        tokenizer.save_pretrained(folder)
    finally:
        kwargs.update(held)


@contextlib.contextmanager
def quiet_pickle_protocol():
    """No "Detected pickle protocol 4" UserWarning from torch's weights-only unpickler: a
    foreign pickle is refused in one line, and the warning would be two more before it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
        yield


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else type(error).__name__


def load_training_state(checkpoint: Path) -> dict[str, Any]:
    """The optimizer and scheduler state of a checkpoint, tensors only (never unpickled)."""
    import torch

    path = checkpoint / TRAINING_STATE_FILE
    if not path.is_file():
        raise ValueError(f"{path} is missing: the checkpoint cannot be resumed")
    try:
        with quiet_pickle_protocol():
            state = torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as error:
        raise ValueError(
            f"{path}: not a tensors-only file (refused to unpickle it: {_first_line(error)})"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError, KeyError, IndexError) as error:
        raise ValueError(f"{path}: truncated or corrupt ({_first_line(error)})") from None
    if not isinstance(state, dict) or not {"optimizer", "scheduler"} <= set(state):
        raise ValueError(f"{path}: expected the keys 'optimizer' and 'scheduler'")
    return state


def weights_digest(folder: Path) -> str:
    """SHA-256 over the folder's safetensors files (name and bytes, in name order)."""
    digest = hashlib.sha256()
    for path in sorted(Path(folder).glob("*.safetensors")):
        digest.update(path.name.encode() + b"\0")
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


# What a resume compares between the run file's state and the training state's copy.
FINGERPRINT = ("run_id", "step", "next_index", "total_steps", "tokens")


def check_checkpoint(checkpoint: Path, info: dict[str, Any], training_state: dict) -> None:
    """ValueError naming the file when the parts of a checkpoint disagree: the folder's step,
    the run file's state, the training state's copy of it and the weights it was saved with
    (an edited step or next index, a file copied from another run, a foreign checkpoint).

    Checkpoints written before the copy existed carry no "run" / "weights_sha256": only
    what they hold is compared."""
    run_file = checkpoint / RUN_CONFIG_FILE
    saved = info.get("state")
    if not isinstance(saved, dict) or not isinstance(info.get("train"), dict):
        raise ValueError(
            f"{run_file}: not a training checkpoint (no 'train' and 'state' sections); "
            "a final model or another folder cannot be resumed"
        )
    suffix = checkpoint.name[len(CHECKPOINT_PREFIX) :]
    if suffix.isdigit() and saved.get("step") != int(suffix):
        raise ValueError(
            f"{run_file}: state.step is {saved.get('step')!r} but the folder is "
            f"{checkpoint.name}: edited or copied from another checkpoint"
        )
    copy = training_state.get("run")
    state_file = checkpoint / TRAINING_STATE_FILE
    if copy is not None:
        if not isinstance(copy, dict):
            raise ValueError(f"{state_file}: 'run' must be a dict of the run's state")
        for key in FINGERPRINT:
            if copy.get(key) != saved.get(key):
                raise ValueError(
                    f"{run_file} and {state_file} disagree on '{key}' "
                    f"({saved.get(key)!r} against {copy.get(key)!r}): edited, or parts of "
                    "different runs; resume from another checkpoint or start a new --output"
                )
    expected = training_state.get("weights_sha256")
    if expected is not None and weights_digest(checkpoint) != expected:
        raise ValueError(
            f"{checkpoint}: its weights (*.safetensors) are not the ones {state_file.name} "
            "was saved with: edited, or copied from another run; resume from another "
            "checkpoint or start a new --output"
        )


def check_optimizer_state(path: Path, saved: Any, optimizer) -> None:
    """ValueError naming `path` unless the saved optimizer state fits `optimizer`'s
    parameters group by group and shape by shape: torch loads a state of other shapes
    silently, and the fused AdamW step then writes out of bounds (a heap corruption that
    killed the process when a smaller model's state was resumed into a larger one)."""
    import torch

    if not isinstance(saved, dict) or not isinstance(saved.get("param_groups"), list):
        raise ValueError(f"{path}: the optimizer state has no 'param_groups'")
    groups, state = saved["param_groups"], saved.get("state", {})
    if not isinstance(state, dict):
        raise ValueError(f"{path}: the optimizer state's 'state' is not a dict")
    if len(groups) != len(optimizer.param_groups):
        raise ValueError(
            f"{path}: {len(groups)} parameter groups, the model's optimizer has "
            f"{len(optimizer.param_groups)}: a state of another model or optimizer"
        )
    for g, (old, new) in enumerate(zip(groups, optimizer.param_groups)):
        ids = old.get("params") if isinstance(old, dict) else None
        if not isinstance(ids, list) or len(ids) != len(new["params"]):
            count = len(ids) if isinstance(ids, list) else "no"
            raise ValueError(
                f"{path}: group {g} holds {count} parameters, the model has "
                f"{len(new['params'])}: a state of another model"
            )
        for index, param in zip(ids, new["params"]):
            entry = state.get(index, {})
            if not isinstance(entry, dict):
                raise ValueError(f"{path}: the state of parameter {index} is not a dict")
            for name, value in entry.items():
                if not isinstance(value, torch.Tensor):
                    continue
                if value.ndim and tuple(value.shape) != tuple(param.shape):
                    raise ValueError(
                        f"{path}: '{name}' of parameter {index} has shape "
                        f"{tuple(value.shape)}, the model's is {tuple(param.shape)}: a state "
                        "of another model"
                    )
                if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                    raise ValueError(f"{path}: '{name}' of parameter {index} is not finite")


def finished_run(output: Path) -> Path | None:
    """The final model folder of a run that finished, else None."""
    final = Path(output) / FINAL
    return final if (final / RUN_CONFIG_FILE).is_file() else None


# What a model folder's weights are named (transformers' single and sharded files).
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "*.safetensors.index.json")


def check_model_files(spec: str, option: str = "--model") -> None:
    """What can be told of a model before it loads, said before an --output folder is
    touched: the folder exists and holds a causal LM's config (`resolve_model`) and weights.
    (A folder without weights loaded as far as transformers' own OSError.)"""
    from harness.foundation.models import resolve_model

    kind, location = resolve_model(spec)
    if kind not in ("local", "known"):
        return  # scratch is built; a Hub name is checked as it downloads
    folder = Path(location)
    if not any(any(folder.glob(pattern)) for pattern in WEIGHT_PATTERNS):
        raise ValueError(
            f"{option} {spec!r} holds no weights (no *.safetensors or pytorch_model.bin in "
            f"{str(folder)!r})"
        )


def load_model_checked(spec: str, configs=(), prompt=None, **kwargs):
    """`harness.foundation.models.load_model` (which checks the folder: every tensor there in the
    config's shape, finite, a causal model), with weights that would need unpickling refused
    in one line (transformers reads `pytorch_model.bin` with weights_only, which raises),
    and with `configs` given, a model that cannot serve them under `prompt` refused
    (`harness.foundation.models.check_model_for`: the tokenizer, the context). Every model command
    loads through here."""
    from harness.foundation.models import check_model_for, load_model

    try:
        with quiet_pickle_protocol():
            model, tokenizer = load_model(spec, **kwargs)
    except pickle.UnpicklingError as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else "UnpicklingError"
        raise ValueError(
            f"model {spec!r}: its weights are a pickle that needs more than tensors; refused "
            f"to unpickle it (use safetensors): {first[:200]}"
        ) from None
    if configs:
        check_model_for(f"model {spec!r}", model, tokenizer, configs, prompt)
    return model, tokenizer


# --- the lock ---------------------------------------------------------------------------
def in_use(lock: Path, owner: str) -> str:
    return (
        f"run folder {str(lock.parent)!r} is in use by {owner} (lock {lock}); wait for that "
        "run to end or use another --output"
    )


def check_not_in_use(output: str | Path) -> None:
    """ValueError (`in_use`) when a process holds the lock of the run folder `output`: said
    before the folder's other checks (a running run's folder is neither new nor finished).
    Nothing is created: an existing lock file is opened for reading."""
    import fcntl

    path = Path(output) / LOCK_FILE
    try:
        handle = open(path)  # noqa: SIM115 (closed below)
    except OSError:
        return  # no lock file: no run there
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ValueError(in_use(path, handle.read().strip() or "another process")) from None
        fcntl.flock(handle, fcntl.LOCK_UN)


class RunLock:
    """One training process per run folder.

    `output/.lock` holds the owner's pid and host and is flock-held while the run lives:
    the kernel drops the lock when the process dies, so a lock file left by a dead process
    (kill -9, power loss) is simply taken over, and a pid can never be mistaken for a
    reused one. A second run in the same folder is refused in one line.

    The lock also remembers what the folder held when it was taken, so that `discard` can
    remove what this run added when it ends with nothing worth keeping (refused, or stopped
    by a full disk before its first checkpoint).
    """

    # what a run writes beside its checkpoints, removed by `discard` if it made them
    RUN_FILES = (TRAIN_CONFIG_FILE, LOG_FILE, LOCK_FILE)

    def __init__(self, output: str | Path):
        self.path = Path(output) / LOCK_FILE
        self._file = None
        self._made_folders: list[Path] = []  # deepest first
        self._made_files: list[str] = []

    def acquire(self) -> RunLock:
        import fcntl

        from harness.foundation.outputs import missing_folders

        output = self.path.parent
        self._made_folders = missing_folders(output)
        self._made_files = [n for n in self.RUN_FILES if not (output / n).exists()]
        try:
            output.mkdir(parents=True, exist_ok=True)
            handle = open(self.path, "a+")  # noqa: SIM115 (held open while the lock lives)
        except BaseException:
            self._remove_made(LOCK_FILE)
            raise
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            owner = handle.read().strip() or "another process"
            handle.close()
            raise ValueError(in_use(self.path, owner)) from None
        self._file = handle
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
            handle.flush()
        except BaseException:
            self.discard()  # a full disk: not even the lock's line fits
            raise
        return self

    def discard(self) -> bool:
        """Release the lock; and when the run folder holds no checkpoint and no final model,
        remove what was added since `acquire` (train_config.json, log.jsonl, the lock file,
        the folders it created; anything else keeps its folder): a run refused, or stopped
        before its first checkpoint, leaves no trace. True when it removed them."""
        if self._file is None:
            return False
        output = self.path.parent
        keep = bool(checkpoints(output)) or finished_run(output) is not None
        if not keep:
            # the lock file goes while it is still held: a process that opened it before
            # fails its flock and is refused; one that comes after makes a new one
            for name in self._made_files:
                with contextlib.suppress(FileNotFoundError):
                    (output / name).unlink()
        self.release()
        if not keep:
            self._remove_made()
        return not keep

    def _remove_made(self, *files: str) -> None:
        for name in files:
            if name in self._made_files:
                with contextlib.suppress(FileNotFoundError):
                    (self.path.parent / name).unlink()
        for folder in self._made_folders:  # deepest first; a folder with anything stays
            with contextlib.suppress(OSError):
                folder.rmdir()

    def release(self) -> None:
        if self._file is None:
            return
        import fcntl

        # The file stays (empty): unlinking it would let a process that opened the old
        # file and one that creates a new one both get "the" lock.
        self._file.seek(0)
        self._file.truncate()
        fcntl.flock(self._file, fcntl.LOCK_UN)
        self._file.close()
        self._file = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def invocation_cpu(log_path: Path) -> list[float]:
    """The CPU seconds each invocation of a training run had spent at its last log line, in
    order: a log line's `cpu_s` counts from its invocation's start, so where it falls, a
    resumed invocation began. Each is a lower bound by the steps after its last log line
    (at most the log interval; an interrupted run's checkpoint is at its last step), and two
    count as one where the later's first line is past the earlier's last (an invocation
    stopped before its second log line): then the earlier's time is missed."""
    if not log_path.is_file():
        return []
    spent: list[float] = []
    last = None
    for line in log_path.read_text(encoding="utf-8").splitlines():
        try:  # a line cut short by a kill, or absurdly nested: no time read from it
            cpu = parse_json(line, str(log_path)).get("cpu_s")
        except (ValueError, AttributeError):
            continue
        if not isinstance(cpu, (int, float)):
            continue
        if last is None or cpu < last:
            spent.append(float(cpu))
        else:
            spent[-1] = float(cpu)
        last = cpu
    return spent
