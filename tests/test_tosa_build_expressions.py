"""The expression builder (`build.Elementwise`) judged by Arm's reference model.

Each case builds a small graph, runs its `.tosa` file on Arm's model and
compares with values worked out from the definitions: std::round (half away
from zero) in exact rational arithmetic, gemmlowp's RoundingDivideByPOT on
Python integers, broadcasting as numpy defines it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from arm import run_arm
from tfl2tosa.errors import IRError
from tfl2tosa.ir import Builder, Graph, Module, TensorType, Value
from tfl2tosa.ir.types import DYNAMIC, f16, f32, i8, i32
from tfl2tosa.tosa import build as tb
from tfl2tosa.tosa.verify import verify
from tfl2tosa.tosa.writer import write_tosa


def _on_arm(shape: tuple[int, ...], element, feed: np.ndarray, make) -> np.ndarray:
    """make(e, x) builds the expression of one input x; its value on Arm's model."""
    graph = Graph("main")
    x = graph.add_input("x", TensorType(shape, element))
    e = tb.Elementwise(Builder(graph, loc="test"), len(shape))
    y = make(e, x)
    graph.set_outputs([y])
    module = Module()
    module.add_graph(graph)
    assert verify(module) == []
    dtype = np.dtype(feed.dtype if y.type.element == element else np.int32)
    outcome = run_arm(write_tosa(module), [feed], [dtype])
    assert outcome.status == "valid", outcome
    return outcome.outputs[0]


def _std_round(x: float) -> float:
    """std::round exactly: floor(|x| + 1/2) with x's sign, in rationals."""
    if not math.isfinite(x):
        return x
    magnitude = math.floor(Fraction(abs(x)) + Fraction(1, 2))
    return float(-magnitude if x < 0 else magnitude)


_BELOW_HALF = float(np.nextafter(np.float32(0.5), np.float32(0)))  # 0.49999997
_ROUNDING_F32 = np.array(
    [0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, _BELOW_HALF, -_BELOW_HALF, 1 - 2 ** -24,
     2 ** 23 - 0.5, -(2 ** 23 - 0.5), 2 ** 23 + 1, 1e30, -1e30, 1e-30, -1e-30, 0.7, -0.7,
     3.4e38, np.inf, -np.inf, np.nan], dtype=np.float32)


def _with_random(values: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scale = 2.0 ** rng.integers(-4, 12, 200)
    halves = rng.integers(-4000, 4000, 56) + 0.5  # exact ties
    extra = np.concatenate([rng.uniform(-1, 1, 200) * scale, halves])
    return np.concatenate([values, extra]).astype(values.dtype)


@pytest.mark.parametrize("element, dtype", [(f32, np.float32), (f16, np.float16)],
                         ids=["f32", "f16"])
def test_round_half_away_is_std_round(element, dtype):
    values = _ROUNDING_F32 if dtype == np.float32 else _ROUNDING_F32[
        np.abs(_ROUNDING_F32) < 6e4].astype(np.float16)
    feed = _with_random(values, 1)
    got = _on_arm(feed.shape, element, feed, lambda e, x: e.round_half_away(x))
    expected = np.array([_std_round(float(v)) for v in feed], dtype=dtype)
    np.testing.assert_array_equal(got, expected)
    # Zero results are +0 (0 - 0 rounds to +0), where std::round keeps -0.
    assert not np.signbit(got[(got == 0)]).any()


def test_round_half_away_non_negative_is_std_round_on_its_domain():
    values = _ROUNDING_F32[~np.signbit(_ROUNDING_F32) & np.isfinite(_ROUNDING_F32)]
    feed = np.abs(_with_random(values, 2))
    got = _on_arm(feed.shape, f32, feed, lambda e, x: e.round_half_away_non_negative(x))
    np.testing.assert_array_equal(got, [_std_round(float(v)) for v in feed])


def _rounding_divide_by_pot(x: int, exponent: int) -> int:
    """gemmlowp RoundingDivideByPOT: x / 2^exponent, ties away from zero."""
    magnitude = (abs(x) + (1 << (exponent - 1))) >> exponent
    return -magnitude if x < 0 else magnitude


@pytest.mark.parametrize("exponent", [1, 15, 30, 31])
def test_shift_right_half_away_is_rounding_divide_by_pot(exponent):
    rng = np.random.default_rng(exponent)
    tie = 1 << (exponent - 1)
    edges = [0, 1, -1, tie, -tie, 3 * tie, -3 * tie, tie - 1, -tie + 1, tie + 1, -tie - 1,
             2 ** 31 - 1, -(2 ** 31) + 1]
    values = np.concatenate([np.array(edges, dtype=np.int64),
                             rng.integers(-(2 ** 31) + 1, 2 ** 31, 200)])
    values = values[(values > -(2 ** 31)) & (values < 2 ** 31)].astype(np.int32)
    got = _on_arm(values.shape, i32, values,
                  lambda e, x: e.shift_right_half_away(x, exponent))
    np.testing.assert_array_equal(got, [_rounding_divide_by_pot(int(v), exponent)
                                        for v in values])


def test_saturate_and_integer_constants():
    values = np.array([-(2 ** 31), -70000, -32769, -32768, 0, 32767, 32768, 2 ** 31 - 1],
                      dtype=np.int32)
    got = _on_arm(values.shape, i32, values,
                  lambda e, x: e.saturate(e.binary("tosa.add", x, 0), -32768, 32767))
    np.testing.assert_array_equal(got, np.clip(values, -32768, 32767))


def test_broadcast_shape():
    assert tb.broadcast_shape((2, 1, 3), (4, 1)) == (2, 4, 3)
    assert tb.broadcast_shape((5,), ()) == (5,)
    assert tb.broadcast_shape((DYNAMIC, 3), (1, 1)) == (DYNAMIC, 3)
    assert tb.broadcast_shape((DYNAMIC, 1), (4, 3)) == (DYNAMIC, 3)  # only the run time knows
    assert tb.broadcast_shape((0, 3), (1, 3)) == (0, 3)
    with pytest.raises(IRError, match="do not broadcast"):
        tb.broadcast_shape((2, 3), (3, 2))
    with pytest.raises(IRError, match="do not broadcast"):
        tb.broadcast_shape((DYNAMIC, 2), (3, 4))


def test_operands_constants_and_result_types():
    graph = Graph("main")
    b = Builder(graph, loc="test")
    x = graph.add_input("x", TensorType((2, 3), i8))
    row = graph.add_input("row", TensorType((3,), f32))
    e = tb.Elementwise(b, 2)
    aligned = e.operand(row)
    assert aligned.type == TensorType((1, 3), f32) and aligned.owner.name == "tosa.reshape"
    folded = e.operand(tb.const(b, np.arange(3, dtype=np.float32)))
    assert folded.type.shape == (1, 3) and folded.owner.name == "tosa.const"
    assert e.const(7, i32).owner.attrs["values"].tolist() == [[7]]
    channels = e.per_axis((1, 2, 3), 1, f32)
    assert channels.owner.attrs["values"].tolist() == [[1.0, 2.0, 3.0]]
    assert e.per_axis((0.25,), None, f32).type.shape == (1, 1)
    assert e.mul(e.cast(x, i32), e.const(3, i32)).type == TensorType((2, 3), i32)
    assert e.greater(aligned, e.like(0.0, aligned)).type == TensorType((1, 3), tb.i1)
    assert isinstance(e.binary("tosa.sub", aligned, 1.0).owner.operands[1], Value)
