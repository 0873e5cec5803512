"""attention.html as a file: self-contained, its data intact, small for long texts."""

from __future__ import annotations

import json
import random
import re
import string

import pytest

from attentionspan_datasets.tasks.base import Instance
from harness.report import viewer

LONG_PROMPT = 1990  # characters before the answer: a 2,000-token text with the answer
LONG_BUDGET = 600_000  # bytes for that one instance (2 layers x 4 heads: 11 views)


@pytest.fixture(scope="module")
def tokenizer():
    from harness.tokenization import make_char_tokenizer

    return make_char_tokenizer(string.printable)


def _long_instance(length: int = LONG_PROMPT, answer: int = 10) -> Instance:
    """A lookup over a long table (as value assignment or FFML prompts are): each answer
    character copies one earlier prompt character, its reference."""
    rng = random.Random(0)
    prompt = "".join(rng.choice(string.ascii_letters) for _ in range(length - 1)) + "="
    refs = sorted(rng.sample(range(length - 1), answer))
    target = "".join(prompt[k] for k in refs)
    return Instance("synthetic", prompt, target, [[k] for k in refs], config="long", index=0)


@pytest.fixture(scope="module")
def long_page(tmp_path_factory, tokenizer):
    """(path, data, seconds to build) of one 2,000-token instance on a tiny Llama."""
    import time

    import torch
    from transformers import AutoModelForCausalLM

    from harness.attention.viewer_data import build_viewer_data
    from tests.tiny_models import tiny_config

    torch.manual_seed(0)
    config = tiny_config("llama", tokenizer, max_position_embeddings=2048)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    started = time.perf_counter()
    data = build_viewer_data(model, tokenizer, [_long_instance()], batch_size=1)
    path = viewer.write_html(data, tmp_path_factory.mktemp("long") / viewer.VIEWER_FILE)
    return path, data, time.perf_counter() - started


def _embedded(page: str) -> dict:
    found = re.search(
        r'<script type="application/json" id="viewer-data">(.*?)</script>', page, re.S
    )
    assert found, "no data block"
    return json.loads(found.group(1))


def test_the_page_is_self_contained_and_carries_its_data():
    data = {
        "format": 1,
        "settings": ["baseline"],
        "views": [],
        "instances": [{"text": "</script><script>alert(1)</script> <!-- & é"}],
    }
    page = viewer.render_html(data, title="a <b> title")
    # No network: nothing is loaded from anywhere (no src, no href, no URL at all).
    assert not re.search(r"\b(src|href)\s*=", page)
    assert "http://" not in page and "https://" not in page
    # One data block, which text of any kind cannot close early.
    assert page.count("</script>") == 2
    assert _embedded(page) == data
    assert "<title>a &lt;b&gt; title</title>" in page


def test_write_html_is_atomic_and_complete(tmp_path):
    data = {"format": 1, "settings": ["baseline"], "views": [], "instances": []}
    path = viewer.write_html(data, tmp_path / "sub" / viewer.VIEWER_FILE)
    assert path.read_text(encoding="utf-8") == viewer.render_html(data)
    assert [p.name for p in path.parent.iterdir()] == [viewer.VIEWER_FILE]  # no temporary left


def test_a_2000_token_text_stays_within_budget(long_page):
    path, data, seconds = long_page
    inst = data["instances"][0]
    assert len(inst["text"]) == LONG_PROMPT + 10
    # Rows: the 10 answer tokens; columns: the task text only; the causal part only.
    assert inst["lengths"] == [LONG_PROMPT + i for i in range(10)]
    assert path.stat().st_size < LONG_BUDGET
    assert seconds < 120
