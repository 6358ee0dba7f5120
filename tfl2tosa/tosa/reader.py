"""Read a `.tosa` flatbuffer into a Module of `tosa.*` ops.

Reads what `tfl2tosa.tosa.writer` writes and what `tosa-opt --tosa-serialize`
(tosa-tools 2026.8.0, which stamps files 1.1.0 draft) writes, as long as the
file uses TOSA 1.0 operators and types. Each region becomes a graph named
after it; operands, attributes and element types come back as the op table
(`tfl2tosa.tosa.ops`) defines them; `tosa.const` values are read-only numpy
views of the file's bytes where the stored layout allows it.

The tosa-tools variable convention is undone: a TosaTensor marked `variable`
becomes a `tosa.variable` op at the start of the first graph listing it (the
copies tosa-opt puts in every other block declare nothing), and IDENTITY ops
that write / read such a tensor become `tosa.variable_write` /
`tosa.variable_read`.

Any malformed input (not a flatbuffer, wrong identifier, truncated, dangling
names, unknown enum values) raises TosaFileError with a one-line reason.

Tables are read through `_Table`, a small direct reader of the flatbuffer
layout (vtables, offsets, vectors) with precompiled struct formats: the
generated accessors make several Python calls for every field, and a model
has many fields. The generated code stays the one source of
field positions: each field's vtable slot is taken from its `...Add<Field>`
builder function, in `tosa_builders` (the generated reader classes and the
flatbuffers package, which this reader has no use for, are not imported).
"""

from __future__ import annotations

import functools
import math
import os
import struct
from typing import Any

import numpy as np

from tfl2tosa.errors import IRError, TosaFileError
from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.types import ShapeType, TensorType, Type
from tfl2tosa.memo import BoundedMemo
from tfl2tosa.paths import shown_path
from tfl2tosa.tosa import ops as tosa_ops
from tfl2tosa.tosa.fbs import tosa_builders as fb
from tfl2tosa.tosa.fbs.encoding import (
    ELEMENT_BY_DTYPE,
    PLAIN_DTYPE_BY_DTYPE,
    decode_data,
    decode_data_from,
    decode_shape,
)

FILE_IDENTIFIER = b"TOSA"

_I32 = struct.Struct("<i").unpack_from
_U8 = struct.Struct("<B").unpack_from
_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_SCALARS = {"Bool": _U8, "Uint8": _U8, "Int32": _I32, "Uint32": _U32, "Uint64": _U64}
# Readers of a vector of n int32 (a shape or an attribute list), for small n.
_INT_VECTORS = [struct.Struct(f"<{n}i").unpack_from for n in range(9)]


class _Table:
    """One flatbuffer table: fields by vtable slot (the field's index in the schema).

    Reads past the end raise struct.error, IndexError or ValueError, which
    read_tosa reports as a corrupt file.
    """

    __slots__ = ("data", "offsets", "pos", "vtables")

    def __init__(self, data: bytes, pos: int, vtables: dict[int, tuple[int, ...]]) -> None:
        self.data, self.pos, self.vtables = data, pos, vtables
        self.offsets = _vtable_offsets(data, pos, vtables)

    # The accessors below spell out the vtable look-up (`offsets[slot]`, 0 when the
    # field is absent) instead of sharing a helper: a model has many fields, and a
    # Python call per field adds up.

    def scalar(self, slot: int, unpack: Any, default: Any = 0) -> Any:
        offsets = self.offsets
        offset = offsets[slot] if slot < len(offsets) else 0
        return unpack(self.data, self.pos + offset)[0] if offset else default

    def _target(self, slot: int) -> int:
        """Where an offset field (string, vector, table) points, 0 if absent."""
        offsets = self.offsets
        offset = offsets[slot] if slot < len(offsets) else 0
        if not offset:
            return 0
        at = self.pos + offset
        return at + _U32(self.data, at)[0]

    def table(self, slot: int) -> _Table | None:
        at = self._target(slot)
        return _Table(self.data, at, self.vtables) if at else None

    def string(self, slot: int) -> bytes | None:
        at = self._target(slot)
        return _string_at(self.data, at) if at else None

    def vector(self, slot: int) -> tuple[int, int]:
        """(start of the elements, element count); (0, 0) if absent."""
        at = self._target(slot)
        return (at + 4, _U32(self.data, at)[0]) if at else (0, 0)

    def table_positions(self, slot: int) -> list[int]:
        """Where each table of a vector of tables starts (no _Table objects)."""
        start, count = self.vector(slot)
        data = self.data
        count = _checked(count, data)
        offsets = struct.unpack_from(f"<{count}I", data, start) if count else ()
        return [at + offset for at, offset in zip(range(start, start + 4 * count, 4), offsets)]

    def tables(self, slot: int) -> list[_Table]:
        start, count = self.vector(slot)
        data, vtables = self.data, self.vtables
        return [_Table(data, at + _U32(data, at)[0], vtables)
                for at in range(start, start + 4 * _checked(count, data), 4)]

    def strings(self, slot: int) -> list[str]:
        return _strings_at(self.data, self._field_position(slot))

    def _field_position(self, slot: int) -> int:
        offsets = self.offsets
        offset = offsets[slot] if slot < len(offsets) else 0
        return self.pos + offset if offset else 0

    def array(self, slot: int, dtype: str) -> np.ndarray | None:
        """A vector of scalars as a read-only numpy view of the buffer; None if absent."""
        at = self._target(slot)
        if not at:
            return None
        return np.frombuffer(self.data, dtype=dtype, count=_U32(self.data, at)[0],
                             offset=at + 4)


def _vtable_offsets(data: bytes, pos: int, vtables: dict[int, tuple[int, ...]]
                    ) -> tuple[int, ...]:
    """The field offsets of the table at `pos`, from its vtable."""
    vtable = pos - _I32(data, pos)[0]
    if vtable < 0:  # struct would read a negative offset from the end
        raise IndexError("vtable before the start of the buffer")
    # Writers share one vtable among tables of the same layout: decode each once.
    offsets = vtables.get(vtable)
    if offsets is None:
        count = max(0, (_U16(data, vtable)[0] - 4) // 2)
        offsets = vtables[vtable] = struct.unpack_from(f"<{count}H", data, vtable + 4)
    return offsets


def _field_offsets(data: bytes, pos: int, slots: tuple[int, ...],
                   cache: dict[int, tuple[int, ...]]) -> tuple[int, ...]:
    """The offsets (0 if absent) of the `slots` fields of the table at `pos`, decoded
    once per vtable: every table of a vector usually shares one or a few. `cache`
    is for one `slots` tuple."""
    vtable = pos - _I32(data, pos)[0]
    found = cache.get(vtable)
    if found is None:
        if vtable < 0:  # struct would read a negative offset from the end
            raise IndexError("vtable before the start of the buffer")
        count = max(0, (_U16(data, vtable)[0] - 4) // 2)
        offsets = struct.unpack_from(f"<{count}H", data, vtable + 4)
        found = cache[vtable] = tuple(offsets[slot] if slot < count else 0 for slot in slots)
    return found


def _strings_at(data: bytes, field: int) -> list[str]:
    """The vector of strings an offset field at `field` points to ([] if absent)."""
    if not field:
        return []
    start = field + _U32(data, field)[0]
    count = _U32(data, start)[0]
    if not count:
        return []
    start += 4
    size = len(data)
    if count == 1:  # most operators have one result, and many one operand
        at = start + _U32(data, start)[0]
        end = at + 4 + _U32(data, at)[0]
        if end > size:
            raise IndexError("string runs past the end of the buffer")
        return [data[at + 4:end].decode("utf-8")]
    names = []
    # The vector holds one offset per string, each relative to its own position.
    offsets = struct.unpack_from(f"<{_checked(count, data)}I", data, start)
    for at, offset in zip(range(start, start + 4 * count, 4), offsets):
        at += offset
        end = at + 4 + _U32(data, at)[0]
        if end > size:
            raise IndexError("string runs past the end of the buffer")
        names.append(data[at + 4:end].decode("utf-8"))
    return names


def _names_at(data: bytes, field: int, known: dict[int, str]) -> list[str]:
    """_strings_at for tensor names: a string whose position `known` maps to its text
    (a tensor's name, read with the tensor list) is not decoded again."""
    start = field + _U32(data, field)[0]
    count = _U32(data, start)[0]
    if count == 1:  # most operators have one result, and many one operand
        at = start + 4
        at += _U32(data, at)[0]
        name = known.get(at)
        if name is None:
            end = at + 4 + _U32(data, at)[0]
            if end > len(data):
                raise IndexError("string runs past the end of the buffer")
            name = data[at + 4:end].decode("utf-8")
        return [name]
    if not count:
        return []
    start += 4
    size = len(data)
    names = []
    # The vector holds one offset per string, each relative to its own position.
    offsets = struct.unpack_from(f"<{_checked(count, data)}I", data, start)
    for at, offset in zip(range(start, start + 4 * count, 4), offsets):
        at += offset
        name = known.get(at)
        if name is None:
            end = at + 4 + _U32(data, at)[0]
            if end > size:
                raise IndexError("string runs past the end of the buffer")
            name = data[at + 4:end].decode("utf-8")
        names.append(name)
    return names


def _text_at(data: bytes, field: int) -> str:
    """The string an offset field at `field` points to ("" if the field is absent)."""
    if not field:
        return ""
    return _string_at(data, field + _U32(data, field)[0]).decode("utf-8")


def _bytes_span_at(data: bytes, field: int) -> tuple[int, int] | None:
    """(start, length) of the [ubyte] vector an offset field at `field` points to; None
    if absent or empty. The bytes are viewed only when decoded."""
    if not field:
        return None
    at = field + _U32(data, field)[0]
    count = _U32(data, at)[0]
    if not count:
        return None
    if at + 4 + count > len(data):
        raise ValueError("buffer is smaller than requested size")  # as np.frombuffer says
    return at + 4, count


def _string_at(data: bytes, at: int) -> bytes:
    length = _U32(data, at)[0]
    if at + 4 + length > len(data):
        raise IndexError("string runs past the end of the buffer")
    return data[at + 4:at + 4 + length]


def _checked(count: int, data: bytes) -> int:
    # Every element takes at least 4 bytes (an offset), so a longer vector is corrupt.
    if count * 4 > len(data):
        raise TosaFileError(f"corrupt .tosa file: a vector claims {count} entries")
    return count


class _SlotRecorder:
    """Stands in for a flatbuffers Builder: records which slot an Add<Field> writes."""

    slot: int = -1
    method: str = ""

    def __getattr__(self, name: str) -> Any:
        def record(slot: int, *_: Any) -> None:
            self.slot, self.method = slot, name
        return record


def _slot(table: str, field_name: str) -> tuple[int, str]:
    """(vtable slot, scalar kind such as "Int32", or "UOffsetTRelative") of a field."""
    recorder = _SlotRecorder()
    # flatc keeps a leading underscore: `_major` is added by VersionAdd_Major.
    suffix = "_" * (len(field_name) - len(field_name.lstrip("_"))) + _camel(field_name)
    getattr(fb, f"{table}Add{suffix}")(recorder, 0)
    return recorder.slot, recorder.method.removeprefix("Prepend").removesuffix("Slot")


def _slots(table: str, *fields: str) -> dict[str, int]:
    return {name: _slot(table, name)[0] for name in fields}



_ENUM_NAMES = {
    kind: {v: k for k, v in vars(table).items() if not k.startswith("_")}
    for kind, table in (("acc_type", fb.DType), ("rounding_mode", fb.RoundingMode),
                        ("nan_mode", fb.NanPropagationMode), ("resize_mode", fb.ResizeMode))
}
# Errors the flatbuffers runtime raises when offsets or lengths point outside the buffer.
_DECODE_ERRORS = (struct.error, IndexError, KeyError, ValueError, TypeError, OverflowError,
                  UnicodeDecodeError, AttributeError, IRError)


def read_tosa(source: str | os.PathLike[str] | bytes | bytearray | memoryview) -> Module:
    """Read a `.tosa` file (a path, or its bytes) into a Module."""
    if isinstance(source, (str, os.PathLike)):
        try:
            with open(shown_path(source), "rb") as file:
                data = file.read()
        except OSError as exc:
            raise TosaFileError(f"cannot read {os.fspath(source)}: {exc.strerror}") from None
    else:
        data = bytes(source) if not isinstance(source, bytes) else source
    if len(data) < 8 or data[4:8] != FILE_IDENTIFIER:
        raise TosaFileError("not a TOSA flatbuffer (missing the 'TOSA' file identifier)")
    try:
        return _Reader(data).module()
    except TosaFileError:
        raise
    except _DECODE_ERRORS as exc:
        reason = str(exc).splitlines()[0] if str(exc) else ""
        raise TosaFileError(f"corrupt .tosa file: {type(exc).__name__}: {reason}") from None
    except RecursionError:
        raise TosaFileError("corrupt .tosa file: nesting too deep") from None


@functools.cache
def _required_attributes(op_name: str) -> frozenset[str]:
    """The attributes an operator's file entry must hold (the reference model reads
    them without looking twice)."""
    return frozenset(a.name for a in tosa_ops.OPS[op_name].attrs
                     if not a.optional and a.fbs_field)


def _refuse_missing_attributes(definition: tosa_ops.OpDef, attrs: dict[str, Any],
                               loc: str) -> None:
    missing = sorted(_required_attributes(definition.name) - attrs.keys())
    raise TosaFileError(f"{definition.name}{f' at {loc}' if loc else ''}: attribute "
                        f"{', '.join(missing)} is missing")


def _camel(field_name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in field_name.split("_"))


def _text(raw: bytes | None) -> str:
    return "" if raw is None else raw.decode("utf-8")


_GRAPH = _slots("TosaGraph", "version", "regions")
_VERSION = _slots("Version", "_major", "_minor", "_patch", "_draft")
_REGION = _slots("TosaRegion", "name", "blocks")
_BLOCK = _slots("TosaBasicBlock", "name", "operators", "tensors", "inputs", "outputs", "shapes")
_TENSOR = _slots("TosaTensor", "name", "shape", "type", "data", "variable", "is_unranked",
                 "variable_name", "offset", "size")
_TENSOR_FIELDS = tuple(_TENSOR[name] for name in (
    "name", "offset", "size", "type", "shape", "is_unranked", "data", "variable",
    "variable_name"))
_SHAPE = _slots("TosaShape", "name", "rank", "data")
_OPERATOR = _slots("TosaOperator", "op", "attribute_type", "attribute", "inputs", "outputs",
                   "location")
_LOCATION = _slots("OpLocation", "text")


_ATTRIBUTE_TYPE_SLOT, _ATTRIBUTE_SLOT = _OPERATOR["attribute_type"], _OPERATOR["attribute"]
_OPERATOR_FIELDS = (_OPERATOR["op"], _OPERATOR["inputs"], _OPERATOR["outputs"],
                    _OPERATOR["location"], _ATTRIBUTE_TYPE_SLOT, _ATTRIBUTE_SLOT)
_LOCATION_TEXT_SLOT = _LOCATION["text"]

# The attributes that name a region (control flow), by IR op name.
_GRAPH_ATTRIBUTES = {d.mlir: tuple(a.name for a in d.attrs if a.type == "graph")
                     for d in tosa_ops.OPS.values() if any(a.type == "graph" for a in d.attrs)}

# How _BlockReader._attributes reads each kind of attribute field.
_I32_FIELD, _BOOL_FIELD, _ENUM_FIELD, _INTS_FIELD, _VALUE_FIELD, _OTHER_FIELD = range(6)
_FIELD_CODES = {"i32": _I32_FIELD, "bool": _BOOL_FIELD, "i32[]": _INTS_FIELD,
                "value": _VALUE_FIELD, **{kind: _ENUM_FIELD for kind in _ENUM_NAMES}}
# Field kinds stored in the attribute table itself (no offset to data elsewhere).
_INLINE_FIELDS = (_I32_FIELD, _BOOL_FIELD, _ENUM_FIELD)

# The attribute, its vtable slot, its scalar unpacker, its _FIELD_CODES code, and
# the bytes an inline field takes.
_AttributeField = tuple[tosa_ops.Attr, int, Any, int, int]
# The operator's attribute union type, its stored attributes, and whether every
# one of them is inline.
_AttributeFields = tuple[int, tuple[_AttributeField, ...], bool]
_ATTRIBUTE_FIELDS: dict[str, _AttributeFields] = {}
# Stands for an operator whose fields are not worked out yet: _attributes does it.
_UNKNOWN_FIELDS: _AttributeFields = (0, (None,), False)
_SCALAR_SIZES = {_U8: 1, _I32: 4, _U32: 4, _U64: 8}


def _inline_extent(offsets: tuple[int, ...], fields: tuple[_AttributeField, ...]) -> int:
    """Where the last byte of a table's inline `fields` ends, relative to the table
    (at least 4); 0 if a field lies in the table's first 4 bytes (its vtable offset,
    which differs from table to table), as only a corrupt file has it."""
    extent = 4
    count = len(offsets)
    for _, slot, _, _, size in fields:
        offset = offsets[slot] if slot < count else 0
        if offset:
            if offset < 4:
                return 0
            extent = max(extent, offset + size)
    return extent


def _attribute_fields(definition: tosa_ops.OpDef) -> _AttributeFields:
    """The operator's attribute union type and its stored attributes' fields, worked
    out once per operator from the generated builder functions."""
    found = _ATTRIBUTE_FIELDS.get(definition.name)
    if found is None:
        fields = []
        for attr in definition.attrs:
            if attr.fbs_field:
                slot, stored = _slot(definition.fbs_attr, attr.fbs_field)
                unpack = _SCALARS.get(stored)
                fields.append((attr, slot, unpack, _FIELD_CODES.get(attr.type, _OTHER_FIELD),
                               _SCALAR_SIZES.get(unpack, 0)))
        inline = all(code in _INLINE_FIELDS and size for _, _, _, code, size in fields)
        found = _ATTRIBUTE_FIELDS[definition.name] = (
            getattr(fb.Attribute, definition.fbs_attr), tuple(fields), inline)
    return found


# The operators whose results or attributes the reader builds in its own way.
_GENERIC, _CONST, _CONST_SHAPE, _IDENTITY, _REGIONS = range(5)
_OPERATOR_KINDS = {"CONST": _CONST, "CONST_SHAPE": _CONST_SHAPE, "IDENTITY": _IDENTITY,
                   **{d.name: _REGIONS for d in tosa_ops.OPS.values()
                      if d.mlir in _GRAPH_ATTRIBUTES}}
# Flatbuffer Op enum -> (definition, IR op name, _OPERATOR_KINDS kind).
_OP_BY_ENUM = {d.fbs_op: (d, d.mlir, _OPERATOR_KINDS.get(d.name, _GENERIC))
               for d in tosa_ops.OPS.values()}

# A tensor's type; when its stored bytes are its values as they are (int8/16/32,
# fp16, fp32), the struct that reads one element; and for such a static tensor,
# how to view a constant's data: (numpy dtype, element count, byte count, shape to
# give the flat view or None if it has it).
_ConstantLayout = tuple[np.dtype, int, int, "tuple[int, ...] | None"]
_TensorKind = tuple[TensorType, "_ConstantLayout | None", "struct.Struct | None"]
_TENSOR_KINDS: BoundedMemo = BoundedMemo(1 << 14)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.vtables: dict[int, tuple[int, ...]] = {}   # decoded vtables by position
        self.root = _Table(data, _U32(data, 0)[0], self.vtables)
        self.declared_variables: set[str] = set()
        self.graph_references: list[Op] = []   # ops naming regions, in module order

    @staticmethod
    def tensor_kind(shape: tuple[int, ...] | None, dtype: int) -> _TensorKind:
        """One TensorType per distinct shape and (valid) flatbuffer DType, shared by
        every file read (types are immutable, building one checks it, and the
        reference model's per-signature caches then find a model's types by
        identity), with its constant layout. Keyed by the DType number: hashing it
        is cheaper than hashing the element type."""
        key = (shape, dtype)
        found = _TENSOR_KINDS.get(key)
        if found is None:
            tensor_type = TensorType(shape, ELEMENT_BY_DTYPE[dtype])
            plain = PLAIN_DTYPE_BY_DTYPE.get(dtype)
            layout = element = None
            if plain is not None:
                element = struct.Struct("<" + plain.char)
                if tensor_type.is_static:
                    count = math.prod(tensor_type.shape)
                    layout = (plain, count, plain.itemsize * count,
                              None if len(tensor_type.shape) == 1 else tensor_type.shape)
            found = _TENSOR_KINDS.keep(key, (tensor_type, layout, element))
        return found

    def module(self) -> Module:
        version = self.root.table(_GRAPH["version"])
        if version is None:
            raise TosaFileError("corrupt .tosa file: no version table")
        major = version.scalar(_VERSION["_major"], _I32, -1)
        minor = version.scalar(_VERSION["_minor"], _I32, -1)
        if major != 1:
            raise TosaFileError(f"TOSA version {major}.{minor} is not supported (need 1.x)")
        module = Module()
        patch = version.scalar(_VERSION["_patch"], _I32, -1)
        draft = version.scalar(_VERSION["_draft"], _U8, 1)
        module.attrs["tosa_version"] = f"{major}.{minor}.{patch}" + ("d" if draft else "")
        for i, region in enumerate(self.root.tables(_GRAPH["regions"])):
            name = _text(region.string(_REGION["name"])) or f"region_{i}"
            if name in module.graphs:
                raise TosaFileError(f"two regions are named {name!r}")
            blocks = region.tables(_REGION["blocks"])
            if len(blocks) != 1:
                raise TosaFileError(f"region {name!r} has {len(blocks)} blocks; "
                                    "tfl2tosa reads one block per region")
            module.add_graph(_BlockReader(self, name, blocks[0]).graph())
        if not module.graphs:
            raise TosaFileError("the .tosa file has no regions")
        self._check_graph_references(module)
        return module

    def _check_graph_references(self, module: Module) -> None:
        for op in self.graph_references:
            for name in _GRAPH_ATTRIBUTES[op.name]:
                if op.attrs.get(name) not in module.graphs:
                    raise TosaFileError(f"{op.name} names region {op.attrs.get(name)!r}, "
                                        "which the file does not have")


class _BlockReader:
    """One basic block: its tensor list, then its operators in order.

    The tensor and operator loops read fields at positions worked out once per
    vtable and spell out the small decoding steps inline: a model has many of
    each, and a helper call per field would dominate the reading.
    """

    def __init__(self, reader: _Reader, name: str, block: Any) -> None:
        self.reader = reader
        self.block = block
        self.graph_ = Graph(name)
        self.tensors: dict[str, _TensorKind] = {}       # tensor name -> type, layout
        self.spans: dict[str, tuple[int, int]] = {}     # tensor name -> (start, length) of data
        self.variable_tensors: list[tuple[str, str]] = []   # (tensor, variable), file order
        # Where each tensor's name string lies -> the name: writers that share
        # strings (ours does) let operators' name vectors point at the same bytes.
        self.name_at: dict[int, str] = {}
        self.shapes: dict[str, list[int]] = {}
        self.values: dict[str, Value] = {}
        self.variables: dict[str, str] = {}  # tensor name -> variable name
        # Attribute tables whose fields are all inline: where their fields end, by
        # operator name and vtable; their attributes, by those and the fields' bytes.
        self.attribute_extents: dict[tuple[str, int], int] = {}
        self.inline_attributes: dict[tuple[str, int, bytes], tuple[tuple[str, Any], ...]] = {}

    def graph(self) -> Graph:
        self._read_tensors()
        self._read_shapes()
        graph = self.graph_
        for name, variable_name in self.variable_tensors:
            if variable_name not in self.reader.declared_variables:
                self.reader.declared_variables.add(variable_name)
                graph.append(self._variable_op(name, variable_name))
            self.variables[name] = variable_name
        for name in self.block.strings(_BLOCK["inputs"]):
            self._define(name, graph.add_input(name, self._tensor(name)))
        graph.extend(self._operators())
        graph.set_outputs(self._value(name) for name in self.block.strings(_BLOCK["outputs"]))
        return graph

    # -- tables of tensors and shapes

    def _read_tensors(self) -> None:
        tensors, spans, name_at = self.tensors, self.spans, self.name_at
        data = self.block.data
        size = len(data)
        tensor_kinds, tensor_kind = _TENSOR_KINDS, self.reader.tensor_kind
        # Ranks read by the _INT_VECTORS structs (_checked cannot fail for them).
        small_vectors = min(len(_INT_VECTORS), size // 4 + 1)
        layouts: dict[int, tuple[int, ...]] = {}
        for pos in self.block.table_positions(_BLOCK["tensors"]):
            layout = layouts.get(pos - _I32(data, pos)[0])
            if layout is None:
                layout = _field_offsets(data, pos, _TENSOR_FIELDS, layouts)
            (name_field, offset_field, size_field, type_field, shape_field, unranked_field,
             data_field, variable_field, variable_name_field) = layout
            if name_field:
                at = pos + name_field
                at += _U32(data, at)[0]
                end = at + 4 + _U32(data, at)[0]
                if end > size:
                    raise IndexError("string runs past the end of the buffer")
                name = name_at[at] = data[at + 4:end].decode("utf-8")
            else:
                name = ""
            if name in tensors:
                raise TosaFileError(f"tensor {name!r} is listed twice")
            if (offset_field and _U64(data, pos + offset_field)[0] > 1) \
                    or (size_field and _U64(data, pos + size_field)[0] > 0):
                raise TosaFileError(f"tensor {name!r} keeps its data outside the flatbuffer "
                                    "(files over 2 GB are not supported)")
            dtype = _U32(data, pos + type_field)[0] if type_field else 0
            if dtype not in ELEMENT_BY_DTYPE:
                raise TosaFileError(f"tensor {name!r} has DType {dtype}, not a TOSA 1.0 type")
            if shape_field:
                at = pos + shape_field
                at += _U32(data, at)[0]
                rank = _U32(data, at)[0]
                shape = (_INT_VECTORS[rank](data, at + 4) if rank < small_vectors else
                         struct.unpack_from(f"<{_checked(rank, data)}i", data, at + 4))
            else:
                shape = ()
            if unranked_field and _U8(data, pos + unranked_field)[0]:
                shape = None
            if data_field:
                span = _bytes_span_at(data, pos + data_field)
                if span is not None:
                    spans[name] = span
            if variable_field and _U8(data, pos + variable_field)[0]:
                self.variable_tensors.append(
                    (name, _text_at(data, pos + variable_name_field if variable_name_field
                                    else 0)))
            tensors[name] = tensor_kinds.get((shape, dtype)) or tensor_kind(shape, dtype)

    def _read_shapes(self) -> None:
        for s in self.block.tables(_BLOCK["shapes"]):
            name = _text(s.string(_SHAPE["name"]))
            raw = s.array(_SHAPE["data"], "u1")
            self.shapes[name] = decode_shape(raw if raw is not None else np.zeros(0, np.uint8),
                                             s.scalar(_SHAPE["rank"], _U32))

    def _tensor(self, name: str) -> TensorType:
        try:
            return self.tensors[name][0]
        except KeyError:
            raise TosaFileError(f"{self.graph_.name}: {name!r} is not in the tensor list") from None

    def _type(self, name: str) -> Type:
        if name in self.shapes:
            return ShapeType(len(self.shapes[name]))
        return self._tensor(name)

    def _define(self, name: str, value: Value) -> None:
        if name in self.values:
            raise TosaFileError(f"{self.graph_.name}: {name!r} is defined twice")
        self.values[name] = value

    def _value(self, name: str) -> Value:
        try:
            return self.values[name]
        except KeyError:
            raise TosaFileError(f"{self.graph_.name}: {name!r} is used before it is "
                                "defined") from None

    # -- operators

    def _operators(self) -> list[Op]:
        """The block's operators as ops, in file order."""
        data = self.block.data
        size = len(data)
        values, shapes, tensors, name_at = self.values, self.shapes, self.tensors, self.name_at
        spans = self.spans
        vtables = self.reader.vtables
        graph_references = self.reader.graph_references
        assemble, value_of = Op.assemble, values.__getitem__
        layouts: dict[int, tuple[int, ...]] = {}
        text_fields: dict[int, int] = {}  # OpLocation vtable -> its text field's offset
        ops = []
        for pos in self.block.table_positions(_BLOCK["operators"]):
            layout = layouts.get(pos - _I32(data, pos)[0])
            if layout is None:
                layout = _field_offsets(data, pos, _OPERATOR_FIELDS, layouts)
            (op_field, inputs_field, outputs_field, location_field, attribute_type_field,
             attribute_field) = layout
            op_enum = _U32(data, pos + op_field)[0] if op_field else 0
            recipe = _OP_BY_ENUM.get(op_enum)
            if recipe is None:
                raise TosaFileError(f"operator enum {op_enum} is not a TOSA 1.0 operator")
            definition, op_name, kind = recipe
            inputs = _names_at(data, pos + inputs_field, name_at) if inputs_field else []
            outputs = _names_at(data, pos + outputs_field, name_at) if outputs_field else []
            loc = ""
            if location_field:  # the text of the OpLocation table the field points to
                at = pos + location_field
                at += _U32(data, at)[0]
                text_field = text_fields.get(at - _I32(data, at)[0])
                if text_field is None:
                    offsets = _vtable_offsets(data, at, vtables)
                    text_field = text_fields[at - _I32(data, at)[0]] = (
                        offsets[_LOCATION_TEXT_SLOT] if _LOCATION_TEXT_SLOT < len(offsets)
                        else 0)
                if text_field:
                    at += text_field
                    at += _U32(data, at)[0]
                    end = at + 4 + _U32(data, at)[0]
                    if end > size:
                        raise IndexError("string runs past the end of the buffer")
                    loc = data[at + 4:end].decode("utf-8")
            if kind == _CONST:
                # A plainly stored constant viewed in place; anything else (and every
                # error) by the general path.
                name = outputs[0] if outputs else None
                layout = tensors[name][1] if name in tensors else None
                span = spans.get(name)
                if layout is not None and span is not None and span[1] >= layout[2]:
                    constant = np.frombuffer(data, layout[0], layout[1], span[0])
                    if layout[3] is not None:
                        constant = constant.reshape(layout[3])
                else:
                    constant = self._constant(outputs)
                attrs = {"values": constant}
            elif kind == _CONST_SHAPE:
                if outputs[0] not in shapes:
                    raise TosaFileError(f"CONST_SHAPE output {outputs[0]!r} is not in shapes[]")
                attrs = {"values": list(shapes[outputs[0]])}
            elif kind == _IDENTITY and (set(inputs) | set(outputs)) & set(self.variables):
                ops.append(self._variable_access(inputs, outputs, loc))
                continue
            elif _ATTRIBUTE_FIELDS.get(definition.name, _UNKNOWN_FIELDS)[1]:
                attrs = self._attributes(data, pos, attribute_type_field, attribute_field,
                                         definition, inputs)
                if not attrs.keys() >= _required_attributes(definition.name):
                    _refuse_missing_attributes(definition, attrs, loc)
            else:  # an operator that stores no attribute (known after its first one)
                attrs = {}
            try:
                operands = list(map(value_of, inputs))
                if shapes:
                    result_types = [tensors[n][0] if n not in shapes
                                    else ShapeType(len(shapes[n])) for n in outputs]
                elif len(outputs) == 1:
                    result_types = [tensors[outputs[0]][0]]
                else:
                    result_types = [tensors[n][0] for n in outputs]
            except KeyError:  # the same checks one name at a time, for the error message
                operands = [self._value(n) for n in inputs]
                result_types = [self._type(n) for n in outputs]
            op = assemble(op_name, operands, result_types, outputs, attrs, loc)
            if len(outputs) == 1:
                if outputs[0] in values:
                    raise TosaFileError(f"{self.graph_.name}: {outputs[0]!r} is defined twice")
                values[outputs[0]] = op.results[0]
            else:
                for name, value in zip(outputs, op.results):
                    if name in values:
                        raise TosaFileError(f"{self.graph_.name}: {name!r} is defined twice")
                    values[name] = value
            if kind == _REGIONS:
                graph_references.append(op)
            ops.append(op)
        return ops

    def _constant(self, outputs: list[str]) -> np.ndarray:
        name = outputs[0]
        tensor_type = self._tensor(name)
        if not tensor_type.is_static:
            raise TosaFileError(f"constant {name!r} has no static shape")
        return self._decode(name, tensor_type)

    def _attributes(self, data: bytes, pos: int, attribute_type_field: int,
                    attribute_field: int, definition: tosa_ops.OpDef,
                    inputs: list[str]) -> dict[str, Any]:
        expected, fields, inline = _attribute_fields(definition)
        if not fields:
            return {}
        attribute_type = _U8(data, pos + attribute_type_field)[0] if attribute_type_field else 0
        if attribute_field:
            at = pos + attribute_field
            at += _U32(data, at)[0]
            offsets = _vtable_offsets(data, at, self.reader.vtables)
        if attribute_type != expected or not attribute_field:
            raise TosaFileError(f"{definition.name} carries attribute type "
                                f"{attribute_type}, expected {expected}")
        if not inline:
            return self._decode_attributes(data, at, offsets, fields, inputs)
        # Every field is in the table itself, so the table's vtable and the bytes
        # its fields cover decide its attributes: tables read before in this file
        # (RESCALE's five flags, say, mostly repeat) give them without decoding.
        # Each op still gets a dict of its own.
        vtable = at - _I32(data, at)[0]
        key = (definition.name, vtable)
        extent = self.attribute_extents.get(key)
        if extent is None:
            extent = self.attribute_extents[key] = _inline_extent(offsets, fields)
        if not extent:  # a field overlapping the table's vtable offset: no key
            return self._decode_attributes(data, at, offsets, fields, inputs)
        key = (definition.name, vtable, data[at + 4:at + extent])
        items = self.inline_attributes.get(key)
        if items is None:
            attrs = self._decode_attributes(data, at, offsets, fields, inputs)
            self.inline_attributes[key] = tuple(attrs.items())
            return attrs
        return dict(items)

    def _decode_attributes(self, data: bytes, at: int, offsets: tuple[int, ...],
                          fields: tuple[_AttributeField, ...],
                          inputs: list[str]) -> dict[str, Any]:
        """The attributes stored in the table at `at`."""
        count = len(offsets)
        size = len(data)
        attrs: dict[str, Any] = {}
        for attr, slot, unpack, code, _ in fields:
            offset = offsets[slot] if slot < count else 0
            if code == _I32_FIELD:
                attrs[attr.name] = unpack(data, at + offset)[0] if offset else 0
            elif code == _BOOL_FIELD:
                attrs[attr.name] = bool(unpack(data, at + offset)[0]) if offset else False
            elif code == _INTS_FIELD:
                if offset:
                    field = at + offset
                    field += _U32(data, field)[0]
                    length = _U32(data, field)[0]
                    attrs[attr.name] = list(
                        _INT_VECTORS[length](data, field + 4) if length < len(_INT_VECTORS)
                        and length * 4 <= size else
                        struct.unpack_from(f"<{_checked(length, data)}i", data, field + 4))
            elif code == _VALUE_FIELD:
                # One element of the first input's type, stored as a [ubyte] vector:
                # read by struct when the type is plainly stored and the bytes are there.
                if offset:
                    field = at + offset
                    field += _U32(data, field)[0]
                    length = _U32(data, field)[0]
                    tensor = self.tensors.get(inputs[0]) if inputs else None
                    element = tensor[2] if tensor is not None else None
                    if element is not None and element.size <= length \
                            and field + 4 + length <= size:
                        attrs[attr.name] = element.unpack_from(data, field + 4)[0]
                    else:
                        value = self._attribute(_Table(data, at, self.reader.vtables), attr,
                                                slot, inputs)
                        if value is not None:
                            attrs[attr.name] = value
            elif code == _ENUM_FIELD:
                raw = unpack(data, at + offset)[0] if offset else 0
                if raw == 0:  # absent / UNKNOWN: the specification's default, if any
                    value = attr.default
                else:
                    value = _ENUM_NAMES[attr.type].get(raw)
                    if value is None:
                        raise TosaFileError(f"{attr.name} = {raw} is not a valid {attr.type}")
                if value is not None:
                    attrs[attr.name] = value
            else:
                value = self._attribute(_Table(data, at, self.reader.vtables), attr, slot,
                                        inputs)
                if value is not None:
                    attrs[attr.name] = value
        return attrs

    def _attribute(self, table: _Table, attr: tosa_ops.Attr, slot: int,
                   inputs: list[str]) -> Any:
        """An attribute of the kinds _attributes does not read inline."""
        kind = attr.type
        if kind == "value":
            raw = table.array(slot, "u1")
            if raw is None:
                return None
            element = self._tensor(inputs[0]).element
            return decode_data(raw, element, (1,))[0].item()
        if kind in ("string", "graph"):
            # A [ubyte] vector and a string are stored alike: a length and the bytes.
            raw = table.string(slot)
            return None if raw is None else raw.decode("utf-8")
        raise TosaFileError(f"attribute {attr.name} of type {kind} cannot be read")

    def _decode(self, name: str, tensor_type: TensorType) -> np.ndarray:
        """A tensor's stored values (none stored: an empty byte vector)."""
        element, shape = tensor_type.element, tensor_type.shape
        span = self.spans.get(name)
        if span is None:
            return decode_data(np.zeros(0, np.uint8), element, shape)
        return decode_data_from(self.block.data, span[0], span[1], element, shape)

    # -- variables

    def _variable_op(self, name: str, variable_name: str) -> Op:
        tensor_type = self.tensors[name][0]
        attrs: dict[str, Any] = {"name": variable_name,
                                 "var_shape": list(tensor_type.shape or ()),
                                 "type": tensor_type.element.name}
        if name in self.spans:
            attrs["initial_value"] = self._decode(name, tensor_type)
        return Op("tosa.variable", [], [], attrs)

    def _variable_access(self, inputs: list[str], outputs: list[str], loc: str) -> Op:
        if len(inputs) != 1 or len(outputs) != 1:
            raise TosaFileError("a variable IDENTITY must have one input and one output")
        source, target = inputs[0], outputs[0]
        if target in self.variables and source not in self.variables:
            return Op("tosa.variable_write", [self._value(source)], [],
                      {"name": self.variables[target]}, loc=loc)
        if source in self.variables and target not in self.variables:
            op = Op("tosa.variable_read", [], [self._type(target)],
                    {"name": self.variables[source]}, result_names=[target], loc=loc)
            self._define(target, op.result)
            return op
        raise TosaFileError("an IDENTITY copying one variable into another is not supported")
