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
    from harness.foundation.tokenization import make_char_tokenizer

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


def synthetic_data(specs, settings=("baseline",), meta=None) -> dict:
    """Viewer data without a model (the format of `viewer_data.build_viewer_data`, 1 layer x 1
    head: the rollout, L0 mean, L0H0), random maps. `specs`: (config, index, prompt, target,
    {wrong row: predicted}); row i's reference is column i of the prompt (mod its length)."""
    import base64
    import zlib

    import numpy as np

    from harness.attention.viewer_data import quantise

    def pack(array) -> str:
        return base64.b64encode(zlib.compress(array.tobytes())).decode("ascii")

    rng = np.random.default_rng(0)
    instances = []
    for config, index, prompt, target, wrong in specs:
        lengths = [len(prompt) + i for i in range(len(target))]
        blocks = {}
        for name in settings:
            parts = [quantise(rng.random((len(target), len(prompt + target))), lengths)]
            parts += [quantise(rng.random((len(target), len(prompt + target))), lengths)]
            parts += [quantise(rng.random((len(target), len(prompt + target))), lengths)]
            blocks[name] = {
                "predicted": [wrong.get(i, c) for i, c in enumerate(target)],
                "correct": [i not in wrong for i in range(len(target))],
                "scores": [round(float(x), 7) for x in rng.random(len(target))],
                "maps": pack(np.concatenate([q for q, _ in parts])),
                "row_max": pack(np.concatenate([m for _, m in parts])),
            }
        instances.append(
            {
                "config": config,
                "index": index,
                "prompt": prompt,
                "target": target,
                "text": prompt + target,
                "lengths": lengths,
                "mask": [[i % len(prompt)] for i in range(len(target))],
                "settings": blocks,
            }
        )
    views = [{"name": "rollout", "kind": "rollout"}, {"name": "L0 mean", "kind": "layer"}]
    views += [{"name": "L0H0", "kind": "head", "layer": 0, "head": 0}]
    return {
        "format": 1,
        "layers": 1,
        "heads": 1,
        "settings": list(settings),
        "views": views,
        "quantisation": "uint8 = round(255 * value / row max); row_max float32 per row",
        "encoding": "deflate",
        "meta": dict(meta or {}),
        "instances": instances,
    }


SPECIAL = "<|reserved_special_token_250|>"  # a predicted token that decodes to a long name
LETTERS = string.ascii_lowercase * 5
# An ID instance of 2 characters (what the page used to open on), an ID wrong one shorter
# than any OOD one, an OOD one the model got right, a long OOD wrong one whose labels are wide
# (rows past 100, a special token predicted) and a short OOD wrong one: the opening.
SPECS = [
    ("reversal_id", 0, "ab=", "ba", {}),
    ("reversal_id", 1, "abcd=", "dcba", {1: "x"}),
    ("reversal_ood", 0, LETTERS[:40] + "=", LETTERS[:40][::-1], {}),
    ("reversal_ood", 1, LETTERS[:110] + "=", LETTERS[:110][::-1], {3: "q", 105: SPECIAL}),
    ("reversal_ood", 2, LETTERS[:20] + "=", LETTERS[:20][::-1], {0: "z", 7: "q"}),
]
SCORED = {"file": "attention.md", "instances": 200, "option": "--viewer-num"}


def _notes(page: str) -> dict:
    found = re.search(
        r'<script type="application/json" id="viewer-notes">(.*?)</script>', page, re.S
    )
    assert found, "no notes block"
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
    # The data block and the notes block, which text of any kind cannot close early.
    assert page.count("</script>") == 3
    assert _embedded(page) == data
    assert _notes(page) == viewer.notes(data)
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


def test_it_opens_on_the_shortest_wrong_ood_instance_and_says_why():
    data = synthetic_data(SPECS)
    assert viewer.opening(data) == {
        "index": 4,
        "why": "Opened on reversal_ood #2: the shortest answer (20 characters) of the 2 OOD "
        "instances the model got wrong.",
    }
    page = viewer.render_html(data)
    assert _notes(page)["opening"]["index"] == 4
    assert _embedded(page) == data  # the data itself is as given


def test_the_opening_falls_back_to_wrong_then_ood_then_the_longest():
    no_ood_wrong = [s for s in SPECS if not (s[0] == "reversal_ood" and s[4])]
    found = viewer.opening(synthetic_data(no_ood_wrong))
    assert found["index"] == 1  # the ID one the model got wrong
    assert "of the 1 instances the model got wrong (no OOD instance is wrong)" in found["why"]
    all_right = [s for s in SPECS if not s[4]]
    found = viewer.opening(synthetic_data(all_right))
    assert found["index"] == 1  # the longest OOD answer, never the 2-character ID one
    assert found["why"].startswith("Opened on reversal_ood #0: the longest answer (40 ")
    only_id = [s for s in SPECS if s[0] == "reversal_id" and not s[4]]
    only_id += [("string_reversal", 5, "abcdef=", "fedcba", {})]  # not a preset: no role
    found = viewer.opening(synthetic_data(only_id))
    assert found["index"] == 1
    assert "(the model got all right; none is OOD)" in found["why"]
    assert viewer.opening({"settings": ["baseline"], "instances": []})["index"] == -1


def test_it_says_when_it_covers_fewer_instances_than_attention_md():
    data = synthetic_data(SPECS, meta={"scored": SCORED})
    text = viewer.coverage(data)
    assert text == (
        "These means cover 2 (reversal_id), 3 (reversal_ood) of the 200 instances per config "
        "that attention.md scores (--viewer-num sets how many the viewer keeps), so they "
        "differ from attention.md's."
    )
    even = synthetic_data(SPECS[1:3], meta={"scored": SCORED})
    assert viewer.coverage(even) == (
        "These means cover 1 of the 200 instances per config that attention.md scores "
        "(--viewer-num sets how many the viewer keeps), so they differ from attention.md's."
    )
    all_of_them = synthetic_data(SPECS[:2], meta={"scored": {**SCORED, "instances": 2}})
    assert viewer.coverage(all_of_them) == (
        "These means cover the same 2 instances per config as attention.md."
    )
    assert viewer.coverage(synthetic_data(SPECS)) is None  # no caller said what it scored
    assert _notes(viewer.render_html(data))["coverage"] == text


def test_the_attention_command_tells_the_viewer_what_attention_md_scores(tmp_path, monkeypatch):
    """`attentionspan attention` keeps --viewer-num of the -n instances per config in the
    viewer and passes -n in `meta["scored"]`, so the page can say it holds fewer."""
    from types import SimpleNamespace

    from harness.attention.analysis import AnalysisConfig
    from harness.commands.attention import write_viewer_for

    seen = {}

    def fake_write_viewer(out_dir, model, tokenizer, instances, prompt=None, **kw):
        seen.update(kw, instances=instances)
        return tmp_path / viewer.VIEWER_FILE

    monkeypatch.setattr(viewer, "write_viewer", fake_write_viewer)
    (tmp_path / "attention.md").write_text("table\n", encoding="utf-8")
    args = SimpleNamespace(viewer_num=3, output=str(tmp_path))
    config = AnalysisConfig(configs=["reversal_id", "reversal_ood"], num=10)
    write_viewer_for(args, config, None, None, None, {"model_name": "m", "prompt": "p"})
    assert len(seen["instances"]) == 6
    assert seen["meta"]["scored"] == SCORED | {"instances": 10}
    page = viewer.render_html(synthetic_data(SPECS, meta=seen["meta"]))
    assert "of the 10 instances per config that attention.md scores" in page
