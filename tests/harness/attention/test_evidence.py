"""What counts as a followed push at one dose: a following gain of at least POINTER_EXCESS on
at least MIN_POINTER_ROWS rows, nothing without a dose; the vocabulary lists the same
thresholds."""

from harness.attention.evidence import MIN_POINTER_ROWS, POINTER_EXCESS, followed
from harness.attention.verdicts import vocabulary


def pointer(gain, rows=MIN_POINTER_ROWS):
    return {"following": {"gain": {"gain": gain}, "rows": rows}}


def test_a_push_is_followed_at_the_threshold_on_enough_rows():
    pushes = {
        "-3": pointer(POINTER_EXCESS),  # at the threshold: followed
        "+3": pointer(POINTER_EXCESS - 0.01),  # under it
        "+4": pointer(0.9, rows=MIN_POINTER_ROWS - 1),  # too few rows
        "+5": pointer(float("nan")),  # not measured
    }
    assert followed(pushes) == {"-3": POINTER_EXCESS}
    assert followed(None) == {} and followed({}) == {}


def test_the_vocabulary_lists_the_same_thresholds():
    assert vocabulary.POINTER_EXCESS is POINTER_EXCESS
    assert vocabulary.MIN_POINTER_ROWS is MIN_POINTER_ROWS
