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
    if values.dtype == np.int8:
        ctx.error_if(lookup.shape != (256,), f"an i8 table has 256 entries, not {lookup.shape}")
        return [numerics.table_i8(values, lookup).astype(np.int8)]
    ctx.error_if(lookup.shape != (513,), f"an i16 table has 513 entries, not {lookup.shape}")
    # apply_lookup_s: a 16.7 fixed-point result in i32.
    return [numerics.table_i16(values, lookup).astype(np.int32)]


# ---------------------------------------------------------------------------
# Prepared forms: static shapes and constant operands checked once


def static_broadcast(op: StaticOp) -> bool:
    """True if every operand and the result have static shapes that the specification's
    broadcast_shape accepts and that give the declared result shape."""
    shapes = [op.static_shape(i) for i in range(2)]
    out = op.static_shape(0, output=True)
    if out is None or any(s is None or len(s) != len(out) for s in shapes):
        return False
    return all(all(d in (1, o) for d, o in zip(s, out)) for s in shapes) and all(
        max(dims) == o
        for *dims, o in zip(*shapes, out))


_FLOAT32 = np.dtype(np.float32)
_INT32_RANGE = (numerics.int_min(32), numerics.int_max(32))


@prepared("ADD", "SUB")
def prepare_add_sub(op: StaticOp) -> Prepared | None:
    """fp32: numpy's own (correctly rounded) float32 arithmetic, which is what
    float_compute computes for fp32. int32: exact int64 sum, REQUIRE checked by min/max."""
    if not static_broadcast(op):
        return None
    fn = np.add if op.op_name == "ADD" else np.subtract
    dtype = numpy_dtype(op.input_types[0].element)
    if dtype == _FLOAT32:
        def run_float(operands: list[np.ndarray]) -> list[np.ndarray]:
            with np.errstate(all="ignore"):
                return [fn(operands[0], operands[1])]
        return run_float
    if dtype != np.int32:
        return None
    low, high = _INT32_RANGE

    def run_int(operands: list[np.ndarray]) -> list[np.ndarray]:
        result = fn(operands[0].astype(np.int64), operands[1])
        if result.size and (result.min() < low or result.max() > high):
            return op.run_kernel(operands)  # reports apply_add_s / apply_sub_s
        return [result.astype(np.int32)]
    return run_int


@prepared("MUL")
def prepare_mul(op: StaticOp) -> Prepared | None:
    """Constant shift. fp32 as ADD; i8/i16 products are exact in int32; i32 with shift 0
    keeps the product's low 32 bits (astype wraps), with a shift it is mul_with_shift."""
    if not static_broadcast(op) or len(op.constants) < 3 or op.constants[2] is None:
        return None
    shift = int(np.asarray(op.constants[2]).reshape(-1)[0])
    dtype = numpy_dtype(op.input_types[0].element)
    if not 0 <= shift <= 63 or (shift and dtype != np.int32):
        return None  # a REQUIRE fails: the kernel reports it
    if dtype == _FLOAT32:
        def run_float(operands: list[np.ndarray]) -> list[np.ndarray]:
            with np.errstate(all="ignore"):
                return [np.multiply(operands[0], operands[1])]
        return run_float
    if dtype in (np.int8, np.int16):
        def run_narrow(operands: list[np.ndarray]) -> list[np.ndarray]:
            return [np.multiply(operands[0], operands[1], dtype=np.int32)]
        return run_narrow
    if dtype != np.int32:
        return None
    if shift == 0:
        def run_wrapping(operands: list[np.ndarray]) -> list[np.ndarray]:
            return [np.multiply(operands[0], operands[1], dtype=np.int64).astype(np.int32)]
        return run_wrapping

    def run_shifted(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [numerics.mul_with_shift(operands[0], operands[1], shift).astype(np.int32)]
    return run_shifted


@prepared("MAXIMUM", "MINIMUM")
def prepare_integer_min_max(op: StaticOp) -> Prepared | None:
    """Integer MAXIMUM / MINIMUM with static shapes: numpy's own, as the kernel."""
    element = op.element(0)
    if element is None or not element.is_integer or not static_broadcast(op):
        return None
    fn = np.maximum if op.op_name == "MAXIMUM" else np.minimum

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [fn(operands[0], operands[1])]
    return run


@prepared("ARITHMETIC_RIGHT_SHIFT")
def prepare_arithmetic_right_shift(op: StaticOp) -> Prepared | None:
    """Constant shift amounts in [0, bits - 1] (the REQUIRE, checked once); then
    numerics.arithmetic_right_shift's arithmetic with its rounding terms precomputed."""
    shift = op.constants[1] if len(op.constants) > 1 else None
    element = op.element(0)
    if shift is None or element is None or not element.is_integer \
            or not static_broadcast(op):
        return None
    dtype = numpy_dtype(element)
    n = numerics.as_int64(shift)
    if n.size and (n.min() < 0 or n.max() > _bits(dtype) - 1):
        return None  # the REQUIRE fails on every run: the kernel reports it
    rounding = bool(op.attrs.get("round", False))
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
        by_byte = numerics.as_int64(lookup)[np.arange(256) ^ 0x80].astype(np.int8)

        def run_i8(operands: list[np.ndarray]) -> list[np.ndarray]:
            return [by_byte[operands[0].view(np.uint8)]]
        return run_i8
    if element.name != "i16" or lookup.shape != (513,):
        return None
    table = numerics.sign_extend(lookup, 16)
    slopes = table[1:] - table[:-1]
    if slopes.min() < numerics.int_min(16) or slopes.max() > numerics.int_max(16):
        return None  # some input may hit a slope REQUIRE: the kernel checks it
    bases = table[:-1] << 7

    def run_i16(operands: list[np.ndarray]) -> list[np.ndarray]:
        x = operands[0].astype(np.int64)
        index = (x + 32768) >> 7
        return [(bases[index] + slopes[index] * (x & 0x7F)).astype(np.int32)]
    return run_i16
