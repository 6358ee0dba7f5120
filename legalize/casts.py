"""Patterns for TFL CAST, QUANTIZE and DEQUANTIZE.

TFLite's CAST (kernels/cast.cc) and TOSA's CAST differ where it matters:
- float -> int: TFLite truncates toward zero (static_cast), TOSA rounds to
  nearest even. Truncation is FLOOR for x >= 0 and CEIL below, then CAST
  (exact: the value is already integral). int32 saturates in both (TFLite
  clamps explicitly; NaN gives INT32_MAX there, so here too). int16 is
  clamped by TFLite, saturated by TOSA; NaN gives 0. int8 is a plain
  static_cast: an integer in int32 range keeps its low 8 bits, which is
  CAST to int32 then CAST to int8 (TOSA integer narrowing wraps); NaN gives 0.
  (Values outside int32 are undefined behaviour in C++; we saturate.)
- float <-> bool is no TOSA CAST mode: to bool is x != 0 (NaN is true),
  from bool a SELECT between 1 and 0.
- int -> float16: TFLite converts through float32, which is exact for every
  integer float16 can hold, so one TOSA CAST rounds the same.

QUANTIZE and DEQUANTIZE between float types are CASTs; a quantized constant
is dequantized at conversion. Of run-time quantized tensors (integer path):
- QUANTIZE float -> quantized and DEQUANTIZE quantized -> float become the
  quant dialect's `quant.qcast` / `quant.dcast`, which `tfl2tosa.passes.lower_quant`
  turns into TOSA arithmetic following TFLite's reference kernels (DEQUANTIZE
  exact; QUANTIZE exact except within about a float ulp of a rounding tie, see
  that module).
- QUANTIZE quantized -> quantized (requantize) follows quantize.cc /
  reference_ops::Requantize: `zp_out + MBQM(x - zp_in, s_in / s_out)` with the
  multiplier from QuantizeMultiplier(double), clamped: one RESCALE (32-bit
  multiplier, double rounding; 16-bit zero points are 0 in TFLite as in TOSA).
  A scale of 2^29 or more has no RESCALE: requantize_above_2_to_29 reproduces
  the reference kernel's int32 arithmetic instead.
  TFLite also requantizes int16 to int32 (quantize.cc; int8 -> int32 it
  refuses): one RESCALE i16 -> i32 when both zero points are 0 (TOSA allows no
  other for i16 input and i32 output), else an i32 SUB / RESCALE / ADD. The
  int32 result is not clamped by TFLite (it is the int32 range), so the
  pattern refuses scales whose result could overflow it.
"""

from __future__ import annotations

import numpy as np

from legalize.common import constant_value, element, require_static, tensor_type
from legalize.elementwise import elementwise_for
from legalize.integer.support import integer_pattern
from legalize.integer.support import tensor_type as maybe_tensor_type
from legalize.quantized import (
    MIN_SHIFT,
    dequantized_values,
    left_shifted_as_tflite,
    quantize_multiplier,
    rescale,
    rescale_by_multiplier,
    rescale_to_i32,
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
    f16,
    f32,
    i1,
    i8,
    i16,
    i32,
    is_quantized,
    numpy_dtype,
    storage_type,
)
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

_CASTABLE = (f32, f16, i32, i16, i8, i1)


@pattern("tfl.cast", types=("f32", "f16", "i32", "bool"))
def cast(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TFLite CAST semantics between f32, f16, i32, i16, i8 and bool (module docstring)."""
    failure = require_static(op)
    if failure is not None:
        return failure
    x, result = op.operands[0], op.results[0]
    source, target = element(x), element(result)
    if source not in _CASTABLE or target not in _CASTABLE:
        return Failure(f"CAST {source} -> {target} has no TOSA equivalent")
    e = elementwise_for(rw, op)
    if source == target:
        return [build.op(rw, "tosa.identity", [x], tensor_type(result))]
    if target == i1:
        return [_to_bool(e, x)]
    if source == i1:
        return [_from_bool(e, x, target)]
    if target.is_float:
        return [e.cast(x, target)]
    if source.is_float:
        return [_float_to_int(e, x, target)]
    return [e.cast(x, target)]  # int -> int: sign-extend or keep the low bits


def _to_bool(e: Elementwise, x: Value) -> Value:
    if element(x).is_float:
        return e.logical_not(e.equal(x, e.like(0.0, x)))
    return e.cast(x, i1)


def _from_bool(e: Elementwise, x: Value, target: ScalarType) -> Value:
    if target.is_float:
        return e.select(x, e.const(1.0, target), e.const(0.0, target))
    return e.cast(x, target)


def _float_to_int(e: Elementwise, x: Value, target: ScalarType) -> Value:
    """Truncation toward zero, then TFLite's saturation / wrapping and NaN value."""
    zero = e.like(0.0, x)
    truncated = e.select(e.greater_equal(x, zero), e.floor(x), e.ceil(x))
    is_number = e.equal(x, x)
    if target == i32:
        return e.select(is_number, e.cast(truncated, i32), e.const(np.iinfo(np.int32).max, i32))
    if target == i16:
        return e.select(is_number, e.cast(truncated, i16), e.const(0, i16))
    wide = e.select(is_number, e.cast(truncated, i32), e.const(0, i32))
    return e.cast(wide, i8)


@pattern("tfl.dequantize", label="dequantize_float", kind="any", types=("f32", "f16"))
def dequantize(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """DEQUANTIZE from a float type: float16 -> float32 is a CAST (exact), folded
    when the input is constant (the float16 weights of float16-quantized models).

    A quantized input is refused here: a constant is folded by
    `dequantize_constant`, anything else goes through the fallback (its dcast
    followed by this pattern on a float stand-in, where it is the identity).
    """
    failure = require_static(op)
    if failure is not None:
        return failure
    x, result = op.operands[0], op.results[0]
    source, target = element(x), element(result)
    if is_quantized(source) or not source.is_float or not target.is_float:
        return Failure(f"DEQUANTIZE {source} -> {target} is not a float conversion")
    return [_float_convert(rw, x, tensor_type(result))]


@pattern("tfl.quantize", label="quantize_float", kind="any", types=("f32", "f16"))
def quantize(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """QUANTIZE between two different float types (a CAST).

    Quantized outputs are the integer path's. A float -> same-float QUANTIZE
    only appears as the fallback's stand-in for a quantizing one, where an
    identity would let canonicalization fold the following dequantize and
    lose the rounding to the quantized grid, so it is refused.
    """
    failure = require_static(op)
    if failure is not None:
        return failure
    x, result = op.operands[0], op.results[0]
    source, target = element(x), element(result)
    if is_quantized(source) or is_quantized(target) or not (source.is_float and target.is_float):
        return Failure(f"QUANTIZE {source} -> {target} is not a float conversion")
    if source == target:
        return Failure(f"QUANTIZE {source} -> {target} converts nothing")
    return [_float_convert(rw, x, tensor_type(result))]


def _float_convert(rw: Rewriter, x: Value, result: object) -> Value:
    array = constant_value(x)
    if array is not None:
        converted = np.asarray(array).astype(numpy_dtype(result.element))
        return build.const(rw, converted, result.element)
    if element(x) == result.element:
        return build.op(rw, "tosa.identity", [x], result)
    return build.cast(rw, x, result.element)


@pattern("tfl.dequantize", label="dequantize_constant", kind="integer",
         types=("i8", "u8", "i16", "i4"))
def dequantize_constant(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """DEQUANTIZE of a quantized constant (the int8 or int4 weights of weight-only
    models), folded once at conversion as TFLite computes it: float(double(scale)
    * (q - zero_point)) (reference_ops::Dequantize; int4 is unpacked to int8
    first). Per axis TFLite multiplies in float32, (q - zp[c]) * scale[c]
    (PerChannelDequantize), which rounds the exact product once, as here."""
    failure = require_static(op)
    if failure is not None:
        return failure
    x, result = op.operands[0], op.results[0]
    array = constant_value(x)
    q = element(x)
    if array is None or not is_quantized(q):
        return Failure("DEQUANTIZE of a non-constant or non-quantized input")
    if getattr(x.owner, "attrs", {}).get("sparsity") is not None:
        return Failure("DEQUANTIZE of a sparse constant")
    target = element(result)
    if is_quantized(target) or not target.is_float:
        return Failure(f"DEQUANTIZE to {target}")
    shape = tensor_type(x).shape
    real = dequantized_values(np.asarray(array).reshape(shape), q).astype(numpy_dtype(target))
    return [build.const(rw, real.reshape(shape), target)]


# ---------------------------------------------------------------------------
# Run-time quantized tensors (integer path)

_REQUANTIZE_STORAGE = ("i8", "ui8", "i16")


@pattern("tfl.quantize", kind="integer", label="quantize_int", types=("i8", "u8", "i16"))
@integer_pattern
def quantize_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """QUANTIZE: float -> `quant.qcast`; quantized -> quantized -> RESCALE."""
    source, target = maybe_tensor_type(op.operands[0]), maybe_tensor_type(op.results[0])
    if source is None or target is None or not is_quantized(target.element):
        return Failure(f"{op.name}: the result is not a quantized tensor")
    # Elementwise: the result has the input's shape, which can be more exact than
    # the declared one after an op whose output shape TFLite sizes at run time.
    target = target.with_shape(source.shape)
    if storage_type(source.element).is_float:
        return [rw.op("quant.qcast", [op.operands[0]], target)]
    if not (isinstance(source.element, UniformQuantized)
            and isinstance(target.element, UniformQuantized)):
        return Failure(f"{op.name}: requantizing per-axis types is not supported")
    if storage_type(source.element).name == "i16" and storage_type(target.element).name == "i32":
        return requantize_int16_to_int32(op, rw, source.element, target)
    if storage_type(source.element).name not in _REQUANTIZE_STORAGE or \
            storage_type(target.element).name not in _REQUANTIZE_STORAGE:
        return Failure(f"{op.name}: requantize {source.element} -> {target.element}")
    if storage_type(source.element).name == "ui8" or storage_type(target.element).name == "ui8":
        # uint8 zero points need RESCALE's unsigned reading. (Imported here: only
        # uint8 casts need the uint8 support module.)
        from legalize.integer.data import requantize_uint8

        return [requantize_uint8(rw, op.operands[0], target, rounding_mode(op.name))]
    scale = source.element.scale / target.element.scale
    multiplier, exponent = tflite_quantize_multiplier(scale)
    if 31 - exponent < MIN_SHIFT:
        return [requantize_above_2_to_29(rw, op.operands[0], multiplier, exponent,
                                         target.element, rounding_mode(op.name))]
    return [rescale(rw, op.operands[0], scale, target.element, rounding=rounding_mode(op.name))]


def requantize_above_2_to_29(rw: Rewriter, x: Value, multiplier: int, exponent: int,
                             out: UniformQuantized, rounding: str) -> Value:
    """A requantize by 2^29 or more, beyond any RESCALE (AI Edge Quantizer calibrates an
    attention mask of 0 and -inf to a scale near 1e36): TFLite's reference kernel
    computes `(x - zp_in) * (1 << exponent)` in int32 (wrapping; the shift count taken
    modulo 32), then the doubling high multiply by the mantissa, adds zp_out, clamps."""
    difference = rescale_to_i32(rw, x)
    shifted = left_shifted_as_tflite(rw, difference, exponent)
    return rescale_by_multiplier(rw, shifted, [multiplier], [31], out, input_zp=0,
                                 rounding=rounding)


def _i32_constant(rw: Rewriter, value: int, rank: int, element: ElementType = i32) -> Value:
    return build.const(rw, np.full((1,) * rank, value, dtype=np.int32), element)


def requantize_int16_to_int32(op: Op, rw: Rewriter, source: UniformQuantized,
                              target: TensorType) -> list[Value] | Failure:
    """QUANTIZE int16 -> int32 (reference_ops::Requantize): `zp_out + MBQM(x - zp_in,
    s_in / s_out)`, no clamp inside int32: RESCALE (DOUBLE_ROUND) with the zero
    points as i32 SUB / ADD around it where they are not 0."""
    out = target.element
    multiplier, shift = quantize_multiplier(source.scale / out.scale)
    largest = max(abs(source.storage_min - source.zero_point),
                  abs(source.storage_max - source.zero_point))
    # apply_scale_32 REQUIRES |v| < 2^(shift - 1), which keeps |result| < 2^30
    # (TFLite's int32 arithmetic does not overflow either); a zero point below
    # 2^30 added to it stays inside int32.
    if multiplier != 0 and (shift < MIN_SHIFT or largest >= 1 << (shift - 1)):
        return Failure(f"{op.name}: scale {source.scale / out.scale} overflows int32")
    if abs(out.zero_point) >= 1 << 30:
        return Failure(f"{op.name}: output zero point {out.zero_point} could overflow int32")
    rank = len(target.shape)
    x = op.operands[0]
    if source.zero_point != 0:
        x = rescale(rw, x, 1.0, i32, input_zp=0, output_zp=0)
        x = build.op(rw, "tosa.sub", [x, _i32_constant(rw, source.zero_point, rank)],
                     tensor_type(x))
    scaled = rescale_by_multiplier(rw, x, [multiplier], [shift], out, input_zp=0,
                                   output_zp=0, rounding=rounding_mode(op.name))
    if out.zero_point == 0:
        return [scaled]
    return [build.op(rw, "tosa.add", [scaled, _i32_constant(rw, out.zero_point, rank, out)],
                     tensor_type(scaled))]


@pattern("tfl.dequantize", kind="integer", label="dequantize_int", types=("i8", "u8", "i16"))
def dequantize_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """DEQUANTIZE of a run-time quantized tensor -> `quant.dcast` (constants are
    folded by dequantize_constant)."""
    source, target = maybe_tensor_type(op.operands[0]), maybe_tensor_type(op.results[0])
    if source is None or target is None or not is_quantized(source.element):
        return Failure(f"{op.name}: the input is not a quantized tensor")
    target = target.with_shape(source.shape)
    if constant_value(op.operands[0]) is not None:
        return Failure(f"{op.name}: constant input (folded elsewhere)")
    if not storage_type(target.element).is_float:
        return Failure(f"{op.name}: the result is not a float tensor")
    return [rw.op("quant.dcast", [op.operands[0]], target)]
