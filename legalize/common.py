"""Helpers every family of patterns shares: types, attributes, constants, fused activations."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from legalize.quantized import quantize_scalar
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import (
    ElementType,
    NoneType,
    TensorType,
    UniformQuantized,
    is_quantized,
    storage_type,
)
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import constant_value as constant_value  # patterns import it from here


def tensor_type(value: Value) -> TensorType:
    if not isinstance(value.type, TensorType):
        raise TypeError(f"{value.name} is not a tensor")
    return value.type


def element(value: Value) -> ElementType:
    return tensor_type(value).element


def is_none(value: Value) -> bool:
    """An omitted optional operand (`tfl.no_value`)."""
    return isinstance(value.type, NoneType)


def any_quantized(op: Op) -> bool:
    return any(isinstance(v.type, TensorType) and is_quantized(v.type.element)
               for v in (*op.operands, *op.results))


def require_static(op: Op) -> Failure | None:
    for v in (*op.operands, *op.results):
        if isinstance(v.type, TensorType) and not v.type.is_static:
            return Failure(f"{op.name}: dynamic shape {v.type} is not supported")
    return None


def scalar(rw: Rewriter, value: float | bool, elem: ElementType, rank: int) -> Value:
    """A constant of `elem` holding `value`, shaped [1] * rank.

    TOSA 1.0's elementwise ops require operands of equal rank and broadcast
    only size-1 dims, so a scalar operand needs a size-1 dim on every axis.
    """
    return build.scalar(rw, value, elem, rank)


def rank_aligned_shape(shape: Sequence[int], rank: int) -> tuple[int, ...]:
    """`shape` with leading 1s added up to `rank`.

    Numpy/TFLite broadcasting aligns shapes at their trailing dims; TOSA needs
    equal ranks, so the shorter shape gets size-1 dims in front.
    """
    return (1,) * (rank - len(shape)) + tuple(shape)


def reshape_to_rank(rw: Rewriter, value: Value, rank: int) -> Value:
    """`value` itself if it has `rank`, else a RESHAPE to its rank-aligned shape."""
    shape = tensor_type(value).shape
    if len(shape) == rank:
        return value
    return build.reshape(rw, value, rank_aligned_shape(shape, rank))


# TFLite's fused activation functions as real-valued clamp bounds.
_ACTIVATION_BOUNDS = {
    "RELU": (0.0, float("inf")),
    "RELU6": (0.0, 6.0),
    "RELU_N1_TO_1": (-1.0, 1.0),
    "RELU_0_TO_1": (0.0, 1.0),
}


def fused_activation(rw: Rewriter, value: Value, activation: str | None) -> Value | Failure:
    """Apply a TFLite `fused_activation_function` to `value`.

    Float: a CLAMP to the activation's range. Quantized: a CLAMP on the stored
    integers to the range TFLite computes in `CalculateActivationRangeQuantized`:
    `zp + round_half_away(bound / scale)`, intersected with the storage range.
    TFLite's kernels derive their clamp from `CalculateActivationRange`, which
    knows only the RELU family: a fused TANH or SIGN_BIT leaves the result
    unchanged there, and so it does here.
    """
    if activation in (None, "NONE", "TANH", "SIGN_BIT"):
        return value
    t = tensor_type(value)
    if activation not in _ACTIVATION_BOUNDS:
        return Failure(f"fused activation {activation} is not supported")
    low, high = _ACTIVATION_BOUNDS[activation]
    if isinstance(t.element, UniformQuantized):
        q = t.element
        lo = max(q.storage_min, quantize_scalar(low, q))
        hi = q.storage_max if high == float("inf") else min(q.storage_max,
                                                             quantize_scalar(high, q))
        return rw.op("tosa.clamp", [value], t, min_val=int(lo), max_val=int(hi),
                     nan_mode="PROPAGATE")
    if is_quantized(t.element):
        return Failure("fused activation on a per-axis quantized result")
    if storage_type(t.element).is_integer:
        return Failure(f"fused activation {activation} on integer data")
    if high == float("inf"):
        high = float(np.finfo(np.float32).max) if t.element.name == "f32" else float(
            np.finfo(np.float16).max)
    return rw.op("tosa.clamp", [value], t, min_val=low, max_val=high, nan_mode="PROPAGATE")


def with_fused_activation(rw: Rewriter, op: Op, value: Value) -> list[Value] | Failure:
    """A pattern's result: `value` after `op`'s `fused_activation_function`."""
    activated = fused_activation(rw, value, op.attrs.get("fused_activation_function"))
    return activated if isinstance(activated, Failure) else [activated]
