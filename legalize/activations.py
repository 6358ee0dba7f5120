"""Patterns for TFL activations: RELU family, LEAKY_RELU, PRELU, LOGISTIC, TANH,
GELU, ELU, HARD_SWISH on float data, and the quantized activations (EXP, LOG
and RSQRT among them) in integer arithmetic. SOFTMAX and LOG_SOFTMAX are in
legalize/softmax.py, which a model with a softmax and no other activation
loads alone.

Each float lowering follows the arithmetic of TFLite's reference kernel
(`tensorflow/lite/kernels/internal/reference/*.h`) step by step, so that the
only differences left are the ulp-bounded precision of TOSA's transcendental
ops and the exact-division-vs-reciprocal rounding where TOSA has no divide.

Integer path: quantized activations, bit exact with TFLite's reference kernels.

| op                                | int8 / uint8                         | int16                          |
|-----------------------------------|--------------------------------------|--------------------------------|
| LOGISTIC, TANH                    | TABLE (LUTPopulate, float32)         | the fixed-point kernel: GATHER from TFLite's sigmoid table + integer ops |
| EXP, LOG, GELU                    | TABLE (LUTPopulate, float32)         | TABLE (LUTPopulate int16) + RESCALE 2^-7 |
| RSQRT                             | TABLE of the integer kernel (int8)   | TABLE (LUTPopulate int16) + RESCALE 2^-7 |
| ELU                               | TABLE (LUTPopulate, int8 only)       | -                              |
| HARD_SWISH                        | TABLE of the integer kernel          | -                              |
| RELU, RELU6 (+N1_TO_1, 0_TO_1: 8-bit) | RESCALE + CLAMP                  | RESCALE + CLAMP                |
| LEAKY_RELU                        | RESCALE x2 + SELECT on the sign      | same                           |
| PRELU                             | RESCALE, MUL by alpha, RESCALE x2 + SELECT | -                        |

(uint8 RELU/LEAKY_RELU/PRELU compute on int8 twins between exact unit
RESCALEs; types TFLite has no kernel for are refused.)

An 8-bit input takes only 256 values, so any per-element function of it is
one TOSA TABLE; the table holds exactly what TFLite's kernel computes for
each value (its float32 LUT, or its integer arithmetic replayed in numpy).
uint8 tensors sit in signless i8 storage: the TABLE is indexed by the stored
byte, so a uint8 table is the same function permuted (`_tosa_table_8bit`).

TFLite's int16 LUT kernels (kernels/internal/common.h LUTPopulate<int16_t>,
LUTLookup) interpolate a 513-entry table on 7 fractional bits and round
`(slope * frac + 64) >> 7`: TOSA's int16 TABLE gives `(base << 7) + slope *
frac` exactly, and a RESCALE by 2^-7 with SINGLE_ROUND adds the 64 and shifts.

The facts were measured against TF 2.20's interpreter (BUILTIN_REF) on every
input value over many random scales; where they differ from the kernel
sources we could read, the comments say so.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from legalize.common import require_static, reshape_to_rank, scalar, tensor_type
from legalize.integer.data import int8_twin, is_uint8, restore_uint8, to_int8
from legalize.integer.support import integer_pattern, require_one_storage
from legalize.quantized import (
    INT32_MAX,
    IntOrArray,
    SINGLE_ROUND,
    kept_table,
    quantize_scalar,
    rescale,
    rescale_to_i32,
    rounding_divide_by_pot,
    rounding_mode,
    saturating_left_shift,
    saturating_rounding_doubling_high_mul,
    table_i16,
    tflite_quantize_multiplier,
    wrap32,
)
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import (
    TensorType,
    UniformQuantized,
    i1,
    i8,
    i16,
    i32,
    numpy_dtype,
    storage_type,
)
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

# ---------------------------------------------------------------------------
# Helpers


def float_operand(op: Op) -> Failure | None:
    """Failure unless `op` is statically shaped (the driver hands float patterns
    no quantized op)."""
    return require_static(op)


def _result(op: Op) -> TensorType:
    return tensor_type(op.results[0])


# ---------------------------------------------------------------------------
# Clamps

# TFLite's bounded ReLUs as [min, max] (reference_ops: Relu, Relu6, Relu1, Relu0To1).
_RELU_BOUNDS = {
    "tfl.relu": (0.0, math.inf),
    "tfl.relu6": (0.0, 6.0),
    "tfl.relu_n1_to_1": (-1.0, 1.0),
    "tfl.relu_0_to_1": (0.0, 1.0),
}


@pattern("tfl.relu", "tfl.relu6", "tfl.relu_n1_to_1", "tfl.relu_0_to_1")
def relu(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """CLAMP to the activation's range (unbounded above: the type's largest finite)."""
    t = _result(op)
    if not t.element.is_float:
        return Failure(f"{op.name}: a {t.element} RELU needs quantization parameters")
    low, high = _RELU_BOUNDS[op.name]
    if high == math.inf:
        high = float(np.finfo(numpy_dtype(t.element)).max)
    return [build.clamp(rw, op.operands[0], low, high)]


# ---------------------------------------------------------------------------
# Piecewise linear


@pattern("tfl.leaky_relu")
def leaky_relu(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SELECT(x > 0, x, x * alpha), TFLite's `val > 0 ? val : val * alpha`
    (a MAXIMUM would be wrong for alpha > 1 or alpha < 0)."""
    if (failure := float_operand(op)) is not None:
        return failure
    x = op.operands[0]
    t = _result(op)
    e = Elementwise(rw, len(t.shape))
    scaled = e.mul(x, e.const(float(op.attrs.get("alpha", 0.2)), t.element))
    positive = e.greater(x, e.const(0.0, t.element))
    return [e.select(positive, x, scaled)]


@pattern("tfl.prelu")
def prelu(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SELECT(x >= 0, x, x * alpha) with alpha broadcast (TFLite reference
    `BroadcastPrelu4DSlow`: `input >= 0 ? input : input * alpha`)."""
    if (failure := float_operand(op)) is not None:
        return failure
    t = _result(op)
    e = Elementwise(rw, len(t.shape))
    x, alpha = (reshape_to_rank(rw, v, e.rank) for v in op.operands)
    scaled = e.mul(x, alpha)
    non_negative = e.greater_equal(x, e.const(0.0, t.element))
    return [e.select(non_negative, x, scaled)]


@pattern("tfl.hard_swish")
def hard_swish(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """x * CLAMP(x + 3, 0, 6) * (1/6); TFLite divides by 6 (1 ulp apart)."""
    if (failure := float_operand(op)) is not None:
        return failure
    x = op.operands[0]
    t = _result(op)
    e = Elementwise(rw, len(t.shape))
    relu6 = build.clamp(rw, e.add(x, e.const(3.0, t.element)), 0.0, 6.0)
    return [e.mul(e.mul(x, relu6), e.const(1.0 / 6.0, t.element))]


# ---------------------------------------------------------------------------
# Transcendental


@pattern("tfl.logistic")
def logistic(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SIGMOID."""
    x = op.operands[0]
    return [build.op(rw, "tosa.sigmoid", [x], tensor_type(x))]


@pattern("tfl.tanh")
def tanh(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TANH."""
    x = op.operands[0]
    return [build.op(rw, "tosa.tanh", [x], tensor_type(x))]


@pattern("tfl.elu")
def elu(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SELECT(x < 0, expm1(x), x), TFLite's `val < 0 ? expm1(val) : val`.

    TOSA has no EXPM1, and exp(x) - 1 cancels near 0. The identity
    expm1(x) = tanh(x / 2) * (exp(x) + 1) has no cancellation: tanh keeps
    its relative accuracy near 0 and exp(x) + 1 lies in (1, 2] for x < 0.
    """
    if (failure := float_operand(op)) is not None:
        return failure
    x = op.operands[0]
    t = _result(op)
    e = Elementwise(rw, len(t.shape))
    half = e.mul(x, e.const(0.5, t.element))
    exp_plus_one = e.add(e.unary("tosa.exp", x), e.const(1.0, t.element))
    expm1 = e.mul(e.unary("tosa.tanh", half), exp_plus_one)
    negative = e.greater(e.const(0.0, t.element), x)
    return [e.select(negative, expm1, x)]


# sqrt(2 / pi) as TFLite's kernel rounds it: float(M_2_SQRTPI * M_SQRT1_2).
_SQRT_2_OVER_PI = float(np.float32(2.0 / math.sqrt(math.pi) * math.sqrt(0.5)))
_SQRT_HALF = float(np.float32(math.sqrt(0.5)))


@pattern("tfl.gelu")
def gelu(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """GELU as TFLite's reference kernel (reference/gelu.h) evaluates it.

    exact:        0.5 * x * (1 + erf(x * sqrt(1/2)))       via ERF
    approximate:  0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    x^3 is x * x * x (MULs in TFLite's order): TOSA POW requires a
    non-negative base, so POW(x, 3) would be unpredictable for x < 0.
    """
    if (failure := float_operand(op)) is not None:
        return failure
    x = op.operands[0]
    elem = _result(op).element
    e = Elementwise(rw, len(_result(op).shape))
    if op.attrs.get("approximate", False):
        cubic = e.mul(e.mul(e.mul(e.const(0.044715, elem), x), x), x)
        inner = e.mul(e.const(_SQRT_2_OVER_PI, elem), e.add(x, cubic))
        curve = e.unary("tosa.tanh", inner)
    else:
        curve = e.unary("tosa.erf", e.mul(x, e.const(_SQRT_HALF, elem)))
    one_plus = e.add(e.const(1.0, elem), curve)
    half_x = e.mul(e.const(0.5, elem), x)
    return [e.mul(half_x, one_plus)]


# ---------------------------------------------------------------------------
# Integer path: quantized activations

I8, U8, I16 = "i8", "ui8", "i16"
_F32 = np.float32
Transform = Callable[[np.ndarray], np.ndarray]


# ---------------------------------------------------------------------------
# Operand checks


def _unary_types(op: Op, *storages: str) -> tuple[UniformQuantized, UniformQuantized] | Failure:
    """Per-tensor input and output types of one of `storages`, the same for
    both (TFLite's kernels require it); int16 zero points 0 (TFLite and TOSA
    RESCALE both require it)."""
    elements = require_one_storage(op, [op.operands[0], op.results[0]], *storages)
    if isinstance(elements, Failure):
        return elements
    x_type, out_type = elements
    if x_type.storage.bits == 16 and (x_type.zero_point or out_type.zero_point):
        return Failure(f"{op.name}: int16 zero points must be 0")
    return x_type, out_type


def _storage_values(q: UniformQuantized) -> np.ndarray:
    """Every value of q's storage type, in increasing order (int64)."""
    storage = storage_type(q)
    return np.arange(storage.min_value, storage.max_value + 1, dtype=np.int64)


# ---------------------------------------------------------------------------
# 8-bit tables


def lut_8bit(transform: Transform, in_type: UniformQuantized,
             out_type: UniformQuantized) -> np.ndarray:
    """TFLite's `LUTPopulate<T>` for 8-bit T: the output of each input value.

    In float32, as the kernel: `y = transform(s_in * (v - zp_in))`, then
    `round_half_away(y * (1 / s_out)) + zp_out` clamped to T's range. A NaN
    y gives T's minimum; infinities and finite values beyond int32 saturate
    (measured with EXP, LOG, LOGISTIC, TANH, GELU; legalize.quantized.table_i8
    instead casts them to INT32_MIN as a bare x86 conversion would).
    """
    values = _storage_values(in_type)
    lo, hi = int(values[0]), int(values[-1])
    inverse_scale = _F32(1) / _F32(out_type.scale)
    with np.errstate(all="ignore"):
        dequantized = _F32(in_type.scale) * (values - in_type.zero_point).astype(_F32)
        y = np.asarray(transform(dequantized), dtype=_F32)
        scaled = (y * inverse_scale).astype(_F32)
        rounded = np.sign(scaled) * np.floor(np.abs(scaled) + _F32(0.5))
        quantized = (rounded + _F32(out_type.zero_point)).astype(_F32)
        clamped = np.where(np.isnan(quantized), lo, np.minimum(np.maximum(quantized, lo), hi))
    return clamped.astype(np.int64)


def _tosa_table_8bit(outputs: np.ndarray, q: UniformQuantized) -> np.ndarray:
    """The i8[256] TOSA TABLE for per-value `outputs` (storage order).

    TOSA indexes with the stored byte read as signed, plus 128. For uint8
    the byte of value v reads as v - 256 when v >= 128, so entry k holds the
    output for v = k XOR 0x80, stored as its byte.
    """
    if storage_type(q).is_signed:
        return outputs.astype(np.int8)
    return outputs[np.arange(256) ^ 0x80].astype(np.uint8).view(np.int8)


def _table_8bit(rw: Rewriter, x: Value, out_type: UniformQuantized,
                outputs: np.ndarray) -> Value:
    table = build.const(rw, _tosa_table_8bit(outputs, out_type), i8)
    return build.op(rw, "tosa.table", [x, table], x.type.with_element(out_type))


# ---------------------------------------------------------------------------
# 16-bit tables


def _table_16bit(rw: Rewriter, x: Value, out_type: UniformQuantized,
                 table: np.ndarray) -> Value | Failure:
    """TABLE (i16 -> i32, `(base << 7) + slope * frac`) then `(v + 64) >> 7`.

    TFLite's LUTLookup holds the slope in int16 and wraps it; TOSA REQUIREs
    that it fits, so a table with a larger step is not lowered.
    """
    steps = np.diff(table.astype(np.int64))
    if steps.size and (np.minimum.reduce(steps) < -32768 or np.maximum.reduce(steps) > 32767):
        return Failure("an int16 lookup table step does not fit int16 (TFLite wraps it)")
    looked_up = build.op(rw, "tosa.table", [x, build.const(rw, table.astype(np.int16), i16)],
                         x.type.with_element(i32))
    return rescale(rw, looked_up, 2.0 ** -7, out_type, input_zp=0, rounding=SINGLE_ROUND)


def _lut_int16(transform: Callable[[np.float32], np.float32], in_type: UniformQuantized,
               out_type: UniformQuantized) -> np.ndarray:
    """TFLite's LUTPopulate<int16_t>: TF 2.20 instantiates it with float32
    arithmetic for EXP, LOG, RSQRT and GELU (measured on all 65536 inputs;
    double arithmetic differs by 1 LSB in some entries)."""
    return table_i16(transform, in_type, out_type, float_type=_F32)


# ---------------------------------------------------------------------------
# The float functions TFLite's LUTs sample, in float32 like <cmath> on float.
# Each libm call is evaluated in double and rounded once (glibc's float
# functions are correctly rounded in these ranges; measured identical).


def _f32_of(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    def apply(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(fn(np.asarray(x, dtype=np.float64)), dtype=np.float64).astype(_F32)
    return apply


_exp = _f32_of(np.exp)
_expm1 = _f32_of(np.expm1)
_tanh = _f32_of(np.tanh)
_log = _f32_of(np.log)
_sqrt = _f32_of(np.sqrt)


def _erfc_elementwise(x: np.ndarray) -> np.ndarray:
    """`math.erfc` of each element (numpy has no erfc)."""
    return np.fromiter(map(math.erfc, x.reshape(-1).tolist()), np.float64,
                       x.size).reshape(x.shape)


_erfc = _f32_of(_erfc_elementwise)


def _logistic(x: np.ndarray) -> np.ndarray:
    """`1.0f / (1.0f + std::exp(-value))`."""
    x = np.asarray(x, dtype=_F32)
    return (_F32(1) / (_F32(1) + _exp(-x))).astype(_F32)


def _elu(x: np.ndarray) -> np.ndarray:
    """`value < 0 ? std::expm1(value) : value` (activations.cc EluPrepare)."""
    x = np.asarray(x, dtype=_F32)
    return np.where(x < 0, _expm1(x), x).astype(_F32)


def _gelu(x: np.ndarray) -> np.ndarray:
    """reference_ops::GeluTransform: `0.5f * x * erfc(x * -M_SQRT1_2)`."""
    x = np.asarray(x, dtype=_F32)
    return (_F32(0.5) * x * _erfc(x * _F32(-math.sqrt(0.5)))).astype(_F32)


# float(M_2_SQRTPI * M_SQRT1_2), reference_ops gelu_internal::kSqrt2dPi.
_SQRT_2_OVER_PI_F32 = _F32(2.0 / math.sqrt(math.pi) * math.sqrt(0.5))


def _gelu_approximate(x: np.ndarray) -> np.ndarray:
    """GeluTransformApproximate: `0.5f * x * (1 + tanh(k * (x + 0.044715f * x^3)))`."""
    x = np.asarray(x, dtype=_F32)
    inner = _SQRT_2_OVER_PI_F32 * (x + _F32(0.044715) * x * x * x)
    return (_F32(0.5) * x * (_F32(1) + _tanh(inner))).astype(_F32)


@functools.lru_cache(maxsize=64)
def _log_at_least(lowest: float) -> Transform:
    """TF 2.20's int16 LOG table samples `max(out_min, log(x))`: non-positive
    inputs (log NaN or -inf) give the output range's minimum (measured). One
    function per bound, so that its tables are kept (_kept_table)."""
    def transform(x: np.ndarray) -> np.ndarray:
        y = _log(x)
        return np.where(y >= _F32(lowest), y, _F32(lowest)).astype(_F32)
    return transform


@functools.lru_cache(maxsize=64)
def _rsqrt_at_most(highest: float) -> Transform:
    """TF 2.20's int16 RSQRT table samples `min(out_max, 1.f / std::sqrt(x))`:
    zero and negative inputs give the output range's maximum (measured). One
    function per bound, so that its tables are kept (_kept_table)."""
    def transform(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            y = (_F32(1) / _sqrt(x)).astype(_F32)
        return np.where(y <= _F32(highest), y, _F32(highest)).astype(_F32)
    return transform


def _lut(rw: Rewriter, op: Op, types: tuple[UniformQuantized, UniformQuantized],
         transform: Transform) -> list[Value] | Failure:
    """One TABLE of the sampled float function (8-bit), TABLE + RESCALE (int16)."""
    x_type, out_type = types
    x = op.operands[0]
    if x_type.storage.bits == 8:
        return [_table_8bit(rw, x, out_type, kept_table(lut_8bit, transform, x_type, out_type))]
    result = _table_16bit(rw, x, out_type, kept_table(_lut_int16, transform, x_type, out_type))
    return result if isinstance(result, Failure) else [result]


# ---------------------------------------------------------------------------
# LUT-based transcendental ops


@pattern("tfl.exp", kind="integer", label="exp_int", types=("i8", "i16"))
@integer_pattern
def exp_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TABLE of `std::exp` (int8), int16 TABLE + RESCALE (TFLite's EXP LUTs)."""
    types = _unary_types(op, I8, I16)
    return types if isinstance(types, Failure) else _lut(rw, op, types, _exp)


@pattern("tfl.log", kind="integer", label="log_int", types=("i8", "i16"))
@integer_pattern
def log_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TABLE of `std::log` (int8: non-positive inputs give -128), int16 TABLE
    of `max(out_min, log x)` + RESCALE."""
    types = _unary_types(op, I8, I16)
    if isinstance(types, Failure):
        return types
    out_type = types[1]
    if out_type.storage.bits == 8:
        return _lut(rw, op, types, _log)
    return _lut(rw, op, types, _log_at_least(float(_F32(out_type.scale) * _F32(-32768))))


@pattern("tfl.gelu", kind="integer", label="gelu_int", types=("i8", "u8", "i16"))
@integer_pattern
def gelu_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TABLE of reference_ops::GeluTransform[Approximate] (activations.cc GeluPrepare)."""
    types = _unary_types(op, I8, U8, I16)
    if isinstance(types, Failure):
        return types
    return _lut(rw, op, types, _gelu_approximate if op.attrs.get("approximate") else _gelu)


@pattern("tfl.elu", kind="integer", label="elu_int8", types=("i8",))
@integer_pattern
def elu_int8(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TABLE of `x < 0 ? expm1(x) : x` (TFLite has an int8 ELU kernel only)."""
    types = _unary_types(op, I8)
    return types if isinstance(types, Failure) else _lut(rw, op, types, _elu)


def _table_or_int16_kernel(op: Op, rw: Rewriter, transform: Transform,
                           kernel: SigmoidKernel) -> list[Value] | Failure:
    """8-bit: TABLE of `transform`; int16: TFLite's fixed-point `kernel`."""
    types = _unary_types(op, I8, U8, I16)
    if isinstance(types, Failure):
        return types
    if types[0].storage.bits == 8:
        return _lut(rw, op, types, transform)
    return _sigmoid_kernel_int16(op, rw, *types, kernel)


@pattern("tfl.logistic", kind="integer", label="logistic_int", types=("i8", "u8", "i16"))
@integer_pattern
def logistic_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """8-bit: TABLE of `1 / (1 + exp(-x))`; int16: TFLite's fixed-point kernel."""
    return _table_or_int16_kernel(op, rw, _logistic, LOGISTIC_INT16)


@pattern("tfl.tanh", kind="integer", label="tanh_int", types=("i8", "u8", "i16"))
@integer_pattern
def tanh_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """8-bit: TABLE of `std::tanh`; int16: TFLite's fixed-point kernel."""
    return _table_or_int16_kernel(op, rw, _tanh, TANH_INT16)


# ---------------------------------------------------------------------------
# RSQRT


@pattern("tfl.rsqrt", kind="integer", label="rsqrt_int", types=("i8", "i16"))
@integer_pattern
def rsqrt_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """int8: TABLE of elementwise.cc RsqrtEvalQuantized (integer Newton-Raphson);
    int16: TABLE of `min(out_max, 1/sqrt x)` + RESCALE (TF 2.20's int16 LUT)."""
    types = _unary_types(op, I8, I16)
    if isinstance(types, Failure):
        return types
    x_type, out_type = types
    if x_type.storage.bits == 16:
        return _lut(rw, op, types, _rsqrt_at_most(float(_F32(out_type.scale) * _F32(32767))))
    return [_table_8bit(rw, op.operands[0], out_type,
                        kept_table(rsqrt_int8_outputs, x_type, out_type))]


# Inputs are scaled up by 2^20 to keep the inverse square root an integer.
_RSQRT_SHIFT = 20
def _multiply_by_quantized_multiplier(x: IntOrArray, multiplier: IntOrArray,
                                      shift: IntOrArray) -> IntOrArray:
    """TFLite's MultiplyByQuantizedMultiplier (default build, double rounding), on
    integers or int64 arrays. `x * 2^left` wraps in int32: from a left shift of 32
    up it is 0, as with a shift of 32 (which keeps the product within int64)."""
    left, right = np.minimum(np.maximum(shift, 0), 32), np.maximum(-shift, 0)
    return rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(wrap32(x * (1 << left)), multiplier), right)


def inv_sqrt_multiplier(value: IntOrArray) -> tuple[IntOrArray, IntOrArray]:
    """(multiplier, left shift) of TFLite's GetInvSqrtQuantizedMultiplierExp(value, -1),
    for an integer or an int64 array of them (positive int32 values).

    common.h: the input is normalized to [2^27, 2^29) by pairs of bits, then
    five gemmlowp Newton-Raphson steps x <- 3/2 x - (v/2) x^3 in Q3.28
    starting at x = 1, times sqrt(1/2). Values up to 1 give (INT32_MAX, 0).
    """
    at_most_one = np.asarray(value) <= 1
    value = np.maximum(value, 1)
    # Bit lengths: frexp's exponent, exact for integers below 2^53.
    bits = np.frexp(value.astype(np.float64))[1].astype(np.int64)
    # value >= 2^29 is divided by 4 until it is not: once per pair of bits past 28.
    quarters = np.maximum(bits - 28, 0) // 2
    value = value >> (2 * quarters)
    bits = bits - 2 * quarters
    pairs = (31 - bits) // 2 - 1
    shift = 11 + quarters - pairs
    value = value << (2 * pairs)
    half_input = rounding_divide_by_pot(value >> 1, 1)
    three_halves = (1 << 28) + (1 << 27)
    x = np.full(np.shape(value), 1 << 28, dtype=np.int64)
    for _ in range(5):
        cube = saturating_left_shift(saturating_rounding_doubling_high_mul(
            saturating_rounding_doubling_high_mul(x, x), x), 6)
        x = saturating_left_shift(wrap32(saturating_rounding_doubling_high_mul(three_halves, x)
                                          - saturating_rounding_doubling_high_mul(half_input,
                                                                                  cube)), 3)
    x = saturating_rounding_doubling_high_mul(x, 1518500250)  # sqrt(1/2) in Q0.31
    # A negative shift is applied to the multiplier (within int32 here).
    x = np.where(shift < 0, wrap32(x << np.maximum(-shift, 0)), x)
    shift = np.maximum(shift, 0)
    return np.where(at_most_one, INT32_MAX, x), np.where(at_most_one, 0, -shift)


def rsqrt_int8_outputs(x_type: UniformQuantized, out_type: UniformQuantized) -> np.ndarray:
    """RsqrtEvalQuantized for every int8 input value.

    `MBQM(MBQM(1, m_inv, s_inv + 20), QuantizeMultiplier(1 / (sqrt(s_in) *
    s_out)), shift - 20) + zp_out`, clamped; value 0 gives 127. TFLite rejects
    inputs below the zero point at run time; the table gives 127 for them.
    """
    scale = 1.0 / (float(np.sqrt(_F32(x_type.scale))) * float(_F32(out_type.scale)))
    multiplier, shift = tflite_quantize_multiplier(scale)
    values = _storage_values(x_type) - x_type.zero_point
    inv_multiplier, inv_shift = inv_sqrt_multiplier(values)
    data = _multiply_by_quantized_multiplier(1, inv_multiplier, inv_shift + _RSQRT_SHIFT)
    out = _multiply_by_quantized_multiplier(data, multiplier, shift - _RSQRT_SHIFT)
    return np.where(values > 0, np.minimum(np.maximum(out + out_type.zero_point, -128), 127),
                    out_type.storage_max)


# ---------------------------------------------------------------------------
# HARD_SWISH


@pattern("tfl.hard_swish", kind="integer", label="hard_swish_int8", types=("i8", "u8"))
@integer_pattern
def hard_swish_int8(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TABLE of reference_ops::HardSwish's 16-bit fixed-point arithmetic."""
    types = _unary_types(op, I8, U8)
    if isinstance(types, Failure):
        return types
    x_type, out_type = types
    outputs = kept_table(hard_swish_outputs, x_type, out_type)
    if isinstance(outputs, Failure):
        return outputs
    return [_table_8bit(rw, op.operands[0], out_type, outputs)]


def _int16(x: IntOrArray) -> IntOrArray:
    return ((x + (1 << 15)) & 0xFFFF) - (1 << 15)


def _saturate16(x: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum(x, -(1 << 15)), (1 << 15) - 1)


def _both_int16_min(a: np.ndarray, b: IntOrArray) -> np.ndarray:
    return (a == -(1 << 15)) & (b == -(1 << 15))


def _srdhm16(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int16 (ties away from zero),
    on int64 arrays of int16 values."""
    product = a * b
    nudged = product + np.where(product >= 0, 1 << 14, 1 - (1 << 14))
    high = np.sign(nudged) * (np.abs(nudged) >> 15)  # C's division: toward zero
    return np.where(_both_int16_min(a, b), (1 << 15) - 1, high)


def _sdhm16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """reference_ops::SaturatingDoublingHighMul: the same, truncating toward zero."""
    product = a * b
    high = _int16(np.sign(product) * (np.abs(product) >> 15))
    return np.where(_both_int16_min(a, b), (1 << 15) - 1, high)


def _multiplier_16(scale: float) -> tuple[int, int]:
    """QuantizeMultiplier then DownScaleInt32ToInt16Multiplier: (Q0.15, exponent)."""
    multiplier, exponent = tflite_quantize_multiplier(scale)
    if multiplier >= INT32_MAX - (1 << 15):
        return (1 << 15) - 1, exponent
    return (multiplier + (1 << 15)) >> 16, exponent


def hard_swish_outputs(x_type: UniformQuantized,
                       out_type: UniformQuantized) -> np.ndarray | Failure:
    """reference_ops::HardSwish (hard_swish.h) for every 8-bit input value.

    Parameters as activations.cc HardSwishPrepare, in float32: the input on a
    "hires" scale s_in / 128, the output multiplier hires / s_out and the
    "relu-ish" multiplier hires / (3 / 32768), both cut to 16 bits.
    """
    hires = _F32(1.0 / 128.0) * _F32(x_type.scale)
    out_multiplier, out_exponent = _multiplier_16(float(hires / _F32(out_type.scale)))
    relu_multiplier, relu_exponent = _multiplier_16(float(hires / (_F32(3.0) / _F32(32768.0))))
    if out_exponent > 0:
        return Failure(f"hard_swish: output multiplier exponent {out_exponent} > 0 "
                       "(TFLite rejects it)")
    hires_value = _int16((_storage_values(x_type) - x_type.zero_point) * (1 << 7))
    preshift_output = _srdhm16(hires_value, out_multiplier)
    relu = hires_value
    if relu_exponent > 0:
        # Any non-zero int16 value saturates from a shift of 16 up: shifting by
        # no more keeps the products within int64.
        relu = _saturate16(relu * (1 << min(relu_exponent - 1, 16)))
    relu = _srdhm16(relu, relu_multiplier)
    if relu_exponent > 0:
        relu = _saturate16(relu * 2)
    elif relu_exponent < 0:
        relu = rounding_divide_by_pot(relu, -relu_exponent)
    relu = _int16((relu + (1 << 15)) >> 1)
    out = _sdhm16(relu, preshift_output)
    out = rounding_divide_by_pot(out, -out_exponent) if out_exponent else out
    return np.minimum(np.maximum(_int16(out + out_type.zero_point), out_type.storage_min),
                      out_type.storage_max)


# ---------------------------------------------------------------------------
# int16 LOGISTIC and TANH: TFLite's fixed-point kernels

# TFLite's sigmoid_table_uint16 (kernels/internal/common.h): sigmoid(i / 24)
# in Q0.16 for i = 0..255, as tabulated there (the entries are not a plain
# rounding of the function, so they are data, not computed).
SIGMOID_TABLE_UINT16 = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794,
    41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443,
    48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374,
    54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544,
    58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279,
    61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990,
    63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030,
    64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652,
    64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019,
    65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234,
    65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476,
    65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516,
    65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529,
    65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532,
    65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534,
    65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535], dtype=np.int64)


class SigmoidKernel:
    """What distinguishes reference_integer_ops::Logistic and ::Tanh for int16.

    Both scale the input to d (|d| >> f indexes the table, whose steps are
    1/24 after the kernels' 3/4 range expansion), interpolate at |d| with
    f = `fraction_bits` fractional bits (`result = (t[i] << f) + frac *
    (t[i+1] - t[i])`, `saturated` when i >= 255) and round the result to
    16 bits: with r = result - `offset` and k = `output_shift`, d >= 0 gives
    `(r + 2^(k-1)) >> k` and d < 0 gives `(negative_total - r + 2^(k-1)) >> k`.
    """

    def __init__(self, fraction_bits: int, saturated: int, offset: int,
                 negative_total: int, output_shift: int, pot_left_shifts: tuple[int, ...]):
        self.fraction_bits = fraction_bits
        self.saturated = saturated
        self.offset = offset
        self.negative_total = negative_total
        self.output_shift = output_shift
        self.pot_left_shifts = pot_left_shifts


# logistic.h: result + 2^9 >> 10, or (2^25 - result + 2^9 - 1) >> 10.
LOGISTIC_INT16 = SigmoidKernel(9, 0x7FFF << 10, 0, (1 << 25) - 1, 10, (0,))
# tanh.h: (result - 2^23 + 2^7) >> 8, or (-result + 2^23 + 2^7 - 1) >> 8, i.e.
# r = result - 2^23 and (-1 - r + 2^7) >> 8.
TANH_INT16 = SigmoidKernel(8, 0xFFFF << 8, 1 << 23, -1, 8, (0, 1))


def _checked_log2(scale: float) -> tuple[int, bool]:
    """quantization_util.cc CheckedLog2 in float32: (rounded log2, is a power of two)."""
    log2 = _F32(_F32(math.log(float(_F32(scale)))) * (_F32(1) / _F32(math.log(2.0))))
    rounded = _F32(math.copysign(math.floor(abs(float(log2)) + 0.5), float(log2)))
    return int(rounded), abs(float(_F32(log2 - rounded))) < 1e-3


def sigmoid_input_scaling(scale: float, kernel: SigmoidKernel) -> tuple[int, int]:
    """(multiplier, right shift) with `d = (x * multiplier + round) >> shift`.

    activations.cc SigmoidPrepare / TanhPrepare (int16): a power-of-two scale
    2^(s - 12) with s in `pot_left_shifts` gives multiplier 3 << s, shift 0;
    any other scale `int(s_in * 4096 * 3 * 2^k)` with the smallest k making it
    exceed 32767 / 2 (at most 31).
    """
    log2, power_of_two = _checked_log2(scale)
    if power_of_two and 12 + log2 in kernel.pot_left_shifts:
        return 3 << (12 + log2), 0
    multiplier = float(_F32(scale)) * 4096.0 * 3.0
    shift = 0
    while multiplier <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        multiplier *= 2.0
    return int(multiplier), shift


@functools.cache
def sigmoid_segment_tables(kernel: SigmoidKernel) -> tuple[np.ndarray, np.ndarray]:
    """(base, slope) per table segment: base `(t[i] << f) - offset`, slope
    `t[i+1] - t[i]`; segment 255 is the saturated result with slope 0, so
    that indices clamped to 255 need no select. Read-only, made once per kernel."""
    f = kernel.fraction_bits
    table = SIGMOID_TABLE_UINT16
    base = (np.append(table[:255] << f, kernel.saturated) - kernel.offset).astype(np.int32)
    slope = np.append(np.diff(table), 0).astype(np.int32)
    base.flags.writeable = slope.flags.writeable = False
    return base, slope


def _sigmoid_kernel_int16(op: Op, rw: Rewriter, x_type: UniformQuantized,
                          out_type: UniformQuantized, kernel: SigmoidKernel
                          ) -> list[Value] | Failure:
    """reference_integer_ops::Logistic / ::Tanh (int16) step by step in i32:

    d = ARS(x * M, L, round) ; a = ABS(d) ; i = min(a >> f, 255) ;
    r = GATHER(base, i) + (a & (2^f - 1)) * GATHER(slope, i) ;
    out = RESCALE(d >= 0 ? r : negative_total - r, 2^-k) (round half up).
    """
    if out_type.scale != 1.0 / 32768:
        return Failure(f"{op.name}: int16 output scale must be 1/32768 (TFLite's kernel)")
    multiplier, shift = sigmoid_input_scaling(x_type.scale, kernel)
    if not 0 < multiplier < 1 << 16:
        return Failure(f"{op.name}: input multiplier {multiplier} overflows TFLite's int32 product")
    t = op.operands[0].type
    shape, rank = tuple(t.shape), len(t.shape)
    count = math.prod(shape)
    i32_type = t.with_element(i32)

    def binary(name: str, a: Value, b: Value, **attrs: object) -> Value:
        return build.op(rw, name, [a, b], i32_type, **attrs)

    d = build.mul(rw, rescale_to_i32(rw, op.operands[0], input_zp=0),
                  scalar(rw, multiplier, i32, rank), result_type=i32_type)
    if shift:
        d = binary("tosa.arithmetic_right_shift", d, scalar(rw, shift, i32, rank), round=True)
    magnitude = build.op(rw, "tosa.abs", [d], i32_type)
    segment = binary("tosa.arithmetic_right_shift", magnitude,
                     scalar(rw, kernel.fraction_bits, i32, rank), round=False)
    index = build.reshape(rw, binary("tosa.minimum", segment, scalar(rw, 255, i32, rank),
                                     nan_mode="PROPAGATE"), (1, count))
    base_table, slope_table = sigmoid_segment_tables(kernel)

    def gather(table: np.ndarray) -> Value:
        values = build.const(rw, table.reshape(1, 256, 1), i32)
        found = build.op(rw, "tosa.gather", [values, index], TensorType((1, count, 1), i32))
        return build.reshape(rw, found, shape)

    fraction = binary("tosa.bitwise_and", magnitude,
                      scalar(rw, (1 << kernel.fraction_bits) - 1, i32, rank))
    result = binary("tosa.add", gather(base_table),
                    build.mul(rw, fraction, gather(slope_table), result_type=i32_type))
    mirrored = binary("tosa.sub", scalar(rw, kernel.negative_total, i32, rank), result)
    non_negative = build.op(rw, "tosa.greater_equal", [d, scalar(rw, 0, i32, rank)],
                            t.with_element(i1))
    chosen = build.op(rw, "tosa.select", [non_negative, result, mirrored], i32_type)
    return [rescale(rw, chosen, 2.0 ** -kernel.output_shift, out_type, input_zp=0,
                    rounding=SINGLE_ROUND)]


# ---------------------------------------------------------------------------
# RELU family, LEAKY_RELU, PRELU: rescales on the sign of x - zp
#
# The kernels scale `x - zp_in` with MultiplyByQuantizedMultiplier (double
# rounding, legalize.quantized.rounding_mode) by real multipliers computed
# from the float32 scales in float32 (`input->params.scale /
# output->params.scale` is a float expression assigned to a double).
#
# uint8: TOSA's signed ops (CLAMP, SELECT) cannot compare unsigned bytes, and
# RESCALE cannot widen unsigned data to i32, so a uint8 tensor (s, zp) is
# moved exactly into its int8 twin (s, zp - 128) and the result back
# (legalize.integer.data.to_int8 / from_int8). The uint8 kernels compute on
# the twins what the int8 kernels compute: x - zp is unchanged and the clamp
# bounds move with the storage range.

def _float32_ratio(*factors_over: float) -> float:
    """`a * b * ... / z` evaluated in float32, left to right."""
    *factors, divisor = (_F32(f) for f in factors_over)
    product = factors[0]
    for factor in factors[1:]:
        product = _F32(product * factor)
    return float(_F32(product / divisor))


def _twin(q: UniformQuantized) -> UniformQuantized:
    """q's int8 twin if q is uint8, else q itself."""
    return int8_twin(q) if is_uint8(q) else q


def _rescale_input_limit(scale: float) -> int:
    """apply_scale_32 REQUIREs |v| < 2^(shift - 1), shift = 31 - TFLite's
    exponent; beyond it TFLite's own `v * 2^left_shift` overflows int32."""
    exponent = tflite_quantize_multiplier(scale)[1]
    return 1 << (30 - exponent) if exponent <= 30 else 0  # a scale that large fits nothing


def _fits_rescale_input(q: UniformQuantized, scale: float) -> bool:
    """Every x - zp of q's storage meets _rescale_input_limit(scale)."""
    largest = max(q.storage_max - q.zero_point, q.zero_point - q.storage_min)
    return largest < _rescale_input_limit(scale)


@pattern("tfl.relu", "tfl.relu6", kind="integer", label="relu_int", types=("i8", "u8", "i16"))
@integer_pattern
def relu_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """RESCALE by s_in / s_out then CLAMP to the activation's quantized range
    (activations.cc QuantizedReluX, optimized_ops::ReluX)."""
    return _relu(op, rw, (I8, U8, I16))


@pattern("tfl.relu_n1_to_1", "tfl.relu_0_to_1", kind="integer", label="relu_unit_range_int",
         types=("i8", "u8"))
@integer_pattern
def relu_unit_range_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """As relu_int; TFLite has no int16 kernel for these two."""
    return _relu(op, rw, (I8, U8))


def _relu(op: Op, rw: Rewriter, storages: tuple[str, ...]) -> list[Value] | Failure:
    types = _unary_types(op, *storages)
    if isinstance(types, Failure):
        return types
    x_type, out_type = types
    scale = _float32_ratio(x_type.scale, out_type.scale)
    if not _fits_rescale_input(x_type, scale):
        return Failure(f"{op.name}: scale ratio {scale} is too large to rescale")
    low, high = _RELU_BOUNDS[op.name]
    # QuantizedReluX: zp + (int)roundf(bound / scale) in float32, limited to the type.
    lowest = quantize_scalar(low, out_type)
    highest = out_type.storage_max if high == math.inf else quantize_scalar(high, out_type)
    twin = _twin(out_type)
    scaled = rescale(rw, to_int8(rw, op.operands[0]), scale, twin,
                     rounding=rounding_mode(op.name))
    offset = out_type.zero_point - twin.zero_point
    return [restore_uint8(rw, build.clamp(rw, scaled, lowest - offset, highest - offset),
                     op.results[0])]


def _select_on_sign(rw: Rewriter, x32: Value, non_negative: Value, negative: Value) -> Value:
    """SELECT(x32 >= 0, non_negative, negative)."""
    zero = build.const(rw, np.zeros((1,) * len(x32.type.shape), dtype=np.int32), i32)
    condition = build.op(rw, "tosa.greater_equal", [x32, zero], x32.type.with_element(i1))
    return build.op(rw, "tosa.select", [condition, non_negative, negative], non_negative.type)


@pattern("tfl.leaky_relu", kind="integer", label="leaky_relu_int", types=("i8", "u8", "i16"))
@integer_pattern
def leaky_relu_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """x - zp as i32, RESCALE it by s_in / s_out and by alpha * s_in / s_out,
    SELECT on its sign (reference_ops::QuantizeLeakyRelu). A SELECT, not a
    MAXIMUM, so that alpha > 1 works and no rounding order is assumed."""
    types = _unary_types(op, I8, U8, I16)
    if isinstance(types, Failure):
        return types
    x_type, out_type = types
    alpha = float(_F32(op.attrs.get("alpha", 0.2)))
    if alpha < 0:
        return Failure(f"{op.name}: negative alpha {alpha} (RESCALE multipliers are >= 0)")
    identity_scale = _float32_ratio(x_type.scale, out_type.scale)
    alpha_scale = _float32_ratio(x_type.scale, alpha, out_type.scale)
    if not all(_fits_rescale_input(x_type, s) for s in (identity_scale, alpha_scale)):
        return Failure(f"{op.name}: scale ratio too large to rescale")
    rounding = rounding_mode(op.name)
    twin = _twin(out_type)
    x32 = rescale_to_i32(rw, to_int8(rw, op.operands[0]))
    identity = rescale(rw, x32, identity_scale, twin, input_zp=0, rounding=rounding)
    scaled = rescale(rw, x32, alpha_scale, twin, input_zp=0, rounding=rounding)
    return [restore_uint8(rw, _select_on_sign(rw, x32, identity, scaled), op.results[0])]


@pattern("tfl.prelu", kind="integer", label="prelu_int8", types=("i8", "u8"))
@integer_pattern
def prelu_int8(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """x - zp and alpha - zp_alpha as i32, their product MUL, RESCALE x by
    s_in / s_out and the product by s_in * s_alpha / s_out, SELECT on the
    sign of x (reference_ops::BroadcastPrelu4DSlow; alpha broadcast)."""
    elements = require_one_storage(op, [*op.operands[:2], op.results[0]], I8, U8)
    if isinstance(elements, Failure):
        return elements
    x_type, alpha_type, out_type = elements
    result_value = op.results[0]
    result = result_value.type
    if tuple(op.operands[0].type.shape) != tuple(result.shape):
        return Failure(f"{op.name}: alpha must broadcast to the input's shape")
    identity_scale = _float32_ratio(x_type.scale, out_type.scale)
    alpha_scale = _float32_ratio(x_type.scale, alpha_type.scale, out_type.scale)
    # |(x - zp) * (alpha - zp_alpha)| <= 255 * 255 < 2^16.
    if not (_fits_rescale_input(x_type, identity_scale)
            and 1 << 16 <= _rescale_input_limit(alpha_scale)):
        return Failure(f"{op.name}: scale ratio too large to rescale")
    rounding = rounding_mode(op.name)
    twin = _twin(out_type)
    x32 = rescale_to_i32(rw, to_int8(rw, op.operands[0]))
    alpha32 = reshape_to_rank(rw, rescale_to_i32(rw, to_int8(rw, op.operands[1])),
                              len(result.shape))
    product = build.mul(rw, x32, alpha32, result_type=result.with_element(i32))
    identity = rescale(rw, x32, identity_scale, twin, input_zp=0, rounding=rounding)
    scaled = rescale(rw, product, alpha_scale, twin, input_zp=0, rounding=rounding)
    return [restore_uint8(rw, _select_on_sign(rw, x32, identity, scaled), result_value)]
