"""The one scoring engine: every model pass of eval, attention, heads and interventions.

    from harness.engine.scoring import Scorer, Processes
    scorer = Scorer(model, char_tok, prompt, batch_size=16)
    records = scorer.run(instances, score_one_batch)      # checked, eval mode, batched
    gen, rec = scorer.generate(encodings, plan)           # greedy, under a capture plan
    tf, rec = scorer.teacher_force(encodings, plan)       # one forward, under a plan
    length = scorer.length(instance)                      # the task's own length_bucket

A `Scorer` owns what every pass shares:
- texts checked against the tokenizer before any model call (the error names the
  character), the model in eval mode for the run and back after it;
- batches in the one left-padded layout (`harness.engine.inference.collate_left`) whose reference
  mask is `harness.foundation.data.reference_mask` (`batch.reference_mask()`);
- greedy generation (`max_new_tokens`: one token past the longest target, which decides
  exact match for every row) and teacher forcing, each optionally under an
  `AttentionPlan` (`harness.engine.capture`), returning the capture record with it;
- the answer rule (cut at the target length + 1, so an answer does not depend on its batch
  mates) and the length rule (the task's own `length_bucket`, as lm-eval reports it).

`Processes` is a process's share of the work and the gathering of everyone's records
(`accelerate launch`); `Processes.of(accelerator)` wraps one a caller already has. Under
tensor parallelism (`Processes(tensor_parallel=True)`, a model loaded with `--tp-plan`) the
processes split every layer's heads, not the data: each runs every instance, the same
generation in each, so there is no share to take and nothing to gather (capture gathers
the heads); only the main process writes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from harness.engine.inference import (
    collate_left,
    generate_batch,
    last_logits_only,
    model_shape,
    teacher_forced_batch,
)
from harness.foundation.data import PromptConfig, shard_indices
from harness.foundation.dispatch import input_device, launched_processes
from harness.foundation.tokenization import CharTokenizer

__all__ = [
    "Processes",
    "Scorer",
    "answer_text",
    "check_texts",
    "collate_left",
    "eval_mode",
    "model_shape",
    "max_new_tokens",
]


# --- shared rules -------------------------------------------------------------------------
def check_texts(char_tok: CharTokenizer, instances: Sequence[Any]) -> None:
    """ValueError naming the first character the tokenizer lacks, before any model call."""
    for instance in instances:
        char_tok.check_text(instance.text)


@contextlib.contextmanager
def eval_mode(model) -> Iterator[None]:
    """The model in eval mode inside the block, in its previous mode after it."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def max_new_tokens(encodings) -> int:
    """One token past the longest target decides exact match for every row: an answer that
    goes on without EOS is already wrong at that token."""
    return max(e.target_len for e in encodings) + 1


def answer_text(char_tok: CharTokenizer, ids: Sequence[int], encoding) -> str:
    """A generated answer cut at its own target length + 1, so that what is saved does not
    depend on which other instances shared the batch."""
    return char_tok.decode(list(ids[: encoding.target_len + 1]), skip_special_tokens=True)


class LengthRule:
    """The length an instance is reported under: its config's `length_bucket` (the task's
    own rule, the one lm-eval reports through); configs resolved once each."""

    def __init__(self) -> None:
        self._configs: dict[str, Any] = {}

    def __call__(self, instance) -> int:
        from attentionspan_datasets.generation import resolve_config

        name = instance.config or instance.task
        if name not in self._configs:
            self._configs[name] = resolve_config(name)
        return int(self._configs[name].length_bucket(instance.params))


# --- the engine ---------------------------------------------------------------------------
class Scorer:
    """One model, tokenizer, prompt and batch size: the passes every command runs."""

    def __init__(
        self,
        model,
        tokenizer,
        prompt: PromptConfig | None = None,
        batch_size: int = 16,
        mixed_precision: str = "no",
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.char_tok = (
            tokenizer if isinstance(tokenizer, CharTokenizer) else CharTokenizer(tokenizer)
        )
        self.prompt = prompt or PromptConfig()
        self.batch_size = batch_size
        self.mixed_precision = mixed_precision
        self.length = LengthRule()

    # -- the loop
    def encode(self, instances: Sequence[Any]):
        return [self.prompt.encode(self.char_tok, x) for x in instances]

    def batches(self, instances: Sequence[Any]) -> Iterator[tuple[Sequence[Any], list]]:
        """(instances, encodings) of each batch, in order."""
        for first in range(0, len(instances), self.batch_size):
            chunk = instances[first : first + self.batch_size]
            yield chunk, self.encode(chunk)

    def run(
        self,
        instances: Sequence[Any],
        score: Callable[[Sequence[Any], list], Any],
        on_batch: Callable[[int], None] | None = None,
    ) -> list[Any]:
        """`score(chunk, encodings)` for every batch, texts checked first, the model in
        eval mode throughout; the list of what each call returned."""
        check_texts(self.char_tok, instances)
        out = []
        with eval_mode(self.model):
            for chunk, encodings in self.batches(instances):
                out.append(score(chunk, encodings))
                if on_batch is not None:  # after the batch is scored, so 100% means done
                    on_batch(len(chunk))
        return out

    # -- the passes
    def generate(self, encodings, plan=None, max_new: int | None = None, **generate_kwargs):
        """(greedy `Generation`, capture record or None). Under a plan (even an empty one)
        generation runs the capture attention function, so a later analysis forward sees
        the same eager arithmetic."""
        max_new = max_new_tokens(encodings) if max_new is None else max_new
        with self._capture(plan) as record:
            gen = generate_batch(
                self.model,
                self.char_tok,
                encodings,
                max_new,
                self.mixed_precision,
                **generate_kwargs,
            )
        return gen, record

    def teacher_force(self, encodings, plan=None, **forward_kwargs):
        """(`TeacherForced`, capture record or None): one forward over prompt + target."""
        with self._capture(plan) as record:
            forced = teacher_forced_batch(
                self.model, self.char_tok, encodings, self.mixed_precision, **forward_kwargs
            )
        return forced, record

    def forward(self, batch, plan, attention_only: bool = False):
        """The capture record of one forward over `batch` (its logits are not needed);
        `attention_only` keeps one position of logits where the model allows it."""
        import torch

        options = last_logits_only(self.model) if attention_only else {}
        with torch.inference_mode(), self._capture(plan) as record:
            self.model(**batch.model_inputs(input_device(self.model)), **options)
        return record

    @contextlib.contextmanager
    def _capture(self, plan):
        if plan is None:
            yield None
            return
        from harness.engine.capture import capture_attention

        with capture_attention(self.model, plan) as record:
            yield record

    # -- records
    def answer_record(self, instance, encoding, ids) -> dict[str, Any]:
        """The fields every per-instance record shares: the answer and its scores."""
        from attentionspan_datasets.metrics import score

        answer = answer_text(self.char_tok, ids, encoding)
        scores = score(answer, instance.target)
        return {
            "config": instance.config,
            "index": instance.index,
            "length": self.length(instance),
            "prediction": answer,
            "exact_match": scores["exact_match"],
            "partial_acc": scores["partial_acc"],
        }


def token_accuracy(correct: Sequence[bool]) -> float:
    """The share of target characters that are right (1.0 for an empty target)."""
    return sum(correct) / len(correct) if correct else 1.0


# --- processes ----------------------------------------------------------------------------
class Processes:
    """This process's share of the evaluation work, and the gathering of it. Without
    `accelerate launch` there is one process and nothing to gather. With `tensor_parallel`
    the launched processes share one model by heads: `accelerator` (the data-parallel
    one, which the measurements shard by) is None, every process takes every instance,
    and `main`, `barrier` and `device` are the launch's."""

    def __init__(self, device: str = "auto", tensor_parallel: bool = False):
        import torch

        self.accelerator = None
        self._launch = None  # the processes' own accelerator under tensor parallelism
        world = launched_processes()  # WORLD_SIZE that is no count: one line naming it
        want_cpu = device == "cpu" or (device == "auto" and not torch.cuda.is_available())
        if device == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda, but no CUDA device is available")
        if world > 1:
            from accelerate import Accelerator

            launch = Accelerator(cpu=want_cpu)  # the process group (gloo on CPU)
            self.device = launch.device
            if tensor_parallel:
                self._launch = launch
            else:
                self.accelerator = launch
        else:
            self.device = torch.device("cpu" if want_cpu else "cuda")

    @classmethod
    def of(cls, accelerator=None) -> Processes:
        """The processes of an accelerator a caller already made (None: this one alone)."""
        procs = cls.__new__(cls)
        procs.accelerator = accelerator
        procs._launch = None
        # Alone, the device is wherever the caller put the model: nothing to choose here.
        procs.device = accelerator.device if accelerator is not None else None
        return procs

    @property
    def tensor_parallel(self) -> bool:
        """The launched processes share one model by heads (each runs every instance)."""
        return self._launch is not None

    @property
    def world(self) -> int:
        return self.accelerator.num_processes if self.accelerator else 1

    @property
    def rank(self) -> int:
        return self.accelerator.process_index if self.accelerator else 0

    @property
    def main(self) -> bool:
        if self._launch is not None:
            return self._launch.is_main_process
        return self.rank == 0

    def share(self, count: int) -> range:
        return shard_indices(0, count, self.world, self.rank)

    def gather_list(self, items: list) -> list:
        """Every process's `items`, concatenated in process order (the same everywhere)."""
        if self.world == 1:
            return items
        from accelerate.utils import gather_object

        return [x for part in gather_object([items]) for x in part]

    def gather(self, records: dict[str, list]) -> dict[str, list]:
        """Per name, every process's records, sorted by instance index."""
        if self.world == 1:
            return records
        from accelerate.utils import gather_object

        parts = gather_object([records])
        merged = {name: [r for part in parts for r in part[name]] for name in records}
        for rows in merged.values():
            rows.sort(key=lambda r: r["index"])
        return merged

    def barrier(self) -> None:
        for launch in (self.accelerator, self._launch):
            if launch is not None:
                launch.wait_for_everyone()
