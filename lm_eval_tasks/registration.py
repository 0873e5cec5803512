"""Let lm-eval find the attnspan tasks and the `attnspan-hf` model type without flags.

    lm_eval --model hf --model_args pretrained=DIR --tasks 'attnspan_*'

lm-eval 0.4.13 finds external tasks only through `--include_path` and has no plug-in entry
points. The package's post-import hook (`attentionspan_datasets/startup.py`, armed by a .pth
file in the wheel; off with ATTENTIONSPAN_NO_AUTOREGISTER=1) therefore runs these right
after lm-eval imports the modules they patch:

    "lm_eval.tasks": "lm_eval_tasks.registration:patch_task_manager"
    "lm_eval.api.registry": "lm_eval_tasks.registration:register_model_type"

Both are idempotent and cheap: neither imports torch, transformers or the tasks' data code
(a TaskManager made with `--metadata '{"attnspan": ...}'` imports `dataset` to check those
options before lm-eval loads the model). The patched TaskManager also drops lm-eval's log
lines about our tasks that tell a user nothing (`quiet`).
Without the hook, `--include_path "$(python -c 'import lm_eval_tasks;
print(lm_eval_tasks.TASKS_DIR)')"` finds the tasks, and `register()` does both by hand.
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Any

from lm_eval_tasks import TASKS_DIR
from lm_eval_tasks.quiet import quiet_lm_eval_warnings

MODEL_NAME = "attnspan-hf"
MODEL_TARGET = "lm_eval_tasks.models:AttnspanHFLM"


def with_tasks_dir(include_path: Any) -> list:
    """`include_path` as a list that starts with this folder (once). Ours goes first, so a
    folder the user names can still override one of our tasks."""
    if include_path is None:
        paths = []
    elif isinstance(include_path, (list, tuple)):
        paths = list(include_path)
    else:
        paths = [include_path]
    ours = Path(TASKS_DIR)
    if any(Path(p).expanduser().resolve() == ours for p in paths):
        return paths
    return [TASKS_DIR, *paths]


def patch_task_manager(module: Any = None) -> None:
    """Make every `lm_eval.tasks.TaskManager` that includes lm-eval's own tasks include ours."""
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
        if isinstance(metadata, dict) and "attention" in metadata:
            check_attention_model(metadata)  # also before the model is loaded
        if isinstance(metadata, dict) and "attnspan" in metadata:
            # Before lm-eval loads the model: a bad option costs a second, not a model load.
            from lm_eval_tasks.dataset import preflight

            preflight(metadata)
        original(*bound.args, **bound.kwargs)

    __init__._attnspan_patched = True
    TaskManager.__init__ = __init__
    quiet_lm_eval_warnings()


def command_model(argv: list[str]) -> str | None:
    """The `--model` of an `lm_eval` command line (`--model X` or `--model=X`), or None."""
    for i, word in enumerate(argv):
        if word == "--model" and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith("--model="):
            return word.split("=", 1)[1]
    return None


def check_attention_model(metadata: dict) -> None:
    """`--model_args ...,attention=true` with a model type that cannot capture: one line in
    the `lm_eval` command, before the model loads. lm-eval merges the model arguments into
    the metadata its TaskManager gets, so they arrive here; the model type does not, so in
    the command it is read from the command line. (`--model hf` would otherwise hand
    `attention` to transformers' from_pretrained, a TypeError traceback.)"""
    import sys

    from lm_eval_tasks.attention import MODEL_ARG, flag
    from lm_eval_tasks.dataset import refuse, under_lm_eval_command

    try:
        wanted = flag(metadata[MODEL_ARG])
    except ValueError as error:
        refuse(str(error))
    model = command_model(sys.argv[1:]) if under_lm_eval_command() else None
    if wanted and model is not None and model != MODEL_NAME:
        refuse(
            f"--model_args {MODEL_ARG}=true needs --model {MODEL_NAME} (the model type that "
            f"captures attention), got --model {model}"
        )


def register_model_type(module: Any = None) -> None:
    """Register `--model attnspan-hf` lazily: the class is imported when a run asks for it."""
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
