"""Legalization driver: lower every `tfl` op of a module to TOSA.

Each op is handed to the patterns that declare they serve its data (see
`serves`), in order. A quantized op that no pattern lowers in integer
arithmetic takes the fallback (when enabled):
its quantized inputs are dequantized (`quant.dcast`), the float pattern runs,
and its results are quantized again (`quant.qcast`). Every op's outcome is
recorded, so the conversion report can say which ops took the integer path,
which the fallback, and why each unconverted op was refused.
"""

from __future__ import annotations

from legalize.fallback import lower_through_float
from legalize.registry import KINDS, Registered, op_key, patterns_for
from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter, discard_since, replace_op
from tfl2tosa.ir.types import (
    Frozen,
    Record,
    TensorType,
    UniformQuantizedPerAxis,
    is_quantized,
    storage_type,
)
from tfl2tosa.memo import BoundedMemo


# Ops that have no lowering of their own: consumers read them, DCE removes them.
KEPT_FOR_CONSUMERS = frozenset({"tfl.no_value"})


class OpOutcome(Frozen):
    """What happened to one TFL op."""

    op_name: str        # "tfl.conv_2d"
    loc: str            # TFLite location: "main:op12:CONV_2D"
    types: str          # operand -> result element types, e.g. "i8,i8,i32 -> i8"
    path: str           # "integer" | "float" | "fallback" | "unsupported"
    pattern: str        # label of the pattern that lowered it
    reason: str         # why it was not lowered (unsupported), or why it fell back
    weights: str        # how quantized constant weights were taken (`weight_form`)

    _fields = ("op_name", "loc", "types", "path", "pattern", "reason", "weights")

    def __init__(self, op_name: str, loc: str, types: str, path: str, pattern: str = "",
                 reason: str = "", weights: str = "") -> None:
        self._set(op_name, loc, types, path, pattern, reason, weights)

    def to_dict(self) -> dict[str, str]:
        # Its fields are strings: nothing in them to copy.
        return dict(zip(self._fields, self._k))


class LegalizeResult(Record):
    outcomes: list[OpOutcome]

    _fields = ("outcomes",)

    def __init__(self, outcomes: list[OpOutcome] | None = None) -> None:
        self.outcomes = [] if outcomes is None else outcomes

    def by_path(self, path: str) -> list[OpOutcome]:
        return [o for o in self.outcomes if o.path == path]

    @property
    def unsupported(self) -> list[OpOutcome]:
        return self.by_path("unsupported")


def _element_text(t: object) -> str:
    if not isinstance(t, TensorType):
        return str(t)
    q = t.element
    if isinstance(q, UniformQuantizedPerAxis):
        # One scale per channel would swamp a one-line error message. Every
        # convolution's weights have a type of their own that spells the same
        # way as its neighbours': keyed by what the text shows.
        request = (q.storage, q.storage_min, q.storage_max, q.expressed, q.axis, q.scale_count)
        text = _PER_AXIS_TEXTS.get(request)
        if text is None:
            text = (f"!quant.uniform<{q.storage_text()}:{q.expressed}:{q.axis}, "
                    f"{{{q.scale_count} scales}}>")
            _PER_AXIS_TEXTS.keep(request, text)
        return text
    text = _ELEMENT_TEXTS.get(q)
    if text is None:
        text = str(q)
        _ELEMENT_TEXTS.keep(q, text)
    return text


# element type -> its text: a model's values share a few types, and spelling a
# quantized one formats its scale. Bounded, as a long-lived process converts
# model after model.
_ELEMENT_TEXTS: BoundedMemo = BoundedMemo()
# (storage, its range, expressed type, axis, scale count) -> a per-axis type's text
_PER_AXIS_TEXTS: BoundedMemo = BoundedMemo()


def element_signature(op: Op) -> str:
    ins = ",".join([_element_text(v.type) for v in op.operands])
    outs = ",".join([_element_text(v.type) for v in op.results])
    return f"{ins} -> {outs}"


def is_quantized_op(op: Op) -> bool:
    for values in (op.operands, op.results):
        for v in values:
            if isinstance(v.type, TensorType) and is_quantized(v.type.element):
                return True
    return False


def _is_constant(value: Value) -> bool:
    return value.owner is not None and value.owner.name in ("tosa.const", "tfl.pseudo_const")


def _quantized(value: Value) -> bool:
    return isinstance(value.type, TensorType) and is_quantized(value.type.element)


def quantized_weights(op: Op) -> frozenset[int] | None:
    """The operands of `op` holding quantized constants when those are its only
    quantized tensors (float activations and results: hybrid or weight-only
    models), else None."""
    for v in op.results:
        if _quantized(v):
            return None
    indices = []
    for i, v in enumerate(op.operands):
        if _quantized(v):
            if not _is_constant(v):
                return None
            indices.append(i)
    return frozenset(indices) if indices else None


def serves(entry: Registered, quantized: bool, weights: frozenset[int] | None) -> bool:
    """Whether `entry`'s declared kind takes an op (`quantized`: whether any of
    its tensors is; `weights`: its `quantized_weights`). Quantized constant
    weights with float activations are served by hybrid patterns, by float
    patterns that declare those operands as weights, and by integer patterns,
    which read quantized constants too (DEQUANTIZE of a constant)."""
    if entry.kind == "any":
        return True
    if not quantized:
        return entry.kind == "float"
    if entry.kind == "float":
        return weights is not None and weights <= set(entry.weights)
    return entry.kind == "integer" or weights is not None


def _candidate_kinds(quantized: bool, weights: frozenset[int] | None) -> tuple[str, ...]:
    """The kinds of pattern `serves` may hand an op (float ones also stand for
    the reason a quantized op falls back): their modules alone are imported."""
    if weights is not None:
        return KINDS
    return _QUANTIZED_KINDS if quantized else _FLOAT_KINDS


_QUANTIZED_KINDS = tuple(k for k in KINDS if k != "hybrid")
_FLOAT_KINDS = tuple(k for k in KINDS if k in ("float", "any"))


def _float_results(op: Op) -> bool:
    return all(isinstance(v.type, TensorType) and not is_quantized(v.type.element)
               and v.type.element.is_float for v in op.results)


def _constant_storage(value: Value) -> str | None:
    """The storage type name of a quantized constant operand, else None."""
    owner, t = value.owner, value.type
    if owner is None or owner.name != "tosa.const" or not isinstance(t, TensorType) \
            or not is_quantized(t.element):
        return None
    return storage_type(t.element).name


def _quantized_constants(op: Op) -> set[str]:
    """The storage type names of op's quantized constant operands."""
    return {_constant_storage(v) for v in op.operands} - {None}  # type: ignore[misc]


def weight_form(op: Op, created: list[Op], hybrid: bool) -> str:
    """How an op lowered by its pattern took its quantized constant operands,
    for the report: "hybrid" (integer weights in TFLite's hybrid arithmetic,
    legalize.hybrid), "dequantized-constant" (float results otherwise: the
    constant was dequantized once at conversion, by a folded DEQUANTIZE or for
    a float op with quantized weights; the fallback does the same with every
    quantized constant it reads), "int4" (int4 weights kept as TOSA i4,
    EXT-INT4), "int4-as-int8" (int4 weights widened to i8, the same integers),
    or "" (nothing to say)."""
    storages = _quantized_constants(op)
    if not storages:
        return ""
    if hybrid:
        return "hybrid"
    if _float_results(op):
        return "dequantized-constant"
    if "i4" not in storages:
        return ""
    kept = any(o.name == "tosa.const" and storage_type(o.result.type.element).name == "i4"
               for o in created)
    return "int4" if kept else "int4-as-int8"


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
        if outcome is None:  # a lowered constant
            continue
        if op.name != "tfl.pseudo_const" or outcome.path == "unsupported":
            result.outcomes.append(outcome)  # constants are data, not computation
        if outcome.path == "unsupported":
            new_ops.append(op)
    graph.ops = new_ops


# The TFLite kernels that unpack int4 operands before reading them (TF 2.20).
# Others read the packed bytes as int8 (TRANSPOSE_CONV) or refuse them at
# Prepare (BATCH_MATMUL): no TOSA graph computes what they do with the values.
INT4_READERS = frozenset({"tfl.conv_2d", "tfl.depthwise_conv_2d", "tfl.fully_connected",
                          "tfl.dequantize", "tfl.embedding_lookup"})


def _int4_refusal(op: Op) -> str | None:
    int4 = [v for v in op.operands
            if isinstance(v.type, TensorType) and storage_type(v.type.element).name == "i4"]
    if not int4:
        return None
    if op.name not in INT4_READERS:
        return (f"an int4 operand: TFLite's {op.name.split('.', 1)[1].upper()} kernel does "
                "not unpack int4 values (only CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, "
                "DEQUANTIZE and EMBEDDING_LOOKUP do)")
    shape = int4[0].type.shape
    if op.name == "tfl.embedding_lookup" and shape and shape[-1] % 2:
        # Its kernel starts row r at value 2 * floor(r * width / 2), not r * width.
        return (f"an int4 table with rows of {shape[-1]} values: TFLite's EMBEDDING_LOOKUP "
                "reads odd rows of an odd-width int4 table one value early")
    return None


def _lower_op(graph: Graph, new_ops: list[Op], op: Op, fallback: bool,
              disabled: frozenset[str]) -> OpOutcome | None:
    """Lower `op`; its outcome, or None for a constant its pattern lowered
    (constants are data: the report leaves them out, so none is made)."""
    quantized = is_quantized_op(op)
    # A lowered constant's outcome is not kept (_legalize_graph): its types are
    # spelt only if it is refused.
    types = element_signature(op) if op.name != "tfl.pseudo_const" else ""
    refusal = _int4_refusal(op)
    if refusal is not None:
        return OpOutcome(op.name, op.loc, types or element_signature(op), "unsupported", "",
                         refusal)
    weights = quantized_weights(op) if quantized else None
    reasons: list[str] = []
    for entry in patterns_for(op_key(op), disabled, _candidate_kinds(quantized, weights)):
        if not serves(entry, quantized, weights):
            if entry.kind == "float":  # the op's quantized types are why it falls back
                reasons.append(f"{op.name}: quantized types need the integer path")
            continue
        mark = len(new_ops)
        values = entry.fn(op, Rewriter(graph, new_ops, op, disabled))
        if values is None or isinstance(values, Failure):
            discard_since(new_ops, mark)
            reasons.append(values.reason if isinstance(values, Failure)
                           else f"{entry.label} does not apply")
            continue
        if op.name == "tfl.pseudo_const":
            replace_op(graph, op, list(values))
            return None
        form = weight_form(op, new_ops[mark:], entry.kind == "hybrid")
        replace_op(graph, op, list(values))
        # Hybrid ops (quantized constant weights, float activations) compute in float.
        path = "integer" if quantized and not _float_results(op) else "float"
        return OpOutcome(op.name, op.loc, types, path, entry.label, weights=form)
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
            form = "dequantized-constant" if _quantized_constants(op) else ""
            replace_op(graph, op, values)
            return OpOutcome(op.name, op.loc, types, "fallback", label, "; ".join(reasons),
                             form)
    return OpOutcome(op.name, op.loc, types or element_signature(op), "unsupported", "",
                     "; ".join(reasons))
