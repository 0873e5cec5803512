"""Models split across devices (`harness.foundation.dispatch`): the options' forms and
one-line refusals, and a tiny random Llama dispatched by accelerate over "cpu" and "disk"
(weights on the meta device, loaded by hooks at each forward) giving the same records as
the same model loaded whole: attention (Table 2), the head ranking, intervention settings,
eval, and the commands; a model all on disk, the input embeddings too, as well. On a GPU
machine the same code places layers on GPUs; capture then needs the change named in
`harness.foundation.dispatch.check_capture_placement` for layers over two GPUs."""

from __future__ import annotations

import json
import string

import pytest

from harness.foundation.dispatch import (
    Placement,
    check_capture_placement,
    input_device,
    is_dispatched,
    named_weights,
    parse_device_map,
    parse_max_memory,
    parse_size,
    place_model,
)

CONFIG = "reversal_id"
LAYERS = 4
# Two layers and the output layer on disk (meta weights, read from the checkpoint by
# accelerate's hooks), the rest in memory: the embeddings stay there, capture's device.
SPLIT = {
    "model.embed_tokens": "cpu",
    "model.layers.0": "cpu",
    "model.layers.1": "disk",
    "model.layers.2": "disk",
    "model.layers.3": "cpu",
    "model.norm": "cpu",
    "model.rotary_emb": "cpu",
    "lm_head": "disk",
}


# --- the options ------------------------------------------------------------------------
def test_device_map_forms(tmp_path):
    assert parse_device_map("auto") == "auto"
    assert parse_device_map(" sequential ") == "sequential"
    assert parse_device_map('{"": "cpu"}') == {"": "cpu"}
    assert parse_device_map('{"model.layers.0": 0, "lm_head": "disk"}') == {
        "model.layers.0": 0,
        "lm_head": "disk",
    }
    path = tmp_path / "map.json"
    path.write_text(json.dumps(SPLIT))
    assert parse_device_map(str(path)) == SPLIT


@pytest.mark.parametrize(
    "text, says",
    [
        ("everywhere", "--device-map must be auto, balanced, balanced_low_0, sequential"),
        ('{"lm_head": "gpu"}', "module 'lm_head' has device 'gpu'; allowed: a GPU index"),
        ('{"lm_head": -1}', "module 'lm_head' has device -1"),
        ('{"lm_head": true}', "module 'lm_head' has device True"),
        ("{}", "must be a non-empty JSON object"),
        ('{"lm_head": ', "--device-map: not valid JSON"),
        ("missing.json", "--device-map 'missing.json' does not exist"),
        ('{"a": ' * 100_000 + "1" + "}" * 100_000, "--device-map: nested more than 100 levels"),
    ],
)
def test_a_bad_device_map_is_named_in_one_line(text, says):
    with pytest.raises(ValueError) as caught:
        parse_device_map(text)
    message = str(caught.value)
    assert says in message and "\n" not in message


def test_max_memory_forms():
    assert parse_max_memory("0=20GiB,cpu=60GiB") == {0: 20 * 2**30, "cpu": 60 * 2**30}
    assert parse_max_memory("cuda:1=1.5GB, disk=1TB") == {1: 1_500_000_000, "disk": 10**12}
    assert parse_max_memory('{"cpu": "500MB"}') == {"cpu": 500_000_000}
    assert parse_max_memory("cpu=4096") == {"cpu": 4096}
    assert parse_size("2KiB", "x") == 2048


@pytest.mark.parametrize(
    "text, says",
    [
        ("20GiB", "--max-memory must be DEVICE=SIZE,... with DEVICE a GPU index, cpu or disk"),
        ("gpu=20GiB", "--max-memory: device 'gpu' is not a GPU index, cpu, disk or mps"),
        ("cpu=lots", "--max-memory cpu must be a size such as 20GiB, 500MB"),
        ("cpu=0GB", "--max-memory cpu must be a size"),
        ("cpu=1GB,cpu=2GB", "--max-memory gives device 'cpu' twice"),
    ],
)
def test_a_bad_max_memory_is_named_in_one_line(text, says):
    with pytest.raises(ValueError) as caught:
        parse_max_memory(text)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    "fields, says",
    [
        ({"max_memory": "cpu=1GB"}, "--max-memory needs --device-map"),
        ({"offload_folder": "off"}, "--offload-folder needs --device-map"),
        (
            {"device_map": '{"": "cpu"}', "max_memory": "cpu=1GB"},
            "--max-memory needs --device-map auto, balanced, balanced_low_0 or sequential",
        ),
    ],
)
def test_placement_refuses_options_that_would_do_nothing(fields, says):
    with pytest.raises(ValueError, match=says):
        Placement(**fields)


def test_a_gpu_this_machine_lacks_is_named_before_loading():
    import torch

    if torch.cuda.device_count() > 7:
        pytest.skip("a machine with 8 GPUs has GPU 7")
    with pytest.raises(ValueError, match="name GPU 7, but"):
        Placement(device_map='{"": 7}').load_kwargs()
    with pytest.raises(ValueError, match="name GPU 7, but"):
        Placement(device_map="auto", max_memory="7=1GiB,cpu=1GiB").load_kwargs()


def test_several_processes_are_refused():
    Placement().check_processes(2)  # nothing to split: fine
    with pytest.raises(ValueError, match="2 processes were launched"):
        Placement(device_map="auto").check_processes(2)


# --- a dispatched model -----------------------------------------------------------------
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny random 4-layer Llama with the character tokenizer, saved as safetensors."""
    import torch
    from transformers import AutoModelForCausalLM

    from harness.foundation.tokenization import make_char_tokenizer
    from tests.tiny_models import tiny_config

    folder = tmp_path_factory.mktemp("split_llama")
    tokenizer = make_char_tokenizer(string.printable)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(
        tiny_config("llama", tokenizer, num_hidden_layers=LAYERS)
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def models(model_dir, tmp_path_factory):
    """(whole model, the same dispatched over cpu and disk, tokenizer)."""
    from harness.foundation.runs import load_model_checked

    whole, tokenizer = load_model_checked(str(model_dir), [CONFIG])
    offload = tmp_path_factory.mktemp("offload")
    placement = Placement(json.dumps(SPLIT), None, str(offload))
    split, _ = load_model_checked(str(model_dir), [CONFIG], placement=placement)
    return whole, split, tokenizer


def test_the_split_model_is_dispatched_and_never_moved(models):
    import torch

    whole, split, _ = models
    assert not is_dispatched(whole) and is_dispatched(split)
    assert split.hf_device_map == SPLIT
    on_meta = {n for n, p in split.named_parameters() if p.device.type == "meta"}
    assert any(n.startswith("model.layers.1.") for n in on_meta) and "lm_head.weight" in on_meta
    assert not any(n.startswith("model.layers.0.") for n in on_meta)
    assert input_device(split) == torch.device("cpu") == input_device(whole)
    with pytest.raises(RuntimeError, match="offloaded"):
        split.to("cpu")  # what the commands did: place_model leaves it as it is
    place_model(split, "cpu")
    assert {n for n, p in split.named_parameters() if p.device.type == "meta"} == on_meta
    # every weight, the offloaded ones read through their hooks, equals the whole model's
    mine = dict(named_weights(split))
    assert mine.keys() == dict(whole.named_parameters()).keys()
    assert all(torch.equal(mine[n], p) for n, p in whole.named_parameters())
    check_capture_placement(split)  # the embeddings are in memory: capture can serve it


def _without_seconds(results):
    return {
        name: {k: v for k, v in block.items() if k != "seconds"} for name, block in results.items()
    }


def test_attention_records_equal_the_whole_model(models):
    from harness.attention.analysis import AnalysisConfig, analyse_model
    from harness.foundation.data import PromptConfig

    whole, split, tokenizer = models
    config = AnalysisConfig(configs=[CONFIG], num=4, batch_size=2)
    a, figures_a = analyse_model(whole, tokenizer, config, PromptConfig())
    b, figures_b = analyse_model(split, tokenizer, config, PromptConfig())
    assert _without_seconds(a) == _without_seconds(b)
    rollout = a[CONFIG]["generate"]["rollout"]
    assert rollout["correct"]["n"] + rollout["error"]["n"]  # tokens were scored
    assert json.dumps(figures_a, default=str) == json.dumps(figures_b, default=str)


def _untimed(ranking: dict) -> dict:
    return ranking | {"source": {k: v for k, v in ranking["source"].items() if k != "time_s"}}


def _instances(num=4):
    from harness.attention.analysis import load_instances

    return load_instances(CONFIG, num, 1234, "validation")


def test_head_ranking_and_settings_equal_the_whole_model(models):
    from harness.attention.heads import rank_heads
    from harness.attention.interventions import score_settings
    from harness.attention.setting import BASELINE, Setting

    whole, split, tokenizer = models
    instances = _instances()
    rankings = [rank_heads(m, tokenizer, instances, batch_size=2) for m in (whole, split)]
    assert _untimed(rankings[0].to_dict()) == _untimed(rankings[1].to_dict())
    settings = [
        BASELINE,
        Setting(heads="top", n=3, strength=1.0),
        Setting(heads="random", n=2, strength=2.0, seed=1),
        Setting(heads="top", n=2, strength=0.5, mode="conditional", threshold=0.05),
    ]
    records = [
        score_settings(m, tokenizer, instances, settings, rankings[0], batch_size=2)
        for m in (whole, split)
    ]
    assert records[0] == records[1]
    assert len(records[0]["top3-C1"]) == len(instances)


def test_eval_records_equal_the_whole_model(models):
    from harness.evaluation.evaluate import evaluate_model

    whole, split, tokenizer = models
    a = evaluate_model(whole, tokenizer, [CONFIG], 4, batch_size=2)
    b = evaluate_model(split, tokenizer, [CONFIG], 4, batch_size=2)
    assert a == b


def test_auto_with_a_small_max_memory_offloads_to_disk(model_dir, models):
    """`--device-map auto --max-memory cpu=...`: what fits stays in memory, the rest goes
    to disk, and the records are the whole model's."""
    from harness.evaluation.evaluate import evaluate_model
    from harness.foundation.runs import load_model_checked

    whole, _, tokenizer = models
    placement = Placement("auto", "cpu=160KB")
    auto, _ = load_model_checked(str(model_dir), [CONFIG], placement=placement)
    assert set(auto.hf_device_map.values()) == {"cpu", "disk"}
    assert auto.hf_device_map["model.embed_tokens"] == "cpu"
    assert evaluate_model(auto, tokenizer, [CONFIG], 3) == evaluate_model(
        whole, tokenizer, [CONFIG], 3
    )


def test_a_model_all_on_disk_gives_the_whole_models_records(model_dir, models):
    """All of it on disk, the input embeddings too (on `meta` between forwards): capture
    keeps its masks where the embeddings run, and Table 2, the head ranking and the
    intervention records are the whole model's."""
    from harness.attention.analysis import AnalysisConfig, analyse_model
    from harness.attention.heads import rank_heads
    from harness.attention.interventions import score_settings
    from harness.attention.setting import BASELINE, Setting
    from harness.foundation.data import PromptConfig
    from harness.foundation.runs import load_model_checked

    whole, _, tokenizer = models
    disk, _ = load_model_checked(str(model_dir), [CONFIG], placement=Placement("auto", "cpu=1KB"))
    assert disk.hf_device_map == {"": "disk"}
    assert next(disk.parameters()).device.type == "meta"
    check_capture_placement(disk, "model 'm'")  # nothing to refuse
    config = AnalysisConfig(configs=[CONFIG], num=4, batch_size=2)
    tables = [analyse_model(m, tokenizer, config, PromptConfig())[0] for m in (whole, disk)]
    assert _without_seconds(tables[0]) == _without_seconds(tables[1])
    instances = _instances(6)
    ranks = [rank_heads(m, tokenizer, instances, batch_size=3) for m in (whole, disk)]
    assert _untimed(ranks[0].to_dict()) == _untimed(ranks[1].to_dict())
    settings = [BASELINE, Setting(heads="top", n=3, strength=1.0)]
    records = [
        score_settings(m, tokenizer, instances, settings, ranks[0], batch_size=3)
        for m in (whole, disk)
    ]
    assert records[0] == records[1]


def test_layers_on_another_device_are_refused_in_one_line(models, monkeypatch):
    """Layers on a second GPU (faked here: no machine has one at test time) are refused
    until capture follows each layer's device."""
    import torch

    from harness.foundation import dispatch

    _, split, _ = models
    devices = {0: torch.device("cpu"), 1: torch.device("cuda", 1)}
    monkeypatch.setattr(dispatch, "layer_devices", lambda model: devices)
    with pytest.raises(ValueError) as caught:
        check_capture_placement(split, "model 'm'")
    message = str(caught.value)
    assert message.startswith("model 'm': the device map runs layer 1 on cuda:1")
    assert "\n" not in message


def test_a_map_that_misses_or_misnames_a_module_is_named(model_dir):
    from harness.foundation.runs import load_model_checked

    missing = {k: v for k, v in SPLIT.items() if k != "model.norm"}
    with pytest.raises(ValueError, match=r"--device-map: .*model\.norm\.weight"):
        load_model_checked(str(model_dir), placement=Placement(json.dumps(missing)))
    wrong = {**SPLIT, "model.layer.9": "cpu"}
    with (
        pytest.warns(UserWarning, match="do not match any submodules"),  # accelerate's
        pytest.raises(ValueError, match="'model.layer.9' names no module of the model"),
    ):
        load_model_checked(str(model_dir), placement=Placement(json.dumps(wrong)))
    with pytest.raises(ValueError, match="not scratch"):
        load_model_checked("scratch", placement=Placement("auto"))


# --- the commands -----------------------------------------------------------------------
def test_heads_and_eval_commands_take_a_device_map(model_dir, tmp_path, capsys):
    from harness.cli import main

    split = tmp_path / "map.json"
    split.write_text(json.dumps(SPLIT))
    base = ["heads", "--model", str(model_dir), "--config", CONFIG, "-n", "3", "--no-progress"]
    assert main([*base, "--output", str(tmp_path / "a.json")]) == 0
    extra = ["--device-map", str(split), "--offload-folder", str(tmp_path / "off")]
    assert main([*base, "--output", str(tmp_path / "b.json"), *extra]) == 0
    a, b = (json.loads((tmp_path / f"{x}.json").read_text()) for x in "ab")
    assert _untimed(a) == _untimed(b)
    base = ["eval", "--model", str(model_dir), "--configs", CONFIG, "-n", "3", "--no-progress"]
    assert main([*base, "--output", str(tmp_path / "ea")]) == 0
    assert main([*base, "--output", str(tmp_path / "eb"), "--device-map", "auto"]) == 0
    results = [json.loads((tmp_path / x / "results.json").read_text()) for x in ("ea", "eb")]
    assert results[0]["results"] == results[1]["results"]
    assert results[1]["eval_config"]["device_map"] == "auto"
    capsys.readouterr()


@pytest.mark.parametrize(
    "command, extra, says",
    [
        ("heads", ["--max-memory", "0=20GiB"], "--max-memory needs --device-map"),
        ("eval", ["--device-map", "everywhere"], "--device-map must be auto, balanced"),
        ("attention", ["--offload-folder", "off"], "--offload-folder needs --device-map"),
        ("heads", ["--device-map", "auto", "--device", "cpu"], "give --device cpu or"),
    ],
)
def test_bad_placement_is_one_line_from_the_cli(model_dir, tmp_path, capsys, command, extra, says):
    from harness.cli import main

    configs = ["--config", CONFIG] if command == "heads" else ["--configs", CONFIG]
    argv = [command, "--model", str(model_dir), *configs, "-n", "2", "--no-progress", *extra]
    if command == "attention":
        argv += ["--output", str(tmp_path / "out"), "--viewer-num", "0"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err


def test_reproduce_takes_the_options_and_loads_the_model_split(model_dir, tmp_path):
    from harness.pipeline.reproduce import Processes, TaskRun
    from harness.pipeline.settings import ReproduceConfig, TaskValue

    with pytest.raises(ValueError, match="give --device cuda or --device-map"):
        ReproduceConfig(model=str(model_dir), device="cuda", device_map="auto")
    with pytest.raises(ValueError, match="--max-memory needs --device-map"):
        ReproduceConfig(model=str(model_dir), max_memory="cpu=1GB")
    cfg = ReproduceConfig(
        model=str(model_dir), output=str(tmp_path / "out"), device_map=json.dumps(SPLIT)
    )
    assert cfg.to_dict()["device_map"] == json.dumps(SPLIT)
    task = TaskRun(
        cfg, TaskValue.of("reversal"), str(model_dir), tmp_path / "out", Processes("cpu"), None
    )
    model = task.load()
    assert is_dispatched(model) and model.hf_device_map == SPLIT
