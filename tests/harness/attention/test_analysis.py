"""harness.attention.analysis: the per-token scores equal an independent computation from
eager `output_attentions`, correctness comes from the same pass, free-running tokens are the
ones the model wrote, and the summary's statistics are scipy's."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from harness.attention import analysis
from harness.attention.analysis import AnalysisConfig, analyse_batch, analyse_model
from harness.engine.inference import collate_left, generate_batch, teacher_forced_batch
from harness.foundation.data import PromptConfig
from harness.foundation.tokenization import CharTokenizer
from tests.harness.attention_models import authors_shares_by_hand, build_tiny


@pytest.fixture(scope="module")
def llama(attn_tokenizer):
    return build_tiny("llama", attn_tokenizer, seed=3)


def instances(config, n):
    return analysis.load_instances(config, n, seed=1234, split="test")


def independent_shares(model, batch):
    """The paper's score from eager output_attentions, computed here without capture:
    head mean + identity, rows renormalised, product over layers; share on the reference
    over the task-text columns (prompt and target characters)."""
    model.set_attn_implementation("eager")
    with torch.no_grad():
        out = model(**batch.model_inputs(), output_attentions=True)
    T = batch.total_len
    rolled = torch.eye(T).expand(len(batch), T, T)
    for layer in out.attentions:
        a = layer.float().mean(1) + torch.eye(T)
        a = a / a.sum(-1, keepdim=True)
        rolled = a @ rolled
    shares = {}
    for b, enc in enumerate(batch.encodings):
        shift = batch.shifts[b]
        text = [shift + enc.prompt_offset + j for j in range(enc.prompt_len)]
        text += [batch.prompt_width + i for i in range(enc.target_len)]
        for i, row in enumerate(enc.reference):
            if row:
                q = batch.prompt_width - 1 + i
                keys = [shift + k for k in row]
                shares[(b, i)] = float(rolled[b, q, keys].sum() / rolled[b, q, text].sum())
    return shares


def test_teacher_forced_scores_match_eager_attentions(llama, attn_tokenizer):
    char_tok = CharTokenizer(attn_tokenizer)
    prompt = PromptConfig(instruction="Reverse.")  # instruction columns leave the denominator
    chunk = instances("reversal_ood", 4)
    config = AnalysisConfig(configs=["reversal_ood"], modes=("teacher_forced",))
    records, figures = analyse_batch(llama, char_tok, chunk, prompt, config, want=("wrong",))
    encodings = [prompt.encode(char_tok, x) for x in chunk]
    expected = independent_shares(llama, collate_left(encodings, char_tok.pad_id))
    forced = teacher_forced_batch(llama, char_tok, encodings)
    assert len(records) == sum(len(x.target) for x in chunk)
    by_key = {
        (chunk.index(next(x for x in chunk if x.index == r["index"])), r["position"]): r
        for r in records
    }
    for (b, i), share in expected.items():
        assert by_key[(b, i)]["share"] == pytest.approx(share, abs=1e-5)
        assert by_key[(b, i)]["correct"] == forced.correct[b][i]
        heads = by_key[(b, i)]["heads"]
        assert heads.shape == (2, 4) and np.all((heads >= 0) & (heads <= 1 + 1e-6))
    # One Figure 1 case: rows = target tokens, columns = task text, reference outlined.
    ((kind, case),) = figures
    assert kind == "wrong"
    x = next(x for x in chunk if x.index == case["index"])
    assert np.array(case["matrix"]).shape == (len(x.target), len(x.prompt + x.target))
    assert np.array(case["mask"]).sum() == sum(len(r) for r in x.reference)
    assert case["keys"] == list(x.prompt + x.target)


def test_free_running_scores_the_tokens_the_model_wrote(llama, attn_tokenizer):
    char_tok = CharTokenizer(attn_tokenizer)
    prompt = PromptConfig()
    chunk = instances("reversal_id", 5)
    config = AnalysisConfig(configs=["reversal_id"], modes=("generate",))
    records, _ = analyse_batch(llama, char_tok, chunk, prompt, config)
    encodings = [prompt.encode(char_tok, x) for x in chunk]
    max_new = max(e.target_len for e in encodings) + 1
    llama.set_attn_implementation("eager")
    generated = generate_batch(llama, char_tok, encodings, max_new)
    tokens = [r for r in records if r["mode"] == "generate"]
    for b, x in enumerate(chunk):
        mine = [r for r in tokens if r["index"] == x.index]
        ids = generated.ids[b]
        written = min(len(ids) + int(generated.finished[b]), len(x.target))
        assert [r["position"] for r in mine] == list(range(written))
        text = generated.texts[b]
        assert [r["correct"] for r in mine] == [
            i < len(text) and text[i] == x.target[i] for i in range(written)
        ]
    # Scores over prompt + generated tokens equal the independent computation on that batch.
    expected = independent_shares(llama, generated.batch)
    for r in tokens:
        b = [x.index for x in chunk].index(r["index"])
        if (b, r["position"]) in expected:
            assert r["share"] == pytest.approx(expected[(b, r["position"])], abs=1e-5)


@pytest.mark.parametrize("mode", ["teacher_forced", "generate"])
def test_the_authors_convention_scores_their_rows(llama, attn_tokenizer, mode):
    """`score_convention="authors"`: every answer row and the EOS row get the authors'
    score computed by hand on the same batch (0 where a row has no reference), and the EOS
    row is one more token whose correctness is whether the model predicts EOS there."""
    char_tok = CharTokenizer(attn_tokenizer)
    prompt = PromptConfig(instruction="Reverse.")
    chunk = instances("reversal_ood", 4)
    config = AnalysisConfig(configs=["reversal_ood"], modes=(mode,), score_convention="authors")
    records, _ = analyse_batch(llama, char_tok, chunk, prompt, config)
    encodings = [prompt.encode(char_tok, x) for x in chunk]
    tasks = [x.task for x in chunk]
    assert tasks[0] == "string_reversal"  # the task whose denominator drops prompt[0]
    if mode == "teacher_forced":
        batch = collate_left(encodings, char_tok.pad_id)
        forced = teacher_forced_batch(llama, char_tok, encodings)
        eos = forced.eos_correct
        counts = [len(x.target) + 1 for x in chunk]  # every row, the EOS row among them
    else:
        max_new = max(e.target_len for e in encodings) + 1
        generated = generate_batch(llama, char_tok, encodings, max_new)
        batch = generated.batch
        eos = [
            len(ids) == len(x.target) and done
            for ids, x, done in zip(generated.ids, chunk, generated.finished)
        ]
        counts = [
            len(x.target) + 1
            if len(ids) >= len(x.target)
            else min(len(ids) + int(done), len(x.target))
            for ids, x, done in zip(generated.ids, chunk, generated.finished)
        ]
    assert any(c > len(x.target) for c, x in zip(counts, chunk))  # an EOS row is scored
    expected = authors_shares_by_hand(llama, batch, tasks)
    for b, x in enumerate(chunk):
        mine = [r for r in records if r["index"] == x.index and r["mode"] == mode]
        assert [r["position"] for r in mine] == list(range(counts[b]))
        for r in mine:
            row = batch.prompt_width - 1 + r["position"]
            assert r["share"] == pytest.approx(float(expected[b, row]), abs=1e-5)
        if counts[b] > len(x.target):
            last = mine[-1]
            assert last["eos"] and last["share"] == 0.0 and last["heads"] is None
            assert last["correct"] == eos[b]
    # The paper's convention on the same instances: no EOS row, and rows with a reference
    # score higher (the authors' denominator leaves prompt[0] out) or the same (the last
    # character's reference is prompt[0] itself, which they add back).
    paper, _ = analyse_batch(
        llama, char_tok, chunk, prompt, AnalysisConfig(configs=["reversal_ood"], modes=(mode,))
    )
    records, paper = ([r for r in rs if r["mode"] == mode] for rs in (records, paper))
    assert not any(r.get("eos") for r in paper)
    assert len(records) - len(paper) == sum(c > len(x.target) for c, x in zip(counts, chunk))
    pairs = [
        (p["share"], a["share"])
        for p, a in zip(paper, records)
        if a["heads"] is not None and (p["index"], p["position"]) == (a["index"], a["position"])
    ]
    assert pairs and all(a >= p - 1e-7 for p, a in pairs) and any(a > p * 1.001 for p, a in pairs)


def test_given_answers_score_as_the_free_running_pass(llama, attn_tokenizer):
    """`written_records` for answers written elsewhere (lm-eval's): one forward over prompt +
    answer, in another batch order, gives the records the generation pass recorded."""
    from harness.engine.scoring import Scorer

    char_tok = CharTokenizer(attn_tokenizer)
    prompt = PromptConfig(instruction="Reverse.")
    chunk = instances("reversal_ood", 5)
    config = AnalysisConfig(configs=["reversal_ood"], modes=("generate",))
    records, _ = analyse_batch(llama, char_tok, chunk, prompt, config)
    expected = [r for r in records if r["mode"] == "generate"]
    encodings = [prompt.encode(char_tok, x) for x in chunk]
    llama.set_attn_implementation("eager")
    generated = generate_batch(llama, char_tok, encodings, max(len(x.target) for x in chunk) + 1)
    order = [4, 2, 0, 3, 1]  # other batch mates, other padding
    scorer = Scorer(llama, char_tok, prompt)
    given = analysis.written_records(
        scorer,
        [chunk[b] for b in order],
        [encodings[b] for b in order],
        [generated.ids[b] for b in order],
        [generated.finished[b] for b in order],
    )
    key = lambda r: (r["index"], r["position"])  # noqa: E731
    given, expected = sorted(given, key=key), sorted(expected, key=key)
    assert [key(r) for r in given] == [key(r) for r in expected] and len(given) > 20
    assert any(math.isfinite(r["share"]) for r in given)
    for mine, theirs in zip(given, expected):
        assert mine["correct"] == theirs["correct"] and mine["length"] == theirs["length"]
        if math.isnan(theirs["share"]):
            assert math.isnan(mine["share"]) and mine["heads"] is None
        else:
            assert mine["share"] == pytest.approx(theirs["share"], abs=1e-5)
            np.testing.assert_allclose(mine["heads"], theirs["heads"], atol=1e-5)


def test_summary_statistics_are_welch_and_per_length():
    from scipy import stats

    rng = np.random.default_rng(0)
    records = []
    for j in range(60):
        correct = j % 3 != 0
        records.append(
            {
                "index": j // 6,
                "length": 10 + j // 30,
                "mode": "teacher_forced",
                "position": j % 6,
                "correct": correct,
                "share": float(rng.normal(0.2 if correct else 0.1, 0.05)),
                "heads": np.full((2, 3), 0.5, dtype=np.float32),
            }
        )
    records.append({**records[0], "share": math.nan, "heads": None})  # empty reference
    summary = analysis.summarise(records, 2, 3)
    good = [r["share"] for r in records if r["correct"] and math.isfinite(r["share"])]
    bad = [r["share"] for r in records if not r["correct"] and math.isfinite(r["share"])]
    test = stats.ttest_ind(good, bad, equal_var=False)
    assert summary["rollout"]["welch_t"] == pytest.approx(test.statistic)
    assert summary["rollout"]["welch_p"] == pytest.approx(test.pvalue)
    assert summary["rollout"]["correct"]["n"] == len(good)
    assert summary["rollout"]["error"]["mean"] == pytest.approx(np.mean(bad))
    assert summary["rollout"]["empty"] == 1  # counted apart, not as a zero
    assert summary["heads"] == [[0.5] * 3] * 2
    assert sorted(summary["by_length"]) == ["10", "11"]
    assert summary["tokens"] == 61
    # Groups too small for a test give None (JSON null), never nan.
    tiny = analysis.summarise(records[1:2], 2, 3)  # one correct token
    assert tiny["rollout"]["welch_p"] is None and tiny["rollout"]["error"]["n"] == 0
    # Beside the pooled test, the same comparison counting instances (harness.foundation.stats).
    instances = summary["instance_aware"]
    assert instances["paper_test"]["welch_p"] == pytest.approx(test.pvalue)
    assert instances["n_instances"] == 10 and instances["no_reference"] == 1
    assert instances["direction"] == "correct > wrong"
    assert "instance_aware" not in summary["by_length"]["10"]  # the whole block holds length
    assert tiny["instance_aware"]["cluster_bootstrap"]["difference"] is None


def test_analyse_model_and_reports(llama, attn_tokenizer, tmp_path):
    import json

    config = AnalysisConfig(configs=["reversal_id", "reversal_ood"], num=6, batch_size=4)
    results, plots_data = analyse_model(llama, attn_tokenizer, config)
    for name in config.configs:
        r = results[name]
        for block in (r, r["generate"]):
            assert set(block["rollout"]) >= {"correct", "error", "welch_t", "welch_p"}
            assert len(block["heads"]) == 2 and len(block["heads"][0]) == 4
        assert 0.0 <= r["generate"]["exact_match"] <= 1.0
    meta = {
        "model": "tiny",
        "model_name": "tiny",
        "command": "attentionspan attention ...",
        "instances": 6,
        "split": "test",
        "seed": 1234,
        "prompt": "no instruction",
    }
    from harness.report.attention_report import write_outputs

    written = write_outputs(tmp_path, meta, results, plots_data)
    names = {p.name for p in written}
    assert {"attention.json", "attention.md", "heads.png", "scores.png"} <= names
    assert "position-reversal_ood.png" in names
    assert any(n.startswith("rollout-reversal_ood-") for n in names)
    document = json.loads((tmp_path / "attention.json").read_text())
    assert document["configs"]["reversal_ood"]["rollout"]["error"]["n"] > 0
    assert "| tiny | reversal_ood | teacher-forced |" in (tmp_path / "attention.md").read_text()


def test_bad_input_is_named(llama, attn_tokenizer, monkeypatch):
    with pytest.raises(ValueError, match="unknown|allowed|config"):
        analysis.load_instances("reversal_idd", 2, 1234, "test")
    with pytest.raises(ValueError, match="modes must be among"):
        AnalysisConfig(configs=["reversal_id"], modes=("sampled",))
    with pytest.raises(ValueError, match="score convention must be one of paper, authors"):
        AnalysisConfig(configs=["reversal_id"], score_convention="author")

    plain = instances("reversal_id", 3)

    def no_masks(config, num, seed, split, start=0, stop=None):
        return [x.__class__(**{**x.__dict__, "reference": [[] for _ in x.target]}) for x in plain]

    monkeypatch.setattr(analysis, "load_instances", no_masks)
    with pytest.raises(ValueError, match="'reversal_id' has no reference masks"):
        analyse_model(llama, attn_tokenizer, AnalysisConfig(configs=["reversal_id"], num=2))
    monkeypatch.undo()
    from transformers import BertConfig, BertModel

    encoder = BertModel(
        BertConfig(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            vocab_size=len(attn_tokenizer),
        )
    )
    with pytest.raises(ValueError, match="causal"):
        analyse_model(encoder, attn_tokenizer, AnalysisConfig(configs=["reversal_id"], num=2))
