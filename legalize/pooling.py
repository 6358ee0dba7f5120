"""Patterns for TFL pooling: AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D on float
data, and AVERAGE_POOL_2D (int8, int16, uint8) and MAX_POOL_2D (int8, int16)
in integer arithmetic, bit exact with TFLite.

Window geometry is TFLite's (SAME pads `total // 2` before), made exact for
TOSA by `legalize.window.pool_window`. Both TFLite and TOSA leave padding out
of the average's count and out of the maximum.

TFLite's quantized pooling kernels (reference_integer_ops::AveragePool /
MaxPool, kernels/internal/reference/integer_ops/pooling.h, and the optimized
ones) work on the stored integers and never look at the scales or zero
points: pooling.cc expects the input and the output to share their
quantization, but only with a DCHECK (int8, uint8), compiled out of release
builds, and nothing for int16. An output quantized differently therefore
holds the input's raw values (or their average) read with the output's
parameters; the interpreter's reference and builtin kernels both compute that,
and so do these patterns. Only the fused activation's clamp reads a parameter:
the output's (CalculateActivationRangeQuantized). So one lowering serves float
and integer data alike: the TOSA pooling op on the values as they are held.

AVERAGE_POOL_2D on integers sums the raw values of the in-bounds window and
divides by their count rounding half away from zero: `(sum +- count / 2) /
count` with C's truncating division. TOSA AVG_POOL2D with both zero points 0
averages the same raw values over the same in-bounds count (padding is
excluded), and its integer division, `apply_scale_32(sum,
reciprocal_scale(count))` with the multiplier `((2^30 + 1) << k) / count`,
rounds exact halves away from zero too: the `+ 1` makes the multiplier
slightly larger than `2^(30 + k) / count` (TOSA 1.0 spec, AVG_POOL2D). Subtracting a non-zero zero
point first would move those ties (the average of 0 and 1 with zero point 5
is 1 in TFLite, 0 after the zero point is taken out and added back), which is
why the zero points stay 0.
"""

from __future__ import annotations

from legalize.common import (
    any_quantized,
    require_static,
    scalar,
    tensor_type,
    with_fused_activation,
)
from legalize.conv import FLOAT_ACC_TYPE
from legalize.integer.support import integer_pattern, require_one_storage
from legalize.registry import pattern
from legalize.window import pool_window
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import TensorType, is_quantized
from tfl2tosa.tosa import build


def _raw_values(op: Op, *storages: str) -> Failure | None:
    """Why pooling `op` cannot take a raw-value pattern, if it cannot: input and
    output per tensor, of one of `storages`, the same for both."""
    elements = require_one_storage(op, [op.operands[0], op.results[0]], *storages)
    return elements if isinstance(elements, Failure) else None


def _window(op: Op, rw: Rewriter) -> tuple[Value, dict[str, list[int]]] | Failure:
    """The (trimmed) input and TOSA's kernel/stride/pad of a Pool2DOptions op:
    float data statically shaped, quantized data int8 or int16 throughout."""
    refused = _raw_values(op, "i8", "i16") if any_quantized(op) else require_static(op)
    return refused if refused is not None else pool_window(op, rw, op.operands[0])


def _average(rw: Rewriter, x: Value, result: TensorType, window: dict[str, list[int]]) -> Value:
    """AVG_POOL2D with zero points 0: f32 accumulation for float data, i32 for
    the raw integers."""
    zero = build.zero_point(rw, 0, result.element)
    acc_type = "INT32" if is_quantized(result.element) else FLOAT_ACC_TYPE
    return build.op(rw, "tosa.avg_pool2d", [x, zero, zero], result, acc_type=acc_type,
                    **window)


@pattern("tfl.average_pool_2d")
@pattern("tfl.average_pool_2d", kind="integer", label="average_pool_2d_int",
         types=("i8", "i16"))
def average_pool_2d(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """AVG_POOL2D (the count excludes padding in both); on integers the raw
    values, whose reciprocal multiplier rounds halves away from zero as TFLite
    does; the fused activation's CLAMP."""
    window = _window(op, rw)
    if isinstance(window, Failure):
        return window
    x, attrs = window
    return with_fused_activation(rw, op, _average(rw, x, tensor_type(op.results[0]), attrs))


@pattern("tfl.max_pool_2d")
@pattern("tfl.max_pool_2d", kind="integer", label="max_pool_2d_int", types=("i8", "i16"))
def max_pool_2d(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """MAX_POOL2D (padding never wins, as in TFLite), of the raw values on
    integers; the fused activation's CLAMP."""
    window = _window(op, rw)
    if isinstance(window, Failure):
        return window
    x, attrs = window
    pooled = build.op(rw, "tosa.max_pool2d", [x], tensor_type(op.results[0]),
                      nan_mode="PROPAGATE", **attrs)
    return with_fused_activation(rw, op, pooled)


@pattern("tfl.average_pool_2d", kind="integer", label="average_pool_2d_uint8",
         types=("u8",))
@integer_pattern
def average_pool_2d_uint8(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """AVG_POOL2D of the int8 twins with both zero points -128; CLAMP; back to uint8.

    TFLite's uint8 kernel (reference_ops::AveragePool, reference/pooling.h)
    averages the non-negative stored values, `(sum + count / 2) / count`, halves
    rounding up. The twins' zero point -128 makes TOSA average those same
    non-negative values (x_twin + 128) and subtract 128 after rounding, so the
    halves round the same way; averaging the twins themselves would round their
    negative halves away from zero, i.e. down.
    """
    refused = _raw_values(op, "ui8")
    if refused is not None:
        return refused
    # Imported here: only uint8 pools need the uint8 support module.
    from legalize.integer.data import UINT8_OFFSET, from_int8, int8_twin, to_int8

    window = pool_window(op, rw, to_int8(rw, op.operands[0]))
    if isinstance(window, Failure):
        return window
    x, attrs = window
    result = tensor_type(op.results[0])
    twin = result.with_element(int8_twin(result.element))
    zero = build.zero_point(rw, -UINT8_OFFSET, twin.element)
    pooled = build.op(rw, "tosa.avg_pool2d", [x, zero, zero], twin, acc_type="INT32", **attrs)
    activated = with_fused_activation(rw, op, pooled)
    if isinstance(activated, Failure):
        return activated
    return [from_int8(rw, activated[0], result)]


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
