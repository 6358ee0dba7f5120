"""IR types: printing against hand-written MLIR, integrity rules, and MLIR's own parser.

The expected strings are written by hand from MLIR's syntax (QuantBase.td in
llvm-project). MLIR itself, as embedded in TensorFlow (quant dialect
registered), is the independent judge that each printed type parses and means
the same type. MLIR prints scales as `%e` when six digits are exact
(`5.000000e-01`) and with every digit otherwise (`3.0517578125E-5`); we print
Python's shortest round-trip repr (`0.5`). Both parse to the same double, and
comparing MLIR's re-print of our text with its re-print of the expected value
checks exactly that.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from tfl2tosa.errors import IRError
from tfl2tosa.ir.types import (
    DYNAMIC,
    NoneType,
    ShapeType,
    TensorType,
    UniformQuantized,
    UniformQuantizedPerAxis,
    bf16,
    expressed_type,
    f16,
    f32,
    i1,
    i4,
    i8,
    i16,
    i32,
    is_quantized,
    mlir_float,
    numpy_dtype,
    scalar_type,
    storage_type,
    u8,
    u16,
)


def mlir_reprint(mlir, type_text: str) -> str:
    """MLIR's own spelling of a type, read back from a function argument."""
    out = mlir(f"module {{ func.func @f(%arg0: {type_text}) {{ return }} }}")
    return out.split("%arg0: ", 1)[1].split(") {", 1)[0]


# (id, type, our text, MLIR's own print of the same type)
PER_TENSOR = [
    ("i8_zp-3", UniformQuantized(i8, f32, 0.5, -3),
     "!quant.uniform<i8:f32, 0.5:-3>", "!quant.uniform<i8:f32, 5.000000e-01:-3>"),
    ("i8_zp0_omitted", UniformQuantized(i8, f32, 2.0, 0),
     "!quant.uniform<i8:f32, 2.0>", "!quant.uniform<i8:f32, 2.000000e+00>"),
    ("i8_narrow_bounds", UniformQuantized(i8, f32, 0.25, 0, -127, 127),
     "!quant.uniform<i8<-127:127>:f32, 0.25>", "!quant.uniform<i8<-127:127>:f32, 2.500000e-01>"),
    ("i8_default_bounds_omitted", UniformQuantized(i8, f32, 0.25, 0, -128, 127),
     "!quant.uniform<i8:f32, 0.25>", "!quant.uniform<i8:f32, 2.500000e-01>"),
    ("u8_zp128", UniformQuantized(u8, f32, 0.0078125, 128),
     "!quant.uniform<u8:f32, 0.0078125:128>", "!quant.uniform<u8:f32, 7.812500e-03:128>"),
    ("u8_bounds", UniformQuantized(u8, f32, 1.5, 3, 1, 255),
     "!quant.uniform<u8<1:255>:f32, 1.5:3>", "!quant.uniform<u8<1:255>:f32, 1.500000e+00:3>"),
    ("u16", UniformQuantized(u16, f32, 1.0, 32768),
     "!quant.uniform<u16:f32, 1.0:32768>", "!quant.uniform<u16:f32, 1.000000e+00:32768>"),
    ("i16_symmetric", UniformQuantized(i16, f32, 2.0 ** -15),
     "!quant.uniform<i16:f32, 3.0517578125e-05>", "!quant.uniform<i16:f32, 3.0517578125E-5>"),
    ("i32_bias", UniformQuantized(i32, f32, 0.000244140625),
     "!quant.uniform<i32:f32, 0.000244140625>", "!quant.uniform<i32:f32, 2.44140625E-4>"),
    ("i4_bounds", UniformQuantized(i4, f32, 0.5, 0, -7, 7),
     "!quant.uniform<i4<-7:7>:f32, 0.5>", "!quant.uniform<i4<-7:7>:f32, 5.000000e-01>"),
    ("f16_expressed", UniformQuantized(i8, f16, 0.5, 1),
     "!quant.uniform<i8:f16, 0.5:1>", "!quant.uniform<i8:f16, 5.000000e-01:1>"),
    ("bf16_expressed", UniformQuantized(i8, bf16, 0.5),
     "!quant.uniform<i8:bf16, 0.5>", "!quant.uniform<i8:bf16, 5.000000e-01>"),
    # repr(1e-05) has no '.', which MLIR's float literal needs.
    ("scale_without_dot", UniformQuantized(i8, f32, 1e-05),
     "!quant.uniform<i8:f32, 1.0e-05>", "!quant.uniform<i8:f32, 1.000000e-05>"),
    ("float32_scale", UniformQuantized(i8, f32, float(np.float32(0.1)), 5),
     "!quant.uniform<i8:f32, 0.10000000149011612:5>",
     "!quant.uniform<i8:f32, 0.10000000149011612:5>"),
]

PER_AXIS = [
    ("axis0_bounds", UniformQuantizedPerAxis(i8, f32, 0, (0.1, 0.2), (0, 0), -127, 127),
     "!quant.uniform<i8<-127:127>:f32:0, {0.1,0.2}>",
     "!quant.uniform<i8<-127:127>:f32:0, {1.000000e-01,2.000000e-01}>"),
    ("axis1_zero_points", UniformQuantizedPerAxis(i8, f32, 1, (2.0, 3.0, 4.0), (0, 10, -20)),
     "!quant.uniform<i8:f32:1, {2.0,3.0:10,4.0:-20}>",
     "!quant.uniform<i8:f32:1, {2.000000e+00,3.000000e+00:10,4.000000e+00:-20}>"),
    ("u8_axis3", UniformQuantizedPerAxis(u8, f32, 3, (0.5,), (128,)),
     "!quant.uniform<u8:f32:3, {0.5:128}>", "!quant.uniform<u8:f32:3, {5.000000e-01:128}>"),
    ("i32_bias_axis0", UniformQuantizedPerAxis(i32, f32, 0, (1e-05, 2e-05), (0, 0)),
     "!quant.uniform<i32:f32:0, {1.0e-05,2.0e-05}>",
     "!quant.uniform<i32:f32:0, {1.000000e-05,2.000000e-05}>"),
]

ELEMENT_CASES = PER_TENSOR + PER_AXIS


@pytest.mark.parametrize("element, text", [(c[1], c[2]) for c in ELEMENT_CASES],
                         ids=[c[0] for c in ELEMENT_CASES])
def test_quantized_type_prints_as_handwritten(element, text):
    assert str(element) == text


def test_printed_scale_parses_back_to_the_same_double():
    # The point of printing the shortest round-trip repr: nothing is lost.
    for scale in (0.1, float(np.float32(0.1)), 2.0 ** -15, 1e-05, 1.0 / 3.0, 123456.789, 7e22):
        printed = str(UniformQuantized(i8, f32, scale)).split(", ")[1].rstrip(">")
        assert float(printed) == scale
        assert "." in printed


@pytest.mark.parametrize("value, text", [
    (0.5, "0.5"), (2.0, "2.0"), (0.1, "0.1"), (1e-05, "1.0e-05"), (1e16, "1.0e+16"),
    (1.5e-05, "1.5e-05"), (-3e-07, "-3.0e-07"), (-0.0, "-0.0"),
])
def test_mlir_float_literal(value, text):
    assert mlir_float(value) == text


TENSOR_CASES = [
    ("static", TensorType((2, 3), f32), "tensor<2x3xf32>"),
    ("dynamic", TensorType((DYNAMIC, 3), i8), "tensor<?x3xi8>"),
    ("unranked", TensorType(None, f16), "tensor<*xf16>"),
    ("rank0", TensorType((), f32), "tensor<f32>"),
    ("zero_size", TensorType((0, 4), i32), "tensor<0x4xi32>"),
    ("bool", TensorType((4,), i1), "tensor<4xi1>"),
    ("unsigned_scalar", TensorType((4,), u8), "tensor<4xui8>"),
    ("quantized", TensorType((1, 4), UniformQuantized(i8, f32, 0.5, -3)),
     "tensor<1x4x!quant.uniform<i8:f32, 0.5:-3>>"),
    ("per_axis_dynamic", TensorType((DYNAMIC, 3), UniformQuantizedPerAxis(
        i8, f32, 1, (2.0, 3.0, 4.0), (0, 0, 0))),
     "tensor<?x3x!quant.uniform<i8:f32:1, {2.0,3.0,4.0}>>"),
    ("per_axis_unranked", TensorType(None, UniformQuantizedPerAxis(
        i8, f32, 1, (2.0, 3.0), (0, 0))),
     "tensor<*x!quant.uniform<i8:f32:1, {2.0,3.0}>>"),
]


@pytest.mark.parametrize("tensor, text", [(c[1], c[2]) for c in TENSOR_CASES],
                         ids=[c[0] for c in TENSOR_CASES])
def test_tensor_type_prints_as_handwritten(tensor, text):
    assert str(tensor) == text


def test_shape_and_none_types_print():
    assert str(ShapeType(3)) == "!tosa.shape<3>"
    assert str(ShapeType(0)) == "!tosa.shape<0>"
    assert str(NoneType()) == "none"


class TestMlirAgrees:
    """MLIR parses every printed type and reads the same parameters."""

    @pytest.mark.parametrize("element, mlir_text", [(c[1], c[3]) for c in ELEMENT_CASES],
                             ids=[c[0] for c in ELEMENT_CASES])
    def test_element(self, mlir, element, mlir_text):
        if isinstance(element, UniformQuantizedPerAxis):
            # Per-axis types live in tensors only: one with a fitting axis.
            shape = [2] * (element.axis + 1)
            shape[element.axis] = len(element.scales)
            dims = "x".join(map(str, shape))
            printed = str(TensorType(tuple(shape), element))
            assert mlir_reprint(mlir, printed) == f"tensor<{dims}x{mlir_text}>"
        else:
            assert mlir_reprint(mlir, str(element)) == mlir_text

    @pytest.mark.parametrize("tensor, text", [(c[1], c[2]) for c in TENSOR_CASES],
                             ids=[c[0] for c in TENSOR_CASES])
    def test_tensor(self, mlir, tensor, text):
        if isinstance(tensor.element, (UniformQuantized, UniformQuantizedPerAxis)):
            # MLIR re-spells the scales; the container and shape are unchanged.
            assert mlir_reprint(mlir, str(tensor)).startswith(text.split("!quant")[0])
        else:
            assert mlir_reprint(mlir, str(tensor)) == text

    @pytest.mark.parametrize("text", [
        "!quant.uniform<i8<-129:127>:f32, 0.5>",   # bounds outside the storage range
        "!quant.uniform<i8<5:5>:f32, 0.5>",        # min must be below max
        "!quant.uniform<i8:f32, 0.0>",             # scale must be positive
        "!quant.uniform<i8:f32, -1.0>",
        "!quant.uniform<i8:i32, 0.5>",             # expressed type must be a float
        "!quant.uniform<i8:f32:-1, {0.5}>",        # negative axis
        "!quant.uniform<i8:f32, 1e-05>",           # an integer literal is no scale
    ])
    def test_mlir_rejects_what_we_reject(self, mlir, text):
        with pytest.raises(ValueError):
            mlir_reprint(mlir, text)


@pytest.mark.parametrize("build", [
    pytest.param(lambda: UniformQuantized(i8, f32, 0.5, 0, -129, 127), id="min_below_storage"),
    pytest.param(lambda: UniformQuantized(i8, f32, 0.5, 0, -128, 128), id="max_above_storage"),
    pytest.param(lambda: UniformQuantized(i8, f32, 0.5, 0, 5, 5), id="min_equals_max"),
    pytest.param(lambda: UniformQuantized(i8, f32, 0.5, 0, 5, -5), id="min_above_max"),
    pytest.param(lambda: UniformQuantized(u8, f32, 0.5, 0, -1, 255), id="u8_negative_min"),
    pytest.param(lambda: UniformQuantized(i8, f32, 0.0), id="scale_zero"),
    pytest.param(lambda: UniformQuantized(i8, f32, -0.5), id="scale_negative"),
    pytest.param(lambda: UniformQuantized(i8, f32, math.nan), id="scale_nan"),
    pytest.param(lambda: UniformQuantized(i8, f32, math.inf), id="scale_inf"),
    pytest.param(lambda: UniformQuantized(f32, f32, 0.5), id="float_storage"),
    pytest.param(lambda: UniformQuantized(i8, i32, 0.5), id="integer_expressed"),
    pytest.param(lambda: UniformQuantizedPerAxis(i8, f32, 0, (), ()), id="no_scales"),
    pytest.param(lambda: UniformQuantizedPerAxis(i8, f32, 0, (0.5, 0.25), (0,)),
                 id="zero_points_count"),
    pytest.param(lambda: UniformQuantizedPerAxis(i8, f32, -1, (0.5,), (0,)), id="negative_axis"),
    pytest.param(lambda: UniformQuantizedPerAxis(i8, f32, 0, (0.5, 0.0), (0, 0)),
                 id="per_axis_scale_zero"),
    pytest.param(lambda: UniformQuantizedPerAxis.from_arrays(
        i8, f32, 0, np.array([0.5, math.nan], np.float32), np.zeros(2, np.int64)),
        id="from_arrays_scale_nan"),
    pytest.param(lambda: UniformQuantizedPerAxis.from_arrays(
        i8, f32, 0, np.array([math.inf, 0.5], np.float32), np.zeros(2, np.int64)),
        id="from_arrays_scale_inf"),
    pytest.param(lambda: UniformQuantizedPerAxis.from_arrays(
        i8, f32, 0, np.array([0.5, -0.0], np.float32), np.zeros(2, np.int64)),
        id="from_arrays_scale_negative_zero"),
    pytest.param(lambda: UniformQuantizedPerAxis.from_arrays(
        u8, f32, 0, np.array([0.5, 0.25], np.float32), np.zeros(3, np.int64)),
        id="from_arrays_zero_points_count"),
    pytest.param(lambda: TensorType((2, -2), f32), id="negative_dim"),
    pytest.param(lambda: scalar_type("f7"), id="unknown_element"),
])
def test_invalid_types_raise_ir_error(build):
    with pytest.raises(IRError):
        build()


PER_AXIS_1_OF_3 = UniformQuantizedPerAxis(i8, f32, 1, (0.1, 0.2, 0.3), (0, 0, 0))


class TestPerAxisIntegrity:
    """MLIR's rules: rank > axis; a static axis size equals the number of scales."""

    def test_rank_must_exceed_axis(self):
        with pytest.raises(IRError, match="out of range"):
            TensorType((3,), PER_AXIS_1_OF_3)

    def test_static_axis_size_must_match_scales(self):
        with pytest.raises(IRError, match="3 scales"):
            TensorType((2, 4), PER_AXIS_1_OF_3)

    def test_dynamic_axis_size_is_allowed(self):
        assert TensorType((2, DYNAMIC), PER_AXIS_1_OF_3).shape == (2, DYNAMIC)

    def test_other_dims_are_free(self):
        assert TensorType((DYNAMIC, 3, 7), PER_AXIS_1_OF_3).rank == 3

    def test_unranked_is_allowed(self):
        assert TensorType(None, PER_AXIS_1_OF_3).rank is None

    def test_mlir_rejects_the_same(self, mlir):
        bad = "tensor<2x4x!quant.uniform<i8:f32:1, {0.1,0.2,0.3}>>"
        text = (f"module {{ func.func @f(%arg0: {bad}) -> tensor<2x4xf32> {{\n"
                f"  %0 = quant.dcast %arg0 : {bad} to tensor<2x4xf32>\n"
                f"  return %0 : tensor<2x4xf32> }} }}")
        with pytest.raises(ValueError, match="does not match number of scales"):
            mlir(text)


def test_per_axis_types_from_arrays_and_from_numbers_are_one_type():
    # An importer's types (from_arrays) and a pattern's (the constructor) meet in
    # dicts and sets, and their tensor types are interned: equal ones must hash alike
    # and their scale bounds agree, whichever way each was made.
    scales = np.array([0.5, 0.125, 2.0, 0.25], dtype=np.float32)
    zero_points = np.array([0, 1, 0, -1], dtype=np.int64)
    from_arrays = UniformQuantizedPerAxis.from_arrays(i8, f32, 0, scales, zero_points)
    from_numbers = UniformQuantizedPerAxis(i8, f32, 0, (0.5, 0.125, 2.0, 0.25), (0, 1, 0, -1))
    assert from_arrays == from_numbers and hash(from_arrays) == hash(from_numbers)
    assert TensorType((4, 3), from_arrays) is TensorType((4, 3), from_numbers)
    assert from_arrays.scale_bounds == from_numbers.scale_bounds == (0.125, 2.0)
    # Types that differ only inside their scales or zero points stay apart.
    other_scale = UniformQuantizedPerAxis(i8, f32, 0, (0.5, 0.25, 2.0, 0.25), (0, 1, 0, -1))
    other_zero_point = UniformQuantizedPerAxis(i8, f32, 0, (0.5, 0.125, 2.0, 0.25), (0, 2, 0, -1))
    assert len({from_arrays, other_scale, other_zero_point}) == 3
    assert TensorType((4, 3), other_scale) is not TensorType((4, 3), from_arrays)


def test_per_axis_type_from_arrays_reads_as_the_constructors():
    # The importer's types keep numpy arrays; every way of reading one gives what
    # the constructor's type of the same numbers gives (values written out by hand).
    scales = np.array([0.5, 0.125, 2.0], dtype=np.float32)
    zero_points = np.array([3, -1, 0], dtype=np.int64)
    made = [UniformQuantizedPerAxis.from_arrays(i8, f32, 1, scales, zero_points),
            UniformQuantizedPerAxis(i8, f32, 1, (0.5, 0.125, 2.0), (3, -1, 0))]
    for q in made:
        assert q.scales == (0.5, 0.125, 2.0) and q.zero_points == (3, -1, 0)
        assert all(type(s) is float for s in q.scales)
        assert all(type(z) is int for z in q.zero_points)
        assert q.scales_array.dtype == np.float64 and q.scales_array.tolist() == [0.5, 0.125, 2.0]
        assert q.zero_points_array.tolist() == [3, -1, 0]
        assert not q.scales_array.flags.writeable and not q.zero_points_array.flags.writeable
        assert q.scale_count == 3 and q.zero_point_bounds == (-1, 3)
        assert str(q) == "!quant.uniform<i8:f32:1, {0.5:3,0.125:-1,2.0}>"
        assert q.to_dict()["scales"] == (0.5, 0.125, 2.0)
    assert repr(made[0]) == repr(made[1])
    fresh = UniformQuantizedPerAxis.from_arrays(i8, f32, 1, scales, zero_points)
    assert pickle.loads(pickle.dumps(fresh)) == made[1]
    # Two importer types compare on their arrays, and still tell a zero point apart.
    other = UniformQuantizedPerAxis.from_arrays(i8, f32, 1, scales, np.array([3, -1, 1]))
    again = UniformQuantizedPerAxis.from_arrays(i8, f32, 1, scales.copy(), zero_points.copy())
    assert again == UniformQuantizedPerAxis.from_arrays(i8, f32, 1, scales, zero_points)
    assert other != again and other.zero_point_bounds == (-1, 3)
    symmetric = UniformQuantizedPerAxis.from_arrays(i8, f32, 0, scales, np.zeros(3, np.int64))
    assert symmetric.zero_point_bounds == (0, 0)
    # The model's numbers cannot change under the type through the arrays it kept.
    with pytest.raises(ValueError):
        made[0].zero_points_array[0] = 7


def test_storage_and_expressed_helpers():
    q = UniformQuantized(u8, f16, 0.5, 3)
    assert is_quantized(q) and not is_quantized(f32)
    assert storage_type(q) is u8 and expressed_type(q) is f16
    assert storage_type(f32) is f32 and expressed_type(i8) is i8
    assert q.bits == 8 and (q.storage_min, q.storage_max) == (0, 255)
    assert UniformQuantizedPerAxis(i16, f32, 0, (1.0,), (0,)).bits == 16


def test_scalar_type_lookup_and_ranges():
    assert scalar_type("u8") is u8 and scalar_type("ui8") is u8 and scalar_type("i8") is i8
    assert (i8.min_value, i8.max_value) == (-128, 127)
    assert (u16.min_value, u16.max_value) == (0, 65535)
    assert (i4.min_value, i4.max_value) == (-8, 7)
    assert (i1.min_value, i1.max_value) == (0, 1)
    with pytest.raises(IRError):
        f32.min_value  # noqa: B018


def test_tensor_shape_queries():
    assert TensorType((2, 3), f32).num_elements == 6
    assert TensorType((), f32).num_elements == 1
    assert not TensorType((DYNAMIC, 3), f32).is_static
    with pytest.raises(IRError):
        TensorType((DYNAMIC, 3), f32).num_elements  # noqa: B018
    with pytest.raises(IRError):
        TensorType(None, f32).num_elements  # noqa: B018
    t = TensorType((2, 3), f32)
    assert t.with_element(i8) == TensorType((2, 3), i8)
    assert t.with_shape(None) == TensorType(None, f32)
    for shape in ((2, 3), (DYNAMIC, 3), (), None):
        stripped = TensorType(shape, UniformQuantized(i8, f32, 0.5)).with_element(i8)
        assert stripped == TensorType(shape, i8) and hash(stripped) == hash(TensorType(shape, i8))
        assert str(stripped) == str(TensorType(shape, i8)) and stripped.shape == shape


@pytest.mark.parametrize("element, dtype", [
    (f32, "float32"), (f16, "float16"), (i1, "bool"), (i8, "int8"), (u8, "uint8"),
    (i32, "int32"), (i4, "int8"), (UniformQuantized(i8, f32, 0.5), "int8"),
    (UniformQuantized(u8, f32, 0.5), "uint8"), (UniformQuantized(i16, f32, 0.5), "int16"),
])
def test_numpy_dtype(element, dtype):
    assert numpy_dtype(element) == np.dtype(dtype)


def test_numpy_dtype_bf16():
    import ml_dtypes

    assert numpy_dtype(bf16) == np.dtype(ml_dtypes.bfloat16)


def test_types_are_values():
    a = TensorType((2,), UniformQuantized(i8, f32, 0.5, 1))
    b = TensorType([2], UniformQuantized(i8, f32, 0.5, 1))
    assert a == b and hash(a) == hash(b)
    assert a != TensorType((2,), UniformQuantized(i8, f32, 0.5, 2))


def test_equal_tensor_types_are_one_object_however_made():
    # Tensor types compare and hash by identity, so every way of making one
    # must give back the one object of its value.
    import copy
    import pickle

    element = UniformQuantizedPerAxis(i8, f32, 1, (0.5, 0.25), (0, 0))
    a = TensorType((3, 2), element)
    assert TensorType([3, 2], UniformQuantizedPerAxis(i8, f32, 1, [0.5, 0.25], [0, 0])) is a
    assert TensorType(np.array([3, 2]), element) is a
    assert pickle.loads(pickle.dumps(a)) is a
    assert copy.copy(a) is a and copy.deepcopy(a) is a
    assert a.replace(shape=(4, 2)).replace(shape=(3, 2)) is a
    assert TensorType((3, 2), f32).with_element(element) is a
    assert a.with_element(i8) is TensorType((3, 2), i8) is a.replace(element=i8)
    assert a.with_shape((3, 2)) is a
    assert TensorType((3, 2), i16) is not TensorType((3, 2), i8)
    assert TensorType(None, i8) is not TensorType((), i8)
    assert {a: 1}[TensorType((3, 2), element)] == 1


def test_equal_scalar_types_are_one_object_however_made():
    import copy
    import pickle

    from tfl2tosa.ir.types import ScalarType

    assert ScalarType("i8", 8, "signed") is i8 is scalar_type("i8")
    assert pickle.loads(pickle.dumps(i8)) is i8 and copy.deepcopy(i8) is i8
    assert i16.replace(name="i8", bits=8) is i8
    quantized = pickle.loads(pickle.dumps(UniformQuantized(u8, f32, 0.5, 3)))
    assert quantized.storage is u8 and quantized.expressed is f32
    assert quantized == UniformQuantized(u8, f32, 0.5, 3)
    assert i8 != i16 and i8 != "i8"


def test_an_unused_tensor_type_is_forgotten():
    # The table of tensor types holds them weakly: a long-lived process keeps
    # only the types still in use.
    import gc

    from tfl2tosa.ir import types

    def known(shape: tuple[int, ...]) -> bool:
        return (shape, i16) in types._TENSOR_TYPES

    kept = TensorType((17, 5, 3), i16)
    TensorType((17, 5, 4), i16)
    gc.collect()
    assert known((17, 5, 3)) and not known((17, 5, 4))
    assert TensorType((17, 5, 3), i16) is kept
    del kept
    gc.collect()
    assert not known((17, 5, 3))


def test_invalid_tensor_types_are_refused_every_time():
    # A refused type is never entered in the table, so asking again refuses it again.
    element = UniformQuantizedPerAxis(i8, f32, 0, (0.5, 0.25), (0, 0))
    for _ in range(2):
        with pytest.raises(IRError, match="has size 3 but 2 scales"):
            TensorType((3,), element)
        with pytest.raises(IRError, match="invalid tensor shape"):
            TensorType((-2,), i8)
