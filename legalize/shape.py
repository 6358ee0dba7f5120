"""TFL data-layout ops: the helpers every data-movement family shares, and the
patterns for RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE and the shape-valued ops.

Data-layout ops move values without computing on them, so most patterns are
type-generic (`kind="any"`): the same lowering serves float, int32, bool and
quantized tensors. A quantized move is only exact when every data operand and
result share one quantization (scale and zero point); otherwise the pattern
returns a Failure and the op takes the dequantize/float/quantize fallback
(`require_move` decides).

Shape-valued ops (SHAPE, RANK, BROADCAST_ARGS) fold to constants.

The other data-layout families live beside this module and use its helpers
(`require_move`, `int_list`, `reshape_to`, `slice_along`, ...): slicing.py
(SLICE, STRIDED_SLICE, SPLIT, UNPACK), joining.py (CONCATENATION, PACK, TILE,
BROADCAST_TO), padding.py (PAD, MIRROR_PAD), space_batch.py
(SPACE_TO_DEPTH, SPACE_TO_BATCH_ND, ...), reverse.py (REVERSE_V2,
REVERSE_SEQUENCE) and updates.py (MATRIX_DIAG, MATRIX_SET_DIAG,
DYNAMIC_UPDATE_SLICE); gather.py, resize.py and misc.py use them too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from legalize.common import constant_value, element, is_none, require_static, tensor_type
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import (
    UniformQuantized,
    UniformQuantizedPerAxis,
    is_quantized,
    numpy_dtype,
    scalar_type,
    storage_type,
)
from tfl2tosa.tosa import build

# Coverage columns of a pure move through TOSA's data-layout ops (bool, i8,
# i16, i32, f16, f32 in tosa.xml); u8 data is carried in i8 storage.
MOVE_TYPES = ("f32", "f16", "i32", "bool", "i8", "u8", "i16")
# SELECT has no bool-free restriction either, but GATHER/SCATTER have no bool mode.
SELECT_TYPES = MOVE_TYPES
# Storage types a TOSA data-layout op accepts.
_TOSA_DATA = frozenset({"i1", "i8", "ui8", "i16", "i32", "f16", "bf16", "f32"})


# ---------------------------------------------------------------------------
# Helpers (candidates for legalize/common.py)


# ---------------------------------------------------------------------------
# Helpers (shared by the data-movement families)


def require_move(op: Op, data: Sequence[Value] | None = None, *, static: bool = True,
                 raw: bool = False) -> Failure | None:
    """Failure unless `data` (default: operand 0) and every result have one element type.

    Moving stored integers is exact only when input and output quantization are
    the same. With `raw`, only the storage types must agree: for TFLite kernels
    that copy stored values whatever their quantization (MATRIX_SET_DIAG,
    DYNAMIC_UPDATE_SLICE), which is then what the lowering reproduces.
    Per-axis quantized data is refused: a move can change which dimension its
    scales run along.
    """
    values = [*(op.operands[:1] if data is None else data), *op.results]
    elements = {storage_type(element(v)) if raw else element(v) for v in values}
    if len(elements) != 1:
        return Failure(f"{op.name}: operands and results differ in type or quantization "
                       f"({', '.join(sorted(str(e) for e in elements))}), not a pure move")
    if any(isinstance(element(v), UniformQuantizedPerAxis) for v in values):
        return Failure(f"{op.name}: per-axis quantized data")
    stored = storage_type(element(values[0]))
    # Unsigned data is only representable as the bits of quantized storage.
    if stored.name not in _TOSA_DATA or (stored.kind == "unsigned"
                                         and not is_quantized(element(values[0]))):
        return Failure(f"{op.name}: TOSA has no {stored} tensors")
    return require_static(op) if static else None


def int_list(value: Value) -> list[int] | None:
    """The integers of a constant operand, flattened; None if it is not constant."""
    array = constant_value(value)
    if array is None:
        return None
    return [int(v) for v in np.asarray(array).reshape(-1).tolist()]


def shape_of(value: Value) -> tuple[int, ...]:
    shape = tensor_type(value).shape
    if shape is None:
        raise ValueError(f"{value.name} is unranked")
    return shape


def normalize_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def reshape_to(rw: Rewriter, x: Value, shape: Sequence[int]) -> Value:
    """`x` with `shape`: itself if it has it, a reshaped constant if it is one,
    else a RESHAPE."""
    if shape_of(x) == tuple(shape):
        return x
    array = constant_value(x)
    if array is not None and array.size == tensor_type(x).num_elements:
        return build.const(rw, np.asarray(array).reshape(shape), element(x))
    return build.reshape(rw, x, [int(d) for d in shape])


def slice_of(rw: Rewriter, x: Value, start: Sequence[int], size: Sequence[int]) -> Value:
    """SLICE, or `x` itself when the slice is the whole tensor."""
    if all(s == 0 for s in start) and tuple(size) == shape_of(x):
        return x
    return build.slice(rw, x, [int(s) for s in start], [int(s) for s in size])


def slice_along(rw: Rewriter, x: Value, axis: int, start: int, count: int) -> Value:
    """`x[..., start:start + count, ...]` along `axis` (`slice_of`)."""
    begin, size = [0] * len(shape_of(x)), list(shape_of(x))
    begin[axis], size[axis] = start, count
    return slice_of(rw, x, begin, size)


def reverse_axis(rw: Rewriter, x: Value, axis: int) -> Value:
    if shape_of(x)[axis] <= 1:
        return x
    return build.op(rw, "tosa.reverse", [x], tensor_type(x), axis=axis)


def concat(rw: Rewriter, parts: Sequence[Value], axis: int) -> Value:
    if len(parts) == 1:
        return parts[0]
    shape = list(shape_of(parts[0]))
    shape[axis] = sum(shape_of(p)[axis] for p in parts)
    t = tensor_type(parts[0]).with_shape(tuple(shape))
    return build.op(rw, "tosa.concat", list(parts), t, axis=axis)


def identity(rw: Rewriter, x: Value) -> Value:
    """A fresh value equal to `x`, for an op that moves nothing."""
    return build.op(rw, "tosa.identity", [x], tensor_type(x))


def pad_with(rw: Rewriter, x: Value, padding: Sequence[int], value: float) -> Value:
    """PAD `x` ([before0, after0, ...]) with the stored value `value`.

    The [1] pad_const is built in the type `x` is stored in after quantized
    types are stripped: a signless integer of the storage width, so a u8 zero
    point of 128 is the i8 bit pattern -128 (build.pad would write it to a
    uint8 array).
    """
    elem = element(x)
    stored = storage_type(elem)
    if is_quantized(elem):
        bits = stored.bits
        wrapped = ((int(value) + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))
        signless = scalar_type(f"i{bits}")
        pad_const = build.const(rw, np.array([wrapped], dtype=numpy_dtype(signless)), signless)
    else:
        pad_const = build.const(rw, np.array([value], dtype=numpy_dtype(stored)), stored)
    shape = tuple(d + padding[2 * i] + padding[2 * i + 1] for i, d in enumerate(shape_of(x)))
    return build.op(rw, "tosa.pad", [x, build.const_shape(rw, padding), pad_const],
                    tensor_type(x).with_shape(shape))


def pad_value(elem: object) -> int:
    """The stored value that means real 0: the zero point of a quantized type."""
    if isinstance(elem, UniformQuantized):
        return elem.zero_point
    return 0


def fresh(rw: Rewriter, x: Value) -> Value:
    """`x` if this rewrite created it, else an IDENTITY of it: a pattern's result
    must be a new value even when nothing moves."""
    created = x.owner is not None and any(x.owner is op for op in rw.created)
    return x if created else identity(rw, x)


def finish(rw: Rewriter, x: Value, result: Value) -> Value:
    """`x` reshaped to `result`'s shape, as a new value."""
    return fresh(rw, reshape_to(rw, x, shape_of(result)))


def fold_constant(rw: Rewriter, op: Op, array: np.ndarray) -> list[Value]:
    """Replace a shape-valued op by a constant of its result type."""
    t = tensor_type(op.result)
    values = np.asarray(array, dtype=numpy_dtype(t.element)).reshape(t.shape)
    return [rw.op("tosa.const", [], t.with_shape(values.shape), values=values)]


def take_every(rw: Rewriter, x: Value, axis: int, step: int, count: int) -> Value:
    """Elements 0, step, 2*step, ... (`count` of them) along `axis` of `x`.

    x is viewed as [outer, count, step, inner] (PADded at the end of `axis` if
    it is shorter than count*step); SLICE keeps index 0 of the step dimension.
    """
    shape = list(shape_of(x))
    if count * step > shape[axis]:
        padding = [0] * (2 * len(shape))
        padding[2 * axis + 1] = count * step - shape[axis]
        x = pad_with(rw, x, padding, pad_value(element(x)))
    elif count * step < shape[axis]:
        x = slice_along(rw, x, axis, 0, count * step)
    outer = math.prod(shape[:axis])
    inner = math.prod(shape[axis + 1:])
    grouped = reshape_to(rw, x, [outer, count, step, inner])
    picked = slice_of(rw, grouped, [0, 0, 0, 0], [outer, count, 1, inner])
    shape[axis] = count
    return reshape_to(rw, picked, shape)


# ---------------------------------------------------------------------------
# Reshapes and transposes


def _target_shape(op: Op) -> list[int] | Failure:
    """RESHAPE's output shape: the result type, else the shape operand / attribute
    with one -1 resolved from the input's element count."""
    result = tensor_type(op.result)
    if result.is_static:
        return list(result.shape)
    requested = None
    if len(op.operands) > 1 and not is_none(op.operands[1]):
        requested = int_list(op.operands[1])
    if requested is None:
        requested = list(op.attrs.get("new_shape") or []) or None
    if requested is None:
        return Failure(f"{op.name}: the target shape is not a constant")
    count = tensor_type(op.operands[0]).num_elements
    known = math.prod(d for d in requested if d != -1)
    return [count // known if d == -1 else d for d in requested]


@pattern("tfl.reshape", kind="any", types=MOVE_TYPES)
def reshape(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """RESHAPE to the output shape (TFLite's -1 resolved from the element count)."""
    x = op.operands[0]
    failed = require_move(op, [x], static=False)
    if failed is not None:
        return failed
    if not tensor_type(x).is_static:
        return Failure(f"{op.name}: dynamic input shape")
    shape = _target_shape(op)
    if isinstance(shape, Failure):
        return shape
    return [fresh(rw, reshape_to(rw, x, shape))]


@pattern("tfl.squeeze", "tfl.expand_dims", kind="any", types=MOVE_TYPES)
def squeeze_expand_dims(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """A RESHAPE to the output shape (only size-1 dimensions come or go)."""
    failed = require_move(op)
    if failed is not None:
        return failed
    return [finish(rw, op.operands[0], op.result)]


@pattern("tfl.transpose", kind="any", types=MOVE_TYPES)
def transpose(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TRANSPOSE with the constant permutation as `perms`."""
    failed = require_move(op)
    if failed is not None:
        return failed
    x = op.operands[0]
    perm = int_list(op.operands[1])
    if perm is None:
        return Failure(f"{op.name}: the permutation is not a constant")
    rank = len(shape_of(x))
    perm = [normalize_axis(p, rank) for p in perm]
    if perm == list(range(rank)):
        return [identity(rw, x)]
    return [build.transpose(rw, x, perm)]


# ---------------------------------------------------------------------------
# Shape-valued ops (constant folding)


@pattern("tfl.shape", kind="any", types=MOVE_TYPES)
def shape(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """A constant: the static input shape."""
    t = tensor_type(op.operands[0])
    if not t.is_static:
        return Failure(f"{op.name}: dynamic input shape")
    return fold_constant(rw, op, np.array(t.shape))


@pattern("tfl.rank", kind="any", types=MOVE_TYPES)
def rank(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """A constant: the input rank."""
    t = tensor_type(op.operands[0])
    if t.shape is None:
        return Failure(f"{op.name}: unranked input")
    return fold_constant(rw, op, np.array(len(t.shape)))


@pattern("tfl.broadcast_args", kind="any", types=("i32",))
def broadcast_args(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """A constant: the broadcast of two constant shapes (numpy's rule = TFLite's)."""
    first, second = (int_list(v) for v in op.operands)
    if first is None or second is None:
        return Failure(f"{op.name}: the shapes must be constants")
    try:
        shape = np.broadcast_shapes(tuple(first), tuple(second))
    except ValueError:
        return Failure(f"{op.name}: {first} and {second} do not broadcast")
    return fold_constant(rw, op, np.array(shape))
