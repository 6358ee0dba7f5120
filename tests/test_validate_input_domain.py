"""Models whose ops have a domain (a divisor, RSQRT): TFLite refuses some random
inputs; validate says so in one line and draws inputs from a given real range."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tfl2tosa.errors import UsageError
from tfl2tosa.validation import parse_input_range, ranged_input

MODELS = Path(__file__).resolve().parent.parent / "models" / "unit"
INT8_DIV = MODELS / "int8" / "div.tflite"   # input 0 is the divisor


def tfl2tosa(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfl2tosa", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_inputs_tflite_refuses_are_one_line_not_a_traceback():
    # Random int8 divisors include the zero point, i.e. a real 0: TFLite's DIV
    # kernel refuses to run.
    result = tfl2tosa("validate", INT8_DIV, "--runs", "1")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert lines[0].startswith("error: TFLite cannot run the model on input set 1")
    assert "(DIV)" in lines[0] and "--input-range" in lines[0]
    # TFLite's kernel message and its "Node number" line stay apart.
    assert "; Node number 0 (DIV)" in lines[0]


@pytest.mark.parametrize("model, ranges", [
    (INT8_DIV, ["0=0.5:2"]),
    (MODELS / "int8" / "floor_div.tflite", ["serving_default_input_1:0=0.5:2", "1=-1:1"]),
    (MODELS / "int16x8" / "rsqrt.tflite", ["0.1:4"]),
], ids=["int8_div_by_index", "int8_floor_div_by_name", "int16_rsqrt_all_inputs"])
def test_inputs_drawn_in_the_domain_validate_against_tflite(model: Path, ranges: list[str]):
    args = [a for r in ranges for a in ("--input-range", r)]
    result = tfl2tosa("validate", model, "--runs", "2", *args)
    assert result.returncode == 0, result.stdout + result.stderr


def test_unknown_input_name_is_a_usage_error():
    result = tfl2tosa("validate", INT8_DIV, "--input-range", "no_such_input=0:1")
    assert result.returncode == 2
    assert "no_such_input" in result.stderr and "serving_default_input_1:0" in result.stderr


@pytest.mark.parametrize("text", ["1", "a:b", "2:1", "x=1:1"])
def test_malformed_range_is_a_usage_error(text: str):
    with pytest.raises(UsageError):
        parse_input_range(text)


def test_range_keys():
    assert parse_input_range("-1:1") == (None, (-1.0, 1.0))
    assert parse_input_range("2=0.5:2") == (2, (0.5, 2.0))
    assert parse_input_range("in:0=0:1e-3") == ("in:0", (0.0, 0.001))


def test_ranged_integer_input_is_quantized_with_the_input_scale():
    # Real values in [1.0, 1.0 + 1e-9) with scale 0.5, zero point 3: round(2) + 3 = 5.
    detail = {"shape": [4], "dtype": np.int8, "quantization": (0.5, 3)}
    values = ranged_input(np.random.default_rng(0), detail, (1.0, 1.0 + 1e-9))
    assert values.dtype == np.int8 and values.tolist() == [5, 5, 5, 5]
    # Saturates at the type's bounds: 1000 / 0.5 + 3 is far above 127.
    high = ranged_input(np.random.default_rng(0), detail, (1000.0, 1001.0))
    assert high.tolist() == [127] * 4


def test_nan_that_tflite_quantizes_is_one_line_not_a_mismatch():
    # A random int8 divisor at its zero point is a real 0: TFLite's float FLOOR_MOD
    # gives NaN there, and its QUANTIZE casts NaN to an integer (127 with this zero
    # point), no number to compare; a divisor range away from 0 validates exactly.
    model = MODELS / "int8" / "floor_mod.tflite"  # input serving_default_input_1:0 divides
    result = tfl2tosa("validate", model, "--runs", "3")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert lines[0].startswith("error: TFLite's main:op2:FLOOR_MOD gives NaN on input set")
    assert "--input-range" in lines[0]
    result = tfl2tosa("validate", model, "--runs", "3",
                      "--input-range", "serving_default_input_1:0=0.5:2")
    assert result.returncode == 0, result.stdout + result.stderr
