"""Our reference model's RSQRT on float32 equals Arm's reference model and
TFLite's kernels bit for bit: all three compute `1 / sqrt(x)` in float32,
rounding the square root and the division (the correctly rounded reciprocal
square root differs from them by an ulp on about a quarter of the values)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from arm import run_arm
from conftest import TfliteBuilder

import reference_model
from tfl2tosa.pipeline import convert
from tfl2tosa.tosa.writer import write_tosa


@pytest.mark.parametrize("resolver", ["BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"])
def test_rsqrt_equals_arm_and_tflite(resolver: str) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
    b = TfliteBuilder()
    x = b.tensor([4096], "FLOAT32", "x")
    y = b.tensor([4096], "FLOAT32", "y")
    b.op("RSQRT", [x], [y])
    b.io([x], [y])
    data = b.to_bytes()
    module, _ = convert(data)
    feed = (10.0 ** np.random.default_rng(0).uniform(-30, 30, 4096)).astype(np.float32)
    ours = next(iter(reference_model.run(module, [feed]).values()))
    arm = run_arm(write_tosa(module), [feed], [np.float32])
    assert arm.status == "valid" and np.array_equal(arm.outputs[0], ours)
    interpreter = tf.lite.Interpreter(
        model_content=data,
        experimental_op_resolver_type=getattr(tf.lite.experimental.OpResolverType, resolver))
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], feed)
    interpreter.invoke()
    assert np.array_equal(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]),
                          ours)
    exact = (1 / np.sqrt(feed.astype(np.float64))).astype(np.float32)
    assert not np.array_equal(ours, exact)  # the two roundings show
