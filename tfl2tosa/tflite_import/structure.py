"""The structural check: one pass over an imported Module before any pattern runs.

Every `tfl` op is held to its row of `SIGNATURES`: how many operands and
results TFLite's kernel takes, which operands may be omitted, the ranks it
requires, and the option fields that must be positive or name a known enum
value. The options table each op reads is derived from the schema (`CONV_2D`
-> `Conv2DOptions`, with the schema's shared tables listed in
`_SHARED_OPTIONS`): an op carrying another op's options is refused, and an op
whose options table is absent gets the schema's defaults, as TFLite's parser
gives it. Quantization parameters are checked on every value (scales normal
and finite, zero points in the storage range), and graph references must not
recurse. The importer itself already checks tensor and buffer indices,
buffer bounds, opcode indices and subgraph indices.

A failure is a ModelError naming the op, its location and what is wrong.
Legalization patterns may then take a well-formed op for granted.
"""

from __future__ import annotations

import math
import struct
from functools import lru_cache
from typing import Any

import numpy as np

from tfl2tosa import limits
from tfl2tosa.errors import IRError, ModelError
from tfl2tosa.ir.core import Module, Op, Value
from tfl2tosa.ir.types import (NoneType, ScalarType, TensorType, UniformQuantized,
                               UniformQuantizedPerAxis, f16, f32, f64, i1, i4, i8, i16, i32, i64,
                               is_quantized, numpy_dtype, storage_type, u8, u16, u32, u64)
from tfl2tosa.tflite_import import schema

ANY = (0, None)  # an operand or result count without bound
RANKED = range(1, 1 << 16)  # any rank but 0
Ranks = tuple[int, ...] | range


class Signature:
    """What TFLite's kernel for one op takes (lite/kernels/<op>.cc: NumInputs, NumOutputs,
    GetOptionalInputTensor, NumDimensions and type checks in Prepare)."""

    __slots__ = ("axes", "axis", "indices", "inputs", "optional", "outputs", "positive", "ranks",
                 "result_ranks", "shape_rule")

    def __init__(self, inputs: int | tuple[int, int | None], outputs: int | tuple[int, int | None]
                 = 1, *, optional: tuple[int, ...] = (), ranks: dict[int, Ranks] | None = None,
                 result_ranks: dict[int, Ranks] | None = None, positive: tuple[str, ...] = (),
                 axis: tuple[tuple[str, int, int], ...] = (),
                 axes: dict[int, tuple[int, int]] | None = None, indices: tuple[int, ...] = (),
                 shape_rule: str = "") -> None:
        self.inputs = (inputs, inputs) if isinstance(inputs, int) else inputs
        self.outputs = (outputs, outputs) if isinstance(outputs, int) else outputs
        self.optional = frozenset(optional)   # operand positions that may be omitted (-1)
        self.ranks = ranks or {}              # operand position -> the ranks allowed
        self.result_ranks = result_ranks or {}
        self.positive = positive              # option fields that must be >= 1
        # (option field, operand position, extra) each: the field indexes a dimension of
        # that operand, in [-(rank + extra), rank + extra).
        self.axis = axis
        # constant operand position -> (operand position, extra): its values index
        # dimensions of that operand, as `axis` does.
        self.axes = axes or {}
        self.indices = indices                # operand positions that must be integers
        # "same": result 0 has operand 0's shape; "broadcast": result 0 has the
        # broadcast shape of the operands.
        self.shape_rule = shape_rule


_sig = Signature


UNARY = _sig(1)
SAME = _sig(1, shape_rule="same")
BINARY = _sig(2, shape_rule="broadcast")
COMPARISON = BINARY
POOL = _sig(1, ranks={0: (4,)}, result_ranks={0: (4,)},
            positive=("stride_w", "stride_h", "filter_width",
                                           "filter_height"))
REDUCER = _sig(2, ranks={1: (0, 1)}, indices=(1,), axes={1: (0, 0)}, shape_rule="reduce")
SEGMENT = _sig(3, ranks={0: RANKED}, indices=(1, 2))
RNN = _sig(5, optional=(3,), ranks={0: (2,)}, shape_rule="rnn")
SEQUENCE_RNN = _sig(5, optional=(3,), ranks={0: (3,)}, shape_rule="rnn")
LSTM_REQUIRED = (0, 2, 3, 4, 6, 7, 8, 13, 14, 15, 18, 19)
LSTM_OPTIONAL = tuple(i for i in range(24) if i not in LSTM_REQUIRED)
CONV_2D = _sig((2, 3), optional=(2,), ranks={0: (4,), 1: (4,), 2: (1,)}, result_ranks={0: (4,)},
               shape_rule="conv_2d",
               positive=("stride_w", "stride_h", "dilation_w_factor", "dilation_h_factor"))
CONV_3D = _sig((2, 3), optional=(2,), ranks={0: (5,), 1: (5,), 2: (1,)}, result_ranks={0: (5,)},
               positive=("stride_d", "stride_w", "stride_h", "dilation_d_factor",
                         "dilation_w_factor", "dilation_h_factor"))

SIGNATURES: dict[str, Signature] = {
    "ABS": SAME, "ADD": BINARY, "ADD_N": _sig((1, None), shape_rule="broadcast"),
    "ARG_MAX": _sig(2, ranks={0: RANKED, 1: (0, 1)}, indices=(1,), axes={1: (0, 0)}),
    "ARG_MIN": _sig(2, ranks={0: RANKED, 1: (0, 1)}, indices=(1,), axes={1: (0, 0)}),
    "ASSIGN_VARIABLE": _sig(2, 0), "ATAN2": BINARY,
    "AVERAGE_POOL_2D": POOL, "MAX_POOL_2D": POOL, "L2_POOL_2D": POOL,
    "BATCH_MATMUL": _sig(2, ranks={0: (2, 3, 4, 5), 1: (2, 3, 4, 5)},
                         result_ranks={0: (2, 3, 4, 5)}),
    "BATCH_TO_SPACE_ND": _sig(3, ranks={0: (3, 4), 1: (1,), 2: (2,)}, indices=(1, 2),
                              result_ranks={0: (3, 4)}),
    "BIDIRECTIONAL_SEQUENCE_LSTM": _sig(48, (1, 2), optional=tuple(range(1, 48)),
                                        shape_rule="steps"),
    "BIDIRECTIONAL_SEQUENCE_RNN": _sig(12, (1, 2), optional=(9, 10, 11), shape_rule="steps"),
    "BITCAST": UNARY, "BITWISE_XOR": BINARY,
    "BROADCAST_ARGS": _sig(2, ranks={0: (1,), 1: (1,)}, indices=(0, 1)),
    "BROADCAST_TO": _sig(2, ranks={1: (1,)}, indices=(1,)), "BUCKETIZE": SAME,
    "CALL": _sig(ANY, ANY), "CALL_ONCE": _sig(0, 0), "CAST": SAME, "CEIL": SAME,
    "COMPLEX_ABS": SAME, "CONCAT_EMBEDDINGS": _sig(ANY, ANY),
    "CONCATENATION": _sig((1, None), axis=(("axis", 0, 0),), shape_rule="concat"),
    "CONV_2D": CONV_2D, "CONV_3D": CONV_3D,
    "CONV_3D_TRANSPOSE": _sig((3, 4), optional=(3,), ranks={0: (1,), 1: (5,), 2: (5,), 3: (1,)},
                              result_ranks={0: (5,)}, indices=(0,), positive=CONV_3D.positive),
    "COS": SAME, "CUMSUM": _sig(2, ranks={1: (0, 1)}, indices=(1,), axes={1: (0, 0)},
                                shape_rule="same"),
    "CUSTOM": _sig(ANY, ANY), "DELEGATE": _sig(ANY, ANY), "DENSIFY": UNARY,
    "DEPTH_TO_SPACE": _sig(1, ranks={0: (4,)}, result_ranks={0: (4,)},
                           positive=("block_size",)),
    "DEPTHWISE_CONV_2D": _sig((2, 3), optional=(2,), ranks={0: (4,), 1: (4,), 2: (1,)},
                              result_ranks={0: (4,)}, positive=CONV_2D.positive),
    "DEQUANTIZE": _sig(1, shape_rule="dequantize"),
    "DILATE": _sig(3, ranks={1: (1,)}, indices=(1,)), "DIV": BINARY,
    "DYNAMIC_UPDATE_SLICE": _sig(3, ranks={2: (1,)}, indices=(2,), shape_rule="update"),
    "ELU": SAME, "EMBEDDING_LOOKUP": _sig(2, ranks={0: (1,), 1: RANKED}, indices=(0,)),
    "EMBEDDING_LOOKUP_SPARSE": _sig(5, ranks={0: (1,), 1: (2,), 2: (1,), 4: (1,)},
                                    indices=(0, 1, 2)),
    "EQUAL": COMPARISON, "EXP": SAME,
    "EXPAND_DIMS": _sig(2, ranks={1: (0, 1)}, indices=(1,), axes={1: (0, 1)}),
    "FAKE_QUANT": SAME, "FILL": _sig(2, ranks={0: (1,), 1: (0, 1)}, indices=(0,)),
    "FLOOR": SAME, "FLOOR_DIV": BINARY, "FLOOR_MOD": BINARY,
    "FULLY_CONNECTED": _sig((2, 3), (1, 2), optional=(2,), ranks={0: RANKED, 1: (2,), 2: (1,)},
                            result_ranks={0: RANKED}, shape_rule="fully_connected"),
    "GATHER": _sig(2, ranks={0: RANKED}, indices=(1,), axis=(("axis", 0, 0),)),
    "GATHER_ND": _sig(2, ranks={0: RANKED, 1: RANKED}, indices=(1,)),
    "GELU": SAME, "GREATER": COMPARISON, "GREATER_EQUAL": COMPARISON, "HARD_SWISH": SAME,
    "HASHTABLE": _sig(0, 1), "HASHTABLE_FIND": _sig(3), "HASHTABLE_IMPORT": _sig(3, 0),
    "HASHTABLE_LOOKUP": _sig(3, 2), "HASHTABLE_SIZE": UNARY,
    "IF": _sig((1, None), ANY, ranks={0: (0, 1)}), "IMAG": SAME,
    "L2_NORMALIZATION": _sig(1, ranks={0: RANKED}, shape_rule="same"),
    "LEAKY_RELU": SAME, "LESS": COMPARISON, "LESS_EQUAL": COMPARISON,
    "LOCAL_RESPONSE_NORMALIZATION": _sig(1, ranks={0: (4,)}, shape_rule="lrn"),
    "LOG": SAME, "LOG_SOFTMAX": _sig(1, ranks={0: RANKED}, shape_rule="same"),
    "LOGICAL_AND": BINARY, "LOGICAL_NOT": SAME, "LOGICAL_OR": BINARY, "LOGISTIC": SAME,
    "LSH_PROJECTION": _sig((2, 3), optional=(2,)),
    "LSTM": _sig((5, 24), (1, 4), optional=LSTM_OPTIONAL, ranks={0: (2,)}, shape_rule="lstm"),
    "MATRIX_DIAG": _sig(1, ranks={0: RANKED}),
    "MATRIX_SET_DIAG": _sig(2, ranks={0: range(2, 1 << 16)}, shape_rule="set_diagonal"),
    "MAXIMUM": BINARY, "MINIMUM": BINARY,
    "MEAN": REDUCER, "MIRROR_PAD": _sig(2, ranks={1: (2,)}, indices=(1,), shape_rule="paddings"),
    "MUL": BINARY,
    "MULTINOMIAL": _sig(2, ranks={0: (2,), 1: (0, 1)}, indices=(1,)), "NEG": SAME,
    "NON_MAX_SUPPRESSION_V4": _sig(5, 2, ranks={0: (2,), 1: (1,)}),
    "NON_MAX_SUPPRESSION_V5": _sig(6, 3, ranks={0: (2,), 1: (1,)}),
    "NOT_EQUAL": COMPARISON, "ONE_HOT": _sig(4, indices=(0, 1), ranks={1: (0,)},
                                             axis=(("axis", 0, 1),), shape_rule="one_hot"),
    "PACK": _sig((1, None), axis=(("axis", 0, 1),), shape_rule="pack"),
    "PAD": _sig((2, 3), ranks={1: (2,)}, indices=(1,), shape_rule="paddings"),
    "PADV2": _sig((2, 3), ranks={1: (2,)}, indices=(1,), shape_rule="paddings"),
    "POW": BINARY, "PRELU": _sig(2, shape_rule="broadcast"), "QUANTIZE": SAME,
    "RANDOM_STANDARD_NORMAL": _sig(1, ranks={0: (1,)}, indices=(0,)),
    "RANDOM_UNIFORM": _sig(1, ranks={0: (1,)}, indices=(0,)),
    "RANGE": _sig(3, ranks={0: (0,), 1: (0,), 2: (0,)}, result_ranks={0: (1,)}),
    "RANK": _sig(1, result_ranks={0: (0,)}), "READ_VARIABLE": UNARY, "REAL": SAME,
    "REDUCE_ALL": REDUCER, "REDUCE_ANY": REDUCER, "REDUCE_MAX": REDUCER,
    "REDUCE_MIN": REDUCER, "REDUCE_PROD": REDUCER, "SUM": REDUCER,
    "REDUCE_WINDOW": _sig(5, ranks={1: (0,), 2: (1,), 3: (1,), 4: (1,)}, indices=(2, 3, 4)),
    "RELU": SAME, "RELU6": SAME, "RELU_0_TO_1": SAME, "RELU_N1_TO_1": SAME,
    "RESHAPE": _sig((1, 2), ranks={1: (0, 1)}, indices=(1,), shape_rule="reshape"),
    "RESIZE_BILINEAR": _sig(2, ranks={0: (4,), 1: (1,)}, result_ranks={0: (4,)}, indices=(1,)),
    "RESIZE_NEAREST_NEIGHBOR": _sig(2, ranks={0: (4,), 1: (1,)}, result_ranks={0: (4,)},
                                    indices=(1,)),
    "REVERSE_SEQUENCE": _sig(2, ranks={0: range(2, 1 << 16), 1: (1,)}, indices=(1,),
                             axis=(("seq_dim", 0, 0), ("batch_dim", 0, 0)), shape_rule="same"),
    "REVERSE_V2": _sig(2, ranks={0: RANKED, 1: (0, 1)}, indices=(1,), axes={1: (0, 0)},
                       shape_rule="same"),
    "RFFT2D": _sig(2, ranks={0: range(2, 1 << 16), 1: (1,)}, indices=(1,)),
    "RIGHT_SHIFT": BINARY,
    "RNN": RNN, "UNIDIRECTIONAL_SEQUENCE_RNN": SEQUENCE_RNN, "ROUND": SAME, "RSQRT": SAME,
    "SCATTER_ND": _sig(3, ranks={0: RANKED, 2: (1,)}, indices=(0, 2)),
    "SEGMENT_SUM": _sig(2, ranks={0: RANKED, 1: (1,)}, indices=(1,)),
    "SELECT": _sig(3), "SELECT_V2": _sig(3, shape_rule="broadcast"),
    "SHAPE": _sig(1, shape_rule="shape"),
    "SIGN": SAME, "SIN": SAME, "SKIP_GRAM": UNARY,
    "SLICE": _sig(3, ranks={1: (1,), 2: (1,)}, indices=(1, 2)),
    "SOFTMAX": _sig(1, ranks={0: RANKED}, shape_rule="same"),
    "SPACE_TO_BATCH_ND": _sig(3, ranks={0: (3, 4), 1: (1,), 2: (2,)}, indices=(1, 2),
                              result_ranks={0: (3, 4)}),
    "SPACE_TO_DEPTH": _sig(1, ranks={0: (4,)}, result_ranks={0: (4,)},
                           positive=("block_size",)),
    "SPARSE_TO_DENSE": _sig(4, indices=(0, 1)),
    "SPLIT": _sig(2, (1, None), ranks={0: (0, 1), 1: RANKED}, indices=(0,), axes={0: (1, 0)},
                  shape_rule="split"),
    "SPLIT_V": _sig(3, (1, None), ranks={0: RANKED, 1: (1,), 2: (0, 1)}, indices=(1, 2),
                    axes={2: (0, 0)}, shape_rule="split"),
    "SQRT": SAME, "SQUARE": SAME, "SQUARED_DIFFERENCE": BINARY,
    "SQUEEZE": _sig(1, axis=(("squeeze_dims", 0, 0),)),
    "STABLEHLO_RNG_BIT_GENERATOR": _sig(1, 2),
    "STRIDED_SLICE": _sig(4, ranks={1: (1,), 2: (1,), 3: (1,)}, indices=(1, 2, 3),
                          shape_rule="strided_slice"),
    "SUB": BINARY,
    "SVDF": _sig(5, optional=(3,), ranks={0: (2,), 1: (2,), 2: (2,), 3: (1,), 4: (2,)}),
    "TANH": SAME, "TILE": _sig(2, ranks={1: (1,)}, indices=(1,)),
    "TOPK_V2": _sig(2, 2, ranks={0: RANKED, 1: (0, 1)}, result_ranks={0: RANKED, 1: RANKED},
                    indices=(1,)),
    "TRANSPOSE": _sig(2, ranks={1: (1,)}, indices=(1,), axes={1: (0, 0)}),
    "TRANSPOSE_CONV": _sig((3, 4), optional=(3,), ranks={0: (1,), 1: (4,), 2: (4,), 3: (1,)},
                           result_ranks={0: (4,)}, indices=(0,),
                           positive=("stride_w", "stride_h")),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": _sig((20, 24), optional=LSTM_OPTIONAL, ranks={0: (3,)},
                                         shape_rule="lstm"),
    "UNIQUE": _sig(1, 2, ranks={0: (1,)}),
    "UNPACK": _sig(1, (1, None), ranks={0: RANKED}, axis=(("axis", 0, 0),), shape_rule="unpack"),
    "UNSORTED_SEGMENT_MAX": SEGMENT, "UNSORTED_SEGMENT_MIN": SEGMENT,
    "UNSORTED_SEGMENT_PROD": SEGMENT, "UNSORTED_SEGMENT_SUM": SEGMENT,
    "VAR_HANDLE": _sig(0, 1), "WHERE": UNARY, "WHILE": _sig(ANY, ANY), "ZEROS_LIKE": SAME,
}

# Options tables the schema shares between ops; every other op reads
# `<OpName>Options` (`CONV_2D` -> `Conv2DOptions`), found by spelling.
_SHARED_OPTIONS = {
    "AVERAGE_POOL_2D": "Pool2DOptions", "MAX_POOL_2D": "Pool2DOptions",
    "L2_POOL_2D": "Pool2DOptions", "CONV_3D_TRANSPOSE": "Conv3DOptions",
    "L2_NORMALIZATION": "L2NormOptions", "MAXIMUM": "MaximumMinimumOptions",
    "MINIMUM": "MaximumMinimumOptions", "MEAN": "ReducerOptions", "SUM": "ReducerOptions",
    "REDUCE_ALL": "ReducerOptions", "REDUCE_ANY": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions", "REDUCE_MIN": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions", "MULTINOMIAL": "RandomOptions",
    "RANDOM_STANDARD_NORMAL": "RandomOptions", "RANDOM_UNIFORM": "RandomOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
}

# Attributes the importer adds beside an op's options (and the reason a module pass
# gives for an op it leaves, when the check runs after one).
_IMPORTER_ATTRS = frozenset({"builtin_code", "op_name", "custom_code", "custom_options",
                             "intermediates", "callee", "unlowered_reason"})

# Ops whose options name other graphs: those graphs must not lead back here.
_GRAPH_REFERENCES = ("cond", "body", "then_branch", "else_branch", "callee",
                     "session_init_function", "decomposition", "comparator", "computation")
_GRAPH_REFERENCE_SET = frozenset(_GRAPH_REFERENCES)
# Attributes that are not options fields: the importer's and the graph names it adds.
_NOT_OPTIONS = _IMPORTER_ATTRS | _GRAPH_REFERENCE_SET

# Quantization scales are float32 in the schema; a subnormal one loses its precision
# (and its reciprocal overflows), which no converter writes.
_MIN_SCALE = float(np.finfo(np.float32).tiny)
_MAX_SCALE = float(np.finfo(np.float32).max)


@lru_cache(maxsize=None)
def options_table(schema_name: str) -> str | None:
    """The options table (schema.fbs) an op reads, or None if it takes none."""
    if schema_name in _SHARED_OPTIONS:
        return _SHARED_OPTIONS[schema_name]
    wanted = schema_name.replace("_", "").lower() + "options"
    for name in (*schema._OPTIONS_NAMES.values(), *schema._OPTIONS2_NAMES.values()):
        if name.lower() == wanted:
            return name
    return None


# A flatbuffer whose root is a table with no fields: its root offset, a vtable
# of 4 bytes (its own size, the table's size), then the table, its offset back
# to that vtable.
_EMPTY_TABLE_ROOT = 8
_EMPTY_TABLE = struct.pack("<IHHi", _EMPTY_TABLE_ROOT, 4, 4, _EMPTY_TABLE_ROOT - 4)


@lru_cache(maxsize=None)
def _option_defaults(table_name: str) -> tuple[tuple[str, Any], ...]:
    """The schema's default for every field of an options table (read from an empty table)."""
    return tuple(schema.options_attrs(_EMPTY_TABLE, _EMPTY_TABLE_ROOT, table_name,
                                      table_name).items())


@lru_cache(maxsize=None)
def _option_fields(table_name: str) -> frozenset[str]:
    return frozenset(name for name, _ in _option_defaults(table_name))


def check_module(module: Module) -> None:
    """Hold every op of every graph to its signature; raise ModelError at the first fault."""
    budget = _Budget()
    for graph in module.graphs.values():
        for value in graph.inputs:
            _check_value(value, f"{graph.name}: graph input {value.name!r}",
                         f"{graph.name}: graph input {value.name!r}")
        for op in graph.ops:
            if op.dialect == "tfl":
                _check_op(op, module, budget)
    _check_graph_recursion(module)


def _check_op(op: Op, module: Module, budget: _Budget) -> None:
    schema_name = op.opname.upper()
    for value in op.results:
        if not _value_is_plain(value, budget):
            _check_value(value, f"{_where(op)}: result {value.name!r}",
                         f"{_where(op)}: tensor {value.name!r}")
    signature = SIGNATURES.get(schema_name)
    if signature is None:
        return  # constants, variables, ops with no lowering: the patterns refuse those
    _check_count(op, "operand", len(op.operands), signature.inputs)
    _check_count(op, "result", len(op.results), signature.outputs)
    for position, value in enumerate(op.operands):
        omitted = isinstance(value.type, NoneType)
        if omitted and position not in signature.optional:
            raise ModelError(f"{_where(op)}: operand {position} is required but omitted")
        if omitted:
            continue
        _check_rank(op, f"operand {position}", value, signature.ranks.get(position))
        if position in signature.indices and not _is_integer(value):
            raise ModelError(f"{_where(op)}: operand {position} {value.name!r} holds indices "
                             f"or sizes but is {value.type}")
    for position, value in enumerate(op.results):
        if isinstance(value.type, NoneType):
            raise ModelError(f"{_where(op)}: result {position} is omitted")
        _check_rank(op, f"result {position}", value, signature.result_ranks.get(position))
    _check_options(op, schema_name, signature)
    for position, (target, extra) in signature.axes.items():
        _check_constant_axes(op, position, target, extra)
    if signature.shape_rule:
        _check_result_shape(op, signature.shape_rule)


def _check_rank(op: Op, what: str, value: Value, allowed: Ranks | None) -> None:
    if not allowed or not isinstance(value.type, TensorType) or value.type.rank is None:
        return
    if value.type.rank not in allowed:
        needed = (f"at least {allowed.start}" if isinstance(allowed, range)
                  else " or ".join(map(str, allowed)))
        raise ModelError(f"{_where(op)}: {what} {value.name!r} has rank {value.type.rank}; "
                         f"{op.opname.upper()} needs rank {needed}")


def _is_integer(value: Value) -> bool:
    if not isinstance(value.type, TensorType):
        return False
    element = value.type.element
    return getattr(element, "is_integer", False) and not getattr(element, "is_quantized", False)


def _constant(value: Value) -> np.ndarray | None:
    owner = value.owner
    if owner is None or owner.name != "tfl.pseudo_const" \
            or owner.attrs.get("sparsity") is not None or owner.attrs.get("packed_int4"):
        return None
    array = owner.attrs.get("value")
    return None if array is None or getattr(array, "dtype", None) == object else np.asarray(array)


def _check_constant_axes(op: Op, position: int, target: int, extra: int) -> None:
    array = _constant(op.operands[position])
    data = op.operands[target].type
    if array is None or not isinstance(data, TensorType) or data.rank is None:
        return
    rank = data.rank
    for axis in np.ravel(array).tolist():
        if not -(rank + extra) <= axis < rank + extra:
            raise ModelError(f"{_where(op)}: axis {axis} (operand {position}) is out of range "
                             f"for rank {rank}")


def _static_shape(value: Value) -> tuple[int, ...] | None:
    value_type = value.type
    if not isinstance(value_type, TensorType) or value_type.shape is None \
            or any(d < 0 for d in value_type.shape):
        return None
    return tuple(value_type.shape)


def _check_result_shape(op: Op, rule: str) -> None:
    """The declared result shape must be the one TFLite's Prepare computes."""
    if rule in _SHAPE_RULES:
        _SHAPE_RULES[rule](op)
        return
    shapes = [_static_shape(v) for v in op.operands if isinstance(v.type, TensorType)]
    result = _static_shape(op.results[0]) if op.results else None
    if not shapes or result is None or None in shapes:
        return
    if rule == "same":
        expected = shapes[0]
    else:
        try:
            expected = tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            listed = ", ".join(str(list(s)) for s in shapes)
            raise ModelError(f"{_where(op)}: operand shapes {listed} do not broadcast") from None
    if result != tuple(expected):
        raise ModelError(f"{_where(op)}: result shape {list(result)} should be "
                         f"{list(expected)}")


def _check_count(op: Op, what: str, count: int, bounds: tuple[int, int | None]) -> None:
    low, high = bounds
    if count < low or (high is not None and count > high):
        expected = (str(low) if low == high else f"at least {low}" if high is None
                    else f"{low} to {high}")
        raise ModelError(f"{_where(op)}: has {count} {what}s, expected {expected}")


def _check_options(op: Op, schema_name: str, signature: Signature) -> None:
    table = options_table(schema_name)
    if table is None:
        return
    present = op.attrs.keys() - _NOT_OPTIONS
    fields = _option_fields(table)
    foreign = present - fields
    if foreign:
        raise ModelError(f"{_where(op)}: carries options {sorted(foreign)[:3]} of another op; "
                         f"{schema_name} reads {table}")
    if not present:
        if any(name.endswith("_subgraph_index") for name in fields):
            raise ModelError(f"{_where(op)}: has no {table}, so no graph to run")
        # TFLite's parser reads an absent options table as the schema's defaults.
        for name, default in _option_defaults(table):
            op.attrs.setdefault(name, default)
    for name in signature.positive:
        value = op.attrs.get(name)
        if not isinstance(value, int) or value < 1:
            raise ModelError(f"{_where(op)}: option {name} is {value}; it must be at least 1")
    for name, value in op.attrs.items():
        if isinstance(value, str) and value.startswith("UNKNOWN_") and name in schema._ENUM_FIELDS:
            raise ModelError(f"{_where(op)}: option {name} has no meaning in the schema "
                             f"({value})")
        if isinstance(value, float) and not math.isfinite(value):
            raise ModelError(f"{_where(op)}: option {name} is {value}")
    for field, position, extra in signature.axis:
        _check_axis(op, field, position, extra)


def _check_axis(op: Op, field: str, position: int, extra: int) -> None:
    value = op.operands[position].type if position < len(op.operands) else None
    rank = value.rank if isinstance(value, TensorType) else None
    axes = op.attrs.get(field)
    if rank is None:
        return
    for axis in axes if isinstance(axes, tuple) else (axes,):
        if isinstance(axis, int) and not -(rank + extra) <= axis < rank + extra:
            raise ModelError(f"{_where(op)}: {field} {axis} is out of range for rank {rank}")


def _concat_shapes(op: Op) -> None:
    shapes = [_static_shape(v) for v in op.operands]
    result = _static_shape(op.results[0])
    if result is None or None in shapes:
        return
    axis = op.attrs.get("axis", 0) % max(len(result), 1)
    for shape in shapes:
        if len(shape) != len(result) or any(d != r for i, (d, r) in
                                            enumerate(zip(shape, result)) if i != axis):
            raise ModelError(f"{_where(op)}: operand shape {list(shape)} does not join into "
                             f"result shape {list(result)} along axis {axis}")
    if result and sum(shape[axis] for shape in shapes) != result[axis]:
        raise ModelError(f"{_where(op)}: operand sizes along axis {axis} do not add up to "
                         f"the result's {result[axis]}")


def _pack_shapes(op: Op) -> None:
    shapes = {_static_shape(v) for v in op.operands}
    if len(shapes) > 1 and None not in shapes:
        raise ModelError(f"{_where(op)}: operands have different shapes "
                         f"{sorted(list(s) for s in shapes)}")
    _same_rank_results(op, len(next(iter(shapes)) or ()) + 1 if None not in shapes else None)


def _split_shapes(op: Op) -> None:
    data = op.operands[1 if op.name == "tfl.split" else 0].type
    _same_rank_results(op, data.rank if isinstance(data, TensorType) else None)


def _unpack_shapes(op: Op) -> None:
    data = op.operands[0].type
    _same_rank_results(op, data.rank - 1 if isinstance(data, TensorType) and data.rank else None)


def _same_rank_results(op: Op, rank: int | None) -> None:
    if rank is None:
        return
    for position, value in enumerate(op.results):
        if isinstance(value.type, TensorType) and value.type.rank not in (None, rank):
            raise ModelError(f"{_where(op)}: result {position} has rank {value.type.rank}, "
                             f"expected {rank}")


# LSTM operands: (position, shape in terms of n_batch, n_input, n_cell, n_output)
# (lite/kernels/lstm.cc CheckInputTensorDimensions).
_LSTM_SHAPES = (
    *((i, ("n_cell", "n_input")) for i in (1, 2, 3, 4)),
    *((i, ("n_cell", "n_output")) for i in (5, 6, 7, 8)),
    *((i, ("n_cell",)) for i in (9, 10, 11, 12, 13, 14, 15)),
    (16, ("n_output", "n_cell")), (17, ("n_output",)),
    (18, ("n_batch", "n_output")), (19, ("n_batch", "n_cell")),
    *((i, ("n_cell",)) for i in (20, 21, 22, 23)),
)


def _lstm_shapes(op: Op) -> None:
    if op.attrs.get("kernel_type", "FULL") != "FULL":
        # The BASIC kernel (lstm.cc, kTfLiteLSTMBasicKernel): 5 inputs, 4 outputs.
        if len(op.operands) != 5 or len(op.results) != 4:
            raise ModelError(f"{_where(op)}: the BASIC kernel takes 5 operands and gives "
                             f"4 results, not {len(op.operands)} and {len(op.results)}")
        return
    if len(op.operands) not in (20, 24) or len(op.results) != 1:
        raise ModelError(f"{_where(op)}: the FULL kernel takes 20 or 24 operands and gives "
                         f"one result, not {len(op.operands)} and {len(op.results)}")
    _check_lstm_groups(op)
    shapes = [_static_shape(v) if isinstance(v.type, TensorType) else None for v in op.operands]
    x, output_weights, recurrent = shapes[0], shapes[4], shapes[8]
    if x is None or output_weights is None or recurrent is None \
            or len(output_weights) != 2 or len(recurrent) != 2:
        raise ModelError(f"{_where(op)}: input-to-output and recurrent-to-output weights "
                         "must be matrices")
    time_major = len(x) == 3 and op.attrs.get("time_major", False)
    sizes = {"n_cell": output_weights[0], "n_input": output_weights[1],
             "n_output": recurrent[1], "n_batch": x[1] if time_major else x[0]}
    if x[-1] != sizes["n_input"]:
        raise ModelError(f"{_where(op)}: input shape {list(x)} does not end in the weights' "
                         f"{sizes['n_input']} inputs")
    for position, dims in _LSTM_SHAPES:
        if position >= len(shapes) or shapes[position] is None:
            continue
        expected = tuple(sizes[d] for d in dims)
        if shapes[position] != expected:
            raise ModelError(f"{_where(op)}: operand {position} has shape "
                             f"{list(shapes[position])}, expected {list(expected)}")
    _sequence_steps(op)


def _update_shapes(op: Op) -> None:
    """DYNAMIC_UPDATE_SLICE: update of the operand's rank, one start index per dimension."""
    operand, update, start = (_static_shape(v) for v in op.operands)
    if operand is None or update is None or start is None:
        return
    if len(update) != len(operand) or start != (len(operand),) \
            or any(u > d for u, d in zip(update, operand)):
        raise ModelError(f"{_where(op)}: update {list(update)} and start indices {list(start)} "
                         f"do not fit operand {list(operand)}")
    _check_result_shape(op, "same")


def _strided_slice_shapes(op: Op) -> None:
    begin, end, strides = (_static_shape(v) for v in op.operands[1:])
    if len({begin, end, strides}) != 1:
        raise ModelError(f"{_where(op)}: begin {begin}, end {end} and strides {strides} "
                         "must have one shape")


def _paddings_shapes(op: Op) -> None:
    data, paddings = _static_shape(op.operands[0]), _static_shape(op.operands[1])
    if data is not None and paddings is not None and paddings != (len(data), 2):
        raise ModelError(f"{_where(op)}: paddings have shape {list(paddings)}, expected "
                         f"{[len(data), 2]}")


def _reshape_shapes(op: Op) -> None:
    data, result = _static_shape(op.operands[0]), _static_shape(op.results[0])
    if data is not None and result is not None \
            and limits.element_count(data) != limits.element_count(result):
        raise ModelError(f"{_where(op)}: cannot reshape {list(data)} into {list(result)}")


def _conv_2d_shapes(op: Op) -> None:
    """Input channels a whole number of filter groups; result channels the filters'."""
    _integer_bias(op, 2)
    x, w, result = _static_shape(op.operands[0]), _static_shape(op.operands[1]), \
        _static_shape(op.results[0])
    if x is None or w is None or result is None:
        return
    if w[3] < 1 or x[3] < 1 or x[3] % w[3] or w[0] % (x[3] // w[3]) or result[3] != w[0]:
        raise ModelError(f"{_where(op)}: filter {list(w)} does not fit input {list(x)} and "
                         f"result {list(result)}")
    bias = _static_shape(op.operands[2]) if len(op.operands) > 2 else None
    if bias is not None and bias != (w[0],):
        raise ModelError(f"{_where(op)}: bias shape {list(bias)}, expected {[w[0]]}")


def _dequantize_shapes(op: Op) -> None:
    result = op.results[0].type
    if isinstance(result, TensorType) and not (
            getattr(result.element, "is_float", False) and not is_quantized(result.element)):
        raise ModelError(f"{_where(op)}: result is {result}, not a float tensor")
    _check_result_shape(op, "same")


def _shape_shapes(op: Op) -> None:
    data, result = op.operands[0].type, _static_shape(op.results[0])
    if isinstance(data, TensorType) and data.rank is not None and result is not None \
            and result != (data.rank,):
        raise ModelError(f"{_where(op)}: result shape {list(result)} should be [{data.rank}]")


def _integer_bias(op: Op, position: int) -> None:
    """A quantized op's bias is an integer tensor (TFLite's kernels read int32/int64)."""
    x = op.operands[0].type
    bias = op.operands[position].type if len(op.operands) > position else None
    if isinstance(x, TensorType) and is_quantized(x.element) and isinstance(bias, TensorType) \
            and not getattr(storage_type(bias.element), "is_integer", False):
        raise ModelError(f"{_where(op)}: the bias of a quantized op is {bias.element}, not "
                         "an integer tensor")


def _fully_connected_shapes(op: Op) -> None:
    """Input rows of the weights' depth; result rows x units; bias one per unit."""
    _integer_bias(op, 2)
    if op.attrs.get("weights_format", "DEFAULT") != "DEFAULT":
        return
    x, w, result = (_static_shape(v) for v in (op.operands[0], op.operands[1], op.results[0]))
    if x is None or w is None or result is None:
        return
    units, depth = w
    count = limits.element_count(x)
    if depth < 1 or count % depth or count // depth * units != limits.element_count(result):
        raise ModelError(f"{_where(op)}: input {list(x)} and result {list(result)} do not "
                         f"fit weights {list(w)}")
    bias = _static_shape(op.operands[2]) if len(op.operands) > 2 else None
    if bias is not None and bias != (units,):
        raise ModelError(f"{_where(op)}: bias shape {list(bias)}, expected {[units]}")


def _reduce_shapes(op: Op) -> None:
    """No reduction over an empty dimension (MEAN would divide by zero)."""
    x, axes = _static_shape(op.operands[0]), _constant(op.operands[1])
    if x is None or axes is None:
        return
    for axis in np.ravel(axes).tolist():
        if x[axis] == 0:
            raise ModelError(f"{_where(op)}: reduces dimension {axis} of {list(x)}, which "
                             "is empty")


def _sequence_steps(op: Op) -> None:
    """Recurrent ops unroll one group of TOSA ops per time step: refuse too many."""
    x = _static_shape(op.operands[0])
    if x is None or len(x) != 3:
        return
    steps = x[0] if op.attrs.get("time_major", False) else x[1]
    limits.check_steps(steps, _where(op))


def _one_hot_shapes(op: Op) -> None:
    indices = op.operands[0].type
    _same_rank_results(op, indices.rank + 1 if isinstance(indices, TensorType)
                       and indices.rank is not None else None)


def _set_diagonal_shapes(op: Op) -> None:
    x, diagonal = _static_shape(op.operands[0]), _static_shape(op.operands[1])
    if x is not None and diagonal is not None and (
            len(diagonal) != len(x) - 1 or diagonal[:-1] != x[:-2]
            or diagonal[-1] != min(x[-2:])):
        raise ModelError(f"{_where(op)}: diagonal {list(diagonal)} does not fit input "
                         f"{list(x)}")
    _check_result_shape(op, "same")


def _rnn_shapes(op: Op) -> None:
    """RNN and UNIDIRECTIONAL_SEQUENCE_RNN (lite/kernels/basic_rnn.cc, unidirectional_
    sequence_rnn.cc): weights [units, input], recurrent [units, units], bias [units],
    state [batch, units]."""
    x, weights, recurrent, bias, state = (_static_shape(v) if isinstance(v.type, TensorType)
                                          else None for v in op.operands)
    if x is None or weights is None or recurrent is None or state is None:
        return
    time_major = len(x) == 3 and op.attrs.get("time_major", False)
    batch = x[1] if time_major else x[0]
    units = weights[0] if len(weights) == 2 else -1
    expected = {1: (units, x[-1]), 2: (units, units), 3: (units,), 4: (batch, units)}
    for position, shape in ((1, weights), (2, recurrent), (3, bias), (4, state)):
        if shape is not None and shape != expected[position]:
            raise ModelError(f"{_where(op)}: operand {position} has shape {list(shape)}, "
                             f"expected {list(expected[position])}")
    _sequence_steps(op)


def _lrn_shapes(op: Op) -> None:
    """The window sum materialises a [2 * radius] kernel: within the budget."""
    radius = op.attrs.get("radius", 0)
    if isinstance(radius, int) and radius > 0:
        limits.check_tensor((2 * radius,), 4, f"{_where(op)}: the window of radius {radius}")
    _check_result_shape(op, "same")


def _check_lstm_groups(op: Op) -> None:
    """Optional LSTM operands come in groups (lstm.cc CheckInputTensorDimensions): the
    input gate's weights and bias (absent: CIFG), peepholes, layer norms, projection."""
    present = [i < len(op.operands) and not isinstance(op.operands[i].type, NoneType)
               for i in range(24)]
    cifg = not present[1]
    groups = (("input gate (CIFG)", (1, 5, 12), True),
              ("peephole", (10, 11) if cifg else (9, 10, 11), True),
              ("layer norm", (21, 22, 23) if cifg else (20, 21, 22, 23), True))
    for name, positions, _ in groups:
        if len({present[i] for i in positions}) > 1:
            raise ModelError(f"{_where(op)}: the {name} operands {list(positions)} must be "
                             "all present or all omitted")
    if cifg and (present[9] or present[20]):
        raise ModelError(f"{_where(op)}: a CIFG LSTM has no input-gate peephole or layer norm")
    if present[17] and not present[16]:
        raise ModelError(f"{_where(op)}: a projection bias without projection weights")


_SHAPE_RULES = {"dequantize": _dequantize_shapes, "rnn": _rnn_shapes, "lrn": _lrn_shapes,
                "set_diagonal": _set_diagonal_shapes, "one_hot": _one_hot_shapes,
                "fully_connected": _fully_connected_shapes, "reduce": _reduce_shapes,
                "steps": _sequence_steps, "shape": _shape_shapes, "concat": _concat_shapes,
                "pack": _pack_shapes, "split": _split_shapes, "unpack": _unpack_shapes,
                "lstm": _lstm_shapes, "update": _update_shapes,
                "strided_slice": _strided_slice_shapes, "paddings": _paddings_shapes,
                "reshape": _reshape_shapes, "conv_2d": _conv_2d_shapes}


class _Budget:
    """The tensor budget, read from the limits once, when first needed."""

    __slots__ = ("bytes",)

    def __init__(self) -> None:
        self.bytes: int | None = None

    def __call__(self) -> int:
        if self.bytes is None:
            self.bytes = limits.max_tensor_bytes()
        return self.bytes


def _value_is_plain(value: Value, budget: _Budget) -> bool:
    """A value `_check_value` would pass, told without the text of its messages:
    a ranked tensor of a numeric type, or one quantized per tensor or per axis
    with sound parameters, within the tensor budget. False sends the value
    through `_check_value`, which says what is wrong."""
    value_type = value.type
    if value_type.__class__ is not TensorType or value_type.shape is None:
        return False
    element = value_type.element
    cls = element.__class__
    if cls is UniformQuantized:
        storage = element.storage
        if not (_MIN_SCALE <= element.scale <= _MAX_SCALE
                and storage.min_value <= element.zero_point <= storage.max_value):
            return False
        element = storage
    elif cls is UniformQuantizedPerAxis:
        storage = element.storage
        # Its scales are positive and finite (the type's own rule): no NaN to look for.
        least, greatest = element.scale_bounds
        lowest, highest = element.zero_point_bounds
        if not (_MIN_SCALE <= least and greatest <= _MAX_SCALE
                and storage.min_value <= lowest and highest <= storage.max_value):
            return False
        element = storage
    elif cls is not ScalarType:
        return False
    itemsize = _ITEMSIZES.get(element)
    return itemsize is not None and (
        limits.element_count(value_type.shape) * itemsize <= budget())


# Bytes per element of the scalar types `_value_is_plain` passes (int4 and the
# opaque types go the long way).
_ITEMSIZES = {scalar: numpy_dtype(scalar).itemsize
              for scalar in (f64, f32, f16, i1, i8, i16, i32, i64, u8, u16, u32, u64)}


def _check_value(value: Value, quantization_what: str, budget_what: str) -> None:
    _check_quantization(value, quantization_what)
    _check_budget(value, budget_what)


def _check_budget(value: Value, what: str) -> None:
    """Every declared tensor within the budget: patterns materialise constants the size
    of activations (index ramps, filled states), and validation allocates them all."""
    value_type = value.type
    if not isinstance(value_type, TensorType) or value_type.shape is None:
        return
    storage = storage_type(value_type.element)
    if storage is i4:
        itemsize = 0.5
    else:
        try:
            itemsize = numpy_dtype(storage).itemsize
        except IRError:
            return  # strings, resources: no numeric storage
    limits.check_tensor(value_type.shape, itemsize, what)


def _check_quantization(value: Value, what: str) -> None:
    value_type = value.type
    if not isinstance(value_type, TensorType):
        return
    element = value_type.element
    if isinstance(element, UniformQuantized):
        scales, zero_points = (element.scale,), (element.zero_point,)
    elif isinstance(element, UniformQuantizedPerAxis):
        scales, zero_points = element.scales, element.zero_points
    else:
        return
    if not _all_within(scales, _MIN_SCALE, _MAX_SCALE):
        for scale in scales:
            if not _MIN_SCALE <= scale <= _MAX_SCALE:
                raise ModelError(f"{what}: quantization scale {scale} is outside "
                                 f"[{_MIN_SCALE}, {_MAX_SCALE}]")
    low, high = element.storage.min_value, element.storage.max_value
    if not _all_within(zero_points, low, high):
        for zero_point in zero_points:
            if not low <= zero_point <= high:
                raise ModelError(f"{what}: zero point {zero_point} is outside the range of "
                                 f"{element.storage} [{low}, {high}]")


def _all_within(values: tuple[float, ...], low: float, high: float) -> bool:
    """Every value in [low, high] and none NaN, in loops that run in C (per-channel
    tensors have a scale per channel). With min and max in range no value is
    infinite, so the sum is NaN exactly when a value is."""
    if low <= min(values) and max(values) <= high:
        total = sum(values)
        return total == total
    return False


def _check_graph_recursion(module: Module) -> None:
    """Control flow and calls must form no cycle (inlining would never end)."""
    edges: dict[str, set[str]] = {}
    for graph in module.graphs.values():
        targets = edges.setdefault(graph.name, set())
        for op in graph.ops:
            if _GRAPH_REFERENCE_SET.isdisjoint(op.attrs):
                continue  # most ops, told in one set operation
            for name in _GRAPH_REFERENCES:
                target = op.attrs.get(name)
                if isinstance(target, str) and target in module.graphs:
                    targets.add(target)
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(edges.get(name, ())):
            if state.get(target) == 1:
                cycle = " -> ".join([*path[path.index(target):], target]) if target in path \
                    else f"{name} -> {target}"
                raise ModelError(f"corrupt model: subgraphs call each other in a cycle ({cycle})")
            if target not in state:
                visit(target, [*path, target])
        state[name] = 2

    for name in edges:
        if name not in state:
            visit(name, [name])


def _where(op: Op) -> str:
    return f"{op.loc} ({op.name})"

