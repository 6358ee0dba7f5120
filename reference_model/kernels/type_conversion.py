"""Type conversion operators (TOSA 1.0 chapter "Type Conversion"): CAST, RESCALE."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from reference_model import numerics
from reference_model.kernels import KernelContext, Prepared, StaticOp, kernel, prepared
from tfl2tosa.ir.types import ScalarType, numpy_dtype


@kernel("CAST")
def cast(ctx: KernelContext) -> list[np.ndarray]:
    """CAST between bool, integer and float types.

    - to bool: x != 0;  bool to a number: 1 / 0.
    - float -> int: round to nearest, ties to even, saturate (NaN: see
      numerics.float_to_int_cast).
    - int -> int: sign-extend when widening, keep the low bits when narrowing.
    - int or float -> float: one rounding to nearest (ties to even); overflow
      gives infinity (NaN for fp8e4m3, which has none: OCP non-saturating mode).
    """
    x = ctx.inputs[0]
    source, target = ctx.element(0), ctx.element(0, output=True)
    out_dtype = numpy_dtype(target)
    if target.kind == "bool":
        values = x.astype(np.float64) if source.is_float else x
        return [np.asarray(values != 0)]
    if source.kind == "bool":
        return [np.asarray(x, dtype=bool).astype(out_dtype)]
    if target.is_integer:
        if source.is_float:
            return [numerics.float_to_int_cast(x, target.bits).astype(out_dtype)]
        return [numerics.wrap(x, target.bits).astype(out_dtype)]
    if source.is_integer:
        return [numerics.int_to_float_cast(x, out_dtype)]
    return [numerics.round_to_float(x.astype(np.float64), out_dtype)]


@prepared("CAST")
def prepare_integer_cast(op: StaticOp) -> Prepared | None:
    """CAST between integer types whose numpy dtype is exactly as wide as the type
    (i8, i16, i32, and i48 sources): numpy's conversion keeps the low bits of the
    two's complement value and sign-extends when widening, which is the kernel's
    numerics.wrap."""
    source, target = op.element(0), op.element(0, output=True)
    if source is None or target is None or not source.is_integer \
            or not target.is_integer or _bits_held(target) != target.bits \
            or (_bits_held(source) != source.bits and source.bits != 48):
        return None
    out_dtype = numpy_dtype(target)

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [operands[0].astype(out_dtype)]
    return run


@kernel("RESCALE")
def rescale(ctx: KernelContext) -> list[np.ndarray]:
    """RESCALE: integer multiply, add and shift per tensor or per channel (last dimension).

    INEXACT_ROUND is computed like SINGLE_ROUND, which the specification's
    error bound for it always admits.
    """
    x, multiplier, shift, input_zp, output_zp = ctx.inputs
    result = numerics.rescale(
        x, multiplier, shift, input_zp, output_zp,
        in_bits=ctx.element(0).bits, out_bits=ctx.element(0, output=True).bits,
        scale32=bool(ctx.attrs["scale32"]), rounding_mode=ctx.attrs["rounding_mode"],
        per_channel=bool(ctx.attrs["per_channel"]),
        input_unsigned=bool(ctx.attrs.get("input_unsigned", False)),
        output_unsigned=bool(ctx.attrs.get("output_unsigned", False)))
    # Per-tensor parameters are [1]-shaped: keep a rank-0 input rank 0.
    return [np.reshape(result, np.shape(x)).astype(numpy_dtype(ctx.output_types[0].element))]


@prepared("RESCALE")
def prepare_rescale(op: StaticOp) -> Prepared | None:
    """RESCALE with constant multiplier, shift and zero points, decoded once.

    The same arithmetic as numerics.rescale, with the REQUIREs that the operand
    types already guarantee proved here instead of checked per run: the value
    range [lo, hi] of (extended input - input_zp) follows from the input type,
    and apply_scale_32 / apply_scale_16 are nondecreasing in the value (the
    multiplier is >= 0, and DOUBLE_ROUND's rounding only grows from value -1 to
    value 0), so their results lie between the results at lo and hi. What is
    not proved is checked per run with min/max; a failing check reruns the
    numerics version, which raises its error.
    """
    setup = _RescaleSetup.of(op)
    if setup is None:
        return None
    out_dtype = numpy_dtype(op.output_types[0].element)
    multiplier, shift, rounding = setup.multiplier, setup.shift, setup.rounding
    low, high = setup.out_range
    extend_mask, zp_in, zp_out = setup.extend_mask, setup.zp_in, setup.zp_out
    sign_extend_48 = setup.in_bits == 48
    check_value, check_result = not setup.value_proved, not setup.result_proved
    # (value - zp_in) * m + r == value * m + (r - zp_in * m): one pass less over the
    # data. int64 arithmetic wraps modulo 2^64, so the exact result, which fits
    # int64, comes out whatever the intermediate values. Not when the value itself
    # is checked, or its sign picks the rounding.
    fold_zp_in = bool(zp_in) and not check_value and setup.round_by_sign is None
    if fold_zp_in:
        rounding = rounding - zp_in * multiplier
    # clip(result + zp_out, low, high) == clip(result, low - zp_out, high - zp_out)
    # + zp_out, and the last addition can then be done in the (narrow) output type
    # when zp_out is one of its values: every sum lies in [low, high].
    out_info = np.iinfo(out_dtype)
    narrow_zp_out = out_info.min <= zp_out <= out_info.max
    if narrow_zp_out:
        low, high = low - zp_out, high - zp_out

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        x = operands[0]
        # One int64 working array, updated in place (a rank-0 input stays an array:
        # in-place operators on it keep it one).
        value = np.array(x, dtype=np.int64)
        if extend_mask:
            value &= extend_mask           # zero-extend an unsigned input
        elif sign_extend_48:
            value <<= 16                   # sign-extend bit 47, as numerics.rescale does
            value >>= 16
        if zp_in and not fold_zp_in:
            value -= zp_in
        if check_value and not setup.values_fit(value):
            return [setup.generic(operands)]
        if setup.round_by_sign is not None:
            positive, negative = setup.round_by_sign
            round_term = np.where(value >= 0, positive, negative)
            value *= multiplier
            value += round_term
        else:
            value *= multiplier
            value += rounding
        value >>= shift
        if check_result and not setup.results_fit(value):
            return [setup.generic(operands)]
        if zp_out and not narrow_zp_out:
            value += zp_out
        # np.clip's Python wrapper costs more than its two ufuncs.
        np.maximum(value, low, out=value)
        np.minimum(value, high, out=value)
        result = value.astype(out_dtype)
        if zp_out and narrow_zp_out:
            result += out_dtype.type(zp_out)
        return [result]

    return run


class _RescaleSetup:
    """RESCALE's decoded constants and what the operand types prove about its REQUIREs.

    Per-tensor parameters are Python integers; per-channel ones [C] int64 arrays
    that broadcast along the last dimension. Every product and sum stays inside
    int64: |value| <= 2^32 with multiplier < 2^31 (scale32), or |value| <= 2^48
    with multiplier < 2^15 (scale16, the only scale for i48), and rounding <=
    2^61 + 2^30.
    """

    def __init__(self, op: StaticOp, in_bits: int, out_bits: int, multiplier: Any,
                 shift: Any, in_zp: int, out_zp: int, largest_multiplier: int,
                 smallest_shift: int, largest_shift: int) -> None:
        attrs = op.attrs
        self.op = op
        self.in_bits, self.out_bits = in_bits, out_bits
        self.scale32 = bool(attrs["scale32"])
        self.rounding_mode = attrs["rounding_mode"]
        self.per_channel = bool(attrs["per_channel"])
        self.input_unsigned = bool(attrs.get("input_unsigned", False))
        self.output_unsigned = bool(attrs.get("output_unsigned", False))
        self.in_zp, self.out_zp = in_zp, out_zp
        self.multiplier, self.shift = multiplier, shift
        self.zp_in = _extend(in_zp, in_bits, self.input_unsigned)
        self.zp_out = _extend(out_zp, out_bits, self.output_unsigned)
        self.extend_mask = (1 << in_bits) - 1 if self.input_unsigned else 0
        self.out_range = (numerics.int_min(out_bits, self.output_unsigned),
                          numerics.int_max(out_bits, self.output_unsigned))
        double = self.scale32 and self.rounding_mode == "DOUBLE_ROUND"
        # apply_scale's rounding term 1 << (shift - 1), and with DOUBLE_ROUND for
        # shift > 31 a further +-2^30 by the value's sign.
        self.round_by_sign = None
        if self.per_channel:
            self.limit = self.rounding = np.left_shift(np.int64(1), shift - 1)
            smallest_limit = 1 << (smallest_shift - 1)
            if double and largest_shift > 31:
                # Every channel's shift > 31 (converted models): the adjustment is one
                # number; otherwise it is 2^30 in the channels with shift > 31 only.
                adjust = (1 << 30 if smallest_shift > 31
                          else np.where(shift > 31, np.int64(1 << 30), np.int64(0)))
                self.round_by_sign = (self.rounding + adjust, self.rounding - adjust)
        else:
            self.limit = self.rounding = smallest_limit = 1 << (shift - 1)
            if double and shift > 31:
                self.round_by_sign = (self.rounding + (1 << 30), self.rounding - (1 << 30))
        # The value's range from the input type.
        if self.input_unsigned:
            low, high = 0, (1 << in_bits) - 1
        else:
            low, high = numerics.int_min(in_bits), numerics.int_max(in_bits)
        low, high = low - self.zp_in, high - self.zp_in
        self.value_proved = not self.scale32 or (-smallest_limit <= low and high < smallest_limit)
        self.result_proved = self.value_proved and self._ends_fit_int32(
            low, high, largest_multiplier, smallest_shift)

    def _ends_fit_int32(self, low: int, high: int, largest_multiplier: int,
                        smallest_shift: int) -> bool:
        """Do apply_scale_32 / apply_scale_16 of every value in [low, high] fit int32, also
        after adding output_zp, in every channel? The scaling is nondecreasing in the
        value, so the results at low and high bound all others."""
        # First a test on the extremes alone: if |value * multiplier| < 2^(shift + 30)
        # in every channel, the rounding term (2^(shift-1), plus 2^30 only when
        # shift > 31) adds less than 1 after the shift, so |result| <= 2^30 + 1,
        # and with |output_zp| < 2^16 the sum stays inside int32.
        if max(-low, high) * largest_multiplier < 1 << (smallest_shift + 30) \
                and abs(self.zp_out) < 1 << 16:
            return True
        lowest, highest = self._scaled(low), self._scaled(high)
        if self.per_channel:
            lowest, highest = int(lowest.min()), int(highest.max())
        return (numerics.int_min(32) <= min(lowest, lowest + self.zp_out)
                and max(highest, highest + self.zp_out) <= numerics.int_max(32))

    def _scaled(self, value: int) -> Any:
        """apply_scale_32 / apply_scale_16's result for one value, per channel."""
        rounding = self.rounding
        if self.round_by_sign is not None:
            rounding = self.round_by_sign[0] if value >= 0 else self.round_by_sign[1]
        if self.per_channel:
            return (np.int64(value) * self.multiplier + rounding) >> self.shift
        return (value * self.multiplier + rounding) >> self.shift

    @classmethod
    def of(cls, op: StaticOp) -> _RescaleSetup | None:
        """The setup, or None when the generic kernel should run the op (parameters
        that are no constants, i4/i48 values, or anything the kernel would reject)."""
        in_element, out_element = op.element(0), op.element(0, output=True)
        shape = op.static_shape(0)
        if in_element is None or out_element is None or shape is None:
            return None
        constants = op.constants[1:5]
        if len(constants) != 4 or any(c is None for c in constants) \
                or constants[2].size != 1 or constants[3].size != 1:
            return None
        in_bits, out_bits = in_element.bits, out_element.bits
        # i48 (held in int64) is sign-extended from bit 47 per run; i4 is left to the kernel.
        if (in_bits != 48 and _bits_held(in_element) != in_bits) \
                or _bits_held(out_element) != out_bits:
            return None
        attrs = op.attrs
        in_zp = int(constants[2].reshape(-1)[0])
        out_zp = int(constants[3].reshape(-1)[0])
        per_channel = bool(attrs["per_channel"])
        _check_attributes(in_bits, out_bits, in_zp, out_zp, bool(attrs["scale32"]),
                          attrs["rounding_mode"], per_channel,
                          bool(attrs.get("input_unsigned", False)),
                          bool(attrs.get("output_unsigned", False)), len(shape))
        channels = shape[-1] if per_channel else 1
        multiplier, shift = constants[0], constants[1]
        if multiplier.size != channels or shift.size != channels or channels == 0:
            return None
        if per_channel:
            multiplier = multiplier.reshape(-1).astype(np.int64)
            shift = shift.reshape(-1).astype(np.int64)
            if channels <= _FEW_CHANNELS:  # Python's min/max on a list cost less here
                multipliers, shifts = multiplier.tolist(), shift.tolist()
                bounds = (min(multipliers), max(multipliers), min(shifts), max(shifts))
            else:
                bounds = (int(multiplier.min()), int(multiplier.max()),
                          int(shift.min()), int(shift.max()))
        else:
            multiplier, shift = int(multiplier.reshape(-1)[0]), int(shift.reshape(-1)[0])
            bounds = (multiplier, multiplier, shift, shift)
        largest = numerics.int_max(32 if attrs["scale32"] else 16)
        if not (0 <= bounds[0] and bounds[1] <= largest and 2 <= bounds[2] and bounds[3] <= 62):
            return None  # a REQUIRE fails on every run: the kernel reports it
        return cls(op, in_bits, out_bits, multiplier, shift, in_zp, out_zp, bounds[1],
                   bounds[2], bounds[3])

    def values_fit(self, value: np.ndarray) -> bool:
        """apply_scale_32's REQUIRE value in [-2^(shift-1), 2^(shift-1)), per channel."""
        if not value.size:
            return True
        if self.per_channel:
            flat = value.reshape(-1, value.shape[-1])
            return bool(np.all(flat.min(axis=0) >= -self.limit)
                        and np.all(flat.max(axis=0) < self.limit))
        return bool(value.min() >= -self.limit and value.max() < self.limit)

    def results_fit(self, result: np.ndarray) -> bool:
        """apply_scale_16's and apply_add_s's REQUIREs: the result, and the result plus
        output_zp, fit int32."""
        if not result.size:
            return True
        low, high = int(result.min()), int(result.max())
        return (numerics.int_min(32) <= min(low, low + self.zp_out)
                and max(high, high + self.zp_out) <= numerics.int_max(32))

    def generic(self, operands: list[np.ndarray]) -> np.ndarray:
        """numerics.rescale on the original operands: raises what the fast path detected."""
        x = operands[0]
        result = numerics.rescale(
            x, np.reshape(self.multiplier, -1), np.reshape(self.shift, -1), self.in_zp,
            self.out_zp,
            in_bits=self.in_bits, out_bits=self.out_bits, scale32=self.scale32,
            rounding_mode=self.rounding_mode, per_channel=self.per_channel,
            input_unsigned=self.input_unsigned, output_unsigned=self.output_unsigned)
        return np.reshape(result, np.shape(x)).astype(
            numpy_dtype(self.op.output_types[0].element))


# Up to this many channels, RESCALE's set-up finds the parameter bounds with Python's
# min/max on lists (fewer numpy calls on tiny arrays); past it, with numpy.
_FEW_CHANNELS = 256


def _extend(value: int, bits: int, unsigned: bool) -> int:
    """The specification's zero_extend / sign_extend of a `bits`-wide value, as an int."""
    value &= (1 << bits) - 1
    return value if unsigned or value < 1 << (bits - 1) else value - (1 << bits)


@functools.lru_cache(maxsize=64)
def _bits_held(element: ScalarType) -> int:
    """The bits of the numpy dtype holding `element` (i4 lives in 8, i48 in 64)."""
    return numpy_dtype(element).itemsize * 8


@functools.lru_cache(maxsize=256)
def _check_attributes(*arguments: Any) -> None:
    """numerics.check_rescale_attributes, once per distinct set of arguments (a model
    repeats a few; a failing check raises every time, exceptions are not cached)."""
    numerics.check_rescale_attributes(*arguments)
