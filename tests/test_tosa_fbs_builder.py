"""`tfl2tosa.tosa.fbs.builder.Builder` lays bytes out exactly as `flatbuffers.Builder`.

Oracle: the flatbuffers package's own Builder, driven through the same
flatc-generated TOSA functions with the same random tables, strings and
vectors; both buffers must be equal byte for byte. Ours builds the tables the
writer builds many times (tensor, operator, location, attributes) with
`Table` and layouts read from the generated functions, as the writer does.
"""

from __future__ import annotations

import struct

import flatbuffers
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfl2tosa.tosa.fbs import tosa_generated as fb
from tfl2tosa.tosa.fbs.builder import Builder, OffsetArithmeticError, table_layout

names = st.text(alphabet="abcdefghij_0123456789:", min_size=0, max_size=12)
shapes = st.lists(st.integers(-1, 2 ** 31 - 1), max_size=6)
raw_bytes = st.binary(max_size=40)
tensor_specs = st.tuples(names, shapes, st.integers(0, 12), st.booleans(), raw_bytes)
operator_specs = st.tuples(st.integers(0, 80), st.lists(names, max_size=4),
                           st.lists(names, max_size=3), names,
                           st.lists(st.integers(-2 ** 31, 2 ** 31 - 1), max_size=5),
                           st.integers(-2 ** 31, 2 ** 31 - 1), st.booleans())


TENSOR = table_layout(fb.TosaTensorStart, fb.TosaTensorAddName, fb.TosaTensorAddShape,
                      fb.TosaTensorAddType, fb.TosaTensorAddData, fb.TosaTensorAddVariable)
CONCAT = table_layout(fb.ConcatAttributeStart, fb.ConcatAttributeAddAxis)
TRANSPOSE = table_layout(fb.TransposeAttributeStart, fb.TransposeAttributeAddPerms)
LOCATION = table_layout(fb.OpLocationStart, fb.OpLocationAddText)
OPERATOR = table_layout(fb.TosaOperatorStart, fb.TosaOperatorAddOp,
                        fb.TosaOperatorAddAttributeType, fb.TosaOperatorAddAttribute,
                        fb.TosaOperatorAddInputs, fb.TosaOperatorAddOutputs,
                        fb.TosaOperatorAddLocation)


def _string_vector(b, names_: list[str], ours: bool) -> int:
    if ours:
        return b.CreateSharedStringVector(names_)
    offsets = [b.CreateSharedString(n) for n in names_]
    b.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        b.PrependUOffsetTRelative(offset)
    return b.EndVector()


def _table_vector(b, tables: list[int], ours: bool) -> int:
    if ours:
        return b.CreateOffsetVector(tables)
    b.StartVector(4, len(tables), 4)
    for offset in reversed(tables):
        b.PrependUOffsetTRelative(offset)
    return b.EndVector()


def _tensor(b, spec, ours: bool) -> int:
    # Ours builds the shape vector with its table (`Int32VectorTable`), packed
    # with it when the table's other fields are numbers (no data).
    name, shape, dtype, variable, data = spec
    name_offset = b.CreateSharedString(name)
    data_offset = (0 if not data else b.CreateByteVector(data, 8) if ours
                   else _flatbuffers_bytes(b, data, 8))
    if ours:
        return b.Int32VectorTable(TENSOR, name_offset, shape, (dtype, data_offset, variable))
    shape_offset = b.CreateNumpyVector(np.asarray(shape, dtype="<i4"))
    fb.TosaTensorStart(b)
    fb.TosaTensorAddName(b, name_offset)
    fb.TosaTensorAddShape(b, shape_offset)
    fb.TosaTensorAddType(b, dtype)
    fb.TosaTensorAddData(b, data_offset)
    fb.TosaTensorAddVariable(b, variable)
    return fb.TosaTensorEnd(b)


def _flatbuffers_bytes(b, raw: bytes, alignment: int) -> int:
    b.StartVector(1, len(raw), alignment)
    b.head -= len(raw)
    b.Bytes[b.head:b.head + len(raw)] = raw
    return b.EndVector()


def _operator(b, spec, ours: bool) -> int:
    # The writer's order: attribute tables, then inputs, outputs and location.
    # Ours gives a table of numbers only (concat's) as the operator's child.
    op, inputs, outputs, loc, perms_, axis, is_concat = spec
    perms = (b.CreateInt32Vector(perms_) if ours
             else b.CreateNumpyVector(np.asarray(perms_, dtype="<i4")))
    attribute_type = (fb.Attribute.ConcatAttribute if is_concat
                      else fb.Attribute.TransposeAttribute)
    if ours:
        transpose = b.Table(TRANSPOSE, (perms,))
        if is_concat:
            return b.StringVectorsTable(OPERATOR, (op, attribute_type), (CONCAT, (axis,)),
                                        (inputs, outputs), LOCATION, loc)
        b.Table(CONCAT, (axis,))
        return b.StringVectorsTable(OPERATOR, (op, attribute_type), transpose,
                                    (inputs, outputs), LOCATION, loc)
    fb.TransposeAttributeStart(b)
    fb.TransposeAttributeAddPerms(b, perms)
    transpose = fb.TransposeAttributeEnd(b)
    fb.ConcatAttributeStart(b)
    fb.ConcatAttributeAddAxis(b, axis)
    concat = fb.ConcatAttributeEnd(b)
    return _flatbuffers_operator(b, op, attribute_type, concat if is_concat else transpose,
                                 inputs, outputs, loc)


def _flatbuffers_operator(b, op, attribute_type, attribute, inputs, outputs, loc) -> int:
    inputs_vec = _string_vector(b, inputs, ours=False)
    outputs_vec = _string_vector(b, outputs, ours=False)
    if loc:
        text = b.CreateString(loc)
        fb.OpLocationStart(b)
        fb.OpLocationAddText(b, text)
        location = fb.OpLocationEnd(b)
    fb.TosaOperatorStart(b)
    fb.TosaOperatorAddOp(b, op)
    fb.TosaOperatorAddAttributeType(b, attribute_type)
    fb.TosaOperatorAddAttribute(b, attribute)
    fb.TosaOperatorAddInputs(b, inputs_vec)
    fb.TosaOperatorAddOutputs(b, outputs_vec)
    if loc:
        fb.TosaOperatorAddLocation(b, location)
    return fb.TosaOperatorEnd(b)


def _graph(b, tensors, operators, ours: bool) -> bytes:
    ops = [_operator(b, spec, ours) for spec in operators]
    tables = [_tensor(b, spec, ours) for spec in tensors]
    name = b.CreateSharedString("main")
    ops_vec = _table_vector(b, ops, ours)
    tensors_vec = _table_vector(b, tables, ours)
    fb.TosaBasicBlockStart(b)
    fb.TosaBasicBlockAddName(b, name)
    fb.TosaBasicBlockAddOperators(b, ops_vec)
    fb.TosaBasicBlockAddTensors(b, tensors_vec)
    block = fb.TosaBasicBlockEnd(b)
    blocks_vec = _table_vector(b, [block], ours)
    fb.TosaRegionStart(b)
    fb.TosaRegionAddName(b, name)
    fb.TosaRegionAddBlocks(b, blocks_vec)
    region = fb.TosaRegionEnd(b)
    regions_vec = _table_vector(b, [region], ours)
    fb.VersionStart(b)
    fb.VersionAdd_Major(b, 1)
    fb.VersionAdd_Minor(b, 0)
    fb.VersionAdd_Patch(b, 0)
    fb.VersionAdd_Draft(b, False)
    version = fb.VersionEnd(b)
    fb.TosaGraphStart(b)
    fb.TosaGraphAddVersion(b, version)
    fb.TosaGraphAddRegions(b, regions_vec)
    b.Finish(fb.TosaGraphEnd(b), file_identifier=b"TOSA")
    return bytes(b.Output())


@settings(max_examples=60, deadline=None)
@given(st.lists(tensor_specs, max_size=12), st.lists(operator_specs, max_size=12),
       st.sampled_from([1, 16, 4096]))
def test_same_bytes_as_flatbuffers_builder(tensors, operators, initial_size):
    # A small initial size makes both builders grow their buffers mid-way; a
    # table laid out like an earlier one is packed whole against its vtable.
    expected = _graph(flatbuffers.Builder(initial_size), tensors, operators, ours=False)
    assert _graph(Builder(initial_size), tensors, operators, ours=True) == expected


def test_out_of_range_scalar_is_flatbuffers_type_error():
    b = Builder()
    fb.ConcatAttributeStart(b)
    with pytest.raises(TypeError, match="bad number 2147483648 for type int32"):
        fb.ConcatAttributeAddAxis(b, 2 ** 31)


def test_out_of_range_scalar_in_a_table_is_flatbuffers_type_error():
    with pytest.raises(TypeError, match="bad number 2147483648 for type int32"):
        Builder().Table(CONCAT, (2 ** 31,))


@pytest.mark.parametrize("tables_before", [0, 2])
def test_out_of_range_shape_is_a_struct_error(tables_before):
    # The first table of its layout takes the general calls, later ones one pack.
    b = Builder()
    for _ in range(tables_before):
        b.Int32VectorTable(TENSOR, b.CreateString("t"), [1, 2], (3, 0, False))
    with pytest.raises(struct.error):
        b.Int32VectorTable(TENSOR, b.CreateString("t"), [1, 2 ** 31], (3, 0, False))


def test_offset_to_unbuilt_data_is_refused():
    b = Builder()
    with pytest.raises(OffsetArithmeticError):
        b.CreateOffsetVector([b.Offset() + 8])
    with pytest.raises(OffsetArithmeticError):
        b.Table(LOCATION, (b.Offset() + 8,))


@pytest.mark.parametrize("loc", ["", "a", "main:3:conv"])
def test_operator_first_in_a_fresh_buffer(loc):
    # Nothing 4-aligned written yet: the fused operator takes the general calls.
    def build(b, ours: bool) -> bytes:
        if ours:
            root = b.StringVectorsTable(OPERATOR, (7, 0), 0, (["x", "y"], ["z"]), LOCATION, loc)
        else:
            root = _flatbuffers_operator(b, 7, 0, 0, ["x", "y"], ["z"], loc)
        b.Finish(root, file_identifier=b"TOSA")
        return bytes(b.Output())

    assert build(Builder(1), ours=True) == build(flatbuffers.Builder(1), ours=False)


# An operator row: its op, attribute table (concat's axis, and whether it is
# built before the row, as the writer builds one with vectors or strings),
# inputs (indices of earlier rows' results, or -1 for a name not yet written),
# result count and location.
row_specs = st.tuples(st.integers(0, 80), st.integers(-2 ** 31, 2 ** 31 - 1), st.booleans(),
                      st.lists(st.integers(-1, 40), max_size=5), st.integers(1, 2), names)


@settings(max_examples=80, deadline=None)
@given(st.lists(row_specs, min_size=1, max_size=40), st.sampled_from([1, 64, 4096]))
def test_operator_rows_same_bytes_as_flatbuffers_builder(rows, initial_size):
    # A block's operators as the writer builds them: each op's inputs are
    # mostly earlier results, so after the first rows of a shape (which write
    # the vtables) most rows are packed whole.
    specs = []
    for i, (op, axis, built, inputs, results, loc) in enumerate(rows):
        input_names = [f"in{j}" if j < 0 or j >= i else f"r{j}_0" for j in inputs]
        specs.append((op, axis, built, input_names, [f"r{i}_{k}" for k in range(results)], loc))

    def build(b, ours: bool) -> bytes:
        ops, waiting = [], []
        for op, axis, built, inputs, outputs, loc in specs:
            values = (op, fb.Attribute.ConcatAttribute)
            if ours and not built:
                waiting.append((values, (CONCAT, (axis,)), inputs, outputs, loc))
                continue
            if ours:  # the rows waiting are written first, as the writer does
                ops += b.StringVectorsTables(OPERATOR, LOCATION, waiting)
                waiting.clear()
                child = b.Table(CONCAT, (axis,))
                ops += b.StringVectorsTables(OPERATOR, LOCATION,
                                             [(values, child, inputs, outputs, loc)])
                continue
            fb.ConcatAttributeStart(b)
            fb.ConcatAttributeAddAxis(b, axis)
            concat = fb.ConcatAttributeEnd(b)
            ops.append(_flatbuffers_operator(b, op, fb.Attribute.ConcatAttribute, concat,
                                             inputs, outputs, loc))
        if waiting:
            ops += b.StringVectorsTables(OPERATOR, LOCATION, waiting)
        b.Finish(_table_vector(b, ops, ours), file_identifier=b"TOSA")
        return bytes(b.Output())

    assert build(Builder(initial_size), ours=True) == \
        build(flatbuffers.Builder(initial_size), ours=False)
