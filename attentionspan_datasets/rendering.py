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
from json.encoder import c_make_encoder, encode_basestring

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
    """`to_json_line` for a stream of one config, faster: for a task whose masks depend on
    the layout alone (`Task.layout_masks`), the reference is serialised once per layout,
    keyed by the params' JSON and the prompt and target lengths (which hold the layout),
    and reused. A bounded cache."""

    MAX_CACHED = 4096

    def __init__(self, config: TaskConfig):
        self.cache: dict[str, str] = {} if get_task(config.task_name).layout_masks else None
        self.head = ("", "")  # (task, config) and their JSON start, fixed for a stream

    def __call__(self, instance: Instance) -> str:
        if self.cache is None:
            return to_json_line(instance)
        if self.head[0] != (instance.task, instance.config):
            self.head = (
                (instance.task, instance.config),
                f'{{"task": {encode_basestring(instance.task)}, '
                f'"config": {encode_basestring(instance.config)}, "index": ',
            )
        params = _encode_row(instance.params)
        layout = f"{len(instance.prompt)} {len(instance.target)} {params}"
        reference = self.cache.get(layout)
        if reference is None:
            if len(self.cache) >= self.MAX_CACHED:
                self.cache.clear()
            reference = self.cache[layout] = _encode_row(instance.reference)
        return (
            f'{self.head[1]}{instance.index}, "prompt": {encode_basestring(instance.prompt)}, '
            f'"target": {encode_basestring(instance.target)}, '
            f'"reference": {reference}, "params": {params}}}'
        )


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
