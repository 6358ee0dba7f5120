"""Patterns for TFL data-layout ops: RESHAPE, TRANSPOSE, CONCATENATION, SLICE, PAD, ...

These ops move values without computing on them, so most patterns are
type-generic (`kind="any"`): the same lowering serves float, int32, bool and
quantized tensors. A quantized move is only exact when every data operand and
result share one quantization (scale and zero point); otherwise the pattern
returns a Failure and the op takes the dequantize/float/quantize fallback.

Shape-valued ops (SHAPE, RANK, BROADCAST_ARGS) fold to constants.

The helpers at the top (`require_move`, `int_list`, `reshape_to`, ...) are
shared by `gather.py` and `resize.py`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from legalize.common import (
    constant_value,
    element,
    fused_activation,
    is_none,
    require_static,
    tensor_type,
)
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
    return [int(v) for v in np.asarray(array).reshape(-1)]


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


# ---------------------------------------------------------------------------
# Reshapes


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
    known = int(np.prod([d for d in requested if d != -1], dtype=np.int64))
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


# ---------------------------------------------------------------------------
# Transpose, concatenation, pack/unpack, split


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


@pattern("tfl.unpack", kind="any", types=MOVE_TYPES)
def unpack(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """One SLICE per output along `axis`, each RESHAPEd to drop that dimension."""
    failed = require_move(op)
    if failed is not None:
        return failed
    x = op.operands[0]
    axis = normalize_axis(int(op.attrs.get("axis", 0)), len(shape_of(x)))
    return [finish(rw, slice_along(rw, x, axis, i, 1), result)
            for i, result in enumerate(op.results)]


def _split_along(rw: Rewriter, op: Op, x: Value, axis: int) -> list[Value]:
    """SLICEs of `x` along `axis` with the sizes of `op`'s results, in order."""
    outs, offset = [], 0
    for result in op.results:
        count = shape_of(result)[axis]
        outs.append(finish(rw, slice_along(rw, x, axis, offset, count), result))
        offset += count
    return outs


@pattern("tfl.split", kind="any", types=MOVE_TYPES)
def split(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """`num_splits` equal SLICEs along the constant axis (operand 0)."""
    x = op.operands[1]
    failed = require_move(op, [x])
    if failed is not None:
        return failed
    axis = int_list(op.operands[0])
    if axis is None:
        return Failure(f"{op.name}: the split axis is not a constant")
    return _split_along(rw, op, x, normalize_axis(axis[0], len(shape_of(x))))


@pattern("tfl.split_v", kind="any", types=MOVE_TYPES)
def split_v(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SLICEs along the constant axis with the constant sizes (one may be -1)."""
    x = op.operands[0]
    failed = require_move(op, [x])
    if failed is not None:
        return failed
    axis = int_list(op.operands[2])
    sizes = int_list(op.operands[1])
    if axis is None or sizes is None:
        return Failure(f"{op.name}: split sizes and axis must be constants")
    axis_index = normalize_axis(axis[0], len(shape_of(x)))
    if -1 in sizes:
        sizes[sizes.index(-1)] = shape_of(x)[axis_index] - (sum(sizes) + 1)
    if sizes != [shape_of(r)[axis_index] for r in op.results]:
        return Failure(f"{op.name}: split sizes {sizes} do not match the result shapes")
    return _split_along(rw, op, x, axis_index)


# ---------------------------------------------------------------------------
# Slices


@pattern("tfl.slice", kind="any", types=MOVE_TYPES)
def slice_(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SLICE with the constant begin; a size of -1 means "to the end"."""
    failed = require_move(op)
    if failed is not None:
        return failed
    x = op.operands[0]
    shape = shape_of(x)
    begin, size = int_list(op.operands[1]), int_list(op.operands[2])
    if begin is None or size is None:
        return Failure(f"{op.name}: begin and size must be constants")
    size = [d - b if s == -1 else s for d, b, s in zip(shape, begin, size)]
    if tuple(size) != shape_of(op.result):
        return Failure(f"{op.name}: slice size {size} does not match the result")
    return [finish(rw, slice_of(rw, x, begin, size), op.result)]


def _strided_axes(op: Op, shape: tuple[int, ...], begin: list[int], end: list[int],
                  strides: list[int]) -> tuple[list[int], list[tuple[int, int, int]]]:
    """TFLite's STRIDED_SLICE index rules (kernels/strided_slice.cc, TF 2.18).

    Returns the effective input shape (with new_axis_mask dims of size 1 and
    the ellipsis expanded) and, per effective dimension, (start, stride,
    count): elements start, start + stride, ... (count of them).
    """
    attrs = op.attrs
    begin_mask, end_mask = int(attrs.get("begin_mask", 0)), int(attrs.get("end_mask", 0))
    ellipsis_mask = int(attrs.get("ellipsis_mask", 0))
    new_axis_mask = int(attrs.get("new_axis_mask", 0))
    shrink_mask = int(attrs.get("shrink_axis_mask", 0))
    offset = bool(attrs.get("offset", False))
    count = len(begin)
    added = sum(1 for i in range(count)
                if not ellipsis_mask & (1 << i) and new_axis_mask & (1 << i))
    dims = len(shape) + added
    # Which effective dimensions the ellipsis and the new axes cover.
    ellipsis_dims, new_axis_dims = set(), set()
    ellipsis_start, expanded = dims, 0
    i = 0
    while i < dims:
        if ellipsis_mask & (1 << i):
            ellipsis_start = i
            stop = max(i + 1, min(i + 1 + added + len(shape) - count, dims))
            expanded = stop - ellipsis_start - 1
            ellipsis_dims.update(range(i, stop))
            i = stop
            continue
        if new_axis_mask & (1 << (i - expanded)):
            new_axis_dims.add(i)
        i += 1
    effective: list[int] = []
    axes: list[tuple[int, int, int]] = []
    added_ellipsis = added_axes = 0
    for i in range(dims):
        if i in ellipsis_dims:
            added_ellipsis = max(0, i - ellipsis_start)
            size = shape[i - added_axes]
            effective.append(size)
            axes.append((0, 1, size))
            continue
        if i in new_axis_dims:
            effective.append(1)
            axes.append((0, 1, 1))
            added_axes += 1
            continue
        size = shape[i - added_axes]
        effective.append(size)
        if i >= count + expanded:
            axes.append((0, 1, size))
            continue
        j = i - added_ellipsis
        stride = strides[j]
        start = _strided_start(begin[j], stride, size, bool(begin_mask & (1 << j)))
        if shrink_mask & (1 << j):
            stop = start if start >= size else start + 1
        else:
            stop = end[j] + (start if offset else 0)
            stop = _strided_stop(stop, stride, size, bool(end_mask & (1 << j)))
        span = stop - start if stride > 0 else start - stop
        axes.append((start, stride, max(0, -(-span // abs(stride)))))
    return effective, axes


def _strided_start(start: int, stride: int, size: int, masked: bool) -> int:
    if start < 0:
        start += size
    start = min(max(start, 0), size) if stride > 0 else min(max(start, -1), size - 1)
    if masked:
        start = 0 if stride > 0 else size - 1
    return start


def _strided_stop(stop: int, stride: int, size: int, masked: bool) -> int:
    if stop < 0:
        stop += size
    stop = min(max(stop, 0), size) if stride > 0 else min(max(stop, -1), size - 1)
    if masked:
        stop = size if stride > 0 else -1
    return stop


def _take_every(rw: Rewriter, x: Value, axis: int, step: int, count: int) -> Value:
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
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    grouped = reshape_to(rw, x, [outer, count, step, inner])
    picked = slice_of(rw, grouped, [0, 0, 0, 0], [outer, count, 1, inner])
    shape[axis] = count
    return reshape_to(rw, picked, shape)


@pattern("tfl.strided_slice", kind="any", types=MOVE_TYPES)
def strided_slice(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SLICE the covered range; strides > 1 keep every n-th element through a
    RESHAPE [outer, n, stride, inner] and a SLICE; negative strides REVERSE the
    axis afterwards; new and shrunk axes come from the final RESHAPE."""
    failed = require_move(op)
    if failed is not None:
        return failed
    x = op.operands[0]
    begin, end, strides = (int_list(v) for v in op.operands[1:4])
    if begin is None or end is None or strides is None:
        return Failure(f"{op.name}: begin, end and strides must be constants")
    if 0 in strides:
        return Failure(f"{op.name}: a stride is 0")
    effective, axes = _strided_axes(op, shape_of(x), begin, end, strides)
    if any(n == 0 for _, _, n in axes):
        return Failure(f"{op.name}: the result is empty")
    x = reshape_to(rw, x, effective)
    # Lowest index and extent each axis touches, in ascending order.
    start = [s if k > 0 else s + k * (n - 1) for s, k, n in axes]
    size = [min(abs(k) * n, d - b) for (_, k, n), b, d in zip(axes, start, effective)]
    x = slice_of(rw, x, start, size)
    for axis, (_, k, n) in enumerate(axes):
        if abs(k) > 1 and n > 1:
            x = _take_every(rw, x, axis, abs(k), n)
        elif shape_of(x)[axis] != n:
            x = slice_along(rw, x, axis, 0, n)
    for axis, (_, k, n) in enumerate(axes):
        if k < 0:
            x = reverse_axis(rw, x, axis)
    expected = int(np.prod([n for _, _, n in axes], dtype=np.int64))
    if expected != tensor_type(op.result).num_elements:
        return Failure(f"{op.name}: computed {expected} elements, the result has "
                       f"{tensor_type(op.result).num_elements}")
    return [finish(rw, x, op.result)]


# ---------------------------------------------------------------------------
# Tile, broadcast, pad, reverse


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


def _paddings(op: Op, rank: int) -> list[int] | Failure:
    padding = int_list(op.operands[1])
    if padding is None or len(padding) != 2 * rank:
        return Failure(f"{op.name}: paddings must be a constant [rank, 2] tensor")
    if min(padding) < 0:
        return Failure(f"{op.name}: negative padding")
    return padding


@pattern("tfl.pad", "tfl.padv2", kind="any", types=MOVE_TYPES)
def pad(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """PAD with the constant paddings. The pad value is PADV2's constant operand,
    else real 0: for quantized data the ZERO POINT (TFLite pad.cc pads with
    output->params.zero_point), never the stored integer 0."""
    failed = require_move(op)
    if failed is not None:
        return failed
    x = op.operands[0]
    padding = _paddings(op, len(shape_of(x)))
    if isinstance(padding, Failure):
        return padding
    value: int | float = pad_value(element(x))
    if len(op.operands) > 2 and not is_none(op.operands[2]):
        given = constant_value(op.operands[2])
        if given is None or given.size != 1:
            return Failure(f"{op.name}: the pad value must be a constant scalar")
        if element(op.operands[2]) != element(x):
            return Failure(f"{op.name}: the pad value is quantized differently from the input")
        value = given.reshape(-1)[0].item()
    if not any(padding):
        return [identity(rw, x)]
    return [pad_with(rw, x, padding, value)]


@pattern("tfl.mirror_pad", kind="any", types=MOVE_TYPES)
def mirror_pad(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Per axis: CONCAT [reversed SLICE, x, reversed SLICE]. REFLECT mirrors
    around the edge element (excluded), SYMMETRIC includes it."""
    failed = require_move(op)
    if failed is not None:
        return failed
    x = op.operands[0]
    shape = shape_of(x)
    padding = _paddings(op, len(shape))
    if isinstance(padding, Failure):
        return padding
    reflect = op.attrs.get("mode", "REFLECT") == "REFLECT"
    for axis, size in enumerate(shape):
        before, after = padding[2 * axis], padding[2 * axis + 1]
        if not before and not after:
            continue
        skip = 1 if reflect else 0
        if max(before, after) + skip > size:
            return Failure(f"{op.name}: padding {before},{after} exceeds axis size {size}")
        parts = []
        if before:
            parts.append(_mirrored(rw, x, axis, skip, before))
        parts.append(x)
        if after:
            parts.append(_mirrored(rw, x, axis, size - skip - after, after))
        x = concat(rw, parts, axis)
    return [finish(rw, x, op.result)]


def _mirrored(rw: Rewriter, x: Value, axis: int, start: int, count: int) -> Value:
    return reverse_axis(rw, slice_along(rw, x, axis, start, count), axis)


@pattern("tfl.reverse_v2", kind="any", types=MOVE_TYPES)
def reverse_v2(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """One REVERSE per constant axis. TFLite's kernel copies stored values whatever
    the quantization of its input and output (the int8 bidirectional LSTM has them
    differ), so the move is raw as well."""
    failed = require_move(op, raw=True)
    if failed is not None:
        return failed
    axes = int_list(op.operands[1])
    if axes is None:
        return Failure(f"{op.name}: the axes must be a constant")
    x = op.operands[0]
    rank = len(shape_of(x))
    for axis in sorted({normalize_axis(a, rank) for a in axes}):
        x = reverse_axis(rw, x, axis)
    return [finish(rw, x, op.result)]


# ---------------------------------------------------------------------------
# Space/depth/batch rearrangements


def _swap_block_axes(rw: Rewriter, op: Op, split_shape: list[int]) -> Value:
    """op's input RESHAPEd to the rank-6 `split_shape`, axes 2 and 3 swapped
    (TRANSPOSE (0,1,3,2,4,5)), RESHAPEd to op's result."""
    x = reshape_to(rw, op.operands[0], split_shape)
    return finish(rw, build.transpose(rw, x, [0, 1, 3, 2, 4, 5]), op.result)


@pattern("tfl.space_to_depth", kind="any", types=MOVE_TYPES)
def space_to_depth(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """[N,H,W,C] -> RESHAPE [N,H/b,b,W/b,b,C] -> TRANSPOSE (0,1,3,2,4,5) -> RESHAPE
    [N,H/b,W/b,b*b*C] (TFLite's depth order: block row, block column, channel)."""
    failed = require_move(op)
    if failed is not None:
        return failed
    n, h, w, c = shape_of(op.operands[0])
    b = int(op.attrs["block_size"])
    return [_swap_block_axes(rw, op, [n, h // b, b, w // b, b, c])]


@pattern("tfl.depth_to_space", kind="any", types=MOVE_TYPES)
def depth_to_space(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """[N,H,W,C] -> RESHAPE [N,H,W,b,b,C/b²] -> TRANSPOSE (0,1,3,2,4,5) -> RESHAPE
    [N,H*b,W*b,C/b²] (the inverse of SPACE_TO_DEPTH, DCR order)."""
    failed = require_move(op)
    if failed is not None:
        return failed
    n, h, w, c = shape_of(op.operands[0])
    b = int(op.attrs["block_size"])
    return [_swap_block_axes(rw, op, [n, h, w, b, b, c // (b * b)])]


def _block_params(op: Op) -> tuple[list[int], list[int]] | Failure:
    """SPACE_TO_BATCH_ND's block shape and paddings, BATCH_TO_SPACE_ND's block
    shape and crops: constants, one (before, after) pair per block dim."""
    failed = require_move(op)
    if failed is not None:
        return failed
    rank = len(shape_of(op.operands[0]))
    block = int_list(op.operands[1])
    pads = int_list(op.operands[2])
    if block is None or pads is None:
        return Failure(f"{op.name}: block shape and paddings/crops must be constants")
    if len(pads) != 2 * len(block) or len(block) + 1 > rank or min(block) < 1:
        return Failure(f"{op.name}: block shape {block} does not fit rank {rank}")
    return block, pads


@pattern("tfl.space_to_batch_nd", kind="any", types=MOVE_TYPES)
def space_to_batch_nd(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """PAD the spatial dims (with the zero point when quantized, as TFLite's
    output_offset), RESHAPE [N, S1/b1, b1, ..., R], TRANSPOSE the block dims to
    the front, RESHAPE [N*prod(b), S1/b1, ..., R]."""
    params = _block_params(op)
    if isinstance(params, Failure):
        return params
    x = op.operands[0]
    shape = shape_of(x)
    block, pads = params
    m = len(block)
    padding = [0, 0, *pads] + [0, 0] * (len(shape) - 1 - m)
    if any(padding):
        x = pad_with(rw, x, padding, pad_value(element(x)))
    padded = shape_of(x)
    spatial = [padded[1 + i] // block[i] for i in range(m)]
    rest = list(padded[1 + m:])
    split_shape = [padded[0]]
    for s, b in zip(spatial, block):
        split_shape += [s, b]
    x = reshape_to(rw, x, split_shape + rest)
    # [N, s1, b1, s2, b2, ..., R] -> [b1, b2, ..., N, s1, s2, ..., R]
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    perm += list(range(1 + 2 * m, 1 + 2 * m + len(rest)))
    x = build.transpose(rw, x, perm)
    return [finish(rw, x, op.result)]


@pattern("tfl.batch_to_space_nd", kind="any", types=MOVE_TYPES)
def batch_to_space_nd(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """RESHAPE [b1, ..., bm, N, S1, ..., R], TRANSPOSE to [N, S1, b1, ..., R],
    RESHAPE [N, S1*b1, ..., R], SLICE off the crops."""
    params = _block_params(op)
    if isinstance(params, Failure):
        return params
    x = op.operands[0]
    shape = shape_of(x)
    block, crops = params
    m = len(block)
    batch = shape[0] // int(np.prod(block, dtype=np.int64))
    spatial = list(shape[1:1 + m])
    rest = list(shape[1 + m:])
    x = reshape_to(rw, x, block + [batch] + spatial + rest)
    # [b1..bm, N, S1..Sm, R] -> [N, S1, b1, S2, b2, ..., R]
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(1 + 2 * m, 1 + 2 * m + len(rest)))
    x = build.transpose(rw, x, perm)
    full = [batch] + [s * b for s, b in zip(spatial, block)] + rest
    x = reshape_to(rw, x, full)
    start = [0] + [crops[2 * i] for i in range(m)] + [0] * len(rest)
    size = [batch] + [full[1 + i] - crops[2 * i] - crops[2 * i + 1] for i in range(m)] + rest
    return [finish(rw, slice_of(rw, x, start, size), op.result)]


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


# ---------------------------------------------------------------------------
# Diagonals, sequences, updates


def _diagonal_matrix(rw: Rewriter, diag: Value, rows: int, cols: int) -> Value:
    """[..., K] -> [..., rows, cols] with the K values on the main diagonal and
    the stored value 0 elsewhere, by moves only: element (i, i) sits at flat
    index i*(cols+1), so each value followed by `cols` zeros, flattened and cut
    (or padded) to rows*cols, is the matrix."""
    batch = list(shape_of(diag)[:-1])
    k = shape_of(diag)[-1]
    x = reshape_to(rw, diag, batch + [k, 1])
    x = pad_with(rw, x, [0, 0] * (len(batch) + 1) + [0, cols], 0)
    x = reshape_to(rw, x, batch + [k * (cols + 1)])
    total = rows * cols
    if k * (cols + 1) > total:
        x = slice_of(rw, x, [0] * (len(batch) + 1), batch + [total])
    elif k * (cols + 1) < total:
        x = pad_with(rw, x, [0, 0] * len(batch) + [0, total - k * (cols + 1)], 0)
    return reshape_to(rw, x, batch + [rows, cols])


@pattern("tfl.matrix_diag", kind="any", types=MOVE_TYPES)
def matrix_diag(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The diagonal matrix by PAD/RESHAPE/SLICE (no arithmetic). Off-diagonal
    elements are the stored value 0, as TFLite's kernel writes T(0) even for
    quantized data."""
    failed = require_move(op)
    if failed is not None:
        return failed
    n = shape_of(op.operands[0])[-1]
    return [finish(rw, _diagonal_matrix(rw, op.operands[0], n, n), op.result)]


@pattern("tfl.matrix_set_diag", kind="any", types=SELECT_TYPES)
def matrix_set_diag(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SELECT(constant identity mask, diagonal matrix of the new values, input).
    TFLite copies the stored diagonal values even when their quantization differs
    from the input's (kernels/matrix_set_diag.cc), and so does this lowering."""
    failed = require_move(op, op.operands, raw=True)
    if failed is not None:
        return failed
    x, diag = op.operands
    shape = shape_of(x)
    rows, cols = shape[-2:]
    if shape_of(diag)[-1] != min(rows, cols):
        return Failure(f"{op.name}: the diagonal has {shape_of(diag)[-1]} values, "
                       f"expected {min(rows, cols)}")
    matrix = _diagonal_matrix(rw, diag, rows, cols)
    mask = np.eye(rows, cols, dtype=bool).reshape((1,) * (len(shape) - 2) + (rows, cols))
    out = build.op(rw, "tosa.select", [build.const(rw, mask), matrix, x], tensor_type(x))
    return [out]


@pattern("tfl.reverse_sequence", kind="any", types=MOVE_TYPES)
def reverse_sequence(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Per batch entry b (constant seq_lengths L_b): SLICE it, REVERSE its first
    L_b steps along seq_dim, CONCAT the batch back together."""
    failed = require_move(op)
    if failed is not None:
        return failed
    lengths = int_list(op.operands[1])
    if lengths is None:
        return Failure(f"{op.name}: seq_lengths must be a constant")
    x = op.operands[0]
    shape = shape_of(x)
    seq_dim = normalize_axis(int(op.attrs.get("seq_dim", 0)), len(shape))
    batch_dim = normalize_axis(int(op.attrs.get("batch_dim", 0)), len(shape))
    if len(lengths) != shape[batch_dim] or not all(0 <= n <= shape[seq_dim] for n in lengths):
        return Failure(f"{op.name}: seq_lengths {lengths} do not fit {shape}")
    if all(n <= 1 for n in lengths):
        return [identity(rw, x)]
    parts = []
    for b, n in enumerate(lengths):
        entry = slice_along(rw, x, batch_dim, b, 1)
        if n > 1:
            pieces = [reverse_axis(rw, slice_along(rw, entry, seq_dim, 0, n), seq_dim)]
            if n < shape[seq_dim]:
                pieces.append(slice_along(rw, entry, seq_dim, n, shape[seq_dim] - n))
            entry = concat(rw, pieces, seq_dim)
        parts.append(entry)
    return [concat(rw, parts, batch_dim)]


@pattern("tfl.dynamic_update_slice", kind="any", types=SELECT_TYPES)
def dynamic_update_slice(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """PAD the update to the operand's shape at the constant offsets (clamped so
    the update fits, as TFLite's ClampStartIndices), then SELECT it where a
    constant mask marks the updated region. Stored values are copied as TFLite
    does, whatever the update's quantization."""
    x, update, indices = op.operands
    failed = require_move(op, [x, update], raw=True)
    if failed is not None:
        return failed
    start = int_list(indices)
    if start is None:
        return Failure(f"{op.name}: the start indices must be a constant")
    shape, size = shape_of(x), shape_of(update)
    start = [min(max(0, s), d - u) for s, d, u in zip(start, shape, size)]
    if tuple(size) == shape:
        return [identity(rw, update)]
    padding = []
    for s, d, u in zip(start, shape, size):
        padding += [s, d - s - u]
    placed = pad_with(rw, update, padding, pad_value(element(x)))
    mask = np.zeros(shape, dtype=bool)
    mask[tuple(slice(s, s + u) for s, u in zip(start, size))] = True
    return [build.op(rw, "tosa.select", [build.const(rw, mask), placed, x], tensor_type(x))]


