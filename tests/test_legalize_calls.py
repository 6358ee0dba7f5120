"""STABLEHLO_COMPOSITE (tfl2tosa/passes/inline_calls.py): each composite is replaced by a copy
of its decomposition graph before legalization. TFLite's kernel runs the
decomposition subgraph, so TFLite running the composite is the judge
(`check_model`: ours against TFLite's reference kernels and Arm's reference
model on the written `.tosa`). The CALL tests live in test_legalize_misc.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import TfliteBuilder
from e2e import check_model
from flatbuffers import flexbuffers

from tfl2tosa.errors import ConversionError
from tfl2tosa.pipeline import convert


def write(b: TfliteBuilder, path: Path) -> Path:
    path.write_bytes(b.to_bytes())
    return path


def composite(b: TfliteBuilder, name: str, inputs: list[int], outputs: list[int],
              decomposition: int, attributes: bytes | None = None, graph: int = 0) -> None:
    """A STABLEHLO_COMPOSITE op. Its attributes default to a small map: TFLite
    (2.20) crashes allocating a model with two composites that have none,
    which LiteRT Torch never writes."""
    options = b.options("StableHLOCompositeOptions", name=name,
                        decompositionSubgraphIndex=decomposition, version=1)
    if attributes is None:
        attributes = flexbuffers.Dumps({"test": len(name)})
    options.compositeAttributes = list(attributes)
    b.op("STABLEHLO_COMPOSITE", inputs, outputs, graph=graph, options2=options)


def rms_norm_graph(b: TfliteBuilder, width: int, epsilon: float) -> int:
    """A decomposition graph (x, w) -> x * rsqrt(mean(x * x) + epsilon) * w,
    as LiteRT Torch writes `odml.rms_norm`'s."""
    g = b.subgraph("rms_norm_decomposition")
    x, w = (b.tensor([1, width], "FLOAT32", n, graph=g) for n in ("x", "w"))
    square, mean, shifted, inverse, normed, out = (
        b.tensor(shape, "FLOAT32", n, graph=g) for n, shape in
        (("square", [1, width]), ("mean", [1, 1]), ("shifted", [1, 1]), ("inverse", [1, 1]),
         ("normed", [1, width]), ("out", [1, width])))
    axis = b.tensor([1], "INT32", "axis", data=np.array([1], np.int32), graph=g)
    eps = b.tensor([], "FLOAT32", "epsilon", data=np.array(epsilon, np.float32), graph=g)
    b.op("MUL", [x, x], [square], graph=g, options=b.options("MulOptions"))
    b.op("MEAN", [square, axis], [mean], graph=g,
         options=b.options("ReducerOptions", keepDims=True))
    b.op("ADD", [mean, eps], [shifted], graph=g, options=b.options("AddOptions"))
    b.op("RSQRT", [shifted], [inverse], graph=g)
    b.op("MUL", [x, inverse], [normed], graph=g, options=b.options("MulOptions"))
    b.op("MUL", [normed, w], [out], graph=g, options=b.options("MulOptions"))
    b.io([x, w], [out], graph=g)
    return g


def test_float_composite_is_inlined_and_reported(tmp_path: Path) -> None:
    # Two composites share one decomposition; the second reads the first's result.
    b = TfliteBuilder()
    width = 8
    x = b.tensor([1, width], "FLOAT32", "x")
    w = b.tensor([1, width], "FLOAT32", "w",
                 data=np.random.default_rng(3).normal(size=(1, width)).astype(np.float32))
    first, out = b.tensor([1, width], "FLOAT32", "first"), b.tensor([1, width], "FLOAT32", "out")
    decomposition = rms_norm_graph(b, width, 1e-6)
    attributes = flexbuffers.Dumps({"epsilon": 1e-6})
    composite(b, "odml.rms_norm", [x, w], [first], decomposition, attributes)
    composite(b, "odml.rms_norm", [first, w], [out], decomposition, attributes)
    b.io([x], [out])
    conversion, report = check_model(write(b, tmp_path / "rms_norm.tflite"),
                                     allowed_paths=("float",))
    assert report.passed
    assert {o["op_name"] for o in conversion.outcomes} >= {"tfl.rsqrt", "tfl.mean"}
    assert [(c["name"], c["loc"], c["attributes"], c["decomposition"], c["lowering"])
            for c in conversion.composites] == [
        ("odml.rms_norm", f"main:op{i}:STABLEHLO_COMPOSITE", {"epsilon": 1e-6},
         "rms_norm_decomposition", "inlined") for i in (0, 1)]
    assert json.loads(conversion.to_json())["composites"][1]["attributes"] == {"epsilon": 1e-6}


def test_int8_composites_nested_and_in_sequence(tmp_path: Path) -> None:
    # main: composite "outer" (whose decomposition calls composite "inner"),
    # then "inner" again. Tensors crossing each boundary keep one quantization
    # on both sides, as LiteRT Torch and AI Edge Quantizer write them.
    b = TfliteBuilder()
    q_in, q_out = ([0.05], [-3]), ([0.3], [-20])

    def int8(name: str, q: tuple[list[float], list[int]], graph: int = 0) -> int:
        return b.tensor([1, 6], "INT8", name, graph=graph, scale=q[0], zero_point=q[1])

    x, y, out = int8("x", q_in), int8("y", q_out), int8("out", q_out)
    outer, inner = b.subgraph("outer"), b.subgraph("inner")
    composite(b, "odml.outer", [x], [y], outer)
    composite(b, "odml.inner", [y], [out], inner)
    a, mid, r = int8("a", q_in, outer), int8("mid", q_out, outer), int8("r", q_out, outer)
    offset = b.tensor([1, 6], "INT8", "offset", graph=outer, scale=[0.02], zero_point=[1],
                      data=np.arange(-30, 30, 10, dtype=np.int8).reshape(1, 6))
    b.op("ADD", [a, offset], [mid], graph=outer, options=b.options("AddOptions"))
    composite(b, "odml.inner", [mid], [r], inner, graph=outer)
    b.io([a], [r], graph=outer)
    m, s = int8("m", q_out, inner), int8("s", q_out, inner)
    b.op("MUL", [m, m], [s], graph=inner, options=b.options("MulOptions"))
    b.io([m], [s], graph=inner)
    b.io([x], [out])
    conversion, report = check_model(write(b, tmp_path / "int8_composites.tflite"),
                                     allowed_paths=("integer",), runs=4)
    assert all(o.exact for o in report.outputs)
    assert sorted(c["name"] for c in conversion.composites) == [
        "odml.inner", "odml.inner", "odml.outer"]
    assert {c["lowering"] for c in conversion.composites} == {"inlined"}
    assert {o["op_name"] for o in conversion.outcomes} == {"tfl.add", "tfl.mul"}


def test_composite_whose_decomposition_types_differ_is_refused(tmp_path: Path) -> None:
    b = TfliteBuilder()
    x = b.tensor([1, 4], "INT8", "x", scale=[0.1], zero_point=[0])
    out = b.tensor([1, 4], "INT8", "out", scale=[0.1], zero_point=[0])
    g = b.subgraph("decomposition")
    a = b.tensor([1, 4], "INT8", "a", graph=g, scale=[0.2], zero_point=[0])
    r = b.tensor([1, 4], "INT8", "r", graph=g, scale=[0.1], zero_point=[0])
    b.op("RELU", [a], [r], graph=g)
    b.io([a], [r], graph=g)
    composite(b, "odml.retyped", [x], [out], g)
    b.io([x], [out])
    with pytest.raises(ConversionError, match="STABLEHLO_COMPOSITE cannot be inlined: "
                       "STABLEHLO_COMPOSITE operand 0 is .* but 'decomposition' has") as error:
        convert(write(b, tmp_path / "retyped.tflite"))
    assert [f.op_name for f in error.value.failures] == ["tfl.stablehlo_composite"]


def test_unreadable_composite_attributes_are_reported_not_fatal(tmp_path: Path) -> None:
    b = TfliteBuilder()
    x, out = b.tensor([1, 4], "FLOAT32", "x"), b.tensor([1, 4], "FLOAT32", "out")
    g = b.subgraph("decomposition")
    a, r = b.tensor([1, 4], "FLOAT32", "a", graph=g), b.tensor([1, 4], "FLOAT32", "r", graph=g)
    b.op("RELU", [a], [r], graph=g)
    b.io([a], [r], graph=g)
    # A map whose root claims a vector type code the reader does not know.
    composite(b, "odml.broken", [x], [out], g, attributes=bytes([0x10, 0x24, 0x01]))
    b.io([x], [out])
    # Only the report is checked: TFLite parses the map when it loads the model.
    module, conversion = convert(write(b, tmp_path / "broken_attributes.tflite"))
    (entry,) = conversion.composites
    assert entry["lowering"] == "inlined"
    assert entry["attributes"] == "unreadable flexbuffer (KeyError)"
    assert [op.name for _, op in module.ops()] == ["tosa.clamp"]


TOOLCHAINS = Path(__file__).resolve().parents[1] / "models/toolchains"


@pytest.mark.parametrize("relative", [
    "litert_torch/generative_block_hlfb_float32.tflite",
    "ai_edge_quantizer/generative_block_hlfb_static_a8w8.tflite",
    "ai_edge_quantizer/generative_block_hlfb_static_a16w8.tflite",
])
def test_litert_torch_hlfb_composites(relative: str) -> None:
    # LiteRT Torch's generative layers with enable_hlfb=True: RMSNorm and
    # attention as composites (quantized inside their decompositions by AI
    # Edge Quantizer).
    path = TOOLCHAINS / relative
    conversion, report = check_model(path, runs=1)
    assert report.passed
    assert [(c["name"], c["lowering"]) for c in conversion.composites] == [
        ("odml.rms_norm", "inlined"), ("odml.scaled_dot_product_attention", "inlined"),
        ("odml.rms_norm", "inlined"), ("odml.rms_norm", "inlined")]
    assert all(c["decomposition"] and isinstance(c["attributes"], dict)
               for c in conversion.composites)
