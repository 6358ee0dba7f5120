"""Patterns for TFL elementwise arithmetic and math ops (float, and int32 where TOSA has it),
and ADD, SUB, MUL, MAXIMUM, MINIMUM and SQUARED_DIFFERENCE on quantized data.

Expressions are built with `tfl2tosa.tosa.build.Elementwise`, which holds the
exact floating-point building blocks the lowerings below need (Veltkamp
splitting and Dekker's error-free product, a correctly rounded division, an
exact floor division). This module adds the checks the patterns of this
module, `comparison.py` and `casts.py` share, then one pattern per TFL op.

Numerics (facts from the TFLite reference kernels and the TOSA 1.0
specification):
- TFLite's float ADD/SUB/MUL/DIV clamp their result to the fused
  activation's range, which for NONE is [lowest, max]: x/0 gives FLT_MAX,
  not inf (kernels/internal/common.h ActivationFunctionWithMinMax). DIV, the
  op where finite inputs overflow routinely, reproduces that clamp; ADD, SUB
  and MUL do not (one more op each, for results only infinite inputs or
  overflow near FLT_MAX produce): there TFLite gives +-FLT_MAX, TOSA +-inf.
- int32 ADD/SUB overflow wraps in TFLite and is a REQUIRE failure (an
  unpredictable result) in TOSA; MUL with shift 0 keeps the low 32 bits in
  both. TFLite's MAXIMUM/MINIMUM compute `a > b ? a : b`, so a NaN in the
  first operand is dropped; TOSA (nan_mode PROPAGATE) returns NaN.
- TOSA's ADD, SUB, MUL round to nearest even, FLOOR and CEIL are exact;
  RECIPROCAL and RSQRT are accurate to about an ulp. The exact lowerings
  below rely on nothing more.
- TOSA POW requires a positive finite base and a finite exponent (Arm's
  reference model reports other inputs as UNPREDICTABLE); the POW lowering
  only ever feeds it such operands and builds C's pow() special cases
  around it.

Integer path: ADD, SUB, MUL (int8, int16).

ADD/SUB follow TFLite's add.cc / sub.cc recipe (reference_integer_ops::
AddElementwise, and AddGeneralParamScale for int16): with `twice_max = 2 *
max(s1, s2)` and `left_shift` = 20 for int8, 15 for int16, each input becomes
`MBQM((x - zp) * 2^left_shift, s_i / twice_max)`, the two are added
(subtracted), and the sum is scaled by `twice_max / (2^left_shift * s_out)` to
the output zero point, then clamped to the fused activation range. All
multipliers are computed in double and applied with MultiplyByQuantizedMultiplier.
int16 models whose `pot_scale_int16` is set and whose scales are all powers of
two take TFLite's other, shift-only int16 path, which is not lowered here.

MUL follows mul.cc (reference_integer_ops::MulElementwise):
`zp_out + MBQM((x1 - zp1) * (x2 - zp2), s1 * s2 / s_out)` with the real
multiplier computed in float32 (TFLite multiplies the float scales) and
widened.

TFLite's power-of-two int16 ADD and SUB.

add.cc / sub.cc have two int16 paths. The general one (any scales) is
`add_int` and `sub_int` above. The other is taken when `pot_scale_int16` is set
(the schema's default) and all three scales are powers of two (TFLite's
CheckedLog2: log2 within 1e-3 of an integer, computed in float32) with zero
points 0, as in LSTM cells. There the output shares one input's scale and
the other input's scale is 2^k times smaller (Prepare rejects anything else);
reference_ops::Add / Sub16 (kernels/internal/reference/add.h, sub.h) compute,
elementwise without broadcasting,

    ADD: sat16(x_same + RoundingDivideByPOT(x_small, k))
    SUB: sat16(x1 - RDBPOT(x2, k)) or sat16(RDBPOT(x1, k) - x2)

(gemmlowp SaturatingAdd / SaturatingSub on int16 raw values), then clamp to
the fused activation range. RoundingDivideByPOT rounds half away from zero.

TOSA: the unshifted input is CAST to i32; the shifted one is RESCALEd to i32
by 2^-k with the multiplier 2^30 + 1 and shift 30 + k, single rounding:
`floor(x / 2^k + 1/2 + x / 2^(30 + k))`. For |x| <= 2^15 the extra term is
below 2^-(15 + k), smaller than the 2^-k between a value that is not a tie and
a rounding boundary, and it pushes ties away from zero. ADD or SUB in i32, a
unit RESCALE to int16 (which saturates), the activation's CLAMP.

Integer path: MAXIMUM / MINIMUM work on stored values; TFLite's kernels ignore
differing quantization, so only equal quantization (the converter's `same
scale` constraint) is a real maximum, and other cases are left to the
fallback. SQUARED_DIFFERENCE (int8 only, squared_difference.cc) is like ADD
with a left shift of 7: `a_i = MBQM((x_i - zp_i) 2^7, s_i / (2 max(s_1, s_2)))`,
then `zp_out + MBQM((a_1 - a_2)^2, (2 max)^2 / (2^14 s_out))`, clamped
(tests/test_legalize_integer_data.py pins both against the interpreter).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from legalize.common import (
    constant_value,
    element,
    fused_activation,
    require_static,
    reshape_to_rank,
    scalar,
    tensor_type,
    with_fused_activation,
)
from legalize.integer.data import int8_twin, is_uint8, restore_uint8, to_int8
from legalize.integer.support import (
    integer_pattern,
    require_one_storage,
    require_per_tensor,
    same_quantization,
)
from legalize.quantized import (
    DOUBLE_ROUND,
    SINGLE_ROUND,
    rescale,
    rescale_by_multiplier,
    rescale_from_i32,
    rescale_to_i32,
    round_half_away,
    rounding_mode,
    tflite_quantize_multiplier,
)
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import (
    ElementType,
    ScalarType,
    TensorType,
    UniformQuantized,
    bf16,
    f16,
    f32,
    i32,
    numpy_dtype,
    storage_type,
)
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

# ---------------------------------------------------------------------------
# Helpers the patterns of this module, `comparison.py` and `casts.py` share

_FLOAT_ELEMENTS = (f32, f16, bf16)


def elementwise_for(rw: Rewriter, op: Op) -> Elementwise:
    """An Elementwise at the rank of `op`'s first result."""
    return Elementwise(rw, len(tensor_type(op.results[0]).shape))


def is_float(value: Value) -> bool:
    return element(value) in _FLOAT_ELEMENTS


def is_int32(value: Value) -> bool:
    return element(value) == i32


def first_failure(*checks: Failure | None) -> Failure | None:
    """The first Failure among `checks`. (A Failure is falsy, so `a or b` would
    skip it: never combine checks with `or`.)"""
    return next((c for c in checks if c is not None), None)


def check_types(op: Op, allowed: Sequence[ScalarType]) -> Failure | None:
    """Failure unless `op` is static and every operand/result is in `allowed`."""
    failure = require_static(op)
    if failure is not None:
        return failure
    for value in (*op.operands, *op.results):
        if element(value) not in allowed:
            return Failure(f"{op.name}: element type {element(value)} is not supported")
    return None


def activation(e: Elementwise, value: Value, act: str | None) -> Value | Failure:
    """TFLite's fused activation; int32 results are clamped with MAXIMUM/MINIMUM
    (TOSA CLAMP has no int32 mode) to CalculateActivationRange<int32>'s bounds."""
    if not is_int32(value) or act in (None, "NONE"):
        return fused_activation(e.rw, value, act)
    bounds = {"RELU": (0, None), "RELU6": (0, 6), "RELU_N1_TO_1": (-1, 1), "RELU_0_TO_1": (0, 1)}
    if act not in bounds:
        return Failure(f"fused activation {act} on int32 data")
    low, high = bounds[act]
    value = e.maximum(value, e.like(low, value))
    return value if high is None else e.minimum(value, e.like(high, value))


def saturate_float(e: Elementwise, value: Value) -> Value:
    """CLAMP to [lowest, max]: TFLite's float kernels map +-inf to +-max."""
    limit = float(np.finfo(numpy_dtype(element(value))).max)
    return build.clamp(e.rw, value, -limit, limit)


FLOAT = (f32, f16)
FLOAT_INT = (f32, f16, i32)

# ---------------------------------------------------------------------------
# Binary arithmetic


def _binary_operands(op: Op, rw: Rewriter) -> tuple[Elementwise, Value, Value]:
    e = elementwise_for(rw, op)
    return e, e.operand(op.operands[0]), e.operand(op.operands[1])


def _arithmetic(op: Op, rw: Rewriter, name: str) -> list[Value] | Failure:
    if failed := check_types(op, FLOAT_INT):
        return failed
    e, x, y = _binary_operands(op, rw)
    value = e.mul(x, y) if name == "tosa.mul" else e.binary(name, x, y)
    result = activation(e, value, op.attrs.get("fused_activation_function"))
    return result if isinstance(result, Failure) else [result]


@pattern("tfl.add", types=("f32", "f16", "i32"))
def add(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """ADD (+ fused activation). int32 overflow wraps in TFLite and is a REQUIRE
    failure in TOSA; neither is defined behaviour to preserve."""
    return _arithmetic(op, rw, "tosa.add")


@pattern("tfl.sub", types=("f32", "f16", "i32"))
def sub(op: Op, rw: Rewriter) -> list[Value] | Failure:
    return _arithmetic(op, rw, "tosa.sub")


@pattern("tfl.mul", types=("f32", "f16", "i32"))
def mul(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """MUL with shift 0: for int32 that is the low 32 bits of the product (TOSA 1.0
    MUL), which is what TFLite's wrapping int32 multiply gives."""
    return _arithmetic(op, rw, "tosa.mul")


@pattern("tfl.div", types=("f32", "f16", "i32"))
def div(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Float: IEEE division (Elementwise.divide_ieee), then TFLite's
    activation clamp (NONE: [lowest, max], so x/0 is +-FLT_MAX as in TFLite).
    int32: INTDIV, which truncates like TFLite's C++ `/`."""
    if failed := check_types(op, FLOAT_INT):
        return failed
    e, x, y = _binary_operands(op, rw)
    act = op.attrs.get("fused_activation_function")
    if is_int32(x):
        result = activation(e, e.intdiv(x, y), act)
        return result if isinstance(result, Failure) else [result]
    quotient = e.divide_ieee(x, y)
    result = saturate_float(e, quotient) if act in (None, "NONE") else \
        fused_activation(rw, quotient, act)
    return result if isinstance(result, Failure) else [result]


@pattern("tfl.div", label="div_reciprocal", types=("f32", "f16"))
def div_reciprocal(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """x * RECIPROCAL(y): two ops, within ~1.5 ulp (many quotients are not
    correctly rounded). Only used when the `div` pattern is disabled."""
    if failed := check_types(op, FLOAT):
        return failed
    e, x, y = _binary_operands(op, rw)
    quotient = e.mul(x, e.reciprocal(y))
    act = op.attrs.get("fused_activation_function")
    result = saturate_float(e, quotient) if act in (None, "NONE") else \
        fused_activation(rw, quotient, act)
    return result if isinstance(result, Failure) else [result]


@pattern("tfl.maximum", "tfl.minimum", types=("f32", "f16", "i32"))
def maximum_minimum(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """MAXIMUM / MINIMUM, NaN propagating. TFLite computes `a > b ? a : b`,
    which returns b when a is NaN; TOSA returns NaN either way."""
    if failed := check_types(op, FLOAT_INT):
        return failed
    e, x, y = _binary_operands(op, rw)
    return [e.maximum(x, y) if op.name == "tfl.maximum" else e.minimum(x, y)]


@pattern("tfl.squared_difference", types=("f32", "f16", "i32"))
def squared_difference(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """(x - y) * (x - y), as TFLite's reference kernel computes it."""
    if failed := check_types(op, FLOAT_INT):
        return failed
    e, x, y = _binary_operands(op, rw)
    difference = e.sub(x, y)
    return [e.mul(difference, difference)]


@pattern("tfl.add_n", types=("f32", "f16", "i32"))
def add_n(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """A left-to-right chain of ADDs: TFLite's AddN accumulates in input order."""
    if failed := check_types(op, FLOAT_INT):
        return failed
    e = elementwise_for(rw, op)
    inputs = [e.operand(v) for v in op.operands]
    total = inputs[0]
    for value in inputs[1:]:
        total = e.add(total, value)
    if total is op.operands[0]:  # a single input: keep a distinct result
        total = build.op(rw, "tosa.identity", [total], tensor_type(total))
    return [total]


@pattern("tfl.floor_div", types=("f32", "f16", "i32"))
def floor_div(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """floor(x / y). Float: Elementwise.floor_division, exact where |x/y| < 2^23
    (TFLite divides in double then floors). int32: INTDIV truncates, so
    subtract 1 where the remainder is non-zero and x, y differ in sign."""
    division = _floor_division(op, rw)
    return division if isinstance(division, Failure) else [division[0]]


@pattern("tfl.floor_mod", types=("f32", "f16", "i32"))
def floor_mod(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """x - floor(x / y) * y, with the sign of the divisor (TFLite reference_ops::
    FloorMod: fmod, then + y where the signs differ). Float: the exact remainder
    of Elementwise.floor_division; int32: INTDIV-based, integer ops only."""
    division = _floor_division(op, rw)
    return division if isinstance(division, Failure) else [division[1]]


def _floor_division(op: Op, rw: Rewriter) -> tuple[Value, Value] | Failure:
    """(floor(x / y), x - floor(x / y) * y) of op's operands, float or int32."""
    if failed := check_types(op, FLOAT_INT):
        return failed
    e, x, y = _binary_operands(op, rw)
    return _int_floor_division(e, x, y) if is_int32(x) else e.floor_division(x, y)


def _int_floor_division(e: Elementwise, x: Value, y: Value) -> tuple[Value, Value]:
    """int32 (floor quotient, floor remainder) from truncating INTDIV."""
    zero = e.like(0, x)
    quotient = e.intdiv(x, y)
    remainder = e.sub(x, e.mul(quotient, y))
    signs_differ = e.logical_xor(e.less(remainder, zero), e.less(y, zero))
    adjust = e.logical_and(e.logical_not(e.equal(remainder, zero)), signs_differ)
    return (e.select(adjust, e.sub(quotient, e.like(1, x)), quotient),
            e.select(adjust, e.add(remainder, y), remainder))


@pattern("tfl.pow", types=("f32", "f16"), label="pow")
def pow_(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """C's pow(x, y) (TFLite calls std::pow) from TOSA POW on a positive finite base.

    |x|^y comes from POW where |x| is positive and finite and y finite; the
    remaining cases follow from the sign of (|x| - 1) * y: positive gives inf,
    negative 0 (0^-1 = inf, inf^-2 = 0, 0.5^inf = 0, ...); y == 0 or
    |x| == 1 give 1 (C99 F.9.4.4, including 0^0 and 1^NaN). A negative base
    then negates the result for odd integer y and gives NaN for non-integer
    finite y; -0 counts as negative for the odd case ((-0)^-3 = -inf).
    """
    if failed := check_types(op, FLOAT):
        return failed
    e, x, y = _binary_operands(op, rw)
    zero, one = e.like(0.0, x), e.like(1.0, x)
    inf = e.like(math.inf, x)
    base = e.abs(x)
    in_domain = e.logical_and(e.logical_and(e.greater(base, zero), e.less(base, inf)),
                              e.less(e.abs(y), inf))
    magnitude = e.pow(e.select(in_domain, base, one), e.select(in_domain, y, one))
    direction = e.mul(e.sub(base, one), y)
    extreme = e.select(e.greater(direction, zero), inf,
                       e.select(e.less(direction, zero), zero, direction))
    magnitude = e.select(in_domain, magnitude, extreme)
    magnitude = e.select(e.logical_or(e.equal(y, zero), e.equal(base, one)), one, magnitude)
    is_integer = e.equal(e.floor(y), y)
    half = e.mul(y, e.like(0.5, x))
    is_odd = e.logical_and(is_integer, e.logical_not(e.equal(e.floor(half), half)))
    signed = e.select(e.logical_and(e.sign_bit(x), is_odd), e.negate(magnitude), magnitude)
    # x < 0 ignores the sign of zero: (-0)^0.5 is +0, not NaN.
    undefined = e.logical_and(e.logical_and(e.less(x, zero), e.logical_not(is_integer)),
                              e.less(base, inf))
    return [e.select(undefined, e.like(math.nan, x), signed)]


@pattern("tfl.atan2", types=("f32", "f16"))
def atan2(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """atan2(y, x) from an odd polynomial for atan on [0, 1] plus quadrant fix-ups.

    t = min(|x|, |y|) / max(|x|, |y|) (RECIPROCAL and MUL); atan(t) =
    t * P(t^2) with 9 coefficients fitted for relative error on [0, 1]
    (max 1.6e-8 in exact arithmetic, 2 ulp in float32 evaluation); then
    pi/2 - a if |y| > |x|, pi - a if x is negative (or -0), negated if y is
    negative (or -0). Against TFLite's std::atan2 on 22k samples over 60
    binades and all quadrants: at most 3 ulp, relative error 2.3e-7 (the
    test asserts 1e-6). Both zero: t = 0 (atan2(+-0, +-0) = +-0 or +-pi);
    both infinite: t = 1 (+-pi/4, +-3pi/4).
    """
    if failed := check_types(op, FLOAT):
        return failed
    e, y, x = _binary_operands(op, rw)
    zero, one = e.like(0.0, x), e.like(1.0, x)
    ax, ay = e.abs(x), e.abs(y)
    smaller, larger = e.minimum(ax, ay), e.maximum(ax, ay)
    t = e.mul(smaller, e.reciprocal(larger))
    t = e.select(e.equal(ax, ay), one, t)
    t = e.select(e.equal(larger, zero), zero, t)
    s = e.mul(t, t)
    poly = e.like(ATAN_COEFFICIENTS[-1], x)
    for c in ATAN_COEFFICIENTS[-2::-1]:
        poly = e.add(e.mul(poly, s), e.like(c, x))
    angle = e.mul(poly, t)
    angle = e.select(e.greater(ay, ax), e.sub(e.like(math.pi / 2, x), angle), angle)
    angle = e.select(e.sign_bit(x), e.sub(e.like(math.pi, x), angle), angle)
    return [e.select(e.sign_bit(y), e.negate(angle), angle)]


# atan(t) ~ t * sum(c[k] * t^(2k)) on [0, 1], fitted for relative error.
ATAN_COEFFICIENTS = (
    1.0, -0.33333081007003784, 0.19992727041244507, -0.1420430839061737,
    0.1064300611615181, -0.0750785693526268, 0.04272548854351044,
    -0.016085345298051834, 0.002853167010471225,
)

# ---------------------------------------------------------------------------
# Unary math

_UNARY_FLOAT = {
    "tfl.exp": "tosa.exp", "tfl.log": "tosa.log", "tfl.sin": "tosa.sin", "tfl.cos": "tosa.cos",
    "tfl.rsqrt": "tosa.rsqrt", "tfl.floor": "tosa.floor", "tfl.ceil": "tosa.ceil",
}


@pattern(*_UNARY_FLOAT, types=("f32", "f16"))
def unary_math(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """One TOSA op each: EXP, LOG, SIN, COS, RSQRT, FLOOR, CEIL (LOG(x < 0) and
    RSQRT(x < 0) are NaN and LOG(0) is -inf in both TFLite and TOSA)."""
    if failed := check_types(op, FLOAT):
        return failed
    return [build.op(rw, _UNARY_FLOAT[op.name], [op.operands[0]], tensor_type(op.results[0]))]


@pattern("tfl.abs", types=("f32", "f16", "i32"), label="abs")
def abs_(op: Op, rw: Rewriter) -> list[Value] | Failure:
    if failed := check_types(op, FLOAT_INT):
        return failed
    return [elementwise_for(rw, op).abs(op.operands[0])]


@pattern("tfl.neg", types=("f32", "f16", "i32"))
def neg(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """NEGATE with zero points 0."""
    if failed := check_types(op, FLOAT_INT):
        return failed
    return [elementwise_for(rw, op).negate(op.operands[0])]


@pattern("tfl.square", types=("f32", "f16", "i32"))
def square(op: Op, rw: Rewriter) -> list[Value] | Failure:
    if failed := check_types(op, FLOAT_INT):
        return failed
    x = op.operands[0]
    return [elementwise_for(rw, op).mul(x, x)]


@pattern("tfl.sqrt", types=("f32", "f16"))
def sqrt(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """sqrt(x) correctly rounded (in all cases we could test) from RSQRT.

    s0 = x * rsqrt(x) is within ~1.5 ulp; the residual x - s0^2 is computed
    exactly (Dekker's product, Sterbenz for the subtraction) and one Newton
    step s0 + residual * rsqrt(x) / 2 corrects it. x * rsqrt(x) is NaN at 0
    and +inf (0 * inf), so those (and -0) return x itself, as sqrt does;
    negative x and NaN give NaN through RSQRT.
    """
    if failed := check_types(op, FLOAT):
        return failed
    e = elementwise_for(rw, op)
    x = op.operands[0]
    r = e.rsqrt(x)
    s0 = e.mul(x, r)
    p, err = e.two_product(s0, s0)
    residual = e.sub(e.sub(x, p), err)
    s1 = e.add(s0, e.mul(residual, e.mul(r, e.like(0.5, x))))
    s = e.select(e.is_finite(s1), s1, s0)
    special = e.logical_or(e.equal(x, e.like(0.0, x)), e.equal(x, e.like(math.inf, x)))
    return [e.select(special, x, s)]


@pattern("tfl.round", types=("f32", "f16"), label="round")
def round_(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Round half to even (TFLite's ROUND), exactly, from FLOOR.

    f = floor(x), d = x - f in [0, 1): round up when d > 0.5, or d == 0.5
    and f is odd (floor(f / 2) != f / 2). x - f is exact except for x in
    (-0.5, 0), where it rounds to a value >= 0.5 and still rounds x up to 0,
    correctly (x = -0.49999997 included). Large |x| and infinities have
    d = 0 or NaN and keep f; NaN stays NaN.
    """
    if failed := check_types(op, FLOAT):
        return failed
    e = elementwise_for(rw, op)
    x = op.operands[0]
    f = e.floor(x)
    d = e.sub(x, f)
    half = e.like(0.5, x)
    f_half = e.mul(f, half)
    odd = e.logical_not(e.equal(e.floor(f_half), f_half))
    up = e.logical_or(e.greater(d, half), e.logical_and(e.equal(d, half), odd))
    return [e.select(up, e.add(f, e.like(1.0, x)), f)]


@pattern("tfl.sign", types=("f32", "f16", "i32"))
def sign(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """1 for x > 0, -1 for x < 0, else 0 (TFLite's sign: NaN and -0 give 0)."""
    if failed := check_types(op, FLOAT_INT):
        return failed
    e = elementwise_for(rw, op)
    x = op.operands[0]
    zero = e.like(0, x)
    negative = e.select(e.less(x, zero), e.like(-1, x), zero)
    return [e.select(e.greater(x, zero), e.like(1, x), negative)]


# ---------------------------------------------------------------------------
# Integer bit operations


_SIGNED_INTS = ("i8", "i16", "i32")


def _signed_integer_result(op: Op) -> ElementType | Failure:
    """The result's element type, if it is one of the signed integers TOSA's
    bit operations take (and `op` is static)."""
    failure = require_static(op)
    if failure is not None:
        return failure
    elem = element(op.results[0])
    if elem.name not in _SIGNED_INTS:
        return Failure(f"{op.name} on {elem} has no TOSA mode (signed integers only)")
    return elem


@pattern("tfl.bitwise_xor", types=("i32",))
def bitwise_xor(op: Op, rw: Rewriter) -> list[Value] | Failure:
    elem = _signed_integer_result(op)
    if isinstance(elem, Failure):
        return elem
    e, x, y = _binary_operands(op, rw)
    return [e.binary("tosa.bitwise_xor", x, y)]


@pattern("tfl.right_shift", types=("i32",))
def right_shift(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """ARITHMETIC_RIGHT_SHIFT without rounding; the shift amount is clamped to
    [0, bits - 1] first, as TFLite's RightShift does (TOSA requires that range)."""
    elem = _signed_integer_result(op)
    if isinstance(elem, Failure):
        return elem
    e, x, y = _binary_operands(op, rw)
    amounts = constant_value(op.operands[1])
    if amounts is not None:
        clamped = np.clip(np.asarray(amounts), 0, elem.bits - 1)
        y = e.full(clamped.reshape(tensor_type(y).shape), elem)
    elif elem == i32:
        y = e.minimum(e.maximum(y, e.like(0, y)), e.like(31, y))
    else:
        y = build.clamp(rw, y, 0, elem.bits - 1)
    return [e.binary("tosa.arithmetic_right_shift", x, y, round=False)]


# ---------------------------------------------------------------------------
# Constant-shaped results


_CONSTANT_ELEMENTS = ("f32", "f16", "i32", "i16", "i8", "i1")


def _static_result(op: Op) -> TensorType | Failure:
    failure = require_static(op)
    if failure is not None:
        return failure
    return tensor_type(op.results[0])


@pattern("tfl.zeros_like", kind="any", types=("f32", "f16", "i32", "bool"))
def zeros_like(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """A constant of the result's shape and type (the input's values are unused).
    (TFLite has no ONES_LIKE builtin: its converter emits FILL or a constant.)"""
    t = _static_result(op)
    if isinstance(t, Failure):
        return t
    if storage_type(t.element).name not in _CONSTANT_ELEMENTS:
        return Failure(f"{op.name} on {t.element} has no TOSA constant")
    # Stored zeros, also for a quantized type (TFLite zero-fills the buffer).
    return [build.const(rw, np.zeros(t.shape, dtype=numpy_dtype(t.element)), t.element)]


@pattern("tfl.fill", kind="any", types=("f32", "f16", "i32", "bool"))
def fill(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """FILL with static output dims: a constant when the value is constant, else
    the value reshaped to [1] * rank and TILEd to the output shape."""
    t = _static_result(op)
    if isinstance(t, Failure):
        return t
    if storage_type(t.element).name not in _CONSTANT_ELEMENTS:
        return Failure(f"FILL of {t.element} has no TOSA mode")
    value = op.operands[1]
    array = constant_value(value)
    if array is not None:
        return [build.const(rw, np.full(t.shape, np.asarray(array).reshape(()),
                                        dtype=numpy_dtype(t.element)), t.element)]
    ones = (1,) * len(t.shape)
    scalar = build.reshape(rw, value, ones)
    if not t.shape:
        return [scalar]
    return [build.op(rw, "tosa.tile", [scalar, build.const_shape(rw, t.shape)], t)]


__all__ = ["check_types", "elementwise_for", "first_failure",
           "is_float", "is_int32"]


# ---------------------------------------------------------------------------
# Integer path: ADD, SUB, MUL (int8, int16)

# TFLite's `left_shift` for ADD/SUB: inputs are scaled up by 2^20 (int8) or 2^15
# (int16) first.
ADD_LEFT_SHIFT = {8: 20, 16: 15}


def _aligned_inputs(rw: Rewriter, op: Op) -> tuple[Value, Value, TensorType]:
    """Both inputs at the result's rank, and the result type."""
    result = op.results[0].type
    rank = len(result.shape)
    return (reshape_to_rank(rw, op.operands[0], rank), reshape_to_rank(rw, op.operands[1], rank),
            result)


def _add_input(rw: Rewriter, x: Value, q: UniformQuantized, twice_max: float,
               rounding: str) -> Value:
    """`MBQM((x - zp) * 2^left_shift, s / twice_max)` as i32.

    The 2^left_shift step is exact and separate: folding it into the multiplier
    would move the first rounding of the double-rounding scheme. For int8 it is
    a RESCALE; int16 values times 2^15 are too wide for a unit-scale RESCALE
    (apply_scale_32 needs |v| < 2^(shift - 1)), so they are CAST to i32 and
    multiplied (int16 zero points are 0). When `s / twice_max` is exactly 0.5
    (the input with the larger scale), MBQM of that product by 2^30 / 2^31 is
    exact, so the whole step is a multiplication by 2^(left_shift - 1).
    """
    left_shift = ADD_LEFT_SHIFT[q.storage.bits]
    ratio = q.scale / twice_max
    exact_shift = left_shift - 1 if ratio == 0.5 else left_shift
    if q.storage.bits == 8:
        shifted = rescale_to_i32(rw, x, 2.0 ** exact_shift)
    else:
        wide = build.cast(rw, x, i32)
        shifted = build.mul(rw, wide, scalar(rw, 1 << exact_shift, i32,
                                             len(tensor_type(x).shape)))
    if ratio == 0.5:
        return shifted
    return rescale(rw, shifted, ratio, i32, input_zp=0, output_zp=0, rounding=rounding)


def _power_of_two(scale: float) -> bool:
    """TFLite's CheckedLog2 (quantization_util.cc): float32 log2 within 1e-3 of an integer."""
    log2 = np.float32(np.log(np.float32(scale))) * (np.float32(1) / np.float32(np.log(2.0)))
    return abs(float(log2) - round_half_away(float(log2))) < 1e-3


def _add_or_sub(op: Op, rw: Rewriter, tosa_name: str) -> list[Value] | Failure:
    elements = require_one_storage(op, [*op.operands[:2], op.results[0]], "i8", "i16")
    if isinstance(elements, Failure):
        return elements
    q1, q2, out = elements
    if out.storage.bits == 16 and op.attrs.get("pot_scale_int16", True) and all(
            _power_of_two(q.scale) for q in (q1, q2, out)):
        return Failure(f"{op.name}: TFLite's power-of-two int16 path is not lowered")
    rounding = rounding_mode(op.name)
    twice_max = 2.0 * max(q1.scale, q2.scale)
    x1, x2, result = _aligned_inputs(rw, op)
    a = _add_input(rw, x1, q1, twice_max, rounding)
    b = _add_input(rw, x2, q2, twice_max, rounding)
    total = build.op(rw, tosa_name, [a, b], result.with_element(i32))
    scale = twice_max / ((1 << ADD_LEFT_SHIFT[out.storage.bits]) * out.scale)
    scaled = rescale_from_i32(rw, total, scale, out, rounding)
    return with_fused_activation(rw, op, scaled)


@pattern("tfl.add", kind="integer", label="add_int", types=("i8", "i16"))
@integer_pattern
def add_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Both inputs to a common 2^left_shift-scaled i32, ADD, RESCALE to the output (add.cc)."""
    return _add_or_sub(op, rw, "tosa.add")


@pattern("tfl.sub", kind="integer", label="sub_int", types=("i8", "i16"))
@integer_pattern
def sub_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """As ADD with SUB of the scaled inputs (sub.cc uses add.cc's multipliers)."""
    return _add_or_sub(op, rw, "tosa.sub")


@pattern("tfl.mul", kind="integer", label="mul_int", types=("i8", "i16"))
@integer_pattern
def mul_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """RESCALE both inputs to i32 without zero point, MUL (the i32 product is exact
    for 8- and 16-bit inputs), RESCALE by float32(s1 * s2 / s_out) to the output
    (mul.cc; int16 zero points are 0)."""
    elements = require_one_storage(op, [*op.operands[:2], op.results[0]], "i8", "i16")
    if isinstance(elements, Failure):
        return elements
    q1, q2, out = elements
    x1, x2, result = _aligned_inputs(rw, op)
    product = build.mul(rw, rescale_to_i32(rw, x1, rounding=SINGLE_ROUND),
                        rescale_to_i32(rw, x2, rounding=SINGLE_ROUND),
                        result_type=result.with_element(i32))
    scale = float(np.float32(q1.scale) * np.float32(q2.scale) / np.float32(out.scale))
    scaled = rescale_from_i32(rw, product, scale, out, rounding_mode(op.name))
    return with_fused_activation(rw, op, scaled)


# ---------------------------------------------------------------------------
# Integer path: power-of-two int16 ADD and SUB

# RoundingDivideByPOT of an int16 value is defined for exponents up to 15.
MAX_INPUT_SHIFT = 15


def checked_log2(scale: float) -> int | None:
    """TFLite's CheckedLog2 (quantization_util.cc): the rounded float32 log2 of
    `scale` if it is within 1e-3 of an integer, else None."""
    log2 = np.float32(np.log(np.float32(scale))) * (np.float32(1) / np.float32(np.log(2.0)))
    rounded = float(np.sign(log2) * np.floor(np.abs(log2) + np.float32(0.5)))
    return int(rounded) if abs(float(log2) - rounded) < 1e-3 else None


def _input_shifts(op: Op) -> tuple[int, int, UniformQuantized] | Failure:
    """TFLite's (input1_shift, input2_shift) as right shifts, and the output type."""
    elements = require_per_tensor(op, [*op.operands[:2], op.results[0]], "i16")
    if isinstance(elements, Failure):
        return elements
    if not op.attrs.get("pot_scale_int16", True):
        return Failure(f"{op.name}: pot_scale_int16 is false (the general int16 path)")
    logs = [checked_log2(q.scale) for q in elements]
    if None in logs or any(q.zero_point for q in elements):
        return Failure(f"{op.name}: scales or zero points outside TFLite's power-of-two path")
    if tensor_type(op.operands[0]).shape != tensor_type(op.operands[1]).shape:
        return Failure(f"{op.name}: TFLite's power-of-two int16 path does not broadcast")
    shifts = [logs[2] - logs[0], logs[2] - logs[1]]
    if min(shifts) != 0 or max(shifts) > MAX_INPUT_SHIFT:
        return Failure(f"{op.name}: input scales 2^{logs[0]}, 2^{logs[1]} for an output "
                       f"2^{logs[2]} (TFLite needs one equal to it, the other smaller)")
    return shifts[0], shifts[1], elements[2]


def _widened(rw: Rewriter, x: Value, shift: int) -> Value:
    """RoundingDivideByPOT(x, shift) as i32 (x itself for shift 0)."""
    if shift == 0:
        return build.cast(rw, x, i32)
    return rescale_by_multiplier(rw, x, [(1 << 30) + 1], [30 + shift], i32, input_zp=0,
                                 output_zp=0, rounding=SINGLE_ROUND)


def _add_or_sub_pot(op: Op, rw: Rewriter, tosa_name: str) -> list[Value] | Failure:
    checked = _input_shifts(op)
    if isinstance(checked, Failure):
        return checked
    shift1, shift2, out = checked
    total = build.op(rw, tosa_name, [_widened(rw, op.operands[0], shift1),
                                     _widened(rw, op.operands[1], shift2)],
                     tensor_type(op.results[0]).with_element(i32))
    saturated = rescale_by_multiplier(rw, total, [1 << 30], [30], out, input_zp=0, output_zp=0,
                                      rounding=SINGLE_ROUND)
    activated = fused_activation(rw, saturated, op.attrs.get("fused_activation_function"))
    return activated if isinstance(activated, Failure) else [activated]


@pattern("tfl.add", kind="integer", label="add_int16_pot", types=("i16",))
@integer_pattern
def add_int16_pot(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Power-of-two int16 ADD: the finer input divided by 2^k (half away from
    zero), ADD in i32, saturate to int16, CLAMP."""
    return _add_or_sub_pot(op, rw, "tosa.add")


@pattern("tfl.sub", kind="integer", label="sub_int16_pot", types=("i16",))
@integer_pattern
def sub_int16_pot(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Power-of-two int16 SUB, as ADD with SUB in i32 (Sub16)."""
    return _add_or_sub_pot(op, rw, "tosa.sub")


# ---------------------------------------------------------------------------
# Integer path: MAXIMUM / MINIMUM

_EXTREMA = {"tfl.maximum": "tosa.maximum", "tfl.minimum": "tosa.minimum"}


@pattern(*_EXTREMA, kind="integer", label="maximum_minimum_int", types=("i8", "u8", "i16"))
@integer_pattern
def maximum_minimum_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """MAXIMUM / MINIMUM of the stored values (TOSA's are i32 only): both inputs
    CAST to i32 (uint8 through the int8 twin), the extremum, CAST back, which
    is exact since it is one of the inputs."""
    result = op.results[0]
    shared = same_quantization(op, [*op.operands[:2], result], ("i8", "ui8", "i16"))
    if isinstance(shared, Failure):
        return shared
    out = tensor_type(result)
    rank = len(out.shape)
    wide = [build.cast(rw, to_int8(rw, reshape_to_rank(rw, v, rank)), i32)
            for v in op.operands[:2]]
    extremum = build.op(rw, _EXTREMA[op.name], wide, out.with_element(i32),
                        nan_mode="PROPAGATE")
    twin = out.with_element(int8_twin(shared)) if is_uint8(shared) else out
    return [restore_uint8(rw, build.cast(rw, extremum, twin.element), result)]


# ---------------------------------------------------------------------------
# Integer path: SQUARED_DIFFERENCE

# squared_difference.cc: inputs are shifted left by 7 bits before their scaling.
SQUARED_DIFFERENCE_LEFT_SHIFT = 7


@pattern("tfl.squared_difference", kind="integer", label="squared_difference_int8",
         types=("i8",))
@integer_pattern
def squared_difference_int8(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Each input: RESCALE (x - zp) 2^7 exactly, RESCALE by s_i / (2 max s);
    SUB, MUL (i32, |d| <= 2^15), RESCALE by (2 max s)^2 / (2^14 s_out) to the
    output; every scaling double-rounded (TFLite's MBQM_SmallerThanOneExp)."""
    elements = require_per_tensor(op, [*op.operands[:2], op.results[0]], "i8")
    if isinstance(elements, Failure):
        return elements
    q1, q2, out = elements
    # TFLite doubles the larger float32 scale (exact) and divides in double.
    twice_max = 2.0 * max(q1.scale, q2.scale)
    output_scale = twice_max * twice_max / ((1 << 2 * SQUARED_DIFFERENCE_LEFT_SHIFT) * out.scale)
    if tflite_quantize_multiplier(output_scale)[1] > 0:
        return Failure(f"{op.name}: output scaling {output_scale} >= 1 (TFLite requires < 1)")
    result = tensor_type(op.results[0])
    rank = len(result.shape)
    scaled = []
    for x, q in ((op.operands[0], q1), (op.operands[1], q2)):
        shifted = rescale_to_i32(rw, reshape_to_rank(rw, x, rank),
                                 float(1 << SQUARED_DIFFERENCE_LEFT_SHIFT))
        scaled.append(rescale(rw, shifted, q.scale / twice_max, i32, input_zp=0, output_zp=0,
                              rounding=DOUBLE_ROUND))
    difference = build.op(rw, "tosa.sub", scaled, result.with_element(i32))
    square = build.mul(rw, difference, difference, result_type=result.with_element(i32))
    return [rescale_from_i32(rw, square, output_scale, out, DOUBLE_ROUND)]
