"""The TFLite importer on converter-made models and on hand-built flatbuffers.

Expected values come from what each model was built with (Keras layer
arguments, the arrays and parameters written by TfliteBuilder) and from the
TFLite schema; test_import_vs_tflite.py checks the same against the TFLite
interpreter's own view.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pytest

from tfl2tosa.errors import ModelError
from tfl2tosa.ir import print_module
from tfl2tosa.ir import types as t
from tfl2tosa.ir.types import NoneType, UniformQuantized, UniformQuantizedPerAxis
from tfl2tosa.tflite_import import load


def ops_named(graph, name):
    return [op for op in graph.ops if op.name == name]


def compute_ops(graph):
    """Ops other than constants, variables and no_value markers, in order."""
    skipped = {"tfl.pseudo_const", "tfl.no_value", "tfl.variable"}
    return [op for op in graph.ops if op.name not in skipped]


def base_chain(array: np.ndarray) -> list:
    chain, base = [], array.base
    while base is not None:
        chain.append(base)
        base = getattr(base, "base", None) if isinstance(base, np.ndarray) else \
            getattr(base, "obj", None) if isinstance(base, memoryview) else None
    return chain


# --------------------------------------------------------------------------
# Converter-made models


def test_conv_float_ops_attrs_and_locations(small_models):
    module = load(small_models["conv_f32"])
    main = module.main
    assert list(module.graphs) == ["main"]
    assert [op.name for op in compute_ops(main)] == [
        "tfl.conv_2d", "tfl.depthwise_conv_2d", "tfl.reshape", "tfl.fully_connected",
        "tfl.softmax"]
    conv, depthwise, _, dense, softmax = compute_ops(main)
    # Conv2D(8, 3, strides=2, padding="same", activation="relu6")
    assert conv.attrs["padding"] == "SAME"
    assert (conv.attrs["stride_h"], conv.attrs["stride_w"]) == (2, 2)
    assert conv.attrs["fused_activation_function"] == "RELU6"
    assert (conv.attrs["dilation_h_factor"], conv.attrs["dilation_w_factor"]) == (1, 1)
    assert conv.results[0].type == t.TensorType((1, 8, 8, 8), t.f32)
    assert conv.operands[1].type == t.TensorType((8, 3, 3, 3), t.f32)
    # DepthwiseConv2D(3, padding="valid")
    assert depthwise.attrs["padding"] == "VALID"
    assert depthwise.attrs["depth_multiplier"] == 1
    assert depthwise.operands[1].type.shape == (1, 3, 3, 8)
    # Dense(10) without a fused activation; Keras adds no bias -> TFLite omits it.
    assert dense.attrs["fused_activation_function"] == "NONE"
    assert dense.attrs["keep_num_dims"] is False
    assert softmax.attrs["beta"] == 1.0
    assert conv.loc == "main:op0:CONV_2D"
    assert softmax.loc == "main:op4:SOFTMAX"
    assert main.inputs[0].type == t.TensorType((1, 16, 16, 3), t.f32)
    assert [v.type for v in main.outputs] == [t.TensorType((1, 10), t.f32)]
    main.verify_structure()


def test_constants_are_read_only_views_of_the_file(small_models):
    path = small_models["conv_f32"]
    module = load(path)
    consts = ops_named(module.main, "tfl.pseudo_const")
    assert consts
    file_bytes = path.read_bytes()
    for op in consts:
        value = op.attrs["value"]
        assert not value.flags.writeable
        assert not value.flags.owndata
        assert any(isinstance(b, mmap.mmap) for b in base_chain(value)), base_chain(value)
        # The view holds exactly the bytes the file holds for it.
        start = file_bytes.find(value.tobytes())
        assert start >= 0
    weights = consts[0].attrs["value"]
    with pytest.raises(ValueError):
        weights[...] = 0


def test_constants_from_bytes_share_memory_with_the_bytes(small_models):
    data = small_models["conv_int8"].read_bytes()
    whole = np.frombuffer(data, dtype=np.uint8)
    for source in (data, memoryview(data)):
        module = load(source)
        for op in ops_named(module.main, "tfl.pseudo_const"):
            assert np.shares_memory(op.attrs["value"], whole)
            assert not op.attrs["value"].flags.writeable


def test_int8_full_integer_quantization_types(small_models):
    main = load(small_models["conv_int8"]).main
    conv, depthwise, _, dense, softmax = compute_ops(main)
    # Activations are per-tensor int8.
    for value in (main.inputs[0], conv.results[0], softmax.results[0]):
        assert isinstance(value.type.element, UniformQuantized)
        assert value.type.element.storage == t.i8
        assert value.type.element.expressed == t.f32
    # TFLite int8 softmax output is fixed at scale 1/256, zero point -128.
    assert softmax.results[0].type.element.scale == 1 / 256
    assert softmax.results[0].type.element.zero_point == -128
    # Per-channel weights: conv on the output channel (axis 0), depthwise on axis 3,
    # fully connected on axis 0; symmetric (zero points 0), full storage range.
    for op, axis, channels in ((conv, 0, 8), (depthwise, 3, 8), (dense, 0, 10)):
        weights = op.operands[1].type.element
        assert isinstance(weights, UniformQuantizedPerAxis), op.name
        assert weights.storage == t.i8 and weights.axis == axis
        assert len(weights.scales) == channels
        assert set(weights.zero_points) == {0}
        assert (weights.storage_min, weights.storage_max) == (-128, 127)
    # int32 bias: scale = input scale * weight scale per channel.
    bias = conv.operands[2].type.element
    assert bias.storage == t.i32
    expected = np.float32(main.inputs[0].type.element.scale) * np.float32(
        conv.operands[1].type.element.scales)
    np.testing.assert_allclose(bias.scales, expected, rtol=1e-6)
    assert conv.operands[2].owner.attrs["value"].dtype == np.int32


def test_16x8_bias_is_int64(small_models):
    main = load(small_models["conv_16x8"]).main
    conv = ops_named(main, "tfl.conv_2d")[0]
    assert conv.operands[0].type.element.storage == t.i16
    assert conv.operands[1].type.element.storage == t.i8
    bias = conv.operands[2]
    assert bias.type.element.storage == t.i64
    assert bias.owner.attrs["value"].dtype == np.int64
    assert "!quant.uniform<i64:f32:0," in str(bias.type)


def test_float16_weights_stay_float16(small_models):
    main = load(small_models["conv_f16"]).main
    f16_consts = [op for op in ops_named(main, "tfl.pseudo_const")
                  if op.result.type.element == t.f16]
    assert len(f16_consts) >= 3
    for op in f16_consts:
        assert op.attrs["value"].dtype == np.float16
        assert all(use.name == "tfl.dequantize" for use, _ in op.result.uses)


def test_while_loop_graphs_and_references(small_models):
    module = load(small_models["while_loop"])
    assert len(module.graphs) == 3
    main = module.main
    (loop,) = ops_named(main, "tfl.while")
    cond, body = loop.attrs["cond"], loop.attrs["body"]
    assert list(module.graphs) == ["main", cond, body]
    assert loop.attrs["cond_subgraph_index"] == 1 and loop.attrs["body_subgraph_index"] == 2
    assert [v.type.element for v in module.graphs[cond].outputs] == [t.i1]
    assert [op.name for op in compute_ops(module.graphs[cond])] == ["tfl.less"]
    assert len(module.graphs[body].inputs) == len(loop.operands) == 2
    assert [v.type for v in loop.results] == [v.type for v in module.graphs[body].outputs]


def build_rnn(builder):
    """A TFLite RNN op whose hidden state is a variable tensor (as TFLite requires)."""
    rng = np.random.default_rng(1)
    x = builder.tensor([1, 3], "FLOAT32", "x")
    w = builder.tensor([4, 3], "FLOAT32", "w", rng.standard_normal((4, 3)).astype(np.float32))
    r = builder.tensor([4, 4], "FLOAT32", "r", rng.standard_normal((4, 4)).astype(np.float32))
    b = builder.tensor([4], "FLOAT32", "b", rng.standard_normal(4).astype(np.float32))
    state = builder.tensor([1, 4], "FLOAT32", "hidden_state", is_variable=True)
    y = builder.tensor([1, 4], "FLOAT32", "y")
    builder.op("RNN", [x, w, r, b, state], [y],
               options=builder.options("RNNOptions", fusedActivationFunction=4))
    builder.io([x], [y])
    return builder.to_bytes()


def test_rnn_state_tensor_becomes_variable(builder):
    main = load(build_rnn(builder)).main
    (rnn,) = ops_named(main, "tfl.rnn")
    (variable,) = ops_named(main, "tfl.variable")
    assert variable.attrs == {"fill_value": 0}
    assert rnn.operands[4] is variable.result
    assert variable.result.name == "hidden_state"
    assert rnn.attrs["fused_activation_function"] == "TANH"


def test_signature_defs_and_metadata(small_models):
    module = load(small_models["conv_f32"])
    (signature,) = module.attrs["signature_defs"]
    assert signature["signature_key"] == "serving_default"
    assert signature["subgraph"] == "main"
    input_names = {v.name for v in module.main.inputs}
    output_names = {v.name for v in module.main.outputs}
    assert set(signature["inputs"].values()) == input_names
    assert set(signature["outputs"].values()) == output_names
    assert module.attrs["schema_version"] == 3
    # The converter records the minimum runtime version as a NUL-padded string.
    runtime = bytes(module.attrs["metadata"]["min_runtime_version"]).rstrip(b"\0")
    assert runtime.replace(b".", b"").isdigit()


def test_loading_from_path_bytes_and_memoryview_agree(small_models):
    path = small_models["conv_int8"]
    words = np.frombuffer(path.read_bytes(), dtype=np.uint32)  # a non-byte memoryview
    texts = {print_module(load(source), elide=None)
             for source in (path, str(path), path.read_bytes(),
                            memoryview(path.read_bytes()), bytearray(path.read_bytes()),
                            memoryview(words))}
    assert len(texts) == 1


# --------------------------------------------------------------------------
# Hand-built models: corners the converter does not reach


def simple_unary(builder, code, in_type="FLOAT32", out_type="FLOAT32", **op_kwargs):
    x = builder.tensor([1, 4], in_type, "x")
    y = builder.tensor([1, 4], out_type, "y")
    builder.op(code, [x], [y], **op_kwargs)
    builder.io([x], [y])
    return load(builder.to_bytes()).main


def test_custom_op_keeps_code_and_options(builder):
    payload = b"\x01\x02flexbuffer-ish\xff"
    main = simple_unary(builder, "CUSTOM", custom_code="MyOp", custom_options=payload)
    (op,) = main.ops
    assert op.name == "tfl.custom"
    assert op.attrs["custom_code"] == "MyOp"
    assert op.attrs["custom_options"] == payload
    assert op.loc == "main:op0:CUSTOM"


def test_unknown_builtin_code_imports_as_placeholder(builder):
    main = simple_unary(builder, 215)
    (op,) = main.ops
    assert op.name == "tfl.unknown"
    assert op.attrs == {"builtin_code": 215, "op_name": "BUILTIN_215"}
    assert op.loc == "main:op0:BUILTIN_215"


def test_extended_builtin_code_and_deprecated_only_code(builder):
    # CUMSUM (128) exists only in builtin_code; the deprecated byte holds the
    # placeholder 127. Old files set only the deprecated byte (ADD = 0 ... 126).
    x = builder.tensor([4], "FLOAT32", "x")
    axis = builder.tensor([], "INT32", "axis", np.array(0, np.int32))
    y = builder.tensor([4], "FLOAT32", "y")
    z = builder.tensor([4], "FLOAT32", "z")
    builder.op("CUMSUM", [x, axis], [y],
               options=builder.options("CumsumOptions", exclusive=True))
    old = builder.opcode(0, deprecated_code=18)  # builtin_code 0, deprecated MUL
    builder.op(0, [y, y], [z], opcode_index=old)
    builder.io([x], [z])
    main = load(builder.to_bytes()).main
    assert [op.name for op in compute_ops(main)] == ["tfl.cumsum", "tfl.mul"]
    assert compute_ops(main)[0].attrs == {"exclusive": True, "reverse": False}
    assert main.ops[0].result.type == t.TensorType((), t.i32)


def test_builtin_code_below_127_without_deprecated_code(builder, tmp_path):
    # AI Edge Quantizer stores QUANTIZE (114) and DEQUANTIZE (6) in builtin_code
    # alone; the deprecated byte is absent (0, ADD). TFLite takes the larger
    # raw field; the tflite package's BuiltinCode() would return 0 here.
    from e2e import check_model
    from tflite_ref import write_model

    x = builder.tensor([1, 8], "FLOAT32", "x")
    q = builder.tensor([1, 8], "INT8", "q", scale=[0.02], zero_point=[-3])
    y = builder.tensor([1, 8], "FLOAT32", "y")
    builder.op("QUANTIZE", [x], [q], opcode_index=builder.opcode(114, deprecated_code=0))
    builder.op("DEQUANTIZE", [q], [y], opcode_index=builder.opcode(6, deprecated_code=0))
    builder.io([x], [y])
    raw = builder.to_bytes()
    stored = builder.s.Model.GetRootAs(raw, 0)
    assert [(stored.OperatorCodes(i).DeprecatedBuiltinCode(),
             stored.OperatorCodes(i).BuiltinCode()) for i in range(2)] == [(0, 114), (0, 6)]
    import tflite
    assert [tflite.Model.GetRootAs(raw, 0).OperatorCodes(i).BuiltinCode()
            for i in range(2)] == [0, 0]  # the accessor this test guards against
    main = load(raw).main
    assert [op.name for op in compute_ops(main)] == ["tfl.quantize", "tfl.dequantize"]
    check_model(write_model(builder, tmp_path / "quantize_codes.tflite"))


def test_ai_edge_quantizer_file_stores_quantize_in_builtin_code_alone():
    # A file of the toolchain zoo written by AI Edge Quantizer: its QUANTIZE
    # operator code has builtin_code 114 and no deprecated byte.
    import tflite

    from tfl2tosa.tflite_import.flat import SchemaTable
    from tfl2tosa.tflite_import.source import operator_code

    path = (Path(__file__).resolve().parents[1]
            / "models/toolchains/ai_edge_quantizer/bert_static_a8w8.tflite")
    data = path.read_bytes()
    model = tflite.Model.GetRootAs(data, 0)
    codes = [model.OperatorCodes(i) for i in range(model.OperatorCodesLength())]
    read = SchemaTable.root("Model", data)
    assert [(c.DeprecatedBuiltinCode(), c.BuiltinCode(), operator_code(read.OperatorCodes(i)))
            for i, c in enumerate(codes)
            if operator_code(read.OperatorCodes(i)) == 114] == [(0, 0, 114)]
    main = load(path).main
    assert any(op.name == "tfl.quantize" for op in main.ops)
    assert all(len(op.operands) == 2 for op in main.ops if op.name == "tfl.add")


def test_every_schema_builtin_gets_its_lowercase_name(builder):
    import tflite

    codes = {name: code for name, code in vars(tflite.BuiltinOperator).items()
             if not name.startswith("_") and name not in ("CUSTOM",
                                                          "PLACEHOLDER_FOR_GREATER_OP_CODES")}
    x = builder.tensor([2], "FLOAT32", "x")
    outputs = []
    for name, code in codes.items():
        y = builder.tensor([2], "FLOAT32", name)
        builder.op(code, [x], [y])
        outputs.append(y)
    builder.io([x], outputs)
    main = load(builder.to_bytes()).main
    assert [op.name for op in main.ops] == ["tfl." + name.lower() for name in codes]
    assert [op.loc.split(":")[2] for op in main.ops] == list(codes)


def test_optional_operand_is_no_value(builder):
    x = builder.tensor([1, 3], "FLOAT32", "x")
    w = builder.tensor([2, 3], "FLOAT32", "w", np.ones((2, 3), np.float32))
    y = builder.tensor([1, 2], "FLOAT32", "y")
    z = builder.tensor([1, 2], "FLOAT32", "z")
    builder.op("FULLY_CONNECTED", [x, w, -1], [y])
    builder.op("FULLY_CONNECTED", [x, w, -1], [z])
    builder.io([x], [y, z])
    main = load(builder.to_bytes()).main
    first, second = ops_named(main, "tfl.fully_connected")
    assert first.operands[2] is second.operands[2]
    assert first.operands[2].owner.name == "tfl.no_value"
    assert first.operands[2].type == NoneType()
    assert first.operands[1] is second.operands[1]  # one constant op per tensor


def test_quantization_variants(builder):
    x = builder.tensor([2, 3], "INT8", "x", scale=[0.5], zero_point=[-3], axis=1)
    w = builder.tensor([3, 2], "INT8", "w", np.zeros((3, 2), np.int8),
                       scale=[0.1, 0.2, 0.3], zero_point=[0, 1, 2], axis=0)
    u = builder.tensor([2, 3], "UINT8", "u", scale=[0.25], zero_point=[128])
    m = builder.tensor([2, 3], "FLOAT32", "minmax_only", min_max=(-1.0, 1.0))
    f = builder.tensor([2, 3], "FLOAT32", "float_with_scale", scale=[0.5])
    b = builder.tensor([3], "INT32", "bias", np.zeros(3, np.int32), scale=[0.05, 0.1, 0.15])
    outputs = []
    for source in (x, w, u, m, f, b):
        out = builder.tensor([1], "FLOAT32", f"out{source}")
        builder.op("SHAPE", [source], [out])
        outputs.append(out)
    builder.io([x, u, m, f], outputs)
    main = load(builder.to_bytes()).main
    types = {v.name: v.type for v in main.values()}
    # One scale with quantized_dimension set is still per-tensor.
    assert types["x"].element == UniformQuantized(t.i8, t.f32, 0.5, -3)
    # Scales are float32 in the file.
    scales = tuple(float(np.float32(s)) for s in (0.1, 0.2, 0.3))
    assert types["w"].element == UniformQuantizedPerAxis(t.i8, t.f32, 0, scales, (0, 1, 2))
    assert str(types["u"].element) == "!quant.uniform<u8:f32, 0.25:128>"
    assert types["minmax_only"].element == t.f32
    assert types["float_with_scale"].element == t.f32
    assert str(types["bias"]) == ("tensor<3x!quant.uniform<i32:f32:0, "
                                  "{0.05000000074505806,0.10000000149011612,"
                                  "0.15000000596046448}>>")


def test_int4_constant_keeps_packed_bytes(builder):
    # Five int4 values, two a byte, low nibble first: [1, -2, 3, -8, 7].
    packed = bytes([0xE1, 0x83, 0x07])
    w = builder.tensor([5], "INT4", "w", packed, scale=[0.5])
    y = builder.tensor([1], "INT32", "y")
    builder.op("SHAPE", [w], [y])
    builder.io([], [y])
    data = builder.to_bytes()
    main = load(data).main
    const = main.ops[0]
    assert const.attrs["packed_int4"] is True
    assert const.result.type == t.TensorType((5,), UniformQuantized(t.i4, t.f32, 0.5))
    assert bytes(const.attrs["value"]) == packed
    assert const.attrs["value"].dtype == np.uint8
    assert np.shares_memory(const.attrs["value"], np.frombuffer(data, np.uint8))


def test_sparse_constant_keeps_sparsity_parameters(builder):
    s = builder.s
    # A 4x4 matrix in CSR form: rows dense, columns sparse; 3 non-zeros.
    dense_dim = s.DimensionMetadataT()
    dense_dim.format, dense_dim.denseSize = s.DimensionType.DENSE, 4
    sparse_dim = s.DimensionMetadataT()
    sparse_dim.format = s.DimensionType.SPARSE_CSR
    segments, indices = s.Int32VectorT(), s.Int32VectorT()
    segments.values, indices.values = [0, 1, 1, 2, 3], [0, 2, 3]
    sparse_dim.arraySegmentsType = s.SparseIndexVector.Int32Vector
    sparse_dim.arraySegments = segments
    sparse_dim.arrayIndicesType = s.SparseIndexVector.Int32Vector
    sparse_dim.arrayIndices = indices
    sparsity = s.SparsityParametersT()
    sparsity.traversalOrder, sparsity.dimMetadata = [0, 1], [dense_dim, sparse_dim]
    values = np.array([1.5, 2.5, 3.5], np.float32)
    w = builder.tensor([4, 4], "FLOAT32", "w", values, sparsity=sparsity)
    y = builder.tensor([4, 4], "FLOAT32", "dense")
    builder.op("DENSIFY", [w], [y])
    builder.io([], [y])
    main = load(builder.to_bytes()).main
    const = main.ops[0]
    np.testing.assert_array_equal(const.attrs["value"], values)
    params = const.attrs["sparsity"]
    assert params["traversal_order"] == (0, 1) and params["block_map"] == ()
    first, second = params["dim_metadata"]
    assert first["format"] == "DENSE" and first["dense_size"] == 4
    assert second["format"] == "SPARSE_CSR"
    np.testing.assert_array_equal(second["array_segments"], [0, 1, 1, 2, 3])
    np.testing.assert_array_equal(second["array_indices"], [0, 2, 3])
    assert const.result.type == t.TensorType((4, 4), t.f32)
    assert main.ops[1].name == "tfl.densify"


def test_variable_tensors(builder):
    x = builder.tensor([1, 2], "INT8", "x", scale=[0.5], zero_point=[-5])
    state = builder.tensor([1, 2], "INT8", "state", scale=[0.5], zero_point=[-5],
                           is_variable=True)
    fstate = builder.tensor([1, 2], "FLOAT32", "fstate", is_variable=True)
    y = builder.tensor([1, 2], "INT8", "y", scale=[0.5], zero_point=[-5])
    z = builder.tensor([1, 2], "FLOAT32", "z")
    builder.op("ADD", [x, state], [y])
    builder.op("RELU", [fstate], [z])
    builder.io([x], [y, z])
    main = load(builder.to_bytes()).main
    variables = {op.result.name: op for op in ops_named(main, "tfl.variable")}
    # TFLite resets int8 variables to their zero point, others to 0.
    assert variables["state"].attrs == {"fill_value": -5}
    assert variables["fstate"].attrs == {"fill_value": 0}
    assert variables["state"].result.type.element.zero_point == -5


def test_large_buffer_model(builder):
    weights = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = builder.tensor([2, 3, 4], "FLOAT32", "x")
    w = builder.tensor([2, 3, 4], "FLOAT32", "w", weights)
    y = builder.tensor([2, 3, 4], "FLOAT32", "y")
    builder.op("ADD", [x, w], [y])
    builder.io([x], [y])
    data = builder.to_bytes_with_external_buffers()
    main = load(data).main
    value = ops_named(main, "tfl.pseudo_const")[0].attrs["value"]
    np.testing.assert_array_equal(value, weights)
    assert np.shares_memory(value, np.frombuffer(data, np.uint8))
    # The data sits after the flatbuffer, at the offset the buffer table gives.
    assert data.rfind(weights.tobytes()) > len(data) - weights.nbytes - 16


def test_string_constant(builder):
    strings = [b"alpha", b"", b"gamma"]
    # TFLite string buffer: int32 count, int32 offsets[count + 1], then the bytes.
    raw = np.array([3, 20, 25, 25, 30], "<i4").tobytes() + b"".join(strings)
    w = builder.tensor([3], "STRING", "words", raw)
    y = builder.tensor([1], "INT32", "y")
    builder.op("SHAPE", [w], [y])
    builder.io([], [y])
    const = load(builder.to_bytes()).main.ops[0]
    assert const.attrs["value"].tolist() == strings
    assert str(const.result.type) == "tensor<3x!tf_type.string>"


def test_if_and_call_once_reference_graphs_by_name(builder):
    then_graph = builder.subgraph("then_fn")
    else_graph = builder.subgraph("else fn")  # not an identifier
    init_graph = builder.subgraph("then_fn")  # duplicate name
    for graph in (then_graph, else_graph):
        a = builder.tensor([1], "FLOAT32", "a", graph=graph)
        builder.io([a], [a], graph=graph)
    builder.io([], [], graph=init_graph)
    cond = builder.tensor([], "BOOL", "cond")
    x = builder.tensor([1], "FLOAT32", "x")
    y = builder.tensor([1], "FLOAT32", "y")
    builder.op("CALL_ONCE", [], [], options=builder.options("CallOnceOptions",
                                                           initSubgraphIndex=init_graph))
    builder.op("IF", [cond, x], [y], options=builder.options(
        "IfOptions", thenSubgraphIndex=then_graph, elseSubgraphIndex=else_graph))
    builder.io([cond, x], [y])
    module = load(builder.to_bytes())
    assert list(module.graphs) == ["main", "subgraph_1", "subgraph_2", "subgraph_3"]
    call_once, if_op = module.main.ops
    assert call_once.attrs["session_init_function"] == "subgraph_3"
    assert call_once.attrs["init_subgraph_index"] == 3
    assert call_once.results == []
    assert if_op.attrs["then_branch"] == "subgraph_1"
    assert if_op.attrs["else_branch"] == "subgraph_2"


def test_unique_identifier_graph_names_are_kept(builder):
    body = builder.subgraph("my_body")
    a = builder.tensor([1], "FLOAT32", "a", graph=body)
    builder.io([a], [a], graph=body)
    x = builder.tensor([1], "FLOAT32", "x")
    y = builder.tensor([1], "FLOAT32", "y")
    builder.op("CALL", [x], [y], options=builder.options("CallOptions", subgraph=body))
    builder.io([x], [y])
    module = load(builder.to_bytes())
    assert list(module.graphs) == ["main", "my_body"]
    assert module.main.ops[0].attrs == {"subgraph": 1, "callee": "my_body"}


def test_builtin_options_2_attributes(builder):
    decomposition = builder.subgraph("decomp")
    a = builder.tensor([2], "FLOAT32", "a", graph=decomposition)
    builder.io([a], [a], graph=decomposition)
    x = builder.tensor([2], "FLOAT32", "x")
    y = builder.tensor([4], "FLOAT32", "y")
    z = builder.tensor([4], "FLOAT32", "z")
    builder.op("STABLEHLO_PAD", [x, x], [y], options2=builder.options(
        "StablehloPadOptions", edgePaddingLow=[1], edgePaddingHigh=[1], interiorPadding=[0]))
    builder.op("STABLEHLO_COMPOSITE", [y], [z], options2=builder.options(
        "StableHLOCompositeOptions", name="odml.npu", decompositionSubgraphIndex=decomposition,
        compositeAttributes=[1, 2, 3], version=2))
    builder.op("STABLEHLO_COMPARE", [z, z], [builder.tensor([4], "BOOL", "c")],
               options2=builder.options("StablehloCompareOptions", comparisonDirection=3,
                                        compareType=1))
    builder.io([x], [z])
    pad, composite, compare = load(builder.to_bytes()).main.ops
    assert pad.name == "tfl.stablehlo_pad"
    assert pad.attrs == {"edge_padding_low": (1,), "edge_padding_high": (1,),
                         "interior_padding": (0,)}
    assert composite.attrs["name"] == "odml.npu"
    assert composite.attrs["decomposition"] == "decomp"
    assert composite.attrs["composite_attributes"] == bytes([1, 2, 3])
    assert composite.attrs["composite_attributes_format"] == "FLEXBUFFERS"
    assert composite.attrs["version"] == 2
    assert compare.attrs == {"comparison_direction": "STABLEHLO_COMPARISON_DIRECTION_GT",
                             "compare_type": "STABLEHLO_COMPARISON_TYPE_FLOAT"}


def test_enum_and_vector_options(builder):
    x = builder.tensor([1, 4, 4, 2], "FLOAT32", "x")
    y = builder.tensor([1, 2, 2, 2], "FLOAT32", "y")
    z = builder.tensor([2, 4, 2], "FLOAT32", "z")
    builder.op("MAX_POOL_2D", [x], [y], options=builder.options(
        "Pool2DOptions", padding=1, strideW=2, strideH=2, filterWidth=2, filterHeight=3,
        fusedActivationFunction=2))
    builder.op("SQUEEZE", [x], [z], options=builder.options("SqueezeOptions",
                                                           squeezeDims=[0]))
    builder.io([x], [y, z])
    pool, squeeze = load(builder.to_bytes()).main.ops
    assert pool.attrs == {"padding": "VALID", "stride_w": 2, "stride_h": 2, "filter_width": 2,
                          "filter_height": 3, "fused_activation_function": "RELU_N1_TO_1"}
    assert squeeze.attrs == {"squeeze_dims": (0,)}


def test_duplicate_and_empty_tensor_names_are_uniquified(builder):
    x = builder.tensor([1], "FLOAT32", "t")
    y = builder.tensor([1], "FLOAT32", "t")
    z = builder.tensor([1], "FLOAT32", "")
    builder.op("RELU", [x], [y])
    builder.op("RELU", [y], [z])
    builder.io([x], [z])
    main = load(builder.to_bytes()).main
    names = [v.name for v in main.values()]
    assert names == ["t", "t_1", "tensor2"]
    assert main.attrs["tensor_index"] == {"t": 0, "t_1": 1, "tensor2": 2}


def test_shape_signature_and_scalar_shapes(builder):
    x = builder.tensor([1, 3], "FLOAT32", "x", shape_signature=[-1, 3])
    s = builder.tensor([], "FLOAT32", "s", np.array(2.0, np.float32))
    y = builder.tensor([1, 3], "FLOAT32", "y")
    builder.op("MUL", [x, s], [y])
    builder.io([x], [y])
    main = load(builder.to_bytes()).main
    assert main.inputs[0].type.shape == (1, 3)
    assert main.attrs["shape_signatures"] == {"x": (-1, 3)}
    assert main.ops[0].result.type.shape == ()
    assert main.ops[0].attrs["value"].shape == ()


def test_signature_and_metadata_from_builder(builder):
    x = builder.tensor([1], "FLOAT32", "input_tensor")
    y = builder.tensor([1], "FLOAT32", "output_tensor")
    builder.op("RELU", [x], [y])
    builder.io([x], [y])
    builder.signature("serving", {"in": x}, {"out": y})
    builder.metadata("my_meta", b"hello")
    module = load(builder.to_bytes())
    assert module.attrs["signature_defs"] == [{
        "signature_key": "serving", "subgraph": "main", "subgraph_index": 0,
        "inputs": {"in": "input_tensor"}, "outputs": {"out": "output_tensor"}}]
    assert bytes(module.attrs["metadata"]["my_meta"]) == b"hello"
    assert module.attrs["description"] == "built by tests"


def test_empty_constant_without_data(builder):
    # A zero-element tensor needs no data: TFLite allocates nothing for it.
    x = builder.tensor([2, 2], "FLOAT32", "x")
    shape = builder.tensor([0], "INT32", "empty_shape")
    y = builder.tensor([2, 2], "FLOAT32", "y")
    builder.op("RESHAPE", [x, shape], [y])
    builder.io([x], [y])
    const = load(builder.to_bytes()).main.ops[0]
    assert const.name == "tfl.pseudo_const" and const.attrs["value"].shape == (0,)


def test_buffer_larger_than_shape_is_accepted_like_tflite(builder):
    # TFLite only requires the buffer to hold at least what the shape needs.
    x = builder.tensor([2], "FLOAT32", "x")
    w = builder.tensor([2], "FLOAT32", "w", np.array([1, 2, 3], np.float32))
    y = builder.tensor([2], "FLOAT32", "y")
    builder.op("ADD", [x, w], [y])
    builder.io([x], [y])
    np.testing.assert_array_equal(load(builder.to_bytes()).main.ops[0].attrs["value"], [1, 2])


def test_missing_file_identifier_is_accepted_when_the_model_parses(builder):
    # Old converters wrote no file identifier; the model must still load.
    import flatbuffers

    x = builder.tensor([1], "FLOAT32", "x")
    y = builder.tensor([1], "FLOAT32", "y")
    builder.op("RELU", [x], [y])
    builder.io([x], [y])
    fb = flatbuffers.Builder(256)
    fb.Finish(builder.model.Pack(fb))
    data = bytes(fb.Output())
    assert data[4:8] != b"TFL3"
    assert [op.name for op in load(data).main.ops] == ["tfl.relu"]


def test_not_a_flatbuffer_of_tflite_even_without_identifier(builder):
    # Same bytes but the version field says 2: schema v3 readers reject it.
    builder.model.version = 2
    x = builder.tensor([1], "FLOAT32", "x")
    builder.io([x], [x])
    with pytest.raises(ModelError, match="schema version"):
        load(builder.to_bytes())


def test_tflite_package_loads_lazily_but_whole():
    """The importer loads only the `tflite` modules a model needs, yet code that
    uses the whole package (builder functions, every table) still finds it."""
    import subprocess
    import sys

    script = (
        "import sys, tfl2tosa.tflite_import as ti\n"
        "ti.load('models/arch/mobilenet_tiny_int8.tflite')\n"
        "loaded = [m for m in sys.modules if m.startswith('tflite.')]\n"
        "assert len(loaded) < 60, len(loaded)\n"
        "import tflite\n"
        "assert tflite.Model.__module__ == 'tflite.Model'\n"
        "assert callable(tflite.ModelStart) and callable(tflite.Conv2DOptionsAddStrideW)\n"
        "assert len([m for m in sys.modules if m.startswith('tflite.')]) > 150\n"
        "assert not hasattr(tflite, 'NoSuchTable')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parent.parent)
    assert result.returncode == 0, result.stderr
