"""One baseline run: train a model of models.py on a T1-T7 preset, keep the epoch with the
best validation accuracy, and score it on the test split (accuracy and decoder attention).

    from harness.baselines.train import RecipeConfig, run_one
    result = run_one("t6_len10", "t-pos+att", seed=0, data=data, recipe=RecipeConfig())

The recipe is the paper's appendix: Adam with learning rate 1e-4, dropout 0.2, gradient
clipping at 0.5 (norm), batch size 10, binary cross-entropy on the sigmoid output, the model
of the epoch with the highest validation accuracy. The paper runs 100 epochs; `epochs` and
`patience` (stop after that many epochs without a better validation accuracy) shorten it
where the curves have flattened.

Decoder attention is scored against the reference mask: per test instance, the share of
alpha on the vectors that the paper mask points into (the decisive occurrences; instances
whose mask has no input position, e.g. a T1 "no", are left out), overall and for correct
and wrong answers; and, as the paper's Table 3, alpha on the later minus the earlier of
the decisive pair's two vectors.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from harness.baselines.data import FeatureBatch
from harness.baselines.models import ModelConfig, build_model


@dataclass
class RecipeConfig:
    epochs: int = 100  # the paper's
    batch_size: int = 10  # the paper's
    lr: float = 1e-4  # Adam, the paper's
    clip: float = 0.5  # gradient-norm clipping, the paper's
    dropout: float = 0.2  # the paper's
    patience: int = 0  # epochs without a better validation accuracy before stopping; 0: off
    eval_batch_size: int = 1000
    # False: every epoch reads the training rows in their stored order, as the authors'
    # training loop does (it never reshuffles); True: a new permutation per epoch
    shuffle: bool = True

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"'{name}' must be >= 1, got {getattr(self, name)}")
        if self.patience < 0:
            raise ValueError(f"'patience' must be >= 0, got {self.patience}")
        if not self.lr > 0 or not self.clip > 0:
            raise ValueError(f"'lr' and 'clip' must be > 0, got {self.lr}, {self.clip}")


@torch.no_grad()
def predict(model: torch.nn.Module, data: FeatureBatch, batch_size: int):
    """(probabilities [N], decoder attention [N, n] or None) in eval mode."""
    model.eval()
    probs, attention = [], []
    for start in range(0, len(data), batch_size):
        logits, alpha = model(
            data.vectors[start : start + batch_size], data.query[start : start + batch_size]
        )
        probs.append(torch.sigmoid(logits))
        if alpha is not None:
            attention.append(alpha)
    return torch.cat(probs), (torch.cat(attention) if attention else None)


def accuracy(probs: torch.Tensor, labels: torch.Tensor) -> float:
    return float(((probs >= 0.5).float() == labels).float().mean())


def _mean(values: torch.Tensor) -> float | None:
    return float(values.mean()) if values.numel() else None


def accuracy_by_query(query: torch.Tensor, correct: torch.Tensor) -> dict[int, float] | None:
    """Accuracy per query id when every query is one feature or id (T1, T3-T7), else None
    (T2's two features): which queries a model has not learned."""
    if not bool((query.sum(dim=1) == 1).all()):
        return None
    ids = query.argmax(dim=1)
    return {int(q): float(correct[ids == q].float().mean()) for q in ids.unique()}


def attention_scores(alpha: torch.Tensor, data: FeatureBatch, correct: torch.Tensor) -> dict:
    """Share of decoder attention on the reference vectors, and Table 3's difference."""
    has_reference = data.reference.any(dim=1)
    share = (alpha * data.reference).sum(dim=1)
    paired = data.carriers[:, 0] >= 0
    rows = torch.arange(len(data))
    later = alpha[rows, data.carriers[:, 1].clamp(min=0)]
    earlier = alpha[rows, data.carriers[:, 0].clamp(min=0)]
    return {
        "share_on_reference": _mean(share[has_reference]),
        "share_on_reference_correct": _mean(share[has_reference & correct]),
        "share_on_reference_wrong": _mean(share[has_reference & ~correct]),
        "instances_with_reference": int(has_reference.sum()),
        "later_minus_earlier": _mean((later - earlier)[paired]),
        "instances_with_pair": int(paired.sum()),
    }


def train_epoch(
    model, train: FeatureBatch, recipe: RecipeConfig, optimizer, loss_fn, order, device
):
    """One pass over `train` (shuffled by the generator `order` when the recipe says so);
    the loss summed over its instances, as a tensor on `device`."""
    model.train()
    total = torch.zeros((), device=device)  # summed on the device: no sync per step
    if recipe.shuffle:
        permutation = torch.randperm(len(train), generator=order).to(device)
    else:
        permutation = torch.arange(len(train), device=device)
    for start in range(0, len(train), recipe.batch_size):
        batch = train.take(permutation[start : start + recipe.batch_size])
        logits, _ = model(batch.vectors, batch.query)
        loss = loss_fn(logits, batch.labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.clip)
        optimizer.step()
        total += loss.detach() * len(batch)
    return total


def score_authors(model, authors: FeatureBatch, recipe: RecipeConfig) -> dict:
    """Accuracy and attention on the authors' released test file (authors_data.py)."""
    probs, alpha = predict(model, authors, recipe.eval_batch_size)
    correct = ((probs >= 0.5).float() == authors.labels).cpu()
    return {
        "authors_test_accuracy": float(correct.float().mean()),
        "authors_test_attention": (
            attention_scores(alpha.cpu(), authors.to("cpu"), correct) if alpha is not None else None
        ),
    }


def run_one(
    config: str,
    kind: str,
    seed: int,
    data: dict[str, FeatureBatch],
    recipe: RecipeConfig,
    on_epoch: Callable[[int, float], None] | None = None,
    device: str = "cpu",
) -> dict:
    """Train one model from `seed` on data["train"], select on data["validation"], score on
    data["test"], on `device` ("cpu", "cuda", ...); a data["authors_test"] (the authors'
    test file, authors_data.py) is scored too. `on_epoch(epoch, validation_accuracy)`
    reports progress."""
    started = time.perf_counter()
    torch.manual_seed(seed)
    model_config = ModelConfig(kind=kind, dropout=recipe.dropout)
    model = build_model(model_config).to(device)
    data = {split: batch.to(device) for split, batch in data.items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.lr)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    train, validation = data["train"], data["validation"]
    order = torch.Generator().manual_seed(seed)
    best_accuracy, best_epoch, best_state = -1.0, 0, None
    history = []
    for epoch in range(1, recipe.epochs + 1):
        total = train_epoch(model, train, recipe, optimizer, loss_fn, order, device)
        probs, _ = predict(model, validation, recipe.eval_batch_size)
        val_accuracy = accuracy(probs, validation.labels)
        history.append(
            {"epoch": epoch, "train_loss": float(total) / len(train), "val_accuracy": val_accuracy}
        )
        if on_epoch is not None:
            on_epoch(epoch, val_accuracy)
        if val_accuracy > best_accuracy:
            best_accuracy, best_epoch = val_accuracy, epoch
            best_state = copy.deepcopy(model.state_dict())
        elif recipe.patience and epoch - best_epoch >= recipe.patience:
            break
    model.load_state_dict(best_state)
    test = data["test"]
    probs, alpha = predict(model, test, recipe.eval_batch_size)
    correct = ((probs >= 0.5).float() == test.labels).cpu()
    alpha = alpha.cpu() if alpha is not None else None
    test = test.to("cpu")
    result = {
        "config": config,
        "model": kind,
        "seed": seed,
        "test_accuracy": float(correct.float().mean()),
        "test_accuracy_by_query": accuracy_by_query(test.query, correct),
        "validation_accuracy": best_accuracy,
        "best_epoch": best_epoch,
        "epochs_run": len(history),
        "history": history,
        "parameters": sum(p.numel() for p in model.parameters()),
        "model_config": asdict(model_config),
        "seconds": round(time.perf_counter() - started, 1),
    }
    result["attention"] = attention_scores(alpha, test, correct) if alpha is not None else None
    if "authors_test" in data:  # the authors' released test file (authors_data.py)
        result.update(score_authors(model, data["authors_test"], recipe))
    if not math.isfinite(history[-1]["train_loss"]):
        raise ValueError(f"training diverged (loss {history[-1]['train_loss']})")
    return result
