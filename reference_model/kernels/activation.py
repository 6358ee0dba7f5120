"""Activation functions (TOSA 1.0 chapter "Activation Functions").

CLAMP is exact. ERF, SIGMOID and TANH are specified by error bounds against
an fp64 reference: they are computed in float64 and rounded to the format.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from reference_model.kernels import (
    KernelContext,
    Prepared,
    StaticOp,
    float64_compute,
    is_float_dtype,
    kernel,
    prepared,
)
from reference_model.kernels.elementwise_binary import float_max, float_min
from tfl2tosa.ir.types import numpy_dtype
from tfl2tosa.tosa import rules


@kernel("CLAMP")
def clamp(ctx: KernelContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    low, high = ctx.attrs["min_val"], ctx.attrs["max_val"]
    ctx.check(rules.clamp_problems(low, high, ctx.element(0).name))
    if is_float_dtype(x.dtype):
        low_value, high_value = np.asarray(low, x.dtype), np.asarray(high, x.dtype)
        nan_mode = ctx.attrs.get("nan_mode", "PROPAGATE")
        # apply_clip_s: max with min_val first, then min with max_val, each by nan_mode.
        result = float_min(float_max(x, low_value, nan_mode), high_value, nan_mode)
        return [result.astype(x.dtype)]
    return [np.clip(x, int(low), int(high)).astype(x.dtype)]


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
# Below this |x| the Maclaurin series; from it on, erfc's continued fraction. Up to
# 1.5 the alternating series loses only a couple of bits to cancellation; from 1.5
# the fraction reaches double precision within 80 levels.
_SERIES_LIMIT = 1.5
_FRACTION_DEPTH = 80


def _erf64(x: np.ndarray) -> np.ndarray:
    """erf in float64, whole-array (within a few float64 ulps of libm's erf).

    Series: erf(a) = 2/sqrt(pi) * sum_n (-1)^n a^(2n+1) / (n! (2n+1)).
    Fraction: erfc(a) = exp(-a^2) / (sqrt(pi) * (a + (1/2)/(a + 1/(a + (3/2)/(a + ...))))),
    evaluated from the bottom level up. erf is odd, so both work on |x| and the
    sign (of -0.0 too) is put back at the end.
    """
    magnitude = np.abs(x)
    near = magnitude < _SERIES_LIMIT
    result = np.empty_like(magnitude)
    a = magnitude[near]
    square = a * a
    term, total = a.copy(), a.copy()
    for n in range(1, 64):
        term *= square
        term /= n
        step = term / (2 * n + 1)
        total += -step if n % 2 else step
        if n % 4 == 0 and not np.any(step > 1e-17 * total):
            break
    result[near] = _TWO_OVER_SQRT_PI * total
    a = magnitude[~near]  # NaN lands here and stays NaN
    level = a.copy()
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(_FRACTION_DEPTH, 0, -1):
            level = a + (0.5 * k) / level
        result[~near] = 1.0 - np.exp(-a * a) / (math.sqrt(math.pi) * level)
    return np.copysign(result, x)


@kernel("ERF")
def erf(ctx: KernelContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    return [float64_compute(_erf64, x.dtype, x)]


def _sigmoid64(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


@kernel("SIGMOID")
def sigmoid(ctx: KernelContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    return [float64_compute(_sigmoid64, x.dtype, x)]


@kernel("TANH")
def tanh(ctx: KernelContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    return [float64_compute(np.tanh, x.dtype, x)]


@prepared("SIGMOID", "TANH")
def prepare_float64_activation(op: StaticOp) -> Prepared | None:
    """SIGMOID and TANH as their kernels compute them, without a kernel context per run.
    fp32: float64_compute's steps inline (numpy rounds float64 to float32 correctly,
    as round_to_float does for numpy's own formats)."""
    element = op.element(0)
    if element is None or not element.is_float:
        return None
    fn = _sigmoid64 if op.op_name == "SIGMOID" else np.tanh
    if element.name == "f32":
        def run_fp32(operands: list[np.ndarray]) -> list[np.ndarray]:
            return [np.asarray(fn(operands[0].astype(np.float64))).astype(np.float32)]
        return run_fp32

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        x = operands[0]
        return [float64_compute(fn, x.dtype, x)]
    return run


@prepared("CLAMP")
def prepare_clamp(op: StaticOp) -> Prepared | None:
    """CLAMP with its bounds checked once: integers, and fp32 / fp16."""
    element = op.element(0)
    if element is None:
        return None
    dtype = numpy_dtype(element)
    if not element.is_integer:
        return _prepare_float_clamp(op, dtype) if dtype in _NUMPY_FLOATS else None
    low, high = int(op.attrs["min_val"]), int(op.attrs["max_val"])
    smallest, largest = _integer_range(dtype)
    if not (smallest <= low <= high <= largest):
        return None

    # np.clip's own ufunc, called directly (np.clip's Python wrapper costs more than
    # the clipping on small tensors), with bounds of the array's dtype.
    low_value, high_value = dtype.type(low), dtype.type(high)

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(_CLIP(operands[0], low_value, high_value))]
    return run


_NUMPY_FLOATS = (np.dtype(np.float32), np.dtype(np.float16))


@functools.lru_cache(maxsize=16)
def _integer_range(dtype: np.dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)

try:  # the ufunc np.clip ends in (numpy 2.x); np.clip itself elsewhere
    from numpy._core.umath import clip as _CLIP
except ImportError:  # pragma: no cover
    _CLIP = np.clip


def _prepare_float_clamp(op: StaticOp, dtype: np.dtype) -> Prepared | None:
    """The kernel's apply_clip_s, in fewer passes: max(x, min_val) is
    `x >= min_val ? x : min_val` and min(., max_val) is `. < max_val ? . : max_val`
    (the specification's comparisons, which also fix the sign of a zero result).
    A NaN x fails both comparisons and comes out as min_val, which is IGNORE's
    answer; PROPAGATE makes it NaN."""
    low, high = np.asarray(op.attrs["min_val"], dtype), np.asarray(op.attrs["max_val"], dtype)
    nan_mode = op.attrs.get("nan_mode", "PROPAGATE")
    if np.isnan(low) or np.isnan(high) or high < low or nan_mode not in ("PROPAGATE", "IGNORE"):
        return None  # an ERROR_IF, or a mode the kernel handles
    propagate = nan_mode == "PROPAGATE"
    nan = dtype.type(np.nan)

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        x = operands[0]
        above = np.where(x >= low, x, low)
        result = np.where(above < high, above, high)
        if propagate:
            is_nan = np.isnan(x)
            if is_nan.any():
                result = np.where(is_nan, nan, result)
        return [result.astype(dtype, copy=False)]
    return run
