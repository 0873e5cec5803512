"""`load_dataset("attentionspan", ...)`: in this process, and in a fresh interpreter of an
installed wheel, from another directory, offline, without importing anything of ours."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import datasets
import datasets.inspect
import datasets.load
import pytest

import attentionspan_datasets
from attentionspan_datasets import registration, startup
from attentionspan_datasets.builder import AttentionSpan, source_hash
from tests.install_helpers import copy_sources, fresh_venv

SIZES = {"num_train": 6, "num_validation": 3, "num_test": 3}


@pytest.fixture
def registered():
    registration.register()
    yield
    registration.register()  # the state the package import left, whatever a test did


def built_rows(tmp_path, config="reversal_ood", **sizes):
    builder = AttentionSpan(config_name=config, cache_dir=str(tmp_path / "direct"), **sizes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        builder.download_and_prepare()
    return {split: ds.to_list() for split, ds in builder.as_dataset().items()}


def test_exactly_the_bare_name_is_routed_to_the_builder(registered, tmp_path):
    module = datasets.load.dataset_module_factory("attentionspan")
    assert module.module_path == "attentionspan_datasets.builder"
    assert module.hash == source_hash()
    assert module.builder_kwargs == {"dataset_name": "attentionspan"}
    assert datasets.inspect.dataset_module_factory("attentionspan").hash == source_hash()
    # Any other path still goes to datasets: a local folder of CSV files.
    (tmp_path / "attentionspan-csv").mkdir()
    (tmp_path / "attentionspan-csv" / "data.csv").write_text("a,b\n1,2\n")
    other = datasets.load.dataset_module_factory(str(tmp_path / "attentionspan-csv"))
    assert other.module_path != "attentionspan_datasets.builder"


def test_register_is_idempotent_and_unregister_restores_datasets(registered):
    registration.register()
    registration.register()
    wrapped = datasets.load.dataset_module_factory
    assert registration.is_registered()
    assert not getattr(wrapped.__wrapped__, registration._MARK, False)  # one layer only
    registration.unregister()
    assert not registration.is_registered()
    assert datasets.load.dataset_module_factory is wrapped.__wrapped__
    assert not getattr(datasets.inspect.dataset_module_factory, registration._MARK, False)


def test_load_dataset_with_the_bare_name(registered, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ds = datasets.load_dataset(
            "attentionspan", "reversal_ood", cache_dir=str(tmp_path / "cache"), **SIZES
        )
    assert {split: d.to_list() for split, d in ds.items()} == built_rows(tmp_path, **SIZES)
    names = datasets.get_dataset_config_names("attentionspan")
    assert names == [config.name for config in AttentionSpan.BUILDER_CONFIGS]


def test_data_files_are_refused(registered):
    with pytest.raises(ValueError, match="'data_files' is not accepted"):
        datasets.load_dataset("attentionspan", "reversal_id", data_files="x.csv")


def test_a_dataset_folder_with_a_script_is_one_clear_line(registered, tmp_path):
    folder = tmp_path / "scripted"
    folder.mkdir()
    (folder / "scripted.py").write_text("raise SystemExit('a script must never run')\n")
    with pytest.raises(ValueError) as error:
        datasets.load_dataset(str(folder))
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"{folder}: holds a loading script (scripted.py), which datasets 5")
    assert isinstance(error.value, RuntimeError)  # what datasets raised before, still


def test_load_works_without_registration(registered, tmp_path):
    registration.unregister()
    cache = str(tmp_path / "cache")
    ds = attentionspan_datasets.load("reversal_ood", cache_dir=cache, **SIZES)
    assert {split: d.to_list() for split, d in ds.items()} == built_rows(tmp_path, **SIZES)
    validation = attentionspan_datasets.load(
        "reversal_ood", split="validation", cache_dir=cache, **SIZES
    )
    assert isinstance(validation, datasets.Dataset) and validation.num_rows == 3
    stream = attentionspan_datasets.load("reversal_ood", streaming=True, cache_dir=cache)
    assert isinstance(stream, datasets.IterableDatasetDict)
    assert [row["index"] for row in stream["train"].take(2)] == [0, 1]
    assert not registration.is_registered()


def test_importing_the_package_imports_neither_datasets_nor_torch(tmp_path):
    code = (
        "import sys, json, attentionspan_datasets\n"
        "print(json.dumps([m for m in ('datasets', 'torch', 'transformers') if m in sys.modules]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert json.loads(result.stdout) == []


# --- a fresh interpreter of an installed (non-editable) wheel -----------------------------


def run_installed(python: Path, code: str, cwd: Path, **env: str):
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", startup.ENV_DISABLE)
    }
    environment.update(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HOME=str(cwd / "hf-home"),
        HF_DATASETS_CACHE=str(cwd / "hf-cache"),
        PYTHONWARNINGS="ignore::UserWarning",
        **env,
    )
    return subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, cwd=cwd, env=environment
    )


LOAD_CODE = """
import json, sys
assert "attentionspan_datasets" not in sys.modules
from datasets import get_dataset_config_names, load_dataset
ds = load_dataset("attentionspan", "reversal_ood", num_train=6, num_validation=3, num_test=3)
stream = load_dataset("attentionspan", "reversal_ood", streaming=True)["train"]
import attentionspan_datasets
print(json.dumps({
    "rows": {split: d.to_list() for split, d in ds.items()},
    "streamed": [row["index"] for row in stream.take(3)],
    "configs": get_dataset_config_names("attentionspan"),
    "package": attentionspan_datasets.__file__,
}))
"""


@pytest.mark.slow
def test_bare_name_in_a_fresh_installed_interpreter_offline(installed_python, tmp_path):
    result = run_installed(installed_python, LOAD_CODE, tmp_path)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["rows"] == built_rows(tmp_path, **SIZES)
    assert out["streamed"] == [0, 1, 2]
    assert out["configs"] == [config.name for config in AttentionSpan.BUILDER_CONFIGS]
    # The installed copy, not this checkout.
    assert Path(out["package"]).is_relative_to(installed_python.parents[1])


@pytest.mark.slow
def test_start_up_hook_loads_nothing_at_start(installed_python, tmp_path):
    code = (
        "import sys, json\n"
        "boot = [getattr(f, '__name__', '') for f in sys.meta_path][0]\n"
        "print(json.dumps([boot, sorted(sys.modules)]))\n"
    )
    boot, on = json.loads(run_installed(installed_python, code, tmp_path).stdout)
    off_run = run_installed(installed_python, code, tmp_path, **{startup.ENV_DISABLE: "1"})
    off_boot, off = json.loads(off_run.stdout)
    assert set(on) - set(off) == set()  # no module imported, not even startup.py
    assert boot == "_AttnspanBoot" and off_boot != "_AttnspanBoot"


@pytest.mark.slow
def test_environment_variable_turns_the_hook_off(installed_python, tmp_path):
    code = (
        "import sys\n"
        "from datasets import load_dataset\n"
        "try:\n"
        "    load_dataset('attentionspan', 'reversal_id')\n"
        "except Exception as error:\n"
        "    print('failed:', type(error).__name__)\n"
        "print('ours:', sorted(m for m in sys.modules if m.startswith('attentionspan')))\n"
    )
    result = run_installed(installed_python, code, tmp_path, **{startup.ENV_DISABLE: "1"})
    assert result.returncode == 0, result.stderr
    assert "failed:" in result.stdout  # datasets looked on the (offline) Hub instead
    assert "ours: []" in result.stdout


@pytest.mark.slow
def test_the_wheel_installs_the_start_up_line(installed_python):
    (pth,) = installed_python.parents[1].glob(f"lib/python*/site-packages/{startup.PTH_NAME}")
    assert pth.read_text() == startup.PTH_LINE


@pytest.mark.slow
def test_editable_install_gets_the_start_up_hook_too(tmp_path_factory, tmp_path):

    root = tmp_path_factory.mktemp("editable")
    source = copy_sources(root / "source")
    python = fresh_venv(root / "venv", "-e", source)
    result = run_installed(python, LOAD_CODE, tmp_path)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(out["package"]).is_relative_to(source)
    assert out["streamed"] == [0, 1, 2]
