"""Generated blocks of Markdown pages: the one rewriter every digest writer uses.

    from harness.report.blocks import replace_block, rewrite_block
    text = replace_block(text, rendered, begin, end)   # ValueError naming missing markers
    rewrite_block(Path("docs/results.md"), begin, end, lambda: render(...))  # False: no block

A block is the text from its begin marker to its end marker, both included; the rendered
text carries both markers again, so a page re-rendered from the same digest is byte for byte
the page before. The writers (`results_doc`, `scratch_doc`, `supervision_doc`,
`results_summary`, `pretrained_table`) differ only in their markers and their renderers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def replace_block(text: str, rendered: str, begin: str, end: str) -> str:
    """`text` with the block from `begin` to `end` (markers included) replaced by
    `rendered`; ValueError naming both markers when either is missing or out of order."""
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ValueError(
            f"the doc has no markers {begin!r} .. {end!r}: add both lines where the block goes"
        )
    return text[:start] + rendered + text[stop + len(end) :]


def rewrite_block(doc: Path, begin: str, end: str, render: Callable[[], str]) -> bool:
    """Rewrite `doc`'s block between `begin` and `end` with `render()` (atomically); False
    when the doc has no such block (nothing rendered, nothing written)."""
    from attentionspan_datasets.atomic import atomic_write_text

    text = Path(doc).read_text(encoding="utf-8")
    if begin not in text:
        return False
    atomic_write_text(Path(doc), replace_block(text, render(), begin, end))
    return True
