"""Let lm-eval find the attnspan tasks and the `attnspan-hf` model type without flags.

    lm_eval --model hf --model_args pretrained=DIR --tasks 'attnspan_*'

lm-eval 0.4.13 finds external tasks only through `--include_path` and has no plug-in entry
points. The package's post-import hook (`attentionspan_datasets/startup.py`, armed by a .pth
file in the wheel; off with ATTENTIONSPAN_NO_AUTOREGISTER=1) therefore runs these right
after lm-eval imports the modules they patch:

    "lm_eval.tasks": "lm_eval_tasks.registration:patch_task_manager"
    "lm_eval.api.registry": "lm_eval_tasks.registration:register_model_type"

Both are idempotent and cheap: neither imports torch, transformers or the tasks' data code
(a TaskManager made with `--metadata '{"attnspan": ...}'`, or in an `lm_eval` command that
names attnspan tasks, imports `dataset` to check those options before lm-eval loads the
model). The patched TaskManager also drops lm-eval's log lines about our tasks that tell a
user nothing (`quiet`).

What can be checked before the model loads, and why only in the `lm_eval` command: lm-eval
0.4.13's command builds its TaskManager (our hook) before `simple_evaluate` loads the model,
and builds the tasks (calling `custom_dataset`) only after. The hook knows the metadata, and
in the command the `--tasks` and `--num_fewshot` it was given (read from the command line as
`--model` is, and matched with the manager's own `match_tasks` and `task_index`): so each
named attnspan task's options and fields, and the few-shot pool, are checked then. A Python
caller of `simple_evaluate` gets no such point: it loads the model first and makes its
TaskManager after (unless one is passed), so there the same checks run when the tasks are
built, after the model loaded, unless lm-eval's internals were patched further.
Without the hook, `--include_path "$(python -c 'import lm_eval_tasks;
print(lm_eval_tasks.TASKS_DIR)')"` finds the tasks, and `register()` does both by hand.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import sys
from pathlib import Path
from typing import Any

from lm_eval_tasks import TASKS_DIR
from lm_eval_tasks.command import under_lm_eval_command
from lm_eval_tasks.quiet import quiet_lm_eval_warnings

MODEL_NAME = "attnspan-hf"
MODEL_TARGET = "lm_eval_tasks.models:AttnspanHFLM"
# how our tasks' YAML names its data function (lm-eval's index leaves !function unresolved)
CUSTOM_DATASET = "lm_eval_tasks.dataset.custom_dataset"


def with_tasks_dir(include_path: Any) -> list:
    """`include_path` as a list that starts with this folder (once), then the folder of
    the installed plugin tasks' files if there are any (`plugin_tasks.tasks_dir`). Ours go
    first, so a folder the user names can still override one of our tasks."""
    if include_path is None:
        paths = []
    elif isinstance(include_path, (list, tuple)):
        paths = list(include_path)
    else:
        paths = [include_path]
    given = {Path(p).expanduser().resolve() for p in paths}
    ours = [d for d in (TASKS_DIR, plugin_tasks_dir()) if d and Path(d).resolve() not in given]
    return [*ours, *paths]


def plugin_tasks_dir() -> str | None:
    """The plugin tasks' folder, or None; a failure to write it is a warning, never a
    broken lm-eval (the built-in tasks still run)."""
    from lm_eval_tasks import plugin_tasks

    try:
        return plugin_tasks.tasks_dir()
    except Exception as error:
        import warnings

        warnings.warn(
            f"attentionspan: the lm-eval tasks of plugin packages were not written: {error!r}",
            RuntimeWarning,
            stacklevel=2,
        )
        return None


def patch_task_manager(module: Any = None) -> None:
    """Make every `lm_eval.tasks.TaskManager` that includes lm-eval's own tasks include ours."""
    manager = sys.modules.get("lm_eval.tasks.manager")
    if manager is not None and not hasattr(manager, "TaskManager"):
        # lm_eval.tasks is still being imported (its manager imports `datasets`, whose hook
        # arms the hooks of the modules already in sys.modules): the post-import hook runs
        # this again once lm_eval.tasks is done.
        return
    from lm_eval.tasks.manager import TaskManager

    original = TaskManager.__init__
    if getattr(original, "_attnspan_patched", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        if bound.arguments["include_defaults"]:
            bound.arguments["include_path"] = with_tasks_dir(bound.arguments["include_path"])
        metadata = bound.arguments.get("metadata")
        if isinstance(metadata, dict) and ("attention" in metadata or "threads" in metadata):
            check_attention_model(metadata)  # also before the model is loaded
        if isinstance(metadata, dict) and "attnspan" in metadata:
            # Before lm-eval loads the model: a bad option costs a second, not a model load.
            from lm_eval_tasks.dataset import preflight

            preflight(metadata)
        original(*bound.args, **bound.kwargs)
        if under_lm_eval_command():  # the command names its tasks: check each of ours now
            options = command_options(sys.argv[1:])
            presets = named_presets(self, options.tasks)
            if presets:
                from lm_eval_tasks.dataset import preflight_tasks

                given = metadata if isinstance(metadata, dict) else {}
                preflight_tasks(presets, given, options.num_fewshot)

    __init__._attnspan_patched = True
    TaskManager.__init__ = __init__
    quiet_lm_eval_warnings()


def command_options(argv: list[str]) -> argparse.Namespace:
    """`--model`, `--tasks` (`-t`, several words, commas) and `--num_fewshot` (`-f`) of an
    `lm_eval` command line, as lm-eval's own parser reads them; None where not given. Every
    other word is left alone."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--model")
    parser.add_argument("--tasks", "-t", nargs="+")
    parser.add_argument("--num_fewshot", "-f")
    try:
        options, _ = parser.parse_known_args(argv)
    except SystemExit:  # a flag without its value: lm-eval's parser says so itself
        return argparse.Namespace(model=None, tasks=None, num_fewshot=None)
    if options.tasks:
        options.tasks = [t for word in options.tasks for t in word.split(",") if t]
    return options


def command_model(argv: list[str]) -> str | None:
    """The `--model` of an `lm_eval` command line (`--model X` or `--model=X`), or None."""
    return command_options(argv).model


def named_presets(manager: Any, names: list[str] | None) -> list[str]:
    """The presets of the attnspan tasks among `names` (task names, globs, groups), found
    with the manager's own matching and index, in order, each once."""
    if not names:
        return []
    index = manager.task_index
    found: list[str] = []
    seen: set[str] = set()

    def visit(name: Any) -> None:
        entry = index.get(name) if isinstance(name, str) else None
        if entry is None or name in seen:
            return
        seen.add(name)
        config = getattr(entry, "cfg", None) or {}
        if isinstance(config.get("task"), list):  # a group: its tasks
            for member in config["task"]:
                visit(member)
            return
        preset = (config.get("dataset_kwargs") or {}).get("preset")
        if str(config.get("custom_dataset", "")).endswith(CUSTOM_DATASET) and preset:
            found.append(preset)

    for name in manager.match_tasks([n for n in names if not n.endswith(".yaml")]):
        visit(name)
    return list(dict.fromkeys(found))


def check_attention_model(metadata: dict) -> None:
    """`--model_args ...,attention=true` with a model type that cannot capture: one line in
    the `lm_eval` command, before the model loads. lm-eval merges the model arguments into
    the metadata its TaskManager gets, so they arrive here; the model type does not, so in
    the command it is read from the command line. (`--model hf` would otherwise hand
    `attention` to transformers' from_pretrained, a TypeError traceback.)"""
    from lm_eval_tasks.attention import MODEL_ARG, flag
    from lm_eval_tasks.dataset import refuse

    try:
        wanted = flag(metadata.get(MODEL_ARG, False))
    except ValueError as error:
        refuse(str(error))
    model = command_model(sys.argv[1:]) if under_lm_eval_command() else None
    if "threads" in metadata and model is not None and model != MODEL_NAME:
        # `threads` is attnspan-hf's own key: hf hands it to the model class, a TypeError
        refuse(
            f"--model_args threads={metadata['threads']} needs --model {MODEL_NAME} (its own "
            f"key), got --model {model}; for another model type set OMP_NUM_THREADS instead"
        )
    if wanted and model is not None and model != MODEL_NAME:
        refuse(
            f"--model_args {MODEL_ARG}=true needs --model {MODEL_NAME} (the model type that "
            f"captures attention), got --model {model}"
        )


def quiet_other_ranks() -> None:
    """lm-eval's INFO lines from the main process alone: under torchrun (tensor parallelism,
    `tp_plan=auto`) or accelerate launch every process runs lm-eval's CLI, and each printed
    every log line, so the console showed each twice. The other processes keep warnings and
    errors. LMEVAL_LOG_LEVEL is what lm-eval's `setup_logging` reads when it runs later; the
    level is set now for what logs before it. A level the user set is kept."""
    import logging
    import os

    if os.environ.get("RANK", "0").strip() in ("0", "") or os.environ.get("LMEVAL_LOG_LEVEL"):
        return
    os.environ["LMEVAL_LOG_LEVEL"] = "WARNING"
    logging.getLogger("lm_eval").setLevel(logging.WARNING)


def register_model_type(module: Any = None) -> None:
    """Register `--model attnspan-hf` lazily: the class is imported when a run asks for it
    (and quiet the other processes' lm-eval log lines: `quiet_other_ranks`)."""
    quiet_other_ranks()
    # lm-eval fills its registry with the built-in models (hf, vllm, ...) only when it finds
    # the registry empty; fill it first, or registering ours would hide all of them.
    import lm_eval.models  # noqa: F401  (cheap: names and import paths only)
    from lm_eval.api.registry import model_registry

    if MODEL_NAME not in model_registry:
        model_registry.register(MODEL_NAME, target=MODEL_TARGET)


def register() -> None:
    """Both of the above, for a Python session where the start-up hook is off."""
    register_model_type()
    patch_task_manager()
