"""The default per-model job and the record sections it builds from the library's
ConversionReport and ValidationReport (hand-built here, so every count is read off
the input)."""

from __future__ import annotations

from pathlib import Path

from legalize.driver import OpOutcome
from tfl2tosa.batch.job import JobOptions, convert_and_validate
from tfl2tosa.batch.records import (
    MAX_ERROR_CHARACTERS,
    compact_types,
    conversion_failure,
    conversion_summary,
    describe_unsupported,
    validation_summary,
)
from tfl2tosa.pipeline import ConversionReport
from tfl2tosa.validation import OutputComparison, ValidationReport

CORRUPT = Path(__file__).resolve().parent / "fixtures" / "batch" / "corrupt.tflite"


def outcome(name: str, path: str, loc: str = "main:op0") -> dict[str, str]:
    return {"op_name": name, "loc": loc, "types": "", "path": path, "pattern": "",
            "reason": ""}


def test_conversion_summary_counts_ops_by_path_without_constants():
    report = ConversionReport(
        model="m.tflite",
        ops_in={"tfl.conv_2d": 2, "tfl.pseudo_const": 5, "tfl.softmax": 1},
        ops_out={"tosa.conv2d": 2, "tosa.const": 9, "tosa.rescale": 4},
        outcomes=[outcome("tfl.pseudo_const", "float"), outcome("tfl.conv_2d", "integer"),
                  outcome("tfl.conv_2d", "integer", "main:op1"),
                  outcome("tfl.softmax", "fallback", "main:op2:SOFTMAX")])
    summary = conversion_summary(report, 0.5)
    assert {k: summary[k] for k in ("ok", "ops", "tosa_ops", "integer", "float", "fallback",
                                    "unsupported")} == {
        "ok": True, "ops": 3, "tosa_ops": 6, "integer": 2, "float": 0, "fallback": 1,
        "unsupported": 0}
    assert summary["op_counts"] == {"tfl.conv_2d": 2, "tfl.softmax": 1}
    assert summary["fallback_ops"] == ["tfl.softmax at main:op2:SOFTMAX"]


def test_validation_summary_takes_the_worst_output():
    report = ValidationReport(model="m", resolver="BUILTIN_REF", runs=3, outputs=[
        OutputComparison("a", "int8", [1, 4], False, True, 1.0, 0.5, max_lsb=1),
        OutputComparison("b", "float32", [2], False, False, 0.25, 2.0, max_ulp=7)])
    summary = validation_summary(report, 1.0)
    assert (summary["verdict"], summary["max_abs_error"], summary["max_rel_error"],
            summary["max_lsb"], summary["max_ulp"]) == ("fail", 1.0, 2.0, 1, 7)
    assert [o["name"] for o in summary["outputs"]] == ["a", "b"]


def test_an_unsupported_conversion_is_one_short_line_and_a_full_list():
    failures = [OpOutcome("tfl.conv_2d", "main:op0:CONV_2D",
                          "!quant.uniform<i8:f32:0, {0.1,0.2,0.3}> -> i8", "unsupported",
                          reason="no lowering for this op"),
                OpOutcome("tfl.softmax", "main:op9:SOFTMAX", "f32 -> f32", "unsupported",
                          reason="no lowering for this op")] * 50
    line = describe_unsupported(failures)
    assert line.startswith("100 op(s) could not be converted (tfl.conv_2d, tfl.softmax); "
                           "first: tfl.conv_2d at main:op0:CONV_2D: no lowering for this op")
    assert len(line) <= MAX_ERROR_CHARACTERS
    section = conversion_failure(line, 0.1, failures)
    assert section["unsupported"] == 100
    assert section["unsupported_ops"][0] == ("tfl.conv_2d (!quant.uniform<i8:f32:0, {...}> -> "
                                             "i8) at main:op0:CONV_2D: no lowering for this op")


def test_compact_types_keeps_per_tensor_types():
    assert compact_types("!quant.uniform<i8:f32, 0.5:-3>") == "!quant.uniform<i8:f32, 0.5:-3>"


def test_the_default_job_reports_a_corrupt_model_and_writes_nothing(tmp_path):
    output = tmp_path / "corrupt.tosa"
    result = convert_and_validate(str(CORRUPT), JobOptions(output=str(output)))
    assert result["status"] == "error"
    assert result["error"].startswith("ModelError: corrupt model")
    assert result["conversion"]["ok"] is False
    assert not output.exists() and list(tmp_path.iterdir()) == []


def test_the_default_job_reports_an_unconvertible_op_and_writes_nothing(tmp_path, builder):
    # Builtin code 215 is no TFLite operator: it imports as tfl.unknown, which no
    # pattern can ever lower.
    x = builder.tensor([1, 4], "FLOAT32", "x")
    y = builder.tensor([1, 4], "FLOAT32", "y")
    builder.op(215, [x], [y])
    builder.io([x], [y])
    model = tmp_path / "unknown.tflite"
    model.write_bytes(builder.to_bytes())
    output = tmp_path / "unknown.tosa"
    result = convert_and_validate(str(model), JobOptions(output=str(output)))
    assert result["status"] == "unsupported"
    assert result["error"].startswith("1 op(s) could not be converted (tfl.unknown); first: "
                                      "tfl.unknown at main:op0:BUILTIN_215")
    assert result["conversion"]["unsupported"] == 1
    assert not output.exists()


def test_input_ranges_reach_validation_for_ops_with_a_domain():
    # The zoo's int8 DIV divides by zero on inputs drawn from the whole int8 range,
    # which TFLite itself refuses; inputs drawn from [1, 100] keep every divisor
    # nonzero, and the model then validates bit exact.
    model = str(Path(__file__).resolve().parent.parent / "models" / "unit" / "int8" / "div.tflite")
    unranged = convert_and_validate(model, JobOptions(runs=1))
    assert unranged["status"] == "error"
    assert "InputDomainError" in unranged["error"]
    ranged = convert_and_validate(model, JobOptions(runs=1, input_ranges=("1:100",)))
    assert ranged["status"] == "pass", ranged["error"]
    assert ranged["validation"]["verdict"] == "pass"


def test_input_ranges_are_part_of_the_options_a_resumed_record_must_match():
    assert JobOptions().fingerprint()["input_ranges"] == []
    assert JobOptions(input_ranges=("x=0:1",)).fingerprint()["input_ranges"] == ["x=0:1"]


# A worker's warm-up, then conversions of models of every family in a fork-free
# loop: prints the converter's modules the conversions imported on top.
WARM_UP_PROBE = """
import json, sys
from tfl2tosa.batch.job import JobOptions, convert_and_validate, warm_up_modules
from tfl2tosa.batch.worker import import_for_jobs
import_for_jobs(warm_up_modules(convert_and_validate, validate=False))
before = set(sys.modules)
for path in sys.argv[1:]:
    result = convert_and_validate(path, JobOptions(validate=False))
    assert result["status"] == "pass", result
ours = ("tfl2tosa", "legalize", "tflite")
print(json.dumps(sorted(n for n in set(sys.modules) - before if n.split(".")[0] in ours)))
"""


def test_a_worker_warm_up_imports_what_conversions_import_on_demand():
    """Each model runs in a fork of the warm worker: a module first imported
    there is imported again for every model."""
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    models = sorted((root / "models/arch").glob("*.tflite"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get(
        "PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", WARM_UP_PROBE, *map(str, models)], cwd=root,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
