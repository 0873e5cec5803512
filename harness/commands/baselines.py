"""`attentionspan baselines`: the discrete-retrieval paper's models on one task and length.

    attentionspan baselines --task T6 --length 10 --seeds 2 --output runs/baselines/t6.json
    attentionspan baselines --task t1 --models t-pos-att t+pos+att --seeds 3 \\
        --epochs 5 --patience 2 --output runs/baselines/t1.json
    attentionspan baselines --task T6 --paper --device cuda --output t6-paper.json
    attentionspan baselines --task T7 --models t+pos-att --seeds 1 --output t7.json \\
        --authors-test DiscreteSeq/dataset/Task_7/10len/test.tsv   # also their test file
    attentionspan baselines --task T1 --length 5 --models t-pos-att --output t1-theirs.json \\
        --authors-data DiscreteSeq/dataset/Task_1/5len   # train, select, test on their files

The defaults are the recipe measured on a 2-core CPU in docs/results.md: the paper's data
sizes (100,000 / 10,000 / 10,000 instances), Adam, dropout 0.2, clipping 0.5 and best-epoch
selection, but batch 50 at learning rate 5e-4 (the appendix's 10 at 1e-4, scaled with the
batch) for 10 epochs, about 10 minutes per model and seed. `--paper` is the appendix's
schedule exactly: batch 10, learning rate 1e-4, 100 epochs (with `--patience 10`, 15-65
minutes a T7 run on one CPU thread). The shortcut is not neutral everywhere: on T7 it
leaves T-Pos+Att 9 points under `--paper` (docs/results.md). The data are drawn
once (data seed `--data-seed`) and shared by every model and seed; `--seeds K` trains seeds
0..K-1 of every model. The JSON (written atomically after every run, so an interrupted
command keeps what it finished and a rerun with the same settings skips it) holds each run
(accuracy, best epoch, validation curve, decoder attention on the reference vectors,
seconds) and a summary per model: mean and sample standard deviation of test accuracy over
seeds. `--authors-test` scores every model on the authors' released test file as well
(harness/baselines/authors_data.py; q_vocab.txt for T3-T7 is found beside it or given by
`--authors-vocab`):
`authors_test_accuracy` per run and its mean and s.d. in the summary. `--authors-data`
replaces our three splits by their released folder (training.tsv or training.tar.gz,
valid.tsv, test.tsv), kept in their own features and mapping (nothing to relabel: no
model sees our data), to tell their data from their recipe.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from attentionspan_datasets.jsonfile import read_json
from harness.foundation.options import (
    UsageError,
    add_config_arguments,
    add_model_arguments,
    cli,
    main_for,
)

KINDS = ("t-pos-att", "t+pos-att", "t-pos+att", "t+pos+att", "lstm", "lstm+att")
TASK_NAMES = {f"t{k}": f"t{k}" for k in range(1, 8)}
# The appendix's schedule; `--paper` sets all of it.
PAPER_RECIPE = {
    "num_train": 100_000,
    "num_validation": 10_000,
    "num_test": 10_000,
    "epochs": 100,
    "batch_size": 10,
    "lr": 1e-4,
}


@dataclass
class BaselinesOptions:
    """The options of `attentionspan baselines` (the recipe's defaults are the measured CPU
    recipe, not RecipeConfig's, which are the paper's): task, data, recipe, files."""

    task: str | None = field(default=None, metadata=cli("T1 ... T7 (or t1 ... t7)", required=True))
    length: int = field(
        default=10, metadata=cli("vectors per instance", shown="10; 5-30 in the paper")
    )
    models: list[str] = field(
        default_factory=lambda: list(KINDS),
        metadata=cli(
            "models to train", choices=KINDS, metavar="MODEL", shown=f"all six: {', '.join(KINDS)}"
        ),
    )
    seeds: int = field(default=3, metadata=cli("seeds 0..K-1 per model"))
    num_train: int = field(
        default=100_000, metadata=cli("training instances", shown="100,000, as the paper")
    )
    num_validation: int = field(
        default=10_000,
        metadata=cli(
            "validation instances (the best epoch is chosen on them)",
            shown="10,000, as the paper",
        ),
    )
    num_test: int = field(
        default=10_000, metadata=cli("test instances", shown="10,000, as the paper")
    )
    epochs: int = field(default=10, metadata=cli("training epochs", shown="10; the paper's: 100"))
    patience: int = field(
        default=0,
        metadata=cli(
            "stop after this many epochs without a better validation accuracy", shown="0, off"
        ),
    )
    batch_size: int = field(
        default=50,
        metadata=cli("instances per batch", shared="batch_size", shown="50; the paper's: 10"),
    )
    lr: float = field(
        default=5e-4, metadata=cli("Adam learning rate", shown="5e-4; the paper's: 1e-4")
    )
    no_shuffle: bool = field(
        default=False,
        metadata=cli(
            "read the training rows in their stored order every epoch, as the authors' "
            "training loop does (default: a new order per epoch)"
        ),
    )
    paper: bool = field(
        default=False,
        metadata=cli(
            "the appendix's recipe exactly (overrides the options above): 100k/10k/10k "
            "instances, 100 epochs, batch 10, learning rate 1e-4"
        ),
    )
    data_seed: int = field(default=1234, metadata=cli("seed of the generated data"))
    device: str = field(  # any torch device, so not the shared --device's three choices
        default="cpu", metadata=cli("torch device to train on: cpu, cuda, cuda:1, ...")
    )
    output: str | None = field(default=None, metadata=cli("JSON results file", required=True))
    authors_test: str | None = field(
        default=None,
        metadata=cli(
            "also score every trained model on the authors' released test file "
            "(sorodoc/DiscreteSeq dataset/Task_N/<n>len/test.tsv; harness/baselines/"
            "authors_data.py): T3-T7 are relabelled onto our query-to-feature mapping; the "
            "accuracy goes into the JSON beside ours",
            metavar="PATH",
        ),
    )
    authors_vocab: str | None = field(
        default=None,
        metadata=cli(
            "the authors' q_vocab.txt for --authors-test or --authors-data on T3-T7 "
            "(default: the one beside the test file or one folder up, their layout "
            "Task_N/q_vocab.txt)",
            metavar="PATH",
        ),
    )
    authors_data: str | None = field(
        default=None,
        metadata=cli(
            "train, select and test on the authors' released files instead of ours: their "
            "folder Task_N/<n>len/ with training.tsv (or training.tar.gz), valid.tsv and "
            "test.tsv (--num-train, --num-validation, --num-test and --data-seed do not apply)",
            metavar="DIR",
        ),
    )


def add_arguments(parser) -> None:
    """BaselinesOptions' options, and the shared --threads and --no-progress."""
    add_config_arguments(parser, BaselinesOptions, defaults=True)
    add_model_arguments(
        parser,
        "threads",
        "no_progress",
        no_progress={
            "help": "no progress bar: one line per epoch on stderr instead (for the log of a "
            "long run)"
        },
    )


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "baselines",
        help="train the discrete-retrieval paper's Transformer and LSTM baselines on T1-T7",
        description=__doc__.split("\n\n")[0],
    )
    add_arguments(parser)
    parser.set_defaults(func=run_command)


def settings_of(args) -> dict:
    task = args.task.lower()
    if task not in TASK_NAMES:
        raise UsageError(f"invalid --task {args.task!r}; allowed: T1 ... T7")
    settings = {
        "task": task,
        "length": args.length,
        "config": f"{task}_len{args.length}",
        "num_train": args.num_train,
        "num_validation": args.num_validation,
        "num_test": args.num_test,
        "epochs": args.epochs,
        "patience": args.patience,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "data_seed": args.data_seed,
    }
    if getattr(args, "no_shuffle", False):  # only then: older files keep resuming
        settings["shuffle"] = False
    if args.paper:
        settings.update(PAPER_RECIPE)
    check_baseline_sizes(settings, args)
    authors_test = getattr(args, "authors_test", None)
    authors_data = getattr(args, "authors_data", None)
    if authors_test and authors_data:
        raise UsageError(
            "--authors-test and --authors-data exclude each other (the test split "
            "of --authors-data is their test file)"
        )
    if authors_data:  # their sizes and their draw: ours do not apply
        for name in ("num_train", "num_validation", "num_test", "data_seed"):
            del settings[name]
        settings["authors_data"] = authors_data
    elif authors_test:  # only then: older files keep resuming
        settings["authors_test"] = authors_test
    if getattr(args, "authors_vocab", None):
        if not (authors_test or authors_data):
            raise UsageError("--authors-vocab needs --authors-test or --authors-data")
        settings["authors_vocab"] = args.authors_vocab
    return settings


def check_baseline_sizes(settings: dict, args) -> None:
    """The caps of harness.foundation.caps, before any data are drawn (`--seeds 1000000000` built a
    list of six billion runs)."""
    from harness.foundation.caps import (
        MAX_BATCH,
        MAX_EPOCHS,
        MAX_SEEDS,
        MAX_TRAIN_INSTANCES,
        check_int,
        check_unique,
    )
    from harness.foundation.outputs import check_output_file
    from harness.foundation.ownership import check_own_file, json_with

    for name in ("num_train", "num_validation", "num_test"):
        check_int(f"--{name.replace('_', '-')}", settings[name], 1, MAX_TRAIN_INSTANCES)
    check_int("--epochs", settings["epochs"], 1, MAX_EPOCHS)
    check_int("--batch-size", settings["batch_size"], 1, MAX_BATCH)
    check_int("--patience", settings["patience"], 0, MAX_EPOCHS)
    check_int("--seeds", args.seeds, 1, MAX_SEEDS)
    check_unique("--models", args.models)
    check_output_file("--output", args.output)  # also: read-only, a full disk
    # its own record is resumed (same settings) or replaced; a user's file is not
    check_own_file("--output", args.output, "baselines", json_with("settings", "runs"))


def summarise(runs: list[dict]) -> dict:
    summary = {}
    for kind in dict.fromkeys(r["model"] for r in runs):
        scores = [r["test_accuracy"] for r in runs if r["model"] == kind]
        shares = [
            r["attention"]["share_on_reference"]
            for r in runs
            if r["model"] == kind
            and r["attention"]
            and r["attention"]["share_on_reference"] is not None
        ]
        summary[kind] = {
            "seeds": len(scores),
            "test_accuracy_mean": statistics.fmean(scores),
            "test_accuracy_sd": statistics.stdev(scores) if len(scores) > 1 else 0.0,
            "attention_share_mean": statistics.fmean(shares) if shares else None,
            "seconds_mean": statistics.fmean(r["seconds"] for r in runs if r["model"] == kind),
        }
        # runs trained without --authors-test have no such key
        authors = [r.get("authors_test_accuracy") for r in runs if r["model"] == kind]
        if authors and None not in authors:
            summary[kind]["authors_test_accuracy_mean"] = statistics.fmean(authors)
            summary[kind]["authors_test_accuracy_sd"] = (
                statistics.stdev(authors) if len(authors) > 1 else 0.0
            )
    return summary


def load_authors_option(settings: dict, config) -> dict | None:
    """{split: (batch, info)} of --authors-test ("authors_test") or --authors-data ("train",
    "validation", "test"), None without either; a bad file is one line naming the option it
    came from."""
    if "authors_data" in settings:
        option = "--authors-data"
    elif "authors_test" in settings:
        option = "--authors-test"
    else:
        return None
    from harness.baselines.authors_data import folder_files, load_authors

    vocab = settings.get("authors_vocab")
    if vocab is not None and not Path(vocab).is_file():
        raise UsageError(f"invalid --authors-vocab {vocab!r}: no such file")
    try:
        if option == "--authors-data":
            files = folder_files(settings["authors_data"])
        else:
            path = settings["authors_test"]
            if not Path(path).is_file():
                raise UsageError(f"invalid --authors-test {path!r}: no such file")
            files = {"authors_test": path}
        # their folder alone: their features and mapping, every datapoint (no relabelling)
        relabel = option == "--authors-test"
        return {
            split: load_authors(path, config, vocab, relabel=relabel)
            for split, path in files.items()
        }
    except (OSError, ValueError) as error:
        message = str(error).splitlines()[0]
        if vocab and message.startswith(vocab):
            option = "--authors-vocab"
        raise UsageError(f"invalid {option}: {message}") from None


def run_command(args) -> int:
    from harness.foundation.outputs import writing

    settings = settings_of(args)  # the options and --output checked before any work
    # the JSON is rewritten (atomically) after every run: a full disk by then is one line,
    # and the file keeps the runs written before it
    with writing(args.output, file=True):
        return train_baselines(args, settings)


def train_baselines(args, settings: dict) -> int:
    from tqdm import tqdm

    from attentionspan_datasets.atomic import atomic_write_text
    from harness.baselines.data import task_config
    from harness.baselines.train import RecipeConfig, run_one

    try:
        config = task_config(settings["task"], settings["length"])
    except ValueError as error:  # it names min_length: say which option set it
        raise UsageError(f"--length {settings['length']}: {error}") from None
    device = checked_device(args.device)
    output = Path(args.output)
    runs: list[dict] = []
    if output.exists():
        previous = read_json(output, "--output", expect=dict)
        if previous.get("settings") == settings:
            runs = previous["runs"]  # resume: keep what an earlier call finished
    recipe = RecipeConfig(
        epochs=settings["epochs"],
        batch_size=settings["batch_size"],
        lr=settings["lr"],
        patience=settings["patience"],
        shuffle=settings.get("shuffle", True),
    )
    started = time.perf_counter()
    data, authors_record = training_data(settings, config)
    data_seconds = time.perf_counter() - started
    todo = [(k, s) for k in args.models for s in range(args.seeds)]
    done = {(r["model"], r["seed"]) for r in runs}
    bar = tqdm(total=len(todo) * recipe.epochs, disable=args.no_progress, unit="epoch")
    for kind, seed in todo:
        if (kind, seed) in done:
            bar.update(recipe.epochs)
            continue
        label = f"{settings['config']} {kind} seed {seed}"
        bar.set_description(label)

        def on_epoch(epoch: int, val_accuracy: float, label: str = label) -> None:
            bar.update(1)
            bar.set_postfix(val=f"{val_accuracy:.3f}")
            if args.no_progress:  # a log still shows how far a long run has come
                print(
                    f"{label} epoch {epoch}/{recipe.epochs} validation {val_accuracy:.4f}",
                    file=sys.stderr,
                    flush=True,
                )

        result = run_one(settings["config"], kind, seed, data, recipe, on_epoch, device=device)
        bar.update(recipe.epochs - result["epochs_run"])  # early stop: skip the rest
        runs.append(result)
        document = {
            "settings": settings,
            "command": " ".join(["attentionspan", *getattr(args, "argv", ["baselines"])]),
            "data_seconds": round(data_seconds, 1),
            **authors_record,
            "summary": summarise(runs),
            "runs": runs,
        }
        atomic_write_text(output, json.dumps(document, indent=1) + "\n")
    bar.close()
    print_summary(settings, runs)
    return 0


def checked_device(name: str):
    """`torch.device(name)`, tried once here: a UsageError naming --device for a bad name or
    a device this machine lacks."""
    import torch

    try:
        device = torch.device(name)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as error:  # a bad name, or no such device here
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UsageError(f"invalid --device {name!r}: {message}") from None
    return device


def training_data(settings: dict, config) -> tuple[dict, dict]:
    """(the batches per split, what the results file records of the authors' data): the
    authors' files where --authors-data / --authors-test give them, our generated splits
    elsewhere."""
    from harness.baselines.data import load_split

    authors = load_authors_option(settings, config) or {}  # first: a bad path fails at once
    data = {split: batch for split, (batch, _) in authors.items()}
    for split in ("train", "validation", "test"):
        if split not in data:  # not from --authors-data: our generated split
            data[split] = load_split(config, split, settings[f"num_{split}"], settings["data_seed"])
    if "authors_data" in settings:  # what was read of their folder, per split
        authors_record = {"authors_data": {split: info for split, (_, info) in authors.items()}}
    elif authors:  # their test file's info, as files written before --authors-data had it
        authors_record = {"authors_test": authors["authors_test"][1]}
    else:
        authors_record = {}
    return data, authors_record


def print_summary(settings: dict, runs: list[dict]) -> None:
    """One line per model: test accuracy over seeds, attention on the reference, and the
    accuracy on the authors' test file where it was scored."""
    for kind, row in summarise(runs).items():
        share = row["attention_share_mean"]
        print(
            f"{settings['config']} {kind:10} accuracy {100 * row['test_accuracy_mean']:.1f}"
            f" ± {100 * row['test_accuracy_sd']:.1f} ({row['seeds']} seeds)"
            + (f", decoder attention on reference {share:.2f}" if share is not None else "")
            + (
                f"; on the authors' test file {100 * row['authors_test_accuracy_mean']:.1f}"
                f" ± {100 * row['authors_test_accuracy_sd']:.1f}"
                if "authors_test_accuracy_mean" in row
                else ""
            )
        )


def main(argv: list[str] | None = None) -> int:
    return main_for("baselines", add_arguments, run_command, argv)


if __name__ == "__main__":
    sys.exit(main())
