"""The corpus of bad inputs: every console command, `load_dataset`, and the Python API.

    python -m pytest -q tests/test_bad_inputs.py

One table per surface. A CLI row is `attentionspan ARGS` run in-process through
`harness.cli.main`: it must exit with status 2 and print exactly one stderr line,
`attentionspan CMD: error: ...`, holding every fragment of the row (the option or field it
names, and the allowed values or the cap where there are some). An API row must raise one
ValueError whose one-line message holds its fragments. A new command adds its rows here
(the corpus of bad inputs in tests/ grows with each new command).

Nothing here trains more than one optimizer step (the resumable run folder) and every
model is a tiny random one built once per module; every CLI row runs under an alarm that
only catches a hang (huge sizes must be refused up front, never generated).
"""

from __future__ import annotations

import contextlib
import io
import pickle
import shutil
import signal
import warnings
from pathlib import Path

import pytest

from harness.cli import main

HANG = 60  # seconds: only a hang trips this; a refusal takes milliseconds
HUGE = "1000000000"


class Payload:
    """Unpickling this would print; a refused pickle must never run it."""

    def __reduce__(self):
        return (print, ("payload ran",))


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """Folders the rows point at: a tiny model (no saved training config), model folders
    broken in each way, a run folder with a checkpoint, a pickled training state, a locked
    run folder."""
    from safetensors.torch import load_file

    from harness.foundation.runs import RunLock
    from harness.training.train import TrainConfig, train
    from tests.harness.conftest import save_tiny_model
    from tests.harness.test_train import TINY

    root = tmp_path_factory.mktemp("bad_inputs")
    model = save_tiny_model("llama", root / "model")

    def copy(name: str) -> Path:
        return Path(shutil.copytree(model, root / name))

    (copy("extra_key") / "attentionspan_run.json").write_text('{"prompt": {"colour": 1}}')
    (copy("invalid_json") / "attentionspan_run.json").write_text("{broken")
    pickled = copy("pickled_weights")
    weights = load_file(str(pickled / "model.safetensors"))
    (pickled / "model.safetensors").unlink()
    weights["payload"] = Payload()
    (pickled / "pytorch_model.bin").write_bytes(pickle.dumps(weights))

    run = root / "run"  # one optimizer step, checkpoint-1, as a killed run leaves it
    config = TrainConfig(
        output=str(run), lr=1e-3, max_steps=2, save_every=1, eval_size=2, scratch=TINY
    )
    train(config, stop_after=1, progress=False)
    state_run = Path(shutil.copytree(run, root / "pickled_state"))
    (checkpoint,) = state_run.glob("checkpoint-*")
    state = {"optimizer": Payload(), "scheduler": {}}
    (checkpoint / "training_state.pt").write_bytes(pickle.dumps(state))

    with RunLock(root / "locked"):  # held by this process: another run there is refused
        yield {
            "tmp": root,
            "model": model,
            "extra_key": root / "extra_key",
            "invalid_json": root / "invalid_json",
            "pickled_weights": pickled,
            "run": run,
            "pickled_state": state_run,
            "locked": root / "locked",
        }


def run_cli(args: list[str]) -> tuple[int, list[str], str]:
    """(exit status, stderr lines, stdout) of `attentionspan ARGS`, in-process."""
    err, out = io.StringIO(), io.StringIO()

    def hang(signum, frame):
        raise TimeoutError(f"attentionspan {' '.join(args)} still running after {HANG} s")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(HANG)
    try:
        with (
            contextlib.redirect_stderr(err),
            contextlib.redirect_stdout(out),
            warnings.catch_warnings(record=True) as caught,
        ):
            # What a user's interpreter shows (pytest would swallow warnings otherwise):
            # each one is two more stderr lines in the console.
            warnings.simplefilter("default")
            for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning):
                warnings.simplefilter("ignore", category)
            try:
                status = main(args)
            except SystemExit as done:  # argparse's own refusals exit from parse_args
                status = done.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    shown = [f"{w.category.__name__}: {w.message}" for w in caught]
    return status, shown + err.getvalue().strip().splitlines(), out.getvalue()


TRAIN = ["train", "--model", "scratch", "--output", "{tmp}/train", "--max-steps", "1"]
EVAL = ["eval", "--model", "{model}", "--configs", "reversal_id", "-n", "2"]
ATTENTION = ["attention", "--model", "{model}", "--configs", "reversal_id", "-n", "2"]
HEADS = ["heads", "--model", "{model}", "--config", "reversal_id", "-n", "2"]
REPRODUCE = ["reproduce", "--model", "{model}", "--output", "{tmp}/reproduce"]
BASELINES = ["baselines", "--task", "t1", "--output", "{tmp}/baselines.json"]
EXPORT = ["export", "reversal_id", "--out", "{tmp}/export"]

# (id, arguments, fragments of the one error line). {name}: a folder of `places`.
CLI_ROWS = [
    # --- the top level
    ("no-command", [], ["attentionspan: error:", "COMMAND"]),
    ("unknown-command", ["frobnicate"], ["invalid choice: 'frobnicate'", "generate"]),
    # an unknown option names the (sub)command whose --help lists the options
    (
        "unknown-option-before-the-command",
        ["--bogus", "generate", "reversal"],
        ["attentionspan: error: unrecognized arguments: --bogus", "(see attentionspan --help)"],
    ),
    (
        "train-unknown-option",
        [*TRAIN, "--learning-rate", "1"],
        ["unrecognized arguments: --learning-rate 1", "(see attentionspan train --help)"],
    ),
    (
        "models-fetch-unknown-option",
        ["models", "fetch", "smollm2-135m-instruct", "--bogus"],
        ["attentionspan models fetch: error: unrecognized arguments: --bogus"],
    ),
    # --- generate: huge sizes are refused up front, naming the field and the cap
    (
        "generate-huge-reversal",
        ["generate", "reversal", "-n", "1", "--param", f"min_length={HUGE}"]
        + ["--param", f"max_length={HUGE}"],
        ["'min_length'", "<= 100000"],
    ),
    (
        "generate-huge-value-assignment",
        ["generate", "value_assignment", "-n", "1", "--param", f"min_length={HUGE}"]
        + ["--param", f"max_length={HUGE}"],
        ["'min_length'", "<= 100000"],
    ),
    (
        "generate-huge-successor",
        ["generate", "successor", "-n", "1", "--param", f"min_count={HUGE}"]
        + ["--param", f"max_count={HUGE}"],
        ["'min_count'", "<= 1000"],
    ),
    (
        "generate-huge-ffml",
        ["generate", "ffml", "-n", "1", "--param", f"min_instructions={HUGE}"]
        + ["--param", f"max_instructions={HUGE}"],
        ["'min_instructions'", "<="],
    ),
    (
        "generate-5001-digit-max-start",
        ["generate", "successor", "--param", "max_start=" + "9" * 5001],
        ["a 5001-digit number", "'max_start'", "max_start <= 1000000000000000000"],
    ),
    ("generate-unknown-config", ["generate", "nope"], ["unknown config 'nope'", "reversal_id"]),
    (
        "generate-misspelt-config",
        ["generate", "additon_ood"],
        ["unknown config 'additon_ood' (did you mean 'addition_ood'?); allowed: reversal_id"],
    ),
    ("generate-unknown-param", ["generate", "reversal", "--param", "foo=1"], ["'foo'", "charset"]),
    ("generate-param-no-value", ["generate", "reversal", "--param", "min_length"], ["KEY=VALUE"]),
    (
        "generate-param-not-int",
        ["generate", "reversal", "--param", "min_length=abc"],
        ["'min_length' must be an integer"],
    ),
    (
        "generate-unknown-mask",
        ["generate", "reversal", "--param", "mask=nope"],
        ["'mask'", "'paper', 'sufficient', 'minimal'"],
    ),
    ("generate-negative-n", ["generate", "reversal", "-n", "-1"], ["-n/--num must be >= 0"]),
    ("generate-n-not-int", ["generate", "reversal", "-n", "abc"], ["-n/--num", "'abc'"]),
    ("generate-negative-start", ["generate", "reversal", "--start", "-1"], ["--start", ">= 0"]),
    ("generate-seed-not-int", ["generate", "reversal", "--seed", "abc"], ["--seed", "'abc'"]),
    ("generate-format", ["generate", "reversal", "--format", "xml"], ["--format", "'jsonl'"]),
    # -n has a cap (--force lifts it), the index range is int64, named by option
    (
        "generate-huge-n",
        ["generate", "reversal", "-n", HUGE],
        ["-n/--num is 1,000,000,000", "cap of 10,000,000", "--force"],
    ),
    (
        "generate-n-past-int64-with-force",
        ["generate", "reversal", "--force", "-n", str(2**63 + 1)],
        ["--start 0 with -n", "runs past the last index 9223372036854775807"],
    ),
    (
        "generate-start-past-int64",
        ["generate", "reversal", "--start", str(2**63)],
        ["--start 9223372036854775808", "allowed: --start <= 9223372036854775798"],
    ),
    (
        "generate-start-at-the-end",
        ["generate", "reversal", "--start", str(2**63 - 1), "-n", "2"],
        ["--start", "allowed: --start <= 9223372036854775806"],
    ),
    ("generate-seed-huge", ["generate", "reversal", "--seed", str(10**30)], ["--seed must be in"]),
    ("generate-seed-low", ["generate", "reversal", "--seed", str(-(2**64))], ["--seed must be in"]),
    ("generate-n-float", ["generate", "reversal", "-n", "1e3"], ["-n/--num", "'1e3'"]),
    ("generate-n-nan", ["generate", "reversal", "-n", "nan"], ["-n/--num", "'nan'"]),
    (
        "generate-unknown-option",
        ["generate", "reversal", "--bogus"],
        ["unrecognized arguments: --bogus", "(see attentionspan generate --help)"],
    ),
    (
        "generate-extra-positional",
        ["generate", "reversal", "reversal_id"],
        ["unrecognized arguments: reversal_id", "(see attentionspan generate --help)"],
    ),
    # charsets: distinct, printable, non-space characters; each error names the field
    (
        "generate-charset-control",
        ["generate", "reversal", "--param", "charset=ab\x01c"],
        ["'charset'", "non-printable", "U+0001"],
    ),
    (
        "generate-charset-escape",
        ["generate", "reversal", "--param", "charset=ab\x1b"],
        ["'charset'", "U+001B"],
    ),
    (
        "generate-charset-zero-width",
        ["generate", "reversal", "--param", "charset=ab\u200b"],
        ["'charset'", "U+200B"],
    ),
    ("generate-charset-empty", ["generate", "reversal", "--param", "charset="], ["'charset'"]),
    (
        "generate-charset-repeated",
        ["generate", "reversal", "--param", "charset=aab"],
        ["'charset'", "distinct"],
    ),
    (
        "generate-charset-space",
        ["generate", "reversal", "--param", "charset=a b"],
        ["'charset'", "whitespace"],
    ),
    (
        "generate-alphabet-control",
        ["generate", "value_assignment", "--param", "output_alphabet=xy\x7f"],
        ["'output_alphabet'", "U+007F"],
    ),
    # --- show
    ("show-negative-index", ["show", "reversal", "--index", "-1"], ["--index must be >= 0"]),
    ("show-float-index", ["show", "reversal", "--index", "1.5"], ["--index", "'1.5'"]),
    (
        "show-unknown-split",
        ["show", "reversal", "--split", "dev"],
        ["--split", "'train', 'validation', 'test'"],
    ),
    ("show-config-and-all", ["show", "reversal", "--all"], ["either CONFIG or --all"]),
    ("show-unknown-config", ["show", "nope"], ["unknown config 'nope'"]),
    ("show-zero-n", ["show", "reversal", "-n", "0"], ["-n/--num must be >= 1"]),
    ("show-huge-n", ["show", "reversal", "-n", HUGE], ["-n/--num", "cap of 1,000"]),
    ("show-huge-index", ["show", "reversal", "--index", str(10**20)], ["--index", "allowed"]),
    (
        "show-huge-index-of-a-split",
        ["show", "reversal_id", "--split", "test", "--index", str(2**63)],
        ["--index 9223372036854775808", "9223372036854775807"],
    ),
    (
        "show-index-and-n-past-int64",
        ["show", "reversal", "--index", str(2**63 - 1), "-n", "2"],
        ["--index", "allowed: --index <= 9223372036854775806"],
    ),
    ("show-seed-huge", ["show", "reversal", "--seed", str(2**64)], ["--seed must be in"]),
    (
        "show-all-with-a-foreign-param",
        ["show", "--all", "--param", "charset=abc"],
        ["'charset'", "allowed"],
    ),
    (
        "show-unknown-option",
        ["show", "reversal", "--bogus"],
        ["unrecognized arguments: --bogus", "(see attentionspan show --help)"],
    ),
    # --- export
    (
        "export-huge-without-force",
        [*EXPORT, "--num-train", "1000000000000"],
        ["--num-train", "cap of 10,000,000", "--force"],
    ),
    ("export-unknown-config", ["export", "nope", "--out", "{tmp}/e"], ["unknown config(s) nope"]),
    ("export-negative-size", [*EXPORT, "--num-test", "-5"], ["--num-test", "non-negative"]),
    ("export-no-out", ["export", "reversal_id"], ["--out"]),
    ("export-num-proc-0", [*EXPORT, "--num-proc", "0"], ["--num-proc must be a positive"]),
    ("export-num-proc-negative", [*EXPORT, "--num-proc=-2"], ["--num-proc must be a positive"]),
    ("export-num-proc-huge", [*EXPORT, "--num-proc", HUGE], ["--num-proc", "cap of 64"]),
    ("export-seed-huge", [*EXPORT, "--seed", str(2**64)], ["--seed must be an integer in"]),
    (
        "export-duplicate-configs",
        ["export", "reversal_id", "addition_id", "reversal_id", "--out", "{tmp}/export"],
        ["a config is listed twice"],
    ),
    (
        "export-unknown-option",
        [*EXPORT, "--bogus"],
        ["unrecognized arguments: --bogus", "(see attentionspan export --help)"],
    ),
    # --- export: where the folder goes (nothing is built first)
    ("export-out-empty", ["export", "reversal_id", "--out", ""], ["--out must name a folder"]),
    (
        "export-out-cwd-overwrite",
        ["export", "reversal_id", "--out", ".", "--overwrite"],
        ["--out '.' is the current directory", "would delete its files"],
    ),
    (
        "export-out-parent-of-cwd",
        ["export", "reversal_id", "--out", "..", "--overwrite"],
        ["--out '..' is the current directory or holds it"],
    ),
    (
        "export-out-is-a-file",
        ["export", "reversal_id", "--out", "{model}/config.json"],
        ["config.json exists and is not a folder"],
    ),
    (
        "export-out-under-a-file",
        ["export", "reversal_id", "--out", "{model}/config.json/data"],
        ["config.json/data' lies under", "config.json', which is a file"],
    ),
    (
        "export-cache-dir-is-a-file",
        [*EXPORT, "--cache-dir", "{model}/config.json"],
        ["--cache-dir", "config.json' exists and is not a folder"],
    ),
    (
        "export-cache-dir-under-a-file",
        [*EXPORT, "--cache-dir", "{model}/config.json/cache"],
        ["--cache-dir", "cannot be written"],
    ),
    # --- train: non-finite hyperparameters, short context, bad run folders
    ("train-lr-inf", [*TRAIN, "--lr", "inf"], ["'lr' must be a finite number, got inf"]),
    (
        "train-curriculum-past-the-context",
        [
            *TRAIN,
            "--scratch-max-positions",
            "32",
            "--curriculum",
            "1:min_length=30,max_length=40",
            "--max-steps",
            "2",
        ],
        ["'curriculum' stage 1 (min_length=30,max_length=40)", "is shorter than"],
    ),
    (
        "train-curriculum-past-max-steps",
        [*TRAIN, "--curriculum", "10:min_length=3,max_length=4", "--max-steps", "5"],
        ["'curriculum' stages take 10 steps, more than 'max_steps' 5"],
    ),
    (
        "train-instruction-two-lines",
        [*TRAIN, "--instruction", "two\nlines"],
        ["instruction must be one line of text"],
    ),
    (
        "train-max-grad-norm-nan",
        [*TRAIN, "--max-grad-norm", "nan"],
        ["'max_grad_norm' must be a finite number, got nan"],
    ),
    ("train-lr-negative", [*TRAIN, "--lr", "-1"], ["'lr' must be > 0"]),
    ("train-lr-not-float", [*TRAIN, "--lr", "abc"], ["--lr", "'abc'"]),
    (
        "train-context-too-short",
        [*TRAIN, "--scratch-max-positions", "16"],
        ["context (max_position_embeddings = 16"],
    ),
    ("train-unknown-config", [*TRAIN, "--config", "nope"], ["unknown config 'nope'"]),
    (
        "train-misspelt-config",
        [*TRAIN, "--config", "reversl_id"],
        ["unknown config 'reversl_id' (did you mean 'reversal_id'?); allowed:"],
    ),
    ("train-batch-size-0", [*TRAIN, "--batch-size", "0"], ["'batch_size' must be >= 1"]),
    ("train-missing-model", [*TRAIN, "--model", "/nonexistent"], ["'/nonexistent' does not exist"]),
    (
        "train-mixed-precision",
        [*TRAIN, "--mixed-precision", "fp8"],
        ["--mixed-precision", "'bf16'"],
    ),
    ("train-resume-nothing", [*TRAIN, "--resume"], ["no checkpoint to resume"]),
    (
        "train-resume-changed-options",
        ["train", "--output", "{run}", "--resume", "--lr", "5e-6"],
        ["these options differ from it", "--lr 5e-06 (saved: 0.001)"],
    ),
    # --- train --attention-supervision: the heads, the options beside them, a resume
    (
        "train-supervision-bad-heads",
        [*TRAIN, "--attention-supervision", "layer:x"],
        ["'attention_supervision' must be layer:L", "LAYER.HEAD", "top:N", "'layer:x'"],
    ),
    (
        "train-supervision-layer-out-of-range",
        [*TRAIN, "--attention-supervision", "layer:9"],
        ["'attention_supervision' 'layer:9': layer 9 is out of range", "4 layers (0-3)"],
    ),
    (
        "train-supervision-head-out-of-range",
        [*TRAIN, "--attention-supervision", "0.1,1.7"],
        ["head 1.7 is out of range; the model has 4 heads per layer (0-3)"],
    ),
    (
        "train-supervision-loss",
        [*TRAIN, "--attention-supervision", "layer:0", "--supervision-loss", "kl"],
        ["--supervision-loss", "'kl'", "'ce', 'mass'"],
    ),
    (
        "train-supervision-weight-negative",
        [*TRAIN, "--attention-supervision", "layer:0", "--supervision-weight", "-1"],
        ["'supervision_weight' must be a number >= 0, got -1.0"],
    ),
    (
        "train-supervision-option-alone",
        [*TRAIN, "--supervision-weight", "2"],
        ["'supervision_weight' is given without 'attention_supervision'"],
    ),
    (
        "train-supervision-top-without-ranking",
        [*TRAIN, "--attention-supervision", "top:2"],
        ["'attention_supervision' 'top:2' needs 'supervision_ranking'"],
    ),
    (
        "train-supervision-missing-ranking",
        [*TRAIN, "--attention-supervision", "top:2", "--supervision-ranking", "{tmp}/no.json"],
        ["'supervision_ranking'", "no.json' does not exist"],
    ),
    (
        "train-resume-changed-supervision",
        ["train", "--output", "{run}", "--resume", "--attention-supervision", "layer:0"],
        ["these options differ from it", "--attention-supervision 'layer:0' (saved: '')"],
    ),
    (
        "train-pickled-training-state",
        ["train", "--output", "{pickled_state}", "--resume"],
        ["training_state.pt: not a tensors-only file (refused to unpickle"],
    ),
    (
        "train-locked-folder",
        ["train", "--model", "scratch", "--output", "{locked}", "--max-steps", "1"],
        ["run folder", "is in use by"],
    ),
    # --- eval: model folders broken in each way
    (
        "eval-missing-folder",
        ["eval", "--model", "/nonexistent"],
        ["model directory '/nonexistent' does not exist", "scratch"],
    ),
    (
        "eval-run-file-extra-key",
        [*EVAL, "--model", "{extra_key}"],
        ["attentionspan_run.json: unknown key(s) prompt.colour"],
    ),
    (
        "eval-run-file-invalid-json",
        [*EVAL, "--model", "{invalid_json}"],
        ["attentionspan_run.json: not valid JSON"],
    ),
    ("eval-pickled-weights", [*EVAL, "--model", "{pickled_weights}"], ["refused to unpickle"]),
    ("eval-not-a-model", [*EVAL, "--model", "{tmp}"], ["not a Hugging Face model directory"]),
    ("eval-unknown-config", [*EVAL, "--configs", "nope"], ["unknown config 'nope'"]),
    (
        "eval-misspelt-config",
        [*EVAL, "--configs", "reversal_id", "revrsal_ood"],
        ["unknown config 'revrsal_ood' (did you mean 'reversal_ood'?); allowed:"],
    ),
    ("eval-no-configs", ["eval", "--model", "{model}"], ["no --configs given"]),
    ("eval-zero-n", [*EVAL, "-n", "0"], ["-n/--num must be >= 1"]),
    ("eval-batch-size-0", [*EVAL, "--batch-size", "0"], ["--batch-size must be >= 1"]),
    ("eval-negative-fewshot", [*EVAL, "--num-fewshot", "-1"], ["num_fewshot must be >= 0"]),
    # --- models
    ("models-no-action", ["models"], ["ACTION"]),
    (
        "models-fetch-unknown",
        ["models", "fetch", "gpt-5"],
        ["invalid choice: 'gpt-5'", "smollm2-135m-instruct"],
    ),
    # --- attention
    ("attention-zero-n", [*ATTENTION, "-n", "0"], ["-n/--num must be >= 1"]),
    ("attention-unknown-config", [*ATTENTION, "--configs", "nope"], ["unknown config 'nope'"]),
    ("attention-not-a-model", [*ATTENTION, "--model", "{tmp}"], ["not a Hugging Face model"]),
    (
        "attention-no-saved-config",
        ["attention", "--model", "{model}"],
        ["no --configs given", "no saved training config"],
    ),
    ("attention-unknown-mode", [*ATTENTION, "--modes", "x"], ["--modes", "'teacher_forced'"]),
    ("attention-batch-size-0", [*ATTENTION, "--batch-size", "0"], ["--batch-size must be >= 1"]),
    # --- heads
    ("heads-unknown-config", [*HEADS, "--config", "nope"], ["unknown config 'nope'"]),
    ("heads-zero-n", [*HEADS, "-n", "0"], ["-n/--num must be >= 1"]),
    ("heads-threshold-nan", [*HEADS, "--threshold", "nan"], ["threshold must be in [0, 1)"]),
    ("heads-threshold-1", [*HEADS, "--threshold", "1"], ["threshold must be in [0, 1)"]),
    ("heads-shift-not-int", [*HEADS, "--shift", "1.5"], ["--shift", "'1.5'"]),
    (
        "heads-missing-folder",
        ["heads", "--model", "/nonexistent"],
        ["model directory '/nonexistent' does not exist"],
    ),
    ("heads-no-saved-config", ["heads", "--model", "{model}"], ["no --config given"]),
    # --- reproduce
    ("reproduce-no-model", ["reproduce"], ["'model' is required", "--quick"]),
    ("reproduce-counts-0", [*REPRODUCE, "--counts", "0"], ["'counts' must be >= 1"]),
    ("reproduce-counts-float", [*REPRODUCE, "--counts", "1.5"], ["--counts", "'1.5'"]),
    ("reproduce-strengths-nan", [*REPRODUCE, "--strengths", "nan"], ["'strengths' must be fin"]),
    ("reproduce-strengths-inf", [*REPRODUCE, "--strengths", "1", "inf"], ["'strengths'", "inf"]),
    (
        "reproduce-strengths-negative",
        [*REPRODUCE, "--strengths=-1"],
        ["'strengths' must be in [0, 100]"],
    ),
    (
        "reproduce-thresholds-nan",
        [*REPRODUCE, "--mode", "conditional", "--thresholds", "nan"],
        ["'thresholds' must be f"],
    ),
    ("reproduce-id-guard-nan", [*REPRODUCE, "--id-guard", "nan"], ["'id_guard' must be finite"]),
    ("reproduce-mode", [*REPRODUCE, "--mode", "knockout"], ["--mode", "'conditional'"]),
    ("reproduce-shift-not-int", [*REPRODUCE, "--shift", "x"], ["--shift", "'x'"]),
    ("reproduce-metric", [*REPRODUCE, "--metric", "bleu"], ["--metric", "'exact_match'"]),
    (
        "reproduce-unknown-config",
        [*REPRODUCE, "--config", "nope"],
        ["config 'nope' has no ID/OOD presets", "reversal"],
    ),
    (
        "reproduce-misspelt-tasks",
        ["reproduce", "--quick", "--tasks", "reversal", "adition", "--output", "{tmp}/rq"],
        ["config 'adition' has no ID/OOD presets (did you mean 'addition'?); allowed:"],
    ),
    ("reproduce-num-test-0", [*REPRODUCE, "--num-test", "0"], ["'num_test' must be >= 1"]),
    (
        "reproduce-unknown-ood-param",
        [*REPRODUCE, "--ood", "foo=1"],
        ["'ood' overrides for reversal_ood", "'foo'"],
    ),
    # options that the mode would ignore, aliases of one task, bounds before any work
    ("reproduce-model-with-tasks", [*REPRODUCE, "--tasks", "addition"], ["--tasks does nothing"]),
    ("reproduce-model-train-steps", [*REPRODUCE, "--train-steps", "5"], ["--train-steps does"]),
    (
        "reproduce-thresholds-standard",
        [*REPRODUCE, "--thresholds", "0.1"],
        ["--thresholds does nothing with --mode standard"],
    ),
    ("reproduce-id-guard-above-1", [*REPRODUCE, "--id-guard", "1.5"], ["'id_guard' must be in"]),
    ("reproduce-strength-huge", [*REPRODUCE, "--strengths", "1e308"], ["'strengths' must be in"]),
    (
        "reproduce-control-seed-huge",
        [*REPRODUCE, "--control-seeds", "99999999999999999999"],
        ["'control_seeds' must be in [0, 2147483647]"],
    ),
    (
        "reproduce-task-alias-twice",
        ["reproduce", "--quick", "--tasks", "reversal", "reversal_id", "--output", "{tmp}/rq"],
        ["'tasks' lists 'reversal' twice"],
    ),
    (
        "reproduce-config-with-quick",
        ["reproduce", "--quick", "--config", "addition", "--output", "{tmp}/rq"],
        ["--config does nothing with --quick"],
    ),
    # --- baselines
    ("baselines-unknown-task", [*BASELINES, "--task", "t9"], ["--task 't9'", "T1 ... T7"]),
    ("baselines-length-0", [*BASELINES, "--length", "0"], ["--length 0:", "2 <= min_length"]),
    ("baselines-length-huge", [*BASELINES, "--length", HUGE], ["--length 1000000000:", "<= 200"]),
    ("baselines-seeds-0", [*BASELINES, "--seeds", "0"], ["--seeds must be >= 1"]),
    ("baselines-lr-nan", [*BASELINES, "--lr", "nan"], ["'lr'", "nan"]),
    ("baselines-unknown-model", [*BASELINES, "--models", "gru"], ["--models", "'lstm+att'"]),
    ("baselines-epochs-0", [*BASELINES, "--epochs", "0"], ["--epochs must be >= 1"]),
    ("baselines-no-output", ["baselines", "--task", "t1"], ["--output"]),
]


@pytest.mark.parametrize("args,fragments", [r[1:] for r in CLI_ROWS], ids=[r[0] for r in CLI_ROWS])
def test_a_bad_command_line_is_one_line_and_status_2(args, fragments, places, capsys):
    args = [a.format(**places) for a in args]
    status, err, out = run_cli(args)
    assert status == 2, (status, err)
    assert len(err) == 1, err
    top_level = not args or args[0] == "frobnicate" or args[0].startswith("-")
    command = "" if top_level else f"attentionspan {args[0]}"
    assert err[0].startswith(f"{command or 'attentionspan'}"), err[0]
    assert ": error: " in err[0], err[0]
    for fragment in fragments:
        assert fragment in err[0], (fragment, err[0])
    assert "payload ran" not in out + "\n".join(err)


def test_refusals_write_nothing(places):
    """A refused export, reproduce, baselines or train leaves nothing behind: a refused
    train removes the run folder it made, lock file included
    (harness.foundation.runs.RunLock.discard)."""
    for name in ("export", "reproduce", "baselines.json", "train"):
        assert not (places["tmp"] / name).exists(), name


# --- the Python API and load_dataset: one ValueError line naming the argument


def _api_rows():
    import datasets

    import attentionspan_datasets as api
    from attentionspan_datasets import hub_export, splits

    test = "test"
    return [
        ("generate-index-float", lambda: api.generate("reversal_id", index=1.5), ["'index'"]),
        ("generate-index-negative", lambda: api.generate("reversal_id", index=-1), ["'index'"]),
        ("generate-seed-list", lambda: api.generate("reversal_id", seed=[1, 2]), ["'seed'"]),
        ("generate-seed-bool", lambda: api.generate("reversal_id", seed=True), ["bool True"]),
        (
            "generate-huge",
            lambda: api.generate("reversal", min_length=10**9, max_length=10**9),
            ["'min_length'", "<= 100000"],
        ),
        (
            "generate-5001-digit-max-start",
            lambda: api.generate("successor", max_start=10**5000),
            ["'max_start'", "about 5001 digits", "<= 1000000000000000000"],
        ),
        ("generate-unknown-config", lambda: api.generate("nope"), ["unknown config 'nope'"]),
        ("generate-unknown-field", lambda: api.generate("reversal", foo=1), ["'foo'"]),
        (
            "iter-start-negative",
            lambda: list(api.iter_instances("reversal_id", start=-1, stop=2)),
            ["'start'"],
        ),
        (
            "iter-stop-float",
            lambda: list(api.iter_instances("reversal_id", stop=1.5)),
            ["'stop'"],
        ),
        (
            "iter-seed-bool",
            lambda: list(api.iter_instances("reversal_id", seed=True, stop=1)),
            ["'seed'"],
        ),
        (
            "split-unknown",
            lambda: splits.split_instance("reversal_id", 1234, "dev", 0),
            ["invalid split 'dev'", "train, validation, test"],
        ),
        (
            "split-index-negative",
            lambda: splits.split_instance("reversal_id", 1234, test, -1),
            ["'index'"],
        ),
        (
            "split-index-float",
            lambda: splits.split_instance("reversal_id", 1234, test, 1.5),
            ["'index'"],
        ),
        (
            "split-seed-list",
            lambda: splits.split_instance("reversal_id", [1, 2], test, 0),
            ["'seed'"],
        ),
        (
            "load-huge-without-force",
            lambda: api.load("reversal_id", num_train=10**12),
            ["'num_train'", "cap of 10,000,000", "force=True"],
        ),
        ("load-negative-size", lambda: api.load("reversal_id", num_train=-1), ["'num_train'"]),
        (
            "load-dataset-huge",
            lambda: datasets.load_dataset("attentionspan", "reversal_id", num_test=10**12),
            ["'num_test'", "cap of 10,000,000"],
        ),
        (
            "load-dataset-seed-bool",
            lambda: datasets.load_dataset("attentionspan", "reversal_id", seed=True),
            ["'seed' must be an int, got True"],
        ),
        (
            "load-dataset-unknown-key",
            lambda: datasets.load_dataset("attentionspan", "reversal_id", foo=1),
            ["'foo'", "allowed keys: min_length"],
        ),
        (
            "load-dataset-unknown-mask",
            lambda: datasets.load_dataset("attentionspan", "reversal_id", mask="nope"),
            ["invalid value 'nope' for field 'mask'", "'paper', 'sufficient', 'minimal'"],
        ),
        (
            "load-dataset-huge-length",
            lambda: datasets.load_dataset("attentionspan", "reversal_id", min_length=10**9),
            ["'min_length'", "<= 100000"],
        ),
        (
            "load-dataset-float-size",
            lambda: datasets.load_dataset("attentionspan", "reversal_id", num_train=1.5),
            ["'num_train'", "got 1.5"],
        ),
        (
            "load-dataset-unknown-config",
            lambda: datasets.load_dataset("attentionspan", "nope"),
            ["'nope'", "reversal_id"],
        ),
        # a config that is not a name, num_proc, the cache folder
        ("generate-config-list", lambda: api.generate(["reversal_id"]), ["'config'", "list"]),
        ("generate-config-dict", lambda: api.generate({"a": 1}), ["'config'", "dict"]),
        ("generate-config-int", lambda: api.generate(3), ["'config'", "int 3"]),
        ("generate-config-none", lambda: api.generate(None), ["'config'", "NoneType"]),
        (
            "iter-config-list",
            lambda: api.iter_instances(["reversal_id"], stop=1),
            ["'config'", "list"],
        ),
        (
            "split-config-dict",
            lambda: splits.split_instance({"a": 1}, 1234, test, 0),
            ["'config'", "dict"],
        ),
        ("load-config-list", lambda: api.load(["reversal_id"]), ["the config must be", "list"]),
        ("load-config-dict", lambda: api.load({"a": 1}), ["the config must be", "dict"]),
        ("load-config-int", lambda: api.load(3), ["the config must be", "int 3"]),
        (
            "load-dataset-config-int",
            lambda: datasets.load_dataset("attentionspan", 3),
            ["the config must be", "int 3"],
        ),
        (
            "load-dataset-config-list",
            lambda: datasets.load_dataset("attentionspan", ["reversal_id"]),
            ["the config must be", "list"],
        ),
        ("load-num-proc-0", lambda: api.load("reversal_id", num_proc=0), ["'num_proc'", ">= 1"]),
        ("load-num-proc-negative", lambda: api.load("reversal_id", num_proc=-1), ["'num_proc'"]),
        ("load-num-proc-float", lambda: api.load("reversal_id", num_proc=1.5), ["got 1.5"]),
        ("load-num-proc-bool", lambda: api.load("reversal_id", num_proc=True), ["got True"]),
        (
            "load-num-proc-huge",
            lambda: api.load("reversal_id", num_proc=10**9),
            ["'num_proc'", "cap of 64"],
        ),
        (
            "load-cache-dir-file",
            lambda: api.load("reversal_id", cache_dir=__file__),
            ["'cache_dir'", "exists and is not a folder"],
        ),
        (
            "load-cache-dir-under-a-file",
            lambda: api.load("reversal_id", cache_dir=f"{__file__}/cache"),
            ["'cache_dir'", "cannot be written"],
        ),
        (
            "load-cache-dir-empty",
            lambda: api.load("reversal_id", cache_dir=""),
            ["'cache_dir'", "empty string"],
        ),
        (
            "load-dataset-cache-dir-file",
            lambda: datasets.load_dataset("attentionspan", "reversal_id", cache_dir=__file__),
            ["'cache_dir'", "exists and is not a folder"],
        ),
        (
            "export-configs-int",
            lambda: hub_export.export([3], "unused-out"),
            ["the config must be", "int 3"],
        ),
        (
            "export-out-none",
            lambda: hub_export.export(["reversal_id"], None),
            ["--out must name a folder", "None"],
        ),
        (
            "export-num-proc-float",
            lambda: hub_export.export(["reversal_id"], "unused-out", num_proc=2.0),
            ["--num-proc", "2.0"],
        ),
        (
            "load-split-unknown",
            lambda: api.load("reversal_id", split="dev"),
            ["unknown split 'dev'", "train, validation, test"],
        ),
        (
            "load-split-unknown-in-a-sum",
            lambda: api.load("reversal_id", split="train+dev[:5]"),
            ["unknown split 'dev'"],
        ),
        ("load-split-int", lambda: api.load("reversal_id", split=3), ["'split'", "got 3"]),
        (
            "load-streaming-str",
            lambda: api.load("reversal_id", streaming="no"),
            ["'streaming' must be True or False", "'no'"],
        ),
        (
            "load-seed-huge",
            lambda: api.load("reversal_id", seed=2**70),
            ["'seed' must be in", "got 1180591620717411303424"],
        ),
        (
            "load-dataset-seed-negative-huge",
            lambda: datasets.load_dataset("attentionspan", "reversal_id", seed=-(2**64)),
            ["'seed' must be in"],
        ),
        ("split-of-int", lambda: splits.split_of(3), ["'prompt' must be a str", "int"]),
        (
            "generate-config-object-unknown-field",
            lambda: api.generate(api.resolve_config("reversal"), foo=1),
            ["unknown parameter(s) 'foo'", "allowed: mask, min_length"],
        ),
    ]


API_IDS = [
    "generate-index-float",
    "generate-index-negative",
    "generate-seed-list",
    "generate-seed-bool",
    "generate-huge",
    "generate-5001-digit-max-start",
    "generate-unknown-config",
    "generate-unknown-field",
    "iter-start-negative",
    "iter-stop-float",
    "iter-seed-bool",
    "split-unknown",
    "split-index-negative",
    "split-index-float",
    "split-seed-list",
    "load-huge-without-force",
    "load-negative-size",
    "load-dataset-huge",
    "load-dataset-seed-bool",
    "load-dataset-unknown-key",
    "load-dataset-unknown-mask",
    "load-dataset-huge-length",
    "load-dataset-float-size",
    "load-dataset-unknown-config",
    "generate-config-list",
    "generate-config-dict",
    "generate-config-int",
    "generate-config-none",
    "iter-config-list",
    "split-config-dict",
    "load-config-list",
    "load-config-dict",
    "load-config-int",
    "load-dataset-config-int",
    "load-dataset-config-list",
    "load-num-proc-0",
    "load-num-proc-negative",
    "load-num-proc-float",
    "load-num-proc-bool",
    "load-num-proc-huge",
    "load-cache-dir-file",
    "load-cache-dir-under-a-file",
    "load-cache-dir-empty",
    "load-dataset-cache-dir-file",
    "export-configs-int",
    "export-out-none",
    "export-num-proc-float",
    "load-split-unknown",
    "load-split-unknown-in-a-sum",
    "load-split-int",
    "load-streaming-str",
    "load-seed-huge",
    "load-dataset-seed-negative-huge",
    "split-of-int",
    "generate-config-object-unknown-field",
]


@pytest.mark.parametrize("row_id", API_IDS)
def test_a_bad_api_call_is_one_value_error_line(row_id):
    rows = {row[0]: row[1:] for row in _api_rows()}
    assert list(rows) == API_IDS
    assert_one_value_error_line(*rows[row_id])


def assert_one_value_error_line(call, fragments) -> None:
    """`call()` raises one ValueError, on one line, holding every fragment."""
    with pytest.raises(ValueError) as error:
        call()
    message = str(error.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


# A dataset folder holding a loading script: tests/test_dataset_registration.py
# (test_a_dataset_folder_with_a_script_is_one_clear_line) checks its one line.


def test_the_traceback_variable_shows_the_traceback(places, monkeypatch):
    """ATTENTIONSPAN_TRACEBACK=1: the one line becomes the exception itself."""
    monkeypatch.setenv("ATTENTIONSPAN_TRACEBACK", "1")
    with pytest.raises(ValueError, match="'lr' must be a finite number"):
        main(["train", "--output", str(places["tmp"] / "train"), "--lr", "inf"])


# The README's troubleshooting section quotes these messages; the rows above produce them.
README_MESSAGES = [
    "above the cap of 10,000,000 rows per split; pass --force",
    "is in use by pid N on HOST",
    "--resume continues the saved run unchanged; these options differ from it",
    "no checkpoint to resume in",
    "the run stopped before that step",
    "'lr' must be a finite number, got inf",
    "is shorter than the longest sequence of",
    "refused to unpickle it (use safetensors)",
    "training_state.pt: not a tensors-only file",
    "attentionspan_run.json: not valid JSON",
    "holds a loading script",
    "has a small input space",
    "using the prompt layout saved in",
    "ATTENTIONSPAN_TRACEBACK=1",
    "(see attentionspan COMMAND --help)",
    "is the current directory or holds it",
    "became a folder that is not empty while this process was writing it (another writer?)",
    # round 4: the folders a command owns
    "holds a finished run of attentionspan train: --overwrite to replace it",
    "holds files attentionspan eval did not write",
    "was written by attentionspan train",
    # round 3: output folders, foreign inputs, results_doc, lm-eval
    "cannot be written (",
    "cannot write PATH: no space left on the device",
    "nothing of the run was kept in OUT (it had no checkpoint yet)",
    "set ATTENTIONSPAN_CACHE to a folder you may write",
    "the same attentionspan reproduce command",
    "is smaller than its tokenizer's",
    "a dataset to train on needs the data contract's columns",
    "holds int64 values, expected string",
    "no finished sweep",
    "unknown --model_args key(s)",
    "few-shot rows",
    "must be a JSON object of options and task fields",
]


def test_the_readme_says_what_each_refusal_means():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Troubleshooting", 1)[1].split("\n## ", 1)[0]
    for message in README_MESSAGES:
        assert message in section, message


# --- the harness: model folders, caps, options checked before the work


@pytest.fixture(scope="module")
def harness_places(places):
    """Model folders each unusable in one way, a file where a folder is expected, and a
    folder where a file is expected."""
    import json

    from safetensors.torch import load_file, save_file
    from transformers import BertConfig, BertLMHeadModel

    from harness.foundation.tokenization import make_char_tokenizer

    root, model = places["tmp"], places["model"]

    def copy(name: str) -> Path:
        return Path(shutil.copytree(model, root / name))

    weights = load_file(str(model / "model.safetensors"))
    missing = copy("missing_tensor")
    save_file(
        {k: v for k, v in weights.items() if k != "model.norm.weight"},
        str(missing / "model.safetensors"),
        metadata={"format": "pt"},
    )
    nan = copy("nan_weights")
    save_file(
        {**weights, "model.norm.weight": weights["model.norm.weight"] * float("nan")},
        str(nan / "model.safetensors"),
        metadata={"format": "pt"},
    )
    short = copy("short_context")
    config = json.loads((short / "config.json").read_text())
    (short / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 16}))
    truncated = copy("truncated_weights")
    data = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(data[: len(data) // 3])
    tokenizer = make_char_tokenizer("0123456789")
    bert = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
    )
    BertLMHeadModel(bert).save_pretrained(root / "bert")
    tokenizer.save_pretrained(root / "bert")
    (root / "a_file").write_text("not a folder\n")
    (root / "a_folder").mkdir()
    return {
        **places,
        **{name: root / name for name in ("missing_tensor", "nan_weights", "short_context")},
        **{name: root / name for name in ("truncated_weights", "bert", "a_file", "a_folder")},
    }


FOLDER_ROWS = [
    (command, kind, [*base, "--model", f"{{{kind}}}"], [f"{{{kind}}}", message])
    for command, base in (("eval", EVAL), ("attention", ATTENTION), ("heads", HEADS))
    for kind, message in (
        ("bert", "is not a causal language model: its predictions change with later tokens"),
        ("missing_tensor", "model.norm.weight missing from the weights"),
        ("nan_weights", "the weight model.norm.weight holds NaN"),
        ("short_context", "the model's context (max_position_embeddings = 16"),
        ("truncated_weights", "cannot be read (corrupt, truncated or empty file?)"),
    )
] + [
    ("train", kind, [*TRAIN, "--model", f"{{{kind}}}"], [f"{{{kind}}}", message])
    for kind, message in (
        ("bert", "is not a causal language model"),
        ("missing_tensor", "model.norm.weight missing from the weights"),
        ("nan_weights", "holds NaN"),
        ("truncated_weights", "cannot be read"),
    )
]


@pytest.mark.parametrize(
    "args,fragments", [r[2:] for r in FOLDER_ROWS], ids=[f"{r[0]}-{r[1]}" for r in FOLDER_ROWS]
)
def test_a_model_folder_that_cannot_serve_is_one_line_naming_it(args, fragments, harness_places):
    args = [a.format(**harness_places) for a in args]
    status, err, _ = run_cli(args)
    assert status == 2 and len(err) == 1, (status, err)
    for fragment in fragments:
        assert fragment.format(**harness_places) in err[0], (fragment, err[0])


@pytest.mark.parametrize(
    "kind,message",
    [
        ("bert", "is not a causal language model"),
        ("missing_tensor", "model.norm.weight missing from the weights"),
        ("nan_weights", "holds NaN"),
        ("short_context", "the model's context (max_position_embeddings = 16"),
        ("truncated_weights", "cannot be read"),
        ("no_weights", "holds no weights"),
        ("few_characters", "no single token"),
    ],
)
def test_reproduce_checks_its_model_before_any_progress_line_or_file(
    kind, message, harness_places, tmp_path
):
    """As --pretrained's folder is: one line naming --model, status 2, and no settings.json
    (the pipeline's first file) nor `[reproduce]` line before it."""
    from harness.foundation.tokenization import make_char_tokenizer

    if kind in ("no_weights", "few_characters"):
        model = Path(shutil.copytree(harness_places["model"], tmp_path / kind))
        if kind == "no_weights":
            (model / "model.safetensors").unlink()
        else:  # a tokenizer without the task's letters
            for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
                (model / name).unlink(missing_ok=True)
            make_char_tokenizer("0123456789").save_pretrained(model)
    else:
        model = harness_places[kind]
    out = tmp_path / "reproduce"
    args = ["reproduce", "--model", str(model), "--config", "reversal", "--output", str(out)]
    status, err, _ = run_cli(args)
    assert status == 2 and len(err) == 1, (status, err)
    assert f"--model {str(model)!r}" in err[0] and message in err[0], err[0]
    assert not out.exists()


@pytest.mark.parametrize("command", ["eval", "attention", "heads", "train"])
def test_a_hub_name_offline_is_refused_at_once(command, monkeypatch):
    """`nope/final` is neither a folder nor a fetched model; offline, transformers spent
    50 s retrying the Hub before failing."""
    import socket

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: pytest.fail("asked the Hub"))
    base = {"eval": EVAL, "attention": ATTENTION, "heads": HEADS, "train": TRAIN}[command]
    args = [a.replace("{tmp}", "/tmp") for a in base] + ["--model", "nope/final"]
    status, err, _ = run_cli(args)
    assert status == 2 and len(err) == 1, err
    assert "model directory 'nope/final' does not exist" in err[0], err[0]


# Refused before any work: the row's command runs with every expensive entry point
# (loading or building a model, the reproduce pipeline, the baselines' data) replaced by a
# failure, so a check that comes after the work shows as that failure, not as status 2.
FAST_ROWS = [
    # --- caps: huge values that hung or filled memory
    ("train-threads-negative", [*TRAIN, "--threads", "-1"], ["--threads must be from 1 to 1024"]),
    ("train-threads-huge", [*TRAIN, "--threads", HUGE], ["--threads", "1 to 1024"]),
    ("eval-threads-negative", [*EVAL, "--threads=-2"], ["--threads must be from 1 to 1024"]),
    (
        "train-train-size-huge",
        [*TRAIN[:-2], "--train-size", HUGE],
        ["'train_size' x 'epochs'", "<= 10,000,000 (the cap)", "--max-steps"],
    ),
    ("train-train-size-past-index", [*TRAIN, "--train-size", "9" * 30], ["'train_size'", "cap"]),
    ("train-max-steps-huge", [*TRAIN, "--max-steps", HUGE], ["'max_steps' must be <= 10,000,000"]),
    ("train-epochs-huge", [*TRAIN, "--epochs", HUGE], ["'epochs' must be <= 10,000 (the cap)"]),
    ("train-eval-size-huge", [*TRAIN, "--eval-size", HUGE], ["'eval_size' must be <= 100,000"]),
    ("train-fewshot-huge", [*TRAIN, "--num-fewshot", HUGE], ["num_fewshot must be <= 1,000"]),
    ("train-batch-size-huge", [*TRAIN, "--batch-size", HUGE], ["'batch_size' must be <= 65,536"]),
    (
        "train-scratch-layers-huge",
        [*TRAIN, "--scratch-num-layers", HUGE],
        ["--scratch-num-layers", "<= 1,024 (the cap)"],
    ),
    (
        "train-scratch-hidden-huge",
        [*TRAIN, "--scratch-hidden-size", "65536", "--scratch-num-heads", "4"],
        ["parameters", "must be <= 1,000,000,000 (the cap"],
    ),
    ("train-scratch-layers-0", [*TRAIN, "--scratch-num-layers", "0"], ["--scratch-num-layers"]),
    ("train-scratch-charset-empty", [*TRAIN, "--scratch-charset", ""], ["--scratch-charset"]),
    (
        "train-scratch-charset-control",
        [*TRAIN, "--scratch-charset", "ab\x01c"],
        ["--scratch-charset", "non-printable", "U+0001"],
    ),
    ("train-output-a-file", [*TRAIN, "--output", "{a_file}"], ["'output'", "is a file"]),
    ("train-output-under-a-file", [*TRAIN, "--output", "{a_file}/run"], ["lies under the file"]),
    ("eval-n-huge", [*EVAL, "-n", HUGE], ["-n/--num must be <= 100,000 (the cap)"]),
    ("eval-fewshot-huge", [*EVAL, "--num-fewshot", HUGE], ["num_fewshot must be <= 1,000"]),
    ("eval-batch-size-huge", [*EVAL, "--batch-size", HUGE], ["--batch-size must be <= 65,536"]),
    (
        "eval-duplicate-configs",
        [*EVAL, "--configs", "reversal_id", "reversal_ood", "reversal_id"],
        ["--configs lists 'reversal_id' twice"],
    ),
    ("eval-output-a-file", [*EVAL, "--output", "{a_file}"], ["--output", "is a file"]),
    ("attention-n-huge", [*ATTENTION, "-n", HUGE], ["-n/--num must be <= 100,000 (the cap)"]),
    (
        "attention-duplicate-configs",
        [*ATTENTION, "--configs", "reversal_id", "reversal_id"],
        ["--configs lists 'reversal_id' twice"],
    ),
    ("attention-output-a-file", [*ATTENTION, "--output", "{a_file}"], ["--output", "is a file"]),
    ("heads-n-huge", [*HEADS, "-n", HUGE], ["-n/--num must be <= 100,000 (the cap)"]),
    ("heads-top-0", [*HEADS, "--top", "0"], ["--top must be >= 1, got 0"]),
    ("heads-top-negative", [*HEADS, "--top=-3"], ["--top must be >= 1"]),
    ("heads-threshold-negative", [*HEADS, "--threshold=-0.5"], ["--threshold must be in [0, 1)"]),
    ("heads-threshold-inf", [*HEADS, "--threshold", "inf"], ["--threshold must be in [0, 1)"]),
    (
        "heads-shift-outside",
        [*HEADS, "--shift", "500"],
        ["--shift 500 is outside every sequence of 'reversal_id'"],
    ),
    ("heads-shift-huge", [*HEADS, "--shift", HUGE], ["--shift must be <= 100,000"]),
    ("heads-output-a-folder", [*HEADS, "--output", "{a_folder}"], ["--output", "is a folder"]),
    (
        "reproduce-counts-past-heads",
        [*REPRODUCE, "--counts", "1", "500"],
        ["--counts 500 is more than the 8 attention heads"],
    ),
    ("reproduce-counts-twice", [*REPRODUCE, "--counts", "2", "2"], ["'counts' lists 2 twice"]),
    (
        "reproduce-head-threshold-1",
        [*REPRODUCE, "--head-threshold", "1"],
        ["'head_threshold' must be in [0, 1)"],
    ),
    (
        "reproduce-head-threshold-negative",
        [*REPRODUCE, "--head-threshold=-0.1"],
        ["'head_threshold' must be in [0, 1)"],
    ),
    (
        "reproduce-thresholds-2",
        [*REPRODUCE, "--mode", "conditional", "--thresholds", "2"],
        ["'thresholds' must be in"],
    ),
    ("reproduce-shift-outside", [*REPRODUCE, "--shift", "500"], ["'shift' 500 is outside"]),
    ("reproduce-num-test-huge", [*REPRODUCE, "--num-test", HUGE], ["'num_test' must be <= 1"]),
    ("reproduce-threads-negative", [*REPRODUCE, "--threads", "-1"], ["--threads must be from 1"]),
    ("reproduce-output-a-file", [*REPRODUCE[:-1], "{a_file}"], ["'output'", "is a file"]),
    ("baselines-seeds-huge", [*BASELINES, "--seeds", HUGE], ["--seeds must be <= 100 (the cap)"]),
    ("baselines-epochs-huge", [*BASELINES, "--epochs", HUGE], ["--epochs must be <= 10,000"]),
    ("baselines-num-train-huge", [*BASELINES, "--num-train", HUGE], ["--num-train must be <="]),
    ("baselines-batch-size-0", [*BASELINES, "--batch-size", "0"], ["--batch-size must be >= 1"]),
    (
        "baselines-duplicate-models",
        [*BASELINES, "--models", "lstm", "lstm"],
        ["--models lists 'lstm' twice"],
    ),
    ("baselines-output-a-folder", [*BASELINES[:-1], "{a_folder}"], ["--output", "is a folder"]),
    ("baselines-threads-negative", [*BASELINES, "--threads", "-1"], ["--threads must be from 1"]),
]


@pytest.fixture
def no_work(monkeypatch):
    import harness.baselines.data
    import harness.foundation.models
    import harness.pipeline.reproduce

    def work(*args, **kwargs):
        raise AssertionError("the work started before the refusal")

    monkeypatch.setattr(harness.foundation.models, "load_model", work)
    monkeypatch.setattr(harness.foundation.models, "build_scratch", work)
    monkeypatch.setattr(harness.pipeline.reproduce, "reproduce", work)
    monkeypatch.setattr(harness.baselines.data, "load_split", work)


@pytest.mark.parametrize(
    "args,fragments", [r[1:] for r in FAST_ROWS], ids=[r[0] for r in FAST_ROWS]
)
def test_a_bad_value_is_refused_before_the_work(args, fragments, harness_places, no_work):
    import torch

    threads = torch.get_num_threads()
    args = [a.format(**harness_places) for a in args]
    try:
        status, err, _ = run_cli(args)
    finally:
        torch.set_num_threads(threads)
    assert status == 2 and len(err) == 1, (status, err)
    for fragment in fragments:
        assert fragment in err[0], (fragment, err[0])


def test_baselines_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["baselines", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for default in ("default: 100,000", "default: 10;", "default: 50;", "default: 5e-4;"):
        assert default in text, default
    assert "default: 3)" in text and "default: 1234)" in text


def _harness_api_rows():
    from harness.attention.analysis import AnalysisConfig
    from harness.evaluation.evaluate import EvalConfig
    from harness.foundation.caps import MAX_INSTANCES
    from harness.foundation.data import PromptConfig
    from harness.foundation.models import ScratchConfig
    from harness.foundation.threads import choose_threads
    from harness.pipeline.settings import ReproduceConfig
    from harness.training.train import TrainConfig

    return [
        ("train-batch-size-str", lambda: TrainConfig(batch_size="4"), ["'batch_size'", "integer"]),
        ("train-epochs-float", lambda: TrainConfig(epochs=1.5), ["'epochs' must be an integer"]),
        ("train-eval-size-0", lambda: TrainConfig(eval_size=0), ["'eval_size' must be >= 1"]),
        ("train-lr-str", lambda: TrainConfig(lr="1e-3"), ["'lr' must be a number"]),
        ("train-output-empty", lambda: TrainConfig(output=""), ["'output' must be a non-empty"]),
        ("train-scratch-dict", lambda: TrainConfig(scratch={"num_layers": -1}), ["num_layers"]),
        ("train-prompt-dict", lambda: TrainConfig(prompt={"num_fewshot": 10**6}), ["<= 1,000"]),
        ("eval-num-float", lambda: EvalConfig(num=2.5), ["-n/--num must be an integer"]),
        ("eval-num-huge", lambda: EvalConfig(num=MAX_INSTANCES + 1), ["<= 100,000 (the cap)"]),
        ("eval-configs-twice", lambda: EvalConfig(configs=["a", "a"]), ["lists 'a' twice"]),
        ("eval-output-empty", lambda: EvalConfig(output=""), ["--output must not be empty"]),
        ("analysis-num-0", lambda: AnalysisConfig(num=0), ["-n/--num must be >= 1"]),
        ("analysis-batch-str", lambda: AnalysisConfig(batch_size="8"), ["--batch-size"]),
        ("prompt-fewshot-bool", lambda: PromptConfig(num_fewshot=True), ["num_fewshot"]),
        ("scratch-heads-0", lambda: ScratchConfig(num_heads=0), ["--scratch-num-heads"]),
        ("scratch-seed-negative", lambda: ScratchConfig(seed=-1), ["--scratch-seed"]),
        (
            "reproduce-counts-huge-list",
            lambda: ReproduceConfig(model="m", counts=list(range(1, 2000))),
            ["'counts' must list at most 1,000 values"],
        ),
        (
            "reproduce-threads-huge",
            lambda: ReproduceConfig(model="m", threads=10**6),
            ["'threads' must be from 1 to 1024"],
        ),
        ("threads-str", lambda: choose_threads("2"), ["--threads must be an integer"]),
    ]


HARNESS_API_IDS = [
    "train-batch-size-str",
    "train-epochs-float",
    "train-eval-size-0",
    "train-lr-str",
    "train-output-empty",
    "train-scratch-dict",
    "train-prompt-dict",
    "eval-num-float",
    "eval-num-huge",
    "eval-configs-twice",
    "eval-output-empty",
    "analysis-num-0",
    "analysis-batch-str",
    "prompt-fewshot-bool",
    "scratch-heads-0",
    "scratch-seed-negative",
    "reproduce-counts-huge-list",
    "reproduce-threads-huge",
    "threads-str",
]


@pytest.mark.parametrize("row_id", HARNESS_API_IDS)
def test_a_bad_harness_config_is_one_value_error_line(row_id):
    rows = {row[0]: row[1:] for row in _harness_api_rows()}
    assert list(rows) == HARNESS_API_IDS
    assert_one_value_error_line(*rows[row_id])


# --- an output that cannot be written, refused before the work

# (id, arguments, fragment naming the path). Read-only and full disks are simulated by the
# write of harness.foundation.outputs' probe failing (tests run as root, which passes every
# permission
# bit); a file where a folder should be is real.
UNWRITABLE_ROWS = [
    ("train", [*TRAIN[:4], "{tmp}/ro/train", *TRAIN[5:]], "'output' '{tmp}/ro/train'"),
    ("eval", [*EVAL, "--output", "{tmp}/ro/eval"], "--output '{tmp}/ro/eval'"),
    ("attention", [*ATTENTION, "--output", "{tmp}/ro/att"], "--output '{tmp}/ro/att'"),
    ("heads", [*HEADS, "--output", "{tmp}/ro/heads.json"], "--output '{tmp}/ro/heads.json'"),
    ("heads-default-output", HEADS, "--output 'heads.json'"),
    ("reproduce", [*REPRODUCE[:-1], "{tmp}/ro/repro"], "--output '{tmp}/ro/repro'"),
    ("baselines", [*BASELINES[:-1], "{tmp}/ro/b.json"], "--output '{tmp}/ro/b.json'"),
    ("models-fetch", ["models", "fetch", "smollm2-135m-instruct"], "the model cache"),
]
UNWRITABLE_REASONS = {
    "read-only": (30, "read-only file system"),  # EROFS
    "full": (28, "no space left on the device"),  # ENOSPC
}


@pytest.mark.parametrize("why", list(UNWRITABLE_REASONS))
@pytest.mark.parametrize(
    "args,fragment", [r[1:] for r in UNWRITABLE_ROWS], ids=[r[0] for r in UNWRITABLE_ROWS]
)
def test_an_output_that_cannot_be_written_is_refused_before_the_work(
    args, fragment, why, harness_places, no_work, monkeypatch
):
    import os

    import harness.foundation.models
    import harness.foundation.outputs

    code, reason = UNWRITABLE_REASONS[why]

    class FailingWrite:  # `os` for harness.foundation.outputs: only its probe writes
        def __getattr__(self, name):
            return getattr(os, name)

        def write(self, fd, data):
            raise OSError(code, os.strerror(code))

    def fetch(*args, **kwargs):
        raise AssertionError("the download started before the refusal")

    monkeypatch.setattr(harness.foundation.outputs, "os", FailingWrite())
    monkeypatch.setattr(harness.foundation.models, "fetch", fetch)
    monkeypatch.setenv("ATTENTIONSPAN_CACHE", str(harness_places["tmp"] / "ro" / "cache"))
    status, err, _ = run_cli([a.format(**harness_places) for a in args])
    assert status == 2 and len(err) == 1, (status, err)
    for text in (fragment.format(**harness_places), "cannot be written", reason):
        assert text in err[0], (text, err[0])
    assert not (harness_places["tmp"] / "ro").exists()


UNDER_A_FILE_ROWS = [
    ("train", [*TRAIN[:4], "{a_file}/run", *TRAIN[5:]]),
    ("eval", [*EVAL, "--output", "{a_file}/eval"]),
    ("attention", [*ATTENTION, "--output", "{a_file}/att"]),
    ("heads", [*HEADS, "--output", "{a_file}/heads.json"]),
    ("reproduce", [*REPRODUCE[:-1], "{a_file}/repro"]),
    ("baselines", [*BASELINES[:-1], "{a_file}/b.json"]),
]


@pytest.mark.parametrize(
    "args", [r[1] for r in UNDER_A_FILE_ROWS], ids=[r[0] for r in UNDER_A_FILE_ROWS]
)
def test_an_output_under_a_file_is_refused_before_the_work(args, harness_places, no_work):
    status, err, _ = run_cli([a.format(**harness_places) for a in args])
    assert status == 2 and len(err) == 1, (status, err)
    assert "a_file" in err[0] and ("lies under the file" in err[0] or "is a file" in err[0])


# --- foreign inputs: a model whose vocabulary is smaller than its tokenizer, a
# dataset of other columns or types, and lm-eval's options (refused before the work)


@pytest.fixture(scope="module")
def foreign_places(places):
    """A model folder whose tokenizer is larger than its embeddings, and dataset folders
    with other columns, a column of numbers, a null where text belongs."""
    import string

    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    from harness.foundation.tokenization import make_char_tokenizer
    from tests.tiny_models import tiny_config

    root = places["tmp"] / "foreign"
    tokenizer = make_char_tokenizer(string.printable)
    model = AutoModelForCausalLM.from_config(tiny_config("llama", tokenizer, vocab_size=20))
    model.save_pretrained(root / "small_vocab")
    tokenizer.save_pretrained(root / "small_vocab")
    datasets = {
        "other_columns": [{"question": "abc=", "answer": "cba"}],
        "number_prompts": [{"task": "reversal", "prompt": 12, "target": 21, "reference": [[0]]}],
        "null_targets": [{"task": "reversal", "prompt": "ab=", "target": None, "reference": []}],
    }
    for name, rows in datasets.items():
        (root / name).mkdir(parents=True)
        Dataset.from_list(rows * 4).to_parquet(str(root / name / "train.parquet"))
    return {**places, **{name: root / name for name in ("small_vocab", *datasets)}}


VOCABULARY = "the model's vocabulary (20 tokens: vocab_size in its config) is smaller than"
FOREIGN_ROWS = [
    ("train-small-vocabulary", [*TRAIN, "--model", "{small_vocab}"], [VOCABULARY, "ids 0 to 19"]),
    ("eval-small-vocabulary", [*EVAL, "--model", "{small_vocab}"], [VOCABULARY, "ids 0 to 19"]),
    ("attention-small-vocabulary", [*ATTENTION, "--model", "{small_vocab}"], [VOCABULARY]),
    ("heads-small-vocabulary", [*HEADS, "--model", "{small_vocab}"], [VOCABULARY]),
]
# refused before any model is loaded or built (the `no_work` fixture)
FOREIGN_DATASET_ROWS = [
    (
        "train-dataset-other-columns",
        [*TRAIN, "--dataset", "{other_columns}"],
        ["--dataset '{other_columns}' lacks the column(s) task, prompt, target, reference"]
        + ["it has: question, answer"],
    ),
    (
        "train-dataset-number-prompts",
        [*TRAIN, "--dataset", "{number_prompts}"],
        ["--dataset '{number_prompts}': column 'prompt' holds int64 values, expected string"],
    ),
    (
        "train-dataset-null-targets",
        [*TRAIN, "--dataset", "{null_targets}"],
        ["--dataset '{null_targets}', row 0: column 'target' must be a string, got NoneType"],
    ),
]


@pytest.mark.parametrize(
    "args,fragments", [r[1:] for r in FOREIGN_ROWS], ids=[r[0] for r in FOREIGN_ROWS]
)
def test_a_model_smaller_than_its_tokenizer_is_one_line(args, fragments, foreign_places):
    status, err, _ = run_cli([a.format(**foreign_places) for a in args])
    assert status == 2 and len(err) == 1, (status, err)
    assert f"model '{foreign_places['small_vocab']}'" in err[0], err[0]
    for fragment in fragments:
        assert fragment in err[0], (fragment, err[0])


@pytest.mark.parametrize(
    "args,fragments",
    [r[1:] for r in FOREIGN_DATASET_ROWS],
    ids=[r[0] for r in FOREIGN_DATASET_ROWS],
)
def test_a_foreign_dataset_is_refused_before_the_model(args, fragments, foreign_places, no_work):
    status, err, _ = run_cli([a.format(**foreign_places) for a in args])
    assert status == 2 and len(err) == 1, (status, err)
    for fragment in fragments:
        assert fragment.format(**foreign_places) in err[0], (fragment, err[0])


def _foreign_api_rows():
    from datasets import Dataset

    from harness.foundation.data import DatasetSource, instance_from_row
    from lm_eval_tasks import dataset

    other = Dataset.from_list([{"question": "a", "answer": "b"}])
    row = {"task": "reversal", "prompt": "ab=", "target": "ba", "reference": "[[1], [0]]"}
    return [
        ("dataset-source-columns", lambda: DatasetSource(other), ["lacks the column(s) task"]),
        ("instance-row-types", lambda: instance_from_row(row), ["'reference' must be a list"]),
        (
            "lm-eval-attnspan-a-list",
            lambda: dataset.preflight({"attnspan": []}),
            ["--metadata 'attnspan' must be a JSON object", "got []"],
        ),
        (
            "lm-eval-attnspan-zero",
            lambda: dataset.custom_dataset("reversal_id", attnspan=0),
            ["attnspan_reversal_id: --metadata 'attnspan' must be a JSON object", "got 0"],
        ),
        (
            "lm-eval-num-fewshot-past-the-pool",
            lambda: dataset.preflight_tasks(["reversal_id"], {"attnspan": {"fewshot_size": 1}}, 3),
            ["--num_fewshot 3 is more than the 1 few-shot rows", "allowed: --num_fewshot <= 1"],
        ),
    ]


FOREIGN_API_IDS = [
    "dataset-source-columns",
    "instance-row-types",
    "lm-eval-attnspan-a-list",
    "lm-eval-attnspan-zero",
    "lm-eval-num-fewshot-past-the-pool",
]


@pytest.mark.parametrize("row_id", FOREIGN_API_IDS)
def test_a_foreign_input_to_the_api_is_one_value_error_line(row_id):
    rows = {row[0]: row[1:] for row in _foreign_api_rows()}
    assert list(rows) == FOREIGN_API_IDS
    assert_one_value_error_line(*rows[row_id])


# --- folders the tool owns (the manifest rule), and the fourth round -----------------------
# Every command that writes an --output folder: (arguments without --output, a file it writes
# there, whether a rerun into its own folder continues without a flag).
OWNED_FOLDERS = {
    "train": (["train", "--model", "scratch", "--max-steps", "1"], "log.jsonl", False),
    "eval": (EVAL, "results.json", False),
    "attention": (ATTENTION, "attention.md", False),
    "reproduce": (REPRODUCE[:-2], "report.md", True),
    "supervision": (["supervision", "--tasks", "reversal"], "report.md", True),
}


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _claimed(command: str, folder: Path, *names: str) -> None:
    """`folder` as `command` leaves it: its files and its manifest."""
    from attentionspan_datasets.ownership import write_manifest

    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_text(f"{command} wrote this\n")
    write_manifest(folder, command, names)


def _run_until_the_work(args: list[str]) -> tuple[int | None, list[str]]:
    """(status, stderr) of a refusal; (None, []) when the command reached its work (the
    `no_work` fixture's AssertionError)."""
    try:
        status, err, _ = run_cli(args)
    except AssertionError as error:
        assert "the work started" in str(error), error
        return None, []
    return status, err


@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "overwrite"])
@pytest.mark.parametrize("command", list(OWNED_FOLDERS))
def test_a_users_folder_is_refused_and_kept_byte_identical(
    command, overwrite, harness_places, no_work, tmp_path
):
    """A folder of a user's files, one of them named as the command names its own: refused
    in one line naming the folder, before any work, even with --overwrite; nothing changes."""
    base, own_file, _ = OWNED_FOLDERS[command]
    folder = tmp_path / "mine"
    (folder / "sub").mkdir(parents=True)
    (folder / own_file).write_text("the user's, not the tool's\n")
    (folder / "notes.txt").write_text("notes\n")
    (folder / "sub" / "data.csv").write_text("1,2\n")
    before = _snapshot(folder)
    args = [a.format(**harness_places) for a in base] + ["--output", str(folder)]
    status, err = _run_until_the_work(args + ["--overwrite"] * overwrite)
    assert status == 2 and len(err) == 1, (status, err)
    assert f"--output {str(folder)!r} holds files attentionspan {command} did not write" in err[0]
    assert "notes.txt" in err[0] and "new or empty folder" in err[0]
    assert _snapshot(folder) == before
    assert sorted(p.name for p in folder.iterdir()) == sorted(["notes.txt", own_file, "sub"])


@pytest.mark.parametrize("command", list(OWNED_FOLDERS))
def test_a_folder_of_another_command_is_refused(command, harness_places, no_work, tmp_path):
    base, _, _ = OWNED_FOLDERS[command]
    other = "eval" if command != "eval" else "train"
    folder = tmp_path / "other"
    _claimed(other, folder, "results.json")
    before = _snapshot(folder)
    for extra in ([], ["--overwrite"]):
        args = [a.format(**harness_places) for a in base] + ["--output", str(folder), *extra]
        status, err = _run_until_the_work(args)
        assert status == 2 and len(err) == 1, (status, err)
        assert f"was written by attentionspan {other}; give another --output" in err[0]
        assert _snapshot(folder) == before


@pytest.mark.parametrize("command", list(OWNED_FOLDERS))
def test_its_own_folder_continues_or_needs_overwrite(command, harness_places, no_work, tmp_path):
    """Its own folder: reproduce and supervision continue (a rerun resumes); train, eval and
    attention refuse without --overwrite, naming the ways out. --overwrite moves what the
    command wrote aside, and only that (a file the user put there stays), and puts it back
    when the work fails (here: the work is refused as it starts)."""
    base, own_file, continues = OWNED_FOLDERS[command]
    folder = tmp_path / "own"
    _claimed(command, folder, own_file)
    if command == "train":  # an interrupted run: a checkpoint, known by its own files
        (folder / "checkpoint-1").mkdir()
        (folder / "checkpoint-1" / "attentionspan_run.json").write_text("{}")
        (folder / "checkpoint-1" / "training_state.pt").write_text("state")
    (folder / "notes.txt").write_text("the user's\n")
    args = [a.format(**harness_places) for a in base] + ["--output", str(folder)]
    before = _snapshot(folder)
    status, err = _run_until_the_work(args)
    if continues:
        assert status is None, err  # the work started: the folder was its own
    else:
        assert status == 2 and len(err) == 1, (status, err)
        assert f"--output {str(folder)!r} holds" in err[0], err[0]
        assert "--overwrite to replace it, or another --output" in err[0]
        if command == "train":
            assert "an interrupted run" in err[0] and "--resume to continue it" in err[0]
        assert _snapshot(folder) == before
    seen = []

    def work(*args, **kwargs):
        seen.append(sorted(p.name for p in folder.iterdir()))
        raise AssertionError("the work started before the refusal")

    import harness.foundation.models
    import harness.pipeline.reproduce

    no_work = pytest.MonkeyPatch()
    patched = [
        (harness.foundation.models, "load_model"),
        (harness.foundation.models, "build_scratch"),
        (harness.pipeline.reproduce, "reproduce"),
    ]
    for module, name in patched:
        no_work.setattr(module, name, work)
    try:
        status, err = _run_until_the_work(args + ["--overwrite"])
    finally:
        no_work.undo()
    assert status is None, err
    # train, eval, attention and reproduce load their model before the folder is touched
    if command == "supervision":
        assert own_file not in seen[0] and "notes.txt" in seen[0]  # aside while the work ran
    else:
        assert own_file in seen[0] and not any(".attentionspan-replaced" in n for n in seen[0])
    assert _snapshot(folder) == before  # the work failed: the earlier run is back


def test_a_finished_train_run_is_not_replaced_by_a_plain_train(places, tmp_path):
    """The issue's first case: a second `train` into a finished run (another --seed)."""
    run = Path(shutil.copytree(places["run"], tmp_path / "run"))
    (run / "final").mkdir()
    shutil.copy(run / "checkpoint-1" / "attentionspan_run.json", run / "final")
    before = _snapshot(run)
    status, err, _ = run_cli([*TRAIN[:4], str(run), "--max-steps", "2", "--seed", "8"])
    assert status == 2 and len(err) == 1, err
    assert "holds a finished run of attentionspan train: --overwrite to replace it" in err[0]
    assert _snapshot(run) == before


def test_resume_continues_a_run_made_before_manifests(places, tmp_path):
    """A run folder from before the manifest (a checkpoint's run file says whose) resumes."""
    run = Path(shutil.copytree(places["run"], tmp_path / "run"))
    assert not (run / ".attentionspan.json").exists()
    status, err, out = run_cli(["train", "--output", str(run), "--resume", "--no-progress"])
    assert status == 0, err
    assert (run / "final").is_dir() and (run / ".attentionspan.json").is_file()


@pytest.mark.parametrize(
    "command,args,own",
    [
        ("heads", HEADS, '{"scores": [], "per_row": [], "order": []}'),
        ("baselines", BASELINES[:-2], '{"settings": {}, "runs": []}'),
    ],
)
def test_an_output_file_of_a_user_is_refused_and_its_own_replaced(
    command, args, own, harness_places, no_work, tmp_path
):
    """heads and baselines write one file: a user's file there is refused (it would be
    replaced), byte-identical; the command's own (a ranking, a baselines record) is not."""
    target = tmp_path / "out.json"
    target.write_text("my own notes\n")
    argv = [a.format(**harness_places) for a in args] + ["--output", str(target)]
    status, err = _run_until_the_work(argv)
    assert status == 2 and len(err) == 1, err
    assert f"--output {str(target)!r} is a file attentionspan {command} did not write" in err[0]
    assert target.read_text() == "my own notes\n"
    target.write_text(own)
    assert _run_until_the_work(argv)[0] is None


def test_a_refused_claim_leaves_no_folder(harness_places, tmp_path):
    """A new --output whose run is refused after the claim (the model cannot serve): no
    folder, no manifest is left behind."""
    folder = tmp_path / "new" / "eval"
    args = [*EVAL, "--model", "{bert}", "--output", str(folder)]
    status, err, _ = run_cli([a.format(**harness_places) for a in args])
    assert status == 2 and len(err) == 1
    assert not (tmp_path / "new").exists()


@pytest.fixture(scope="module")
def round4_places(harness_places):
    """A model folder whose config gives a negative head count, and one without weights."""
    import json

    root, model = harness_places["tmp"], harness_places["model"]
    negative = Path(shutil.copytree(model, root / "negative_heads"))
    config = json.loads((negative / "config.json").read_text())
    (negative / "config.json").write_text(json.dumps({**config, "num_key_value_heads": -1}))
    no_weights = Path(shutil.copytree(model, root / "no_weights"))
    (no_weights / "model.safetensors").unlink()
    return {**harness_places, "negative_heads": negative, "no_weights": no_weights}


# (id, arguments, fragments, a folder that must not exist afterwards). Each refused in one
# line before the work, nothing written.
ROUND4_CLI_ROWS = [
    (
        "eval-max-memory-400-nines",
        [*EVAL, "--device-map", "auto", "--max-memory", "cpu=" + "9" * 400],
        ["--max-memory cpu must be at most 1PiB"],
        None,
    ),
    (
        "reproduce-train-steps-below-the-curriculum",
        ["reproduce", "--quick", "--tasks", "value_assignment", "--train-steps", "3"],
        ["--train-steps 3 is fewer than the 1500 steps", "value_assignment", ">= 1500"],
        "{tmp}/r4-quick",
    ),
    (
        "train-curriculum-superscript-steps",
        [*TRAIN, "--config", "value_assignment_id", "--curriculum", "³:min_table_size=1"],
        ["'curriculum' expects STEPS:KEY=VALUE", "³"],
        "{tmp}/train",
    ),
    (
        "eval-negative-heads-in-config",
        [*EVAL, "--model", "{negative_heads}", "--output", "{tmp}/r4-neg"],
        ["negative_heads", "config.json's 'num_key_value_heads' is -1", ">= 1"],
        "{tmp}/r4-neg",
    ),
    (
        "reproduce-pretrained-without-weights",
        ["reproduce", "--pretrained", "{no_weights}", "--tasks", "reversal"],
        ["--pretrained", "no_weights", "model.safetensors"],
        "{tmp}/r4-pretrained",
    ),
    (
        "reproduce-pretrained-bert",
        ["reproduce", "--pretrained", "{bert}", "--tasks", "reversal"],
        ["--pretrained", "bert"],
        "{tmp}/r4-pretrained",
    ),
    (
        "train-resume-and-overwrite",
        [*TRAIN, "--resume", "--overwrite"],
        ["--resume continues the run", "--overwrite replaces it: give one of them"],
        "{tmp}/train",
    ),
]


@pytest.mark.parametrize(
    "args,fragments,absent",
    [r[1:] for r in ROUND4_CLI_ROWS],
    ids=[r[0] for r in ROUND4_CLI_ROWS],
)
def test_the_fourth_round_is_refused_in_one_line(args, fragments, absent, round4_places):
    args = [a.format(**round4_places) for a in args]
    if args[0] == "reproduce":
        args += ["--output", absent.format(**round4_places)]
    status, err, _ = run_cli(args)
    assert status == 2 and len(err) == 1, (status, err)
    for fragment in fragments:
        assert fragment in err[0], (fragment, err[0])
    if absent:
        assert not Path(absent.format(**round4_places)).exists()  # no settings.json, nothing


def _round4_api_rows():
    import datasets
    import torch

    import attentionspan_datasets  # noqa: F401  (registers "attentionspan")
    from harness.attention.setting import Setting
    from harness.engine.capture import Intervention

    def load(**kwargs):
        return lambda: datasets.load_dataset("attentionspan", "reversal_id", **kwargs)

    sizes = {"num_train": 0, "num_validation": 2, "num_test": 2}
    return [
        ("setting-unknown-key", lambda: Setting.from_dict({"colour": 1}), ["no field 'colour'"]),
        (
            "intervention-levels-text",
            lambda: Intervention(torch.ones(1, 1, dtype=torch.bool), mode="restore", levels="high"),
            ["Intervention.levels must be a tensor of numbers", "'high'"],
        ),
        ("load-revision", load(revision="v1"), ["'revision' 'v1' is not accepted"]),
        ("load-num-proc-0", load(num_proc=0), ["'num_proc' must be an integer >= 1", "got 0"]),
        (
            "load-train-split-of-no-rows",
            load(split="train", **sizes),
            ["split 'train' was asked for, but 'num_train' is 0", "num_train >= 1"],
        ),
    ]


ROUND4_API_IDS = [
    "setting-unknown-key",
    "intervention-levels-text",
    "load-revision",
    "load-num-proc-0",
    "load-train-split-of-no-rows",
]


@pytest.mark.parametrize("row_id", ROUND4_API_IDS)
def test_the_fourth_round_of_the_api_is_one_value_error_line(row_id, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    rows = {row[0]: row[1:] for row in _round4_api_rows()}
    assert list(rows) == ROUND4_API_IDS
    assert_one_value_error_line(*rows[row_id])


def test_resume_refuses_a_broken_log_line_before_the_checkpoint(places, tmp_path):
    run = Path(shutil.copytree(places["run"], tmp_path / "run"))
    log = run / "log.jsonl"
    log.write_text('{"step": 0, "lo\n{"step": 1}\n')  # a broken line, a whole one after
    before = _snapshot(run)
    status, err, _ = run_cli(["train", "--output", str(run), "--resume", "--no-progress"])
    assert status == 2 and len(err) == 1, err
    assert f"{log} line 1 is not a JSON record, and whole lines follow it" in err[0]
    assert _snapshot(run) == before


def test_results_doc_check_with_versions_a_number_is_one_line(tmp_path, capsys):
    import json

    from harness.commands import results_doc

    digest = tmp_path / "d.json"
    digest.write_text(json.dumps({"meta": {"versions": 3}, "tasks": {"reversal": {}}}))
    assert results_doc.main([str(tmp_path), "--check", str(digest)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'meta.versions' must be a JSON object, got 3" in err[0], err


@pytest.mark.parametrize(
    "argv,fragment",
    [
        ([], "the following arguments are required: {{run,check,render}}"),
        (["run", "--output", "x"], "required: --date, --machine"),
        (["render", "--digest", "{torn}"], "--digest '{torn}': not valid JSON (torn or cut"),
        (["check", "--output", "{tmp}/sc", "--digest", "{torn}"], "--digest '{torn}'"),
        # no figures: refused before the steps (an hour of training), not after them
        (
            ["check", "--output", "{tmp}/sc", "--digest", "{empty}"],
            "--digest '{empty}' is not a whole scratch_doc digest: its 'figures' lack train, "
            "eval, attention, heads, lm_eval, model_sha256, parameters",
        ),
    ],
    ids=[
        "no-action",
        "run-missing-options",
        "render-torn-digest",
        "check-torn-digest",
        "check-no-figures",
    ],
)
def test_scratch_doc_refuses_in_one_line(argv, fragment, tmp_path, capsys):
    from harness.commands import scratch_doc

    torn = tmp_path / "torn.json"
    torn.write_text('{"meta": {}, "figu')
    empty = tmp_path / "empty.json"
    empty.write_text('{"meta": {}, "figures": {}}')
    places = {"torn": torn, "tmp": tmp_path, "empty": empty}
    try:
        status = scratch_doc.main([a.format(**places) for a in argv])
    except SystemExit as done:
        status = done.code
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith("attentionspan scratch-doc") and "error:" in err[0]
    assert fragment.format(**places) in err[0], err[0]
    assert not (tmp_path / "sc").exists()  # no step ran


def test_scratch_doc_render_without_the_pages_is_one_line(tmp_path, monkeypatch):
    """From an installed package the pages are not there: said before anything is read."""
    from harness.report import scratch_doc

    monkeypatch.setattr(scratch_doc, "REPO", tmp_path)
    with pytest.raises(ValueError, match="README.md, docs/results.md, docs/usage_analysis.md"):
        scratch_doc.check_pages(tmp_path)


def test_a_refusal_in_a_launch_is_printed_by_the_main_process_alone(monkeypatch):
    """The other processes of an `accelerate launch` refuse alike, with the same status and
    no line (after a grace that lets the main process print first)."""
    from attentionspan_datasets import guard

    monkeypatch.setattr(guard, "OTHER_RANK_GRACE_S", 0.0)
    args = ["train", "--model", "scratch", "--lr", "nan", "--output", "unused"]
    monkeypatch.setenv("RANK", "1")
    assert run_cli(args)[:2] == (2, [])
    monkeypatch.setenv("RANK", "0")
    status, err, _ = run_cli(args)
    assert status == 2 and len(err) == 1 and "'lr' must be a finite number" in err[0]


DEEP_JSON = '{"a": ' * 100_000 + "1" + "}" * 100_000  # json's decoder recursed on it


@pytest.mark.parametrize(
    "args, deep",
    [
        (["results-doc", "{tmp}", "--check", "{tmp}/deep.json"], "deep.json"),
        (["scratch-doc", "render", "--digest", "{tmp}/deep.json"], "deep.json"),
        (["baselines-table", "{tmp}/deep.json"], "deep.json"),
        (
            [
                "supervision-doc",
                "{tmp}",
                *("--command", "c", "--machine", "m", "--date", "2026-01-01"),
                *("--digest", "{tmp}/digest.json", "--doc", "{tmp}/doc.md"),
            ],
            "task/results.json",
        ),
        (["export", "reversal_id", "--out", "{tmp}/export"], "export/.attentionspan.json"),
        (
            [
                *("train", "--model", "scratch", "--config", "reversal_id"),
                *("--attention-supervision", "top:1"),
                *("--supervision-ranking", "{tmp}/heads.json"),
                *("--output", "{tmp}/train"),
            ],
            "heads.json",
        ),
    ],
    ids=["digest", "scratch-digest", "baselines", "supervision", "manifest", "heads"],
)
def test_a_file_nested_absurdly_deep_is_one_line_naming_it(args, deep, tmp_path):
    for name in ("deep.json", "task/results.json", "export/.attentionspan.json", "heads.json"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(DEEP_JSON)
    (tmp_path / "doc.md").write_text("no block yet\n")
    code, err, _ = run_cli([a.format(tmp=tmp_path) for a in args])
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"attentionspan {args[0]}: error: "), err[0]
    assert str(tmp_path / deep) in err[0], err[0]
    says = "is not a manifest" if ".attentionspan" in deep else "nested more than 100"
    assert says in err[0], err[0]


TORN_JSON = '{"prompt": {"instruction": "Rev'  # a file cut short by a full disk or a kill

# (where the bad file goes, the command, what the line says of it besides its path); every
# reader of a file a user hands the tool, or that a killed run could leave torn
READERS = {
    # a model folder's run file, read as the model loads
    "eval-run-file": (
        "model/attentionspan_run.json",
        ["eval", "--model", "{tmp}/model", "--configs", "reversal_id", "-n", "2"],
        {"deep": "nested more than 100", "torn": "not valid JSON (torn or cut short?)"},
    ),
    "attention-run-file": (
        "model/attentionspan_run.json",
        ["attention", "--model", "{tmp}/model", "--configs", "reversal_id", "-n", "2"],
        {"deep": "nested more than 100", "torn": "not valid JSON (torn or cut short?)"},
    ),
    "reproduce-run-file": (
        "model/attentionspan_run.json",
        ["reproduce", "--model", "{tmp}/model", "--output", "{tmp}/reproduce"],
        {"deep": "nested more than 100", "torn": "not valid JSON (torn or cut short?)"},
    ),
    # a checkpoint's run file and the run's log, read by --resume
    "resume-run-file": (
        "run/checkpoint-1/attentionspan_run.json",
        ["train", "--output", "{tmp}/run", "--resume"],
        {"deep": "nested more than 100", "torn": "not valid JSON (torn or cut short?)"},
    ),
    "resume-log": (
        "run/log.jsonl",
        ["train", "--output", "{tmp}/run", "--resume"],
        {"deep": "line 1 is not a JSON record", "torn": "line 1 is not a JSON record"},
    ),
    # an --output folder whose settings.json no run of the pipeline wrote (no manifest)
    "reproduce-settings": (
        "reproduce/settings.json",
        ["reproduce", "--model", "{tmp}/model", "--output", "{tmp}/reproduce", "--overwrite"],
        {"deep": "did not write ('settings.json')", "torn": "did not write ('settings.json')"},
    ),
    "supervision-settings": (
        "supervision/settings.json",
        ["supervision", "--output", "{tmp}/supervision", "--overwrite"],
        {"deep": "did not write ('settings.json')", "torn": "did not write ('settings.json')"},
    ),
    # an --output file: replaced only when it is the command's own
    "heads-output": (
        "ranking.json",
        ["heads", "--model", "{tmp}/model", "--config", "reversal_id", "-n", "2"]
        + ["--output", "{tmp}/ranking.json"],
        {"deep": "did not write", "torn": "did not write"},
    ),
    "baselines-output": (
        "baselines.json",
        ["baselines", "--task", "t1", "--output", "{tmp}/baselines.json"],
        {"deep": "did not write", "torn": "did not write"},
    ),
    # the ranking --attention-supervision top:N reads
    "supervision-ranking": (
        "heads.json",
        ["train", "--model", "scratch", "--config", "reversal_id", "--output", "{tmp}/train"]
        + ["--attention-supervision", "top:1", "--supervision-ranking", "{tmp}/heads.json"],
        {"deep": "nested more than 100", "torn": "not valid JSON (torn or cut short?)"},
    ),
}


@pytest.mark.parametrize("how", ["deep", "torn"])
@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_torn_or_deep_json_file_is_one_line_naming_it(reader, how, places, tmp_path):
    """Each reader of a JSON file the user hands the tool (or a killed run leaves): a file
    nested 100,000 deep (json's decoder recursed on it: a RecursionError traceback) or cut
    short is refused in one line naming it, status 2, before anything is written."""
    where, args, says = READERS[reader]
    shutil.copytree(places["model"], tmp_path / "model")
    shutil.copytree(places["run"], tmp_path / "run")
    path = tmp_path / where
    path.parent.mkdir(parents=True, exist_ok=True)
    bad = DEEP_JSON if how == "deep" else TORN_JSON
    if reader == "resume-log":  # a broken line with whole ones after it
        bad += '\n{"step": 1}\n'
    path.write_text(bad)
    before = _snapshot(tmp_path)
    status, err, _ = run_cli([a.format(tmp=tmp_path) for a in [*args, "--no-progress"]])
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith(f"attentionspan {args[0]}: error: "), err[0]
    named = str(path) if "did not write" not in says[how] else str(path.parent)
    assert named in err[0] and says[how] in err[0], err[0]
    assert _snapshot(tmp_path) == before
