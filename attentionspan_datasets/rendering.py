"""Text renderings of instances: one JSON line, or the text with its mask drawn as a grid.

The grid has a row per target character and a column per character of `prompt + target`:
`#` marks a referenced position, `.` any other position the character may attend to
(causally earlier), and a blank the positions after it (LEGEND says so to the reader).
A grid wider than the terminal is wrapped into panels of columns; a very large instance is
cut to its first MAX_ROWS target rows and the MAX_COLUMNS columns before them, so drawing
never takes more than a moment (issue 13: 20,000 characters once took over 90 s).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable
from json.encoder import c_make_encoder, encode_basestring
from marshal import dumps

from attentionspan_datasets.tasks.base import Instance, TaskConfig, get_task

MAX_ROWS = 200  # target rows drawn at most
MAX_COLUMNS = 1000  # columns drawn at most: the last ones before the last drawn row
MIN_PANEL = 20  # narrowest panel of columns when wrapping to a small terminal

LEGEND = (
    "How to read a grid: each row is one character of the target (shown at the left of the "
    "row), each column one character of prompt + target (the text printed above the grid, "
    "position 0 first). In a row, '#' marks a position of the reference mask: predicting that "
    "target character must attend to it. '.' marks an earlier position it may attend to but "
    "need not, and blank columns lie after it (the character is predicted from the position "
    "just before it). The mask variant is the config's `mask` (paper, sufficient or minimal; "
    "docs/tasks.md)."
)


def legend(width: int | None = None) -> str:
    """LEGEND filled to `width` (at most 92 columns: a paragraph, not a banner)."""
    return textwrap.fill(LEGEND, min(max(width or 92, MIN_PANEL), 92))


def _row_encoder():
    """One C JSON encoder, made once, with json.dumps(ensure_ascii=False)'s separators and
    no circular-reference bookkeeping (a row is a tree). `json.dumps` builds a new encoder
    per call, which cost about as much as generating a reversal instance."""
    base = json.JSONEncoder(ensure_ascii=False)
    if c_make_encoder is None:  # an interpreter without json's C accelerator
        return base.encode
    encode = c_make_encoder(
        None, base.default, encode_basestring, None, ": ", ", ", False, False, True
    )
    return lambda row: "".join(encode(row, 0))


_encode_row = _row_encoder()


def to_json_line(instance: Instance) -> str:
    """`json.dumps(instance.to_dict(), ensure_ascii=False)`, without copying the instance
    first (the CLI's rate depends on it: docs/performance.md)."""
    return _encode_row(
        {
            "task": instance.task,
            "config": instance.config,
            "index": instance.index,
            "prompt": instance.prompt,
            "target": instance.target,
            "reference": instance.reference,
            "params": instance.params,
        }
    )


class JsonLines:
    """`to_json_line` for a stream of one config, faster; `lines(instances)` writes a chunk.
    Give it only instances of the config it was made for (a mask variant changes the
    reference, not the row's labels).

    Two ways, both giving exactly `to_json_line`'s lines (tested on every preset):
    - a task whose masks depend on the layout alone (`Task.layout_masks`): the JSON of the
      reference and the params is made once per layout and reused, so a row costs two string
      escapes and one f-string. The layout is keyed by the prompt and target lengths and
      `marshal.dumps(params)`: three times cheaper than encoding the params, and exact
      (marshal keeps types, True is not 1, and loads back the same value, so equal keys mean
      equal JSON). Params marshal cannot write fall back to `to_json_line`. A bounded cache.
    - any other task: the rows of a chunk go to the C encoder in one call, as one JSON
      list, and the list's row separators become newlines. A row starts with `{"task": `,
      which cannot occur inside a JSON string (its quote would be escaped); when the chunk
      holds the marker anywhere else (a params value that is an object keyed "task"), the
      rows are encoded one by one instead.
    """

    MAX_CACHED = 4096

    def __init__(self, config: TaskConfig):
        self.cache: dict | None = {} if get_task(config.task_name).layout_masks else None
        self.head = (("", ""), "")  # (task, config) and their JSON start, set by _head

    def __call__(self, instance: Instance) -> str:
        """One line (no newline): `to_json_line(instance)`."""
        return self.lines([instance])[:-1]

    def lines(self, instances: Iterable[Instance]) -> str:
        """The JSON lines of `instances`, each ended by a newline. Pass an iterator of
        fresh instances rather than a long list: each is encoded as soon as it is drawn,
        and holding many live instances slows the generator (memory: multiplication_ood
        draws at 20 us an instance one by one, 45 us held in lists of 100)."""
        if self.cache is None:
            return _lines_at_once(list(instances))
        head, (task, config), cache = self.head[1], self.head[0], self.cache
        out = []
        for instance in instances:
            prompt, target = instance.prompt, instance.target
            if instance.config != config or instance.task != task:
                if not out:  # a stream's first row: its (task, config) head, a new cache
                    task, config = instance.task, instance.config
                    head = self._head(task, config)
                    cache.clear()
                else:  # a mixed list: rare
                    out.append(to_json_line(instance))
                    continue
            try:
                key = (len(prompt), len(target), dumps(instance.params))
            except ValueError:  # a value marshal cannot write
                out.append(to_json_line(instance))
                continue
            tail = cache.get(key) or self._store(key, instance)
            out.append(
                f'{head}{instance.index}, "prompt": {encode_basestring(prompt)}, '
                f'"target": {encode_basestring(target)}, "reference": {tail}'
            )
        if out:
            out.append("")
        return "\n".join(out)

    def _head(self, task: str, config: str) -> str:
        """The JSON start of every line of (task, config), kept for the next call."""
        self.head = (
            (task, config),
            f'{{"task": {encode_basestring(task)}, "config": {encode_basestring(config)}, '
            f'"index": ',
        )
        return self.head[1]

    def _store(self, key: tuple, instance: Instance) -> str:
        """The line's JSON from the reference on, cached under `key`."""
        if len(self.cache) >= self.MAX_CACHED:
            self.cache.clear()
        tail = f'{_encode_row(instance.reference)}, "params": {_encode_row(instance.params)}}}'
        self.cache[key] = tail
        return tail


_ROW_START = '{"task": '


def _lines_at_once(instances: list[Instance]) -> str:
    """JSON lines of `instances` from one C encoder call (see JsonLines)."""
    if not instances:
        return ""
    rows = [
        {
            "task": i.task,
            "config": i.config,
            "index": i.index,
            "prompt": i.prompt,
            "target": i.target,
            "reference": i.reference,
            "params": i.params,
        }
        for i in instances
    ]
    text = _encode_row(rows)  # "[row, row, ...]"
    if text.count(_ROW_START) != len(rows):
        return "".join([to_json_line(i) + "\n" for i in instances])
    return text[1:-1].replace(", " + _ROW_START, "\n" + _ROW_START) + "\n"


def _clip(text: str, width: int | None) -> str:
    if width is None or len(text) <= width:
        return text
    return f"{text[: max(width - 24, 10)]}... ({len(text)} characters)"


def _wrap(text: str, width: int | None) -> list[str]:
    return [text] if width is None else textwrap.wrap(text, max(width, MIN_PANEL))


def render_mask(
    instance: Instance,
    width: int | None = None,
    max_rows: int = MAX_ROWS,
    max_columns: int = MAX_COLUMNS,
) -> str:
    """The instance and its mask grid; lines fit in `width` characters when it is given."""
    text = instance.text
    offset = len(instance.prompt)
    rows = instance.reference[:max_rows]
    end = offset + len(rows)  # the shown rows' queries see columns [0, end)
    begin = max(0, end - max_columns)
    lines = [
        _clip(
            f"{instance.config or instance.task} #{instance.index}  params={instance.params}", width
        ),
        _clip(f"prompt: {instance.prompt}", width),
        _clip(f"target: {instance.target}", width),
    ]
    if len(rows) < len(instance.reference) or begin > 0:
        note = (
            f"(drawn: target rows 0-{len(rows) - 1} of {len(instance.reference)}, columns "
            f"{begin}-{end - 1} of {len(text)}; a '<' before a row: it also references "
            f"columns further left; `attentionspan generate` prints every row)"
        )
        lines += _wrap(note, width)
    cells = []
    for i, row in enumerate(rows):
        query = offset + i  # the position whose next-token prediction is target[i]
        line = ["."] * (query - begin)
        hidden = 0
        for pos in row:
            if pos >= begin:
                line[pos - begin] = "#"
            else:
                hidden += 1
        cells.append(("".join(line), hidden))
    panel = len(text) if width is None else max(MIN_PANEL, width - 3)
    shown = end - begin
    for start in range(0, shown, panel) if shown else [0]:
        stop = min(start + panel, shown)
        lines.append("")
        if panel < shown or begin > 0:
            lines.append(f"   columns {begin + start}-{begin + stop - 1}:")
        lines.append("   " + text[begin + start : begin + stop] if shown else "   " + text)
        for i, (line, hidden) in enumerate(cells):
            if len(line) <= start and start > 0:
                continue  # this row sees no column of this panel
            label = f"{'<' if hidden else ' '}{instance.target[i]} "
            drawn = label + line[start:stop]
            lines.append(drawn.rstrip() if drawn.strip() else label.rstrip())
    return "\n".join(lines)


def render_text(instance: Instance) -> str:
    return f"{instance.prompt}{instance.target}\t{json.dumps(instance.reference)}"
