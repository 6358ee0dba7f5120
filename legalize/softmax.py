"""Patterns for TFL SOFTMAX and LOG_SOFTMAX: on float data as TFLite's reference
kernels compute them, and SOFTMAX in integer arithmetic, bit exact with them.
(Kept apart from legalize/activations.py: a model's only activation is often
its softmax.)

Float: exp((x - max) * beta) / sum over the last axis (reference_ops::Softmax,
LogSoftmax), the division as RECIPROCAL + MUL (TOSA has no float divide).

Integer SOFTMAX: int8 input (int8 or int16 output) and int16
(int16 output, at the end of this module), TFLite's reference kernels bit exact.

int8 uses PRO-INT operations only. It follows
reference_ops::Softmax (kernels/internal/reference/softmax.h), per row:
1. `d = x - max(row)`, an integer in [-255, 0].
2. `E(d) = exp_on_negative_values(SRDHM(d * 2^ls, m))` in Q0.31 (gemmlowp),
   0 where `d < diff_min` (legalize.quantized.softmax_exp).
3. `sum = sum(RoundingDivideByPOT(E, 12))` (Q12.19).
4. `GetReciprocal(sum, 12)`: `clz = CountLeadingZeros(sum)`, `scale =
   one_over_one_plus_x_for_x_in_0_1((sum << clz) - 2^31)` (gemmlowp Newton-
   Raphson in Q2.29), `num_bits_over_unit = 12 - clz`.
5. `out = RoundingDivideByPOT(SRDHM(scale, E), num_bits_over_unit + 31 - bits)
   + out_min`, clamped (bits = 8 or 16 of the output type).

TOSA: E depends only on d, which takes 256 values, so E comes from int8
TABLEs indexed by `d + 127`: one TABLE per byte of E (bytes 0-2 stored minus
128 so they fit int8, byte 3 < 128 as is) and a recombination with RESCALEs
(which add the 128 back through the input zero point and scale by 2^8k) and
ADDs. The rest is integer arithmetic: TOSA MUL with shift 31 equals SRDHM
when the product is not INT32_MIN^2, ARITHMETIC_RIGHT_SHIFT with round equals
RoundingDivideByPOT for non-negative values (all values here are), CLZ,
LOGICAL_LEFT_SHIFT and BITWISE_AND compute the normalized sum.
"""

from __future__ import annotations

import numpy as np

from legalize.common import require_static, tensor_type
from legalize.integer.support import integer_pattern, per_tensor, static_shape
from legalize.quantized import (
    INT32_MAX,
    SINGLE_ROUND,
    kept_table,
    left_shifted_as_tflite,
    rescale,
    rescale_by_multiplier,
    rescale_to_i32,
    rounding_mode,
    softmax_exp,
    softmax_input_scaling,
    table_i16,
    tflite_quantize_multiplier,
)
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import TensorType, UniformQuantized, f32, i8, i16, i32
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

# ---------------------------------------------------------------------------
# Float path


def _last_axis_max_shift(rw: Rewriter, x: Value) -> tuple[Value, TensorType]:
    """x - max(x) over the last axis (<= 0, so EXP cannot overflow)."""
    t = tensor_type(x)
    axis = len(t.shape) - 1
    reduced = t.with_shape(tuple(t.shape[:-1]) + (1,))
    maximum = build.op(rw, "tosa.reduce_max", [x], reduced, axis=axis, nan_mode="PROPAGATE")
    return Elementwise(rw, len(t.shape)).sub(x, maximum), reduced


def _last_axis_sum(rw: Rewriter, x: Value, reduced: TensorType) -> Value:
    return build.op(rw, "tosa.reduce_sum", [x], reduced, axis=len(reduced.shape) - 1)


@pattern("tfl.softmax")
def softmax(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """exp((x - max) * beta) / sum(...) over the last axis (reference_ops::Softmax);
    the division is RECIPROCAL + MUL (TOSA has no float divide)."""
    if (failure := require_static(op)) is not None:
        return failure
    x = op.operands[0]
    t = tensor_type(op.results[0])
    if not t.shape:
        return Failure("tfl.softmax: rank-0 input")
    e = Elementwise(rw, len(t.shape))
    shifted, reduced = _last_axis_max_shift(rw, x)
    beta = float(op.attrs.get("beta", 1.0))
    if beta != 1.0:
        shifted = e.mul(shifted, e.const(beta, t.element))
    exp = e.unary("tosa.exp", shifted)
    inverse = e.reciprocal(_last_axis_sum(rw, exp, reduced))
    return [e.mul(exp, inverse)]


@pattern("tfl.log_softmax")
def log_softmax(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """(x - max) - log(sum(exp(x - max))) over the last axis (reference_ops::LogSoftmax).

    Subtracting the max first keeps EXP finite for any logits (the naive
    x - log(sum(exp(x))) overflows to inf for logits above ~88).
    """
    if (failure := require_static(op)) is not None:
        return failure
    x = op.operands[0]
    t = tensor_type(op.results[0])
    if not t.shape:
        return Failure("tfl.log_softmax: rank-0 input")
    e = Elementwise(rw, len(t.shape))
    shifted, reduced = _last_axis_max_shift(rw, x)
    log_sum = e.unary("tosa.log", _last_axis_sum(rw, e.unary("tosa.exp", shifted), reduced))
    return [e.sub(shifted, log_sum)]


# ---------------------------------------------------------------------------
# Integer path: SOFTMAX

# Integer bits of the Q12.19 sum of exponentials (kAccumulationIntegerBits).
ACCUMULATION_INTEGER_BITS = 12
# TOSA TABLE i8 indexes with x + 128; the index value for d is d + 127.
_INDEX_OFFSET = 127

# gemmlowp one_over_one_plus_x_for_x_in_0_1 constants, Q2.29.
_48_OVER_17 = 1515870810
_NEG_32_OVER_17 = -1010580540
_ONE_Q2_29 = 1 << 29


def exp_byte_tables(multiplier: int, left_shift: int, diff_min: int) -> tuple[np.ndarray, ...]:
    """Four int8 tables, entry d + 255 for d in [-255, 0]: bytes 0, 1, 2 of E(d)
    minus 128, and byte 3 (E < 2^31, so it is below 128)."""
    exps = softmax_exp(np.arange(-255, 1, dtype=np.int64), multiplier, left_shift, diff_min)
    tables = [((exps >> (8 * k)) & 0xFF) - 128 for k in range(3)]
    tables.append(exps >> 24)
    return tuple(t.astype(np.int8) for t in tables)


def _srdhm(e: Elementwise, a: Value, b: Value) -> Value:
    """SaturatingRoundingDoublingHighMul as MUL with shift 31 (no INT32_MIN^2 here)."""
    return e.mul(a, b, shift=31)


def _exponentials(e: Elementwise, diff: Value, tables: tuple[np.ndarray, ...]) -> Value:
    """E(d) as i32 from the four byte tables."""
    rw = e.rw
    index = rescale(rw, diff, 1.0, i8, input_zp=0, output_zp=_INDEX_OFFSET,
                    rounding=SINGLE_ROUND)
    looked_up = [build.op(rw, "tosa.table", [index, build.const(rw, table, i8)],
                          index.type) for table in tables]
    # Bytes 0-2: (t + 128) * 2^(8k), the +128 as input zero point -128.
    parts = [rescale(rw, looked_up[k], float(1 << (8 * k)), i32, input_zp=-128, output_zp=0,
                     rounding=SINGLE_ROUND) for k in range(3)]
    parts.append(e.mul(e.cast(looked_up[3], i32), e.const(1 << 24, i32)))
    return e.add(e.add(parts[0], parts[1]), e.add(parts[2], parts[3]))


def _reciprocal(e: Elementwise, total: Value) -> tuple[Value, Value]:
    """(gemmlowp scale of 1 / total, CLZ(total)) per row, as TFLite's GetReciprocal."""
    clz = e.unary("tosa.clz", total)
    normalized = e.shift_left(total, clz)
    # (sum << clz) - 2^31: clear the top bit, which the shift set.
    a = e.bitwise_and(normalized, e.const(INT32_MAX, i32))
    # RoundingHalfSum(a, One) = (a + 2^31 - 1 + 1) / 2 = (a >> 1) + 2^30 for a >= 0.
    half_denominator = e.add(e.shift_right(a, e.const(1, i32)), e.const(1 << 30, i32))
    x = e.add(e.const(_48_OVER_17, i32),
              _srdhm(e, half_denominator, e.const(_NEG_32_OVER_17, i32)))
    for _ in range(3):
        error = e.sub(e.const(_ONE_Q2_29, i32), _srdhm(e, half_denominator, x))
        # Rescale<2> of a Q4.27 product: times 4 (the product is far from saturating).
        correction = e.mul(_srdhm(e, x, error), e.const(4, i32))
        x = e.add(x, correction)
    # Rescale<0>(ExactMulByPot<-1>(x)): 2x saturated, as x + min(x, INT32_MAX - x).
    headroom = e.sub(e.const(INT32_MAX, i32), x)
    scale = e.add(x, e.minimum(x, headroom))
    return scale, clz


@pattern("tfl.softmax", kind="integer", label="softmax_int8", types=("i8",))
@integer_pattern
def softmax_int8(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TFLite's 8-bit reference softmax over the last axis (see the module docstring)."""
    x_type = per_tensor(op.operands[0], "i8")
    out_type = per_tensor(op.results[0], "i8", "i16")
    shape = static_shape(op.operands[0])
    if x_type is None or out_type is None or shape is None or not shape:
        return Failure(f"{op.name}: needs a static int8 input and an int8/int16 output")
    out_bits = out_type.storage.bits
    out_min = out_type.storage.min_value
    if out_type.scale != 1.0 / (1 << out_bits) or out_type.zero_point != out_min:
        return Failure(f"{op.name}: output quantization {out_type} is not TFLite's "
                       f"(scale 1/2^{out_bits}, zero point {out_min})")
    beta = float(np.float32(op.attrs.get("beta", 1.0)))
    multiplier, left_shift, diff_min = softmax_input_scaling(beta, x_type.scale)
    e = Elementwise(rw, len(shape))
    axis = e.rank - 1
    x = rescale_to_i32(rw, op.operands[0], input_zp=0)
    row_shape = (*shape[:-1], 1)
    row_max = build.op(rw, "tosa.reduce_max", [x], TensorType(row_shape, i32), axis=axis,
                       nan_mode="PROPAGATE")
    diff = e.sub(x, row_max)
    exps = _exponentials(e, diff, kept_table(exp_byte_tables, multiplier, left_shift, diff_min))
    scaled_exps = e.shift_right(exps, e.const(ACCUMULATION_INTEGER_BITS, i32), round=True)
    total = build.op(rw, "tosa.reduce_sum", [scaled_exps], TensorType(row_shape, i32),
                     axis=axis)
    scale, clz = _reciprocal(e, total)
    # RoundingDivideByPOT by num_bits_over_unit + 31 - bits = (12 + 31 - bits) - clz.
    exponent = e.sub(e.const(ACCUMULATION_INTEGER_BITS + 31 - out_bits, i32), clz)
    unsaturated = e.shift_right(_srdhm(e, scale, exps), exponent, round=True)
    # + out_min and clamp: a unit RESCALE saturates, adding the zero point for int8;
    # int16 zero points must be 0 in RESCALE, so -32768 is added before.
    if out_bits == 8:
        return [rescale(rw, unsaturated, 1.0, out_type, input_zp=0, rounding=SINGLE_ROUND)]
    shifted = e.add(unsaturated, e.const(out_min, i32))
    return [rescale(rw, shifted, 1.0, out_type, input_zp=0, output_zp=0,
                    rounding=SINGLE_ROUND)]




# ---------------------------------------------------------------------------
# int16: reference_ops::SoftmaxInt16 with TFLite's two 513-entry LUTs

_INT16_RANGE = 65535  # int16 max - min
# The largest |x - max(row)|.
_LARGEST_DIFF = _INT16_RANGE
# TFLite's exp LUT covers input differences in [-10, 0]: exp(-10) is negligible.
_EXP_LUT_RANGE = 10.0


def softmax_int16_tables(float_type: type = np.float64) -> tuple[np.ndarray, np.ndarray]:
    """(exp LUT, 1/(1+x) LUT) as activations.cc SoftmaxPrepare populates them:
    LUTPopulate<int16_t>(10/65535, 32767, 2/65535, 0, exp) over [-10, 0] and
    LUTPopulate<int16_t>(1/65535, -32768, 2/65535, 0, 1/(1+x)) over [0, 1], in
    double (float tables differ in two reciprocal entries, which TFLite's output
    shows: tests/test_legalize_integer.py softmax_int16 rounding case)."""
    def quantized(scale: float, zero_point: int) -> UniformQuantized:
        return UniformQuantized(i16, f32, float(np.float32(scale)), zero_point)

    out = quantized(2.0 / _INT16_RANGE, 0)
    exp_table = table_i16(lambda v: np.exp(v), quantized(_EXP_LUT_RANGE / _INT16_RANGE, 32767),
                          out, float_type)
    reciprocal_table = table_i16(lambda v: 1 / (1 + v), quantized(1.0 / _INT16_RANGE, -32768),
                                 out, float_type)
    return exp_table, reciprocal_table


def _lut_lookup(e: Elementwise, x: Value, table: np.ndarray) -> Value:
    """TFLite's int16 LUTLookup: TOSA TABLE (base << 7 + slope * frac) then the
    rounding shift by 7 TFLite applies to the interpolation."""
    looked_up = build.op(e.rw, "tosa.table", [x, build.const(e.rw, table, i16)],
                         x.type.with_element(i32))
    return e.shift_right(looked_up, e.const(7, i32), round=True)


@pattern("tfl.softmax", kind="integer", label="softmax_int16", types=("i16",))
@integer_pattern
def softmax_int16(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TFLite's int16 reference softmax (reference_ops::SoftmaxInt16) over the last axis.

    Per row: `d = x - max`; `sym = sat16(MBQM(d, s_in * beta / (10 / 65535)) + 32767)`;
    `e = LUT_exp(sym)`; `sum = sum(e)`; `h = CountLeadingZeros(sum)`;
    `r = LUT_recip(min(((sum << (h - 1)) + 2^13 >> 14) - 98304, 32767))`; output
    `(e * r + 2^(30 - h)) >> (31 - h)` clamped to [0, 32767]. The LUT lookups are
    TOSA TABLEs (with TFLite's rounding of the interpolation); every value is
    non-negative where rounding shifts are used.
    """
    x_type = per_tensor(op.operands[0], "i16")
    out_type = per_tensor(op.results[0], "i16")
    shape = static_shape(op.operands[0])
    if x_type is None or out_type is None or shape is None or not shape:
        return Failure(f"{op.name}: needs a static int16 input and output")
    if out_type.zero_point != 0 or x_type.zero_point != 0:
        return Failure(f"{op.name}: int16 zero points must be 0")
    if shape[-1] * 32767 > INT32_MAX:
        return Failure(f"{op.name}: rows of {shape[-1]} int16 exponentials can overflow "
                       f"TFLite's int32 sum")
    beta = np.float32(op.attrs.get("beta", 1.0))
    diff_scale = float(np.float32(x_type.scale) * beta) / (_EXP_LUT_RANGE / _INT16_RANGE)
    exp_table, reciprocal_table = kept_table(softmax_int16_tables)
    e = Elementwise(rw, len(shape))
    axis = e.rank - 1
    row_shape = (*shape[:-1], 1)
    x = build.cast(rw, op.operands[0], i32)
    row_max = build.op(rw, "tosa.reduce_max", [x], TensorType(row_shape, i32), axis=axis,
                       nan_mode="PROPAGATE")
    diff = e.sub(x, row_max)
    multiplier, exponent = tflite_quantize_multiplier(diff_scale)
    if exponent > 0 and _LARGEST_DIFF >= 1 << max(30 - exponent, 0):
        # Past RESCALE's input range for shift 31 - exponent: TFLite computes
        # diff * 2^exponent in int32 (wrapping), then the doubling high multiply.
        shifted = left_shifted_as_tflite(rw, diff, exponent)
        scaled = rescale_by_multiplier(rw, shifted, [multiplier], [31], i32, input_zp=0,
                                       output_zp=0, rounding=rounding_mode(op.name))
    else:
        scaled = rescale(rw, diff, diff_scale, i32, input_zp=0, output_zp=0,
                         rounding=rounding_mode(op.name))
    # + 32767 and saturation to int16 (a unit RESCALE to i16 saturates).
    symmetric = rescale(rw, e.add(scaled, e.const(32767, i32)), 1.0,
                        i16, input_zp=0, output_zp=0, rounding=SINGLE_ROUND)
    exps = _lut_lookup(e, symmetric, exp_table)
    total = build.op(rw, "tosa.reduce_sum", [exps], TensorType(row_shape, i32), axis=axis)
    clz = e.unary("tosa.clz", total)
    normalized = e.shift_left(total, e.sub(clz, e.const(1, i32)))
    shifted_sum = e.shift_right(normalized, e.const(14, i32), round=True)
    # (sum - 1) recentred from [0, 65535] to int16: minus 2^15 + 2^16. A sum just
    # below a power of two (2^18 - 1) rounds up to 2^17 here, recentred 32768,
    # which TFLite saturates to 32767 (CAST would wrap it to -32768).
    recentred = e.sub(shifted_sum, e.const((1 << 15) + (1 << 16), i32))
    centred = e.cast(e.minimum(recentred, e.const(32767, i32)), i16)
    reciprocal = _lut_lookup(e, centred, reciprocal_table)
    product = e.mul(exps, reciprocal)
    right_shift = e.sub(e.const(31, i32), clz)
    result = e.shift_right(product, right_shift, round=True)
    return [rescale(rw, result, 1.0, out_type, input_zp=0, output_zp=0, rounding=SINGLE_ROUND)]
