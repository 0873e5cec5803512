"""The AttentionSpan harness: one-token-per-character training, evaluation and attention
analysis.

    attentionspan train --model scratch --config reversal_id --output runs/rev
    attentionspan eval --model runs/rev/final --configs reversal_id reversal_ood
    attentionspan models fetch smollm2-135m-instruct

Layers, top first; every import points down (tests/harness/test_imports.py checks it):
- cli (the console script) and commands/ (one module per command: parsers built from the
  config dataclasses and the shared options of `options`);
- report/ (everything that writes Markdown, PNG or JSON for people; the reproduce pipeline);
- measurement: evaluate, train (the config and the loop), attention/ (analysis, scores,
  heads, interventions, sweep, controls), baselines/: they return data and write no report;
- engine: inference (generation and teacher forcing in one left-padded layout),
  attention/capture and attention/positions;
- data: tokenization (characters -> single tokens), data (split rows and collation), runs
  (run folders: run file, checkpoints, lock), models (offline sources), and the leaves
  options and stats.
Heavy imports stay inside functions.
"""
