"""TFLite tensors: their IR types (quantization included) and constant data.

Constant data is never copied: each constant is a read-only numpy view into
the model's memory (the mmap of the file, or the bytes given to `load`).
"""

from __future__ import annotations

import math
import struct
from functools import lru_cache
from typing import Any

import numpy as np

from tfl2tosa.errors import IRError, ModelError
from tfl2tosa.ir import types as t
from tfl2tosa.ir.types import (
    TensorType,
    UniformQuantized,
    UniformQuantizedBlockwise,
    UniformQuantizedPerAxis,
)
from tfl2tosa.tflite_import import flat
from tfl2tosa.tflite_import.flat import BOOL, I8, I32, U8, U32, U64, Table
from tfl2tosa.tflite_import.schema import ELEMENT_TYPES, element_type
from tfl2tosa.tflite_import.source import (CORRUPTION, Buffer, checked_length, checked_tables,
                                           int_vector, one_line, reading, text)

# No TFLite model has a tensor near this size (2**36 elements: 256 GiB of
# float32); a larger shape is corruption and must not reach an allocator.
MAX_ELEMENTS = 1 << 36

_FLOAT32 = np.dtype("<f4")  # QuantizationParameters.scale
_INT64 = np.dtype("<i8")    # QuantizationParameters.zero_point
_F32 = struct.Struct("<f")  # one scale, read without numpy
_I64 = struct.Struct("<q")  # one zero point



@lru_cache(maxsize=None)
def _sparsity_enums() -> tuple[dict[int, str], dict[int, type]]:
    """DimensionType names and SparseIndexVector classes (loaded for sparse models only)."""
    tflite = generated_package()
    return ({tflite.DimensionType.DENSE: "DENSE", tflite.DimensionType.SPARSE_CSR: "SPARSE_CSR"},
            {tflite.SparseIndexVector.Int32Vector: tflite.Int32Vector,
             tflite.SparseIndexVector.Uint16Vector: tflite.Uint16Vector,
             tflite.SparseIndexVector.Uint8Vector: tflite.Uint8Vector})


class TensorInfo:
    """What the importer needs to know about one TFLite tensor (a plain class:
    a dataclass costs far more to create at import)."""

    __slots__ = (
        "blockwise",
        "buffer",
        "index",
        "is_variable",
        "name",
        "shape_signature",
        "sparsity",
        "type",
    )

    def __init__(self, index: int, name: str, type: TensorType, buffer: int,
                 is_variable: bool, sparsity: dict[str, Any] | None,
                 shape_signature: tuple[int, ...] | None,
                 blockwise: Blockwise | None = None) -> None:
        self.index = index
        self.name = name
        self.type = type
        self.buffer = buffer
        self.is_variable = is_variable
        self.sparsity = sparsity
        self.shape_signature = shape_signature
        self.blockwise = blockwise


class Blockwise:
    """A tensor's `BlockwiseQuantization` details: the indices of the tensors
    holding its scales and zero points (None: all zero) and the block size.
    The type is completed by `blockwise_element` once every tensor is read."""

    __slots__ = ("block_size", "scales", "zero_points")

    def __init__(self, scales: int, zero_points: int | None, block_size: int) -> None:
        self.scales = scales
        self.zero_points = zero_points
        self.block_size = block_size


# QuantizationDetails union tag of BlockwiseQuantization (schema.fbs), which the
# `tflite` package predates; its table is read field by field.
_BLOCKWISE_DETAILS = 2


def read_tensor(tensor: Table, index: int, where: str, file_size: int) -> TensorInfo:
    """One Tensor table (schema.fbs: shape, type, buffer, name, quantization,
    is_variable, sparsity, shape_signature are its fields 0-7).

    Most tensors are read by `read_plain_tensor`; the others, and any that
    fails to read, by `read_tensor_checked`, which names what is wrong.
    """
    try:
        info = read_plain_tensor(tensor, index)
    except CORRUPTION:
        info = None
    return info if info is not None else read_tensor_checked(tensor, index, where, file_size)


def read_plain_tensor(tensor: Table, index: int) -> TensorInfo | None:
    """A dense tensor, quantized per tensor or per axis or not at all, read
    without a diagnostic context per field: None for any other tensor and
    for any field `read_tensor_checked` would refuse. It raises what reading
    a corrupt table raises (CORRUPTION); `read_tensor_checked` then reads the
    tensor again and says what is wrong. Each table's vtable is read once."""
    buf, pos = tensor.buf, tensor.pos
    fields = flat.field_offsets(tensor) + _ABSENT_TENSOR_FIELDS
    (shape_at, type_at, buffer_at, name_at, quantization_at, variable_at, sparsity_at,
     signature_at) = fields[:8]
    if sparsity_at:  # sparse tensors take the long way
        return None
    if name_at:
        at = pos + name_at
        start = at + U32.unpack_from(buf, at)[0]
        length = U32.unpack_from(buf, start)[0]
        name = bytes(buf[start + 4:start + 4 + length]).decode("utf-8")
    else:
        name = ""
    shape = flat.int32_tuple(buf, pos + shape_at) if shape_at else ()
    if shape and min(shape) < -1:
        return None
    count = 1
    for d in shape:
        count *= d if d > 1 else 1
    if count > MAX_ELEMENTS:
        return None
    signature = flat.int32_tuple(buf, pos + signature_at) if signature_at else ()
    scalar = ELEMENT_TYPES.get(I8.unpack_from(buf, pos + type_at)[0] if type_at else 0)
    if scalar is None:
        return None
    buffer = U32.unpack_from(buf, pos + buffer_at)[0] if buffer_at else 0
    is_variable = BOOL.unpack_from(buf, pos + variable_at)[0] if variable_at else False
    element: t.ElementType = scalar
    if quantization_at:
        at = pos + quantization_at
        quantization = Table(buf, at + U32.unpack_from(buf, at)[0])
        if quantization.scalar(12, U8) == _BLOCKWISE_DETAILS:
            return None
        scales_start, scale_count = quantization.vector(8)
        if scale_count == 1 and scalar.is_integer:
            # One scale: its numbers read as they are, where `np.frombuffer`
            # would read them (and fail where it would fail).
            scale = _F32.unpack_from(buf, scales_start)[0]
            zero_points_start, zero_point_count = quantization.vector(10)
            quantization.scalar(16, I32)  # the axis, unused here but read
            if zero_point_count == 1:
                zero_point = _I64.unpack_from(buf, zero_points_start)[0]
            elif zero_point_count == 0 and zero_points_start <= len(buf):
                zero_point = 0
            else:
                return None
            element = UniformQuantized(scalar, t.f32, scale, zero_point)
            return TensorInfo(index, name, TensorType(shape, element), buffer, is_variable, None,
                              signature if signature and signature != shape else None)
        scales = quantization.array(8, _FLOAT32)
        if scales.size and scalar.is_integer:
            zero_points = quantization.array(10, _INT64)
            axis = quantization.scalar(16, I32)
            if zero_points.size == 0:
                zero_points = np.zeros(scales.size, dtype=np.int64)
            if zero_points.size != scales.size:
                return None
            if scales.size == 1:
                element = UniformQuantized(scalar, t.f32, float(scales[0]), int(zero_points[0]))
            else:
                if not 0 <= axis < len(shape):
                    return None
                element = UniformQuantizedPerAxis.from_arrays(scalar, t.f32, axis, scales,
                                                              zero_points)
    return TensorInfo(index, name, TensorType(shape, element), buffer, is_variable, None,
                      signature if signature and signature != shape else None)


# Pads a Tensor's field offsets to its eight fields (an older writer's vtable is shorter).
_ABSENT_TENSOR_FIELDS = (0,) * 8


def read_tensor_checked(tensor: Table, index: int, where: str, file_size: int) -> TensorInfo:
    """`read_tensor` for any tensor, with a diagnostic context per field."""
    what = f"{where} tensor {index}"
    with reading(what):
        name = text(tensor.string(10), f"{what} name")
        what = f"{where} tensor {index} {name!r}"
    with reading(f"{what} shape"):
        shape = _dims(tensor.array(4), what)
    with reading(f"{what} shape signature"):
        signature = tensor.array(18)
    with reading(what):
        scalar = element_type(tensor.scalar(6, I8), what)
        quantization = tensor.table(12)
        buffer = tensor.scalar(8, U32)
        is_variable = tensor.scalar(14, BOOL, False)
        sparsity_position = tensor.union_position(16)
    _check_size(shape, what)
    element = _quantized_element(quantization, scalar, shape, what) if quantization else scalar
    try:
        tensor_type = TensorType(shape, element)
    except IRError as exc:
        raise ModelError(f"corrupt model: {what}: {one_line(exc)}") from None
    sparsity = (read_sparsity(_generated(generated_package().SparsityParameters, tensor.buf,
                                         sparsity_position), what, file_size)
                if sparsity_position else None)
    blockwise = _blockwise_details(quantization, what) if quantization else None
    signature_dims = tuple(signature.tolist())
    return TensorInfo(index, name, tensor_type, buffer, is_variable, sparsity,
                      signature_dims if signature_dims and signature_dims != shape else None,
                      blockwise)


def generated_package() -> Any:
    """The `tflite` package (its generated classes load one by one, on first use)."""
    from tfl2tosa.tflite_import import tflite_package

    return tflite_package()


def _generated(table_class: type, buf: Buffer, position: int) -> Any:
    """The `tflite` package's accessor object for the table at `position`."""
    table = table_class()
    table.Init(buf, position)
    return table


def _blockwise_details(params: Table, what: str) -> Blockwise | None:
    """The BlockwiseQuantization table's fields (scales: int, zero_points: int,
    block_size: int; absent ones hold the default 0), or None for other
    quantization details. A zero_points field that is absent or negative
    (AI Edge Quantizer writes -1) means no zero-point tensor."""
    with reading(f"{what} quantization details"):
        if params.scalar(12, U8) != _BLOCKWISE_DETAILS:
            return None
        table = params.table(14)
        fields = [table.scalar(slot, I32, None) if table is not None else None
                  for slot in (4, 6, 8)]
    scales, zero_points, block_size = fields
    scales = scales or 0
    if scales < 0 or not block_size or block_size < 1:
        raise ModelError(f"corrupt model: {what}: blockwise quantization with scales tensor "
                         f"{scales} and block size {block_size}")
    return Blockwise(scales, zero_points if zero_points is not None and zero_points >= 0
                     else None, block_size)


def blockwise_element(info: TensorInfo, scales: np.ndarray, zero_points: np.ndarray | None,
                      what: str) -> UniformQuantizedBlockwise:
    """The element type of a blockwise-quantized tensor from its scale (and
    zero-point) tensors' values."""
    details = info.blockwise
    assert details is not None
    storage = t.storage_type(info.type.element)
    if not storage.is_integer or scales.dtype.kind != "f":
        raise ModelError(f"corrupt model: {what}: blockwise quantization of a {storage} tensor "
                         f"with {scales.dtype} scales")
    if zero_points is None:
        zero_points = np.zeros(scales.shape, dtype=np.int64)
    if zero_points.shape != scales.shape or zero_points.dtype.kind not in "iu":
        raise ModelError(f"corrupt model: {what}: blockwise zero points {list(zero_points.shape)} "
                         f"do not match scales {list(scales.shape)}")
    try:
        element = UniformQuantizedBlockwise(storage, t.f32, details.block_size, scales.shape,
                                            scales.astype(np.float64).reshape(-1).tolist(),
                                            zero_points.reshape(-1).tolist())
        TensorType(info.type.shape, element)
    except IRError as exc:
        raise ModelError(f"corrupt model: {what}: {one_line(exc)}") from None
    return element


def _dims(array: np.ndarray, what: str) -> tuple[int, ...]:
    dims = tuple(int(d) for d in array.tolist())
    if any(d < -1 for d in dims):
        raise ModelError(f"corrupt model: {what} has negative dimension in shape {list(dims)}")
    return dims


def _check_size(shape: tuple[int, ...], what: str) -> None:
    count = 1
    for d in shape:
        count *= max(d, 1)
    if count > MAX_ELEMENTS:
        raise ModelError(f"corrupt model: {what} declares {count} elements (shape "
                         f"{list(shape)}), more than any TFLite model holds")


def _quantized_element(params: Table, scalar: t.ScalarType, shape: tuple[int, ...],
                       what: str) -> t.ElementType:
    """The quantized element type of a tensor, or `scalar` if it is not quantized.

    TFLite stores scale[] and zero_point[]; one scale is per-tensor even when
    quantized_dimension is set; several are per-axis along
    quantized_dimension. Tensors with only min/max (no scale) and float
    tensors carrying scales are plain. TFLite records no narrow range, so the
    storage bounds stay the full range of the storage type.
    """
    what = f"{what} quantization"
    with reading(f"{what} scales"):
        scales = params.array(8, _FLOAT32)
    if scales.size == 0 or not scalar.is_integer:
        return scalar
    with reading(f"{what} zero points"):
        zero_points = params.array(10, _INT64)
    with reading(what):
        axis = params.scalar(16, I32)
    if zero_points.size == 0:
        # TFLite reads a missing zero point as 0.
        zero_points = np.zeros(scales.size, dtype=np.int64)
    if zero_points.size != scales.size:
        raise ModelError(f"corrupt model: {what} has {scales.size} scales but "
                         f"{zero_points.size} zero points")
    try:
        if scales.size == 1:
            return UniformQuantized(scalar, t.f32, float(scales[0]), int(zero_points[0]))
        if not 0 <= axis < len(shape):
            raise ModelError(f"corrupt model: {what}: quantized dimension {axis} is out of "
                             f"range for shape {list(shape)}")
        return UniformQuantizedPerAxis.from_arrays(scalar, t.f32, axis, scales, zero_points)
    except IRError as exc:
        raise ModelError(f"corrupt model: {what}: {one_line(exc)}") from None


def read_sparsity(params: Any, what: str, file_size: int) -> dict[str, Any]:
    """Sparsity parameters as plain data; index arrays stay views into the model."""
    what = f"{what} sparsity"
    result: dict[str, Any] = {
        "traversal_order": tuple(int_vector(params, "TraversalOrder", what).tolist()),
        "block_map": tuple(int_vector(params, "BlockMap", what).tolist()),
        "dim_metadata": [],
    }
    count = checked_length(params, "DimMetadata", 4, file_size, what)
    for i in range(count):
        with reading(f"{what} dimension {i}"):
            dim = params.DimMetadata(i)
            fmt = dim.Format()
            entry = {"format": _sparsity_enums()[0].get(fmt, f"UNKNOWN_{fmt}"),
                     "dense_size": int(dim.DenseSize()),
                     "array_segments": _index_vector(dim.ArraySegmentsType(),
                                                     dim.ArraySegments(), what),
                     "array_indices": _index_vector(dim.ArrayIndicesType(),
                                                    dim.ArrayIndices(), what)}
        result["dim_metadata"].append(entry)
    return result


def _index_vector(kind: int, table: Any, what: str) -> np.ndarray | None:
    vector_class = _sparsity_enums()[1].get(kind)
    if vector_class is None or table is None:
        return None
    vector = vector_class()
    vector.Init(table.Bytes, table.Pos)
    return _read_only(int_vector(vector, "Values", f"{what} index vector"))


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


class Buffers:
    """The model's buffer table: index -> (byte offset, byte length) in the file."""

    def __init__(self, model: Table, buf: Buffer, file_size: int) -> None:
        self.model = model
        self.buf = buf
        self.file_size = file_size
        # Model.buffers is the Model table's field 4.
        self.start, self.count = checked_tables(model, 12, file_size, "buffer table")
        self._spans: dict[int, tuple[int, int]] = {}

    def span(self, index: int, what: str) -> tuple[int, int]:
        if index in self._spans:
            return self._spans[index]
        if not 0 <= index < self.count:
            raise ModelError(f"corrupt model: {what} refers to buffer {index}, but the model "
                             f"has {self.count} buffers")
        with reading(f"buffer {index}"):
            # Buffer table: data [ubyte], offset ulong, size ulong.
            buffer = self.model.table_at(self.start, index)
            external_offset = buffer.scalar(6, U64)
            if external_offset > 1:
                # Models over 2 GB keep data after the flatbuffer; `offset` is from
                # the start of the file and only meaningful when > 1 (schema.fbs).
                start, size = external_offset, buffer.scalar(8, U64)
            else:
                start, size = buffer.vector(4)
        if start + size > self.file_size:
            raise ModelError(f"corrupt model: buffer {index} ({size} bytes at offset {start}) "
                             f"extends past the end of the {self.file_size}-byte file")
        self._spans[index] = (start, size)
        return start, size

    def bytes_view(self, index: int, what: str) -> np.ndarray:
        start, size = self.span(index, what)
        return _read_only(np.frombuffer(self.buf, dtype=np.uint8, count=size, offset=start))


# storage type -> the dtype of its values in a model (flatbuffers are little-endian)
_LITTLE_ENDIAN: dict[t.ScalarType, np.dtype] = {}


def constant_array(info: TensorInfo, buffers: Buffers, what: str) -> tuple[np.ndarray, dict]:
    """The data of a buffer-backed tensor as a view, and any extra attributes.

    - int4: the packed bytes (two values a byte, low nibble first), attr
      `packed_int4=True`; unpacking would copy.
    - sparse: the stored (non-zero) values as 1-D, attr `sparsity`.
    - string: the decoded strings as an object array (they are not weights).
    """
    start, size = buffers.span(info.buffer, what)
    tensor_type = info.type
    if not tensor_type.is_static:
        raise ModelError(f"corrupt model: {what} is a constant with a dynamic shape "
                         f"{list(tensor_type.shape)}")
    scalar = t.storage_type(tensor_type.element)
    shape = tensor_type.shape
    # Reading the tensor bounded its element count (MAX_ELEMENTS): no overflow.
    count = math.prod(shape)
    if scalar is t.string:
        return _strings(buffers.buf, start, size, shape, count, what), {}
    if scalar in (t.resource, t.variant):
        return buffers.bytes_view(info.buffer, what), {"opaque_bytes": True}
    if info.sparsity is not None:
        dtype = t.numpy_dtype(scalar)
        if size % dtype.itemsize:
            raise ModelError(f"corrupt model: {what}: sparse buffer of {size} bytes is not a "
                             f"whole number of {scalar} values")
        values = np.frombuffer(buffers.buf, dtype=dtype, count=size // dtype.itemsize,
                               offset=start)
        return _read_only(values), {"sparsity": info.sparsity}
    if scalar is t.i4:
        needed = (count + 1) // 2
        _check_buffer_size(size, needed, what)
        packed = np.frombuffer(buffers.buf, dtype=np.uint8, count=needed, offset=start)
        return _read_only(packed), {"packed_int4": True}
    dtype = _LITTLE_ENDIAN.get(scalar)
    if dtype is None:
        dtype = _LITTLE_ENDIAN[scalar] = t.numpy_dtype(scalar).newbyteorder("<")
    _check_buffer_size(size, count * dtype.itemsize, what)
    # The view in its shape at once (the buffer holds it: checked above and by `span`).
    array = np.ndarray(shape, dtype=dtype, buffer=buffers.buf, offset=start)
    return _read_only(array), {}


def unpack_int4(packed: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The signed int4 values of TFLite's packed storage as an int8 array of `shape`.

    Two values a byte, element 2k in the low nibble and 2k+1 in the high one
    (tensor_utils::UnpackDenseInt4IntoInt8); an odd count leaves the last
    high nibble unused. Each nibble is sign-extended from 4 bits.
    """
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    data = np.asarray(packed, dtype=np.uint8).reshape(-1)[:(count + 1) // 2]
    nibbles = np.empty(2 * data.size, dtype=np.uint8)
    nibbles[0::2] = data & 0x0F
    nibbles[1::2] = data >> 4
    values = nibbles[:count].astype(np.int8)
    return np.where(values > 7, values - 16, values).astype(np.int8).reshape(shape)


def _check_buffer_size(size: int, needed: int, what: str) -> None:
    # TFLite accepts a read-only buffer at least as large as the shape needs.
    if size < needed:
        raise ModelError(f"corrupt model: {what} needs {needed} bytes but its buffer has "
                         f"{size}")


def _strings(buf: Buffer, start: int, size: int, shape: tuple[int, ...], count: int,
             what: str) -> np.ndarray:
    """Decode TFLite's string buffer: int32 count, int32 offsets[count + 1], bytes."""
    if size < 4:
        raise ModelError(f"corrupt model: {what}: string buffer of {size} bytes has no count")
    stored = int(np.frombuffer(buf, dtype="<i4", count=1, offset=start)[0])
    if stored != count or 4 * (count + 2) > size:
        raise ModelError(f"corrupt model: {what}: string buffer holds {stored} strings for "
                         f"shape {list(shape)} in {size} bytes")
    offsets = np.frombuffer(buf, dtype="<i4", count=count + 1, offset=start + 4).astype(np.int64)
    if np.any(np.diff(offsets) < 0) or (count and (offsets[0] < 4 * (count + 2)
                                                   or offsets[-1] > size)):
        raise ModelError(f"corrupt model: {what}: string offsets are out of order or out "
                         "of the buffer")
    raw = bytes(np.frombuffer(buf, dtype=np.uint8, count=size, offset=start))
    strings = np.empty(count, dtype=object)
    for i in range(count):
        strings[i] = raw[offsets[i]:offsets[i + 1]]
    return _read_only(strings.reshape(shape))


def empty_array(info: TensorInfo) -> np.ndarray:
    """A zero-element constant (a tensor with no data and nothing to hold)."""
    scalar = t.storage_type(info.type.element)
    dtype = np.uint8 if scalar in (t.i4, t.string, t.resource, t.variant) else t.numpy_dtype(scalar)
    return _read_only(np.zeros(info.type.shape, dtype=dtype))
