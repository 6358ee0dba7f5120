"""Type conversion operators (TOSA 1.0 chapter "Type Conversion"): CAST, RESCALE."""

from __future__ import annotations

import numpy as np

from reference_model import numerics
from reference_model.kernels import KernelContext, Prepared, StaticOp, kernel, prepared
from tfl2tosa.ir.types import numpy_dtype


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
    check_value, check_result = not setup.value_proved, not setup.result_proved

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        x = operands[0]
        value = x.astype(np.int64)
        if extend_mask:
            value &= extend_mask           # zero-extend an unsigned input
        if zp_in:
            value -= zp_in
        if check_value and not setup.values_fit(value):
            return [setup.generic(operands)]
        if setup.round_by_sign is not None:
            positive, negative = setup.round_by_sign
            result = value * multiplier + np.where(value >= 0, positive, negative)
        else:
            result = value * multiplier + rounding
        result >>= shift
        if check_result and not setup.results_fit(result):
            return [setup.generic(operands)]
        if zp_out:
            result += zp_out
        # A rank-0 input gives numpy scalars, which np.clip cannot write into.
        return [np.asarray(np.clip(result, low, high)).astype(out_dtype)]

    return run


class _RescaleSetup:
    """RESCALE's decoded constants and what the operand types prove about its REQUIREs.

    The proofs use Python integers per channel (exact, and cheaper than numpy for
    the one to a few hundred channels of a model's RESCALEs).
    """

    def __init__(self, op: StaticOp, in_bits: int, out_bits: int, multiplier: list[int],
                 shift: list[int], in_zp: int, out_zp: int) -> None:
        attrs = op.attrs
        self.op = op
        self.in_bits, self.out_bits = in_bits, out_bits
        self.scale32 = bool(attrs["scale32"])
        self.rounding_mode = attrs["rounding_mode"]
        self.per_channel = bool(attrs["per_channel"])
        self.input_unsigned = bool(attrs.get("input_unsigned", False))
        self.output_unsigned = bool(attrs.get("output_unsigned", False))
        self.in_zp, self.out_zp = in_zp, out_zp
        self.raw_multiplier, self.raw_shift = multiplier, shift
        self.zp_in = _extend(in_zp, in_bits, self.input_unsigned)
        self.zp_out = _extend(out_zp, out_bits, self.output_unsigned)
        self.extend_mask = (1 << in_bits) - 1 if self.input_unsigned else 0
        self.out_range = (numerics.int_min(out_bits, self.output_unsigned),
                          numerics.int_max(out_bits, self.output_unsigned))
        double = self.scale32 and self.rounding_mode == "DOUBLE_ROUND"
        limits = [1 << (s - 1) for s in shift]
        # Per-tensor parameters as Python ints, per-channel ones as [C] int64 arrays that
        # broadcast along the last dimension.
        as_param = ((lambda values: np.array(values, np.int64)) if self.per_channel
                    else (lambda values: values[0]))
        self.multiplier, self.shift = as_param(multiplier), as_param(shift)
        self.limit = self.rounding = as_param(limits)
        self.round_by_sign = None
        if double and any(s > 31 for s in shift):
            adjust = [(1 << 30) if s > 31 else 0 for s in shift]
            self.round_by_sign = (as_param([r + a for r, a in zip(limits, adjust)]),
                                  as_param([r - a for r, a in zip(limits, adjust)]))
        # The value's range from the input type.
        if self.input_unsigned:
            low, high = 0, (1 << in_bits) - 1
        else:
            low, high = numerics.int_min(in_bits), numerics.int_max(in_bits)
        low, high = low - self.zp_in, high - self.zp_in
        self.value_proved = not self.scale32 or (-min(limits) <= low and high < min(limits))
        self.result_proved = self.value_proved and _results_fit_int32(
            low, high, multiplier, shift, limits, double, self.zp_out)

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
        if in_bits > 32 or numpy_dtype(in_element).itemsize * 8 != in_bits \
                or numpy_dtype(out_element).itemsize * 8 != out_bits:
            return None
        attrs = op.attrs
        in_zp = int(constants[2].reshape(-1)[0])
        out_zp = int(constants[3].reshape(-1)[0])
        per_channel = bool(attrs["per_channel"])
        numerics.check_rescale_attributes(
            in_bits, out_bits, in_zp, out_zp, bool(attrs["scale32"]), attrs["rounding_mode"],
            per_channel, bool(attrs.get("input_unsigned", False)),
            bool(attrs.get("output_unsigned", False)), len(shape))
        channels = shape[-1] if per_channel else 1
        multiplier = [int(m) for m in constants[0].reshape(-1).tolist()]
        shift = [int(s) for s in constants[1].reshape(-1).tolist()]
        if len(multiplier) != channels or len(shift) != channels or channels == 0:
            return None
        largest = numerics.int_max(32 if attrs["scale32"] else 16)
        if not (all(0 <= m <= largest for m in multiplier) and all(2 <= s <= 62 for s in shift)):
            return None  # a REQUIRE fails on every run: the kernel reports it
        return cls(op, in_bits, out_bits, multiplier, shift, in_zp, out_zp)

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
            x, np.array(self.raw_multiplier), np.array(self.raw_shift), self.in_zp, self.out_zp,
            in_bits=self.in_bits, out_bits=self.out_bits, scale32=self.scale32,
            rounding_mode=self.rounding_mode, per_channel=self.per_channel,
            input_unsigned=self.input_unsigned, output_unsigned=self.output_unsigned)
        return np.reshape(result, np.shape(x)).astype(
            numpy_dtype(self.op.output_types[0].element))


def _extend(value: int, bits: int, unsigned: bool) -> int:
    """The specification's zero_extend / sign_extend of a `bits`-wide value, as an int."""
    value &= (1 << bits) - 1
    return value if unsigned or value < 1 << (bits - 1) else value - (1 << bits)


def _results_fit_int32(low: int, high: int, multiplier: list[int], shift: list[int],
                       limits: list[int], double_round: bool, output_zp: int) -> bool:
    """Do apply_scale_32 / apply_scale_16 of the values low and high (the ends of the
    range; the scaling is nondecreasing) fit int32, also after adding output_zp, in
    every channel? One channel in Python integers; many in int64 arrays, where
    |value| <= 2^32, multiplier < 2^31 and rounding <= 2^61 + 2^30 cannot overflow."""
    int32_min, int32_max = numerics.int_min(32), numerics.int_max(32)
    if len(multiplier) == 1:
        ends = [_scaled(value, multiplier[0], shift[0], limits[0], double_round)
                for value in (low, high)]
        return all(int32_min <= min(end, end + output_zp)
                   and max(end, end + output_zp) <= int32_max for end in ends)
    m, s, r = (np.array(values, np.int64) for values in (multiplier, shift, limits))
    for value in (low, high):
        rounding = r
        if double_round:
            adjust = (1 << 30) if value >= 0 else -(1 << 30)
            rounding = r + np.where(s > 31, np.int64(adjust), np.int64(0))
        end = (np.int64(value) * m + rounding) >> s
        if int(end.min()) < int32_min - min(output_zp, 0) \
                or int(end.max()) > int32_max - max(output_zp, 0):
            return False
    return True


def _scaled(value: int, multiplier: int, shift: int, limit: int, double_round: bool) -> int:
    """apply_scale_32 / apply_scale_16's result for one value (exact Python integers)."""
    rounding = limit
    if double_round and shift > 31:
        rounding += (1 << 30) if value >= 0 else -(1 << 30)
    return (value * multiplier + rounding) >> shift
