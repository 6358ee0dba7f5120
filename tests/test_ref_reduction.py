"""Float REDUCE_MAX / REDUCE_MIN: signed zeros, NaN modes and infinities.

The kernel works on whole arrays; the TOSA 1.0 pseudocode (REDUCE_MAX.tosac,
REDUCE_MIN.tosac) folds `acc = apply_max_s(acc, v, nan_mode)` (or apply_min_s)
along the axis. Expected values here are worked out by hand from that fold, by a
literal element-by-element transcription of it (`spec_fold`), and by Arm's
reference model.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ref_tensor_ops import assert_same, run_arm, run_ours, t

NZ, PZ, NAN, INF = -0.0, 0.0, math.nan, math.inf


def bits(values: np.ndarray) -> list[tuple[bool, float]]:
    """Each value as (sign bit, magnitude or NaN) so -0.0 and +0.0 differ."""
    flat = np.asarray(values, np.float64).ravel()
    return [(bool(np.signbit(v)), float(v)) for v in flat]


def reduce_1d(op: str, values: list[float], element: str, nan_mode: str) -> np.ndarray:
    operand = t(np.array([values], np.float64), element)
    return run_ours(op, [operand], [((1, 1), element)], {"axis": 1, "nan_mode": nan_mode})[0]


def same(result: np.ndarray, expected: float) -> bool:
    value = float(np.asarray(result, np.float64).ravel()[0])
    if math.isnan(expected):
        return math.isnan(value)
    return value == expected and math.copysign(1, value) == math.copysign(1, expected)


# (values, REDUCE_MAX result, REDUCE_MIN result), the same for both NaN modes.
# max: `acc >= v ? acc : v` keeps the first of equal zeros; min: `acc < v ? acc : v`
# takes the new value on a tie, so the last zero wins.
ZERO_CASES = [
    ([NZ, PZ], NZ, PZ),
    ([PZ, NZ], PZ, NZ),
    ([-1.0, NZ, PZ, NZ], NZ, -1.0),
    ([-1.0, PZ, NZ, PZ], PZ, -1.0),
    ([1.0, NZ, PZ, NZ], 1.0, NZ),
    ([2.0, PZ, NZ, PZ], 2.0, PZ),
    ([1.0, PZ, NZ], 1.0, NZ),
    ([-2.0, NZ, -3.0], NZ, -3.0),
    ([NZ], NZ, NZ),
    ([-INF, INF], INF, -INF),
    ([-INF, -INF], -INF, -INF),
    ([INF], INF, INF),
]


@pytest.mark.parametrize("element", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("nan_mode", ["PROPAGATE", "IGNORE"])
@pytest.mark.parametrize("values, largest, smallest", ZERO_CASES)
def test_signed_zeros_and_infinities_follow_the_sequential_fold(values, largest, smallest,
                                                                 nan_mode, element):
    assert same(reduce_1d("REDUCE_MAX", values, element, nan_mode), largest)
    assert same(reduce_1d("REDUCE_MIN", values, element, nan_mode), smallest)


# (values, nan_mode, max, min): PROPAGATE returns NaN once any operand is NaN;
# IGNORE's compare_nan returns the operand that is not NaN (the fold starts from NaN).
NAN_CASES = [
    ([1.0, NAN, 3.0], "PROPAGATE", NAN, NAN),
    ([1.0, NAN, 3.0], "IGNORE", 3.0, 1.0),
    ([NAN, NAN], "PROPAGATE", NAN, NAN),
    ([NAN, NAN], "IGNORE", NAN, NAN),
    ([NAN, NZ, PZ], "IGNORE", NZ, PZ),
    ([PZ, NAN, NZ], "IGNORE", PZ, NZ),
    ([NAN, -INF], "IGNORE", -INF, -INF),
    ([INF, NAN], "PROPAGATE", NAN, NAN),
]


@pytest.mark.parametrize("element", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("values, nan_mode, largest, smallest", NAN_CASES)
def test_nan_modes_follow_the_sequential_fold(values, nan_mode, largest, smallest, element):
    assert same(reduce_1d("REDUCE_MAX", values, element, nan_mode), largest)
    assert same(reduce_1d("REDUCE_MIN", values, element, nan_mode), smallest)


def spec_fold(x: np.ndarray, axis: int, largest: bool, nan_mode: str) -> np.ndarray:
    """REDUCE_MAX/MIN transcribed from the pseudocode, one element at a time."""
    def step(a: float, b: float) -> float:
        if math.isnan(a) or math.isnan(b):           # compare_nan
            return math.nan if nan_mode == "PROPAGATE" else (b if math.isnan(a) else a)
        # The spec's comparisons as written: which of two equal zeros is kept matters.
        if largest:
            return a if a >= b else b  # noqa: FURB136 (apply_max_s)
        return a if a < b else b  # noqa: FURB136 (apply_min_s)

    moved = np.moveaxis(x.astype(np.float64), axis, -1)
    out = np.empty(moved.shape[:-1], np.float64)
    for index in np.ndindex(out.shape):
        acc = math.nan if nan_mode == "IGNORE" else (-math.inf if largest else math.inf)
        for value in moved[index]:
            acc = step(acc, float(value))
        out[index] = acc
    return np.expand_dims(out, axis)


SPECIALS = st.sampled_from([NZ, PZ, NAN, INF, -INF, 1.0, -1.0, 2.5])


@settings(max_examples=150, deadline=None)
@given(values=st.lists(SPECIALS, min_size=12, max_size=12), axis=st.integers(0, 2),
       op=st.sampled_from(["REDUCE_MAX", "REDUCE_MIN"]),
       nan_mode=st.sampled_from(["PROPAGATE", "IGNORE"]),
       element=st.sampled_from(["f32", "f16", "bf16"]))
def test_random_special_values_match_the_pseudocode_fold(values, axis, op, nan_mode, element):
    x = np.array(values, np.float64).reshape(2, 3, 2)
    operand = t(x, element)
    out_shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    ours = run_ours(op, [operand], [(out_shape, element)], {"axis": axis, "nan_mode": nan_mode})
    expected = spec_fold(operand[0], axis, op == "REDUCE_MAX", nan_mode)
    for mine, spec in zip(bits(ours[0]), bits(expected)):
        assert (math.isnan(mine[1]) and math.isnan(spec[1])) or mine == spec


ARM_CASES = [
    ([[NZ, PZ, -1.0], [PZ, NZ, -2.0]], 1),
    ([[NZ, PZ, -1.0], [PZ, NZ, -2.0]], 0),
    ([[-1.0, PZ, NZ, PZ], [1.0, NZ, PZ, NZ]], 1),
    ([[NAN, 2.0, -INF], [NAN, NAN, NAN]], 1),
    ([[NAN, NZ, PZ], [PZ, NAN, NZ]], 1),
    ([[INF, -INF, 5.0], [-INF, -INF, -INF]], 1),
]


@pytest.mark.parametrize("element", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("nan_mode", ["PROPAGATE", "IGNORE"])
@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("values, axis", ARM_CASES)
def test_matches_arm(values, axis, op, nan_mode, element):
    operand = t(np.array(values, np.float64), element)
    shape = operand[0].shape
    out_shape = shape[:axis] + (1,) + shape[axis + 1:]
    attrs = {"axis": axis, "nan_mode": nan_mode}
    assert_same(run_ours(op, [operand], [(out_shape, element)], attrs),
                run_arm(op, [operand], [(out_shape, element)], attrs))


def test_large_random_rows_match_arm():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 1000)).astype(np.float32)
    x[0, [5, 600]] = np.nan
    x[1] = np.abs(x[1]) * -1
    x[1, [10, 20]] = [NZ, PZ]
    x[2] = np.abs(x[2])
    x[2, [30, 900]] = [PZ, NZ]
    for op in ("REDUCE_MAX", "REDUCE_MIN"):
        for nan_mode in ("PROPAGATE", "IGNORE"):
            attrs = {"axis": 1, "nan_mode": nan_mode}
            operand = (x, "f32")
            assert_same(run_ours(op, [operand], [((4, 1), "f32")], attrs),
                        run_arm(op, [operand], [((4, 1), "f32")], attrs))
