"""Train a causal LM on a task, one token per character, with accelerate.

    attentionspan train --model scratch --config reversal_id --output runs/rev --lr 1e-3
    attentionspan train --model smollm2-135m-instruct --config addition_id --lr 5e-5 \\
        --instruction "Add the two numbers." --max-steps 600 --output runs/add
    attentionspan train --output runs/rev --resume          # after an interruption
    attentionspan train ... --attention-supervision layer:1 --supervision-weight 0.5
    accelerate launch --multi_gpu --num_processes 2 -m harness.commands.train --model scratch ...
    accelerate launch --config_file docs/accelerate/fsdp_cpu.yaml -m harness.commands.train ...

Defaults are the paper's (Appendix E): AdamW, lr 5e-6, betas (0.95, 0.999), weight decay
0.2, batch 4, 1 epoch; every one is an option. Loss is on the target tokens and the EOS
after them. Data come from the generator (config, seed, stream "train", index) or from a
`datasets` dataset; both are indexed, so a checkpoint stores the next index and a resumed
run sees exactly the data an uninterrupted one would have. Each checkpoint folder holds the
model (safetensors), the tokenizer, the run configuration (`attentionspan_run.json`) and the
optimizer and scheduler state; folders are written under a temporary name and renamed.

`--attention-supervision HEADS` adds an auxiliary loss pulling those heads' attention toward
the reference mask (`harness.foundation.supervision_options` for the options,
`harness.engine.supervision`
for the loss, read on the training forward itself): total = LM loss + weight x supervision
loss; the log gets `supervision_loss` (and the weight) beside the LM `loss`.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from attentionspan_datasets.metrics import ALL_METRICS
from harness.engine.inference import autocast
from harness.evaluation.evaluate import evaluate_model
from harness.foundation.data import collate
from harness.foundation.outputs import Terminated, WriteError, writing
from harness.foundation.runs import (
    CHECKPOINT_PREFIX,
    FINAL,
    LOG_FILE,
    append_line,
    finished_run,
    latest_checkpoint,
)
from harness.foundation.tokenization import IGNORE_INDEX, CharTokenizer
from harness.training.checkpoints import save_checkpoint
from harness.training.config import TrainConfig, flat_options, parse_curriculum
from harness.training.fsdp import evaluation_model
from harness.training.loss import lm_loss
from harness.training.setup import Run, Window, set_up

# The public entry: the commands and the pipeline import these from here, while the options,
# the set-up and the checkpoints live beside the loop (config.py, setup.py, checkpoints.py).
__all__ = ["TrainConfig", "flat_options", "parse_curriculum", "set_up", "train"]

VALIDATION_SPLIT = "validation"

EVAL_KEYS = ("count", *ALL_METRICS)


class LossNotFinite(ValueError):
    """The loss (or the gradient norm) became inf or nan; the step was not taken."""


def is_out_of_memory(error: BaseException) -> bool:
    import torch

    if isinstance(error, torch.OutOfMemoryError):
        return True
    text = str(error)
    return "out of memory" in text or "can't allocate memory" in text


def batch_instances(run: Run, indices: range) -> list:
    """The instances of one micro-batch: the curriculum stage's while one lasts (data
    indices continue across stages, so a resumed run draws the same rows)."""
    for end, source in run.curriculum:
        if run.state.step < end:
            return [source[i] for i in indices]
    return [run.source[i % len(run.source)] for i in indices]


def training_batch(
    config: TrainConfig, char_tok: CharTokenizer, instances: list, masks: bool = False
) -> dict:
    """The padded batch of `instances`; with `loss_on="all"` every real token is a label;
    `masks`: with the reference mask ([batch, L, L], for attention supervision).

    Flip-flop's mid-program reads show the register's bit, so each is the task on a prefix:
    trained on the whole text the model sees several answers per program instead of one
    (how Liu et al. 2023 train flip-flop language models)."""
    batch = collate(
        [config.prompt.encode(char_tok, x) for x in instances],
        char_tok.pad_id,
        padding_side="right",
        masks=masks,
    )
    if config.loss_on == "all":
        padding = batch["attention_mask"] == 0
        batch["labels"] = batch["input_ids"].masked_fill(padding, IGNORE_INDEX)
    return batch


def train_step(run: Run, stop_requested: bool) -> tuple[float, int, bool]:
    """One optimizer step: (loss summed over processes, tokens of all processes, whether
    any process asked to stop). Raises LossNotFinite before stepping on inf / nan."""
    import torch

    config, accelerator, model = run.config, run.accelerator, run.model
    loss_sum = torch.zeros((), dtype=torch.float32)
    supervision_sum = torch.zeros((), dtype=torch.float32)
    tokens = 0
    # A step of weight 0 (a warmup's first, or --supervision-weight 0) is the plain step:
    # the model's own attention, nothing captured, exactly the unsupervised run.
    weight = run.supervision_weight()
    supervised = weight > 0
    try:
        for micro in range(config.grad_accum):
            instances = batch_instances(run, next(run.micro_batches))
            batch = training_batch(config, run.char_tok, instances, masks=supervised)
            tokens += int(batch["attention_mask"].sum())
            inputs = {
                k: batch[k].to(accelerator.device)
                for k in ("input_ids", "attention_mask", "position_ids", "labels")
            }
            last = micro == config.grad_accum - 1
            with contextlib.nullcontext() if last else accelerator.no_sync(model):
                if supervised:
                    loss, supervision = supervised_forward(run, inputs, batch)
                    loss, supervision = loss / config.grad_accum, supervision / config.grad_accum
                    accelerator.backward(loss + weight * supervision)
                    supervision_sum += supervision.detach().float().cpu()
                else:
                    with autocast(run.precision, accelerator.device):
                        loss = lm_loss(model, run.bare, inputs) / config.grad_accum
                    accelerator.backward(loss)
            loss_sum += loss.detach().float().cpu()
        # One reduction per step carries the loss, the tokens and a stop request, so every
        # process stops (and checkpoints) at the same step.
        values = [float(loss_sum), float(tokens), float(stop_requested), float(supervision_sum)]
        totals = torch.tensor(values)
        if run.world > 1:
            totals = accelerator.reduce(totals.to(accelerator.device), "sum").cpu()
        step_loss = float(totals[0])
        if not math.isfinite(step_loss):
            raise LossNotFinite(f"the training loss became {step_loss}")
        if not math.isfinite(float(totals[3])):
            raise LossNotFinite(f"the supervision loss became {float(totals[3])}")
        if config.max_grad_norm > 0:
            norm = float(accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm))
            if not math.isfinite(norm):
                raise LossNotFinite(f"the gradient norm became {norm}")
        run.optimizer.step()
        run.scheduler.step()
        run.optimizer.zero_grad(set_to_none=True)
    except RuntimeError as error:
        if is_out_of_memory(error):
            smaller = max(1, config.batch_size // 2)
            raise ValueError(
                f"out of memory at --batch-size {config.batch_size}; try --batch-size "
                f"{smaller} --grad-accum {config.grad_accum * 2} (same effective batch)"
            ) from None
        raise
    run.state.step += 1
    run.state.next_index += run.per_step
    run.state.tokens += int(totals[1])
    run.step_supervision = float(totals[3]) if supervised else None
    run.step_weight = weight
    run.bar.update(1)
    return step_loss, int(totals[1]), bool(totals[2])


def supervised_forward(run: Run, inputs: dict, batch: dict):
    """(LM loss, supervision loss) of one micro-batch, from one forward: the supervised
    heads' weights are read inside the capture attention function, their graph kept."""
    from harness.engine.positions import causal_valid, shift_mask
    from harness.engine.supervision import Supervision, supervise

    options = run.config.supervision
    # ref+k, only where a query may look (a key after the query, or padding, is no cell)
    reference = causal_valid(
        shift_mask(batch["reference_mask"], options.supervision_shift), batch["attention_mask"]
    )
    plan = Supervision(run.heads, reference, loss=options.supervision_loss)
    with autocast(run.precision, run.accelerator.device):
        with supervise(run.bare, plan) as recorder:  # capture hooks the model inside DDP
            loss = lm_loss(run.model, run.bare, inputs)
    return loss, recorder.loss().to(loss.device)


def log_step(run: Run, window: Window) -> None:
    seconds = time.perf_counter() - window.start
    tokens_per_s = window.tokens / max(seconds, 1e-9)
    mean_loss = window.loss / (window.steps * run.world)
    run.state.elapsed_s = time.perf_counter() - run.started
    run.bar.set_postfix(loss=f"{mean_loss:.4f}", tok_s=f"{tokens_per_s:.0f}")
    supervision = {}
    if run.heads is not None:
        # mean over the window's supervised steps (a step of weight 0 computes none)
        steps = window.supervised_steps
        supervision = {
            "supervision_loss": window.supervision / (steps * run.world) if steps else None,
            "supervision_weight": run.step_weight,
        }
    append_log(
        run,
        {
            "step": run.state.step,
            "loss": mean_loss,
            **supervision,
            "lr": run.scheduler.get_last_lr()[0],
            "tokens_per_s": tokens_per_s,
            "next_index": run.state.next_index,
            "elapsed_s": round(run.state.elapsed_s, 2),
            "tokens": run.state.tokens,
            # CPU time of this invocation's loop: robust on a shared machine
            "cpu_s": round(time.process_time() - run.cpu_start, 3),
        },
    )


def append_log(run: Run, record: dict[str, Any]) -> None:
    if run.main:
        append_line(run.output / LOG_FILE, json.dumps(record) + "\n")


def evaluate_validation(run: Run) -> dict[str, Any]:
    """Scores on the first `eval_size` rows of the config's validation split."""
    results, _ = evaluate_model(
        evaluation_model(run),
        run.tokenizer,
        [run.config.config],
        run.config.eval_size,
        seed=run.config.seed,
        split=VALIDATION_SPLIT,
        batch_size=run.config.eval_batch_size,
        prompt=run.config.prompt,
        mixed_precision=run.precision,
        accelerator=run.accelerator,
    )
    return {k: results[run.config.config][k] for k in EVAL_KEYS}


def log_evaluation(run: Run, scores: dict[str, Any]) -> None:
    if run.main:
        run.bar.write(
            f"step {run.state.step}: ID exact match {scores['exact_match']:.3f}, "
            f"TF token acc {scores['tf_token_acc']:.3f}"
        )
    append_log(run, {"step": run.state.step, "eval": scores})


def due(step: int, every: int) -> bool:
    return bool(every) and step % every == 0


@contextlib.contextmanager
def stop_on_signals():
    """SIGINT / SIGTERM ask the loop to stop after the current step (it then saves a
    checkpoint); a second Ctrl-C stops at once. Outside the main thread, nothing changes."""
    import signal
    import threading

    flag = {"signal": None}
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def ask(signum, frame):
        if flag["signal"] is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        flag["signal"] = signum

    previous = {s: signal.signal(s, ask) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def stop_with_checkpoint(run: Run, signum: int | None = None) -> None:
    """Save where the run stands and end it as an interruption: exit status 130 for Ctrl-C,
    143 when `signum` is SIGTERM (`harness.foundation.outputs.Terminated`)."""
    import signal

    name = f"{CHECKPOINT_PREFIX}{run.state.step}"
    if not due(run.state.step, run.config.save_every):  # else it was saved just now
        save_checkpoint(run, name)
    run.bar.close()  # before the message, so the bar does not print after it
    # no resume_with: a run that replaces an earlier one, which the interruption puts back
    # (the checkpoint is saved all the same: every process of a launch must take part)
    kept = f": saved {run.output / name}; continue with: {run.resume_with}"
    if run.main:
        print(
            f"interrupted at step {run.state.step} of {run.state.total_steps}"
            + (kept if run.resume_with else ""),
            file=sys.stderr,
        )
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def stop_on_bad_loss(run: Run, error: LossNotFinite) -> None:
    last = latest_checkpoint(run.output)
    kept = f"the last good checkpoint is {last}" if last else "no checkpoint was saved"
    raise ValueError(
        f"{error} at step {run.state.step + 1}; the run stopped without taking that step and "
        f"saved nothing new ({kept}); try a lower --lr or a --max-grad-norm"
    ) from None


def stopped_by_write_failure(run: Run) -> str:
    """What is left of a run a write failure stopped (a full disk): nothing, when it had no
    checkpoint yet (`RunLock.discard` removes what it wrote), else how to continue."""
    if run.lock is not None and run.lock.discard():
        return f"nothing of the run was kept in {run.output} (it had no checkpoint yet)"
    last = latest_checkpoint(run.output)
    if last is None or not run.resume_with:
        return "the run stopped"
    return (
        f"the run stopped at step {run.state.step}; its latest checkpoint is {last}: make "
        f"room, then continue with: {run.resume_with}"
    )


def finish(run: Run) -> Path:
    """The final evaluation on the validation split, and the final model."""
    try:
        scores = evaluate_validation(run)
    except KeyboardInterrupt:  # Ctrl-C during the last evaluation: keep the trained steps
        stop_with_checkpoint(run)
        raise
    run.state.elapsed_s = time.perf_counter() - run.started
    if run.main:
        print(
            f"final ID ({run.config.config}, {run.config.eval_size} validation instances): "
            f"exact match {scores['exact_match']:.3f}, TF token acc "
            f"{scores['tf_token_acc']:.3f}; {run.state.step} steps in {run.state.elapsed_s:.0f} s",
            file=sys.stderr,
        )
    return save_checkpoint(run, FINAL, with_optimizer=False, final_eval=scores)


def train(
    config: TrainConfig,
    resume: bool = False,
    stop_after: int | None = None,
    progress: bool = True,
    requested: dict[str, Any] | None = None,
    resume_with: str | None = None,
) -> Path:
    """Run (or resume) training; returns the folder of the final model.

    `stop_after` ends the run after that many optimizer steps of this invocation without
    saving, as `kill -9` would (tests use it to check that resuming gives the same run).
    `requested`: the options the user gave, checked against a resumed run (default: the
    fields of `config` that are not the defaults). `resume_with`: the command an
    interruption or a full disk tells the user to continue with (default: `attentionspan
    train --output OUT --resume`; reproduce --quick's is reproduce itself; "": none, as for
    a run that replaces an earlier one, which an interruption puts back).
    """
    if resume and (final := finished_run(Path(config.output))) is not None:
        # A no-op, not a refusal: `train --resume` until it succeeds is then safe to rerun,
        # and a leftover checkpoint never retrains (and overwrites) a finished model.
        print(
            f"{config.output} is finished ({final} is written): nothing to resume; to train "
            "further, start a new --output from --model " + str(final),
            file=sys.stderr,
        )
        return final
    run = set_up(config, resume, progress, requested)
    if resume_with is None:  # "": no way to continue it (it replaces an earlier run)
        resume_with = f"attentionspan train --output {run.output} --resume"
    run.resume_with = resume_with
    try:
        with writing(run.output), stop_on_signals() as stop:
            steps_this_run = 0
            while run.state.step < run.state.total_steps:
                try:
                    loss, tokens, stopping = train_step(run, stop["signal"] is not None)
                except LossNotFinite as error:
                    stop_on_bad_loss(run, error)
                window = run.window
                window.loss, window.tokens = window.loss + loss, window.tokens + tokens
                window.steps, steps_this_run = window.steps + 1, steps_this_run + 1
                if run.step_supervision is not None:
                    window.supervision += run.step_supervision
                    window.supervised_steps += 1
                step, last = run.state.step, run.state.step == run.state.total_steps
                if due(step, run.config.log_every) or last:
                    log_step(run, window)
                    run.window = Window()
                if due(step, run.config.eval_every) and not last:
                    log_evaluation(run, evaluate_validation(run))
                    run.window.start = time.perf_counter()  # evaluation is not training time
                if due(step, run.config.save_every):
                    save_checkpoint(run, f"{CHECKPOINT_PREFIX}{step}")
                if stopping and not last:
                    stop_with_checkpoint(run, stop["signal"])
                if stop_after is not None and steps_this_run >= stop_after and not last:
                    return run.output
        if stop["signal"] is not None:
            # Ctrl-C in the last step (or just after it): the loop no longer looks at the
            # flag, and the run went on to write its final model with exit 0 (the lost
            # SIGINT of supervision --jobs). An interruption, saved as any other.
            stop_with_checkpoint(run, stop["signal"])
        run.bar.close()
        return finish(run)
    except WriteError as error:
        raise WriteError(f"{error}; {stopped_by_write_failure(run)}") from None
    finally:
        run.bar.close()
        if run.lock is not None:
            run.lock.release()
