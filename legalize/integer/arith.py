"""Integer patterns for elementwise arithmetic: ADD, SUB, MUL (int8, int16).

ADD/SUB follow TFLite's add.cc / sub.cc recipe (reference_integer_ops::
AddElementwise, and AddGeneralParamScale for int16): with `twice_max = 2 *
max(s1, s2)` and `left_shift` = 20 for int8, 15 for int16, each input becomes
`MBQM((x - zp) * 2^left_shift, s_i / twice_max)`, the two are added
(subtracted), and the sum is scaled by `twice_max / (2^left_shift * s_out)` to
the output zero point, then clamped to the fused activation range. All
multipliers are computed in double and applied with MultiplyByQuantizedMultiplier.
int16 models whose `pot_scale_int16` is set and whose scales are all powers of
two take TFLite's other, shift-only int16 path, which is not lowered here.

MUL follows mul.cc (reference_integer_ops::MulElementwise):
`zp_out + MBQM((x1 - zp1) * (x2 - zp2), s1 * s2 / s_out)` with the real
multiplier computed in float32 (TFLite multiplies the float scales) and
widened.
"""

from __future__ import annotations

import numpy as np

from legalize.common import reshape_to_rank, scalar, with_fused_activation
from legalize.integer.support import integer_pattern, require_one_storage, tensor_type
from legalize.quantized import (
    SINGLE_ROUND,
    rescale,
    rescale_from_i32,
    rescale_to_i32,
    round_half_away,
    rounding_mode,
)
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import TensorType, UniformQuantized, i32
from tfl2tosa.tosa import build

# TFLite's `left_shift` for ADD/SUB: inputs are scaled up by 2^20 (int8) or 2^15
# (int16) first.
ADD_LEFT_SHIFT = {8: 20, 16: 15}


def _aligned_inputs(rw: Rewriter, op: Op) -> tuple[Value, Value, TensorType]:
    """Both inputs at the result's rank, and the result type."""
    result = op.results[0].type
    rank = len(result.shape)
    return (reshape_to_rank(rw, op.operands[0], rank), reshape_to_rank(rw, op.operands[1], rank),
            result)


def _add_input(rw: Rewriter, x: Value, q: UniformQuantized, twice_max: float,
               rounding: str) -> Value:
    """`MBQM((x - zp) * 2^left_shift, s / twice_max)` as i32.

    The 2^left_shift step is exact and separate: folding it into the multiplier
    would move the first rounding of the double-rounding scheme. For int8 it is
    a RESCALE; int16 values times 2^15 are too wide for a unit-scale RESCALE
    (apply_scale_32 needs |v| < 2^(shift - 1)), so they are CAST to i32 and
    multiplied (int16 zero points are 0). When `s / twice_max` is exactly 0.5
    (the input with the larger scale), MBQM of that product by 2^30 / 2^31 is
    exact, so the whole step is a multiplication by 2^(left_shift - 1).
    """
    left_shift = ADD_LEFT_SHIFT[q.storage.bits]
    ratio = q.scale / twice_max
    exact_shift = left_shift - 1 if ratio == 0.5 else left_shift
    if q.storage.bits == 8:
        shifted = rescale_to_i32(rw, x, 2.0 ** exact_shift)
    else:
        wide = build.cast(rw, x, i32)
        shifted = build.mul(rw, wide, scalar(rw, 1 << exact_shift, i32,
                                             len(tensor_type(x).shape)))
    if ratio == 0.5:
        return shifted
    return rescale(rw, shifted, ratio, i32, input_zp=0, output_zp=0, rounding=rounding)


def _power_of_two(scale: float) -> bool:
    """TFLite's CheckedLog2 (quantization_util.cc): float32 log2 within 1e-3 of an integer."""
    log2 = np.float32(np.log(np.float32(scale))) * (np.float32(1) / np.float32(np.log(2.0)))
    return abs(float(log2) - round_half_away(float(log2))) < 1e-3


def _add_or_sub(op: Op, rw: Rewriter, tosa_name: str) -> list[Value] | Failure:
    elements = require_one_storage(op, [*op.operands[:2], op.results[0]], "i8", "i16")
    if isinstance(elements, Failure):
        return elements
    q1, q2, out = elements
    if out.storage.bits == 16 and op.attrs.get("pot_scale_int16", True) and all(
            _power_of_two(q.scale) for q in (q1, q2, out)):
        return Failure(f"{op.name}: TFLite's power-of-two int16 path is not lowered")
    rounding = rounding_mode(op.name)
    twice_max = 2.0 * max(q1.scale, q2.scale)
    x1, x2, result = _aligned_inputs(rw, op)
    a = _add_input(rw, x1, q1, twice_max, rounding)
    b = _add_input(rw, x2, q2, twice_max, rounding)
    total = build.op(rw, tosa_name, [a, b], result.with_element(i32))
    scale = twice_max / ((1 << ADD_LEFT_SHIFT[out.storage.bits]) * out.scale)
    scaled = rescale_from_i32(rw, total, scale, out, rounding)
    return with_fused_activation(rw, op, scaled)


@pattern("tfl.add", kind="integer", label="add_int", types=("i8", "i16"))
@integer_pattern
def add_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Both inputs to a common 2^left_shift-scaled i32, ADD, RESCALE to the output (add.cc)."""
    return _add_or_sub(op, rw, "tosa.add")


@pattern("tfl.sub", kind="integer", label="sub_int", types=("i8", "i16"))
@integer_pattern
def sub_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """As ADD with SUB of the scaled inputs (sub.cc uses add.cc's multipliers)."""
    return _add_or_sub(op, rw, "tosa.sub")


@pattern("tfl.mul", kind="integer", label="mul_int", types=("i8", "i16"))
@integer_pattern
def mul_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """RESCALE both inputs to i32 without zero point, MUL (the i32 product is exact
    for 8- and 16-bit inputs), RESCALE by float32(s1 * s2 / s_out) to the output
    (mul.cc; int16 zero points are 0)."""
    elements = require_one_storage(op, [*op.operands[:2], op.results[0]], "i8", "i16")
    if isinstance(elements, Failure):
        return elements
    q1, q2, out = elements
    x1, x2, result = _aligned_inputs(rw, op)
    product = build.mul(rw, rescale_to_i32(rw, x1, rounding=SINGLE_ROUND),
                        rescale_to_i32(rw, x2, rounding=SINGLE_ROUND),
                        result_type=result.with_element(i32))
    scale = float(np.float32(q1.scale) * np.float32(q2.scale) / np.float32(out.scale))
    scaled = rescale_from_i32(rw, product, scale, out, rounding_mode(op.name))
    return with_fused_activation(rw, op, scaled)
