"""Tasks from other packages (attentionspan_datasets.plugins): the example package of
docs/own_task.md, put on the path with a dist-info that declares its entry point (what
`pip install` writes; importlib.metadata reads it from any folder on sys.path), run through
generate, show, check-task, load_dataset, lm-eval and a tiny train in fresh processes
started from another directory; broken plugins beside the built-in tasks; the loading
rules in this process."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from attentionspan_datasets import plugins
from attentionspan_datasets.presets import PRESETS
from attentionspan_datasets.tasks import TASKS
from tests.harness.launch import TINY_SCRATCH_ARGS

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "docs" / "examples" / "attentionspan-example-task"
PACKAGE = "attentionspan-example-task"


def fake_install(site: Path, package: str, entry_points: dict[str, str]) -> None:
    """The metadata `pip install` would write for `package` into `site`: its name and its
    entry points of our group."""
    dist = site / f"{package.replace('-', '_')}-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1.0\n")
    lines = [f"{name} = {value}" for name, value in entry_points.items()]
    (dist / "entry_points.txt").write_text(f"[{plugins.GROUP}]\n" + "\n".join(lines) + "\n")


@pytest.fixture
def example_env(tmp_path):
    """Environment and work folder of a process that has the example package installed."""
    site = tmp_path / "site"
    fake_install(site, PACKAGE, {"rotation": "attentionspan_example_task.rotation"})
    return environment(tmp_path, site, EXAMPLE)


def environment(tmp_path: Path, *paths: Path) -> tuple[dict, Path]:
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_DATASETS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(map(str, [REPO, *paths]))
    env["ATTENTIONSPAN_CACHE"] = str(tmp_path / "cache")
    work = tmp_path / "work"  # not the repository: nothing found by accident
    work.mkdir(exist_ok=True)
    return env, work


def run(env_work, *args, check=True) -> subprocess.CompletedProcess:
    env, work = env_work
    result = subprocess.run(
        [str(a) for a in args], env=env, cwd=work, capture_output=True, text=True, timeout=600
    )
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def attentionspan(env_work, *args, check=True):
    return run(env_work, sys.executable, "-m", "harness.cli", *args, check=check)


def python(env_work, code: str) -> str:
    return run(env_work, sys.executable, "-c", textwrap.dedent(code)).stdout


def test_the_module_is_imported_at_the_first_read_of_the_registry(example_env):
    out = python(
        example_env,
        """
        import sys
        import attentionspan_datasets
        from attentionspan_datasets import TASKS, plugins
        module = "attentionspan_example_task.rotation"
        print(module in sys.modules, type(TASKS).__name__)
        print("string_rotation" in TASKS, module in sys.modules, type(TASKS).__name__)
        print(plugins.loaded())
        from attentionspan_datasets import presets
        print(presets.pair("rotation")[1].params["max_length"], presets.SHORT_NAMES["rotation"])
        from attentionspan_datasets.instructions import instruction_for
        print(instruction_for("string_rotation"))
        from harness.pipeline.settings import TaskValue
        rotation = TaskValue.of("rotation")
        quick, pretrained = rotation.recipe(False), rotation.recipe(True)
        print(quick["max_steps"], pretrained["max_steps"])
        """,
    ).splitlines()
    assert out[0] == "False LazyRegistry"
    assert out[1] == "True True _LoadedRegistry"  # after loading: a plain dict's speed
    assert f"package='{PACKAGE}'" in out[2] and "tasks=('string_rotation',)" in out[2]
    assert "presets=('rotation_id', 'rotation_ood')" in out[2]
    assert out[3] == "16 string_rotation"
    assert out[4].startswith("Write the characters between ':' and '='")
    assert out[5] == "800 400"  # the declared --quick recipe; --pretrained's general one


def test_generate_show_export_and_check_task(example_env, tmp_path):
    rows = attentionspan(example_env, "generate", "rotation_ood", "-n", "3").stdout.splitlines()
    assert [json.loads(r)["config"] for r in rows] == ["rotation_ood"] * 3
    assert all(json.loads(r)["task"] == "string_rotation" for r in rows)
    shown = attentionspan(example_env, "show", "rotation_id", "--param", "mask=sufficient").stdout
    assert "rotation_id #0" in shown and "#" in shown
    assert "rotation_id" in attentionspan(example_env, "show").stdout  # one grid per task
    sizes = ["--num-train", "8", "--num-validation", "2", "--num-test", "2"]
    attentionspan(example_env, "export", "rotation_ood", "--out", tmp_path / "export", *sizes)
    assert sorted(p.name for p in (tmp_path / "export" / "rotation_ood").iterdir()) == [
        "test-00000-of-00001.parquet",
        "train-00000-of-00001.parquet",
        "validation-00000-of-00001.parquet",
    ]
    assert "string_rotation" in (tmp_path / "export" / "README.md").read_text()
    checked = attentionspan(example_env, "check-task", "rotation", "-n", "200")
    assert (
        checked.stdout.splitlines()[-1] == "1 task(s): all checks pass, 1 warn/note line(s) above"
    )
    assert "ok   oracle rotation_ood" in checked.stdout
    assert "ok   processes rotation_id..rotation_ood" in checked.stdout


def test_check_task_fails_a_mask_the_oracle_cannot_use(tmp_path):
    """The example with `sufficient` = `paper` (the digit k dropped): exit 1, one line per
    failing instance, naming it."""
    broken = tmp_path / "broken"
    shutil.copytree(EXAMPLE / "attentionspan_example_task", broken / "attentionspan_example_task")
    module = broken / "attentionspan_example_task" / "rotation.py"
    source = module.read_text()
    assert "reference = [[0, source] for source in sources]" in source
    module.write_text(source.replace("[[0, source] for", "[[source] for"))
    site = tmp_path / "site"
    fake_install(site, PACKAGE, {"rotation": "attentionspan_example_task.rotation"})
    env_work = environment(tmp_path, site, broken)
    result = attentionspan(env_work, "check-task", "string_rotation", "-n", "50", check=False)
    assert result.returncode == 1, result.stderr
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert failed[0].startswith("FAIL oracle rotation_id#0 (seed 1, mask sufficient): oracle ")
    assert all(line.startswith("FAIL oracle rotation_") for line in failed)
    assert "ok   contract rotation_id: 50 instances" in result.stdout
    assert result.stdout.splitlines()[-1].endswith("failure line(s)")


def test_load_dataset_in_a_fresh_process(example_env, tmp_path):
    out = python(
        example_env,
        f"""
        import json
        from datasets import load_dataset
        ds = load_dataset("attentionspan", "rotation_id", num_train=20, num_validation=4,
                          num_test=4, cache_dir={str(tmp_path / "hf")!r})
        from attentionspan_datasets.splits import split_instance
        row = ds["test"][2]
        again = split_instance("rotation_id", split="test", index=2)
        print(json.dumps([len(ds["train"]), row["task"], row["prompt"] == again.prompt]))
        print(json.dumps(load_dataset("attentionspan", "rotation", split="validation",
              num_train=1, num_validation=3, num_test=1,
              cache_dir={str(tmp_path / "hf")!r})[0]["task"]))
        """,
    ).splitlines()
    assert json.loads(out[0]) == [20, "string_rotation", True]
    assert json.loads(out[1]) == "string_rotation"


@pytest.mark.slow
def test_a_tiny_train_then_eval_heads_attention_and_lm_eval(example_env, tmp_path):
    out = tmp_path / "run"
    printed = attentionspan(
        example_env,
        "train",
        "--model",
        "scratch",
        "--config",
        "rotation_id",
        "--output",
        out,
        "--max-steps",
        "3",
        "--eval-size",
        "4",
        "--no-progress",
        "--threads",
        "1",
        *TINY_SCRATCH_ARGS,
    ).stdout
    model = out / "final"
    assert printed.strip() == str(model)
    args = ["eval", "--model", model, "-n", "3", "--output", tmp_path / "eval", "--threads", "1"]
    report = attentionspan(example_env, *args)
    assert "| rotation_id | 3 |" in report.stdout and "| rotation_ood | 3 |" in report.stdout
    heads = ["heads", "--model", model, "--config", "rotation_id", "-n", "3", "--threads", "1"]
    attentionspan(example_env, *heads, "--output", tmp_path / "heads", "--no-progress")
    ranking = json.loads((tmp_path / "heads" / "heads.json").read_text())
    assert ranking["source"]["config"] == "rotation_id" and ranking["rows"] > 0
    attention = ["attention", "--model", model, "--configs", "rotation_ood", "-n", "3"]
    attentionspan(example_env, *attention, "--output", tmp_path / "attention")
    assert any((tmp_path / "attention").iterdir())
    lm_eval = [sys.executable, "-m", "lm_eval", "--model", "attnspan-hf", "--device", "cpu"]
    lm_eval += ["--model_args", f"pretrained={model}", "--tasks", "attnspan_rotation_id"]
    lm_eval += ["--limit", "2", "--output_path", tmp_path / "lm_eval"]
    run(example_env, *lm_eval, "--gen_kwargs", "max_gen_toks=12")
    (results,) = (tmp_path / "lm_eval").rglob("results_*.json")
    numbers = json.loads(results.read_text())["results"]["attnspan_rotation_id"]
    assert 0.0 <= numbers["exact_match,none"] <= numbers["partial_acc,none"] <= 1.0


@pytest.mark.slow
def test_reproduce_quick_on_the_plugin_task(example_env, tmp_path):
    """`reproduce --quick --tasks rotation`: the declared recipe's model (few steps here),
    then every stage, to report.md."""
    out = tmp_path / "reproduce"
    sizes = ["--num-heads", "4", "--num-validation", "6", "--num-test", "6"]
    sizes += ["--num-attention", "4", "--strengths", "1.0", "--counts", "1"]
    args = ["reproduce", "--quick", "--tasks", "rotation", "--train-steps", "5", *sizes]
    attentionspan(example_env, *args, "--control-seeds", "0", "--output", out, "--no-progress")
    report = (out / "report.md").read_text()
    assert "rotation_ood" in report
    settings = json.loads((out / "settings.json").read_text())
    assert settings["tasks"] == ["rotation"]


def test_lm_eval_task_files_for_the_plugin_presets(example_env):
    """Written into the cache once (a second process reuses them), as make_yamls writes
    the built-ins' but including the template by its path; the `lm_eval` command reads
    them in the test above."""
    out = python(
        example_env,
        """
        import os
        from lm_eval_tasks import plugin_tasks, registration
        folder = plugin_tasks.tasks_dir()
        print(folder)
        print(sorted(os.listdir(folder)))
        print(registration.with_tasks_dir(None)[1] == folder)
        """,
    ).splitlines()
    folder = Path(out[0])
    assert folder.is_relative_to(Path(example_env[0]["ATTENTIONSPAN_CACHE"], "lm_eval_tasks"))
    expected = ["_attnspan_plugins.yaml", "attnspan_rotation_id.yaml", "attnspan_rotation_ood.yaml"]
    assert json.loads(out[1].replace("'", '"')) == expected
    assert out[2] == "True"  # on lm-eval's include path, after this package's folder
    text = (folder / "attnspan_rotation_id.yaml").read_text()
    assert f"include: {REPO / 'lm_eval_tasks' / '_attnspan_template_yaml'}" in text
    assert "preset: rotation_id" in text and "exact_match_len_08" in text
    group = (folder / "_attnspan_plugins.yaml").read_text()
    assert "group: attnspan-plugins" in group and "  - attnspan_rotation_ood" in group
    written = (folder / "attnspan_rotation_id.yaml").stat().st_mtime_ns
    assert python(example_env, "from lm_eval_tasks import plugin_tasks as p; print(p.tasks_dir())")
    assert (folder / "attnspan_rotation_id.yaml").stat().st_mtime_ns == written  # reused


@pytest.fixture
def broken_env(tmp_path):
    """Three installed plugin packages that cannot load: an import error, a built-in's
    name, a config that is not a dataclass."""
    site = tmp_path / "site"
    fake_install(site, "import-error-task", {"broken": "no_such_module_for_attentionspan"})
    fake_install(site, "duplicate-task", {"dup": "duplicate_task_module"})
    fake_install(site, "plain-config-task", {"plain": "plain_config_task_module"})
    (site / "duplicate_task_module.py").write_text(
        "from attentionspan_datasets.tasks import TASKS, register_task\n"
        "t = TASKS['string_reversal']\n"
        "register_task('string_reversal', t.config_class, t.generate, t.oracle)\n"
    )
    (site / "plain_config_task_module.py").write_text(
        "from attentionspan_datasets.tasks import TASKS, register_task\n"
        "class Plain:\n    max_length: int = 3\n"
        "t = TASKS['string_reversal']\n"
        "register_task('plain_task', Plain, t.generate, t.oracle)\n"
    )
    return environment(tmp_path, site)


EXPECTED_FAILURES = [
    ("duplicate-task", "ValueError: task 'string_reversal' is already registered"),
    ("import-error-task", "No module named 'no_such_module_for_attentionspan'"),
    ("plain-config-task", "TypeError: config of task 'plain_task' must be a TaskConfig dataclass"),
]


def test_broken_plugins_are_named_in_one_line_and_the_built_ins_work(broken_env):
    shown = attentionspan(broken_env, "show", "reversal_id")
    lines = shown.stdout.splitlines()
    for (package, reason), line in zip(EXPECTED_FAILURES, lines[::2]):
        assert line.startswith(f"attentionspan: plugin package '{package}' (entry point "), line
        assert line.endswith(reason), line
    assert "reversal_id #0" in shown.stdout
    warnings = [line for line in shown.stderr.splitlines() if "PluginWarning" in line]
    assert len(warnings) == 3 and all("not loaded" in w for w in warnings)
    row = json.loads(attentionspan(broken_env, "generate", "reversal_id", "-n", "1").stdout)
    assert row["task"] == "string_reversal"
    checked = attentionspan(broken_env, "check-task", "plain_task", check=False)
    assert checked.returncode == 2 and "unknown config 'plain_task'" in checked.stderr
    assert checked.stdout.count("not loaded") == 3


@pytest.fixture
def registries_restored(monkeypatch):
    """Whatever a test's plugins register is removed after it; failures stay its own."""
    registries = plugins._registries()
    before = {name: dict(dict.items(r)) for name, r in registries.items()}
    monkeypatch.setattr(plugins, "_FAILURES", [])
    monkeypatch.setattr(plugins, "_LOADED", [])
    yield
    for name, registry in registries.items():
        dict.clear(registry)
        dict.update(registry, before[name])


def test_a_plugin_that_fails_half_way_is_rolled_back(tmp_path, monkeypatch, registries_restored):
    (tmp_path / "half_way_task.py").write_text(
        textwrap.dedent(
            """
            import dataclasses
            from attentionspan_datasets.presets import register_pair
            from attentionspan_datasets.tasks import TASKS, register_task
            t = TASKS["string_reversal"]
            HalfConfig = dataclasses.dataclass(type("HalfConfig", (t.config_class,), {}))
            register_task("half_way", HalfConfig, t.generate, t.oracle)
            register_pair("half", "half_way", {"max_length": 3}, {"max_length": 0})
            """
        )
    )
    (tmp_path / "empty_task.py").write_text('"""Registers nothing."""\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    entry_points = [
        EntryPoint("half", "half_way_task", plugins.GROUP),
        EntryPoint("empty", "empty_task", plugins.GROUP),
    ]
    with pytest.warns(plugins.PluginWarning) as caught:
        assert plugins.load_plugins(entry_points) == []
    assert "half_way" not in TASKS and "half_id" not in PRESETS  # rolled back
    assert "string_reversal" in TASKS
    first, second = plugins._FAILURES
    assert "entry point 'half = half_way_task'" in first
    assert "preset 'half_ood': half_way: invalid value 0 for field 'max_length'" in first
    assert second.endswith("empty_task registered no task and no preset")
    assert [str(w.message) for w in caught] == [first, second]


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda r: r("rotation", "string_reversal", {}, {}), None),
        (lambda r: r("reversal", "string_reversal", {}, {}), "the short name of task"),
        (lambda r: r("string_reversal", "long_addition", {}, {}), "a task is called so"),
        (lambda r: r("Bad-Name", "string_reversal", {}, {}), "a-z, 0-9 and '_'"),
        (lambda r: r("fresh", "no_such_task", {}, {}), "task 'no_such_task' is not registered"),
        (lambda r: r("fresh", "string_reversal", {"nope": 1}, {}), "unknown parameter"),
    ],
)
def test_register_pair_refuses_taken_names_and_bad_parameters(call, needle, registries_restored):
    from attentionspan_datasets.presets import register_pair

    if needle is None:  # a free short name for a task that has its pair already: allowed
        id_preset, _ = call(register_pair)
        assert id_preset.name == "rotation_id" and id_preset.task == "string_reversal"
        return
    with pytest.raises(ValueError, match=needle):
        call(register_pair)


def test_register_task_refuses_a_taken_config_class_recipes_and_instruction(
    registries_restored,
):
    from attentionspan_datasets.tasks import register_task

    task = TASKS["string_reversal"]
    with pytest.raises(ValueError, match="ReversalConfig is already the config of task"):
        register_task("fresh", task.config_class, task.generate, task.oracle)
    assert task.config_class.task_name == "string_reversal"
    task = TASKS["long_addition"]  # from here on, a config class of its own

    @dataclasses.dataclass
    class FreshConfig(task.config_class):
        pass

    with pytest.raises(ValueError, match="'recipes' maps 'quick' or 'pretrained'"):
        register_task("fresh", FreshConfig, task.generate, task.oracle, recipes={"x": {}})
    with pytest.raises(ValueError, match="'instruction' must be one non-empty line"):
        register_task("fresh", FreshConfig, task.generate, task.oracle, instruction="a\nb")
    assert "fresh" not in TASKS


@pytest.mark.parametrize(
    "name, needle",
    [
        ("reversal_id", "task name 'reversal_id' is taken: a preset is called so"),
        ("ffml", "task name 'ffml' is taken: the short name of task 'flip_flop'"),
    ],
)
def test_a_plugin_task_may_not_take_a_preset_or_short_name(
    name, needle, tmp_path, monkeypatch, registries_restored
):
    module = f"taker_{name}"
    (tmp_path / f"{module}.py").write_text(
        "import dataclasses\n"
        "from attentionspan_datasets.tasks import TASKS, register_task\n"
        "t = TASKS['string_reversal']\n"
        "Config = dataclasses.dataclass(type('Config', (t.config_class,), {}))\n"
        f"register_task({name!r}, Config, t.generate, t.oracle)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(plugins.PluginWarning, match=needle):
        plugins.load_plugins([EntryPoint("taker", module, plugins.GROUP)])
    assert name not in TASKS


def test_without_a_plugin_the_first_read_imports_no_metadata_library(tmp_path):
    """The common case costs a scan of the path (plugins.may_declare), not an import of
    importlib.metadata; lm-eval gets no extra folder."""
    out = python(
        environment(tmp_path),
        """
        import sys
        before = "importlib.metadata" in sys.modules
        import attentionspan_datasets
        attentionspan_datasets.generate("reversal_id")
        from attentionspan_datasets import plugins
        print(before or "importlib.metadata" not in sys.modules, plugins.loaded())
        """,
    )
    assert out.split() == ["True", "[]"]


def test_the_scan_before_importlib_metadata(tmp_path, monkeypatch):
    """`may_declare` answers False only where no entry_points.txt on the path names the
    group, and True for what it cannot read (a zip on the path)."""
    fake_install(tmp_path / "with", PACKAGE, {"rotation": "attentionspan_example_task.rotation"})
    (tmp_path / "without" / "other-1.0.dist-info").mkdir(parents=True)
    (tmp_path / "without" / "other-1.0.dist-info" / "entry_points.txt").write_text(
        "[console_scripts]\nother = other:main\n"
    )
    (tmp_path / "without" / "plain-1.0.egg-info").write_text("Name: plain\n")  # a file
    (tmp_path / "archive.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    for path, expected in (
        ([tmp_path / "without", tmp_path / "missing"], False),
        ([tmp_path / "without", tmp_path / "with"], True),
        ([tmp_path / "without", tmp_path / "archive.zip"], True),
    ):
        monkeypatch.setattr(sys, "path", [str(p) for p in path])
        assert plugins.may_declare(plugins.GROUP) is expected, path


def write_plugin(site: Path, package: str, module: str, source: str) -> None:
    fake_install(site, package, {module: module})
    (site / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def hostile_env(tmp_path):
    """Plugins that end the process at import (sys.exit(3), KeyboardInterrupt), a package
    whose entry_points.txt cannot be parsed, and the example package, which must still load."""
    site = tmp_path / "site"
    write_plugin(site, "exit-task", "exit_task_module", "import sys\nsys.exit(3)\n")
    write_plugin(site, "interrupt-task", "interrupt_task_module", "raise KeyboardInterrupt\n")
    fake_install(site, "garbled-task", {})
    garbled = site / "garbled_task-0.1.0.dist-info" / "entry_points.txt"
    garbled.write_text(f"[{plugins.GROUP}]\na line without an equals sign\n")
    fake_install(site, PACKAGE, {"rotation": "attentionspan_example_task.rotation"})
    return environment(tmp_path, site, EXAMPLE), garbled


def test_a_plugin_that_exits_or_interrupts_at_import_costs_only_itself(hostile_env):
    env_work, garbled = hostile_env
    for args in (["generate", "reversal_id", "-n", "1"], ["generate", "rotation_id", "-n", "1"]):
        result = attentionspan(env_work, *args, check=False)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["config"] == args[1]
        lines = result.stderr.splitlines()
        assert len(lines) == 3, lines  # one line per broken package, nothing else
        exit_line, garbled_line, interrupt_line = sorted(lines, key=lambda s: s.split("'")[1])
        assert "plugin package 'exit-task'" in exit_line and exit_line.endswith("SystemExit: 3")
        assert "plugin package 'interrupt-task'" in interrupt_line
        assert interrupt_line.endswith("not loaded: KeyboardInterrupt")
        assert "plugin package 'garbled-task' not loaded: its entry points file " in garbled_line
        assert str(garbled) in garbled_line


def test_exit_and_interrupt_at_import_are_rolled_back(tmp_path, monkeypatch, registries_restored):
    (tmp_path / "exits_late.py").write_text(
        textwrap.dedent(
            """
            import dataclasses, sys
            from attentionspan_datasets.tasks import TASKS, register_task
            t = TASKS["string_reversal"]
            LateConfig = dataclasses.dataclass(type("LateConfig", (t.config_class,), {}))
            register_task("exits_late", LateConfig, t.generate, t.oracle)
            sys.exit(3)
            """
        )
    )
    (tmp_path / "interrupts.py").write_text("raise KeyboardInterrupt('at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    entry_points = [
        EntryPoint("late", "exits_late", plugins.GROUP),
        EntryPoint("interrupts", "interrupts", plugins.GROUP),
    ]
    with pytest.warns(plugins.PluginWarning):
        assert plugins.load_plugins(entry_points) == []
    assert "exits_late" not in TASKS  # registered before the exit: removed again
    first, second = plugins._FAILURES
    assert first.endswith("not loaded: SystemExit: 3")
    assert second.endswith("not loaded: KeyboardInterrupt: at import")


@pytest.fixture
def failing_generator_env(tmp_path):
    """A plugin whose generator raises ValueError on its OOD preset from index 2 on, and
    returns a dict on its ID preset."""
    site = tmp_path / "site"
    write_plugin(
        site,
        "failing-generator",
        "failing_generator_module",
        """
        import dataclasses
        from attentionspan_datasets.presets import register_pair
        from attentionspan_datasets.tasks import TASKS, register_task
        t = TASKS["string_reversal"]
        Config = dataclasses.dataclass(type("Config", (t.config_class,), {}))
        calls = []
        def generate(rng, config):
            calls.append(1)
            if config.max_length > 5 and len(calls) > 2:
                raise ValueError("max_length is not allowed")  # reads like a user's mistake
            if config.max_length > 5:
                return t.generate(rng, config)
            return {"prompt": "ab=", "target": "ba"}
        register_task("failing_generator", Config, generate, t.oracle)
        register_pair("failgen", "failing_generator", {"max_length": 3}, {"max_length": 8})
        """,
    )
    return environment(tmp_path, site)


@pytest.mark.parametrize(
    "args, index, reason",
    [
        (["generate", "failgen_ood", "-n", "5"], 2, "ValueError: max_length is not allowed"),
        (["generate", "failgen_id", "--start", "7"], 7, "returned dict, not an Instance"),
        (["export", "failgen_id", "--out", "data", "--num-train", "4"], 0, "returned dict"),
    ],
)
def test_a_failing_plugin_generator_is_one_line_naming_package_config_and_index(
    args, index, reason, failing_generator_env
):
    result = attentionspan(failing_generator_env, *args, check=False)
    assert result.returncode == 1, result.stderr  # not 2: the user's input is not at fault
    (line,) = result.stderr.splitlines()
    config = args[1]
    assert line.startswith(
        f"attentionspan {args[0]}: error: plugin package 'failing-generator': the generator of "
        f"task 'failing_generator' failed on config '{config}' index "
    ), line
    assert reason in line
    if args[0] == "generate":
        assert f"index {index}: " in line


@pytest.mark.slow
def test_a_failing_plugin_generator_in_train_is_one_line(failing_generator_env, tmp_path):
    args = ["train", "--model", "scratch", "--config", "failgen_id", "--output", tmp_path / "t"]
    result = attentionspan(failing_generator_env, *args, "--max-steps", "1", check=False)
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    assert "plugin package 'failing-generator'" in line and "returned dict" in line


def test_the_generator_error_crosses_processes_and_keeps_its_index():
    import pickle

    error = plugins.GenerateError("pkg", "task", "cfg_id", "ValueError: x").at(4)
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error) and again.index == 4 and not isinstance(again, ValueError)
    assert again.at(9).index == 4  # the innermost caller's index stands


@pytest.mark.parametrize(
    "recipe, says",
    [
        ({"max_steps": -5}, "'max_steps' must be >= 0, got -5"),
        ({"max_steps": 0}, "'max_steps' must be >= 1 (the steps reproduce trains), got 0"),
        ({"batch_size": 0}, "'batch_size' must be >= 1, got 0"),
    ],
)
def test_a_bad_declared_recipe_names_the_field_its_author_gave(recipe, says, tmp_path):
    """Not a field derived from it (train_size = max_steps x batch_size), before training."""
    site = tmp_path / "site"
    write_plugin(
        site,
        "recipe-task",
        "recipe_task_module",
        f"""
        import dataclasses
        from attentionspan_datasets.presets import register_pair
        from attentionspan_datasets.tasks import TASKS, register_task
        t = TASKS["string_reversal"]
        Config = dataclasses.dataclass(type("Config", (t.config_class,), {{}}))
        register_task("recipe_task", Config, t.generate, t.oracle, recipes={{"quick": {recipe!r}}})
        register_pair("recipet", "recipe_task", {{"max_length": 3}}, {{"max_length": 8}})
        """,
    )
    env_work = environment(tmp_path, site)
    out = tmp_path / "run"
    args = ["reproduce", "--quick", "--tasks", "recipet", "--output", out, "--no-progress"]
    result = attentionspan(env_work, *args, check=False)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        "attentionspan reproduce: error: task 'recipet': its declared 'quick' recipe "
        "(register_task's recipes): "
    ), line
    assert line.endswith(says) and "train_size" not in line, line
    assert not out.exists()
