"""The committed model zoo (models/) agrees with its manifest, and every model runs.

The manifest is written by models/generate.py; these tests re-derive every fact it
records from the files themselves (sha256, size, builtin opcodes read with the
`tflite` flatbuffer package, signature), and load each model in TensorFlow Lite's
own interpreter, so a stale manifest or a hand-edited fixture cannot pass.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import tflite

from tfl2tosa.tflite_import.source import operator_code

MODELS_DIR = Path(__file__).resolve().parents[1] / "models"
MANIFEST = json.loads((MODELS_DIR / "manifest.json").read_text())
ENTRIES = MANIFEST["models"]
FAILURES = MANIFEST["conversion_failures"]
QUANTIZED_IO = {"int8": "int8", "int16x8": "int16"}

OPERATOR_NAMES = {code: name for name, code in vars(tflite.BuiltinOperator).items()
                  if not name.startswith("_")}
TENSOR_TYPES = {code: name.lower() for name, code in vars(tflite.TensorType).items()
                if not name.startswith("_")}


def used_builtin_ops(data: bytes) -> set[str]:
    """Names of the operators that appear in any subgraph of a .tflite file."""
    model = tflite.Model.GetRootAsModel(data, 0)
    names = set()
    for s in range(model.SubgraphsLength()):
        graph = model.Subgraphs(s)
        for i in range(graph.OperatorsLength()):
            code = model.OperatorCodes(graph.Operators(i).OpcodeIndex())
            names.add(OPERATOR_NAMES[operator_code(code)])
    return names


def main_signature(data: bytes) -> tuple[list[tuple], list[tuple]]:
    model = tflite.Model.GetRootAsModel(data, 0)
    graph = model.Subgraphs(0)

    def describe(index: int) -> tuple:
        tensor = graph.Tensors(index)
        return (list(tensor.ShapeAsNumpy()) if tensor.ShapeLength() else [],
                TENSOR_TYPES[tensor.Type()])

    return ([describe(graph.Inputs(i)) for i in range(graph.InputsLength())],
            [describe(graph.Outputs(i)) for i in range(graph.OutputsLength())])


def read(entry: dict) -> bytes:
    return (MODELS_DIR / entry["path"]).read_bytes()


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["path"] for e in ENTRIES])
def test_file_matches_manifest_entry(entry: dict) -> None:
    data = read(entry)
    assert len(data) == entry["size"]
    assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    assert used_builtin_ops(data) == set(entry["builtin_ops"])
    inputs, outputs = main_signature(data)
    assert inputs == [(i["shape"], i["dtype"]) for i in entry["inputs"]]
    assert outputs == [(o["shape"], o["dtype"]) for o in entry["outputs"]]


def test_every_tflite_file_is_listed() -> None:
    on_disk = {p.relative_to(MODELS_DIR).as_posix() for p in MODELS_DIR.rglob("*.tflite")}
    # models/toolchains/ has its own manifest and test (tests/test_toolchain_zoo.py).
    on_disk = {path for path in on_disk if not path.startswith("toolchains/")}
    assert on_disk == {e["path"] for e in ENTRIES}


def test_at_least_80_distinct_builtin_ops_in_the_files() -> None:
    ops = set().union(*(used_builtin_ops(read(e)) for e in ENTRIES))
    assert len(ops) >= 80, sorted(ops)


def test_each_model_has_every_flavour_or_a_recorded_refusal() -> None:
    made: dict[tuple[str, str], set[str]] = defaultdict(set)
    for entry in ENTRIES:
        made[(entry["kind"], entry["name"])].add(entry["flavour"])
    refused: dict[tuple[str, str], set[str]] = defaultdict(set)
    for failure in FAILURES:
        assert failure["reason"].strip(), failure
        refused[(failure["kind"], failure["name"])].add(failure["flavour"])
    flavours = {"unit": set(MANIFEST["unit_flavours"]), "arch": set(MANIFEST["arch_flavours"])}
    for (kind, name), present in made.items():
        if kind == "demo":
            continue
        assert "float32" in present, name
        assert not present & refused[(kind, name)], name
        assert present | refused[(kind, name)] == flavours[kind], name


def test_unit_paths_follow_the_layout() -> None:
    for entry in ENTRIES:
        expected = {"unit": f"unit/{entry['flavour']}/{entry['name']}.tflite",
                    "arch": f"arch/{entry['name']}_{entry['flavour']}.tflite",
                    "demo": "demo/mobilenet_tiny_int8.tflite"}[entry["kind"]]
        assert entry["path"] == expected


def test_quantized_flavours_have_integer_float_io() -> None:
    # Every input or output that is floating point in float32 must be int8 / int16 in the
    # full-integer flavours (inference_input_type / inference_output_type).
    float32_io = {e["name"]: main_signature(read(e)) for e in ENTRIES
                  if e["kind"] == "unit" and e["flavour"] == "float32"}
    for entry in ENTRIES:
        if entry["kind"] != "unit" or entry["flavour"] not in QUANTIZED_IO:
            continue
        want = QUANTIZED_IO[entry["flavour"]]
        float_inputs, float_outputs = float32_io[entry["name"]]
        inputs, outputs = main_signature(read(entry))
        for (shape, dtype), (float_shape, float_dtype) in zip(inputs + outputs,
                                                              float_inputs + float_outputs):
            assert shape == float_shape, entry["path"]
            assert dtype == (want if float_dtype == "float32" else float_dtype), entry["path"]


def test_demo_model_is_the_int8_mobilenet() -> None:
    demo = next(e for e in ENTRIES if e["kind"] == "demo")
    assert demo["path"] == "demo/mobilenet_tiny_int8.tflite"
    arch = next(e for e in ENTRIES if e["path"] == "arch/mobilenet_tiny_int8.tflite")
    assert read(demo) == read(arch)
    inputs, outputs = main_signature(read(demo))
    assert inputs == [([1, 32, 32, 3], "int8")] and outputs == [([1, 10], "int8")]
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "ADD"} <= set(demo["builtin_ops"])


def test_zoo_stays_small() -> None:
    assert sum(e["size"] for e in ENTRIES) < 8_000_000
    assert max(e["size"] for e in ENTRIES if e["kind"] == "unit") < 16_000


def input_nearest_zero(recorded: dict) -> np.ndarray:
    """A zero input, or the in-range value nearest zero where 0 is outside the input's
    domain (a divisor drawn from [0.5, 2]), stored as the tensor stores it."""
    low, high = recorded["range"]
    real = min(max(0.0, low), high)
    dtype = np.dtype(recorded["dtype"])
    if "scale" in recorded:
        info = np.iinfo(dtype)
        stored = round(real / recorded["scale"]) + recorded["zero_point"]
        return np.full(recorded["shape"], min(max(stored, info.min), info.max), dtype)
    return np.full(recorded["shape"], real, dtype)


def shape_matches(actual: tuple[int, ...], recorded: dict) -> bool:
    expected = recorded.get("shape_signature", recorded["shape"])
    return len(actual) == len(expected) and all(
        want in (-1, got) for got, want in zip(actual, expected))


def test_every_model_runs_in_the_tflite_interpreter_on_zero_input() -> None:
    import tensorflow as tf  # imported here: the other tests do not need it

    resolver = tf.lite.experimental.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    failed = []
    for entry in ENTRIES:
        try:
            interpreter = tf.lite.Interpreter(model_content=read(entry),
                                              experimental_op_resolver_type=resolver)
            interpreter.allocate_tensors()
            for detail, recorded in zip(interpreter.get_input_details(), entry["inputs"]):
                interpreter.set_tensor(detail["index"], input_nearest_zero(recorded))
            interpreter.invoke()
            for detail, recorded in zip(interpreter.get_output_details(), entry["outputs"]):
                shape = interpreter.get_tensor(detail["index"]).shape
                assert shape_matches(shape, recorded), (shape, recorded)
        except (RuntimeError, ValueError, AssertionError) as error:  # collect all failures
            failed.append(f"{entry['path']}: {error}")
    assert not failed, "\n".join(failed)
