"""lower_quant_ops and strip_func_quant_types: numbers against TFLite's semantics.

Every case lowers a single qcast or dcast, strips the quantized types, folds
the storage casts, checks the result is a valid TOSA graph (our verifier), and
runs it on our reference model. The expected numbers are derived here by hand
from TFLite's reference kernels (tensorflow/lite/kernels/internal/reference/
quantize.h and dequantize.h):

    QUANTIZE:   clamp(round_half_away(float32(x) / float32(scale)) + zp)
    DEQUANTIZE: float32(double(scale) * (q - zp))

and, for a few cases, by the TFLite interpreter itself (BUILTIN_REF kernels)
on a QUANTIZE / DEQUANTIZE model; the written `.tosa` file also runs on
Arm's reference model (tosa-tools). The one known difference (documented in
tfl2tosa/passes/lower_quant.py): x * fl(1/scale) replaces the division, which moves
inputs lying within about an ulp of a half-integer of x/scale by one LSB when
the scale is not a power of two; the tests pin exactly where.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import reference_model
from tfl2tosa.errors import ConversionError
from tfl2tosa.ir.builder import Builder
from tfl2tosa.ir.core import Graph, Module, Op
from tfl2tosa.ir.printer import print_module
from tfl2tosa.ir.types import (
    DYNAMIC,
    TensorType,
    UniformQuantized,
    UniformQuantizedPerAxis,
    f16,
    f32,
    i4,
    i8,
    i16,
    i32,
    u8,
    u16,
    u32,
)
from tfl2tosa.passes.lower_quant import lower_quant_ops
from tfl2tosa.passes.simplify import canonicalize, cse
from tfl2tosa.passes.strip_quant_types import (
    assert_no_quant_types,
    quantized_values,
    strip_func_quant_types,
)
from tfl2tosa.quant import QUANT_OPS, dcast, qcast
from tfl2tosa.tosa.verify import verify

ALL_EXTENSIONS_AND_DYNAMIC = ("EXT-INT16", "EXT-DYNAMIC")


# ---------------------------------------------------------------------------
# TFLite's semantics, by hand


def round_half_away(y: np.ndarray) -> np.ndarray:
    """C's std::round: ties away from zero (exact for float32 inputs in float64)."""
    y = y.astype(np.float64)
    return np.sign(y) * np.floor(np.abs(y) + 0.5)


def params_along(values, axis, rank):
    """Scales or zero points shaped to broadcast along `axis` of a rank-`rank` array."""
    array = np.asarray(values)
    if axis is None:
        return array.reshape(())
    shape = [1] * rank
    shape[axis] = array.size
    return array.reshape(shape)


def tflite_quantize(x: np.ndarray, q) -> np.ndarray:
    """The stored integers TFLite's QUANTIZE produces, clamped to the type's bounds."""
    scales, zps, axis = _params(q)
    scale = params_along(np.float32(scales), axis, x.ndim).astype(np.float32)
    with np.errstate(over="ignore"):  # huge x / small scale is inf, as in C
        quotient = x.astype(np.float32) / scale                # float32 division
    value = round_half_away(quotient) + params_along(zps, axis, x.ndim)
    return np.clip(value, q.storage_min, q.storage_max).astype(np.int64)


def multiply_quantize(x: np.ndarray, q) -> np.ndarray:
    """The same with x * float32(1/scale): what the lowering computes by design."""
    scales, zps, axis = _params(q)
    reciprocal = params_along((1.0 / np.float64(scales)).astype(np.float32), axis, x.ndim)
    value = round_half_away(x.astype(np.float32) * reciprocal) + params_along(zps, axis, x.ndim)
    return np.clip(value, q.storage_min, q.storage_max).astype(np.int64)


def tflite_dequantize(stored: np.ndarray, q) -> np.ndarray:
    scales, zps, axis = _params(q)
    scale = params_along(np.float32(scales).astype(np.float64), axis, stored.ndim)
    zp = params_along(zps, axis, stored.ndim)
    return (scale * (stored.astype(np.int64) - zp)).astype(np.float32)


def _params(q):
    if isinstance(q, UniformQuantizedPerAxis):
        return q.scales, q.zero_points, q.axis
    return (q.scale,), (q.zero_point,), None


def as_storage_bits(values: np.ndarray, q) -> np.ndarray:
    """Stored integers as the signless storage array the stripped graph carries."""
    dtype = {8: np.int8, 16: np.int16, 32: np.int32}[q.storage.bits]
    return values.astype(np.int64).astype(dtype)  # wraps u8/u16 onto their bit patterns


def from_storage_bits(values: np.ndarray, q) -> np.ndarray:
    unsigned = {8: np.uint8, 16: np.uint16}
    if not q.storage.is_signed:
        return values.view(unsigned[q.storage.bits]).astype(np.int64)
    return values.astype(np.int64)


# ---------------------------------------------------------------------------
# Lowered graphs on the reference model


def single_cast_module(kind: str, shape, q) -> Module:
    module = Module()
    graph = module.add_graph(Graph("main"))
    b = Builder(graph)
    if kind == "qcast":
        x = graph.add_input("x", TensorType(shape, q.expressed))
        graph.set_outputs([qcast(b, x, q)])
    else:
        x = graph.add_input("x", TensorType(shape, q))
        graph.set_outputs([dcast(b, x)])
    return module


def lower_and_strip(module: Module, extensions=("EXT-INT16",)) -> Module:
    lower_quant_ops(module)
    strip_func_quant_types(module)
    canonicalize(module)
    cse(module)
    assert_no_quant_types(module)
    assert not [op for _, op in module.ops() if op.dialect != "tosa"]
    verify(module, extensions=extensions)
    return module


def run_qcast(x: np.ndarray, q, shape=None) -> np.ndarray:
    module = lower_and_strip(single_cast_module("qcast", shape or x.shape, q),
                             ALL_EXTENSIONS_AND_DYNAMIC)
    (out,) = reference_model.run(module, [x]).values()
    return from_storage_bits(out, q)


def run_dcast(stored: np.ndarray, q, shape=None) -> np.ndarray:
    module = lower_and_strip(single_cast_module("dcast", shape or stored.shape, q),
                             ALL_EXTENSIONS_AND_DYNAMIC)
    (out,) = reference_model.run(module, [as_storage_bits(stored, q)]).values()
    return out


# ---------------------------------------------------------------------------
# qcast


def test_qcast_ties_round_half_away_from_zero():
    q = UniformQuantized(i8, f32, 0.5, -3)
    # x / 0.5 = -4.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 4.5: TFLite rounds every
    # tie away from zero (TOSA CAST alone would round to even).
    x = np.array([-2.25, -1.25, -0.75, -0.25, 0.25, 0.75, 1.25, 2.25], np.float32)
    expected = np.array([-5, -3, -2, -1, 1, 2, 3, 5]) - 3
    assert np.array_equal(tflite_quantize(x, q), expected)
    assert np.array_equal(run_qcast(x, q), expected)


def test_qcast_just_below_and_above_ties():
    q = UniformQuantized(i8, f32, 0.25, 0)
    ties = np.array([0.125, -0.125, 0.375, -0.375, 10.125], np.float32)
    x = np.concatenate([ties, np.nextafter(ties, np.float32(0)),
                        np.nextafter(ties, np.float32(np.inf)),
                        np.array([0.0, -0.0, 1e-30, -1e-30], np.float32)])
    assert np.array_equal(run_qcast(x, q), tflite_quantize(x, q))
    # 0.49999997 * 4 -> just below 0.5 -> 0, where floor(y + 0.5) would give 1.
    assert run_qcast(np.array([np.float32(0.49999997) * 0.25], np.float32), q)[0] == 0


def test_qcast_saturates():
    q = UniformQuantized(i8, f32, 0.1, 5)
    x = np.array([-1e30, -np.inf, -13.4, -13.3, 12.2, 12.3, 1e30, np.inf, 3.4e38], np.float32)
    expected = tflite_quantize(x, q)
    assert expected.tolist() == [-128, -128, -128, -128, 127, 127, 127, 127, 127]
    assert np.array_equal(run_qcast(x, q), expected)


def test_qcast_narrow_storage_bounds():
    q = UniformQuantized(i8, f32, 1.0, 0, -127, 127)
    x = np.array([-300.0, -127.4, -126.6, 0.0, 126.5, 300.0], np.float32)
    assert run_qcast(x, q).tolist() == [-127, -127, -127, 0, 127, 127]
    q4 = UniformQuantized(i8, f32, 1.0, 0, -8, 7)  # an int4 range held in i8
    assert run_qcast(np.array([-9.0, -8.5, 6.5, 7.0, 9.0], np.float32), q4).tolist() == \
        [-8, -8, 7, 7, 7]


def test_qcast_u8():
    q = UniformQuantized(u8, f32, 1.0 / 128, 128)
    x = np.array([-2.0, -1.0, -0.9921875, 0.0, 0.5, 0.99609375, 0.998, 1.5], np.float32)
    expected = tflite_quantize(x, q)
    assert expected.tolist() == [0, 0, 1, 128, 192, 255, 255, 255]
    assert np.array_equal(run_qcast(x, q), expected)


def test_qcast_i16_and_u16():
    x = np.linspace(-40000, 40000, 257).astype(np.float32) * np.float32(2.0 ** -10)
    q16 = UniformQuantized(i16, f32, 2.0 ** -10)
    assert np.array_equal(run_qcast(x, q16), tflite_quantize(x, q16))
    qu16 = UniformQuantized(u16, f32, 2.0 ** -9, 32768)
    assert np.array_equal(run_qcast(x, qu16), tflite_quantize(x, qu16))


def test_qcast_i32():
    q = UniformQuantized(i32, f32, 2.0 ** -4, 7)
    x = np.array([-1e12, -1000.03125, -0.03125, 0.03125, 123.40625, 1e12], np.float32)
    expected = tflite_quantize(x, q)
    assert expected[0] == -2 ** 31 and expected[-1] == 2 ** 31 - 1
    assert np.array_equal(run_qcast(x, q), expected)


def test_qcast_per_channel_static_and_dynamic():
    q = UniformQuantizedPerAxis(i8, f32, 1, (0.5, 0.25, 2.0), (-3, 0, 10))
    rng = np.random.default_rng(1)
    # Multiples of 1/8 hit exact ties for every channel; the scales are
    # powers of two, so the lowering must be exact.
    x = (rng.integers(-600, 600, size=(4, 3, 5)) / 8).astype(np.float32)
    expected = tflite_quantize(x, q)
    assert np.array_equal(run_qcast(x, q), expected)
    assert np.array_equal(run_qcast(x, q, shape=(DYNAMIC, 3, DYNAMIC)), expected)


def test_qcast_per_channel_axis0():
    q = UniformQuantizedPerAxis(i8, f32, 0, (0.5, 4.0), (1, -1))
    x = np.array([[-1.25, 0.75, 300.0], [-6.0, 2.0, -1000.0]], np.float32)
    expected = [[-3 + 1, 2 + 1, 127], [-2 - 1, 1 - 1, -128]]
    assert tflite_quantize(x, q).tolist() == expected
    assert run_qcast(x, q).tolist() == expected


@pytest.mark.parametrize("storage, scale, zero_point", [
    (i8, 0.1, 3), (i8, 0.3, 3), (i8, 0.0235, 3), (i8, 7.0, 3), (i8, 1.0 / 255, -128),
    (i16, 1.7e-4, 0), (i16, 3.0517578125e-05, 0), (i16, 0.0123, 17)])
def test_qcast_equals_the_float32_division_near_half_integers(storage, scale, zero_point):
    """x / scale divided in float32 then rounded half away, as TFLite's reference
    QUANTIZE does, also where x * (1/scale) rounds to the other side of a
    half-integer (the threshold lookup, not the product, decides)."""
    q = UniformQuantized(storage, f32, float(np.float32(scale)), zero_point)
    s = np.float32(scale)
    rng = np.random.default_rng(7)
    reach = 140 if storage == i8 else 33000
    random = (rng.uniform(-reach, reach, 4000) * s).astype(np.float32)
    ties = ((np.arange(-reach, reach, 1 if storage == i8 else 97) + 0.5)
            * np.float64(s)).astype(np.float32)
    near = [np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))]
    for _ in range(2):
        near += [np.nextafter(near[-2], np.float32(np.inf)),
                 np.nextafter(near[-1], np.float32(-np.inf))]
    x = np.concatenate([random, ties, *near])
    tflite = tflite_quantize(x, q)
    assert np.array_equal(run_qcast(x, q), tflite)
    if np.frexp(s)[0] != 0.5:  # a power of two's reciprocal product is the quotient
        assert not np.array_equal(multiply_quantize(x, q), tflite)  # the product misses


def test_known_difference_example():
    # 19.55f / 0.1f = 195.49998f (TFLite: 195) but 19.55f * 10.0f = 195.5f.
    q = UniformQuantized(i16, f32, float(np.float32(0.1)))
    x = np.array([19.55], np.float32)
    assert tflite_quantize(x, q).tolist() == [195]
    assert multiply_quantize(x, q).tolist() == [196]
    assert run_qcast(x, q).tolist() == [195]


def test_qcast_f16_expressed():
    q = UniformQuantized(i8, f16, 0.5, 0)
    x = np.array([-1.25, -0.25, 0.25, 1.75, 100.0], np.float16)
    assert run_qcast(x, q).tolist() == [-3, -1, 1, 4, 127]


# ---------------------------------------------------------------------------
# dcast


def test_dcast_i8_every_value_exact():
    q = UniformQuantized(i8, f32, float(np.float32(0.0235)), -7)
    stored = np.arange(-128, 128)
    assert np.array_equal(run_dcast(stored, q), tflite_dequantize(stored, q))


def test_dcast_u8_every_value_exact():
    q = UniformQuantized(u8, f32, float(np.float32(1 / 255)), 128)
    stored = np.arange(0, 256)
    out = run_dcast(stored, q)
    assert np.array_equal(out, tflite_dequantize(stored, q))
    assert out[0] < 0 < out[255]  # 0 and 255 are read unsigned


def test_dcast_i16_u16_i32():
    stored = np.array([-32768, -12345, -1, 0, 1, 23456, 32767])
    q16 = UniformQuantized(i16, f32, float(np.float32(3.1e-4)))
    assert np.array_equal(run_dcast(stored, q16), tflite_dequantize(stored, q16))
    qu16 = UniformQuantized(u16, f32, float(np.float32(0.7)), 32768)
    unsigned = stored + 32768
    assert np.array_equal(run_dcast(unsigned, qu16), tflite_dequantize(unsigned, qu16))
    q32 = UniformQuantized(i32, f32, float(np.float32(1e-4)), 3)
    wide = np.array([-2 ** 23, -99999, 0, 1, 2 ** 23])
    assert np.array_equal(run_dcast(wide, q32), tflite_dequantize(wide, q32))


def test_dcast_per_channel_dynamic():
    q = UniformQuantizedPerAxis(i8, f32, 2, (0.1, 0.02, 3.0, 1.5), (0, -128, 127, 5))
    q = UniformQuantizedPerAxis(i8, f32, 2, tuple(float(np.float32(s)) for s in q.scales),
                                q.zero_points)
    stored = np.random.default_rng(3).integers(-128, 128, size=(2, 5, 4))
    expected = tflite_dequantize(stored, q)
    assert np.array_equal(run_dcast(stored, q), expected)
    assert np.array_equal(run_dcast(stored, q, shape=(DYNAMIC, DYNAMIC, 4)), expected)


def test_round_trip_through_lowered_casts():
    # qcast then dcast, lowered separately (no canonicalization between):
    # real values on the quantization grid come back unchanged.
    q = UniformQuantized(i8, f32, 0.25, 4)
    module = Module()
    graph = module.add_graph(Graph("main"))
    b = Builder(graph)
    x = graph.add_input("x", TensorType((6,), f32))
    graph.set_outputs([dcast(b, qcast(b, x, q))])
    lower_and_strip(module)
    grid = np.array([-33.0, -1.25, 0.0, 0.25, 10.75, 30.75], np.float32)
    (out,) = reference_model.run(module, [grid]).values()
    assert np.array_equal(out, grid)


# ---------------------------------------------------------------------------
# The TFLite interpreter itself


@pytest.fixture(scope="module")
def tflite_interpreter():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    def run(model: bytes, x: np.ndarray) -> np.ndarray:
        with warnings.catch_warnings():  # "tf.lite.Interpreter is deprecated" (LiteRT)
            warnings.simplefilter("ignore", UserWarning)
            interpreter = tf.lite.Interpreter(
                model_content=model,
                experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
        interpreter.allocate_tensors()
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])

    return run


def one_op_model(builder, op: str, x_type: str, y_type: str, shape, scale, zp, axis=0,
                 quantized_input=False) -> bytes:
    quant = {"scale": list(scale), "zero_point": list(zp), "axis": axis}
    x = builder.tensor(list(shape), x_type, "x", **(quant if quantized_input else {}))
    y = builder.tensor(list(shape), y_type, "y", **({} if quantized_input else quant))
    builder.op(op, [x], [y])
    builder.io([x], [y])
    return builder.to_bytes()


@pytest.mark.parametrize("storage, type_name, zp", [(i8, "INT8", -3), (u8, "UINT8", 128),
                                                    (i16, "INT16", 0)])
def test_qcast_matches_tflite_quantize(builder, tflite_interpreter, storage, type_name, zp):
    scale = 0.5
    q = UniformQuantized(storage, f32, scale, zp)
    ties = (np.arange(-300, 300) / 4).astype(np.float32)  # every quarter: ties included
    x = np.concatenate([ties, [1e9, -1e9]]).astype(np.float32)
    model = one_op_model(builder, "QUANTIZE", "FLOAT32", type_name, x.shape, [scale], [zp])
    expected = tflite_interpreter(model, x).astype(np.int64)
    assert np.array_equal(expected, tflite_quantize(x, q))  # our reading of TFLite
    assert np.array_equal(run_qcast(x, q), expected)


def test_qcast_matches_tflite_quantize_per_channel(builder, tflite_interpreter):
    scales, zps = [0.5, 0.25, 2.0], [0, 0, 0]
    q = UniformQuantizedPerAxis(i8, f32, 1, tuple(scales), tuple(zps))
    x = (np.arange(-120, 120) / 8).astype(np.float32).reshape(20, 3, 4)
    model = one_op_model(builder, "QUANTIZE", "FLOAT32", "INT8", x.shape, scales, zps, axis=1)
    expected = tflite_interpreter(model, x).astype(np.int64)
    assert np.array_equal(run_qcast(x, q), expected)


@pytest.mark.parametrize("storage, type_name, zp, values", [
    (i8, "INT8", -7, np.arange(-128, 128)), (u8, "UINT8", 131, np.arange(0, 256)),
    (i16, "INT16", 0, np.arange(-32768, 32768, 255)),
])
def test_dcast_matches_tflite_dequantize(builder, tflite_interpreter, storage, type_name, zp,
                                         values):
    scale = float(np.float32(0.0235))
    q = UniformQuantized(storage, f32, scale, zp)
    dtype = {"INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16}[type_name]
    model = one_op_model(builder, "DEQUANTIZE", type_name, "FLOAT32", values.shape, [scale],
                         [zp], quantized_input=True)
    expected = tflite_interpreter(model, values.astype(dtype))
    assert np.array_equal(run_dcast(values, q), expected)


# ---------------------------------------------------------------------------
# What the lowering emits, and what it refuses


def test_lowered_op_sequence():
    # Per tensor with a static shape: the threshold lookup decides the rounding.
    module = single_cast_module("qcast", (2, 3), UniformQuantized(u8, f32, 0.5, 128))
    lower_quant_ops(module)
    names = [op.name for _, op in module.ops() if op.name not in ("tosa.const",
                                                                   "tosa.const_shape")]
    assert names == ["tosa.abs", "tosa.mul", "tosa.add", "tosa.floor", "tosa.clamp",
                     "tosa.cast", "tosa.reshape", "tosa.gather", "tosa.reshape",
                     "tosa.greater_equal", "tosa.select", "tosa.gather", "tosa.reshape",
                     "tosa.greater", "tosa.select", "tosa.add", "tosa.sub", "tosa.greater_equal",
                     "tosa.sub", "tosa.select", "tosa.add", "tosa.clamp", "tosa.cast",
                     "tosa.cast", "quant.scast"]
    # A dynamic shape (no GATHER table index) keeps the reciprocal product.
    module = single_cast_module("qcast", (DYNAMIC, 3), UniformQuantized(u8, f32, 0.5, 128))
    lower_quant_ops(module)
    names = [op.name for _, op in module.ops() if op.name != "tosa.const"]
    assert names == ["tosa.mul", "tosa.abs", "tosa.floor", "tosa.sub", "tosa.greater_equal",
                     "tosa.add", "tosa.select", "tosa.greater", "tosa.sub", "tosa.select",
                     "tosa.add", "tosa.clamp", "tosa.cast", "tosa.cast", "quant.scast"]
    graph = module.main
    assert graph.outputs[0].name == "qcast"  # the final scast takes the cast's name
    clamp = next(op for op in graph.ops if op.name == "tosa.clamp")
    assert (clamp.attrs["min_val"], clamp.attrs["max_val"]) == (0.0, 255.0)
    mul = graph.ops[[op.name for op in graph.ops].index("tosa.mul")]
    shift = mul.operands[2].owner.attrs["values"]
    assert shift.dtype == np.int8 and shift.tolist() == [0]

    module = single_cast_module("dcast", (2, 3), UniformQuantized(u8, f32, 0.5, 128))
    lower_quant_ops(module)
    names = [op.name for _, op in module.ops() if op.name != "tosa.const"]
    assert names == ["quant.scast", "tosa.cast", "tosa.bitwise_and", "tosa.cast", "tosa.sub",
                     "tosa.mul"]


def test_per_channel_constants_have_equal_rank():
    q = UniformQuantizedPerAxis(i8, f32, 1, (0.5, 0.25, 2.0), (1, 2, 3))
    module = single_cast_module("dcast", (DYNAMIC, 3, 7), q)
    lower_quant_ops(module)
    shapes = {op.result.type.shape for op in module.main.ops if op.name == "tosa.const"}
    assert shapes == {(1, 3, 1), (1,)}


def test_zero_points_of_zero_emit_no_add_or_sub():
    def adds(q) -> int:
        module = single_cast_module("qcast", (4,), q)
        lower_quant_ops(module)
        return [op.name for op in module.main.ops].count("tosa.add")

    assert adds(UniformQuantized(i8, f32, 0.5)) + 1 == adds(UniformQuantized(i8, f32, 0.5, 3))


@pytest.mark.parametrize("kind, shape, q, message", [
    ("qcast", None, UniformQuantized(i8, f32, 0.5), "ranked tensor"),
    ("dcast", (4,), UniformQuantized(i4, f32, 0.5, 0, -7, 7), "storage type i4"),
    ("qcast", (4,), UniformQuantized(u32, f32, 0.5), "storage type ui32"),
])
def test_unlowerable_casts_raise(kind, shape, q, message):
    module = single_cast_module(kind, shape, q)
    with pytest.raises(ConversionError, match=message):
        lower_quant_ops(module)


def test_scalar_casts_cannot_be_lowered():
    module = Module()
    graph = module.add_graph(Graph("main"))
    x = graph.add_input("x", f32)
    graph.set_outputs([graph.append(Op("quant.qcast", [x], [UniformQuantized(i8, f32, 1.0)]))
                       .result])
    with pytest.raises(ConversionError, match="ranked tensor"):
        lower_quant_ops(module)


# ---------------------------------------------------------------------------
# strip_func_quant_types on TOSA ops that carry quantized types


Q8 = UniformQuantized(i8, f32, 0.5, -3)
TQ = TensorType((1, 4), Q8)


def integer_path_module() -> Module:
    """main(x: q) -> (clamp(x): q, clamp(x) dequantized); body(y: q) -> y (control flow callee)."""
    module = Module()
    graph = module.add_graph(Graph("main"))
    x = graph.add_input("x", TQ)
    clamp = graph.append(Op("tosa.clamp", [x], [TQ], {"min_val": -3, "max_val": 127,
                                                     "nan_mode": "PROPAGATE"},
                            result_names=["relu"]))
    b = Builder(graph)
    graph.set_outputs([clamp.result, dcast(b, clamp.result)])
    body = module.add_graph(Graph("body"))
    y = body.add_input("y", TQ)
    body.set_outputs([y])
    return module


def test_strip_retypes_integer_path_ops_and_signatures():
    module = integer_path_module()
    strip_func_quant_types(module)
    # Before folding, quantized types survive only inside scast pairs.
    assert all(v.type.element is not Q8 or v.owner is None or v.owner.name in QUANT_OPS
               for _, op in module.ops() for v in op.results)
    canonicalize(module)
    main = module.main
    assert [op.name for op in main.ops] == ["tosa.clamp", "quant.scast", "quant.dcast"]
    clamp = main.ops[0]
    assert main.inputs[0].type == TensorType((1, 4), i8) and clamp.operands == main.inputs
    assert clamp.result.type == TensorType((1, 4), i8) and clamp.result.name == "relu"
    assert main.outputs[0] is clamp.result
    assert module.graphs["body"].inputs[0].type == TensorType((1, 4), i8)
    assert module.graphs["body"].outputs == module.graphs["body"].inputs
    # Only the scast feeding the (unlowered) dcast keeps a quantized type.
    assert quantized_values(module) == ["main: relu/scast (tensor<1x4x!quant.uniform<i8:f32, "
                                        "0.5:-3>>)"]
    lower_quant_ops(module)
    strip_func_quant_types(module)
    canonicalize(module)
    assert_no_quant_types(module)


def test_assert_no_quant_types_names_the_offenders():
    module = integer_path_module()
    with pytest.raises(Exception, match=r"main: x \(tensor<1x4x!quant"):
        assert_no_quant_types(module)


def test_full_pipeline_on_a_fallback_shaped_graph():
    # dcast -> float op -> qcast between quantized graph boundaries, as the
    # legalization fallback produces it: only TOSA ops and storage types remain.
    module = Module()
    graph = module.add_graph(Graph("main"))
    x = graph.add_input("x", TQ)
    b = Builder(graph)
    real = dcast(b, x)
    doubled = b.op("tosa.add", [real, real], TensorType((1, 4), f32))
    graph.set_outputs([qcast(b, doubled, UniformQuantized(i8, f32, 0.25, 1))])
    lower_and_strip(module)
    text = print_module(module)
    assert "!quant" not in text and "quant." not in text
    stored = np.array([[-128, -3, 0, 127]])
    (out,) = reference_model.run(module, [stored.astype(np.int8)]).values()
    real_values = tflite_dequantize(stored, Q8)
    expected = tflite_quantize(real_values + real_values, UniformQuantized(i8, f32, 0.25, 1))
    assert np.array_equal(out.astype(np.int64), expected)


# ---------------------------------------------------------------------------
# Arm's reference model (tosa-tools) runs the written `.tosa` file


def test_lowered_casts_on_arms_reference_model():
    from arm import run_arm

    from tfl2tosa.tosa.writer import write_tosa

    q = UniformQuantizedPerAxis(i8, f32, 1, (0.5, 0.1, 2.0), (-3, 0, 10))
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-200, 200, (6, 3, 5)),
                        (rng.integers(-400, 400, (6, 3, 5)) / 4)]).astype(np.float32)
    module = lower_and_strip(single_cast_module("qcast", x.shape, q))
    outcome = run_arm(write_tosa(module), [x], [np.dtype(np.int8)])
    assert outcome.status == "valid"
    assert np.array_equal(outcome.outputs[0].astype(np.int64), multiply_quantize(x, q))
    assert np.array_equal(outcome.outputs[0], list(reference_model.run(module, [x]).values())[0])

    qu8 = UniformQuantized(u8, f32, float(np.float32(0.0235)), 131)
    stored = np.arange(256)
    module = lower_and_strip(single_cast_module("dcast", stored.shape, qu8))
    outcome = run_arm(write_tosa(module), [as_storage_bits(stored, qu8)],
                      [np.dtype(np.float32)])
    assert outcome.status == "valid"
    assert np.array_equal(outcome.outputs[0], tflite_dequantize(stored, qu8))


@pytest.mark.parametrize("type_name, scale, zero_point", [
    ("INT16", 1.7e-4, 0), ("INT8", 0.1, 3), ("INT16", 0.0123, 0), ("INT8", 0.0123, -5)])
def test_quantize_dequantize_model_matches_tflite(tmp_path, type_name, scale, zero_point):
    """float -> QUANTIZE -> DEQUANTIZE -> float, exact against TFLite's interpreter (and
    Arm's model) on inputs at, and a few floats around, the half-integer ties of
    `x / scale`, where the reciprocal product used to round the other way."""
    from conftest import TfliteBuilder
    from e2e import check_model

    b = TfliteBuilder()
    size = 4096
    x = b.tensor([1, size], "FLOAT32", "x")
    q = b.tensor([1, size], type_name, "q", scale=[scale], zero_point=[zero_point])
    y = b.tensor([1, size], "FLOAT32", "y")
    b.op("QUANTIZE", [x], [q])
    b.op("DEQUANTIZE", [q], [y])
    b.io([x], [y])
    path = tmp_path / "quantize_dequantize.tflite"
    path.write_bytes(b.to_bytes())
    s = np.float32(scale)
    reach = 120 if type_name == "INT8" else 32000
    halves = np.random.default_rng(3).integers(-reach, reach, size // 8) + 0.5
    ties = (halves * np.float64(s)).astype(np.float32)
    feeds = [ties]
    for _ in range(3):
        feeds += [np.nextafter(feeds[-1], np.float32(np.inf))]
    feeds += [np.nextafter(ties, np.float32(-np.inf))]
    feeds += [np.nextafter(feeds[-1], np.float32(-np.inf))]
    feeds += [np.random.default_rng(4).uniform(-reach, reach, size // 8).astype(np.float32) * s]
    x_values = np.concatenate(feeds + [ties[:size - sum(f.size for f in feeds)]])
    _, report = check_model(path, inputs=[[x_values.reshape(1, size).astype(np.float32)]])
    assert all(o.exact for o in report.outputs)


@pytest.mark.parametrize("type_name, scale, zero_point", [
    ("INT8", 0.1, 3), ("INT8", 6 / 255, -1), ("INT16", 1.7e-4, 0), ("INT16", 0.0123, 0)])
def test_quantize_for_each_kernel(tmp_path, type_name, scale, zero_point):
    """float -> QUANTIZE near ties: the default conversion equals TFLite's reference
    kernel, convert(kernels="optimized") its optimized kernel, which rounds
    x * fl(1/scale) half to even (TF 2.20, x86); the two kernels differ here."""
    from conftest import TfliteBuilder
    from e2e import check_against_arm

    from tfl2tosa.pipeline import convert
    from tfl2tosa.validation import as_graph_input

    import tensorflow as tf

    b = TfliteBuilder()
    size = 2048
    x = b.tensor([1, size], "FLOAT32", "x")
    q = b.tensor([1, size], type_name, "q", scale=[scale], zero_point=[zero_point])
    b.op("QUANTIZE", [x], [q])
    b.io([x], [q])
    path = tmp_path / "quantize.tflite"
    path.write_bytes(b.to_bytes())
    reach = 120 if type_name == "INT8" else 32000
    ties = ((np.random.default_rng(5).integers(-reach, reach, size // 4) + 0.5)
            * np.float64(np.float32(scale))).astype(np.float32)
    values = np.concatenate([ties, np.nextafter(ties, np.float32(np.inf)),
                             np.nextafter(ties, np.float32(-np.inf)),
                             np.nextafter(np.nextafter(ties, np.float32(0)), np.float32(0))])
    feeds = [values.reshape(1, size)]
    resolvers = tf.lite.experimental.OpResolverType
    outputs = {}
    for kernels, resolver in (("reference", resolvers.BUILTIN_REF),
                              ("optimized", resolvers.BUILTIN_WITHOUT_DEFAULT_DELEGATES)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            interpreter = tf.lite.Interpreter(model_path=str(path),
                                              experimental_op_resolver_type=resolver)
        interpreter.allocate_tensors()
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], feeds[0])
        interpreter.invoke()
        theirs = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        module, conversion = convert(path, kernels=kernels)
        run = [as_graph_input(a, v) for a, v in zip(feeds, module.main.inputs)]
        (ours,) = reference_model.run(module, run).values()
        assert np.array_equal(np.asarray(ours).reshape(theirs.shape), theirs), kernels
        check_against_arm(module, conversion, [feeds])
        outputs[kernels] = theirs
    assert not np.array_equal(outputs["reference"], outputs["optimized"])
