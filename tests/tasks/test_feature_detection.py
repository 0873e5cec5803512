"""The seven discrete-retrieval tasks (T1-T7): config validation, format, the recipes of
Section 3.2 checked against an independent reading of `params`, the mappings, masks and
oracles."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from attentionspan_datasets import generate, iter_instances, resolve_config
from attentionspan_datasets.cli import main
from attentionspan_datasets.presets import PRESETS, RETRIEVAL_LENGTHS, RETRIEVAL_TASKS
from attentionspan_datasets.tasks import _feature_vectors as fv
from attentionspan_datasets.tasks import get_task, visible_text

SHORT = sorted(RETRIEVAL_TASKS)  # t1 ... t7
MAPPED = {"t3": 1, "t4": 1, "t5": 2, "t6": 1, "t7": 2}  # pairs per query
FORMAT = re.compile(r"^((?:[0-9a-z]*\|)*[0-9a-z]*)\?([0-9a-z]{1,2})=$")


def before(vectors, first, second) -> bool:
    """Independent of the task code: `first` in an earlier vector than `second`."""
    firsts = [t for t, v in enumerate(vectors) if first in v]
    seconds = [t for t, v in enumerate(vectors) if second in v]
    return bool(firsts and seconds and min(firsts) < max(seconds))


def expected_answer(short: str, params: dict) -> int:
    """The answer recomputed from the vectors in `params` and the mapping."""
    vectors = params["vectors"]
    seen = {f for v in vectors for f in v}
    features = params["features"]
    if short in ("t1", "t2", "t4"):
        return int(set(features) <= seen)
    if short == "t3":
        return int(bool(set(features) & seen))
    if short == "t5":
        return int(any(a in seen and b in seen for a, b in features))
    if short == "t6":
        return int(before(vectors, *features))
    return int(any(before(vectors, a, b) for a, b in features))


def mapped_pairs(short: str, params: dict) -> list:
    """The mapping's pairs for the instance's query, as `params["features"]` nests them."""
    task = RETRIEVAL_TASKS[short]
    pairs = fv.mapping(task, params["mapping_seed"], MAPPED[short])[params["query"][0]]
    return [list(p) for p in pairs] if MAPPED[short] == 2 else list(pairs[0])


# --- config validation -----------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("min_length", 1),  # the ordered recipes need two vectors
        ("max_length", fv.MAX_LENGTH + 1),
        ("length_step", 0),
        ("min_excluded", -1),
        ("max_excluded", fv.MAX_EXCLUDED + 1),
        ("background_percent", 101),
        ("background_percent", -1),
        ("min_length", "10"),
        ("mask", "dense"),
    ],
)
@pytest.mark.parametrize("short", SHORT)
def test_bad_field_raises_value_error_naming_it(short, field, value):
    config_class = get_task(RETRIEVAL_TASKS[short]).config_class
    with pytest.raises(ValueError, match=f"{RETRIEVAL_TASKS[short]}: .*'{field}'"):
        config_class(**{field: value})


@pytest.mark.parametrize("short", sorted(MAPPED))
def test_mapping_seed_is_capped(short):
    config_class = get_task(RETRIEVAL_TASKS[short]).config_class
    for bad in (-1, fv.MAX_MAPPING_SEED + 1):
        with pytest.raises(ValueError, match="'mapping_seed'.*<= mapping_seed <= 4294967295"):
            config_class(mapping_seed=bad)


@pytest.mark.parametrize("short", sorted(MAPPED))
def test_num_queries_is_bounded_by_the_36_features(short):
    config_class = get_task(RETRIEVAL_TASKS[short]).config_class
    for bad in (0, fv.NUM_FEATURES + 1):
        with pytest.raises(ValueError, match="'num_queries'.*1 <= num_queries <= 36"):
            config_class(num_queries=bad)
    assert config_class().num_queries == fv.NUM_FEATURES  # the presets ask all 36


@pytest.mark.parametrize("short", sorted(MAPPED))
def test_num_queries_draws_queries_among_the_first_features_only(short):
    """The curriculum aid: every query below num_queries, each of them drawn, and the rest
    of the recipe unchanged (answers still follow the mapping and the vectors)."""
    instances = list(iter_instances(f"{short}_id", seed=3, stop=300, num_queries=3))
    queries = Counter(x.params["query"][0] for x in instances)
    assert set(queries) == {0, 1, 2} and min(queries.values()) > 60
    for x in instances:
        assert x.params["features"] == mapped_pairs(short, x.params)
        assert int(x.target) == expected_answer(short, x.params)


def test_min_above_max_names_both_fields():
    with pytest.raises(ValueError, match="'min_length' \\(12\\) must not exceed 'max_length'"):
        resolve_config("t6", min_length=12, max_length=11)
    with pytest.raises(ValueError, match="'min_excluded' \\(4\\) must not exceed"):
        resolve_config("t1", min_excluded=4, max_excluded=3)


def test_single_occurrence_is_a_flag():
    with pytest.raises(ValueError, match="'single_occurrence' must be of type bool"):
        resolve_config("t1", single_occurrence=1)


def test_cli_reports_bad_parameter_in_one_line(capsys):
    code = main(["generate", "t6_id", "-n", "1", "--param", "mapping_seed=-1"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "'mapping_seed'" in err


# --- presets ---------------------------------------------------------------------------


def test_presets_cover_every_length_and_an_id_ood_pair():
    for short, task in RETRIEVAL_TASKS.items():
        for n in RETRIEVAL_LENGTHS:
            preset = PRESETS[f"{short}_len{n}"]
            assert (preset.task, preset.params, preset.role) == (
                task,
                {"min_length": n, "max_length": n},
                None,
            )
        assert {x.params["length"] for x in iter_instances(f"{short}_id", stop=50)} == {10}
        ood = {x.params["length"] for x in iter_instances(f"{short}_ood", stop=200)}
        assert ood == {20, 30}
        assert resolve_config(short).task_name == task  # the short name works too


# --- format and recipes ----------------------------------------------------------------


@pytest.mark.parametrize("short", SHORT)
def test_format_matches_params_and_answer_is_recomputed(short):
    cases = Counter()
    for x in iter_instances(f"{short}_len10", seed=3, stop=1500):
        match = FORMAT.match(x.prompt)
        assert match, x.prompt
        body, query = match.groups()
        texts = body.split("|")
        vectors = x.params["vectors"]
        assert len(texts) == len(vectors) == x.params["length"] == 10
        for text, vector in zip(texts, vectors):
            assert vector == sorted(set(vector)) and text == "".join(fv.ALPHABET[f] for f in vector)
        assert [fv.ALPHABET[f] for f in x.params["query"]] == list(query)
        assert x.target == str(expected_answer(short, x.params)), (x.prompt, x.params)
        seen = Counter(f for v in vectors for f in v)
        excluded = x.params["excluded"]
        assert 1 <= len(excluded) <= 6 and not set(excluded) & set(seen)
        if short in MAPPED:
            assert x.params["features"] == mapped_pairs(short, x.params)
            assert x.params["mapping_seed"] == 0
        cases[x.params["case"]] += 1
    assert len(cases) >= 2


@pytest.mark.parametrize("short", SHORT)
def test_answers_are_balanced(short):
    targets = Counter(x.target for x in iter_instances(f"{short}_len5", seed=4, stop=4000))
    # Binomial(4000, 1/2): s.d. 32; 6 s.d. keeps this test from flaking.
    assert abs(targets["1"] - 2000) < 190, targets


def test_background_features_are_active_with_p_0_2():
    active = cells = 0
    for x in iter_instances("t2_len30", seed=5, stop=400):
        off = set(x.params["excluded"]) | set(x.params["features"])
        counts = Counter(f for v in x.params["vectors"] for f in v)
        for f in range(fv.NUM_FEATURES):
            if f not in off:
                active += counts[f]
                cells += x.params["length"]
    # About 380,000 cells: s.d. of the share is 0.0007.
    assert abs(active / cells - 0.2) < 0.004, active / cells


def test_controlled_features_appear_only_where_the_recipe_puts_them():
    for short in ("t2", "t3", "t4", "t6"):
        for x in iter_instances(f"{short}_len20", seed=6, stop=500):
            counts = Counter(f for v in x.params["vectors"] for f in v)
            assert all(counts[f] <= 1 for f in x.params["features"]), x.params
    for short in ("t5", "t7"):
        for x in iter_instances(f"{short}_len20", seed=6, stop=500):
            seen = {f for v in x.params["vectors"] for f in v}
            chosen = x.params["features"][x.params["pair"]]
            other = x.params["features"][1 - x.params["pair"]]
            counts = Counter(f for v in x.params["vectors"] for f in v)
            assert all(counts[f] <= 1 for f in chosen)
            assert not set(other) <= seen, "one feature of the other pair must be absent"


def test_t1_single_occurrence_and_the_training_distribution():
    once = [x for x in iter_instances("t1_len30", seed=7, stop=600) if x.target == "1"]
    for x in once:
        f = x.params["query"][0]
        assert sum(f in v for v in x.params["vectors"]) == 1
    many = Counter()
    for x in iter_instances("t1_len30", seed=7, stop=600, single_occurrence=False):
        if x.target == "1":
            many[sum(x.params["query"][0] in v for v in x.params["vectors"])] += 1
    # 1 planted + Binomial(29, 0.2) elsewhere: about 6.8 on average.
    mean = sum(k * n for k, n in many.items()) / sum(many.values())
    assert 6.0 < mean < 7.6, many


def test_t2_reaches_all_630_queries_and_both_positive_cases():
    queries, cases = set(), Counter()
    for x in iter_instances("t2_len5", seed=8, stop=12000):
        queries.add(tuple(x.params["query"]))
        cases[x.params["case"]] += 1
    assert len(queries) == 630
    for case in ("same_vector", "different_vectors", "one_present", "none_present"):
        assert 2600 < cases[case] < 3400, cases


def test_t6_negatives_mix_wrong_order_and_at_most_one():
    cases = Counter(x.params["case"] for x in iter_instances("t6_len10", seed=9, stop=4000))
    assert 1800 < cases["in_order"] < 2200
    assert 800 < cases["wrong_order"] < 1200
    assert 800 < cases["one_present"] + cases["none_present"] < 1200


# --- the mappings ----------------------------------------------------------------------


@pytest.mark.parametrize("short", sorted(MAPPED))
@pytest.mark.parametrize("seed", [0, 1, 77])
def test_mapping_has_the_structure_of_table_1(short, seed):
    per_query = MAPPED[short]
    table = fv.mapping(RETRIEVAL_TASKS[short], seed, per_query)
    assert len(table) == 36 and all(len(pairs) == per_query for pairs in table)
    pairs = [pair for pairs in table for pair in pairs]
    assert len(set(pairs)) == len(pairs) == 36 * per_query
    for a, b in pairs:
        assert (a < 18) != (b < 18), "one feature of 0-17 and one of 18-35"
    queries_of = Counter(f for pairs in table for f in {f for pair in pairs for f in pair})
    assert set(queries_of.values()) == {2 * per_query}  # Table 1: 2 (T3, T4, T6) or 4
    assert len(queries_of) == 36


def test_mapping_is_fixed_by_its_seed():
    assert fv.mapping("ordered_feature_detection", 5, 1) == fv.mapping.__wrapped__(
        "ordered_feature_detection", 5, 1
    )
    assert fv.mapping("ordered_feature_detection", 5, 1) != fv.mapping(
        "ordered_feature_detection", 6, 1
    )
    x = generate("t6_id", seed=0, index=0, mapping_seed=6)
    assert x.params["mapping_seed"] == 6 and x.params["features"] == mapped_pairs("t6", x.params)


# --- masks and oracles ------------------------------------------------------------------


@pytest.mark.parametrize("short", SHORT)
def test_paper_mask_is_the_query_and_decisive_occurrences(short):
    for x in iter_instances(f"{short}_len15", seed=10, stop=500):
        row = x.reference[0]
        query_start = x.prompt.index("?") + 1
        query_positions = [p for p in row if p >= query_start]
        assert query_positions == list(range(query_start, len(x.prompt) - 1))
        features = x.params["features"]
        flat = {f for p in features for f in p} if short in ("t5", "t7") else set(features)
        for p in row:
            if p < query_start:
                assert fv.FEATURE_OF[x.prompt[p]] in flat
        if x.target == "1":
            inputs = [p for p in row if p < query_start]
            assert inputs, "a yes always references the occurrences that make it a yes"


@pytest.mark.parametrize("short", SHORT)
def test_oracle_reads_yes_from_the_paper_mask_of_unordered_and_needs_the_query(short):
    oracle = get_task(RETRIEVAL_TASKS[short]).oracle
    for x in iter_instances(f"{short}_len10", seed=11, stop=300):
        visible = visible_text(x, 0)
        if x.target == "1" and short not in ("t6", "t7"):
            assert oracle(visible, x.params, 0) == "1"
        hidden_query = list(visible)
        hidden_query[len(x.prompt) - 2] = None
        assert oracle(hidden_query, x.params, 0) is None


def test_sufficient_mask_of_a_no_is_the_whole_input_and_the_query():
    for x in iter_instances("t7_len10", seed=12, stop=200, mask="sufficient"):
        if x.target == "0":
            assert x.reference[0] == [p for p in range(len(x.prompt) - 1) if x.prompt[p] != "?"]


def test_ordered_yes_needs_the_separator_between_the_two_occurrences():
    oracle = get_task("ordered_feature_detection").oracle
    for x in iter_instances("t6_len10", seed=13, stop=300, mask="sufficient"):
        if x.target != "1":
            continue
        separators = [p for p in x.reference[0] if x.prompt[p] == "|"]
        assert len(separators) == 1
        visible = visible_text(x, 0)
        visible[separators[0]] = None
        assert oracle(visible, x.params, 0) == "0"  # without it the order is not shown


@pytest.mark.parametrize("short", SHORT)
def test_docstring_examples_are_right(short):
    """Every `prompt -> target` line of the module's Examples block, read by the oracle."""
    task = get_task(RETRIEVAL_TASKS[short])
    doc = __import__(task.generate.__module__, fromlist=["_"]).__doc__
    examples = re.findall(r"^\s+(\S+=) -> ([01])$", doc, flags=re.M)
    assert len(examples) == 2
    for prompt, target in examples:
        assert FORMAT.match(prompt)
        assert task.oracle(list(prompt + target), {"mapping_seed": 0}, 0) == target, prompt


def test_builder_and_lm_eval_dataset_accept_a_retrieval_preset(tmp_path):
    """The builder (load_dataset's path) and lm-eval's custom_dataset take T1-T7."""
    from attentionspan_datasets.builder import load

    ds = load("t6_len5", cache_dir=str(tmp_path), num_train=30, num_validation=10, num_test=10)
    assert {s: len(ds[s]) for s in ds} == {"train": 30, "validation": 10, "test": 10}
    row = ds["test"][0]
    assert row["task"] == "ordered_feature_detection" and row["prompt"].endswith("=")
    assert row["target"] in ("0", "1") and '"vectors"' in row["params"]

    from lm_eval_tasks.dataset import custom_dataset

    docs = custom_dataset(preset="t3_id", attnspan={"size": 5, "fewshot_size": 3})
    assert len(docs["test"]) == 5 and all(d["target"] in ("0", "1") for d in docs["test"])
