"""Element and tensor types, including MLIR's `!quant.uniform` quantized types.

Printing follows MLIR's textual form so that our output reads like (and parses
as) what `mlir-opt`/`tosa-opt` print. Scales are printed with Python's
shortest round-trip `repr`, so a printed type parses back to the same double.
"""

from __future__ import annotations

import _thread
import math
import weakref
from typing import Any, Union

import numpy as np

from tfl2tosa.errors import IRError


class FrozenInstanceError(AttributeError):
    """An assignment to a field of a Frozen record (as `dataclasses` names it)."""


class Record:
    """A record compared and shown by its `_fields`, whose fields may change.

    What `@dataclass` generates, written out once: creating a dataclass costs
    time at import (and `dataclasses` brings `inspect` with it), and a
    conversion loads these records. Subclasses list their fields in `_fields`
    and set them in `__init__`, whose parameters are named as the fields (so
    `replace` can call it). Equal when of the same class with equal fields;
    unhashable, as a mutable dataclass is.
    """

    _fields: tuple[str, ...] = ()
    __hash__ = None  # type: ignore[assignment]

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._key() == other._key()  # type: ignore[attr-defined]
        return NotImplemented

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({fields})"

    def to_dict(self) -> dict[str, Any]:
        """The fields by name, records, dicts, lists and tuples in them copied
        into plain ones (what `dataclasses.asdict` gives, except that other
        values are shared rather than deep-copied)."""
        return {name: _plain(getattr(self, name)) for name in self._fields}

    def replace(self, **changes: Any) -> Any:
        """A new record of the same class with `changes` to some fields (as
        `dataclasses.replace`: built by `__init__`, so its checks run)."""
        unknown = changes.keys() - set(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        return type(self)(**{name: changes[name] if name in changes else getattr(self, name)
                             for name in self._fields})


def _plain(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, dict):
        return type(value)((_plain(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


class Frozen(Record):
    """An immutable record: compared, hashed and shown by its `_fields`.

    What `@dataclass(frozen=True)` generates, written out once (see Record):
    every command imports these types, the TOSA op table's records, verifier
    violations and pattern failures. Subclasses set their fields in
    `__init__` with `_set`, in `_fields` order (assignment raises
    FrozenInstanceError, as for a frozen dataclass). The tuple of field values
    is kept (`_k`), so comparing and hashing, which every pass does to types,
    build nothing; the hash is computed once.
    """

    _k: tuple[Any, ...] = ()

    def _set(self, *values: Any) -> None:
        state = self.__dict__
        state.update(zip(self._fields, values))
        state["_k"] = values

    def _key(self) -> tuple[Any, ...]:
        return self._k

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if other.__class__ is self.__class__:
            return self._k == other._k  # type: ignore[attr-defined]
        return NotImplemented

    def __hash__(self) -> int:
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = self.__dict__["_hash"] = hash(self._k)
        return cached

    def __getstate__(self) -> dict[str, Any]:
        # Without the cached hash: string hashes differ between processes.
        return {name: getattr(self, name) for name in self._fields}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__["_k"] = tuple(state[name] for name in self._fields)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


class ScalarType(Frozen):
    """A scalar element type, named as MLIR names it (`f32`, `i8`, `ui8`, ...).

    Interned as TensorType is: one object per distinct scalar type (the few
    below, kept for good), compared and hashed by identity.
    """

    _fields = __match_args__ = ("name", "bits", "kind")
    name: str
    bits: int
    kind: str  # "float" | "signed" | "unsigned" | "bool" | "complex" | "opaque"

    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __new__(cls, name: str, bits: int, kind: str) -> ScalarType:
        key = (name, bits, kind)
        known = _SCALAR_TYPES.get(key)
        if known is None:
            known = object.__new__(cls)
            known._set(name, bits, kind)
            known = _SCALAR_TYPES.setdefault(key, known)
        return known

    def __reduce__(self) -> tuple[Any, ...]:
        return ScalarType, self._k

    def __str__(self) -> str:
        return self.name

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("signed", "unsigned")

    @property
    def is_signed(self) -> bool:
        return self.kind == "signed"

    @property
    def min_value(self) -> int:
        if self.kind == "signed":
            return -(1 << (self.bits - 1))
        if self.kind in ("unsigned", "bool"):
            return 0
        raise IRError(f"{self.name} has no integer range")

    @property
    def max_value(self) -> int:
        if self.kind == "signed":
            return (1 << (self.bits - 1)) - 1
        if self.kind == "unsigned":
            return (1 << self.bits) - 1
        if self.kind == "bool":
            return 1
        raise IRError(f"{self.name} has no integer range")


# (name, bits, kind) -> the one ScalarType of them
_SCALAR_TYPES: dict[tuple[str, int, str], ScalarType] = {}

f64 = ScalarType("f64", 64, "float")
f32 = ScalarType("f32", 32, "float")
f16 = ScalarType("f16", 16, "float")
bf16 = ScalarType("bf16", 16, "float")
f8e4m3 = ScalarType("f8E4M3FN", 8, "float")
f8e5m2 = ScalarType("f8E5M2", 8, "float")
i1 = ScalarType("i1", 1, "bool")
i4 = ScalarType("i4", 4, "signed")
i8 = ScalarType("i8", 8, "signed")
i16 = ScalarType("i16", 16, "signed")
i32 = ScalarType("i32", 32, "signed")
i48 = ScalarType("i48", 48, "signed")
i64 = ScalarType("i64", 64, "signed")
u8 = ScalarType("ui8", 8, "unsigned")
u16 = ScalarType("ui16", 16, "unsigned")
u32 = ScalarType("ui32", 32, "unsigned")
u64 = ScalarType("ui64", 64, "unsigned")
complex64 = ScalarType("complex<f32>", 64, "complex")
complex128 = ScalarType("complex<f64>", 128, "complex")
string = ScalarType("!tf_type.string", 0, "opaque")
resource = ScalarType("!tf_type.resource", 0, "opaque")
variant = ScalarType("!tf_type.variant", 0, "opaque")

SCALAR_TYPES: dict[str, ScalarType] = {
    t.name: t
    for t in (f64, f32, f16, bf16, f8e4m3, f8e5m2, i1, i4, i8, i16, i32, i48, i64,
              u8, u16, u32, u64, complex64, complex128, string, resource, variant)
}


def scalar_type(name: str) -> ScalarType:
    """Look a scalar type up by its MLIR name (`u8` is accepted for `ui8`)."""
    if name.startswith("u") and not name.startswith("ui"):
        name = "ui" + name[1:]
    try:
        return SCALAR_TYPES[name]
    except KeyError:
        raise IRError(f"unknown element type {name!r}") from None


def _storage_name(storage: ScalarType) -> str:
    # The quant dialect spells unsigned storage `u8`, not `ui8`.
    return "u" + storage.name[2:] if storage.kind == "unsigned" else storage.name


def mlir_float(value: float) -> str:
    """A finite float as an MLIR float literal: Python's shortest round-trip repr.

    MLIR's float literal needs a `.` (`1e-05` lexes as an integer), so one is
    added where `repr` leaves it out: `1e-05` -> `1.0e-05`.
    """
    text = repr(float(value))
    if "." not in text and "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


def _format_scale(scale: float) -> str:
    return mlir_float(scale)


def _format_params(scale: float, zero_point: int) -> str:
    return _format_scale(scale) + (f":{zero_point}" if zero_point != 0 else "")


def _check_storage(storage: ScalarType, expressed: ScalarType,
                   storage_min: int | None, storage_max: int | None) -> tuple[int, int]:
    # ScalarType's is_integer, is_float, min_value and max_value, read once each:
    # every quantized tensor of a model comes through here.
    kind = storage.kind
    if kind != "signed" and kind != "unsigned":
        raise IRError(f"quantized storage type must be an integer type, got {storage}")
    if expressed.kind != "float":
        raise IRError(f"quantized expressed type must be a float type, got {expressed}")
    bits = storage.bits
    if kind == "signed":
        least, most = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        least, most = 0, (1 << bits) - 1
    lo = least if storage_min is None else int(storage_min)
    hi = most if storage_max is None else int(storage_max)
    # MLIR requires min < max (`i8<5:5>` does not parse).
    if not least <= lo < hi <= most:
        raise IRError(f"storage bounds {lo}:{hi} do not fit {storage} (min < max required)")
    return lo, hi


class UniformQuantized(Frozen):
    """`!quant.uniform<storage<min:max>:expressed, scale:zero_point>` (per tensor)."""

    _fields = __match_args__ = ("storage", "expressed", "scale", "zero_point", "storage_min",
                                "storage_max")
    storage: ScalarType
    expressed: ScalarType
    scale: float
    zero_point: int
    storage_min: int
    storage_max: int

    def __init__(self, storage: ScalarType, expressed: ScalarType, scale: float,
                 zero_point: int = 0, storage_min: int | None = None,
                 storage_max: int | None = None) -> None:
        lo, hi = _check_storage(storage, expressed, storage_min, storage_max)
        scale = float(scale)
        zero_point = int(zero_point)
        # _set, written out: a model's every quantized tensor has one of these.
        state = self.__dict__
        state["storage"], state["expressed"], state["scale"] = storage, expressed, scale
        state["zero_point"], state["storage_min"], state["storage_max"] = zero_point, lo, hi
        state["_k"] = (storage, expressed, scale, zero_point, lo, hi)
        if not scale > 0 or not math.isfinite(scale):
            raise IRError(f"quantization scale must be positive and finite, got {scale}")

    @property
    def bits(self) -> int:
        return self.storage.bits

    def storage_text(self) -> str:
        text = _storage_name(self.storage)
        if (self.storage_min, self.storage_max) != (self.storage.min_value, self.storage.max_value):
            text += f"<{self.storage_min}:{self.storage_max}>"
        return text

    def __str__(self) -> str:
        text = self.__dict__.get("_str")  # reports spell each op's types
        if text is None:
            params = _format_params(self.scale, self.zero_point)
            text = self.__dict__["_str"] = (f"!quant.uniform<{self.storage_text()}:"
                                            f"{self.expressed}, {params}>")
        return text


class _FromArrays:
    """A field of a per-axis type made from numpy arrays (`from_arrays`): the
    tuple is made on first read and kept in the instance, whose own entry a
    later read then finds first (this descriptor defines no `__set__`)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = instance._from_arrays(self.name)
        instance.__dict__[self.name] = value
        return value


class UniformQuantizedPerAxis(Frozen):
    """`!quant.uniform<storage:expressed:axis, {s0:zp0, s1:zp1, ...}>`.

    The integrity rules that depend on the tensor (rank > axis, axis size ==
    number of scales) are checked when a TensorType is built with this element.

    A type read from a model (`from_arrays`) keeps its scales and zero points
    as numpy arrays (`scales_array`, `zero_points_array`, which legalization
    computes with) and makes the tuples of Python numbers only if they are
    asked for: a model's per-channel weights have a scale per output channel.
    """

    _fields = __match_args__ = ("storage", "expressed", "axis", "scales", "zero_points",
                                "storage_min", "storage_max")
    storage: ScalarType
    expressed: ScalarType
    axis: int
    scales: tuple[float, ...] = _FromArrays()  # type: ignore[assignment]
    zero_points: tuple[int, ...] = _FromArrays()  # type: ignore[assignment]
    storage_min: int
    storage_max: int
    _k = _FromArrays()  # type: ignore[assignment]

    def __init__(self, storage: ScalarType, expressed: ScalarType, axis: int,
                 scales: tuple[float, ...], zero_points: tuple[int, ...],
                 storage_min: int | None = None, storage_max: int | None = None) -> None:
        lo, hi = _check_storage(storage, expressed, storage_min, storage_max)
        # map() rather than generators: a per-channel type has one entry per channel.
        scales = tuple(map(float, scales))
        zero_points = tuple(map(int, zero_points))
        self._fill(storage, expressed, axis, scales, zero_points, lo, hi)
        if len(scales) != len(zero_points) or not scales:
            raise IRError("per-axis quantization needs one zero point per scale, and at least one")
        if axis < 0:
            raise IRError(f"quantized dimension must be non-negative, got {axis}")
        if not all(map(math.isfinite, scales)) or min(scales) <= 0:
            raise IRError("quantization scales must be positive and finite")

    def _fill(self, storage: ScalarType, expressed: ScalarType, axis: int,
              scales: tuple[float, ...], zero_points: tuple[int, ...], lo: int, hi: int) -> None:
        # _set, written out: a model's every per-channel tensor has one of these.
        state = self.__dict__
        state["storage"], state["expressed"], state["axis"] = storage, expressed, axis
        state["scales"], state["zero_points"] = scales, zero_points
        state["storage_min"], state["storage_max"] = lo, hi
        state["_k"] = (storage, expressed, axis, scales, zero_points, lo, hi)

    def _from_arrays(self, name: str) -> Any:
        """A tuple field (or `_k`) of a type made by `from_arrays`, each made
        apart: a count of scales, say, needs no zero points."""
        state = self.__dict__
        if name == "scales":
            return tuple(state["_given_scales"].tolist())
        if name == "zero_points":
            return tuple(state["_zero_points_array"].tolist())
        return (self.storage, self.expressed, self.axis, self.scales, self.zero_points,
                self.storage_min, self.storage_max)

    @classmethod
    def from_arrays(cls, storage: ScalarType, expressed: ScalarType, axis: int,
                    scales: np.ndarray, zero_points: np.ndarray) -> UniformQuantizedPerAxis:
        """The type of scales and zero points held in numpy arrays (an importer's
        view of a model): the same type and checks as the constructor's, the
        checks made on the arrays rather than on one Python number at a time.
        Both are one-dimensional, and kept as read-only views (`scales_array`
        widens the scales to float64 when asked)."""
        lo, hi = _check_storage(storage, expressed, None, None)
        if scales.size != zero_points.size or not scales.size:
            raise IRError("per-axis quantization needs one zero point per scale, and at least one")
        if axis < 0:
            raise IRError(f"quantized dimension must be non-negative, got {axis}")
        # Positive and finite: a NaN makes the least one NaN, which is not > 0.
        # (The ufuncs' own reductions: `scales.min()` adds a Python layer.)
        least, greatest = np.minimum.reduce(scales), np.maximum.reduce(scales)
        if not (least > 0 and greatest < np.inf):
            raise IRError("quantization scales must be positive and finite")
        self = cls.__new__(cls)
        # Read-only views of the caller's arrays (a model's own, for the importer),
        # taken as they are: each numpy call costs, and a model has a per-channel
        # type per weight tensor.
        scales = scales.view()
        scales.setflags(write=False)
        zero_points = zero_points.view()
        zero_points.setflags(write=False)
        state = self.__dict__
        state["storage"], state["expressed"], state["axis"] = storage, expressed, axis
        state["storage_min"], state["storage_max"] = lo, hi
        state["_given_scales"], state["_zero_points_array"] = scales, zero_points
        state["_scale_bounds"] = (float(least), float(greatest))
        return self

    @property
    def scales_array(self) -> np.ndarray:
        """The scales as a read-only float64 array (the Python floats of `scales`)."""
        state = self.__dict__
        array = state.get("_scales_array")
        if array is None:
            given = state.get("_given_scales")
            array = (np.array(self.scales, dtype=np.float64) if given is None
                     else given.astype(np.float64))
            array.setflags(write=False)
            state["_scales_array"] = array
        return array

    @property
    def zero_points_array(self) -> np.ndarray:
        """The zero points as a read-only integer array (int64, or the integer
        type `from_arrays` was given)."""
        array = self.__dict__.get("_zero_points_array")
        if array is None:
            array = np.array(self.zero_points, dtype=np.int64)
            array.setflags(write=False)
            self.__dict__["_zero_points_array"] = array
        return array

    @property
    def scale_count(self) -> int:
        """How many scales (and zero points) the type has: the quantized axis's size."""
        array = self.__dict__.get("_zero_points_array")
        return len(array) if array is not None else len(self.scales)

    @property
    def scale_bounds(self) -> tuple[float, float]:
        """The least and the greatest scale, worked out once (a model's checks ask
        for them, and a per-channel type has one scale per channel)."""
        bounds = self.__dict__.get("_scale_bounds")
        if bounds is None:
            bounds = self.__dict__["_scale_bounds"] = (min(self.scales), max(self.scales))
        return bounds

    @property
    def zero_point_bounds(self) -> tuple[int, int]:
        """The least and the greatest zero point, worked out once (weights mostly
        have all zero: one pass over the array tells those)."""
        bounds = self.__dict__.get("_zero_point_bounds")
        if bounds is None:
            array = self.__dict__.get("_zero_points_array")
            if array is None:
                bounds = (min(self.zero_points), max(self.zero_points))
            elif not np.count_nonzero(array):  # (cheaper than `array.any()`)
                bounds = (0, 0)
            else:
                bounds = (int(np.minimum.reduce(array)), int(np.maximum.reduce(array)))
            self.__dict__["_zero_point_bounds"] = bounds
        return bounds

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if other.__class__ is not self.__class__ or not isinstance(other, UniformQuantizedPerAxis):
            return NotImplemented
        mine, theirs = self.__dict__, other.__dict__
        if "_k" in mine or "_k" in theirs:
            return self._k == other._k
        # Both made by from_arrays: compared on their arrays, without making the tuples.
        return (self.storage is other.storage and self.expressed is other.expressed
                and self.axis == other.axis and self.storage_min == other.storage_min
                and self.storage_max == other.storage_max
                and np.array_equal(mine["_given_scales"], theirs["_given_scales"])
                and np.array_equal(mine["_zero_points_array"], theirs["_zero_points_array"]))

    def __hash__(self) -> int:
        # From the scales' count and end values, not from every scale: equal
        # types still hash alike, and interning a model's per-channel types
        # would otherwise hash each of their scales.
        cached = self.__dict__.get("_hash")
        if cached is None:
            state = self.__dict__
            scales = state.get("_given_scales")
            if scales is not None:
                zero_points = state["_zero_points_array"]
                ends = (float(scales[0]), float(scales[-1]), int(zero_points[0]),
                        int(zero_points[-1]))
            else:
                scales, zero_points = self.scales, self.zero_points
                ends = (scales[0], scales[-1], zero_points[0], zero_points[-1])
            cached = state["_hash"] = hash(
                (self.storage, self.expressed, self.axis, len(scales), *ends,
                 self.storage_min, self.storage_max))
        return cached

    @property
    def bits(self) -> int:
        return self.storage.bits

    storage_text = UniformQuantized.storage_text

    def __str__(self) -> str:
        params = ",".join(_format_params(s, z) for s, z in zip(self.scales, self.zero_points))
        return (f"!quant.uniform<{self.storage_text()}:{self.expressed}:{self.axis}, "
                f"{{{params}}}>")


class UniformQuantizedBlockwise(Frozen):
    """Blockwise quantization (TFLite's `BlockwiseQuantization` details, which
    AI Edge Quantizer writes for XNNPACK): the last axis is cut into blocks of
    `block_size` values and block k of row r has its own scale and zero point,
    so `scales` (row-major, shape `scales_shape`) is the tensor's shape with
    the last dimension divided by `block_size`. MLIR's quant dialect has no
    such type: its text form is for reading only.
    """

    _fields = __match_args__ = ("storage", "expressed", "block_size", "scales_shape", "scales",
                                "zero_points", "storage_min", "storage_max")
    storage: ScalarType
    expressed: ScalarType
    block_size: int
    scales_shape: tuple[int, ...]
    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    storage_min: int
    storage_max: int

    def __init__(self, storage: ScalarType, expressed: ScalarType, block_size: int,
                 scales_shape: tuple[int, ...], scales: tuple[float, ...],
                 zero_points: tuple[int, ...]) -> None:
        lo, hi = _check_storage(storage, expressed, None, None)
        scales = tuple(float(s) for s in scales)
        zero_points = tuple(int(z) for z in zero_points)
        scales_shape = tuple(int(d) for d in scales_shape)
        self._set(storage, expressed, int(block_size), scales_shape, scales, zero_points,
                  lo, hi)
        if self.block_size < 1:
            raise IRError(f"block size must be positive, got {block_size}")
        if len(scales) != math.prod(scales_shape) or len(zero_points) != len(scales) \
                or not scales:
            raise IRError(f"blockwise quantization of shape {list(scales_shape)} needs that "
                          f"many scales and zero points, got {len(scales)} and "
                          f"{len(zero_points)}")
        # A block of zeros gets scale 0 (AI Edge Quantizer writes such blocks).
        if not all(s >= 0 and math.isfinite(s) for s in scales):
            raise IRError("blockwise quantization scales must be non-negative and finite")

    @property
    def bits(self) -> int:
        return self.storage.bits

    storage_text = UniformQuantized.storage_text

    def __str__(self) -> str:
        shape = "x".join(str(d) for d in self.scales_shape)
        return (f"!quant.uniform<{self.storage_text()}:{self.expressed}, blocks of "
                f"{self.block_size}, {shape} scales>")


QuantizedType = Union[UniformQuantized, UniformQuantizedPerAxis, UniformQuantizedBlockwise]
ElementType = Union[ScalarType, UniformQuantized, UniformQuantizedPerAxis,
                    UniformQuantizedBlockwise]


_QUANTIZED_TYPES = (UniformQuantized, UniformQuantizedPerAxis, UniformQuantizedBlockwise)
# The classes themselves, for a test by class before isinstance (subclasses).
_QUANTIZED_CLASSES = frozenset(_QUANTIZED_TYPES)


def is_quantized(element: ElementType) -> bool:
    cls = element.__class__
    return cls is not ScalarType and (cls in _QUANTIZED_CLASSES
                                      or isinstance(element, _QUANTIZED_TYPES))


def storage_type(element: ElementType) -> ScalarType:
    """The integer type a quantized element is stored as; other types unchanged."""
    cls = element.__class__
    if cls is ScalarType:
        return element  # type: ignore[return-value]
    if cls in _QUANTIZED_CLASSES or isinstance(element, _QUANTIZED_TYPES):
        return element.storage  # type: ignore[union-attr]
    return element  # type: ignore[return-value]


def expressed_type(element: ElementType) -> ScalarType:
    return element.expressed if is_quantized(element) else element  # type: ignore[union-attr]


DYNAMIC = -1


class TensorType(Frozen):
    """A tensor type: `shape` is a tuple (-1 marks a dynamic dim), or None if unranked.

    Interned: equal tensor types are one object while any of them lives, so
    they compare and hash by identity, in C (every pass keys dicts by types).
    Every way to make one (the constructor, `with_element`, `replace`,
    unpickling, copying) goes through `_interned`.
    """

    _fields = __match_args__ = ("shape", "element")
    shape: tuple[int, ...] | None
    element: ElementType

    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __new__(cls, shape: tuple[int, ...] | None, element: ElementType) -> TensorType:
        if shape is not None:
            shape = tuple(map(int, shape))
        ref = _TENSOR_TYPES.get((shape, element))
        if ref is not None:
            known = ref()
            if known is not None:
                return known
        _check_tensor_type(shape, element)
        return _interned(shape, element)

    def __reduce__(self) -> tuple[Any, ...]:
        return TensorType, (self.shape, self.element)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and DYNAMIC not in self.shape

    @property
    def num_elements(self) -> int:
        if not self.is_static:
            raise IRError(f"{self} has no static element count")
        return int(np.prod(self.shape, dtype=np.int64))

    def with_element(self, element: ElementType) -> TensorType:
        if element.__class__ is not ScalarType:
            return TensorType(self.shape, element)
        # This shape passed its checks when this type was made, and a plain
        # element brings none.
        ref = _TENSOR_TYPES.get((self.shape, element))
        known = ref() if ref is not None else None
        return known if known is not None else _interned(self.shape, element)

    def with_shape(self, shape: tuple[int, ...] | None) -> TensorType:
        return TensorType(shape, self.element)

    def __str__(self) -> str:
        if self.shape is None:
            return f"tensor<*x{self.element}>"
        dims = "".join(("?" if d == DYNAMIC else str(d)) + "x" for d in self.shape)
        return f"tensor<{dims}{self.element}>"


def _check_tensor_type(shape: tuple[int, ...] | None, element: ElementType) -> None:
    if shape is None:
        return
    if shape and min(shape) < DYNAMIC:
        raise IRError(f"invalid tensor shape {shape}")
    if element.__class__ is ScalarType:
        return
    # MLIR's per-axis integrity rules; an unranked tensor is allowed (its
    # rank and axis size are only known at run time).
    if isinstance(element, UniformQuantizedPerAxis):
        axis = element.axis
        if axis >= len(shape):
            raise IRError(f"quantized dimension {axis} is out of range for rank "
                          f"{len(shape)}")
        size = shape[axis]
        count = element.scale_count
        if size != DYNAMIC and size != count:
            raise IRError(f"quantized dimension {axis} has size {size} but "
                          f"{count} scales are given")
    if isinstance(element, UniformQuantizedBlockwise):
        blocks = element.scales_shape
        expected = shape[:-1] + (shape[-1] // element.block_size,) if shape else ()
        if not shape or shape[-1] % element.block_size or blocks != expected:
            raise IRError(f"blocks of {element.block_size} along the last axis of shape "
                          f"{list(shape)} need {list(expected)} scales, got {list(blocks)}")


class _TypeRef(weakref.ref):
    """A weak reference to an interned TensorType that knows its table key."""

    __slots__ = ("key",)


# (shape, element) -> a weak reference to the one TensorType of them. Weak, so
# that a long-lived process converting model after model keeps only the types
# still in use; an entry goes when its type does.
_TENSOR_TYPES: dict[tuple[Any, ...], _TypeRef] = {}
_INTERNING = _thread.allocate_lock()


def _forget(ref: _TypeRef) -> None:
    # A newer entry may have taken the key while this one waited to be collected.
    if _TENSOR_TYPES.get(ref.key) is ref:
        del _TENSOR_TYPES[ref.key]


def _interned(shape: tuple[int, ...] | None, element: ElementType) -> TensorType:
    """The TensorType of a checked shape tuple and `element`: the existing one, or
    a new one entered in the table."""
    key = (shape, element)
    with _INTERNING:  # two threads making the same type make one
        ref = _TENSOR_TYPES.get(key)
        known = ref() if ref is not None else None
        if known is not None:
            return known
        new = object.__new__(TensorType)
        state = new.__dict__
        state["shape"] = shape
        state["element"] = element
        state["_k"] = key
        ref = _TypeRef(new, _forget)
        ref.key = key
        _TENSOR_TYPES[key] = ref
        return new


class ShapeType(Frozen):
    """TOSA's `!tosa.shape<rank>`: a compile-time list of index values."""

    _fields = __match_args__ = ("rank",)
    rank: int

    def __init__(self, rank: int) -> None:
        self._set(rank)

    def __str__(self) -> str:
        return f"!tosa.shape<{self.rank}>"


class NoneType(Frozen):
    """MLIR's `none`: the type of an omitted optional operand (`tfl.no_value`)."""

    def __str__(self) -> str:
        return "none"


Type = Union[TensorType, ShapeType, NoneType]

_NUMPY_DTYPES: dict[str, str] = {
    "f64": "float64", "f32": "float32", "f16": "float16", "i1": "bool",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "ui8": "uint8", "ui16": "uint16", "ui32": "uint32", "ui64": "uint64",
    "complex<f32>": "complex64", "complex<f64>": "complex128",
    # No native numpy dtype: int4 values are held unpacked in int8, int48 in int64.
    "i4": "int8", "i48": "int64",
}


_NUMPY_DTYPE_OBJECTS = {name: np.dtype(dtype) for name, dtype in _NUMPY_DTYPES.items()}


def numpy_dtype(element: ElementType) -> np.dtype:
    """The numpy dtype that holds values of `element` (quantized: its storage)."""
    scalar = storage_type(element)
    dtype = _NUMPY_DTYPE_OBJECTS.get(scalar.name)
    if dtype is not None:
        return dtype
    import ml_dtypes  # lazily: only the rare float formats need it

    extra = {"bf16": ml_dtypes.bfloat16, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
             "f8E5M2": ml_dtypes.float8_e5m2}
    if scalar.name in extra:
        return np.dtype(extra[scalar.name])
    raise IRError(f"{scalar} has no numpy representation")
