"""Patterns for TFL activations: RELU family, LEAKY_RELU, PRELU, LOGISTIC, TANH,
GELU, ELU, HARD_SWISH, SOFTMAX, LOG_SOFTMAX (float path).

Each lowering follows the arithmetic of TFLite's reference kernel
(`tensorflow/lite/kernels/internal/reference/*.h`) step by step, so that the
only differences left are the ulp-bounded precision of TOSA's transcendental
ops and the exact-division-vs-reciprocal rounding where TOSA has no divide.
"""

from __future__ import annotations

import math

import numpy as np

from legalize.common import (
    require_float,
    require_static,
    reshape_to_rank,
    tensor_type,
)
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import TensorType, numpy_dtype
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

# ---------------------------------------------------------------------------
# Helpers


def float_operand(op: Op) -> Failure | None:
    """Failure unless `op` is on the float path with a statically shaped input."""
    failure = require_float(op)
    return failure if failure is not None else require_static(op)


def _result(op: Op) -> TensorType:
    return tensor_type(op.results[0])


# ---------------------------------------------------------------------------
# Clamps

# TFLite's bounded ReLUs as [min, max] (reference_ops: Relu, Relu6, Relu1, Relu0To1).
_RELU_BOUNDS = {
    "tfl.relu": (0.0, math.inf),
    "tfl.relu6": (0.0, 6.0),
    "tfl.relu_n1_to_1": (-1.0, 1.0),
    "tfl.relu_0_to_1": (0.0, 1.0),
}


@pattern("tfl.relu", "tfl.relu6", "tfl.relu_n1_to_1", "tfl.relu_0_to_1")
def relu(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """CLAMP to the activation's range (unbounded above: the type's largest finite)."""
    if (failure := require_float(op)) is not None:
        return failure
    t = _result(op)
    if not t.element.is_float:
        return Failure(f"{op.name}: a {t.element} RELU needs quantization parameters")
    low, high = _RELU_BOUNDS[op.name]
    if high == math.inf:
        high = float(np.finfo(numpy_dtype(t.element)).max)
    return [build.clamp(rw, op.operands[0], low, high)]


# ---------------------------------------------------------------------------
# Piecewise linear


@pattern("tfl.leaky_relu")
def leaky_relu(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SELECT(x > 0, x, x * alpha), TFLite's `val > 0 ? val : val * alpha`
    (a MAXIMUM would be wrong for alpha > 1 or alpha < 0)."""
    if (failure := float_operand(op)) is not None:
        return failure
    x = op.operands[0]
    t = _result(op)
    e = Elementwise(rw, len(t.shape))
    scaled = e.mul(x, e.const(float(op.attrs.get("alpha", 0.2)), t.element))
    positive = e.greater(x, e.const(0.0, t.element))
    return [e.select(positive, x, scaled)]


@pattern("tfl.prelu")
def prelu(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SELECT(x >= 0, x, x * alpha) with alpha broadcast (TFLite reference
    `BroadcastPrelu4DSlow`: `input >= 0 ? input : input * alpha`)."""
    if (failure := float_operand(op)) is not None:
        return failure
    t = _result(op)
    e = Elementwise(rw, len(t.shape))
    x, alpha = (reshape_to_rank(rw, v, e.rank) for v in op.operands)
    scaled = e.mul(x, alpha)
    non_negative = e.greater_equal(x, e.const(0.0, t.element))
    return [e.select(non_negative, x, scaled)]


@pattern("tfl.hard_swish")
def hard_swish(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """x * CLAMP(x + 3, 0, 6) * (1/6); TFLite divides by 6 (1 ulp apart)."""
    if (failure := float_operand(op)) is not None:
        return failure
    x = op.operands[0]
    t = _result(op)
    e = Elementwise(rw, len(t.shape))
    relu6 = build.clamp(rw, e.add(x, e.const(3.0, t.element)), 0.0, 6.0)
    return [e.mul(e.mul(x, relu6), e.const(1.0 / 6.0, t.element))]


# ---------------------------------------------------------------------------
# Transcendental


@pattern("tfl.logistic")
def logistic(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SIGMOID."""
    if (failure := require_float(op)) is not None:
        return failure
    x = op.operands[0]
    return [build.op(rw, "tosa.sigmoid", [x], tensor_type(x))]


@pattern("tfl.tanh")
def tanh(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TANH."""
    if (failure := require_float(op)) is not None:
        return failure
    x = op.operands[0]
    return [build.op(rw, "tosa.tanh", [x], tensor_type(x))]


@pattern("tfl.elu")
def elu(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SELECT(x < 0, expm1(x), x), TFLite's `val < 0 ? expm1(val) : val`.

    TOSA has no EXPM1, and exp(x) - 1 cancels near 0. The identity
    expm1(x) = tanh(x / 2) * (exp(x) + 1) has no cancellation: tanh keeps
    its relative accuracy near 0 and exp(x) + 1 lies in (1, 2] for x < 0.
    """
    if (failure := float_operand(op)) is not None:
        return failure
    x = op.operands[0]
    t = _result(op)
    e = Elementwise(rw, len(t.shape))
    half = e.mul(x, e.const(0.5, t.element))
    exp_plus_one = e.add(e.unary("tosa.exp", x), e.const(1.0, t.element))
    expm1 = e.mul(e.unary("tosa.tanh", half), exp_plus_one)
    negative = e.greater(e.const(0.0, t.element), x)
    return [e.select(negative, expm1, x)]


# sqrt(2 / pi) as TFLite's kernel rounds it: float(M_2_SQRTPI * M_SQRT1_2).
_SQRT_2_OVER_PI = float(np.float32(2.0 / math.sqrt(math.pi) * math.sqrt(0.5)))
_SQRT_HALF = float(np.float32(math.sqrt(0.5)))


@pattern("tfl.gelu")
def gelu(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """GELU as TFLite's reference kernel (reference/gelu.h) evaluates it.

    exact:        0.5 * x * (1 + erf(x * sqrt(1/2)))       via ERF
    approximate:  0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    x^3 is x * x * x (MULs in TFLite's order): TOSA POW requires a
    non-negative base, so POW(x, 3) would be unpredictable for x < 0.
    """
    if (failure := float_operand(op)) is not None:
        return failure
    x = op.operands[0]
    elem = _result(op).element
    e = Elementwise(rw, len(_result(op).shape))
    if op.attrs.get("approximate", False):
        cubic = e.mul(e.mul(e.mul(e.const(0.044715, elem), x), x), x)
        inner = e.mul(e.const(_SQRT_2_OVER_PI, elem), e.add(x, cubic))
        curve = e.unary("tosa.tanh", inner)
    else:
        curve = e.unary("tosa.erf", e.mul(x, e.const(_SQRT_HALF, elem)))
    one_plus = e.add(e.const(1.0, elem), curve)
    half_x = e.mul(e.const(0.5, elem), x)
    return [e.mul(half_x, one_plus)]


def _last_axis_max_shift(rw: Rewriter, x: Value) -> tuple[Value, TensorType]:
    """x - max(x) over the last axis (<= 0, so EXP cannot overflow)."""
    t = tensor_type(x)
    axis = len(t.shape) - 1
    reduced = t.with_shape(tuple(t.shape[:-1]) + (1,))
    maximum = build.op(rw, "tosa.reduce_max", [x], reduced, axis=axis, nan_mode="PROPAGATE")
    return Elementwise(rw, len(t.shape)).sub(x, maximum), reduced


def _last_axis_sum(rw: Rewriter, x: Value, reduced: TensorType) -> Value:
    return build.op(rw, "tosa.reduce_sum", [x], reduced, axis=len(reduced.shape) - 1)


@pattern("tfl.softmax")
def softmax(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """exp((x - max) * beta) / sum(...) over the last axis (reference_ops::Softmax);
    the division is RECIPROCAL + MUL (TOSA has no float divide)."""
    if (failure := float_operand(op)) is not None:
        return failure
    x = op.operands[0]
    t = _result(op)
    if not t.shape:
        return Failure("tfl.softmax: rank-0 input")
    e = Elementwise(rw, len(t.shape))
    shifted, reduced = _last_axis_max_shift(rw, x)
    beta = float(op.attrs.get("beta", 1.0))
    if beta != 1.0:
        shifted = e.mul(shifted, e.const(beta, t.element))
    exp = e.unary("tosa.exp", shifted)
    inverse = e.reciprocal(_last_axis_sum(rw, exp, reduced))
    return [e.mul(exp, inverse)]


@pattern("tfl.log_softmax")
def log_softmax(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """(x - max) - log(sum(exp(x - max))) over the last axis (reference_ops::LogSoftmax).

    Subtracting the max first keeps EXP finite for any logits (the naive
    x - log(sum(exp(x))) overflows to inf for logits above ~88).
    """
    if (failure := float_operand(op)) is not None:
        return failure
    x = op.operands[0]
    t = _result(op)
    if not t.shape:
        return Failure("tfl.log_softmax: rank-0 input")
    e = Elementwise(rw, len(t.shape))
    shifted, reduced = _last_axis_max_shift(rw, x)
    log_sum = e.unary("tosa.log", _last_axis_sum(rw, e.unary("tosa.exp", shifted), reduced))
    return [e.sub(shifted, log_sum)]
