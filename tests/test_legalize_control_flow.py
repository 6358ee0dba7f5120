"""WHILE -> WHILE_LOOP and IF -> COND_IF, against the TFLite interpreter and tosa-opt.

The zoo's while/if models (tests/test_float_zoo.py) cover what the converter
emits; the builder reaches the rest: a [1]-shaped condition, an IF nested in
a loop body, a condition TFLite's IF refuses. `tosa-opt --tosa-validate`
checks that every region holds its own constants (TensorFlow's own lowering
hoists them out of the regions, which tosa-opt rejects).
"""

from __future__ import annotations

import subprocess
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from e2e import check_model, model_path

from tfl2tosa.pipeline import convert, emit
from tfl2tosa.errors import ConversionError

TOSA_OPT = Path(sysconfig.get_paths()["scripts"]) / "tosa-opt"
CONTROL_FLOW_TARGET = "--tosa-attach-target=profiles=pro_int,pro_fp extensions=controlflow"


def _binary(b, code: str, graph: int, x: int, y: int, out: int) -> None:
    options = b.options("AddOptions" if code == "ADD" else "MulOptions")
    b.op(code, [x, y], [out], graph=graph, options=options)


def _branch(b, graph: int, code: str, constant: float, shape: list[int]) -> None:
    """A branch graph computing `x <code> constant` (the constant lives in the branch)."""
    x = b.tensor(shape, "FLOAT32", "x", graph=graph)
    c = b.tensor([], "FLOAT32", "c", data=np.array(constant, np.float32), graph=graph)
    y = b.tensor(shape, "FLOAT32", "y", graph=graph)
    _binary(b, code, graph, x, c, y)
    b.io([x], [y], graph=graph)


def if_model(b, path: Path, condition_type: str = "BOOL") -> Path:
    """y = IF(condition[1], x) with then: x * 2, else: x + 1."""
    shape = [2, 3]
    then_graph, else_graph = b.subgraph("then_mul"), b.subgraph("else_add")
    _branch(b, then_graph, "MUL", 2.0, shape)
    _branch(b, else_graph, "ADD", 1.0, shape)
    condition = b.tensor([1], condition_type, "condition")
    x = b.tensor(shape, "FLOAT32", "x")
    y = b.tensor(shape, "FLOAT32", "y")
    b.op("IF", [condition, x], [y],
         options=b.options("IfOptions", thenSubgraphIndex=then_graph,
                           elseSubgraphIndex=else_graph))
    b.io([condition, x], [y])
    path.write_bytes(b.to_bytes())
    return path


def loop_with_if_model(b, path: Path) -> Path:
    """for i in 0..2: x = IF(i < 1, x) (then x * 2, else x + 1); returns x."""
    shape = [2, 2]
    cond, body = b.subgraph("loop_cond"), b.subgraph("loop_body")
    then_graph, else_graph = b.subgraph("then_mul"), b.subgraph("else_add")
    _branch(b, then_graph, "MUL", 2.0, shape)
    _branch(b, else_graph, "ADD", 1.0, shape)

    i = b.tensor([], "INT32", "i", graph=cond)
    x = b.tensor(shape, "FLOAT32", "x", graph=cond)
    limit = b.tensor([], "INT32", "limit", data=np.array(3, np.int32), graph=cond)
    more = b.tensor([], "BOOL", "more", graph=cond)
    b.op("LESS", [i, limit], [more], graph=cond)
    b.io([i, x], [more], graph=cond)

    i = b.tensor([], "INT32", "i", graph=body)
    x = b.tensor(shape, "FLOAT32", "x", graph=body)
    one = b.tensor([], "INT32", "one", data=np.array(1, np.int32), graph=body)
    first = b.tensor([], "BOOL", "first", graph=body)
    b.op("LESS", [i, one], [first], graph=body)
    x_next = b.tensor(shape, "FLOAT32", "x_next", graph=body)
    b.op("IF", [first, x], [x_next], graph=body,
         options=b.options("IfOptions", thenSubgraphIndex=then_graph,
                           elseSubgraphIndex=else_graph))
    i_next = b.tensor([], "INT32", "i_next", graph=body)
    _binary(b, "ADD", body, i, one, i_next)
    b.io([i, x], [i_next, x_next], graph=body)

    start = b.tensor([], "INT32", "start", data=np.array(0, np.int32))
    x = b.tensor(shape, "FLOAT32", "x")
    i_out = b.tensor([], "INT32", "i_out")
    y = b.tensor(shape, "FLOAT32", "y")
    b.op("WHILE", [start, x], [i_out, y],
         options=b.options("WhileOptions", condSubgraphIndex=cond, bodySubgraphIndex=body))
    b.io([x], [y])
    path.write_bytes(b.to_bytes())
    return path


@pytest.mark.parametrize("condition", [True, False], ids=["then", "else"])
def test_if_with_one_element_condition(condition: bool, builder, tmp_path: Path) -> None:
    path = if_model(builder, tmp_path / "if.tflite")
    x = np.random.default_rng(1).uniform(-2, 2, (2, 3)).astype(np.float32)
    check_model(path, allowed_paths=("float",),
                inputs=[[np.array([condition]), x]])


def test_if_nested_in_a_loop_body(builder, tmp_path: Path) -> None:
    check_model(loop_with_if_model(builder, tmp_path / "loop_if.tflite"),
                allowed_paths=("float",))


def test_if_with_float_condition_is_refused(builder, tmp_path: Path) -> None:
    # TFLite's IF kernel accepts only a one-element bool condition (if.cc Prepare).
    path = if_model(builder, tmp_path / "if_float.tflite", condition_type="FLOAT32")
    with pytest.raises(ConversionError, match="not a one-element bool"):
        convert(path)


@pytest.mark.parametrize("relative", ["unit/float32/while.tflite", "unit/float32/if.tflite"])
def test_regions_are_isolated_for_tosa_opt(relative: str, tmp_path: Path) -> None:
    module, _ = convert(model_path(relative))
    mlir = tmp_path / "model.mlir"
    mlir.write_bytes(emit(module, "mlir"))
    result = subprocess.run(
        [str(TOSA_OPT), str(mlir), CONTROL_FLOW_TARGET, "--tosa-validate=strict-op-spec-alignment",
         "-o", "/dev/null"],
        check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_call_once_with_nothing_to_initialize_converts(builder, tmp_path: Path) -> None:
    """The stateful pass (tfl2tosa/passes/resource_variables.py) folds a session-init graph that
    assigns no variable away; the rest of the model converts and matches TFLite."""
    init = builder.subgraph("session_init")
    builder.io([], [], graph=init)
    x = builder.tensor([2], "FLOAT32", "x")
    y = builder.tensor([2], "FLOAT32", "y")
    builder.op("CALL_ONCE", [], [], options=builder.options("CallOnceOptions",
                                                            initSubgraphIndex=init))
    _binary(builder, "ADD", 0, x, x, y)
    builder.io([x], [y])
    path = tmp_path / "call_once.tflite"
    path.write_bytes(builder.to_bytes())
    conversion, _ = check_model(path, allowed_paths=("float",))
    assert "tfl.call_once" in conversion.ops_in
