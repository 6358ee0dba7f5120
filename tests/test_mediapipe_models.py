"""MediaPipe's bundled models that use its custom ops (tests/fixtures/mediapipe,
re-extracted from the `mediapipe` wheel by extract.py) convert, and Arm's
reference model runs the `.tosa` with the same outputs as ours.

The whole model is also judged by TFLite: in a copy of the model the custom
Convolution2DTransposeBias becomes TFLite's builtin TRANSPOSE_CONV with the
same weights, bias, SAME padding and strides (MediaPipe's op is that
transposed convolution plus the bias), which TFLite runs; the conversion of
the original model must match it.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import pack_model, tflite_schema, unpack_model
from e2e import check_against_arm

import reference_model
from tfl2tosa.pipeline import convert
from tfl2tosa.tflite_import import load
from tfl2tosa.validation import compare, float_tolerance

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "mediapipe"
MODELS = ["selfie_segmentation.tflite", "selfie_segmentation_landscape.tflite"]


def with_builtin_transpose_conv(data: bytes) -> bytes:
    """The model with each Convolution2DTransposeBias replaced by TRANSPOSE_CONV
    (inputs: output shape, weights, input, bias)."""
    s = tflite_schema()
    model = unpack_model(data)
    graph = model.subgraphs[0]
    custom = {i for i, c in enumerate(model.operatorCodes)
              if c.customCode and c.customCode.decode() == "Convolution2DTransposeBias"}
    code = s.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = s.BuiltinOperator.TRANSPOSE_CONV
    code.version = 3
    model.operatorCodes.append(code)
    for op in graph.operators:
        if op.opcodeIndex not in custom:
            continue
        padding, stride_w, stride_h = struct.unpack_from("<3i", bytes(op.customOptions))
        x, weights, bias = op.inputs
        shape_buffer = s.BufferT()
        out_shape = np.asarray(graph.tensors[op.outputs[0]].shape, np.int32)
        shape_buffer.data = np.frombuffer(out_shape.tobytes(), np.uint8).copy()
        model.buffers.append(shape_buffer)
        shape = s.TensorT()
        shape.shape, shape.type, shape.name = [4], s.TensorType.INT32, "output_shape"
        shape.buffer = len(model.buffers) - 1
        graph.tensors.append(shape)
        options = s.TransposeConvOptionsT()
        options.padding = {1: s.Padding.SAME, 2: s.Padding.VALID}[padding]
        options.strideW, options.strideH = stride_w, stride_h
        op.opcodeIndex = len(model.operatorCodes) - 1
        op.inputs = [len(graph.tensors) - 1, weights, x, bias]
        op.builtinOptionsType = s.BuiltinOptions.TransposeConvOptions
        op.builtinOptions = options
        op.customOptions = None
    return pack_model(model)


@pytest.mark.parametrize("name", MODELS)
def test_mediapipe_model_matches_tflite_and_arm(name):
    path = FIXTURES / name
    module, conversion = convert(path)
    custom = [o for o in conversion.outcomes if o["op_name"] == "tfl.custom"]
    assert [o["pattern"] for o in custom] == ["convolution_2d_transpose_bias"]
    assert {o["path"] for o in conversion.outcomes} == {"float"}
    x_shape = module.main.inputs[0].type.shape
    feeds = [[np.random.default_rng(seed).uniform(0, 1, x_shape).astype(np.float32)]
             for seed in range(2)]
    check_against_arm(module, conversion, feeds)
    family, bounds = float_tolerance({o["op_name"] for o in conversion.outcomes})
    interpreter = tflite_interpreter(with_builtin_transpose_conv(path.read_bytes()))
    by_name = {d["name"]: d["index"] for d in interpreter.get_tensor_details()}
    output = interpreter.get_output_details()[0]["name"]
    logits = next(op.results[0].name for op in load(path).main.ops if op.name == "tfl.custom")
    for run in feeds:
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], run[0])
        interpreter.invoke()
        ours = reference_model.run(module, run, keep_intermediates=True)
        # The model's output (a sigmoid, near 0 on noise) and the custom op's
        # own output, the segmentation logits.
        for name in (output, logits):
            theirs = interpreter.get_tensor(by_name[name])
            assert theirs.std() > 0
            result = compare(name, theirs, ours[name], lsb_tolerance=0, float_bounds=bounds,
                             family=family)
            assert result.within_tolerance, result


def tflite_interpreter(data: bytes):
    """TFLite on its reference kernels, every tensor kept for reading."""
    import tensorflow as tf

    interpreter = tf.lite.Interpreter(
        model_content=data, experimental_preserve_all_tensors=True,
        experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    return interpreter
