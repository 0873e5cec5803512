"""The authors' released T1-T7 files -> the baselines' tensors: to score a model trained on
our generated data on the paper's own test set, or to train on their files altogether.

    from harness.baselines.authors_data import load_authors
    batch, info = load_authors("DiscreteSeq/dataset/Task_6/10len/test.tsv", "t6_len10")
    batch.vectors  # float [N, n, 36], as harness.baselines.data.to_batch makes them
    attentionspan baselines --task T6 --epochs 10 --seeds 1 --output t6.json \\
        --authors-test DiscreteSeq/dataset/Task_6/10len/test.tsv
    attentionspan baselines --task T1 --length 5 --seeds 1 --output t1.json \\
        --authors-data DiscreteSeq/dataset/Task_1/5len   # their training, valid, test files

The format is the one their dataset/README.md documents (sorodoc/DiscreteSeq, which has no
licence: read its files from where they lie, never copy them into this repository). Three
tab-separated lines per datapoint:

    sequence<TAB>000100...<TAB>...   n vectors of 36 "0"/"1" characters; column k is feature k
    query<TAB>have you seen 4        T2: "have you seen 14 and 9" (its two features)
    answer<TAB>yes                   or "no"

From T3 on, the query is an id whose input features q_vocab.txt lists: one line per query,
`<id><TAB><a> <b>` (T3, T4, T6) or `<id><TAB><a> <b><TAB><c> <d>` (T5, T7), the pairs in
order for T6 and T7 ("a before b"). Their repository keeps it at Task_N/q_vocab.txt, the
test file at Task_N/<n>len/test.tsv (valid.tsv beside it, and the 100,000 training
datapoints as training.tar.gz, which `read_text` opens; only the 5-vector archives are in
the copy we read); `find_vocab` looks beside the test file, then one folder up.

Our models learned OUR query-to-feature mapping (drawn from the config's mapping_seed),
not theirs, so for T3-T7 every datapoint is relabelled: their query id q becomes our
query q, and the features are permuted, per query, so that their pairs of q land on our
pairs of q slot by slot (first on first, second on second), the other 36 - 2k features
onto ours in increasing order. The background is exchangeable across features, so the
relabelled datapoint is drawn from their distribution with our mapping, and its answer
under our mapping is theirs (checked per datapoint: `info["label_mismatches"]`). Their
T5/T7 mapping has queries whose two pairs share a feature, which ours never has; no
permutation maps those, so their datapoints are left out (`info["left_out"]`). A model
trained on their files alone (`--authors-data`) needs none of this: `relabel=False` keeps
their features and every datapoint, and reads the masks through their own mapping.

The reference vectors and the decisive pair mirror data.py's paper mask: a yes points at
the occurrences of the clause(s) that hold, a no at every queried feature that occurs;
the carriers are the (earlier, later) vectors of the pair that holds (a no: the pair whose
two features both occur), when each occurs once in different vectors.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

from attentionspan_datasets.generation import resolve_config
from attentionspan_datasets.tasks import _feature_vectors as fv
from attentionspan_datasets.tasks.base import TaskConfig
from harness.baselines.data import NUM_FEATURES, FeatureBatch, make_batch

QUERY_WORDS = ("have", "you", "seen")
ANSWERS = {"yes": 1, "no": 0}
# Our task -> (query features: direct (T1, T2) or a q_vocab id, pairs per query, the
# answer's rule: "any" feature, "all" features, pairs "unordered" or "ordered").
TASKS = {
    "one_feature_detection": ("direct", 0, "any"),
    "two_feature_detection": ("direct", 0, "all"),
    "set_member_detection": ("vocab", 1, "any"),
    "contextual_two_feature_detection": ("vocab", 1, "unordered"),
    "contextual_set_member_detection": ("vocab", 2, "unordered"),
    "ordered_feature_detection": ("vocab", 1, "ordered"),
    "contextual_ordered_set_member_detection": ("vocab", 2, "ordered"),
}


@dataclass
class Datapoint:
    vectors: list[list[int]]  # active features per vector
    query: list[int]  # T1, T2: the query's features; T3-T7: the q_vocab id
    answer: int


def parse_tsv(text: str, source: str = "<text>") -> list[Datapoint]:
    """Datapoints of one file; a line out of format is a ValueError naming it."""
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or len(lines) % 3:
        raise ValueError(f"{source}: expected 3 lines per datapoint, got {len(lines)} lines")
    points = []
    for i in range(0, len(lines), 3):
        fields = [line.rstrip("\r").split("\t") for line in lines[i : i + 3]]
        for offset, (head, name) in enumerate(zip(fields, ("sequence", "query", "answer"))):
            if head[0] != name or len(head) < 2:
                raise ValueError(
                    f"{source}:{i + offset + 1}: expected '{name}<TAB>...', got {head[0]!r}"
                )
        vectors = []
        for cells in fields[0][1:]:
            if len(cells) != NUM_FEATURES or set(cells) - {"0", "1"}:
                raise ValueError(
                    f"{source}:{i + 1}: a vector is {NUM_FEATURES} '0'/'1' characters, "
                    f"got {cells[:40]!r}"
                )
            vectors.append([k for k, c in enumerate(cells) if c == "1"])
        words = fields[1][1].split()
        numbers = [w for w in words[3:] if w != "and"]
        if tuple(words[:3]) != QUERY_WORDS or not numbers or not all(w.isdigit() for w in numbers):
            raise ValueError(
                f"{source}:{i + 2}: expected 'have you seen N' or 'have you seen N and M', "
                f"got {fields[1][1]!r}"
            )
        if fields[2][1] not in ANSWERS:
            raise ValueError(f"{source}:{i + 3}: answer must be yes or no, got {fields[2][1]!r}")
        points.append(Datapoint(vectors, [int(w) for w in numbers], ANSWERS[fields[2][1]]))
    return points


def parse_vocab(text: str, source: str = "<text>") -> dict[int, list[tuple[int, int]]]:
    """q_vocab.txt: query id -> its (ordered) feature pairs."""
    vocab = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.rstrip("\r").split("\t")
        try:
            pairs = [tuple(int(f) for f in field.split()) for field in fields[1:]]
            query = int(fields[0])
        except ValueError:
            pairs, query = [], -1
        if not pairs or any(len(p) != 2 for p in pairs) or query < 0:
            raise ValueError(
                f"{source}:{number}: expected '<id><TAB><a> <b>[<TAB><c> <d>]', got {line[:40]!r}"
            )
        vocab[query] = pairs
    return vocab


# Their folder Task_N/<n>len/: our split -> their file names (training comes archived).
FOLDER_FILES = {
    "train": ("training.tsv", "training.tar.gz"),
    "validation": ("valid.tsv",),
    "test": ("test.tsv",),
}


def read_text(path: str | Path) -> str:
    """A .tsv file's text, or that of the one .tsv inside a .tar.gz (how they ship training
    data, about 22 MB unpacked at 5 vectors); ValueError for an archive without exactly one."""
    path = Path(path)
    if not path.name.endswith((".tar.gz", ".tgz")):
        return path.read_text()
    with tarfile.open(path, "r:gz") as archive:
        members = [m for m in archive.getmembers() if m.isfile() and m.name.endswith(".tsv")]
        if len(members) != 1:
            names = [m.name for m in members]
            raise ValueError(f"{path}: expected one .tsv file in the archive, got {names}")
        return archive.extractfile(members[0]).read().decode()


def folder_files(folder: str | Path) -> dict[str, Path]:
    """Their three files in `folder` (Task_N/<n>len/): {"train", "validation", "test"} ->
    path; ValueError naming the files when one is missing."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder")
    files = {}
    for split, names in FOLDER_FILES.items():
        found = [folder / name for name in names if (folder / name).is_file()]
        if not found:
            raise ValueError(f"{folder}: no {' or '.join(names)} in it")
        files[split] = found[0]
    return files


def find_vocab(test_path: str | Path) -> Path | None:
    """q_vocab.txt beside the test file or one folder up (their layout), else None."""
    folder = Path(test_path).parent
    for candidate in (folder / "q_vocab.txt", folder.parent / "q_vocab.txt"):
        if candidate.is_file():
            return candidate
    return None


def _where(vectors: list[list[int]], feature: int) -> list[int]:
    return [t for t, v in enumerate(vectors) if feature in v]


def _holds(vectors: list[list[int]], pair: tuple[int, ...], ordered: bool) -> bool:
    first, second = _where(vectors, pair[0]), _where(vectors, pair[1])
    if not first or not second:
        return False
    return min(first) < max(second) if ordered else True


def _permutation(theirs: list[int], ours: list[int]) -> list[int] | None:
    """perm[their feature] = our feature: slot i of `theirs` onto slot i of `ours`, the
    rest in increasing order; None when `theirs` repeats a feature."""
    if len(set(theirs)) != len(theirs):
        return None
    perm = dict(zip(theirs, ours))
    rest = iter(f for f in range(NUM_FEATURES) if f not in set(ours))
    return [perm[f] if f in perm else next(rest) for f in range(NUM_FEATURES)]


def _decisive(vectors, clauses, rule) -> tuple[int, list[int], tuple[int, int] | None]:
    """(our answer, the features the paper mask points at, the decisive pair or None)."""
    features = [f for clause in clauses for f in clause]
    occurring = [f for f in features if _where(vectors, f)]
    if rule == "any":  # T1, T3: a yes points at the features that occur, as does a no
        return int(bool(occurring)), occurring, None
    if rule == "all":  # T2: one clause of two features, unordered
        return int(len(occurring) == len(features)), occurring, tuple(features)
    holding = [c for c in clauses if _holds(vectors, c, rule == "ordered")]
    if holding:
        return 1, [f for c in holding for f in c], holding[0]
    both = [c for c in clauses if all(_where(vectors, f) for f in c)]
    return 0, occurring, (both[0] if len(both) == 1 else None)


def _carriers(vectors, pair) -> tuple[int, int]:
    if pair is None:
        return -1, -1
    where = [_where(vectors, f) for f in pair]
    if any(len(w) != 1 for w in where) or where[0] == where[1]:
        return -1, -1
    first, second = sorted(w[0] for w in where)
    return first, second


def _direct_clauses(point: Datapoint, rule: str, where: str):
    """(query, vectors, clauses) of a T1/T2-style datapoint, whose query names the features
    themselves."""
    query, vectors = point.query, point.vectors
    size = 1 if rule == "any" else 2
    if len(query) != size or max(query) >= NUM_FEATURES:
        raise ValueError(f"{where}: expected {size} query feature(s) in 0-35, got {query}")
    clauses = [query] if rule == "all" else [[f] for f in query]
    return query, vectors, clauses


def _vocab_clauses(point: Datapoint, rule: str, table, ours, pairs_per_query: int, where, vocab):
    """(query, vectors, clauses) of a T3-T7 datapoint, whose query stands for the pairs of
    their vocabulary `table`; with `ours` (relabelling), its features renamed so that the
    pairs are our mapping's, and None when no renaming does that."""
    (q,) = point.query if len(point.query) == 1 else (-1,)
    if q not in table or q >= NUM_FEATURES or len(table[q]) != pairs_per_query:
        raise ValueError(
            f"{where}: query {point.query} is not a query of {vocab} with {pairs_per_query} pair(s)"
        )
    query, vectors, pairs = [q], point.vectors, table[q]
    if ours is not None:
        theirs = [f for pair in table[q] for f in pair]
        perm = _permutation(theirs, [f for pair in ours[q] for f in pair])
        if perm is None:
            return None
        vectors = [sorted(perm[f] for f in v) for v in point.vectors]
        pairs = ours[q]
    clauses = [list(pair) for pair in pairs]
    if rule == "any":
        clauses = [[f] for pair in pairs for f in pair]
    return query, vectors, clauses


def load_authors(
    path: str | Path,
    config: str | TaskConfig,
    vocab: str | Path | None = None,
    relabel: bool = True,
) -> tuple[FeatureBatch, dict]:
    """Their file at `path` as a FeatureBatch for `config` (a T1-T7 preset or config; its
    length must be the file's vector count), and what was read: {"path", "vocab",
    "datapoints", "instances", "left_out", "label_mismatches", "shared_queries"}. `vocab`:
    their q_vocab.txt for T3-T7, found by `find_vocab` when None. `relabel=False` keeps
    their features and reads the masks through their mapping, for a model trained on their
    files alone: then no datapoint is left out, and "shared_queries" lists the queries
    whose pairs share a feature (their T5/T7). ValueError for a file out of format, a
    missing vocabulary or a length that is not the config's."""
    cfg = resolve_config(config)
    if cfg.task_name not in TASKS:
        raise ValueError(f"the authors' files hold T1-T7; got a {cfg.task_name} config")
    kind, pairs_per_query, rule = TASKS[cfg.task_name]
    path = Path(path)
    points = parse_tsv(read_text(path), str(path))
    lengths = {len(p.vectors) for p in points}
    if lengths != {cfg.min_length} or cfg.max_length != cfg.min_length:
        raise ValueError(
            f"{path}: vectors per datapoint {sorted(lengths)}, the config has "
            f"{cfg.min_length}-{cfg.max_length}"
        )
    table, ours = None, None
    if kind == "vocab":
        vocab = Path(vocab) if vocab is not None else find_vocab(path)
        if vocab is None:
            raise ValueError(f"{path}: {cfg.task_name} needs q_vocab.txt (none beside it)")
        table = parse_vocab(vocab.read_text(), str(vocab))
        if relabel:  # only relabelling needs our mapping
            ours = fv.mapping(cfg.task_name, cfg.mapping_seed, pairs_per_query)
    kept, left_out, mismatches = [], 0, 0
    for number, point in enumerate(points):
        where = f"{path}:{3 * number + 2}"  # the datapoint's query line
        if kind == "direct":
            query, vectors, clauses = _direct_clauses(point, rule, where)
        else:
            read = _vocab_clauses(point, rule, table, ours, pairs_per_query, where, vocab)
            if read is None:  # no permutation of our features gives their pairs
                left_out += 1
                continue
            query, vectors, clauses = read
        answer, features, pair = _decisive(vectors, clauses, rule)
        mismatches += answer != point.answer
        kept.append((vectors, query, point.answer, features, pair))
    if not kept:
        raise ValueError(f"{path}: no datapoint can be relabelled onto our mapping")
    batch = make_batch(
        cfg.min_length,
        [
            (
                vectors,
                query,
                float(answer),
                [t for t, vector in enumerate(vectors) if set(vector) & set(features)],
                _carriers(vectors, pair),
            )
            for vectors, query, answer, features, pair in kept
        ],
    )
    info = {
        "path": str(path),
        "vocab": str(vocab) if table is not None else None,
        "datapoints": len(points),
        "instances": len(kept),
        "left_out": left_out,
        "label_mismatches": mismatches,
        "shared_queries": sorted(  # their T5/T7 queries whose two pairs share a feature
            q
            for q, pairs in (table or {}).items()
            if len(pairs) == 2 and len({f for pair in pairs for f in pair}) < 4
        ),
    }
    return batch, info
