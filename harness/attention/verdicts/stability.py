"""How stable a verdict is: the share of bootstrap resamples of the instances that give the
same word, and the flip margin (the fewest instances whose change changes the word).

    from harness.attention.verdicts.stability import verdict_stability
    out = verdict_stability(readings, rederive, streams)   # the pipeline's hook
    out["share"], out["reported_as"], out["flip_margin"]["reported_as"]

    # or against any word function: word_of(draw) -> word, draw = None for the sample itself
    out = stability(word_of, {"validation": 40, "test": 64})
    margin = flip_margin(word_of, {"validation": 40, "test": 64})

A draw is {stream: positions}: each stream's instances drawn with replacement, independently
per stream (the instance is the unit: its rows are not independent of each other, and each
stream is its own sample: validation chooses the dose, test reads it, ID checks it holds).
A word said on one sample is a finding only if most samples like it say it too: under
STABLE it is reported as unstable between the words it takes, never as one of them.

The flip margin asks how many instances stand between the word and another: a change
replaces one instance of a stream by a copy of another instance of the same stream (what a
bootstrap resample does, one position at a time). The exact fewest is a search over every set
of changes; this one is sound and bounded instead (docs/usage_analysis.md, "How stable a
verdict is"):

1. the bootstrap resamples that flip the word, nearest first (the number of instances a
   resample leaves out is the fewest changes that reach it: kept instances stay in place,
   extra copies fill the places of those left out), each shrunk by delta debugging
   (Zeller's ddmin, complement steps): revert chunks of the changes, halving the chunks
   while no revert keeps the word different, until every single revert gives the word
   back, so the change found is 1-minimal and the margin is *at most* its size;
2. where every stream is small (SINGLE_CHECK_MAX) and the budget allows, every one-instance
   change is tried: a margin of 1 is then found whenever it is 1, and a margin of 2 found
   above is exact.

Every word_of call counts against one budget (FLIP_BUDGET), reported with the margin.
Plain data in and out; nothing here measures or writes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# A word is said when at least 4 resamples in 5 give it back: under that, one sample in five
# or more like this one would say another word, a coin a reader would take for a finding.
STABLE = 0.8
# The floor: with 1000 resamples a share's Monte-Carlo standard error is at most
# sqrt(0.25 / 1000) = 0.016, so a share read as 0.8 is 0.8 within about +-0.03.
RESAMPLES = 1000
# The words an unstable verdict is said to be between: those at least 1 resample in 20 gives
# (fewer is the tail of the resampling, not a second reading); the sample's own always.
MAIN_WORD = 0.05
# word_of calls the flip margin may spend (each is one re-derivation of the verdict).
FLIP_BUDGET = 1000
# Every one-instance change of a stream of n instances is n * (n - 1) calls: tried only for
# streams up to this size, and only when the budget holds all of them.
SINGLE_CHECK_MAX = 128
# How many of the nearest flipping resamples are shrunk (the budget may stop it sooner).
CANDIDATES = 5
# The inner intervals' resamples per re-derivation: paired_gain costs about 1.2 ms at 200
# BCa resamples and 5.4 ms at the pipeline's 2000 (200 instances, this project's CPU), and a
# verdict reads a dozen gains or more, 1000 times over.
INNER_RESAMPLES = 200
# The stage's method: a stage made under another one is computed again (the stage's
# settings carry it; the rule version covers the verdict's code, not this module's).
METHOD = 2

Word = Any  # a verdict word (a string); anything comparable with == serves
Draw = Mapping[str, Sequence[int]]


@dataclass
class Resampled:
    """The bootstrap, run once for the share and the flip margin both."""

    word: Word
    words: list[Word]
    flips: list[tuple[dict[str, np.ndarray], Word]] = field(default_factory=list)  # (draw, word)
    seed: int = 0


def draws(sizes: Mapping[str, int], resamples: int, seed: int = 0):
    """Each resample: every stream's positions drawn with replacement, streams in sorted
    order from one generator (the same seed gives the same draws, whatever the dict order)."""
    rng = np.random.default_rng(seed)
    for _ in range(resamples):
        yield {
            stream: rng.integers(0, n, size=n) if n else np.zeros(0, dtype=int)
            for stream, n in sorted(sizes.items())
        }


def resample(
    word_of: Callable[[Draw | None], Word],
    sizes: Mapping[str, int],
    resamples: int = RESAMPLES,
    seed: int = 0,
    word: Word = None,
) -> Resampled:
    """The word of the sample (`word`, else word_of(None)) and of each resample, keeping
    the resamples that flip it."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    original = word_of(None) if word is None else word
    out = Resampled(original, [], seed=seed)
    for draw in draws(sizes, resamples, seed):
        w = word_of(draw)
        out.words.append(w)
        if w != original:
            out.flips.append((draw, w))
    return out


def main_words(word: Word, shares: Mapping[Word, float]) -> list[Word]:
    """The words an unstable verdict is between: those resamples take at least MAIN_WORD of
    the time, most taken first, the sample's own word always among them."""
    main = [w for w, s in shares.items() if s >= MAIN_WORD or w == word]
    if word not in main:  # no resample gave it back
        main.append(word)
    return sorted(main, key=lambda w: -shares.get(w, 0.0))


def unstable_as(word: Word, shares: Mapping[Word, float]) -> str:
    """ "unstable: w1 / w2 (0.62 / 0.35)": the main words (`main_words`) with their shares."""
    main = main_words(word, shares)
    said = " / ".join(str(w) for w in main)
    return f"unstable: {said} ({' / '.join(f'{shares.get(w, 0.0):.2f}' for w in main)})"


def stability(
    word_of: Callable[[Draw | None], Word],
    sizes: Mapping[str, int],
    resamples: int = RESAMPLES,
    seed: int = 0,
    held_fixed: Sequence[str] = (),
    resampled: Resampled | None = None,
) -> dict[str, Any]:
    """The share of `resamples` bootstrap resamples of the instances (`sizes`: {stream: n})
    giving the sample's word, every word taken with its share, and how to report it: the
    word when its share is STABLE or more, else "unstable: w1 / w2 (shares)". `resampled`:
    the bootstrap already run (`resample`, shared with `flip_margin`), in place of one here."""
    r = resampled or resample(word_of, sizes, resamples, seed)
    counts = Counter(r.words)
    shares = {w: c / len(r.words) for w, c in sorted(counts.items(), key=lambda kv: -kv[1])}
    share = shares.get(r.word, 0.0)
    stable = share >= STABLE
    return {
        "word": r.word,
        "share": share,
        "words": shares,
        "resamples": len(r.words),
        "seed": r.seed,
        "sizes": dict(sizes),
        "stable": stable,
        "threshold": STABLE,
        "reported_as": r.word if stable else unstable_as(r.word, shares),
        "held_fixed": list(held_fixed),
    }


class _Spent(Exception):
    """The flip margin's budget of word_of calls is spent."""


class _Counted:
    """word_of on a set of changes [(stream, position, copy)], each new set counted against
    the budget (a set already asked is answered from memory)."""

    def __init__(self, word_of, sizes: Mapping[str, int], budget: int):
        self.word_of, self.sizes, self.budget, self.calls = word_of, sizes, budget, 0
        self.seen: dict[tuple, Word] = {}

    def draw(self, changes) -> dict[str, np.ndarray]:
        out = {stream: np.arange(n) for stream, n in sorted(self.sizes.items())}
        for stream, position, copy in changes:
            out[stream][position] = copy
        return out

    def word(self, changes) -> Word:
        key = tuple(sorted(changes))
        if key not in self.seen:
            if self.calls >= self.budget:
                raise _Spent
            self.calls += 1
            self.seen[key] = self.word_of(self.draw(changes))
        return self.seen[key]


def as_changes(draw: Mapping[str, Sequence[int]]) -> list[tuple[str, int, int]]:
    """The fewest changes reaching the draw's multiset of instances: each drawn instance
    keeps its own place once, the extra copies fill the places of the instances left out
    (a resample is a multiset: the order of its positions does not matter)."""
    changes = []
    for stream in sorted(draw):
        drawn = np.asarray(draw[stream], dtype=int)
        counts = np.bincount(drawn, minlength=len(drawn))
        extra = np.repeat(np.arange(len(counts)), np.maximum(counts - 1, 0))
        missing = np.flatnonzero(counts == 0)
        changes += [(stream, int(p), int(c)) for p, c in zip(missing, extra)]
    return changes


def positional(draw: Mapping[str, Sequence[int]]) -> list[tuple[str, int, int]]:
    """The draw's changes position by position (exactly what word_of was given)."""
    return [
        (stream, p, int(c)) for stream in sorted(draw) for p, c in enumerate(draw[stream]) if c != p
    ]


def ddmin(counted: _Counted, original: Word, changes: list) -> tuple[list, bool]:
    """Shrink a set of changes that flips the word, keeping it flipped (Zeller's ddmin,
    complement steps): revert one of g chunks of the changes; where none can be reverted,
    split finer. Returns (changes, 1-minimal): minimal once no single change can be
    reverted; not when the budget ran out first (the changes then still flip the word)."""
    g = 2
    try:
        while len(changes) > 1:
            size = -(-len(changes) // g)
            for start in range(0, len(changes), size):
                rest = changes[:start] + changes[start + size :]
                if counted.word(rest) != original:
                    changes, g = rest, max(g - 1, 2)
                    break
            else:
                if size == 1:
                    break
                g = min(2 * g, len(changes))
    except _Spent:
        return changes, False
    return changes, True


def single_change(counted: _Counted, original: Word) -> list | None:
    """The first one-instance change that flips the word ([(stream, position, copy)]), or
    None when none does (every stream's n * (n - 1) changes tried)."""
    for stream, n in sorted(counted.sizes.items()):
        for position in range(n):
            for copy in range(n):
                change = [(stream, position, copy)]
                if copy != position and counted.word(change) != original:
                    return change
    return None


def single_cost(sizes: Mapping[str, int]) -> int | None:
    """word_of calls the one-instance check needs; None when a stream is too large."""
    if any(n > SINGLE_CHECK_MAX for n in sizes.values()):
        return None
    return sum(n * (n - 1) for n in sizes.values())


def _aligned(counted: _Counted, original: Word, draw) -> list:
    """The draw as its fewest changes, unless word_of depends on the order of the positions
    (then the changes position by position, whose word the resample gave)."""
    changes = as_changes(draw)
    try:
        if counted.word(changes) != original:
            return changes
    except _Spent:
        pass
    return positional(draw)


def shrunk(counted: _Counted, original: Word, flips) -> tuple[list | None, bool, int]:
    """The smallest change found by shrinking the nearest flipping resamples (at most
    CANDIDATES, while the budget lasts): (changes, 1-minimal, how many were shrunk)."""
    nearest = sorted(flips, key=lambda d: len(as_changes(d)))[:CANDIDATES]
    best, minimal, searched = None, False, 0
    for draw in nearest:
        if best is not None and (len(best) == 1 or counted.calls >= counted.budget):
            break
        changes, done = ddmin(counted, original, _aligned(counted, original, draw))
        searched += 1
        if best is None or (len(changes), not done) < (len(best), not minimal):
            best, minimal = changes, done
    return best, minimal, searched


def _said(margin: int | None, exact: bool, resamples: int, checked: bool) -> str:
    if margin is None:
        single = "; no one-instance change changes it" if checked else ""
        return f"none found in {resamples} resamples{single}"
    noun = "instance" if margin == 1 else "instances"
    return f"{'exactly' if exact else 'at most'} {margin} {noun}"


def flip_margin(
    word_of: Callable[[Draw | None], Word],
    sizes: Mapping[str, int],
    resamples: int = RESAMPLES,
    seed: int = 0,
    budget: int = FLIP_BUDGET,
    resampled: Resampled | None = None,
) -> dict[str, Any]:
    """The fewest instances whose change changes the word, as far as a search of `budget`
    word_of calls finds (the module's docstring: the flipping resamples shrunk, then every
    one-instance change where the streams are small): "at most k instances" with the
    changes, "exactly" where the one-instance check or k = 1 makes it so, or "none found
    in R resamples". The resamples' own calls are not counted in the budget."""
    r = resampled or resample(word_of, sizes, resamples, seed)
    cost = single_cost(sizes)
    counted = _Counted(word_of, sizes, budget)
    for draw, w in r.flips:
        counted.seen[tuple(sorted(positional(draw)))] = w
    # the one-instance check, when it fits, keeps its share of the budget
    fits = cost is not None and cost <= budget
    counted.budget = budget - (cost if fits else 0)
    flips = [draw for draw, _ in r.flips]
    best, minimal, searched = shrunk(counted, r.word, flips) if flips else (None, False, 0)
    counted.budget = budget
    checked = False
    if fits and (best is None or len(best) > 1):
        single, checked = single_change(counted, r.word), True
        if single:
            best, minimal = single, True
    at_least = 2 if checked and (best is None or len(best) > 1) else 1
    margin = None if best is None else len(best)
    exact = margin is not None and margin == at_least
    return {
        "margin": margin,
        "exact": exact,
        "at_least": at_least,
        "reported_as": _said(margin, exact, len(r.words), checked),
        "changes": [{"stream": s, "position": p, "copy_of": c} for s, p, c in sorted(best or [])],
        "to": None if best is None else counted.seen.get(tuple(sorted(best))),
        "minimal": minimal,
        "flipping": len(r.flips),
        "shrunk": searched,
        "single_checked": checked,
        "calls": counted.calls,
        "budget": budget,
        "resamples": len(r.words),
        "seed": r.seed,
    }


def verdict_stability(
    readings: Any,
    rederive: Callable[..., Mapping[str, Any]],
    streams: Callable[[Any], Mapping[str, int]],
    resamples: int = RESAMPLES,
    seed: int = 0,
    stats: Mapping[str, Any] | None = None,
    budget: int = FLIP_BUDGET,
    held_fixed: Sequence[str] = (),
    rechosen: Sequence[str] = (),
) -> dict[str, Any]:
    """A verdict's stability and flip margin, from the readings it was derived from:
    `rederive(readings, draw, stats)` gives the verdict on a draw of the instances of each of
    `streams(readings)` ({stream: n}), its inner intervals at `stats` (INNER_RESAMPLES
    unless given: cheaper than the pipeline's). The word is the verdict on the readings as
    recorded (the pipeline's intervals). `held_fixed` and `rechosen`: what `rederive` holds
    fixed and chooses again on a resample (it alone knows: `verdicts.readings` records
    both), said with the word."""
    stats = dict(stats) if stats is not None else {"n_resamples": INNER_RESAMPLES}
    sizes = dict(streams(readings))

    def word_of(draw):
        return rederive(readings, draw, stats)["verdict"]

    word = rederive(readings, None)["verdict"]
    r = resample(word_of, sizes, resamples, seed, word=word)
    out = stability(word_of, sizes, held_fixed=held_fixed, resampled=r)
    out["rechosen"] = list(rechosen)
    out["inner"] = stats
    inner_word = word_of(None)
    if inner_word != word:  # the sample read at the inner intervals says another word
        out["word_at_inner"] = inner_word
    out["flip_margin"] = flip_margin(word_of, sizes, budget=budget, resampled=r)
    return out
