"""The options of attention supervision (`attentionspan train --attention-supervision`),
checked without a model, then resolved on one: which heads, and the weight at each step.

    attentionspan train ... --attention-supervision layer:1
    attentionspan train ... --attention-supervision 0.1,1.3 --supervision-shift 1
    attentionspan train ... --attention-supervision top:4 --supervision-ranking heads.json
    options = SupervisionOptions.of(train_config)     # checked when TrainConfig is made
    pairs = options.heads.resolve(layers, heads, ranking.order)   # [(layer, head), ...]
    options.weight_at(step, total_steps)

The loss itself is `harness.engine.supervision` (it reads the heads inside the capture
attention function). This module imports nothing heavy: a TrainConfig is checked on every
command line and run file, before torch is loaded.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from attentionspan_datasets.tasks.base import MASK_VARIANTS
from harness.foundation.caps import check_int

LOSSES = ("ce", "mass")
MASKS = MASK_VARIANTS  # the data layer's masks: paper, sufficient, minimal
SCHEDULES = ("constant", "linear", "warmup")
# Rankings look at ref-2 .. ref+2 and a shallow model's lookup reads ref+1; past the
# longest task text a shift only empties every row.
MAX_SHIFT = 32
HEADS_FORMS = "layer:L[,L...], LAYER.HEAD,... (e.g. 0.1,1.3) or top:N"


@dataclass(frozen=True)
class HeadChoice:
    """The heads an `--attention-supervision` text names: every head of some layers
    (`layer:1`), (layer, head) pairs (`0.1,1.3`), or the first N of a ranking (`top:4`)."""

    text: str
    kind: str  # "layer", "pairs" or "top"
    values: tuple = ()

    @classmethod
    def parse(cls, text: str) -> HeadChoice:
        def bad(why: str = "") -> ValueError:
            return ValueError(f"'attention_supervision' must be {HEADS_FORMS}, got {text!r}{why}")

        compact = text.replace(" ", "")
        kind, sep, rest = compact.partition(":")
        if sep and kind in ("layer", "top"):
            items = rest.split(",")
            if not all(item.isdigit() for item in items):
                raise bad()
            numbers = tuple(int(item) for item in items)
            if kind == "top" and (len(numbers) != 1 or numbers[0] < 1):
                raise bad(" (top:N takes one N >= 1)")
            if len(set(numbers)) != len(numbers):
                raise bad(" (a layer named twice)")
            return cls(text, kind, numbers)
        pairs = []
        for item in compact.split(","):
            layer, dot, head = item.partition(".")
            if not (dot and layer.isdigit() and head.isdigit()):
                raise bad()
            pairs.append((int(layer), int(head)))
        if len(set(pairs)) != len(pairs):
            raise bad(" (a head named twice)")
        return cls(text, "pairs", tuple(pairs))

    def resolve(
        self, layers: int, heads: int, ranking: list | None = None
    ) -> list[tuple[int, int]]:
        """The (layer, head) pairs on a model of `layers` x `heads` query heads; `ranking`:
        the order of a head ranking (best first), which `top:N` reads. ValueError naming the
        option and what the model allows."""
        where = f"'attention_supervision' {self.text!r}"
        if self.kind == "top":
            (count,) = self.values
            if ranking is None:
                raise ValueError(f"{where} needs 'supervision_ranking' (a heads.json)")
            if count > len(ranking):
                raise ValueError(
                    f"{where}: the ranking holds {len(ranking)} heads ({layers} layers x "
                    f"{heads} heads), fewer than {count}"
                )
            pairs = [(int(la), int(h)) for la, h in ranking[:count]]
        elif self.kind == "layer":
            pairs = [(layer, head) for layer in self.values for head in range(heads)]
        else:
            pairs = list(self.values)
        for layer, head in pairs:
            if not 0 <= layer < layers:
                raise ValueError(
                    f"{where}: layer {layer} is out of range; the model has {layers} "
                    f"layers (0-{layers - 1})"
                )
            if not 0 <= head < heads:
                raise ValueError(
                    f"{where}: head {layer}.{head} is out of range; the model has {heads} "
                    f"heads per layer (0-{heads - 1})"
                )
        return pairs


@dataclass(frozen=True)
class SupervisionOptions:
    """TrainConfig's supervision fields (same names; their help is on TrainConfig), checked.
    Off when `attention_supervision` is empty; then every other field must keep its
    default, so an option given alone is not silently ignored."""

    attention_supervision: str = ""
    supervision_ranking: str = ""
    supervision_mask: str = "paper"
    supervision_shift: int = 0
    supervision_loss: str = "ce"
    supervision_weight: float = 1.0
    supervision_schedule: str = "constant"
    supervision_warmup: float = 0.1

    @classmethod
    def of(cls, config: Any) -> SupervisionOptions:
        """The supervision fields of `config` (a TrainConfig or anything with them)."""
        return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(cls)})

    def __post_init__(self) -> None:
        for name in ("attention_supervision", "supervision_ranking"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"'{name}' must be a string, got {getattr(self, name)!r}")
        if not self.enabled:
            given = [
                f.name
                for f in dataclasses.fields(self)
                if f.name != "attention_supervision" and getattr(self, f.name) != f.default
            ]
            if given:
                raise ValueError(
                    f"'{given[0]}' is given without 'attention_supervision' (the heads to "
                    f"supervise: {HEADS_FORMS})"
                )
            return
        choice = self.heads  # a text that names no heads fails here
        if choice.kind == "top" and not self.supervision_ranking:
            raise ValueError(
                f"'attention_supervision' {self.attention_supervision!r} needs "
                "'supervision_ranking' (a heads.json from `attentionspan heads`)"
            )
        if choice.kind != "top" and self.supervision_ranking:
            raise ValueError(
                "'supervision_ranking' is read only by 'attention_supervision' top:N, got "
                f"{self.attention_supervision!r}"
            )
        for name, allowed in (
            ("supervision_mask", MASKS),
            ("supervision_loss", LOSSES),
            ("supervision_schedule", SCHEDULES),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"'{name}' must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )
        check_int("'supervision_shift'", self.supervision_shift, -MAX_SHIFT, MAX_SHIFT)
        weight = self.supervision_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight >= 0:
            raise ValueError(f"'supervision_weight' must be a number >= 0, got {weight!r}")
        warmup = self.supervision_warmup
        if isinstance(warmup, bool) or not isinstance(warmup, (int, float)):
            raise ValueError(f"'supervision_warmup' must be a number, got {warmup!r}")
        if not 0 < warmup <= 1:
            raise ValueError(f"'supervision_warmup' must be in (0, 1], got {warmup}")

    @property
    def enabled(self) -> bool:
        return bool(self.attention_supervision.strip())

    @property
    def heads(self) -> HeadChoice:
        return HeadChoice.parse(self.attention_supervision)

    def weight_at(self, step: int, total: int) -> float:
        """The weight of the supervision loss in the step taken after `step` steps of
        `total`: constant; linear, from the weight down to 0 at the end of the run; warmup,
        from 0 up to the weight over the first `supervision_warmup` share of the steps."""
        weight = float(self.supervision_weight)
        if not self.enabled:
            return 0.0
        if self.supervision_schedule == "linear":
            return weight * max(total - step, 0) / max(total, 1)
        if self.supervision_schedule == "warmup":
            ramp = max(round(self.supervision_warmup * total), 1)
            return weight * min(step / ramp, 1.0)
        return weight
