"""Issue 15 point 3: `validate` anchors emulated hybrid models.

An emulated hybrid op quantizes its float input to int8 at run time, so an
ulp-sized difference upstream can move one rounding and the output by a whole
quantization step. When such a model misses the float bounds, validate runs our
reference model again with TFLite's own tensors at the hybrid ops' inputs
(where ours are within the float bounds of the ops computing them) and judges
that run. TFLite's interpreter stays the judge: a model passes only when the
anchored outputs are within the ordinary bounds of TFLite's, and a wrong
emulation or an upstream op off by more than its bound still fails.

The hand-built model: x -> MUL by a constant 2 -> hybrid FULLY_CONNECTED (int8
weights, symmetric run-time quantization: q = round(t * 127 / max|t|)). The
tests edit the converted graph's MUL constant at one element, so our MUL result
differs from TFLite's there, and choose an input whose quantization sits just
below a rounding half at that element.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import TfliteBuilder
from e2e import MODELS

import reference_model
from tfl2tosa.pipeline import convert
from tfl2tosa.validation import validate

NUDGED = 5   # the element of the MUL constant the tests edit
WEIGHT_SCALE = 0.01


def mul_then_hybrid_dense() -> bytes:
    builder = TfliteBuilder()
    x = builder.tensor([1, 16], "FLOAT32", "x")
    two = builder.tensor([16], "FLOAT32", "two", data=np.full(16, 2.0, np.float32))
    t = builder.tensor([1, 16], "FLOAT32", "t")
    weights = np.random.default_rng(7).integers(-127, 128, size=(4, 16)).astype(np.int8)
    weights[:, NUDGED] = 100  # one quantization step of t[NUDGED] moves every output
    w = builder.tensor([4, 16], "INT8", "w", data=weights, scale=[WEIGHT_SCALE],
                       zero_point=[0])
    bias = builder.tensor([4], "FLOAT32", "bias", data=np.zeros(4, np.float32))
    y = builder.tensor([1, 4], "FLOAT32", "y")
    builder.op("MUL", [x, two], [t], options=builder.options("MulOptions"))
    builder.op("FULLY_CONNECTED", [t, w, bias], [y],
               options=builder.options("FullyConnectedOptions",
                                       asymmetricQuantizeInputs=False))
    builder.model.operatorCodes[-1].version = 11
    builder.io([x], [y])
    return builder.to_bytes()


def input_below_a_half() -> np.ndarray:
    """t = 2x with max |t| = 1 (so q = round(127 t)) and 127 t[NUDGED] = 100.4999:
    TFLite rounds it to 100, and t[NUDGED] larger by a relative 4e-6 rounds to 101."""
    t = np.random.default_rng(3).uniform(-0.9, 0.9, size=(1, 16))
    t[0, 0] = 1.0
    t[0, NUDGED] = (100.5 - 1e-4) / 127
    return (t / 2).astype(np.float32)


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "mul_hybrid_dense.tflite"
    path.write_bytes(mul_then_hybrid_dense())
    return path


def edited(path: Path, *, mul_factor: float = 1.0, weight_step: int = 0) -> tuple:
    """The model converted as validate converts it (for the builtin kernels), then the
    MUL constant's element NUDGED multiplied by `mul_factor` and the int8 weight
    constant's first element moved by `weight_step`."""
    module, conversion = convert(path, kernels="optimized")
    constants = {op.results[0].name: op for op in module.main.ops if op.name == "tosa.const"}
    mul_constant = constants["t/const"].attrs
    values = np.array(mul_constant["values"])
    values[0, NUDGED] = np.float32(values[0, NUDGED] * mul_factor)
    mul_constant["values"] = values
    if weight_step:
        weight = next(op.attrs for op in constants.values()
                      if np.asarray(op.attrs["values"]).dtype == np.int8
                      and np.asarray(op.attrs["values"]).size == 64)
        values = np.array(weight["values"])
        values.flat[0] += weight_step
        weight["values"] = values
    return module, conversion


def test_an_upstream_difference_within_its_bound_is_anchored(model: Path) -> None:
    """Our MUL result is off by a relative 4e-6 at one element (the arithmetic bound
    is 1e-5), which moves one int8 rounding: the output is a quantization step
    away from TFLite's, yet the model passes, judged with TFLite's own MUL result
    in place of ours, and the report keeps the un-anchored error."""
    module, conversion = edited(model, mul_factor=1 + 4e-6)
    report = validate(model, inputs=[[input_below_a_half()]], module=module,
                      conversion=conversion)
    assert report.passed, report
    output = report.outputs[0]
    # One step of t[NUDGED] (1/127) times its weights (100 * WEIGHT_SCALE).
    assert output.max_abs_error == pytest.approx(100 * WEIGHT_SCALE / 127, rel=1e-3)
    assert output.anchored_max_abs_error == 0.0
    assert (report.anchored_runs, report.anchored_inputs) == (1, 1)
    # Our t[NUDGED] (x times the float32 nearest 2 (1 + 4e-6)) against TFLite's, in
    # ulps of max |t| = 1 (2^-23): 27.
    x = input_below_a_half()[0, NUDGED]
    ours = np.float32(x * np.float32(2 * (1 + 4e-6)))
    assert report.anchored_max_ulp == np.ceil((ours - 2 * x) / 2.0**-23) == 27
    note = next(n for n in report.notes if "1 run(s) missed" in n)
    assert "1 hybrid-op input(s)" in note and "27 ulp" in note
    data = report.to_dict()
    assert data["anchored_runs"] == 1 and data["outputs"][0]["anchored_max_abs_error"] == 0.0
    from tfl2tosa.cli.validate import to_markdown

    assert f"note: {note}" in to_markdown(report)


def test_a_wrong_emulation_still_fails_when_anchored(model: Path) -> None:
    """The same upstream nudge plus one int8 weight off by one in the hybrid op's
    graph: anchoring is tried and the outputs still miss the bounds."""
    module, conversion = edited(model, mul_factor=1 + 4e-6, weight_step=1)
    report = validate(model, inputs=[[input_below_a_half()]], module=module,
                      conversion=conversion)
    assert not report.passed
    assert report.anchored_runs == 0 and report.outputs[0].anchored_max_abs_error is None
    assert any("the outputs still miss the float bounds" in n for n in report.notes)


def test_an_upstream_op_off_beyond_its_bound_still_fails(model: Path) -> None:
    """Our MUL off by a relative 1e-3 at one element (the arithmetic bound is 1e-5):
    not anchored, the model fails, and the note names the hybrid op's input."""
    module, conversion = edited(model, mul_factor=1 + 1e-3)
    report = validate(model, inputs=[[input_below_a_half()]], module=module,
                      conversion=conversion)
    assert not report.passed
    assert report.anchored_runs == 0
    assert any("hybrid-op input 't' differs from TFLite's" in n
               and "beyond the arithmetic bound" in n for n in report.notes)


def test_substitute_replaces_a_value_for_the_rest_of_the_run(model: Path) -> None:
    """The reference model's hook: the MUL result replaced by zeros, the dense layer
    gives its bias (zeros; a row of zeros quantizes to q = 0), and the substitute
    sees the value as computed (2x)."""
    module, _ = convert(model, kernels="optimized")
    x = input_below_a_half()
    seen = []

    def zeros(ours: np.ndarray) -> np.ndarray:
        seen.append(ours)
        return np.zeros_like(ours)

    outputs = reference_model.compile(module).run([x], substitute={"t": zeros})
    np.testing.assert_array_equal(seen[0], 2 * x)
    np.testing.assert_array_equal(outputs["y"], np.zeros((1, 4), np.float32))


@pytest.mark.parametrize("relative", [
    "arch/mobilenet_tiny_dynamic_range.tflite",
    "toolchains/ai_edge_quantizer/generative_block_hlfb_dynamic_wi4_b32.tflite",
])
def test_zoo_hybrid_models_pass_plain_validate(relative: str) -> None:
    """Emulated hybrid models whose float ops differ from TFLite's by ulps pass over
    validate's default seeded runs; a run that needed anchoring is reported with
    its anchored inputs and an anchored error within the bounds."""
    report = validate(MODELS / relative)
    assert report.passed, report
    if report.anchored_runs:
        assert report.anchored_inputs >= 1 and report.anchored_max_ulp is not None
        assert all(o.anchored_max_abs_error is not None for o in report.outputs)
        assert any(f"{report.anchored_runs} run(s) missed" in n for n in report.notes)
