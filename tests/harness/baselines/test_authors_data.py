"""harness.baselines.authors_data: the authors' TSV format read into the baselines' tensors,
relabelled onto our mapping, and `attentionspan baselines --authors-test`. Every file here
is made up by the test in the format of their dataset/README.md."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
import torch

from attentionspan_datasets.tasks import _feature_vectors as fv
from harness.baselines.authors_data import (
    find_vocab,
    folder_files,
    load_authors,
    parse_tsv,
    parse_vocab,
    read_text,
)
from harness.cli import main


def vector(*features: int) -> str:
    return "".join("1" if k in features else "0" for k in range(36))


def datapoint(vectors: list[tuple[int, ...]], query: str, answer: str) -> str:
    sequence = "\t".join(vector(*v) for v in vectors)
    return f"sequence\t{sequence}\nquery\thave you seen {query}\nanswer\t{answer}\n"


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_t1_file_is_the_native_form(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text(
        datapoint([(0, 7), (4,), (), (9, 35), (1,)], "4", "yes")
        + datapoint([(0,), (2,), (3,), (5,), (6, 7)], "4", "no")
    )
    batch, info = load_authors(path, "t1_len5")
    assert batch.vectors.shape == (2, 5, 36) and batch.query.shape == (2, 36)
    assert batch.vectors[0, 0].nonzero().flatten().tolist() == [0, 7]
    assert batch.vectors[0, 3].nonzero().flatten().tolist() == [9, 35]
    assert batch.vectors[0, 2].sum() == 0
    assert batch.query[0].nonzero().flatten().tolist() == [4]
    assert batch.labels.tolist() == [1.0, 0.0]
    assert batch.reference.tolist() == [[False, True, False, False, False], [False] * 5]
    assert info == {
        "path": str(path),
        "vocab": None,
        "datapoints": 2,
        "instances": 2,
        "left_out": 0,
        "label_mismatches": 0,
        "shared_queries": [],
    }


def test_t2_query_has_both_features_and_the_pair_carriers(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text(datapoint([(14,), (), (3,), (9,), ()], "14 and 9", "yes"))
    batch, info = load_authors(path, "t2_len5")
    assert batch.query[0].nonzero().flatten().tolist() == [9, 14]
    assert batch.carriers[0].tolist() == [0, 3]
    assert info["label_mismatches"] == 0


def test_t6_is_relabelled_onto_our_mapping_slot_by_slot(tmp_path):
    (tmp_path / "q_vocab.txt").write_text("0\t3 20\n1\t4 21\n")
    ours_first, ours_second = fv.mapping("ordered_feature_detection", 0, 1)[0][0]
    path = tmp_path / "test.tsv"
    path.write_text(
        datapoint([(7, 8), (3,), (), (20, 30), ()], "0", "yes")  # 3 before 20
        + datapoint([(20,), (), (3, 7), (), ()], "0", "no")  # wrong order
        + datapoint([(20,), (), (3,), (), ()], "0", "yes")  # a label our rule contradicts
    )
    batch, info = load_authors(path, "t6_len5")
    assert info["vocab"] == str(tmp_path / "q_vocab.txt")
    assert info["instances"] == 3 and info["label_mismatches"] == 1
    assert batch.query[0].nonzero().flatten().tolist() == [0]  # their id 0 -> our query 0
    assert batch.vectors[0, 1, ours_first] == 1 and batch.vectors[0, 3, ours_second] == 1
    assert batch.vectors[0].sum(dim=1).tolist() == [2, 1, 0, 2, 0]  # a permutation
    assert batch.vectors[1, 0, ours_second] == 1 and batch.vectors[1, 2, ours_first] == 1
    assert batch.reference[0].tolist() == [False, True, False, True, False]
    assert batch.carriers[:2].tolist() == [[1, 3], [0, 2]]
    assert batch.labels.tolist() == [1.0, 0.0, 1.0]  # their labels are kept


def test_t7_queries_whose_pairs_share_a_feature_are_left_out(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("0\t3 20\t5 20\n1\t3 21\t22 5\n")
    path = tmp_path / "test.tsv"
    path.write_text(
        datapoint([(3,), (20,), (), (), ()], "0", "yes")
        + datapoint([(22,), (5,), (3,), (), ()], "1", "yes")
        + datapoint([(21,), (3,), (), (5,), ()], "1", "no")
    )
    batch, info = load_authors(path, "t7_len5", vocab=vocab)
    assert (info["datapoints"], info["instances"], info["left_out"]) == (3, 2, 1)
    assert info["label_mismatches"] == 0
    (a, b), (c, d) = fv.mapping("contextual_ordered_set_member_detection", 0, 2)[1]
    assert batch.vectors[0, 0, c] == 1 and batch.vectors[0, 1, d] == 1
    assert batch.carriers.tolist() == [[0, 1], [0, 1]]  # the pair that holds; the one present


def test_without_relabelling_their_features_and_every_datapoint_are_kept(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("0\t3 20\t5 20\n1\t3 21\t22 5\n")  # query 0's pairs share 20
    path = tmp_path / "test.tsv"
    path.write_text(
        datapoint([(3,), (20,), (), (), ()], "0", "yes")
        + datapoint([(22,), (5,), (3,), (), ()], "1", "yes")
        + datapoint([(21,), (3,), (), (5,), ()], "1", "no")
    )
    batch, info = load_authors(path, "t7_len5", vocab=vocab, relabel=False)
    assert (info["instances"], info["left_out"], info["label_mismatches"]) == (3, 0, 0)
    assert info["shared_queries"] == [0]
    assert batch.vectors[0, 0, 3] == 1 and batch.vectors[0, 1, 20] == 1  # their features
    assert batch.labels.tolist() == [1.0, 1.0, 0.0]
    assert batch.query.argmax(dim=1).tolist() == [0, 1, 1]
    # yes: the pair that holds; no: every queried feature that occurs (21, 3 and 5)
    assert batch.reference.tolist() == [
        [True, True, False, False, False],
        [True, True, False, False, False],
        [True, True, False, True, False],
    ]
    assert batch.carriers.tolist() == [[0, 1], [0, 1], [0, 1]]


def test_vocab_is_found_in_their_layout(tmp_path):
    folder = tmp_path / "Task_3" / "10len"
    folder.mkdir(parents=True)
    assert find_vocab(folder / "test.tsv") is None
    (tmp_path / "Task_3" / "q_vocab.txt").write_text("0\t1 30\n")
    assert find_vocab(folder / "test.tsv") == tmp_path / "Task_3" / "q_vocab.txt"
    assert parse_vocab("0\t1 30\n1\t2 31\t4 19\n") == {0: [(1, 30)], 1: [(2, 31), (4, 19)]}


@pytest.mark.parametrize(
    "text, message",
    [
        (datapoint([(1,)], "1", "yes")[:-11], "3 lines per datapoint"),
        (datapoint([(1,)], "1", "maybe"), ":3: answer must be yes or no"),
        (datapoint([(1,)], "1", "yes").replace("query", "ask"), ":2: expected 'query"),
        (datapoint([(1,)], "1", "yes").replace("\t0", "\t", 1), ":1: a vector is 36"),
        (datapoint([(1,)], "one", "yes"), ":2: expected 'have you seen N'"),
    ],
)
def test_lines_out_of_format_are_named(text, message):
    with pytest.raises(ValueError, match=message):
        parse_tsv(text, "f.tsv")


def test_wrong_length_task_or_missing_vocab_is_a_value_error(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text(datapoint([(1,), (2,)], "1", "yes"))
    with pytest.raises(ValueError, match="vectors per datapoint"):
        load_authors(path, "t1_len5")
    path.write_text(datapoint([(1,)] * 5, "1", "yes"))
    with pytest.raises(ValueError, match="needs q_vocab.txt"):
        load_authors(path, "t3_len5")
    with pytest.raises(ValueError, match="T1-T7"):
        load_authors(path, "flip_flop")


def test_command_scores_the_authors_file_beside_ours(tmp_path, capsys):
    authors = tmp_path / "test.tsv"
    authors.write_text(
        "".join(
            datapoint([(k,), (k + 1,), (), (), (30,)], str(k), "yes")
            + datapoint([(k + 1,), (), (), (), (30,)], str(k), "no")
            for k in range(3)
        )
    )
    out = tmp_path / "t1.json"
    argv = [
        "baselines", "--task", "T1", "--length", "5", "--models", "t-pos-att", "--seeds", "1",
        "--num-train", "40", "--num-validation", "20", "--num-test", "20", "--epochs", "1",
        "--output", str(out), "--no-progress", "--authors-test", str(authors),
    ]  # fmt: skip
    assert main(argv) == 0
    document = json.loads(out.read_text())
    assert document["settings"]["authors_test"] == str(authors)
    assert document["authors_test"]["instances"] == 6
    (run,) = document["runs"]
    assert run["authors_test_accuracy"] in {k / 6 for k in range(7)}
    assert run["authors_test_attention"]["instances_with_reference"] == 3
    summary = document["summary"]["t-pos-att"]
    assert summary["authors_test_accuracy_mean"] == run["authors_test_accuracy"]
    assert "on the authors' test file" in capsys.readouterr().out


def test_command_bad_authors_paths_are_one_line(tmp_path, capsys):
    base = ["baselines", "--task", "T3", "--output", str(tmp_path / "x.json")]
    assert main([*base, "--authors-test", str(tmp_path / "none.tsv")]) == 2
    err = capsys.readouterr().err
    assert "invalid --authors-test" in err and len(err.strip().splitlines()) == 1
    path = tmp_path / "test.tsv"
    path.write_text(datapoint([(1,)] * 10, "1", "yes"))
    assert main([*base, "--authors-test", str(path)]) == 2
    assert "needs q_vocab.txt" in capsys.readouterr().err
    bad_vocab = tmp_path / "vocab.txt"
    bad_vocab.write_text("zero\n")
    assert main([*base, "--authors-test", str(path), "--authors-vocab", str(bad_vocab)]) == 2
    assert "invalid --authors-vocab" in capsys.readouterr().err
    assert main([*base, "--authors-vocab", str(bad_vocab)]) == 2
    assert "--authors-vocab needs --authors-test" in capsys.readouterr().err


def write_archive(path, members: dict[str, str]) -> None:
    """A .tar.gz holding `members` (name -> text), as they ship training.tar.gz."""
    with tarfile.open(path, "w:gz") as archive:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def t1_points(count: int) -> str:
    """`count` T1 datapoints of 5 vectors, alternately yes (feature k in vector 1) and no."""
    return "".join(
        datapoint([(k,), (k + 1,), (), (), (30,)], str(k), "yes")
        if k % 2 == 0
        else datapoint([(k + 1,), (), (), (), (30,)], str(k), "no")
        for k in range(count)
    )


def test_training_archive_is_read_like_the_file(tmp_path):
    text = t1_points(4)
    write_archive(tmp_path / "training.tar.gz", {"training.tsv": text})
    assert read_text(tmp_path / "training.tar.gz") == text
    batch, info = load_authors(tmp_path / "training.tar.gz", "t1_len5")
    assert info["instances"] == 4 and batch.labels.tolist() == [1.0, 0.0, 1.0, 0.0]
    write_archive(tmp_path / "two.tar.gz", {"a.tsv": text, "b.tsv": text})
    with pytest.raises(ValueError, match="expected one .tsv file"):
        read_text(tmp_path / "two.tar.gz")


def test_folder_files_prefers_the_unpacked_training_file_and_names_a_missing_one(tmp_path):
    (tmp_path / "valid.tsv").write_text(t1_points(2))
    write_archive(tmp_path / "training.tar.gz", {"training.tsv": t1_points(2)})
    with pytest.raises(ValueError, match="no test.tsv"):
        folder_files(tmp_path)
    (tmp_path / "test.tsv").write_text(t1_points(2))
    assert folder_files(tmp_path)["train"].name == "training.tar.gz"
    (tmp_path / "training.tsv").write_text(t1_points(2))
    files = folder_files(tmp_path)
    assert {k: v.name for k, v in files.items()} == {
        "train": "training.tsv",
        "validation": "valid.tsv",
        "test": "test.tsv",
    }
    with pytest.raises(ValueError, match="no such folder"):
        folder_files(tmp_path / "none")


def test_command_trains_and_tests_on_the_authors_folder(tmp_path, capsys):
    folder = tmp_path / "Task_1" / "5len"
    folder.mkdir(parents=True)
    write_archive(folder / "training.tar.gz", {"training.tsv": t1_points(30)})
    (folder / "valid.tsv").write_text(t1_points(10))
    (folder / "test.tsv").write_text(t1_points(8))
    out = tmp_path / "t1.json"
    argv = [
        "baselines", "--task", "T1", "--length", "5", "--models", "t-pos-att", "--seeds", "1",
        "--epochs", "1", "--output", str(out), "--no-progress", "--authors-data", str(folder),
    ]  # fmt: skip
    assert main(argv) == 0
    document = json.loads(out.read_text())
    settings = document["settings"]
    assert settings["authors_data"] == str(folder)
    assert "num_train" not in settings and "data_seed" not in settings  # theirs, not ours
    counts = {split: info["instances"] for split, info in document["authors_data"].items()}
    assert counts == {"train": 30, "validation": 10, "test": 8}
    (run,) = document["runs"]
    assert run["test_accuracy"] in {k / 8 for k in range(9)}
    assert run["attention"]["instances_with_reference"] == 4  # the yes datapoints
    assert "authors_test_accuracy" not in run  # the test split is theirs already
    assert set(run["test_accuracy_by_query"]) == {str(k) for k in range(8)}  # one per row
    # a rerun with the same settings resumes: nothing left to train
    assert main(argv) == 0
    assert json.loads(out.read_text())["runs"] == document["runs"]


def test_command_bad_authors_data_is_one_line(tmp_path, capsys):
    base = ["baselines", "--task", "T1", "--length", "5", "--output", str(tmp_path / "x.json")]
    assert main([*base, "--authors-data", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "invalid --authors-data" in err and "no such folder" in err
    assert len(err.strip().splitlines()) == 1
    assert main([*base, "--authors-data", str(tmp_path)]) == 2
    assert "no training.tsv or training.tar.gz" in capsys.readouterr().err
    both = [*base, "--authors-data", str(tmp_path), "--authors-test", str(tmp_path / "t.tsv")]
    assert main(both) == 2
    assert "exclude each other" in capsys.readouterr().err
