"""One module per `attentionspan` command of the harness: its parser (built from the command's
config dataclass and the shared options of `harness.foundation.options`) and the glue that
runs it. `attentionspan CMD` and `python -m harness.commands.CMD` run the same module (a dash
in the command is an underscore in the module: `results-doc` is `results_doc.py`).

Models: train, eval, models, heads, attention, reproduce, supervision, baselines.
Processes: launch (train, eval, attention or reproduce over several processes: accelerate's
launcher, with the command's options checked first and its errors in one line).
Documents (digests of runs, and the generated blocks of the pages made from them):
results-doc, supervision-doc, scratch-doc, baselines-table.

The measurement they call returns data; `harness.report` writes it. harness/cli.py lists
every module here (tests/harness/test_cli.py checks both ways).

What several commands do alike is written once, below: the prompt the command line asks
for over a base one (train, eval, attention), and the claim on --output once the folder can
be written (eval, attention, reproduce, supervision). Their imports wait for the call, so
that importing a command imports nothing more."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.foundation.data import PromptConfig
    from harness.foundation.ownership import Claim


PROMPT_OPTIONS = ("instruction", "num_fewshot", "chat")  # the shared prompt options' dests


def prompt_given(args) -> bool:
    """Whether the command line gives any of --instruction, --num-fewshot and --chat."""
    return any(getattr(args, name) is not None for name in PROMPT_OPTIONS)


def prompt_over(base: PromptConfig, args, configs: list[str]) -> PromptConfig:
    """`base` (the prompt saved with the model, or a fresh one) with --instruction
    (`default`: the standard instruction of the configs' one task), --num-fewshot and --chat
    on top, each where it is given."""
    import dataclasses

    from harness.foundation.options import resolve_instruction

    given = {
        "instruction": resolve_instruction(args.instruction, configs),
        "num_fewshot": args.num_fewshot,
        "chat": args.chat,
    }
    return dataclasses.replace(base, **{k: v for k, v in given.items() if v is not None})


def claim_output_folder(output: str, command: str, overwrite: bool) -> Claim:
    """The claim of `command` on --output `output`, once the folder can be written: one that
    is read-only or on a full disk is refused first, then another command's folder, an
    earlier run without --overwrite or a user's files (`claim_output`)."""
    from harness.foundation.outputs import check_output_folder
    from harness.foundation.ownership import claim_output

    check_output_folder("--output", output)
    return claim_output("--output", output, command, overwrite=overwrite)
