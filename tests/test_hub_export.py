"""Hub export: push_to_hub's layout and card metadata, read back by load_dataset, atomic."""

from __future__ import annotations

import warnings

import datasets
import pytest
from huggingface_hub import DatasetCard

from attentionspan_datasets import __version__, hub_export
from attentionspan_datasets.builder import FEATURES, AttentionSpan
from attentionspan_datasets.hub_export import HubError, export

SIZES = {"num_train": 30, "num_validation": 8, "num_test": 8}
CONFIGS = ["reversal_id", "addition_ood"]


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # small-space warnings of reversal_id
        yield


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    out = export(CONFIGS, root / "out", cache_dir=str(root / "cache"), seed=5, **SIZES)
    return root, out


def test_layout_is_the_push_to_hub_layout(exported):
    root, out = exported
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    # the manifest says an export wrote the folder (--overwrite); it is never uploaded
    expected = [".attentionspan.json", "README.md"] + [
        f"{config}/{split}-00000-of-00001.parquet"
        for config in CONFIGS
        for split in ("test", "train", "validation")
    ]
    assert files == sorted(expected)
    assert sorted(p.name for p in root.iterdir()) == ["cache", "out"]  # no staging left


@pytest.mark.parametrize("config", CONFIGS)
def test_load_dataset_reads_it_back_with_the_same_features_and_rows(exported, config):
    root, out = exported
    loaded = datasets.load_dataset(str(out), config, cache_dir=str(root / "read-cache"))
    builder = AttentionSpan(config_name=config, cache_dir=str(root / "cache"), seed=5, **SIZES)
    builder.download_and_prepare()
    built = builder.as_dataset()
    assert set(loaded) == {"train", "validation", "test"}
    for split in built:
        assert loaded[split].features == FEATURES
        assert loaded[split].to_list() == built[split].to_list()


def test_card_metadata_is_what_push_to_hub_writes(exported, tmp_path):
    """datasets' own card update (the function push_to_hub calls) gives the same YAML."""
    from datasets.arrow_dataset import _get_updated_dataset_card
    from datasets.splits import SplitInfo
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem

    root, out = exported
    fs = DirFileSystem(path=str(tmp_path), fs=LocalFileSystem())
    for config in CONFIGS:
        loaded = datasets.load_dataset(str(out), config, cache_dir=str(root / "read-cache"))
        splits = [
            SplitInfo(name=split, num_bytes=loaded[split]._estimate_nbytes(), num_examples=n)
            for split, n in loaded.num_rows.items()
        ]
        sizes = [
            sum(p.stat().st_size for p in (out / config).glob(f"{split}-*")) for split in loaded
        ]
        card, _ = _get_updated_dataset_card(
            fs, config, splits, loaded["train"].features, config, None, sizes, [0, 0, 0], False
        )
        (tmp_path / "README.md").write_text(str(card))
    theirs = DatasetCard.load(tmp_path / "README.md").data.to_dict()
    ours = DatasetCard.load(out / "README.md").data.to_dict()
    key = lambda item: item["config_name"]  # noqa: E731
    assert sorted(ours["configs"], key=key) == sorted(theirs["configs"], key=key)
    assert sorted(ours["dataset_info"], key=key) == sorted(theirs["dataset_info"], key=key)
    assert ours["license"] == "apache-2.0"


def test_card_explains_the_data(exported):
    _, out = exported
    text = (out / "README.md").read_text()
    first = datasets.load_dataset(str(out), CONFIGS[0], split="validation")[0]
    for needed in (
        "## Tasks",
        "string_reversal",
        "## What `reference` means",
        f"prompt    = {first['prompt']!r}",
        f"reference = {first['reference']}".replace("'", ""),
        "## Presets",
        "addition_ood",
        "seed 5",
        f"`attentionspan` {__version__}",
        "Apache-2.0",
        "@misc{attend_or_perish",
        "--num-train 30 --num-validation 8 --num-test 8",
        "BLAKE2b",
        "5% test",
        # the small-space sentence, for reversal_id only
        "attentionspan config 'reversal_id' has a small input space (length 1:",
    ):
        assert needed in text, needed
    assert "'addition_ood' has a small input space" not in text


def test_test_rows_are_the_split_rows(exported):
    from attentionspan_datasets.splits import iter_split

    root, out = exported
    loaded = datasets.load_dataset(
        str(out), "addition_ood", split="test", cache_dir=str(root / "r")
    )
    expected = [row.prompt for row in iter_split("addition_ood", seed=5, split="test", stop=8)]
    assert loaded["prompt"] == expected


def test_a_huge_split_is_refused_at_once_unless_forced(tmp_path, monkeypatch):
    import time

    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"--num-train is 1,000,000,000,000, above the cap of 10,"):
        export(["reversal_id"], tmp_path / "out", num_train=10**12)
    assert time.perf_counter() - start < 1
    assert not (tmp_path / "out").exists()
    # force passes the cap through to the builder (stopped here before anything is built).
    seen = {}

    def fake_build(config, cache_dir, num_proc, **kwargs):
        seen.update(kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(hub_export, "build_config", fake_build)
    with pytest.raises(KeyboardInterrupt):
        export(["reversal_id"], tmp_path / "out", num_train=10**12, force=True)
    assert seen["force"] is True and seen["num_train"] == 10**12
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_killed_exports_staging_is_removed_and_the_folder_gets_the_umask(tmp_path):
    import os
    import stat
    import subprocess
    import sys

    # kill -9 in the middle of writing: the staging folder stays behind ...
    code = (
        "import os, sys\n"
        "from attentionspan_datasets import hub_export\n"
        "def die(*args):\n"
        "    os.kill(os.getpid(), 9)\n"
        "hub_export.write_parquet = die\n"
        "hub_export.export(['reversal_ood'], sys.argv[1], cache_dir=sys.argv[2], num_train=5,\n"
        "                  num_validation=2, num_test=2)\n"
    )
    out, cache = tmp_path / "out", tmp_path / "cache"
    subprocess.run([sys.executable, "-c", code, str(out), str(cache)], check=False)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.partial-")]
    # ... and the next export removes it; the folder is not private (drwx------).
    old = os.umask(0o022)
    try:
        export(["reversal_ood"], out, cache_dir=str(cache), **SIZES)
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "out"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "reversal_ood").stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "README.md").stat().st_mode) == 0o644


def test_a_non_empty_folder_is_refused_unless_overwrite(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    # a user's folder: refused, even with overwrite (it would delete keep.txt)
    for overwrite in (False, True):
        with pytest.raises(FileExistsError, match="holds files no export wrote"):
            export(["reversal_ood"], out, overwrite=overwrite, cache_dir=str(tmp_path / "c"))
        assert (out / "keep.txt").read_text() == "mine"
    (out / "keep.txt").unlink()
    export(["reversal_ood"], out, cache_dir=str(tmp_path / "cache"), **SIZES)
    with pytest.raises(FileExistsError, match="not empty: it holds an earlier export"):
        export(["reversal_ood"], out, cache_dir=str(tmp_path / "cache"), **SIZES)
    export(["reversal_ood"], out, overwrite=True, cache_dir=str(tmp_path / "cache"), **SIZES)
    assert (out / "README.md").exists() and (out / ".attentionspan.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "out"]


def test_an_export_from_before_manifests_is_replaced_with_overwrite(tmp_path):
    out = tmp_path / "out"
    export(["reversal_ood"], out, cache_dir=str(tmp_path / "cache"), **SIZES)
    (out / ".attentionspan.json").unlink()  # as exports wrote it before the manifest
    export(["reversal_ood"], out, overwrite=True, cache_dir=str(tmp_path / "cache"), **SIZES)
    assert (out / ".attentionspan.json").exists()


def test_an_interrupted_export_leaves_nothing_that_looks_complete(tmp_path, monkeypatch):
    real = hub_export.write_parquet
    calls = []

    def write_then_fail(dataset_dict, folder, config):
        calls.append(config)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(dataset_dict, folder, config)

    monkeypatch.setattr(hub_export, "write_parquet", write_then_fail)
    with pytest.raises(KeyboardInterrupt):
        export(CONFIGS, tmp_path / "out", cache_dir=str(tmp_path / "cache"), **SIZES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_offline_push_fails_in_one_line_before_writing(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    built = []
    monkeypatch.setattr(hub_export, "build_config", lambda *a, **k: built.append(a))
    with pytest.raises(HubError, match="offline mode is on") as error:
        export(["reversal_ood"], tmp_path / "out", push_to_hub="org/name")
    assert "\n" not in str(error.value)
    assert not built and not list(tmp_path.iterdir())


def test_unreachable_hub_fails_in_one_line(tmp_path, monkeypatch):
    from huggingface_hub import HfApi, constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    def no_network(self):
        raise ConnectionError("Max retries exceeded\nwith url: /api/whoami-v2")

    monkeypatch.setattr(HfApi, "whoami", no_network)
    with pytest.raises(HubError, match=r"^cannot push to the Hub: ConnectionError: Max retries"):
        export(["reversal_ood"], tmp_path / "out", push_to_hub="org/name")
    assert not list(tmp_path.iterdir())


def test_push_calls_push_to_hub_per_config_and_uploads_the_card(tmp_path, monkeypatch):
    from huggingface_hub import HfApi, constants

    calls = []
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(HfApi, "whoami", lambda self: {"name": "someone"})
    monkeypatch.setattr(
        datasets.DatasetDict,
        "push_to_hub",
        lambda self, repo_id, config_name: calls.append(("push", repo_id, config_name)),
    )
    monkeypatch.setattr(
        HfApi,
        "upload_file",
        lambda self, **kw: calls.append(("card", kw["repo_id"], kw["path_in_repo"])),
    )
    out = export(
        CONFIGS, tmp_path / "out", push_to_hub="org/name", cache_dir=str(tmp_path / "c"), **SIZES
    )
    assert calls == [
        ("push", "org/name", "reversal_id"),
        ("push", "org/name", "addition_ood"),
        ("card", "org/name", "README.md"),
    ]
    assert 'load_dataset("org/name", "reversal_id")' in (out / "README.md").read_text()


@pytest.mark.parametrize(
    ("configs", "kwargs", "message"),
    [
        ([], {}, "give at least one CONFIG"),
        (
            ["reversal_idd"],
            {},
            r"unknown config\(s\) reversal_idd \(did you mean 'reversal_id'\?\); "
            r"allowed: reversal_id",
        ),
        (["reversal_id", "reversal_id"], {}, "listed twice"),
        (["reversal_id"], {"num_test": -1}, "--num-test must be a non-negative integer"),
        (["reversal_id"], {"push_to_hub": "just-a-name"}, "expects ORG/NAME"),
        (
            ["reversal_id"],
            {"num_train": 0, "num_validation": 0, "num_test": 0},
            "nothing to export",
        ),
    ],
)
def test_bad_input(tmp_path, configs, kwargs, message):
    with pytest.raises(ValueError, match=message):
        export(configs, tmp_path / "out", **kwargs)
    assert not (tmp_path / "out").exists()


def test_a_full_disk_is_refused_before_the_build(tmp_path, monkeypatch):
    """A full disk still creates an empty file: the probe writes bytes, so the refusal
    comes before any split is built (it came after the progress lines)."""
    import errno
    import tempfile

    real = tempfile.TemporaryFile

    class Full:
        def __init__(self, *args, **kwargs):
            self.file = real(*args, **kwargs)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(hub_export.tempfile, "TemporaryFile", Full)
    monkeypatch.setattr(hub_export, "build_config", lambda *a, **k: pytest.fail("built"))
    with pytest.raises(ValueError, match="No space left on device"):
        export(["reversal_ood"], tmp_path / "out", cache_dir=str(tmp_path / "cache"), **SIZES)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
