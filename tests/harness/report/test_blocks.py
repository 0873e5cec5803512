"""harness.report.blocks: the one rewriter of generated blocks."""

from __future__ import annotations

import pytest

from harness.report.blocks import replace_block, rewrite_block

BEGIN, END = "<!-- b: generated -->", "<!-- /b -->"


def test_the_block_and_its_markers_are_replaced_and_nothing_else():
    text = f"intro\n{BEGIN}\nold\n{END}\noutro\n"
    assert replace_block(text, f"{BEGIN}\nnew\n{END}", BEGIN, END) == (
        f"intro\n{BEGIN}\nnew\n{END}\noutro\n"
    )
    # the same rendering again gives the same bytes
    once = replace_block(text, f"{BEGIN}\nnew\n{END}", BEGIN, END)
    assert replace_block(once, f"{BEGIN}\nnew\n{END}", BEGIN, END) == once


@pytest.mark.parametrize(
    "text", ["no block", f"{BEGIN} only the start", f"{END} before {BEGIN}"], ids=str
)
def test_missing_or_reversed_markers_are_refused_naming_both(text):
    with pytest.raises(ValueError, match="the doc has no markers .*add both lines"):
        replace_block(text, "x", BEGIN, END)


def test_rewrite_writes_only_a_page_that_has_the_block(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"a\n{BEGIN}\nold\n{END}\n")
    assert rewrite_block(page, BEGIN, END, lambda: f"{BEGIN}\nnew\n{END}")
    assert page.read_text() == f"a\n{BEGIN}\nnew\n{END}\n"
    plain = tmp_path / "plain.md"
    plain.write_text("nothing\n")
    rendered = []
    assert not rewrite_block(plain, BEGIN, END, lambda: rendered.append(1) or "x")
    assert plain.read_text() == "nothing\n" and not rendered  # not even rendered
