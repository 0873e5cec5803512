"""Fixed splits as Hub parquet: the layout `push_to_hub(config_name=...)` writes, plus a card.

    attentionspan export addition_id addition_ood --out attentionspan-data --num-train 50000
    attentionspan export addition_ood --out attentionspan-data --push-to-hub ORG/attentionspan

    from datasets import load_dataset
    load_dataset("attentionspan-data", "addition_ood")   # the same rows and features

For each config the folder gets `{config}/{split}-{i:05d}-of-{n:05d}.parquet` (n from the
500 MB shard size push_to_hub uses) and README.md gets `configs:` (data_files globs) and
`dataset_info:` (features, split sizes) in its YAML, as push_to_hub would write them, below
which the card explains the tasks, the `reference` column with an example, the presets and
how the data were generated, the split rule, and where a config's input space is small (the
same sentence `export` prints). Everything is written into a temporary folder next to DIR
(`attentionspan_datasets.atomic.atomic_path`) and renamed at the end, so an interrupted export
never leaves a folder that looks complete; the next export to DIR removes what a killed one
left. The folder gets the permissions the umask allows.

Split sizes are capped at `builder.MAX_SPLIT_ROWS` (10 million) rows unless `force=True`
(`--force`): `--num-train 1000000000000` is refused before anything is built.
`--push-to-hub` checks that the Hub answers before anything is built or written, then calls
datasets' own `push_to_hub` per config and uploads the card.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

from attentionspan_datasets import __version__
from attentionspan_datasets.atomic import atomic_path, atomic_write_text
from attentionspan_datasets.ownership import inspect, listing, write_manifest
from attentionspan_datasets.presets import PRESETS, did_you_mean
from attentionspan_datasets.splits import SPLIT_SHARES, SPLITS, SmallSpaceWarning
from attentionspan_datasets.tasks import TASKS

CARD_TAGS = ["synthetic", "algorithmic-reasoning", "attention", "interpretability"]


class HubError(RuntimeError):
    """The Hub cannot be reached or refused the upload."""


def check_hub(repo_id: str) -> None:
    """Fail with one line, before anything is built, when a push cannot work."""
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise ValueError(f"--push-to-hub expects ORG/NAME, got {repo_id!r}")
    from huggingface_hub import HfApi, constants

    if constants.HF_HUB_OFFLINE:
        raise HubError("cannot push to the Hub: offline mode is on (HF_HUB_OFFLINE is set)")
    try:
        HfApi().whoami()
    except Exception as error:  # no network, no token, bad token: all end the same way
        reason = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        raise HubError(f"cannot push to the Hub: {type(error).__name__}: {reason}") from None


def _check_out(out: Path, overwrite: bool) -> None:
    """Refuse, before anything is built, an --out that cannot be written or must not be
    replaced: the current directory or a folder holding it (--overwrite would delete its
    files), a path under a file, a folder this process cannot write, a symbolic link."""
    if out.is_symlink():
        # the new folder is renamed into place: over a link that fails after the whole build
        # (and would replace the link, not the folder it points to)
        raise ValueError(
            f"--out {str(out)!r} is a symbolic link (to {os.readlink(out)!r}); give the folder "
            "it points to, or a new folder"
        )
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} exists and is not a folder")
    resolved, cwd = out.resolve(), Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise ValueError(
            f"--out {str(out)!r} is the current directory or holds it; export into a new "
            f"folder (replacing this one would delete its files)"
        )
    if out.is_dir() and any(out.iterdir()):
        _check_replaceable(out, overwrite)
    # The folder is written beside `out` and renamed: its nearest existing ancestor must be
    # a folder this process can create files in.
    ancestor = next(p for p in resolved.parents if p.exists() or p == p.parent)
    if not ancestor.is_dir():
        raise ValueError(f"--out {str(out)!r} lies under {str(ancestor)!r}, which is a file")
    try:
        # a full disk still creates an empty file: write some bytes, so that it is refused
        # here and not after the build's progress lines
        with tempfile.TemporaryFile(dir=ancestor) as probe:
            probe.write(b"\0" * 4096)
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ValueError(
            f"--out {str(out)!r}: cannot write in {str(ancestor)!r}: {reason}"
        ) from None


def _export_legacy(out: Path) -> bool:
    """A folder an export wrote before manifests: its card, and config folders of parquet."""
    try:
        card = (out / "README.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    folders = [p for p in out.iterdir() if p.name != "README.md"]
    return "attentionspan export" in card and all(
        p.is_dir() and not p.is_symlink() and all(f.suffix == ".parquet" for f in p.iterdir())
        for p in folders
    )


def _check_replaceable(out: Path, overwrite: bool) -> None:
    """A folder that is not empty is replaced only with --overwrite, and only when an export
    wrote everything in it (its manifest, `attentionspan_datasets.ownership`): the whole
    folder is swapped for the new one, so a user's file in it would be lost."""
    folder = inspect(out)
    if folder.command is None and _export_legacy(out):
        folder = dataclasses.replace(folder, command="export", files=folder.entries)
    if folder.command not in (None, "export"):
        raise FileExistsError(
            f"--out {str(out)!r} was written by attentionspan {folder.command}; export into "
            "another --out"
        )
    if folder.command is None:
        raise FileExistsError(
            f"--out {str(out)!r} holds files no export wrote ({listing(folder.entries)}); "
            "export into a new or empty folder"
            + (" (--overwrite replaces only a folder an export wrote)" if overwrite else "")
        )
    foreign = folder.foreign()
    if foreign:
        raise FileExistsError(
            f"--out {str(out)!r} holds files no export wrote ({listing(foreign)}); "
            "--overwrite would replace the whole folder: move them out, or export into "
            "another --out"
        )
    if not overwrite:
        raise FileExistsError(
            f"--out {str(out)!r} is not empty: it holds an earlier export; pass --overwrite "
            "to replace it, or export into another --out"
        )


def build_config(
    config: str, cache_dir: str | None = None, num_proc: int | None = None, **kwargs: Any
):
    """The DatasetDict of one config, through the builder."""
    from attentionspan_datasets.builder import AttentionSpan

    builder = AttentionSpan(config_name=config, cache_dir=cache_dir, **kwargs)
    with warnings.catch_warnings():
        # export says it in its own output and in the card (small_space_notes)
        warnings.simplefilter("ignore", SmallSpaceWarning)
        builder.download_and_prepare(num_proc=num_proc)
    return builder.as_dataset()


def small_space_notes(configs: list[str], seed: int) -> dict[str, str]:
    """{config: the sentence of splits.small_space_report} for configs with a small space."""
    from attentionspan_datasets.splits import small_space_report

    notes = {}
    for config in configs:
        report = small_space_report(config, seed)
        if report:
            notes[config] = report
    return notes


def write_parquet(dataset_dict: Any, folder: Path, config: str) -> dict[str, int]:
    """`{config}/{split}-{i:05d}-of-{n:05d}.parquet` as push_to_hub names them; returns
    the parquet bytes written per split."""
    from datasets import config as datasets_config
    from datasets.utils.py_utils import convert_file_size_to_int

    max_shard_size = convert_file_size_to_int(datasets_config.MAX_SHARD_SIZE)
    (folder / config).mkdir(parents=True, exist_ok=True)
    written = {}
    for split, dataset in dataset_dict.items():
        num_shards = int(dataset.data.nbytes / max_shard_size) + 1  # push_to_hub's rule
        written[split] = 0
        for index in range(num_shards):
            path = folder / config / f"{split}-{index:05d}-of-{num_shards:05d}.parquet"
            shard = dataset.shard(num_shards=num_shards, index=index, contiguous=True)
            shard.to_parquet(str(path))
            written[split] += path.stat().st_size
    return written


def card_metadata(infos: dict[str, Any]) -> Any:
    """The YAML block: `configs:` and `dataset_info:` as push_to_hub writes them, plus
    licence, tags and a name."""
    from datasets.info import DatasetInfo, DatasetInfosDict
    from datasets.splits import SplitDict, SplitInfo
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCardData

    data = DatasetCardData(
        license="apache-2.0",
        pretty_name="AttentionSpan",
        task_categories=["text-generation"],
        tags=CARD_TAGS,
    )
    dataset_infos, configs = {}, {}
    for config, (dataset_dict, written) in infos.items():
        first = next(iter(dataset_dict.values()))
        info = DatasetInfo(
            config_name=config,
            features=first.features,
            splits=SplitDict(),
            download_size=0,
            dataset_size=0,
        )
        for split, dataset in dataset_dict.items():
            split_info = SplitInfo(
                name=split, num_bytes=dataset.data.nbytes, num_examples=len(dataset)
            )
            info.splits.add(split_info)
            info.download_size += written[split]
            info.dataset_size += split_info.num_bytes
        info.size_in_bytes = info.download_size + info.dataset_size
        dataset_infos[config] = info
        configs[config] = {
            "data_files": [
                {"split": split, "path": f"{config}/{split}-*"} for split in dataset_dict
            ]
        }
    DatasetInfosDict(dataset_infos).to_dataset_card_data(data)
    MetadataConfigs(configs).to_dataset_card_data(data)
    return data


def _reference_example(dataset_dict: Any, config: str) -> str:
    """A worked example of the reference column, from the first validation row."""
    split = "validation" if len(dataset_dict.get("validation", [])) else next(iter(dataset_dict))
    row = dataset_dict[split][0]
    text = row["prompt"] + row["target"]
    offset = len(row["prompt"])
    lines = [
        f"The first `{split}` row of `{config}`:",
        "",
        "```",
        f"prompt    = {row['prompt']!r}",
        f"target    = {row['target']!r}",
        f"reference = {json.dumps(row['reference'])}",
        "```",
        "",
        "Positions count characters of `prompt + target`:",
        "",
        "| i | target[i] | its position | reference[i] | characters there |",
        "|---|---|---|---|---|",
    ]
    for i, positions in enumerate(row["reference"][:6]):
        chars = ", ".join(f"`{text[p]}`@{p}" for p in positions)
        lines.append(f"| {i} | `{row['target'][i]}` | {offset + i} | {positions} | {chars} |")
    if len(row["reference"]) > 6:
        lines.append(f"| ... | | | | ({len(row['reference'])} rows in all) |")
    return "\n".join(lines)


def card_text(
    infos: dict[str, Any],
    seed: int,
    sizes: dict[str, int | None],
    source_hash: str,
    repo_id: str | None,
    notes: dict[str, str] | None = None,
) -> str:
    """The card below the YAML: tasks, columns, a worked example, presets, provenance, the
    split rule and the small-space notes."""
    from attentionspan_datasets.builder import CITATION, DEFAULT_SPLIT_SIZES

    configs = list(infos)
    first = configs[0]
    where = repo_id or "path/to/this/folder"
    config_rows = "\n".join(
        f"| `{config}` | {next(iter(dd.values()))[0]['task']} | "
        + " | ".join(str(len(dd[split])) if split in dd else "0" for split in SPLITS)
        + " |"
        for config, (dd, _) in infos.items()
    )
    used_tasks = sorted({next(iter(dd.values()))[0]["task"] for dd, _ in infos.values()})
    task_lines = "\n".join(
        f"- `{name}`: {TASKS[name].description}" for name in used_tasks if name in TASKS
    )
    preset_lines = "\n".join(
        f"| `{name}` | {p.task} | {', '.join(f'{k}={v}' for k, v in p.params.items())} |"
        for name, p in PRESETS.items()
    )
    shown_sizes = {
        split: sizes.get(split) if sizes.get(split) is not None else DEFAULT_SPLIT_SIZES[split]
        for split in SPLITS
    }
    return CARD_TEMPLATE.format(
        where=where,
        first=first,
        config_rows=config_rows,
        task_lines=task_lines,
        reference_example=_reference_example(infos[first][0], first),
        preset_lines=preset_lines,
        version=__version__,
        seed=seed,
        source_hash=source_hash[:16],
        train=shown_sizes["train"],
        validation=shown_sizes["validation"],
        test=shown_sizes["test"],
        configs=" ".join(configs),
        size_options=" ".join(f"--num-{split} {size}" for split, size in shown_sizes.items()),
        citation=CITATION.strip(),
        shares=", ".join(f"{round(100 * SPLIT_SHARES[split])}% {split}" for split in SPLITS),
        notes="".join(f"\n- {note}." for note in (notes or {}).values()),
    )


CARD_TEMPLATE = """\
# AttentionSpan

Algorithmic reasoning tasks with **reference attention masks**, from "Attend or Perish:
Benchmarking Attention in Algorithmic Reasoning". Every row is one task instance: the prompt
a model reads, the target it must write, and for each target character the positions it has
to attend to. Generated by the `attentionspan` package; these are fixed splits of its
generator (which can also stream unlimited training data).

```python
from datasets import load_dataset
ds = load_dataset("{where}", "{first}")
```

## Configs in this repository

| config | task | train | validation | test |
|---|---|---|---|---|
{config_rows}

## Tasks

{task_lines}

## Columns

| column | type | meaning |
|---|---|---|
| task | string | registry name of the task |
| config | string | preset or task name the row was generated for |
| index | int64 | position in the split's stream; (config, seed, split, index) fixes the row |
| prompt | string | the task input exactly as the model sees it (ends with `=`) |
| target | string | the expected output |
| reference | list of list of int32 | row i: positions in `prompt + target` that `target[i]` needs |
| params | string (JSON) | the sampled parameters; `length` is the bucket of per-length metrics |

## What `reference` means

Text is tokenised one character per token, so a position is a character index in
`prompt + target`. `target[i]` sits at position `len(prompt) + i` and is predicted from the
token before it; `reference[i]` lists the positions whose characters that prediction
depends on. Prepending an instruction or few-shot examples shifts every position by the
length of that prefix.

{reference_example}

## Presets

In-distribution (`_id`) and out-of-distribution (`_ood`) parameters of the paper's
Appendix F:

| preset | task | parameters |
|---|---|---|
{preset_lines}

## How it was generated

- `attentionspan` {version}, seed {seed}, generator source hash `{source_hash}`.
- Split sizes requested: train {train}, validation {validation}, test {test}.
- Splits: a prompt belongs to one split, fixed by a hash of the prompt alone (the first 8
  bytes of BLAKE2b of its UTF-8 text, modulo 1000: {shares}), the same for every seed. Row
  `index` of a split is the first draw of the generator at that index whose prompt hashes
  into the split. So no train prompt equals a validation or test prompt, and no validation
  prompt a test prompt.{notes}
- Re-create with `attentionspan export {configs} --out DIR --seed {seed} {size_options}`.

## Licence

Apache-2.0.

## Citation

```bibtex
{citation}
```
"""


def _checked_configs(configs: list[str]) -> list[str]:
    """The configs to export, each a known builder config and none twice."""
    from attentionspan_datasets.builder import AttentionSpan, check_config_name

    if isinstance(configs, str):  # "reversal_id" would be read as 11 one-letter names
        configs = [configs]
    if not configs:
        raise ValueError("give at least one CONFIG")
    for config in configs:
        check_config_name(config)
    allowed = list(AttentionSpan.builder_configs)
    unknown = [config for config in configs if config not in allowed]
    if unknown:
        named = ", ".join(config + did_you_mean(config, allowed) for config in unknown)
        raise ValueError(f"unknown config(s) {named}; allowed: {', '.join(allowed)}")
    if len(set(configs)) != len(configs):
        raise ValueError(f"a config is listed twice: {' '.join(configs)}")
    return configs


def _check_sizes(sizes: dict[str, int | None], num_proc: int | None, force: bool) -> None:
    """ValueError naming the option for a --num-proc or a split size out of range, or when
    every split is empty."""
    from attentionspan_datasets.builder import MAX_SPLIT_ROWS, NUM_SHARDS

    if num_proc is not None and (
        isinstance(num_proc, bool) or not isinstance(num_proc, int) or num_proc < 1
    ):  # checked here: datasets says "Number of processes" only after a progress bar
        raise ValueError(f"--num-proc must be a positive integer, got {num_proc!r}")
    if num_proc is not None and num_proc > NUM_SHARDS:
        raise ValueError(
            f"--num-proc is {num_proc}, above the cap of {NUM_SHARDS} (a split has at most "
            f"{NUM_SHARDS} shards, so more processes would idle)"
        )
    for split, size in sizes.items():
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            raise ValueError(f"--num-{split} must be a non-negative integer, got {size!r}")
        if size is not None and size > MAX_SPLIT_ROWS and not force:
            raise ValueError(
                f"--num-{split} is {size:,}, above the cap of {MAX_SPLIT_ROWS:,} rows per "
                f"split; pass --force (force=True) to export it anyway"
            )
    if all(size == 0 for size in sizes.values()):
        raise ValueError("nothing to export: --num-train, --num-validation and --num-test are 0")


def _checked_seed(seed: int | None) -> int:
    """The seed (the default when None), checked."""
    from attentionspan_datasets.generation import DEFAULT_SEED, SEED_RANGE

    seed = DEFAULT_SEED if seed is None else seed
    if (
        isinstance(seed, bool)
        or not isinstance(seed, int)
        or not (SEED_RANGE[0] <= seed <= SEED_RANGE[1])
    ):
        raise ValueError(
            f"--seed must be an integer in [{SEED_RANGE[0]}, {SEED_RANGE[1]}], got {seed!r}"
        )
    return seed


def export(
    configs: list[str],
    out: str | os.PathLike,
    *,
    num_train: int | None = None,
    num_validation: int | None = None,
    num_test: int | None = None,
    seed: int | None = None,
    overwrite: bool = False,
    push_to_hub: str | None = None,
    cache_dir: str | None = None,
    num_proc: int | None = None,
    force: bool = False,
) -> Path:
    """Write `configs` to `out` (atomically); push them when `push_to_hub` is ORG/NAME.
    `force` allows splits above builder.MAX_SPLIT_ROWS rows."""
    from attentionspan_datasets.builder import (
        check_cache_dir,
        source_hash,
    )

    configs = _checked_configs(configs)
    sizes = {"train": num_train, "validation": num_validation, "test": num_test}
    _check_sizes(sizes, num_proc, force)
    seed = _checked_seed(seed)
    if not isinstance(out, (str, os.PathLike)) or not str(out):
        raise ValueError(f"--out must name a folder, got {out!r}")
    out = Path(out).expanduser()
    _check_out(out, overwrite)  # first: a refused --out leaves no cache folder behind
    if cache_dir is not None:
        cache_dir = str(check_cache_dir(cache_dir, "--cache-dir"))
    if push_to_hub:
        check_hub(push_to_hub)  # before anything is built or written

    kwargs = {f"num_{split}": size for split, size in sizes.items() if size is not None}
    if force:
        kwargs["force"] = True
    notes = small_space_notes(configs, seed)
    try:
        # Without --overwrite the final rename refuses a folder that another export filled
        # in the meantime (atomic_path's replace=False): one of two exports wins.
        with atomic_path(out, directory=True, replace=overwrite) as staging:
            infos = {}
            for config in configs:
                dataset_dict = build_config(config, cache_dir, num_proc, seed=seed, **kwargs)
                infos[config] = (dataset_dict, write_parquet(dataset_dict, staging, config))
            _write_card(staging, infos, seed, sizes, source_hash(), push_to_hub, notes)
            write_manifest(staging, "export", [p.name for p in staging.iterdir()])
    except FileExistsError as error:
        raise FileExistsError(f"{error}; pass --overwrite to replace it") from None
    if push_to_hub:
        _push(infos, out, push_to_hub)
    return out


def _write_card(
    folder: Path,
    infos: dict,
    seed: int,
    sizes: dict,
    source_hash: str,
    repo_id: str | None,
    notes: dict[str, str] | None = None,
) -> None:
    from huggingface_hub import DatasetCard

    card = DatasetCard(
        f"---\n{card_metadata(infos).to_yaml()}\n---\n\n"
        + card_text(infos, seed, sizes, source_hash, repo_id, notes)
    )
    atomic_write_text(folder / "README.md", str(card))


def _push(infos: dict, out: Path, repo_id: str) -> None:
    """datasets' own push_to_hub per config, then our card over the README it wrote."""
    from huggingface_hub import HfApi

    try:
        for config, (dataset_dict, _) in infos.items():
            dataset_dict.push_to_hub(repo_id, config_name=config)
        HfApi().upload_file(
            path_or_fileobj=str(out / "README.md"),
            path_in_repo="README.md",
            repo_id=repo_id,
            repo_type="dataset",
            commit_message="AttentionSpan dataset card",
        )
    except Exception as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        raise HubError(f"push to {repo_id} failed: {type(error).__name__}: {reason}") from None
