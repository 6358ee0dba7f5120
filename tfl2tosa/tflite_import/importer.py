"""Building the IR Module from a parsed TFLite model, one subgraph at a time."""

from __future__ import annotations

from typing import Any

import numpy as np

from tfl2tosa.errors import ModelError
from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.types import NoneType, TensorType, Type
from tfl2tosa.tflite_import.schema import (CUSTOM_CODE, SUBGRAPH_ATTR_NAMES, builtin_options,
                                           op_name_for_code)
from tfl2tosa.tflite_import import flat
from tfl2tosa.tflite_import.flat import U32, U64, SchemaTable, Table
from tfl2tosa.tflite_import.source import (SCHEMA_VERSION, Buffer, checked_length, checked_tables,
                                           operator_code, reading, text)
from tfl2tosa.tflite_import.tensors import (Buffers, TensorInfo, blockwise_element,
                                            constant_array, empty_array, read_tensor)


# Vtable slots (4 + 2 * field number, schema.fbs order) of the tables read with `flat`.
_SUBGRAPH_TENSORS, _SUBGRAPH_INPUTS, _SUBGRAPH_OUTPUTS, _SUBGRAPH_OPERATORS, _SUBGRAPH_NAME = \
    4, 6, 8, 10, 12
_OPERATOR_OPCODE_INDEX, _OPERATOR_INPUTS, _OPERATOR_OUTPUTS, _OPERATOR_CUSTOM_OPTIONS = 4, 6, 8, 14
_OPERATOR_INTERMEDIATES = 20
_OPERATOR_LARGE_CUSTOM_OPTIONS_OFFSET, _OPERATOR_LARGE_CUSTOM_OPTIONS_SIZE = 22, 24
_BYTES = np.dtype(np.uint8)


# Plain record classes: a dataclass costs far more to create at import, and
# every conversion imports the importer.


class OpCode:
    """One entry of the model's operator_codes table, resolved."""

    __slots__ = ("code", "custom_code", "op_name", "schema_name", "version")

    def __init__(self, op_name: str, schema_name: str, code: int, custom_code: str,
                 version: int = 1) -> None:
        self.op_name = op_name          # IR name: tfl.conv_2d, tfl.custom, tfl.unknown
        self.schema_name = schema_name  # CONV_2D, CUSTOM, BUILTIN_215
        self.code = code
        self.custom_code = custom_code
        self.version = version          # a custom op's version tells its variants apart


class OperatorRecord:
    """One operator of a subgraph, as read before its IR op is built."""

    __slots__ = ("index", "inputs", "opcode", "outputs", "table")

    def __init__(self, index: int, table: Table, opcode: OpCode, inputs: list[int],
                 outputs: list[int]) -> None:
        self.index = index
        self.table = table
        self.opcode = opcode
        self.inputs = inputs
        self.outputs = outputs


class _Names:
    """Unique value names within a graph, linear time even with many duplicates."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.next_suffix: dict[str, int] = {}

    def take(self, base: str) -> str:
        if base not in self.used:
            self.used.add(base)
            return base
        n = self.next_suffix.get(base, 1)
        while f"{base}_{n}" in self.used:
            n += 1
        self.next_suffix[base] = n + 1
        name = f"{base}_{n}"
        self.used.add(name)
        return name


def import_model(buf: Buffer, origin: str, path: str | None) -> Module:
    file_size = len(buf)
    with reading("the model root table"):
        model = SchemaTable.root("Model", buf)
        version = model.Version()
        root = flat.root(buf)
    if version != SCHEMA_VERSION:
        raise ModelError(f"{origin}: not a TFLite model or an unsupported schema version "
                         f"(version field is {version}, expected {SCHEMA_VERSION})")
    opcodes = _read_opcodes(model, file_size)
    buffers = Buffers(root, buf, file_size)
    # Model.subgraphs is the Model table's field 2.
    start, subgraph_count = checked_tables(root, 8, file_size, "subgraph table")
    if subgraph_count == 0:
        raise ModelError(f"{origin}: the model has no subgraphs")
    subgraphs = []
    for i in range(subgraph_count):
        with reading(f"subgraph {i}"):
            subgraphs.append(root.table_at(start, i))
    graph_names = _graph_names(subgraphs)

    module = Module()
    module.attrs["schema_version"] = version
    with reading("model description"):
        module.attrs["description"] = text(model.Description(), "model description")
    if path is not None:
        module.attrs["source"] = path
    tensor_names: list[list[str]] = []
    for i, subgraph in enumerate(subgraphs):
        builder = _SubgraphImporter(subgraph, i, graph_names, opcodes, buffers)
        module.add_graph(builder.build())
        tensor_names.append(builder.tensor_names)
    module.attrs["metadata"] = _read_metadata(model, buffers, file_size)
    module.attrs["signature_defs"] = _read_signatures(model, graph_names, tensor_names, file_size)
    return module


def _read_opcodes(model: Any, file_size: int) -> list[OpCode]:
    count = checked_length(model, "OperatorCodes", 4, file_size, "operator code table")
    opcodes = []
    for i in range(count):
        what = f"operator code {i}"
        with reading(what):
            entry = model.OperatorCodes(i)
            code = operator_code(entry)
            custom_code = text(entry.CustomCode(), f"{what} custom code")
            version = entry.Version()
        if code < 0:
            raise ModelError(f"corrupt model: {what} has negative builtin code {code}")
        if code == CUSTOM_CODE:
            opcodes.append(OpCode("tfl.custom", "CUSTOM", code, custom_code, version))
        else:
            op_name, schema_name = op_name_for_code(code)
            opcodes.append(OpCode(op_name, schema_name, code, custom_code))
    return opcodes


def _graph_names(subgraphs: list[Table]) -> list[str]:
    """`main` for subgraph 0; others their own name if unique and an identifier."""
    raw = []
    for i, subgraph in enumerate(subgraphs):
        with reading(f"subgraph {i} name"):
            raw.append(text(subgraph.string(_SUBGRAPH_NAME), f"subgraph {i} name"))
    counts: dict[str, int] = {}
    for name in raw[1:]:
        counts[name] = counts.get(name, 0) + 1
    fallback = {f"subgraph_{i}" for i in range(len(raw))}
    names = ["main"]
    for i, name in enumerate(raw[1:], start=1):
        usable = (name.isascii() and name.isidentifier() and counts[name] == 1 and name != "main"
                  and name not in fallback)
        names.append(name if usable else f"subgraph_{i}")
    return names


def _read_metadata(model: Any, buffers: Buffers, file_size: int) -> dict[str, np.ndarray]:
    """Metadata entries: name -> read-only uint8 view of its buffer."""
    count = checked_length(model, "Metadata", 4, file_size, "metadata table")
    metadata = {}
    for i in range(count):
        what = f"metadata {i}"
        with reading(what):
            entry = model.Metadata(i)
            name = text(entry.Name(), f"{what} name")
            index = entry.Buffer()
        metadata[name] = buffers.bytes_view(index, f"{what} {name!r}")
    return metadata


def _read_signatures(model: Any, graph_names: list[str], tensor_names: list[list[str]],
                     file_size: int) -> list[dict[str, Any]]:
    """Signature defs: key, graph, and alias -> value name for inputs and outputs."""
    count = checked_length(model, "SignatureDefs", 4, file_size, "signature table")
    signatures = []
    for i in range(count):
        what = f"signature {i}"
        with reading(what):
            signature = model.SignatureDefs(i)
            key = text(signature.SignatureKey(), f"{what} key")
            graph_index = signature.SubgraphIndex()
        if graph_index >= len(graph_names):
            raise ModelError(f"corrupt model: {what} {key!r} refers to subgraph {graph_index}, "
                             f"but the model has {len(graph_names)}")
        names = tensor_names[graph_index]
        entry: dict[str, Any] = {"signature_key": key, "subgraph": graph_names[graph_index],
                                 "subgraph_index": graph_index}
        for field in ("Inputs", "Outputs"):
            length = checked_length(signature, field, 4, file_size, f"{what} {field.lower()}")
            mapping = {}
            for j in range(length):
                with reading(f"{what} {field.lower()} {j}"):
                    tensor_map = getattr(signature, field)(j)
                    alias = text(tensor_map.Name(), f"{what} alias")
                    index = tensor_map.TensorIndex()
                if index >= len(names):
                    raise ModelError(f"corrupt model: {what} {key!r} maps {alias!r} to tensor "
                                     f"{index}, but subgraph {graph_index} has {len(names)}")
                mapping[alias] = names[index]
            entry[field.lower()] = mapping
        signatures.append(entry)
    return signatures


class _SubgraphImporter:
    """Turns one TFLite subgraph into a Graph."""

    def __init__(self, subgraph: Table, index: int, graph_names: list[str], opcodes: list[OpCode],
                 buffers: Buffers) -> None:
        self.subgraph = subgraph
        self.index = index
        self.graph_names = graph_names
        self.opcodes = opcodes
        self.buffers = buffers
        self.file_size = buffers.file_size
        self.graph = Graph(graph_names[index])
        self.where = f"subgraph {index} ({self.graph.name})"
        self.tensors: list[TensorInfo] = []
        self.tensor_names: list[str] = []
        self.values: list[Value | None] = []
        self.no_value: Value | None = None
        self.names = _Names()

    def build(self) -> Graph:
        self._read_tensors()
        self._add_inputs()
        records = self._read_operators()
        producer = self._producers(records)
        for record in records:
            self._emit(record, producer)
        outputs = []
        for position, tensor in enumerate(self._index_list(_SUBGRAPH_OUTPUTS, "outputs")):
            outputs.append(self._operand(tensor, f"graph output {position}", None, producer))
        self.graph.set_outputs(outputs)
        self.graph.attrs["tensor_index"] = {
            value.name: i for i, value in enumerate(self.values) if value is not None}
        signatures = {self.tensor_names[i]: info.shape_signature
                      for i, info in enumerate(self.tensors) if info.shape_signature is not None}
        if signatures:
            self.graph.attrs["shape_signatures"] = signatures
        return self.graph

    # -- tensors and inputs ------------------------------------------------

    def _read_tensors(self) -> None:
        start, count = checked_tables(self.subgraph, _SUBGRAPH_TENSORS, self.file_size,
                                      f"{self.where} tensor table")
        for i in range(count):
            with reading(f"{self.where} tensor {i}"):
                table = self.subgraph.table_at(start, i)
            info = read_tensor(table, i, self.where, self.file_size)
            self.tensors.append(info)
            self.tensor_names.append(self.names.take(info.name or f"tensor{i}"))
        self.values = [None] * count
        for info in self.tensors:
            if info.blockwise is not None:
                self._complete_blockwise(info)

    def _complete_blockwise(self, info: TensorInfo) -> None:
        """A blockwise-quantized tensor's type, from the constant tensors that
        hold its scales and zero points (they are not operands of any op)."""
        what = f"{self.where} tensor {info.index} {info.name!r}"
        if info.is_variable or self.buffers.span(info.buffer, what)[1] == 0:
            raise ModelError(f"corrupt model: {what} is blockwise quantized but not a "
                             "constant (blockwise scales describe constant weights)")
        arrays = []
        for role, index in (("scales", info.blockwise.scales),
                            ("zero points", info.blockwise.zero_points)):
            if index is None:
                arrays.append(None)
                continue
            self._check_index(index, f"tensor {info.index} blockwise {role}")
            source = self.tensors[index]
            if self.buffers.span(source.buffer, what)[1] == 0:
                raise ModelError(f"corrupt model: {what}: its blockwise {role} tensor {index} "
                                 "has no data")
            array, _ = constant_array(source, self.buffers, f"{what} blockwise {role}")
            arrays.append(array)
        info.type = TensorType(info.type.shape,
                               blockwise_element(info, arrays[0], arrays[1], what))

    def _index_list(self, slot: int, what: str) -> list[int]:
        with reading(f"{self.where} {what}"):
            return self.subgraph.array(slot).tolist()

    def _check_index(self, tensor: int, what: str) -> None:
        if not 0 <= tensor < len(self.tensors):
            raise ModelError(f"corrupt model: {self.where} {what} refers to tensor {tensor}, "
                             f"but the subgraph has {len(self.tensors)} tensors")

    def _add_inputs(self) -> None:
        for position, tensor in enumerate(self._index_list(_SUBGRAPH_INPUTS, "inputs")):
            self._check_index(tensor, f"input {position}")
            if self.values[tensor] is not None:
                raise ModelError(f"corrupt model: {self.where} lists tensor {tensor} as a "
                                 "graph input twice")
            value = self.graph.add_input(self.tensor_names[tensor], self.tensors[tensor].type)
            self.values[tensor] = value

    # -- operators -----------------------------------------------------------

    def _read_operators(self) -> list[OperatorRecord]:
        start, count = checked_tables(self.subgraph, _SUBGRAPH_OPERATORS, self.file_size,
                                      f"{self.where} operator list")
        records = []
        for i in range(count):
            what = f"{self.where} op {i}"
            with reading(what):
                table = self.subgraph.table_at(start, i)
                opcode_index = table.scalar(_OPERATOR_OPCODE_INDEX, U32)
            if opcode_index >= len(self.opcodes):
                raise ModelError(f"corrupt model: {what} uses operator code {opcode_index}, but "
                                 f"the model has {len(self.opcodes)}")
            with reading(f"{what} inputs"):
                inputs = table.array(_OPERATOR_INPUTS).tolist()
            with reading(f"{what} outputs"):
                outputs = table.array(_OPERATOR_OUTPUTS).tolist()
            records.append(OperatorRecord(i, table, self.opcodes[opcode_index], inputs, outputs))
        return records

    def _producers(self, records: list[OperatorRecord]) -> dict[int, int]:
        """tensor index -> index of the op writing it; each tensor written once."""
        producer: dict[int, int] = {}
        for record in records:
            for tensor in record.outputs:
                if tensor == -1:
                    continue
                self._check_index(tensor, f"op {record.index} ({record.opcode.schema_name}) "
                                          "output")
                if tensor in producer:
                    raise ModelError(f"corrupt model: {self.where} tensor {tensor} is written by "
                                     f"both op {producer[tensor]} and op {record.index}")
                if self.values[tensor] is not None:
                    raise ModelError(f"corrupt model: {self.where} op {record.index} writes "
                                     f"graph input tensor {tensor}")
                producer[tensor] = record.index
        return producer

    def _loc(self, record: OperatorRecord) -> str:
        return f"{self.graph.name}:op{record.index}:{record.opcode.schema_name}"

    def _emit(self, record: OperatorRecord, producer: dict[int, int]) -> None:
        loc = self._loc(record)
        values = self.values
        operands = []
        for k, tensor in enumerate(record.inputs):
            # A value already made (most operands) is what `_operand` would return.
            value = values[tensor] if 0 <= tensor < len(values) else None
            operands.append(value if value is not None
                            else self._operand(tensor, f"input {k}", record, producer))
        attrs = self._attributes(record)
        result_types: list[Type] = []
        result_names: list[str] = []
        for tensor in record.outputs:
            if tensor == -1:
                result_types.append(NoneType())
                result_names.append(self.names.take("none"))
            else:
                result_types.append(self.tensors[tensor].type)
                result_names.append(self.tensor_names[tensor])
        op = self.graph.append(Op(record.opcode.op_name, operands, result_types, attrs,
                                  result_names=result_names, loc=loc))
        for tensor, value in zip(record.outputs, op.results):
            if tensor != -1:
                self.values[tensor] = value

    def _attributes(self, record: OperatorRecord) -> dict[str, Any]:
        opcode = record.opcode
        what = f"{self.where} op {record.index} ({opcode.schema_name})"
        attrs: dict[str, Any] = {}
        if opcode.op_name == "tfl.unknown":
            attrs["builtin_code"] = opcode.code
            attrs["op_name"] = opcode.schema_name
        if opcode.op_name == "tfl.custom":
            attrs["custom_code"] = opcode.custom_code
            attrs["custom_version"] = opcode.version
            attrs["custom_options"] = self._custom_options(record.table, what)
        attrs.update(builtin_options(record.table, what))
        self._add_graph_references(attrs, what)
        with reading(f"{what} intermediates"):
            intermediates = record.table.array(_OPERATOR_INTERMEDIATES)
        if intermediates.size:
            types = []
            for tensor in intermediates.tolist():
                self._check_index(tensor, f"op {record.index} intermediate")
                types.append(self.tensors[tensor].type)
            attrs["intermediates"] = types
        return attrs

    def _custom_options(self, table: Table, what: str) -> bytes:
        with reading(f"{what} custom options"):
            offset = table.scalar(_OPERATOR_LARGE_CUSTOM_OPTIONS_OFFSET, U64)
            size = table.scalar(_OPERATOR_LARGE_CUSTOM_OPTIONS_SIZE, U64)
        if offset > 1:
            # Over-2GB models keep custom options after the flatbuffer, like buffers.
            if offset + size > self.file_size:
                raise ModelError(f"corrupt model: {what} custom options ({size} bytes at "
                                 f"{offset}) extend past the end of the file")
            return bytes(np.frombuffer(self.buffers.buf, np.uint8, size, offset))
        with reading(f"{what} custom options"):
            return bytes(table.array(_OPERATOR_CUSTOM_OPTIONS, _BYTES))

    def _add_graph_references(self, attrs: dict[str, Any], what: str) -> None:
        """Name the graphs that `*_subgraph_index` fields (and CALL's `subgraph`) point to."""
        for field in [f for f in attrs if f.endswith("_subgraph_index") or f == "subgraph"]:
            index = attrs[field]
            if not isinstance(index, int) or isinstance(index, bool):
                continue
            if not 0 <= index < len(self.graph_names):
                raise ModelError(f"corrupt model: {what} {field} is {index}, but the model has "
                                 f"{len(self.graph_names)} subgraphs")
            if field == "subgraph":
                attrs["callee"] = self.graph_names[index]
                continue
            base = field[: -len("_subgraph_index")]
            attrs[SUBGRAPH_ATTR_NAMES.get(base, base)] = self.graph_names[index]

    # -- operands ------------------------------------------------------------

    def _operand(self, tensor: int, role: str, record: OperatorRecord | None,
                 producer: dict[int, int]) -> Value:
        user = (f"op {record.index} ({record.opcode.schema_name})" if record is not None
                else "the graph")
        if tensor == -1 and record is not None:
            return self._no_value()
        self._check_index(tensor, f"{user} {role}")
        value = self.values[tensor]
        if value is not None:
            return value
        info = self.tensors[tensor]
        if tensor in producer:
            writer = producer[tensor]
            if record is not None and writer == record.index:
                raise ModelError(f"corrupt model: {self.where} has a cycle: {user} reads its own "
                                 f"output tensor {tensor} {info.name!r}")
            raise ModelError(f"corrupt model: {self.where} has a cycle or is out of order: "
                             f"{user} reads tensor {tensor} {info.name!r} before op {writer} "
                             "writes it")
        value = self._source_value(info, f"{self.where} tensor {tensor} {info.name!r}", user)
        self.values[tensor] = value
        return value

    def _source_value(self, info: TensorInfo, what: str, user: str) -> Value:
        """A tensor nobody writes: a variable, a constant, or an empty tensor."""
        start, size = self.buffers.span(info.buffer, what)
        has_data = size > 0
        loc = f"{self.graph.name}:tensor{info.index}"
        name = [self.tensor_names[info.index]]
        if info.is_variable:
            if has_data:
                raise ModelError(f"corrupt model: {what} is a variable with a data buffer, "
                                 "which TFLite does not support")
            attrs = {"fill_value": _variable_fill(info)}
            return self.graph.append(Op("tfl.variable", [], [info.type], attrs,
                                        result_names=name, loc=loc)).result
        if has_data:
            array, extra = constant_array(info, self.buffers, what)
        elif info.type.is_static and 0 in info.type.shape:
            array, extra = empty_array(info), {}
        else:
            raise ModelError(f"corrupt model: {self.where}: {user} reads tensor {info.index} "
                             f"{info.name!r}, which is not a graph input, not a constant and "
                             "not written by any op")
        attrs = {"value": array, **extra}
        return self.graph.append(Op("tfl.pseudo_const", [], [info.type], attrs,
                                    result_names=name, loc=loc)).result

    def _no_value(self) -> Value:
        if self.no_value is None:
            op = Op("tfl.no_value", [], [NoneType()], {}, result_names=[self.names.take("none")],
                    loc=f"{self.graph.name}:no_value")
            self.no_value = self.graph.append(op).result
        return self.no_value


def _variable_fill(info: TensorInfo) -> int:
    """TFLite zero-fills variable tensors, int8 ones with their zero point
    (tensor_utils.cc ResetVariableTensor)."""
    element = info.type.element
    zero_point = getattr(element, "zero_point", None)
    storage = getattr(element, "storage", None)
    if zero_point is not None and storage is not None and storage.name == "i8":
        return zero_point
    return 0
