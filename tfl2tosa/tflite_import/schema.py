"""What the TFLite schema (through the `tflite` package) tells us: op names,
element types and builtin options turned into attributes.

Options become attributes generically: every field accessor of the options
table, snake_cased as in schema.fbs (`StrideH` -> `stride_h`), enum-typed
fields spelled by their schema names (`padding="SAME"`,
`fused_activation_function="RELU6"`). The enum-typed fields are listed below
from schema.fbs because the generated Python does not record them.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import flatbuffers.number_types
import numpy as np
import tflite

from tfl2tosa.errors import ModelError
from tfl2tosa.ir import types as t
from tfl2tosa.memo import BoundedMemo
from tfl2tosa.tflite_import.flat import I32, U8, U16, Table
from tfl2tosa.tflite_import.source import int_vector, reading, text


def _enum_names(enum_class: type) -> dict[int, str]:
    return {value: name for name, value in vars(enum_class).items()
            if not name.startswith("_") and isinstance(value, int)}


BUILTIN_NAMES: dict[int, str] = _enum_names(tflite.BuiltinOperator)
CUSTOM_CODE = tflite.BuiltinOperator.CUSTOM
# A marker in the schema (the first code that lives only in `builtin_code`), not an op.
PLACEHOLDER_CODE = tflite.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES

TENSOR_TYPE_NAMES = _enum_names(tflite.TensorType)

# TFLite TensorType -> our element type. Schema order.
ELEMENT_TYPES: dict[int, t.ScalarType] = {
    tflite.TensorType.FLOAT32: t.f32,
    tflite.TensorType.FLOAT16: t.f16,
    tflite.TensorType.INT32: t.i32,
    tflite.TensorType.UINT8: t.u8,
    tflite.TensorType.INT64: t.i64,
    tflite.TensorType.STRING: t.string,
    tflite.TensorType.BOOL: t.i1,
    tflite.TensorType.INT16: t.i16,
    tflite.TensorType.COMPLEX64: t.complex64,
    tflite.TensorType.INT8: t.i8,
    tflite.TensorType.FLOAT64: t.f64,
    tflite.TensorType.COMPLEX128: t.complex128,
    tflite.TensorType.UINT64: t.u64,
    tflite.TensorType.RESOURCE: t.resource,
    tflite.TensorType.VARIANT: t.variant,
    tflite.TensorType.UINT32: t.u32,
    tflite.TensorType.UINT16: t.u16,
    tflite.TensorType.INT4: t.i4,
    tflite.TensorType.BFLOAT16: t.bf16,
}

# Enum-typed option fields (schema.fbs), by snake_case field name: the enum's
# name in the `tflite` package, whose module loads when a model first uses the field.
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


@lru_cache(maxsize=None)
def _enum_value_names(field: str) -> dict[int, str]:
    return _enum_names(getattr(tflite, _ENUM_FIELDS[field]))

# `<x>_subgraph_index` fields also get an attribute `<x>` naming the graph;
# these take MLIR's TFLite-dialect names instead.
SUBGRAPH_ATTR_NAMES = {"then": "then_branch", "else": "else_branch",
                       "init": "session_init_function"}

# Options table names by union code; each class loads when a model first uses it.
_OPTIONS_NAMES = {code: name for code, name in _enum_names(tflite.BuiltinOptions).items()
                  if name != "NONE"}
_OPTIONS2_NAMES = {code: name for code, name in _enum_names(tflite.BuiltinOptions2).items()
                   if name != "NONE"}


@lru_cache(maxsize=None)
def _options_class(name: str) -> type | None:
    return getattr(tflite, name, None)


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
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


_SKIPPED_METHODS = ("Init",)


@lru_cache(maxsize=None)
def _option_fields(options_class: type) -> tuple[tuple[str, str, Callable], ...]:
    """(attribute name, kind, accessor) per field, in schema order.

    kind: "vector" (has an AsNumpy accessor) or "scalar" (numbers, bools, strings).
    """
    methods = vars(options_class)
    fields = []
    for name, method in methods.items():
        if (not name[:1].isupper() or name in _SKIPPED_METHODS or name.startswith("GetRootAs")
                or name.endswith(("AsNumpy", "Length", "IsNone", "BufferHasIdentifier"))):
            continue
        kind = "vector" if name + "AsNumpy" in methods else "scalar"
        fields.append((snake_case(name), kind, method))
    return tuple(fields)


def _enum_text(field: str, value: int) -> str:
    return _enum_value_names(field).get(int(value), f"UNKNOWN_{int(value)}")


def _vector_value(options: Any, field: str, accessor_name: str, what: str) -> Any:
    array = int_vector(options, accessor_name, what)
    if field in _ENUM_FIELDS:
        return tuple(_enum_text(field, v) for v in array.tolist())
    if array.dtype == np.uint8:
        return bytes(array)
    return tuple(array.tolist())


# (options class, its table's bytes) -> attributes, for tables of numbers only.
_DECODED_OPTIONS: BoundedMemo = BoundedMemo()
_NUMBERS = frozenset({int, float, bool})


@lru_cache(maxsize=None)
def _scalar_widths(options_class: type) -> tuple[int, ...] | None:
    """Per field of the vtable, the bytes its accessor reads (0: none), for an
    options table whose fields are all scalars; None for any other.

    Read from the generated accessors, which flatc writes as
    `self._tab.Offset(<vtable slot>)` then `self._tab.Get(<number type>, ...)`;
    an accessor not of that form (a vector, a string, a table) gives None."""
    widths: dict[int, int] = {}
    for _, kind, accessor in _option_fields(options_class):
        code = accessor.__code__
        types = [name for name in code.co_names
                 if name.endswith("Flags") and name != "UOffsetTFlags"]
        slots = [c for c in code.co_consts if c.__class__ is int and c >= 4]
        number_type = getattr(flatbuffers.number_types, types[0], None) if types else None
        if (kind != "scalar" or len(types) != 1 or len(slots) != 1 or "Get" not in code.co_names
                or number_type is None or slots[0] % 2):
            return None
        widths[(slots[0] - 4) // 2] = number_type.bytewidth
    return tuple(widths.get(i, 0) for i in range(max(widths, default=-1) + 1))


def _numeric_table_key(buf: Any, position: int, options_class: type
                       ) -> tuple[type, bytes, bytes] | None:
    """The bytes that decide a table of scalar fields: its vtable, and its
    inline data up to the end of the last field the vtable places that its
    accessors read. None where the table cannot be read so (it is then
    decoded, and checked, field by field)."""
    widths = _scalar_widths(options_class)
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
        return (options_class, bytes(buf[vtable:vtable + vtable_size]),
                bytes(buf[position + 4:end]))
    except (struct.error, IndexError, ValueError):
        return None


def options_attrs(buf: Any, position: int, options_class: type, what: str) -> dict[str, Any]:
    """The fields of one options table (at `position` of `buf`) as attributes.

    Models repeat the same options (a stride, a padding, an activation) op
    after op: a table of numbers only is decoded once per distinct content."""
    key = _numeric_table_key(buf, position, options_class)
    if key is not None:
        decoded = _DECODED_OPTIONS.get(key)
        if decoded is not None:
            return dict(decoded)
    attrs, numeric = _decode_options(buf, position, options_class, what)
    if key is not None and numeric:
        _DECODED_OPTIONS.keep(key, dict(attrs))
    return attrs


def _decode_options(buf: Any, position: int, options_class: type, what: str
                    ) -> tuple[dict[str, Any], bool]:
    """The attributes of one options table, and whether every field is a number
    (no vector, string or table: nothing read outside the table itself)."""
    options = options_class()
    with reading(f"{what} {options_class.__name__}"):
        options.Init(buf, position)
    attrs: dict[str, Any] = {}
    numeric = True
    for field, kind, accessor in _option_fields(options_class):
        field_what = f"{what} {options_class.__name__}.{field}"
        if kind == "vector":
            camel = accessor.__name__
            attrs[field] = _vector_value(options, field, camel, field_what)
            numeric = False
            continue
        with reading(field_what):
            value = accessor(options)
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
            name = names.get(code)
            options_class = _options_class(name) if name else None
            if options_class is None:
                # A union member newer than the `tflite` package: nothing we can decode.
                continue
            position = op.union_position(table_slot)
            if position is None:
                continue
        attrs.update(options_attrs(op.buf, position, options_class, what))
    return attrs
