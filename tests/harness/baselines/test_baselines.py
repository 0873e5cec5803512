"""harness.baselines: the six models, the native tensors and reference vectors, one tiny
training run, and the `attentionspan baselines` command."""

from __future__ import annotations

import json

import pytest
import torch

from attentionspan_datasets import generate
from attentionspan_datasets.tasks import _feature_vectors as fv
from harness.baselines.data import (
    FeatureBatch,
    carrier_vectors,
    load_split,
    reference_vectors,
    to_batch,
)
from harness.baselines.models import KINDS, ModelConfig, build_model, sinusoidal_encoding
from harness.baselines.train import RecipeConfig, accuracy_by_query, attention_scores, run_one
from harness.cli import main


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread, as the command uses: on a busy machine several threads of a tiny
    model spend their time waiting for each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_batch_is_the_native_form_of_the_instances():
    instances = [generate("t6_len10", seed=0, index=i) for i in range(20)]
    batch = to_batch(instances)
    assert batch.vectors.shape == (20, 10, 36) and batch.query.shape == (20, 36)
    for i, x in enumerate(instances):
        for t, vector in enumerate(x.params["vectors"]):
            assert batch.vectors[i, t].nonzero().flatten().tolist() == vector
        assert batch.query[i].nonzero().flatten().tolist() == x.params["query"]
        assert batch.labels[i] == float(x.target)


def test_reference_vectors_are_those_holding_the_decisive_occurrences():
    for i in range(200):
        x = generate("t6_len10", seed=1, index=i)
        a, b = x.params["features"]
        expected = sorted({t for t, v in enumerate(x.params["vectors"]) if a in v or b in v})
        assert reference_vectors(x) == expected
        first, second = carrier_vectors(x)
        if x.params["case"] in ("in_order", "wrong_order"):
            assert 0 <= first < second
            assert {first, second} == set(expected)
        else:
            assert (first, second) == (-1, -1)
    sufficient = generate("t1_len10", seed=1, index=1, mask="sufficient")
    assert reference_vectors(sufficient) in ([], list(range(10))) or sufficient.target == "1"


def test_training_split_of_t1_repeats_the_queried_feature():
    train = load_split("t1_len30", "train", size=300, seed=0)
    test = load_split("t1_len30", "test", size=100, seed=0)
    hits_train = (train.vectors * train.query[:, None, :]).sum(dim=(1, 2))
    hits_test = (test.vectors * test.query[:, None, :]).sum(dim=(1, 2))
    assert hits_test.max() == 1 and hits_train.max() > 1


def test_load_split_refuses_other_tasks():
    with pytest.raises(ValueError, match="discrete-retrieval preset"):
        load_split("addition_id", "test", size=2, seed=0)


@pytest.mark.parametrize("kind", KINDS)
def test_every_model_answers_and_attends(kind):
    torch.manual_seed(0)
    model = build_model(ModelConfig(kind=kind, d_model=16, ffn_dim=32)).eval()
    batch = to_batch([generate("t7_len5", seed=0, index=i) for i in range(4)])
    logits, attention = model(batch.vectors, batch.query)
    assert logits.shape == (4,)
    if kind == "lstm":
        assert attention is None
    else:
        assert attention.shape == (4, 5)
        torch.testing.assert_close(attention.sum(dim=1), torch.ones(4))


def test_encoder_is_causal_so_a_later_vector_never_changes_an_earlier_representation():
    torch.manual_seed(0)
    model = build_model(ModelConfig(kind="t+pos+att", d_model=16, ffn_dim=32)).eval()
    batch = to_batch([generate("t6_len5", seed=0, index=i) for i in range(3)])
    changed = batch.vectors.clone()
    changed[:, -1] = 1.0 - changed[:, -1]
    before, after = model.encode(batch.vectors), model.encode(changed)
    torch.testing.assert_close(before[:, :-1], after[:, :-1])
    assert not torch.allclose(before[:, -1], after[:, -1])


@pytest.mark.parametrize("kind", ["t-pos-att", "t+pos-att"])
def test_without_self_attention_each_vector_is_encoded_alone(kind):
    """ "-Att" keeps the encoder cell but drops its attention: h_i depends on vector i (and
    its position) only, so shuffling the other vectors leaves it unchanged."""
    torch.manual_seed(0)
    model = build_model(ModelConfig(kind=kind, d_model=16, ffn_dim=32)).eval()
    assert model.encoder is not None and model.encoder.attention is None
    vectors = to_batch([generate("t6_len5", seed=0, index=i) for i in range(3)]).vectors
    other = vectors.clone()
    other[:, :2] = vectors[:, :2].flip(0)  # other instances' first two vectors
    torch.testing.assert_close(model.encode(vectors)[:, 2:], model.encode(other)[:, 2:])


def test_models_follow_the_authors_sizes():
    """Parameter counts of the paper's sizes (d = 100, feed-forward 100, 36 features):
    W_in and W_q 2 x 3,700, encoder norms 400, feed-forward 20,200, attention 40,400,
    output MLP 20,100 + 101; the LSTM reads the 36 features directly (4 x 100 x (36 + 100)
    + 800 = 55,200) and has no W_in."""
    models = {k: build_model(ModelConfig(kind=k)) for k in KINDS}
    counts = {k: sum(p.numel() for p in model.parameters()) for k, model in models.items()}
    without = 2 * 3_700 + 400 + 20_200 + 20_201
    assert counts["t-pos-att"] == counts["t+pos-att"] == without
    assert counts["t-pos+att"] == counts["t+pos+att"] == without + 40_400
    assert counts["lstm"] == counts["lstm+att"] == 3_700 + 55_200 + 20_201


def test_positional_encoding_matches_vaswani():
    table = sinusoidal_encoding(3, 4)
    assert table[0].tolist() == [0.0, 1.0, 0.0, 1.0]
    assert table[2, 2].item() == pytest.approx(torch.sin(torch.tensor(2 / 100.0)).item())


def test_model_config_names_bad_values():
    with pytest.raises(ValueError, match="invalid model kind 'gru'.*lstm\\+att"):
        ModelConfig(kind="gru")
    with pytest.raises(ValueError, match="'dropout'"):
        ModelConfig(dropout=1.0)
    with pytest.raises(ValueError, match="'patience'"):
        RecipeConfig(patience=-1)


def test_attention_scores_use_the_reference_and_the_pair():
    batch = to_batch([generate("t6_len5", seed=2, index=i) for i in range(40)])
    # All attention on the later carrier (or the last vector when there is none).
    alpha = torch.zeros(40, 5)
    later = batch.carriers[:, 1].clamp(min=0)
    alpha[torch.arange(40), later] = 1.0
    scores = attention_scores(alpha, batch, torch.ones(40, dtype=torch.bool))
    assert scores["later_minus_earlier"] == 1.0
    assert scores["instances_with_pair"] == int((batch.carriers[:, 0] >= 0).sum())
    assert 0.0 < scores["share_on_reference"] <= 1.0
    assert scores["share_on_reference_wrong"] is None


def test_one_tiny_run_keeps_the_best_epoch_and_is_seeded():
    data = {
        "train": load_split("t1_len5", "train", size=200, seed=0),
        "validation": load_split("t1_len5", "validation", size=100, seed=0),
        "test": load_split("t1_len5", "test", size=100, seed=0),
    }
    seen = []
    recipe = RecipeConfig(epochs=3, batch_size=50, lr=3e-3)
    result = run_one("t1_len5", "t-pos-att", 0, data, recipe, lambda e, a: seen.append(a))
    assert len(seen) == result["epochs_run"] == 3
    assert result["validation_accuracy"] == max(seen)
    assert result["best_epoch"] == seen.index(max(seen)) + 1
    assert 0.0 <= result["test_accuracy"] <= 1.0
    assert result["attention"]["instances_with_reference"] > 0
    again = run_one("t1_len5", "t-pos-att", 0, data, recipe)
    assert again["test_accuracy"] == result["test_accuracy"]  # the seed fixes the run


@pytest.mark.parametrize("shuffle", [True, False])
def test_training_order_is_stored_order_without_shuffle(monkeypatch, shuffle):
    data = {
        split: load_split("t1_len5", split, size=40, seed=0)
        for split in ("train", "validation", "test")
    }
    taken = []
    take = FeatureBatch.take
    monkeypatch.setattr(
        FeatureBatch, "take", lambda self, i: taken.append(i.tolist()) or take(self, i)
    )
    recipe = RecipeConfig(epochs=2, batch_size=10, shuffle=shuffle)
    run_one("t1_len5", "t-pos-att", 0, data, recipe)
    epochs = [sum(taken[:4], []), sum(taken[4:], [])]
    assert all(sorted(epoch) == list(range(40)) for epoch in epochs)  # every row once
    if shuffle:
        assert epochs[0] != epochs[1] != list(range(40))
    else:
        assert epochs[0] == epochs[1] == list(range(40))


def test_command_writes_json_and_resumes(tmp_path, capsys):
    out = tmp_path / "t6.json"
    argv = [
        "baselines", "--task", "T6", "--length", "5", "--models", "t-pos-att", "lstm",
        "--seeds", "2", "--num-train", "40", "--num-validation", "20", "--num-test", "20",
        "--epochs", "1", "--output", str(out), "--no-progress",
    ]  # fmt: skip
    assert main(argv) == 0
    document = json.loads(out.read_text())
    assert document["settings"]["config"] == "t6_len5"
    assert document["command"] == "attentionspan " + " ".join(argv)
    assert [(r["model"], r["seed"]) for r in document["runs"]] == [
        ("t-pos-att", 0), ("t-pos-att", 1), ("lstm", 0), ("lstm", 1),
    ]  # fmt: skip
    assert set(document["summary"]) == {"t-pos-att", "lstm"}
    assert document["summary"]["lstm"]["seeds"] == 2
    captured = capsys.readouterr()
    assert "t6_len5 t-pos-att" in captured.out and "accuracy" in captured.out
    # --no-progress: no bar, one line per epoch and run for the log instead
    assert captured.err.splitlines() == [
        f"t6_len5 {kind} seed {seed} epoch 1/1 validation {r['history'][0]['val_accuracy']:.4f}"
        for (kind, seed), r in zip(
            [("t-pos-att", 0), ("t-pos-att", 1), ("lstm", 0), ("lstm", 1)], document["runs"]
        )
    ]
    seconds = [r["seconds"] for r in document["runs"]]
    assert main(argv) == 0  # nothing left to do: the runs are kept, not redone
    assert [r["seconds"] for r in json.loads(out.read_text())["runs"]] == seconds


def test_command_errors_are_one_line(tmp_path, capsys):
    assert main(["baselines", "--task", "T8", "--output", str(tmp_path / "x.json")]) == 2
    assert "invalid --task 'T8'" in capsys.readouterr().err
    assert main(["baselines", "--task", "T1", "--length", "1", "--output", "x.json"]) == 2
    assert "'min_length'" in capsys.readouterr().err
    assert main(["baselines", "--task", "T1", "--device", "gpu7", "--output", "x.json"]) == 2
    err = capsys.readouterr().err
    assert "invalid --device 'gpu7'" in err and len(err.strip().splitlines()) == 1
    assert fv.NUM_FEATURES == 36


def test_harness_generator_source_reads_retrieval_presets():
    from harness.foundation.data import GeneratorSource

    source = GeneratorSource("t7_id", seed=0, split="test", size=3)
    instances = [source[i] for i in range(3)]
    assert all(
        x.config == "t7_id" and x.task == "contextual_ordered_set_member_detection"
        for x in instances
    )
    assert to_batch(instances).vectors.shape == (3, 10, 36)


def test_paper_flag_sets_the_appendix_recipe_and_defaults_are_the_measured_cpu_recipe():
    import argparse

    from harness.commands.baselines import add_arguments, settings_of

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    default = settings_of(parser.parse_args(["--task", "T6", "--output", "x.json"]))
    assert (default["num_train"], default["batch_size"], default["lr"]) == (100_000, 50, 5e-4)
    paper = settings_of(parser.parse_args(["--task", "T6", "--paper", "--output", "x.json"]))
    assert (paper["epochs"], paper["batch_size"], paper["lr"]) == (100, 10, 1e-4)
    assert (paper["num_train"], paper["num_validation"], paper["num_test"]) == (
        100_000,
        10_000,
        10_000,
    )


def _run(config, model, seed, accuracy):
    return {"config": config, "model": model, "seed": seed, "test_accuracy": accuracy}


def test_table_pools_files_and_marks_differences_beyond_three_points():
    from harness.baselines.table import markdown

    first = {
        "runs": [_run("t6_len10", "t+pos-att", 0, 0.80), _run("t6_len10", "t+pos-att", 1, 0.82)]
    }
    second = {
        "runs": [_run("t6_len10", "t-pos+att", 0, 0.70), _run("t6_len12", "t-pos+att", 0, 0.5)]
    }
    text = markdown([first, second])
    # Only the paper's length (10 vectors) has the paper's figures beside it.
    assert text.splitlines()[3].startswith("| t6_len12 | - | - | - | - | 50.0 ± 0.0 (1) | - |")
    row = text.splitlines()[2].split(" | ")
    assert row[0] == "| t6_len10" and row[1] == "-"
    assert row[3] == "81.0 ± 1.4 (2)"  # |81.0 - 80.2| <= 3: no mark
    assert row[4] == "80.2 ± 0.4"
    assert row[5] == "70.0 ± 0.0 (1) **-22.1**"


def test_table_refuses_a_seed_given_twice(tmp_path, capsys):
    from harness.commands.baselines_table import main as table_main

    path = tmp_path / "a.json"
    path.write_text(json.dumps({"runs": [_run("t1_len10", "t-pos-att", 0, 0.9)]}))
    assert table_main([str(path), str(path)]) == 2
    assert "t1_len10 t-pos-att seed 0 appears twice" in capsys.readouterr().err


def test_accuracy_by_query_on_known_answers():
    query = torch.zeros(5, 36)
    query[torch.arange(5), torch.tensor([2, 2, 7, 7, 7])] = 1.0
    correct = torch.tensor([True, False, True, True, False])
    assert accuracy_by_query(query, correct) == {2: 0.5, 7: pytest.approx(2 / 3)}
    query[0, 9] = 1.0  # a two-feature query (T2): no ids to group by
    assert accuracy_by_query(query, correct) is None


def test_command_no_shuffle_is_a_setting(tmp_path):
    out = tmp_path / "t1.json"
    argv = [
        "baselines", "--task", "T1", "--length", "5", "--models", "t-pos-att", "--seeds", "1",
        "--num-train", "20", "--num-validation", "10", "--num-test", "10", "--epochs", "1",
        "--output", str(out), "--no-progress", "--no-shuffle",
    ]  # fmt: skip
    assert main(argv) == 0
    assert json.loads(out.read_text())["settings"]["shuffle"] is False
