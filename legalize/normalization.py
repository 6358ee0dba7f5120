"""Patterns for TFL normalizations: L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION
(float path)."""

from __future__ import annotations

import math

import numpy as np

from legalize.common import require_static, tensor_type, with_fused_activation
from legalize.conv import FLOAT_ACC_TYPE, zero_points
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import numpy_dtype
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

# TFLite's l2norm.cc hard-codes this epsilon for float.
L2_NORM_EPSILON = 1e-6


@pattern("tfl.l2_normalization")
def l2_normalization(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """x / max(sqrt(sum(x^2)), 1e-6) over the last axis (reference_ops::L2Normalization
    with l2norm.cc's epsilon), as x * RSQRT(MAXIMUM(sum, 1e-12)): the same
    value, since sqrt is monotonic, within TOSA's RSQRT precision."""
    if (failure := require_static(op)) is not None:
        return failure
    x = op.operands[0]
    t = tensor_type(op.results[0])
    if not t.shape:
        return Failure("tfl.l2_normalization: rank-0 input")
    reduced = t.with_shape((*t.shape[:-1], 1))
    e = Elementwise(rw, len(t.shape))
    squares = build.op(rw, "tosa.reduce_sum", [e.mul(x, x)], reduced, axis=len(t.shape) - 1)
    floor = e.const(L2_NORM_EPSILON * L2_NORM_EPSILON, reduced.element)
    inverse_norm = e.rsqrt(e.maximum(squares, floor))
    normalized = e.mul(x, inverse_norm)
    return with_fused_activation(rw, op, normalized)


@pattern("tfl.local_response_normalization")
def local_response_normalization(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """x * (bias + alpha * sqr_sum) ^ -beta with sqr_sum over a window of channels.

    TFLite's reference kernel (reference_ops::LocalResponseNormalization, what
    BUILTIN_REF runs) sums channels [c - radius, c + radius) -- `end = min(depth,
    c + range)`, exclusive -- so the window has 2 * radius channels and stops
    one short of TensorFlow's symmetric one. The window sum is a CONV2D with a
    ones kernel [1, 1, 2r, 1] over the squares laid out as [1, N*H*W, C, 1]
    (channels along the width, padded r before and r - 1 after). POW needs a
    positive base: bias > 0 and alpha >= 0 guarantee it.
    """
    if (failure := require_static(op)) is not None:
        return failure
    x = op.operands[0]
    t = tensor_type(op.results[0])
    radius = int(op.attrs["radius"])
    bias, alpha, beta = (float(op.attrs[k]) for k in ("bias", "alpha", "beta"))
    if beta != 0.0 and not (bias > 0.0 and alpha >= 0.0):
        return Failure("tfl.local_response_normalization: bias <= 0 or alpha < 0 can give "
                       "POW a base <= 0, which TOSA leaves unpredictable")
    element = t.element
    e = Elementwise(rw, len(t.shape))
    rows = math.prod(t.shape[:-1])
    channels = t.shape[-1]
    squares = e.mul(x, x)
    if radius > 0:
        lanes = build.reshape(rw, squares, (1, rows, channels, 1))
        ones = build.const(rw, np.ones((1, 1, 2 * radius, 1), dtype=numpy_dtype(element)),
                           element)
        zero_bias = build.const(rw, np.zeros((1,), dtype=numpy_dtype(element)), element)
        window = build.op(rw, "tosa.conv2d", [lanes, ones, zero_bias, *zero_points(rw, element)],
                          t.with_shape((1, rows, channels, 1)), pad=[0, 0, radius, radius - 1],
                          stride=[1, 1], dilation=[1, 1], acc_type=FLOAT_ACC_TYPE)
        sum_of_squares = build.reshape(rw, window, t.shape)
        base = e.add(e.const(bias, element), e.mul(e.const(alpha, element), sum_of_squares))
    else:  # an empty window: the multiplier is bias ^ -beta everywhere
        base = e.const(bias, element)
    return [e.mul(x, e.pow(base, e.const(-beta, element)))]
