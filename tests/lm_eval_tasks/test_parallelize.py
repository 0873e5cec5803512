"""`attnspan-hf` with `parallelize=True` (lm-eval's HFLM arguments: device_map,
max_memory_per_gpu, max_cpu_memory, offload_folder): a tiny random Llama
split over "cpu" and "disk" by accelerate gives the same answers and the same attention
metrics as the model loaded whole; the inputs go where the embeddings run (not HFLM's
default "cuda"); options that would do nothing, and splits capture cannot serve yet, are
refused in one line."""

from __future__ import annotations

import json
import string

import pytest

lm_eval = pytest.importorskip("lm_eval")

from lm_eval_tasks.models import AttnspanHFLM, placement_args  # noqa: E402
from tests.harness.test_dispatch import SPLIT  # noqa: E402  (the same cpu/disk map)
from tests.lm_eval_tasks.conftest import make_char_tokenizer  # noqa: E402

PRESET = "addition_id"
N = 8


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny random 4-layer Llama that only writes digits (so answers never stop early
    and some digits are right: correct and wrong tokens both occur)."""
    import torch
    from transformers import LlamaForCausalLM

    from tests.tiny_models import tiny_config

    tokenizer = make_char_tokenizer()
    torch.manual_seed(0)
    config = tiny_config(
        "llama", tokenizer, num_hidden_layers=4, num_attention_heads=2, max_position_embeddings=512
    )
    model = LlamaForCausalLM(config)
    digits = [tokenizer.convert_tokens_to_ids(d) for d in string.digits]
    with torch.no_grad():
        weight = model.lm_head.weight
        others = [i for i in range(weight.shape[0]) if i not in digits]
        weight[others] = weight[digits].mean(0)
    folder = tmp_path_factory.mktemp("split_digit_llama")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def run(model) -> dict[str, float]:
    from lm_eval.tasks import TaskManager

    from lm_eval_tasks import TASKS_DIR

    results = lm_eval.simple_evaluate(
        model=model,
        tasks=[f"attnspan_{PRESET}"],
        task_manager=TaskManager(include_path=TASKS_DIR, include_defaults=False),
        limit=N,
        bootstrap_iters=0,
    )
    return {
        k.removesuffix(",none"): v
        for k, v in results["results"][f"attnspan_{PRESET}"].items()
        if k.endswith(",none") and "_stderr" not in k
    }


def same(a: dict[str, float], b: dict[str, float]) -> bool:
    import math

    return a.keys() == b.keys() and all(
        (math.isnan(a[k]) and math.isnan(b[k])) or a[k] == pytest.approx(b[k], abs=1e-6) for k in a
    )


@pytest.mark.slow
def test_a_split_model_gives_the_whole_models_attention_metrics(model_dir, tmp_path):
    from harness.foundation.dispatch import is_dispatched

    whole = AttnspanHFLM(pretrained=model_dir, device="cpu", batch_size=4, attention=True)
    expected = run(whole)
    assert "ref_share" in expected and expected["exact_match"] >= 0.0
    split_map = tmp_path / "map.json"
    split_map.write_text(json.dumps(SPLIT))
    # HFLM's default device is "cuda": the inputs must follow the embeddings instead.
    split = AttnspanHFLM(
        pretrained=model_dir,
        batch_size=4,
        attention=True,
        parallelize=True,
        device_map=str(split_map),
        offload_folder=str(tmp_path / "offload"),
    )
    assert is_dispatched(split.model) and split.model.hf_device_map == SPLIT
    assert str(split.device) == "cpu"
    assert same(run(split), expected)
    # `auto` with a CPU budget (lm-eval's max_cpu_memory): part in memory, part on disk
    auto = AttnspanHFLM(
        pretrained=model_dir,
        batch_size=4,
        attention=True,
        parallelize="True",
        max_cpu_memory="160KB",
    )
    assert set(auto.model.hf_device_map.values()) == {"cpu", "disk"}
    assert same(run(auto), expected)


def test_parallelize_without_a_budget_keeps_the_model_in_memory(model_dir):
    """HFLM hands accelerate max_memory={} on a machine without GPUs, which offloads all of
    it to disk; attnspan-hf leaves accelerate to read the memory there is."""
    from harness.foundation.dispatch import is_dispatched

    model = AttnspanHFLM(pretrained=model_dir, batch_size=2, parallelize=True)
    assert not is_dispatched(model.model)
    assert {p.device.type for p in model.model.parameters()} == {"cpu"}


@pytest.mark.parametrize(
    "args, says",
    [
        ({"device_map": "auto"}, "device_map takes effect only with parallelize=True"),
        ({"max_cpu_memory": "1GB"}, "max_cpu_memory takes effect only with parallelize=True"),
        ({"parallelize": "maybe"}, "parallelize must be true or false"),
        ({"parallelize": True, "max_cpu_memory": "lots"}, "max_cpu_memory must be a size"),
        ({"parallelize": True, "device_map": "everywhere"}, "device_map must be auto, balanced"),
        (
            {"parallelize": True, "device_map": "auto", "device_map_option": "auto"},
            "give device_map or device_map_option",
        ),
    ],
)
def test_placement_args_are_refused_in_one_line(args, says):
    with pytest.raises(ValueError) as caught:
        placement_args(args)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_the_older_name_and_sizes_are_read():
    args = placement_args(
        {"parallelize": "true", "device_map_option": "sequential", "max_memory_per_gpu": "2GiB"}
    )
    assert args == {
        "parallelize": True,
        "device_map": "sequential",
        "max_memory_per_gpu": 2 * 2**30,
    }


@pytest.mark.slow
def test_attention_on_a_model_all_on_disk_equals_the_whole_model(model_dir):
    """Every weight on disk, the input embeddings too: the attention metrics are still the
    whole model's (capture keeps its masks where the embeddings run)."""
    whole = AttnspanHFLM(pretrained=model_dir, device="cpu", batch_size=4, attention=True)
    disk = AttnspanHFLM(
        pretrained=model_dir,
        batch_size=4,
        attention=True,
        parallelize=True,
        max_cpu_memory="1KB",
    )
    assert disk.model.hf_device_map == {"": "disk"}
    assert same(run(disk), run(whole))
