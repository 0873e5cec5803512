"""No figure without a source: every number in docs/results.md's hand-written prose is one a
committed digest holds, in the form the prose writes it, or an exception below that names
where it comes from.

The generated blocks are checked elsewhere (they are rendered again from the digests and
compared); this reads the sentences around them, and the rows of hand-written tables (not
their headers, nor code blocks, inline commands, dates or versions). A figure matches a
digest's numeric leaf (numbers inside its strings count too: `meta.machine` holds the times)
after rounding to the prose's decimals, with its sign where the prose writes one: as a share
when written with two decimals or more, as a share or as points/percent (x100) with one or
none, as percent with a % sign; a count may be a sum over a digest's seed runs ("14 of 183").
Each section is read against the digests it reports, not all of them: with every digest
pooled, nearly every two-decimal number between 0 and 1 is some leaf, and nothing could fail.
What it cannot see: a figure that some leaf of the right digest holds, put in the wrong
sentence; those the prose's reader checks.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
RESULTS = DOCS / "results.md"

# Which digests each section's prose reports (a section not named here is read against all of
# them); a pattern may name other committed files (a report, a page), whose numbers count.
SECTION_DIGESTS = {
    "The causal verdict": ["quick-run*.json"],
    "Addition: the reference is not the answer": ["quick-run-addition.json"],
    "Value assignment with the paper's conditional intervention": [
        "quick-run-value_assignment.json"
    ],
    "Flip-flop": ["quick-run-ffml.json"],
    "T6: ordered feature detection": ["quick-run-t6.json"],
    "From scratch: string reversal": ["scratch-reversal.json"],
    "Real pretrained models": ["quick-run-smollm2-*.json", "quick-run-gemma3-*.json"],
    "The oracle-free test": ["supervision-*.json", "quick-run.json"],
    "Attention on reference tokens": ["scratch-reversal.json"],
    # the H100 runs' reports, settings and training logs, committed with them
    "On a GPU": ["gpu-runs/scratch33m-*/*"],
    "The interactive viewer": ["performance.md"],  # its section "attention.html"
}

# Figures no digest holds, each with its source. Keep it short: reword the prose first. An
# exception no figure uses any more fails the test, so the list cannot rot.
EXCEPTIONS = {
    "0.984": "value assignment's ID exact match in the digest its round-3 run replaced "
    "(docs/quick-run-value_assignment.json at commit 7a6a01e, in git's history)",
    "709": "value assignment's training CPU-seconds, measured in docs/performance.md",
    "0.760": "T6's OOD exact at 200 instances: docs/usage_analysis.md's recipe table",
    "12,000": "T6's recipe steps (harness/pipeline/settings.py)",
    "1.35": "the viewer benchmark's scratch row (benchmarks/attention_viewer.py, 2026-11-24): "
    "no committed file keeps it",
}

# Sections with no digest at all, each with where its figures come from.
SECTIONS_WITHOUT_DIGEST = {
    "Discrete-retrieval baselines": "the JSON files `attentionspan baselines` wrote (not "
    "committed; the commands are in the section) and the paper's Tables 2 and 3",
}

GENERATED = re.compile(r"<!-- ([\w:.-]+): generated\b.*?<!-- /\1 -->", re.S)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
NUMBER = re.compile(r"(?<![\w.+\-])([+\-]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(%?)(?!\.?\w)")
IGNORED = [
    re.compile(r"`[^`]*`"),  # commands, paths and flags: not figures
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),  # dates
    re.compile(r"\b\d+\.\d+\.\d+\S*"),  # versions
    re.compile(r">=\s*[\d.]+"),  # version requirements
]
RANGE = re.compile(r"(\d)-([+\-]?\d)")  # "0.20-0.26", "8-14": both ends are figures


@dataclass(frozen=True)
class Figure:
    """One number as the prose writes it."""

    text: str
    value: float
    decimals: int
    sign: str  # "+", "-" or "" (unsigned: compared in absolute value)
    percent: bool
    line: int
    section: str


def hand_written(text: str) -> list[tuple[int, str, str]]:
    """(line number, section, line) of each prose line: outside generated blocks, code
    fences, headings and tables' header and separator rows."""
    blank = text
    for pattern in (GENERATED, FENCE):
        blank = pattern.sub(lambda m: "\n" * m.group(0).count("\n"), blank)
    out, section, previous = [], "", ""
    for number, line in enumerate(blank.split("\n"), 1):
        header = line.startswith("|") and not previous.startswith("|")
        rule = line.startswith("|") and set(line) <= set("|-: ")
        previous = line
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        elif not (header or rule):
            out.append((number, section, line))
    return out


def figures(line: str, number: int = 0, section: str = "") -> list[Figure]:
    """Every number in one prose line, as written."""
    for pattern in IGNORED:
        line = pattern.sub(" ", line)
    line = RANGE.sub(r"\1 to \2", line)
    found = []
    for m in NUMBER.finditer(line):
        sign, whole, frac, pct = m.groups()
        digits = whole.replace(",", "") + (frac or "")
        value = float(digits) * (-1 if sign == "-" else 1)
        found.append(
            Figure(
                m.group(0), value, len(frac) - 1 if frac else 0, sign, bool(pct), number, section
            )
        )
    return found


# A digest's per-instance values: thousands of numbers, among which nearly any figure is one;
# the prose reports statistics of them, which the digest holds elsewhere.
PER_INSTANCE = {"readings", "per_instance"}


def _leaves(node, path=""):
    if isinstance(node, dict):
        for key, value in node.items():
            if key not in PER_INSTANCE:
                yield from _leaves(value, f"{path}.{key}")
    elif isinstance(node, list):
        for value in node:
            yield from _leaves(value, f"{path}[]")
    elif isinstance(node, bool) or node is None:
        return
    elif isinstance(node, (int, float)):
        yield path, float(node)
    elif isinstance(node, str):
        for fig in figures(node):
            yield path, fig.value


def digest_values(digest: dict) -> set[float]:
    """Every numeric leaf of one digest (numbers inside its strings too), and each integer
    leaf summed over the digest's seed runs (the same field under every task key)."""
    values, runs = set(), defaultdict(float)
    for path, value in _leaves(digest):
        values.add(value)
        if value == int(value) and path.startswith(".tasks."):
            runs[re.sub(r"^\.tasks\.[^.]+", "", path)] += value
    return values | set(runs.values())


def values_of(path: Path) -> set[float]:
    """A digest's values, or every number in a committed text file."""
    if path.suffix == ".json":
        return digest_values(json.loads(path.read_text()))
    return {f.value for line in path.read_text().splitlines() for f in figures(line)}


def load_digests(folder: Path = DOCS) -> dict[str, set[float]]:
    """The digests by name, and the files the sections name in folders below them."""
    out = {p.name: values_of(p) for p in sorted(folder.glob("*.json"))}
    for pattern in (p for patterns in SECTION_DIGESTS.values() for p in patterns):
        for path in sorted(folder.glob(pattern)):
            name = str(path.relative_to(folder))
            if name not in out:
                out[name] = values_of(path)
    return out


def holds(fig: Figure, values: set[float]) -> bool:
    """Whether some value, rounded as the prose rounds it, is the figure."""
    tolerance = 0.5 * 10**-fig.decimals + 1e-9
    # a share is written with two decimals or more, points and percent with one or none
    scales = (100.0,) if fig.percent else (1.0,) if fig.decimals >= 2 else (1.0, 100.0)
    for value in values:
        for scale in scales:
            v = value * scale
            if fig.sign == "+" and v <= 0:
                continue
            if fig.sign == "" and fig.value >= 0:
                v = abs(v)
            if abs(v - fig.value) <= tolerance:
                return True
    return False


def _scope(section: str, digests: dict[str, set[float]]) -> set[float]:
    if section.startswith(tuple(SECTIONS_WITHOUT_DIGEST)):
        # its figures come from elsewhere: a digest leaf that happens to equal one (with
        # every digest pooled, most small numbers do) must not hide the excuse going stale
        return set()
    for name, patterns in SECTION_DIGESTS.items():
        if section.startswith(name):
            names = [n for n in digests if any(fnmatch(n, p) for p in patterns)]
            return set().union(*(digests[n] for n in names))
    return set().union(*(v for n, v in digests.items() if n.endswith(".json") and "/" not in n))


def unsourced(text: str, digests: dict[str, set[float]]) -> list[Figure]:
    """The prose's figures no digest of their section holds."""
    out = []
    for number, section, line in hand_written(text):
        values = _scope(section, digests)
        out += [f for f in figures(line, number, section) if not holds(f, values)]
    return out


def problems(
    text: str,
    digests: dict[str, set[float]],
    exceptions: dict[str, str] = EXCEPTIONS,
    sections: dict[str, str] = SECTIONS_WITHOUT_DIGEST,
) -> list[str]:
    """Each figure with no source, each exception no figure uses, each excused section with
    no unsourced figure left (so neither list can outlive what it excuses)."""
    missing = unsourced(text, digests)
    skipped = [f for f in missing if f.section.startswith(tuple(sections))]
    excused = [f for f in missing if f not in skipped and f.text.lstrip("+-") in exceptions]
    out = [
        f"line {f.line} ({f.section}): {f.text} is in no committed digest"
        for f in missing
        if f not in skipped and f not in excused
    ]
    used = {f.text.lstrip("+-") for f in excused}
    out += [f"exception {n} is no longer used" for n in exceptions if n not in used]
    out += [
        f"section {name!r} has no unsourced figure left"
        for name in sections
        if not any(f.section.startswith(name) for f in skipped)
    ]
    return out


# --- the extractor can fail -------------------------------------------------------------------


def test_a_figure_no_digest_holds_is_reported(tmp_path):
    (tmp_path / "quick-run-x.json").write_text(
        json.dumps(
            {
                "tasks": {
                    "x": {"share": 0.53125, "gain": 0.0664, "repaired": 5},
                    "x-seed1": {"repaired": 9},
                }
            }
        )
    )
    digests = load_digests(tmp_path)
    text = "\n".join(
        [
            "# Results",
            "<!-- x: generated from it; do not edit -->",
            "the block's 0.999 is not prose",
            "<!-- /x -->",
            "Diluted 0.53 (53%), a gain of +6.6 points, 14 of the wrong answers, 0.77 elsewhere.",
            "```bash",
            "attentionspan reproduce --seeds 31",
            "```",
            "| head | 0.111 |",
            "|---|---|",
            "| row | 0.53 |",
            "Run `reproduce --seeds 47` on 2026-11-28 with torch 2.13.0; ranges 0.53-0.81.",
        ]
    )
    missing = [f.text for f in unsourced(text, digests)]
    assert missing == ["0.77", "0.81"]
    # an exception names its figure's source; one no figure uses fails, as does a stale section
    found = problems(text, digests, {"0.77": "made up", "0.5": "unused"}, {"Gone": "unused"})
    assert found == [
        "line 12 (Results): 0.81 is in no committed digest",
        "exception 0.5 is no longer used",
        "section 'Gone' has no unsourced figure left",
    ]


def test_the_extractor_reads_signs_ranges_and_thousands():
    got = [
        (f.value, f.decimals, f.sign, f.percent)
        for f in figures("-1.9 to -5.1, 2,249 s, 8-14, 36%")
    ]
    assert got == [
        (-1.9, 1, "-", False),
        (-5.1, 1, "-", False),
        (2249.0, 0, "", False),
        (8.0, 0, "", False),
        (14.0, 0, "", False),
        (36.0, 0, "", True),
    ]
    # names and offsets are not figures
    assert figures("SmolLM2 at ref+1, top4-C2, T6, 33.6M, 5e-4, L3H3, x3") == []


# --- the page ---------------------------------------------------------------------------------


def test_every_figure_in_the_prose_has_a_source():
    assert problems(RESULTS.read_text(), load_digests()) == []
