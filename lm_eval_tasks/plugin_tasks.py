"""lm-eval tasks for the presets of installed plugin tasks, written at run time.

    lm_eval --model hf --model_args pretrained=DIR --tasks attnspan_rotation_id

A task of another package (an `attentionspan.tasks` entry point, docs/own_task.md) has no
YAML file in this folder, and none may be added here by installing it. So the first lm-eval
TaskManager of a process (registration.patch_task_manager) asks `tasks_dir()`, which writes
`attnspan_<preset>.yaml` for each plugin preset, the same files `make_yamls` writes for the
built-ins (they include this folder's template by its path), and the group
`attnspan-plugins` of them all, into a cache folder named by a hash of what decides their
content: this package's and the data layer's sources, the plugin modules, the preset names
and this folder's path. A later run finds the folder and writes nothing. No plugin
installed: no folder, and the cost is one look at the installed entry points.

Without the start-up hook: `--include_path "$(python -m lm_eval_tasks.plugin_tasks)"`.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from lm_eval_tasks import TASKS_DIR

GROUP = "attnspan-plugins"  # not `attnspan_*`: that glob would run its tasks twice
GROUP_FILE = "_attnspan_plugins.yaml"
HEADER = (
    "# Written by lm_eval_tasks.plugin_tasks for a plugin's presets (attentionspan.tasks "
    "entry points): do not edit.\n"
)
SUBFOLDER = "lm_eval_tasks"  # under the attentionspan cache (harness.foundation.models)


@functools.cache
def tasks_dir() -> str | None:
    """The folder of the plugin presets' task files (written if not yet), or None when no
    plugin preset is installed. Once per process."""
    from importlib.metadata import entry_points

    from attentionspan_datasets.plugins import GROUP as ENTRY_POINTS

    if not entry_points(group=ENTRY_POINTS):
        return None  # the common case: nothing more imported
    from attentionspan_datasets import plugins
    from harness.foundation.models import cache_root

    names = [preset for plugin in plugins.loaded() for preset in plugin.presets]
    if not names:
        return None
    folder = Path(cache_root(), SUBFOLDER, content_key(names))
    if not folder.is_dir():
        write(folder, names)
    return str(folder)


def content_key(presets: list[str]) -> str:
    """A hash of everything the files depend on (see the module docstring)."""
    from attentionspan_datasets.plugins import loaded

    package_dirs = [Path(TASKS_DIR), Path(sys.modules["attentionspan_datasets"].__file__).parent]
    files = sorted(p for folder in package_dirs for p in folder.rglob("*.py"))
    files.append(Path(TASKS_DIR, "_attnspan_template_yaml"))
    modules = [sys.modules.get(plugin.module) for plugin in loaded()]
    files += sorted(Path(m.__file__) for m in modules if getattr(m, "__file__", None))
    digest = hashlib.sha256("\n".join([TASKS_DIR, *presets]).encode())
    for path in files:
        digest.update(str(path).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def expected_files(presets: list[str]) -> dict[str, str]:
    from lm_eval_tasks.make_yamls import TEMPLATE, render_group, render_task

    template = str(Path(TASKS_DIR, TEMPLATE))
    files = {f"attnspan_{p}.yaml": render_task(p, template, HEADER) for p in presets}
    files[GROUP_FILE] = render_group(presets, GROUP, HEADER)
    return files


def write(folder: Path, presets: list[str]) -> None:
    """Write the files into a temporary folder beside `folder`, then rename it: a reader
    sees all of them or none, and two processes writing at once both end with one."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        for name, text in expected_files(presets).items():
            (staging / name).write_text(text)
        try:
            os.rename(staging, folder)
        except OSError:  # another process was first: its files are the same
            if not folder.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


if __name__ == "__main__":
    print(tasks_dir() or "")
