"""`attentionspan export`: fixed splits as Hub-style parquet with a dataset card.

attentionspan export addition_id addition_ood --out attentionspan-data
attentionspan export reversal_id --out data --num-train 50000 --seed 0 --overwrite
attentionspan export addition_ood --out data --push-to-hub ORG/attentionspan

Each split holds at most 10,000,000 rows unless --force. A config whose input space is small
at some lengths gets a note on stderr (the same sentence goes into the dataset card).
"""

from __future__ import annotations

import argparse

from attentionspan_datasets.generation import DEFAULT_SEED


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export",
        help="write configs as Hub parquet (the push_to_hub layout) plus a dataset card",
        description="Build the train/validation/test splits of each CONFIG and write them as "
        "CONFIG/SPLIT-00000-of-0000N.parquet with a README.md dataset card, the layout "
        "push_to_hub writes; load it back with datasets.load_dataset(DIR, CONFIG).",
    )
    parser.add_argument(
        "configs",
        metavar="CONFIG",
        nargs="+",
        help="preset (addition_ood) or task (addition) names",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="folder to write")
    parser.add_argument("--num-train", type=int, metavar="N", help="train rows (10,000)")
    parser.add_argument("--num-validation", type=int, metavar="N", help="validation rows (1,000)")
    parser.add_argument("--num-test", type=int, metavar="N", help="test rows (1,000)")
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"generation seed ({DEFAULT_SEED})"
    )
    parser.add_argument(
        "--num-proc",
        type=int,
        metavar="N",
        help="processes that build each split (datasets num_proc)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace DIR if it is not empty")
    parser.add_argument(
        "--force",
        action="store_true",
        help="allow more than 10,000,000 rows in a split",
    )
    parser.add_argument(
        "--push-to-hub",
        metavar="ORG/NAME",
        help="also upload to this Hub dataset repository (checked first)",
    )
    parser.add_argument("--cache-dir", metavar="DIR", help="datasets cache folder")
    parser.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    import sys

    from attentionspan_datasets.hub_export import HubError, export, small_space_notes

    try:
        out = export(
            args.configs,
            args.out,
            num_train=args.num_train,
            num_validation=args.num_validation,
            num_test=args.num_test,
            seed=args.seed,
            overwrite=args.overwrite,
            push_to_hub=args.push_to_hub,
            cache_dir=args.cache_dir,
            num_proc=args.num_proc,
            force=args.force,
        )
    except HubError as error:
        raise ValueError(str(error)) from None  # the CLI prints one line, exit status 2
    except (FileExistsError, FileNotFoundError):
        raise  # already one line naming the folder
    except OSError as error:
        # A full disk or a folder that became read-only while writing: the build is lost
        # either way (the temporary folder is removed); say where and why in one line.
        reason = error.strerror or str(error).strip().splitlines()[0]
        where = f" ({error.filename})" if error.filename else ""
        raise ValueError(f"export to --out {args.out!r} failed{where}: {reason}") from None
    for note in small_space_notes(args.configs, args.seed).values():
        print(f"attentionspan export: note: {note}", file=sys.stderr)
    print(f"wrote {out}" + (f" and pushed to {args.push_to_hub}" if args.push_to_hub else ""))
    return 0
