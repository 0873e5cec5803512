"""The AttentionSpan harness: one-token-per-character training, evaluation and attention
analysis.

    attentionspan train --model scratch --config reversal_id --output runs/rev
    attentionspan eval --model runs/rev/final --configs reversal_id reversal_ood
    attentionspan models fetch smollm2-135m-instruct

Layers, top first, one folder a layer; every import points down, `__main__` blocks included
(tests/harness/test_imports.py checks it; docs/architecture.md says what each room holds):
- cli.py (the console script) and commands/ (one module per command: parsers built from the
  config dataclasses and the shared options of `foundation.options`; `python -m
  harness.commands.<name>` runs one alone, as `accelerate launch -m` does);
- report/: everything that writes Markdown, PNG, HTML or JSON for people;
- pipeline/: `reproduce`'s stages, its config and the --quick recipes; it returns data and
  hands it to the writers the command gives it;
- measurement: attention/ (analysis, scores, heads, interventions, dose ladders, controls,
  verdicts), evaluation/, training/ (the config, the loop, its losses, FSDP) and baselines/:
  they return data, write no report;
- engine/: inference (generation and teacher forcing in one left-padded layout), scoring (the
  per-instance loop over processes), capture (the one attention function), positions, modes;
- foundation/: tokenization (characters -> single tokens), data (split rows and collation),
  runs and outputs (run folders), models and dispatch (offline sources, placement), options,
  caps, threads and stats.
Heavy imports stay inside functions.
"""
