"""`tfl2tosa inspect`: MLIR text, op table, JSON, and one-line errors with exit code 2.

Run as a subprocess through `tfl2tosa.cli.main`, which is where library errors
become exit codes (typer's CliRunner would bypass it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

MAIN = "from tfl2tosa.cli import main; main()"
MODELS = Path(__file__).resolve().parent.parent / "models"


def inspect(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", MAIN, "inspect", *map(str, args)],
                          input=stdin, capture_output=True, timeout=120)


def test_prints_mlir_and_op_table(small_models):
    result = inspect(small_models["conv_f32"])
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    assert out.startswith("module {\n  func.func @main(")
    for name in ("tfl.conv_2d", "tfl.depthwise_conv_2d", "tfl.reshape",
                 "tfl.fully_connected", "tfl.softmax"):
        assert f'"{name}"(' in out
        # One table row per op kind and element type, count 1 each.
        assert any(line.split("│")[1:4] and line.split("│")[1].strip() == name
                   and line.split("│")[2].strip() == "f32" and line.split("│")[3].strip() == "1"
                   for line in out.splitlines() if "│" in line), name
    assert "dense_resource<__elided__> : tensor<8x3x3x3xf32>" in out
    assert result.stderr == b""


def test_elide_option(small_models):
    everything = inspect(small_models["conv_f32"], "--elide", "-1").stdout.decode()
    assert "__elided__" not in everything
    assert "dense<[1, 288]> : tensor<2xi32>" in everything
    nothing = inspect(small_models["conv_f32"], "--elide", "0").stdout.decode()
    assert "dense<[1, 288]>" not in nothing
    assert "dense_resource<__elided__> : tensor<2xi32>" in nothing


def test_json_summary(small_models):
    result = inspect(small_models["conv_int8"], "--json")
    assert result.returncode == 0, result.stderr.decode()
    summary = json.loads(result.stdout)
    counts = {(row["op"], row["element_type"]): row["count"] for row in summary["op_counts"]}
    # The Keras model: one of each layer, int8 activations, per-channel int8 weights
    # for conv, depthwise and dense, per-channel int32 biases for the two convs.
    assert counts[("tfl.conv_2d", "quant<i8>")] == 1
    assert counts[("tfl.softmax", "quant<i8>")] == 1
    constants = {(row["op"], row["element_type"]): row["count"]
                 for row in summary["constant_counts"]}
    assert constants[("tfl.pseudo_const", "quant<i8>/axis")] == 3
    assert constants[("tfl.pseudo_const", "quant<i32>/axis")] == 2
    assert not any(op == "tfl.pseudo_const" for op, _ in counts)
    (main,) = summary["graphs"]
    assert main["name"] == "main"
    assert [v["type"] for v in main["inputs"]] == [
        "tensor<1x16x16x3x!quant.uniform<i8:f32, " + main["inputs"][0]["type"].split(", ")[1]]
    assert main["outputs"][0]["type"].startswith("tensor<1x10x!quant.uniform<i8:f32, 0.00390625")
    assert summary["tensors"] == main["tensors"] == 13
    assert summary["operators"] == main["operators"] == sum(counts.values())
    assert summary["constants"] == sum(constants.values())
    assert summary["signature_defs"][0]["signature_key"] == "serving_default"


def test_json_lists_every_graph(small_models):
    summary = json.loads(inspect(small_models["while_loop"], "--json").stdout)
    assert [g["name"] for g in summary["graphs"]] == ["main", "while_cond", "while_body"]
    assert [v["type"] for v in summary["graphs"][1]["outputs"]] == ["tensor<i1>"]


def test_reads_standard_input(small_models):
    data = small_models["conv_f32"].read_bytes()
    result = inspect("-", "--json", stdin=data)
    assert result.returncode == 0
    assert json.loads(result.stdout)["operators"] > 0


@pytest.mark.parametrize("case", ["missing", "text", "truncated", "directory"])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, small_models, case):
    if case == "missing":
        path, expected = tmp_path / "missing.tflite", "no such file"
    elif case == "text":
        path, expected = tmp_path / "text.tflite", "not a TFLite model"
        path.write_text("hello, this is text and not a model\n")
    elif case == "truncated":
        path, expected = tmp_path / "cut.tflite", "corrupt model"
        path.write_bytes(small_models["conv_f32"].read_bytes()[:200])
    else:
        path, expected = tmp_path, "is a directory"
    result = inspect(path)
    assert result.returncode == 2
    assert result.stdout == b""
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines


@pytest.mark.parametrize("name", ["mobilenet_tiny_int8", "lstm_classifier_float32",
                                  "attention_block_int8"])
def test_operator_count_is_tflites_and_constants_are_counted_apart(name):
    """TFLite's own operator count (the schema's operator list, what Netron shows)
    and its constant tensors (tensors with data in their buffer), read with the
    `tflite` schema package."""
    import tflite

    path = MODELS / ("demo" if name == "mobilenet_tiny_int8" else "arch") / f"{name}.tflite"
    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    operators = sum(model.Subgraphs(i).OperatorsLength() for i in range(model.SubgraphsLength()))
    constants = sum(
        1 for i in range(model.SubgraphsLength())
        for t in range(model.Subgraphs(i).TensorsLength())
        if model.Buffers(model.Subgraphs(i).Tensors(t).Buffer()).DataLength() > 0)
    result = inspect(path, "--json")
    assert result.returncode == 0, result.stderr.decode()
    summary = json.loads(result.stdout)
    assert summary["operators"] == operators
    assert summary["constants"] == constants
    table = inspect(path).stdout.decode()
    assert f"{operators} operators, {constants} constants" in " ".join(table.split())
