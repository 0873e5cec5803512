"""The pointer and restore controls' settings, pointer following and the answer at the
reference (`harness.attention.controls.following`), on inputs whose answers are known
exactly."""

import pytest

from attentionspan_datasets import generate
from attentionspan_datasets.tasks.base import Instance
from harness.attention import controls
from harness.attention.controls import following
from harness.attention.sweep import BASELINE, Setting


def reversal(chars: str, index: int) -> Instance:
    n = len(chars)
    target = chars[::-1]
    return Instance(
        "string_reversal", chars + "=", target, [[n - 1 - i] for i in range(n)], {}, "", index
    )


def test_pointer_settings_move_the_chosen_cells():
    chosen = Setting(heads="top", n=4, strength=2.0)
    shifted = controls.pointer_settings(chosen)
    assert [s.shift for s in shifted] == [-3, 3]
    assert all((s.heads, s.n, s.strength) == ("top", 4, 2.0) for s in shifted)
    assert controls.pointer_settings(BASELINE) == []
    with pytest.raises(ValueError, match="non-zero"):
        controls.pointer_settings(chosen, shifts=(0,))


def test_restore_setting_keeps_the_heads():
    restore = controls.restore_setting(Setting(heads="top", n=4, strength=2.0))
    assert (restore.heads, restore.n, restore.mode) == ("top", 4, "restore")
    assert restore.name == "top4-restore"
    assert controls.restore_setting(BASELINE) is None


def test_pointed_rows_skip_rows_where_the_pointer_agrees_with_the_answer():
    x = reversal("abcb", 0)  # target "bcba"; row i references key 3 - i
    # shift +1: row 0 -> key 4 ("=", after the query at key 4? the query of row 0 is key 4:
    # allowed), row 1 -> key 3 "b" (gold "c"), row 2 -> key 2 "c" (gold "b"),
    # row 3 -> key 1 "b" (gold "a")
    assert following._pointed_rows(x, 1) == [(0, "="), (1, "b"), (2, "c"), (3, "b")]
    # shift -1: row 0 -> key 2 "c" (gold "b"), row 1 -> key 1 "b" (gold "c"),
    # row 2 -> key 0 "a" (gold "b"), row 3 -> key -1: outside
    assert following._pointed_rows(x, -1) == [(0, "c"), (1, "b"), (2, "a")]
    y = reversal("aaaa", 1)  # every pointed-at character equals the answer: nothing to tell
    assert following._pointed_rows(y, -1) == []


def test_pointer_following_counts_rows_and_instances():
    xs = [reversal("abcd", 0), reversal("wxyz", 1)]
    # shift -1, instance 0: rows (0,"c"), (1,"b"), (2,"a"); instance 1: (0,"y"), (1,"x"), (2,"w")
    records = [
        {"index": 0, "prediction": "cba"},  # follows all three
        {"index": 1, "prediction": "zy"},  # gold on row 0, misses row 1's "x" ("y"), row 2 absent
    ]
    baseline = [{"index": 0, "prediction": "dcba"}, {"index": 1, "prediction": "zyxw"}]
    out = controls.pointer_following(xs, records, -1, baseline)
    assert out["tokens"] == 6 and out["instances"] == 2
    assert out["rate"] == pytest.approx(3 / 6)
    assert out["instance_rate"] == pytest.approx((1.0 + 0.0) / 2)
    assert out["baseline_rate"] == 0.0
    assert out["excess"] == pytest.approx(0.5)


def test_pointer_following_without_eligible_rows_is_none():
    x = generate("addition_id", seed=0, index=3)  # two operand digits per row
    x.index = 0
    out = controls.pointer_following([x], [{"index": 0, "prediction": x.target}], 3)
    if all(len(row) != 1 for row in x.reference):
        assert out["rate"] is None and out["tokens"] == 0


def test_pointer_following_rejects_unknown_records():
    with pytest.raises(ValueError, match="not among the instances"):
        controls.pointer_following([reversal("ab", 0)], [{"index": 5, "prediction": ""}], 1)


def test_answer_at_reference_is_one_on_reversal_and_low_on_addition():
    xs = [generate("reversal_ood", seed=0, index=i) for i in range(20)]
    assert controls.answer_at_reference(xs) == 1.0
    sums = [generate("addition_ood", seed=0, index=i) for i in range(50)]
    assert controls.answer_at_reference(sums) < 0.5
    assert controls.answer_at_reference([]) is None


def test_restore_levels_come_from_the_ranking_profile():
    from harness.attention.heads import HeadRanking

    ranking = HeadRanking(
        scores=[[3.0, 1.0]],
        per_row=[[0.75, 0.25]],
        order=[(0, 0), (0, 1)],
        offsets={"0": [[0.75, 0.25]], "1": [[0.1, 0.9]]},
        rows=4,
    )
    assert controls.restore_levels(ranking, 0).tolist() == [[0.75, 0.25]]
    assert controls.restore_levels(ranking, 1).tolist() == [
        [pytest.approx(0.1), pytest.approx(0.9)]
    ]
    with pytest.raises(ValueError, match="no ID level at ref\\+3"):
        controls.restore_levels(ranking, 3)
