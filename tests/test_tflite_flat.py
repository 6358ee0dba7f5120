"""The importer's own table reader (tfl2tosa/tflite_import/flat.py) reads what the
`tflite` package's generated accessors read: every field it takes from every
subgraph, tensor, operator and buffer of every zoo model, the generated code
(flatbuffers' compiler output for schema.fbs) being the judge."""

from __future__ import annotations

import numpy as np
import pytest
import tflite

from conftest import zoo_models
from tfl2tosa.tflite_import import flat, schema
from tfl2tosa.tflite_import.flat import BOOL, I8, I32, U8, U32, U64
from tfl2tosa.tflite_import.tensors import read_plain_tensor, read_tensor_checked

MODELS = zoo_models()


def _vector(generated, field: str) -> list:
    array = getattr(generated, field + "AsNumpy")()
    return [] if isinstance(array, int) else array.tolist()


def _same_table(ours: flat.Table | None, generated) -> None:
    assert (ours is None) == (generated is None)


def _check_tensor(ours: flat.Table, tensor: tflite.Tensor) -> None:
    assert ours.string(10) == tensor.Name()
    assert ours.array(4).tolist() == _vector(tensor, "Shape")
    assert ours.array(18).tolist() == _vector(tensor, "ShapeSignature")
    assert ours.scalar(6, I8) == tensor.Type()
    assert ours.scalar(8, U32) == tensor.Buffer()
    assert ours.scalar(14, BOOL, False) == tensor.IsVariable()
    assert (ours.union_position(16) is None) == (tensor.Sparsity() is None)
    quantization, params = ours.table(12), tensor.Quantization()
    _same_table(quantization, params)
    if params is not None:
        assert quantization.array(8, np.dtype("<f4")).tolist() == _vector(params, "Scale")
        assert quantization.array(10, np.dtype("<i8")).tolist() == _vector(params, "ZeroPoint")
        assert quantization.scalar(16, I32) == params.QuantizedDimension()
        assert quantization.scalar(12, U8) == params.DetailsType()


def _check_operator(ours: flat.Table, operator: tflite.Operator) -> None:
    assert ours.scalar(4, U32) == operator.OpcodeIndex()
    assert ours.array(6).tolist() == _vector(operator, "Inputs")
    assert ours.array(8).tolist() == _vector(operator, "Outputs")
    assert ours.array(20).tolist() == _vector(operator, "Intermediates")
    assert ours.array(14, np.dtype(np.uint8)).tolist() == _vector(operator, "CustomOptions")
    assert ours.scalar(22, U64) == operator.LargeCustomOptionsOffset()
    assert ours.scalar(24, U64) == operator.LargeCustomOptionsSize()
    for type_slot, table_slot, kind, table in ((10, 12, "BuiltinOptionsType", "BuiltinOptions"),
                                               (26, 28, "BuiltinOptions2Type",
                                                "BuiltinOptions2")):
        assert ours.scalar(type_slot, U8) == getattr(operator, kind)()
        generated = getattr(operator, table)()
        position = ours.union_position(table_slot)
        assert position == (generated.Pos if generated is not None else None)


def test_the_zoo_is_committed() -> None:
    """The comparison below runs over the committed zoo; without it, it would run on nothing."""
    assert len(MODELS[::7]) > 10


@pytest.mark.parametrize("path", MODELS[::7], ids=lambda p: p.stem)
def test_flat_reads_what_the_generated_accessors_read(path) -> None:
    data = path.read_bytes()
    model = tflite.Model.GetRootAs(data, 0)
    root = flat.root(data)
    start, count = root.vector(12)
    assert count == model.BuffersLength()
    for i in range(count):
        buffer = model.Buffers(i)
        ours = root.table_at(start, i)
        assert ours.vector(4)[1] == buffer.DataLength()
        assert ours.scalar(6, U64) == buffer.Offset()
        assert ours.scalar(8, U64) == buffer.Size()
    start, count = root.vector(8)
    assert count == model.SubgraphsLength()
    for i in range(count):
        subgraph, ours = model.Subgraphs(i), root.table_at(start, i)
        assert ours.string(12) == subgraph.Name()
        assert ours.array(6).tolist() == _vector(subgraph, "Inputs")
        assert ours.array(8).tolist() == _vector(subgraph, "Outputs")
        tensors, length = ours.vector(4)
        assert length == subgraph.TensorsLength()
        for j in range(length):
            _check_tensor(ours.table_at(tensors, j), subgraph.Tensors(j))
        operators, length = ours.vector(10)
        assert length == subgraph.OperatorsLength()
        for j in range(length):
            _check_operator(ours.table_at(operators, j), subgraph.Operators(j))


def test_a_vtable_before_the_start_is_an_index_error() -> None:
    # Root offset 4; the table's soffset (8) puts its vtable at -4.
    data = (4).to_bytes(4, "little") + (8).to_bytes(4, "little", signed=True) + bytes(8)
    with pytest.raises(IndexError):
        flat.root(data)


def _tensor_fields(info) -> tuple:
    return (info.index, info.name, info.type, info.buffer, info.is_variable, info.sparsity,
            info.shape_signature, info.blockwise)


@pytest.mark.parametrize("path", MODELS[::5], ids=lambda p: p.stem)
def test_plain_tensors_read_as_the_checked_reader_reads_them(path) -> None:
    """`read_plain_tensor` (no diagnostic context per field) gives what
    `read_tensor_checked` gives, or None for a tensor it leaves to it."""
    data = path.read_bytes()
    root = flat.root(data)
    start, count = root.vector(8)
    plain = 0
    for i in range(count):
        tensors, length = root.table_at(start, i).vector(4)
        for j in range(length):
            table = root.table_at(start, i).table_at(tensors, j)
            ours = read_plain_tensor(table, j)
            checked = read_tensor_checked(table, j, f"subgraph {i}", len(data))
            if ours is not None:
                plain += 1
                assert _tensor_fields(ours) == _tensor_fields(checked)
                assert type(ours.type.element) is type(checked.type.element)
            else:
                assert checked.sparsity is not None or checked.blockwise is not None
    assert plain > 0


@pytest.mark.parametrize("path", MODELS[::5], ids=lambda p: p.stem)
def test_options_decoded_once_read_as_each_decoded_anew(path) -> None:
    """An options table whose content was met before gives the attributes
    decoding it field by field gives."""
    data = path.read_bytes()
    root = flat.root(data)
    start, count = root.vector(8)
    for i in range(count):
        operators, length = root.table_at(start, i).vector(10)
        for j in range(length):
            operator = root.table_at(start, i).table_at(operators, j)
            for type_slot, table_slot, names in schema._OPTIONS_SLOTS:
                name = names.get(operator.scalar(type_slot, U8))
                position = operator.union_position(table_slot)
                if name is None or position is None:
                    continue
                decoded, _ = schema._decode_options(data, position, name, "op")
                for _ in range(2):  # the second time from the table of those met
                    assert schema.options_attrs(data, position, name, "op") == decoded


def test_options_field_widths_are_the_schema_types() -> None:
    """Conv2DOptions in schema.fbs: padding (Padding, a byte), stride_w and
    stride_h (int), fused_activation_function (a byte enum), dilation_w_factor
    and dilation_h_factor (int), quantized_bias_type (TensorType, a byte)."""
    assert schema._scalar_widths("Conv2DOptions") == (1, 4, 4, 1, 4, 4, 1)
    assert schema._scalar_widths("ReshapeOptions") is None  # new_shape is a vector


def _conv_options(builder, bias_type: int) -> int:
    tflite.Conv2DOptionsStart(builder)
    # flatbuffers places the field added first last in the table
    tflite.Conv2DOptionsAddQuantizedBiasType(builder, bias_type)
    tflite.Conv2DOptionsAddStrideW(builder, 2)
    return tflite.Conv2DOptionsEnd(builder)


def test_options_met_before_differ_in_their_last_byte() -> None:
    """Two options tables with the same vtable whose last field, a byte, differs
    (each followed by other bytes) keep their own values."""
    import flatbuffers

    builder = flatbuffers.Builder(0)
    tables = [_conv_options(builder, bias_type) for bias_type in (9, 1, 9, 0, 1)]
    builder.Finish(tables[-1])
    data = bytes(builder.Output())
    for table in tables:
        position = len(data) - table
        generated = tflite.Conv2DOptions()
        generated.Init(data, position)
        attrs = schema.options_attrs(data, position, "Conv2DOptions", "op")
        assert attrs["stride_w"] == generated.StrideW() == 2
        assert attrs["quantized_bias_type"] == schema.TENSOR_TYPE_NAMES[
            generated.QuantizedBiasType()]
