"""Integer RESIZE_BILINEAR (int8, int16) against TFLite's builtin reference
kernel (ResizeBilinearInteger), bit exact, and against Arm's reference model.

Cases: the zoo's models (all three coordinate modes, up and down) and models
written field by field: odd ratios (3 -> 7, 7 -> 3) in every mode, a single
input or output pixel, large up-scaling, nearly 16x down-scaling, non-zero zero
points, batches, and inputs full of exact halves on both sides of zero (where
TFLite rounds away from zero and a plain RESCALE would round up).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TfliteBuilder
from e2e import check_model, model_path

from legalize import resize
from tfl2tosa.pipeline import convert
from tfl2tosa.validation import validate


def check_resize(path, **kwargs) -> None:
    """Exact against TFLite and Arm, the resize through its integer pattern."""
    conversion, report = check_model(path, allowed_paths=("integer",), **kwargs)
    assert [o["pattern"] for o in conversion.outcomes] == ["resize_bilinear_int"]
    assert all(o.exact for o in report.outputs)


ZOO = [f"unit/{kind}/resize_bilinear_{mode}.tflite" for kind in ("int8", "int16x8")
       for mode in ("align_corners", "align_corners_down", "asymmetric", "asymmetric_down",
                    "half_pixel_centers", "half_pixel_centers_down")]


@pytest.mark.parametrize("relative", ZOO)
def test_zoo_model(relative: str) -> None:
    check_resize(model_path(relative), runs=3)


_MODES = {"asymmetric": (False, False), "align_corners": (True, False),
          "half_pixel": (False, True)}


def resize_model(tmp_path, in_shape, out_hw, mode, *, type_name="INT8", scale=0.05,
                 zero_point=0, out_params=None, name="resize.tflite"):
    align, half_pixel = _MODES[mode]
    b = TfliteBuilder()
    n, _, _, c = in_shape
    out_scale, out_zp = out_params or (scale, zero_point)
    x = b.tensor(list(in_shape), type_name, "x", scale=[scale], zero_point=[zero_point])
    size = b.tensor([2], "INT32", "size", data=np.array(out_hw, dtype=np.int32))
    y = b.tensor([n, *out_hw, c], type_name, "y", scale=[out_scale], zero_point=[out_zp])
    b.op("RESIZE_BILINEAR", [x, size], [y], options=b.options(
        "ResizeBilinearOptions", alignCorners=align, halfPixelCenters=half_pixel))
    b.io([x], [y])
    path = tmp_path / name
    path.write_bytes(b.to_bytes())
    return path


RESIZE_CASES = [
    *(pytest.param((1, 3, 3, 2), (7, 7), mode, id=f"up_3_to_7_{mode}") for mode in _MODES),
    *(pytest.param((1, 7, 7, 2), (3, 3), mode, id=f"down_7_to_3_{mode}") for mode in _MODES),
    pytest.param((2, 3, 7, 3), (7, 3), "half_pixel", id="mixed_axes_batch2"),
    pytest.param((1, 1, 4, 2), (5, 9), "half_pixel", id="single_input_row"),
    pytest.param((1, 5, 6, 1), (1, 1), "asymmetric", id="single_output_pixel"),
    pytest.param((1, 5, 6, 1), (1, 4), "align_corners", id="single_output_row_align"),
    pytest.param((1, 2, 3, 2), (33, 40), "asymmetric", id="up_16x_odd"),
    pytest.param((1, 2, 3, 2), (33, 40), "align_corners", id="up_16x_odd_align"),
    pytest.param((1, 47, 31, 1), (3, 2), "half_pixel", id="down_near_16x"),
    pytest.param((1, 14, 14, 2), (23, 23), "asymmetric", id="14_to_23"),
]


@pytest.mark.parametrize(("in_shape", "out_hw", "mode"), RESIZE_CASES)
@pytest.mark.parametrize("type_name", ["INT8", "INT16"])
def test_resize_bilinear(tmp_path, in_shape, out_hw, mode, type_name) -> None:
    scale, zero_point = (0.05, -7) if type_name == "INT8" else (2.0 ** -12, 0)
    check_resize(resize_model(tmp_path, in_shape, out_hw, mode, type_name=type_name,
                              scale=scale, zero_point=zero_point), runs=2)


def _tie_heavy_input(dtype, shape, seed: int) -> np.ndarray:
    """Values whose neighbours differ by odd amounts around zero and at the
    type's ends, so that weights 1/2, 1/4, 3/4 make exact halves of both signs."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    choices = np.array([info.min, info.min + 1, -3, -2, -1, 0, 1, 2, 3, info.max - 1,
                        info.max], dtype=np.int64)
    return rng.choice(choices, size=shape).astype(dtype)


@pytest.mark.parametrize(("type_name", "dtype"), [("INT8", np.int8), ("INT16", np.int16)])
@pytest.mark.parametrize("mode", list(_MODES))
def test_ties_round_away_from_zero(tmp_path, type_name, dtype, mode) -> None:
    """2x and 4x up-scaling put samples at 1/4, 1/2 and 3/4 of a pixel."""
    path = resize_model(tmp_path, (1, 4, 4, 3), (8, 16), mode, type_name=type_name,
                        scale=0.1 if type_name == "INT8" else 1e-4, zero_point=0)
    feeds = [[_tie_heavy_input(dtype, (1, 4, 4, 3), seed)] for seed in range(3)]
    check_resize(path, inputs=feeds)


def test_plain_rescale_rounds_ties_up(tmp_path, monkeypatch) -> None:
    """Without the +1 in the multiplier the int8 RESCALE rounds halves up:
    1 LSB off TFLite on negative ties."""
    path = resize_model(tmp_path, (1, 4, 4, 3), (8, 8), "half_pixel")
    feeds = [[_tie_heavy_input(np.int8, (1, 4, 4, 3), 0)]]
    monkeypatch.setattr(resize, "HALF_AWAY_MULTIPLIER", 1 << 30)
    report = validate(path, inputs=feeds)
    assert not report.passed
    assert max(o.max_lsb for o in report.outputs) == 1


@pytest.mark.parametrize(("in_hw", "out_hw"), [((40, 4), (2, 4)), ((4, 4), (4, 4))])
def test_limits_and_parameters(tmp_path, in_hw, out_hw) -> None:
    """20x down-scaling is beyond RESIZE's limits; different input and output
    parameters are refused (TFLite's kernel ignores them): both take the fallback."""
    params = None if in_hw[0] == 40 else (0.1, 3)
    path = resize_model(tmp_path, (1, *in_hw, 1), out_hw, "asymmetric", out_params=params)
    _, conversion = convert(path)
    (outcome,) = conversion.outcomes
    assert outcome["path"] == "fallback"
    assert ("limits" if params is None else "quantized differently") in outcome["reason"]
