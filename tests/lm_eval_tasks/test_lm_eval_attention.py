"""`attnspan-hf` with `attention=true`: the attention metrics equal `attentionspan
attention`'s (analysis.analyse_model) on the same model and instances; the aggregations on
inputs whose answer is known; nothing changes without it; bad input is refused in one
line."""

from __future__ import annotations

import math
import pickle
import string

import numpy as np
import pytest

lm_eval = pytest.importorskip("lm_eval")

from attentionspan_datasets.instructions import instruction_for  # noqa: E402
from attentionspan_datasets.metrics import bin_of, bucket_metric_name  # noqa: E402
from harness.attention.analysis import AnalysisConfig, analyse_model  # noqa: E402
from harness.engine.capture import AttentionCaptureError  # noqa: E402
from harness.engine.scoring import Scorer, answer_text  # noqa: E402
from harness.foundation.data import PromptConfig  # noqa: E402
from lm_eval_tasks import attention  # noqa: E402
from lm_eval_tasks.attention import Answer, best_head, token_mean  # noqa: E402
from lm_eval_tasks.dataset import default_bins, process_results  # noqa: E402
from lm_eval_tasks.models import AttnspanHFLM  # noqa: E402
from tests.lm_eval_tasks.conftest import make_char_tokenizer, save_tiny_llama  # noqa: E402

PRESET = "addition_id"
N = 24


@pytest.fixture(scope="module")
def digit_model_dir(tmp_path_factory):
    """A tiny random Llama that only ever writes digits: every other output row is the mean
    of the digit rows, so some digit's logit is always the largest. Its answers never stop
    early (no EOS, no line break), so lm-eval's generation and the harness's write the
    same tokens, and about one digit in ten is right: correct and wrong tokens both occur."""
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = make_char_tokenizer()
    folder = save_tiny_llama(tmp_path_factory.mktemp("digit_llama"), tokenizer)
    model = AutoModelForCausalLM.from_pretrained(folder)
    digits = [tokenizer.convert_tokens_to_ids(d) for d in string.digits]
    with torch.no_grad():
        weight = model.lm_head.weight
        others = [i for i in range(weight.shape[0]) if i not in digits]
        weight[others] = weight[digits].mean(0)
    model.save_pretrained(folder)
    return folder


def lm_eval_run(folder, attention_on: bool, batch_size: int = 4):
    from lm_eval.tasks import TaskManager

    from lm_eval_tasks import TASKS_DIR

    model = AttnspanHFLM(
        pretrained=folder,
        device="cpu",
        dtype="float32",
        batch_size=batch_size,
        attention=attention_on,
    )
    metadata = {"pretrained": folder, "attention": attention_on}
    return lm_eval.simple_evaluate(
        model=model,
        tasks=[f"attnspan_{PRESET}"],
        task_manager=TaskManager(include_path=TASKS_DIR, include_defaults=False, metadata=metadata),
        limit=N,
        bootstrap_iters=0,
        log_samples=True,
    )


def numbers(results) -> dict[str, float]:
    return {
        k.removesuffix(",none"): v
        for k, v in results["results"][f"attnspan_{PRESET}"].items()
        if k.endswith(",none") and "_stderr" not in k
    }


def pooled(blocks) -> tuple[float, int]:
    """(mean, n) of correct and error tokens together, from `compare` blocks."""
    total = count = 0
    for block in blocks:
        for group in ("correct", "error"):
            n = block[group]["n"]
            if n:
                total += block[group]["mean"] * n
                count += n
    return (total / count if count else math.nan), count


def test_lm_eval_attention_equals_attentionspan_attention(digit_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    results = lm_eval_run(digit_model_dir, attention_on=True)
    ours = numbers(results)
    samples = sorted(results["samples"][f"attnspan_{PRESET}"], key=lambda s: s["doc_id"])

    model = AutoModelForCausalLM.from_pretrained(digit_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(digit_model_dir)
    prompt = PromptConfig(instruction=instruction_for("long_addition"))  # lm-eval's default
    config = AnalysisConfig(configs=[PRESET], num=N, batch_size=5, modes=("generate",))
    analysis, _ = analyse_model(model, tokenizer, config, prompt)
    generate = analysis[PRESET]["generate"]

    # The same instances and the same greedy answers (cut as `attentionspan eval` cuts).
    scorer = Scorer(model, tokenizer, prompt, batch_size=N)
    from harness.attention.analysis import load_instances

    instances = load_instances(PRESET, N, 1234, "test")
    encodings = scorer.encode(instances)
    generated, _ = scorer.generate(encodings)
    harness_answers = [
        answer_text(scorer.char_tok, ids, enc) for ids, enc in zip(generated.ids, encodings)
    ]
    assert [s["doc"]["prompt"] for s in samples] == [x.prompt for x in instances]
    lm_eval_answers = [s["filtered_resps"][0][: len(s["doc"]["target"]) + 1] for s in samples]
    assert lm_eval_answers == harness_answers
    assert all(set(a) <= set(string.digits) for a in lm_eval_answers)

    rollout = generate["rollout"]
    assert rollout["correct"]["n"] > 0 and rollout["error"]["n"] > 0  # both kinds occur
    share, count = pooled([rollout])
    assert count == sum(len(s["ref_share"]) for s in samples)  # every scored token
    assert ours["ref_share"] == pytest.approx(share, abs=1e-6)
    assert ours["ref_share_correct"] == pytest.approx(rollout["correct"]["mean"], abs=1e-6)
    assert ours["ref_share_wrong"] == pytest.approx(rollout["error"]["mean"], abs=1e-6)
    best = max(v for layer in generate["heads"] for v in layer)
    assert ours["ref_share_best_head"] == pytest.approx(best, abs=1e-6)
    # Per length bin: the analysis's per-length blocks pooled over the bin's lengths.
    bins = default_bins(PRESET)
    for low, high in bins:
        name = bucket_metric_name("ref_share", low, high)
        blocks = [
            b["rollout"]
            for length, b in generate["by_length"].items()
            if bin_of(int(length), bins) == (low, high)
        ]
        expected, n = pooled(blocks)
        if n:
            assert ours[name] == pytest.approx(expected, abs=1e-6), name
        else:
            assert math.isnan(ours[name]), name
    assert sum(not math.isnan(ours[attention.bin_name(s["doc"]["length_bin"])]) for s in samples)
    # exact match and partial accuracy are unchanged by the measurement
    assert ours["exact_match"] == pytest.approx(generate["exact_match"])


def test_without_attention_nothing_changes(digit_model_dir):
    plain = lm_eval_run(digit_model_dir, attention_on=False)
    measured = lm_eval_run(digit_model_dir, attention_on=True)
    a, b = numbers(plain), numbers(measured)
    assert not any(k.startswith("ref_share") for k in a)  # the table has no attention rows
    assert {k: v for k, v in b.items() if not k.startswith("ref_share")} == a
    sample = plain["samples"][f"attnspan_{PRESET}"][0]
    assert type(sample["filtered_resps"][0]) is str


def test_aggregations_on_known_values():
    assert token_mean([[0.5, 1.0], [], [0.0]]) == pytest.approx(0.5)  # per token, not per doc
    assert math.isnan(token_mean([[], []]))
    heads = [
        {"sums": [[1.0, 0.0], [0.5, 0.5]], "tokens": 2},
        {"sums": [[0.0, 0.9], [0.0, 0.0]], "tokens": 1},
        {"sums": None, "tokens": 0},
    ]
    # per head: [[1/3, 0.3], [1/6, 1/6]] -> the best is layer 0 head 0
    assert best_head(heads) == pytest.approx(1 / 3)
    assert math.isnan(best_head([{"sums": None, "tokens": 0}]))


def test_a_nan_group_mean_is_explained_once(monkeypatch, caplog):
    """`ref_share_wrong` is NaN on an ID task the model gets right; the run says
    why (once, in lm-eval's log before its table) and the values are token_mean's."""
    monkeypatch.setattr(attention, "_NOTED", set())
    items = [[0.25, 0.5], [0.75]]
    with caplog.at_level("WARNING", logger=attention.__name__):
        assert attention.wrong_mean(items) == token_mean(items) == pytest.approx(0.5)
        assert attention.correct_mean(items) == pytest.approx(0.5)
        assert not caplog.records  # a number: nothing to say
        assert math.isnan(attention.wrong_mean([[], []]))
        assert math.isnan(attention.wrong_mean([]))  # a second task: said once per run
        assert math.isnan(attention.correct_mean([[]]))
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        f"attnspan: {attention.NAN_NOTES[attention.WRONG]} (lm_eval_tasks/README.md)",
        f"attnspan: {attention.NAN_NOTES[attention.CORRECT]} (lm_eval_tasks/README.md)",
    ]
    assert "ref_share_wrong is NaN" in messages[0] and "no wrong target token" in messages[0]
    assert all("\n" not in m for m in messages)


def test_the_task_files_aggregate_correct_and_wrong_with_their_notes():
    from pathlib import Path

    from lm_eval.tasks._yaml_loader import load_yaml

    from lm_eval_tasks import TASKS_DIR

    cfg = load_yaml(Path(TASKS_DIR, f"attnspan_{PRESET}.yaml"), resolve_func=True)
    aggregation = {
        m["metric"]: getattr(m["aggregation"], "__name__", "") for m in cfg["metric_list"]
    }
    assert aggregation[attention.WRONG] == "wrong_mean"
    assert aggregation[attention.CORRECT] == "correct_mean"


def test_metrics_of_one_document():
    doc = {
        "target": "123",
        "length": 3,
        "length_bin": "exact_match_len_03",
        "length_bins": ["exact_match_len_01", "exact_match_len_03"],
        "attention": True,
    }
    carried = {
        "shares": [0.2, None, 0.6],
        "correct": [True, False, False],
        "head_sums": [[0.8, 0.1]],
        "head_tokens": 2,
    }
    out = process_results(doc, [Answer("129", carried)])
    assert out["exact_match"] == 0.0 and out["partial_acc"] == pytest.approx(2 / 3)
    assert out["ref_share"] == [0.2, 0.6]  # the empty-reference token is left out
    assert out["ref_share_correct"] == [0.2] and out["ref_share_wrong"] == [0.6]
    assert out["ref_share_best_head"] == {"sums": [[0.8, 0.1]], "tokens": 2}
    assert out["ref_share_len_03"] == [0.2, 0.6] and out["ref_share_len_01"] == []
    # an Answer survives pickling (lm-eval's --use_cache) with its measurement
    again = pickle.loads(pickle.dumps(Answer("129", carried)))
    assert again == "129" and again.attention == carried
    # asked for, but the model type did not measure: refused in one line
    with pytest.raises(ValueError, match="only --model attnspan-hf measures them") as error:
        process_results(doc, ["129"])
    assert "\n" not in str(error.value)
    assert not any(
        k.startswith("ref_share") for k in process_results(dict(doc, attention=False), ["129"])
    )


def test_token_payload_sums_heads_over_scored_tokens():
    records = [
        {"position": 1, "share": math.nan, "correct": False, "heads": None},
        {"position": 0, "share": 0.5, "correct": True, "heads": np.array([[0.25, 0.5]])},
        {"position": 2, "share": 0.1, "correct": False, "heads": np.array([[0.75, 0.0]])},
    ]
    payload = attention.token_payload(records)
    assert payload["shares"] == [0.5, None, 0.1]
    assert payload["correct"] == [True, False, False]
    assert payload["head_sums"] == [[1.0, 0.5]] and payload["head_tokens"] == 2


def test_bad_input_is_refused_in_one_line(tiny_model_dir, monkeypatch):
    with pytest.raises(ValueError, match="attention must be true or false, got 'yes'"):
        AttnspanHFLM(pretrained=tiny_model_dir, device="cpu", attention="yes")
    # lm-eval's own HF model type does not know the argument: transformers refuses it.
    from lm_eval.models.huggingface import HFLM

    with pytest.raises(TypeError, match="unexpected keyword argument 'attention'"):
        HFLM(pretrained=tiny_model_dir, device="cpu", attention=True)
    # An attention that bypasses AttentionInterface: refused before anything is generated.
    import torch
    from transformers.models.llama import modeling_llama

    def no_dispatch(self, hidden_states, *args, **kwargs):
        return torch.zeros_like(hidden_states), None

    monkeypatch.setattr(modeling_llama.LlamaAttention, "forward", no_dispatch)
    with pytest.raises(AttentionCaptureError, match="does not dispatch through") as error:
        AttnspanHFLM(pretrained=tiny_model_dir, device="cpu", dtype="float32", attention=True)
    assert "\n" not in str(error.value) and "attention=true" in str(error.value)


def test_written_tokens_stop_as_lm_eval_cuts_the_answer():
    """The tokens scored are those lm-eval's answer holds: cut after a line break (written,
    wrong), before an EOS (finished), at the target's length."""
    from types import SimpleNamespace

    from harness.foundation.tokenization import CharTokenizer

    char_tok = CharTokenizer(make_char_tokenizer())
    model = SimpleNamespace(char_tok=char_tok)
    ids = char_tok.encode_chars
    eos = char_tok.eos_id
    written = AttnspanHFLM.written
    assert written(model, ids("ab\ncd"), {eos}, ["\n"], 5) == (ids("ab\n"), False)
    assert written(model, ids("ab") + [eos] + ids("c"), {eos}, ["\n"], 5) == (ids("ab"), True)
    assert written(model, ids("abcdef"), {eos}, ["\n"], 3) == (ids("abc"), False)


def test_a_batch_not_in_the_harness_layout_is_measured_by_one_forward(digit_model_dir, monkeypatch):
    """A batch that cannot be recorded while generating (another task's rows in it, another
    layout) is measured after, by one forward over prompt + answer: the same numbers."""
    recorded = numbers(lm_eval_run(digit_model_dir, attention_on=True))
    forwards = []

    def not_the_layout(self, pairs, context, attention_mask, generate, written):
        return generate(), None

    measure = attention.AttentionMeter.measure

    def counted(self, items):
        forwards.append(len(items))
        return measure(self, items)

    monkeypatch.setattr(attention.AttentionMeter, "during_generation", not_the_layout)
    monkeypatch.setattr(attention.AttentionMeter, "measure", counted)
    measured = numbers(lm_eval_run(digit_model_dir, attention_on=True))
    assert sum(forwards) == N
    assert recorded.keys() == measured.keys()
    for name, value in recorded.items():
        assert measured[name] == pytest.approx(value, abs=1e-6, nan_ok=True), name


def test_attention_with_another_model_type_is_refused_before_the_model_loads(monkeypatch, capsys):
    """In the `lm_eval` command, `--model hf --model_args ...,attention=true` is one line and
    status 2 when the TaskManager is made (before lm-eval loads the model), not
    transformers' TypeError traceback; attnspan-hf passes, and so does attention=false."""
    from lm_eval_tasks import registration

    assert registration.command_model(["run", "--model", "hf", "--tasks", "x"]) == "hf"
    assert registration.command_model(["--model=attnspan-hf"]) == "attnspan-hf"
    assert registration.command_model(["--tasks", "x"]) is None
    monkeypatch.setattr("lm_eval_tasks.dataset.under_lm_eval_command", lambda: True)
    monkeypatch.setattr("sys.argv", ["lm_eval", "--model", "hf", "--model_args", "x"])
    with pytest.raises(SystemExit) as stop:
        registration.check_attention_model({"attention": "true", "pretrained": "m"})
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "needs --model attnspan-hf" in err and "--model hf" in err
    registration.check_attention_model({"attention": "false"})  # nothing asked: no refusal
    # threads= is attnspan-hf's own key too (else a TypeError from the model class)
    with pytest.raises(SystemExit) as stop:
        registration.check_attention_model({"threads": "2", "pretrained": "m"})
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and err.count("\n") == 0, err
    assert "threads=2 needs --model attnspan-hf" in err and "OMP_NUM_THREADS" in err
    monkeypatch.setattr("sys.argv", ["lm_eval", "--model", "attnspan-hf"])
    registration.check_attention_model({"attention": "true"})
    registration.check_attention_model({"threads": "2"})
