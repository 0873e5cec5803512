"""attentionspan_datasets.jsonfile: every way a JSON file can be bad is one ValueError line
naming the file, absurd nesting included (json's decoder recurses: a RecursionError)."""

from __future__ import annotations

import pytest

from attentionspan_datasets.jsonfile import (
    MAX_DEPTH,
    JSONFileError,
    depth_exceeds,
    parse_json,
    read_json,
)

DEEP = "[" * 100_000 + "]" * 100_000


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize(
    "content, says",
    [
        (DEEP, "nested more than 100 levels deep"),
        (nested(MAX_DEPTH + 1), "nested more than 100 levels deep"),  # parses, still refused
        ('{"meta": {"comm', "not valid JSON (torn or cut short?)"),
        (b"\xff\xfe{}", "not UTF-8"),
        ("[1, 2]", "expected a JSON object, got list"),
    ],
)
def test_a_bad_file_is_one_line_naming_it(tmp_path, content, says):
    path = tmp_path / "results.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(JSONFileError) as caught:
        read_json(path, "--check", expect=dict)
    message = str(caught.value)
    assert message.startswith(f"--check {str(path)!r}") and says in message
    assert "\n" not in message and isinstance(caught.value, ValueError)


def test_missing_and_a_folder_name_the_path(tmp_path):
    with pytest.raises(JSONFileError, match="nope.json' does not exist"):
        read_json(tmp_path / "nope.json", "--digest")
    with pytest.raises(JSONFileError, match="is a folder, not a JSON file"):
        read_json(tmp_path)


def test_a_good_file_at_the_depth_limit_reads(tmp_path):
    path = tmp_path / "ok.json"
    path.write_text(nested(MAX_DEPTH))
    assert depth_exceeds(read_json(path), MAX_DEPTH - 1)
    assert parse_json('{"a": [1, {"b": null}]}', "x") == {"a": [1, {"b": None}]}


@pytest.mark.parametrize(
    "value, limit, exceeds",
    [(1, 0, False), ([], 1, False), ([[]], 1, True), ([[]], 2, False), ({"a": [{}]}, 2, True)],
)
def test_depth_is_counted_without_recursion(value, limit, exceeds):
    assert depth_exceeds(value, limit) is exceeds


def test_dumps_compact_reads_back_the_same_and_keeps_plain_lists_on_one_line():
    import json
    import math

    from attentionspan_datasets.jsonfile import dumps_compact

    value = {
        "a": [1, 2.5, None, "x  y", True],
        "b": {"c": [[1, 2], [3]], "d": [], "e": {}},
        "f": [{"g": 1}],
    }
    text = dumps_compact(value)
    assert json.loads(text) == value
    assert '"a": [1, 2.5, null, "x  y", true]' in text  # one line, strings untouched
    assert '"c": [\n   [1, 2],\n   [3]\n  ]' in text  # a list of lists: one inner list a line
    with pytest.raises(ValueError):
        dumps_compact({"nan": [math.nan]})
