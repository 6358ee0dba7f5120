"""Reference-model kernels against values worked out by hand from the TOSA 1.0 pseudocode.

Each case cites the rule it checks. The differential test (test_ref_vs_arm.py)
compares the same kernels with Arm's reference model on random graphs; these
cases pin the corners by hand: overflow REQUIREs, rounding, zero points, NaN
modes, signed zeros.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import reference_model
from tfl2tosa.errors import ReferenceModelError, SpecErrorIf, SpecRequire
from tfl2tosa.ir import Graph, Op, ShapeType, TensorType, scalar_type
from tfl2tosa.ir.types import numpy_dtype

ELEMENT_OF_DTYPE = {
    np.dtype(np.bool_): "i1", np.dtype(np.int8): "i8", np.dtype(np.int16): "i16",
    np.dtype(np.int32): "i32", np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
    np.dtype(ml_dtypes.bfloat16): "bf16",
}


def tensor_type(array: np.ndarray, element: str | None = None) -> TensorType:
    return TensorType(array.shape, scalar_type(element or ELEMENT_OF_DTYPE[array.dtype]))


def run_op(name: str, inputs: list, out: list[tuple[tuple[int, ...], str]] | tuple, *,
           attrs: dict | None = None, shapes: dict[int, list[int]] | None = None) -> list:
    """Run one op. `inputs` are arrays (graph inputs); `shapes` puts a CONST_SHAPE
    operand at the given operand positions; `out` lists (shape, element) per result."""
    graph = Graph("main")
    shapes = shapes or {}
    arrays = [np.asarray(a) for a in inputs]
    operands, feeds = [], []
    array_iter = iter(arrays)
    for position in range(len(arrays) + len(shapes)):
        if position in shapes:
            values = shapes[position]
            const = graph.append(Op("tosa.const_shape", [], [ShapeType(len(values))],
                                    {"values": values}))
            operands.append(const.result)
        else:
            array = next(array_iter)
            operands.append(graph.add_input(f"in{position}", tensor_type(array)))
            feeds.append(array)
    outs = [out] if isinstance(out, tuple) else out
    op = graph.append(Op(name, operands, [TensorType(s, scalar_type(e)) for s, e in outs],
                         attrs or {}, loc="test.py:1"))
    graph.set_outputs(op.results)
    return list(reference_model.run(graph, feeds).values())


def i32(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int32)


def one(name: str, inputs: list, shape: tuple[int, ...], element: str, **kw) -> np.ndarray:
    return run_op(name, inputs, (shape, element), **kw)[0]


# --- elementwise binary ---------------------------------------------------------------

def test_add_i32_broadcasts_equal_rank_operands():
    a = np.array([[1], [2]], dtype=np.int32)
    b = np.array([[10, 20, 30]], dtype=np.int32)
    np.testing.assert_array_equal(one("tosa.add", [a, b], (2, 3), "i32"),
                                  [[11, 21, 31], [12, 22, 32]])


def test_add_i32_overflow_is_a_require_failure():
    # apply_add_s: REQUIRE(c >= minimum_s && c <= maximum_s).
    with pytest.raises(SpecRequire, match="ADD"):
        one("tosa.add", [i32(2**31 - 1), i32(1)], (1,), "i32")


def test_add_of_different_ranks_is_an_error_if():
    # broadcast_shape: ERROR_IF(rank(shape1) != rank(shape2)).
    with pytest.raises(SpecErrorIf, match="rank"):
        one("tosa.add", [np.zeros((2, 3), np.int32), i32(1, 2, 3)], (2, 3), "i32")


def test_sub_i32_underflow_is_a_require_failure():
    with pytest.raises(SpecRequire):
        one("tosa.sub", [i32(-2**31), i32(1)], (1,), "i32")


_INT32_CORNERS = [-2**31, -2**31 + 1, -2**30, -1, 0, 1, 2**30, 2**31 - 2, 2**31 - 1]


@pytest.mark.parametrize("name, fn", [("tosa.add", lambda x, y: x + y),
                                      ("tosa.sub", lambda x, y: x - y)])
def test_add_sub_i32_overflow_by_every_pair_of_corner_values(name, fn):
    # apply_add_s / apply_sub_s: the exact result, REQUIRE it fits int32.
    for x in _INT32_CORNERS:
        for y in _INT32_CORNERS:
            exact = fn(x, y)
            if -2**31 <= exact <= 2**31 - 1:
                assert one(name, [i32(x), i32(y)], (1,), "i32").tolist() == [exact], (x, y)
            else:
                with pytest.raises(SpecRequire, match="apply_"):
                    one(name, [i32(x), i32(y)], (1,), "i32")


def test_add_sub_i32_broadcast_both_ways():
    a = np.array([[2**31 - 10], [-5]], np.int32)
    b = np.array([[3, -7, 9]], np.int32)
    assert one("tosa.add", [a, b], (2, 3), "i32").tolist() == [
        [2**31 - 7, 2**31 - 17, 2**31 - 1], [-2, -12, 4]]
    assert one("tosa.sub", [a, b], (2, 3), "i32").tolist() == [
        [2**31 - 13, 2**31 - 3, 2**31 - 19], [-8, 2, -14]]
    with pytest.raises(SpecRequire):  # 2^31 - 10 + 10 overflows in one element
        one("tosa.add", [a, np.array([[3, 10, 9]], np.int32)], (2, 3), "i32")


def test_add_f16_rounds_ties_to_even():
    # 2049 and 2051 lie halfway between fp16 neighbours (spacing 2 above 2048).
    a = np.array([2048, 2050], dtype=np.float16)
    b = np.array([1, 1], dtype=np.float16)
    np.testing.assert_array_equal(one("tosa.add", [a, b], (2,), "f16"), [2048, 2052])


def test_add_bf16_rounds_ties_to_even():
    # bf16 has 8 significant bits: 257 is halfway between 256 and 258.
    a = np.array([256, 258], dtype=ml_dtypes.bfloat16)
    b = np.array([1, 1], dtype=ml_dtypes.bfloat16)
    result = one("tosa.add", [a, b], (2,), "bf16")
    np.testing.assert_array_equal(result.astype(np.float32), [256, 260])


@pytest.mark.parametrize("a,b,shift,expected", [
    (-128, -128, 0, 16384),                  # i8 x i8 -> i32, no shift
    (65536, 65536, 0, 0),                    # i32, shift 0: low 32 bits of 2^32
    (2**30, 3, 31, 2),                       # (3*2^30 + 2^30) >> 31
    (-(2**31), -(2**31), 63, 1),             # (2^62 + 2^62) >> 63: the round needs 64 bits
    (-5, 1, 1, -2),                          # (-5 + 1) >> 1, arithmetic shift
])
def test_mul_matches_the_pseudocode(a, b, shift, expected):
    dtype = np.int8 if shift == 0 and abs(a) <= 128 and abs(b) <= 128 else np.int32
    x, y = np.array([a], dtype), np.array([b], dtype)
    result = one("tosa.mul", [x, y, np.array([shift], np.int8)], (1,), "i32")
    assert result.tolist() == [expected]


def test_mul_rounded_product_out_of_range_is_a_require_failure():
    with pytest.raises(SpecRequire):
        one("tosa.mul", [i32(2**31 - 1), i32(2**31 - 1), np.array([1], np.int8)], (1,), "i32")


def test_mul_shift_on_i8_inputs_is_a_require_failure():
    # REQUIRE(is_same<in_t,int32_t>() || shift == 0)
    with pytest.raises(SpecRequire, match="shift"):
        one("tosa.mul", [np.int8([3]), np.int8([4]), np.int8([2])], (1,), "i32")


def run_with_constants(name: str, inputs: list, constant: set[int],
                       out: tuple[tuple[int, ...], str], attrs: dict | None = None
                       ) -> np.ndarray:
    """Run one op with the operands at `constant` positions as tosa.const ops (what a
    converted model has, and what the plan's prepared kernels decode once)."""
    graph = Graph("main")
    operands, feeds = [], []
    for position, array in enumerate(np.asarray(a) for a in inputs):
        if position in constant:
            operands.append(graph.append(Op("tosa.const", [], [tensor_type(array)],
                                            {"values": array})).result)
        else:
            operands.append(graph.add_input(f"in{position}", tensor_type(array)))
            feeds.append(array)
    op = graph.append(Op(name, operands, [TensorType(out[0], scalar_type(out[1]))],
                         attrs or {}, loc="test.py:1"))
    graph.set_outputs(op.results)
    return list(reference_model.run(graph, feeds).values())[0]


def _shifted_product(a: int, b: int, shift: int) -> int:
    """MUL's pseudocode for int32 with a shift: round half up, then shift (Python ints)."""
    if shift == 0:
        return (a * b + 2**31) % 2**32 - 2**31
    return (a * b + (1 << (shift - 1))) >> shift


@pytest.mark.parametrize("shift", [0, 1, 15, 31, 40, 62, 63])
def test_mul_i32_by_a_constant_shift(shift):
    # Magnitudes below 2^((31 + shift) / 2 - 1) keep every shifted product inside int32
    # (shift 0 wraps, so any values); row 0 holds the type's extremes where they fit.
    rng = np.random.default_rng(shift)
    limit = 2**31 if shift in (0, 62, 63) else 2**((31 + shift) // 2 - 1)
    a = rng.integers(-limit, limit, size=(3, 4)).astype(np.int32)
    b = rng.integers(-limit, limit, size=(1, 4)).astype(np.int32)
    if limit == 2**31:
        a[0, :2] = b[0, :2] = [-2**31, 2**31 - 1]
    expected = [[_shifted_product(int(x), int(y), shift) for x, y in zip(row, b[0])]
                for row in a]
    result = run_with_constants("tosa.mul", [a, b, np.int8([shift])], {2}, ((3, 4), "i32"))
    assert result.dtype == np.int32 and result.tolist() == expected


@pytest.mark.parametrize("shift", [1, 31])
def test_mul_i32_constant_shift_result_out_of_range_is_a_require_failure(shift):
    # (-2^31)^2 >> 31 = 2^31 does not fit int32, nor (2^31 - 1)^2 >> 1.
    a = i32(3, -2**31, 2**31 - 1)
    with pytest.raises(SpecRequire, match="MUL"):
        run_with_constants("tosa.mul", [a, a, np.int8([shift])], {2}, ((3,), "i32"))


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_mul_narrow_by_a_constant_zero_shift(dtype):
    info = np.iinfo(dtype)
    a = np.array([info.min, info.min, info.max, -3], dtype)
    b = np.array([info.min, info.max, info.max, 5], dtype)
    result = run_with_constants("tosa.mul", [a, b, np.int8([0])], {2}, ((4,), "i32"))
    assert result.dtype == np.int32
    assert result.tolist() == [int(x) * int(y) for x, y in zip(a, b)]


def _right_shift(x: int, n: int, rounding: bool) -> int:
    """ARITHMETIC_RIGHT_SHIFT's pseudocode on Python ints: floor(x / 2^n), plus bit n-1."""
    return (x >> n) + (((x >> (n - 1)) & 1) if rounding and n > 0 else 0)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
@pytest.mark.parametrize("rounding", [False, True])
def test_arithmetic_right_shift_by_one_constant_amount(dtype, rounding):
    info = np.iinfo(dtype)
    bits = info.bits
    x = np.array([[info.min, info.max, -1, 0, 1, -5, 5, info.min + 1, info.max - 1, -6]],
                 dtype)
    for n in range(bits):
        result = run_with_constants("tosa.arithmetic_right_shift",
                                    [x, np.full((1, 1), n, dtype)], {1},
                                    ((1, 10), ELEMENT_OF_DTYPE[np.dtype(dtype)]),
                                    {"round": rounding})
        assert result.dtype == dtype
        assert result.tolist() == [[_right_shift(int(v), n, rounding) for v in x[0]]], n


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
@pytest.mark.parametrize("rounding", [False, True])
def test_arithmetic_right_shift_by_amounts_given_at_run_time(dtype, rounding):
    # Every amount against every value, the amounts a graph input (not a constant).
    info = np.iinfo(dtype)
    bits = info.bits
    values = [info.min, info.max, -1, 0, 1, -5, 5, info.min + 1, info.max - 1, -6]
    x = np.array([values] * bits, dtype)
    n = np.arange(bits, dtype=dtype).reshape(bits, 1)
    element = ELEMENT_OF_DTYPE[np.dtype(dtype)]
    result = one("tosa.arithmetic_right_shift", [x, n], x.shape, element,
                 attrs={"round": rounding})
    assert result.dtype == dtype
    assert result.tolist() == [[_right_shift(v, k, rounding) for v in values]
                               for k in range(bits)]
    # One value against a row of amounts: the result takes the amounts' shape.
    row = one("tosa.arithmetic_right_shift", [x[:1, 5:6], n.reshape(1, bits)], (1, bits),
              element, attrs={"round": rounding})
    assert row.tolist() == [[_right_shift(-5, k, rounding) for k in range(bits)]]


def test_arithmetic_right_shift_constant_amounts_broadcast_over_x():
    # x [1, 1] against three equal amounts [1, 3]: the result has the amounts' shape.
    x = i32(-7).reshape(1, 1)
    result = run_with_constants("tosa.arithmetic_right_shift", [x, np.full((1, 3), 1, np.int32)],
                                {1}, ((1, 3), "i32"), {"round": True})
    assert result.tolist() == [[-3, -3, -3]]


def test_arithmetic_right_shift_constant_amount_past_the_width_is_a_require_failure():
    with pytest.raises(SpecRequire, match="shift"):
        run_with_constants("tosa.arithmetic_right_shift", [i32(1, 2), i32(32)], {1},
                           ((2,), "i32"), {"round": False})


def test_table_i8_constant_table_indexes_by_value_plus_128():
    table = ((np.arange(256) * 7) % 256 - 128).astype(np.int8)  # table[i] = 7i mod 256 - 128
    x = np.arange(-128, 128, dtype=np.int8)
    result = run_with_constants("tosa.table", [x, table], {1}, ((256,), "i8"))
    assert result.tolist() == [(7 * (v + 128)) % 256 - 128 for v in range(-128, 128)]


def test_table_i16_constant_table_every_input():
    # apply_lookup_s: index = (x + 32768) >> 7, fraction = x & 0x7F,
    # result = (table[index] << 7) + (table[index + 1] - table[index]) * fraction.
    rng = np.random.default_rng(18)
    table = np.cumsum(rng.integers(-300, 300, size=513)).clip(-32768, 32767).astype(np.int16)
    x = np.arange(-32768, 32768, dtype=np.int16).reshape(256, 256)
    result = run_with_constants("tosa.table", [x, table], {1}, ((256, 256), "i32"))
    entries = table.tolist()
    expected = []
    for v in range(-32768, 32768):
        index, fraction = (v + 32768) >> 7, v & 0x7F
        expected.append((entries[index] << 7) + (entries[index + 1] - entries[index]) * fraction)
    assert result.dtype == np.int32 and result.ravel().tolist() == expected


def test_intdiv_truncates_toward_zero():
    np.testing.assert_array_equal(
        one("tosa.intdiv", [i32(-7, 7, -7, 7), i32(2, -2, -2, 2)], (4,), "i32"), [-3, -3, 3, 3])


@pytest.mark.parametrize("a,b", [(1, 0), (-2**31, -1)])
def test_intdiv_by_zero_or_overflow_is_a_require_failure(a, b):
    with pytest.raises(SpecRequire):
        one("tosa.intdiv", [i32(a), i32(b)], (1,), "i32")


def test_arithmetic_right_shift_round_adds_the_last_bit_shifted_out():
    x = np.int8([-3, 5, 4, -128, 127])
    n = np.int8([1, 1, 1, 7, 0])
    plain = one("tosa.arithmetic_right_shift", [x, n], (5,), "i8", attrs={"round": False})
    rounded = one("tosa.arithmetic_right_shift", [x, n], (5,), "i8", attrs={"round": True})
    assert plain.tolist() == [-2, 2, 2, -1, 127]
    assert rounded.tolist() == [-1, 3, 2, -1, 127]


def test_shift_amount_past_the_type_width_is_a_require_failure():
    with pytest.raises(SpecRequire, match="shift"):
        one("tosa.arithmetic_right_shift", [np.int8([1]), np.int8([8])], (1,), "i8",
            attrs={"round": False})


def test_logical_shifts_use_the_bit_pattern_of_the_type():
    assert one("tosa.logical_right_shift", [np.int8([-1]), np.int8([4])], (1,), "i8").tolist() \
        == [15]
    assert one("tosa.logical_right_shift", [i32(-1), i32(28)], (1,), "i32").tolist() == [15]
    # 65 << 2 = 260: the bits above 8 are dropped.
    assert one("tosa.logical_left_shift", [np.int8([65]), np.int8([2])], (1,), "i8").tolist() \
        == [4]


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
def test_logical_left_shift_keeps_the_low_bits_of_every_amount(dtype):
    # LOGICAL_LEFT_SHIFT: the bit pattern shifted left, bits above the width dropped.
    info = np.iinfo(dtype)
    bits = info.bits
    values = [info.min, info.max, -1, 0, 1, -5, 0x35 << (bits - 8)]
    x = np.array([values] * bits, dtype)
    n = np.arange(bits, dtype=dtype).reshape(bits, 1) * np.ones((1, len(values)), dtype)
    element = ELEMENT_OF_DTYPE[np.dtype(dtype)]
    result = one("tosa.logical_left_shift", [x, n], x.shape, element)
    mask = (1 << bits) - 1
    expected = [[((v << k) & mask) - (((v << k) & mask) >> (bits - 1) << bits)
                 for v in values] for k in range(bits)]
    assert result.dtype == dtype and result.tolist() == expected


@pytest.mark.parametrize("amount", [-1, 32])
def test_logical_left_shift_amount_outside_the_width_is_a_require_failure(amount):
    with pytest.raises(SpecRequire, match="shift"):
        one("tosa.logical_left_shift", [i32(1, 2), i32(3, amount)], (2,), "i32")


def test_bitwise_ops_broadcast():
    a = np.array([[0x0F0F], [-1]], np.int32)
    b = np.array([[0x00FF, -0x10000]], np.int32)
    assert one("tosa.bitwise_or", [a, b], (2, 2), "i32").tolist() == [
        [0x0FFF, -0x10000 | 0x0F0F], [-1, -1]]
    p = np.array([[True], [False]])
    q = np.array([[True, False]])
    assert one("tosa.logical_and", [p, q], (2, 2), "i1").tolist() == [[True, False],
                                                                     [False, False]]


def test_bitwise_and_logical_ops():
    a, b = np.int16([0x0F0F, -1]), np.int16([0x00FF, 0x1234])
    assert one("tosa.bitwise_and", [a, b], (2,), "i16").tolist() == [0x000F, 0x1234]
    assert one("tosa.bitwise_xor", [a, b], (2,), "i16").tolist() == [0x0FF0, ~0x1234]
    p, q = np.array([True, True, False]), np.array([True, False, False])
    assert one("tosa.logical_xor", [p, q], (3,), "i1").tolist() == [False, True, False]


def test_maximum_float_nan_modes_and_signed_zeros():
    a = np.float32([np.nan, 1.0, 0.0, -0.0])
    b = np.float32([1.0, np.nan, -0.0, 0.0])
    propagate = one("tosa.maximum", [a, b], (4,), "f32", attrs={"nan_mode": "PROPAGATE"})
    ignore = one("tosa.maximum", [a, b], (4,), "f32", attrs={"nan_mode": "IGNORE"})
    assert np.isnan(propagate[:2]).all()
    assert ignore[:2].tolist() == [1.0, 1.0]
    # apply_max_s returns a when a >= b: max(+0, -0) = +0, max(-0, +0) = -0.
    assert np.signbit(propagate[2:]).tolist() == [False, True]


def test_minimum_float_ignores_nan_when_asked():
    a, b = np.float16([np.nan, 3]), np.float16([2, np.nan])
    assert one("tosa.minimum", [a, b], (2,), "f16", attrs={"nan_mode": "IGNORE"}).tolist() \
        == [2, 3]


def test_table_i8_indexes_by_value_plus_128():
    table = (np.arange(256) - 128)[::-1].astype(np.int8)  # table[i] = 127 - i
    x = np.int8([-128, 0, 127])
    assert one("tosa.table", [x, table], (3,), "i8").tolist() == [127, -1, -128]


def test_table_i16_interpolates_to_a_16_7_result():
    # table[k] = 2k: index = (x + 32768) >> 7, fraction = x & 127,
    # result = (table[index] << 7) + (table[index+1] - table[index]) * fraction.
    table = (2 * np.arange(513)).astype(np.int16)
    x = np.int16([-32768, 0, 5, 32767])
    expected = [0, 512 << 7, (512 << 7) + 2 * 5, (1022 << 7) + 2 * 127]
    assert one("tosa.table", [x, table], (4,), "i32").tolist() == expected


def test_pow_f32_is_close_to_the_exact_power():
    result = one("tosa.pow", [np.float32([2, 9]), np.float32([10, 0.5])], (2,), "f32")
    assert result.tolist() == [1024.0, 3.0]


# --- elementwise unary ----------------------------------------------------------------

def test_abs_i32_minimum_is_a_require_failure():
    with pytest.raises(SpecRequire):
        one("tosa.abs", [i32(-2**31)], (1,), "i32")


def test_abs_float_clears_the_sign_of_zero():
    result = one("tosa.abs", [np.float32([-0.0, -2.5])], (2,), "f32")
    assert result.tolist() == [0.0, 2.5] and not np.signbit(result[0])


def test_clz_counts_leading_zeros_of_the_32_bit_pattern():
    x = i32(0, 1, -1, 0x10000, 2**31 - 1)
    assert one("tosa.clz", [x], (5,), "i32").tolist() == [32, 31, 0, 15, 1]


def test_clz_of_every_bit_length():
    # 2^k and 2^(k+1) - 1 have k + 1 significant bits: 31 - k leading zeros; the
    # negative values have the top bit set.
    values = [1 << k for k in range(31)] + [(1 << (k + 1)) - 1 for k in range(31)]
    x = np.array(values + [-2**31, -2, -(2**30)], np.int32).reshape(1, -1, 1)
    result = one("tosa.clz", [x], x.shape, "i32")
    assert result.dtype == np.int32
    assert result.ravel().tolist() == [31 - k for k in range(31)] * 2 + [0, 0, 0]


def test_negate_i8_applies_zero_points_and_saturates():
    # -(x - input1_zp) + output_zp, clipped to i8.
    x = np.int8([10, -128, 127])
    result = one("tosa.negate", [x, np.int8([3]), np.int8([-2])], (3,), "i8")
    assert result.tolist() == [-9, 127, -126]


def test_negate_i16_with_a_zero_point_is_an_error_if():
    with pytest.raises(SpecErrorIf, match="zero point"):
        one("tosa.negate", [np.int16([1]), np.int16([1]), np.int16([0])], (1,), "i16")


def test_negate_i32_minimum_is_a_require_failure():
    with pytest.raises(SpecRequire):
        one("tosa.negate", [i32(-2**31), i32(0), i32(0)], (1,), "i32")


def test_float_unary_ops_are_correctly_rounded_fp64_results():
    x = np.float32([0.5, 2.0, 4.0])
    cases = {"tosa.exp": np.exp, "tosa.log": np.log, "tosa.sin": np.sin, "tosa.cos": np.cos,
             "tosa.rsqrt": lambda v: 1 / np.sqrt(v), "tosa.reciprocal": lambda v: 1 / v,
             "tosa.tanh": np.tanh, "tosa.sigmoid": lambda v: 1 / (1 + np.exp(-v)),
             "tosa.erf": np.vectorize(math.erf)}
    for name, fn in cases.items():
        expected = fn(x.astype(np.float64)).astype(np.float32)
        np.testing.assert_array_equal(one(name, [x], (3,), "f32"), expected, err_msg=name)


def test_ceil_floor_keep_signed_zero_and_infinities():
    x = np.float16([-0.5, 0.5, -np.inf])
    assert one("tosa.ceil", [x], (3,), "f16").tolist() == [-0.0, 1.0, -np.inf]
    assert np.signbit(one("tosa.ceil", [x], (3,), "f16")[0])
    assert one("tosa.floor", [x], (3,), "f16").tolist() == [-1.0, 0.0, -np.inf]


# --- activation -----------------------------------------------------------------------

def test_clamp_i8():
    x = np.int8([-128, -6, 0, 6, 127])
    result = one("tosa.clamp", [x], (5,), "i8", attrs={"min_val": -5, "max_val": 5})
    assert result.tolist() == [-5, -5, 0, 5, 5]


def test_clamp_float_nan_modes():
    x = np.float32([np.nan, 7.0])
    attrs = {"min_val": -1.0, "max_val": 1.0}
    ignore = one("tosa.clamp", [x], (2,), "f32", attrs={**attrs, "nan_mode": "IGNORE"})
    propagate = one("tosa.clamp", [x], (2,), "f32", attrs={**attrs, "nan_mode": "PROPAGATE"})
    assert ignore.tolist() == [-1.0, 1.0]  # a NaN input becomes min_val
    assert np.isnan(propagate[0]) and propagate[1] == 1.0


@pytest.mark.parametrize("low,high", [(5, -5), (float("nan"), 1.0)])
def test_clamp_bad_bounds_are_error_ifs(low, high):
    with pytest.raises(SpecErrorIf):
        one("tosa.clamp", [np.float32([0])], (1,), "f32", attrs={"min_val": low, "max_val": high})


# --- ternary, comparison ------------------------------------------------------------

def test_select_broadcasts_the_condition():
    condition = np.array([[True], [False]])
    a, b = np.int8([[1, 2, 3]]), np.int8([[7, 8, 9]])
    assert one("tosa.select", [condition, a, b], (2, 3), "i8").tolist() == [[1, 2, 3], [7, 8, 9]]


def test_comparisons_with_nan_are_false_and_ignore_zero_sign():
    a, b = np.float32([np.nan, 0.0, 1.0]), np.float32([np.nan, -0.0, 2.0])
    assert one("tosa.equal", [a, b], (3,), "i1").tolist() == [False, True, False]
    assert one("tosa.greater_equal", [a, b], (3,), "i1").tolist() == [False, True, False]
    assert one("tosa.greater", [b, a], (3,), "i1").tolist() == [False, False, True]


# --- reduction ------------------------------------------------------------------------

def test_reduce_sum_requires_every_partial_sum_to_fit():
    # The total (2^31 - 1) fits, but the partial sum after two elements does not.
    x = np.array([[2**31 - 1, 1, -1]], dtype=np.int32)
    with pytest.raises(SpecRequire, match="partial"):
        one("tosa.reduce_sum", [x], (1, 1), "i32", attrs={"axis": 1})


def test_reduce_sum_partial_sums_along_an_inner_axis():
    # x[0, :, 0] = [2^31 - 1, 1, -1]: the second partial sum is 2^31 (REQUIRE fails);
    # reordered to [2^31 - 1, -1, 1] every partial sum fits.
    x = np.array([[[2**31 - 1, 5], [1, -7], [-1, 2]]], np.int32)
    with pytest.raises(SpecRequire, match="partial"):
        one("tosa.reduce_sum", [x], (1, 1, 2), "i32", attrs={"axis": 1})
    fine = x.copy()
    fine[0, :, 0] = [2**31 - 1, -1, 1]
    assert one("tosa.reduce_sum", [fine], (1, 1, 2), "i32", attrs={"axis": 1}).tolist() == \
        [[[2**31 - 1, 0]]]
    small = fine // 4
    assert one("tosa.reduce_sum", [small], (1, 3, 1), "i32", attrs={"axis": 2}).tolist() == \
        [[[(2**31 - 1) // 4 + 1], [-1 - 2], [0 + 0]]]


def test_reduce_max_min_integer_along_each_axis():
    x = np.array([[[3, -8, 7], [-128, 127, 0]]], np.int8)
    assert one("tosa.reduce_max", [x], (1, 1, 3), "i8", attrs={"axis": 1}).tolist() == \
        [[[3, 127, 7]]]
    assert one("tosa.reduce_min", [x], (1, 2, 1), "i8", attrs={"axis": 2}).tolist() == \
        [[[-8], [-128]]]
    assert one("tosa.reduce_max", [x], (1, 2, 3), "i8", attrs={"axis": 0}).tolist() == \
        x.tolist()


def test_reduce_sum_keeps_the_axis():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert one("tosa.reduce_sum", [x], (2, 1), "i32", attrs={"axis": 1}).tolist() == [[3], [12]]


def test_reduce_sum_f16_is_judged_by_its_sum_not_by_one_order_of_additions():
    # REDUCE_SUM's float accuracy is the dot-product requirement against the fp64 sum
    # (here 30000, exact in fp16: a multiple of its spacing 16 in [2^14, 2^15)).
    # Adding in index order overflows fp16 at 60000 + 30000; any order may be used,
    # so infinity is not an admissible result when the sum itself fits.
    x = np.float16([[60000, 30000, -60000]])
    total = one("tosa.reduce_sum", [x], (1, 1), "f16", attrs={"axis": 1})
    assert total.dtype == np.float16 and total.tolist() == [[30000.0]]


def test_reduce_sum_f32_overflows_only_when_the_sum_does():
    # fp32 max is about 3.4e38: 3e38 + 3e38 - 3e38 = 3e38 fits, 3e38 + 3e38 does not.
    fits = one("tosa.reduce_sum", [np.float32([3e38, 3e38, -3e38])], (1,), "f32",
               attrs={"axis": 0})
    overflows = one("tosa.reduce_sum", [np.float32([3e38, 3e38])], (1,), "f32",
                    attrs={"axis": 0})
    assert fits.tolist() == [np.float32(3e38)] and overflows.tolist() == [np.inf]


def test_reduce_max_float_nan_modes():
    x = np.float32([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan]])
    ignore = one("tosa.reduce_max", [x], (2, 1), "f32", attrs={"axis": 1, "nan_mode": "IGNORE"})
    propagate = one("tosa.reduce_max", [x], (2, 1), "f32",
                    attrs={"axis": 1, "nan_mode": "PROPAGATE"})
    assert ignore[0, 0] == 3.0 and np.isnan(ignore[1, 0])
    assert np.isnan(propagate).all()


def test_reduce_min_i8_and_axis_error():
    x = np.int8([[5, -3], [2, 7]])
    assert one("tosa.reduce_min", [x], (1, 2), "i8", attrs={"axis": 0}).tolist() == [[2, -3]]
    with pytest.raises(SpecErrorIf, match="axis"):
        one("tosa.reduce_min", [x], (1, 2), "i8", attrs={"axis": 2})


def test_reduce_all_any_product():
    p = np.array([[True, False], [True, True]])
    assert one("tosa.reduce_all", [p], (2, 1), "i1", attrs={"axis": 1}).tolist() == [[False],
                                                                                     [True]]
    assert one("tosa.reduce_any", [p], (1, 2), "i1", attrs={"axis": 0}).tolist() == [[True, True]]
    x = np.float32([[2, 3, 4]])
    assert one("tosa.reduce_product", [x], (1, 1), "f32", attrs={"axis": 1}).tolist() == [[24]]


def test_declared_output_shape_must_keep_the_reduced_axis():
    x = np.zeros((2, 3), np.int32)
    with pytest.raises(SpecErrorIf, match="shape"):
        one("tosa.reduce_sum", [x], (2,), "i32", attrs={"axis": 1})


# --- data layout ----------------------------------------------------------------------

def test_concat_and_its_shape_error():
    a, b = np.int8([[1, 2]]), np.int8([[3, 4], [5, 6]])
    assert one("tosa.concat", [a, b], (3, 2), "i8", attrs={"axis": 0}).tolist() == \
        [[1, 2], [3, 4], [5, 6]]
    with pytest.raises(SpecErrorIf, match="only axis"):
        one("tosa.concat", [a, b], (2, 3), "i8", attrs={"axis": 1})


def test_concat_of_many_inputs_along_an_inner_axis():
    parts = [np.full((2, k + 1, 3), k, np.int16) for k in range(4)]
    result = one("tosa.concat", parts, (2, 10, 3), "i16", attrs={"axis": 1})
    assert result[1, :, 0].tolist() == [0, 1, 1, 2, 2, 2, 3, 3, 3, 3]
    assert (result[0] == result[1]).all() and (result[..., 0:1] == result).all()


def test_pad_uses_pad_const_and_rejects_negative_padding():
    x = np.int8([[1, 2]])
    result = one("tosa.pad", [x, np.int8([-7])], (2, 5), "i8", shapes={1: [1, 0, 2, 1]})
    assert result.tolist() == [[-7] * 5, [-7, -7, 1, 2, -7]]
    with pytest.raises(SpecErrorIf, match="negative"):
        one("tosa.pad", [x, np.int8([0])], (1, 1), "i8", shapes={1: [0, 0, -1, 0]})


def test_reshape_slice_tile_reverse_transpose():
    x = np.arange(6, dtype=np.int16).reshape(2, 3)
    assert one("tosa.reshape", [x], (3, 2), "i16", shapes={1: [3, 2]}).tolist() == \
        [[0, 1], [2, 3], [4, 5]]
    assert one("tosa.slice", [x], (1, 2), "i16", shapes={1: [1, 1], 2: [1, 2]}).tolist() == \
        [[4, 5]]
    assert one("tosa.tile", [x], (2, 6), "i16", shapes={1: [1, 2]})[1].tolist() == \
        [3, 4, 5, 3, 4, 5]
    assert one("tosa.reverse", [x], (2, 3), "i16", attrs={"axis": 1})[0].tolist() == [2, 1, 0]
    assert one("tosa.transpose", [x], (3, 2), "i16", attrs={"perms": [1, 0]}).tolist() == \
        [[0, 3], [1, 4], [2, 5]]


def test_transpose_rank_3_moves_every_element():
    # output[i, j, k] = input[j, k, i] for perms [2, 0, 1]... read as out dim d = in dim
    # perms[d]: out shape (4, 2, 3), out[a, b, c] = x[b, c, a].
    x = np.arange(24, dtype=np.int8).reshape(2, 3, 4)
    out = one("tosa.transpose", [x], (4, 2, 3), "i8", attrs={"perms": [2, 0, 1]})
    assert all(out[a, b, c] == x[b, c, a] for a in range(4) for b in range(2) for c in range(3))


def test_slice_from_the_middle_and_one_past_the_end():
    x = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    out = one("tosa.slice", [x], (2, 2, 2), "i32", shapes={1: [1, 1, 2], 2: [2, 2, 2]})
    assert out.tolist() == [[[27, 28], [32, 33]], [[47, 48], [52, 53]]]  # x[1:3, 1:3, 2:4]
    with pytest.raises(SpecErrorIf, match=r"start\[2\] \+ size\[2\] = 6 > 5"):
        one("tosa.slice", [x], (2, 2, 2), "i32", shapes={1: [1, 1, 4], 2: [2, 2, 2]})


@pytest.mark.parametrize("start,size", [([0, 2], [1, 2]), ([-1, 0], [1, 1]), ([0, 0], [0, 1])])
def test_slice_out_of_bounds_is_an_error_if(start, size):
    x = np.zeros((2, 3), np.int32)
    with pytest.raises(SpecErrorIf):
        one("tosa.slice", [x], tuple(max(s, 1) for s in size), "i32",
            shapes={1: start, 2: size})


def test_reshape_element_count_mismatch_is_an_error_if():
    with pytest.raises(SpecErrorIf, match="elements"):
        one("tosa.reshape", [np.zeros((2, 3), np.int8)], (4,), "i8", shapes={1: [4]})


def test_transpose_needs_a_permutation():
    with pytest.raises(SpecErrorIf, match="permutation"):
        one("tosa.transpose", [np.zeros((2, 3), np.int8)], (3, 3), "i8", attrs={"perms": [1, 1]})


# --- scatter / gather -----------------------------------------------------------------

def test_gather_picks_rows_per_batch():
    values = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    indices = np.array([[2, 0], [1, 1]], dtype=np.int32)
    result = one("tosa.gather", [values, indices], (2, 2, 2), "f32")
    assert result.tolist() == [[[4, 5], [0, 1]], [[8, 9], [8, 9]]]


def test_gather_index_out_of_range_is_a_require_failure():
    values = np.zeros((1, 3, 1), np.int8)
    with pytest.raises(SpecRequire):
        one("tosa.gather", [values, np.array([[3]], np.int32)], (1, 1, 1), "i8")


def test_scatter_writes_rows_and_requires_unique_indices():
    values = np.zeros((1, 3, 1), np.int16)
    updates = np.int16([[[5], [6]]])
    result = one("tosa.scatter", [values, np.array([[2, 0]], np.int32), updates], (1, 3, 1),
                 "i16")
    assert result.reshape(-1).tolist() == [6, 0, 5]
    with pytest.raises(SpecRequire, match="unique"):
        one("tosa.scatter", [values, np.array([[1, 1]], np.int32), updates], (1, 3, 1), "i16")


def test_scatter_names_the_first_batch_with_a_repeated_index():
    # The REQUIRE is per batch: batch 0 writes positions 0, 2; batch 1 writes 1 twice.
    values = np.zeros((3, 3, 1), np.int8)
    updates = np.ones((3, 2, 1), np.int8)
    indices = np.array([[0, 2], [1, 1], [2, 2]], np.int32)
    with pytest.raises(SpecRequire, match="batch 1 are unique"):
        one("tosa.scatter", [values, indices, updates], (3, 3, 1), "i8")
    result = one("tosa.scatter", [values, np.array([[0, 2], [2, 1], [1, 0]], np.int32),
                                  updates], (3, 3, 1), "i8")
    assert result.reshape(3, 3).tolist() == [[1, 0, 1], [0, 1, 1], [1, 1, 0]]


# --- data nodes, custom -----------------------------------------------------------------

def test_const_identity_and_i48_values():
    graph = Graph("main")
    big = np.array([2**47 - 1, -2**47], dtype=np.int64)
    const = graph.append(Op("tosa.const", [], [TensorType((2,), scalar_type("i48"))],
                            {"values": big}))
    ident = graph.append(Op("tosa.identity", [const.result],
                            [TensorType((2,), scalar_type("i48"))]))
    graph.set_outputs([ident.result])
    (result,) = reference_model.run(graph, []).values()
    assert result.dtype == numpy_dtype(scalar_type("i48")) and result.tolist() == big.tolist()


def test_custom_op_cannot_execute():
    with pytest.raises(ReferenceModelError, match="cannot execute custom op acme::frobnicate"):
        one("tosa.custom", [np.int8([1])], (1,), "i8",
            attrs={"operator_name": "frobnicate", "domain_name": "acme",
                   "implementation_attrs": ""})


def test_erf_float64_is_libm_erf_to_a_few_ulps():
    """The whole-array erf against Python's libm erf, over both of its regimes,
    the boundary between them, tiny, huge and special values."""
    from reference_model.kernels.activation import _erf64

    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-7, 7, 20000), np.linspace(-6, 6, 4001),
                        [2.0, np.nextafter(2.0, 0), -2.0, 1e-300, 5e-324, 30.0, -30.0]])
    expected = np.array([math.erf(v) for v in x])
    ours = _erf64(x)
    assert np.all(np.abs(ours - expected) <= 8 * np.spacing(np.abs(expected)))
    special = _erf64(np.array([0.0, -0.0, np.inf, -np.inf, np.nan]))
    assert special[:4].tolist() == [0.0, 0.0, 1.0, -1.0] and np.isnan(special[4])
    assert np.signbit(special).tolist()[:4] == [False, True, False, True]
    assert _erf64(np.array(-0.5)).shape == ()
