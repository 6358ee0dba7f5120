"""The TOSA op table against the specification and Arm's tools.

Oracles: facts read by hand from the TOSA 1.0 specification (`tosa.xml`,
argument tables and "supported data types" tables), the flatbuffer schema that
tosa-tools 2026.8.0 reads (`bin/tosa.fbs`, parsed here from its text),
`tosa-opt`, which must recognise every MLIR op name, and Arm's reference model,
which must validate a one-op graph in every type mode of the table and reject
element types the table leaves out.
"""

from __future__ import annotations

import os
import re
import subprocess
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from tfl2tosa.ir import Builder, Graph, Module, TensorType, Value
from tfl2tosa.ir.types import SCALAR_TYPES, numpy_dtype, scalar_type
from tfl2tosa.tosa import build as tb
from tfl2tosa.tosa import op_definitions
from tfl2tosa.tosa.ops import BY_MLIR, ENUMS, OPS, TypeMode
from tfl2tosa.tosa.verify import verify

FBS = Path(sysconfig.get_paths()["purelib"]) / "bin" / "tosa.fbs"
TOSA_OPT = Path(sysconfig.get_paths()["scripts"]) / "tosa-opt"

# The 75 operators of TOSA 1.0, by specification chapter.
SPEC_OPS = {
    "tensor": ["ARGMAX", "AVG_POOL2D", "CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "FFT2D",
               "MATMUL", "MAX_POOL2D", "RFFT2D", "TRANSPOSE_CONV2D"],
    "activation": ["CLAMP", "ERF", "SIGMOID", "TANH"],
    "elementwise-binary": ["ADD", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR",
                           "BITWISE_XOR", "INTDIV", "LOGICAL_AND", "LOGICAL_LEFT_SHIFT",
                           "LOGICAL_RIGHT_SHIFT", "LOGICAL_OR", "LOGICAL_XOR", "MAXIMUM",
                           "MINIMUM", "MUL", "POW", "SUB", "TABLE"],
    "elementwise-unary": ["ABS", "BITWISE_NOT", "CEIL", "CLZ", "COS", "EXP", "FLOOR", "LOG",
                          "LOGICAL_NOT", "NEGATE", "RECIPROCAL", "RSQRT", "SIN"],
    "elementwise-ternary": ["SELECT"],
    "comparison": ["EQUAL", "GREATER", "GREATER_EQUAL"],
    "reduction": ["REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PRODUCT",
                  "REDUCE_SUM"],
    "data-layout": ["CONCAT", "PAD", "RESHAPE", "REVERSE", "SLICE", "TILE", "TRANSPOSE"],
    "scatter-gather": ["GATHER", "SCATTER"],
    "image": ["RESIZE"],
    "type-conversion": ["CAST", "RESCALE"],
    "data-node": ["CONST", "IDENTITY"],
    "custom": ["CUSTOM"],
    "control-flow": ["COND_IF", "WHILE_LOOP"],
    "variable": ["VARIABLE", "VARIABLE_WRITE", "VARIABLE_READ"],
    "shape": ["CONST_SHAPE"],
}


def _fbs_schema() -> tuple[list[str], list[str], dict[str, list[str]]]:
    """(Op enum names in order, Attribute union members in order, table -> field names)."""
    text = re.sub(r"//[^\n]*", "", FBS.read_text())

    def block(kind: str, name: str) -> str:
        match = re.search(rf"\b{kind}\s+{name}\b[^{{]*{{(.*?)}}", text, re.DOTALL)
        assert match, f"{kind} {name} not in tosa.fbs"
        return match.group(1)

    op_enum = [e.split("=")[0].strip() for e in block("enum", "Op").split(",") if e.strip()]
    union = [e.strip() for e in block("union", "Attribute").split(",") if e.strip()]
    tables = {m.group(1): re.findall(r"^\s*(\w+)\s*:", m.group(2), re.MULTILINE)
              for m in re.finditer(r"\btable\s+(\w+)\s*{(.*?)}", text, re.DOTALL)}
    return op_enum, union, tables


def _modes(name: str) -> list[tuple[dict[str, str], tuple[str, ...]]]:
    return [(m.types, m.profiles) for m in OPS[name].modes]


def test_the_generated_table_is_current_and_loads_as_defined():
    # The records the code base reads come from op_table.py; the definitions
    # the checks below were written against are op_definitions.py.
    assert op_definitions.TABLE_PATH.read_text() == op_definitions.render(op_definitions.OPS), (
        "tfl2tosa/tosa/op_table.py is stale: run "
        "`python -m tfl2tosa.tosa.op_definitions --update`")
    assert list(OPS.items()) == list(op_definitions.OPS.items())
    assert BY_MLIR == {d.mlir: d for d in op_definitions.OPS.values()}


def test_exactly_the_specification_ops():
    assert sorted(OPS) == sorted(n for names in SPEC_OPS.values() for n in names)
    assert len(OPS) == 75
    for chapter, names in SPEC_OPS.items():
        assert all(OPS[n].chapter == chapter for n in names), chapter
    assert set(BY_MLIR) == {op.mlir for op in OPS.values()}


def test_fbs_op_enum_and_attribute_tables_match_tosa_tools():
    op_enum, union, tables = _fbs_schema()
    assert op_enum[0] == "UNKNOWN"
    for op in OPS.values():
        assert op_enum[op.fbs_op] == op.name, op.name
        # The union lists one table per op in Op order (union index = Op value).
        assert union[op.fbs_op - 1] == op.fbs_attr, op.name
        assert op.fbs_attr in tables, op.fbs_attr
        fields = tables[op.fbs_attr]
        stored = [a.fbs_field for a in op.attrs if a.fbs_field]
        assert set(stored) <= set(fields), (op.name, stored, fields)
        # Nothing in the schema's table is left without an attribute in ours.
        assert set(fields) <= set(stored), (op.name, fields)


def test_mlir_names_are_registered_in_tosa_opt():
    body = "\n".join(f'  "{op.mlir}"() : () -> ()' for op in OPS.values())
    text = f"func.func @all() {{\n{body}\n  return\n}}\n"
    run = subprocess.run([str(TOSA_OPT), "-"], input=text, capture_output=True, text=True,
                         timeout=60, check=False)
    assert "unregistered operation" not in run.stderr, run.stderr
    # The first op fails verification (no operands), which proves the file parsed.
    assert "'tosa.argmax' op" in run.stderr, run.stderr


def test_conv2d_sheet():
    conv = OPS["CONV2D"]
    assert [a.name for a in conv.inputs] == ["input", "weight", "bias", "input_zp", "weight_zp"]
    assert [a.type_var for a in conv.inputs] == ["in_t", "weight_t", "out_t", "in_t",
                                                  "weight_t"]
    assert [a.ctc for a in conv.inputs] == [False, False, False, True, True]
    assert [a.name for a in conv.outputs] == ["output"]
    assert conv.attr_names == ("pad", "stride", "dilation", "acc_type", "local_bound")
    assert conv.attr("local_bound").optional and not conv.attr("acc_type").optional
    # Supported data types of CONV2D in TOSA 1.0: (in, weight, out, acc) -> profile.
    expected = {
        ("i8", "i8", "i32", "i32"): ("PRO-INT",),
        ("i8", "i4", "i32", "i32"): ("EXT-INT4",),
        ("i16", "i8", "i48", "i48"): ("EXT-INT16",),
        ("f8E4M3FN", "f8E4M3FN", "f16", "f16"): ("EXT-FP8E4M3",),
        ("f8E5M2", "f8E5M2", "f16", "f16"): ("EXT-FP8E5M2",),
        ("f16", "f16", "f16", "f16"): ("PRO-FP",),
        ("f16", "f16", "f16", "f32"): ("PRO-FP",),
        ("bf16", "bf16", "bf16", "f32"): ("EXT-BF16",),
        ("f32", "f32", "f32", "f32"): ("PRO-FP",),
    }
    got = {(t["in_t"], t["weight_t"], t["out_t"], t["acc_t"]): p for t, p in _modes("CONV2D")}
    assert got == expected
    for name in ("CONV3D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D"):
        assert _modes(name) == _modes("CONV2D"), name
    assert OPS["TRANSPOSE_CONV2D"].attr_names == ("out_pad", "stride", "acc_type",
                                                  "local_bound")


def test_rescale_modes_include_48_bit_inputs_with_int16_extension():
    rescale = OPS["RESCALE"]
    assert [a.name for a in rescale.inputs] == ["input", "multiplier", "shift", "input_zp",
                                                 "output_zp"]
    assert rescale.attr_names == ("scale32", "rounding_mode", "per_channel", "input_unsigned",
                                  "output_unsigned")
    got = {(t["in_t"], t["out_t"]): p for t, p in _modes("RESCALE")}
    widths = ("i8", "i16", "i32")
    expected = {(a, b): ("PRO-INT",) for a in widths for b in widths}
    expected.update({("i48", b): ("EXT-INT16",) for b in widths})
    assert got == expected


def test_clamp_modes_and_value_attributes():
    got = {t["in_out_t"]: p for t, p in _modes("CLAMP")}
    assert got == {"i8": ("PRO-INT",), "i16": ("EXT-INT16",), "f16": ("PRO-FP",),
                   "bf16": ("EXT-BF16",), "f32": ("PRO-FP",)}
    clamp = OPS["CLAMP"]
    assert [(a.name, a.type) for a in clamp.attrs] == [("min_val", "value"),
                                                       ("max_val", "value"),
                                                       ("nan_mode", "nan_mode")]
    assert clamp.attr("nan_mode").default == "PROPAGATE"


def test_table_sizes():
    modes = {m.types["in_t"]: m for m in OPS["TABLE"].modes}
    assert set(modes) == {"i8", "i16"}
    assert modes["i8"].params == {"TABLE_SIZE": 256}
    assert modes["i8"].types == {"in_t": "i8", "table_t": "i8", "out_t": "i8"}
    assert modes["i8"].profiles == ("PRO-INT",)
    assert modes["i16"].params == {"TABLE_SIZE": 513}
    assert modes["i16"].types == {"in_t": "i16", "table_t": "i16", "out_t": "i32"}
    assert modes["i16"].profiles == ("EXT-INT16",)


def test_cast_modes():
    modes = OPS["CAST"].modes
    assert len(modes) == 46
    base = [m for m in modes if set(m.profiles) <= {"PRO-INT", "PRO-FP"}]
    assert len(base) == 26
    pairs = {(m.types["in_t"], m.types["out_t"]) for m in modes}
    assert ("i1", "f32") not in pairs and ("f32", "i1") not in pairs
    assert not any("i48" in p for p in pairs)
    assert ("f32", "f16") in pairs and ("f16", "f32") in pairs
    fp8_to_bf16 = next(m for m in modes if m.types == {"in_t": "f8E4M3FN", "out_t": "bf16"})
    assert fp8_to_bf16.profiles == ("EXT-FP8E4M3+EXT-BF16",)
    assert fp8_to_bf16.allowed({"PRO-FP", "EXT-FP8E4M3", "EXT-BF16"})
    assert not fp8_to_bf16.allowed({"PRO-FP", "EXT-FP8E4M3"})


def test_integer_arithmetic_is_i32_only_and_mul_widens():
    for name in ("ADD", "SUB", "INTDIV", "ABS", "MAXIMUM", "MINIMUM", "REDUCE_SUM"):
        var = OPS[name].inputs[0].type_var
        ints = {m.types[var] for m in OPS[name].modes} - {"f16", "bf16", "f32"}
        assert ints == {"i32"}, name
    mul = {m.types["in_t"]: m.types["out_t"] for m in OPS["MUL"].modes}
    assert mul == {"i8": "i32", "i16": "i32", "i32": "i32", "f16": "f16", "bf16": "bf16",
                   "f32": "f32"}
    assert [a.name for a in OPS["MUL"].inputs] == ["input1", "input2", "shift"]


def test_shape_operands_and_control_flow():
    assert [(a.name, a.kind) for a in OPS["PAD"].inputs] == [
        ("input1", "tensor"), ("padding", "shape"), ("pad_const", "tensor")]
    assert [(a.name, a.kind) for a in OPS["SLICE"].inputs] == [
        ("input1", "tensor"), ("start", "shape"), ("size", "shape")]
    assert [a.name for a in OPS["RESIZE"].inputs] == ["input", "scale", "offset", "border"]
    assert OPS["TRANSPOSE"].attr_names == ("perms",)
    assert OPS["COND_IF"].attr_names == ("then_graph", "else_graph")
    assert OPS["WHILE_LOOP"].attr_names == ("cond_graph", "body_graph")
    assert all(m.profiles == ("EXT-CONTROLFLOW",) for m in OPS["COND_IF"].modes)
    assert {m.types["in_t"]: m.profiles for m in OPS["VARIABLE"].modes} == {
        "i8": ("PRO-INT+EXT-VARIABLE",), "f16": ("PRO-FP+EXT-VARIABLE",),
        "f32": ("PRO-FP+EXT-VARIABLE",)}


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_mode_is_well_formed(name):
    op = OPS[name]
    variables = {a.type_var for a in op.inputs + op.outputs}
    for mode in op.modes:
        assert isinstance(mode, TypeMode)
        assert mode.profiles, (name, mode.name)
        for var, element in mode.types.items():
            assert element in SCALAR_TYPES, (name, var, element)
        # Every type variable an argument uses is fixed by each mode.
        free = {v for v in variables if v.endswith("_t") and v not in
                ("i8_t", "bool_t", "shape_t", "mul_t")} - set(mode.types)
        assert not free, (name, mode.name, free)
    for a in op.attrs:
        assert a.type in ENUMS or a.type in ("i32", "i32[]", "i64[]", "bool", "string",
                                             "value", "graph", "tensor", "var_type"), a


# ---------------------------------------------------------------------------
# Every type mode against Arm's reference model: a one-op graph built from
# constants in that mode must be accepted by our verifier and validated by the
# reference model (which checks its own list of supported types before running).

S = (2, 3)
_ACC = {"i32": "INT32", "i48": "INT48", "f16": "FP16", "f32": "FP32"}
_UNARY = {"ABS", "BITWISE_NOT", "CEIL", "CLZ", "COS", "EXP", "FLOOR", "LOG", "LOGICAL_NOT",
          "RECIPROCAL", "RSQRT", "SIN", "ERF", "SIGMOID", "TANH", "IDENTITY"}


def _const(b: Builder, shape: tuple[int, ...], element: str, fill: int = 1) -> Value:
    # Ones keep every op defined (INTDIV, LOG, RSQRT, POW would fail on zeros).
    scalar = scalar_type(element)
    return tb.const(b, np.full(shape, fill).astype(numpy_dtype(scalar)), scalar)


def _one_op(b: Builder, name: str, mode: TypeMode) -> Value | list[Value]:
    """OPS[name] in `mode`, on small constant operands, with a valid output shape."""
    op, t = OPS[name], mode.types
    el = {v: scalar_type(e) for v, e in t.items()}
    if name in _UNARY:
        return tb.op(b, op.mlir, [_const(b, S, t["in_out_t"])], TensorType(S, el["in_out_t"]))
    if name == "NEGATE":
        zps = [tb.zero_point(b, 0, el["in_out_t"])] * 2
        return tb.op(b, op.mlir, [_const(b, S, t["in_out_t"]), *zps],
                     TensorType(S, el["in_out_t"]))
    if name == "CLAMP":
        return tb.clamp(b, _const(b, S, t["in_out_t"]), 0, 1)
    if name == "MUL":
        return tb.op(b, op.mlir, [_const(b, S, t["in_t"]), _const(b, S, t["in_t"]),
                                  tb.zero_point(b, 0, scalar_type("i8"))],
                     TensorType(S, el["out_t"]))
    if name == "TABLE":
        table = _const(b, (mode.params["TABLE_SIZE"],), t["table_t"])
        return tb.op(b, op.mlir, [_const(b, S, t["in_t"]), table], TensorType(S, el["out_t"]))
    if name == "SELECT":
        return tb.op(b, op.mlir, [_const(b, S, "i1"), _const(b, S, t["in_out_t"]),
                                  _const(b, S, t["in_out_t"])], TensorType(S, el["in_out_t"]))
    if op.chapter in ("elementwise-binary", "comparison"):
        var, out = ("in_out_t", "in_out_t") if "in_out_t" in t else ("in_t", "out_t")
        attrs = {"round": False} if name == "ARITHMETIC_RIGHT_SHIFT" else {}
        return tb.op(b, op.mlir, [_const(b, S, t[var]), _const(b, S, t[var])],
                     TensorType(S, el[out]), **attrs)
    if op.chapter == "reduction":
        return tb.op(b, op.mlir, [_const(b, S, t["in_out_t"])],
                     TensorType((1, 3), el["in_out_t"]), axis=0)
    if name == "ARGMAX":
        return tb.op(b, op.mlir, [_const(b, S, t["in_t"])], TensorType((3,), el["out_t"]),
                     axis=0)
    layout = {
        "CONCAT": lambda x: tb.op(b, op.mlir, [x, x], TensorType((4, 3), x.type.element),
                                  axis=0),
        "PAD": lambda x: tb.pad(b, x, [1, 0, 0, 1]),
        "RESHAPE": lambda x: tb.reshape(b, x, [3, 2]),
        "REVERSE": lambda x: tb.op(b, op.mlir, [x], x.type, axis=1),
        "SLICE": lambda x: tb.slice(b, x, [0, 1], [2, 2]),
        "TILE": lambda x: tb.op(b, op.mlir, [x, tb.const_shape(b, [2, 1])],
                                TensorType((4, 3), x.type.element)),
        "TRANSPOSE": lambda x: tb.transpose(b, x, [1, 0]),
        "CAST": lambda x: tb.cast(b, x, el["out_t"]),
    }
    if name in layout:
        return layout[name](_const(b, S, t.get("in_out_t") or t["in_t"]))
    if name in ("GATHER", "SCATTER"):
        values = _const(b, (1, 4, 3), t["in_out_t"])
        indices = tb.const(b, np.array([[0, 1]], np.int32))
        if name == "GATHER":
            return tb.op(b, op.mlir, [values, indices], TensorType((1, 2, 3), el["in_out_t"]))
        return tb.op(b, op.mlir, [values, indices, _const(b, (1, 2, 3), t["in_out_t"])],
                     values.type)
    if name == "RESCALE":
        wide = t["in_t"] == "i48"  # 48-bit inputs need the 16-bit scale
        return tb.rescale(b, _const(b, S, t["in_t"]), 1 << 14 if wide else 1 << 30,
                          14 if wide else 30, 0, 0, el["out_t"], scale32=not wide)
    if name in ("CONV2D", "DEPTHWISE_CONV2D", "CONV3D", "TRANSPOSE_CONV2D"):
        spatial = 3 if name == "CONV3D" else 2
        x = _const(b, (1,) + (4,) * spatial + (2,), t["in_t"])
        w = _const(b, (3, 3, 2, 1) if name == "DEPTHWISE_CONV2D" else (2,) + (3,) * spatial
                   + (2,), t["weight_t"])
        operands = [x, w, _const(b, (2,), t["out_t"]), tb.zero_point(b, 0, el["in_t"]),
                    tb.zero_point(b, 0, el["weight_t"])]
        if name == "TRANSPOSE_CONV2D":  # OH = (4 - 1) * 1 + 0 + 0 + 3 = 6
            return tb.op(b, op.mlir, operands, TensorType((1, 6, 6, 2), el["out_t"]),
                         out_pad=[0] * 4, stride=[1, 1], acc_type=_ACC[t["acc_t"]])
        return tb.op(b, op.mlir, operands, TensorType(x.type.shape, el["out_t"]),
                     pad=[1] * 2 * spatial, stride=[1] * spatial, dilation=[1] * spatial,
                     acc_type=_ACC[t["acc_t"]])
    if name == "MATMUL":
        zps = [tb.zero_point(b, 0, el["in_t"])] * 2
        return tb.op(b, op.mlir, [_const(b, (1, 2, 3), t["in_t"]),
                                  _const(b, (1, 3, 4), t["in_t"]), *zps],
                     TensorType((1, 2, 4), el["out_t"]))
    if name in ("AVG_POOL2D", "MAX_POOL2D"):
        x = _const(b, (1, 4, 4, 2), t["in_out_t"])
        window = {"kernel": [2, 2], "stride": [2, 2], "pad": [0] * 4}
        out = TensorType((1, 2, 2, 2), el["in_out_t"])
        if name == "MAX_POOL2D":
            return tb.op(b, op.mlir, [x], out, **window)
        zps = [tb.zero_point(b, 0, el["in_out_t"])] * 2
        return tb.op(b, op.mlir, [x, *zps], out, acc_type=_ACC[t["acc_t"]], **window)
    if name == "RESIZE":  # OH = (4 - 1) * 2 / 1 + 1 = 7
        mode_attr = "BILINEAR" if "bilinear" in mode.name else "NEAREST"
        shapes = [tb.const_shape(b, v) for v in ([2, 1, 2, 1], [0, 0], [0, 0])]
        return tb.op(b, op.mlir, [_const(b, (1, 4, 4, 2), t["in_t"]), *shapes],
                     TensorType((1, 7, 7, 2), el["out_t"]), mode=mode_attr)
    if name in ("FFT2D", "RFFT2D"):
        x = _const(b, (1, 4, 4), t["in_out_t"])
        if name == "FFT2D":
            return tb.op_results(b, op.mlir, [x, x], [x.type] * 2, inverse=False)
        return tb.op_results(b, op.mlir, [x], [TensorType((1, 4, 3), x.type.element)] * 2)
    if name == "CONST":
        return _const(b, S, t["out_t"])
    raise LookupError(name)


# Control flow, variables, CUSTOM and CONST_SHAPE have no element-type modes to probe.
_PROBED = sorted(n for n, op in OPS.items() if op.modes and op.modes[0].types
                 and op.chapter not in ("variable",))


def _arm_validates(module: Module) -> bool:
    import tosa_reference_model

    from tfl2tosa.tosa.writer import write_tosa

    data = write_tosa(module)
    saved, null, path = (os.dup(1), os.dup(2)), os.open(os.devnull, os.O_WRONLY), \
        os.environ.get("PATH", "")
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.environ["PATH"] = ""  # no gdb backtrace on a failed check (seconds each)
        _, status = tosa_reference_model.run(data, [])
    except ValueError as error:
        assert "Invalid TOSA graph" in str(error)
        return False
    finally:
        os.environ["PATH"] = path
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (null, *saved):
            os.close(fd)
    return status == tosa_reference_model.GraphStatus.TOSA_VALID


def _module_of(name: str, mode: TypeMode) -> Module:
    graph = Graph("main")
    result = _one_op(Builder(graph, loc=name), name, mode)
    graph.set_outputs(result if isinstance(result, list) else [result])
    module = Module()
    module.add_graph(graph)
    return module


@pytest.mark.parametrize("name", _PROBED)
def test_every_mode_is_valid_for_us_and_for_arm(name):
    for mode in OPS[name].modes:
        module = _module_of(name, mode)
        assert verify(module) == [], (name, mode.name)
        assert _arm_validates(module), (name, mode.name)


# Element types the reference model accepts although the specification lists no
# such mode (CAST between bool and fp32).
_ARM_EXTRA = {("CAST", ("i1", "f32")), ("CAST", ("f32", "i1")), ("GATHER", ("i1",)),
              ("SCATTER", ("i1",))}
_ELEMENTS = ["i1", "i8", "i16", "i32", "f16", "bf16", "f32", "f8E4M3FN", "f8E5M2"]


def _free_variables(name: str) -> list[str]:
    """Type variables a probe varies: not accumulators, tables, indices or fixed outputs."""
    op = OPS[name]
    return [v for v in op.modes[0].types if v not in ("acc_t", "resize_t", "table_t", "index_t")
            and not (v == "out_t" and (op.chapter == "comparison" or name == "ARGMAX"))]


@pytest.mark.parametrize("name", [n for n in _PROBED if n == "CAST"
                                  or (len(_free_variables(n)) == 1 and "FFT" not in n)])
def test_types_outside_the_table_are_rejected_by_arm(name):
    """For ops with one free type variable (and CAST), every other element type fails."""
    op = OPS[name]
    free = _free_variables(name)
    if name == "CAST":
        probes = [{"in_t": a, "out_t": c} for a in _ELEMENTS for c in _ELEMENTS if a != c]
    else:
        probes = [{free[0]: e} for e in _ELEMENTS]
    known = [m.types for m in op.modes]
    for probe in probes:
        if any(all(k.get(v) == e for v, e in probe.items()) for k in known):
            continue
        mode = TypeMode("probe", {**op.modes[0].types, **probe}, ("PRO-INT",),
                        op.modes[0].params)
        module = _module_of(name, mode)
        assert verify(module, raise_on_error=False), (name, probe)
        if (name, tuple(probe.values())) not in _ARM_EXTRA:
            assert not _arm_validates(module), (name, probe)
