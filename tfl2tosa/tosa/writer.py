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

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tfl2tosa.errors import IRError, TosaFileError
from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.types import NoneType, ShapeType, TensorType, scalar_type
from tfl2tosa.tosa import ops as tosa_ops
from tfl2tosa.tosa.fbs import tosa_generated as fb
from tfl2tosa.tosa.fbs.builder import Builder
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


def write_tosa(module: Module, path: str | os.PathLike[str] | None = None) -> bytes | None:
    """Serialize `module`; write it to `path` and return None, or return the bytes."""
    metadata, blobs = _Serializer(module).serialize()
    if path is None:
        return b"".join(_file_pieces(metadata, blobs))
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    with open(partial, "wb") as f:
        f.writelines(_file_pieces(metadata, blobs))
    os.replace(partial, target)
    return None


def _int32s(op: Op, attr: tosa_ops.Attr, value: Any) -> list[int]:
    """An i32 attribute's values, refused by name when one does not fit 32 bits."""
    values = [int(v) for v in np.ravel(np.asarray(value, dtype=object))]
    if any(not -(1 << 31) <= v < (1 << 31) for v in values):
        raise IRError(f"{op.name} at {op.loc}: {attr.name} = {values} does not fit int32")
    return values


# ---------------------------------------------------------------------------
# Data vectors placed after the metadata


# The writer's records are plain classes: a dataclass costs ~0.4 ms to create
# at import, and every CLI run imports the writer.


class _Blob:
    """A data vector and the offset fields pointing at it (each given as its
    distance from the end of the metadata), patched once its position is known."""

    __slots__ = ("data", "fields_from_end")

    def __init__(self, data: np.ndarray) -> None:
        self.data = data  # flat uint8, unpadded
        self.fields_from_end: list[int] = []


_ZEROS = bytes(8)


def _layout(metadata_size: int, blobs: list[_Blob]) -> Iterator[tuple[int, _Blob]]:
    """Yield (position of the length word, blob): each vector's bytes start 8-aligned."""
    pos = metadata_size
    for blob in blobs:
        pos += (4 - pos) % 8  # the uint32 length sits 4 bytes before the 8-aligned data
        yield pos, blob
        pos += 4 + padded_size(blob.data.size)


def _file_pieces(metadata: bytearray, blobs: list[_Blob]) -> Iterator[bytes | np.ndarray]:
    placed = list(_layout(len(metadata), blobs))
    end = placed[-1][0] + 4 + padded_size(placed[-1][1].data.size) if placed else len(metadata)
    if end > MAX_FILE_SIZE:
        raise TosaFileError(f"the .tosa file would be {end} bytes; the format's limit is 2 GB")
    for pos, blob in placed:
        for from_end in blob.fields_from_end:
            field_pos = len(metadata) - from_end
            struct.pack_into("<I", metadata, field_pos, pos - field_pos)
    yield bytes(metadata)
    cursor = len(metadata)
    for pos, blob in placed:
        yield _ZEROS[:pos - cursor]
        yield struct.pack("<I", padded_size(blob.data.size))
        yield blob.data
        yield _ZEROS[:padded_size(blob.data.size) - blob.data.size]
        cursor = pos + 4 + padded_size(blob.data.size)


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


def _camel(field_name: str) -> str:
    """flatc's Python accessor spelling of a schema field: `nan_mode` -> `NanMode`."""
    return "".join(part[:1].upper() + part[1:] for part in field_name.split("_"))


class _AttributePlan:
    """How one op's attribute table is written: the generated functions to call."""

    __slots__ = ("end", "fields", "start", "table", "union_type")

    def __init__(self, table: str, union_type: int, start: Any,
                 fields: tuple[tuple[tosa_ops.Attr, Any], ...], end: Any) -> None:
        self.table = table            # the attribute table's name, e.g. "Conv2dAttribute"
        self.union_type = union_type  # its value in the `Attribute` union
        self.start = start
        self.fields = fields          # (attribute, its `<table>Add<Field>`) per stored field
        self.end = end


_PLANS: dict[str, _AttributePlan] = {}


def _attribute_plan(definition: tosa_ops.OpDef) -> _AttributePlan:
    """The op's plan, looked up in the generated code once per op kind."""
    plan = _PLANS.get(definition.name)
    if plan is None:
        table = definition.fbs_attr
        fields = tuple((attr, getattr(fb, f"{table}Add{_camel(attr.fbs_field)}"))
                       for attr in definition.attrs if attr.fbs_field)
        plan = _PLANS[definition.name] = _AttributePlan(
            table, getattr(fb.Attribute, table), getattr(fb, f"{table}Start"), fields,
            getattr(fb, f"{table}End"))
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


class _Block:
    __slots__ = ("graph", "inputs", "outputs", "shapes", "tensors")

    def __init__(self, graph: Graph, tensors: list[_Tensor]) -> None:
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
        self.builder = Builder(4096)
        self.blobs: list[_Blob] = []

    def serialize(self) -> tuple[bytearray, list[_Blob]]:
        for _, op in self.module.ops():
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
        for op in graph.ops:
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
        operators = [self._operator(op) for op in block.graph.ops if op.name != "tosa.variable"]
        tensors = [self._tensor_table(t) for t in block.tensors]
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

    def _tensor_table(self, tensor: _Tensor) -> int:
        b = self.builder
        ranked = tensor.type.shape is not None
        name = b.CreateSharedString(tensor.name)
        dims = tensor.type.shape if ranked else ()
        if any(not -(1 << 31) <= d < (1 << 31) for d in dims):
            raise IRError(f"tensor {tensor.name!r}: shape {list(dims)} does not fit int32")
        shape = b.CreateInt32Vector(dims)
        variable_name = (b.CreateSharedString(tensor.variable_name)
                         if tensor.variable_name is not None else None)
        if tensor.data is not None and tensor.blob is None:
            self._check_data_size(tensor)
            tensor.blob = _Blob(encode_data(tensor.data, tensor.type.element))
            self.blobs.append(tensor.blob)
        fb.TosaTensorStart(b)
        fb.TosaTensorAddName(b, name)
        fb.TosaTensorAddShape(b, shape)
        fb.TosaTensorAddType(b, dtype_of(tensor.type.element))
        if tensor.blob is not None:
            self._data_field(_TENSOR_DATA_SLOT, tensor.blob)
        if variable_name is not None:
            fb.TosaTensorAddVariable(b, True)
            fb.TosaTensorAddVariableName(b, variable_name)
        if not ranked:
            fb.TosaTensorAddIsUnranked(b, True)
        return fb.TosaTensorEnd(b)

    @staticmethod
    def _check_data_size(tensor: _Tensor) -> None:
        if tensor.type.is_static and tensor.data is not None:
            count = tensor.type.num_elements
            if tensor.data.size != count:
                raise IRError(f"constant {tensor.name!r} holds {tensor.data.size} values, its "
                              f"type {tensor.type} needs {count}")

    def _shape_table(self, name: str, values: list[int]) -> int:
        b = self.builder
        name_offset = b.CreateSharedString(name)
        fb.TosaShapeStart(b)
        fb.TosaShapeAddName(b, name_offset)
        fb.TosaShapeAddRank(b, len(values))
        blob = _Blob(encode_shape(values))
        self.blobs.append(blob)
        self._data_field(_SHAPE_DATA_SLOT, blob)
        return fb.TosaShapeEnd(b)

    def _data_field(self, slot: int, blob: _Blob) -> None:
        """Add a placeholder offset field; it is patched to point at the data vector."""
        b = self.builder
        b.PrependUint32Slot(slot, 0, 1)  # 0 != default 1: always written
        blob.fields_from_end.append(b.Offset())

    # -- operators

    def _operator(self, op: Op) -> int:
        fbs_op, attr_type, attr_table, inputs, outputs = self._operator_parts(op)
        b = self.builder
        inputs_vec = self._string_vector(inputs)
        outputs_vec = self._string_vector(outputs)
        location = None
        if op.loc:
            text = b.CreateString(op.loc)
            fb.OpLocationStart(b)
            fb.OpLocationAddText(b, text)
            location = fb.OpLocationEnd(b)
        fb.TosaOperatorStart(b)
        fb.TosaOperatorAddOp(b, fbs_op)
        fb.TosaOperatorAddAttributeType(b, attr_type)
        fb.TosaOperatorAddAttribute(b, attr_table)
        fb.TosaOperatorAddInputs(b, inputs_vec)
        fb.TosaOperatorAddOutputs(b, outputs_vec)
        if location is not None:
            fb.TosaOperatorAddLocation(b, location)
        return fb.TosaOperatorEnd(b)

    def _operator_parts(self, op: Op) -> tuple[int, int, int, list[str], list[str]]:
        """(Op enum, union type, attribute table offset, input names, output names)."""
        if op.name in ("tosa.variable_write", "tosa.variable_read"):
            return self._variable_access(op)
        definition = tosa_ops.BY_MLIR.get(op.name)
        if definition is None:
            raise IRError(f"{op.name} ({op.loc or 'no location'}) is not a TOSA 1.0 operator")
        for i, value in enumerate(op.operands):
            if isinstance(value.type, NoneType):
                raise IRError(f"{op.name}: operand {i} is omitted; TOSA has no optional operands")
        inputs = [self.names[v] for v in op.operands]
        outputs = [self.names[v] for v in op.results]
        table = self._attribute_table(op, definition)
        return definition.fbs_op, _attribute_plan(definition).union_type, table, inputs, outputs

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

    def _attribute_table(self, op: Op, definition: tosa_ops.OpDef) -> int:
        b = self.builder
        plan = _attribute_plan(definition)
        # Children (vectors, strings) must be built before the table is started.
        fields: list[tuple[Any, Any]] = []
        for attr, add in plan.fields:
            value = op.attrs.get(attr.name, attr.default)
            if value is None:
                continue
            fields.append((add, self._attribute_value(op, plan.table, attr, value)))
        plan.start(b)
        for add, encoded in fields:
            add(b, encoded)
        return plan.end(b)

    def _attribute_value(self, op: Op, table: str, attr: tosa_ops.Attr, value: Any) -> Any:
        b = self.builder
        kind = attr.type
        if kind == "i32":
            return _int32s(op, attr, [value])[0]
        if kind == "bool":
            return bool(value)
        if kind == "i32[]":
            return b.CreateNumpyVector(np.asarray(_int32s(op, attr, value), dtype="<i4"))
        if kind in _ENUM_TABLES:
            try:
                return getattr(_ENUM_TABLES[kind], str(value))
            except AttributeError:
                raise IRError(f"{op.name}: {attr.name} = {value!r} is not a valid "
                              f"{kind}") from None
        if kind == "value":
            element = op.operands[0].type.element
            return self._byte_vector(encode_data(np.asarray([value]), element), align=8)
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
        b = self.builder
        return b.CreateOffsetVector([b.CreateSharedString(n) for n in names])
