"""Greedy generation and teacher-forced scoring in one left-padded layout.

    from harness.engine.inference import generate_batch, teacher_forced_batch
    gen = generate_batch(model, char_tok, encodings, max_new_tokens=12)
    gen.ids[b], gen.texts[b]          # row b's answer, cut at its first EOS
    tf = teacher_forced_batch(model, char_tok, encodings)
    tf.correct[b][i]                  # target[i] is the argmax given the true prefix
    gen.batch.column(b, pos)          # token position `pos` of encodings[b] -> batch column

The layout (`collate_left`): every prompt ends at the same column `prompt_width`, padding
on its left; the answer follows from that column, padding on its right. Generation builds
exactly this (left-padded prompts, then `generate()` appends), and teacher-forced scoring
uses it too, so target token i of row b sits at column `prompt_width + i` in both and the
query that predicts it at `prompt_width + i - 1`: a reference mask built once serves both,
and a forward over prompt + generated ids sees the positions generation saw.

Both functions accept extra keyword arguments (`generate` options; forward arguments) and
leave the attention implementation to the caller (`model.set_attn_implementation(name)`,
or a context manager around the call). `position_ids` always travels with its
`attention_mask`: without the mask, transformers reads padded rows as packed sequences.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.foundation.data import reference_mask
from harness.foundation.dispatch import input_device
from harness.foundation.tokenization import IGNORE_INDEX, CharTokenizer, Encoding


@dataclass
class Batch:
    """A collated left-padded batch (tensors on the CPU).

    `input_ids`, `attention_mask`, `position_ids`, `labels`: [batch, total_len];
    `target_start`: [batch], the column of target[0] (= `prompt_width` in every row);
    `shifts[b]`: columns of padding before row b, so token position t of `encodings[b]`
    (e.g. a reference position) sits at column `shifts[b] + t`.
    """

    encodings: list[Encoding]
    input_ids: Any
    attention_mask: Any
    position_ids: Any
    labels: Any
    target_start: Any
    shifts: list[int]
    prompt_width: int

    def __len__(self) -> int:
        return len(self.encodings)

    @property
    def total_len(self) -> int:
        return int(self.input_ids.shape[1])

    def column(self, row: int, position: int) -> int:
        """The batch column of token position `position` of `encodings[row]`."""
        return self.shifts[row] + position

    def reference_columns(self, row: int) -> list[list[int]]:
        """Row `row`'s reference, target token by target token, as batch columns."""
        shift = self.shifts[row]
        return [[shift + k for k in ref] for ref in self.encodings[row].reference]

    def reference_mask(self, length: int | None = None):
        """bool [batch, L, L]: [b, q, k] when query q (predicting the token at q + 1) must
        attend key k (`harness.foundation.data.reference_mask`). L defaults to the batch's width;
        generation from prompts needs `prompt_width + max_new_tokens`."""
        length = self.total_len if length is None else int(length)
        return reference_mask(self.encodings, self.shifts, length)

    def model_inputs(self, device=None) -> dict[str, Any]:
        """input_ids, attention_mask and position_ids (always together) on `device`."""
        names = ("input_ids", "attention_mask", "position_ids")
        return {
            n: getattr(self, n).to(device) if device is not None else getattr(self, n)
            for n in names
        }


@dataclass
class Generation:
    """Greedy answers of one batch.

    `batch`: the prompts plus the generated tokens in the shared layout (`input_ids`
    [batch, prompt_width + new]; columns after a row's first EOS are padding with
    attention_mask 0, `generate()` keeps running finished rows); `ids[b]`: the new ids of
    row b before its first EOS; `texts[b]`: those decoded; `finished[b]`: an EOS came.
    """

    batch: Batch
    ids: list[list[int]]
    texts: list[str]
    finished: list[bool]


@dataclass
class TeacherForced:
    """Teacher-forced argmax of one batch: `correct[b][i]` / `predicted[b][i]` for target
    character i of row b (the EOS label is left out: it is not a character of the
    answer); `eos_correct[b]`: the row after the answer predicts EOS (the authors' score
    convention counts that row as a token, `harness.attention.scores.score_rows`); `batch`
    holds prompt + target + EOS in the shared layout."""

    batch: Batch
    correct: list[list[bool]]
    predicted: list[list[int]]
    eos_correct: list[bool] = field(default_factory=list)


def collate_left(encodings: Sequence[Encoding], pad_id: int, with_answer: bool = True) -> Batch:
    """The shared layout: prompts end at column `prompt_width`; with `with_answer`, each
    row's target and EOS follow it (right-padded), without, the batch stops there."""
    import torch

    if not encodings:
        raise ValueError("collate_left needs at least one encoding")
    width = max(e.target_offset for e in encodings)
    shifts = [width - e.target_offset for e in encodings]
    rows = [e.input_ids if with_answer else e.input_ids[: e.target_offset] for e in encodings]
    labels = [e.labels if with_answer else e.labels[: e.target_offset] for e in encodings]
    total = max(s + len(r) for s, r in zip(shifts, rows))
    size = len(encodings)
    input_ids = torch.full((size, total), pad_id, dtype=torch.long)
    label_ids = torch.full((size, total), IGNORE_INDEX, dtype=torch.long)
    attention = torch.zeros((size, total), dtype=torch.long)
    for b, (shift, ids, lab) in enumerate(zip(shifts, rows, labels)):
        input_ids[b, shift : shift + len(ids)] = torch.tensor(ids, dtype=torch.long)
        label_ids[b, shift : shift + len(lab)] = torch.tensor(lab, dtype=torch.long)
        attention[b, shift : shift + len(ids)] = 1
    return Batch(
        encodings=list(encodings),
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=position_ids_for(attention),
        labels=label_ids,
        target_start=torch.full((size,), width, dtype=torch.long),
        shifts=shifts,
        prompt_width=width,
    )


def position_ids_for(attention_mask):
    """Positions that count real tokens only, as `generate()` computes them: a left-padded
    row sees the positions it would see alone (padding columns get 0; they are masked)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def text_config(config):
    """The language model's config: a multimodal config's text part (Gemma 3's
    `text_config`), else the config itself."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def cache_argument(model) -> str:
    """The name of the KV cache's argument to `model`'s forward and `generate`: `cache` from
    transformers 5.24 on (which deprecates `past_key_values`, to go in 5.40), else
    `past_key_values`."""
    import inspect

    parameters = inspect.signature(model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def last_logits_only(model) -> dict[str, Any]:
    """Forward options for a pass whose logits are not read but for the last position (a
    pass run for its attention, or to fill a KV cache): one column of logits where the model
    takes `logits_to_keep` (Gemma 3's 262k-word output layer costs as much as its layers
    over a whole batch). The attention and the cache are what they would be without it."""
    import inspect

    accepted = inspect.signature(model.forward).parameters
    return {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}


def forward(model, inputs: dict[str, Any], **options: Any):
    """One plain forward of `model` on prepared `inputs` (with `options` such as
    `logits_to_keep`), returning the model's output: the training step's pass
    (`harness.training.loss`). `model` may be the DDP/FSDP wrapper, which must see the call
    for its hooks; whatever the caller set around it (autocast, grad mode, a capture plan
    such as attention supervision's) applies."""
    return model(**inputs, **options)


def given_cache(kwargs: dict):
    """The KV cache among a forward's keyword arguments, under either name."""
    cache = kwargs.get("cache")
    return cache if cache is not None else kwargs.get("past_key_values")


def model_shape(model) -> tuple[int, int]:
    """(layers, query heads) of a causal LM (or of a model config), the text part of a
    multimodal one."""
    config = text_config(getattr(model, "config", model))
    return int(config.num_hidden_layers), int(config.num_attention_heads)


def autocast(mixed_precision: str, device=None):
    """bf16 autocast for `mixed_precision == "bf16"`, else nothing: the one autocast of
    training and inference (`device`: where the model runs; None: CUDA when there is one)."""
    import torch

    if mixed_precision == "bf16":
        kind = getattr(device, "type", None) or ("cuda" if torch.cuda.is_available() else "cpu")
        return torch.autocast(kind, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def generate_batch(
    model,
    char_tok: CharTokenizer,
    encodings: Sequence[Encoding],
    max_new_tokens: int,
    mixed_precision: str = "no",
    **generate_kwargs: Any,
) -> Generation:
    """Greedy continuations of the prompts of `encodings` (their targets are not used).

    `generate_kwargs` go to `model.generate` and override the defaults here (greedy, our
    pad and EOS ids); the KV cache is the default dynamic one.
    """
    import torch

    prompts = collate_left(encodings, char_tok.pad_id, with_answer=False)
    options = dict(
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=char_tok.pad_id,
        eos_token_id=char_tok.eos_id,
    )
    options.update(generate_kwargs)
    # generate() derives its own positions from the mask (as position_ids_for does).
    device = input_device(model)  # a dispatched model's `model.device` may be `meta`
    inputs = prompts.model_inputs(device)
    inputs.pop("position_ids")
    with torch.inference_mode(), autocast(mixed_precision, device):
        out = model.generate(**inputs, **options)
    if not torch.is_tensor(out):  # return_dict_in_generate=True
        out = out.sequences
    out = out.cpu()
    width = prompts.prompt_width
    stops = options["eos_token_id"]
    stops = set(stops) if isinstance(stops, (list, tuple, set)) else {stops}
    ids, finished = [], []
    attention = torch.zeros(out.shape, dtype=torch.long)
    attention[:, :width] = prompts.attention_mask
    for b, row in enumerate(out[:, width:].tolist()):
        # Rows that already wrote EOS keep running inside generate(): drop what follows.
        kept = next((i for i, token in enumerate(row) if token in stops), len(row))
        done = kept < len(row)
        ids.append(row[:kept])
        finished.append(done)
        attention[b, width : width + kept + int(done)] = 1
    sequences = out.clone()
    sequences[attention == 0] = char_tok.pad_id
    batch = dataclasses.replace(
        prompts,
        input_ids=sequences,
        attention_mask=attention,
        position_ids=position_ids_for(attention),
        labels=torch.full_like(sequences, IGNORE_INDEX),
    )
    texts = [char_tok.decode(row, skip_special_tokens=True) for row in ids]
    return Generation(batch=batch, ids=ids, texts=texts, finished=finished)


def teacher_forced_batch(
    model,
    char_tok: CharTokenizer,
    encodings: Sequence[Encoding],
    mixed_precision: str = "no",
    **forward_kwargs: Any,
) -> TeacherForced:
    """Whether each target character is the argmax given the true prefix, from one forward
    over prompt + target + EOS in the shared layout. `forward_kwargs` go to the forward.

    A KV cache among `forward_kwargs` (either name, `given_cache`) holding the first
    `prompt_width - 1` columns of this layout (`harness.attention.interventions`'s prefix
    cache, shared by the settings of one batch) is continued: the forward then reads only the
    last prompt column and the answer, and the logits are the same. Without one, the logits
    are computed from the last prompt column on (`logits_to_keep`, where the model takes it):
    the prompt's other columns are never read."""
    import torch

    batch = collate_left(encodings, char_tok.pad_id, with_answer=True)
    width = batch.prompt_width
    device = input_device(model)
    inputs = batch.model_inputs(device)
    cache = given_cache(forward_kwargs)
    start = int(cache.get_seq_length()) if cache is not None else 0
    if start:
        if start != width - 1:
            raise ValueError(
                f"a teacher-forced prefix cache must hold the first {width - 1} columns "
                f"(the prompt but its last), got {start}"
            )
        # The mask keeps every column (the cached keys' padding stays masked).
        inputs["input_ids"] = inputs["input_ids"][:, start:]
        inputs["position_ids"] = inputs["position_ids"][:, start:]
    # Query q predicts the token at q + 1: target[i] sits at width + i, its query one before
    # (logit column q - start).
    first = width - 1 - start
    options = dict(forward_kwargs)
    if first > 0 and "logits_to_keep" not in options and last_logits_only(model):
        # logits from that query on only: no prompt column's is read, and a large
        # vocabulary's output layer (Gemma 3's 262k words) over them cost about as much as
        # the layers; the kept columns' logits are the same
        options["logits_to_keep"] = int(inputs["input_ids"].shape[1]) - first
        first = 0
    with torch.inference_mode(), autocast(mixed_precision, device):
        logits = model(**inputs, **options).logits
    longest = max(e.target_len for e in encodings)
    predicted = logits[:, first : first + longest].argmax(-1).cpu()
    gold = batch.input_ids[:, width : width + longest]
    # The query after the answer's last character (column width - 1 + n) predicts its EOS.
    last = torch.tensor([first + e.target_len for e in encodings], device=logits.device)
    ends = logits[torch.arange(len(encodings), device=logits.device), last].argmax(-1).cpu()
    correct, chosen = [], []
    for b, enc in enumerate(encodings):
        n = enc.target_len
        chosen.append(predicted[b, :n].tolist())
        correct.append((predicted[b, :n] == gold[b, :n]).tolist())
    eos = [int(token) == char_tok.eos_id for token in ends.tolist()]
    return TeacherForced(batch=batch, correct=correct, predicted=chosen, eos_correct=eos)
