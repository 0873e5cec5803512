"""Text renderings of instances: one JSON line, or the text with its mask drawn as a grid.

The grid has a row per target character and a column per character of `prompt + target`:
`#` marks a referenced position, `.` any other position the character may attend to
(causally earlier), and a blank the positions after it (LEGEND says so to the reader).
A grid wider than the terminal is wrapped into panels of columns; a very large instance is
cut to its first MAX_ROWS target rows and the MAX_COLUMNS columns before them, so drawing
never takes more than a moment (20,000 characters once took over 90 s).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterable
from itertools import islice
from json.encoder import c_make_encoder, encode_basestring
from marshal import dumps
from typing import Any

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


def marshal_cached(
    encode: Callable[[Any], str], max_cached: int = 4096, max_key: int | None = None
) -> Callable[[Any], str]:
    """`encode` for a stream of values (params dicts), from a bounded cache keyed by
    `marshal.dumps(value, 2)` (version 2: no back-references, so the bytes depend on the
    value alone, and faster). marshal is about three times cheaper than encoding params, and
    exact as a key: it keeps types (True is not 1) and loads back the same value, so equal
    keys mean equal JSON. Values marshal cannot write are encoded each time; keys longer
    than `max_key` bytes (values that rarely repeat) are not stored. A function, not a
    method: a call per row is cheaper."""
    cache: dict[bytes, str] = {}
    get = cache.get

    def cached(value: Any) -> str:
        try:
            key = dumps(value, 2)
        except ValueError:  # a value marshal cannot write
            return encode(value)
        text = get(key)
        if text is None:
            text = encode(value)
            if max_key is None or len(key) <= max_key:
                if len(cache) >= max_cached:
                    cache.clear()
                cache[key] = text
        return text

    return cached


class JsonLines:
    """`to_json_line` for a stream of one config, faster: `lines(instances)` gives a chunk
    of lines, the same text as `to_json_line` line by line (tested on every preset). Give
    it only instances of the config it was made for (a mask variant changes the reference,
    not the row's labels); a row of other labels is encoded the plain way.

    Each line is one f-string: a head fixed for the stream (task, config), the index, the
    escaped prompt and target, then the reference and params JSON, made the cheapest way:
    - a task whose masks depend on the layout alone (`Task.layout_masks`): the JSON of the
      reference and params together, once per layout, keyed by the prompt and target
      lengths and `marshal.dumps(params)`;
    - any other task: each reference by orjson (`_orjson_reference`: 3x faster than json's
      encoder on value assignment's 45 positions, where the encoder cost a fifth of the
      generator's time); without orjson, the references of AT_ONCE rows in one C encoder
      call, as one JSON list with a separator string between them, split at the separators
      (exact: every boundary holds one, so a reference holding the separator string itself
      makes one part too many, and the batch is then encoded row by row). Params JSON
      through `marshal_cached`.
    Both caches are keyed by `marshal.dumps(params)` (see `marshal_cached` for why that is
    exact) and bounded.
    """

    MAX_CACHED = 4096
    MAX_KEY = 256  # bytes: longer params (feature vectors) rarely repeat, so are not cached
    AT_ONCE = 25  # rows per batch of references (a list of many live instances is slow)

    def __init__(self, config: TaskConfig):
        self.layout = get_task(config.task_name).layout_masks
        # layout: (prompt length, target length, marshal(params)) -> reference+params JSON
        self.cache: dict = {}
        self.params_json = marshal_cached(_encode_row, self.MAX_CACHED, self.MAX_KEY)
        self.labels: tuple | None = None  # (task, config) of the stream, set by its first row
        self.head = ""  # their JSON start of a line
        # imported only where used: orjson loads datetime and uuid, 5 ms of start-up
        self.orjson = None if self.layout else _orjson_dumps()

    def __call__(self, instance: Instance) -> str:
        """One line (no newline): `to_json_line(instance)`."""
        return self.lines([instance])[:-1]

    def lines(self, instances: Iterable[Instance]) -> str:
        """The JSON lines of `instances`, each ended by a newline. Pass an iterator of
        fresh instances rather than a long list: rows are encoded as they are drawn, and
        holding many live instances slows the generator (memory: multiplication_ood drew
        20 us an instance one by one, 45 us held in lists of 100)."""
        if self.layout:
            return self._layout_lines(instances)
        instances = iter(instances)
        return "".join(iter(lambda: self._batch(list(islice(instances, self.AT_ONCE))), ""))

    def _labels(self, instance: Instance) -> bool:
        """True when `instance` has the stream's labels; the first row sets them."""
        labels = (instance.task, instance.config)
        if labels == self.labels:
            return True
        if self.labels is not None:
            return False
        self.labels = labels
        self.head = (
            f'{{"task": {encode_basestring(labels[0])}, '
            f'"config": {encode_basestring(labels[1])}, "index": '
        )
        return True

    def _layout_lines(self, instances: Iterable[Instance]) -> str:
        out, get = [], self.cache.get
        (task, config), head = self.labels or (None, None), self.head
        for instance in instances:
            if instance.config != config or instance.task != task:
                if not self._labels(instance):
                    out.append(to_json_line(instance) + "\n")
                    continue
                (task, config), head = self.labels, self.head
            prompt, target = instance.prompt, instance.target
            try:
                key = (len(prompt), len(target), dumps(instance.params, 2))
            except ValueError:  # a value marshal cannot write
                out.append(to_json_line(instance) + "\n")
                continue
            tail = get(key)
            if tail is None:
                tail = _encode_row(instance.reference)
                tail = f'{tail}, "params": {_encode_row(instance.params)}}}\n'
                self._store(key, tail)
            out.append(
                f'{head}{instance.index}, "prompt": {encode_basestring(prompt)}, '
                f'"target": {encode_basestring(target)}, "reference": {tail}'
            )
        return "".join(out)

    def _batch(self, batch: list[Instance]) -> str:
        if not batch:
            return ""
        self._labels(batch[0])
        if self.orjson is not None:
            parts = [_orjson_reference(self.orjson, instance.reference) for instance in batch]
        else:
            # [SEP, ref, SEP, ref, ...]: one C call for the batch's references
            refs = [item for instance in batch for item in (_SEP, instance.reference)]
            parts = _encode_row(refs)[len(_SEP_JSON) + 3 : -1].split(f", {_SEP_JSON}, ")
            if len(parts) != len(batch):
                return "".join([to_json_line(instance) + "\n" for instance in batch])
        head, (task, config), params_json = self.head, self.labels, self.params_json
        out = []
        for instance, reference in zip(batch, parts):
            if instance.config != config or instance.task != task:
                out.append(to_json_line(instance) + "\n")
                continue
            out.append(
                f"{head}{instance.index}, "
                f'"prompt": {encode_basestring(instance.prompt)}, '
                f'"target": {encode_basestring(instance.target)}, '
                f'"reference": {reference}, "params": {params_json(instance.params)}}}\n'
            )
        return "".join(out)

    def _store(self, key: Any, text: str) -> None:
        if len(self.cache) >= self.MAX_CACHED:
            self.cache.clear()
        self.cache[key] = text


# Between two references in a batch: a string, where references are lists, so its JSON
# ('"\\u0000"') between two ", " can only stand at a boundary or inside a reference that
# holds the string itself (then the split gives one part too many).
_SEP = "\x00"
_SEP_JSON = encode_basestring(_SEP)


def _orjson_dumps():
    """orjson.dumps, or None where orjson is not installed (the stdlib way then)."""
    try:
        from orjson import dumps as orjson_dumps
    except ImportError:
        return None
    return orjson_dumps


_INT_LISTS = b"0123456789[],-"  # the only bytes of JSON lists (of lists) of integers


def _orjson_reference(orjson_dumps, reference: list) -> str:
    """`_encode_row(reference)` through orjson: when its compact JSON holds only digits,
    minus signs, brackets and commas, the value is lists of integers (floats have '.' or
    'e', strings quotes, objects braces, booleans and null letters), written in decimal
    as json writes them, and every comma separates items: with ", " in their place it is
    json's text. Anything else goes to json's encoder."""
    try:
        text = orjson_dumps(reference)
    except TypeError:  # orjson.JSONEncodeError: e.g. an integer beyond 64 bits
        return _encode_row(reference)
    if text.translate(None, _INT_LISTS):
        return _encode_row(reference)
    return text.replace(b",", b", ").decode()


def _clip(text: str, width: int | None) -> str:
    if width is None or len(text) <= width:
        return text
    return f"{text[: max(width - 24, 10)]}... ({len(text)} characters)"


def _wrap(text: str, width: int | None, indent: str = "") -> list[str]:
    if width is None:
        return [text]
    return textwrap.wrap(text, max(width, MIN_PANEL), subsequent_indent=indent)


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
    # The params are wrapped, never cut: they are what the instance was drawn with.
    header = f"{instance.config or instance.task} #{instance.index}  params={instance.params}"
    lines = [
        *_wrap(header, width, indent="  "),
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
