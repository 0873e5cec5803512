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
every module here (tests/harness/test_cli.py checks both ways)."""
