"""Resumable pipeline stages: one JSON file per finished stage, written atomically.

    stages = Stages(Path("out/reproduce"))
    heads = stages.run("heads-reversal", settings, lambda: rank(...))  # cached next time

A stage is done when `OUT/stages/<name>.json` exists and was made with the same settings
(stored in the file beside the result); an interrupted run restarts at the first stage
without a file, and a stage whose settings changed is computed again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attentionspan_datasets.atomic import atomic_write_text

STAGE_DIR = "stages"


def write_json_atomic(path: Path, value: Any) -> None:
    """JSON via a temporary file in the same folder and a rename: readers never see half."""
    atomic_write_text(path, json.dumps(value, indent=1, default=_jsonable) + "\n")


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
