"""Typed constructors for TOSA ops, for legalization patterns and lowerings.

Every helper goes through `op()`, which checks the operand count and the
attribute names against the op table, so a pattern cannot build an op the
specification does not define. Zero points, shifts, multipliers and pad values
become `tosa.const` operands and shape lists `tosa.const_shape` operands, as
TOSA 1.0 requires.

`Elementwise` is the one builder for expressions of elementwise ops: it aligns
ranks, makes broadcast constants, infers result types, and holds the exact
building blocks several lowerings share (rounding half away from zero, a
correctly rounded division, an exact floor division).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from tfl2tosa.errors import IRError
from tfl2tosa.ir.builder import Builder
from tfl2tosa.ir.core import Value
from tfl2tosa.ir.types import (
    DYNAMIC,
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
from tfl2tosa.memo import BoundedMemo
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


# (op name, operand count, result count, attribute names) of calls that passed
# `_check_call`: whether a call passes depends on nothing else, and patterns make
# the same few kinds of call again and again.
_CHECKED_CALLS: set[tuple[Any, ...]] = set()


def _check(name: str, operands: Sequence[Value], results: int, attrs: dict[str, Any]) -> None:
    call = (name, len(operands), results, *attrs)
    if call not in _CHECKED_CALLS:
        _check_call(_opdef(name), operands, results, attrs)
        _CHECKED_CALLS.add(call)


def op(b: Builder, name: str, operands: Sequence[Value], result_type: Type, /,
       **attrs: Any) -> Value:
    """Create a single-result TOSA op after checking it against the op table.

    The parameters are positional-only so that attributes may be called `name`
    (VARIABLE_READ/WRITE) or `type` (VARIABLE).
    """
    call = (name, len(operands), 1, *attrs)  # `_check` inline
    if call not in _CHECKED_CALLS:
        _check_call(_opdef(name), operands, 1, attrs)
        _CHECKED_CALLS.add(call)
    return b.single(name, list(operands), result_type, attrs)


def op_results(b: Builder, name: str, operands: Sequence[Value],
               result_types: Sequence[Type], /, **attrs: Any) -> list[Value]:
    """Create a TOSA op with any number of results (FFT2D, COND_IF, ...)."""
    _check(name, operands, len(result_types), attrs)
    return b.create(name, list(operands), list(result_types), attrs).results


# ---------------------------------------------------------------------------
# Constants


def const(b: Builder, array: Any, element: ElementType | None = None) -> Value:
    """A `tosa.const` holding `array`; the element type follows its dtype unless given.

    With `element` (e.g. i48, i4 or a quantized type) the array is converted to
    the numpy dtype that holds it; integer values must survive the conversion.
    """
    values = np.asarray(array)
    if values.size == 1:
        return _one_value_const(b, *_one_value(values, element))
    values, element = _converted(values, element)
    if values.nbytes <= _SHARED_CONST_BYTES and values.dtype.kind in "biuf":
        key = (values.shape, values.dtype.str, values.tobytes(), str(element))
        return _one_value_const(b, key, values, element)
    return op(b, "tosa.const", [], TensorType(values.shape, element), values=values)


# Small constants (per-channel multipliers and shifts, bias and table rows) are
# made once per graph and op list like one-value ones: two RESCALEs of one scale
# set ask for the same arrays, and CSE would merge the copies into the first.
# Weights stay one op per request: reading their bytes for a key costs more than
# CSE's sampled key.
_SHARED_CONST_BYTES = 4096


def _converted(values: np.ndarray, element: ElementType | None
               ) -> tuple[np.ndarray, ElementType]:
    """`values` in the numpy dtype of `element` (by default the element of their
    dtype), after checking that they fit it."""
    if element is None:
        element = _ELEMENT_OF_DTYPE.get(values.dtype.name)
        if element is None:
            raise IRError(f"no TOSA element type for a {values.dtype} constant; pass element=")
    dtype = numpy_dtype(element)
    if values.dtype != dtype:
        converted = values.astype(dtype)
        if dtype.kind == values.dtype.kind == "i":
            if values.size == 1:  # a zero point, multiplier or shift
                low, high = _INTEGER_RANGES[dtype.itemsize]
                fits = low <= values.item() <= high
            else:
                # Between signed integers a comparison is exact, as the round trip is.
                fits = bool((converted == values).all())
        else:
            fits = dtype.kind not in "iub" or np.array_equal(converted.astype(values.dtype),
                                                             values)
        if not fits:
            raise IRError(f"constant values do not fit {element}")
        values = converted
    scalar = storage_type(element)
    narrower = scalar.is_integer and scalar.bits < 8 * dtype.itemsize  # i4 in int8, i48 in int64
    if narrower and values.size and (values.min() < scalar.min_value
                                     or values.max() > scalar.max_value):
        raise IRError(f"constant values do not fit {scalar}")
    return values, element


# bytes -> the range of the signed integer dtype that wide
_INTEGER_RANGES = {size: (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1)
                   for size in (1, 2, 4, 8)}


class _SharedConstants:
    """The shared constants made into one graph's op list being built:
    constant key -> (value, its index in `ops`)."""

    __slots__ = ("ops", "known", "__weakref__")

    def __init__(self, ops: list[Any]) -> None:
        self.ops = ops
        self.known: dict[tuple[Any, ...], tuple[Value, int]] = {}


# graph -> its _SharedConstants, dropped with the graph
_ONE_VALUE_CONSTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# The graph asked last and its constants, both held weakly: patterns ask op
# after op of one graph, and a WeakKeyDictionary lookup makes a new weak
# reference each time.
_LAST_ASKED: list[Any] = [lambda: None, lambda: None]

# A one-value constant: its key in _ONE_VALUE_CONSTS, its converted array, its element.
OneValue = tuple[tuple[Any, ...], np.ndarray, ElementType]

# A one-value constant as asked for (shape, dtype and bytes of the array given,
# and the element) -> what it becomes: the same request always converts and
# checks the same way, so a repeat skips both. Bounded, as a long-lived process
# converts model after model.
_ONE_VALUE_REQUESTS: BoundedMemo = BoundedMemo()


def _one_value(values: np.ndarray, element: ElementType | None) -> OneValue:
    """The one-value constant `values` of `element` make, after `_converted`'s checks."""
    # Only numbers' bytes say what they are (an object array's are pointers).
    request = ((values.shape, values.dtype.str, values.tobytes(), element)
               if values.dtype.kind in "biufc" else None)
    known = _ONE_VALUE_REQUESTS.get(request) if request is not None else None
    if known is None:
        converted, element = _converted(values, element)
        if converted is values:  # the caller's array: kept, it must not change
            converted = values.copy()
        converted.flags.writeable = False
        key = (converted.shape, converted.dtype.str, converted.tobytes(), str(element))
        known = key, converted, element
        if request is not None:
            _ONE_VALUE_REQUESTS.keep(request, known)
    return known



def _shared_op(b: Builder, key: tuple[Any, ...], short_name: str,
               make: Callable[[], Value]) -> Value:
    """The value of a constant op made once per graph and op list: patterns ask
    for the same zero points, multipliers, shifts and shapes op after op, and CSE
    would merge the copies into the first anyway. The name a copy would have
    taken (`short_name` under the builder's base) is still used up, so every
    other value keeps its name."""
    graph_asked, cache_asked = _LAST_ASKED
    cache = cache_asked()
    if cache is None or graph_asked() is not b.graph or cache.ops is not b.ops:
        cache = _ONE_VALUE_CONSTS.get(b.graph)
        if cache is None or cache.ops is not b.ops:
            cache = _ONE_VALUE_CONSTS[b.graph] = _SharedConstants(b.ops)
        _LAST_ASKED[:] = weakref.ref(b.graph), weakref.ref(cache)
    ops, known = cache.ops, cache.known
    hit = known.get(key)
    if hit is not None:
        value, index = hit
        if index < len(ops) and ops[index] is value.owner:
            b.graph.unique_name(f"{b.name_base}/{short_name}" if b.name_base else short_name)
            return value
    value = make()
    known[key] = (value, len(ops) - 1)
    return value


def _one_value_const(b: Builder, key: tuple[Any, ...], converted: np.ndarray,
                     element: ElementType) -> Value:
    """A one-value (or small) `tosa.const`, made once per graph and op list (_shared_op)."""
    # Each constant op holds its own array: a later pass may edit it in place.
    return _shared_op(b, key, "const", lambda: op(
        b, "tosa.const", [], TensorType(converted.shape, element), values=converted.copy()))


def const_shape(b: Builder, values: Sequence[int]) -> Value:
    """A `tosa.const_shape` (`!tosa.shape<n>`) holding `values`, made once per graph
    and op list (_shared_op)."""
    ints = [int(v) for v in values]
    # Keyed apart from _one_value_const's keys, which have four parts.
    return _shared_op(b, ("const_shape", tuple(ints)), "const_shape", lambda: op(
        b, "tosa.const_shape", [], ShapeType(len(ints)), values=ints))


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
    # Integer zero points come again and again; a float (a pad value) may be -0.0,
    # which a dict would take for 0.0.
    scalar = signless(storage_type(element))
    # Keyed by the storage type: every quantization of it with this zero point
    # makes the same constant.
    request = (zp, scalar) if zp.__class__ is int else None
    known = _ZERO_POINTS.get(request) if request is not None else None
    if known is None:
        value = _wrap(int(zp), scalar.bits) if scalar.is_integer else zp
        known = _one_value(np.array([value], dtype=numpy_dtype(scalar)), scalar)
        if request is not None:
            _ZERO_POINTS.keep(request, known)
    return _one_value_const(b, *known)


# (integer zero point, signless storage type) -> the one-value constant it is
_ZERO_POINTS: BoundedMemo = BoundedMemo()


# ---------------------------------------------------------------------------
# Conveniences for common ops


def _tensor_type(value: Value) -> TensorType:
    t = value.type
    if t.__class__ is not TensorType and not isinstance(t, TensorType):
        raise IRError(f"{value.name!r} is not a tensor")
    return t


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
    if per_channel is None:
        per_channel = np.size(multiplier) > 1
    operands = [x, _rescale_operand(b, multiplier, i32 if scale32 else i16),
                _rescale_operand(b, shift, i8),
                zero_point(b, in_zp, t.element), zero_point(b, out_zp, out_type.element)]
    return op(b, "tosa.rescale", operands, out_type, scale32=scale32,
              rounding_mode=rounding_mode, per_channel=per_channel,
              input_unsigned=input_unsigned, output_unsigned=output_unsigned)


def _rescale_operand(b: Builder, values: int | Sequence[int], element: ScalarType) -> Value:
    """RESCALE's multiplier or shift operand: a [n] constant of `element`.

    One Python integer (alone or in a list: a per-tensor RESCALE) is looked up
    as zero points are; an integer array keeps its dtype, so one already of the
    constant's type is not converted and compared again."""
    one = values[0] if isinstance(values, list) and len(values) == 1 else values
    if one.__class__ is int:
        request = (one, element)
        known = _ONE_INTEGERS.get(request)
        if known is None:
            known = _ONE_INTEGERS.keep(request, _one_value(np.array([one], dtype=np.int64),
                                                           element))
        return _one_value_const(b, *known)
    array = np.atleast_1d(np.asarray(values))
    return const(b, array if array.dtype.kind in "iu" else array.astype(np.int64), element)


# (Python integer, element) -> the [1] constant it is: per-tensor RESCALEs ask for
# the same multipliers and shifts again and again.
_ONE_INTEGERS: BoundedMemo = BoundedMemo()


# ---------------------------------------------------------------------------
# Expressions


def constant_value(value: Value) -> np.ndarray | None:
    """The array behind `value` if it is produced by a constant op, else None.

    Sparse and packed-int4 constants hold only their stored bytes, not the
    tensor's values, so they count as non-constant here.
    """
    owner = value.owner
    if owner is not None and owner.name in ("tfl.pseudo_const", "tosa.const"):
        if owner.attrs.get("sparsity") is not None or owner.attrs.get("packed_int4"):
            return None
        array = owner.attrs.get("value", owner.attrs.get("values"))
        return None if array is None else np.asarray(array)
    return None


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...]:
    """Numpy/TFLite broadcasting of right-aligned shapes. A dynamic dim (-1) against
    a size other than 1 stays dynamic: only the run time knows it."""
    rank = max((len(s) for s in shapes), default=0)
    aligned = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    result = []
    for dims in zip(*aligned):
        sizes = set(dims) - {1}
        if len(sizes) > 1 and not (len(sizes) == 2 and DYNAMIC in sizes):
            raise IRError(f"shapes {[list(s) for s in shapes]} do not broadcast")
        result.append(DYNAMIC if DYNAMIC in sizes else sizes.pop() if sizes else 1)
    return tuple(result)


# (number, element, rank) -> the [1] * rank constant it is: expressions ask for
# the same few scalars (0, 1/2, 127, ...) over and over.
_SCALARS: BoundedMemo = BoundedMemo()


def scalar(b: Builder, value: float | bool, elem: ElementType, rank: int) -> Value:
    """A constant of `elem` holding `value`, shaped [1] * rank (TOSA's elementwise
    ops broadcast only size-1 dims of operands of equal rank)."""
    return _one_value_const(b, *_scalar(value, elem, rank))


def _scalar(value: float | bool, elem: ElementType, rank: int) -> OneValue:
    # A float zero is made afresh: a dict takes -0.0 for 0.0.
    plain = value.__class__ in (int, bool) or (value.__class__ is float and value != 0)
    request = (value.__class__, value, elem, rank) if plain else None
    known = _SCALARS.get(request) if plain else None
    if known is None:
        known = _one_value(np.full((1,) * rank, value, dtype=numpy_dtype(elem)), elem)
        if plain:
            _SCALARS.keep(request, known)
    return known


# Veltkamp's splitting constant 2^ceil(p/2) + 1 for a p-bit significand:
# splits a value into two halves whose products are exact (Dekker 1971).
_SPLIT_FACTOR = {"f32": 4097.0, "f16": 65.0, "bf16": 17.0}
# 1 + 2^-(p - 3) for p significant bits: Elementwise.divide's Newton step
# scaled by it outweighs the step's two roundings (each under 2^-p relative).
_NEWTON_BIAS = {"f32": 1.0 + 2.0 ** -21, "f16": 1.0 + 2.0 ** -8, "bf16": 1.0 + 2.0 ** -5}
# 2^-125 (1 - 2^-21): Elementwise.divide_ieee's estimate of a quotient whose
# ulp is the subnormal grid's is below it, of any other quotient at or above.
_SUBNORMAL_GRID_BELOW = 2.0 ** -125 * (1 - 2.0 ** -21)


class _NewtonStep(NamedTuple):
    """Elementwise.divide's Newton step from q0: q1, q1 - q0, and the sizes of
    the exact residuals x - q0*y and x - q1*y."""

    q1: Value
    moved: Value
    residual0: Value
    residual1: Value


# (shape, plain element type) -> the TensorType of them, for elementwise
# results: asked again, it skips the constructor's shape conversion and look-up.
_RESULT_TYPES: BoundedMemo = BoundedMemo()


def _result_type(shape: tuple[int, ...], element: ElementType) -> TensorType:
    if element.__class__ is not ScalarType:  # a quantized type is made as asked
        return TensorType(shape, element)
    result = _RESULT_TYPES.get((shape, element))
    if result is None:
        result = _RESULT_TYPES.keep((shape, element), TensorType(shape, element))
    return result


class Elementwise:
    """Builds elementwise TOSA ops at one rank.

    Operands of lower rank are reshaped with leading 1s (constants are
    re-made with the new shape instead), scalars become `[1] * rank`
    constants, and every result type is the broadcast of its operands with
    the first operand's element type unless one is given.
    """

    def __init__(self, rw: Builder, rank: int) -> None:
        self.rw = rw
        self.rank = rank
        self._ones = (1,) * rank
        self._splits: dict[int, tuple[Value, Value]] = {}

    # -- operands and constants

    def operand(self, value: Value) -> Value:
        t = _tensor_type(value)
        if t.shape is None or len(t.shape) == self.rank:
            return value
        shape = (1,) * (self.rank - len(t.shape)) + tuple(t.shape)
        array = constant_value(value)
        if array is not None:
            return const(self.rw, np.asarray(array).reshape(shape), t.element)
        return reshape(self.rw, value, shape)

    def const(self, value: float | bool, elem: ElementType) -> Value:
        """A scalar constant of `elem`, shaped [1] * rank."""
        return scalar(self.rw, value, elem, self.rank)

    def like(self, value: float | bool, other: Value) -> Value:
        """A scalar constant of `other`'s element type."""
        return self.const(value, _tensor_type(other).element)

    def full(self, array: np.ndarray, elem: ElementType) -> Value:
        return const(self.rw, np.asarray(array, dtype=numpy_dtype(elem)), elem)

    def per_axis(self, values: Sequence[float], axis: int | None, elem: ElementType) -> Value:
        """`values` along `axis` with size 1 elsewhere; with no axis, the scalar values[0]."""
        if axis is None:
            return self.const(values[0], elem)
        shape = [1] * self.rank
        shape[axis] = len(values)
        array = np.asarray(values, dtype=np.float64).reshape(shape).astype(numpy_dtype(elem))
        return const(self.rw, array, elem)

    # -- generic ops

    def _type(self, values: Sequence[Value], elem: ElementType | None = None) -> TensorType:
        first = _tensor_type(values[0])
        element = first.element if elem is None else elem
        # Most operands have the result's shape or are [1] * rank constants, whose
        # broadcast is the other shape: no need to work it out dimension by dimension.
        ones = self._ones
        shape = first.shape
        for value in values[1:]:
            other = _tensor_type(value).shape
            if other != shape and other != ones:
                shape = other if shape == ones else None
                if shape is None:
                    break
        if shape is not None and len(shape) == self.rank:
            return first if first.shape == shape and first.element == element \
                else _result_type(shape, element)
        return TensorType(broadcast_shape(*(_tensor_type(v).shape for v in values)), element)

    def binary(self, name: str, a: Value, b: Value | float, elem: ElementType | None = None,
               **attrs: object) -> Value:
        """`name` on a and b; a number b becomes a constant of a's element type."""
        if not isinstance(b, Value):
            b = self.like(b, a)
        return op(self.rw, name, [a, b], self._type([a, b], elem), **attrs)

    def unary(self, name: str, a: Value) -> Value:
        return op(self.rw, name, [a], _tensor_type(a))

    # -- arithmetic (a, b already at this rank)

    def add(self, a: Value, b: Value | float) -> Value:
        return self.binary("tosa.add", a, b)

    def sub(self, a: Value, b: Value | float) -> Value:
        return self.binary("tosa.sub", a, b)

    def mul(self, a: Value, b: Value, shift: int = 0) -> Value:
        """MUL; integer operands give an i32 product, `shift` (i32 only) rounds it right."""
        integer = storage_type(_tensor_type(a).element).is_integer
        return mul(self.rw, a, b, shift, self._type([a, b], i32 if integer else None))

    def intdiv(self, a: Value, b: Value) -> Value:
        return self.binary("tosa.intdiv", a, b)

    def maximum(self, a: Value, b: Value) -> Value:
        return self.binary("tosa.maximum", a, b, nan_mode="PROPAGATE")

    def minimum(self, a: Value, b: Value) -> Value:
        return self.binary("tosa.minimum", a, b, nan_mode="PROPAGATE")

    def pow(self, a: Value, b: Value) -> Value:
        return self.binary("tosa.pow", a, b)

    def abs(self, a: Value) -> Value:
        return self.unary("tosa.abs", a)

    def negate(self, a: Value) -> Value:
        elem = _tensor_type(a).element
        zp, zp_out = zero_point(self.rw, 0, elem), zero_point(self.rw, 0, elem)
        return op(self.rw, "tosa.negate", [a, zp, zp_out], _tensor_type(a))

    def floor(self, a: Value) -> Value:
        return self.unary("tosa.floor", a)

    def ceil(self, a: Value) -> Value:
        return self.unary("tosa.ceil", a)

    def reciprocal(self, a: Value) -> Value:
        return self.unary("tosa.reciprocal", a)

    def rsqrt(self, a: Value) -> Value:
        return self.unary("tosa.rsqrt", a)

    def cast(self, a: Value, elem: ElementType) -> Value:
        if _tensor_type(a).element == elem:
            return a
        return cast(self.rw, a, elem)

    # -- integer bits (i32 unless said otherwise)

    def shift_right(self, a: Value, b: Value | int, round: bool = False) -> Value:
        """ARITHMETIC_RIGHT_SHIFT; `round` adds the last bit shifted out (half up)."""
        return self.binary("tosa.arithmetic_right_shift", a, b, round=round)

    def shift_left(self, a: Value, b: Value | int) -> Value:
        return self.binary("tosa.logical_left_shift", a, b)

    def bitwise_and(self, a: Value, b: Value | int) -> Value:
        return self.binary("tosa.bitwise_and", a, b)

    def bitwise_xor(self, a: Value, b: Value | int) -> Value:
        return self.binary("tosa.bitwise_xor", a, b)

    def saturate(self, a: Value, low: int, high: int) -> Value:
        """An integer a clamped to [low, high] by MAXIMUM then MINIMUM (TOSA's CLAMP
        has no i32 mode)."""
        return self.minimum(self.maximum(a, self.like(low, a)), self.like(high, a))

    def shift_right_half_away(self, a: Value, exponent: int) -> Value:
        """gemmlowp's RoundingDivideByPOT on i32: a / 2^exponent rounded half away
        from zero. ARITHMETIC_RIGHT_SHIFT rounds half up, which is half away from
        zero of a - 1 for negative a (the sign word a >> 31 is -1 there)."""
        return self.shift_right(self.add(a, self.shift_right(a, 31)), exponent, round=True)

    # -- comparisons and logic (bool results)

    def equal(self, a: Value, b: Value) -> Value:
        return self.binary("tosa.equal", a, b, i1)

    def greater(self, a: Value, b: Value) -> Value:
        return self.binary("tosa.greater", a, b, i1)

    def greater_equal(self, a: Value, b: Value) -> Value:
        return self.binary("tosa.greater_equal", a, b, i1)

    def less(self, a: Value, b: Value) -> Value:
        return self.greater(b, a)

    def logical_and(self, a: Value, b: Value) -> Value:
        return self.binary("tosa.logical_and", a, b)

    def logical_or(self, a: Value, b: Value) -> Value:
        return self.binary("tosa.logical_or", a, b)

    def logical_xor(self, a: Value, b: Value) -> Value:
        return self.binary("tosa.logical_xor", a, b)

    def logical_not(self, a: Value) -> Value:
        return self.unary("tosa.logical_not", a)

    def select(self, condition: Value, a: Value, b: Value) -> Value:
        return op(self.rw, "tosa.select", [condition, a, b],
                  self._type([condition, a, b], _tensor_type(a).element))

    # -- exact floating-point building blocks

    def round_half_away_non_negative(self, a: Value) -> Value:
        """round(a) for a >= 0, where half away from zero is half up: floor(a) + 1
        where the fraction a - floor(a) reaches 1/2. The fraction is exact for
        a >= 0 (Sterbenz); a + 1/2 would round (0.49999997 + 0.5 is 1)."""
        whole = self.floor(a)
        up = self.greater_equal(self.sub(a, whole), self.like(0.5, a))
        return self.select(up, self.add(whole, self.like(1.0, a)), whole)

    def round_half_away(self, a: Value) -> Value:
        """std::round exactly: the non-negative rounding of |a| with a's sign
        (a result of zero is +0; NaN stays NaN, infinities stay)."""
        rounded = self.round_half_away_non_negative(self.abs(a))
        negative = self.less(a, self.like(0.0, a))
        return self.select(negative, self.sub(self.like(0.0, a), rounded), rounded)

    def is_finite(self, a: Value) -> Value:
        """x - x == 0 holds exactly for finite x (inf - inf and NaN give NaN)."""
        return self.equal(self.sub(a, a), self.like(0.0, a))

    def sign_bit(self, a: Value) -> Value:
        """True where `a` is negative, including -0 (its reciprocal is -inf).

        TOSA comparisons ignore the sign of zero, so x < 0 alone misses -0.
        """
        zero = self.like(0.0, a)
        return self.logical_or(self.less(a, zero), self.less(self.reciprocal(a), zero))

    def split(self, a: Value) -> tuple[Value, Value]:
        """Veltkamp's split a = hi + lo, each half short enough that the
        product of two halves is exact. Overflows (to NaN) for |a| above
        max / factor, which callers detect with is_finite."""
        key = id(a)
        if key not in self._splits:
            factor = _SPLIT_FACTOR[_tensor_type(a).element.name]
            scaled = self.mul(a, self.like(factor, a))
            hi = self.sub(scaled, self.sub(scaled, a))
            self._splits[key] = hi, self.sub(a, hi)
        return self._splits[key]

    def two_product(self, a: Value, b: Value) -> tuple[Value, Value]:
        """Dekker's error-free product: p + e == a * b exactly, p = RN(a * b)."""
        p = self.mul(a, b)
        a_hi, a_lo = self.split(a)
        b_hi, b_lo = self.split(b)
        e = self.sub(self.mul(a_hi, b_hi), p)
        e = self.add(e, self.mul(a_hi, b_lo))
        e = self.add(e, self.mul(a_lo, b_hi))
        return p, self.add(e, self.mul(a_lo, b_lo))

    def divide(self, x: Value, y: Value) -> Value:
        """x / y correctly rounded, from RECIPROCAL, where |y| is in
        [2^-126, 2^115], |x| at least 2^-101 and the quotient in [2^-101, 2^115]
        (float32; operands that callers bound, such as a row's range or a box's
        area). Outside, the residuals below can lose their exactness and the
        result an ulp; `divide_ieee` covers every operand.

        q0 = x * (1/y) is within 1.5 ulp, so x / y rounds to q0 or to its
        neighbour towards x / y. The residual x - q0*y is exact (Dekker's
        product; x - p is exact by Sterbenz's lemma since p is close to x).
        A Newton step q0 + residual * (1/y) alone can round across a midpoint
        either way: its product rounds twice (the reciprocal, then the
        product) before the sum that would have told. The step's
        reciprocal is therefore made a little too large (`_NEWTON_BIAS`, more
        than those two roundings), so that q1 moves to the neighbour wherever
        x / y lies beyond the midpoint, and never two places: q0 is at most
        1.25 ulp off wherever the bias could carry it past 1.5. Of q0 and q1 the
        one whose residual is smaller is x / y rounded; q1's residual
        r0 - (q1 - q0)*y is exact, q1 - q0 being a power of two.

        Both residuals are NaN where y is 0 or infinite, or x infinite: the
        comparison is then false and q0 is kept, which is the IEEE result
        there (and keeps the sign of a zero quotient).
        """
        r = self.reciprocal(y)
        q0 = self.mul(x, r)
        step = self._newton_step(x, y, r, q0)
        return self.select(self.less(step.residual1, step.residual0), step.q1, q0)

    def _newton_step(self, x: Value, y: Value, r: Value, q0: Value) -> _NewtonStep:
        p, e = self.two_product(q0, y)
        residual0 = self.sub(self.sub(x, p), e)
        bias = self.like(_NEWTON_BIAS[_tensor_type(y).element.name], y)
        q1 = self.add(q0, self.mul(residual0, self.mul(r, bias)))
        moved = self.sub(q1, q0)
        residual1 = self.sub(residual0, self.mul(moved, y))
        return _NewtonStep(q1, moved, self.abs(residual0), self.abs(residual1))

    def divide_ieee(self, x: Value, y: Value) -> Value:
        """x / y as IEEE division gives it, for every x and y: `divide` on
        operands scaled by powers of two into its range.

        Both operands are first scaled alike (the quotient stays): up by 2^48
        where |x| < 2^-101 or |y| < 2^-126, down by 2^-64 where |y| > 2^115.
        What this rounds or overflows decides nothing: the quotient is then
        beyond the largest float, or below half the smallest. The dividend
        alone is then scaled where the estimate x * (1/y) says the quotient
        is beyond 2^115 (by 2^-64) or in [2^-125, 2^-100) (by 2^64); the
        result is scaled back, exactly or overflowing as IEEE does, since it
        is no subnormal. Subnormal quotients are worked out where they are:
        q0 = x * (1/y) rounds to their grid, the Newton step's correction,
        about half a grid step, rounds to a whole one or none, and the
        residuals are exact (x is at least 2^-101 and y at least 2^25 there).
        Only there can x / y be a midpoint: the residuals are then equal, and
        q0 + (q1 - q0)/2, worked out 2^12 higher and scaled down, rounds to
        the even one.

        Other float types divide in float32 and round once more: float32 has
        at least 2p + 2 bits for their p, so the quotient rounds as if once
        (Figueroa, "When is double rounding innocuous?", 1995).
        """
        element = _tensor_type(x).element
        if element != f32:
            return self.cast(self.divide_ieee(self.cast(x, f32), self.cast(y, f32)), element)
        c = self.like
        size = self.abs(y)
        both = self.select(self.greater(size, c(2.0 ** 115, y)), c(2.0 ** -64, y),
                           self.select(self.logical_or(self.less(self.abs(x), c(2.0 ** -101, x)),
                                                       self.less(size, c(2.0 ** -126, y))),
                                       c(2.0 ** 48, y), c(1.0, y)))
        x, y = self.mul(x, both), self.mul(y, both)
        r = self.reciprocal(y)
        estimate = self.abs(self.mul(x, r))
        near_subnormal = self.select(self.less(estimate, c(2.0 ** -100, x)), c(2.0 ** 64, x),
                                     c(1.0, x))
        scale = self.select(self.greater_equal(estimate, c(2.0 ** 115, x)), c(2.0 ** -64, x),
                            self.select(self.less(estimate, c(_SUBNORMAL_GRID_BELOW, x)),
                                        c(1.0, x), near_subnormal))
        x = self.mul(x, scale)
        q0 = self.mul(x, r)
        step = self._newton_step(x, y, r, q0)
        midpoint = self.mul(self.add(self.mul(q0, c(2.0 ** 12, x)),
                                     self.mul(step.moved, c(2.0 ** 11, x))), c(2.0 ** -12, x))
        tie = self.logical_and(self.equal(step.residual1, step.residual0),
                               self.greater(self.abs(step.moved), c(0.0, x)))
        q = self.select(self.less(step.residual1, step.residual0), step.q1,
                        self.select(tie, midpoint, q0))
        return self.mul(q, self.reciprocal(scale))

    def floor_division(self, x: Value, y: Value) -> tuple[Value, Value]:
        """(floor(x / y), x - floor(x / y) * y) for floats, exact for |x / y| < 2^23.

        f = floor(x * (1/y)) may be one off where x / y is within ~1.5 ulp of
        an integer. The exact remainder x - f*y = d - e (d = x - p, e the
        product's error, both exact whenever f is near x / y) tells: if it
        has the sign opposite to y, f is one too big; if it is y or beyond,
        one too small. The remainder then rounds once, as TFLite's
        `fmod(x, y) (+ y)` does (reference_ops::FloorMod): one too small,
        it is (d - y) - e, d - y being exact there; d - e could need a bit
        more than a float holds when it is close to y.

        Where f = -1, x / y is negative, so f is never too small; but d = x + y
        is rounded where |x| is far below |y|, and d - y can then say zero.

        A zero remainder takes the dividend's sign, as fmod's does (-4 mod 2
        is -0): x - f*y itself rounds an exact zero to +0.
        """
        zero = self.like(0.0, x)
        one = self.like(1.0, x)
        f = self.floor(self.mul(x, self.reciprocal(y)))
        f_up = self.add(f, one)
        p, e = self.two_product(f, y)
        d = self.sub(x, p)
        y_positive = self.greater(y, zero)
        # too big: (d - e) has the sign opposite to y.
        too_big = self.select(y_positive, self.less(d, e), self.greater(d, e))
        # too small: (d - e) - y has y's sign or is zero; d - y is exact near y.
        beyond = self.sub(d, y)
        too_small = self.select(y_positive, self.greater_equal(beyond, e),
                                self.greater_equal(e, beyond))
        too_small = self.logical_and(too_small, self.logical_not(self.equal(f_up, zero)))
        quotient = self.select(too_big, self.sub(f, one), self.select(too_small, f_up, f))
        remainder = self.sub(d, e)
        remainder = self.select(too_big, self.add(remainder, y),
                                self.select(too_small, self.sub(beyond, e), remainder))
        remainder = self.select(self.equal(remainder, zero), self.mul(x, zero), remainder)
        return quotient, remainder
