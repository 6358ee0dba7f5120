"""Elementwise unary operators (TOSA 1.0 chapter "Elementwise Unary Operators").

ABS, NEGATE, CEIL and FLOOR are exact. RECIPROCAL rounds the exact quotient
once. EXP, LOG, SIN, COS and RSQRT are specified by error bounds against an
fp64 reference, so they are computed in float64 and rounded to the format:
the closest result the format can hold.
"""

from __future__ import annotations

import numpy as np

from reference_model import numerics
from reference_model.kernels import (
    KernelContext,
    Prepared,
    StaticOp,
    float64_compute,
    float_compute,
    is_float_dtype,
    kernel,
    prepared,
)
from tfl2tosa.tosa import rules


@kernel("ABS")
def abs_(ctx: KernelContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    ctx.expect_output_shape(x.shape)
    if is_float_dtype(x.dtype):
        return [float_compute(np.abs, x.dtype, x)]  # also maps -0 to +0
    wide = np.abs(x.astype(np.int64))
    # apply_sub_s(0, minimum) overflows: REQUIRE.
    ctx.require(wide <= np.iinfo(x.dtype).max, f"ABS result fits {x.dtype}")
    return [wide.astype(x.dtype)]


@kernel("BITWISE_NOT")
def bitwise_not(ctx: KernelContext) -> list[np.ndarray]:
    return [np.invert(ctx.inputs[0])]


@kernel("LOGICAL_NOT")
def logical_not(ctx: KernelContext) -> list[np.ndarray]:
    return [np.logical_not(ctx.inputs[0])]


@kernel("CLZ")
def clz(ctx: KernelContext) -> list[np.ndarray]:
    return [numerics.clz32(ctx.inputs[0]).astype(ctx.inputs[0].dtype)]


@prepared("CLZ")
def prepare_clz(op: StaticOp) -> Prepared | None:
    """int32 CLZ: 32 minus the bit length of the 32-bit pattern. frexp of a positive
    integer below 2^53 is exact, u = f * 2^e with 0.5 <= f < 1, so e is the bit length;
    frexp(0) gives e = 0, and CLZ(0) = 32."""
    element = op.element(0)
    if element is None or element.name != "i32":
        return None

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        _, exponent = np.frexp(operands[0].view(np.uint32).astype(np.float64))
        return [np.asarray(32 - exponent, np.int32)]
    return run


@kernel("NEGATE")
def negate(ctx: KernelContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    ctx.expect_output_shape(x.shape)
    input_zp = _scalar(ctx.inputs[1]) if len(ctx.inputs) > 1 else 0
    output_zp = _scalar(ctx.inputs[2]) if len(ctx.inputs) > 2 else 0
    element = ctx.element(0).name
    ctx.check([p for p in (rules.zero_point_problem("input1_zp", element, input_zp),
                           rules.zero_point_problem("output_zp", element, output_zp)) if p])
    if is_float_dtype(x.dtype):
        return [float_compute(np.negative, x.dtype, x)]
    # acc_t is i32 for every integer mode: each step REQUIREs no i32 overflow.
    value = x.astype(np.int64) - input_zp
    _require_i32(ctx, value, "x - input1_zp")
    value = -value
    _require_i32(ctx, value, "-(x - input1_zp)")
    value = value + output_zp
    _require_i32(ctx, value, "-(x - input1_zp) + output_zp")
    info = np.iinfo(x.dtype)
    return [np.clip(value, info.min, info.max).astype(x.dtype)]


def _require_i32(ctx: KernelContext, value: np.ndarray, what: str) -> None:
    ctx.require((value >= -(1 << 31)) & (value < (1 << 31)), f"{what} fits i32")


def _scalar(array: np.ndarray) -> int | float:
    return np.asarray(array).reshape(-1)[0].item()


def _unary_float(ctx: KernelContext, fn, *, exact_in_float32: bool = False) -> list[np.ndarray]:
    x = ctx.inputs[0]
    compute = float_compute if exact_in_float32 else float64_compute
    return [compute(fn, x.dtype, x)]


@kernel("CEIL")
def ceil(ctx: KernelContext) -> list[np.ndarray]:
    return _unary_float(ctx, np.ceil, exact_in_float32=True)


@kernel("FLOOR")
def floor(ctx: KernelContext) -> list[np.ndarray]:
    return _unary_float(ctx, np.floor, exact_in_float32=True)


@kernel("RECIPROCAL")
def reciprocal(ctx: KernelContext) -> list[np.ndarray]:
    return _unary_float(ctx, np.reciprocal, exact_in_float32=True)


@kernel("RSQRT")
def rsqrt(ctx: KernelContext) -> list[np.ndarray]:
    # 1 / sqrt(x) in float32, each step correctly rounded: what Arm's reference
    # model and TFLite's kernels (`1.f / std::sqrt(x)`) compute, within an ulp
    # of the exact value and equal to theirs.
    return _unary_float(ctx, lambda x: np.float32(1) / np.sqrt(x), exact_in_float32=True)


@kernel("EXP")
def exp(ctx: KernelContext) -> list[np.ndarray]:
    return _unary_float(ctx, np.exp)


@kernel("LOG")
def log(ctx: KernelContext) -> list[np.ndarray]:
    return _unary_float(ctx, np.log)


@kernel("SIN")
def sin(ctx: KernelContext) -> list[np.ndarray]:
    return _unary_float(ctx, np.sin)


@kernel("COS")
def cos(ctx: KernelContext) -> list[np.ndarray]:
    return _unary_float(ctx, np.cos)


# ---------------------------------------------------------------------------
# Prepared forms

_EXACT_FP32 = {"ABS": np.abs, "CEIL": np.ceil, "FLOOR": np.floor, "RECIPROCAL": np.reciprocal}


@prepared(*_EXACT_FP32)
def prepare_fp32_unary(op: StaticOp) -> Prepared | None:
    """fp32 ABS, CEIL, FLOOR and RECIPROCAL of a static shape of rank 1 or more (a
    ufunc gives a rank-0 result as a scalar): float_compute applies the same float32
    ufunc to the same float32 values, and its casts to float32 change no bits."""
    element = op.element(0)
    shape = op.static_shape(0)
    if element is None or element.name != "f32" or not shape \
            or op.static_shape(0, output=True) != shape:
        return None
    fn = _EXACT_FP32[op.op_name]

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [fn(operands[0])]
    return run
