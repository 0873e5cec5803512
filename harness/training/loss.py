"""The language-model loss of a training step, with logits only where the loss reads them.

    loss = lm_loss(model, bare, inputs)   # inputs: input_ids, attention_mask, labels, ...

A causal LM's forward projects every position onto the vocabulary, yet the loss reads only
the positions just before a label: with `loss_on="target"` the prompt's positions (the
instruction, a chat template, the task's input) are projected and dropped. With a large
vocabulary that projection rivals the layers (Gemma 3: 262k x 640 per position, against
about 100M weights in its layers), so where the vocabulary is large the step asks the model
for the columns where some row of the batch has its next token labelled (`logits_to_keep`,
a 1-D index every causal LM of transformers 5 takes) and computes the model's own loss
function on them: the same mean cross-entropy over the same labels as `.loss` (tested). On
Gemma-3-270M a step of `--pretrained`'s addition recipe takes 2.75 CPU-s instead of 3.67
(`benchmarks/sliced_loss.py`, docs/performance.md).

Character-level models (a scratch model's vocabulary is about 100 characters) keep the
plain forward: their output layer costs next to nothing, and their runs stay bit for bit
those that the committed `--quick` digests record (the sliced projection's gradient can
differ from the full one in the last bit).
"""

from __future__ import annotations

import inspect
from typing import Any

from harness.engine.inference import forward, text_config
from harness.foundation.tokenization import IGNORE_INDEX

# A vocabulary at least this large computes logits only where the loss reads them.
SLICED_FROM_VOCABULARY = 1024


def sliced(bare) -> bool:
    """Whether `bare` (the model, unwrapped from DDP/FSDP) computes only the labelled columns'
    logits: a large vocabulary, and a forward that takes `logits_to_keep`."""
    large = (getattr(text_config(bare.config), "vocab_size", 0) or 0) >= SLICED_FROM_VOCABULARY
    return large and "logits_to_keep" in inspect.signature(bare.forward).parameters


def loss_columns(labels) -> Any:
    """The positions t (1-D, ascending) whose logits the loss reads: those where some row
    has a label at t + 1 (query t predicts token t + 1)."""
    return (labels[:, 1:] != IGNORE_INDEX).any(0).nonzero().flatten()


def lm_loss(model, bare, inputs: dict) -> Any:
    """The mean next-token cross-entropy of `inputs` (with `labels`), from `model` (what the
    forward runs through: the DDP/FSDP wrapper) and `bare` (the model inside it, whose
    config and loss function are read)."""
    if not sliced(bare):
        return forward(model, inputs).loss
    labels = inputs["labels"]
    keep = loss_columns(labels)
    rest = {k: v for k, v in inputs.items() if k != "labels"}
    logits = forward(model, rest, logits_to_keep=keep).logits
    return bare.loss_function(
        logits=logits, labels=None, vocab_size=logits.shape[-1], shift_labels=labels[:, keep + 1]
    )
