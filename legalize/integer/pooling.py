"""Integer patterns for pooling: AVERAGE_POOL_2D (int8, int16, uint8) and
MAX_POOL_2D (int8, int16).

TFLite's quantized pooling kernels (reference_integer_ops::AveragePool /
MaxPool, kernels/internal/reference/integer_ops/pooling.h, and the optimized
ones) work on the stored integers and never look at the scales or zero
points: pooling.cc expects the input and the output to share their
quantization, but only with a DCHECK (int8, uint8), compiled out of release
builds, and nothing for int16. An output quantized differently therefore
holds the input's raw values (or their average) read with the output's
parameters; the interpreter's reference and builtin kernels both compute that,
and so do these patterns. Only the fused activation's clamp reads a parameter:
the output's (CalculateActivationRangeQuantized).

AVERAGE_POOL_2D sums the raw values of the in-bounds window and divides by
their count rounding half away from zero: `(sum +- count / 2) / count` with
C's truncating division. TOSA AVG_POOL2D with both zero points 0 averages the
same raw values over the same in-bounds count (padding is excluded), and its
integer division, `apply_scale_32(sum, reciprocal_scale(count))` with the
multiplier `((2^30 + 1) << k) / count`, rounds exact halves away from zero too:
the `+ 1` makes the multiplier slightly larger than `2^(30 + k) / count`
(TOSA 1.0 spec, AVG_POOL2D; shared/research/LEGALIZATION.md section 2.5).
Subtracting a non-zero zero point first would move those ties (the average
of 0 and 1 with zero point 5 is 1 in TFLite, 0 after the zero point is taken
out and added back), which is why the zero points stay 0.

Window geometry (SAME/VALID, rows no window reads) is the float pattern's:
`legalize.window.pool_window`.
"""

from __future__ import annotations

from legalize.common import with_fused_activation
from legalize.integer.support import integer_pattern, require_one_storage, tensor_type
from legalize.registry import pattern
from legalize.window import pool_window
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.tosa import build

def _raw_values(op: Op, *storages: str) -> Failure | None:
    """Why pooling `op` cannot take a raw-value pattern, if it cannot: input and
    output per tensor, of one of `storages`, the same for both."""
    elements = require_one_storage(op, [op.operands[0], op.results[0]], *storages)
    return elements if isinstance(elements, Failure) else None


def _pooled_window(op: Op, rw: Rewriter) -> tuple[Value, dict[str, list[int]]] | Failure:
    """The (trimmed) input and TOSA's kernel/stride/pad for an int8/int16
    Pool2DOptions op."""
    refused = _raw_values(op, "i8", "i16")
    return refused if refused is not None else pool_window(op, rw, op.operands[0])


@pattern("tfl.average_pool_2d", kind="integer", label="average_pool_2d_int",
         types=("i8", "i16"))
@integer_pattern
def average_pool_2d_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """AVG_POOL2D of the raw values (zero points 0, i32 accumulator), whose
    reciprocal multiplier rounds halves away from zero as TFLite does; CLAMP."""
    window = _pooled_window(op, rw)
    if isinstance(window, Failure):
        return window
    x, attrs = window
    result = tensor_type(op.results[0])
    zero = build.zero_point(rw, 0, result.element)
    pooled = build.op(rw, "tosa.avg_pool2d", [x, zero, zero], result, acc_type="INT32",
                      **attrs)
    return with_fused_activation(rw, op, pooled)


@pattern("tfl.max_pool_2d", kind="integer", label="max_pool_2d_int", types=("i8", "i16"))
@integer_pattern
def max_pool_2d_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """MAX_POOL2D of the raw values (padding never wins, as in TFLite); CLAMP."""
    window = _pooled_window(op, rw)
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
    # Imported here: importing legalize.integer.data at the top would register its
    # patterns before the ones of modules registered earlier (see casts.py).
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
