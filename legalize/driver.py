"""Legalization driver: lower every `tfl` op of a module to TOSA.

For each op the registered patterns are tried in order. A quantized op that
no pattern lowers in integer arithmetic takes the fallback (when enabled):
its quantized inputs are dequantized (`quant.dcast`), the float pattern runs,
and its results are quantized again (`quant.qcast`). Every op's outcome is
recorded, so the conversion report can say which ops took the integer path,
which the fallback, and why each unconverted op was refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from legalize.fallback import lower_through_float
from legalize.registry import op_key, patterns_for
from tfl2tosa.ir.core import Graph, Module, Op
from tfl2tosa.ir.rewrite import Failure, Rewriter, discard_since, replace_op
from tfl2tosa.ir.types import TensorType, UniformQuantizedPerAxis, is_quantized


# Ops that have no lowering of their own: consumers read them, DCE removes them.
KEPT_FOR_CONSUMERS = frozenset({"tfl.no_value"})


@dataclass(frozen=True)
class OpOutcome:
    """What happened to one TFL op."""

    op_name: str        # "tfl.conv_2d"
    loc: str            # TFLite location: "main:op12:CONV_2D"
    types: str          # operand -> result element types, e.g. "i8,i8,i32 -> i8"
    path: str           # "integer" | "float" | "fallback" | "unsupported"
    pattern: str = ""   # label of the pattern that lowered it
    reason: str = ""    # why it was not lowered (unsupported), or why it fell back


@dataclass
class LegalizeResult:
    outcomes: list[OpOutcome] = field(default_factory=list)

    def by_path(self, path: str) -> list[OpOutcome]:
        return [o for o in self.outcomes if o.path == path]

    @property
    def unsupported(self) -> list[OpOutcome]:
        return self.by_path("unsupported")


def element_signature(op: Op) -> str:
    def elem(t: object) -> str:
        if not isinstance(t, TensorType):
            return str(t)
        q = t.element
        if isinstance(q, UniformQuantizedPerAxis):
            # One scale per channel would swamp a one-line error message.
            return (f"!quant.uniform<{q.storage_text()}:{q.expressed}:{q.axis}, "
                    f"{{{len(q.scales)} scales}}>")
        return str(q)

    ins = ",".join(elem(v.type) for v in op.operands)
    outs = ",".join(elem(v.type) for v in op.results)
    return f"{ins} -> {outs}"


def is_quantized_op(op: Op) -> bool:
    return any(isinstance(v.type, TensorType) and is_quantized(v.type.element)
               for v in (*op.operands, *op.results))


def _float_results(op: Op) -> bool:
    return all(isinstance(v.type, TensorType) and not is_quantized(v.type.element)
               and v.type.element.is_float for v in op.results)


def legalize(module: Module, *, fallback: bool = True,
             disabled: frozenset[str] | set[str] = frozenset()) -> LegalizeResult:
    """Lower every `tfl` op in place; unlowerable ops stay and are reported."""
    result = LegalizeResult()
    for graph in module.graphs.values():
        _legalize_graph(graph, fallback, frozenset(disabled), result)
    return result


def _legalize_graph(graph: Graph, fallback: bool, disabled: frozenset[str],
                    result: LegalizeResult) -> None:
    new_ops: list[Op] = []
    for op in graph.ops:
        if op.dialect != "tfl" or op.name in KEPT_FOR_CONSUMERS:
            new_ops.append(op)
            continue
        outcome = _lower_op(graph, new_ops, op, fallback, disabled)
        if op.name != "tfl.pseudo_const" or outcome.path == "unsupported":
            result.outcomes.append(outcome)  # constants are data, not computation
        if outcome.path == "unsupported":
            new_ops.append(op)
    graph.ops = new_ops


def _lower_op(graph: Graph, new_ops: list[Op], op: Op, fallback: bool,
              disabled: frozenset[str]) -> OpOutcome:
    quantized = is_quantized_op(op)
    types = element_signature(op)
    reasons: list[str] = []
    for entry in patterns_for(op_key(op), disabled):
        mark = len(new_ops)
        values = entry.fn(op, Rewriter(graph, new_ops, op, disabled))
        if values is None or isinstance(values, Failure):
            discard_since(new_ops, mark)
            reasons.append(values.reason if isinstance(values, Failure)
                           else f"{entry.label} does not apply")
            continue
        replace_op(graph, op, list(values))
        # Hybrid ops (quantized constant weights, float activations) compute in float.
        path = "integer" if quantized and not _float_results(op) else "float"
        return OpOutcome(op.name, op.loc, types, path, entry.label)
    if not reasons:
        reasons.append("no lowering for this op" if op.name != "tfl.unknown"
                       else f"unknown TFLite operator {op.attrs.get('op_name', '')}".strip())
    if quantized and fallback:
        mark = len(new_ops)
        lowered = lower_through_float(op, Rewriter(graph, new_ops, op, disabled), disabled)
        if isinstance(lowered, Failure):
            discard_since(new_ops, mark)
            if lowered.reason not in reasons:
                reasons.append(f"fallback: {lowered.reason}")
        else:
            values, label = lowered
            replace_op(graph, op, values)
            return OpOutcome(op.name, op.loc, types, "fallback", label, "; ".join(reasons))
    return OpOutcome(op.name, op.loc, types, "unsupported", "", "; ".join(reasons))
