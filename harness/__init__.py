"""The AttentionSpan harness: one-token-per-character training, evaluation and attention
analysis.

    attentionspan train --model scratch --config reversal_id --output runs/rev
    attentionspan eval --model runs/rev/final --configs reversal_id reversal_ood
    attentionspan models fetch smollm2-135m-instruct

Layers, top first; every import points down, `__main__` blocks included
(tests/harness/test_imports.py checks it); one folder a layer:
- cli.py (the console script) and commands/ (one module per command: parsers built from the
  config dataclasses and the shared options of `options`; `python -m harness.commands.<name>`
  runs one alone, as `accelerate launch -m` does);
- report/: everything that writes Markdown, PNG, HTML or JSON for people;
- pipeline/: `reproduce`'s stages, its config and the --quick recipes; it returns data and
  hands it to the writers the command gives it;
- measurement: attention/ (analysis, scores, heads, interventions, sweep, controls),
  evaluate and train (the config and the loop), baselines/: they return data, write no report;
- engine/: inference (generation and teacher forcing in one left-padded layout), scoring (the
  per-instance loop over processes), capture (the one attention function), positions, modes;
- data: tokenization (characters -> single tokens), data (split rows and collation), runs
  (run folders: run file, checkpoints, lock), models (offline sources), and the leaves
  options, caps, threads and stats.
Heavy imports stay inside functions.
"""
