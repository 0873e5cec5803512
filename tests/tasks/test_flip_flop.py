"""flip_flop (FFML): config validation, format, state consistency, masks and the oracle."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from attentionspan_datasets import generate, iter_instances, resolve_config
from attentionspan_datasets.cli import main
from attentionspan_datasets.tasks import visible_text
from attentionspan_datasets.tasks.flip_flop import FlipFlopConfig, make_instance, oracle

PAPER_EXAMPLE = "w11i11f10r10f10r1"  # Table 3: -> 1


def simulate(prompt: str):
    """An independent run of a prompt: (answer, last write index, later flips, reads ok)."""
    body, read_register = prompt[:-3], prompt[-2]
    state, last_write, flips, reads_ok = {}, None, [], True
    for k in range(0, len(body), 3):
        op, reg, bit = body[k : k + 3]
        if op == "w":
            state[reg] = bit
        elif op == "f":
            state[reg] = "1" if state.get(reg, "0") == "0" else "0"
        elif op == "r":
            reads_ok &= bit == state.get(reg, "0")
        if reg == read_register and op == "w":
            last_write, flips = k // 3, []
        elif reg == read_register and op == "f":
            flips.append(k // 3)
    return state.get(read_register, "0"), last_write, flips, reads_ok


def paper_row(prompt: str) -> list[int]:
    """The authors' rule, bug fixed: op, register and bit of the last write to the read
    register, op and register of every later flip of it, the final read's register digit."""
    _, last_write, flips, _ = simulate(prompt)
    row = [3 * last_write, 3 * last_write + 1, 3 * last_write + 2]
    for k in flips:
        row += [3 * k, 3 * k + 1]
    return row + [len(prompt) - 2]


# --- config validation -----------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("num_registers", 0),
        ("num_registers", 11),  # a register is named by one digit
        ("min_instructions", 1),  # no room for a write before the final read
        ("max_instructions", 1),
        ("write_weight", 0),
        ("write_weight", 101),
        ("read_weight", -1),
        ("ignore_weight", -1),
        ("flip_weight", -1),
        ("flip_weight", 101),
        ("use_flip", 1),  # a flag, not a count
        ("num_registers", "2"),
        ("mask", "dense"),
        ("read_register", "2"),  # the default config has registers 0 and 1
        ("read_register", "01"),
        ("read_register", "x"),
    ],
)
def test_bad_field_raises_value_error_naming_it(field, value):
    with pytest.raises(ValueError, match=f"flip_flop: .*'{field}'"):
        FlipFlopConfig(**{field: value})


def test_min_above_max_names_both_fields():
    with pytest.raises(
        ValueError, match="'min_instructions' \\(12\\) must not exceed 'max_instructions' \\(11\\)"
    ):
        FlipFlopConfig(min_instructions=12, max_instructions=11)


def test_cli_reports_bad_parameter_in_one_line(capsys):
    code = main(["generate", "ffml", "-n", "1", "--param", "num_registers=11"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "'num_registers'" in err


def test_cli_parses_the_flag_and_weights(capsys):
    code = main(
        [
            "generate",
            "ffml",
            "-n",
            "50",
            "--format",
            "text",
            "--param",
            "use_flip=false",
            "--param",
            "read_weight=0",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    programs = [line.split("\t")[0] for line in out.splitlines()]
    assert len(programs) == 50
    assert not any("f" in p or "r" in p[:-4] for p in programs)


# --- format and determinism ------------------------------------------------------------


def test_instances_are_deterministic():
    first = [generate("ffml_ood", seed=11, index=i) for i in range(20)]
    again = [generate("ffml_ood", seed=11, index=i) for i in range(20)]
    assert first == again
    assert len({x.prompt for x in first}) == 20


@pytest.mark.parametrize("preset, low, high", [("ffml_id", 10, 10), ("ffml_ood", 11, 100)])
def test_format_and_instruction_count(preset, low, high):
    pattern = re.compile(r"(?:[wrif][01][01])+r[01]=")
    lengths = set()
    for instance in iter_instances(preset, seed=0, stop=1500):
        assert pattern.fullmatch(instance.prompt), instance.prompt
        assert instance.target in ("0", "1")
        length = instance.params["length"]
        # The count includes the final read: length - 1 full instructions, then r<reg>=.
        assert len(instance.prompt) == 3 * (length - 1) + 3
        lengths.add(length)
    assert min(lengths) == low and max(lengths) == high


def test_params_hold_counts_never_the_answer():
    for instance in iter_instances("ffml_ood", seed=3, stop=300):
        answer, last_write, flips, _ = simulate(instance.prompt)
        assert instance.params == {
            "length": instance.params["length"],
            "flips_after_write": len(flips),
            "write_distance": instance.params["length"] - 1 - last_write,
        }


def test_reads_are_consistent_and_target_is_the_register_state():
    config = resolve_config("ffml_ood", num_registers=4)
    for instance in iter_instances(config, seed=4, stop=1000):
        answer, last_write, _, reads_ok = simulate(instance.prompt)
        assert reads_ok, instance.prompt
        assert answer == instance.target
        assert last_write is not None  # the final read's register is always written


def test_mid_sequence_reads_take_the_state_and_unwritten_registers_hold_zero():
    config = FlipFlopConfig()
    assert make_instance("w11r10r1", config).prompt == "w11r11r1="  # read bit corrected
    instance = make_instance("w01r11f01r01r0", config)
    assert instance.prompt == "w01r10f01r00r0="  # register 1 never written: 0
    assert instance.target == "0"


def test_the_final_read_register_is_written_even_when_writes_are_rare():
    # One write in ~400 draws: the generator must overwrite an instruction with a write.
    config = FlipFlopConfig(
        num_registers=10,
        min_instructions=2,
        max_instructions=30,
        write_weight=1,
        ignore_weight=100,
        read_weight=0,
        flip_weight=0,
    )
    for instance in iter_instances(config, seed=5, stop=500):
        read_register = instance.prompt[-2]
        body = instance.prompt[:-3]
        writes = [k for k in range(0, len(body), 3) if body[k : k + 2] == "w" + read_register]
        assert len(writes) >= 1
        assert instance.reference == [paper_row(instance.prompt)]
        assert instance.reference[0][:3] == [writes[-1], writes[-1] + 1, writes[-1] + 2]
        assert instance.target == body[writes[-1] + 2]


def test_two_instructions_are_a_write_and_its_read():
    config = FlipFlopConfig(min_instructions=2, max_instructions=2, num_registers=3)
    for instance in iter_instances(config, seed=6, stop=50):
        reg, bit = instance.prompt[1], instance.prompt[2]
        assert instance.prompt == f"w{reg}{bit}r{reg}="
        assert instance.target == bit and instance.reference == [[0, 1, 2, 4]]


def test_read_register_fixes_the_final_read_and_draws_the_same_numbers():
    """The curriculum aid: the final read asks the given register; instances where it
    already did are unchanged, and every instance stays consistent with its program."""
    plain = iter_instances("ffml_id", seed=9, stop=500)
    aided = iter_instances("ffml_id", seed=9, stop=500, read_register="1", mask="sufficient")
    unchanged = 0
    for before, after in zip(plain, aided, strict=True):
        assert after.prompt[-2] == "1"
        answer, last_write, _, reads_ok = simulate(after.prompt)
        assert reads_ok and last_write is not None and answer == after.target
        assert oracle(visible_text(after, 0), after.params, 0) == after.target
        unchanged += before.prompt[-2] == "1" and before.prompt == after.prompt
    assert 200 < unchanged < 300  # about half the draws asked register 1 already
    assert FlipFlopConfig().read_register == ""  # the presets draw it


# --- edge cases ------------------------------------------------------------------------


def test_one_register():
    config = FlipFlopConfig(num_registers=1, min_instructions=5, max_instructions=40)
    for instance in iter_instances(config, seed=7, stop=200):
        assert set(instance.prompt[1::3]) == {"0"}


def test_use_flip_false_never_emits_flip():
    config = resolve_config("ffml_ood", use_flip=False, mask="sufficient")
    for instance in iter_instances(config, seed=8, stop=1000):
        assert "f" not in instance.prompt[0::3]
        assert instance.params["flips_after_write"] == 0
        assert len(instance.reference[0]) == 4  # the write's three characters, the register


def test_sufficient_is_the_paper_rule_and_minimal_the_written_bit():
    config = resolve_config("ffml_ood")
    for index in range(200):
        paper = generate(config, seed=9, index=index)
        sufficient = generate(resolve_config(config, mask="sufficient"), seed=9, index=index)
        minimal = generate(resolve_config(config, mask="minimal"), seed=9, index=index)
        assert paper == sufficient
        assert minimal.reference == [[paper.reference[0][2]]]


def test_instruction_kinds_follow_the_weights():
    ops = Counter()
    config = resolve_config(
        "ffml_ood", write_weight=2, read_weight=1, ignore_weight=1, flip_weight=4
    )
    for instance in iter_instances(config, seed=10, stop=2000):
        ops.update(instance.prompt[0:-3:3])
    total = sum(ops.values())
    shares = {op: ops[op] / total for op in "wrif"}
    expected = {"w": 0.25, "r": 0.125, "i": 0.125, "f": 0.5}
    for op in "wrif":
        assert abs(shares[op] - expected[op]) < 0.01, shares


# --- masks -----------------------------------------------------------------------------


def test_paper_example_from_table_3():
    instance = make_instance(PAPER_EXAMPLE, FlipFlopConfig())
    assert instance.prompt == "w11i11f10r10f10r1="
    assert instance.target == "1"
    # w11 writes 1 (its bit at position 2); f10 at 6 and f10 at 12 flip it twice.
    # paper: w11 (0-2), the op and register of both flips (6-7, 12-13), the read's "1" (16).
    assert instance.reference == [[0, 1, 2, 6, 7, 12, 13, 16]]
    assert instance.params == {"length": 6, "flips_after_write": 2, "write_distance": 5}
    sufficient = make_instance(PAPER_EXAMPLE, FlipFlopConfig(mask="sufficient"))
    assert sufficient.reference == instance.reference
    minimal = make_instance(PAPER_EXAMPLE, FlipFlopConfig(mask="minimal"))
    assert minimal.reference == [[2]]


def test_masks_on_hand_written_programs():
    config = FlipFlopConfig(mask="sufficient")
    # The last write wins; a flip before it and flips of other registers do not count.
    instance = make_instance("w00f00w01f10f00i00r0", config)
    assert instance.target == "0"
    assert instance.reference == [[6, 7, 8, 12, 13, 19]]
    # Distractor bits of ignore and flip instructions are not references.
    instance = make_instance("w11i10f11i11r1", config)
    assert instance.target == "0"
    assert instance.reference == [[0, 1, 2, 6, 7, 13]]
    assert make_instance("w11i10f11i11r1", FlipFlopConfig(mask="minimal")).reference == [[2]]


def test_a_write_in_the_first_instruction_is_marked():
    """The authors' backward scan stops before the first instruction; ours does not."""
    instance = make_instance("w01i11i11r0", FlipFlopConfig())
    assert instance.reference == [[0, 1, 2, 10]]


@pytest.mark.parametrize(
    "program",
    ["w11i11", "w11i11f10r10f10r", "x11r1", "w21r1", "w12r1", "i11r1", "w1r1", ""],
)
def test_make_instance_rejects_malformed_programs(program):
    with pytest.raises(ValueError, match="flip_flop: "):
        make_instance(program, FlipFlopConfig())


def test_paper_and_minimal_masks_on_random_programs():
    for instance in iter_instances("ffml_ood", seed=12, stop=1000):
        assert instance.reference == [paper_row(instance.prompt)]
    for instance in iter_instances("ffml_ood", seed=12, stop=1000, mask="minimal"):
        _, last_write, _, _ = simulate(instance.prompt)
        assert instance.reference == [[3 * last_write + 2]]


@pytest.mark.parametrize("preset", ["ffml_id", "ffml_ood"])
def test_sufficient_oracle_reproduces_every_target(preset):
    for instance in iter_instances(preset, seed=13, stop=3000, mask="sufficient"):
        assert instance.reference == [paper_row(instance.prompt)]
        assert oracle(visible_text(instance, 0), instance.params, 0) == instance.target


def test_dropping_the_bit_or_any_flip_breaks_the_oracle():
    """The written bit and every later `f` are each needed: without one, the oracle is wrong
    (the register digits locate them for a model, but the oracle reads the layout)."""
    checked_flips = 0
    for instance in iter_instances("ffml_ood", seed=14, stop=1000, mask="sufficient"):
        _, last_write, flips, _ = simulate(instance.prompt)
        row = [3 * last_write + 2] + [3 * k for k in flips]
        assert set(row) <= set(instance.reference[0])
        for dropped in row:
            visible = visible_text(instance, 0)
            visible[dropped] = None
            assert oracle(visible, instance.params, 0) != instance.target
        checked_flips += len(row) - 1
    assert checked_flips > 100


def test_minimal_mask_alone_does_not_suffice_when_flips_follow():
    wrong = 0
    for instance in iter_instances("ffml_ood", seed=15, stop=500, mask="minimal"):
        wrong += oracle(visible_text(instance, 0), instance.params, 0) != instance.target
        if instance.params["flips_after_write"] % 2 == 0:
            assert oracle(visible_text(instance, 0), instance.params, 0) == instance.target
    assert wrong > 50
