"""Patterns for TFL pooling: AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D (float path).

Window geometry is TFLite's (SAME pads `total // 2` before), made exact for
TOSA by `legalize.window.pool_window`. Both TFLite and TOSA leave padding out
of the average's count and out of the maximum.
"""

from __future__ import annotations

from legalize.activations import float_operand
from legalize.common import scalar, tensor_type, with_fused_activation
from legalize.conv import FLOAT_ACC_TYPE
from legalize.registry import pattern
from legalize.window import pool_window
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import TensorType
from tfl2tosa.tosa import build


def _window(op: Op, rw: Rewriter) -> tuple[Value, dict[str, list[int]]] | Failure:
    """The float input's `pool_window`."""
    if (failure := float_operand(op)) is not None:
        return failure
    return pool_window(op, rw, op.operands[0])


def _average(rw: Rewriter, x: Value, result: TensorType, window: dict[str, list[int]]) -> Value:
    zp = build.zero_point(rw, 0.0, result.element)
    return build.op(rw, "tosa.avg_pool2d", [x, zp, zp], result, acc_type=FLOAT_ACC_TYPE,
                    **window)


@pattern("tfl.average_pool_2d")
def average_pool_2d(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """AVG_POOL2D (f32 accumulation); the count excludes padding in both."""
    window = _window(op, rw)
    if isinstance(window, Failure):
        return window
    x, attrs = window
    return with_fused_activation(rw, op, _average(rw, x, tensor_type(op.results[0]), attrs))


@pattern("tfl.max_pool_2d")
def max_pool_2d(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """MAX_POOL2D (padding never wins, as in TFLite)."""
    window = _window(op, rw)
    if isinstance(window, Failure):
        return window
    x, attrs = window
    pooled = build.op(rw, "tosa.max_pool2d", [x], tensor_type(op.results[0]),
                      nan_mode="PROPAGATE", **attrs)
    return with_fused_activation(rw, op, pooled)


@pattern("tfl.l2_pool_2d")
def l2_pool_2d(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """sqrt(mean of squares over the in-bounds window), as reference_ops::L2Pool:
    MUL x*x -> AVG_POOL2D -> POW(., 0.5) (TOSA has no SQRT; the base is >= 0)."""
    window = _window(op, rw)
    if isinstance(window, Failure):
        return window
    x, attrs = window
    result = tensor_type(op.results[0])
    mean = _average(rw, build.mul(rw, x, x), result, attrs)
    half = scalar(rw, 0.5, result.element, len(result.shape))
    root = build.op(rw, "tosa.pow", [mean, half], result)
    return with_fused_activation(rw, op, root)
