"""The dequantize -> float lowering -> quantize fallback for quantized ops.

Used for a quantized op that has no integer lowering: each quantized operand
goes through `quant.dcast` to its expressed float type (a quantized constant
is dequantized at conversion time instead, as TFLite's DEQUANTIZE computes it,
`float(double(scale) * (q - zp))`: that is what a dcast of it would give, and
it also covers storage types TOSA cannot CAST, such as the int64 biases of
16x8 convolutions), the op is lowered by
its float pattern on a float-typed stand-in, and each quantized result comes
back through `quant.qcast`. `lower_quant_ops` turns the casts into TOSA
arithmetic; a `dcast(qcast(x))` pair between neighbouring fallback ops is
kept, because TFLite rounds and saturates that tensor to its quantized type.
"""

from __future__ import annotations

import numpy as np

from legalize.common import constant_value
from legalize.quantized import dequantized_values
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter, discard_since
from tfl2tosa.ir.types import (
    TensorType,
    expressed_type,
    is_quantized,
    numpy_dtype,
)
from tfl2tosa.tosa import build


def _is_quantized(value: Value) -> bool:
    return isinstance(value.type, TensorType) and is_quantized(value.type.element)


def _float_type(value: Value) -> object:
    if _is_quantized(value):
        return value.type.with_element(expressed_type(value.type.element))
    return value.type


def dequantized(rw: Rewriter, value: Value) -> Value:
    """`value` in its expressed float type: a folded constant, else a dcast."""
    array = constant_value(value)
    float_type = _float_type(value)
    if array is None or not float_type.is_static:
        return rw.op("quant.dcast", [value], float_type)
    stored = np.asarray(array).reshape(float_type.shape)
    real = dequantized_values(stored, value.type.element)
    # `real` is a fresh array: the constant may hold it when it is already of its type.
    return build.const(rw, real.astype(numpy_dtype(float_type.element), copy=False),
                       float_type.element)


def lower_through_float(op: Op, rw: Rewriter,
                        disabled: frozenset[str]) -> tuple[list[Value], str] | Failure:
    """Lower a quantized `op` in float; returns (replacement values, pattern label)."""
    from legalize.registry import op_key, patterns_for

    candidates = patterns_for(op_key(op), disabled, kinds=("float", "any"))
    if not candidates:
        return Failure("no float lowering either")
    operands = [dequantized(rw, v) if _is_quantized(v) else v for v in op.operands]
    # A float stand-in for the op: same attributes and names, float types.
    stand_in = Op(op.name, operands, [_float_type(r) for r in op.results], op.attrs,
                  result_names=[r.name for r in op.results], loc=op.loc)
    try:
        reasons = []
        for entry in candidates:
            mark = len(rw.ops)
            values = entry.fn(stand_in, rw)
            if values is None or isinstance(values, Failure):
                discard_since(rw.ops, mark)
                reasons.append(values.reason if isinstance(values, Failure) else entry.label)
                continue
            results = [rw.op("quant.qcast", [v], r.type) if _is_quantized(r) else v
                       for v, r in zip(values, op.results)]
            return results, entry.label
        return Failure("; ".join(reasons))
    finally:
        stand_in.drop_operand_uses()
