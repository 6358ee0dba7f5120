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

The pairs canonicalize would fold at once are not created: a value whose every
user is a non-quant op (or a graph output) is retyped with no restoring
`scast`, and an operand produced by an `scast` from its storage type is read
from that storage value. A retyped value's restoring cast that is not made
takes no name: only that value's casts would ever ask for such a name, and
no pass after this one names values.
"""

from __future__ import annotations

from itertools import chain
from operator import attrgetter
from typing import cast

import numpy as np

from tfl2tosa.errors import IRError
from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.types import NoneType, ScalarType, ShapeType, TensorType, Type, is_quantized
from tfl2tosa.quant.ops import QUANT_OPS, SCAST, element_of, stripped_type


def _is_quantized_value(value: Value) -> bool:
    return _is_quantized_type(value.type)


def _scast_op(value: Value, result_type: object, name: str, loc: str) -> Op:
    return Op(SCAST, [value], [cast(Type, result_type)], result_names=[name], loc=loc)


def _redirect_uses(old: Value, new: Value, keep: Op) -> None:
    """Point every use of `old` except `keep`'s at `new`."""
    for user, index in list(old.uses):
        if user is not keep:
            user.set_operand(index, new)


class _Stripper:
    """Strips one graph."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph

    def inputs(self) -> list[Op]:
        """Retype quantized inputs in place; an scast at the head restores the
        quantized value where a quant op reads it."""
        head = []
        for value in self.graph.inputs:
            if _is_quantized_value(value):
                head.extend(self.retype(value, value.name))
        return head

    def retype(self, value: Value, loc: str) -> list[Op]:
        """Give `value` its storage type in place; an scast after it restores the
        quantized value for every use and graph output, unless only non-quant
        ops and graph outputs use it (they would cast it straight back)."""
        quantized = value.type
        value.type = stripped_type(quantized)  # type: ignore[assignment]
        if all(user.name not in QUANT_OPS for user, _ in value.uses):
            return []
        name = self.graph.unique_name(f"{value.name}/scast")
        cast = _scast_op(value, quantized, name, loc)
        _redirect_uses(value, cast.result, cast)
        self.graph.outputs = [cast.result if v is value else v for v in self.graph.outputs]
        return [cast]

    def to_storage(self, value: Value, loc: str) -> tuple[Value, Op | None]:
        """`value` as its storage type: the value an inverse scast consumed, the
        retyped value itself, or a new scast of it."""
        if not _is_quantized_value(value):
            return value, None
        storage = stripped_type(value.type)
        name = self.graph.unique_name(f"{value.name}/scast")
        source = value.owner
        # canonicalize's fold_scast_of_scast, done before the cast exists. Not
        # where canonicalize would fold `source` first, nor where the rewrite
        # driver would rename the folded value (only under the cast's name).
        if source is not None and source.name == SCAST:
            original = source.operands[0]
            feeder = original.owner
            if (original.type == storage and not original.name.startswith(name + "/")
                    and (feeder is None or feeder.name != SCAST)):
                return original, None
        cast = _scast_op(value, storage, name, loc)
        return cast.result, cast

    def outputs(self) -> list[Op]:
        tail, outputs = [], []
        for value in self.graph.outputs:
            value, cast = self.to_storage(value, value.name)
            if cast is not None:
                tail.append(cast)
            outputs.append(value)
        self.graph.outputs = outputs
        return tail

    def op(self, op: Op, ops: list[Op]) -> None:
        """Append `op` with storage types, between scasts, to `ops`."""
        for index, value in enumerate(op.operands):
            value_type = value.type
            # Most operands: a plain tensor, or one retyped already.
            if value_type.__class__ is TensorType and value_type.element.__class__ is ScalarType:
                continue
            stored, cast = self.to_storage(value, op.loc)
            if stored is not value:
                op.set_operand(index, stored)
            if cast is not None:
                ops.append(cast)
        if op.name == "tosa.const":
            _signless_payload(op)
        ops.append(op)
        for value in op.results:
            value_type = value.type
            if value_type.__class__ is TensorType and value_type.element.__class__ is ScalarType:
                continue
            if _is_quantized_value(value):
                ops.extend(self.retype(value, op.loc))


def _signless_payload(const: Op) -> bool:
    """A uint8/uint16 constant's bytes, viewed (not copied) as the signless storage
    integers its stripped type declares; whether they were unsigned."""
    array = const.attrs["values"]
    if array.__class__ is not np.ndarray:
        array = np.asarray(array)
    if array.dtype.kind == "u" and array.dtype.itemsize in (1, 2):
        const.attrs["values"] = array.view(f"i{array.dtype.itemsize}")
        return True
    return False


def strip_graph_quant_types(graph: Graph) -> bool:
    """Strip one graph; whether it changed."""
    if not _has_quantized_values(graph):  # a float graph: only constants may change
        changed = False
        for op in graph.ops:
            if op.name == "tosa.const" and _signless_payload(op):
                changed = True
        return changed
    stripper = _Stripper(graph)
    ops: list[Op] = stripper.inputs()
    for op in graph.ops:
        if op.name in QUANT_OPS:
            ops.append(op)
        else:
            stripper.op(op, ops)
    ops.extend(stripper.outputs())
    graph.ops = ops
    return True


def _has_quantized_values(graph: Graph) -> bool:
    """Whether a value of the graph (an input, or an operand or result of an op)
    has a quantized type. Values share a few types (tensor types are interned),
    so each distinct one is looked at once."""
    ops = graph.ops
    values = chain(graph.inputs, chain.from_iterable(map(_RESULTS, ops)),
                   chain.from_iterable(map(_OPERANDS, ops)))
    try:
        types = set(map(_TYPE, values))
    except TypeError:  # a type that cannot be hashed: look at every value
        return True
    return any(map(_is_quantized_type, types))


# Types without an element type: shapes (every RESHAPE's and SLICE's operands)
# and the absent operand.
_NO_ELEMENT = frozenset({ShapeType, NoneType})
_RESULTS = attrgetter("results")  # an op's
_OPERANDS = attrgetter("operands")  # an op's
_TYPE = attrgetter("type")  # a value's


def _is_quantized_type(value_type: Type) -> bool:
    if isinstance(value_type, TensorType):
        return is_quantized(value_type.element)
    if value_type.__class__ in _NO_ELEMENT:  # told without element_of's error
        return False
    try:
        return is_quantized(element_of(value_type))
    except IRError:
        return False  # shape and none types


def strip_func_quant_types(module: Module) -> bool:
    """Storage types on every graph's inputs and outputs and on every non-quant op;
    whether the module changed (a float module may not)."""
    changed = False
    for graph in module.graphs.values():
        if strip_graph_quant_types(graph):
            changed = True
    return changed


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
