"""Type conversion operators (TOSA 1.0 chapter "Type Conversion"): CAST, RESCALE."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from reference_model import numerics
from reference_model.kernels import (KernelContext, KernelNeeded, Prepared, StaticOp, kernel,
                                     prepared)
from tfl2tosa.ir.types import ScalarType, TensorType, numpy_dtype, storage_type
from tfl2tosa.memo import BoundedMemo


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
def prepare_cast(op: StaticOp) -> Prepared | None:
    """CAST between integer types whose numpy dtype is exactly as wide as the type
    (i8, i16, i32, and i48 sources): numpy's conversion keeps the low bits of the
    two's complement value and sign-extends when widening, which is the kernel's
    numerics.wrap. fp32 to and from i8 / i16 / i32: `_prepare_fp32_cast`."""
    source, target = op.element(0), op.element(0, output=True)
    if source is None or target is None:
        return None
    if source.name == "f32" or target.name == "f32":
        return _prepare_fp32_cast(op, source, target)
    if not source.is_integer or not target.is_integer or _bits_held(target) != target.bits \
            or (_bits_held(source) != source.bits and source.bits != 48):
        return None
    out_dtype = numpy_dtype(target)

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [operands[0].astype(out_dtype)]
    return run


_FLOAT32 = np.dtype(np.float32)


def _prepare_fp32_cast(op: StaticOp, source: ScalarType, target: ScalarType) -> Prepared | None:
    """i8 / i16 / i32 to fp32: numpy's conversion rounds to nearest (ties to even) once,
    as the kernel's exact int64 -> float64 step and its one rounding to float32 do.
    fp32 to i8 / i16 / i32: numerics.float_to_int_cast's float64 rint and clip in
    place, by ufuncs; a NaN (which the clip keeps) goes to the kernel."""
    integer = target if source.name == "f32" else source
    shape = op.static_shape(0)
    if numpy_dtype(integer).kind != "i" or _bits_held(integer) != integer.bits \
            or shape is None or 0 in shape or op.static_shape(0, output=True) != shape:
        return None
    if target.name == "f32":
        def run_to_float(operands: list[np.ndarray]) -> list[np.ndarray]:
            return [operands[0].astype(_FLOAT32)]
        return run_to_float
    out_dtype = numpy_dtype(target)
    low, high = float(numerics.int_min(target.bits)), float(numerics.int_max(target.bits))

    def run_to_integer(operands: list[np.ndarray]) -> list[np.ndarray]:
        wide = operands[0].astype(np.float64)
        np.rint(wide, out=wide)
        np.maximum(wide, low, out=wide)
        np.minimum(wide, high, out=wide)
        if np.isnan(_LARGEST(wide.reshape(-1))):
            raise KernelNeeded  # its value for NaN
        return [wide.astype(out_dtype)]
    return run_to_integer


_LARGEST = np.maximum.reduce


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
    types already guarantee proved here instead of checked per run (`_fast_rescale`).
    It covers the RESCALEs a converter emits; the rest (unsigned or rank-0 inputs,
    DOUBLE_ROUND with shifts on both sides of 31) run the registered kernel.
    """
    return _fast_rescale(op)


# x & _SIGN_ADJUST in int64 is -2^31 for a negative int8/16/32 x and 0 otherwise:
# DOUBLE_ROUND's -2^30 (instead of +2^30) for a negative value, as one addition.
_SIGN_ADJUST = np.int64(-(1 << 31))
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_LIMIT = 1 << 63
# The unsigned view of a per-channel multiplier of the specified type (i32 for scale32,
# i16 otherwise), by (scale32, dtype); other dtypes take the general form.
_UNSIGNED_MULTIPLIER = {(True, np.dtype(np.int32)): np.uint32,
                        (False, np.dtype(np.int16)): np.uint16}
# The ufuncs' reductions themselves: the array methods add a Python wrapper.
_largest, _smallest = np.maximum.reduce, np.minimum.reduce


def _fast_rescale(op: StaticOp) -> Prepared | None:
    """The common RESCALE in the fewest passes over the data, or None when it does not
    apply (the general form then runs it).

    For a signed input of rank >= 1, and inputs x in a range [x_low, x_high]
    where every REQUIRE holds, RESCALE is
        ((x * m + rounding) >> shift), clipped to the output range,
    with rounding = 2^(shift-1) + (2^30 for DOUBLE_ROUND with shift > 31)
    - input_zp * m + output_zp * 2^shift: subtracting input_zp and adding
    output_zp after the shift are folded into it (adding a multiple of 2^shift
    commutes with the floor division), and DOUBLE_ROUND's -2^30 for a negative
    value is added as x & -2^31 (needs input_zp 0, so the value's sign is x's).
    int64 arithmetic wraps modulo 2^64, so the sum comes out exact whenever the
    exact sum fits int64, which is proved here for every admitted x. When the
    input type's range is not all admitted, a run checks min/max of x, and
    outside [x_low, x_high] runs the registered kernel (numerics.rescale, which
    raises the REQUIRE that fails, or gives the result).
    """
    facts = _rescale_type_facts(op.input_types[0], op.output_types[0])
    constants = op.constants
    if facts is None or len(constants) != 5:
        return None
    in_bits, out_bits, shape, out_dtype = facts
    multiplier, shift, in_zp, out_zp = constants[1], constants[2], constants[3], constants[4]
    if multiplier is None or shift is None or in_zp is None or out_zp is None \
            or in_zp.size != 1 or out_zp.size != 1 \
            or any(c.dtype.kind not in "iu" for c in (multiplier, shift, in_zp, out_zp)):
        return None
    attrs = op.attrs
    mode = _rescale_mode(in_bits, out_bits, in_zp.item(), out_zp.item(),
                         bool(attrs["scale32"]), attrs["rounding_mode"],
                         bool(attrs["per_channel"]), bool(attrs.get("input_unsigned", False)),
                         bool(attrs.get("output_unsigned", False)), len(shape))
    if mode is None:
        return None
    scale32, double, per_channel, zp_in, zp_out, largest, low, high = mode
    if per_channel:
        channels = shape[-1]
        if multiplier.size != channels or shift.size != channels or not channels:
            return None
        # The multipliers' bit patterns read as unsigned: one maximum gives the largest
        # and tells a negative one (above `largest` then) at once.
        unsigned = _UNSIGNED_MULTIPLIER.get((scale32, multiplier.dtype))
        if unsigned is None:
            return None
        multiplier, shift = multiplier.reshape(-1), shift.reshape(-1)
        if channels <= _FEW_CHANNELS:  # Python's min/max on a list cost less here
            shifts = shift.tolist()
            m_high, s_low, s_high = max(multiplier.view(unsigned).tolist()), min(shifts), \
                max(shifts)
        else:
            m_high, s_low, s_high = int(_largest(multiplier.view(unsigned))), \
                int(_smallest(shift)), int(_largest(shift))
        if m_high > largest or s_low < 2 or s_high > 62:
            return None  # a REQUIRE fails on every run: the kernel reports it
    else:
        if multiplier.size != 1 or shift.size != 1:
            return None
        m_high = multiplier = multiplier.item()
        s_low = s_high = shift = shift.item()
        if m_high < 0 or m_high > largest or s_low < 2 or s_high > 62:
            return None  # a REQUIRE fails on every run: the kernel reports it
    adjust = double and s_high > 31
    if adjust and (s_low <= 31 or zp_in):
        return None
    # The admitted x range: the input type's, narrowed by apply_scale_32's value
    # REQUIRE (value in [-2^(shift-1), 2^(shift-1)) in every channel: the smallest
    # shift decides), and by the int32 REQUIREs on the result and on the result
    # plus output_zp (apply_scale_16, apply_add_s). Every channel's numerator
    # value * m + round lies in [value * m_high, value * m_high + round_max] for
    # the signs taken here (round >= 0), and its divisor is at least 2^s_low.
    type_high = (1 << (in_bits - 1)) - 1
    x_low, x_high = -type_high - 1, type_high
    round_max = (1 << (s_high - 1)) + (1 << 30 if adjust else 0)
    if scale32:
        limit = 1 << (s_low - 1)
        if zp_in - limit > x_low:
            x_low = zp_in - limit
        if zp_in + limit - 1 < x_high:
            x_high = zp_in + limit - 1
    if m_high:
        bound = zp_in + ((((_INT32_MAX + 1 - (zp_out if zp_out > 0 else 0)) << s_low)
                          - round_max - 1) // m_high)
        if bound < x_high:
            x_high = bound
        bound = zp_in - (((-_INT32_MIN + (zp_out if zp_out < 0 else 0)) << s_low) // m_high)
        if bound > x_low:
            x_low = bound
    if x_low > x_high:
        return None
    # i48 is held in int64: a run checks its range (inside it sign_extend is x).
    checked = in_bits == 48 or x_low > -type_high - 1 or x_high < type_high
    value_low, value_high = x_low - zp_in, x_high - zp_in
    folded = round_max + (abs(zp_out) << s_high) + abs(zp_in) * m_high
    if (value_high if value_high > -value_low else -value_low) * m_high + folded \
            >= _INT64_LIMIT:
        return None
    clip = (((value_low if value_low < 0 else 0) * m_high) >> s_low) + zp_out < low \
        or (((value_high if value_high > 0 else 0) * m_high + round_max) >> s_low) \
        + zp_out > high
    extra = (1 << 30) if adjust else 0
    if per_channel and s_low == s_high and not zp_in:
        # One shift in every channel: the rounding and the shift are one number each
        # (a shift by a scalar costs less per element than by a broadcast array).
        shift = s_low
        rounding = ((1 + 2 * zp_out) << (shift - 1)) + extra
        multiplier = multiplier.astype(np.int64)
    elif per_channel:
        rounding = _roundings(zp_out, extra)[shift]
        if zp_in:
            rounding -= zp_in * multiplier.astype(np.int64)
        # int64 parameters: the run's ufuncs then need no casting loops
        multiplier, shift = multiplier.astype(np.int64), shift.astype(np.int64)
    else:
        rounding = ((1 + 2 * zp_out) << (shift - 1)) - zp_in * multiplier + extra
    return _fast_rescale_kernel(out_dtype, multiplier, rounding, shift, adjust, clip,
                                low, high, (x_low, x_high) if checked else None,
                                in_bits != 48 and math.prod(shape) >= _WIDE_FIRST)


# From this many elements on, the fast RESCALE widens its input to int64 first and
# works in int64 alone: ufuncs that cast as they go (int32 * int64 -> int64) take
# longer per element than a widening pass and an int64 one; below it, one call less
# wins.
# An i48 input is int64 already: its product is the first pass.
_WIDE_FIRST = 256


def _fast_rescale_kernel(out_dtype: np.dtype, multiplier: Any, rounding: Any, shift: Any,
                         adjust: bool, clip: bool, low: int, high: int,
                         admitted: tuple[int, int] | None, wide_first: bool) -> Prepared:
    """The closure of _fast_rescale (see there for the arithmetic)."""
    x_low, x_high = admitted if admitted is not None else (0, 0)

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        x = operands[0]
        if admitted is not None and x.size and (x.min() < x_low or x.max() > x_high):
            raise KernelNeeded
        if wide_first:
            value = x.astype(np.int64)
            if adjust:
                sign = value & _SIGN_ADJUST
                value *= multiplier
                value += sign
            else:
                value *= multiplier
        else:
            value = np.multiply(x, multiplier, dtype=np.int64)
            if adjust:
                value += np.bitwise_and(x, _SIGN_ADJUST)
        value += rounding
        value >>= shift
        if clip:
            # np.clip's Python wrapper costs more than its two ufuncs.
            np.maximum(value, low, out=value)
            np.minimum(value, high, out=value)
        return [value.astype(out_dtype)]

    return run


@functools.lru_cache(maxsize=64)
def _roundings(zp_out: int, extra: int) -> np.ndarray:
    """The fast form's rounding by shift (an int64 array indexed by shift, 0 to 63):
    output_zp * 2^shift + 2^(shift-1) + extra; 0 where that does not fit int64 (the
    fast form uses no such shift)."""
    values = [((1 + 2 * zp_out) << (shift - 1)) + extra if shift else 0
              for shift in range(64)]
    return np.array([v if -_INT64_LIMIT <= v < _INT64_LIMIT else 0 for v in values],
                    dtype=np.int64)


@functools.lru_cache(maxsize=256)
def _rescale_mode(in_bits: int, out_bits: int, in_zp: int, out_zp: int, scale32: bool,
                  rounding_mode: str, per_channel: bool, input_unsigned: bool,
                  output_unsigned: bool, rank: int) -> tuple | None:
    """The fast form's facts from RESCALE's attributes and zero points, once per distinct
    set (a model repeats a few): numerics.check_rescale_attributes (raises its ERROR_IF;
    exceptions are not cached), then None for what the fast form leaves to the general
    one (unsigned input, rank 0), else (scale32, DOUBLE_ROUND, per_channel, extended
    input_zp and output_zp, largest multiplier, output range)."""
    numerics.check_rescale_attributes(in_bits, out_bits, in_zp, out_zp, scale32,
                                      rounding_mode, per_channel, input_unsigned,
                                      output_unsigned, rank)
    if input_unsigned or rank == 0:
        return None
    return (scale32, scale32 and rounding_mode == "DOUBLE_ROUND", per_channel,
            _extend(in_zp, in_bits, False), _extend(out_zp, out_bits, output_unsigned),
            (1 << 31) - 1 if scale32 else (1 << 15) - 1,
            numerics.int_min(out_bits, output_unsigned),
            numerics.int_max(out_bits, output_unsigned))


# RESCALE's operand type facts by the two types' identities (the reader shares type
# objects): (in_bits, out_bits, static input shape, output numpy dtype), or None for
# types the prepared kernels leave to the kernel. Each entry holds its types, so
# their ids stay theirs while it exists.
_RESCALE_TYPES: BoundedMemo = BoundedMemo(1 << 12)


def _rescale_type_facts(in_type: Any, out_type: Any) -> tuple | None:
    known = _RESCALE_TYPES.get((id(in_type), id(out_type)))
    if known is not None:
        return known[2]
    facts = None
    if isinstance(in_type, TensorType) and isinstance(out_type, TensorType) \
            and in_type.is_static:
        in_element, out_element = storage_type(in_type.element), \
            storage_type(out_type.element)
        in_bits, out_bits = in_element.bits, out_element.bits
        # i48 (held in int64) is sign-extended from bit 47 per run; i4 is left to the kernel.
        if in_element.is_integer and out_element.is_integer \
                and (in_bits == 48 or _bits_held(in_element) == in_bits) \
                and _bits_held(out_element) == out_bits:
            facts = (in_bits, out_bits, tuple(in_type.shape), numpy_dtype(out_element))
    _RESCALE_TYPES.keep((id(in_type), id(out_type)), (in_type, out_type, facts))
    return facts


# Up to this many channels, RESCALE's set-up finds the parameter bounds with Python's
# min/max on lists (a numpy reduction's fixed cost outweighs a short list's
# per-element cost); past it, with numpy.
_FEW_CHANNELS = 32


def _extend(value: int, bits: int, unsigned: bool) -> int:
    """The specification's zero_extend / sign_extend of a `bits`-wide value, as an int."""
    value &= (1 << bits) - 1
    return value if unsigned or value < 1 << (bits - 1) else value - (1 << bits)


@functools.lru_cache(maxsize=64)
def _bits_held(element: ScalarType) -> int:
    """The bits of the numpy dtype holding `element` (i4 lives in 8, i48 in 64)."""
    return numpy_dtype(element).itemsize * 8
