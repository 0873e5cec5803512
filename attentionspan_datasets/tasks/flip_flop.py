"""Flip-flop language modelling with several registers ("FFML"): the bit a register holds.

A program is a sequence of three-character instructions, operation + register + bit:
`w` writes the bit to the register, `i` ignores it (a distractor), `f` flips the register
(its bit character is a random distractor) and `r` reads it (the bit shown is the value the
register holds). Registers are named by one digit and hold 0 until first written. The
program ends with a final read `r<register>` without its bit, then "="; the target is the
bit that register holds.

Examples:
    w11i11f10r10f10r1= -> 1

`params["length"]` counts the instructions including the final read, so the paper's
"10 commands" is nine full instructions and the final read. The generator makes sure the
final read's register is written at least once, so the paper mask is never empty.

Mask rule: `paper`: the bit character of the last write to the read register.
`sufficient`: that bit plus the `f` of every flip of that register after the last write;
the oracle returns the written bit XOR the number of visible flips (mod 2).
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from attentionspan_datasets.tasks.base import Instance, TaskConfig, register_task

NAME = "flip_flop"
SEPARATOR = "="
OPERATIONS = "wrif"  # write, read, ignore, flip: the order of the *_weight fields
REGISTER_NAMES = "0123456789"
FLIPPED = {"0": "1", "1": "0"}
MAX_WEIGHT = 100  # relative weights; bounded so the table of draws stays small


@dataclass
class FlipFlopConfig(TaskConfig):
    num_registers: int = 2
    min_instructions: int = 10
    max_instructions: int = 10
    use_flip: bool = True
    # Relative frequencies of the instruction kinds before the final read (integers, so
    # that they parse from the command line); flip_weight counts only with use_flip.
    write_weight: int = 1
    read_weight: int = 1
    ignore_weight: int = 1
    flip_weight: int = 1

    def check(self) -> None:
        self.check_range("num_registers", 1, len(REGISTER_NAMES))
        # Two at least: one write before the final read.
        self.check_range("min_instructions", 2)
        self.check_range("max_instructions", 2)
        self.check_min_max("min_instructions", "max_instructions")
        self.check_range("write_weight", 1, MAX_WEIGHT)
        for name in ("read_weight", "ignore_weight", "flip_weight"):
            self.check_range(name, 0, MAX_WEIGHT)


def generate(rng: random.Random, config: FlipFlopConfig) -> Instance:
    count = rng.randint(config.min_instructions, config.max_instructions) - 1
    flip_weight = config.flip_weight if config.use_flip else 0
    weights = (config.write_weight, config.read_weight, config.ignore_weight, flip_weight)
    heads = rng.choices(_instruction_heads(weights, config.num_registers), k=count)
    bits = format(rng.getrandbits(count), f"0{count}b")
    read_register = REGISTER_NAMES[rng.randrange(config.num_registers)]
    if "w" + read_register not in heads:
        # Overwrite one instruction, chosen uniformly, with a write to the read register.
        heads[rng.randrange(count)] = "w" + read_register
    heads_text = "".join(heads)
    return _render(heads_text[0::2], heads_text[1::2], bits, read_register, config)


@functools.lru_cache(maxsize=64)
def _instruction_heads(weights: tuple[int, ...], num_registers: int) -> tuple[str, ...]:
    """Every operation+register pair, each op repeated by its weight: one uniform draw
    from this tuple replaces a weighted draw of the op (a bisect) and a draw of the register,
    at a quarter of their cost."""
    registers = REGISTER_NAMES[:num_registers]
    return tuple(
        op + reg
        for op, weight in zip(OPERATIONS, weights)
        for _ in range(weight)
        for reg in registers
    )


def make_instance(program: str, config: FlipFlopConfig) -> Instance:
    """The instance of a program in the paper's notation (`w11i11f10r10f10r1`, no "=").

    A mid-sequence read's bit (given as 0 or 1) is replaced by the value its register holds,
    so the prompt is always consistent with the state.
    """
    body, read_op, read_register = program[:-2], program[-2:-1], program[-1:]
    ops, registers, bits = body[0::3], body[1::3], body[2::3]
    allowed_registers = REGISTER_NAMES[: config.num_registers]
    if (
        len(program) % 3 != 2
        or read_op != "r"
        or not set(ops) <= set(OPERATIONS)
        or not set(registers + read_register) <= set(allowed_registers)
        or not set(bits) <= set("01")
    ):
        raise ValueError(
            f"{NAME}: program {program!r} is not a sequence of op+register+bit instructions "
            f"(ops {OPERATIONS}, registers {allowed_registers}) ending in a read r<register>"
        )
    return _render(ops, registers, bits, read_register, config)


def _render(
    ops: str, registers: str, bits: str, read_register: str, config: FlipFlopConfig
) -> Instance:
    """Run the program on registers that start at 0, fill in the read bits, build masks."""
    chars = [""] * (3 * len(ops))
    chars[0::3], chars[1::3], chars[2::3] = ops, registers, bits
    state = dict.fromkeys(REGISTER_NAMES, "0")  # never-written registers hold 0
    last_write, flips = -1, []
    for k, (op, reg, bit) in enumerate(zip(ops, registers, bits)):
        if op == "w":
            state[reg] = bit
            if reg == read_register:
                last_write, flips = k, []
        elif op == "f":
            state[reg] = FLIPPED[state[reg]]
            if reg == read_register:
                flips.append(k)
        elif op == "r":
            chars[3 * k + 2] = state[reg]
    if last_write < 0:
        raise ValueError(f"{NAME}: the program reads register {read_register} but never writes it")
    prompt = "".join(chars) + "r" + read_register + SEPARATOR
    row = [3 * last_write + 2]  # the bit character of the last write
    if config.mask == "sufficient":
        row += [3 * k for k in flips]  # the 'f' of every later flip
    params = {
        "length": len(ops) + 1,
        "flips_after_write": len(flips),
        "write_distance": len(ops) - last_write,  # instructions from last write to final read
    }
    return Instance(NAME, prompt, state[read_register], [row], params)


def oracle(visible: list, params: dict, i: int) -> str | None:
    """The one visible bit character, flipped once per visible `f`."""
    bits = [c for pos, c in enumerate(visible) if pos % 3 == 2 and c in ("0", "1")]
    flips = sum(1 for pos, c in enumerate(visible) if pos % 3 == 0 and c == "f")
    if len(bits) != 1:
        return None
    return FLIPPED[bits[0]] if flips % 2 else bits[0]


register_task(NAME, FlipFlopConfig, generate, oracle)
