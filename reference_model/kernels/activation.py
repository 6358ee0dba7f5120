"""Activation functions (TOSA 1.0 chapter "Activation Functions").

CLAMP is exact. ERF, SIGMOID and TANH are specified by error bounds against
an fp64 reference: they are computed in float64 and rounded to the format.
"""

from __future__ import annotations

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


@kernel("CLAMP")
def clamp(ctx: KernelContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    low, high = ctx.attrs["min_val"], ctx.attrs["max_val"]
    if is_float_dtype(x.dtype):
        low_value, high_value = np.asarray(low, x.dtype), np.asarray(high, x.dtype)
        ctx.error_if(np.isnan(low_value) or np.isnan(high_value), "min_val or max_val is NaN")
        ctx.error_if(high_value < low_value, f"max_val {high} < min_val {low}")
        nan_mode = ctx.attrs.get("nan_mode", "PROPAGATE")
        # apply_clip_s: max with min_val first, then min with max_val, each by nan_mode.
        result = float_min(float_max(x, low_value, nan_mode), high_value, nan_mode)
        return [result.astype(x.dtype)]
    info = np.iinfo(x.dtype)
    for name, bound in (("min_val", low), ("max_val", high)):
        ctx.error_if(not info.min <= int(bound) <= info.max, f"{name} {bound} does not fit {x.dtype}")
    ctx.error_if(int(high) < int(low), f"max_val {high} < min_val {low}")
    return [np.clip(x, int(low), int(high)).astype(x.dtype)]


_erf = np.vectorize(math.erf, otypes=[np.float64])


@kernel("ERF")
def erf(ctx: KernelContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    return [float64_compute(_erf, x.dtype, x)]


@kernel("SIGMOID")
def sigmoid(ctx: KernelContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    return [float64_compute(lambda v: 1.0 / (1.0 + np.exp(-v)), x.dtype, x)]


@kernel("TANH")
def tanh(ctx: KernelContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    return [float64_compute(np.tanh, x.dtype, x)]


@prepared("CLAMP")
def prepare_clamp(op: StaticOp) -> Prepared | None:
    """Integer CLAMP with its bounds checked once (float CLAMP runs the kernel)."""
    element = op.element(0)
    if element is None or not element.is_integer:
        return None
    dtype = numpy_dtype(element)
    low, high = int(op.attrs["min_val"]), int(op.attrs["max_val"])
    info = np.iinfo(dtype)
    if not (info.min <= low <= high <= info.max):
        return None

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [np.clip(operands[0], low, high).astype(dtype, copy=False)]
    return run
