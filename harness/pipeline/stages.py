"""Resumable pipeline stages: one JSON file per finished stage, written atomically.

    stages = Stages(Path("out/reproduce"))
    heads = stages.run("heads-reversal", settings, lambda: rank(...))  # cached next time

A stage is done when `OUT/stages/<name>.json` exists and was made with the same settings
(stored in the file beside the result); an interrupted run restarts at the first stage
without a file, and a stage whose settings changed is computed again.

Each file also keeps the CPU time (user + system, `time.process_time`, this process's) its
result took when it was computed (`cpu_s`), so a rerun that reuses it can still say where a
run's time went; a stage computed inside another's is counted once, in its own file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attentionspan_datasets.atomic import atomic_write_text
from attentionspan_datasets.jsonfile import read_json

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
        # every stage loaded or computed, in order, and the CPU seconds its result took when
        # it was computed (None: a file made before they were recorded)
        self.touched: list[str] = []
        self.cpu: dict[str, float | None] = {}
        self._inner: list[float] = []  # CPU seconds of stages computed inside a running one

    def path(self, name: str) -> Path:
        return self.dir / f"{name}.json"

    def load(self, name: str, settings: dict[str, Any]) -> Any | None:
        path = self.path(name)
        if not path.is_file():
            return None
        try:
            saved = read_json(path, expect=dict)
        except ValueError:  # torn, foreign or absurdly nested: computed again
            return None
        # Compare through JSON so tuples and lists, ints and floats match as saved.
        if saved.get("settings") != json.loads(json.dumps(settings, default=_jsonable)):
            self.log(f"stage {name}: settings changed, computing again")
            return None
        cpu = saved.get("cpu_s")
        self._record(name, float(cpu) if isinstance(cpu, (int, float)) else None)
        return saved["result"]

    def _record(self, name: str, cpu: float | None) -> None:
        self.touched.append(name)
        self.cpu[name] = cpu

    def save(
        self, name: str, settings: dict[str, Any], result: Any, cpu_s: float | None = None
    ) -> None:
        """Save a stage computed by the caller; `cpu_s`: the CPU seconds it took."""
        cpu = None if cpu_s is None else round(max(cpu_s, 0.0), 3)
        if self.write:
            write_json_atomic(
                self.path(name), {"settings": settings, "result": result, "cpu_s": cpu}
            )
        if self._inner and cpu is not None:
            self._inner[-1] += cpu  # measured inside a running stage: counted here, not there
        self.ran.append(name)
        self._record(name, cpu)

    def run(self, name: str, settings: dict[str, Any], compute: Callable[[], Any]) -> Any:
        cached = self.load(name, settings)
        if cached is not None:
            self.log(f"stage {name}: done before, reusing {self.path(name)}")
            return cached
        self._inner.append(0.0)
        start = time.process_time()
        try:
            result = compute()
        finally:
            inner = self._inner.pop()
        elapsed = time.process_time() - start
        if self._inner:
            self._inner[-1] += elapsed  # a stage inside a stage: the outer one excludes it
        cpu = round(max(elapsed - inner, 0.0), 3)
        if self.write:
            write_json_atomic(
                self.path(name), {"settings": settings, "result": result, "cpu_s": cpu}
            )
        self.ran.append(name)
        self._record(name, cpu)
        # Read back the JSON form, so a fresh run and a resumed one hand on the same values.
        return json.loads(json.dumps(result, default=_jsonable))

    def cpu_of(self, names: list[str]) -> float | None:
        """The CPU seconds of these stages together (None when any has none recorded)."""
        values = [self.cpu.get(name) for name in names]
        return None if any(v is None for v in values) else round(float(sum(values)), 3)
