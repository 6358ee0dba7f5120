"""Storage types instead of quantized types at graph boundaries and on non-quant ops.

`strip_func_quant_types` does what MLIR's `-strip-func-quant-types` does for
a function header, for every graph of the module (so the graphs that control
flow runs are stripped too):

- a quantized graph input becomes its storage integer type and a `quant.scast`
  at the head of the graph turns it back into the quantized value;
- a quantized graph output is replaced by a `quant.scast` to its storage type.

It then applies the same treatment to every op outside the quant dialect
(TOSA ops of the integer path carry quantized types): quantized operands are
passed through `scast` to storage, quantized results are retyped in place to
storage and `scast` back for their users. Each op keeps its result names.

Every `scast` inserted meets an inverse `scast` or a quant op, so after
`lower_quant_ops` and `canonicalize` (which folds `scast(scast(x))`) no
quantized type is left: `assert_no_quant_types` checks that.
"""

from __future__ import annotations

import numpy as np

from typing import cast

from tfl2tosa.errors import IRError
from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.types import TensorType, Type, is_quantized
from tfl2tosa.quant.ops import QUANT_OPS, SCAST, element_of, stripped_type


def _is_quantized_value(value: Value) -> bool:
    if isinstance(value.type, TensorType):
        return is_quantized(value.type.element)
    try:
        return is_quantized(element_of(value.type))
    except IRError:
        return False  # shape and none types


def _scast_op(graph: Graph, value: Value, result_type: object, name: str, loc: str) -> Op:
    return Op(SCAST, [value], [cast(Type, result_type)], result_names=[graph.unique_name(name)],
              loc=loc)


def _redirect_uses(old: Value, new: Value, keep: Op) -> None:
    """Point every use of `old` except `keep`'s at `new`."""
    for user, index in list(old.uses):
        if user is not keep:
            user.set_operand(index, new)


def _strip_inputs(graph: Graph) -> list[Op]:
    """Retype quantized inputs in place; an scast at the head restores the quantized value."""
    head = []
    for value in graph.inputs:
        if not _is_quantized_value(value):
            continue
        head.append(_retype_behind_scast(graph, value, value.name))
    return head


def _retype_behind_scast(graph: Graph, value: Value, loc: str) -> Op:
    """Give `value` its storage type in place; an scast after it restores the
    quantized value for every use and graph output."""
    quantized = value.type
    value.type = stripped_type(quantized)  # type: ignore[assignment]
    cast = _scast_op(graph, value, quantized, f"{value.name}/scast", loc)
    _redirect_uses(value, cast.result, cast)
    graph.outputs = [cast.result if v is value else v for v in graph.outputs]
    return cast


def _strip_outputs(graph: Graph) -> list[Op]:
    tail, outputs = [], []
    for value in graph.outputs:
        if _is_quantized_value(value):
            cast = _scast_op(graph, value, stripped_type(value.type), f"{value.name}/scast",
                             value.name)
            tail.append(cast)
            value = cast.result
        outputs.append(value)
    graph.outputs = outputs
    return tail


def _signless_payload(const: Op) -> None:
    """A uint8/uint16 constant's bytes, viewed (not copied) as the signless storage
    integers its stripped type declares."""
    array = np.asarray(const.attrs["values"])
    if array.dtype.kind == "u" and array.dtype.itemsize in (1, 2):
        const.attrs["values"] = array.view(f"i{array.dtype.itemsize}")


def _strip_op(graph: Graph, op: Op) -> list[Op]:
    """`op` with storage types, between scasts; returns the ops in order."""
    before: list[Op] = []
    for index, value in enumerate(op.operands):
        if _is_quantized_value(value):
            cast = _scast_op(graph, value, stripped_type(value.type), f"{value.name}/scast",
                             op.loc)
            op.set_operand(index, cast.result)
            before.append(cast)
    after: list[Op] = []
    if op.name == "tosa.const":
        _signless_payload(op)
    for value in op.results:
        if _is_quantized_value(value):
            after.append(_retype_behind_scast(graph, value, op.loc))
    return [*before, op, *after]


def strip_graph_quant_types(graph: Graph) -> None:
    ops: list[Op] = _strip_inputs(graph)
    for op in graph.ops:
        ops.extend([op] if op.name in QUANT_OPS else _strip_op(graph, op))
    ops.extend(_strip_outputs(graph))
    graph.ops = ops


def strip_func_quant_types(module: Module) -> None:
    """Storage types on every graph's inputs and outputs and on every non-quant op."""
    for graph in module.graphs.values():
        strip_graph_quant_types(graph)


def quantized_values(module: Module) -> list[str]:
    """`graph: value (type)` for every value that still has a quantized type."""
    found = []
    for graph in module.graphs.values():
        for value in (*graph.values(), *graph.outputs):
            if _is_quantized_value(value):
                found.append(f"{graph.name}: {value.name} ({value.type})")
    return sorted(set(found))


def assert_no_quant_types(module: Module) -> None:
    """Raise IRError naming every value that still carries a quantized type."""
    found = quantized_values(module)
    if found:
        raise IRError(f"{len(found)} value(s) still have quantized types: "
                      + "; ".join(found[:20]) + ("; ..." if len(found) > 20 else ""))
