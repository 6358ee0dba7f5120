"""int16x8 models: TFLite's power-of-two int16 ADD/SUB path, and the zoo's
whole int16x8 architectures, bit exact against TFLite's builtin reference
kernels and Arm's reference model.

ADD/SUB with `pot_scale_int16` and power-of-two scales (LSTM-style
quantization) take a shift-only path in TFLite (legalize/elementwise.py, add_int16_pot);
the cases cover both shift directions, equal scales (pure saturating sums),
shifts up to 15, ties of the rounding division on both sides of zero,
saturation at both ends and fused activations. The general int16 path
(`pot_scale_int16` false) belongs to legalize/elementwise.py (add_int) and is checked
here only as the path such a model takes.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TfliteBuilder
from e2e import check_model, model_path

from tfl2tosa.pipeline import convert


def check_exact(path, labels: dict[str, str], **kwargs) -> None:
    """Exact against TFLite and Arm; the ops named in `labels` took those patterns."""
    conversion, report = check_model(path, allowed_paths=("integer",), **kwargs)
    for outcome in conversion.outcomes:
        if outcome["op_name"] in labels:
            assert outcome["pattern"] == labels[outcome["op_name"]], outcome
    assert all(o.exact for o in report.outputs)


def pot_model(tmp_path, op_name: str, shape1, shape2, log2_scales, *, activation="NONE",
              pot_scale_int16=True):
    b = TfliteBuilder()
    out_shape = list(np.broadcast_shapes(tuple(shape1), tuple(shape2)))
    s1, s2, s_out = (2.0 ** e for e in log2_scales)
    x1 = b.tensor(list(shape1), "INT16", "x1", scale=[s1], zero_point=[0])
    x2 = b.tensor(list(shape2), "INT16", "x2", scale=[s2], zero_point=[0])
    y = b.tensor(out_shape, "INT16", "y", scale=[s_out], zero_point=[0])
    table = {"ADD": "AddOptions", "SUB": "SubOptions"}[op_name]
    b.op(op_name, [x1, x2], [y], options=b.options(
        table, potScaleInt16=pot_scale_int16,
        fusedActivationFunction=getattr(b.s.ActivationFunctionType, activation)))
    b.io([x1, x2], [y])
    path = tmp_path / "pot.tflite"
    path.write_bytes(b.to_bytes())
    return path


POT_CASES = [
    pytest.param("ADD", (-12, -12, -12), "NONE", id="add_equal_scales_saturating"),
    pytest.param("ADD", (-15, -12, -12), "NONE", id="add_first_input_shift3"),
    pytest.param("ADD", (-10, -11, -10), "RELU6", id="add_second_input_shift1_relu6"),
    pytest.param("ADD", (-3, -18, -3), "NONE", id="add_shift15"),
    pytest.param("SUB", (-12, -14, -12), "NONE", id="sub_second_input_shift2"),
    pytest.param("SUB", (-13, -9, -9), "RELU_N1_TO_1", id="sub_first_input_shift4_relu1"),
    pytest.param("SUB", (-11, -11, -11), "RELU", id="sub_equal_scales_relu"),
]


@pytest.mark.parametrize(("op_name", "log2_scales", "activation"), POT_CASES)
def test_power_of_two_add_sub(tmp_path, op_name, log2_scales, activation) -> None:
    path = pot_model(tmp_path, op_name, (2, 5, 7, 3), (2, 5, 7, 3), log2_scales,
                     activation=activation)
    label = {"ADD": "add_int16_pot", "SUB": "sub_int16_pot"}[op_name]
    check_exact(path, {f"tfl.{op_name.lower()}": label}, runs=3)


@pytest.mark.parametrize("op_name", ["ADD", "SUB"])
def test_power_of_two_ties(tmp_path, op_name: str) -> None:
    """x / 2^3 with every remainder, both signs, next to both int16 ends:
    RoundingDivideByPOT rounds 4/8 and -4/8 away from zero."""
    path = pot_model(tmp_path, op_name, (1, 64), (1, 64), (-12, -15, -12))
    small = np.concatenate([np.arange(-20, 20), [-32768, -32767, -32764, -32763, 32767,
                                                 32764, 32763, 32760, -12, -4, 4, 12, 20,
                                                 -20, 28, -28, 36, -36, 44, -44, 52, -52,
                                                 60, -60]]).astype(np.int16).reshape(1, 64)
    same = np.tile(np.array([0, 1, -1, 32767, -32768, 100, -100, 7], np.int16), 8).reshape(1, 64)
    label = {"ADD": "add_int16_pot", "SUB": "sub_int16_pot"}[op_name]
    check_exact(path, {f"tfl.{op_name.lower()}": label}, inputs=[[same, small], [small, same]])


def test_general_path_when_pot_scale_int16_is_false(tmp_path) -> None:
    """The same power-of-two scales with pot_scale_int16 false: TFLite's general
    int16 path, the general pattern."""
    path = pot_model(tmp_path, "ADD", (2, 6, 5), (2, 6, 5), (-15, -12, -12),
                     pot_scale_int16=False)
    check_exact(path, {"tfl.add": "add_int"}, runs=2)


@pytest.mark.parametrize(("shapes", "log2_scales", "reason"), [
    (((2, 3), (3,)), (-12, -12, -12), "does not broadcast"),
    (((2, 3), (2, 3)), (-12, -13, -14), "needs one equal"),
])
def test_power_of_two_refusals(tmp_path, shapes, log2_scales, reason) -> None:
    """Broadcasting (the power-of-two kernel is elementwise only) and scales
    TFLite's Prepare rejects are not lowered by the power-of-two pattern."""
    path = pot_model(tmp_path, "ADD", *shapes, log2_scales)
    _module, conversion = convert(path)
    (outcome,) = conversion.outcomes
    assert outcome["pattern"] != "add_int16_pot"
    assert reason in outcome["reason"]


# ---------------------------------------------------------------------------
# Whole int16x8 architectures from the zoo


@pytest.mark.parametrize("relative", ["arch/mobilenet_tiny_int16x8.tflite",
                                      "arch/attention_block_int16x8.tflite"])
def test_int16x8_architecture(relative: str) -> None:
    """Every op integer (no fallback), outputs exact."""
    check_exact(model_path(relative), {"tfl.batch_matmul": "batch_matmul_int"}, runs=2)
