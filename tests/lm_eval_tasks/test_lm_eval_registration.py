"""lm-eval finds our tasks and model type: the patches, in-process and in a fresh install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lm_eval_tasks import TASKS_DIR, registration

pytest.importorskip("lm_eval")
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, [TASKS_DIR]),
        ("/my/tasks", [TASKS_DIR, "/my/tasks"]),
        (["/a", Path("/b")], [TASKS_DIR, "/a", Path("/b")]),
        ([TASKS_DIR + "/"], [TASKS_DIR + "/"]),  # already there: not twice
        (Path(TASKS_DIR), [Path(TASKS_DIR)]),
    ],
)
def test_with_tasks_dir(given, expected):
    assert registration.with_tasks_dir(given) == expected


@pytest.fixture
def recorded_task_manager(monkeypatch):
    """lm-eval's TaskManager with an __init__ that records its arguments instead of indexing."""
    from lm_eval.tasks.manager import TaskManager

    calls = []

    def fake_init(self, verbosity=None, include_path=None, include_defaults=True, metadata=None):
        calls.append({"include_path": include_path, "include_defaults": include_defaults})

    monkeypatch.setattr(TaskManager, "__init__", fake_init)
    return TaskManager, calls


def test_patched_task_manager_includes_our_folder(recorded_task_manager):
    TaskManager, calls = recorded_task_manager
    registration.patch_task_manager()
    registration.patch_task_manager()  # idempotent
    TaskManager()
    TaskManager(None, "/mine", metadata={"x": 1})
    TaskManager(include_path=TASKS_DIR)
    TaskManager(include_path="/only", include_defaults=False)  # the user asked for only these
    assert [c["include_path"] for c in calls] == [
        [TASKS_DIR],
        [TASKS_DIR, "/mine"],
        [TASKS_DIR],
        "/only",
    ]


def test_model_type_is_registered_lazily():
    from lm_eval.api.registry import get_model, model_registry

    registration.register_model_type()
    registration.register_model_type()
    assert registration.MODEL_NAME in model_registry
    from lm_eval_tasks.models import AttnspanHFLM

    assert get_model("attnspan-hf") is AttnspanHFLM


def test_registering_ours_keeps_the_built_in_models():
    """In a fresh interpreter: lm-eval adds its own models only to an empty registry."""
    script = (
        "import lm_eval_tasks.registration as ours, lm_eval.api.registry as r\n"
        "ours.register_model_type()\n"
        "print('hf' in r.model_registry, 'vllm' in r.model_registry, "
        "'attnspan-hf' in r.model_registry)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    assert out.split() == ["True", "True", "True"]


def test_hooks_are_in_the_startup_table():
    from attentionspan_datasets.startup import POST_IMPORT_HOOKS

    assert POST_IMPORT_HOOKS["lm_eval.tasks"] == "lm_eval_tasks.registration:patch_task_manager"
    assert (
        POST_IMPORT_HOOKS["lm_eval.api.registry"]
        == "lm_eval_tasks.registration:register_model_type"
    )


@pytest.mark.slow
def test_include_path_with_the_hooks_off(request, tmp_path):
    """The installed folder as --include_path, hooks off. (With the hooks on and no flag,
    test_lm_eval_cli.py runs lm_eval itself.)"""
    try:
        python = request.getfixturevalue("installed_python")
    except pytest.FixtureLookupError:
        pytest.skip("needs the installed_python fixture (tests/conftest.py)")
    script = (
        "import lm_eval_tasks, lm_eval.tasks as t\n"
        "assert not hasattr(t.TaskManager.__init__, '_attnspan_patched')\n"
        "tm = t.TaskManager(include_path=lm_eval_tasks.TASKS_DIR)\n"
        "print(len(tm.match_tasks(['attnspan_*'])), 'attnspan' in tm.all_groups)\n"
    )
    env = dict(os.environ, ATTENTIONSPAN_NO_AUTOREGISTER="1")
    env.pop("PYTHONPATH", None)
    out = subprocess.run(
        [str(python), "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    from attentionspan_datasets.presets import PRESETS

    assert out.stdout.split() == [str(len(PRESETS)), "True"]  # one task per preset


def test_lm_evals_hints_about_our_tasks_are_dropped_others_kept(caplog):
    """lm-eval's kwargs hint (every run, every task) and its "No aggregation function"
    line per length outside the bins are dropped for attnspan tasks only."""
    import logging

    from lm_eval_tasks import quiet

    quiet.quiet_lm_eval_warnings()
    quiet.quiet_lm_eval_warnings()  # idempotent: one filter per logger
    task_logger = logging.getLogger("lm_eval.api.task")
    utils_logger = logging.getLogger("lm_eval.evaluator_utils")
    for logger in (task_logger, utils_logger):
        assert sum(getattr(f, "attnspan_filter", False) for f in logger.filters) == 1
    hint = f"{quiet.KWARGS_WARNING} in console (as json string) or to the TaskManager."
    with caplog.at_level(logging.WARNING):
        for task in ("attnspan_reversal_id", "attnspan_addition_id", "ruler_niah"):
            task_logger.warning(f"{task}: {hint}")
        for task, metric in [
            ("attnspan_reversal_ood", "exact_match_len_51"),
            ("attnspan_reversal_ood", "exact_match_len_52"),
            ("other_task", "exact_match_len_51"),
            ("attnspan_reversal_ood", "bleu"),
        ]:
            utils_logger.warning(
                f"[{task}] No aggregation function defined for metric {metric}. Using mean."
            )
        for task in ("attnspan_reversal_ood", "other_task"):
            utils_logger.warning(
                f"[{task}] Metrics were not scored on the same number of documents "
                "(exact_match,none=4, exact_match_len_51,none=1). Each metric was ..."
            )
        task_logger.warning("something else")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        f"ruler_niah: {hint}",
        "[other_task] No aggregation function defined for metric exact_match_len_51. Using mean.",
        "[attnspan_reversal_ood] No aggregation function defined for metric bleu. Using mean.",
        "[other_task] Metrics were not scored on the same number of documents "
        "(exact_match,none=4, exact_match_len_51,none=1). Each metric was ...",
        "something else",
    ]


@pytest.mark.parametrize(
    ("argv", "model", "tasks", "num_fewshot"),
    [
        (["--model", "hf", "--tasks", "a,b", "c", "--limit", "4"], "hf", ["a", "b", "c"], None),
        (["run", "--model=attnspan-hf", "-t", "x", "-f", "3"], "attnspan-hf", ["x"], "3"),
        (["--model_args", "pretrained=m", "--num_fewshot=2"], None, None, "2"),
        (["--tasks"], None, None, None),  # lm-eval's own parser refuses this one
    ],
)
def test_command_options_reads_the_lm_eval_command_line(argv, model, tasks, num_fewshot):
    options = registration.command_options(argv)
    assert (options.model, options.tasks, options.num_fewshot) == (model, tasks, num_fewshot)
    assert registration.command_model(argv) == model


def test_named_presets_are_found_by_name_glob_and_group(task_manager_for):
    manager = task_manager_for()
    presets = registration.named_presets(manager, ["attnspan_reversal_*", "attnspan_t1_id"])
    assert presets == ["reversal_id", "reversal_ood", "t1_id"]
    group = registration.named_presets(manager, ["attnspan-retrieval", "attnspan_t1_id"])
    assert group[0] == "t1_len5" and len(group) == len(set(group)) and "reversal_id" not in group
    assert registration.named_presets(manager, ["hellaswag", "x.yaml"]) == []
    assert registration.named_presets(manager, None) == []


@pytest.mark.parametrize(
    ("argv", "metadata", "message"),
    [
        (
            ["--tasks", "attnspan_reversal_id", "--num_fewshot", "3"],
            {"attnspan": {"fewshot_size": 1}},
            "lm_eval: error: attnspan_reversal_id: --num_fewshot 3 is more than the 1 few-shot",
        ),
        (
            ["-t", "attnspan-retrieval"],
            {"attnspan": {"max_length": 0}},
            "lm_eval: error: attnspan_t1_len5: --metadata 'attnspan': ",
        ),
    ],
)
def test_the_command_s_task_manager_checks_the_named_tasks_before_the_model(
    task_manager_for, monkeypatch, capsys, argv, metadata, message
):
    """In the `lm_eval` command the TaskManager is made before the model loads: the named
    attnspan tasks' options, fields and few-shot pool are refused then, in one line."""
    registration.patch_task_manager()
    monkeypatch.setattr("sys.argv", ["/venv/bin/lm_eval", "run", *argv])
    monkeypatch.delenv("ATTENTIONSPAN_TRACEBACK", raising=False)
    with pytest.raises(SystemExit) as done:
        task_manager_for(metadata)
    err = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and len(err) == 1 and err[0].startswith(message), err
    monkeypatch.setattr("sys.argv", ["python", "-c"])  # an API caller: checked per task later
    task_manager_for(metadata)


def test_importing_lm_eval_tasks_patches_without_a_warning():
    """lm_eval.tasks' manager imports `datasets`, whose hook arms ours while lm_eval.tasks
    is half imported: the patch waits for the end of that import instead of warning."""
    script = (
        "from lm_eval.tasks import TaskManager\n"
        "print(getattr(TaskManager.__init__, '_attnspan_patched', False))\n"
    )
    env = dict(os.environ)
    env.pop("ATTENTIONSPAN_NO_AUTOREGISTER", None)
    result = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert result.returncode == 0 and "RuntimeWarning" not in result.stderr, result.stderr[-2000:]
    assert result.stdout.split() == ["True"]


@pytest.mark.parametrize(
    "rank, preset, quieted",
    [("1", None, True), ("0", None, False), (None, None, False), ("1", "DEBUG", False)],
)
def test_the_other_processes_log_warnings_only(rank, preset, quieted, monkeypatch):
    """Under torchrun every process runs lm-eval's CLI: its INFO lines from the main one
    alone (they were printed once per process); a level the user set stays."""
    import logging

    from lm_eval_tasks import registration

    for name, value in (("RANK", rank), ("LMEVAL_LOG_LEVEL", preset)):
        monkeypatch.setenv(name, "recorded")  # so that what the call sets is undone
        if value is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, value)
    logger = logging.getLogger("lm_eval")
    monkeypatch.setattr(logger, "level", logging.INFO)
    registration.quiet_other_ranks()
    assert (logger.level == logging.WARNING) is quieted
    expected = "WARNING" if quieted else preset
    assert os.environ.get("LMEVAL_LOG_LEVEL") == expected
