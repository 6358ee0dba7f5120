"""Element types and constant data as the `.tosa` flatbuffer stores them.

Data is little-endian and packed per TOSA DType: BOOL one byte per element,
INT4 two elements per byte (element 2k in the low nibble, 2k+1 in the high
one), INT48 six bytes per element, BF16/FP8 their raw bits. Vectors are padded
with zeros to a multiple of 8 bytes (the schema's `force_align: 8` plus the
serialization library's padding rule). Shapes (`TosaShape.data`) are int64.

Encoding returns a flat uint8 array that is a view of the input where the
layout allows it (int8/int16/int32/fp16/fp32 on a little-endian host), so
large weights are not copied before they reach the file.
"""

from __future__ import annotations

import math

import numpy as np

from tfl2tosa.errors import IRError
from tfl2tosa.ir.types import ElementType, ScalarType, numpy_dtype, scalar_type, storage_type
from tfl2tosa.tosa.fbs.tosa_builders import DType

# Our scalar type name -> flatbuffer DType. TOSA integers are signless: an
# unsigned storage type (only meaningful to RESCALE's *_unsigned flags) is
# written as the signed type of the same width, bits unchanged.
DTYPE_BY_ELEMENT: dict[str, int] = {
    "i1": DType.BOOL, "i4": DType.INT4, "i8": DType.INT8, "i16": DType.INT16,
    "i32": DType.INT32, "i48": DType.INT48, "f32": DType.FP32, "f16": DType.FP16,
    "bf16": DType.BF16, "f8E4M3FN": DType.FP8E4M3, "f8E5M2": DType.FP8E5M2,
    "ui8": DType.INT8, "ui16": DType.INT16,
}
ELEMENT_BY_DTYPE: dict[int, ScalarType] = {
    dtype: scalar_type(name) for name, dtype in DTYPE_BY_ELEMENT.items()
    if not name.startswith("ui")
}
DTYPE_NAMES: dict[int, str] = {
    value: name for name, value in vars(DType).items() if not name.startswith("_")
}

# Bytes per element for the byte-aligned types (INT4 is handled apart).
_ITEM_SIZE = {DType.BOOL: 1, DType.INT8: 1, DType.INT16: 2, DType.INT32: 4, DType.INT48: 6,
              DType.FP32: 4, DType.FP16: 2, DType.BF16: 2, DType.FP8E4M3: 1,
              DType.FP8E5M2: 1}
# Little-endian numpy dtype of the stored bytes, for the types numpy holds natively.
_STORED = {DType.INT8: np.dtype("<i1"), DType.INT16: np.dtype("<i2"),
           DType.INT32: np.dtype("<i4"), DType.FP32: np.dtype("<f4"),
           DType.FP16: np.dtype("<f2")}
# DType -> the numpy dtype its stored bytes are when they are the values as they are
# (stored little-endian in the element type's own numpy dtype): decoding is a view.
PLAIN_DTYPE_BY_DTYPE: dict[int, np.dtype] = {
    dtype: stored for dtype, stored in _STORED.items()
    if stored == numpy_dtype(ELEMENT_BY_DTYPE[dtype])
}


def dtype_of(element: ElementType) -> int:
    """The flatbuffer DType for an element type (quantized: its storage type)."""
    scalar = storage_type(element)
    try:
        return DTYPE_BY_ELEMENT[scalar.name]
    except KeyError:
        raise IRError(f"element type {scalar} has no TOSA flatbuffer DType") from None


def padded_size(nbytes: int) -> int:
    return (nbytes + 7) & ~7


def stored_size(dtype: int, count: int) -> int:
    """Bytes that `count` elements of `dtype` occupy, before padding."""
    if dtype == DType.INT4:
        return (count + 1) // 2
    return _ITEM_SIZE[dtype] * count


def _as_integers(values: np.ndarray, lo: int, hi: int, what: str) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind not in "iub":
        raise IRError(f"{what} data must be integers, got {array.dtype}")
    if array.size and (int(array.min()) < lo or int(array.max()) > hi):
        raise IRError(f"{what} data out of range [{lo}, {hi}]")
    return array


def encode_data(values: np.ndarray, element: ElementType) -> np.ndarray:
    """Flat uint8 array of `values` as stored for `element` (unpadded)."""
    scalar = storage_type(element)
    dtype = dtype_of(scalar)
    array = np.asarray(values)
    target = _STORED.get(dtype)
    if target is not None:
        if array.dtype != target:
            if target.kind == "i":
                # Unsigned storage is written as the same bits, signed.
                signed = scalar.kind == "signed"
                lo = scalar.min_value if signed else 0
                hi = scalar.max_value
                array = _as_integers(array, lo, hi, str(scalar))
                if not signed:
                    array = array.astype(f"<u{target.itemsize}")
            array = array.astype(target)
        return np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    if dtype == DType.BOOL:
        return np.ascontiguousarray(array != 0, dtype=np.uint8).reshape(-1)
    if dtype == DType.INT4:
        nibbles = _as_integers(array, -8, 7, "i4").reshape(-1).astype(np.uint8) & 0x0F
        if nibbles.size % 2:
            nibbles = np.append(nibbles, np.uint8(0))
        return nibbles[0::2] | (nibbles[1::2] << 4)
    if dtype == DType.INT48:
        wide = _as_integers(array, -(1 << 47), (1 << 47) - 1, "i48").astype("<i8").reshape(-1)
        return np.ascontiguousarray(wide.view(np.uint8).reshape(-1, 8)[:, :6]).reshape(-1)
    # BF16 / FP8: the raw bits of the ml_dtypes representation.
    stored = np.ascontiguousarray(array.astype(numpy_dtype(scalar), copy=False))
    return stored.reshape(-1).view(np.uint8)


# Element types whose values are stored as their own numpy dtype (little-endian
# int8/16/32, fp16, fp32): filled in as decode_data meets them.
_PLAIN_STORAGE: dict[ElementType, np.dtype] = {}


def decode_data(raw: np.ndarray, element: ScalarType, shape: tuple[int, ...]) -> np.ndarray:
    """`shape`-shaped array of `element` values from stored bytes (a view where possible).

    Raises IRError if `raw` holds fewer bytes than the shape needs.
    """
    count = math.prod(shape)  # Python ints: exact, and cheaper than a numpy call
    try:
        stored = _PLAIN_STORAGE.get(element)
    except TypeError:  # an element type that cannot be hashed
        stored = None
    if stored is not None:
        # The common case, a constant model's weights: the stored bytes are the
        # values, a view of them in the element's own numpy dtype.
        need = stored.itemsize * count
        if raw.size < need:
            raise IRError(f"{element}{list(shape)} needs {need} data bytes, found {raw.size}")
        return raw[:need].view(stored).reshape(shape)
    dtype = dtype_of(element)
    need = stored_size(dtype, count)
    if raw.size < need:
        raise IRError(f"{element}{list(shape)} needs {need} data bytes, found {raw.size}")
    raw = raw[:need]
    if dtype in _STORED and element.__hash__ is not None \
            and _STORED[dtype] == numpy_dtype(element):
        _PLAIN_STORAGE[element] = _STORED[dtype]
    if dtype in _STORED:
        values = raw.view(_STORED[dtype])
    elif dtype == DType.BOOL:
        values = raw != 0
    elif dtype == DType.INT4:
        pairs = raw.view(np.int8)
        low = (pairs << 4) >> 4  # sign-extend the low nibble
        high = pairs >> 4
        values = np.stack([low, high], axis=-1).reshape(-1)[:count]
    elif dtype == DType.INT48:
        padded = np.zeros((count, 8), dtype=np.uint8)
        padded[:, :6] = raw.reshape(count, 6)
        values = (padded.view("<i8").reshape(-1) << 16) >> 16  # sign-extend bit 47
    else:
        values = raw.view(numpy_dtype(element))
    return values.astype(numpy_dtype(element), copy=False).reshape(shape)


def decode_data_from(buffer: bytes, start: int, length: int, element: ScalarType,
                     shape: tuple[int, ...]) -> np.ndarray:
    """decode_data of buffer[start:start + length], which must lie inside `buffer`: for
    an element stored as its own numpy dtype, one read-only view of the buffer made
    directly (no byte view to slice and reinterpret)."""
    try:
        stored = _PLAIN_STORAGE.get(element)
    except TypeError:  # an element type that cannot be hashed
        stored = None
    if stored is None:
        return decode_data(np.frombuffer(buffer, np.uint8, count=length, offset=start),
                           element, shape)
    count = math.prod(shape)
    need = stored.itemsize * count
    if length < need:
        raise IRError(f"{element}{list(shape)} needs {need} data bytes, found {length}")
    return np.frombuffer(buffer, stored, count=count, offset=start).reshape(shape)


def encode_shape(values: list[int] | tuple[int, ...] | np.ndarray) -> np.ndarray:
    """TosaShape data: int64 little-endian."""
    return np.ascontiguousarray(np.asarray(values, dtype="<i8")).reshape(-1).view(np.uint8)


def decode_shape(raw: np.ndarray, rank: int) -> list[int]:
    if raw.size < 8 * rank:
        raise IRError(f"shape of rank {rank} needs {8 * rank} data bytes, found {raw.size}")
    return [int(v) for v in raw[:8 * rank].view("<i8")]
