"""validate's comparison of float outputs: the family bounds are float32's; a
narrower float type always gets a few of its own ulps (values worked by hand:
float16 has a 10-bit fraction, so its ulp at 1.0 is 2**-10)."""

from __future__ import annotations

import numpy as np

from tfl2tosa.validation import FLOAT_TOLERANCES, NARROW_FLOAT_ULPS, compare


def judge(expected: np.ndarray, actual: np.ndarray, family: str):
    return compare("out", expected, actual, lsb_tolerance=0,
                   float_bounds=FLOAT_TOLERANCES[family], family=family)


def ulps_above_one(dtype, count: int) -> np.ndarray:
    return np.array([1.0 + count * 2.0 ** -10], dtype=dtype)


def test_float16_transcendental_allows_a_few_of_its_ulps() -> None:
    one = np.array([1.0], np.float16)
    assert NARROW_FLOAT_ULPS == 4
    assert judge(one, ulps_above_one(np.float16, 1), "transcendental").within_tolerance
    assert judge(one, ulps_above_one(np.float16, 4), "transcendental").within_tolerance
    assert not judge(one, ulps_above_one(np.float16, 6), "transcendental").within_tolerance


def test_exact_family_stays_exact_in_float16() -> None:
    one = np.array([1.0], np.float16)
    assert not judge(one, ulps_above_one(np.float16, 1), "exact").within_tolerance


def test_float32_bounds_are_unchanged() -> None:
    # 2e-4 relative is beyond transcendental's rtol of 1e-4 in float32.
    one = np.array([1.0], np.float32)
    assert not judge(one, np.array([1.0002], np.float32), "transcendental").within_tolerance
    assert judge(one, np.array([1.00005], np.float32), "transcendental").within_tolerance
