"""Every quantized unit model of the zoo is converted correctly or refused by name.

With the dequantize -> float -> quantize fallback on, each int8 and int16x8
unit model from models/manifest.json must
- convert to a graph with no `tfl` or `quant` op and no quantized type left, and
- match TFLite's interpreter within the tolerance `validate` applies (exact
  when no op took the fallback, 1 LSB when one did), on one seeded input drawn
  from the range the model was calibrated on (the manifest's `range`; outside
  it, ops like RSQRT or DIV make TFLite itself refuse to run),
or, when the model has an op TOSA cannot express (legalize/unsupported.py),
be refused with one ConversionError line naming that op and its reason.

A fallback op can only be as close to TFLite's integer kernel as that kernel
is to the real-valued op. Where a model misses the tolerance, the test asks
TFLite's own float kernel (the float32 twin of the model, run on the
dequantized input): if our output is within 1 LSB of the twin's quantized
output while TFLite's integer kernel is further than 1 LSB from it, the
difference is the integer kernel's approximation, not the fallback's error,
and the case is an expected failure naming the measured distances (an
integer pattern reproducing the kernel is what makes it exact). Any other
miss fails.

Cases come from the manifest, so a model added to the zoo is tested without
touching this file; the helpers here are shared by test_fallback_cases.py and
test_no_fallback.py.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

import numpy as np
import pytest
from e2e import MODELS

import reference_model
from legalize.unsupported import REASONS, may_be_refused
from tfl2tosa.pipeline import ConversionReport, convert
from tfl2tosa.errors import ConversionError
from tfl2tosa.ir.core import Module
from tfl2tosa.passes.strip_quant_types import assert_no_quant_types
from tfl2tosa.validation import ValidationReport, validate

MANIFEST = json.loads((MODELS / "manifest.json").read_text())
QUANTIZED_FLAVOURS = ("int8", "int16x8")


# ---------------------------------------------------------------------------
# Helpers (also used by test_fallback_cases.py and test_no_fallback.py)


def quantized_unit_models() -> list[dict]:
    """Manifest entries of every int8 and int16x8 unit model, by path."""
    return sorted((m for m in MANIFEST["models"]
                   if m["kind"] == "unit" and m["flavour"] in QUANTIZED_FLAVOURS),
                  key=lambda m: m["path"])


def manifest_entry(relative: str) -> dict:
    return next(m for m in MANIFEST["models"] if m["path"] == relative)


def refused_ops(entry: dict) -> set[str]:
    return may_be_refused({f"tfl.{op.lower()}" for op in entry["builtin_ops"]})


def range_inputs(entry: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """One input per model input, uniform over its calibration range, stored as
    the tensor stores it (quantized with round half away, saturated). Integer
    ranges (indices) are half-open, as models/generate.py draws them."""
    inputs = []
    for spec in entry["inputs"]:
        low, high = spec["range"]
        dtype = np.dtype(spec["dtype"])
        shape = spec["shape"]
        if "scale" in spec:
            real = rng.uniform(low, high, size=shape) / spec["scale"]
            stored = np.sign(real) * np.floor(np.abs(real) + 0.5) + spec["zero_point"]
            info = np.iinfo(dtype)
            inputs.append(np.clip(stored, info.min, info.max).astype(dtype))
        elif dtype == np.bool_:
            inputs.append(rng.integers(0, 2, size=shape).astype(np.bool_))
        elif np.issubdtype(dtype, np.integer):
            inputs.append(rng.integers(int(low), int(high), size=shape).astype(dtype))
        else:
            inputs.append(rng.uniform(low, high, size=shape).astype(dtype))
    return inputs


def leftover_ops(module: Module) -> list[str]:
    """Names of `tfl` and `quant` ops still in the module (none after convert)."""
    return sorted({op.name for _, op in module.ops() if op.dialect in ("tfl", "quant")})


def assert_fully_lowered(module: Module) -> None:
    assert leftover_ops(module) == []
    assert_no_quant_types(module)


def fallback_ops(conversion: ConversionReport) -> list[str]:
    return [o["op_name"] for o in conversion.outcomes if o["path"] == "fallback"]


def tflite_outputs(model: str | os.PathLike | bytes, inputs: list[np.ndarray],
                   resolver: str = "BUILTIN_REF") -> list[np.ndarray]:
    """TFLite's outputs for one input, on the named op resolver."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
    source: dict[str, Any] = ({"model_content": model} if isinstance(model, bytes)
                              else {"model_path": os.fspath(model)})
    interpreter = tf.lite.Interpreter(
        **source, experimental_op_resolver_type=getattr(tf.lite.experimental.OpResolverType,
                                                        resolver))
    interpreter.allocate_tensors()
    for detail, array in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(detail["index"], array)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def quantize_like_tflite(real: np.ndarray, spec: dict) -> np.ndarray:
    """TFLite's QUANTIZE: round half away from zero of real / scale, + zp, saturated."""
    scaled = real.astype(np.float64) / spec["scale"]
    stored = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5) + spec["zero_point"]
    info = np.iinfo(np.dtype(spec["dtype"]))
    return np.clip(stored, info.min, info.max).astype(np.int64)


def float_twin(entry: dict) -> dict | None:
    """The float32 unit model of the same name: TFLite's float kernel of the same ops."""
    return next((m for m in MANIFEST["models"] if m["kind"] == "unit"
                 and m["flavour"] == "float32" and m["name"] == entry["name"]), None)


def float_kernel_outputs(entry: dict, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """TFLite's float twin on the dequantized inputs, quantized like the quantized
    model's outputs (non-quantized outputs as they come)."""
    twin = float_twin(entry)
    assert twin is not None, f"{entry['path']}: no float32 model of the same name"
    by_signature = {s["signature_name"]: (s, array) for s, array in zip(entry["inputs"], inputs)}
    float_inputs = []
    for spec in twin["inputs"]:
        quantized_spec, array = by_signature[spec["signature_name"]]
        if "scale" in quantized_spec:
            array = (array.astype(np.float64) - quantized_spec["zero_point"]) \
                * quantized_spec["scale"]
        float_inputs.append(np.asarray(array).astype(spec["dtype"]))
    outputs = tflite_outputs(MODELS / twin["path"], float_inputs)
    return [quantize_like_tflite(out, spec) if "scale" in spec else out.astype(np.int64)
            for out, spec in zip(outputs, entry["outputs"])]


def max_distance(a: list[np.ndarray], b: list[np.ndarray]) -> int:
    return max(int(np.abs(x.astype(np.int64) - y.astype(np.int64)).max(initial=0))
               for x, y in zip(a, b))


def describe(report: ValidationReport) -> str:
    lines = [f"{report.model} ({report.resolver}): fallback {report.fallback_ops}"]
    lines += [f"  {o.name}: max_lsb={o.max_lsb} max_abs={o.max_abs_error:g} "
              f"mismatched={o.mismatched_elements} tolerance={o.tolerance}"
              for o in report.outputs]
    if report.first_divergence:
        lines.append(f"  first diverging tensor: {report.first_divergence}")
    return "\n".join(lines)


def kernel_approximation(entry: dict, module: Module, conversion: ConversionReport,
                         report: ValidationReport, inputs: list[np.ndarray]) -> str:
    """Why a fallback model misses the tolerance, if TFLite's integer kernel is
    the approximation; otherwise an AssertionError saying what is wrong."""
    took_fallback = fallback_ops(conversion)
    assert took_fallback, "no op took the fallback, so the integer lowering must be exact:\n" \
        + describe(report)
    ours = [a.astype(np.int64) for a in reference_model.run(module, inputs).values()]
    integer_kernel = tflite_outputs(MODELS / entry["path"], inputs, report.resolver)
    float_kernel = float_kernel_outputs(entry, inputs)
    ours_to_float = max_distance(ours, float_kernel)
    integer_to_float = max_distance(integer_kernel, float_kernel)
    assert ours_to_float <= 1, (
        f"the fallback ({took_fallback}) is {ours_to_float} LSB from TFLite's float kernel "
        f"quantized, so it is not the quantized float op:\n" + describe(report))
    assert integer_to_float > 1, (
        f"TFLite's integer kernel is within {integer_to_float} LSB of its float kernel, "
        f"the fallback within {ours_to_float}, yet they differ by more:\n" + describe(report))
    return (f"TFLite's integer kernel for {sorted(set(took_fallback))} is {integer_to_float} "
            f"LSB from its own float kernel; the fallback is within {ours_to_float} LSB of "
            f"the float kernel (bit exactness needs an integer pattern)")


def check_or_explain(entry: dict, module: Module, conversion: ConversionReport,
                     report: ValidationReport, inputs: list[np.ndarray],
                     context: str = "") -> None:
    """Pass when validation passed; an expected failure when TFLite's integer
    kernel explains the miss (its reason prefixed by `context`); fail otherwise."""
    if report.passed:
        return
    pytest.xfail(context + kernel_approximation(entry, module, conversion, report, inputs))


# ---------------------------------------------------------------------------
# The test


@pytest.mark.parametrize("entry", quantized_unit_models(), ids=lambda m: m["path"])
def test_quantized_model_is_never_silently_wrong(entry: dict) -> None:
    path = MODELS / entry["path"]
    refused = refused_ops(entry)
    if refused:
        with pytest.raises(ConversionError) as error:
            convert(path)
        message = str(error.value)
        assert "\n" not in message
        for op in refused:
            assert op in message and REASONS.get(op, "") in message
        return
    module, conversion = convert(path)
    assert_fully_lowered(module)
    inputs = range_inputs(entry, np.random.default_rng(0))
    report = validate(path, module=module, conversion=conversion, inputs=[inputs])
    check_or_explain(entry, module, conversion, report, inputs)


def test_every_quantized_flavour_is_covered() -> None:
    """The parametrization sees both flavours and every op of those models."""
    entries = quantized_unit_models()
    assert {e["flavour"] for e in entries} == set(QUANTIZED_FLAVOURS)
    assert len(entries) > 200
    assert all((MODELS / e["path"]).is_file() for e in entries)


def test_range_inputs_stay_in_the_calibration_range() -> None:
    entry = manifest_entry("unit/int8/div.tflite")
    for array, spec in zip(range_inputs(entry, np.random.default_rng(3)), entry["inputs"]):
        real = (array.astype(np.float64) - spec["zero_point"]) * spec["scale"]
        low, high = spec["range"]
        assert real.min() >= low - spec["scale"] and real.max() <= high + spec["scale"]


def test_float_kernel_oracle_is_the_quantized_float_op() -> None:
    """The oracle used to explain misses reproduces TFLite's float ABS exactly."""
    entry = manifest_entry("unit/int8/abs.tflite")
    inputs = range_inputs(entry, np.random.default_rng(1))
    spec_in, spec_out = entry["inputs"][0], entry["outputs"][0]
    real = np.abs((inputs[0].astype(np.float64) - spec_in["zero_point"]) * spec_in["scale"])
    expected = quantize_like_tflite(real.astype(np.float32), spec_out)
    assert np.array_equal(float_kernel_outputs(entry, inputs)[0], expected)


def test_quantized_sum_is_judged_by_the_optimized_kernel() -> None:
    """TFLite's reference SUM reads int8 data through its uint8 overload (reduce.cc)
    and answers a constant here; the optimized kernel is the quantized float sum
    within 1 LSB. So validate runs quantized SUM models on the optimized kernels."""
    entry = manifest_entry("unit/int8/sum.tflite")
    path = MODELS / entry["path"]
    inputs = range_inputs(entry, np.random.default_rng(0))
    float_sum = float_kernel_outputs(entry, inputs)[0]
    reference = tflite_outputs(path, inputs, "BUILTIN_REF")[0].astype(np.int64)
    optimized = tflite_outputs(path, inputs, "BUILTIN_WITHOUT_DEFAULT_DELEGATES")[0]
    assert np.abs(optimized.astype(np.int64) - float_sum).max() <= 1
    assert np.abs(reference - float_sum).max() > 10
    module, conversion = convert(path)
    report = validate(path, module=module, conversion=conversion, inputs=[inputs])
    assert report.resolver == "BUILTIN_WITHOUT_DEFAULT_DELEGATES" and report.passed
