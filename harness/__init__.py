"""The AttentionSpan harness: one-token-per-character training and evaluation.

    attentionspan train --model scratch --config reversal_id --output runs/rev
    attentionspan eval --model runs/rev/final --configs reversal_id reversal_ood
    attentionspan models fetch smollm2-135m-instruct

Modules: tokenization (characters -> single tokens), models (three offline sources), data
(instance streams and collation), train, evaluate, cli. Heavy imports stay inside functions.
"""
