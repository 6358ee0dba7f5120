"""uint8 bodies through int8 twins: the uint8 <-> int8 moves other families
use too, and the pattern running a uint8 op as its int8 pattern.

TOSA integers are signed and unsigned data exists only in RESCALE's
`input_unsigned` / `output_unsigned`; RESCALE cannot widen unsigned data to
i32 directly. A uint8 tensor with (s, zp) is moved exactly into its int8
twin (s, zp - 128) by a unit RESCALE (stored value - 128), and back. The
TFLite uint8 kernels of the ops in `_UINT8_TWIN_OPS` compute what their int8
kernels compute on the twins (the offset cancels in `x - zp`, and the clamp
bounds move with the zero point), so those ops run the int8 pattern between
two such moves.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from legalize.common import constant_value
from legalize.integer.support import tensor_type
from legalize.quantized import quantize_multiplier
from legalize.registry import pattern, patterns_for
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter, discard_since
from tfl2tosa.ir.types import (
    ElementType,
    TensorType,
    UniformQuantized,
    i8,
    i32,
    storage_type,
)
from tfl2tosa.tosa import build

# ---------------------------------------------------------------------------
# uint8 <-> int8 twins

# A uint8 value v is the int8 value v - 128 of a twin with zero point zp - 128.
UINT8_OFFSET = 128
# RESCALE by exactly 1: multiplier 2^30, shift 30 (TOSA spec, apply_scale_32).
_UNIT_MULTIPLIER, _UNIT_SHIFT = 1 << 30, 30


def is_uint8(element: ElementType) -> bool:
    return isinstance(element, UniformQuantized) and storage_type(element).name == "ui8"


def int8_twin(q: UniformQuantized) -> UniformQuantized:
    """The int8 type holding uint8 type `q`'s values shifted by -128."""
    return UniformQuantized(i8, q.expressed, q.scale, q.zero_point - UINT8_OFFSET,
                            q.storage_min - UINT8_OFFSET, q.storage_max - UINT8_OFFSET)


def _i8_zero_point(rw: Rewriter, value: int) -> Value:
    """A [1] i8 zero-point constant; unsigned zero points (128) are stored wrapped
    (RESCALE zero-extends them when the matching *_unsigned flag is set)."""
    wrapped = ((value + 128) % 256) - 128
    return build.const(rw, np.array([wrapped], dtype=np.int8), i8)


def _rescale(rw: Rewriter, x: Value, out_type: TensorType, multiplier: int, shift: int,
             input_zp: Value, output_zp: Value, *, rounding: str, input_unsigned: bool = False,
             output_unsigned: bool = False) -> Value:
    """A per-tensor, 32-bit-multiplier RESCALE with zero-point operands given."""
    return build.op(rw, "tosa.rescale", [
        x, build.const(rw, np.array([multiplier], dtype=np.int32), i32),
        build.const(rw, np.array([shift], dtype=np.int8), i8), input_zp, output_zp],
        out_type, scale32=True, rounding_mode=rounding, per_channel=False,
        input_unsigned=input_unsigned, output_unsigned=output_unsigned)


def _unit_rescale(rw: Rewriter, x: Value, out_type: TensorType, *, input_zp: int,
                  output_zp: int, input_unsigned: bool, output_unsigned: bool) -> Value:
    """RESCALE by exactly 1 between 8-bit types: `x - input_zp + output_zp`."""
    return _rescale(rw, x, out_type, _UNIT_MULTIPLIER, _UNIT_SHIFT,
                    _i8_zero_point(rw, input_zp), _i8_zero_point(rw, output_zp),
                    rounding="SINGLE_ROUND", input_unsigned=input_unsigned,
                    output_unsigned=output_unsigned)


def _moved_from_twin(x: Value, twin: TensorType) -> Value | None:
    """The int8 twin `x` was made from by `from_int8`, if it was: moving it back
    to int8 would give that value again."""
    owner = x.owner
    if owner is None or owner.name != "tosa.rescale" or not owner.attrs.get("output_unsigned"):
        return None
    source, multiplier, shift, input_zp, output_zp = owner.operands
    arrays = [constant_value(v) for v in (multiplier, shift, input_zp, output_zp)]
    if any(a is None for a in arrays) or source.type != twin:
        return None
    unit = [int(np.ravel(a)[0]) for a in arrays] == [_UNIT_MULTIPLIER, _UNIT_SHIFT, 0,
                                                     UINT8_OFFSET - 256]
    return source if unit else None


def to_int8(rw: Rewriter, x: Value) -> Value:
    """`x` in its int8 twin if it is uint8 (a constant is re-encoded), else `x`."""
    t = tensor_type(x)
    if t is None or not is_uint8(t.element):
        return x
    twin = t.with_element(int8_twin(t.element))
    source = _moved_from_twin(x, twin)
    if source is not None:
        return source
    array = constant_value(x)
    if array is not None:
        shifted = np.asarray(array, dtype=np.int16) - UINT8_OFFSET
        return build.const(rw, shifted.astype(np.int8).reshape(t.shape), twin.element)
    return _unit_rescale(rw, x, twin, input_zp=UINT8_OFFSET, output_zp=0,
                         input_unsigned=True, output_unsigned=False)


def from_int8(rw: Rewriter, x: Value, target: TensorType) -> Value:
    """The int8 twin `x` back in uint8 type `target` (stored value + 128)."""
    return _unit_rescale(rw, x, tensor_type(x).with_element(target.element), input_zp=0,
                         output_zp=UINT8_OFFSET, input_unsigned=False, output_unsigned=True)


def restore_uint8(rw: Rewriter, x: Value, result: Value) -> Value:
    """`x` (computed on int8 twins) in `result`'s type: back to uint8 if it is."""
    t = tensor_type(result)
    return from_int8(rw, x, t) if is_uint8(t.element) else x


def requantize_uint8(rw: Rewriter, x: Value, target: TensorType, rounding: str) -> Value:
    """QUANTIZE between quantized types when either is uint8 (TFLite's Requantize:
    `zp_out + MBQM(x - zp_in, s_in / s_out)`, clamped): one RESCALE with the
    unsigned side's flag, zero points as the unsigned values RESCALE reads.
    uint8 -> uint8 first moves the input to its int8 twin (RESCALE cannot read
    and write unsigned data at once); `x - zp_in` is unchanged by that."""
    source = tensor_type(x)
    if is_uint8(source.element) and is_uint8(target.element):
        x = to_int8(rw, x)
        source = tensor_type(x)
    s_in, s_out = source.element, target.element
    multiplier, shift = quantize_multiplier(s_in.scale / s_out.scale)

    def zero_point(q: UniformQuantized) -> Value:
        return _i8_zero_point(rw, q.zero_point) if is_uint8(q) else \
            build.zero_point(rw, q.zero_point, q)

    return _rescale(rw, x, source.with_element(s_out), multiplier, shift, zero_point(s_in),
                    zero_point(s_out), rounding=rounding, input_unsigned=is_uint8(s_in),
                    output_unsigned=is_uint8(s_out))


# ---------------------------------------------------------------------------
# uint8 bodies through int8 twins

# Ops whose TFLite uint8 kernel computes what the int8 kernel computes on the
# twins (checked against TFLite by tests/test_legalize_integer_data.py).
# AVERAGE_POOL_2D is not one: TFLite's uint8 average rounds halves up on the
# stored values, the int8 pattern rounds the twins' (negative) halves away
# from zero.
_UINT8_TWIN_OPS = (
    "tfl.add", "tfl.sub", "tfl.mul", "tfl.conv_2d", "tfl.depthwise_conv_2d",
    "tfl.fully_connected", "tfl.max_pool_2d", "tfl.mean", "tfl.softmax", "tfl.select",
    "tfl.select_v2",
)
_UINT8_TWIN_LABEL = "uint8_as_int8"


def _twin_type(value: Value) -> object:
    t = tensor_type(value)
    return t.with_element(int8_twin(t.element)) if t is not None and is_uint8(t.element) \
        else value.type


def _lower_twin(op: Op, rw: Rewriter, lower: Callable[[Op, Rewriter], object]
                ) -> list[Value] | Failure:
    """Run `lower` on an int8 stand-in of uint8 `op` whose operands are the twins."""
    operands = [to_int8(rw, v) for v in op.operands]
    stand_in = Op(op.name, operands, [_twin_type(r) for r in op.results], op.attrs,
                  result_names=[r.name for r in op.results], loc=op.loc)
    try:
        values = lower(stand_in, rw)
    finally:
        stand_in.drop_operand_uses()
    if values is None or isinstance(values, Failure):
        return values if isinstance(values, Failure) else Failure(f"{op.name}: no match")
    return [restore_uint8(rw, v, r) for v, r in zip(values, op.results)]


@pattern(*_UINT8_TWIN_OPS, kind="integer", label=_UINT8_TWIN_LABEL, types=("u8",))
def uint8_as_int8(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """A uint8 op as its int8 pattern on the int8 twins of its operands, the
    results moved back to uint8 (unit RESCALEs, exact)."""
    for v in (*op.operands, *op.results):
        t = tensor_type(v)
        if t is not None and is_uint8(t.element):
            break
    else:  # every int8 op of a model comes here first
        return Failure(f"{op.name}: no uint8 tensors")
    reasons = []
    for entry in patterns_for(op.name, rw.disabled, kinds=("integer", "any")):
        if entry.label == _UINT8_TWIN_LABEL:
            continue
        mark = len(rw.ops)
        values = _lower_twin(op, rw, entry.fn)
        if isinstance(values, Failure):
            discard_since(rw.ops, mark)
            reasons.append(values.reason)
            continue
        return values
    return Failure(f"{op.name}: no int8 pattern for the twin ({'; '.join(reasons)})")

