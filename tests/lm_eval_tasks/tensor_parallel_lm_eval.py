"""lm-eval's attention metrics of `attnspan-hf` on a model sharded by heads (`tp_plan=auto`
in --model_args, lm-eval's own tensor-parallel argument), for test_tensor_parallel_lm_eval:

    torchrun --nproc-per-node 2 -m tests.lm_eval_tasks.tensor_parallel_lm_eval OUT MODEL_DIR

Every process runs every request (lm-eval's tensor-parallel mode: one model, no data
split); lm-eval returns the results in the main process only, which writes its metrics to
OUT/metrics.json.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

PRESET = "addition_id"
N = 8


def metrics(model) -> dict[str, float] | None:
    """attnspan_<PRESET>'s metrics (first N documents, no bootstrap) of an lm-eval model
    (None in a process other than the main one of a launch)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_tasks import TASKS_DIR

    results = lm_eval.simple_evaluate(
        model=model,
        tasks=[f"attnspan_{PRESET}"],
        task_manager=TaskManager(include_path=TASKS_DIR, include_defaults=False),
        limit=N,
        bootstrap_iters=0,
    )
    if results is None:
        return None
    return {
        k.removesuffix(",none"): v
        for k, v in results["results"][f"attnspan_{PRESET}"].items()
        if k.endswith(",none") and "_stderr" not in k
    }


def main(argv: list[str]) -> int:
    from harness.foundation.dispatch import tensor_parallel_of
    from lm_eval_tasks.models import AttnspanHFLM

    out, folder = Path(argv[0]), argv[1]
    model = AttnspanHFLM(pretrained=folder, batch_size=4, attention=True, tp_plan="auto")
    assert tensor_parallel_of(model.model) is not None
    found = metrics(model)
    assert (found is None) == (os.environ["RANK"] != "0")
    if found is not None:
        (out / "metrics.json").write_text(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
