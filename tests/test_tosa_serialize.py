"""The `.tosa` writer and reader: layout, encodings, round trips, corrupt input.

Oracles: bytes derived by hand from the TOSA serialization rules (little-endian,
INT48 in 6 bytes, INT4 two per byte low nibble first, BOOL one byte, vectors
padded to 8 bytes), `flatc` decoding our files with both our schema and the
one tosa-tools ships, and files written by `tosa-opt --tosa-serialize`.
"""

from __future__ import annotations

import json
import subprocess
import sysconfig
import tracemalloc
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import tosa_graphs as tg
from hypothesis import given, settings
from hypothesis import strategies as st

from tfl2tosa.errors import IRError, TosaFileError
from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.types import ShapeType, TensorType, numpy_dtype, scalar_type
from tfl2tosa.tosa.fbs import generate
from tfl2tosa.tosa.fbs import tosa_generated as fb
from tfl2tosa.tosa.mlir import print_tosa_mlir
from tfl2tosa.tosa.ops import OPS
from tfl2tosa.tosa.reader import read_tosa
from tfl2tosa.tosa.writer import TOSA_VERSION, write_tosa

BIN = Path(sysconfig.get_paths()["scripts"])
FLATC = BIN / "flatc"
TOSA_OPT = BIN / "tosa-opt"
UPSTREAM_FBS = Path(sysconfig.get_paths()["purelib"]) / "bin" / "tosa.fbs"
OUR_FBS = Path(__file__).resolve().parent.parent / "schemas" / "tosa.fbs"

CASES = tg.single_op_cases()


def const_module(values: np.ndarray, element: str, name: str = "c") -> Module:
    """main() -> a constant of `element` holding `values`."""
    module = Module()
    graph = module.add_graph(Graph("main"))
    t = TensorType(np.shape(values), scalar_type(element))
    op = graph.append(Op("tosa.const", [], [t], {"values": np.asarray(values)},
                         result_names=[name]))
    graph.set_outputs([op.result])
    return module


def flatc_json(data: bytes, schema: Path, tmp_path: Path) -> dict:
    """The file decoded by flatc (an independent flatbuffer reader)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    binary = tmp_path / "file.tosa"
    binary.write_bytes(data)
    subprocess.run([str(FLATC), "--json", "--strict-json", "--raw-binary",
                    "--defaults-json", "-o", str(tmp_path), str(schema), "--", str(binary)],
                   check=True, capture_output=True)
    return json.loads((tmp_path / "file.json").read_text())


def tensor_data(data: bytes, tmp_path: Path, name: str = "c") -> list[int]:
    block = flatc_json(data, OUR_FBS, tmp_path)["regions"][0]["blocks"][0]
    return next(t for t in block["tensors"] if t["name"] == name).get("data", [])


# ---------------------------------------------------------------------------
# Data encodings, against bytes computed by hand


@pytest.mark.parametrize("element, values, expected", [
    # INT48: 6 little-endian bytes each; 2 elements = 12 bytes, padded to 16.
    ("i48", [1, -2], [1, 0, 0, 0, 0, 0, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]),
    ("i48", [(1 << 47) - 1, -(1 << 47)],
     [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0]),
    # INT4: element 2k in the low nibble, 2k+1 in the high one; odd count pads a 0.
    ("i4", [1, -2, 3, -7, 7], [0xE1, 0x93, 0x07, 0, 0, 0, 0, 0]),
    # BOOL: one byte per element.
    ("i1", [True, False, True], [1, 0, 1, 0, 0, 0, 0, 0]),
    ("i8", [-1, 2, -128], [0xFF, 2, 0x80, 0, 0, 0, 0, 0]),
    ("i16", [-2, 0x1234], [0xFE, 0xFF, 0x34, 0x12, 0, 0, 0, 0]),
    ("i32", [-2, 0x12345678], [0xFE, 0xFF, 0xFF, 0xFF, 0x78, 0x56, 0x34, 0x12]),
    # fp16 1.0 = 0x3C00, -2.5 = 0xC100; bf16 1.0 = 0x3F80, -2.5 = 0xC020.
    ("f16", [1.0, -2.5], [0x00, 0x3C, 0x00, 0xC1, 0, 0, 0, 0]),
    ("bf16", [1.0, -2.5], [0x80, 0x3F, 0x20, 0xC0, 0, 0, 0, 0]),
    ("f32", [1.0], [0, 0, 0x80, 0x3F, 0, 0, 0, 0]),
    # fp8 e4m3fn: 1.0 = 0 0111 000, -2.5 = 1 1000 010; e5m2: 1.0 = 0 01111 00, -2.5 = 1 10000 01.
    ("f8E4M3FN", [1.0, -2.5], [0x38, 0xC2, 0, 0, 0, 0, 0, 0]),
    ("f8E5M2", [1.0, -2.5], [0x3C, 0xC1, 0, 0, 0, 0, 0, 0]),
    # Unsigned storage keeps its bits under the signless INT8 DType.
    ("ui8", [255, 128], [0xFF, 0x80, 0, 0, 0, 0, 0, 0]),
])
def test_constant_data_bytes(element: str, values: list, expected: list[int],
                             tmp_path: Path) -> None:
    array = np.asarray(values).astype(numpy_dtype(scalar_type(element)))
    data = write_tosa(const_module(array, element))
    assert tensor_data(data, tmp_path) == expected
    back = read_tosa(data).main.ops[0].attrs["values"]
    if element == "ui8":  # read back as the signless type
        assert back.view(np.uint8).tolist() == values
    else:
        assert back.astype(np.float64).tolist() == np.asarray(array, np.float64).tolist()


def test_shape_data_is_int64_and_rank_is_its_length(tmp_path: Path) -> None:
    module = Module()
    graph = module.add_graph(Graph("main"))
    x = graph.add_input("x", TensorType((2, 3), scalar_type("f32")))
    shape = graph.append(Op("tosa.const_shape", [], [ShapeType(2)], {"values": [3, -1]},
                            result_names=["s"]))
    reshape = graph.append(Op("tosa.reshape", [x, shape.result],
                              [TensorType((3, 2), scalar_type("f32"))]))
    graph.set_outputs([reshape.result])
    block = flatc_json(write_tosa(module), OUR_FBS, tmp_path)["regions"][0]["blocks"][0]
    assert block["shapes"] == [{"name": "s", "rank": 2,
                                "data": [3, 0, 0, 0, 0, 0, 0, 0] + [0xFF] * 8}]
    assert [t["name"] for t in block["tensors"]] == ["x", "reshape"]  # shapes are no tensors


def test_data_vectors_are_8_byte_aligned() -> None:
    data = write_tosa(tg.merged_module(CASES)[0])
    graph = fb.TosaGraph.GetRootAs(data, 0)
    block = graph.Regions(0).Blocks(0)
    tensors = [block.Tensors(i) for i in range(block.TensorsLength())]
    # vtable entry 10 = TosaTensor.data (field 3); Vector() gives its first byte.
    offsets = [t._tab.Vector(t._tab.Offset(10)) for t in tensors if not t.DataIsNone()]
    assert len(offsets) > 100
    assert all(offset % 8 == 0 for offset in offsets)


def test_file_header_version_and_attributes(tmp_path: Path) -> None:
    case = tg.build_case("CLAMP", next(m for m in OPS["CLAMP"].modes if m.types["in_out_t"]
                                       == "i8"))
    decoded = flatc_json(write_tosa(case.module), OUR_FBS, tmp_path)
    major, minor, patch, draft = TOSA_VERSION
    assert decoded["version"] == {"_major": major, "_minor": minor, "_patch": patch,
                                  "_draft": draft}
    clamp = next(o for o in decoded["regions"][0]["blocks"][0]["operators"]
                 if o["op"] == "CLAMP")
    # min_val -50 and max_val 60 as raw int8 bytes, padded to 8.
    assert clamp["attribute"] == {"min_val": [206, 0, 0, 0, 0, 0, 0, 0],
                                  "max_val": [60, 0, 0, 0, 0, 0, 0, 0],
                                  "nan_mode": "PROPAGATE"}
    assert write_tosa(case.module)[4:8] == b"TOSA"


# ---------------------------------------------------------------------------
# Round trips and determinism


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_write_read_write_is_byte_identical(case: tg.Case) -> None:
    data = write_tosa(case.module)
    again = write_tosa(read_tosa(data))
    assert again == data


def test_merged_module_round_trip_and_determinism(tmp_path: Path) -> None:
    module = tg.merged_module(CASES)[0]
    data = write_tosa(module)
    assert write_tosa(module) == data
    assert write_tosa(tg.merged_module(CASES)[0]) == data  # rebuilt from scratch
    path = tmp_path / "m.tosa"
    assert write_tosa(module, path) is None
    assert path.read_bytes() == data
    assert write_tosa(read_tosa(path)) == data


def test_read_gives_back_the_graph() -> None:
    case = tg.build_case("CONV2D", OPS["CONV2D"].modes[0])
    back = read_tosa(write_tosa(case.module))
    assert_same_graphs(case.module, back)
    original = [v.name for v in case.module.main.values()]
    assert [v.name for v in back.main.values()] == original


# ---------------------------------------------------------------------------
# Files written by tosa-opt


def structure(module: Module, graph: Graph) -> list[tuple]:
    """A name-free description of a graph: ops with attributes, types and operand
    positions; branch graphs are described inline."""
    where: dict[int, tuple] = {id(v): ("in", i) for i, v in enumerate(graph.inputs)}
    rows: list[tuple] = []
    variables = sorted(op.attrs["name"] for op in graph.ops if op.name == "tosa.variable")
    for index, op in enumerate(o for o in graph.ops if o.name != "tosa.variable"):
        attrs = []
        for key, value in sorted(op.attrs.items()):
            if isinstance(value, np.ndarray):
                value = (str(value.dtype), value.shape, value.tobytes())
            elif key in ("then_graph", "else_graph", "cond_graph", "body_graph"):
                value = structure(module, module.graphs[value])
            elif isinstance(value, list):
                value = tuple(value)
            attrs.append((key, value))
        rows.append((op.name, tuple(attrs), tuple(where[id(v)] for v in op.operands),
                     tuple(str(v.type) for v in op.results)))
        for i, v in enumerate(op.results):
            where[id(v)] = (index, i)
    rows.append(("outputs", tuple(where[id(v)] for v in graph.outputs), tuple(variables)))
    return rows


def assert_same_graphs(a: Module, b: Module) -> None:
    assert structure(a, a.main) == structure(b, b.main)


@pytest.fixture(scope="module")
def tosa_opt_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Module, Path]:
    """Every case, printed as MLIR by us and serialized by tosa-opt."""
    work = tmp_path_factory.mktemp("tosa_opt")
    module = tg.merged_module(CASES)[0]
    (work / "m.mlir").write_text(print_tosa_mlir(module))
    result = subprocess.run([str(TOSA_OPT), str(work / "m.mlir"),
                             f"--tosa-serialize=tosa-flatbuffer-filename={work / 'm.tosa'}",
                             "-o", "/dev/null"], check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    return module, work / "m.tosa"


def test_reads_files_written_by_tosa_opt(tosa_opt_file: tuple[Module, Path]) -> None:
    module, path = tosa_opt_file
    back = read_tosa(path)
    # tosa-tools 2026.8.0 stamps the specification version of the module's
    # tosa.target_env (1.0; 1.1.0d for a module without one).
    assert back.attrs["tosa_version"] == "1.0.0"
    assert_same_graphs(module, back)
    # tosa-opt's own names survive (graph I/O are TosaInput_N / TosaOutput_N).
    assert back.main.inputs[0].name == "TosaInput_0"


def test_tosa_opt_file_rewritten_by_us_round_trips(tosa_opt_file: tuple[Module, Path]) -> None:
    data = write_tosa(read_tosa(tosa_opt_file[1]))
    assert write_tosa(read_tosa(data)) == data


def test_tosa_opt_int4_constant_with_minus_8_is_rejected(tmp_path: Path) -> None:
    """tosa-opt --tosa-serialize writes no data for an int4 constant holding -8
    (outside int4_t's -7..+7) instead of failing; reading such a file fails cleanly."""
    mlir = tmp_path / "i4.mlir"
    mlir.write_text('func.func @main() -> tensor<4xi4> {\n'
                    '  %0 = "tosa.const"() <{values = dense<[1, -8, 3, 4]> : tensor<4xi4>}> '
                    ': () -> tensor<4xi4>\n  return %0 : tensor<4xi4>\n}\n')
    out = tmp_path / "i4.tosa"
    subprocess.run([str(TOSA_OPT), str(mlir), f"--tosa-serialize=tosa-flatbuffer-filename={out}",
                    "-o", "/dev/null"], check=True, capture_output=True)
    with pytest.raises(TosaFileError, match="data bytes"):
        read_tosa(out)


# ---------------------------------------------------------------------------
# The schema


def test_generated_accessors_are_up_to_date() -> None:
    assert generate.main(["--check"]) == 0, "run python -m tfl2tosa.tosa.fbs.generate"


def _json_schema(schema: Path, tmp_path: Path) -> dict:
    subprocess.run([str(FLATC), "--jsonschema", "-o", str(tmp_path), str(schema)], check=True,
                   capture_output=True)
    return json.loads((tmp_path / "tosa.schema.json").read_text())["definitions"]


def test_schema_is_a_prefix_of_the_upstream_schema(tmp_path: Path) -> None:
    """Binary compatibility: every enum lists upstream's first values in order and
    every table upstream's first fields in order (field id = position)."""
    ours = _json_schema(OUR_FBS, tmp_path / "ours")
    upstream = _json_schema(UPSTREAM_FBS, tmp_path / "upstream")
    for name, definition in ours.items():
        theirs = upstream[name]
        if "enum" in definition:
            assert theirs["enum"][:len(definition["enum"])] == definition["enum"], name
        if "properties" in definition:
            fields = list(definition["properties"])
            assert list(theirs["properties"])[:len(fields)] == fields, name
            for field in fields:
                mine, upstream_field = definition["properties"][field], theirs["properties"][field]
                if "anyOf" in mine:  # the Attribute union: upstream appends members
                    mine, upstream_field = mine["anyOf"], upstream_field["anyOf"][:len(mine["anyOf"])]
                assert mine == upstream_field, (name, field)


def test_our_file_decodes_the_same_with_the_upstream_schema(tmp_path: Path) -> None:
    data = write_tosa(tg.merged_module(CASES)[0])
    ours = flatc_json(data, OUR_FBS, tmp_path / "a")
    upstream = flatc_json(data, UPSTREAM_FBS, tmp_path / "b")
    for block_ours, block_up in zip(ours["regions"], upstream["regions"]):
        for op_ours, op_up in zip(block_ours["blocks"][0]["operators"],
                                  block_up["blocks"][0]["operators"]):
            assert op_ours == {k: v for k, v in op_up.items() if k in op_ours}


# ---------------------------------------------------------------------------
# Memory: constant data is not copied on its way to the file


def test_writing_to_a_path_does_not_copy_the_weights(tmp_path: Path) -> None:
    weights = np.arange(4 << 20, dtype=np.float32)  # 16 MB
    module = const_module(weights, "f32")
    tracemalloc.start()
    try:
        write_tosa(module, tmp_path / "big.tosa")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20
    assert abs((tmp_path / "big.tosa").stat().st_size - weights.nbytes) < 1024


def test_returning_bytes_copies_the_weights_once() -> None:
    weights = np.arange(4 << 20, dtype=np.float32)
    module = const_module(weights, "f32")
    tracemalloc.start()
    try:
        data = write_tosa(module)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < weights.nbytes * 1.2
    assert len(data) < weights.nbytes + 1024


def test_reading_keeps_constants_as_views_of_the_file() -> None:
    data = write_tosa(const_module(np.arange(1 << 20, dtype=np.int32), "i32"))
    tracemalloc.start()
    try:
        values = read_tosa(data).main.ops[0].attrs["values"]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert not values.flags.writeable
    assert values[12345] == 12345


# ---------------------------------------------------------------------------
# Errors


def test_writer_rejects_what_tosa_cannot_hold() -> None:
    module = Module()
    graph = module.add_graph(Graph("main"))
    x = graph.add_input("x", TensorType((2,), scalar_type("f32")))
    graph.append(Op("tfl.relu", [x], [TensorType((2,), scalar_type("f32"))]))
    with pytest.raises(IRError, match="not a TOSA 1.0 operator"):
        write_tosa(module)
    with pytest.raises(IRError, match="no TOSA flatbuffer DType"):
        write_tosa(const_module(np.zeros(2), "f64"))
    with pytest.raises(IRError, match="out of range"):
        write_tosa(const_module(np.array([300]), "i8"))


def _op_of(case: tg.Case, name: str) -> Op:
    return next(op for op in case.module.main.ops if op.name == name)


def test_writer_refuses_values_beyond_int32_by_name() -> None:
    pool = tg.build_case("AVG_POOL2D", OPS["AVG_POOL2D"].modes[0])
    _op_of(pool, "tosa.avg_pool2d").attrs["stride"] = [1, 1 << 31]
    with pytest.raises(IRError, match=r"tosa.avg_pool2d at .*: stride = \[1, 2147483648\] "
                                      "does not fit int32"):
        write_tosa(pool.module)
    with pytest.raises(IRError, match=r"tensor 'c': shape \[1, 2147483648\] does not fit int32"):
        write_tosa(_with_result_shape(const_module(np.zeros((1, 0)), "i8"), (1, 1 << 31)))
    with pytest.raises(IRError, match=r"constant 'c' holds 2 values, its type .* needs 3"):
        write_tosa(_with_result_shape(const_module(np.zeros(2), "i8"), (3,)))


@pytest.mark.parametrize("before", [0, 1, 3])
def test_writer_refuses_a_shape_beyond_int32_among_tensors_of_its_type(before: int) -> None:
    # Tensors of an element type met before are written together; the one
    # whose shape does not fit is named, wherever it stands among them.
    module = Module()
    graph = module.add_graph(Graph("main"))
    value = graph.add_input("x", TensorType((2,), scalar_type("f32")))
    for i in range(before + 2):
        shape = (1, 1 << 31) if i == before + 1 else (2,)
        value = graph.append(Op("tosa.abs", [value], [TensorType(shape, scalar_type("f32"))],
                                result_names=[f"abs{i}"])).result
    graph.set_outputs([value])
    with pytest.raises(IRError, match=rf"tensor 'abs{before + 1}': shape \[1, 2147483648\] "
                                      "does not fit int32"):
        write_tosa(module)


def _with_result_shape(module: Module, shape: tuple[int, ...]) -> Module:
    (op,) = module.main.ops
    op.results[0].type = TensorType(shape, op.results[0].type.element)
    return module


def test_integer_attributes_in_other_python_forms_write_the_same_bytes(tmp_path: Path) -> None:
    # 1 and numpy integers for True, a tuple and numpy integers for a list of
    # ints: the same file, also when an op of the same kind was written before.
    def two_rescales(flags: object, kernel: object) -> bytes:
        case = tg.build_case("RESCALE", OPS["RESCALE"].modes[0])
        rescale = _op_of(case, "tosa.rescale")
        twin = case.module.main.append(Op("tosa.rescale", list(rescale.operands),
                                          [rescale.result.type],
                                          {**rescale.attrs, "scale32": flags},
                                          result_names=["twin"]))
        case.module.main.set_outputs([*case.module.main.outputs, twin.result])
        pool = tg.build_case("AVG_POOL2D", OPS["AVG_POOL2D"].modes[0])
        _op_of(pool, "tosa.avg_pool2d").attrs["kernel"] = kernel
        return write_tosa(case.module) + write_tosa(pool.module)

    expected = two_rescales(True, [2, 2])
    for flags, kernel in ((1, (2, 2)), (np.int64(1), [np.int32(2), 2]), (np.bool_(True), [2.0, 2])):
        assert two_rescales(flags, kernel) == expected
    case = tg.build_case("RESCALE", OPS["RESCALE"].modes[0])
    _op_of(case, "tosa.rescale").attrs["scale32"] = 1
    rescale = next(o for o in flatc_json(write_tosa(case.module), OUR_FBS, tmp_path)
                   ["regions"][0]["blocks"][0]["operators"] if o["op"] == "RESCALE")
    assert rescale["attribute"]["scale32"] is True


def test_writer_rejects_a_dangling_branch_graph() -> None:
    case = tg.build_case("COND_IF", OPS["COND_IF"].modes[0])
    cond_if = next(op for op in case.module.main.ops if op.name == "tosa.cond_if")
    cond_if.attrs["then_graph"] = "missing"
    with pytest.raises(IRError, match="missing"):
        write_tosa(case.module)


@pytest.mark.parametrize("data, message", [
    (b"", "identifier"),
    (b"\x00" * 64, "identifier"),
    (b"TFL3" * 16, "identifier"),
    (b"\x08\x00\x00\x00TOSA", "corrupt"),
    (b"\xff\xff\xff\x7fTOSA" + b"\x00" * 32, "corrupt"),
])
def test_reader_reports_garbage_in_one_line(data: bytes, message: str) -> None:
    with pytest.raises(TosaFileError, match=message) as info:
        read_tosa(data)
    assert "\n" not in str(info.value)


def test_reader_reports_missing_files(tmp_path: Path) -> None:
    with pytest.raises(TosaFileError, match="cannot read"):
        read_tosa(tmp_path / "nope.tosa")
    with pytest.raises(TosaFileError, match="cannot read"):
        read_tosa(tmp_path)


_SAMPLE = write_tosa(tg.merged_module([c for c in CASES
                                       if c.opdef.name in ("CONV2D", "COND_IF", "VARIABLE",
                                                           "CLAMP", "RESHAPE")])[0])


def _read_or_file_error(data: bytes) -> None:
    try:
        read_tosa(data)
    except TosaFileError as exc:
        assert "\n" not in str(exc)


@pytest.mark.parametrize("cut", range(0, len(_SAMPLE), max(1, len(_SAMPLE) // 97)))
def test_truncated_files_fail_cleanly(cut: int) -> None:
    _read_or_file_error(_SAMPLE[:cut])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_SAMPLE) - 1), st.integers(0, 255)),
                min_size=1, max_size=8))
def test_corrupted_files_fail_cleanly(edits: list[tuple[int, int]]) -> None:
    """Any byte damage gives a Module or TosaFileError, never another exception."""
    data = bytearray(_SAMPLE)
    for position, byte in edits:
        data[position] = byte
    _read_or_file_error(bytes(data))


def test_reader_rejects_1_1_operators(tmp_path: Path) -> None:
    """A file using an operator TOSA 1.0 lacks (enum 100, MATMUL_T upstream)."""
    data = bytearray(write_tosa(tg.build_case("ADD", OPS["ADD"].modes[0]).module))
    graph = fb.TosaGraph.GetRootAs(bytes(data), 0)
    operator = graph.Regions(0).Blocks(0).Operators(0)
    position = operator._tab.Offset(4) + operator._tab.Pos
    data[position:position + 4] = (100).to_bytes(4, "little")
    with pytest.raises(TosaFileError, match="not a TOSA 1.0 operator"):
        read_tosa(bytes(data))


def test_values_and_value_types() -> None:
    """Reader output uses our IR's types: bf16 / fp8 as ml_dtypes, i48 as int64."""
    values = np.array([1.0, -2.5], dtype=ml_dtypes.bfloat16)
    back = read_tosa(write_tosa(const_module(values, "bf16"))).main.ops[0]
    assert back.attrs["values"].dtype == ml_dtypes.bfloat16
    assert str(back.result.type) == "tensor<2xbf16>"
    back = read_tosa(write_tosa(const_module(np.array([-(1 << 40)]), "i48"))).main.ops[0]
    assert back.attrs["values"].dtype == np.int64 and back.attrs["values"][0] == -(1 << 40)


def test_variables_use_the_tosa_tools_convention(tmp_path: Path) -> None:
    """tosa.variable is a tensor marked variable; reads and writes are IDENTITY ops."""
    mode = next(m for m in OPS["VARIABLE_WRITE"].modes if m.types["in_t"] == "i8")
    case = tg.build_case("VARIABLE_WRITE", mode)
    block = flatc_json(write_tosa(case.module), OUR_FBS, tmp_path)["regions"][0]["blocks"][0]
    variable = next(t for t in block["tensors"] if t["variable"])
    assert variable["variable_name"] == case.id + "_var"
    assert [o["op"] for o in block["operators"]] == ["IDENTITY", "IDENTITY"]
    assert block["operators"][0]["outputs"] == [variable["name"]]
    assert block["operators"][1]["inputs"] == [variable["name"]]
    ops = [op.name for op in read_tosa(write_tosa(case.module)).main.ops]
    assert ops == ["tosa.variable", "tosa.variable_write", "tosa.variable_read"]


def test_value_names_are_unique_in_the_file() -> None:
    """Two values with the same name (possible in a hand-made Op) get distinct names."""
    module = Module()
    graph = module.add_graph(Graph("main"))
    x = graph.add_input("x", TensorType((2,), scalar_type("f32")))
    a = Op("tosa.add", [x, x], [TensorType((2,), scalar_type("f32"))], result_names=["x"])
    graph.ops.append(a)  # bypass the graph's own naming
    graph.set_outputs([a.result])
    back = read_tosa(write_tosa(module))
    assert [v.name for v in back.main.values()] == ["x", "x_1"]
    assert isinstance(back.main.outputs[0], Value)


# ---------------------------------------------------------------------------
# tfl2tosa tosa-info


def _cli():
    from typer.testing import CliRunner

    import tfl2tosa.cli.tosa_info  # noqa: F401  (registers the command)
    from tfl2tosa.cli import app

    return CliRunner(), app


def test_tosa_info_json_counts_ops_by_type(tmp_path: Path) -> None:
    mode = next(m for m in OPS["CONV2D"].modes if m.types["in_t"] == "i8"
                and m.types["weight_t"] == "i8")
    path = tmp_path / "conv.tosa"
    write_tosa(tg.build_case("CONV2D", mode).module, path)
    runner, app = _cli()
    result = runner.invoke(app, ["tosa-info", str(path), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    counts = {(row["op"], row["types"]): row["count"] for row in summary["op_counts"]}
    # The input is a graph input; weight and two zero points are int8 constants.
    assert counts == {("tosa.const", "i8"): 3, ("tosa.const", "i32"): 1,
                      ("tosa.conv2d", "i8 -> i32"): 1}
    assert summary["tosa_version"] == "1.0.0"
    # weight 3x2x2x2 int8, bias 3 int32, two 1-element int8 zero points
    assert summary["constant_bytes"] == 24 + 12 + 2
    assert summary["graphs"][0]["inputs"][0]["type"] == "tensor<1x4x5x2xi8>"


def test_tosa_info_text_is_mlir_tosa_opt_parses(tmp_path: Path) -> None:
    case = tg.build_case("COND_IF", OPS["COND_IF"].modes[0])
    path = tmp_path / "cf.tosa"
    write_tosa(case.module, path)
    runner, app = _cli()
    result = runner.invoke(app, ["tosa-info", str(path), "--elide", "-1"])
    assert result.exit_code == 0, result.output
    mlir, _, table = result.output.partition("\n}\n")
    assert "tosa.cond_if" in table and "tosa.add" in table
    (tmp_path / "cf.mlir").write_text(mlir + "\n}\n")
    parsed = subprocess.run([str(TOSA_OPT), str(tmp_path / "cf.mlir"), "-o", "/dev/null"],
                            check=False, capture_output=True, text=True)
    assert parsed.returncode == 0, parsed.stderr


def test_tosa_info_reports_a_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.tosa"
    path.write_bytes(b"\x10\x00\x00\x00TOSA" + b"\xff" * 40)
    runner, app = _cli()
    result = runner.invoke(app, ["tosa-info", str(path)])
    assert isinstance(result.exception, TosaFileError)
