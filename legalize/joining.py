"""Patterns for TFL ops that join or repeat tensors: CONCATENATION, PACK, TILE,
BROADCAST_TO (TOSA CONCAT and TILE); type-generic moves, see `legalize.shape`.

- CONCATENATION copies int8 and int16 inputs (int8 requires equal
  quantization, int16 inputs with other scales are copied unchanged);
  uint8 inputs with other parameters are requantized in float32
  (reference_ops::ConcatenationWithScaling): `clamp(round(v * s + b) + zp_out,
  0, 255)` with `s = s_in * (1 / s_out)` and `b = -zp_in * s`, a function of
  the 256 stored values, so one TABLE per such input reproduces it. Fused
  activations and PACK with differing quantization are refused by TFLite.
"""

from __future__ import annotations

import numpy as np

from legalize.common import fused_activation, tensor_type
from legalize.integer.data import UINT8_OFFSET
from legalize.integer.support import integer_pattern, require_per_tensor
from legalize.quantized import round_half_away
from legalize.registry import pattern
from legalize.shape import (
    MOVE_TYPES,
    concat,
    finish,
    fresh,
    identity,
    int_list,
    normalize_axis,
    require_move,
    reshape_to,
    shape_of,
)
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import UniformQuantized, i8
from tfl2tosa.tosa import build


@pattern("tfl.concatenation", kind="any", types=MOVE_TYPES)
def concatenation(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """CONCAT along `axis`, then the fused activation.

    Quantized inputs must share the output's scale and zero point: TFLite
    requantizes otherwise, which is not a move (the fallback handles it).
    """
    failed = require_move(op, op.operands)
    if failed is not None:
        return failed
    rank = len(shape_of(op.result))
    axis = normalize_axis(int(op.attrs.get("axis", 0)), rank)
    parts = [v for v in op.operands if shape_of(v)[axis] > 0]
    if not parts:
        return Failure(f"{op.name}: the result is empty")
    joined = fresh(rw, concat(rw, parts, axis))
    return [fused_activation(rw, joined, op.attrs.get("fused_activation_function"))]


@pattern("tfl.pack", kind="any", types=MOVE_TYPES)
def pack(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Each input RESHAPEd to have a size-1 dimension at `axis`, then CONCAT."""
    failed = require_move(op, op.operands)
    if failed is not None:
        return failed
    out_shape = shape_of(op.result)
    axis = normalize_axis(int(op.attrs.get("axis", 0)), len(out_shape))
    piece = list(out_shape)
    piece[axis] = 1
    parts = [reshape_to(rw, v, piece) for v in op.operands]
    return [finish(rw, concat(rw, parts, axis), op.result)]


@pattern("tfl.tile", kind="any", types=MOVE_TYPES)
def tile(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TILE with the constant multiples."""
    failed = require_move(op)
    if failed is not None:
        return failed
    multiples = int_list(op.operands[1])
    if multiples is None:
        return Failure(f"{op.name}: multiples must be a constant")
    x = op.operands[0]
    if all(m == 1 for m in multiples):
        return [identity(rw, x)]
    return [build.op(rw, "tosa.tile", [x, build.const_shape(rw, multiples)],
                     tensor_type(op.result))]


@pattern("tfl.broadcast_to", kind="any", types=MOVE_TYPES)
def broadcast_to(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """RESHAPE to the output's rank (leading 1s), then TILE the size-1 dimensions."""
    failed = require_move(op)
    if failed is not None:
        return failed
    out_shape = shape_of(op.result)
    x = op.operands[0]
    in_shape = (1,) * (len(out_shape) - len(shape_of(x))) + shape_of(x)
    if any(i not in (1, o) for i, o in zip(in_shape, out_shape)):
        return Failure(f"{op.name}: {shape_of(x)} does not broadcast to {out_shape}")
    x = reshape_to(rw, x, in_shape)
    multiples = [o // i for i, o in zip(in_shape, out_shape)]
    if all(m == 1 for m in multiples):
        return [finish(rw, x, op.result)]
    return [build.op(rw, "tosa.tile", [x, build.const_shape(rw, multiples)],
                     tensor_type(op.result))]


# ---------------------------------------------------------------------------
# CONCATENATION of uint8 with requantized inputs


def concatenation_uint8_table(in_type: UniformQuantized, out_type: UniformQuantized
                              ) -> np.ndarray:
    """The TABLE (256 int8 entries, entry k for stored byte k - 128) of TFLite's
    float32 requantization of one uint8 input (ConcatenationWithScaling):
    `clamp((int)round(v * s + b) + zp_out, 0, 255)`, `s = s_in * (1 / s_out)`,
    `b = -zp_in * s`, v the unsigned value of the byte; entries hold the
    result's byte."""
    scale = np.float32(in_type.scale) * (np.float32(1) / np.float32(out_type.scale))
    bias = np.float32(-in_type.zero_point) * scale
    table = np.empty(256, dtype=np.int8)
    for k in range(256):
        unsigned = (k - UINT8_OFFSET) % 256
        value = np.float32(np.float32(unsigned) * scale) + bias
        stored = min(255, max(0, round_half_away(float(value)) + out_type.zero_point))
        table[k] = stored - 256 if stored > 127 else stored
    return table


@pattern("tfl.concatenation", kind="integer", label="concatenation_uint8", types=("u8",))
@integer_pattern
def concatenation_uint8(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """CONCAT of uint8 inputs, each input whose scale or zero point differs from
    the output's first mapped through the TABLE of TFLite's float32
    requantization (the stored bytes pass through TABLE as int8)."""
    result = op.results[0]
    elements = require_per_tensor(op, [*op.operands, result], "ui8")
    if isinstance(elements, Failure):
        return elements
    if op.attrs.get("fused_activation_function") not in (None, "NONE"):
        return Failure(f"{op.name}: TFLite refuses fused activations on CONCATENATION")
    *in_types, out_type = elements
    out = tensor_type(result)
    rank = len(out.shape)
    axis = int(op.attrs.get("axis", 0))
    axis = axis + rank if axis < 0 else axis
    parts = []
    for x, q in zip(op.operands, in_types):
        if tensor_type(x).shape[axis] == 0:
            continue
        if q.scale != out_type.scale or q.zero_point != out_type.zero_point:
            table = build.const(rw, concatenation_uint8_table(q, out_type), i8)
            x = build.op(rw, "tosa.table", [x, table], tensor_type(x).with_element(out_type))
        parts.append(x)
    if len(parts) < 2:
        return Failure(f"{op.name}: fewer than two non-empty inputs")
    return [build.op(rw, "tosa.concat", parts, out, axis=axis)]
