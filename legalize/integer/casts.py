"""Integer patterns for QUANTIZE and DEQUANTIZE of run-time tensors.

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

from legalize.common import constant_value
from legalize.integer.support import integer_pattern, tensor_type
from legalize.quantized import (
    MIN_SHIFT,
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
    TensorType,
    UniformQuantized,
    i32,
    is_quantized,
    storage_type,
)
from tfl2tosa.tosa import build

_REQUANTIZE_STORAGE = ("i8", "ui8", "i16")


@pattern("tfl.quantize", kind="integer", label="quantize_int", types=("i8", "u8", "i16"))
@integer_pattern
def quantize_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """QUANTIZE: float -> `quant.qcast`; quantized -> quantized -> RESCALE."""
    source, target = tensor_type(op.operands[0]), tensor_type(op.results[0])
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
        # uint8 zero points need RESCALE's unsigned reading. (Imported here: importing
        # legalize.integer.data at the top would register its patterns before conv's.)
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
    folded by legalize.casts.dequantize_constant)."""
    source, target = tensor_type(op.operands[0]), tensor_type(op.results[0])
    if source is None or target is None or not is_quantized(source.element):
        return Failure(f"{op.name}: the input is not a quantized tensor")
    target = target.with_shape(source.shape)
    if constant_value(op.operands[0]) is not None:
        return Failure(f"{op.name}: constant input (folded elsewhere)")
    if not storage_type(target.element).is_float:
        return Failure(f"{op.name}: the result is not a float tensor")
    return [rw.op("quant.dcast", [op.operands[0]], target)]
