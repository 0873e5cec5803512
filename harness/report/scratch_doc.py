"""The README's scratch reversal model in README.md and the docs: generated, never typed.

    # train, evaluate, measure (steps whose output is there are kept), then write the digest
    # docs/scratch-reversal.json and every page's block from it
    attentionspan scratch-doc run --output /tmp/figs/scratch-reversal \\
        --date 2026-11-26 --machine "the 2-core development CPU, one torch thread"

    # does a new run reproduce the committed digest? (runs the missing steps, writes nothing
    # in the repository; exit 1 naming what moved, and the versions and weights behind it);
    # timings are not compared
    attentionspan scratch-doc check --output /tmp/figs/scratch-reversal-2

    # rewrite the pages' blocks from the committed digest alone
    attentionspan scratch-doc render

The model is the one README.md's first `attentionspan train` command trains (1,000 steps on
reversal_id, one torch thread: training is deterministic, the same weights every run). Its
figures sit in four pages: the lm-eval table of README.md, the "From scratch" tables and the
attention (Table 2) table of docs/results.md, and the head ranking of docs/usage_analysis.md.
Each lies between `<!-- scratch-reversal:NAME ... -->` markers and is rendered from the digest
alone; tests/harness/report/test_scratch_doc.py renders every block again and compares it with
its page, so a figure that changed with the code fails there until the run is made again.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from attentionspan_datasets.atomic import atomic_write_text
from attentionspan_datasets.jsonfile import parse_json, read_json
from attentionspan_datasets.metrics import ALL_METRICS, METRICS
from harness.report import blocks
from harness.report.attention_report import MODE_TITLES, instance_columns
from harness.report.results_doc import differences, moved_lines, version_changes

REPO = Path(__file__).resolve().parents[2]
DIGEST = "docs/scratch-reversal.json"
MARK = "scratch-reversal"
# The steps, in order: name, the command (OUT: the run folder), the file that says it is done.
STEPS = [
    (
        "train",
        "attentionspan train --model scratch --config reversal_id --lr 2e-3 --batch-size 32 "
        "--train-size 32000 --eval-every 250 --eval-size 200 --log-every 50 --no-progress "
        "--output OUT",
        "final/model.safetensors",
    ),
    (
        "eval",
        "attentionspan eval --model OUT/final -n 500 --no-progress --output OUT/eval",
        "eval/results.json",
    ),
    (
        "attention",
        "attentionspan attention --model OUT/final --configs reversal_id reversal_ood -n 200 "
        "--batch-size 16 --no-progress --output OUT/attention",
        "attention/attention.json",
    ),
    (
        "heads",
        "attentionspan heads --model OUT/final --config reversal_id -n 30 --top 8 "
        "--no-progress --output OUT/heads.json",
        "heads.json",
    ),
    (
        "lm_eval",
        "lm_eval --model attnspan-hf --model_args pretrained=OUT/final --device cpu "
        "--batch_size 64 --tasks attnspan_reversal_id,attnspan_reversal_ood "
        "--output_path OUT/lm_eval",
        "lm_eval.txt",  # lm_eval's printed output, which holds its table
    ),
]
ENV = "OMP_NUM_THREADS=1"  # every step runs at one torch thread (training is then deterministic)
TIMINGS = ("seconds", "cpu_s")  # how long a step took: reported, not compared by `check`
SIGNIFICANCE = 0.05


def commands(out: str) -> dict[str, str]:
    """Each step's command line with the run folder filled in."""
    return {name: f"{ENV} {command.replace('OUT', out)}" for name, command, _ in STEPS}


# --- the digest ---------------------------------------------------------------------------
def digest(out: Path) -> dict[str, Any]:
    """The figures the pages show, read from a run folder the steps wrote."""
    from harness.foundation.runs import weights_sha256

    out = Path(out)
    missing = [done for _, _, done in STEPS if not (out / done).is_file()]
    if missing:
        raise ValueError(f"{out} lacks {', '.join(missing)}: run the steps first (`run`)")
    cmd = commands(str(out))
    return {
        "model_sha256": weights_sha256(out / "final"),
        "parameters": _parameters(out / "final"),
        "train": {"command": cmd["train"], **_train(out)},
        "eval": {"command": cmd["eval"], **_eval(out / "eval" / "results.json")},
        "attention": {
            "command": cmd["attention"],
            **_attention(out / "attention" / "attention.json"),
        },
        "heads": {"command": cmd["heads"], **_heads(out / "heads.json")},
        "lm_eval": {"command": cmd["lm_eval"], **_lm_eval(out)},
    }


def _parameters(folder: Path) -> int:
    from safetensors import safe_open

    total = 0
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(path, "np") as weights:
            total += sum(math.prod(weights.get_slice(k).get_shape()) for k in weights.keys())
    return total


def _train(out: Path) -> dict[str, Any]:
    run = read_json(out / "final" / "attentionspan_run.json", expect=dict)
    lines = (out / "log.jsonl").read_text().splitlines()
    last = parse_json(lines[-1], f"the last line of {out / 'log.jsonl'}") if lines else {}
    return {
        "steps": run["state"]["step"],
        "seconds": last.get("elapsed_s"),
        "cpu_s": last.get("cpu_s"),
        "final_eval": run.get("final_eval"),
    }


def _eval(path: Path) -> dict[str, Any]:
    data = read_json(path, expect=dict)
    keep = ("count", *ALL_METRICS)
    results = {}
    for config, result in data["results"].items():
        results[config] = {k: result[k] for k in keep}
        for table in ("per_length", "per_bin"):
            results[config][table] = {
                key: {k: row[k] for k in keep} for key, row in result[table].items()
            }
    return {"seconds": data.get("time_s"), "results": results}


def _attention(path: Path) -> dict[str, Any]:
    data = read_json(path, expect=dict)
    configs = {}
    for config, result in data["configs"].items():
        configs[config] = {}
        for mode in MODE_TITLES:
            block = result if mode == "teacher_forced" else result.get("generate")
            if block is None or "rollout" not in block:
                continue
            rollout = block["rollout"]
            aware = block.get("instance_aware") or {}
            configs[config][mode] = {
                "token_accuracy": block["token_accuracy"],
                "exact_match": block.get("exact_match"),
                "rollout": {
                    "correct": {k: rollout["correct"][k] for k in ("mean", "n")},
                    "error": {k: rollout["error"][k] for k in ("mean", "n")},
                    **{k: rollout[k] for k in ("welch_t", "welch_p", "hedges_g")},
                },
                "instance_aware": {
                    "cluster_bootstrap": _pick(
                        aware.get("cluster_bootstrap"), "difference", "low", "high"
                    ),
                    "paired": _pick(aware.get("paired"), "mean_difference", "n_instances"),
                    "matched": _pick(aware.get("matched"), "difference", "p", "n_permutations"),
                },
            }
    return {"seconds": data.get("seconds"), "configs": configs}


def _pick(block: dict[str, Any] | None, *keys: str) -> dict[str, Any]:
    return {k: (block or {}).get(k) for k in keys}


def _heads(path: Path) -> dict[str, Any]:
    data = read_json(path, expect=dict)
    source = data.get("source") or {}
    return {
        "config": source.get("config"),
        "split": source.get("split"),
        "instances": source.get("instances"),
        "rows": data["rows"],
        "top": [
            {k: head[k] for k in ("layer", "head", "per_row", "offsets")} for head in data["top"]
        ],
    }


def _lm_eval(out: Path) -> dict[str, Any]:
    found = sorted((out / "lm_eval").rglob("results_*.json"))
    if not found:
        raise ValueError(f"{out / 'lm_eval'} holds no results_*.json")
    data = read_json(found[-1], expect=dict)
    printed = (out / "lm_eval.txt").read_text().splitlines()
    table = [line for line in printed if line.startswith("|")]
    return {
        "lm_eval": data.get("lm_eval_version"),
        "seconds": _float(data.get("total_evaluation_time_seconds")),
        "task_versions": {k: str(v) for k, v in data["versions"].items()},
        "results": {
            task: {
                k.split(",")[0]: v
                for k, v in result.items()
                if "," in k and not k.split(",")[0].endswith("_stderr")
            }
            for task, result in data["results"].items()
        },
        "stderr": {
            task: {
                k.split(",")[0].removesuffix("_stderr"): v
                for k, v in result.items()
                if k.split(",")[0].endswith("_stderr") and v != "N/A"
            }
            for task, result in data["results"].items()
        },
        "table": table,
    }


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# --- the blocks ---------------------------------------------------------------------------
def markers(name: str) -> tuple[str, str]:
    return (
        f"<!-- {MARK}:{name}: generated from {DIGEST} by harness/report/scratch_doc.py; "
        "do not edit -->",
        f"<!-- /{MARK}:{name} -->",
    )


def _measured(meta: dict[str, Any], figures: dict[str, Any], page: str, extra: str = "") -> str:
    packages = ", ".join(f"{k} {v}" for k, v in (meta.get("versions") or {}).items())
    link = os.path.relpath(REPO / DIGEST, (REPO / page).parent)
    return _para(
        f"Measured {meta['date']} on {meta['machine']} ({packages}{extra}); model weights "
        f"sha256 `{figures['model_sha256'][:12]}`; digest [{Path(DIGEST).name}]({link}) "
        f"(`attentionspan scratch-doc check` tells whether a rerun reproduces it):"
    )


def _para(text: str, bullet: bool = False) -> str:
    """Prose wrapped as the pages are (100 columns at most), a list item indented."""
    return textwrap.fill(
        text,
        width=95,
        subsequent_indent="  " if bullet else "",
        break_long_words=False,
        break_on_hyphens=False,
    )


def _bash(*lines: str) -> list[str]:
    out = ["```bash"]
    for line in lines:
        out += _wrap(line)
    return [*out, "```"]


def _wrap(line: str, width: int = 95) -> list[str]:
    """A long command over several lines with backslash continuations."""
    words, rows, current = shlex.split(line), [], ""
    words = [shlex.quote(w) if not w.startswith("OMP_NUM_THREADS=") else w for w in words]
    for word in words:
        if current and len(current) + 1 + len(word) > width - 2:
            rows.append(current + " \\")
            current = "  " + word
        else:
            current = f"{current} {word}" if current else word
    return [*rows, current]


def _n(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value != 0 and abs(value) < 1e-3:
        return f"{value:.1e}"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} s"


def _opening(
    name: str, meta: dict[str, Any], figures: dict[str, Any], page: str, command: str
) -> tuple[list[str], str]:
    """A block's first lines (its begin marker, when and where it was measured, the
    training command and the block's own) and its end marker."""
    begin, end = markers(name)
    lines = [begin, "", _measured(meta, figures, page), ""]
    return lines + _bash(figures["train"]["command"], command), end


def render_eval(meta: dict[str, Any], figures: dict[str, Any], page: str) -> str:
    """docs/results.md, "From scratch": the model, its ID and OOD scores, OOD by length."""
    train, ev = figures["train"], figures["eval"]
    lines, end = _opening("eval", meta, figures, page, ev["command"])
    lines += [
        "",
        _para(
            f"The default scratch model: a Llama of {figures['parameters']:,} parameters (4 "
            "layers, hidden 128, 4 heads, MLP 512), one token per printable ASCII character; "
            f"{train['steps']:,} steps of batch 32 at lr 2e-3, AdamW (0.95, 0.999), weight "
            f"decay 0.2, 5% warm-up, linear decay: {_seconds(train['seconds'])} "
            f"({_seconds(train['cpu_s'])} of CPU)."
        ),
        "",
        "| config | n | exact match | partial acc | TF token acc |",
        "|---|---|---|---|---|",
    ]
    results = ev["results"]
    for config, r in results.items():
        lines.append(
            f"| {config} | {r['count']} | **{_n(r['exact_match'])}** | {_n(r['partial_acc'])} | "
            f"{_n(r['tf_token_acc'])} |"
        )
    ood = next((c for c in results if c.endswith("_ood")), None)
    if ood:
        lines += [
            "",
            f"| {ood} length | n | exact match | partial acc | TF token acc |",
            "|---|---|---|---|---|",
        ]
        for key, r in results[ood]["per_bin"].items():
            lines.append(
                f"| {key} | {r['count']} | {_n(r['exact_match'])} | {_n(r['partial_acc'])} | "
                f"{_n(r['tf_token_acc'])} |"
            )
        lines += ["", _eval_summary(results, ood)]
    lines += ["", end]
    return "\n".join(lines)


def _eval_summary(results: dict[str, Any], ood: str) -> str:
    per_length = results[ood]["per_length"]
    first = min(per_length, key=int)
    beyond = [r for key, r in per_length.items() if int(key) > 20]
    count = sum(r["count"] for r in beyond)
    id_config = ood.removesuffix("_ood") + "_id"
    id_exact = results.get(id_config, {}).get("exact_match")
    share = sum(r["partial_acc"] * r["count"] for r in beyond) / count if count else None
    beyond_text = f", beyond 20 characters {share:.1%} ({count} instances)" if count else ""
    return _para(
        f"ID exact match {_n(id_exact)}, OOD exact match {_n(results[ood]['exact_match'])}; "
        f"at length {first}, one character past the training range, the model places "
        f"{per_length[first]['partial_acc']:.1%} of the characters in the right position "
        f"({per_length[first]['count']} instances){beyond_text}."
    )


def render_attention(meta: dict[str, Any], figures: dict[str, Any], page: str) -> str:
    """docs/results.md, "Attention on reference tokens": Table 2 for the scratch model."""
    att = figures["attention"]
    lines, end = _opening("attention", meta, figures, page, att["command"])
    lines += [
        "",
        "| config | pass | token acc | attn (correct) | n | attn (error) | n | pooled Welch p "
        "(paper's test) | difference [95% CI over instances] | within-instance (instances) | "
        "matched p |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for config, modes in att["configs"].items():
        for mode, row in modes.items():
            r = row["rollout"]
            aware = " | ".join(instance_columns(row["instance_aware"]))
            lines.append(
                f"| {config} | {MODE_TITLES[mode]} | {_n(row['token_accuracy'])} | "
                f"{_n(r['correct']['mean'], 4)} | {r['correct']['n']} | "
                f"{_n(r['error']['mean'], 4)} | {r['error']['n']} | {_n(r['welch_p'])} | {aware} |"
            )
    lines += ["", *_attention_findings(att["configs"]), "", end]
    return "\n".join(lines)


def _attention_findings(configs: dict[str, Any]) -> list[str]:
    """One line per OOD pass: pooled, between-instance and within-instance differences, and
    whether the matched test finds one (the conclusion follows the numbers)."""
    lines = []
    for config, modes in configs.items():
        for mode, row in modes.items():
            aware, rollout = row["instance_aware"], row["rollout"]
            within = aware["paired"].get("mean_difference")
            p = aware["matched"].get("p")
            if not rollout["error"]["n"] or not rollout["correct"]["n"] or None in (within, p):
                continue  # no wrong (or no right) token: nothing to compare
            pooled = rollout["correct"]["mean"] - rollout["error"]["mean"]
            verdict = (
                f"significant at {SIGNIFICANCE} (matched p = {_n(p)})"
                if p < SIGNIFICANCE
                else f"**not significant** at {SIGNIFICANCE} (matched p = {_n(p)})"
            )
            boot = aware["cluster_bootstrap"]
            interval = (
                "above 0"
                if (boot.get("low") or 0) > 0
                else "including 0"
                if (boot.get("high") or 0) >= 0
                else "below 0"
            )
            text = (
                f"- {config}, {MODE_TITLES[mode]}: correct tokens put {pooled:+.4f} more on "
                f"their reference, pooled (the interval over instances is {interval}); within "
                f"one instance {within:+.4f} ({aware['paired']['n_instances']} instances with "
                f"both kinds of token, {within / pooled:.0%} of the pooled difference); holding "
                f"length and position fixed the difference is {verdict}."
                if pooled
                else f"- {config}, {MODE_TITLES[mode]}: no pooled difference."
            )
            lines.append(_para(text, bullet=True))
    return lines


def render_heads(meta: dict[str, Any], figures: dict[str, Any], page: str) -> str:
    """docs/usage_analysis.md: the head ranking of the scratch model, with offset profiles."""
    heads = figures["heads"]
    top = heads["top"][:8]
    offsets = list(top[0]["offsets"]) if top else []
    lines, end = _opening("heads", meta, figures, page, heads["command"])
    lines += [
        "",
        _para(
            f"{heads['rows']} target rows of {heads['instances']} {heads['config']} "
            f"{heads['split']} instances; the top {len(top)} heads by weight on the reference, "
            "mean weight per target row at each offset:"
        ),
        "",
        "| rank | head | " + " | ".join(_offset(k) for k in offsets) + " |",
        "|---|---|" + "---|" * len(offsets),
    ]
    for rank, head in enumerate(top, 1):
        cells = " | ".join(f"{head['offsets'][k]:.3f}" for k in offsets)
        lines.append(f"| {rank} | L{head['layer']}H{head['head']} | {cells} |")
    lines += ["", "Per layer, over all its heads (ranked or not):", ""]
    for layer in sorted({h["layer"] for h in heads["top"]}):
        group = [h for h in heads["top"] if h["layer"] == layer]
        parts = [f"{_offset(k)} {_span([h['offsets'][k] for h in group])}" for k in ("0", "1", "2")]
        lines.append(f"- layer {layer}: " + ", ".join(parts))
    lines += ["", end]
    return "\n".join(lines)


def _offset(key: str) -> str:
    return "ref" if int(key) == 0 else f"ref{int(key):+d}"


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f}"


def render_lm_eval(meta: dict[str, Any], figures: dict[str, Any], page: str) -> str:
    """README.md, "lm-eval": the command, lm-eval's own printed table, one line on it."""
    lm = figures["lm_eval"]
    begin, end = markers("lm-eval")
    versions = ", ".join(f"{k} {v}" for k, v in lm["task_versions"].items())
    extra = f"; task versions {versions}"
    lines = [begin, "", _measured(meta, figures, page, extra), "", *_bash(lm["command"]), ""]
    lines += [*lm["table"], ""]
    summary = []
    for task, result in lm["results"].items():
        summary.append(
            f"{task}: exact match {result['exact_match']:.4f}, partial accuracy "
            f"{result['partial_acc']:.4f} (± {lm['stderr'][task].get('partial_acc', 0):.4f})"
        )
    lines += [
        _para(
            "; ".join(summary) + f"; {_seconds(lm['seconds'])} for the "
            f"{sum(figures['eval']['results'][c]['count'] for c in figures['eval']['results'])} "
            f"generations. {_agreement(figures)}"
        ),
        "",
        end,
    ]
    return "\n".join(lines)


def _agreement(figures: dict[str, Any]) -> str:
    """Whether lm-eval scored what `attentionspan eval` scored on the same test rows."""
    ev, lm = figures["eval"]["results"], figures["lm_eval"]["results"]
    pairs = [
        (config, metric, ev[config][metric], lm[f"attnspan_{config}"][metric])
        for config in ev
        if f"attnspan_{config}" in lm
        for metric in METRICS  # the scores both harnesses give an answer
        if metric in lm[f"attnspan_{config}"]
    ]
    differ = [p for p in pairs if f"{p[2]:.12g}" != f"{p[3]:.12g}"]
    if not differ:
        counts = sorted({ev[config]["count"] for config, *_ in pairs})
        return (
            "The same figures as `attentionspan eval` on the same "
            f"{'/'.join(map(str, counts))} test rows per config "
            '(docs/results.md, "From scratch").'
        )
    return (
        "Unlike `attentionspan eval`'s: "
        + "; ".join(f"{config} {metric} {a:.4f} there" for config, metric, a, _ in differ)
        + "."
    )


# (page, block name, renderer), in the order of the pages.
BLOCKS = [
    ("README.md", "lm-eval", render_lm_eval),
    ("docs/results.md", "eval", render_eval),
    ("docs/results.md", "attention", render_attention),
    ("docs/usage_analysis.md", "heads", render_heads),
]


def render(data: dict[str, Any], page: str, name: str) -> str:
    for where, block, renderer in BLOCKS:
        if (where, block) == (page, name):
            return renderer(data["meta"], data["figures"], page)
    raise KeyError(f"no block {name!r} on {page}")


def replace_block(text: str, rendered: str, name: str) -> str:
    """`text` with the block `name` (a name of BLOCKS) replaced by `rendered`."""
    return blocks.replace_block(text, rendered, *markers(name))


def write_pages(data: dict[str, Any], root: Path = REPO) -> list[str]:
    """Rewrite every block from the digest; all pages are checked before any is written."""
    texts: dict[str, str] = {}
    for page, name, _ in BLOCKS:
        text = texts.get(page) or (root / page).read_text()
        try:
            texts[page] = replace_block(text, render(data, page, name), name)
        except ValueError as error:
            raise ValueError(f"{page}: {error}") from None
    for page, text in texts.items():
        atomic_write_text(root / page, text)
    return list(texts)


# --- check --------------------------------------------------------------------------------
def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in TIMINGS}
    return value


def check(out: Path, digest_file: Path) -> list[str]:
    """What a run at `out` does not reproduce of the committed digest (empty: it does)."""
    from harness.foundation.runs import versions

    saved = read_digest(Path(digest_file))
    then = saved["figures"]
    now = digest(out)
    # the commands name the run folder; the same steps in another folder are the same run
    for step in DIGEST_STEPS:
        now[step]["command"] = then[step].get("command")
    moved = differences(_without_timings(then), _without_timings(now))
    if not moved:
        return []
    lines = moved_lines(moved, digest_file)
    changed = version_changes(saved["meta"].get("versions") or {}, _versions(versions))
    lines.append(
        "versions that differ: " + ", ".join(changed)
        if changed
        else "the package versions are the same"
    )
    if then["model_sha256"] != now["model_sha256"]:
        lines.append("the model's weights differ (model_sha256)")
    return lines


def _versions(versions) -> dict[str, str]:
    import lm_eval

    return {**versions(), "lm_eval": lm_eval.__version__}


# --- run ----------------------------------------------------------------------------------
def run_steps(out: Path) -> None:
    """Run each step whose output is not there yet, at one torch thread."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for name, _, done in STEPS:
        if (out / done).is_file():
            print(f"{name}: kept ({out / done} is there)", file=sys.stderr)
            continue
        argv = shlex.split(commands(str(out))[name])[1:]  # without the OMP_NUM_THREADS=1
        print(f"{name}: {shlex.join(argv)}", file=sys.stderr)
        if name == "lm_eval":
            result = subprocess.run(argv, env=env, capture_output=True, text=True)
            sys.stderr.write(result.stderr[-2000:])
            if result.returncode == 0:
                atomic_write_text(out / done, result.stdout)
        else:
            result = subprocess.run(argv, env=env)
        if result.returncode != 0:
            raise RuntimeError(f"{name} exited with status {result.returncode}")


def run_digest(out: Path, date: str, machine: str) -> dict[str, Any]:
    """Run the steps missing in `out` and return the run's digest: {"meta", "figures"}."""
    from harness.foundation.runs import versions

    run_steps(out)
    meta = {"date": date, "machine": machine}
    return {"meta": {**meta, "versions": _versions(versions)}, "figures": digest(out)}


def read_digest(path: Path) -> dict[str, Any]:
    """The digest at `path` ({"meta": {...}, "figures": {...}}); ValueError naming the file
    when it is missing, torn (cut short) or not a digest this module wrote."""
    data = read_json(path, "--digest")
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("figures"), dict)
        or not isinstance(data.get("meta", {}), dict)
    ):
        raise ValueError(
            f"--digest {str(path)!r} is not a scratch_doc digest: it needs a 'figures' object "
            f"and a 'meta' object, as `attentionspan scratch-doc run` writes them (e.g. {DIGEST})"
        )
    figures = data["figures"]
    # what `check` compares, refused here: `check` reads the digest after an hour of steps
    lacking = [key for key in DIGEST_STEPS if not isinstance(figures.get(key), dict)]
    lacking += [key for key in DIGEST_FIGURES if key not in figures]
    if lacking:
        raise ValueError(
            f"--digest {str(path)!r} is not a whole scratch_doc digest: its 'figures' lack "
            f"{', '.join(lacking)} (as `attentionspan scratch-doc run` writes them, e.g. {DIGEST})"
        )
    return {"meta": data.get("meta", {}), "figures": figures}


DIGEST_STEPS = ("train", "eval", "attention", "heads", "lm_eval")  # objects of `digest`
DIGEST_FIGURES = ("model_sha256", "parameters")


def check_pages(root: Path = REPO) -> None:
    """ValueError unless the pages the blocks live in are under `root`: an installed package
    (site-packages) has none, and `run` / `render` rewrite a source checkout's pages."""
    missing = sorted({page for page, _, _ in BLOCKS if not (root / page).is_file()})
    if missing:
        raise ValueError(
            f"the pages {', '.join(missing)} are not under {str(root)!r} (an installed package "
            "has none): run and render rewrite a source checkout's pages; run this from a "
            "clone of the repository"
        )


def write_digest(data: dict[str, Any], path: Path) -> None:
    atomic_write_text(Path(path), json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":  # the form this command had before it moved to harness/commands/
    from harness.foundation.options import moved_command

    moved_command("harness.report.scratch_doc", "scratch-doc")
