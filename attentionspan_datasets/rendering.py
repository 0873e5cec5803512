"""Text renderings of instances: one JSON line, or the text with its mask drawn as a grid.

The grid has a row per target character and a column per character of `prompt + target`:
`#` marks a referenced position, `.` any other position the character may attend to
(causally earlier), and a blank the positions after it.
"""

from __future__ import annotations

import json

from attentionspan_datasets.tasks.base import Instance


def to_json_line(instance: Instance) -> str:
    return json.dumps(instance.to_dict(), ensure_ascii=False, sort_keys=False)


def render_mask(instance: Instance) -> str:
    text = instance.text
    offset = len(instance.prompt)
    lines = [
        f"{instance.config or instance.task} #{instance.index}  params={instance.params}",
        f"prompt: {instance.prompt}",
        f"target: {instance.target}",
        "",
        "   " + text,
    ]
    for i, row in enumerate(instance.reference):
        query = offset + i  # the position whose next-token prediction is target[i]
        marks = set(row)
        cells = "".join(
            "#" if pos in marks else ("." if pos < query else " ") for pos in range(len(text))
        )
        lines.append(f"{instance.target[i]!s:>2} {cells.rstrip()}")
    return "\n".join(lines)


def render_text(instance: Instance) -> str:
    return f"{instance.prompt}{instance.target}\t{json.dumps(instance.reference)}"
