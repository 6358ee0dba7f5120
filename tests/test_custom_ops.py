"""Custom ops are found by custom code in the pattern registry; an unknown one
is a named error that lists the custom ops we lower."""

from __future__ import annotations

import pytest
from conftest import TfliteBuilder
from tflite_ref import write_model

from legalize.registry import known_custom_ops, op_key
from tfl2tosa.errors import ConversionError
from tfl2tosa.pipeline import convert
from tfl2tosa.tflite_import import load


def _custom_model(code: str) -> TfliteBuilder:
    b = TfliteBuilder()
    x = b.tensor([1, 4], "FLOAT32", "x")
    y = b.tensor([1, 4], "FLOAT32", "y")
    b.op("CUSTOM", [x], [y], custom_code=code, custom_options=b"")
    b.io([x], [y])
    return b


def test_known_custom_ops_come_from_the_index():
    assert "TFLite_Detection_PostProcess" in known_custom_ops()


def test_custom_op_key_by_code(tmp_path):
    known = load(write_model(_custom_model("TFLite_Detection_PostProcess"),
                             tmp_path / "a.tflite")).main.ops[0]
    unknown = load(write_model(_custom_model("MyOwnOp"), tmp_path / "b.tflite")).main.ops[0]
    assert op_key(known) == "tfl.custom:TFLite_Detection_PostProcess"
    assert op_key(unknown) == "tfl.custom"


def test_unknown_custom_op_is_a_named_error_listing_known_ones(tmp_path):
    path = write_model(_custom_model("MyOwnOp"), tmp_path / "m.tflite")
    with pytest.raises(ConversionError) as info:
        convert(path)
    message = str(info.value)
    assert "custom op MyOwnOp has no TOSA lowering" in message
    for code in known_custom_ops():
        assert code in message


def test_custom_op_lowerings_pass_tosa_opt_validation(tmp_path):
    """The TOSA of a detector (regular NMS) and of MediaPipe's face mesh with
    attention (all three landmark ops) parses and validates in Arm's tosa-opt."""
    import subprocess
    import sys
    from pathlib import Path

    from test_legalize_detection import OPTIONS, detector, ssd_anchors

    from tfl2tosa.pipeline import emit

    fixtures = Path(__file__).resolve().parent / "fixtures" / "mediapipe"
    sources = [write_model(detector(ssd_anchors(2), {**OPTIONS, "use_regular_nms": True}),
                           tmp_path / "detector.tflite"),
               fixtures / "face_landmark_with_attention.tflite"]
    opt = Path(sys.executable).parent / "tosa-opt"
    for source in sources:
        module, _ = convert(source)
        text = tmp_path / f"{source.stem}.mlir"
        text.write_bytes(emit(module, "mlir"))
        result = subprocess.run([str(opt), str(text), "--tosa-validate", "-o",
                                 str(tmp_path / "round.mlir")], capture_output=True,
                                timeout=300)
        assert result.returncode == 0, result.stderr.decode()[-2000:]
