"""Issue 6 in one statement: every int8 and int16x8 model of the zoo (unit ops,
architectures and the demo) is bit exact with TFLite's reference kernels, and
the ops TFLite runs with integer kernels take our integer path.

Each model is converted with the fallback on; then
- no op of INTEGER_OPS may take the fallback (a quantized instance of one of
  them has an integer pattern; a float instance, as in DEQUANTIZE -> op ->
  QUANTIZE models, takes the float path);
- validate, with no LSB allowance, must find every output exact against the
  TFLite interpreter on one seeded input from the model's calibration range
  (outside it ops like RSQRT or DIV make TFLite itself refuse to run);
- Arm's reference model must give the same integers on the written `.tosa`.
Models with an op TOSA cannot express are refused by name (see
test_never_silently_wrong.py). A model with an op version TFLite's reference
resolver lacks (or a quantized SUM, whose reference kernel is broken) runs on
the builtin kernels instead (validate names the resolver); they too must be
exact, but for the one model listed in ROUNDS_DIFFERENTLY with the reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from e2e import MODELS, check_against_arm
from test_never_silently_wrong import MANIFEST, range_inputs, refused_ops

from tfl2tosa.pipeline import convert
from tfl2tosa.validation import validate

# The ops issue 6 lists as run by TFLite with int8 / int16 kernels.
INTEGER_OPS = frozenset(f"tfl.{name}" for name in """
    conv_2d depthwise_conv_2d transpose_conv fully_connected batch_matmul
    add sub mul squared_difference mean sum reduce_max reduce_min reduce_prod
    average_pool_2d max_pool_2d logistic tanh exp log rsqrt gelu hard_swish elu
    relu relu6 relu_n1_to_1 relu_0_to_1 leaky_relu prelu softmax concatenation
    reshape transpose squeeze expand_dims slice strided_slice split split_v pack unpack
    tile broadcast_to space_to_depth depth_to_space space_to_batch_nd batch_to_space_nd
    reverse_v2 pad padv2 mirror_pad gather gather_nd resize_bilinear
    resize_nearest_neighbor equal not_equal greater greater_equal less less_equal
    arg_max arg_min quantize dequantize unidirectional_sequence_lstm
""".split())

# LSBs allowed where TFLite can only run the model on its optimized kernels and
# those round unlike the reference kernels our integer semantics follow.
ROUNDS_DIFFERENTLY = {
    # DEQUANTIZE -> ROUND -> QUANTIZE, no reference ROUND of this version: the
    # optimized float -> int8 QUANTIZE divides by the scale in double, the
    # reference one (and we) multiply by its float reciprocal.
    "unit/int8/round.tflite": 1,
}


def quantized_models() -> list[dict]:
    return sorted((m for m in MANIFEST["models"] if m["flavour"] in ("int8", "int16x8")
                   and not refused_ops(m)), key=lambda m: m["path"])


@pytest.mark.parametrize("entry", quantized_models(), ids=lambda m: m["path"])
def test_quantized_model_is_bit_exact(entry: dict) -> None:
    path = MODELS / entry["path"]
    module, conversion = convert(path)
    fell_back = sorted({o["op_name"] for o in conversion.outcomes
                        if o["path"] == "fallback" and o["op_name"] in INTEGER_OPS})
    assert fell_back == [], f"ops with an integer kernel took the fallback: {fell_back}"
    inputs = range_inputs(entry, np.random.default_rng(0))
    allowance = ROUNDS_DIFFERENTLY.get(entry["path"], 0)
    report = validate(path, module=module, conversion=conversion, inputs=[inputs],
                      lsb_tolerance=allowance)
    if allowance:
        assert report.resolver != "BUILTIN_REF"
    worst = max(o.max_lsb or 0 for o in report.outputs)
    assert report.passed and worst <= allowance, (worst, report.outputs)
    check_against_arm(module, conversion, [inputs])


def test_every_quantized_architecture_is_included() -> None:
    paths = {m["path"] for m in quantized_models()}
    assert {"demo/mobilenet_tiny_int8.tflite", "arch/mobilenet_tiny_int8.tflite",
            "arch/mobilenet_tiny_int16x8.tflite", "arch/lstm_classifier_int8.tflite",
            "arch/attention_block_int8.tflite", "arch/attention_block_int16x8.tflite"} <= paths
    assert len(paths) > 250
