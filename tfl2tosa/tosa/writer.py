"""Write a Module of `tosa.*` ops as a `.tosa` flatbuffer (schemas/tosa.fbs).

Layout: each graph becomes one TosaRegion holding one TosaBasicBlock, both
named after the graph, `main` first; COND_IF / WHILE_LOOP name the regions of
their branch and loop graphs. Every op becomes a TosaOperator whose `inputs`
follow the specification's argument order (the op table's order) and whose
attribute table holds the op's true attributes (`tosa.ops` names each field).
`tosa.const` values go into its output tensor's `data`, `tosa.const_shape`
values into a TosaShape in `shapes[]`.

Variables follow the convention of tosa-tools' serializer, which the official
reference model and `tosa-opt --tosa-deserialize` understand: `tosa.variable`
becomes a TosaTensor with `variable = true` (its data the initial value) and
no operator; `tosa.variable_write` / `tosa.variable_read` become IDENTITY ops
into / out of that tensor. Like tosa-opt, every block lists every variable
tensor (same name; here the initial value's bytes are stored once and shared).

Memory: the flatbuffer metadata (tables, names, attributes) is built with
`fbs.builder.Builder` (flatbuffers' layout, less work per call); constant data
is not copied into it. Instead the data
vectors are laid out after the metadata and the tensors' `data` fields are
patched to point at them, so the weights are written straight from the
module's numpy arrays (and joined once when bytes are returned).

Tensor names are unique across the whole file (tosa-tools does the same);
a clash gets a `_N` suffix. Writing is deterministic: the same module gives
the same bytes.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Iterator
from functools import partial
from operator import attrgetter
from typing import Any

import numpy as np

from tfl2tosa.errors import IRError, TosaFileError
from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.types import NoneType, ShapeType, TensorType, scalar_type
from tfl2tosa.tosa import ops as tosa_ops
from tfl2tosa.tosa.fbs import tosa_builders as fb
from tfl2tosa.tosa.fbs.builder import Builder, TableLayout, table_layout
from tfl2tosa.tosa.fbs.encoding import (
    dtype_of,
    encode_data,
    encode_shape,
    padded_size,
)
from tfl2tosa.versions import TOSA_VERSION

FILE_IDENTIFIER = b"TOSA"
# The serialization library release whose file format we write (schemas/tosa.fbs
# follows tosa-tools 2026.8.0): written as the file's software version and as
# the oldest reader it needs, the fields Arm's reader checks (a file without
# them is taken for one from before software versions were recorded).
SERIALIZATION_FORMAT_VERSION = (2026, 8, 0)

# flatbuffers offsets are 32-bit and the official verifier caps files at 2 GB.
MAX_FILE_SIZE = (1 << 31) - 1

_ENUM_TABLES = {"acc_type": fb.DType, "rounding_mode": fb.RoundingMode,
                "nan_mode": fb.NanPropagationMode, "resize_mode": fb.ResizeMode}
# attribute type -> {enum member name: its value}
_ENUM_VALUES = {kind: {name: value for name, value in vars(enum).items()
                       if not name.startswith("_")}
                for kind, enum in _ENUM_TABLES.items()}


def write_tosa(module: Module, path: str | os.PathLike[str] | None = None) -> bytes | None:
    """Serialize `module`; write it to `path` and return None, or return the bytes."""
    if path is None:
        return b"".join(tosa_pieces(module))
    metadata, blobs = _Serializer(module).serialize()
    from tfl2tosa.paths import file_name, shown_path

    target = shown_path(path)
    if not file_name(target):  # `.`, `/`: pathlib's own error, as before
        from pathlib import Path

        Path(target).with_name(".partial")
    partial = target + ".partial"
    with open(partial, "wb") as f:
        f.writelines(_file_pieces(metadata, blobs))
    os.replace(partial, target)
    return None


def tosa_pieces(module: Module) -> list[bytes | bytearray | np.ndarray]:
    """Serialize `module` as the pieces of its file, in order: the metadata, then
    each data vector's length word and padding around the constant's own bytes.
    Written one after another they are the file; writing them so copies each
    weight once, where joining them first would copy it into one more buffer."""
    metadata, blobs = _Serializer(module).serialize()
    return list(_file_pieces(metadata, blobs))


_INT = {int}


def _int32s(op: Op, attr: tosa_ops.Attr, value: Any) -> list[int]:
    """An i32 attribute's values, refused by name when one does not fit 32 bits."""
    if value.__class__ in (list, tuple) and set(map(type, value)) <= _INT:
        values = list(value)  # the usual form: no object array to go through
    else:
        values = [int(v) for v in np.ravel(np.asarray(value, dtype=object))]
    if values and (min(values) < -(1 << 31) or max(values) >= 1 << 31):
        raise IRError(f"{op.name} at {op.loc}: {attr.name} = {values} does not fit int32")
    return values


# ---------------------------------------------------------------------------
# Data vectors placed after the metadata


# The writer's records are plain classes: creating a dataclass costs time at
# import, and every CLI run imports the writer.


class _Blob:
    """A data vector and the offset fields pointing at it (each given as its
    distance from the end of the metadata), patched once its position is known."""

    __slots__ = ("data", "fields_from_end")

    def __init__(self, data: np.ndarray) -> None:
        self.data = data  # flat uint8, unpadded
        self.fields_from_end: list[int] = []


_ZEROS = bytes(8)
# A data vector's length word with the 0-7 zero bytes that pad up to it.
_PADDED_LENGTH = [struct.Struct(f"<{pad}xI") for pad in range(8)]
_UINT32 = struct.Struct("<I")


def _layout(metadata_size: int, blobs: list[_Blob]) -> Iterator[tuple[int, _Blob]]:
    """Yield (position of the length word, blob): each vector's bytes start 8-aligned."""
    pos = metadata_size
    for blob in blobs:
        pos += (4 - pos) % 8  # the uint32 length sits 4 bytes before the 8-aligned data
        yield pos, blob
        pos += 4 + padded_size(blob.data.size)


def _file_pieces(metadata: bytearray,
                 blobs: list[_Blob]) -> Iterator[bytes | bytearray | np.ndarray]:
    placed = list(_layout(len(metadata), blobs))
    end = placed[-1][0] + 4 + padded_size(placed[-1][1].data.size) if placed else len(metadata)
    if end > MAX_FILE_SIZE:
        raise TosaFileError(f"the .tosa file would be {end} bytes; the format's limit is 2 GB")
    for pos, blob in placed:
        for from_end in blob.fields_from_end:
            field_pos = len(metadata) - from_end
            _UINT32.pack_into(metadata, field_pos, pos - field_pos)
    yield metadata
    cursor = len(metadata)
    for pos, blob in placed:
        size = blob.data.size
        padded = padded_size(size)
        yield _PADDED_LENGTH[pos - cursor].pack(padded)
        yield blob.data
        if padded != size:
            yield _ZEROS[:padded - size]
        cursor = pos + 4 + padded


# ---------------------------------------------------------------------------
# Names


class _Names:
    """File-wide unique tensor/shape names, assigned in a fixed order."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.of_value: dict[int, str] = {}

    def fresh(self, base: str) -> str:
        base = base or "t"
        name, n = base, 0
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name

    def define(self, value: Value) -> str:
        name = self.fresh(value.name)
        self.of_value[id(value)] = name
        return name

    def __getitem__(self, value: Value) -> str:
        try:
            return self.of_value[id(value)]
        except KeyError:
            raise IRError(f"value {value.name!r} is used but not defined in its graph") from None


def _slot_of(add_function: Any) -> int:
    """The vtable slot a generated `<Table>Add<Field>` function writes."""

    class Probe:
        slot = -1

        def PrependUOffsetTRelativeSlot(self, slot: int, *_: Any) -> None:
            Probe.slot = slot

    add_function(Probe(), 0)
    return Probe.slot


_TENSOR_DATA_SLOT = _slot_of(fb.TosaTensorAddData)
_SHAPE_DATA_SLOT = _slot_of(fb.TosaShapeAddData)

# The tables written once per operator or tensor, laid out once. A data field is
# written as a placeholder uint32 (0, against a default of 1 so it is always
# written), patched once its vector's position is known.
_OPERATOR = table_layout(fb.TosaOperatorStart, fb.TosaOperatorAddOp,
                         fb.TosaOperatorAddAttributeType, fb.TosaOperatorAddAttribute,
                         fb.TosaOperatorAddInputs, fb.TosaOperatorAddOutputs,
                         fb.TosaOperatorAddLocation)
_LOCATION = table_layout(fb.OpLocationStart, fb.OpLocationAddText)


def _data_placeholder(builder: Any, _: int) -> None:
    builder.PrependUint32Slot(_TENSOR_DATA_SLOT, 0, 1)


def _shape_data_placeholder(builder: Any, _: int) -> None:
    builder.PrependUint32Slot(_SHAPE_DATA_SLOT, 0, 1)


_TENSOR = table_layout(fb.TosaTensorStart, fb.TosaTensorAddName, fb.TosaTensorAddShape,
                       fb.TosaTensorAddType, _data_placeholder, fb.TosaTensorAddVariable,
                       fb.TosaTensorAddVariableName, fb.TosaTensorAddIsUnranked)
_SHAPE = table_layout(fb.TosaShapeStart, fb.TosaShapeAddName, fb.TosaShapeAddRank,
                      _shape_data_placeholder)
# A placeholder's value: 0 is written, 1 (its default) leaves the field out.
_DATA, _NO_DATA = 0, 1


def _camel(field_name: str) -> str:
    """flatc's Python accessor spelling of a schema field: `nan_mode` -> `NanMode`."""
    return "".join(part[:1].upper() + part[1:] for part in field_name.split("_"))


class _AttributePlan:
    """How one op kind is written: its Op enum value and its attribute table's
    stored attributes and layout."""

    __slots__ = ("absent_values", "attrs", "fbs_op", "fields", "layout", "names",
                 "numbers_only", "operator_fields", "empty_table", "table", "union_type")

    def __init__(self, fbs_op: int, table: str, union_type: int,
                 attrs: tuple[tosa_ops.Attr, ...], layout: TableLayout) -> None:
        self.fbs_op = fbs_op          # the op's value in the `Op` enum
        self.table = table            # the attribute table's name, e.g. "Conv2dAttribute"
        self.union_type = union_type  # its value in the `Attribute` union
        self.operator_fields = (fbs_op, union_type)  # an operator table's first fields
        self.empty_table = (layout, ())  # its attribute table when it has no fields
        self.attrs = attrs            # the attributes stored in the table, in field order
        self.layout = layout          # their fields, in the same order
        # per attribute: (it, its name, its value when absent, its field's default,
        # its type, an enum's {member name: value} or None)
        self.fields = tuple((attr, attr.name, attr.default, default, attr.type,
                             _ENUM_VALUES.get(attr.type))
                            for attr, (_, _, default) in zip(attrs, layout.fields))
        self.names = tuple(attr.name for attr in attrs)
        self.absent_values = tuple(attr.default for attr in attrs)
        # Every field a number (no vector or string to build per table): the
        # table's field values follow from the attribute values alone.
        self.numbers_only = bool(attrs) and all(attr.type in _NUMBER_KINDS for attr in attrs)


# Attribute types stored as one number: a bool, an int32 or an enum's value.
_NUMBER_KINDS = frozenset({"bool", "i32", *_ENUM_VALUES})


_PLANS: dict[str, _AttributePlan] = {}
# op name (`tosa.conv2d`) -> its plan, once an op of that kind has been written
_PLANS_BY_OP: dict[str, _AttributePlan] = {}


def _attribute_plan(definition: tosa_ops.OpDef) -> _AttributePlan:
    """The op's plan, looked up in the generated code once per op kind."""
    plan = _PLANS.get(definition.name)
    if plan is None:
        table = definition.fbs_attr
        stored = tuple(attr for attr in definition.attrs if attr.fbs_field)
        layout = table_layout(getattr(fb, f"{table}Start"),
                              *[getattr(fb, f"{table}Add{_camel(attr.fbs_field)}")
                                for attr in stored])
        plan = _PLANS[definition.name] = _AttributePlan(
            definition.fbs_op, table, getattr(fb.Attribute, table), stored, layout)
    return plan


# ---------------------------------------------------------------------------
# Serialization


class _Tensor:
    __slots__ = ("blob", "data", "name", "type", "variable_name")

    def __init__(self, name: str, type: TensorType, data: np.ndarray | None = None,
                 variable_name: str | None = None) -> None:
        self.name = name
        self.type = type
        self.data = data
        self.variable_name = variable_name
        self.blob: _Blob | None = None  # encoded data, shared by a variable's copies


# What a `.tosa` file's metadata takes per op, a little more than most models'.
_METADATA_PER_OP = 256

# Ops whose results' data the file holds (a tensor's values, a shape's).
_DATA_OPS = frozenset({"tosa.const", "tosa.const_shape"})
_NAME = attrgetter("name")  # an op's


class _Block:
    __slots__ = ("graph", "inputs", "outputs", "shapes", "tensors")

    def __init__(self, graph: Graph, tensors: list[_Tensor | tuple[str, TensorType]]) -> None:
        self.graph = graph
        self.tensors = tensors
        self.shapes: list[tuple[str, list[int]]] = []
        self.inputs: list[str] = []
        self.outputs: list[str] = []


class _Serializer:
    def __init__(self, module: Module) -> None:
        if not module.graphs:
            raise IRError("cannot write a module without graphs")
        self.module = module
        self.names = _Names()
        self.variables: dict[str, _Tensor] = {}  # variable name -> its tensor
        # Room for the metadata (an op's table, names and location, its result's
        # tensor) of the ops: the buffer then seldom grows, which copies it.
        ops = sum(len(graph.ops) for graph in module.graphs.values())
        self.builder = Builder(max(4096, _METADATA_PER_OP * ops))
        self.blobs: list[_Blob] = []
        # (element type, int) -> a `value` attribute's padded bytes: clamps repeat bounds
        self.encoded_values: dict[tuple[Any, int], bytes] = {}
        # (plan, its attribute values) -> the field values of a numbers-only table:
        # ops of a kind repeat their flags and modes (every RESCALE of a model, say)
        self.number_fields: dict[tuple[_AttributePlan, tuple[Any, ...]], tuple[Any, ...]] = {}
        self.dtypes: dict[int, int] = {}  # id of an element type -> its flatbuffer DType

    def serialize(self) -> tuple[bytearray, list[_Blob]]:
        for graph in self.module.graphs.values():
            if "tosa.variable" in map(_NAME, graph.ops):  # few graphs have one
                for op in graph.ops:
                    if op.name == "tosa.variable":
                        self._declare_variable(op)
        blocks = [self._collect(graph) for graph in self.module.graphs.values()]
        b = self.builder
        regions = [self._region(block) for block in blocks]
        regions_vec = b.CreateOffsetVector(regions)
        major, minor, patch, draft = TOSA_VERSION
        fb.VersionStart(b)
        fb.VersionAdd_Major(b, major)
        fb.VersionAdd_Minor(b, minor)
        fb.VersionAdd_Patch(b, patch)
        fb.VersionAdd_Draft(b, draft)
        version = fb.VersionEnd(b)
        software_version = self._software_version()
        min_reader_version = self._software_version()
        fb.SerializationCompatibilityStart(b)
        fb.SerializationCompatibilityAddMinReaderVersion(b, min_reader_version)
        compatibility = fb.SerializationCompatibilityEnd(b)
        fb.TosaGraphStart(b)
        fb.TosaGraphAddVersion(b, version)
        fb.TosaGraphAddRegions(b, regions_vec)
        fb.TosaGraphAddSoftwareVersion(b, software_version)
        fb.TosaGraphAddCompatibility(b, compatibility)
        b.Finish(fb.TosaGraphEnd(b), file_identifier=FILE_IDENTIFIER)
        return b.Output(), self.blobs

    def _software_version(self) -> int:
        b = self.builder
        modifier = b.CreateString("")
        major, minor, micro = SERIALIZATION_FORMAT_VERSION
        fb.SoftwareVersionStart(b)
        fb.SoftwareVersionAdd_Major(b, major)
        fb.SoftwareVersionAdd_Minor(b, minor)
        fb.SoftwareVersionAdd_Micro(b, micro)
        fb.SoftwareVersionAdd_Modifier(b, modifier)
        return fb.SoftwareVersionEnd(b)

    # -- collecting tensors, in the order they are listed in the file

    def _collect(self, graph: Graph) -> _Block:
        block = _Block(graph, list(self.variables.values()))
        for value in graph.inputs:
            block.tensors.append(self._tensor(value))
        names, used, of_value = self.names, self.names.used, self.names.of_value
        tensors = block.tensors
        for op in graph.ops:
            if op.name not in _DATA_OPS:
                for value in op.results:
                    if value.type.__class__ is TensorType:  # most: `_tensor` inline
                        name = value.name
                        if not name or name in used:
                            name = names.fresh(name)
                        else:
                            used.add(name)
                        of_value[id(value)] = name
                        tensors.append((name, value.type))  # a `_Tensor` without data
                        continue
                    if isinstance(value.type, ShapeType):
                        raise IRError(f"{op.name}: shape values other than tosa.const_shape "
                                      "results cannot be serialized")
                    tensors.append(self._tensor(value))
                continue
            for value in op.results:
                if op.name == "tosa.const_shape":
                    block.shapes.append((self.names.define(value),
                                         [int(v) for v in op.attrs["values"]]))
                elif isinstance(value.type, ShapeType):
                    raise IRError(f"{op.name}: shape values other than tosa.const_shape "
                                  "results cannot be serialized")
                else:
                    data = op.attrs.get("values") if op.name == "tosa.const" else None
                    block.tensors.append(self._tensor(value, data))
        block.inputs = [self.names[v] for v in graph.inputs]
        block.outputs = [self.names[v] for v in graph.outputs]
        return block

    def _tensor(self, value: Value, data: Any = None) -> _Tensor:
        if not isinstance(value.type, TensorType):
            raise IRError(f"{value.name!r} has type {value.type}; only tensors can be serialized")
        return _Tensor(self.names.define(value), value.type,
                       None if data is None else np.asarray(data))

    def _declare_variable(self, op: Op) -> None:
        name = str(op.attrs["name"])
        if name in self.variables:
            raise IRError(f"variable {name!r} is declared twice")
        element = scalar_type(str(op.attrs["type"]))
        shape = tuple(int(d) for d in op.attrs["var_shape"])
        initial = op.attrs.get("initial_value")
        data = None if initial is None or initial is False else np.asarray(initial)
        self.variables[name] = _Tensor(self.names.fresh(name), TensorType(shape, element),
                                       data, name)

    # -- regions and blocks

    def _region(self, block: _Block) -> int:
        b = self.builder
        operators = self._operators(block.graph.ops)
        tensors = self._tensor_tables(block.tensors)
        shapes = [self._shape_table(name, values) for name, values in block.shapes]
        name = b.CreateSharedString(block.graph.name)
        operators_vec = b.CreateOffsetVector(operators)
        tensors_vec = b.CreateOffsetVector(tensors)
        inputs_vec = self._string_vector(block.inputs)
        outputs_vec = self._string_vector(block.outputs)
        shapes_vec = b.CreateOffsetVector(shapes)
        fb.TosaBasicBlockStart(b)
        fb.TosaBasicBlockAddName(b, name)
        fb.TosaBasicBlockAddOperators(b, operators_vec)
        fb.TosaBasicBlockAddTensors(b, tensors_vec)
        fb.TosaBasicBlockAddInputs(b, inputs_vec)
        fb.TosaBasicBlockAddOutputs(b, outputs_vec)
        fb.TosaBasicBlockAddShapes(b, shapes_vec)
        basic_block = fb.TosaBasicBlockEnd(b)
        blocks_vec = b.CreateOffsetVector([basic_block])
        fb.TosaRegionStart(b)
        fb.TosaRegionAddName(b, name)
        fb.TosaRegionAddBlocks(b, blocks_vec)
        return fb.TosaRegionEnd(b)

    def _tensor_tables(self, tensors: list[_Tensor | tuple[str, TensorType]]) -> list[int]:
        """The table of each tensor, in order: a (name, type) is a tensor without data.

        A tensor's row (`Builder.Int32VectorTables`: its name, shape and fields,
        and for a constant the registering of its data) waits in `rows`; the
        rows are written before anything else is (a name not yet written, a
        tensor taking the steps of `_tensor_table_by_steps`), keeping the order."""
        # The element types of a module are few and live as long as it does:
        # its first tensor of each, or a variable's, takes the steps of
        # `_tensor_table_by_steps`.
        dtypes = self.dtypes
        shared = self.builder._shared
        offsets: list[int] = []
        rows: list[tuple[int, Any, tuple[Any, ...], Any]] = []
        waiting: list[tuple[str, TensorType]] = []  # the tensor of each row
        for tensor in tensors:
            if isinstance(tensor, tuple):
                name, tensor_type = tensor
                dtype = dtypes.get(id(tensor_type.element))
                name_offset = shared.get(name)
                if dtype is not None and name_offset is not None:
                    dims = tensor_type.shape
                    rows.append((name_offset, () if dims is None else dims,
                                 (dtype, _NO_DATA, False, 0, dims is None), None))
                    waiting.append(tensor)
                    continue
                tensor = _Tensor(name, tensor_type)
            tensor_type = tensor.type
            dtype = dtypes.get(id(tensor_type.element))
            name_offset = shared.get(tensor.name)
            if dtype is None or tensor.variable_name is not None or name_offset is None:
                if rows:
                    offsets += self._tensor_rows(rows, waiting)
                if dtype is None or tensor.variable_name is not None:
                    offsets.append(self._tensor_table_by_steps(tensor))
                    continue
                name_offset = self.builder.CreateSharedString(tensor.name)
            dims = tensor_type.shape
            no_data = tensor.data is None
            # A constant's data is registered once its table is written.
            rows.append((name_offset, () if dims is None else dims,
                         (dtype, _NO_DATA if no_data else _DATA, False, 0, dims is None),
                         None if no_data and tensor.blob is None
                         else partial(self._add_blob, tensor)))
            waiting.append((tensor.name, tensor_type))
        if rows:
            offsets += self._tensor_rows(rows, waiting)
        return offsets

    def _tensor_rows(self, rows: list[tuple[int, Any, tuple[Any, ...], Any]],
                     tensors: list[tuple[str, TensorType]]) -> list[int]:
        """Write `rows`, the tables of `tensors` (name, type), and empty both lists."""
        try:
            offsets = self.builder.Int32VectorTables(_TENSOR, rows)
        except struct.error:
            for name, tensor_type in tensors:
                self._refuse_shape(_Tensor(name, tensor_type))
            raise
        rows.clear()
        tensors.clear()
        return offsets

    def _tensor_table_by_steps(self, tensor: _Tensor) -> int:
        b = self.builder
        tensor_type = tensor.type
        dims = tensor_type.shape
        ranked = dims is not None
        name = b.CreateSharedString(tensor.name)
        try:
            shape = b.CreateInt32Vector(dims if ranked else ())
        except struct.error:
            self._refuse_shape(tensor)
            raise
        variable_name = (b.CreateSharedString(tensor.variable_name)
                         if tensor.variable_name is not None else 0)
        if tensor.data is not None and tensor.blob is None:
            self._check_data_size(tensor)
            tensor.blob = _Blob(encode_data(tensor.data, tensor_type.element))
            self.blobs.append(tensor.blob)
        dtype = self.dtypes.get(id(tensor_type.element))
        if dtype is None:
            dtype = self.dtypes[id(tensor_type.element)] = dtype_of(tensor_type.element)
        offset = b.Table(_TENSOR, (name, shape, dtype,
                                   _NO_DATA if tensor.blob is None else _DATA,
                                   bool(variable_name), variable_name, not ranked))
        self._add_blob(tensor)
        return offset

    @staticmethod
    def _refuse_shape(tensor: _Tensor) -> None:
        dims = tensor.type.shape
        if dims and (min(dims) < -(1 << 31) or max(dims) >= 1 << 31):
            raise IRError(f"tensor {tensor.name!r}: shape {list(dims)} does not fit "
                          "int32") from None

    def _add_blob(self, tensor: _Tensor) -> None:
        """Encode the tensor's data (once) and mark the data field of the table
        just written as one to point at it."""
        if tensor.data is not None and tensor.blob is None:
            self._check_data_size(tensor)
            tensor.blob = _Blob(encode_data(tensor.data, tensor.type.element))
            self.blobs.append(tensor.blob)
        if tensor.blob is not None:
            tensor.blob.fields_from_end.append(self.builder.FieldOffset(_TENSOR_DATA_SLOT))

    @staticmethod
    def _check_data_size(tensor: _Tensor) -> None:
        if tensor.data is None or tensor.data.shape == tensor.type.shape:
            return  # the usual case: the values have the type's (static) shape
        if tensor.type.is_static:
            count = math.prod(tensor.type.shape)  # type: ignore[arg-type]
            if tensor.data.size != count:
                raise IRError(f"constant {tensor.name!r} holds {tensor.data.size} values, its "
                              f"type {tensor.type} needs {count}")

    def _shape_table(self, name: str, values: list[int]) -> int:
        b = self.builder
        name_offset = b.CreateSharedString(name)
        blob = _Blob(encode_shape(values))
        self.blobs.append(blob)
        offset = b.Table(_SHAPE, (name_offset, len(values), _DATA))
        blob.fields_from_end.append(b.FieldOffset(_SHAPE_DATA_SLOT))
        return offset

    # -- operators

    def _operators(self, ops: list[Op]) -> list[int]:
        """The operator table of each op but variable declarations, in order.

        The usual op's row (`Builder.StringVectorsTables`) waits in `rows`;
        the rows are written before anything else is (an op checked one by
        one, an attribute table with vectors or strings), keeping the order."""
        plans = _PLANS_BY_OP
        name_of = self.names.of_value.__getitem__
        operators: list[int] = []
        rows: list[tuple[Any, ...]] = []
        for op in ops:
            name = op.name
            if name == "tosa.variable":
                continue
            plan = plans.get(name)
            if plan is not None:
                # Every named value is a tensor or a shape (`_collect` names
                # nothing else), so names found for all operands mean none is
                # omitted.
                try:
                    inputs = list(map(name_of, map(id, op.operands)))
                    outputs = list(map(name_of, map(id, op.results)))
                except KeyError:
                    plan = None
            if plan is None:
                operators += self._operator_rows(rows)
                operators.append(self._checked_operator(op))
                continue
            if not plan.fields:
                child: int | tuple[TableLayout, tuple[Any, ...]] = plan.empty_table
            else:
                values = self._number_fields(op, plan) if plan.numbers_only else None
                if values is not None:
                    child = (plan.layout, values)
                else:
                    operators += self._operator_rows(rows)
                    child = self._attribute_table(op, plan)
            rows.append((plan.operator_fields, child, inputs, outputs, op.loc))
        operators += self._operator_rows(rows)
        return operators

    def _operator_rows(self, rows: list[tuple[Any, ...]]) -> list[int]:
        """Write `rows` (`Builder.StringVectorsTables`), the operators waiting,
        and empty the list."""
        if not rows:
            return []
        offsets = self.builder.StringVectorsTables(_OPERATOR, _LOCATION, rows)
        rows.clear()
        return offsets

    def _checked_operator(self, op: Op) -> int:
        """An operator whose kind, operands or names are checked one by one."""
        if op.name in ("tosa.variable_write", "tosa.variable_read"):
            return self._operator_table(*self._variable_access(op), op.loc)
        definition = tosa_ops.BY_MLIR.get(op.name)
        if definition is None:
            raise IRError(f"{op.name} ({op.loc or 'no location'}) is not a TOSA 1.0 operator")
        for i, value in enumerate(op.operands):
            if isinstance(value.type, NoneType):
                raise IRError(f"{op.name}: operand {i} is omitted; TOSA has no optional operands")
        names = self.names
        inputs = [names[v] for v in op.operands]
        outputs = [names[v] for v in op.results]
        plan = _PLANS_BY_OP[op.name] = _attribute_plan(definition)
        return self._operator_table(plan.fbs_op, plan.union_type,
                                    self._attribute_table(op, plan), inputs, outputs, op.loc)

    def _operator_table(self, fbs_op: int, attr_type: int, attr_table: int,
                        inputs: list[str], outputs: list[str], loc: str) -> int:
        return self.builder.StringVectorsTable(_OPERATOR, (fbs_op, attr_type), attr_table,
                                               (inputs, outputs), _LOCATION, loc)

    def _variable_access(self, op: Op) -> tuple[int, int, int, list[str], list[str]]:
        name = str(op.attrs["name"])
        if name not in self.variables:
            raise IRError(f"{op.name} refers to undeclared variable {name!r}")
        tensor = self.variables[name].name
        identity = tosa_ops.OPS["IDENTITY"]
        fb.IdentityAttributeStart(self.builder)
        table = fb.IdentityAttributeEnd(self.builder)
        if op.name == "tosa.variable_write":
            inputs, outputs = [self.names[op.operands[0]]], [tensor]
        else:
            inputs, outputs = [tensor], [self.names[op.result]]
        return (identity.fbs_op, getattr(fb.Attribute, identity.fbs_attr), table,
                inputs, outputs)

    def _number_fields(self, op: Op, plan: _AttributePlan) -> tuple[Any, ...] | None:
        """The field values of a numbers-only attribute table, kept per distinct
        attribute values; None for a value that cannot be kept (unhashable).

        Values that compare equal give the same fields (True, 1 and 1.0 all
        write 1); a value that cannot be written is refused by the field by
        field path and never kept."""
        key = (plan, tuple(map(op.attrs.get, plan.names, plan.absent_values)))
        try:
            values = self.number_fields.get(key)
        except TypeError:
            return None
        if values is None:
            values = self.number_fields[key] = tuple(self._attribute_values(op, plan))
        return values

    def _attribute_table(self, op: Op, plan: _AttributePlan) -> int:
        values = self._number_fields(op, plan) if plan.numbers_only else None
        if values is None:
            values = self._attribute_values(op, plan)
        return self.builder.Table(plan.layout, values)

    def _attribute_values(self, op: Op, plan: _AttributePlan) -> list[Any]:
        # Children (vectors, strings) must be built before the table is started.
        # An absent attribute takes its field's default: the table leaves it out.
        attrs = op.attrs
        values: list[Any] = []
        for attr, name, absent, default, kind, codes in plan.fields:
            value = attrs.get(name, absent)
            if value is None:
                values.append(default)
            elif kind == "bool":
                values.append(bool(value))
            elif kind == "i32" and value.__class__ is int and -(1 << 31) <= value < (1 << 31):
                values.append(value)
            elif codes is not None and value.__class__ is str and value in codes:
                values.append(codes[value])
            else:
                values.append(self._attribute_value(op, plan.table, attr, value))
        return values

    def _attribute_value(self, op: Op, table: str, attr: tosa_ops.Attr, value: Any) -> Any:
        b = self.builder
        kind = attr.type
        if kind == "bool":
            return bool(value)
        if kind == "i32":
            if value.__class__ is int and -(1 << 31) <= value < (1 << 31):
                return value
            return _int32s(op, attr, [value])[0]
        if kind == "i32[]":
            if value.__class__ in (list, tuple):
                try:  # the usual form, packed as it is
                    return b.CreateInt32Vector(value)
                except struct.error:
                    # Not all int32s. The failed pack only aligned the buffer,
                    # as the call below would: it converts them or says why not.
                    pass
            return b.CreateInt32Vector(_int32s(op, attr, value))
        if kind in _ENUM_VALUES:
            code = _ENUM_VALUES[kind].get(str(value))
            if code is None:
                raise IRError(f"{op.name}: {attr.name} = {value!r} is not a valid {kind}")
            return code
        if kind == "value":
            element = op.operands[0].type.element
            key = (element, value) if value.__class__ is int else None  # 0.0 == -0.0
            raw = self.encoded_values.get(key) if key is not None else None
            if raw is None:
                raw = encode_data(np.asarray([value]), element).tobytes()
                raw += bytes(padded_size(len(raw)) - len(raw))
                if key is not None:
                    self.encoded_values[key] = raw
            return b.CreateByteVector(raw, 8)
        if kind in ("string", "graph"):
            if hasattr(fb, f"{table}Start{_camel(attr.fbs_field)}Vector"):  # a [ubyte] field
                raw = value if isinstance(value, bytes) else str(value).encode()
                return self._byte_vector(np.frombuffer(raw, dtype=np.uint8), align=1)
            if kind == "graph" and str(value) not in self.module.graphs:
                raise IRError(f"{op.name}: {attr.name} names graph {value!r}, which the "
                              "module does not have")
            return b.CreateSharedString(str(value))
        raise IRError(f"{op.name}: attribute {attr.name} of type {kind} has no "
                      "flatbuffer encoding")

    # -- vectors

    def _byte_vector(self, data: np.ndarray, align: int) -> int:
        """A [ubyte] vector; `align` 8 pads to 8 bytes like the schema's force_align fields."""
        raw = data.tobytes()
        if align == 8:
            raw += bytes(padded_size(len(raw)) - len(raw))
        return self.builder.CreateByteVector(raw, align)

    def _string_vector(self, names: list[str]) -> int:
        return self.builder.CreateSharedStringVector(names)
