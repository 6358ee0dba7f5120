"""Typed constructors for TOSA ops, for legalization patterns.

Every helper goes through `op()`, which checks the operand count and the
attribute names against the op table, so a pattern cannot build an op the
specification does not define. Zero points, shifts, multipliers and pad values
become `tosa.const` operands and shape lists `tosa.const_shape` operands, as
TOSA 1.0 requires.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tfl2tosa.errors import IRError
from tfl2tosa.ir.builder import Builder
from tfl2tosa.ir.core import Value
from tfl2tosa.ir.types import (
    ElementType,
    ScalarType,
    scalar_type,
    ShapeType,
    TensorType,
    Type,
    bf16,
    f16,
    f32,
    i1,
    i8,
    i16,
    i32,
    numpy_dtype,
    storage_type,
)
from tfl2tosa.tosa.ops import BY_MLIR, OpDef

_ELEMENT_OF_DTYPE: dict[str, ScalarType] = {
    "float32": f32, "float16": f16, "bfloat16": bf16, "int8": i8, "int16": i16,
    "int32": i32, "bool": i1,
}


def _opdef(name: str) -> OpDef:
    opdef = BY_MLIR.get(name)
    if opdef is None:
        raise IRError(f"{name} is not a TOSA 1.0 operator")
    return opdef


class _Signature:
    """What `_check_call` checks of one op, worked out once per op kind."""

    def __init__(self, opdef: OpDef) -> None:
        self.counts = [(what, sum(1 for a in args if a.kind != "tensor_list"),
                        any(a.kind == "tensor_list" for a in args), args)
                       for what, args in (("operands", opdef.inputs),
                                          ("results", opdef.outputs))]
        self.attr_names = frozenset(opdef.attr_names)
        self.required = tuple(a.name for a in opdef.attrs if not a.optional)


_SIGNATURES: dict[str, _Signature] = {}


def _check_call(opdef: OpDef, operands: Sequence[Value], results: int,
                attrs: dict[str, Any]) -> None:
    signature = _SIGNATURES.get(opdef.mlir)
    if signature is None:
        signature = _SIGNATURES[opdef.mlir] = _Signature(opdef)
    for (what, fixed, has_list, args), count in zip(signature.counts, (len(operands), results)):
        if count < fixed or (count > fixed and not has_list):
            names = ", ".join(a.name for a in args) or "none"
            raise IRError(f"{opdef.mlir} takes {fixed}{'+' if has_list else ''} {what} "
                          f"({names}), got {count}")
    unknown = attrs.keys() - signature.attr_names
    if unknown:
        raise IRError(f"{opdef.mlir} has no attribute(s) {sorted(unknown)}; "
                      f"it has {list(opdef.attr_names)}")
    missing = [name for name in signature.required if name not in attrs]
    if missing:
        raise IRError(f"{opdef.mlir} needs attribute(s) {missing}")


def op(b: Builder, name: str, operands: Sequence[Value], result_type: Type, /,
       **attrs: Any) -> Value:
    """Create a single-result TOSA op after checking it against the op table.

    The parameters are positional-only so that attributes may be called `name`
    (VARIABLE_READ/WRITE) or `type` (VARIABLE).
    """
    _check_call(_opdef(name), operands, 1, attrs)
    return b.create(name, list(operands), [result_type], attrs).result


def op_results(b: Builder, name: str, operands: Sequence[Value],
               result_types: Sequence[Type], /, **attrs: Any) -> list[Value]:
    """Create a TOSA op with any number of results (FFT2D, COND_IF, ...)."""
    _check_call(_opdef(name), operands, len(result_types), attrs)
    return b.create(name, list(operands), list(result_types), attrs).results


# ---------------------------------------------------------------------------
# Constants


def const(b: Builder, array: Any, element: ElementType | None = None) -> Value:
    """A `tosa.const` holding `array`; the element type follows its dtype unless given.

    With `element` (e.g. i48, i4 or a quantized type) the array is converted to
    the numpy dtype that holds it; integer values must survive the conversion.
    """
    values = np.asarray(array)
    if element is None:
        element = _ELEMENT_OF_DTYPE.get(values.dtype.name)
        if element is None:
            raise IRError(f"no TOSA element type for a {values.dtype} constant; pass element=")
    dtype = numpy_dtype(element)
    if values.dtype != dtype:
        converted = values.astype(dtype)
        if dtype.kind in "iub" and not np.array_equal(converted.astype(values.dtype), values):
            raise IRError(f"constant values do not fit {element}")
        values = converted
    scalar = storage_type(element)
    narrower = scalar.is_integer and scalar.bits < 8 * dtype.itemsize  # i4 in int8, i48 in int64
    if narrower and values.size and (values.min() < scalar.min_value
                                     or values.max() > scalar.max_value):
        raise IRError(f"constant values do not fit {scalar}")
    return op(b, "tosa.const", [], TensorType(values.shape, element), values=values)


def const_shape(b: Builder, values: Sequence[int]) -> Value:
    """A `tosa.const_shape` (`!tosa.shape<n>`) holding `values`."""
    ints = [int(v) for v in values]
    return op(b, "tosa.const_shape", [], ShapeType(len(ints)), values=ints)


def _wrap(value: int, bits: int) -> int:
    """`value` as the signed `bits`-bit integer with the same low bits.

    Unsigned zero points (u8 128, u16 32768) are stored in the signed storage
    type and read back zero-extended when RESCALE's *_unsigned flag is set.
    """
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def signless(scalar: ScalarType) -> ScalarType:
    """TOSA's integers are signless: an unsigned type is held in the signed one of
    the same width (RESCALE's *_unsigned flags say how to read it)."""
    return scalar_type(f"i{scalar.bits}") if scalar.kind == "unsigned" else scalar


def zero_point(b: Builder, zp: float, element: ElementType) -> Value:
    """A [1]-shaped zero-point (or pad value) constant of `element`'s storage type."""
    scalar = signless(storage_type(element))
    value = _wrap(int(zp), scalar.bits) if scalar.is_integer else zp
    return const(b, np.array([value], dtype=numpy_dtype(scalar)), scalar)


# ---------------------------------------------------------------------------
# Conveniences for common ops


def _tensor_type(value: Value) -> TensorType:
    if not isinstance(value.type, TensorType):
        raise IRError(f"{value.name!r} is not a tensor")
    return value.type


def reshape(b: Builder, x: Value, shape: Sequence[int]) -> Value:
    t = _tensor_type(x)
    return op(b, "tosa.reshape", [x, const_shape(b, shape)], t.with_shape(tuple(shape)))


def transpose(b: Builder, x: Value, perms: Sequence[int]) -> Value:
    t = _tensor_type(x)
    if t.shape is None:
        raise IRError("transpose needs a ranked tensor")
    shape = tuple(t.shape[p] for p in perms)
    return op(b, "tosa.transpose", [x], t.with_shape(shape), perms=[int(p) for p in perms])


def cast(b: Builder, x: Value, element: ElementType) -> Value:
    return op(b, "tosa.cast", [x], _tensor_type(x).with_element(element))


def clamp(b: Builder, x: Value, min_val: float, max_val: float,
          nan_mode: str = "PROPAGATE") -> Value:
    return op(b, "tosa.clamp", [x], _tensor_type(x), min_val=min_val, max_val=max_val,
              nan_mode=nan_mode)


def pad(b: Builder, x: Value, padding: Sequence[int], pad_const: float = 0) -> Value:
    """Pad with `padding` = [before0, after0, before1, after1, ...]."""
    t = _tensor_type(x)
    if t.shape is None or len(padding) != 2 * len(t.shape):
        raise IRError(f"padding {list(padding)} does not match {t}")
    shape = tuple(d + padding[2 * i] + padding[2 * i + 1] if d >= 0 else d
                  for i, d in enumerate(t.shape))
    return op(b, "tosa.pad", [x, const_shape(b, padding), zero_point(b, pad_const, t.element)],
              t.with_shape(shape))


def slice(b: Builder, x: Value, start: Sequence[int], size: Sequence[int]) -> Value:
    t = _tensor_type(x)
    return op(b, "tosa.slice", [x, const_shape(b, start), const_shape(b, size)],
              t.with_shape(tuple(size)))


def _broadcast_shape(a: TensorType, c: TensorType) -> tuple[int, ...] | None:
    if a.shape is None or c.shape is None:
        return None
    if len(a.shape) != len(c.shape):
        raise IRError(f"TOSA broadcasting needs equal ranks: {a} and {c}")
    return tuple(p if q == 1 else q for p, q in zip(a.shape, c.shape))


def mul(b: Builder, x: Value, y: Value, shift: int = 0,
        result_type: TensorType | None = None) -> Value:
    """MUL; integer inputs give an i32 result, `shift` (i32 inputs only) rounds it right."""
    tx, ty = _tensor_type(x), _tensor_type(y)
    if result_type is None:
        element = i32 if storage_type(tx.element).is_integer else tx.element
        result_type = TensorType(_broadcast_shape(tx, ty), element)
    return op(b, "tosa.mul", [x, y, zero_point(b, shift, i8)], result_type)


def rescale(b: Builder, x: Value, multiplier: int | Sequence[int], shift: int | Sequence[int],
            in_zp: int, out_zp: int, out_type: TensorType | ElementType, *,
            scale32: bool = True, rounding_mode: str = "SINGLE_ROUND",
            per_channel: bool | None = None, input_unsigned: bool = False,
            output_unsigned: bool = False) -> Value:
    """RESCALE x to `out_type` (a tensor type, or an element type keeping x's shape).

    `per_channel` defaults to "more than one multiplier". Unsigned zero points
    (e.g. 128 for u8) are given as unsigned numbers and stored wrapped.
    """
    t = _tensor_type(x)
    if not isinstance(out_type, TensorType):
        out_type = t.with_element(out_type)
    multipliers = np.atleast_1d(np.asarray(multiplier, dtype=np.int64))
    shifts = np.atleast_1d(np.asarray(shift, dtype=np.int64))
    if per_channel is None:
        per_channel = multipliers.size > 1
    operands = [x, const(b, multipliers, i32 if scale32 else i16), const(b, shifts, i8),
                zero_point(b, in_zp, t.element), zero_point(b, out_zp, out_type.element)]
    return op(b, "tosa.rescale", operands, out_type, scale32=scale32,
              rounding_mode=rounding_mode, per_channel=per_channel,
              input_unsigned=input_unsigned, output_unsigned=output_unsigned)
