"""The `quant` dialect's three casts: verification, builders, custom-form printing.

Semantics and verification rules follow MLIR's quant dialect (QuantOps.td,
QuantOps.cpp, QuantBase.td in llvm-project):

- `quant.dcast`: quantized -> its expressed float type (dequantize);
- `quant.qcast`: float -> quantized (quantize);
- `quant.scast`: quantized <-> its storage integer type, a reinterpretation of
  the stored bits with no arithmetic.

Operand and result must be both scalars or both tensors of the same shape
(ranked with identical static and dynamic dims, or both unranked). A value
type here is a TensorType, or, for MLIR's scalar form, a bare element type.
"""

from __future__ import annotations

from typing import cast

from tfl2tosa.errors import IRError
from tfl2tosa.ir.builder import Builder
from tfl2tosa.ir.core import OP_PRINTERS, Op, Value
from tfl2tosa.ir.types import (
    DYNAMIC,
    ElementType,
    QuantizedType,
    ScalarType,
    TensorType,
    UniformQuantized,
    UniformQuantizedPerAxis,
    i8,
    i16,
    i32,
    is_quantized,
    scalar_type,
)

DCAST = "quant.dcast"
QCAST = "quant.qcast"
SCAST = "quant.scast"
QUANT_OPS = frozenset({DCAST, QCAST, SCAST})

_ELEMENT_TYPES = (ScalarType, UniformQuantized, UniformQuantizedPerAxis)


def element_of(value_type: object) -> ElementType:
    """The element type of a tensor type, or the type itself for a scalar."""
    if isinstance(value_type, TensorType):
        return value_type.element
    if isinstance(value_type, _ELEMENT_TYPES):
        return value_type  # type: ignore[return-value]
    raise IRError(f"{value_type} is neither a scalar nor a tensor type")


def with_element(value_type: object, element: ElementType) -> object:
    """`value_type` with its element replaced (a scalar type becomes `element`)."""
    if isinstance(value_type, TensorType):
        return value_type.with_element(element)
    element_of(value_type)  # raises for shape and none types
    return element


def storage_integer(q: QuantizedType) -> ScalarType:
    """The signless integer type that holds `q`'s stored bits.

    As in MLIR, unsigned storage is held in a signless integer of the same
    width: `!quant.uniform<u8:...>` is stored as `i8` (TOSA has no unsigned
    tensors either; RESCALE reads such data with `input_unsigned`).
    """
    bits = q.storage.bits
    return _SIGNLESS.get(bits) or scalar_type(f"i{bits}")


_SIGNLESS = {8: i8, 16: i16, 32: i32}


def stripped_type(value_type: object) -> object:
    """`value_type` with a quantized element replaced by its storage integer."""
    if value_type.__class__ is TensorType:  # most values
        element = value_type.element  # type: ignore[attr-defined]
        if element.__class__ is ScalarType:
            return value_type
        if is_quantized(element):
            return value_type.with_element(storage_integer(element))  # type: ignore[attr-defined]
        return value_type
    element = element_of(value_type)
    if is_quantized(element):
        return with_element(value_type, storage_integer(element))  # type: ignore[arg-type]
    return value_type


# ---------------------------------------------------------------------------
# Verification


def _fail(op: Op, message: str) -> IRError:
    where = f" ({op.loc})" if op.loc else ""
    return IRError(f"{op.name}{where}: {message}")


def _check_same_shape(op: Op, operand: object, result: object) -> None:
    """MLIR's quant_SameScalarOrTensorShape trait."""
    in_tensor, out_tensor = isinstance(operand, TensorType), isinstance(result, TensorType)
    same = (not in_tensor and not out_tensor) or (
        in_tensor and out_tensor and operand.shape == result.shape)  # type: ignore[union-attr]
    if not same:
        raise _fail(op, "input and result are both scalars or both tensors with matching "
                        f"shape is required, got {operand} and {result}")


def _check_per_axis(op: Op, container: object, q: QuantizedType) -> None:
    """MLIR's per-axis quantization integrity rules (QuantBase.td)."""
    if not isinstance(q, UniformQuantizedPerAxis):
        return
    if not isinstance(container, TensorType):
        raise _fail(op, "scalar types may not use per-axis quantization")
    if container.shape is None:
        return
    if q.axis >= len(container.shape):
        raise _fail(op, f"quantized dimension {q.axis} must be less than tensor rank "
                        f"{len(container.shape)}")
    size = container.shape[q.axis]
    if size != DYNAMIC and size != q.scale_count:
        raise _fail(op, f"quantized dimension size {size} does not match the number of "
                        f"scales ({q.scale_count})")


def _check_cast(op: Op, quantized_side: object, float_side: object) -> None:
    """dcast/qcast: one side quantized, the other its expressed float type."""
    element, f = element_of(quantized_side), element_of(float_side)
    if not is_quantized(element):
        raise _fail(op, f"expected a quantized type, got {quantized_side}")
    q = cast(QuantizedType, element)
    if not (isinstance(f, ScalarType) and f.is_float):
        raise _fail(op, f"expected a float type, got {float_side}")
    if q.expressed != f:
        raise _fail(op, f"expressed type {q.expressed} of the quantized type must match "
                        f"the float type {f}")
    _check_per_axis(op, quantized_side, q)


def _check_scast(op: Op, operand: object, result: object) -> None:
    a, b = element_of(operand), element_of(result)
    if is_quantized(a) and isinstance(b, ScalarType) and b.is_integer:
        quantized, integer, container = a, b, operand
    elif is_quantized(b) and isinstance(a, ScalarType) and a.is_integer:
        quantized, integer, container = b, a, result
    else:
        raise _fail(op, f"input must be integer and result quantized, or vice versa; got "
                        f"{operand} and {result}")
    q = cast(QuantizedType, quantized)
    # MLIR requires the storage type itself (signless iN); an explicitly
    # unsigned integer is accepted for unsigned storage of the same width.
    if integer.bits != q.storage.bits or (not integer.is_signed and q.storage.is_signed):
        raise _fail(op, f"storage type {q.storage} of the quantized type does not match "
                        f"the integer type {integer}")
    _check_per_axis(op, container, q)


def verify_quant_op(op: Op) -> None:
    """Check one `quant` op against the dialect's rules; raise IRError if broken."""
    if op.name not in QUANT_OPS:
        raise _fail(op, "not a quant dialect op")
    if len(op.operands) != 1 or len(op.results) != 1:
        raise _fail(op, f"expects one operand and one result, got {len(op.operands)} and "
                        f"{len(op.results)}")
    operand, result = op.operands[0].type, op.result.type
    element_of(operand), element_of(result)  # shape and none types are rejected here
    _check_same_shape(op, operand, result)
    if op.name == DCAST:
        _check_cast(op, operand, result)
    elif op.name == QCAST:
        _check_cast(op, result, operand)
    else:
        _check_scast(op, operand, result)


def verify_quant_ops(module_or_graph: object) -> None:
    """Verify every `quant` op of a Module or Graph."""
    graphs = getattr(module_or_graph, "graphs", None)
    for graph in (graphs.values() if graphs is not None else [module_or_graph]):
        for op in graph.ops:  # type: ignore[attr-defined]
            if op.name in QUANT_OPS:
                verify_quant_op(op)


# ---------------------------------------------------------------------------
# Builders


def _build(b: Builder, name: str, value: Value, result_type: object) -> Value:
    op = b.create(name, [value], [result_type])  # type: ignore[list-item]
    try:
        verify_quant_op(op)
    except IRError:
        b.ops.remove(op)
        b.created.remove(op)
        op.drop_operand_uses()
        raise
    return op.result


def dcast(b: Builder, value: Value) -> Value:
    """Dequantize `value` to its expressed float type."""
    element = element_of(value.type)
    if not is_quantized(element):
        raise IRError(f"dcast of {value.name}: {value.type} is not quantized")
    expressed = cast(QuantizedType, element).expressed
    return _build(b, DCAST, value, with_element(value.type, expressed))


def qcast(b: Builder, value: Value, quantized: object) -> Value:
    """Quantize float `value` to `quantized` (a quantized element, or a full type)."""
    result_type = quantized if isinstance(quantized, TensorType) else with_element(
        value.type, quantized)  # type: ignore[arg-type]
    return _build(b, QCAST, value, result_type)


def scast(b: Builder, value: Value, target: object) -> Value:
    """Reinterpret `value` as `target` (storage integer <-> quantized), same bits."""
    result_type = target if isinstance(target, TensorType) else with_element(
        value.type, target)  # type: ignore[arg-type]
    return _build(b, SCAST, value, result_type)


# ---------------------------------------------------------------------------
# Printing: MLIR's custom form, `$input attr-dict : type($input) to type($result)`


def print_quant_op(op: Op, operand_names: list[str]) -> str | None:
    if op.name not in QUANT_OPS or op.attrs or len(operand_names) != 1 or len(op.results) != 1:
        return None
    return f"{op.name} {operand_names[0]} : {op.operands[0].type} to {op.result.type}"


OP_PRINTERS["quant"] = print_quant_op
