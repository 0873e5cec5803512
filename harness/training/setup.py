"""Everything a training run needs before its first step, made once (`set_up` returns a
`Run`): the run folder locked, the data source, the model (loaded or resumed) checked
against the data, the optimizer and scheduler, and accelerate's preparation (DDP or FSDP).

    attentionspan train --model scratch --config reversal_id --output runs/rev --lr 1e-3
"""

from __future__ import annotations

import functools
import json
import math
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attentionspan_datasets.atomic import atomic_write_text
from attentionspan_datasets.generation import resolve_config
from attentionspan_datasets.jsonfile import JSONFileError
from harness.engine.inference import model_shape
from harness.foundation.data import (
    DatasetSource,
    GeneratorSource,
    check_context,
    source_text,
    training_indices,
)
from harness.foundation.models import check_vocabulary
from harness.foundation.outputs import check_output_folder
from harness.foundation.runs import (
    LOG_FILE,
    TRAIN_CONFIG_FILE,
    TRAINING_STATE_FILE,
    RunLock,
    TrainState,
    append_line,
    check_optimizer_state,
    load_model_checked,
)
from harness.foundation.tokenization import CharTokenizer
from harness.training.checkpoints import (
    check_supervised_heads,
    load_resume,
    saved_supervision_window,
    trim_log,
)
from harness.training.config import (
    TrainConfig,
    parse_curriculum,
    requested_options,
    resume_conflicts,
)
from harness.training.fsdp import (
    is_fsdp,
    load_sharded_optimizer_state,
    make_accelerator,
    parameter_names,
    tied_copies,
)

TRAIN_SPLIT = "train"  # rows of attentionspan_datasets.splits; eval reads "test"

# bf16 autocast pays off for large matrices on hardware with bf16 units (2.5x for the 135M
# model on an AVX512-BF16 CPU in one measurement); on an AVX2-only CPU it is emulated and several
# times slower, and for tiny models the casts cost more than they save (docs/performance.md).
AUTO_BF16_MIN_PARAMS = 20_000_000


@dataclass
class Run:
    """What the loop works on, made once by `set_up`."""

    config: TrainConfig
    state: TrainState
    output: Path
    accelerator: Any
    model: Any
    tokenizer: Any
    char_tok: CharTokenizer
    source: Any
    optimizer: Any
    scheduler: Any
    precision: str
    micro_batches: Iterator[range]
    bar: Any
    lock: RunLock | None
    started: float  # perf_counter at step 0 of the whole run (elapsed time carried over)
    window: Window | None = None  # the log window; saved in checkpoints (TrainState)
    curriculum: list = field(default_factory=list)  # (last step, source) per stage
    cpu_start: float = field(default_factory=time.process_time)  # this invocation's CPU time
    resume_with: str = ""  # the command that continues the run (train's own, or reproduce)
    heads: Any = None  # bool [layers, heads] supervised (--attention-supervision), or None
    # the last step's supervision loss (None: not supervised) and its weight, for the log
    step_supervision: float | None = None
    step_weight: float = 0.0
    parameter_names: list[str] = field(default_factory=list)  # the optimizer's, in its order

    @property
    def main(self) -> bool:
        return self.accelerator.is_main_process

    @functools.cached_property
    def bare(self):
        """The model inside accelerate's DDP/FSDP wrapper (prepared once: unwrapped once,
        not at every step)."""
        return self.accelerator.unwrap_model(self.model)

    @property
    def world(self) -> int:
        return self.accelerator.num_processes

    @property
    def per_step(self) -> int:
        return self.config.batch_size * self.config.grad_accum * self.world

    def supervision_weight(self) -> float:
        """The weight of the supervision loss in the next step (0 when off)."""
        if self.heads is None:
            return 0.0
        return self.config.supervision.weight_at(self.state.step, self.state.total_steps)


@dataclass
class Window:
    """Loss and tokens since the last log line."""

    loss: float = 0.0
    tokens: int = 0
    steps: int = 0
    start: float = field(default_factory=time.perf_counter)
    supervision: float = 0.0  # supervision loss summed over processes and supervised steps
    supervised_steps: int = 0


def set_up(
    config: TrainConfig, resume: bool, progress: bool, requested: dict[str, Any] | None
) -> Run:
    """Lock the run folder, load (or resume) everything, check what can be checked before
    the first step."""
    from tqdm.auto import tqdm

    accelerator = make_accelerator()
    output = Path(config.output)
    if accelerator.is_main_process:
        check_output_folder("'output'", output)  # read-only, full: refused before the lock
    lock = RunLock(output).acquire() if accelerator.is_main_process else None
    try:
        state, checkpoint, training_state = TrainState(run_id=uuid.uuid4().hex), None, None
        if resume:
            config, state, checkpoint, training_state = resumed_run(config, output, requested)
        source = make_source(config)  # a bad preset fails before the model is loaded
        ranking = load_ranking(config)  # as a missing heads.json does
        model, tokenizer, char_tok = load_checked_model(config, source, checkpoint)
        heads = supervised_heads(config, model, ranking)
        if heads is not None and checkpoint is not None:
            check_supervised_heads(output / LOG_FILE, heads)
        world = accelerator.num_processes
        per_step = config.batch_size * config.grad_accum * world
        state.total_steps = config.max_steps or math.ceil(len(source) * config.epochs / per_step)
        optimizer = make_optimizer(model, config)
        scheduler = make_scheduler(optimizer, config, state.total_steps)
        if checkpoint is not None:
            restore_optimizer(checkpoint, training_state, optimizer, scheduler)
        names, copies = parameter_names(model, optimizer), tied_copies(model)
        model, optimizer = accelerator.prepare(model, optimizer)
        if is_fsdp(accelerator):
            set_up_fsdp(accelerator, model, optimizer, copies, names, checkpoint, training_state)
        model.train()
        if accelerator.is_main_process:
            start_run_folder(output, config, state, heads)
    except BaseException:
        if lock is not None:
            lock.discard()  # a refused run leaves no folder behind (nor a lock file)
        raise
    bar = tqdm(
        total=state.total_steps,
        initial=state.step,
        disable=not (accelerator.is_main_process and progress),
        desc="train",
        dynamic_ncols=True,
    )
    return Run(
        config=config,
        state=state,
        output=output,
        accelerator=accelerator,
        model=model,
        tokenizer=tokenizer,
        char_tok=char_tok,
        source=source,
        optimizer=optimizer,
        scheduler=scheduler,
        precision=resolve_mixed_precision(config.mixed_precision, model),
        micro_batches=training_indices(
            state.next_index, config.batch_size, world, accelerator.process_index
        ),
        bar=bar,
        lock=lock,
        started=time.perf_counter() - state.elapsed_s,
        window=Window(
            loss=state.window_loss,
            steps=state.window_steps,
            **saved_supervision_window(training_state),
        ),
        curriculum=curriculum_sources(config),
        heads=heads,
        parameter_names=names,
    )


def resumed_run(
    config: TrainConfig, output: Path, requested: dict[str, Any] | None
) -> tuple[TrainConfig, TrainState, Path, dict[str, Any]]:
    """`load_resume`'s (config, state, checkpoint, training state), refused when the options
    asked for (`requested`, default: those of `config` that are not the defaults) differ
    from the saved run's."""
    saved, state, checkpoint, training_state = load_resume(output)
    conflicts = resume_conflicts(
        saved, requested_options(config) if requested is None else requested
    )
    if conflicts:
        raise ValueError(
            "--resume continues the saved run unchanged; these options differ from "
            f"it: {'; '.join(conflicts)} (drop them, or start a new --output)"
        )
    return saved, state, checkpoint, training_state


def load_checked_model(config: TrainConfig, source, checkpoint: Path | None):
    """(model, tokenizer, CharTokenizer) of the run (the checkpoint's on a resume), refused
    before the first step when a character of the data has no token, or no embedding, or a
    text is longer than the model's context."""
    # the characters of the first rows (and of a dataset's rows, checked as they are
    # read) and of each curriculum stage: checked against the model below
    text = source_text(source, config.prompt) + "".join(
        source_text(stage, config.prompt) for _, stage in curriculum_sources(config)
    )
    model, tokenizer = load_model_checked(
        str(checkpoint) if checkpoint else config.model, scratch=config.scratch
    )
    char_tok = CharTokenizer(tokenizer)
    try:
        char_tok.check_text(text)  # a character the tokenizer lacks: fail now
    except ValueError as error:
        if config.model != "scratch" or checkpoint is not None:
            raise
        raise ValueError(f"--scratch-charset: {error}") from None
    try:  # an id past the model's embeddings: an IndexError in the first step
        check_vocabulary(model, char_tok, text, config.prompt)
    except ValueError as error:
        raise ValueError(f"model {config.model!r}: {error}") from None
    if not config.dataset:
        try:
            check_contexts(config, model, char_tok)
        except ValueError as error:
            raise ValueError(f"model {config.model!r}: {error}") from None
    return model, tokenizer, char_tok


def check_contexts(config: TrainConfig, model, char_tok: CharTokenizer) -> None:
    """ValueError when the longest text of --config, or of a curriculum stage, does not fit
    the model's context."""
    check_context(model, char_tok, config.config, config.prompt)
    # each curriculum stage's texts too: its lengths are its own
    for k, (_, overrides) in enumerate(parse_curriculum(config.curriculum, config.config), 1):
        stage = resolve_config(config.config, **overrides)
        try:
            check_context(model, char_tok, stage, config.prompt)
        except ValueError as error:
            shown = ",".join(f"{key}={value}" for key, value in overrides.items())
            raise ValueError(f"'curriculum' stage {k} ({shown}): {error}") from None


def restore_optimizer(
    checkpoint: Path, training_state: dict[str, Any], optimizer, scheduler
) -> None:
    """Load the checkpoint's optimizer and scheduler state; ValueError naming the file when
    it does not fit this run."""
    state_file = checkpoint / TRAINING_STATE_FILE
    check_optimizer_state(state_file, training_state["optimizer"], optimizer)
    try:
        optimizer.load_state_dict(training_state["optimizer"])
        scheduler.load_state_dict(training_state["scheduler"])
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise ValueError(
            f"{state_file}: the optimizer or scheduler state does not fit this run "
            f"({type(error).__name__}: {first[:200]})"
        ) from None


def set_up_fsdp(
    accelerator,
    model,
    optimizer,
    copies: list[str],
    names: list[str],
    checkpoint: Path | None,
    training_state: dict[str, Any] | None,
) -> None:
    """An FSDP-prepared model saved as a DDP one is, and its sharded optimizer state
    restored on a resume."""
    # the gathered state dict holds a tied weight twice, in two tensors, which
    # save_pretrained then keeps: leave the copy out, as a DDP run's file does
    bare = accelerator.unwrap_model(model)
    bare._keys_to_ignore_on_save = [*(bare._keys_to_ignore_on_save or []), *copies]
    if checkpoint is not None:
        load_sharded_optimizer_state(model, optimizer, training_state["optimizer"], names)
    if accelerator.is_main_process:  # said, as accelerate falls back to DDP silently
        version = accelerator.state.fsdp_plugin.fsdp_version
        world = accelerator.num_processes
        print(f"FSDP{version}: the model is sharded over {world} processes", file=sys.stderr)


def start_run_folder(output: Path, config: TrainConfig, state: TrainState, heads) -> None:
    """The run folder's train_config.json, and its log trimmed to the step the run starts
    from (main process only)."""
    output.mkdir(parents=True, exist_ok=True)
    atomic_write_text(output / TRAIN_CONFIG_FILE, json.dumps(config.to_dict(), indent=2) + "\n")
    trim_log(output / LOG_FILE, state.step)
    if heads is not None and state.step == 0:
        # the heads top:N found in its ranking, as the run's first record
        record = {"step": 0, "supervised_heads": heads.nonzero().tolist()}
        append_line(output / LOG_FILE, json.dumps(record) + "\n")


def make_source(config: TrainConfig):
    if config.dataset:
        return DatasetSource.load(config.dataset, config.dataset_config, config.dataset_split)
    mask = mask_override(config)
    task = resolve_config(config.config, **mask) if mask else config.config
    return GeneratorSource(task, seed=config.seed, split=TRAIN_SPLIT, size=config.train_size)


def mask_override(config: TrainConfig) -> dict[str, str]:
    """`{"mask": ...}` of the supervised mask, for generated data under supervision: the
    training data's references are then that mask's (a task's mask never changes its
    prompts or targets, so the rows are those of an unsupervised run)."""
    if not config.supervision.enabled:
        return {}
    return {"mask": config.supervision.supervision_mask}


def curriculum_sources(config: TrainConfig) -> list[tuple[int, GeneratorSource]]:
    """(last step, endless source) of each curriculum stage, in order."""
    out, end = [], 0
    for steps, overrides in parse_curriculum(config.curriculum, config.config):
        end += steps
        task = resolve_config(config.config, **overrides, **mask_override(config))
        out.append((end, GeneratorSource(task, seed=config.seed, split=TRAIN_SPLIT)))
    return out


def make_optimizer(model, config: TrainConfig):
    """AdamW; as in Hugging Face's Trainer, biases and norm weights (1-D) are not decayed."""
    import torch

    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    kwargs = dict(lr=config.lr, betas=(config.beta1, config.beta2), eps=config.adam_eps)
    try:
        return torch.optim.AdamW(groups, fused=True, **kwargs)  # 2.5x faster step on CPU
    except (RuntimeError, TypeError):
        return torch.optim.AdamW(groups, **kwargs)


def make_scheduler(optimizer, config: TrainConfig, total_steps: int):
    from transformers import get_scheduler

    warmup = int(config.warmup_ratio * total_steps)
    name = "constant_with_warmup" if config.schedule == "constant" else config.schedule
    return get_scheduler(name, optimizer, num_warmup_steps=warmup, num_training_steps=total_steps)


def bf16_is_fast() -> bool:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())  # AVX512-BF16 or AMX
    except (AttributeError, RuntimeError):
        return False


def resolve_mixed_precision(setting: str, model) -> str:
    """`auto`: bf16 for models of 20M parameters or more where bf16 has hardware support."""
    if setting != "auto":
        return setting
    params = sum(p.numel() for p in model.parameters())
    return "bf16" if params >= AUTO_BF16_MIN_PARAMS and bf16_is_fast() else "no"


def load_ranking(config: TrainConfig):
    """The order of the head ranking `top:N` reads (best first), None for other head
    choices; ValueError naming 'supervision_ranking' for a missing or foreign file."""
    if not config.supervision.enabled or config.supervision.heads.kind != "top":
        return None
    from harness.attention.heads import HEADS_FILE, HeadRanking

    path = Path(config.supervision_ranking)
    shown = path / HEADS_FILE if path.is_dir() else path
    if not shown.is_file():
        raise ValueError(
            f"'supervision_ranking' {str(shown)!r} does not exist (a heads.json from "
            "`attentionspan heads`)"
        )
    try:
        ranking = HeadRanking.load(path)
    except JSONFileError as error:  # torn, deep, not an object: the reader's line names it
        raise ValueError(f"'supervision_ranking': {error}") from None
    except (OSError, ValueError, KeyError, TypeError, IndexError) as error:
        # a value of the file may be quoted in the reason: shown whole unless absurdly long
        reason = " ".join(str(error).split())
        reason = reason if len(reason) <= 300 else reason[:300] + " ..."
        raise ValueError(
            f"'supervision_ranking' {str(shown)!r} is not a head ranking "
            f"({type(error).__name__}: {reason})"
        ) from None
    return ranking


def supervised_heads(config: TrainConfig, model, ranking=None):
    """bool [layers, heads] of the heads `--attention-supervision` names on `model`, or
    None when supervision is off; ValueError naming the option for a head the model lacks."""
    import torch

    if not config.supervision.enabled:
        return None
    layers, heads = model_shape(model)
    order = None
    if ranking is not None:
        if (ranking.num_layers, ranking.num_heads) != (layers, heads):
            raise ValueError(
                f"'supervision_ranking' {config.supervision_ranking!r} ranks the heads of a "
                f"model of [layers, heads] = [{ranking.num_layers}, {ranking.num_heads}], "
                f"this one has [{layers}, {heads}]"
            )
        order = ranking.order
    chosen = torch.zeros(layers, heads, dtype=torch.bool)
    for layer, head in config.supervision.heads.resolve(layers, heads, order):
        chosen[layer, head] = True
    return chosen
