"""Quantization arithmetic shared by the integer patterns, written once.

Everything here reproduces what TFLite's kernels compute, so the TOSA graph
is bit exact with them (facts: TFLite's quantization_util.cc, kernels/internal/common.h
and reference_ops).

- Multipliers: `quantize_multiplier` (TFLite `QuantizeMultiplier`, a 32-bit
  multiplier for RESCALE with scale32) and `quantize_multiplier_16` (the
  15-bit reduction of TFLite's 64-bit `MultiplyByQuantizedMultiplier`).
- Rounding: `ROUNDING_POLICY`, which RESCALE rounding each TFL op needs to
  match TFLite's builtin reference kernels (`rounding_mode(op_name)`).
- RESCALE builders: `rescale_to_i32`, `rescale_from_i32`, `rescale_per_channel`.
- Fused activation bounds: `quantize_scalar` (used by legalize.common.fused_activation).
- TABLE contents: `table_i8` (TFLite `LUTPopulateInt8`) and `table_i16`
  (TFLite `LUTPopulateInt16`).
- Constants: `dequantized_values` (TFLite's DEQUANTIZE of stored integers).
- MEAN: `mean_multiplier` (the 1/N folding of TFLite's integer mean).
- gemmlowp fixed point (int32 emulation, on integers or arrays) and SOFTMAX:
  `exp_on_negative_values`, `softmax_input_scaling`, `softmax_exp` (contents of
  the softmax tables).

How TFLite's fixed-point scaling maps onto TOSA's `apply_scale_32`:
TFLite represents a positive real scale as `m * 2^(e - 31)` with a 31-bit
mantissa `m` in [2^30, 2^31) and computes `MultiplyByQuantizedMultiplier(x,
m, e)`: in default builds `RoundingDivideByPOT(SaturatingRoundingDoublingHighMul
(x * 2^max(e, 0), m), max(-e, 0))`, i.e. one rounding at bit 31 of the
product, then a second, half-away-from-zero rounding of the right shift. TOSA's
`apply_scale_32(x, m, s, double_round)` with `s = 31 - e` computes
`(x * m + 2^(s-1) [+- 2^30 if double_round and s > 31]) >> s`, which is the
same double rounding with DOUBLE_ROUND and TFLite's single-rounding variant
(`TFLITE_SINGLE_ROUNDING`) with SINGLE_ROUND.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence

import numpy as np

from tfl2tosa import kernels
from tfl2tosa.errors import ConversionError
from tfl2tosa.ir.core import Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import (
    ElementType,
    TensorType,
    UniformQuantized,
    UniformQuantizedBlockwise,
    UniformQuantizedPerAxis,
    i32,
    storage_type,
)
from tfl2tosa.memo import BoundedMemo
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise


def dequantized_values(array: np.ndarray, element: ElementType) -> np.ndarray:
    """TFLite's DEQUANTIZE of stored integers `array`: `scale * (q - zero_point)`
    as float32, per tensor, along the quantized axis, or per block.

    TFLite computes `float(double(scale) * (q - zp))` per tensor
    (reference_ops::Dequantize) and `(q - zp[c]) * scale[c]` in float32 per
    channel (PerChannelDequantize). The product of a float32 scale and an
    integer below 2^29 is exact in double, so both round it once, as here.
    Blockwise scales are read by XNNPACK only (TFLite's builtin kernels
    ignore them); the same formula applies per block.
    """
    # A copy, scaled in place: the same operations without a temporary array per
    # step (weight tensors can be large); a zero point of 0 leaves q as it is.
    q = np.array(array, dtype=np.float64)
    if isinstance(element, UniformQuantized):
        if element.zero_point:
            q -= element.zero_point
        q *= np.float64(element.scale)
        return q.astype(np.float32)
    if isinstance(element, UniformQuantizedPerAxis):
        shape = [1] * q.ndim
        shape[element.axis] = element.scale_count
        if element.zero_point_bounds != (0, 0):
            q -= element.zero_points_array.astype(np.float64).reshape(shape)
        q *= element.scales_array.reshape(shape)
        return q.astype(np.float32)
    if not isinstance(element, UniformQuantizedBlockwise):
        raise TypeError(f"{element} is not a quantized type")
    # Each scale and zero point covers `block_size` consecutive values of a row.
    scales, zero_points = (
        np.repeat(np.asarray(v, dtype=np.float64).reshape(element.scales_shape),
                  element.block_size, axis=-1)
        for v in (element.scales, element.zero_points))
    if any(element.zero_points):
        q -= zero_points
    q *= scales
    return q.astype(np.float32)


class UnsupportedScale(ConversionError):
    """A real scale that no TOSA RESCALE can apply the way TFLite does."""


def round_half_away(x: float) -> int:
    """C's `std::round` (TFLite's `TfLiteRound`): ties go away from zero.

    Python's `round` rounds ties to even, which is not what TFLite does; and
    `floor(|x| + 0.5)` is wrong just below a half (0.49999999999999994 + 0.5
    rounds to 1.0), so the fraction is compared instead (exact in binary).
    """
    magnitude = abs(x)
    whole = math.floor(magnitude)
    rounded = whole + (1 if magnitude - whole >= 0.5 else 0)
    return rounded if x >= 0 else -rounded


def quantize_scalar(real: float, q: UniformQuantized) -> int:
    """TFLite's `zp + round(real / scale)`, saturated to the storage bounds.

    TFLite holds scales as float32 and divides in float32 (`Quantize` in
    kernels/kernel_util.cc), so do we.
    """
    value = q.zero_point + round_half_away(float(np.float32(real) / np.float32(q.scale)))
    return max(q.storage_min, min(q.storage_max, value))


# ---------------------------------------------------------------------------
# Real scale -> (multiplier, shift)

# TOSA RESCALE: `shift` must lie in [2, 62] (apply_scale_32 / apply_scale_16 REQUIRE).
MIN_SHIFT, MAX_SHIFT = 2, 62
# A flushed (zero) multiplier gives 0 for any shift; 62 is the shift whose
# input range (|v| < 2^61) admits every i32 and i48 value.
ZERO_SHIFT = MAX_SHIFT


def _mantissa_exponent(scale: float, bits: int) -> tuple[int, int]:
    """`scale = q * 2^(e - bits)` with q rounded half away from zero to `bits` bits.

    `frexp` gives scale = f * 2^e with f in [0.5, 1); `f * 2^bits` is exact in
    a double, and its rounding is done on the exact value (no `x + 0.5`
    rounding error). A mantissa that rounds up to 2^bits is halved and the
    exponent raised, as TFLite does.
    """
    fraction, exponent = math.frexp(scale)
    scaled = math.ldexp(fraction, bits)
    whole = math.floor(scaled)
    q = whole + (1 if scaled - whole >= 0.5 else 0)
    if q == 1 << bits:
        q //= 2
        exponent += 1
    return q, exponent


def tflite_quantize_multiplier(scale: float) -> tuple[int, int]:
    """TFLite's `QuantizeMultiplier(double, int32_t*, int*)` (default build).

    tensorflow/lite/kernels/internal/quantization_util.cc: `q = frexp(scale,
    &shift)`, `q_fixed = TfLiteRound(q * 2^31)` (half away from zero), a
    mantissa of 2^31 becomes 2^30 with shift + 1, and `shift < -31` flushes to
    (0, 0). Returns (multiplier, TFLite exponent); scale 0 gives (0, 0).
    """
    if not (math.isfinite(scale) and scale >= 0):
        raise UnsupportedScale(f"scale {scale!r} is not a finite non-negative number")
    if scale == 0:
        return 0, 0
    multiplier, exponent = _mantissa_exponent(scale, 31)
    if exponent < -31:
        return 0, 0
    return multiplier, exponent


def quantize_multiplier(scale: float) -> tuple[int, int]:
    """(multiplier, shift) for a scale32 RESCALE: `x * scale ~ x * m / 2^shift`.

    Same multiplier as TFLite's `QuantizeMultiplier`; TOSA shift = 31 - TFLite
    exponent. Out-of-range shifts:
    - above 62 (scales below 2^-32): TFLite flushes them to a zero multiplier
      (exponent < -31), so we do too, as (0, ZERO_SHIFT). TOSA could keep
      some precision with a reduced multiplier at shift 62, but that would
      no longer be TFLite's answer (0).
    - below 2 (scales from 2^29 up): RESCALE does not allow them and a larger
      multiplier does not exist (m < 2^31), so they raise UnsupportedScale;
      TFLite itself only supports left shifts up to 30 in single-rounding
      builds and overflows int32 in `x * 2^shift` long before.

    Note apply_scale_32 REQUIRES |v| < 2^(shift - 1): the shift this returns
    is the largest the multiplier allows (m >= 2^30), so scales below 0.5
    (shift >= 32) take any i32 input, scales in [0.5, 1) take |v| < 2^30, a
    unit scale (2^30, 30) takes |v| < 2^29, and 2^k takes |v| < 2^(29-k).
    """
    multiplier, exponent = tflite_quantize_multiplier(scale)
    if multiplier == 0:
        return 0, ZERO_SHIFT
    shift = 31 - exponent
    if shift < MIN_SHIFT:
        raise UnsupportedScale(f"scale {scale!r} needs RESCALE shift {shift} < {MIN_SHIFT}")
    return multiplier, shift


def quantize_multiplier_16(scale: float) -> tuple[int, int]:
    """(multiplier, shift) for a 16-bit (scale32 = false) RESCALE.

    Reproduces TFLite's `MultiplyByQuantizedMultiplier(int64_t x, m, e)`
    (kernels/internal/common.cc), used for int16x8 accumulators: the 32-bit
    multiplier from QuantizeMultiplier is reduced to 15 bits,
    `m < 0x7FFF0000 ? (m + 2^15) >> 16 : 0x7FFF`, and applied with a single
    rounding `(x * m16 + 2^(s-1)) >> s`, `s = 15 - e` — exactly
    apply_scale_16 with SINGLE_ROUND.
    """
    multiplier, exponent = tflite_quantize_multiplier(scale)
    if multiplier == 0:
        return 0, ZERO_SHIFT
    reduced = (multiplier + (1 << 15)) >> 16 if multiplier < 0x7FFF0000 else 0x7FFF
    shift = 15 - exponent
    if shift < MIN_SHIFT:
        raise UnsupportedScale(f"scale {scale!r} needs 16-bit RESCALE shift {shift} "
                               f"< {MIN_SHIFT}")
    return reduced, shift


def quantize_multipliers(scales: Sequence[float] | np.ndarray,
                         scale32: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """quantize_multiplier (or quantize_multiplier_16 when not `scale32`) of
    every scale at once, as two read-only int64 arrays (multipliers, shifts).

    Per-channel RESCALEs have one scale per output channel; this computes the
    same integers as the scalar definitions, element by element, with numpy:
    `frexp` and `ldexp` are exact, and the half-up rounding compares the exact
    fractional part as the scalar `_mantissa_exponent` does.
    """
    values = np.atleast_1d(np.asarray(scales, dtype=np.float64))
    key = (values.shape, values.tobytes(), scale32)
    known = _QUANTIZED_MULTIPLIERS.get(key)
    if known is None:
        known = _quantize_multipliers(values, scale32)
        for array in known:
            array.setflags(write=False)  # handed out again
        _QUANTIZED_MULTIPLIERS.keep(key, known)
    return known


# (shape, bytes of the float64 scales, scale32) -> (multipliers, shifts): a model
# asks for the same scales op after op (unit widenings, ADD's input scales, layers
# that share their quantization). Bounded for processes that convert many models.
_QUANTIZED_MULTIPLIERS: BoundedMemo = BoundedMemo()


def _quantize_multipliers(values: np.ndarray, scale32: bool) -> tuple[np.ndarray, np.ndarray]:
    if not values.size:
        return np.zeros(values.shape, dtype=np.int64), np.zeros(values.shape, dtype=np.int64)
    if values.size == 1:
        # One scale (a per-tensor RESCALE): the scalar definitions, without the
        # fixed cost of the array operations.
        multiplier, shift = _quantize_one(float(values.reshape(-1)[0]), scale32)
        return (np.full(values.shape, multiplier, dtype=np.int64),
                np.full(values.shape, shift, dtype=np.int64))
    # The least is NaN if any value is, and NaN >= 0 is false. (The ufuncs' own
    # reductions: ndarray.min adds a Python layer.)
    low = np.minimum.reduce(values)
    if not (low >= 0 and np.maximum.reduce(values) < math.inf):
        bad = ~(np.isfinite(values) & (values >= 0))
        raise UnsupportedScale(f"scale {float(values[bad][0])!r} is not a finite "
                               f"non-negative number")
    fraction, exponent = np.frexp(values)
    # f * 2^31 (exact: a power of two) lies in [2^30, 2^31) (or is 0): adding 1/2 is
    # exact below 2^31, and a sum from 2^31 up floors to 2^31 however it rounds, so
    # the floor rounds half up on the exact value, as the scalar definition does. The
    # sum is positive: converting it to integers truncates, which is that floor.
    scaled = fraction * float(1 << 31)
    scaled += 0.5
    multiplier = scaled.astype(np.int64)
    shift = np.subtract(31 if scale32 else 15, exponent, dtype=np.int64)
    if np.maximum.reduce(multiplier) >> 31:
        # A mantissa that rounded up to 2^31 is halved with the exponent raised.
        carried = multiplier >> 31
        multiplier >>= carried
        shift -= carried
    if not scale32:
        multiplier = np.where(multiplier < 0x7FFF0000, (multiplier + (1 << 15)) >> 16, 0x7FFF)
    # Scale 0 and exponents below -31 flush to a zero multiplier (TFLite's (0, 0)).
    kept = (31 if scale32 else 15) + 31  # the shift of exponent -31, the last kept
    if low == 0 or np.maximum.reduce(shift) > kept:
        zero = (values == 0) | (shift > kept)
        multiplier[zero] = 0
        shift[zero] = ZERO_SHIFT
    if np.minimum.reduce(shift) < MIN_SHIFT:
        small = shift < MIN_SHIFT
        kind = "RESCALE" if scale32 else "16-bit RESCALE"
        raise UnsupportedScale(f"scale {float(values[small][0])!r} needs {kind} shift "
                               f"{int(shift[small][0])} < {MIN_SHIFT}")
    return multiplier, shift


# ---------------------------------------------------------------------------
# Rounding policy

SINGLE_ROUND = "SINGLE_ROUND"
DOUBLE_ROUND = "DOUBLE_ROUND"
# TFLite's optimized int8 GEMM (cpu_backend_gemm -> ruy's kernels) scales with a
# rounding doubling high multiply, then a rounding right shift, both rounding
# ties toward +inf (NEON's SQRDMULH and SRSHL): not a TOSA rounding mode, two
# RESCALEs (_gemm_rescale).
GEMM_ROUND = "GEMM_ROUND"

# Which rounding TFLite's builtin reference kernels (TF 2.20, the validation
# target) use when they scale an accumulator, per TFL op. Each entry is pinned
# in tests/test_legalize_integer.py against TFLite: test_rounding_policy converts
# a model and shows the entry exact and the other mode not; for ops without an
# integer pattern yet, test_rounding_policy_kernel_recipe computes the kernel's
# recipe with TOSA's apply_scale_32 in both modes.
ROUNDING_POLICY: dict[str, str] = {
    "tfl.add": DOUBLE_ROUND,
    "tfl.sub": DOUBLE_ROUND,
    "tfl.mul": DOUBLE_ROUND,
    "tfl.conv_2d": DOUBLE_ROUND,
    "tfl.depthwise_conv_2d": DOUBLE_ROUND,
    "tfl.mean": DOUBLE_ROUND,
    "tfl.quantize": DOUBLE_ROUND,
    "tfl.leaky_relu": DOUBLE_ROUND,
    # int16 SOFTMAX scales the input differences with MultiplyByQuantizedMultiplier.
    "tfl.softmax": DOUBLE_ROUND,
    "tfl.batch_matmul": DOUBLE_ROUND,
    # The reference FULLY_CONNECTED (int8 and 16x8) requantizes in double,
    # `std::round(acc * (s_in * s_w / s_out))`, not MultiplyByQuantizedMultiplier:
    # one rounding, which the 32-bit multiplier reproduces except for a product
    # that is an exact negative tie (TFLite rounds it away from zero, RESCALE up:
    # the pattern moves those, legalize.conv._ties_away_from_zero) or lies
    # within |result| * 2^-31 of a tie (where the double's 53 bits decide).
    "tfl.fully_connected": SINGLE_ROUND,
}


# (op, activation bits) -> rounding of TFLite's optimized kernel where it is not the
# reference kernel's: the int8 convolutions and matrix products (cpu_backend_gemm,
# ruy, and the optimized depthwise kernel) round as GEMM_ROUND says
# (tests/test_legalize_integer_matmul.py, tests/test_legalize_integer.py), and so
# does the 16x8 FULLY_CONNECTED, on ruy's int16 x int8 GEMM with an int32
# accumulator, where TFLite takes it: zero zero points and no int64 bias
# (legalize.conv; tests/test_legalize_integer_fc_kernels.py).
OPTIMIZED_ROUNDING: dict[tuple[str, int], str] = {
    ("tfl.fully_connected", 8): GEMM_ROUND,
    ("tfl.fully_connected", 16): GEMM_ROUND,
    ("tfl.batch_matmul", 8): GEMM_ROUND,
    ("tfl.conv_2d", 8): GEMM_ROUND,
    ("tfl.depthwise_conv_2d", 8): GEMM_ROUND,
}


def rounding_mode(op_name: str, bits: int = 8) -> str:
    """The RESCALE rounding mode for the accumulator scaling of `op_name` with
    `bits`-bit activations, for the kernels chosen by `tfl2tosa.kernels`.

    Ops without an entry use DOUBLE_ROUND, TFLite's default-build
    MultiplyByQuantizedMultiplier.
    """
    if kernels.runs_optimized(op_name, bits) and (op_name, bits) in OPTIMIZED_ROUNDING:
        return OPTIMIZED_ROUNDING[(op_name, bits)]
    return ROUNDING_POLICY.get(op_name, DOUBLE_ROUND)


# ---------------------------------------------------------------------------
# RESCALE builders


def _zero_point(element: ElementType) -> int:
    return element.zero_point if isinstance(element, UniformQuantized) else 0


def _is_unsigned(element: ElementType) -> bool:
    return storage_type(element).kind == "unsigned"


def _tensor(value: Value) -> TensorType:
    if not isinstance(value.type, TensorType):
        raise UnsupportedScale(f"{value.name} is not a tensor")
    return value.type


def rescale(rw: Rewriter, x: Value, scale: float | Sequence[float] | np.ndarray,
            out: ElementType, *,
            input_zp: int | None = None, output_zp: int | None = None,
            rounding: str = DOUBLE_ROUND) -> Value:
    """RESCALE `x` by `scale` (one, or one per channel of the last dim) to element `out`.

    Zero points default to those of the quantized input and output types.
    32-bit scaling (quantize_multiplier) unless the input is 48-bit, where
    TOSA only allows 16-bit multipliers (quantize_multiplier_16, SINGLE_ROUND).
    DOUBLE_ROUND is only meaningful with shift > 31; it is kept as asked
    otherwise, since it is identical to SINGLE_ROUND there.
    """
    t = _tensor(x)
    scale32 = storage_type(t.element).bits != 48
    if isinstance(scale, (float, int)):  # one scale: no arrays
        multiplier, shift = _quantize_one(float(scale), scale32)
        if rounding == GEMM_ROUND and scale32:
            return _gemm_rescale(rw, x, np.array([multiplier]), np.array([shift]), out,
                                 input_zp, output_zp)
        return rescale_by_multiplier(rw, x, multiplier, shift, out, input_zp=input_zp,
                                     output_zp=output_zp, rounding=rounding)
    multipliers, shifts = quantize_multipliers(scale, scale32)
    if rounding == GEMM_ROUND and scale32:
        return _gemm_rescale(rw, x, multipliers, shifts, out, input_zp, output_zp)
    # In the constants' own types (both fit them by construction), which
    # build.rescale then need not convert and check value by value.
    return rescale_by_multiplier(rw, x, multipliers.astype(np.int32 if scale32 else np.int16),
                                 shifts.astype(np.int8), out,
                                 input_zp=input_zp, output_zp=output_zp, rounding=rounding)


def _quantize_one(scale: float, scale32: bool) -> tuple[int, int]:
    """quantize_multiplier (or quantize_multiplier_16) of one scale, kept."""
    request = (scale, scale32)
    known = _ONE_SCALE_MULTIPLIERS.get(request)
    if known is None:
        scalar = quantize_multiplier if scale32 else quantize_multiplier_16
        known = _ONE_SCALE_MULTIPLIERS.keep(request, scalar(scale))
    return known


# (scale, scale32) -> (multiplier, shift) of one scale: a model asks for the same
# few (unit widenings, ADD's 2^20, layers that share their quantization) op after op.
_ONE_SCALE_MULTIPLIERS: BoundedMemo = BoundedMemo()


def _gemm_rescale(rw: Rewriter, x: Value, multipliers: np.ndarray, shifts: np.ndarray,
                  out: ElementType, input_zp: int | None, output_zp: int | None) -> Value:
    """GEMM_ROUND as two RESCALEs: `hi = (x * m + 2^30) >> 31`, then
    `(hi + 2^(s - 32)) >> (s - 31)` to `out` (a unit multiplier 2^30 at shift
    s - 1), with the output zero point and saturation. A shift of 31 or less
    is one rounding, SINGLE_ROUND's. `multipliers` and `shifts` are integer
    arrays, one entry per channel (or one for the tensor)."""
    if np.maximum.reduce(shifts) <= 31:
        return rescale_by_multiplier(rw, x, multipliers.astype(np.int32), shifts.astype(np.int8),
                                     out, input_zp=input_zp, output_zp=output_zp,
                                     rounding=SINGLE_ROUND)
    high = rescale_by_multiplier(rw, x, multipliers.astype(np.int32),
                                 np.minimum(shifts, 31).astype(np.int8), i32,
                                 input_zp=input_zp, output_zp=0, rounding=SINGLE_ROUND)
    # The second step: (hi * 2^30 + 2^(s - 2)) >> (s - 1), or the identity
    # (hi * 2^29 + 2^28) >> 29 for a channel whose shift the first step completed.
    completed = shifts <= 31
    return rescale_by_multiplier(rw, high, np.where(completed, 1 << 29, 1 << 30).astype(np.int32),
                                 np.where(completed, 29, shifts - 1).astype(np.int8), out,
                                 input_zp=0, output_zp=output_zp, rounding=SINGLE_ROUND)


def rescale_by_multiplier(rw: Rewriter, x: Value, multipliers: int | Sequence[int],
                          shifts: int | Sequence[int], out: ElementType, *,
                          input_zp: int | None = None, output_zp: int | None = None,
                          rounding: str = DOUBLE_ROUND) -> Value:
    """RESCALE with given (multiplier, shift) pairs (one, as integers or lists of
    one, or one per channel).

    For recipes whose multiplier is not QuantizeMultiplier of a real scale
    (MEAN's 1/N folding). 48-bit inputs take 16-bit multipliers, SINGLE_ROUND.
    """
    t = _tensor(x)
    scale32 = storage_type(t.element).bits != 48
    in_zp = _zero_point(t.element) if input_zp is None else input_zp
    out_zp = _zero_point(out) if output_zp is None else output_zp
    return build.rescale(
        rw, x, multipliers, shifts, in_zp, out_zp, out,
        scale32=scale32, rounding_mode=rounding if scale32 else SINGLE_ROUND,
        per_channel=not isinstance(multipliers, int) and len(multipliers) > 1,
        input_unsigned=_is_unsigned(t.element),
        output_unsigned=_is_unsigned(out))


def left_shifted_as_tflite(rw: Rewriter, x: Value, left_shift: int) -> Value:
    """`x * 2^left_shift` as TFLite's MultiplyByQuantizedMultiplier computes it for a
    multiplier above 1 (`x * (1 << left_shift)` in int32, which wraps; a shift count of
    32 or more is taken modulo 32, as x86 shifts do), bounded to +-2^29 for the
    RESCALE by the mantissa with shift 31 that completes it (its input range; any
    product beyond saturates int8/int16 either way, as the mantissa is at least
    2^29). TOSA: LOGICAL_LEFT_SHIFT (the same wrap), MAXIMUM, MINIMUM (no i32 CLAMP)."""
    e = Elementwise(rw, len(_tensor(x).shape))
    shifted = e.shift_left(x, left_shift % 32)
    bounded = e.binary("tosa.maximum", shifted, -(1 << 29))
    return e.binary("tosa.minimum", bounded, 1 << 29)


def rescale_to_i32(rw: Rewriter, x: Value, scale: float = 1.0, input_zp: int | None = None,
                   rounding: str = SINGLE_ROUND) -> Value:
    """`(x - input_zp) * scale` as i32 (input_zp defaults to x's zero point).

    With the default unit scale this is the exact widening every integer
    recipe starts with; a power-of-two scale (ADD's 2^20) is exact too.
    """
    return rescale(rw, x, scale, i32, input_zp=input_zp, output_zp=0, rounding=rounding)


def rescale_from_i32(rw: Rewriter, x: Value, scale: float | Sequence[float] | np.ndarray,
                     output_type: ElementType, rounding: str) -> Value:
    """`x * scale + zp(output_type)` saturated to `output_type` (x is i32 or i48)."""
    return rescale(rw, x, scale, output_type, input_zp=0, rounding=rounding)


def rescale_per_channel(rw: Rewriter, x: Value, scales: Sequence[float] | np.ndarray,
                        output_type: ElementType, rounding: str) -> Value:
    """rescale_from_i32 with one scale per channel of the last dimension.

    A single scale stays per-tensor (per_channel = false).
    """
    return rescale_from_i32(rw, x, scales, output_type, rounding)


# ---------------------------------------------------------------------------
# TABLE contents


def _int32_cast(value: np.float32) -> int:
    """`static_cast<int32_t>(float)` as x86 computes it: truncation, and
    0x80000000 (INT32_MIN) for NaN or values out of range."""
    if not np.isfinite(value) or not -2.0**31 <= float(value) < 2.0**31:
        return -(1 << 31)
    return int(value)


def round_half_away_array(x: np.ndarray) -> np.ndarray:
    """round_half_away elementwise in x's float type (exact, see round_half_away)."""
    magnitude = np.abs(x)
    whole = np.floor(magnitude)
    return np.sign(x) * (whole + (magnitude - whole >= 0.5))


def table_i8(fn: Callable[[np.float32], np.float32], in_type: UniformQuantized,
             out_type: UniformQuantized) -> np.ndarray:
    """The 256-entry int8 TABLE TFLite's `LUTPopulateInt8` builds for `fn`.

    tensorflow/lite/kernels/internal/common.h, in float32: `dequantized =
    in_scale * (i - in_zp)`, `rescaled = TfLiteRound(fn(dequantized) *
    (1 / out_scale))`, `q = (int32_t)(rescaled + out_zp)` clamped to int8.
    Entry k holds input value k - 128 (TOSA TABLE indexes with x + 128).
    Both types must be int8 (uint8 tensors are retyped to int8 first).
    """
    for t in (in_type, out_type):
        if storage_type(t).name != "i8":
            raise UnsupportedScale(f"table_i8 needs int8 types, got {t}")
    in_scale = np.float32(in_type.scale)
    inverse_scale = np.float32(1) / np.float32(out_type.scale)
    table = np.empty(256, dtype=np.int8)
    with np.errstate(all="ignore"):
        for k, value in enumerate(range(-128, 128)):
            dequantized = in_scale * np.float32(value - in_type.zero_point)
            transformed = np.float32(fn(dequantized))
            rescaled = round_half_away_array(np.float32(transformed * inverse_scale))
            quantized = _int32_cast(np.float32(rescaled + np.float32(out_type.zero_point)))
            table[k] = min(127, max(-128, quantized))
    return table


def table_i16(fn: Callable[[np.floating], np.floating], in_type: UniformQuantized,
              out_type: UniformQuantized, float_type: type = np.float64) -> np.ndarray:
    """The 513-entry int16 TABLE TFLite's `LUTPopulateInt16` builds for `fn`.

    tensorflow/lite/kernels/internal/common.h: the input range is the real
    range of int16 under `in_type` (`in_scale * (-32768 - zp)` ..
    `in_scale * (32767 - zp)`), split into 512 steps; outputs are scaled by
    `65536 / (out_max - out_min)` with the real range of int16 under
    `out_type`. Each sample is corrected by half the error the linear
    interpolation makes at the step's midpoint; entry 512 is f(in_max), used
    only for the last slope. All arithmetic in `float_type`: TFLite's int16
    kernels instantiate it with double (the EXP int16x8 kernel matches on all
    65536 inputs with double, not with float). A NaN sample becomes 0, what
    x86 gives for `(int16_t)NaN` (0x80000000 truncated to 16 bits).
    """
    f = float_type
    in_min = f(in_type.scale) * f(-32768 - in_type.zero_point)
    in_max = f(in_type.scale) * f(32767 - in_type.zero_point)
    out_min = f(out_type.scale) * f(-32768 - out_type.zero_point)
    out_max = f(out_type.scale) * f(32767 - out_type.zero_point)
    steps = 512
    step = (in_max - in_min) / f(steps)
    half_step = step / f(2)
    scaling = f(65536) / (out_max - out_min)

    def rounded(x: np.ndarray) -> np.ndarray:
        return round_half_away_array(np.asarray(x, dtype=f))

    # Elementwise over the 512 steps at once: the same IEEE operations in the
    # same type as TFLite's loop, so every entry is the value the loop computes.
    i = np.arange(steps, dtype=f)
    with np.errstate(all="ignore"):
        value = _apply(fn, in_min + i * step, f)
        midpoint = _apply(fn, in_min + i * step + half_step, f)
        following = _apply(fn, in_min + (i + f(1)) * step, f)
        sample = rounded(value * scaling)
        interpolated = rounded((following * scaling + rounded(value * scaling)) / f(2))
        midpoint_error = interpolated - rounded(midpoint * scaling)
        bias = rounded(midpoint_error / f(2))
        last = rounded(_apply(fn, np.asarray([in_max], dtype=f), f) * scaling)
    entries = np.concatenate([sample - bias, last])
    # `(int16_t)std::min(std::max(v, -32768), 32767)` on x86: std::max/min
    # return their first argument when a comparison with NaN is false, so NaN
    # reaches the cast, which gives 0.
    saturated = np.minimum(np.maximum(entries, -32768), 32767)
    return np.where(np.isnan(entries), 0, saturated).astype(np.int16)


def _apply(fn: Callable[[np.floating], np.floating], x: np.ndarray, f: type) -> np.ndarray:
    """`fn` on each element of `x`, in `f`; one call on the array when `fn` takes
    arrays (numpy ufuncs do), else element by element."""
    try:
        result = np.asarray(fn(x), dtype=f)
        if result.shape == x.shape:
            return result
    except (TypeError, ValueError):
        pass
    return np.array([f(fn(f(v))) for v in x], dtype=f)


# ---------------------------------------------------------------------------
# MEAN


def mean_multiplier(scale: float, count: int) -> tuple[int, int]:
    """(multiplier, shift) of TFLite's integer mean: `scale / count` folded
    into QuantizeMultiplier(scale) (reference_ops::QuantizedMeanOrSum,
    kernels/internal/reference/reduce.h).

    TFLite: `k = min(63 - clz64(count), 32, 31 + e)`, `m' = (m << k) / count`
    (truncating), exponent `e - k`. In TOSA terms shift' = 31 - e + k.
    """
    multiplier, exponent = tflite_quantize_multiplier(scale)
    if count <= 0:
        raise UnsupportedScale(f"mean over {count} elements")
    k = min(count.bit_length() - 1, 32, 31 + exponent)
    multiplier = (multiplier << k) // count
    shift = 31 - (exponent - k)
    if multiplier == 0:
        return 0, ZERO_SHIFT
    if not MIN_SHIFT <= shift <= MAX_SHIFT:
        raise UnsupportedScale(f"mean scale {scale!r} over {count} needs shift {shift}")
    return multiplier, shift


# ---------------------------------------------------------------------------
# gemmlowp fixed point (fixedpoint/fixedpoint.h), int32 emulation, for tables
# that hold what TFLite's fixed-point kernels compute. Each function takes
# integers or int64 arrays of int32 values (every product stays below 2^63), so
# that a table is computed for all its inputs at once.

INT32_MAX = (1 << 31) - 1

IntOrArray = int | np.ndarray


def wrap32(x: IntOrArray) -> IntOrArray:
    """x wrapped to int32 (two's complement), as C++'s narrowing to int32_t does."""
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def saturating_rounding_doubling_high_mul(a: IntOrArray, b: IntOrArray) -> IntOrArray:
    """gemmlowp `SaturatingRoundingDoublingHighMul` on int32: round(a * b / 2^31),
    ties toward +inf, INT32_MIN * INT32_MIN saturates. gemmlowp nudges the
    product by 2^30 (by 1 - 2^30 when negative) and C division truncates; for a
    negative product that is the floor of (a * b + 2^30) / 2^31 too."""
    high = (a * b + (1 << 30)) >> 31
    # Only INT32_MIN * INT32_MIN reaches 2^31.
    return high - (high > INT32_MAX)


def rounding_divide_by_pot(x: IntOrArray, exponent: IntOrArray) -> IntOrArray:
    """gemmlowp `RoundingDivideByPOT`: x / 2^exponent rounded half away from zero."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def saturating_left_shift(x: IntOrArray, exponent: int) -> IntOrArray:
    """gemmlowp `SaturatingRoundingMultiplyByPOT<exponent>` for exponent > 0: x
    beyond +-(2^(31 - exponent) - 1) saturates; clipped one past that bound, the
    shift gives 2^31 (one more than INT32_MAX) or exactly INT32_MIN."""
    bound = 1 << (31 - exponent)
    shifted = np.maximum(np.minimum(x, bound), -bound) << exponent
    return shifted - (shifted > INT32_MAX)


def _exp_on_interval_between_negative_one_quarter_and_0_excl(a: IntOrArray) -> IntOrArray:
    """gemmlowp's Taylor expansion of exp around -1/8, Q0.31 in and out."""
    constant_term = 1895147668     # exp(-1/8) in Q0.31
    constant_1_over_3 = 715827883  # 1/3 in Q0.31
    x = a + (1 << 28)              # a + 1/8
    x2 = saturating_rounding_doubling_high_mul(x, x)
    x3 = saturating_rounding_doubling_high_mul(x2, x)
    x4 = saturating_rounding_doubling_high_mul(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    polynomial = rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(x4_over_4 + x3, constant_1_over_3) + x2, 1)
    return wrap32(constant_term
                   + saturating_rounding_doubling_high_mul(constant_term, x + polynomial))


# exp(-2^k) in Q0.31 for the barrel shifter of exp_on_negative_values.
_EXP_OF_NEGATIVE_POWERS_OF_TWO = ((-2, 1672461947), (-1, 1302514674), (0, 790015084),
                                  (1, 290630308), (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a: IntOrArray, integer_bits: int) -> IntOrArray:
    """gemmlowp `exp_on_negative_values`: exp(a) for a <= 0 given as raw
    Q(integer_bits).(31 - integer_bits), result raw Q0.31."""
    fractional_bits = 31 - integer_bits
    one_quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_one_quarter = (a & (one_quarter - 1)) - one_quarter
    result = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        saturating_left_shift(a_mod_quarter_minus_one_quarter, integer_bits)
        if integer_bits else a_mod_quarter_minus_one_quarter)
    remainder = a_mod_quarter_minus_one_quarter - a
    for exponent, multiplier in _EXP_OF_NEGATIVE_POWERS_OF_TWO:
        if integer_bits > exponent:
            result = np.where(remainder & (1 << (fractional_bits + exponent)),
                              saturating_rounding_doubling_high_mul(result, multiplier), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)
    return np.where(a == 0, INT32_MAX, result)


# ---------------------------------------------------------------------------
# SOFTMAX (int8/uint8 input)

# TFLite's quantized softmax evaluates exp on Q5.26 input differences.
SOFTMAX_DIFF_INTEGER_BITS = 5


def softmax_input_scaling(beta: float, input_scale: float) -> tuple[int, int, int]:
    """(multiplier, left_shift, diff_min) of TFLite's 8-bit softmax.

    quantization_util.cc `PreprocessSoftmaxScaling(beta, s_in, 5)`: the real
    multiplier `min(beta * s_in * 2^26, 2^31 - 1)` through
    QuantizeMultiplierGreaterThanOne; `CalculateInputRadius(5, left_shift)`:
    `diff_min = -floor((2^5 - 1) * 2^26 / 2^left_shift)`.
    """
    real = min(beta * input_scale * (1 << (31 - SOFTMAX_DIFF_INTEGER_BITS)), float(INT32_MAX))
    multiplier, left_shift = tflite_quantize_multiplier(real)
    if not real > 1 or left_shift < 0:
        raise UnsupportedScale(f"softmax beta * scale = {beta * input_scale!r} is too small")
    radius = math.floor(((1 << SOFTMAX_DIFF_INTEGER_BITS) - 1)
                        * (1 << (31 - SOFTMAX_DIFF_INTEGER_BITS)) / (1 << left_shift))
    return multiplier, left_shift, -radius


def softmax_exp(diff: IntOrArray, multiplier: int, left_shift: int, diff_min: int
                ) -> IntOrArray:
    """exp(beta * s_in * diff) in Q0.31 as reference_ops::Softmax computes it
    (kernels/internal/reference/softmax.h), 0 for differences below diff_min."""
    # Differences below diff_min are not scaled by the kernel (the product could
    # leave int32): computed as diff_min, then replaced by 0.
    kept = np.maximum(diff, diff_min)
    scaled = saturating_rounding_doubling_high_mul(kept * (1 << left_shift), multiplier)
    return np.where(diff < diff_min, 0,
                    exp_on_negative_values(scaled, SOFTMAX_DIFF_INTEGER_BITS))


__all__ = [
    "DOUBLE_ROUND",
    "ROUNDING_POLICY",
    "SINGLE_ROUND",
    "UnsupportedScale",
    "exp_on_negative_values",
    "mean_multiplier",
    "quantize_multiplier",
    "quantize_multiplier_16",
    "quantize_scalar",
    "rescale",
    "rescale_by_multiplier",
    "rescale_from_i32",
    "rescale_per_channel",
    "rescale_to_i32",
    "round_half_away",
    "rounding_divide_by_pot",
    "rounding_mode",
    "saturating_rounding_doubling_high_mul",
    "softmax_exp",
    "softmax_input_scaling",
    "table_i8",
    "table_i16",
    "tflite_quantize_multiplier",
    "left_shifted_as_tflite",
]


# (table function, its arguments) -> the table's read-only contents: a model's
# activations often share their quantization (the RSQRTs of its layer norms, the
# softmaxes of its attention heads), and a table replays a kernel's arithmetic
# value by value. Bounded for processes that convert model after model.
_TABLES: BoundedMemo = BoundedMemo(256)
TableContents = np.ndarray | tuple[np.ndarray, ...]


def kept_table(make: Callable[..., TableContents | Failure], *args: Hashable
               ) -> TableContents | Failure:
    """`make(*args)` the first time they are asked for, the same read-only arrays after."""
    key = (make, *args)
    known = _TABLES.get(key)
    if known is None:
        known = make(*args)
        if isinstance(known, Failure):
            return known
        for array in known if isinstance(known, tuple) else (known,):
            array.flags.writeable = False
        _TABLES.keep(key, known)
    return known
