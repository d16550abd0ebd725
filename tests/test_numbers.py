"""One strict reader for numbers from outside: ASCII digits within bounds, nothing else."""

from __future__ import annotations

import pytest

from digest.numbers import MAX_DIGITS, whole

HOSTILE = ["", " ", "²", "٣", "𝟓", "５", "+5", "-5", "5.0", "1e3", "1_000", "0x10", "5 5", "\x00", "5\n6",
           "9" * (MAX_DIGITS + 1), "١٢", "Ⅴ", None, 5, b"5", ["5"]]


@pytest.mark.parametrize("text", HOSTILE)
def test_anything_but_ascii_digits_is_no_number(text):
    assert whole(text) is None


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("5", 5), (" 42 ", 42), ("007", 7), ("9" * MAX_DIGITS,
                                                                                           int("9" * MAX_DIGITS))])
def test_ascii_digits_are_read(text, value):
    assert whole(text) == value


def test_bounds_hold_at_both_ends():
    assert whole("1", low=1, high=3) == 1 and whole("3", low=1, high=3) == 3
    assert whole("0", low=1, high=3) is None and whole("4", low=1, high=3) is None
