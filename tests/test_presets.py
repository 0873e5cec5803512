"""The preset catalogue (attentionspan_datasets/presets.py) and the label a resolved config
carries (generation.resolve_config)."""

from __future__ import annotations

import copy
import pickle

import pytest

from attentionspan_datasets import generate, iter_instances, iter_split, presets, resolve_config
from attentionspan_datasets.presets import PAIRS, PRESETS, RETRIEVAL_TASKS, SHORT_NAMES
from attentionspan_datasets.tasks import TASKS, get_task

# Written out, not derived: the catalogue must not lose or rename a preset silently.
PAPER_SHORT = ["reversal", "addition", "multiplication", "ffml", "value_assignment", "successor"]
RETRIEVAL_SHORT = [f"t{k}" for k in range(1, 8)]


def test_catalogue_holds_every_preset_once_in_order():
    expected = [f"{short}_{role}" for short in PAPER_SHORT for role in ("id", "ood")]
    for short in RETRIEVAL_SHORT:
        expected += [f"{short}_len{n}" for n in (5, 10, 15, 20, 25, 30)]
        expected += [f"{short}_id", f"{short}_ood"]
    assert list(PRESETS) == expected


@pytest.mark.parametrize("name", list(PRESETS))
def test_round_trip_name_to_preset_to_config(name):
    preset = presets.get(name)
    assert preset is PRESETS[name] and preset.name == name
    assert SHORT_NAMES[preset.short] == preset.task
    cfg = resolve_config(name)
    assert cfg.task_name == preset.task
    assert {key: cfg.to_params()[key] for key in preset.params} == dict(preset.params)
    assert cfg.label == name
    assert generate(name, seed=0, index=0).config == name


@pytest.mark.parametrize("name", list(PRESETS))
def test_role_of_every_preset(name):
    preset = PRESETS[name]
    if name.endswith("_id"):
        assert preset.role == "id"
    elif name.endswith("_ood"):
        assert preset.role == "ood"
    else:  # the retrieval tasks' t<k>_len<n>
        assert preset.short in RETRIEVAL_TASKS and name.startswith(f"{preset.short}_len")
        assert preset.role is None
        with pytest.raises(ValueError, match=f"preset '{name}' has no ID/OOD twin"):
            _ = preset.twin


@pytest.mark.parametrize("short", PAPER_SHORT + RETRIEVAL_SHORT)
def test_pair_of_every_task_by_each_of_its_names(short):
    id_preset, ood_preset = PAIRS[short]
    assert (id_preset.name, ood_preset.name) == (f"{short}_id", f"{short}_ood")
    assert (id_preset.role, ood_preset.role) == ("id", "ood")
    assert id_preset.twin is ood_preset and ood_preset.twin is id_preset
    task = SHORT_NAMES[short]
    for name in (short, task, f"{short}_id", f"{short}_ood"):
        assert presets.pair(name) == (id_preset, ood_preset), name


def test_every_task_with_presets_has_a_pair():
    tasks = {p.task for p in PRESETS.values()}
    assert tasks == set(TASKS)
    assert {PAIRS[short][0].task for short in PAIRS} == tasks


def test_short_names_absorb_the_retrieval_names():
    assert RETRIEVAL_TASKS.items() <= SHORT_NAMES.items()
    assert sorted(SHORT_NAMES) == sorted(PAPER_SHORT + RETRIEVAL_SHORT)
    for short, task in SHORT_NAMES.items():
        assert resolve_config(short).task_name == task
        assert resolve_config(short).label == short


def test_unknown_names_list_the_allowed_ones():
    with pytest.raises(
        ValueError,
        match=r"unknown preset 'reversal_idd' \(did you mean 'reversal_id'\?\); allowed: "
        r"reversal_id, ",
    ):
        presets.get("reversal_idd")
    for bad in ("nope", "t1_len10"):
        with pytest.raises(ValueError, match=f"config '{bad}' has no ID/OOD presets; allowed: "):
            presets.pair(bad)
    for bad, meant in [("reversal_id_id", "'reversal_id'"), ("addition_ood_ood", "'addition_ood'")]:
        with pytest.raises(
            ValueError, match=f"config '{bad}' has no ID/OOD presets \\(did you mean {meant}"
        ):
            presets.pair(bad)
    with pytest.raises(ValueError) as error:
        presets.pair("nope")
    assert str(error.value).endswith(", ".join(sorted(PAIRS)))


# --- a misspelt name is answered with the names it is close to -----------------------------


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("additon_ood", " (did you mean 'addition_ood'?)"),
        ("Addition_OOD", " (did you mean 'addition_ood'?)"),  # case is ignored
        ("revesal", " (did you mean 'reversal'?)"),
        ("t8_id", " (did you mean 't7_id', 't6_id' or 't5_id'?)"),  # ties, at most three
        ("nope", ""),
        ("", ""),
    ],
)
def test_did_you_mean_names_the_close_names(name, hint):
    from attentionspan_datasets.generation import config_names

    assert presets.did_you_mean(name, config_names()) == hint


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda: resolve_config("additon_ood"), "unknown config 'additon_ood' (did you mean "),
        (lambda: presets.get("additon_ood"), "unknown preset 'additon_ood' (did you mean "),
        (lambda: presets.pair("revesal"), "config 'revesal' has no ID/OOD presets (did you mean "),
    ],
)
def test_unknown_name_errors_suggest_before_the_list_on_one_line(call, expected):
    with pytest.raises(ValueError) as error:
        call()
    message = str(error.value)
    assert message.startswith(expected) and "\n" not in message
    assert message.index("did you mean") < message.index("; allowed: ")


def test_presets_are_read_only():
    preset = PRESETS["reversal_id"]
    with pytest.raises(TypeError):
        preset.params["max_length"] = 99
    with pytest.raises(AttributeError):
        preset.role = "ood"
    assert resolve_config("reversal_id").max_length == 10


def test_a_preset_pickles_and_copies_as_the_catalogue_entry():
    preset = PRESETS["t3_ood"]
    assert pickle.loads(pickle.dumps(preset)) is preset
    assert copy.deepcopy(preset) is preset


# --- the label a resolved config carries ----------------------------------------------------
def test_resolved_config_carries_its_label_through_overrides_and_passes():
    cfg = resolve_config("addition_ood", max_digits=12)
    assert (cfg.label, cfg.max_digits) == ("addition_ood", 12)
    again = resolve_config(cfg, mask="sufficient")  # a config passes through, label kept
    assert (again.label, again.mask, again.max_digits) == ("addition_ood", "sufficient", 12)
    assert resolve_config(cfg) is cfg
    assert cfg.mask == "paper"  # the override made a new config
    # Instances carry it, whichever way the config travels.
    assert generate(cfg, seed=0, index=3).config == "addition_ood"
    assert {x.config for x in iter_instances(again, stop=3)} == {"addition_ood"}
    assert {x.config for x in iter_split(cfg, split="validation", stop=3)} == {"addition_ood"}
    assert pickle.loads(pickle.dumps(cfg)).label == "addition_ood"  # num_proc workers


def test_the_label_is_no_parameter():
    cfg = resolve_config("reversal_id")
    plain = get_task("string_reversal").config_class(min_length=1, max_length=10)
    assert plain.label == "string_reversal"  # a config built directly: the task's name
    assert cfg == plain  # equal configs, whatever they are called
    assert "label" not in cfg.to_params() and "_label" not in cfg.to_params()
    assert "reversal_id" not in repr(cfg)


def test_a_labelled_instance_is_the_same_instance_as_by_name():
    cfg = resolve_config("ffml_ood")
    assert generate(cfg, seed=2, index=5) == generate("ffml_ood", seed=2, index=5)


def test_overrides_of_a_config_refuse_unknown_fields_by_name():
    with pytest.raises(ValueError, match="unknown parameter.*'max_lenght'.*allowed: mask"):
        resolve_config(resolve_config("reversal_id"), max_lenght=3)
