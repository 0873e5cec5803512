"""`--model attnspan-hf`: lm-eval's HF model with the task text one token per character.

    lm_eval --model attnspan-hf --model_args pretrained=DIR --tasks 'attnspan_*'
    lm_eval --model attnspan-hf --model_args pretrained=DIR --tasks attnspan \\
        --apply_chat_template --num_fewshot 3

The paper fine-tunes models on task text split into single characters (the instruction
excepted); such a model loses much of its accuracy when the same text reaches it as BPE
merges (README: 0.39 against 0.94 exact match for a fine-tuned SmolLM2). This
subclass of lm-eval's `HFLM` builds each attnspan prompt with `harness.foundation.tokenization`, the
module the harness trains with, so evaluation sees the token ids training saw: the
instruction tokenised normally, each few-shot example and the prompt one token per
character, and, with `--apply_chat_template`, all of it as the user's message of the
tokenizer's chat template. Batching, generation and stop sequences are HFLM's own; requests
of other tasks (no attnspan document) are encoded as HFLM would.

    lm_eval --model attnspan-hf --model_args pretrained=DIR,attention=true --tasks 'attnspan_*'

With `attention=true` the model also measures where each answer attends
(`lm_eval_tasks.attention`): each batch of attnspan prompts is generated under the
harness's attention capture, its answers are scored by the harness's free-running records,
and each is returned as an `Answer`, the text carrying its measurement to `process_results`.

    lm_eval --model attnspan-hf --model_args pretrained=DIR,parallelize=True,max_cpu_memory=60GiB

`parallelize=True` splits the model across devices as lm-eval's HFLM does (`device_map`:
a strategy or a .json file, `max_memory_per_gpu`, `max_cpu_memory`, `offload_folder`;
`device_map_option`, older lm-eval's name, is read as `device_map`): inputs then go where
the input embeddings run (`harness.foundation.dispatch`), and keys HFLM would ignore without it are
refused (`placement_args`).

    torchrun --nproc-per-node 2 -m lm_eval --model attnspan-hf \
        --model_args pretrained=DIR,tp_plan=auto,attention=true --tasks 'attnspan_*'

`tp_plan=auto` is lm-eval's own tensor parallelism (HFLM's `tp_plan`): every process holds
half of each layer's heads and runs every request; the attention capture records and
gathers each process's heads (`harness.engine.capture`), so the metrics are the whole
model's. A family without a plan, heads the processes do not divide, or a plan other than
`auto` are refused in one line before the weights load (`tensor_parallel_args`).

Threads: the harness's rule (`harness.foundation.threads`): torch's default of one thread per core
ran
`attnspan_ffml_ood` at 3.7-4.7 s a request on a shared 2-core machine, against 12.7 requests
a second at one thread. So the model picks its thread count from the cores it may use and
the load on them, keeps an explicit OMP_NUM_THREADS, and takes `threads=N` in
`--model_args` to choose; it logs what it chose.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import torch
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM

from harness.foundation.tokenization import (
    SHOT_SEPARATOR,
    CharTokenizer,
    encode_instance,
    encode_prompt,
)
from lm_eval_tasks.attention import MODEL_ARG, Answer, AttentionMeter, flag

# lm-eval renders a chat prompt by calling `apply_chat_template` and passes the string back
# as the context; ours returns the plain prompt text behind this mark, and the encoding
# step below applies the template the way the harness does.
CHAT_MARK = "\x00attnspan-chat\x00"
logger = logging.getLogger(__name__)
OWN_ARGS = ("attention", "threads")  # --model_args of attnspan-hf itself
# Older lm-eval's name for device_map (0.4.0-0.4.2's HFLM): taken, and passed as device_map.
LEGACY_ARGS = {"device_map_option": "device_map"}
# What places the model across devices; HFLM reads them only with parallelize=True.
PARALLEL_ARGS = ("device_map", "max_memory_per_gpu", "max_cpu_memory")
# transformers' from_pretrained keywords that HFLM hands on (its **kwargs) and that load a
# causal LM here; anything else reached the model class's __init__, a TypeError traceback.
FROM_PRETRAINED_ARGS = (
    "attn_implementation",
    "device_map",
    "low_cpu_mem_usage",
    "load_in_8bit",
    "load_in_4bit",
    "bnb_4bit_compute_dtype",
    "bnb_4bit_quant_type",
    "bnb_4bit_use_double_quant",
    "cache_dir",
    "local_files_only",
    "token",
    "use_safetensors",
)


def hflm_args() -> list[str]:
    """The named arguments of lm-eval's HFLM (read from its signature: they follow the
    installed lm-eval)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = inspect.signature(HFLM.__init__).parameters.values()
    return [p.name for p in parameters if p.kind in kinds and p.name != "self"]


def check_model_args(kwargs: dict[str, Any]) -> None:
    """Refuse (one line in the `lm_eval` command, else ValueError) a `--model_args` key that
    attnspan-hf does not take: ours, HFLM's, and FROM_PRETRAINED_ARGS."""
    import difflib

    from lm_eval_tasks.dataset import refuse

    known = hflm_args()
    allowed = [*OWN_ARGS, *known, *FROM_PRETRAINED_ARGS, *LEGACY_ARGS]
    unknown = [key for key in kwargs if key not in allowed]
    if not unknown:
        return
    close = difflib.get_close_matches(unknown[0], allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    refuse(
        f"attnspan-hf: unknown --model_args key(s) {', '.join(map(repr, unknown))}{hint}; "
        f"allowed: {', '.join(OWN_ARGS)} (attnspan-hf's), {', '.join(known)} (lm-eval's hf "
        f"model's) and {', '.join(FROM_PRETRAINED_ARGS)} (passed to from_pretrained)"
    )


def placement_args(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`--model_args` with the model's placement checked (one line naming the key) and made
    what lm-eval's HFLM hands to from_pretrained: `parallelize=True` splits the model with
    accelerate (`device_map`, default auto: a strategy or a .json file of module -> device;
    `max_memory_per_gpu`, `max_cpu_memory`: sizes such as 20GiB; `offload_folder`), as
    HFLM does; without it those keys would be ignored, so they are refused."""
    from harness.foundation.dispatch import check_devices_exist, parse_device_map, parse_size
    from lm_eval_tasks.dataset import refuse

    kwargs = dict(kwargs)
    for old, new in LEGACY_ARGS.items():
        if old in kwargs:
            if new in kwargs:
                refuse(f"attnspan-hf: give {new} or {old} (its older name), not both")
            kwargs[new] = kwargs.pop(old)
    value = kwargs.get("parallelize", False)
    text = str(value).strip().lower()
    if text not in ("true", "false", "1", "0", "none", ""):
        refuse(f"attnspan-hf: parallelize must be true or false, got {value!r}")
    parallel = text in ("true", "1")
    if "parallelize" in kwargs:
        kwargs["parallelize"] = parallel
    given = [key for key in PARALLEL_ARGS if kwargs.get(key) is not None]
    if given and not parallel:
        refuse(
            f"attnspan-hf: {given[0]} takes effect only with parallelize=True (lm-eval's hf "
            "model ignores it otherwise); add parallelize=True to --model_args"
        )
    try:
        if kwargs.get("device_map") is not None:
            # --model_args splits at commas: a map is a strategy or a .json file's path.
            kwargs["device_map"] = parse_device_map(kwargs["device_map"])
            if isinstance(kwargs["device_map"], dict):
                check_devices_exist(kwargs["device_map"].values())
        for key in ("max_memory_per_gpu", "max_cpu_memory"):
            if kwargs.get(key) is not None:
                kwargs[key] = parse_size(kwargs[key], key)
    except ValueError as error:
        refuse(f"attnspan-hf: {str(error).replace('--device-map', 'device_map')}")
    return kwargs


def tensor_parallel_args(kwargs: dict[str, Any]) -> None:
    """With `tp_plan` (lm-eval's tensor parallelism under torchrun): the harness's refusals
    (`harness.foundation.dispatch`), one line naming the key, before the weights are read:
    a plan other than auto (capture maps heads by the family's own plan), a family without
    one, query or key/value heads the processes do not divide."""
    from harness.foundation.dispatch import Placement
    from harness.foundation.models import check_tensor_parallel_spec
    from lm_eval_tasks.dataset import refuse

    plan = kwargs.get("tp_plan")
    if plan is None:
        return
    try:
        Placement(tp_plan=plan)
        if isinstance(kwargs.get("pretrained"), str):
            check_tensor_parallel_spec(kwargs["pretrained"])
    except ValueError as error:
        refuse(f"attnspan-hf: {str(error).replace('--tp-plan', 'tp_plan')}")


def use_threads(requested: Any = None) -> int:
    """Set torch's CPU thread count by the harness's rule (`threads=N` from --model_args
    wins, capped at the cores) and return it; logs the choice and why."""
    import os

    from harness.foundation.threads import check_threads, choose_threads

    if requested is not None:
        text = str(requested).strip()  # --model_args gives text, or an int lm-eval parsed
        value = int(text) if text.lstrip("-").isdigit() else requested
        try:
            requested = check_threads(value, name="threads")
        except ValueError as error:
            raise ValueError(f"attnspan-hf: {error}") from None
    threads = choose_threads(requested)
    torch.set_num_threads(threads)
    if requested is not None:
        why = f"threads={requested} in --model_args"
    elif os.environ.get("OMP_NUM_THREADS", "").strip().isdigit():
        why = "OMP_NUM_THREADS kept"
    else:
        why = "chosen from the free cores (harness.foundation.threads)"
    logger.info("attnspan-hf: %d torch thread(s), %s", threads, why)
    return threads


@register_model("attnspan-hf")
class AttnspanHFLM(HFLM):
    def __init__(
        self, *args: Any, attention: Any = False, threads: Any = None, **kwargs: Any
    ) -> None:
        check_model_args(kwargs)  # before loading anything: a bad key stops at once
        kwargs = placement_args(kwargs)
        tensor_parallel_args(kwargs)
        attention = flag(attention)
        self.threads = use_threads(threads)  # before the model loads and runs
        super().__init__(*args, **kwargs)
        self._follow_dispatch()
        self.char_tok = CharTokenizer(self.tokenizer)
        # characters and (instruction, chat) layouts already checked against the model
        self._checked_chars: set[str] = set()
        self._checked_layouts: set[tuple[str | None, bool]] = set()
        self._encoded: dict[str, list[int]] = {}  # context string -> token ids
        # prompt ids -> the ids generated after them (attention=true only)
        self._generated: dict[tuple[int, ...], list[int]] = {}
        # prompt ids -> (instance, encoding, stops) of the request; -> its measurement
        self._pending: dict[tuple[int, ...], tuple] = {}
        self._measured: dict[tuple[int, ...], dict] = {}
        self.meter = None
        if attention:
            from harness.foundation.dispatch import check_capture_placement
            from lm_eval_tasks.dataset import refuse

            try:  # a split the capture cannot serve yet: one line, before any request
                check_capture_placement(self.model, f"attnspan-hf: --model_args {MODEL_ARG}=true")
            except ValueError as error:
                refuse(str(error))
            size = self.batch_size if isinstance(self.batch_size, int) else 16
            self.meter = AttentionMeter(self.model, self.char_tok, size)

    # --- parallelize=True ----------------------------------------------------------------
    def _follow_dispatch(self) -> None:
        """With the model split by accelerate, HFLM's device is its `device` argument
        ("cuda" unless given) and inputs go there; they must go where the input embeddings
        run (on a CPU-only machine: the CPU)."""
        from harness.foundation.dispatch import input_device, is_dispatched

        if isinstance(self.model, torch.nn.Module) and is_dispatched(self.model):
            self._device = input_device(self.model)

    def _get_accelerate_args(self, *args: Any, **kwargs: Any) -> dict:
        """HFLM's, except that parallelize=True on a machine without GPUs (and no
        max_cpu_memory) gives no max_memory rather than an empty one: accelerate reads {}
        as "no device holds anything" and offloads the whole model to disk."""
        out = super()._get_accelerate_args(*args, **kwargs)
        if out.get("max_memory") == {}:
            out["max_memory"] = None
        return out

    # --- building the ids of one request ---------------------------------------------
    def encode_request(self, context: str, doc: dict[str, Any]) -> list[int]:
        """Token ids for an attnspan context: "[instruction\\n](shot\\n)*prompt"."""
        instruction, shots, chat = self.prompt_layout(context, doc)
        self.check_vocabulary(doc["prompt"] + "".join(shots), instruction, chat)
        return encode_prompt(self.char_tok, doc["prompt"], instruction, shots, chat=chat)

    def check_vocabulary(self, text: str, instruction: str | None, chat: bool) -> None:
        """Every id of the request inside the model's vocabulary (`harness.foundation.models.
        check_vocabulary`: a tokenizer larger than the model is named, not an IndexError
        in the forward); each character and layout is checked once."""
        from types import SimpleNamespace

        from harness.foundation.models import check_vocabulary
        from lm_eval_tasks.dataset import refuse

        chars = set(text) - self._checked_chars
        if not chars and (instruction, chat) in self._checked_layouts:
            return
        prompt = SimpleNamespace(instruction=instruction, chat=chat)
        try:
            check_vocabulary(self.model, self.char_tok, "".join(sorted(chars)), prompt)
        except ValueError as error:
            name = getattr(self.model, "name_or_path", "") or "the model"
            refuse(f"attnspan-hf: model {name!r}: {error}")
        self._checked_chars |= chars
        self._checked_layouts.add((instruction, chat))

    def prompt_layout(self, context: str, doc: dict[str, Any]) -> tuple[str | None, list, bool]:
        """(instruction or None, few-shot texts, chat) of an attnspan context."""
        chat = context.startswith(CHAT_MARK)
        text = context[len(CHAT_MARK) :] if chat else context
        prompt = doc["prompt"]
        if not text.endswith(prompt):
            raise ValueError(f"attnspan-hf: the context does not end with the prompt {prompt!r}")
        head = text[: len(text) - len(prompt)]
        instruction = doc.get("instruction") or ""
        if instruction:
            # Everything up to the task's instruction (a --system_instruction, if any, comes
            # before it) is tokenised normally.
            cut = head.find(instruction + SHOT_SEPARATOR)
            if cut < 0:
                raise ValueError(
                    f"attnspan-hf: the context does not contain the instruction {instruction!r}"
                )
            end = cut + len(instruction)
            instruction, head = head[:end], head[end + len(SHOT_SEPARATOR) :]
        shots = head.split(SHOT_SEPARATOR)[:-1] if head else []
        return instruction or None, shots, chat

    def generate_until(self, requests: list, disable_tqdm: bool = False) -> list[str]:
        for request in requests:
            doc = request.doc
            if isinstance(doc, dict) and "prompt" in doc and "length_bins" in doc:
                context = request.args[0]
                self._encoded[context] = self.encode_request(context, doc)
                if self.meter is not None:
                    self._pending[tuple(self._encoded[context])] = self._item(request)
        try:
            answers = super().generate_until(requests, disable_tqdm=disable_tqdm)
            if self.meter is not None:
                answers = self._measure(requests, answers)
            return answers
        finally:
            self._encoded.clear()
            self._generated.clear()
            self._pending.clear()
            self._measured.clear()

    # --- attention=true ----------------------------------------------------------------
    def _item(self, request) -> tuple[Any, Any, list[str]]:
        """(instance, encoding, stop sequences) of an attnspan request: what the measurement
        needs, the encoding built as the harness builds it (gold reference positions)."""
        from types import SimpleNamespace

        doc, context = request.doc, request.args[0]
        instance = SimpleNamespace(
            index=len(self._pending),  # unique in this call (documents of several tasks)
            prompt=doc["prompt"],
            target=doc["target"],
            reference=doc["reference"],
            length=doc["length"],
        )
        instruction, shots, chat = self.prompt_layout(context, doc)
        encoding = encode_instance(self.char_tok, instance, instruction, shots, chat)
        return instance, encoding, list(request.args[1].get("until") or [])

    def _model_generate(self, context, max_length, stop, **generation_kwargs):
        generate = super()._model_generate
        if self.meter is None:
            return generate(context, max_length, stop, **generation_kwargs)
        # Each row's prompt ids without the left padding: the key of its request.
        mask = generation_kwargs.get("attention_mask")
        width = context.shape[1]
        keys = [
            tuple(row if mask is None else row[width - int(mask[b].sum()) :])
            for b, row in enumerate(context.tolist())
        ]
        items = [self._pending.get(key) for key in keys]
        if all(items):
            stops = self._stop_ids()
            # Recorded while generating, as `attentionspan attention` records.
            out, records = self.meter.during_generation(
                [(x, e) for x, e, _ in items],
                context,
                mask,
                lambda: generate(context, max_length, stop, **generation_kwargs),
                lambda b, new: self.written(new, stops, items[b][2], items[b][1].target_len),
            )
            if records is not None:
                self._measured.update(zip(keys, records))
                return out
        else:
            out = generate(context, max_length, stop, **generation_kwargs)
        # A batch with another task's rows (or another layout): measured after, by a forward.
        for b, key in enumerate(keys):
            self._generated[key] = out[b, width:].tolist()
        return out

    def _measure(self, requests: list, answers: list[str]) -> list[str]:
        """The attnspan answers as `Answer`s carrying the measurement of their tokens."""
        stops = self._stop_ids()
        payloads: dict[int, dict] = {}
        items, where = [], []
        for j, request in enumerate(requests):
            context = request.args[0]
            if context not in self._encoded:
                continue  # not an attnspan request
            key = tuple(self._encoded[context])
            if key in self._measured:
                payloads[j] = self._measured[key]
                continue
            if key not in self._generated:
                raise ValueError(
                    f"attnspan-hf: attention=true, but the prompt of "
                    f"{request.doc['prompt']!r} was cut to fit max_length: raise max_length"
                )
            instance, encoding, until = self._pending[key]
            written, finished = self.written(
                self._generated[key], stops, until, encoding.target_len
            )
            items.append((instance, encoding, written, finished))
            where.append(j)
        payloads.update(zip(where, self.meter.measure(items)))
        return [Answer(a, payloads[j]) if j in payloads else a for j, a in enumerate(answers)]

    def _stop_ids(self) -> set[int]:
        """The ids generation stops at: the tokenizer's EOS and the model's."""
        ids = {self.char_tok.eos_id}
        configured = getattr(self.model.generation_config, "eos_token_id", None)
        if configured is not None:
            ids |= set(configured) if isinstance(configured, (list, tuple)) else {configured}
        return ids

    def written(self, generated: list[int], stops: set[int], until: list[str], limit: int):
        """(ids the model wrote before its stop, finished: an EOS came): the analysis's
        written tokens, the first `limit` (the target's length) of them. A stop sequence
        ("\\n") ends the answer as lm-eval cuts it; its token is written (a wrong token, as
        an EOS within the target), nothing after it."""
        ids: list[int] = []
        text = ""
        for token in generated[:limit]:
            if token in stops:
                return ids, True
            ids.append(token)
            text += self.char_tok.decode([token])
            if any(s in text for s in until):
                break
        return ids, False

    # --- HFLM's hooks ------------------------------------------------------------------
    def apply_chat_template(
        self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True
    ) -> str:
        # lm-eval gives system(instruction) + user/assistant turns; with
        # --fewshot_as_multiturn the shots are separate turns, each answer losing its "\n".
        parts = []
        for message in chat_history:
            parts.append(message["content"])
            if message["role"] == "assistant":
                parts.append(SHOT_SEPARATOR)
        return CHAT_MARK + "".join(parts)

    def tok_encode(
        self, string: str, add_special_tokens: bool | None = None, left_truncate_len=None, **kw
    ) -> list[int]:
        if string in self._encoded:
            ids = self._encoded[string]
            return ids[-left_truncate_len:] if left_truncate_len else list(ids)
        return super().tok_encode(string, add_special_tokens, left_truncate_len, **kw)

    def tok_batch_encode(
        self,
        strings: list[str],
        padding_side: str = "left",
        left_truncate_len: int | None = None,
        truncation: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not any(s in self._encoded for s in strings):
            return super().tok_batch_encode(strings, padding_side, left_truncate_len, truncation)
        rows = [self.tok_encode(s, left_truncate_len=left_truncate_len) for s in strings]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.char_tok.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            span = slice(width - len(row), width) if padding_side == "left" else slice(0, len(row))
            ids[i, span] = torch.tensor(row, dtype=torch.long)
            mask[i, span] = 1
        return ids, mask

    def tok_decode(self, tokens, skip_special_tokens: bool = True) -> str:
        if not self._encoded:  # not an attnspan request: decode as HFLM does
            return super().tok_decode(tokens, skip_special_tokens=skip_special_tokens)
        if isinstance(tokens, int):
            tokens = [tokens]
        return self.char_tok.decode(tokens, skip_special_tokens=skip_special_tokens)
