"""Training past one device with FSDP through accelerate (`harness.training.train` uses these).

    accelerate launch --config_file docs/accelerate/fsdp_cpu.yaml -m harness.commands.train ...

`make_accelerator` puts back the FSDP that accelerate 1.15 drops on a machine without GPUs
(and refuses FSDP1 there, which it cannot start); checkpoints gather the sharded optimizer
state into the numbered, full-size form a DDP run saves (`optimizer_state`, loaded back into
the shards by `load_sharded_optimizer_state`); evaluation generates on a gathered full copy
(`evaluation_model`). `run` below is a `harness.training.setup.Run`.
"""

from __future__ import annotations

from typing import Any


def make_accelerator():
    """This process's Accelerator. `accelerate launch --use_fsdp` (or a config file's
    `distributed_type: FSDP`) on a machine without GPUs: accelerate 1.15 sets the processes
    up as MULTI_CPU (gloo) and wraps the model in DDP without a word; torch 2.13 shards on
    CPU over gloo, so the launch's FSDP plugin (read from the environment) is put back."""
    import os

    import torch
    from accelerate import Accelerator, PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    asked = os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
    if asked and not torch.cuda.is_available() and os.environ.get("FSDP_VERSION") != "2":
        raise ValueError(
            "FSDP without GPUs needs fsdp_version 2 (--fsdp_version 2, or fsdp_version: 2 in "
            "the config file): accelerate 1.15's FSDP1 wants a GPU for sync_module_states, "
            "and without it torch refuses FSDP1's CPU device_id"
        )
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    if asked and accelerator.distributed_type == DistributedType.MULTI_CPU:
        accelerator.state.fsdp_plugin = FullyShardedDataParallelPlugin()
        # both: each AcceleratorState() made later copies PartialState's type again
        PartialState().distributed_type = DistributedType.FSDP
        accelerator.state.distributed_type = DistributedType.FSDP
    return accelerator


def is_fsdp(accelerator) -> bool:
    from accelerate.utils import DistributedType

    return accelerator.distributed_type == DistributedType.FSDP


def parameter_names(model, optimizer) -> list[str]:
    """The names of the optimizer's parameters in its order (its state numbers them so)."""
    name_of = {id(p): name for name, p in model.named_parameters()}
    return [name_of[id(p)] for group in optimizer.param_groups for p in group["params"]]


def tied_copies(model) -> list[str]:
    """The names under which a parameter appears again (a tied lm_head.weight)."""
    seen, copies = set(), []
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in seen:
            copies.append(name)
        seen.add(id(param))
    return copies


def optimizer_state(run) -> dict[str, Any]:
    """The optimizer's state_dict as a lone optimizer has it (parameters numbered, full
    tensors). Under FSDP every process takes part in gathering the shards, the main one
    keeps them: a checkpoint of an FSDP run is one of a DDP run, and resumes under either."""
    if not is_fsdp(run.accelerator) or not run.optimizer.state:
        # (no state yet, before the first step: nothing is sharded, and gathering would
        # first take a step of zero gradients to make some)
        return run.optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    named = get_optimizer_state_dict(run.model, run.optimizer.optimizer, options=options)
    if not named:  # not the main process: cpu_offload keeps the full state there alone
        return {}
    number = {name: i for i, name in enumerate(run.parameter_names)}
    return {
        "state": {number[name]: value for name, value in named["state"].items()},
        "param_groups": [
            {**group, "params": [number[name] for name in group["params"]]}
            for group in named["param_groups"]
        ],
    }


def load_sharded_optimizer_state(model, optimizer, saved: dict[str, Any], names: list[str]):
    """Load a checkpoint's (numbered, full) optimizer state into the prepared FSDP
    optimizer: every process read the file, each keeps its shard."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    # What set_up loaded before `prepare` is keyed by the parameters FSDP replaced.
    optimizer.optimizer.state.clear()
    if not saved["state"]:  # saved before the first step: the hyperparameters are loaded
        return
    named = {
        "state": {names[i]: value for i, value in saved["state"].items()},
        "param_groups": [
            {**group, "params": [names[i] for i in group["params"]]}
            for group in saved["param_groups"]
        ],
    }
    options = StateDictOptions(full_state_dict=True)
    set_optimizer_state_dict(model, optimizer.optimizer, named, options=options)


def evaluation_model(run):
    """The model evaluation generates with. Each process generates for its own share of
    the instances, to its own lengths, while each forward of an FSDP-sharded model is a
    collective of all processes: under FSDP each evaluates a gathered full copy."""
    bare = run.bare
    if not is_fsdp(run.accelerator):
        return bare
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from transformers import AutoModelForCausalLM

    full = get_model_state_dict(run.model, options=StateDictOptions(full_state_dict=True))
    copy = AutoModelForCausalLM.from_config(bare.config, dtype=next(iter(full.values())).dtype)
    copy.load_state_dict(full)
    return copy.to(run.accelerator.device).eval()
