"""The one reader of the project's JSON files: a bad file is one line naming it.

    from attentionspan_datasets.jsonfile import read_json, parse_json
    data = read_json(path, "--check", expect=dict)   # ValueError naming --check and the file

Records (attentionspan_run.json), digests, results.json, settings.json, heads.json, stage
files and manifests all come through here, from every layer (this is the lowest one: the
export manifests are read in it). Whatever is wrong with a file, the caller gets one
`ValueError` naming it: missing, a folder, unreadable, not UTF-8, not JSON, the wrong kind
of value at the top, or nested deeper than MAX_DEPTH. The last matters because json's
decoder recurses: a file nested 100,000 deep raised RecursionError, which no caller caught
(a traceback), and one nested a few hundred deep parses but breaks the next recursive walk
(a copy, a comparison, json.dumps). A caller that treats a bad file as absent catches
ValueError.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# The project's files nest at most about ten levels; a hundred is no file it wrote, and
# stays far below Python's recursion limit (1000) for every later recursive walk.
MAX_DEPTH = 100


class JSONFileError(ValueError):
    """A JSON file that cannot be used; the message names the file."""


def parse_json(text: str | bytes, label: str) -> Any:
    """The JSON value of `text` (the contents of `label`); JSONFileError naming `label`."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JSONFileError(_too_deep(label)) from None
    except UnicodeDecodeError as error:  # bytes given
        raise JSONFileError(f"{label} cannot be read: not UTF-8 ({error.reason})") from None
    except ValueError as error:
        raise JSONFileError(f"{label}: not valid JSON (torn or cut short?): {error}") from None
    if depth_exceeds(value, MAX_DEPTH):
        raise JSONFileError(_too_deep(label))
    return value


def read_json(path: str | Path, what: str = "", expect: type | None = None) -> Any:
    """The JSON of `path`; JSONFileError naming the file (after the option `what`, when
    given) when it is missing, a folder, unreadable or not JSON (a file cut short by a full
    disk or a kill), nested absurdly deep, or (with `expect=dict` or `list`) not that kind."""
    path = Path(path)
    label = f"{what} {str(path)!r}" if what else str(path)
    if path.is_dir():
        raise JSONFileError(f"{label} is a folder, not a JSON file")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise JSONFileError(f"{label} does not exist") from None
    except OSError as error:
        raise JSONFileError(f"{label} cannot be read: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")  # json.loads would guess UTF-16 from a stray byte
    except UnicodeDecodeError as error:
        raise JSONFileError(f"{label} cannot be read: not UTF-8 ({error.reason})") from None
    value = parse_json(text, label)
    if expect is not None and not isinstance(value, expect):
        kinds = {dict: "a JSON object", list: "a JSON array"}
        raise JSONFileError(
            f"{label}: expected {kinds.get(expect, expect.__name__)}, got {type(value).__name__}"
        )
    return value


def depth_exceeds(value: Any, limit: int) -> bool:
    """True when `value` nests lists and dicts more than `limit` deep, found without
    recursion (a stack of the containers still to look into)."""
    if not isinstance(value, (dict, list)):
        return False
    if limit < 1:
        return True
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, (dict, list)):
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False


def _too_deep(label: str) -> str:
    return (
        f"{label}: nested more than {MAX_DEPTH} levels deep: not a file attentionspan wrote "
        "(a damaged or foreign file?)"
    )


def dumps_compact(value: Any, indent: int = 1, level: int = 0) -> str:
    """`value` as JSON with objects indented and every list of plain values (numbers,
    strings, booleans, nulls) on one line: a digest's per-instance readings are thousands
    of numbers, one a line under `json.dumps(indent=...)` (2.3 MB for the quick run's,
    under 0.7 MB so), and a diff of them stays readable. NaN and infinities are refused,
    as `allow_nan=False` does: no other JSON reader takes them."""
    pad, inner = " " * (indent * level), " " * (indent * (level + 1))
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = (
            f"{inner}{json.dumps(str(k))}: {dumps_compact(v, indent, level + 1)}"
            for k, v in value.items()
        )
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            return json.dumps(list(value), allow_nan=False)
        items = (f"{inner}{dumps_compact(v, indent, level + 1)}" for v in value)
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return json.dumps(value, allow_nan=False)
