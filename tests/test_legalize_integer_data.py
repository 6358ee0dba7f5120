"""Integer patterns of quantized data ops (ARG_MAX/ARG_MIN and REDUCE_MAX/MIN in
legalize/reduce.py, MAXIMUM/MINIMUM and SQUARED_DIFFERENCE in
legalize/elementwise.py) and the uint8 wrappers of legalize/integer/data.py,
checked end to end.

Every case converts a quantized model, requires the op under test to take
its integer pattern, and requires our reference model to equal TFLite's
builtin reference kernels (BUILTIN_REF) exactly and the written `.tosa` file
to give the same integers on Arm's reference model (tests/e2e.py for int8 and
int16 models; `check_uint8` below for models with uint8 inputs or outputs,
which e2e.py cannot feed: TFLite takes uint8 arrays, our graph the same
bytes as int8). Models come from the zoo and from `TfliteBuilder` for
extreme zero points, differing scales, saturation, ties and uint8.

Where TFLite's kernel ignores the quantization (MAXIMUM/MINIMUM, REDUCE_MAX,
SELECT, int16 comparisons and CONCATENATION with differing parameters), the
op must take the fallback, and the tests say so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from arm import run_arm
from conftest import TfliteBuilder
from e2e import model_path
from tflite_ref import check_patterns, reference_outputs, write_model

import legalize.integer  # noqa: F401  (registers the integer patterns)
import reference_model
from tfl2tosa.pipeline import convert
from tfl2tosa.tosa.writer import write_tosa

LABELS = {
    **{f"tfl.{name}": "comparison_int" for name in (
        "equal", "not_equal", "less", "less_equal", "greater", "greater_equal")},
    "tfl.arg_max": "arg_max_min_int", "tfl.arg_min": "arg_max_min_int",
    "tfl.reduce_max": "reduce_max_min_int", "tfl.reduce_min": "reduce_max_min_int",
    "tfl.maximum": "maximum_minimum_int", "tfl.minimum": "maximum_minimum_int",
    "tfl.squared_difference": "squared_difference_int8",
}
NUMPY = {"INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16, "INT32": np.int32,
         "BOOL": np.bool_}


def _outcome(conversion, op_name: str) -> dict:
    found = [o for o in conversion.outcomes if o["op_name"] == op_name]
    assert found, f"no {op_name} in {conversion.outcomes}"
    return found[0]


def check_integer(path, op_name: str, label: str | None = None, **kwargs):
    """check_model (exact against TFLite and Arm), the op on its integer pattern."""
    conversion, _ = check_patterns(path, {op_name: label or LABELS[op_name]},
                                   allowed_paths=("integer", "float"), **kwargs)
    return conversion


def check_fallback(path, op_name: str, reason: str) -> None:
    """The op is not lowered by an integer pattern: it takes the fallback, and why."""
    _, conversion = convert(path)
    outcome = _outcome(conversion, op_name)
    assert outcome["path"] == "fallback", outcome
    assert reason in outcome["reason"], outcome["reason"]


# ---------------------------------------------------------------------------
# Models written field by field


@dataclass(frozen=True)
class T:
    """A tensor of a one-op model: a graph input unless it has `data`."""

    shape: tuple[int, ...]
    type: str = "INT8"
    scale: float | None = None
    zp: int = 0
    data: np.ndarray | None = None


def one_op(tmp_path, code: str, inputs: list[T], outputs: list[T], options=None,
           name: str = "model.tflite"):
    b = TfliteBuilder()

    def tensor(spec: T, label: str) -> int:
        quant = {} if spec.scale is None else {"scale": [spec.scale], "zero_point": [spec.zp]}
        data = None if spec.data is None else np.asarray(spec.data, NUMPY[spec.type])
        return b.tensor(list(spec.shape), spec.type, label, data=data, **quant)

    ins = [tensor(spec, f"x{i}") for i, spec in enumerate(inputs)]
    outs = [tensor(spec, f"y{i}") for i, spec in enumerate(outputs)]
    b.op(code, ins, outs, options=options(b) if callable(options) else options)
    b.io([i for i, spec in zip(ins, inputs) if spec.data is None], outs)
    return write_model(b, tmp_path / name)


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def full_range(rng: np.random.Generator, shape, type_name: str) -> np.ndarray:
    dtype = NUMPY[type_name]
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)


# ---------------------------------------------------------------------------
# uint8 inputs and outputs


def _stored_bytes(array: np.ndarray) -> np.ndarray:
    """What our graph takes for a TFLite input: uint8 data as the same bytes in int8."""
    return array.view(np.int8) if array.dtype == np.uint8 else array


def check_uint8(path, op_name: str, label: str, *, feeds: list[list[np.ndarray]] | None = None,
                runs: int = 3, seed: int = 0) -> None:
    """Exact on the stored bytes against TFLite and Arm for a model with uint8 I/O.

    TFLite gets uint8 arrays; our reference model and Arm's get the same bytes
    as int8 (TOSA has no unsigned tensors); uint8 outputs are compared as bytes.
    """
    module, conversion = convert(path)
    outcome = _outcome(conversion, op_name)
    assert (outcome["path"], outcome["pattern"]) == ("integer", label), outcome
    assert {o["path"] for o in conversion.outcomes} <= {"integer", "float"}, conversion.outcomes
    data = path.read_bytes()
    if feeds is None:
        rng = _rng(seed)
        graph = module.main
        specs = [(tuple(v.type.shape), _tflite_type(path, i)) for i, v in enumerate(graph.inputs)]
        feeds = [[full_range(rng, shape, t) for shape, t in specs] for _ in range(runs)]
    tosa = write_tosa(module)
    for run in feeds:
        expected = reference_outputs(data, run)
        stored = [_stored_bytes(a) for a in run]
        ours = list(reference_model.run(module, stored).values())
        for theirs, mine in zip(expected, ours):
            assert mine.shape == theirs.shape
            assert np.array_equal(mine.view(theirs.dtype) if theirs.dtype == np.uint8 else mine,
                                  theirs), f"{path.name}: ours {mine} TFLite {theirs}"
        arm = run_arm(tosa, stored, [a.dtype for a in ours])
        assert arm.status == "valid", (arm.status, arm.message)
        for mine, theirs in zip(ours, arm.outputs):
            assert np.array_equal(mine, theirs)


def _tflite_type(path, index: int) -> str:
    b = TfliteBuilder()
    from conftest import unpack_model

    model = unpack_model(path.read_bytes())
    graph = model.subgraphs[0]
    tensor_type = graph.tensors[graph.inputs[index]].type
    names = {getattr(b.s.TensorType, n): n for n in NUMPY}
    return names[tensor_type]


def check_stored(path, op_name: str, type_name: str, feeds: list[list[np.ndarray]]) -> None:
    """`check_uint8` for a uint8 model (TFLite takes uint8 arrays, our graph their
    bytes), `check_integer` for int8 / int16 ones; the op's label from LABELS."""
    if type_name == "UINT8":
        check_uint8(path, op_name, LABELS[op_name], feeds=feeds)
    else:
        check_integer(path, op_name, inputs=feeds)


# ---------------------------------------------------------------------------
# The model zoo

ZOO = [
    *(f"unit/int8/{name}.tflite" for name in (
        "arg_max", "arg_min", "equal", "equal_rounded", "greater", "greater_equal", "less",
        "less_equal", "less_mixed_ranges", "maximum", "maximum_mixed_ranges", "minimum",
        "reduce_max", "reduce_min", "select", "select_v2", "squared_difference")),
    *(f"unit/int16x8/{name}.tflite" for name in (
        "maximum", "maximum_mixed_ranges", "minimum", "reduce_max", "reduce_min")),
]
_ZOO_OP = {"equal_rounded": "equal", "less_mixed_ranges": "less",
           "maximum_mixed_ranges": "maximum", "select": "greater", "select_v2": "greater"}


@pytest.mark.parametrize("relative", ZOO)
def test_zoo_model(relative: str) -> None:
    stem = relative.rsplit("/", 1)[1].removesuffix(".tflite")
    check_integer(model_path(relative), f"tfl.{_ZOO_OP.get(stem, stem)}", runs=3)


# ---------------------------------------------------------------------------
# Comparisons: TFLite scales (x - zp) 2^8 by each input's scale, double rounded


COMPARISON_OPS = ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL")


def _comparison_feeds(rng, shape_a, shape_b, type_name, runs=3):
    """Random stored values; where the shapes agree, half of b repeats a (ties)."""
    feeds = []
    for _ in range(runs):
        a = full_range(rng, shape_a, type_name)
        b = full_range(rng, shape_b, type_name)
        if shape_a == shape_b:
            b.reshape(-1)[: b.size // 2] = a.reshape(-1)[: b.size // 2]
        feeds.append([a, b])
    return feeds


COMPARISON_CASES = [
    # (id, type, (scale, zp) of a, (scale, zp) of b, shape a, shape b)
    pytest.param("INT8", (0.05, 3), (0.05, 3), (2, 3, 8), (2, 3, 8), id="int8_same"),
    pytest.param("INT8", (0.05, 3), (0.0501, -4), (2, 3, 8), (2, 3, 8), id="int8_close_scales"),
    pytest.param("INT8", (0.3, -128), (0.7, 127), (4, 16), (4, 16), id="int8_extreme_zp"),
    pytest.param("INT8", (1e-6, 10), (1e-6, -10), (4, 16), (4, 16), id="int8_tiny_scale_collapse"),
    pytest.param("INT8", (0.999, 0), (0.5, 1), (4, 16), (4, 16), id="int8_scale_below_one"),
    pytest.param("INT8", (0.02, 5), (0.04, -3), (2, 3, 4), (4,), id="int8_broadcast_rank"),
    pytest.param("UINT8", (0.05, 131), (0.0501, 124), (4, 16), (4, 16), id="uint8_close_scales"),
    pytest.param("UINT8", (0.1, 0), (0.1, 255), (4, 16), (4, 16), id="uint8_extreme_zp"),
]


@pytest.mark.parametrize("op", COMPARISON_OPS)
@pytest.mark.parametrize("type_name,qa,qb,shape_a,shape_b", COMPARISON_CASES)
def test_comparison(tmp_path, op, type_name, qa, qb, shape_a, shape_b) -> None:
    out_shape = np.broadcast_shapes(shape_a, shape_b)
    path = one_op(tmp_path, op, [T(shape_a, type_name, *qa), T(shape_b, type_name, *qb)],
                  [T(out_shape, "BOOL")])
    feeds = _comparison_feeds(_rng(len(op)), shape_a, shape_b, type_name)
    check_stored(path, f"tfl.{op.lower()}", type_name, feeds)


def test_comparison_constant_operand(tmp_path) -> None:
    """A constant threshold (as `x > 0.5` converts) is scaled like a run-time input."""
    threshold = T((1,), "INT8", 0.004, -128, data=np.array([125], np.int8))
    path = one_op(tmp_path, "GREATER", [T((3, 16), "INT8", 0.02, 7), threshold],
                  [T((3, 16), "BOOL")])
    check_integer(path, "tfl.greater")


@pytest.mark.parametrize("op", ("EQUAL", "LESS", "GREATER_EQUAL"))
def test_comparison_int16_same_scale(tmp_path, op) -> None:
    """int16 (TFLite has EQUAL, LESS, GREATER_EQUAL) compares stored values."""
    path = one_op(tmp_path, op, [T((4, 16), "INT16", 3e-4), T((4, 16), "INT16", 3e-4)],
                  [T((4, 16), "BOOL")])
    check_integer(path, f"tfl.{op.lower()}", inputs=_comparison_feeds(_rng(1), (4, 16), (4, 16),
                                                                        "INT16"))


@pytest.mark.parametrize("op,compare", [("NOT_EQUAL", np.not_equal), ("GREATER", np.greater),
                                        ("LESS_EQUAL", np.less_equal)])
def test_comparison_int16_without_tflite_kernel(tmp_path, op, compare) -> None:
    """TFLite has no int16 NOT_EQUAL, GREATER, LESS_EQUAL; with one quantization
    the comparison of the values is that of the stored integers, which ours and
    Arm's reference model must give."""
    path = one_op(tmp_path, op, [T((4, 16), "INT16", 3e-4), T((1, 16), "INT16", 3e-4)],
                  [T((4, 16), "BOOL")])
    module, conversion = convert(path)
    assert _outcome(conversion, f"tfl.{op.lower()}")["pattern"] == "comparison_int"
    a, b = _comparison_feeds(_rng(2), (4, 16), (1, 16), "INT16", runs=1)[0]
    b[0, :4] = a[0, :4]
    ours = next(iter(reference_model.run(module, [a, b]).values()))
    assert np.array_equal(ours, compare(a, b))
    arm = run_arm(write_tosa(module), [a, b], [ours.dtype])
    assert arm.status == "valid" and np.array_equal(arm.outputs[0], ours)


def test_comparison_refusals(tmp_path) -> None:
    """Scales >= 1 (TFLite's scaling is undefined there) and int16 inputs of
    different scales (TFLite compares their stored values) take the fallback."""
    big = one_op(tmp_path, "LESS", [T((4,), "INT8", 2.0, 1), T((4,), "INT8", 0.9)],
                 [T((4,), "BOOL")], name="big.tflite")
    check_fallback(big, "tfl.less", "scale 2.0 >= 1")
    mixed = one_op(tmp_path, "LESS", [T((4,), "INT16", 3e-4), T((4,), "INT16", 6e-4)],
                   [T((4,), "BOOL")], name="mixed.tflite")
    check_fallback(mixed, "tfl.less", "int16 operands with different quantization")


# ---------------------------------------------------------------------------
# ARG_MAX / ARG_MIN: stored values, first index on ties


def _arg_options(op: str):
    table = "ArgMaxOptions" if op == "ARG_MAX" else "ArgMinOptions"
    return lambda b: b.options(table, outputType=b.s.TensorType.INT32)


def _with_ties_and_extremes(rng, shape, type_name) -> np.ndarray:
    """Random values, the first row constant (all tied), the type's extremes present."""
    x = full_range(rng, shape, type_name)
    info = np.iinfo(NUMPY[type_name])
    flat = x.reshape(shape[0], -1)
    flat[0] = flat[0, 0]
    flat[1, ::3] = info.min
    flat[-1, 1::3] = info.max
    if len(flat) > 2 and flat.shape[1] > 1:
        # min + 1 before min: order-reversing by NEGATE would saturate -128 onto it.
        flat[2, :2] = info.min + 1, info.min
    return x


ARG_CASES = [
    pytest.param("INT8", (4, 5), 1, id="int8_last_axis"),
    pytest.param("INT8", (6, 5), 0, id="int8_axis0"),
    pytest.param("INT8", (3, 7, 4), 1, id="int8_middle_axis"),
    pytest.param("INT8", (3, 4, 5), -1, id="int8_negative_axis"),
    pytest.param("UINT8", (4, 9), 1, id="uint8_last_axis"),
    pytest.param("UINT8", (5, 3, 2), 0, id="uint8_axis0"),
]


@pytest.mark.parametrize("op", ("ARG_MAX", "ARG_MIN"))
@pytest.mark.parametrize("type_name,shape,axis", ARG_CASES)
def test_arg_max_min(tmp_path, op, type_name, shape, axis) -> None:
    out_shape = tuple(d for i, d in enumerate(shape) if i != axis % len(shape))
    zp = 131 if type_name == "UINT8" else -7
    path = one_op(tmp_path, op, [T(shape, type_name, 0.02, zp),
                                 T((1,), "INT32", data=np.array([axis], np.int32))],
                  [T(out_shape, "INT32")], _arg_options(op))
    rng = _rng(axis + 5)
    feeds = [[_with_ties_and_extremes(rng, shape, type_name)] for _ in range(3)]
    if type_name == "UINT8":
        check_uint8(path, f"tfl.{op.lower()}", "arg_max_min_int", feeds=feeds)
    else:
        check_integer(path, f"tfl.{op.lower()}", inputs=feeds)


# ---------------------------------------------------------------------------
# REDUCE_MAX / REDUCE_MIN: stored values, one quantization in and out

REDUCE_CASES = [
    pytest.param("INT8", (2, 3, 4, 5), [1, 2], False, id="int8_hw"),
    pytest.param("INT8", (2, 3, 4), [-1, 0, -1], True, id="int8_negative_duplicate_keep"),
    pytest.param("INT8", (3, 4), [0, 1], False, id="int8_all_axes"),
    pytest.param("INT16", (2, 6, 5), [2], True, id="int16_last_keep"),
    pytest.param("UINT8", (3, 4, 5), [0, 2], False, id="uint8_two_axes"),
]


@pytest.mark.parametrize("op", ("REDUCE_MAX", "REDUCE_MIN"))
@pytest.mark.parametrize("type_name,shape,axes,keep", REDUCE_CASES)
def test_reduce_max_min(tmp_path, op, type_name, shape, axes, keep) -> None:
    reduced = {a % len(shape) for a in axes}
    out_shape = tuple(1 if i in reduced else d for i, d in enumerate(shape) if keep or
                      i not in reduced)
    zp = {"INT8": 5, "INT16": 0, "UINT8": 140}[type_name]
    path = one_op(tmp_path, op, [T(shape, type_name, 0.1, zp),
                                 T((len(axes),), "INT32", data=np.array(axes, np.int32))],
                  [T(out_shape, type_name, 0.1, zp)],
                  lambda b: b.options("ReducerOptions", keepDims=keep))
    rng = _rng(len(shape))
    feeds = [[_with_ties_and_extremes(rng, shape, type_name)] for _ in range(3)]
    if type_name == "UINT8":
        check_uint8(path, f"tfl.{op.lower()}", "reduce_max_min_int", feeds=feeds)
    else:
        check_integer(path, f"tfl.{op.lower()}", inputs=feeds)


def test_reduce_max_differing_quantization_falls_back(tmp_path) -> None:
    """TFLite refuses to run it; the float path gives the real maximum."""
    path = one_op(tmp_path, "REDUCE_MAX", [T((4, 5), "INT8", 0.1, 5),
                                           T((1,), "INT32", data=np.array([1], np.int32))],
                  [T((4,), "INT8", 0.2, 5)], lambda b: b.options("ReducerOptions"))
    check_fallback(path, "tfl.reduce_max", "differ in quantization")


# ---------------------------------------------------------------------------
# MAXIMUM / MINIMUM: stored values, one quantization

EXTREMA_CASES = [
    pytest.param("INT8", -128, (2, 3, 4), (2, 3, 4), id="int8_zp_min"),
    pytest.param("INT8", 127, (2, 3, 4), (4,), id="int8_zp_max_broadcast"),
    pytest.param("INT16", 0, (3, 8), (3, 1), id="int16_broadcast"),
    pytest.param("UINT8", 200, (3, 8), (3, 8), id="uint8"),
]


@pytest.mark.parametrize("op", ("MAXIMUM", "MINIMUM"))
@pytest.mark.parametrize("type_name,zp,shape_a,shape_b", EXTREMA_CASES)
def test_maximum_minimum(tmp_path, op, type_name, zp, shape_a, shape_b) -> None:
    out_shape = np.broadcast_shapes(shape_a, shape_b)
    path = one_op(tmp_path, op, [T(shape_a, type_name, 0.03, zp), T(shape_b, type_name, 0.03, zp)],
                  [T(out_shape, type_name, 0.03, zp)])
    feeds = _comparison_feeds(_rng(zp % 7), shape_a, shape_b, type_name)
    check_stored(path, f"tfl.{op.lower()}", type_name, feeds)


def test_maximum_constant_operand(tmp_path) -> None:
    """MAXIMUM with a constant (a ReLU-like floor, as Keras clips convert)."""
    floor = T((1,), "INT8", 0.05, -3, data=np.array([17], np.int8))
    path = one_op(tmp_path, "MAXIMUM", [T((2, 16), "INT8", 0.05, -3), floor],
                  [T((2, 16), "INT8", 0.05, -3)])
    check_integer(path, "tfl.maximum")


def test_maximum_differing_quantization_falls_back(tmp_path) -> None:
    """TFLite's kernel takes the larger stored value whatever the scales; that is
    not the maximum of the values, so the float path computes it instead."""
    path = one_op(tmp_path, "MAXIMUM", [T((4,), "INT8", 0.1, 5), T((4,), "INT8", 0.2, 5)],
                  [T((4,), "INT8", 0.1, 5)])
    check_fallback(path, "tfl.maximum", "differ in quantization")


# ---------------------------------------------------------------------------
# SQUARED_DIFFERENCE (int8)

SQUARED_DIFFERENCE_CASES = [
    # (scale, zp) of a, b and the output; shapes of a and b
    pytest.param((0.02, -1), (0.021, 3), (0.03, -128), (16, 256), (16, 256), id="close_scales"),
    pytest.param((0.05, 10), (0.01, -20), (0.2, -100), (16, 256), (256,), id="larger_first_bcast"),
    pytest.param((0.01, 0), (0.05, 0), (0.2, -128), (4, 16), (4, 16), id="larger_second"),
    pytest.param((0.02, -128), (0.02, 127), (0.5, -128), (4, 16), (4, 16), id="extreme_zp"),
    pytest.param((0.02, 0), (0.02, 0), (0.002, -128), (4, 16), (4, 16), id="saturating"),
]


@pytest.mark.parametrize("qa,qb,qo,shape_a,shape_b", SQUARED_DIFFERENCE_CASES)
def test_squared_difference(tmp_path, qa, qb, qo, shape_a, shape_b) -> None:
    out_shape = np.broadcast_shapes(shape_a, shape_b)
    path = one_op(tmp_path, "SQUARED_DIFFERENCE", [T(shape_a, "INT8", *qa), T(shape_b, "INT8", *qb)],
                  [T(out_shape, "INT8", *qo)])
    check_integer(path, "tfl.squared_difference", inputs=_comparison_feeds(
        _rng(3), shape_a, shape_b, "INT8"))


def test_squared_difference_every_pair(tmp_path) -> None:
    """All 65536 pairs of stored values (broadcast 256x1 against 1x256), with
    scales under which ~100 outputs show the output scaling's double rounding."""
    path = one_op(tmp_path, "SQUARED_DIFFERENCE",
                  [T((256, 1), "INT8", 0.08641400933265686, -11),
                   T((1, 256), "INT8", 0.0645114853978157, 12)],
                  [T((256, 256), "INT8", 5.4641973292746115e-06, -128)])
    every = np.arange(-128, 128, dtype=np.int8)
    check_integer(path, "tfl.squared_difference",
                  inputs=[[every.reshape(256, 1), every.reshape(1, 256)]])


def test_squared_difference_output_scale_above_one_falls_back(tmp_path) -> None:
    """(2 max s)^2 / (2^14 s_out) >= 1: TFLite's SmallerThanOneExp multiplier fails."""
    path = one_op(tmp_path, "SQUARED_DIFFERENCE", [T((4,), "INT8", 1.0), T((4,), "INT8", 1.0)],
                  [T((4,), "INT8", 1e-4)])
    check_fallback(path, "tfl.squared_difference", ">= 1")


# ---------------------------------------------------------------------------
# CONCATENATION: uint8 inputs requantized in float32 by TFLite, one TABLE each

CONCAT_UINT8_CASES = [
    # (scale, zp) of the swept input, of the output
    pytest.param((0.05, 131), (0.04, 128), id="scale_and_zp"),
    pytest.param((0.02, 120), (0.02, 128), id="zp_only"),
    pytest.param((0.02, 0), (0.04, 0), id="half_ties"),
    pytest.param((0.3, 3), (0.1, 250), id="saturating"),
    pytest.param((0.007, 255), (0.013, 7), id="extreme_zp"),
    pytest.param((0.1, 128), (0.0009765625, 128), id="ratio_102_4"),
    # Byte 204 (90) rounds the other way if v * s + b is evaluated in double.
    pytest.param((0.03815725818276405, 2), (0.05190415307879448, 60), id="float32_sum_204"),
    pytest.param((0.024599682539701462, 91), (0.016399739310145378, 25), id="float32_sum_90"),
]


@pytest.mark.parametrize("q_in,q_out", CONCAT_UINT8_CASES)
def test_concatenation_uint8_every_byte(tmp_path, q_in, q_out) -> None:
    """All 256 bytes of a requantized input against TFLite, next to a copied input
    (same parameters as the output) and before a third, also requantized one."""
    path = one_op(tmp_path, "CONCATENATION",
                  [T((2, 3), "UINT8", *q_out), T((2, 128), "UINT8", *q_in),
                   T((2, 5), "UINT8", 0.5, 17)],
                  [T((2, 136), "UINT8", *q_out)],
                  lambda b: b.options("ConcatenationOptions", axis=-1))
    every_byte = np.arange(256, dtype=np.uint8).reshape(2, 128)
    rng = _rng(1)
    feeds = [[full_range(rng, (2, 3), "UINT8"), every_byte, full_range(rng, (2, 5), "UINT8")]]
    check_uint8(path, "tfl.concatenation", "concatenation_uint8", feeds=feeds)


def test_concatenation_uint8_axis0(tmp_path) -> None:
    path = one_op(tmp_path, "CONCATENATION",
                  [T((1, 2, 3), "UINT8", 0.05, 131), T((2, 2, 3), "UINT8", 0.04, 128)],
                  [T((3, 2, 3), "UINT8", 0.04, 128)],
                  lambda b: b.options("ConcatenationOptions", axis=0))
    check_uint8(path, "tfl.concatenation", "concatenation_uint8")


def test_concatenation_int16_differing_scales_falls_back(tmp_path) -> None:
    """TFLite copies int16 inputs of other scales unchanged (not their values)."""
    path = one_op(tmp_path, "CONCATENATION", [T((2, 3), "INT16", 3e-4), T((2, 4), "INT16", 6e-4)],
                  [T((2, 7), "INT16", 6e-4)], lambda b: b.options("ConcatenationOptions", axis=1))
    check_fallback(path, "tfl.concatenation", "not a pure move")


# ---------------------------------------------------------------------------
# uint8 bodies: the int8 pattern on int8 twins (stored value - 128)


def _activation(b, name: str):
    return getattr(b.s.ActivationFunctionType, name)


_U8 = "UINT8"
_TWIN_RNG = np.random.default_rng(11)
_CONV_W = _TWIN_RNG.integers(0, 256, (6, 3, 3, 4)).astype(np.uint8)
_DW_W = _TWIN_RNG.integers(0, 256, (1, 3, 3, 8)).astype(np.uint8)
_FC_W = _TWIN_RNG.integers(0, 256, (7, 48)).astype(np.uint8)


def _bias(n: int) -> T:
    return T((n,), "INT32", 0.02 * 0.01, 0, data=_rng(n).integers(-3000, 3000, n))


# id -> (TFL op, one_op arguments after tmp_path)
UINT8_TWIN_CASES = {
    "add_broadcast_relu": ("tfl.add", (
        "ADD", [T((2, 4, 4, 3), _U8, 0.02, 120), T((1, 1, 1, 3), _U8, 0.05, 140)],
        [T((2, 4, 4, 3), _U8, 0.06, 100)],
        lambda b: b.options("AddOptions", fusedActivationFunction=_activation(b, "RELU")))),
    "sub_extreme_zp": ("tfl.sub", (
        "SUB", [T((2, 4, 4, 3), _U8, 0.02, 0), T((2, 4, 4, 3), _U8, 0.05, 255)],
        [T((2, 4, 4, 3), _U8, 0.06, 130)], lambda b: b.options("SubOptions"))),
    "mul_relu6": ("tfl.mul", (
        "MUL", [T((2, 4, 4, 3), _U8, 0.02, 120), T((2, 4, 4, 3), _U8, 0.05, 3)],
        [T((2, 4, 4, 3), _U8, 0.1, 30)],
        lambda b: b.options("MulOptions", fusedActivationFunction=_activation(b, "RELU6")))),
    "conv_same_stride2_weight_zp": ("tfl.conv_2d", (
        "CONV_2D", [T((1, 9, 9, 4), _U8, 0.02, 120), T(_CONV_W.shape, _U8, 0.01, 131, _CONV_W),
                    _bias(6)],
        [T((1, 5, 5, 6), _U8, 0.25, 110)],
        lambda b: b.options("Conv2DOptions", padding=b.s.Padding.SAME, strideH=2, strideW=2,
                            dilationHFactor=1, dilationWFactor=1,
                            fusedActivationFunction=_activation(b, "RELU")))),
    "depthwise_multiplier2": ("tfl.depthwise_conv_2d", (
        "DEPTHWISE_CONV_2D", [T((1, 6, 6, 4), _U8, 0.02, 120),
                              T(_DW_W.shape, _U8, 0.01, 100, _DW_W), _bias(8)],
        [T((1, 4, 4, 8), _U8, 0.1, 128)],
        lambda b: b.options("DepthwiseConv2DOptions", padding=b.s.Padding.VALID, strideH=1,
                            strideW=1, depthMultiplier=2, dilationHFactor=1,
                            dilationWFactor=1))),
    "fully_connected_weight_zp": ("tfl.fully_connected", (
        "FULLY_CONNECTED", [T((16, 48), _U8, 0.02, 120), T(_FC_W.shape, _U8, 0.01, 131, _FC_W),
                            _bias(7)],
        [T((16, 7), _U8, 0.3, 120)], lambda b: b.options("FullyConnectedOptions"))),
    "max_pool_same": ("tfl.max_pool_2d", (
        "MAX_POOL_2D", [T((1, 7, 7, 3), _U8, 0.02, 120)], [T((1, 4, 4, 3), _U8, 0.02, 120)],
        lambda b: b.options("Pool2DOptions", padding=b.s.Padding.SAME, strideH=2, strideW=2,
                            filterHeight=3, filterWidth=3))),
    "mean_hw": ("tfl.mean", (
        "MEAN", [T((2, 5, 5, 3), _U8, 0.02, 120), T((2,), "INT32", data=np.array([1, 2]))],
        [T((2, 3), _U8, 0.01, 100)], lambda b: b.options("ReducerOptions"))),
    "softmax": ("tfl.softmax", (
        "SOFTMAX", [T((4, 10), _U8, 0.1, 120)], [T((4, 10), _U8, 1 / 256, 0)],
        lambda b: b.options("SoftmaxOptions", beta=1.0))),
    "select_v2_broadcast": ("tfl.select_v2", (
        "SELECT_V2", [T((4, 6), "BOOL"), T((4, 6), _U8, 0.02, 120), T((1, 6), _U8, 0.02, 120)],
        [T((4, 6), _U8, 0.02, 120)])),
}


@pytest.mark.parametrize("case", UINT8_TWIN_CASES)
def test_uint8_body_through_int8_twins(tmp_path, case) -> None:
    op_name, arguments = UINT8_TWIN_CASES[case]
    check_uint8(one_op(tmp_path, *arguments), op_name, "uint8_as_int8", runs=3)


def test_uint8_average_pool_rounds_like_tflite(tmp_path) -> None:
    """TFLite's uint8 average rounds half up on stored values, where the int8
    pattern rounds the twins' (value - 128) halves away from zero; the uint8
    pattern (legalize/pooling.py) keeps both zero points at -128 so ties
    land as TFLite's do. Sums of 2 over a 2x2 window give exact halves."""
    path = one_op(tmp_path, "AVERAGE_POOL_2D", [T((1, 4, 4, 1), "UINT8", 0.02, 120)],
                  [T((1, 2, 2, 1), "UINT8", 0.02, 120)],
                  lambda b: b.options("Pool2DOptions", padding=b.s.Padding.VALID, strideH=2,
                                      strideW=2, filterHeight=2, filterWidth=2))
    ties = np.array([[0, 2, 1, 1], [0, 0, 1, 1], [255, 253, 7, 8], [254, 254, 9, 9]],
                    np.uint8).reshape(1, 4, 4, 1)
    check_uint8(path, "tfl.average_pool_2d", "average_pool_2d_uint8", feeds=[[ties]])


# ---------------------------------------------------------------------------
# uint8 inputs and outputs around int8 bodies (TFLite converter, uint8 I/O)

QUANTIZE_UINT8_CASES = [
    pytest.param(T((4, 16), "UINT8", 0.02, 128), T((4, 16), "INT8", 0.02, 0), id="u8_i8_offset"),
    pytest.param(T((4, 16), "UINT8", 0.02, 120), T((4, 16), "INT8", 0.03, -7), id="u8_i8"),
    pytest.param(T((4, 16), "INT8", 0.02, 3), T((4, 16), "UINT8", 0.013, 140), id="i8_u8"),
    pytest.param(T((4, 16), "INT8", 0.02, -128), T((4, 16), "UINT8", 0.0021, 255),
                 id="i8_u8_saturating"),
    pytest.param(T((4, 16), "UINT8", 0.02, 120), T((4, 16), "UINT8", 0.013, 0), id="u8_u8"),
]


@pytest.mark.parametrize("source,target", QUANTIZE_UINT8_CASES)
def test_quantize_uint8(tmp_path, source, target) -> None:
    path = one_op(tmp_path, "QUANTIZE", [source], [target])
    check_uint8(path, "tfl.quantize", "quantize_int", runs=4)


def test_uint8_io_model(tmp_path) -> None:
    """What the converter writes with inference_input/output_type=tf.uint8:
    QUANTIZE uint8 -> int8, int8 body, QUANTIZE int8 -> uint8."""
    b = TfliteBuilder()
    x = b.tensor([1, 8, 8, 3], "UINT8", "x", scale=[0.02], zero_point=[128])
    t = b.tensor([1, 8, 8, 3], "INT8", "t", scale=[0.02], zero_point=[0])
    m = b.tensor([1, 8, 8, 3], "INT8", "m", scale=[0.03], zero_point=[-10])
    y = b.tensor([1, 8, 8, 3], "UINT8", "y", scale=[0.05], zero_point=[118])
    b.op("QUANTIZE", [x], [t])
    b.op("MUL", [t, t], [m])
    b.op("QUANTIZE", [m], [y])
    b.io([x], [y])
    path = tmp_path / "uint8_io.tflite"
    path.write_bytes(b.to_bytes())
    check_uint8(path, "tfl.quantize", "quantize_int", runs=3)


def test_uint8_chain_moves_once(tmp_path) -> None:
    """A legacy uint8 body (CONV_2D -> MAX_POOL_2D -> MEAN -> SOFTMAX) is exact,
    and the data moves to int8 once at the input and back once at the output:
    a uint8 result consumed by the next twin op is not moved back and forth."""
    rng = _rng(4)
    weights = rng.integers(0, 256, (6, 3, 3, 4)).astype(np.uint8)
    b = TfliteBuilder()
    x = b.tensor([1, 9, 9, 4], "UINT8", "x", scale=[0.02], zero_point=[120])
    w = b.tensor([6, 3, 3, 4], "UINT8", "w", data=weights, scale=[0.01], zero_point=[131])
    bias = b.tensor([6], "INT32", "bias", data=rng.integers(-3000, 3000, 6).astype(np.int32),
                    scale=[0.0002], zero_point=[0])
    conv = b.tensor([1, 9, 9, 6], "UINT8", "conv", scale=[0.25], zero_point=[0])
    pool = b.tensor([1, 5, 5, 6], "UINT8", "pool", scale=[0.25], zero_point=[0])
    axes = b.tensor([2], "INT32", "axes", data=np.array([1, 2], np.int32))
    mean = b.tensor([1, 6], "UINT8", "mean", scale=[0.1], zero_point=[3])
    y = b.tensor([1, 6], "UINT8", "y", scale=[1 / 256], zero_point=[0])
    b.op("CONV_2D", [x, w, bias], [conv], options=b.options(
        "Conv2DOptions", padding=b.s.Padding.SAME, strideH=1, strideW=1, dilationHFactor=1,
        dilationWFactor=1, fusedActivationFunction=_activation(b, "RELU")))
    b.op("MAX_POOL_2D", [conv], [pool], options=b.options(
        "Pool2DOptions", padding=b.s.Padding.SAME, strideH=2, strideW=2, filterHeight=3,
        filterWidth=3))
    b.op("MEAN", [pool, axes], [mean], options=b.options("ReducerOptions"))
    b.op("SOFTMAX", [mean], [y], options=b.options("SoftmaxOptions", beta=1.0))
    b.io([x], [y])
    path = tmp_path / "uint8_chain.tflite"
    path.write_bytes(b.to_bytes())
    check_uint8(path, "tfl.conv_2d", "uint8_as_int8", runs=3)
    module, _ = convert(path)
    unsigned = [op for _, op in module.ops() if op.name == "tosa.rescale"
                and (op.attrs["input_unsigned"] or op.attrs["output_unsigned"])]
    assert len(unsigned) == 2
