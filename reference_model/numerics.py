"""Exact integer (and float-conversion) semantics of the TOSA 1.0 specification.

Every function here restates one helper of the specification pseudocode
(`pseudocode/library/*.tosac`, the RESCALE/CAST/TABLE/MUL/... operator
pseudocode, and the `apply_lookup` reference in the introduction chapter),
vectorized over numpy arrays.

Conventions:
- Integer values are computed in numpy int64. A `bits`-wide TOSA integer
  (8, 16, 32, 48) is a signed value in [-2^(bits-1), 2^(bits-1)) unless a
  function says it zero-extends. Callers may pass any integer dtype.
- A specification REQUIRE that fails raises `SpecRequire` (the graph result is
  unpredictable); an ERROR_IF that holds raises `SpecErrorIf`.
- 64-bit intermediate results are proved (in comments) not to overflow int64
  under the function's REQUIREs, which are checked before computing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tfl2tosa.errors import SpecErrorIf, SpecRequire
from tfl2tosa.tosa import rules

IntArray = np.ndarray
ArrayLike = Any  # numpy array or Python / numpy scalar


# ---------------------------------------------------------------------------
# REQUIRE / ERROR_IF


def _violations(condition: ArrayLike) -> str:
    condition = np.asarray(condition)
    if condition.ndim == 0:
        return ""
    return f" ({int(condition.size - np.count_nonzero(condition))} of {condition.size} elements)"


def holds_everywhere(condition: ArrayLike) -> bool:
    """all(condition); Python and numpy booleans skip numpy's reduction machinery."""
    if isinstance(condition, np.ndarray):
        return bool(condition.all())
    if isinstance(condition, (bool, np.bool_)):
        return bool(condition)
    return bool(np.all(condition))


def holds_anywhere(condition: ArrayLike) -> bool:
    """any(condition), as holds_everywhere."""
    if isinstance(condition, np.ndarray):
        return bool(condition.any())
    if isinstance(condition, (bool, np.bool_)):
        return bool(condition)
    return bool(np.any(condition))


def require(condition: ArrayLike, message: str) -> None:
    """Raise SpecRequire unless `condition` holds for every element."""
    if not holds_everywhere(condition):
        raise SpecRequire(f"REQUIRE failed: {message}{_violations(condition)}")


def error_if(condition: ArrayLike, message: str) -> None:
    """Raise SpecErrorIf if `condition` holds for any element."""
    if holds_anywhere(condition):
        raise SpecErrorIf(f"ERROR_IF: {message}")


# ---------------------------------------------------------------------------
# Integer ranges, extension, truncation, saturation


def int_min(bits: int, unsigned: bool = False) -> int:
    return 0 if unsigned else -(1 << (bits - 1))


def int_max(bits: int, unsigned: bool = False) -> int:
    return (1 << bits) - 1 if unsigned else (1 << (bits - 1)) - 1


def as_int64(x: ArrayLike) -> IntArray:
    return np.asarray(x).astype(np.int64, copy=False)


def sign_extend(x: ArrayLike, bits: int) -> IntArray:
    """Interpret the low `bits` bits of x as a two's complement value (spec sign_extend)."""
    x = as_int64(x)
    if bits >= 64:
        return x
    half = np.int64(1 << (bits - 1))
    mask = np.int64((1 << bits) - 1)
    return ((x + half) & mask) - half


def zero_extend(x: ArrayLike, bits: int) -> IntArray:
    """Interpret the low `bits` bits of x as an unsigned value (spec zero_extend); bits < 64."""
    return as_int64(x) & np.int64((1 << bits) - 1)


def wrap(x: ArrayLike, bits: int) -> IntArray:
    """static_cast / truncate to a narrower signed integer: keep the low `bits` bits."""
    return sign_extend(x, bits)


def saturate(x: ArrayLike, bits: int, unsigned: bool = False) -> IntArray:
    """Clip to the range of a `bits`-wide signed (or unsigned) integer (apply_clip_s/_u)."""
    return np.clip(as_int64(x), int_min(bits, unsigned), int_max(bits, unsigned))


def require_fits(x: ArrayLike, bits: int, what: str) -> None:
    x = np.asarray(x)
    # Two reductions instead of two comparison arrays; the elementwise test only
    # runs to count the violations for the message.
    if x.size and (x.min() < int_min(bits) or x.max() > int_max(bits)):
        require((x >= int_min(bits)) & (x <= int_max(bits)), f"{what} fits int{bits}")


# ---------------------------------------------------------------------------
# Arithmetic helpers (arithmetic_helpers.tosac)


def apply_add_s(a: ArrayLike, b: ArrayLike, bits: int = 32) -> IntArray:
    """a + b in 64 bits; REQUIRE the sum fits a signed `bits`-wide integer."""
    c = as_int64(a) + as_int64(b)
    require_fits(c, bits, "apply_add_s result")
    return c


def apply_sub_s(a: ArrayLike, b: ArrayLike, bits: int = 32) -> IntArray:
    """a - b in 64 bits; REQUIRE the difference fits a signed `bits`-wide integer."""
    c = as_int64(a) - as_int64(b)
    require_fits(c, bits, "apply_sub_s result")
    return c


def apply_mul_s(a: ArrayLike, b: ArrayLike, bits: int = 32) -> IntArray:
    """a * b keeping the low `bits` bits (no REQUIRE: the specification truncates)."""
    return wrap(as_int64(a) * as_int64(b), bits)


def checked_sum(values: ArrayLike, axis: int, bits: int = 32) -> IntArray:
    """Sum along `axis` in index order with apply_add_s<int`bits`> at every step.

    REDUCE_SUM accumulates `acc = apply_add_s(acc, value)` for i = 0, 1, ...,
    so a REQUIRE fails if any prefix sum leaves the range, even when the final
    sum would fit. The int64 cumsum of values below 2^47 is exact for any axis
    shorter than 2^16 elements, and far longer for 32-bit values.
    """
    values = as_int64(values)
    if values.shape[axis] == 0:
        return np.sum(values, axis=axis, keepdims=True)
    prefix = np.cumsum(values, axis=axis)
    require_fits(prefix, bits, "every partial sum (apply_add_s)")
    return np.take(prefix, [-1], axis=axis)


def intdiv(a: ArrayLike, b: ArrayLike, bits: int = 32) -> IntArray:
    """Integer division truncating toward zero (INTDIV, apply_intdiv_s)."""
    a, b = as_int64(a), as_int64(b)
    require(b != 0, "INTDIV divisor != 0")
    quotient = truncating_quotient(a, np.where(b == 0, 1, b))
    require_fits(quotient, bits, "INTDIV quotient")  # only min / -1 fails
    return quotient


def truncating_quotient(a: IntArray, b: IntArray) -> IntArray:
    """a / b rounded toward zero, for int64 arrays and a divisor without zeros:
    |a| // |b| with the sign of a times b's."""
    quotient = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -quotient, quotient)


def _require_shift(n: IntArray, bits: int, what: str) -> None:
    require((n >= 0) & (n <= bits - 1), f"{what} shift amount in [0, {bits - 1}]")


def arithmetic_right_shift(x: ArrayLike, n: ArrayLike, round: bool, bits: int = 32) -> IntArray:
    """ARITHMETIC_RIGHT_SHIFT: sign-propagating x >> n; with `round`, add bit (n-1) of x.

    `(x >> (n-1)) & 1` is the first bit shifted out, so rounding is half up
    (toward +inf) on the exact quotient x / 2^n. The +1 cannot overflow: for
    n >= 1, |x >> n| <= 2^(bits-2).
    """
    x, n = as_int64(x), as_int64(n)
    _require_shift(n, bits, "ARITHMETIC_RIGHT_SHIFT")
    result = x >> n
    if round:
        first_out = (x >> np.maximum(n - 1, 0)) & 1
        result = result + np.where(n > 0, first_out, 0)
    return result


def logical_left_shift(x: ArrayLike, n: ArrayLike, bits: int = 32) -> IntArray:
    """LOGICAL_LEFT_SHIFT: x << n truncated to `bits` bits."""
    x, n = as_int64(x), as_int64(n)
    _require_shift(n, bits, "LOGICAL_LEFT_SHIFT")
    # Only the low `bits` bits survive, so shifting the zero-extended value in
    # int64 (< 2^(2*bits-1) <= 2^63 for bits <= 32) loses nothing that matters.
    return wrap(zero_extend(x, bits) << n, bits)


def logical_right_shift(x: ArrayLike, n: ArrayLike, bits: int = 32) -> IntArray:
    """LOGICAL_RIGHT_SHIFT: the bits of x read as unsigned, shifted right, zero-filled."""
    x, n = as_int64(x), as_int64(n)
    _require_shift(n, bits, "LOGICAL_RIGHT_SHIFT")
    return wrap(zero_extend(x, bits) >> n, bits)


def clz32(x: ArrayLike) -> IntArray:
    """count_leading_zeros of the 32-bit pattern of x (32 for 0)."""
    unsigned = zero_extend(x, 32)
    # frexp of a positive integer below 2^53 is exact: u = f * 2^e, 0.5 <= f < 1,
    # so e is the bit length of u.
    _, exponent = np.frexp(unsigned.astype(np.float64))
    return np.where(unsigned == 0, 32, 32 - exponent).astype(np.int64)


def _round_shift_right(value: IntArray, rounding: IntArray, shift: IntArray) -> IntArray:
    """floor((value + rounding) / 2^shift) for 1 <= shift <= 63 without int64 overflow.

    value = hi * 2^shift + lo with 0 <= lo < 2^shift; only lo + rounding (each
    below 2^63) is added, in uint64 where the sum cannot overflow.
    """
    unsigned_shift = shift.astype(np.uint64)
    mask = (np.uint64(1) << unsigned_shift) - np.uint64(1)
    low = (value.astype(np.uint64) & mask) + rounding.astype(np.uint64)
    return (value >> shift) + (low >> unsigned_shift).astype(np.int64)


def mul_with_shift(a: ArrayLike, b: ArrayLike, shift: ArrayLike) -> IntArray:
    """MUL for int32 inputs with a shift operand.

    shift = 0: the low 32 bits of the product. shift > 0: the 64-bit product
    plus 2^(shift-1), arithmetic-shifted right by shift (round half up);
    REQUIRE the result fits int32.
    """
    a, b, shift = as_int64(a), as_int64(b), as_int64(shift)
    require((shift >= 0) & (shift <= 63), "MUL shift in [0, 63]")
    product = a * b  # |a|, |b| <= 2^31, so |product| <= 2^62
    positive = np.maximum(shift, 1)
    rounding = np.int64(1) << (positive - 1)
    shifted = _round_shift_right(product, rounding, positive)
    require_fits(np.where(shift > 0, shifted, 0), 32, "MUL result with shift")
    return np.where(shift > 0, shifted, wrap(product, 32))


# ---------------------------------------------------------------------------
# Scaling helpers (scale_helpers.tosac)


def apply_scale_32(value: ArrayLike, multiplier: ArrayLike, shift: ArrayLike,
                   double_round: bool = False) -> IntArray:
    """(value * multiplier + round) >> shift with round = 2^(shift-1).

    With double_round and shift > 31, round gets +2^30 for value >= 0 and
    -2^30 for value < 0: the two-step rounding of gemmlowp (round at bit 31,
    then round half away from zero). No int64 overflow: |value| < 2^31 and
    multiplier < 2^31 bound the product by 2^62, and round <= 2^61 + 2^30.
    """
    value, multiplier, shift = as_int64(value), as_int64(multiplier), as_int64(shift)
    require(multiplier >= 0, "apply_scale_32 multiplier >= 0")
    require_fits(multiplier, 32, "apply_scale_32 multiplier")
    require((shift >= 2) & (shift <= 62), "apply_scale_32 shift in [2, 62]")
    require_fits(value, 32, "apply_scale_32 value")
    limit = np.int64(1) << (np.clip(shift, 2, 62) - 1)
    require((value >= -limit) & (value < limit),
            "apply_scale_32 value in [-2^(shift-1), 2^(shift-1))")
    rounding = limit
    if double_round:
        adjust = np.where(value >= 0, np.int64(1 << 30), np.int64(-(1 << 30)))
        rounding = rounding + np.where(shift > 31, adjust, 0)
    return (value * multiplier + rounding) >> shift


def apply_scale_16(value: ArrayLike, multiplier: ArrayLike, shift: ArrayLike) -> IntArray:
    """(value * multiplier + 2^(shift-1)) >> shift for a 48-bit value and 16-bit multiplier.

    |value| <= 2^47 and multiplier < 2^15 bound the product by 2^62: no int64
    overflow. REQUIRE the result fits int32.
    """
    value, multiplier, shift = as_int64(value), as_int64(multiplier), as_int64(shift)
    require(multiplier >= 0, "apply_scale_16 multiplier >= 0")
    require_fits(multiplier, 16, "apply_scale_16 multiplier")
    require((shift >= 2) & (shift <= 62), "apply_scale_16 shift in [2, 62]")
    require_fits(value, 48, "apply_scale_16 value")
    rounding = np.int64(1) << (np.clip(shift, 2, 62) - 1)
    result = (value * multiplier + rounding) >> shift
    require_fits(result, 32, "apply_scale_16 result")
    return result


def reciprocal_scale(count: ArrayLike) -> tuple[IntArray, IntArray]:
    """(multiplier, shift) with multiplier / 2^shift slightly above 1 / count.

    k = 32 - clz(count - 1), so 2^(k-1) < count <= 2^k; multiplier =
    ((2^30 + 1) << k) // count lies in [2^30, 2^31) and shift = 30 + k.
    """
    count = as_int64(count)
    require(count > 0, "reciprocal_scale value > 0")
    k = 32 - clz32(count - 1)
    numerator = np.int64((1 << 30) + 1) << k
    return numerator // count, 30 + k


def rescale(value: ArrayLike, multiplier: ArrayLike, shift: ArrayLike,
            input_zp: int, output_zp: int, *, in_bits: int, out_bits: int,
            scale32: bool, rounding_mode: str, per_channel: bool,
            input_unsigned: bool = False, output_unsigned: bool = False) -> IntArray:
    """RESCALE of `value` (held as signed in_bits integers), returned as out_bits integers.

    Unsigned inputs/outputs only change how bits are read and written: the
    result holds the out_bits two's complement pattern (u8 200 is int8 -56),
    which is how TOSA tensors (signless integers) store them.
    """
    value = as_int64(value)
    multiplier = as_int64(multiplier).reshape(-1)
    shift = as_int64(shift).reshape(-1)
    error_if(np.size(input_zp) != 1 or np.size(output_zp) != 1,
             "RESCALE: input_zp and output_zp must hold one value each")
    in_zp = int(np.asarray(input_zp).reshape(-1)[0])
    out_zp = int(np.asarray(output_zp).reshape(-1)[0])
    check_rescale_attributes(in_bits, out_bits, in_zp, out_zp, scale32, rounding_mode,
                   per_channel, input_unsigned, output_unsigned, value.ndim)
    counts = rules.rescale_count_problems(value.shape, per_channel,
                                          [("multiplier", multiplier.shape),
                                           ("shift", shift.shape)])
    if counts:
        error_if(True, counts[0])
    # Extend to 48 bits (zero- or sign-) and subtract the zero point.
    extend = zero_extend if input_unsigned else sign_extend
    value = extend(value, in_bits) - extend(in_zp, in_bits)
    if scale32:
        result = apply_scale_32(value, multiplier, shift, rounding_mode == "DOUBLE_ROUND")
    else:
        result = apply_scale_16(value, multiplier, shift)
    extended_out_zp = (zero_extend if output_unsigned else sign_extend)(out_zp, out_bits)
    result = apply_add_s(result, extended_out_zp, 32)
    return wrap(saturate(result, out_bits, output_unsigned), out_bits)


def inexact_round_bounds(value: ArrayLike, multiplier: ArrayLike, shift: ArrayLike,
                         input_zp: int, output_zp: int, out_bits: int
                         ) -> tuple[IntArray, IntArray]:
    """The [low, high] range RESCALE with INEXACT_ROUND may return (signed output).

    From the RESCALE precision requirements: out_ref = (x - input_zp) * m * 2^-shift
    in fp64, err_bnd = 0.5 + (3|out_ref| + |out_ref + output_zp|) * 2^-24
    (normal_frac<fp32> = 23), and the result must lie in
    [ceil(out_ref - err_bnd + output_zp), floor(out_ref + err_bnd + output_zp)],
    each clipped to the output range. An exact SINGLE_ROUND result always does.
    """
    out_ref = ((as_int64(value) - int(input_zp)).astype(np.float64)
               * as_int64(multiplier).astype(np.float64)
               * np.exp2(-as_int64(shift).astype(np.float64)))
    bound = 0.5 + (3 * np.abs(out_ref) + np.abs(out_ref + output_zp)) * 2.0 ** -24
    low = np.clip(np.ceil(out_ref - bound + output_zp), int_min(out_bits), int_max(out_bits))
    high = np.clip(np.floor(out_ref + bound + output_zp), int_min(out_bits), int_max(out_bits))
    return low.astype(np.int64), high.astype(np.int64)


def check_rescale_attributes(in_bits: int, out_bits: int, in_zp: int, out_zp: int, scale32: bool,
                             rounding_mode: str, per_channel: bool, input_unsigned: bool,
                             output_unsigned: bool, rank: int) -> None:
    """ERROR_IF RESCALE's attributes and zero points break tfl2tosa.tosa.rules."""
    problems = rules.rescale_problems(f"i{in_bits}", f"i{out_bits}", in_zp, out_zp, scale32,
                                      rounding_mode, per_channel, input_unsigned,
                                      output_unsigned, rank)
    if problems:
        error_if(True, problems[0])


# ---------------------------------------------------------------------------
# TABLE


def table_i8(x: ArrayLike, table: ArrayLike) -> IntArray:
    """int8 TABLE: table[x + 128] from a 256-entry table."""
    table = as_int64(table).reshape(-1)
    require(table.size == 256, "int8 TABLE has 256 entries")
    return table[sign_extend(x, 8) + 128]


def table_i16(x: ArrayLike, table: ArrayLike) -> IntArray:
    """int16 TABLE (apply_lookup): 9.7 fixed-point index into 513 entries, 23-bit result.

    index = (x + 32768) >> 7 picks the segment, fraction = x & 0x7F the
    position within it; result = (table[index] << 7) + slope * fraction, with
    REQUIRE that slope = table[index+1] - table[index] fits int16.
    """
    table = sign_extend(table, 16).reshape(-1)
    require(table.size == 513, "int16 TABLE has 513 entries")
    x = sign_extend(x, 16)
    index = (x + 32768) >> 7
    fraction = x & 0x7F
    base = table[index]
    slope = table[index + 1] - base
    require_fits(slope, 16, "TABLE slope table[i+1] - table[i]")
    return (base << 7) + slope * fraction


# ---------------------------------------------------------------------------
# Floating point <-> integer and float <-> float conversion (CAST)

# (significand bits including the implicit one, minimum normal exponent,
#  largest finite value, has infinities). The formats numpy rounds correctly
#  from float64 itself (f32, f16) are not listed.
_FLOAT_FORMATS: dict[str, tuple[int, int, float, bool]] = {
    "bfloat16": (8, -126, float.fromhex("0x1.fep127"), True),
    "float8_e4m3fn": (4, -6, 448.0, False),
    "float8_e5m2": (3, -14, 57344.0, True),
}


def round_to_float(x: ArrayLike, dtype: np.dtype | type) -> np.ndarray:
    """Round float64 values to the float `dtype`, to nearest with ties to even.

    numpy converts float64 to float32 and float16 correctly. ml_dtypes goes
    through float32 for bfloat16 and fp8, which rounds twice (1 + 2^-8 + 2^-30
    becomes bf16 1.0 instead of 1 + 2^-7), so those are rounded here in float64
    first: scale by the format's quantum at the value's exponent (a power of
    two, exact), rint (ties to even), scale back; then the cast is exact.
    Overflow gives infinity, or NaN for formats without infinities (OCP fp8
    non-saturating mode).
    """
    dtype = np.dtype(dtype)
    x = np.asarray(x, dtype=np.float64)
    # numpy's own formats ("f" kind; ml_dtypes' are "V") convert correctly, and
    # dtype.name costs more than the conversion of a small array.
    spec = None if dtype.kind == "f" else _FLOAT_FORMATS.get(dtype.name)
    if spec is None:
        with np.errstate(over="ignore"):
            return x.astype(dtype)
    significand_bits, min_exponent, max_finite, has_inf = spec
    with np.errstate(invalid="ignore"):
        _, exponent = np.frexp(x)  # |x| = f * 2^exponent with 0.5 <= f < 1
        exponent = np.maximum(exponent - 1, min_exponent)
        quantum_exp = exponent - (significand_bits - 1)
        rounded = np.ldexp(np.rint(np.ldexp(x, -quantum_exp)), quantum_exp)
        rounded = np.where(np.isfinite(x), rounded, x)
        overflow = np.abs(rounded) > max_finite
        if has_inf:
            rounded = np.where(overflow, np.copysign(np.inf, x), rounded)
        else:
            rounded = np.where(overflow, np.nan, rounded)
    return rounded.astype(dtype)


def float_to_int_cast(x: ArrayLike, bits: int) -> IntArray:
    """CAST float -> int: round to nearest, ties to even, saturate to `bits`.

    Infinities saturate. NaN input is unpredictable in the specification; we
    return 0 for it (Arm's reference model 2026.8 returns 0 for int8 and
    INT32_MIN for int32, so comparisons must not feed NaN here).
    """
    x = np.asarray(x).astype(np.float64)
    rounded = np.rint(np.nan_to_num(x, nan=0.0, posinf=np.inf, neginf=-np.inf))
    clipped = np.clip(rounded, int_min(bits), int_max(bits))
    return clipped.astype(np.int64)


def int_to_float_cast(x: ArrayLike, dtype: np.dtype | type) -> np.ndarray:
    """CAST int -> float: round to nearest (ties to even); int64 values below 2^53 are exact
    in float64, so one rounding happens."""
    return round_to_float(as_int64(x).astype(np.float64), dtype)


# ---------------------------------------------------------------------------
# NaN-aware maximum / minimum (apply_max_s / apply_min_s for floats)


def nan_max(a: np.ndarray, b: np.ndarray, nan_mode: str = "PROPAGATE") -> np.ndarray:
    """apply_max_s: PROPAGATE returns NaN if either is NaN; IGNORE returns the other."""
    return np.maximum(a, b) if nan_mode == "PROPAGATE" else np.fmax(a, b)


def nan_min(a: np.ndarray, b: np.ndarray, nan_mode: str = "PROPAGATE") -> np.ndarray:
    """apply_min_s: PROPAGATE returns NaN if either is NaN; IGNORE returns the other."""
    return np.minimum(a, b) if nan_mode == "PROPAGATE" else np.fmin(a, b)
