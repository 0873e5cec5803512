"""Resumable pipeline stages: one JSON file per finished stage, written atomically.

    stages = Stages(Path("out/reproduce"))
    heads = stages.run("heads-reversal", settings, lambda: rank(...))  # cached next time

A stage is done when `OUT/stages/<name>.json` exists and was made with the same settings
(stored in the file beside the result); an interrupted run restarts at the first stage
without a file, and a stage whose settings changed is computed again.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

STAGE_DIR = "stages"


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temporary file in the same folder, then rename: readers never see half."""
    try:
        from attentionspan_datasets.atomic import atomic_write_text
    except ImportError:  # the shared helper is not there yet: the same thing by hand
        atomic_write_text = None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if atomic_write_text is not None:
        atomic_write_text(path, text)
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, value: Any) -> None:
    write_text_atomic(path, json.dumps(value, indent=1, default=_jsonable) + "\n")


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


class Stages:
    """Runs named stages once; `log` receives one line per stage (done, cached, redone)."""

    def __init__(self, out_dir: Path, log: Callable[[str], None] | None = None, write: bool = True):
        self.dir = Path(out_dir) / STAGE_DIR
        self.log = log or (lambda message: None)
        self.write = write  # under accelerate only the main process writes
        self.ran: list[str] = []  # stages computed by this process (tests check resumption)

    def path(self, name: str) -> Path:
        return self.dir / f"{name}.json"

    def load(self, name: str, settings: dict[str, Any]) -> Any | None:
        path = self.path(name)
        if not path.is_file():
            return None
        try:
            saved = json.loads(path.read_text())
        except json.JSONDecodeError:
            return None
        # Compare through JSON so tuples and lists, ints and floats match as saved.
        if saved.get("settings") != json.loads(json.dumps(settings, default=_jsonable)):
            self.log(f"stage {name}: settings changed, computing again")
            return None
        return saved["result"]

    def save(self, name: str, settings: dict[str, Any], result: Any) -> None:
        if self.write:
            write_json_atomic(self.path(name), {"settings": settings, "result": result})
        self.ran.append(name)

    def run(self, name: str, settings: dict[str, Any], compute: Callable[[], Any]) -> Any:
        cached = self.load(name, settings)
        if cached is not None:
            self.log(f"stage {name}: done before, reusing {self.path(name)}")
            return cached
        result = compute()
        if self.write:
            write_json_atomic(self.path(name), {"settings": settings, "result": result})
        # Read back the JSON form, so a fresh run and a resumed one hand on the same values.
        self.ran.append(name)
        return json.loads(json.dumps(result, default=_jsonable))
