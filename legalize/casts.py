"""Patterns for TFL CAST and the float side of DEQUANTIZE / QUANTIZE.

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
"""

from __future__ import annotations

import numpy as np

from legalize.common import constant_value, element, require_float, require_static, tensor_type
from legalize.elementwise import elementwise_for, first_failure
from legalize.quantized import dequantized_values
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import (
    ScalarType,
    f16,
    f32,
    i1,
    i8,
    i16,
    i32,
    is_quantized,
    numpy_dtype,
)
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

_CASTABLE = (f32, f16, i32, i16, i8, i1)


@pattern("tfl.cast", types=("f32", "f16", "i32", "bool"))
def cast(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TFLite CAST semantics between f32, f16, i32, i16, i8 and bool (module docstring)."""
    failure = first_failure(require_float(op), require_static(op))
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
