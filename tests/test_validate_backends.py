"""validate's TFLite runtimes: ai-edge-litert (the default when installed) and
TensorFlow's bundled TFLite run the same reference kernels: bit for bit the same
integer results; float results differ in the last bits of a few elements of
recurrent and attention models (separately compiled float loops; up to 9 ulp
in the zoo), well inside validate's float tolerances. The report names the
runtime used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tfl2tosa.errors import UsageError
from tfl2tosa.validation import random_input, validate
from tfl2tosa.validation.judge import _runtime

MODELS = Path(__file__).resolve().parent.parent / "models"
CASES = ["demo/mobilenet_tiny_int8", "arch/mobilenet_tiny_int16x8", "arch/lstm_classifier_int8",
         "arch/attention_block_float32", "unit/float32/gelu_exact", "unit/int8/softmax"]


@pytest.mark.parametrize("name", CASES)
def test_litert_reference_kernels_match_tensorflows(name: str) -> None:
    data = (MODELS / f"{name}.tflite").read_bytes()
    outputs = []
    for backend in ("ai-edge-litert", "tensorflow"):
        Interpreter, resolvers, _ = _runtime(backend)
        interpreter = Interpreter(model_content=data,
                                  experimental_op_resolver_type=resolvers.BUILTIN_REF)
        interpreter.allocate_tensors()
        rng = np.random.default_rng(7)
        for detail in interpreter.get_input_details():
            interpreter.set_tensor(detail["index"],
                                   random_input(rng, list(detail["shape"]), detail["dtype"]))
        interpreter.invoke()
        outputs.append([interpreter.get_tensor(d["index"])
                        for d in interpreter.get_output_details()])
    for litert, tensorflow in zip(*outputs):
        if litert.dtype.kind == "f":  # validate's tolerance for arithmetic float models
            np.testing.assert_allclose(litert, tensorflow, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(litert, tensorflow)


def test_validate_defaults_to_litert_and_names_the_backend() -> None:
    result = subprocess.run([sys.executable, "-m", "tfl2tosa", "validate",
                             MODELS / "demo" / "mobilenet_tiny_int8.tflite", "--json"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["backend"], report["resolver"]) == ("ai-edge-litert", "BUILTIN_REF")
    markdown = subprocess.run([sys.executable, "-m", "tfl2tosa", "validate",
                               MODELS / "demo" / "mobilenet_tiny_int8.tflite", "--markdown",
                               "--backend", "tensorflow"],
                              capture_output=True, text=True, timeout=300)
    assert markdown.returncode == 0 and "TFLite on `tensorflow`" in markdown.stdout


@pytest.mark.parametrize("name", ["demo/mobilenet_tiny_int8", "arch/mobilenet_tiny_int16x8"])
def test_both_backends_give_the_same_report(name: str) -> None:
    reports = [validate(MODELS / f"{name}.tflite", runs=2, backend=b).to_dict()
               for b in ("ai-edge-litert", "tensorflow")]
    assert [r.pop("backend") for r in reports] == ["ai-edge-litert", "tensorflow"]
    assert reports[0] == reports[1]


def test_both_backends_give_the_same_verdict_on_float_models() -> None:
    for name in ("unit/float32/gelu_exact", "arch/lstm_classifier_float32"):
        reports = [validate(MODELS / f"{name}.tflite", runs=2, backend=b)
                   for b in ("ai-edge-litert", "tensorflow")]
        assert [r.passed for r in reports] == [True, True]


def test_unknown_backend_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown backend"):
        validate(MODELS / "unit" / "float32" / "add.tflite", backend="onnxruntime")
