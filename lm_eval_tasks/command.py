"""Whether this process is the `lm_eval` command: its refusals are then one line (status 2)
and it names its tasks on the command line, which a Python session calling lm-eval's API
does not. Its own module so that `registration` and `dataset` both read it without
importing each other."""

from __future__ import annotations

import sys
from pathlib import Path


def under_lm_eval_command() -> bool:
    """True in the `lm_eval` console command (or `python -m lm_eval`), not in a Python
    session that calls lm-eval's API."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name in ("lm_eval", "lm_eval.__main__"):
        return True
    return bool(sys.argv) and Path(sys.argv[0]).name in ("lm_eval", "lm-eval")
