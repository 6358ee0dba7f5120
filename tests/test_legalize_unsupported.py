"""Ops TOSA cannot express are refused by name, with the reason, and nothing is written.

Models: the zoo's UNIQUE (float32 and int8), plus
one-op models written with the TFLite builder for WHERE and the random ops.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from e2e import model_path

from legalize import coverage
from legalize.registry import FLOAT_COLUMNS, QUANTIZED_COLUMNS
from legalize.unsupported import REASONS
from tfl2tosa.pipeline import convert
from tfl2tosa.errors import ConversionError

ZOO = {
    "unique_f32": ("unit/float32/unique.tflite", "tfl.unique", "depends on the input values"),
    "unique_i8": ("unit/int8/unique.tflite", "tfl.unique", "depends on the input values"),
}


@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_model_is_refused_with_reason(name: str) -> None:
    relative, op_name, reason = ZOO[name]
    with pytest.raises(ConversionError) as error:
        convert(model_path(relative))
    message = str(error.value)
    assert f"{op_name} (" in message and reason in message
    assert [f.op_name for f in error.value.failures] == [op_name]


def _write_one_op(builder, path: Path, code: str, inputs: list[tuple[list[int], str, object]],
                  outputs: list[tuple[list[int], str]], options=None) -> Path:
    ins = [builder.tensor(shape, dtype, f"in{i}", data=data)
           for i, (shape, dtype, data) in enumerate(inputs)]
    outs = [builder.tensor(shape, dtype, f"out{i}") for i, (shape, dtype) in enumerate(outputs)]
    builder.op(code, ins, outs, options=options)
    builder.io([t for t, (_, _, data) in zip(ins, inputs) if data is None], outs)
    path.write_bytes(builder.to_bytes())
    return path


SHAPE_2x3 = ([2], "INT32", np.array([2, 3], np.int32))
BUILT = {
    "where": ("WHERE", [([3, 4], "BOOL", None)], [([12, 2], "INT64")], "tfl.where",
              "one row per true element"),
    "random_uniform": ("RANDOM_UNIFORM", [SHAPE_2x3], [([2, 3], "FLOAT32")],
                       "tfl.random_uniform", "random numbers"),
    "random_standard_normal": ("RANDOM_STANDARD_NORMAL", [SHAPE_2x3], [([2, 3], "FLOAT32")],
                               "tfl.random_standard_normal", "random numbers"),
    "multinomial": ("MULTINOMIAL", [([2, 5], "FLOAT32", None),
                                    ([], "INT32", np.array(4, np.int32))],
                    [([2, 4], "INT64")], "tfl.multinomial", "random numbers"),
}


@pytest.mark.parametrize("name", list(BUILT))
def test_built_model_is_refused_with_reason(name: str, builder, tmp_path: Path) -> None:
    code, inputs, outputs, op_name, reason = BUILT[name]
    path = _write_one_op(builder, tmp_path / f"{name}.tflite", code, inputs, outputs)
    with pytest.raises(ConversionError, match=reason) as error:
        convert(path)
    assert [f.op_name for f in error.value.failures] == [op_name]


def test_cli_prints_one_line_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out.tosa"
    result = subprocess.run(
        [sys.executable, "-c", "from tfl2tosa.cli import main; main()", "convert",
         str(model_path("unit/float32/unique.tflite")), "-o", str(target)],
        check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "tfl.unique" in lines[0] and "depends on the input values" in lines[0]
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_coverage_table_shows_them_unsupported() -> None:
    for op_name in REASONS:
        for column in FLOAT_COLUMNS + QUANTIZED_COLUMNS:
            assert coverage.cell(op_name, column) == "—", (op_name, column)
