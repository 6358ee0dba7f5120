"""What the TFLite schema tells us: op names, element types and builtin
options turned into attributes (the schema as `schema_data.py` describes it,
generated from the `tflite` package).

Options become attributes generically: every field accessor of the options
table, snake_cased as in schema.fbs (`StrideH` -> `stride_h`), enum-typed
fields spelled by their schema names (`padding="SAME"`,
`fused_activation_function="RELU6"`). The enum-typed fields are listed below
from schema.fbs because the generated Python does not record them.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any

import numpy as np

from tfl2tosa.errors import ModelError
from tfl2tosa.ir import types as t
from tfl2tosa.memo import BoundedMemo
from tfl2tosa.tflite_import.flat import I32, U8, U16, SchemaTable, Table
from tfl2tosa.tflite_import.schema_data import ENUMS, TABLES
from tfl2tosa.tflite_import.source import int_vector, reading, text


def _code(enum: str, name: str) -> int:
    return next(code for code, text in ENUMS[enum].items() if text == name)


BUILTIN_NAMES: dict[int, str] = ENUMS["BuiltinOperator"]
CUSTOM_CODE = _code("BuiltinOperator", "CUSTOM")
# A marker in the schema (the first code that lives only in `builtin_code`), not an op.
PLACEHOLDER_CODE = _code("BuiltinOperator", "PLACEHOLDER_FOR_GREATER_OP_CODES")

TENSOR_TYPE_NAMES = ENUMS["TensorType"]
_TENSOR_TYPES = {name: code for code, name in TENSOR_TYPE_NAMES.items()}

# TFLite TensorType -> our element type. Schema order.
ELEMENT_TYPES: dict[int, t.ScalarType] = {_TENSOR_TYPES[name]: element for name, element in (
    ("FLOAT32", t.f32),
    ("FLOAT16", t.f16),
    ("INT32", t.i32),
    ("UINT8", t.u8),
    ("INT64", t.i64),
    ("STRING", t.string),
    ("BOOL", t.i1),
    ("INT16", t.i16),
    ("COMPLEX64", t.complex64),
    ("INT8", t.i8),
    ("FLOAT64", t.f64),
    ("COMPLEX128", t.complex128),
    ("UINT64", t.u64),
    ("RESOURCE", t.resource),
    ("VARIANT", t.variant),
    ("UINT32", t.u32),
    ("UINT16", t.u16),
    ("INT4", t.i4),
    ("BFLOAT16", t.bf16),
)}

# Enum-typed option fields (schema.fbs), by snake_case field name: the enum's
# name (schema_data.ENUMS).
_ENUM_FIELDS: dict[str, str] = {
    "fused_activation_function": "ActivationFunctionType",
    "padding": "Padding",  # scalar only: StableHLO's `padding` is a [long]
    "quantized_bias_type": "TensorType",
    "in_data_type": "TensorType",
    "out_data_type": "TensorType",
    "output_type": "TensorType",
    "out_type": "TensorType",
    "idx_out_type": "TensorType",
    "key_dtype": "TensorType",
    "value_dtype": "TensorType",
    "type": "LSHProjectionType",
    "weights_format": "FullyConnectedOptionsWeightsFormat",
    "kernel_type": "LSTMKernelType",
    "combiner": "CombinerType",
    "mode": "MirrorPadMode",
    "reduce_function": "ReduceWindowFunction",
    "comparison_direction": "StablehloComparisonDirection",
    "compare_type": "StablehloComparisonType",
    "algorithm": "RngAlgorithm",
    "precision_config": "StablehloPrecisionConfig",
    "composite_attributes_format": "CustomOptionsFormat",
}


def _enum_value_names(field: str) -> dict[int, str]:
    return ENUMS[_ENUM_FIELDS[field]]

# `<x>_subgraph_index` fields also get an attribute `<x>` naming the graph;
# these take MLIR's TFLite-dialect names instead.
SUBGRAPH_ATTR_NAMES = {"then": "then_branch", "else": "else_branch",
                       "init": "session_init_function"}

# Options table names by union code.
_OPTIONS_NAMES = {code: name for code, name in ENUMS["BuiltinOptions"].items() if name != "NONE"}
_OPTIONS2_NAMES = {code: name for code, name in ENUMS["BuiltinOptions2"].items()
                   if name != "NONE"}


def op_name_for_code(code: int) -> tuple[str, str]:
    """(IR op name, schema name) for a builtin code; unknown codes -> `tfl.unknown`."""
    name = BUILTIN_NAMES.get(code)
    if name is None or code == PLACEHOLDER_CODE:
        return "tfl.unknown", name or f"BUILTIN_{code}"
    return "tfl." + name.lower(), name


def element_type(type_code: int, what: str) -> t.ScalarType:
    try:
        return ELEMENT_TYPES[type_code]
    except KeyError:
        raise ModelError(f"corrupt model: {what} has unknown tensor type {type_code}") from None


def snake_case(camel: str) -> str:
    """`StrideH` -> `stride_h`: an underscore before each capital but the first."""
    return "".join(f"_{c}" if "A" <= c <= "Z" and i else c for i, c in enumerate(camel)).lower()


@lru_cache(maxsize=None)
def _option_fields(table: str) -> tuple[tuple[str, str, str], ...]:
    """(attribute name, kind, accessor name) per field of options table
    `table`, in schema order.

    kind: "vector" (of numbers) or "scalar" (numbers, bools, strings).
    """
    return tuple((snake_case(accessor), "vector" if kind == "vector" else "scalar", accessor)
                 for accessor, _, kind, _, _ in TABLES[table])


def _enum_text(field: str, value: int) -> str:
    return _enum_value_names(field).get(int(value), f"UNKNOWN_{int(value)}")


def _vector_value(options: Any, field: str, accessor_name: str, what: str) -> Any:
    array = int_vector(options, accessor_name, what)
    if field in _ENUM_FIELDS:
        return tuple(_enum_text(field, v) for v in array.tolist())
    if array.dtype == np.uint8:
        return bytes(array)
    return tuple(array.tolist())


# (options table, its table's bytes) -> attributes, for tables of numbers only.
_DECODED_OPTIONS: BoundedMemo = BoundedMemo()
_NUMBERS = frozenset({int, float, bool})


@lru_cache(maxsize=None)
def _scalar_widths(table: str) -> tuple[int, ...] | None:
    """Per field of the vtable, the bytes its accessor reads (0: none), for an
    options table whose fields are all numbers; None for any other."""
    widths: dict[int, int] = {}
    for _, slot, kind, value_type, _ in TABLES[table]:
        if kind not in ("number", "bool"):
            return None
        widths[(slot - 4) // 2] = struct.calcsize(value_type)
    return tuple(widths.get(i, 0) for i in range(max(widths, default=-1) + 1))


def _numeric_table_key(buf: Any, position: int, table: str
                       ) -> tuple[str, bytes, bytes] | None:
    """The bytes that decide a table of scalar fields: its vtable, and its
    inline data up to the end of the last field the vtable places that its
    accessors read. None where the table cannot be read so (it is then
    decoded, and checked, field by field)."""
    widths = _scalar_widths(table)
    if widths is None:
        return None
    try:
        vtable = position - I32.unpack_from(buf, position)[0]
        if vtable < 0 or position < 0:  # struct would read from the end
            return None
        vtable_size = U16.unpack_from(buf, vtable)[0]
        if vtable_size < 4 or vtable_size % 2:
            return None
        offsets = struct.unpack_from(f"<{vtable_size // 2 - 2}H", buf, vtable + 4)
        end = position + max([4] + [offset + width for offset, width in zip(offsets, widths)
                                    if offset and width])
        if end > len(buf):
            return None
        return (table, bytes(buf[vtable:vtable + vtable_size]),
                bytes(buf[position + 4:end]))
    except (struct.error, IndexError, ValueError):
        return None


def options_attrs(buf: Any, position: int, table: str, what: str) -> dict[str, Any]:
    """The fields of options table `table` (at `position` of `buf`) as attributes.

    Models repeat the same options (a stride, a padding, an activation) op
    after op: a table of numbers only is decoded once per distinct content."""
    key = _numeric_table_key(buf, position, table)
    if key is not None:
        decoded = _DECODED_OPTIONS.get(key)
        if decoded is not None:
            return dict(decoded)
    attrs, numeric = _decode_options(buf, position, table, what)
    if key is not None and numeric:
        _DECODED_OPTIONS.keep(key, dict(attrs))
    return attrs


def _decode_options(buf: Any, position: int, table: str, what: str
                    ) -> tuple[dict[str, Any], bool]:
    """The attributes of one options table, and whether every field is a number
    (no vector, string or table: nothing read outside the table itself)."""
    with reading(f"{what} {table}"):
        options = SchemaTable(table, buf, position)
    attrs: dict[str, Any] = {}
    numeric = True
    for field, kind, accessor in _option_fields(table):
        field_what = f"{what} {table}.{field}"
        if kind == "vector":
            attrs[field] = _vector_value(options, field, accessor, field_what)
            numeric = False
            continue
        with reading(field_what):
            value = options.read(accessor)
        if value.__class__ not in _NUMBERS:
            numeric = False
        if isinstance(value, bytes):
            value = text(value, field_what)
        elif value is None:
            value = ""
        elif field in _ENUM_FIELDS and not isinstance(value, bool):
            value = _enum_text(field, value)
        attrs[field] = value
    return attrs, numeric


# Operator table slots: (builtin_options_type, builtin_options) and the same for
# builtin_options_2 (fields 3, 4, 11 and 12 of schema.fbs's Operator).
_OPTIONS_SLOTS = ((10, 12, _OPTIONS_NAMES), (26, 28, _OPTIONS2_NAMES))


def builtin_options(op: Table, what: str) -> dict[str, Any]:
    """Attributes from `builtin_options` and `builtin_options_2` of an operator."""
    attrs: dict[str, Any] = {}
    context = reading(f"{what} options")
    for type_slot, table_slot, names in _OPTIONS_SLOTS:
        with context:
            code = op.scalar(type_slot, U8)
            if code == 0:
                continue
            table = names.get(code)
            if table is None:
                # A union member newer than the `tflite` package: nothing we can decode.
                continue
            position = op.union_position(table_slot)
            if position is None:
                continue
        attrs.update(options_attrs(op.buf, position, table, what))
    return attrs
