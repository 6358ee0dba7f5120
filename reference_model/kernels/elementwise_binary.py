"""Elementwise binary operators (TOSA 1.0 chapter "Elementwise Binary Operators").

Operands broadcast by the specification's rule (equal ranks, size-1 dims
stretch). Integer arithmetic goes through `reference_model.numerics` (exact
int64 arithmetic, then REQUIRE or truncation as the pseudocode says). Float
arithmetic rounds once to the operand format.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from reference_model import numerics
from reference_model.kernels import (
    KernelContext,
    KernelNeeded,
    Prepared,
    StaticOp,
    broadcast_shape,
    float64_compute,
    float_compute,
    is_float_dtype,
    kernel,
    prepared,
)
from tfl2tosa.ir.types import numpy_dtype
from tfl2tosa.memo import BoundedMemo
from tfl2tosa.tosa import rules


def _operands(ctx: KernelContext) -> tuple[np.ndarray, np.ndarray]:
    a, b = ctx.inputs[0], ctx.inputs[1]
    broadcast_shape(ctx, a.shape, b.shape)
    return a, b


def _bits(dtype: np.dtype) -> int:
    return dtype.itemsize * 8


def _arithmetic(ctx: KernelContext, float_fn: Callable, int_fn: Callable) -> list:
    a, b = _operands(ctx)
    if is_float_dtype(a.dtype):
        return [float_compute(float_fn, a.dtype, a, b)]
    return [int_fn(a, b, _bits(a.dtype)).astype(a.dtype)]


@kernel("ADD")
def add(ctx: KernelContext) -> list[np.ndarray]:
    # apply_add_s: integer overflow is a REQUIRE failure, not a wrap.
    return _arithmetic(ctx, np.add, numerics.apply_add_s)


@kernel("SUB")
def sub(ctx: KernelContext) -> list[np.ndarray]:
    return _arithmetic(ctx, np.subtract, numerics.apply_sub_s)


@kernel("MUL")
def mul(ctx: KernelContext) -> list[np.ndarray]:
    a, b = _operands(ctx)
    if len(ctx.inputs) > 2:
        ctx.error_if(np.size(ctx.inputs[2]) != 1, "shift must hold one value")
    shift = int(np.asarray(ctx.inputs[2]).reshape(-1)[0]) if len(ctx.inputs) > 2 else 0
    ctx.require(0 <= shift <= 63, f"0 <= shift <= 63 (shift is {shift})")
    if is_float_dtype(a.dtype):
        ctx.require(shift == 0, f"shift == 0 for a float MUL (shift is {shift})")
        return [float_compute(np.multiply, a.dtype, a, b)]
    ctx.require(a.dtype == np.int32 or shift == 0,
                f"shift == 0 for {a.dtype} inputs (shift is {shift})")
    # i8 x i8 and i16 x i16 products fit i32; for i32 this is the low 32 bits
    # (shift 0) or the rounded, range-checked shifted product.
    return [numerics.mul_with_shift(a, b, shift).astype(np.int32)]


@kernel("INTDIV")
def intdiv(ctx: KernelContext) -> list[np.ndarray]:
    a, b = _operands(ctx)
    return [numerics.intdiv(a, b, _bits(a.dtype)).astype(a.dtype)]


@kernel("ARITHMETIC_RIGHT_SHIFT")
def arithmetic_right_shift(ctx: KernelContext) -> list[np.ndarray]:
    a, b = _operands(ctx)
    rounded = numerics.arithmetic_right_shift(a, b, bool(ctx.attrs.get("round", False)),
                                              _bits(a.dtype))
    return [rounded.astype(a.dtype)]


@kernel("LOGICAL_LEFT_SHIFT")
def logical_left_shift(ctx: KernelContext) -> list[np.ndarray]:
    a, b = _operands(ctx)
    return [numerics.logical_left_shift(a, b, _bits(a.dtype)).astype(a.dtype)]


@kernel("LOGICAL_RIGHT_SHIFT")
def logical_right_shift(ctx: KernelContext) -> list[np.ndarray]:
    a, b = _operands(ctx)
    return [numerics.logical_right_shift(a, b, _bits(a.dtype)).astype(a.dtype)]


def _bitwise(ctx: KernelContext, fn: Callable) -> list[np.ndarray]:
    a, b = _operands(ctx)
    return [fn(a, b).astype(a.dtype)]


@kernel("BITWISE_AND")
def bitwise_and(ctx: KernelContext) -> list[np.ndarray]:
    return _bitwise(ctx, np.bitwise_and)


@kernel("BITWISE_OR")
def bitwise_or(ctx: KernelContext) -> list[np.ndarray]:
    return _bitwise(ctx, np.bitwise_or)


@kernel("BITWISE_XOR")
def bitwise_xor(ctx: KernelContext) -> list[np.ndarray]:
    return _bitwise(ctx, np.bitwise_xor)


@kernel("LOGICAL_AND")
def logical_and(ctx: KernelContext) -> list[np.ndarray]:
    return _bitwise(ctx, np.logical_and)


@kernel("LOGICAL_OR")
def logical_or(ctx: KernelContext) -> list[np.ndarray]:
    return _bitwise(ctx, np.logical_or)


@kernel("LOGICAL_XOR")
def logical_xor(ctx: KernelContext) -> list[np.ndarray]:
    return _bitwise(ctx, np.logical_xor)


def float_max(a: np.ndarray, b: np.ndarray, nan_mode: str) -> np.ndarray:
    """apply_max_s for floats: `a >= b ? a : b`, NaN by nan_mode (PROPAGATE | IGNORE)."""
    with np.errstate(invalid="ignore"):  # NaN operands are handled by _nan_select
        return _nan_select(a, b, np.where(a >= b, a, b), nan_mode)


def float_min(a: np.ndarray, b: np.ndarray, nan_mode: str) -> np.ndarray:
    """apply_min_s for floats: `a < b ? a : b`, NaN by nan_mode."""
    with np.errstate(invalid="ignore"):
        return _nan_select(a, b, np.where(a < b, a, b), nan_mode)


def _nan_select(a: np.ndarray, b: np.ndarray, ordered: np.ndarray, nan_mode: str) -> np.ndarray:
    a_nan, b_nan = np.isnan(a), np.isnan(b)
    if nan_mode == "IGNORE":
        # compare_nan: the operand that is not NaN (NaN if both are).
        fallback = np.where(a_nan, b, a)
    else:
        fallback = np.full_like(ordered, np.nan)
    return np.where(a_nan | b_nan, fallback, ordered).astype(ordered.dtype)


def _min_max(ctx: KernelContext, float_fn: Callable, int_fn: Callable) -> list[np.ndarray]:
    a, b = _operands(ctx)
    if is_float_dtype(a.dtype):
        nan_mode = ctx.attrs.get("nan_mode", "PROPAGATE")
        return [float_fn(a, b, nan_mode).astype(a.dtype)]
    return [int_fn(a, b)]


@kernel("MAXIMUM")
def maximum(ctx: KernelContext) -> list[np.ndarray]:
    return _min_max(ctx, float_max, np.maximum)


@kernel("MINIMUM")
def minimum(ctx: KernelContext) -> list[np.ndarray]:
    return _min_max(ctx, float_min, np.minimum)


@kernel("POW")
def pow_(ctx: KernelContext) -> list[np.ndarray]:
    # The specification bounds POW's error against an fp64 reference.
    a, b = _operands(ctx)
    return [float64_compute(np.power, a.dtype, a, b)]


@kernel("TABLE")
def table(ctx: KernelContext) -> list[np.ndarray]:
    values, lookup = ctx.inputs[0], np.asarray(ctx.inputs[1])
    ctx.expect_output_shape(values.shape)
    ctx.check(rules.table_problems(ctx.element(0).name, lookup.shape))
    if values.dtype == np.int8:
        return [numerics.table_i8(values, lookup).astype(np.int8)]
    # apply_lookup_s: a 16.7 fixed-point result in i32.
    return [numerics.table_i16(values, lookup).astype(np.int32)]


# ---------------------------------------------------------------------------
# Prepared forms: static shapes and constant operands checked once


def static_broadcast(op: StaticOp, operands: int = 2) -> bool:
    """True if the first `operands` operands and the result have static shapes that
    the specification's broadcast_shape accepts and that give the declared result
    shape."""
    # Types hash by identity and a graph repeats few signatures: decided once for each
    # (the key holds the types, so their identities stay theirs).
    key = (operands, *op.output_types[:1], *op.input_types[:operands])
    known = _BROADCASTS.get(key)
    if known is None:
        known = _BROADCASTS.keep(key, _static_broadcast(op, operands))
    return known


_BROADCASTS: BoundedMemo = BoundedMemo(1 << 12)


def _static_broadcast(op: StaticOp, operands: int) -> bool:
    out = op.static_shape(0, output=True)
    if out is None:
        return False
    static_shape = op.static_shape
    shapes = [static_shape(i) for i in range(operands)]
    if all(shape == out for shape in shapes):
        return True
    if any(shape is None or len(shape) != len(out) for shape in shapes):
        return False
    for dims, out_dim in zip(zip(*shapes), out):
        # Each dim is the result's or 1, and one of them is the result's.
        if any(dim != out_dim and dim != 1 for dim in dims) or max(dims) != out_dim:
            return False
    return True


_FLOAT32 = np.dtype(np.float32)
_INT32 = np.dtype(np.int32)
_INT32_RANGE = (numerics.int_min(32), numerics.int_max(32))
# ufunc reductions over a flat view: cheaper than ndarray.min / max on small arrays.
_SMALLEST, _LARGEST = np.minimum.reduce, np.maximum.reduce


def outside_range(values: np.ndarray, low: int, high: int) -> bool:
    """True if some element of an integer array is below `low` or above `high`."""
    flat = values.reshape(-1)
    return flat.size > 0 and (_SMALLEST(flat) < low or _LARGEST(flat) > high)


@prepared("ADD", "SUB")
def prepare_add_sub(op: StaticOp) -> Prepared | None:
    """fp32: numpy's own (correctly rounded) float32 arithmetic, which is what
    float_compute computes for fp32. int32: the sum modulo 2^32, and a test for
    overflow (apply_add_s / apply_sub_s REQUIRE the exact result to fit)."""
    if not static_broadcast(op):
        return None
    dtype = numpy_dtype(op.input_types[0].element)
    if dtype == _FLOAT32:
        fn = np.add if op.op_name == "ADD" else np.subtract

        def run_float(operands: list[np.ndarray]) -> list[np.ndarray]:
            return [fn(operands[0], operands[1])]
        return run_float
    if dtype != _INT32 or 0 in op.static_shape(0, output=True):
        return None
    if op.op_name == "ADD":
        def run_add(operands: list[np.ndarray]) -> list[np.ndarray]:
            # Two's complement: a + b overflowed iff a and b have one sign and the
            # wrapped sum the other, i.e. iff (a ^ r) & (b ^ r) is negative.
            a, b = operands
            result = np.add(a, b)
            overflow = a ^ result
            overflow &= b ^ result
            if _SMALLEST(overflow.reshape(-1)) < 0:
                raise KernelNeeded  # reports apply_add_s's REQUIRE
            return [result]
        return run_add

    def run_sub(operands: list[np.ndarray]) -> list[np.ndarray]:
        # a - b overflowed iff a and b have different signs and the wrapped
        # difference has b's, i.e. iff (a ^ b) & (a ^ r) is negative.
        a, b = operands
        result = np.subtract(a, b)
        overflow = a ^ b
        overflow &= a ^ result
        if _SMALLEST(overflow.reshape(-1)) < 0:
            raise KernelNeeded  # reports apply_sub_s's REQUIRE
        return [result]
    return run_sub


@prepared("MUL")
def prepare_mul(op: StaticOp) -> Prepared | None:
    """Constant shift. fp32 as ADD; i8/i16 products are exact in int32; i32 with shift 0
    keeps the product's low 32 bits, which int32 multiplication (modulo 2^32) gives;
    with a shift, the rounded shifted int64 product, REQUIRE checked by min/max."""
    if not static_broadcast(op) or len(op.constants) < 3 or op.constants[2] is None \
            or op.constants[2].size != 1:
        return None  # no constant shift, or an invalid one the kernel reports
    shift = int(op.constants[2].reshape(-1)[0])
    dtype = numpy_dtype(op.input_types[0].element)
    if not 0 <= shift <= 63 or (shift and dtype != _INT32):
        return None  # a REQUIRE fails: the kernel reports it
    if dtype == _FLOAT32:
        def run_float(operands: list[np.ndarray]) -> list[np.ndarray]:
            return [np.multiply(operands[0], operands[1])]
        return run_float
    if dtype == np.int8 or dtype == np.int16:
        def run_narrow(operands: list[np.ndarray]) -> list[np.ndarray]:
            return [np.multiply(operands[0], operands[1], dtype=np.int32)]
        return run_narrow
    if dtype != _INT32:
        return None
    if shift == 0:
        def run_wrapping(operands: list[np.ndarray]) -> list[np.ndarray]:
            return [np.multiply(operands[0], operands[1])]
        return run_wrapping
    if shift == 63:
        return None  # product + 2^62 may leave int64: the kernel's uint64 path
    rounding = 1 << (shift - 1)
    low, high = _INT32_RANGE

    def run_shifted(operands: list[np.ndarray]) -> list[np.ndarray]:
        # |a * b| <= 2^62 and rounding <= 2^61: the sum stays inside int64.
        product = np.multiply(operands[0], operands[1], dtype=np.int64)
        product += rounding
        product >>= shift
        if outside_range(product, low, high):
            raise KernelNeeded  # reports the result REQUIRE
        return [product.astype(np.int32)]
    return run_shifted


@prepared("MAXIMUM", "MINIMUM")
def prepare_min_max(op: StaticOp) -> Prepared | None:
    """Integers: numpy's own, as the kernel. fp32: the kernel's `a >= b ? a : b`
    (`a < b ? a : b`) by np.where, which also keeps its choice between signed zeros;
    operands with a NaN go to the kernel's float_max / float_min for its NaN."""
    element = op.element(0)
    if element is None or not static_broadcast(op):
        return None
    maximum = op.op_name == "MAXIMUM"
    if element.is_integer:
        fn = np.maximum if maximum else np.minimum

        def run(operands: list[np.ndarray]) -> list[np.ndarray]:
            return [fn(operands[0], operands[1])]
        return run
    nan_mode = op.attrs.get("nan_mode", "PROPAGATE")
    if element.name != "f32" or nan_mode not in ("PROPAGATE", "IGNORE") \
            or not op.static_shape(0, output=True):
        return None
    compare, with_nan = (np.greater_equal, float_max) if maximum else (np.less, float_min)

    def run_fp32(operands: list[np.ndarray]) -> list[np.ndarray]:
        a, b = operands
        if not (np.isnan(a).any() or np.isnan(b).any()):
            return [np.where(compare(a, b), a, b)]
        return [with_nan(a, b, nan_mode).astype(_FLOAT32)]
    return run_fp32


@prepared("INTDIV")
def prepare_intdiv(op: StaticOp) -> Prepared | None:
    """int32 of rank 1 or more (a ufunc gives a rank-0 result as a scalar):
    numerics.intdiv's truncating quotient, in int64.
    A zero divisor or INT32_MIN / -1 (the only quotient that leaves int32) goes to the
    kernel for its REQUIRE."""
    element = op.element(0)
    if element is None or element.name != "i32" or not static_broadcast(op):
        return None
    out = op.static_shape(0, output=True)
    if not out or 0 in out:
        return None
    high = _INT32_RANGE[1]

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        a = operands[0].astype(np.int64)
        b = operands[1].astype(np.int64)
        if not b.all():
            raise KernelNeeded  # reports the divisor REQUIRE
        quotient = numerics.truncating_quotient(a, b)
        if _LARGEST(quotient.reshape(-1)) > high:
            raise KernelNeeded  # reports the quotient REQUIRE
        return [quotient.astype(_INT32)]
    return run


@prepared("ARITHMETIC_RIGHT_SHIFT")
def prepare_arithmetic_right_shift(op: StaticOp) -> Prepared | None:
    """Constant shift amounts in [0, bits - 1] (the REQUIRE, checked once); then
    numerics.arithmetic_right_shift's arithmetic with its rounding terms precomputed."""
    shift = op.constants[1] if len(op.constants) > 1 else None
    element = op.element(0)
    if element is None or not element.is_integer or not static_broadcast(op) \
            or op.element(1) != element or not op.static_shape(0, output=True):
        return None
    dtype = numpy_dtype(element)
    rounding = bool(op.attrs.get("round", False))
    if shift is None:
        return _run_time_right_shift(op, element.bits, rounding)
    amounts = shift.reshape(-1)
    if amounts.size <= 64 and op.static_shape(0) == op.static_shape(0, output=True):
        listed = amounts.tolist()
        if listed and min(listed) == max(listed):
            return _uniform_right_shift(listed[0], dtype, element.bits, rounding)
    n = numerics.as_int64(shift)
    if n.size and (n.min() < 0 or n.max() > element.bits - 1):
        return None  # the REQUIRE fails on every run: the kernel reports it
    # The first bit shifted out is (x >> (n - 1)) & 1, added where n > 0.
    first_out_shift = np.maximum(n - 1, 0)
    rounds = n > 0

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        x = operands[0].astype(np.int64)
        result = x >> n
        if rounding:
            result = result + np.where(rounds, (x >> first_out_shift) & 1, 0)
        return [result.astype(dtype)]
    return run


def _run_time_right_shift(op: StaticOp, bits: int, rounding: bool) -> Prepared:
    """Shift amounts known only when the op runs: their REQUIRE, [0, bits - 1], by
    min/max; then the arithmetic in x's dtype. The first bit shifted out is
    (x >> max(n - 1, 0)) & 1 where n > 0, and (n > 0) is that mask itself."""
    largest = bits - 1

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        x, n = operands
        if outside_range(n, 0, largest):
            raise KernelNeeded  # reports the shift REQUIRE
        result = x >> n
        if rounding:
            bit = x >> np.maximum(n - 1, 0)
            bit &= n > 0
            result += bit
        return [result]
    return run


def _uniform_right_shift(amount: int, dtype: np.dtype, bits: int, rounding: bool
                         ) -> Prepared | None:
    """One shift amount for every element (the result has x's shape), in x's own dtype:
    x >> n, plus the first bit shifted out, (x >> (n - 1)) & 1, with rounding. The sum
    fits: for n >= 1, |x >> n| <= 2^(bits-2)."""
    if not 0 <= amount <= bits - 1:
        return None  # the REQUIRE fails on every run: the kernel reports it
    if not rounding or amount == 0:
        def run_plain(operands: list[np.ndarray]) -> list[np.ndarray]:
            return [operands[0] >> amount]
        return run_plain
    first_out = amount - 1

    def run_rounded(operands: list[np.ndarray]) -> list[np.ndarray]:
        x = operands[0]
        result = x >> amount
        bit = x >> first_out
        bit &= 1
        result += bit
        return [result]
    return run_rounded


_UNSIGNED_OF = {np.dtype(np.int8): np.dtype(np.uint8), np.dtype(np.int16): np.dtype(np.uint16),
                np.dtype(np.int32): np.dtype(np.uint32)}


@prepared("LOGICAL_LEFT_SHIFT")
def prepare_logical_left_shift(op: StaticOp) -> Prepared | None:
    """The bit patterns shifted as unsigned integers of the type's width, which keeps
    the low `bits` bits (numerics.logical_left_shift); the shift amounts' REQUIRE,
    [0, bits - 1], by min/max."""
    element = op.element(0)
    if element is None or not element.is_integer or not static_broadcast(op) \
            or not op.static_shape(0, output=True):
        return None
    dtype = numpy_dtype(element)
    unsigned = _UNSIGNED_OF.get(dtype)
    if unsigned is None or op.element(1) != element:
        return None
    largest = element.bits - 1

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        x, n = operands
        if outside_range(n, 0, largest):
            raise KernelNeeded  # reports the shift REQUIRE
        return [np.left_shift(x.view(unsigned), n.view(unsigned)).view(dtype)]
    return run


_BITWISE = {"BITWISE_AND": np.bitwise_and, "BITWISE_OR": np.bitwise_or,
            "BITWISE_XOR": np.bitwise_xor, "LOGICAL_AND": np.logical_and,
            "LOGICAL_OR": np.logical_or, "LOGICAL_XOR": np.logical_xor}


@prepared(*_BITWISE)
def prepare_bitwise(op: StaticOp) -> Prepared | None:
    """Static shapes checked once; operands of one dtype keep it (bool for LOGICAL_*)."""
    if not static_broadcast(op) or op.element(0) != op.element(1):
        return None
    fn = _BITWISE[op.op_name]

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [fn(operands[0], operands[1])]
    return run


# Table index x + 128 of the int8 value whose byte is b: (b ^ 0x80).
_BYTE_ORDER = np.arange(256) ^ 0x80


@prepared("TABLE")
def prepare_table(op: StaticOp) -> Prepared | None:
    """Constant table. int8: one lookup through the stored byte (index x + 128 is the
    byte x ^ 0x80). int16: apply_lookup with the 512 slopes checked once."""
    lookup = op.constants[1] if len(op.constants) > 1 else None
    shape = op.static_shape(0)
    if lookup is None or shape is None or op.static_shape(0, output=True) != shape:
        return None
    element = op.element(0)
    if element.name == "i8" and lookup.shape == (256,):
        by_byte = lookup[_BYTE_ORDER].astype(np.int8)

        def run_i8(operands: list[np.ndarray]) -> list[np.ndarray]:
            return [by_byte[operands[0].view(np.uint8)]]
        return run_i8
    if element.name != "i16" or lookup.shape != (513,):
        return None
    # int16 storage holds the entries' values already (sign_extend would not change them).
    table = lookup.astype(np.int64) if lookup.dtype == np.int16 \
        else numerics.sign_extend(lookup, 16)
    slopes = table[1:] - table[:-1]
    if _SMALLEST(slopes) < numerics.int_min(16) or _LARGEST(slopes) > numerics.int_max(16):
        return None  # some input may hit a slope REQUIRE: the kernel checks it
    bases = table[:-1] << 7

    def run_i16(operands: list[np.ndarray]) -> list[np.ndarray]:
        # All in int64: ufuncs on one dtype cost less than mixed-dtype ones here.
        x = operands[0].astype(np.int64)
        index = (x + 32768) >> 7
        return [(bases[index] + slopes[index] * (x & 0x7F)).astype(np.int32)]
    return run_i16
