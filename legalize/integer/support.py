"""Operand checks and small builders the integer patterns share."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from legalize.common import constant_value, is_none
from legalize.quantized import UnsupportedScale
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, PatternResult, Rewriter
from tfl2tosa.ir.types import (
    ElementType,
    ScalarType,
    TensorType,
    UniformQuantized,
    UniformQuantizedPerAxis,
    i32,
    i48,
    storage_type,
)
from tfl2tosa.tosa import build


def integer_pattern(fn):  # type: ignore[no-untyped-def]
    """A pattern whose scales TOSA cannot apply (UnsupportedScale) does not match."""

    @functools.wraps(fn)
    def wrapper(op: Op, rw: Rewriter) -> PatternResult:
        try:
            return fn(op, rw)
        except UnsupportedScale as exc:
            return Failure(f"{op.name}: {exc}")

    return wrapper


def tensor_type(value: Value) -> TensorType | None:
    return value.type if isinstance(value.type, TensorType) else None


def per_tensor(value: Value, *storages: str) -> UniformQuantized | None:
    """The per-tensor quantized element of `value` if its storage is one of `storages`."""
    t = tensor_type(value)
    if t is None or not isinstance(t.element, UniformQuantized):
        return None
    if storages and storage_type(t.element).name not in storages:
        return None
    return t.element


def static_shape(value: Value) -> tuple[int, ...] | None:
    t = tensor_type(value)
    if t is None or t.shape is None or not t.is_static:
        return None
    return t.shape


def require_per_tensor(op: Op, values: Sequence[Value], *storages: str
                       ) -> list[UniformQuantized] | Failure:
    """The per-tensor quantized elements of `values`, statically shaped, with one
    of the given storage types (e.g. "i8"), or the reason they are not."""
    elements = []
    for value in values:
        element = per_tensor(value, *storages)
        if element is None:
            return Failure(f"{op.name}: {value.name} is not a per-tensor "
                           f"{'/'.join(storages)} quantized tensor")
        if static_shape(value) is None:
            return Failure(f"{op.name}: {value.name} has a dynamic shape")
        elements.append(element)
    return elements


def same_quantization(op: Op, values: list[Value], storages: tuple[str, ...]
                      ) -> UniformQuantized | Failure:
    """The one per-tensor quantized element all `values` share, or why there is none."""
    elements = require_per_tensor(op, values, *storages)
    if isinstance(elements, Failure):
        return elements
    if len(set(elements)) != 1:
        return Failure(f"{op.name}: operands and result differ in quantization, which "
                       "TFLite's kernel ignores or refuses (left to the fallback)")
    return elements[0]


def require_one_storage(op: Op, values: Sequence[Value], *storages: str
                        ) -> list[UniformQuantized] | Failure:
    """`require_per_tensor`, and one storage type for all of `values`: TFLite's
    integer kernels take int8 or int16 throughout, never a mix."""
    elements = require_per_tensor(op, values, *storages)
    if isinstance(elements, Failure):
        return elements
    if any(e.storage != elements[0].storage for e in elements):
        names = ", ".join(v.name for v in values)
        return Failure(f"{op.name}: {names} have different storage types")
    return elements


def accumulator_type(element: UniformQuantized) -> ScalarType:
    """i32 for 8-bit activations, i48 for 16-bit ones (TOSA's CONV2D / MATMUL modes)."""
    return i32 if element.storage.bits == 8 else i48


# The `acc_type` attribute of a TOSA convolution for an accumulator of this many bits.
ACC_TYPE = {32: "INT32", 48: "INT48"}


def weight_scales(element: ElementType, channels: int) -> np.ndarray | Failure:
    """One scale per output channel as float64: per-axis scales, or the per-tensor
    scale repeated."""
    if isinstance(element, UniformQuantized):
        return np.full(channels, element.scale, dtype=np.float64)
    if isinstance(element, UniformQuantizedPerAxis) and element.scale_count == channels:
        return element.scales_array
    return Failure(f"weights quantized as {element} do not give {channels} channel scales")


def weight_zero_point(element: ElementType) -> int | Failure:
    """The weights' single zero point (TOSA takes one weight_zp per convolution)."""
    if isinstance(element, UniformQuantized):
        return element.zero_point
    if isinstance(element, UniformQuantizedPerAxis):
        lowest, highest = element.zero_point_bounds
        if lowest == highest:
            return lowest
    return Failure(f"weights with per-channel zero points {element} (TOSA has one weight_zp)")


def accumulator_bias(rw: Rewriter, op: Op, index: int, channels: int,
                     acc: ScalarType) -> Value | Failure:
    """The bias operand of a convolution in the accumulator type `acc` (i32 for
    8-bit activations, i48 for 16x8): a constant's integers as a plain `acc`
    constant (TFLite's int32 or int64 bias; int64 values must fit 48 bits), a
    run-time bias of that type as it is, or a [1] zero when the operand is omitted."""
    dtype = np.int32 if acc.bits == 32 else np.int64
    if index >= len(op.operands) or is_none(op.operands[index]):
        return build.const(rw, np.zeros((1,), dtype=dtype), acc)
    bias = op.operands[index]
    t = tensor_type(bias)
    if t is None or storage_type(t.element).name not in ("i32", "i64"):
        return Failure(f"{op.name}: bias {bias.name} is not a 32/64-bit integer tensor")
    if t.shape is None or math.prod(t.shape) != channels:
        return Failure(f"{op.name}: bias shape {t.shape} for {channels} channels")
    array = constant_value(bias)
    if array is not None and array.dtype == dtype:  # TFLite's int32 bias of 8-bit ops
        return build.const(rw, array.reshape(channels), acc)
    if array is not None:
        values = np.asarray(array, dtype=np.int64).reshape(channels)
        # A bias whose own type is no wider than the accumulator fits it.
        wider = array.dtype.kind != "i" or 8 * array.dtype.itemsize > acc.bits
        if wider and values.size and (values.min() < acc.min_value or
                                      values.max() > acc.max_value):
            return Failure(f"{op.name}: bias values do not fit {acc}")
        return build.const(rw, np.ascontiguousarray(values, dtype=dtype), acc)
    if storage_type(t.element) != acc and not (acc.bits == 32 and
                                               storage_type(t.element).bits == 32):
        return Failure(f"{op.name}: run-time bias {t.element} for a {acc} accumulator")
    return bias if len(t.shape) == 1 else build.reshape(rw, bias, (channels,))


def weight_operand(rw: Rewriter, value: Value, shape: Sequence[int] | None = None,
                   perm: Sequence[int] | None = None,
                   storage: ScalarType | None = None) -> Value | Failure:
    """Integer weights (or any quantized operand whose scale the RESCALE applies)
    as a plain storage-typed constant (of `storage` if given: int4 values held
    as i8), optionally transposed by `perm`, then reshaped.

    The quantization lives in the RESCALE multipliers, so the TOSA constant
    needs none (and a per-axis type would not survive a reshape). Run-time
    values are TRANSPOSEd and RESHAPEd when they are quantized per tensor.
    """
    t = tensor_type(value)
    if t is None or t.shape is None:
        return Failure(f"{value.name}: weights without a static shape")
    target = tuple(t.shape) if shape is None else tuple(shape)
    array = constant_value(value)
    if array is None:
        if target == tuple(t.shape) and perm is None:
            return value
        if isinstance(t.element, UniformQuantizedPerAxis):
            return Failure(f"{value.name}: run-time per-axis weights that need a reshape")
        moved = value if perm is None else build.transpose(rw, value, perm)
        return build.reshape(rw, moved, target)
    moved = array if perm is None else np.transpose(array, perm)
    element = storage_type(t.element) if storage is None else storage
    return build.const(rw, np.ascontiguousarray(moved.reshape(target)), element)
