"""The AttentionSpan harness: one-token-per-character training and evaluation.

    attentionspan train --model scratch --config reversal_id --output runs/rev
    attentionspan eval --model runs/rev/final --configs reversal_id reversal_ood
    attentionspan models fetch smollm2-135m-instruct

Modules: tokenization (characters -> single tokens), models (offline sources), data (split
rows and collation), inference (generation and teacher forcing in one left-padded layout),
runs (run folders: run file, checkpoints, lock), train, evaluate, options (shared command
pieces), cli (the console script, top layer). Heavy imports stay inside functions.
"""
