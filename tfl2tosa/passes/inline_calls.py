"""CALL and STABLEHLO_COMPOSITE: the called graph inlined at each call site (a
module pass before legalization).

A pattern sees one graph, and the callee's ops are TFL ops that still need
lowering, so neither is a pattern: `inline_calls(module)` runs before
legalization and replaces every `tfl.call` by a copy of its callee's ops, and
every `tfl.stablehlo_composite` by a copy of its decomposition graph (what
TFLite's kernel runs: kernels/stablehlo_composite.cc invokes the
decomposition subgraph). A composite's name (`odml.rms_norm`, ...), version
and attributes (a flexbuffer map) do not change what it computes; they are
kept for the conversion report, one entry per composite.
Copies get fresh value names in the caller (`<call result>/<callee value>`);
the callee's outputs take the names of the call's results, so the TFLite
tensor names the rest of the model uses still point at the same values.
Constants are copied by reference: the copied `tfl.pseudo_const` holds the
same read-only view into the model. Calls inside the callee are inlined
first; a recursive call is refused. Callee graphs no other op refers to are
removed afterwards.

TFLite's interpreter has no CALL kernel (the op exists in the schema only),
so the tests judge an inlined model against TFLite running the same model
written without the CALL; composites are judged by TFLite running them.
"""

from __future__ import annotations

import struct
from typing import Any

from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.passes.resource_variables import REASON_ATTR, graph_references


# Op -> the attribute naming the graph it runs (the importer's names).
CALLEE_ATTRS = {"tfl.call": "callee", "tfl.stablehlo_composite": "decomposition"}
SCHEMA_NAMES = {"tfl.call": "CALL", "tfl.stablehlo_composite": "STABLEHLO_COMPOSITE"}


class Inlining:
    """What `inline_calls` did: the graphs it removed, and one entry per
    STABLEHLO_COMPOSITE (name, loc, version, attributes, decomposition graph,
    and how it was lowered) for the conversion report. (A plain class: a
    dataclass decorator costs time at import.)"""

    def __init__(self, removed: list[str] | None = None,
                 composites: list[dict[str, Any]] | None = None) -> None:
        self.removed: list[str] = [] if removed is None else removed
        self.composites: list[dict[str, Any]] = [] if composites is None else composites

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Inlining) or other.__class__ is not self.__class__:
            return NotImplemented
        return (self.removed, self.composites) == (other.removed, other.composites)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass with eq is

    def __repr__(self) -> str:
        return f"Inlining(removed={self.removed!r}, composites={self.composites!r})"


def _mismatch(call: Op, callee: Graph) -> str | None:
    """Why `callee` cannot stand in for `call`, if it cannot. TFLite copies the
    tensors' bytes in and out, so differing types (a different quantization of
    the same storage) would need a reinterpretation inlining does not make."""
    what = SCHEMA_NAMES[call.name]
    if len(call.operands) != len(callee.inputs) or len(call.results) != len(callee.outputs):
        return (f"{what} passes {len(call.operands)} operands and takes {len(call.results)} "
                f"results, but {callee.name!r} has {len(callee.inputs)} inputs and "
                f"{len(callee.outputs)} outputs")
    pairs = [("operand", i, a.type, b.type) for i, (a, b) in
             enumerate(zip(call.operands, callee.inputs))]
    pairs += [("result", i, a.type, b.type) for i, (a, b) in
              enumerate(zip(call.results, callee.outputs))]
    for role, i, ours, theirs in pairs:
        if ours != theirs:
            return f"{what} {role} {i} is {ours}, but {callee.name!r} has {theirs} there"
    return None


def _copy_into(caller: Graph, call: Op, callee: Graph) -> list[Op] | str:
    """Copies of `callee`'s ops with its inputs bound to `call`'s operands, the
    call's results replaced by the copied outputs; or why it cannot be inlined."""
    mismatch = _mismatch(call, callee)
    if mismatch is not None:
        return mismatch
    bound: dict[int, Value] = {id(v): operand for v, operand in zip(callee.inputs,
                                                                   call.operands)}
    base = call.results[0].name if call.results else callee.name
    copies = []
    for op in callee.ops:
        names = [caller.unique_name(f"{base}/{v.name}") for v in op.results]
        copy = Op(op.name, [bound[id(v)] for v in op.operands], [v.type for v in op.results],
                  dict(op.attrs), result_names=names, loc=f"{call.loc} > {op.loc}")
        bound.update((id(old), new) for old, new in zip(op.results, copy.results))
        copies.append(copy)
    copied = {id(op) for op in copies}
    for result, output in zip(call.results, callee.outputs):
        value = bound[id(output)]
        if value.owner is not None and id(value.owner) in copied:
            value.name = result.name  # the call's result disappears with the call
        caller.replace_value(result, value)
    call.drop_operand_uses()
    return copies


def _composite_entry(op: Op) -> dict[str, Any]:
    """The conversion report's entry for one STABLEHLO_COMPOSITE."""
    return {"name": str(op.attrs.get("name", "")), "loc": op.loc,
            "version": op.attrs.get("version", 0),
            "attributes": composite_attributes(op),
            "decomposition": str(op.attrs.get("decomposition", ""))}


def composite_attributes(op: Op) -> dict[str, Any] | str:
    """A composite's attributes: the flexbuffer map in `composite_attributes`,
    decoded to JSON-friendly values ({} when absent), or why it cannot be read."""
    raw = op.attrs.get("composite_attributes", b"")
    if not raw:
        return {}
    if op.attrs.get("composite_attributes_format", "FLEXBUFFERS") != "FLEXBUFFERS":
        return f"stored as {op.attrs['composite_attributes_format']}"
    from flatbuffers import flexbuffers

    try:
        decoded = flexbuffers.Loads(bytearray(raw))
    except (IndexError, KeyError, ValueError, TypeError, struct.error,
            UnicodeDecodeError, RecursionError) as exc:
        # The attributes only describe the op; a corrupt map loses the
        # report's detail, not the conversion.
        return f"unreadable flexbuffer ({type(exc).__name__})"
    return _plain(decoded) if isinstance(decoded, dict) else {"value": _plain(decoded)}


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value


def _inline_graph(module: Module, graph: Graph, active: list[str],
                  inlining: Inlining) -> None:
    """Inline every CALL and composite of `graph`, callees first; `active` holds
    the graphs being inlined (a call to one of them is recursive)."""
    active.append(graph.name)
    new_ops: list[Op] = []
    for op in graph.ops:
        if op.name not in CALLEE_ATTRS:
            new_ops.append(op)
            continue
        inlined = _inline_one(module, graph, op, active, inlining)
        reason = None if isinstance(inlined, list) else (
            f"{SCHEMA_NAMES[op.name]} cannot be inlined: {inlined}")
        if reason is None:
            new_ops.extend(inlined)
        else:
            op.attrs.setdefault(REASON_ATTR, reason)
            new_ops.append(op)
        if op.name == "tfl.stablehlo_composite":
            entry = _composite_entry(op)
            entry["lowering"] = "inlined" if reason is None else reason
            inlining.composites.append(entry)
    graph.ops = new_ops
    active.pop()


def _inline_one(module: Module, graph: Graph, op: Op, active: list[str],
                inlining: Inlining) -> list[Op] | str:
    """The copies that replace `op` in `graph`, or why it cannot be inlined."""
    callee = module.graphs.get(str(op.attrs.get(CALLEE_ATTRS[op.name])))
    if callee is None:
        return "its callee is missing"
    if callee.name in active:
        return f"the call of {callee.name!r} is recursive"
    _inline_graph(module, callee, active, inlining)
    copies = _copy_into(graph, op, callee)
    if not isinstance(copies, str):
        inlining.removed.append(callee.name)
    return copies


def inline_calls(module: Module) -> Inlining:
    """Inline every CALL and STABLEHLO_COMPOSITE in `module`; the callee graphs
    no op refers to any more are removed."""
    inlining = Inlining()
    for graph in list(module.graphs.values()):
        _inline_graph(module, graph, [], inlining)
    if not inlining.removed:
        return inlining  # no graph was inlined: none to drop, no references to find
    referenced = graph_references(module)
    inlined = set(inlining.removed)
    inlining.removed = [name for name in module.graphs if name in inlined
                        and name not in referenced and module.graphs[name] is not module.main]
    for name in inlining.removed:
        del module.graphs[name]
    return inlining

