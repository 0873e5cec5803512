"""Models split across devices: accelerate's big-model dispatch as transformers loads it
(`device_map`, `max_memory`, disk offload), the options that ask for it, and where a
dispatched model's inputs and layers run.

    attentionspan attention --model M --device-map auto --max-memory 0=20GiB,cpu=60GiB
    attentionspan eval --model M --device-map map.json --offload-folder /scratch/offload
    placement = Placement(device_map="auto", max_memory="0=20GiB,cpu=60GiB")
    model, tokenizer = load_model(spec, placement=placement)      # harness.foundation.models
    place_model(model, device)         # .to(device), unless the model is dispatched
    inputs = batch.model_inputs(input_device(model))             # the embeddings' device

A dispatched model must never be moved or gathered (`model.to` raises once some modules
are offloaded): its inputs go to where the input embeddings run, each layer runs where its
hook says, and weights offloaded to "cpu" (beside a GPU) or "disk" sit on the meta device
between forwards, loaded by accelerate's hooks. So `model.device` (the first weight's) can
be `meta`, and nothing here reads it.

Attention capture (`harness.engine.capture`) keeps its masks and per-row settings on one
device, where the input embeddings run (`input_device`); `check_capture_placement` refuses,
in one line, a placement it cannot serve yet: layers running on another device (two GPUs).
Once capture follows each layer's device (`.to(weights.device)` per layer), that check has
nothing left to refuse.

Tensor parallelism, as transformers and lm-eval shard a model (`tp_plan="auto"`), is the
other way past one device: `--tp-plan auto` under `attentionspan launch --num_processes N`
(or torchrun) loads the family's own plan (`base_model_tp_plan`), each process holding 1/N
of every layer's heads; `check_tensor_parallel` refuses, before the weights are read, a
family without a plan, heads (query or key/value) that N does not divide, and `--device-map`
beside it (`Placement`); `--tp-plan` in one process is refused (it would load the model
whole, unsharded, without a word). `launched_processes` reads WORLD_SIZE (a value that is
no count: one line naming the variable) and `launch_words` writes the launch a recorded
command needs to run as it ran.
`tensor_parallel_of(model)` says which heads this process holds. Nothing here
imports torch at module level, nor anything of the harness above the data layer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.foundation.options import cli
from harness.foundation.threads import launched_processes  # noqa: F401  (re-exported)

# transformers' / accelerate's strategies: fill the devices in order, or spread evenly.
STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
# A device of an explicit map: a GPU index, cpu, disk, or a torch device name.
_DEVICE = re.compile(r"^(cpu|disk|mps|(cuda|xpu|npu)(:\d+)?)$")
_MEMORY_KEY = re.compile(r"^(\d+|cpu|disk|mps|cuda:\d+)$")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS |= {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}

DEVICE_MAP_FORM = (
    f'{", ".join(STRATEGIES)}, a JSON object of module -> device (a GPU index, "cpu" or '
    '"disk"; e.g. \'{"model.embed_tokens": "cpu", "model.layers.0": 0, ..., '
    '"lm_head": "disk"}\') or a .json file holding one'
)
MAX_MEMORY_FORM = "DEVICE=SIZE,... with DEVICE a GPU index, cpu or disk (e.g. 0=20GiB,cpu=60GiB)"
PLACEMENT_GROUP = "model placement (accelerate's big-model dispatch; docs/usage_analysis.md)"
# transformers' own value for "the family's plan" (lm-eval's `tp_plan` model argument too)
TP_PLANS = ("auto",)


def placement_field(name: str):
    """The dataclass field of the option `name` (device_map, max_memory, offload_folder),
    declared once for every command that loads a model: default None, its help, its group."""
    helps = {
        "device_map": (
            "split the model across devices (accelerate's device_map): " + DEVICE_MAP_FORM,
            "MAP",
        ),
        "max_memory": (
            f"with --device-map auto/balanced/sequential: the most each device holds, "
            f"{MAX_MEMORY_FORM}",
            "DEVICE=SIZE,...",
        ),
        "offload_folder": (
            "with --device-map: folder for weights offloaded to disk that cannot be read "
            "from the model's own safetensors files",
            "FOLDER",
        ),
        "tp_plan": (
            "tensor parallelism under torchrun --nproc-per-node N: each process holds 1/N of "
            "every layer's heads (transformers' tp_plan; 'auto': the family's own plan)",
            "auto",
        ),
    }
    text, metavar = helps[name]
    return field(default=None, metadata=cli(text, group=PLACEMENT_GROUP, metavar=metavar))


# --- the options ------------------------------------------------------------------------
def parse_device_map(text: Any) -> str | dict[str, int | str]:
    """A strategy name or an explicit {module: device} map from `--device-map`'s text (a
    strategy, a JSON object, or the path of a .json file holding one); ValueError naming
    the option and the allowed form."""
    if isinstance(text, dict):
        return _check_map(text, "--device-map")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"--device-map must be {DEVICE_MAP_FORM}, got {text!r}")
    text = text.strip()
    if text in STRATEGIES:
        return text
    if text.startswith("{"):
        from attentionspan_datasets.jsonfile import parse_json

        return _check_map(parse_json(text, "--device-map"), "--device-map")
    path = Path(text).expanduser()
    if path.suffix == ".json" or path.is_file():
        from attentionspan_datasets.jsonfile import read_json

        return _check_map(read_json(path, "--device-map", expect=dict), f"--device-map {text}")
    raise ValueError(f"--device-map must be {DEVICE_MAP_FORM}, got {text!r}")


def _check_map(value: Any, where: str) -> dict[str, int | str]:
    if not isinstance(value, dict) or not value:
        raise ValueError(f"{where}: must be a non-empty JSON object of module -> device")
    out: dict[str, int | str] = {}
    for module, device in value.items():
        if isinstance(device, bool) or not (
            (isinstance(device, int) and device >= 0)
            or (isinstance(device, str) and _DEVICE.match(device))
        ):
            raise ValueError(
                f"{where}: module {module!r} has device {device!r}; allowed: a GPU index "
                '(0, 1, ...), "cpu", "disk", "cuda:N" or "mps"'
            )
        out[str(module)] = device
    return out


MAX_SIZE = 1 << 50  # bytes (1 PiB): past every machine's memory, and a finite float


def parse_size(text: Any, name: str) -> int:
    """Bytes of a size such as 20GiB, 500MB, 1.5GB or 1048576 (ValueError naming `name`)."""
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        size = text
    else:
        match = _SIZE.match(str(text))
        size = float(match.group(1)) * _UNITS[(match.group(2) or "b").lower()] if match else 0
    if size < 1:
        raise ValueError(
            f"{name} must be a size such as 20GiB, 500MB or a number of bytes, got {text!r}"
        )
    if size > MAX_SIZE:  # 400 nines is inf as a float: int() of it overflowed
        shown = str(text) if len(str(text)) <= 40 else str(text)[:37] + "..."
        raise ValueError(f"{name} must be at most 1PiB (the cap), got {shown!r}")
    return int(size)


def parse_max_memory(text: Any) -> dict[int | str, int]:
    """{device: bytes} from `--max-memory` (`0=20GiB,cpu=60GiB`, or a JSON object of the
    same); ValueError naming the option and the allowed form."""
    if isinstance(text, str) and text.strip().startswith("{"):
        from attentionspan_datasets.jsonfile import parse_json

        try:  # absurd nesting included (a ValueError there, not json's RecursionError)
            pairs = list(parse_json(text, "--max-memory").items())
        except (ValueError, AttributeError):
            raise ValueError(f"--max-memory must be {MAX_MEMORY_FORM}, got {text!r}") from None
    elif isinstance(text, dict):
        pairs = list(text.items())
    elif isinstance(text, str) and text.strip():
        pairs = [part.partition("=")[::2] for part in text.split(",")]
        if any("=" not in part for part in text.split(",")):
            raise ValueError(f"--max-memory must be {MAX_MEMORY_FORM}, got {text!r}")
    else:
        raise ValueError(f"--max-memory must be {MAX_MEMORY_FORM}, got {text!r}")
    out: dict[int | str, int] = {}
    for key, size in pairs:
        key = str(key).strip().lower()
        if not _MEMORY_KEY.match(key):
            raise ValueError(
                f"--max-memory: device {key!r} is not a GPU index, cpu, disk or mps "
                f"({MAX_MEMORY_FORM})"
            )
        device: int | str = int(key.removeprefix("cuda:")) if key[-1].isdigit() else key
        if device in out:
            raise ValueError(f"--max-memory gives device {key!r} twice")
        out[device] = parse_size(size, f"--max-memory {key}")
    return out


@dataclass(frozen=True)
class Placement:
    """Where a model's weights go when it is loaded: one device (the default: nothing
    given), or split by accelerate (`device_map`), each device holding at most
    `max_memory`, weights that fit nowhere offloaded to disk (`offload_folder` where the
    checkpoint's own safetensors cannot serve). The texts are the options' own, as given."""

    device_map: str | None = None
    max_memory: str | None = None
    offload_folder: str | None = None
    tp_plan: str | None = None  # "auto": tensor parallelism over the launched processes

    def __post_init__(self) -> None:
        if self.tp_plan is not None:
            if self.tp_plan not in TP_PLANS:
                raise ValueError(f"--tp-plan must be one of {TP_PLANS}, got {self.tp_plan!r}")
            if self.device_map is not None:
                raise ValueError(
                    "--tp-plan and --device-map exclude each other: tensor parallelism "
                    "splits every layer's heads over the processes, a device map splits the "
                    "layers of one process"
                )
        if self.device_map is None:
            for name in ("max_memory", "offload_folder"):
                if getattr(self, name) is not None:
                    flag = "--" + name.replace("_", "-")
                    raise ValueError(f"{flag} needs --device-map (e.g. --device-map auto)")
            return
        device_map = parse_device_map(self.device_map)
        if self.max_memory is not None:
            if not isinstance(device_map, str):
                raise ValueError(
                    "--max-memory needs --device-map auto, balanced, balanced_low_0 or "
                    "sequential (an explicit map already says where each module goes)"
                )
            parse_max_memory(self.max_memory)
        if self.offload_folder is not None:
            folder = Path(self.offload_folder).expanduser()
            if folder.exists() and not folder.is_dir():
                raise ValueError(
                    f"--offload-folder {self.offload_folder!r} is a file; give a folder"
                )

    @classmethod
    def of(cls, config: Any) -> Placement:
        """The placement a config's device_map / max_memory / offload_folder fields give."""
        return cls(
            getattr(config, "device_map", None),
            getattr(config, "max_memory", None),
            getattr(config, "offload_folder", None),
            getattr(config, "tp_plan", None),
        )

    @property
    def dispatched(self) -> bool:
        return self.device_map is not None

    @property
    def tensor_parallel(self) -> bool:
        """Tensor parallelism asked for (`--tp-plan`); it shards only over several processes."""
        return self.tp_plan is not None

    def load_kwargs(self) -> dict[str, Any]:
        """Keywords of `from_pretrained` (none for one device), checked against the devices
        this machine has (a GPU index with no such GPU: one line, not torch's error). Under
        `--tp-plan`: transformers' DistributedConfig, over several processes (one process is
        refused: `check_tensor_parallel_processes`)."""
        if self.tensor_parallel:
            check_tensor_parallel_processes(launched_processes())
            from transformers.distributed import DistributedConfig

            return {"distributed_config": DistributedConfig(tp_plan=self.tp_plan)}
        if not self.dispatched:
            return {}
        device_map = parse_device_map(self.device_map)
        kwargs: dict[str, Any] = {"device_map": device_map}
        devices: list[Any] = []
        if isinstance(device_map, dict):
            devices = list(device_map.values())
        if self.max_memory is not None:
            kwargs["max_memory"] = parse_max_memory(self.max_memory)
            devices += list(kwargs["max_memory"])
        if self.offload_folder is not None:
            kwargs["offload_folder"] = str(Path(self.offload_folder).expanduser())
        check_devices_exist(devices)
        return kwargs

    def check_processes(self, world: int) -> None:
        """ValueError when several processes would each load the whole dispatched model."""
        if self.dispatched and world > 1:
            raise ValueError(
                f"--device-map splits one model across devices, but {world} processes were "
                "launched (accelerate launch): run it as one process"
            )


LAUNCH_HINT = "attentionspan launch --num_processes N COMMAND ..."


def check_tensor_parallel_processes(processes: int) -> None:
    """ValueError when `--tp-plan` runs in one process: nothing to shard, and the model
    would load whole without a word (a rerun of a sharded run's command read alike)."""
    if processes < 2:
        raise ValueError(
            f"--tp-plan shards the model over several processes, but this is one: start it "
            f"with `{LAUNCH_HINT}` (N dividing the model's heads), or leave --tp-plan out"
        )


def launch_words(processes: int | None = None) -> list[str]:
    """The words a recorded command starts with: `attentionspan`, or, for a run of several
    processes, `attentionspan launch --multi_gpu --num_processes N`, so that the command run
    as written is sharded (or shared out) as the recorded run was."""
    processes = launched_processes() if processes is None else processes
    if processes < 2:
        return ["attentionspan"]
    return ["attentionspan", "launch", "--multi_gpu", "--num_processes", str(processes)]


def check_tensor_parallel(config: Any, processes: int, where: str = "the model") -> None:
    """ValueError (one line) before the weights are read when `processes` cannot shard the
    model of `config` (its text config) by heads: a family without a tensor-parallel plan in
    transformers (`base_model_tp_plan`), or query or key/value heads that the processes do
    not divide (each process must hold whole heads, and the same share of each)."""
    plan = getattr(config, "base_model_tp_plan", None)
    if not plan:
        raise ValueError(
            f"{where}: model_type {getattr(config, 'model_type', '?')!r} has no tensor-parallel "
            "plan in transformers (base_model_tp_plan); run it without --tp-plan"
        )
    if processes < 2:
        return
    heads = int(config.num_attention_heads)
    kv = int(getattr(config, "num_key_value_heads", None) or heads)
    for name, count in (("attention heads", heads), ("key/value heads", kv)):
        if count % processes:
            raise ValueError(
                f"{where}: its {count} {name} per layer cannot be split over {processes} "
                f"processes (--tp-plan needs a process count that divides {count})"
            )


@dataclass(frozen=True)
class TensorShard:
    """The heads one process of a tensor-parallel model holds: global query heads
    `offset .. offset + local - 1` (key/value heads alike, `offset // groups ..`), rank
    `rank` of `size` in `group` (the tensor-parallel process group)."""

    rank: int
    size: int
    group: Any = field(default=None, compare=False)

    def heads(self, total: int) -> tuple[int, int]:
        """(offset, local) of this process among `total` heads per layer."""
        local = total // self.size
        return self.rank * local, local


def tensor_parallel_of(model) -> TensorShard | None:
    """This process's shard of a model loaded with a tensor-parallel plan over several
    processes (transformers' `_tp_size` and the `tp` dimension of its device mesh), else
    None. transformers' colwise plan splits q/k/v projections into contiguous blocks of
    heads in rank order: head h of process r is global head r * local + h."""
    size = getattr(model, "_tp_size", None)
    mesh = getattr(model, "_device_mesh", None)
    if not size or int(size) < 2 or mesh is None:
        return None
    tp = mesh["tp"] if mesh.mesh_dim_names and len(mesh.mesh_dim_names) > 1 else mesh
    return TensorShard(int(tp.get_local_rank()), int(tp.size()), tp.get_group())


def check_devices_exist(devices) -> None:
    """ValueError naming the first GPU of `devices` (indices, "cuda:N") this machine lacks."""
    import torch

    count = torch.cuda.device_count()
    for device in devices:
        text = str(device)
        index = None
        if isinstance(device, int) and not isinstance(device, bool):
            index = device
        elif text == "cuda" or text.startswith("cuda:"):
            index = int(text.partition(":")[2] or 0)
        if index is not None and index >= count:
            raise ValueError(
                f"--device-map / --max-memory name GPU {index}, but this machine has "
                f"{count} CUDA device(s); use cpu and disk, or indices below {count}"
                if count
                else f"--device-map / --max-memory name GPU {index}, but no CUDA device is "
                "available here; use cpu and disk"
            )


# --- a loaded model ---------------------------------------------------------------------
def is_dispatched(model) -> bool:
    """Whether accelerate's hooks place `model`'s modules (split or offloaded): then it
    must not be moved (`model.to` raises once a module is offloaded)."""
    return any(getattr(module, "_hf_hook", None) is not None for module in model.modules())


def device_map_of(model) -> dict[str, Any]:
    """The module -> device map the model was loaded with ({} when it was not split)."""
    return dict(getattr(model, "hf_device_map", None) or {})


def place_model(model, device) -> Any:
    """`model.to(device)`, unless the model is dispatched (its hooks already place every
    module, and moving it would gather all of it onto one device) or sharded by tensor
    parallelism (transformers put each process's shard on its own device)."""
    if not is_dispatched(model) and tensor_parallel_of(model) is None:
        model.to(device)
    return model


def _hook_device(hook):
    """The execution device of an accelerate hook (a SequentialHook's first that has one)."""
    import torch

    if hook is None:
        return None
    for one in getattr(hook, "hooks", None) or (hook,):
        device = getattr(one, "execution_device", None)
        if device is not None:
            if isinstance(device, int) and not isinstance(device, bool):
                return torch.device("cuda", device)
            return torch.device(device)
    return None


def execution_device(module):
    """Where `module` runs: its (or its first submodule's) accelerate hook's execution
    device, else the device of its first weight that is not on `meta`; None if neither."""
    for sub in module.modules():
        device = _hook_device(getattr(sub, "_hf_hook", None))
        if device is not None:
            return device
        for tensor in [*sub.parameters(recurse=False), *sub.buffers(recurse=False)]:
            if tensor.device.type != "meta":
                return tensor.device
    return None


def input_device(model):
    """The device a model's input ids go to: where its input embeddings run (a dispatched
    model's first weight may sit on `meta`, offloaded; `model.device` then says meta)."""
    import torch

    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    device = execution_device(embeddings) if embeddings is not None else None
    if device is None:
        device = execution_device(model)
    return device if device is not None else torch.device("cpu")


def layer_devices(model) -> dict[int, Any]:
    """{layer index: execution device} of every attention module (`layer_idx`)."""
    out: dict[int, Any] = {}
    for module in model.modules():
        layer = getattr(module, "layer_idx", None)
        if layer is not None and int(layer) not in out:
            device = execution_device(module)
            if device is not None:
                out[int(layer)] = device
    return out


def named_weights(model):
    """(name, tensor) of every parameter, an offloaded one (on `meta`) read through its
    module's hook from where accelerate keeps it (the checkpoint, the offload folder or
    memory), one at a time; a `meta` weight with no hook to read it from is skipped."""
    for prefix, module in model.named_modules():
        hook = getattr(module, "_hf_hook", None)
        hooks = [h for h in (getattr(hook, "hooks", None) or (hook,)) if h is not None]
        weights_map = next(
            (h.weights_map for h in hooks if getattr(h, "weights_map", None) is not None), None
        )
        for name, param in module.named_parameters(recurse=False):
            full = f"{prefix}.{name}" if prefix else name
            if param.device.type != "meta":
                yield full, param
            elif weights_map is not None and name in weights_map:
                yield full, weights_map[name]


def check_device_map_keys(model, device_map) -> None:
    """ValueError naming a key of an explicit map that is no module of the model (accelerate
    only warns, and the module goes wherever its parent goes)."""
    if not isinstance(device_map, dict):
        return
    modules = dict(model.named_modules())
    unknown = [key for key in device_map if key and key not in modules]
    if unknown:
        examples = [n for n in modules if n and n.count(".") <= 2][:4]
        raise ValueError(
            f"--device-map: {unknown[0]!r} names no module of the model "
            f"(modules are named like {', '.join(examples)})"
        )


def check_capture_placement(model, where: str = "the model") -> None:
    """ValueError (one line) when attention capture cannot serve this dispatched model yet:
    capture keeps its masks and per-row settings where the input embeddings run
    (`input_device`: an offloaded embedding on `meta` runs where its hook loads it), so every
    layer must run on that device too. Offloading to cpu or disk keeps that true (accelerate
    runs an offloaded layer on the main device); layers over two GPUs do not (remove this
    refusal when harness.engine.capture follows each layer's device)."""
    if not is_dispatched(model):
        return
    main = input_device(model)
    others = {layer: d for layer, d in layer_devices(model).items() if d != main}
    if others:
        layer, device = min(others.items())
        raise ValueError(
            f"{where}: the device map runs layer {layer} on {device}, and attention capture "
            f"keeps its reference masks on {main} (where the input embeddings run); "
            "capture needs every layer on that device for now (one GPU with cpu and disk "
            "offload, or cpu and disk)"
        )
