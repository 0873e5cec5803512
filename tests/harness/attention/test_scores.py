"""Scores on captured attention: rollout by hand, the rollout score, head shares, Welch."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy import stats

from attentionspan_datasets.tasks.base import Instance
from harness.attention import scores
from harness.engine.positions import reference_mask
from harness.foundation.tokenization import Encoding


def test_rollout_by_hand():
    """Two layers, three tokens: (A + I) rows renormalised, multiplied from layer 0 up."""
    a0 = torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]])
    a1 = torch.tensor([[1.0, 0, 0], [1.0, 0.0, 0], [0.0, 1.0, 0.0]])
    r0 = (a0 + torch.eye(3)) / 2
    r1 = (a1 + torch.eye(3)) / 2
    expected = r1 @ r0
    got = scores.rollout([a0[None], a1[None]])
    torch.testing.assert_close(got[0], expected)
    # Row 2 by hand: r1[2] = [0, .5, .5], r0[1] = [.25, .75, 0], r0[2] = [.1, .15, .75].
    torch.testing.assert_close(got[0, 2], torch.tensor([0.175, 0.45, 0.375]))
    torch.testing.assert_close(got.sum(-1), torch.ones(1, 3))
    with pytest.raises(ValueError, match="at least one layer map"):
        scores.rollout([])


def test_rollout_scores_use_task_columns_and_leave_empty_rows_out():
    rolled = torch.tensor([[[1.0, 0, 0, 0], [0.2, 0.8, 0, 0], [0.1, 0.2, 0.3, 0.4], [0, 0, 0, 1]]])
    ref = torch.zeros(1, 4, 4, dtype=torch.bool)
    ref[0, 2, 2] = True
    ref[0, 1, 1] = True
    cols = torch.tensor([[False, True, True, True]])  # column 0: instruction, left out
    got = scores.rollout_scores(rolled, ref, cols)
    assert math.isclose(float(got[0, 2]), 0.3 / 0.9, rel_tol=1e-6)
    assert math.isclose(float(got[0, 1]), 1.0)
    assert got[0, 0].isnan() and got[0, 3].isnan()
    # A longer mask (generation sized for more steps) is cropped.
    longer = torch.zeros(1, 6, 6, dtype=torch.bool)
    longer[:, :4, :4] = ref
    torch.testing.assert_close(
        scores.rollout_scores(rolled, longer, torch.nn.functional.pad(cols, (0, 2))),
        got,
        equal_nan=True,
    )


def test_head_shares_average_rows_with_references():
    rows = torch.full((2, 3, 1, 2), float("nan"))
    rows[0, 1, 0] = torch.tensor([0.2, 0.4])
    rows[1, 2, 0] = torch.tensor([0.6, 0.0])
    torch.testing.assert_close(scores.head_shares(rows), torch.tensor([[0.4, 0.2]]))


def test_compare_matches_scipy_and_counts_empty_rows_apart():
    rng = np.random.default_rng(0)
    good = rng.normal(0.2, 0.05, 40)
    bad = rng.normal(0.1, 0.08, 70)
    values = np.concatenate([good, bad, [np.nan, np.nan]])
    correct = np.array([True] * 40 + [False] * 70 + [True, False])
    out = scores.compare(torch.tensor(values), torch.tensor(correct))
    expected = stats.ttest_ind(good, bad, equal_var=False)
    assert math.isclose(out["welch_t"], expected.statistic) and math.isclose(
        out["welch_p"], expected.pvalue
    )
    assert out["correct"]["n"] == 40 and out["error"]["n"] == 70 and out["empty"] == 2
    assert math.isclose(out["correct"]["mean"], good.mean())
    pooled = math.sqrt((39 * good.var(ddof=1) + 69 * bad.var(ddof=1)) / 108)
    d = (good.mean() - bad.mean()) / pooled
    assert math.isclose(out["cohens_d"], d)
    assert math.isclose(out["hedges_g"], d * (1 - 3 / (4 * 110 - 9)))


def test_compare_small_groups_and_by_group():
    out = scores.compare([0.5, 0.7], [1.0, float("nan")])  # unknown correctness: left out
    assert out["correct"]["n"] == 1 and out["error"]["n"] == 0 and math.isnan(out["welch_p"])
    values = [0.1, 0.2, 0.3, 0.4, 0.9, 0.8, 0.7]
    correct = [False, False, True, True, True, False, True]
    keys = [("a", 2), ("a", 2), ("a", 2), ("a", 2), ("b", 5), ("b", 5), ("b", 5)]
    by = scores.compare_by(values, correct, keys)
    assert list(by) == [("a", 2), ("b", 5)]
    assert by[("a", 2)]["correct"]["mean"] == pytest.approx(0.35)
    assert by[("b", 5)]["error"]["n"] == 1
    with pytest.raises(ValueError, match="keys has 2 entries"):
        scores.compare_by(values, correct, keys[:2])


def test_per_row_places_characters_on_their_rows():
    index = torch.tensor([[-1, 0, 1, 2, -1], [-1, -1, 0, 1, -1]])
    got = scores.per_row(index, [[True, False, True], [False]])
    assert got[0, 1:4].tolist() == [1.0, 0.0, 1.0]
    assert got[1, 2].item() == 0.0 and got[1, 3].isnan()


def test_table2_statistics_label_the_pooled_test_and_count_instances():
    # 20 instances of length 6 with no difference within instances (+-0.02 in turn), and one
    # instance of length 200 that gets every token wrong with a low share: the pooled test
    # over tokens sees a difference that only that instance makes.
    records = []
    for i in range(20):
        base, sign = 0.25 + 0.01 * (i % 5), 1 if i % 2 else -1
        right = {(i + k) % 6 for k in (0, 2, 3)}
        for p in range(6):
            ok = p in right
            share = base + sign * (0.01 if ok else -0.01)
            records.append({"index": i, "length": 6, "position": p, "share": share, "correct": ok})
    for p in range(200):
        share = 0.05 + 0.001 * (p % 7)
        records.append(
            {"index": 20, "length": 200, "position": p, "share": share, "correct": False}
        )
    records.append({"index": 21, "length": 6, "position": 0, "share": math.nan, "correct": True})
    records.append({"index": 21, "length": 6, "position": 1, "share": 0.3, "correct": None})
    out = scores.table2_statistics(records, n_resamples=500)
    paper = out["paper_test"]
    assert paper["label"].startswith("paper's test")
    assert paper["welch_p"] < 1e-20 and paper["empty"] == 1
    assert paper["n_tokens"] == 320 and paper["n_instances"] == 21
    assert paper["correct"]["n"] == 60 and paper["error"]["n"] == 260
    assert out["direction"] == "no difference at 5%"
    assert out["paired"]["wilcoxon_p"] == pytest.approx(1.0) and out["matched"]["p"] > 0.05
    assert out["no_reference"] == 1 and out["unknown"] == 1
    assert json.loads(json.dumps(out, allow_nan=False)) == out


def hand_batch():
    """Two rows of width 11, layouts written out by hand.

    Row 0 (no padding): 0 BOS, 1-2 instruction, 3-6 prompt "abc=", 7-9 target "cba", 10 EOS;
    target[i] refers to prompt[2 - i] (columns 5, 4, 3); its rows are 6, 7, 8, the EOS row 9.
    Row 1 (two pads, a chat layout): 2 header, 3-4 prompt "x=", 5-6 the assistant turn's
    header, 7 target "x", 8 EOS; target[0] refers to prompt[0] (column 3); its row is 6,
    the EOS row 7.
    """
    plain = Encoding(
        input_ids=list(range(11)),
        labels=[-100] * 7 + [7, 8, 9, 10],
        prompt_offset=3,
        target_offset=7,
        prompt_len=4,
        target_len=3,
        reference=[[5], [4], [3]],
    )
    chat = Encoding(
        input_ids=list(range(7)),
        labels=[-100] * 5 + [5, 6],
        prompt_offset=1,
        target_offset=5,
        prompt_len=2,
        target_len=1,
        reference=[[1]],
    )
    batch = SimpleNamespace(
        encodings=[plain, chat], shifts=[0, 2], input_ids=torch.zeros(2, 11, dtype=torch.long)
    )
    # A rollout that spreads each row evenly over its causal columns: a row's share on a set
    # of columns is just how many of them it can see.
    rolled = torch.tril(torch.ones(11, 11)) / torch.arange(1, 12)[:, None]
    return batch, rolled.expand(2, 11, 11).clone()


def test_both_score_conventions_by_hand():
    batch, rolled = hand_batch()
    ref = reference_mask(batch)
    nan = float("nan")
    # The paper: task text only. Row 0, query 6 sees prompt columns 3-6: 1/4; query 7 sees
    # 3-7: 1/5; query 8 sees 3-8: 1/6. Row 1, query 6 sees the prompt, 3-4: 1/2.
    paper = scores.rollout_scores(rolled, ref, scores.score_columns(batch))
    expected = torch.full((2, 11), nan)
    expected[0, 6:9] = torch.tensor([1 / 4, 1 / 5, 1 / 6])
    expected[1, 6] = 1 / 2
    torch.testing.assert_close(paper, expected, equal_nan=True)
    # The authors, string reversal: columns from prompt[1] on, plus the reference. Row 0,
    # query 6 sees 4-6: 1/3; query 7 sees 4-7: 1/4; query 8's reference is prompt[0]
    # (column 3), counted again: 3-8, 1/6; the EOS row (9) scores 0. Row 1, query 6: its
    # reference (3) plus 4 and the template's header 5-6: 1/4; its EOS row (7) scores 0.
    tasks = ["string_reversal", "string_reversal"]
    columns = scores.score_columns(batch, "authors", tasks=tasks)
    assert columns[0].tolist() == [False] * 4 + [True] * 7
    assert columns[1].tolist() == [False] * 4 + [True] * 7
    rows = scores.score_rows(batch)
    assert rows.nonzero().tolist() == [[0, 6], [0, 7], [0, 8], [0, 9], [1, 6], [1, 7]]
    authors = scores.rollout_scores(rolled, ref, columns, "authors", rows)
    expected = torch.full((2, 11), nan)
    expected[0, 6:10] = torch.tensor([1 / 3, 1 / 4, 1 / 6, 0.0])
    expected[1, 6:8] = torch.tensor([1 / 4, 0.0])
    torch.testing.assert_close(authors, expected, equal_nan=True)
    # Other tasks keep prompt[0] (their cut is `instruction_length`): row 0 as the paper,
    # 1/4, 1/5, 1/6, its EOS row 0; row 1 counts the header: 3-6, 1/4.
    columns = scores.score_columns(batch, "authors", tasks=["value_assignment"] * 2)
    other = scores.rollout_scores(rolled, ref, columns, "authors", rows)
    expected[0, 6:10] = torch.tensor([1 / 4, 1 / 5, 1 / 6, 0.0])
    torch.testing.assert_close(other, expected, equal_nan=True)
    # A target row without a reference: nan for the paper (counted apart), 0 for the authors.
    ref[0, 7] = False
    assert scores.rollout_scores(rolled, ref, scores.score_columns(batch))[0, 7].isnan()
    assert scores.rollout_scores(rolled, ref, columns, "authors", rows)[0, 7] == 0.0


def test_score_convention_is_checked():
    batch, rolled = hand_batch()
    ref = reference_mask(batch)
    cols = scores.score_columns(batch)
    with pytest.raises(ValueError, match="one of paper, authors, got 'author'"):
        scores.score_columns(batch, "author")
    with pytest.raises(ValueError, match="one of paper, authors"):
        scores.rollout_scores(rolled, ref, cols, "Paper")
    with pytest.raises(ValueError, match="needs tasks="):
        scores.score_columns(batch, "authors")
    with pytest.raises(ValueError, match="needs rows="):
        scores.rollout_scores(rolled, ref, cols, "authors")


def authors_percentages(rolled, input_ids, first_row, reference, cut):
    """The authors' score written the way their code is organised (not copied): a label
    matrix over the input without its last token, -100 on rows before the first answer row
    and on columns before `cut`, 1 on the reference cells (written after the cut), 0
    elsewhere; each row not all -100 scores sum(R where 1) / sum(R where 0 or 1)."""
    size = len(input_ids) - 1
    labels = torch.zeros(size, size)
    labels[:first_row] = -100
    labels[:, :cut] = -100
    for row, keys in reference.items():
        labels[row, keys] = 1
    out = {}
    for row in range(size):
        if bool((labels[row] == -100).all()):
            continue
        r = rolled[row, :size]
        counted = r[(labels[row] == 0) | (labels[row] == 1)].sum()
        out[row] = float(r[labels[row] == 1].sum() / counted) if counted > 0 else 0.0
    return out


@pytest.mark.parametrize("task, extra", [("string_reversal", 1), ("successor", 0)])
def test_the_authors_convention_matches_their_label_matrix(attn_tokenizer, task, extra):
    """A real encoding (BOS, instruction, few-shot block) and a random rollout: the authors'
    convention gives, on every row, what their label-matrix construction gives."""
    from harness.engine.inference import collate_left
    from harness.foundation.tokenization import CharTokenizer, encode_instance

    char_tok = CharTokenizer(attn_tokenizer)
    text = "k3Pq7"
    instance = Instance(
        task=task,
        prompt=text + "=",
        target=text[::-1],
        reference=[[len(text) - 1 - i] for i in range(len(text))],
    )
    enc = encode_instance(char_tok, instance, instruction="Reverse.", fewshot=["ab=ba"])
    batch = collate_left([enc], char_tok.pad_id)
    n = batch.input_ids.shape[1]
    torch.manual_seed(0)
    rolled = torch.rand(n, n).tril()
    rolled = rolled / rolled.sum(-1, keepdim=True)
    # Their `instruction_length` counts BOS, the instruction and the few-shot block: the
    # prompt's first column. Their first answer row predicts target[0].
    ref = {enc.target_offset - 1 + i: row for i, row in enumerate(enc.reference)}
    theirs = authors_percentages(
        rolled, enc.input_ids, enc.target_offset - 1, ref, cut=enc.prompt_offset + extra
    )
    columns = scores.score_columns(batch, "authors", tasks=[task])
    ours = scores.rollout_scores(
        rolled[None], reference_mask(batch), columns, "authors", scores.score_rows(batch)
    )[0]
    assert sorted(theirs) == ours.isfinite().nonzero().flatten().tolist()
    assert len(theirs) == len(text) + 1  # the answer's rows and the EOS row
    for row, value in theirs.items():
        assert float(ours[row]) == pytest.approx(value, rel=1e-5)


def test_compare_groups_equal_to_float_precision_warn_nothing_and_test_nothing():
    """A spread of 1e-17 made scipy print "Precision loss ... unreliable" with no context;
    such groups get no t-test (nan), as groups without spread do."""
    import warnings

    import numpy as np

    from harness.attention.scores import compare

    good = np.array([0.1 + 1e-16 * i for i in range(5)])
    bad = np.array([0.2, 0.2, 0.2, 0.2, 0.2 + 2.7e-17])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = compare(np.concatenate([good, bad]), np.array([1] * 5 + [0] * 5))
    assert np.isnan(result["welch_t"]) and np.isnan(result["welch_p"])
    assert result["correct"]["n"] == 5 and result["error"]["n"] == 5
