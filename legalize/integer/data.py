"""Integer patterns for quantized data ops: ARG_MAX/ARG_MIN,
REDUCE_MAX/REDUCE_MIN, MAXIMUM/MINIMUM, SQUARED_DIFFERENCE, and uint8 bodies
through int8 twins (the uint8 <-> int8 moves other families use too).

What TFLite 2.20's builtin reference kernels compute (read in the kernels,
confirmed on the interpreter; tests/test_legalize_integer_data.py pins each):

- ARG_MAX / ARG_MIN (int8, uint8; TFLite has no int16 kernel) compare stored
  values; the first index wins ties.
- REDUCE_MAX / REDUCE_MIN and MAXIMUM / MINIMUM work on stored values: the
  reduction refuses differing input/output quantization at run time, and
  MAXIMUM/MINIMUM ignore it, so only equal quantization (the converter's
  `same scale` constraint) is a real maximum; other cases are left to the
  fallback.
- SQUARED_DIFFERENCE (int8 only, squared_difference.cc): like ADD with a left
  shift of 7: `a_i = MBQM((x_i - zp_i) 2^7, s_i / (2 max(s_1, s_2)))`, then
  `zp_out + MBQM((a_1 - a_2)^2, (2 max)^2 / (2^14 s_out))`, clamped.

uint8: TOSA integers are signed and unsigned data exists only in RESCALE's
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

from legalize.common import constant_value, reshape_to_rank
from legalize.integer.support import integer_pattern, require_per_tensor, tensor_type
from legalize.quantized import (
    DOUBLE_ROUND,
    quantize_multiplier,
    rescale,
    rescale_from_i32,
    rescale_to_i32,
    tflite_quantize_multiplier,
)
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


def _same_quantization(op: Op, values: list[Value], storages: tuple[str, ...]
                       ) -> UniformQuantized | Failure:
    """The one per-tensor quantized element all `values` share, or why there is none."""
    elements = require_per_tensor(op, values, *storages)
    if isinstance(elements, Failure):
        return elements
    if len(set(elements)) != 1:
        return Failure(f"{op.name}: operands and result differ in quantization, which "
                       "TFLite's kernel ignores or refuses (left to the fallback)")
    return elements[0]


def _constant_axes(op: Op, rank: int) -> list[int] | Failure:
    """The constant axis operand (1) as sorted, distinct, non-negative axes."""
    array = constant_value(op.operands[1])
    if array is None:
        return Failure(f"{op.name}: the axis operand is not a constant")
    axes = [int(a) for a in np.ravel(array)]
    if any(not -rank <= a < rank for a in axes):
        return Failure(f"{op.name}: axis {axes} out of range for rank {rank}")
    return sorted({a % rank for a in axes})


def _reduce_each(rw: Rewriter, name: str, x: Value, axes: list[int]) -> Value:
    """One TOSA reduction per axis, each keeping its axis with size 1."""
    for axis in axes:
        shape = list(tensor_type(x).shape)
        shape[axis] = 1
        x = build.op(rw, name, [x], tensor_type(x).with_shape(tuple(shape)), axis=axis)
    return x


# ---------------------------------------------------------------------------
# ARG_MAX / ARG_MIN


@pattern("tfl.arg_max", "tfl.arg_min", kind="integer", label="arg_max_min_int",
         types=("i8", "u8"))
@integer_pattern
def arg_max_min_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """ARGMAX of the stored int8 values (uint8 through the int8 twin, which keeps
    the order). ARG_MIN: ARGMAX of BITWISE_NOT x = -1 - x, which reverses the
    order without overflow (NEGATE would wrap -128) and keeps ties, so the first
    index still wins as in TFLite's ArgMinMax."""
    elements = require_per_tensor(op, op.operands[:1], "i8", "ui8")
    if isinstance(elements, Failure):
        return elements
    result = tensor_type(op.results[0])
    if storage_type(result.element) != i32:
        return Failure(f"{op.name} with {result.element} output: TOSA has no 64-bit integers")
    x = op.operands[0]
    axes = _constant_axes(op, len(tensor_type(x).shape))
    if isinstance(axes, Failure):
        return axes
    if len(axes) != 1:
        return Failure(f"{op.name}: needs exactly one axis, got {axes}")
    keys = to_int8(rw, x)
    if op.name == "tfl.arg_min":
        keys = build.op(rw, "tosa.bitwise_not", [keys], tensor_type(keys).with_element(i8))
    return [build.op(rw, "tosa.argmax", [keys], result, axis=axes[0], nan_mode="PROPAGATE")]


# ---------------------------------------------------------------------------
# REDUCE_MAX / REDUCE_MIN, MAXIMUM / MINIMUM

_REDUCTIONS = {"tfl.reduce_max": "tosa.reduce_max", "tfl.reduce_min": "tosa.reduce_min"}


@pattern(*_REDUCTIONS, kind="integer", label="reduce_max_min_int", types=("i8", "u8", "i16"))
@integer_pattern
def reduce_max_min_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """REDUCE_MAX / REDUCE_MIN per axis on the stored values (uint8 through the
    int8 twin), then RESHAPE to the result: input and output share their
    quantization, as TFLite's kernel requires."""
    x, result = op.operands[0], op.results[0]
    shared = _same_quantization(op, [x, result], ("i8", "ui8", "i16"))
    if isinstance(shared, Failure):
        return shared
    shape = tensor_type(x).shape
    if 0 in shape:
        return Failure(f"{op.name}: empty input")
    axes = _constant_axes(op, len(shape))
    if isinstance(axes, Failure):
        return axes
    reduced = _reduce_each(rw, _REDUCTIONS[op.name], to_int8(rw, x), axes)
    if tensor_type(reduced).shape != tensor_type(result).shape:
        reduced = build.reshape(rw, reduced, tensor_type(result).shape)
    elif reduced is x:
        reduced = build.op(rw, "tosa.identity", [x], tensor_type(x))
    return [restore_uint8(rw, reduced, result)]


_EXTREMA = {"tfl.maximum": "tosa.maximum", "tfl.minimum": "tosa.minimum"}


@pattern(*_EXTREMA, kind="integer", label="maximum_minimum_int", types=("i8", "u8", "i16"))
@integer_pattern
def maximum_minimum_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """MAXIMUM / MINIMUM of the stored values (TOSA's are i32 only): both inputs
    CAST to i32 (uint8 through the int8 twin), the extremum, CAST back, which
    is exact since it is one of the inputs."""
    result = op.results[0]
    shared = _same_quantization(op, [*op.operands[:2], result], ("i8", "ui8", "i16"))
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
# SQUARED_DIFFERENCE

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
    if not any(is_uint8(tensor_type(v).element) for v in (*op.operands, *op.results)
               if tensor_type(v) is not None):
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

