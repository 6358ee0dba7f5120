"""Resource variables -> TOSA variables: a module pass run before legalization.

TFLite models converted with `experimental_enable_resource_variables` keep
`tf.Variable`s as resources:

- VAR_HANDLE(container, shared_name) makes a handle; handles with the same
  (container, shared_name), in any subgraph, name the same variable
  (kernels/var_handle.cc keys the interpreter's resource ids that way);
- READ_VARIABLE(handle) -> value and ASSIGN_VARIABLE(handle, value) access it,
  in op order;
- CALL_ONCE(init subgraph) runs the session-initialization graph once per
  interpreter; its ASSIGN_VARIABLEs give the variables their first values.

TOSA's EXT-VARIABLE has the same model: VARIABLE(name, var_shape, type,
initial_value) declares a variable once, VARIABLE_READ / VARIABLE_WRITE access
it, and the state persists from one invocation of the graph to the next.

`lower_resource_variables(module)`:
1. folds each CALL_ONCE's initialization graph whose assignments are all
   constants into initial values (a later assignment of the same variable
   wins, as it would at run time), erases the CALL_ONCE and drops the graph
   once nothing else refers to it;
2. replaces READ_VARIABLE by VARIABLE_READ and ASSIGN_VARIABLE by
   VARIABLE_WRITE, named after the variable, and erases the VAR_HANDLEs;
3. declares every variable accessed outside an initialization graph with a
   VARIABLE at the top of the entry graph: shape and element type from its
   reads and writes (which must agree and be static), initial value from step 1.

TOSA variables hold only int8, float16 or float32. What the pass cannot lower
(another element type, a quantized or dynamic variable, a handle passed in
from another graph, an initialization graph that computes) it leaves in place
with an attribute `unlowered_reason`; the legalization then refuses those ops
with that reason (legalize/misc.py).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.types import TensorType, is_quantized, numpy_dtype, resource
from tfl2tosa.tflite_import.schema import SUBGRAPH_ATTR_NAMES

REASON_ATTR = "unlowered_reason"
RESOURCE_OPS = frozenset({"tfl.var_handle", "tfl.read_variable", "tfl.assign_variable"})
# Element types of EXT-VARIABLE (TOSA 1.0 VARIABLE type modes).
VARIABLE_ELEMENTS = frozenset({"i8", "f16", "f32"})

Key = tuple[str, str]  # (container, shared_name)
_INDEX_SUFFIX = "_subgraph_index"


class _Variable:
    """One resource variable: its handles, accesses, types and initial value
    (a plain class: creating a dataclass at import would cost every conversion,
    with variables or not)."""

    def __init__(self, key: Key) -> None:
        self.key = key
        self.name = ""
        self.types: set[TensorType] = set()
        self.accesses: list[Op] = []
        self.handles: list[Op] = []
        self.initial: np.ndarray | None = None


def _key(handle: Op) -> Key:
    return (str(handle.attrs.get("container") or ""), str(handle.attrs.get("shared_name") or ""))


def _constant(value: Value) -> np.ndarray | None:
    """The array of a dense `tfl.pseudo_const`, else None."""
    owner = value.owner
    if owner is None or owner.name != "tfl.pseudo_const":
        return None
    if owner.attrs.get("sparsity") is not None or owner.attrs.get("packed_int4"):
        return None
    return np.asarray(owner.attrs["value"])


def _handle_op(value: Value) -> Op | None:
    owner = value.owner
    return owner if owner is not None and owner.name == "tfl.var_handle" else None


def _refuse(ops: Iterable[Op], reason: str) -> None:
    for op in ops:
        op.attrs.setdefault(REASON_ATTR, reason)


# ---------------------------------------------------------------------------
# Step 1: initialization graphs


def fold_initialization(graph: Graph) -> dict[Key, np.ndarray] | str:
    """The constant each variable is assigned by `graph`, or why it cannot be folded."""
    values: dict[Key, np.ndarray] = {}
    for op in graph.ops:
        if op.name in ("tfl.var_handle", "tfl.pseudo_const", "tfl.no_value"):
            continue
        if op.name != "tfl.assign_variable":
            return (f"the initialization graph {graph.name!r} computes with {op.name}; only "
                    "assignments of constants are folded into initial values")
        handle, value = op.operands
        owner = _handle_op(handle)
        array = _constant(value)
        if owner is None or array is None:
            return (f"the initialization graph {graph.name!r} assigns a value that is not a "
                    "constant, or through a handle it does not create")
        values[_key(owner)] = array
    return values


def _init_graphs(module: Module) -> tuple[dict[Key, np.ndarray], set[str]]:
    """Initial values from every foldable CALL_ONCE, and the graphs folded.

    Those CALL_ONCE ops are erased; the others get `unlowered_reason`.
    """
    initial: dict[Key, np.ndarray] = {}
    folded: set[str] = set()
    for graph in module.graphs.values():
        kept = []
        for op in graph.ops:
            if op.name != "tfl.call_once":
                kept.append(op)
                continue
            target = module.graphs.get(str(op.attrs.get("session_init_function")))
            values = (fold_initialization(target) if target is not None
                      else "its initialization graph is missing")
            if isinstance(values, str):
                _refuse([op], values)
                kept.append(op)
                continue
            initial.update(values)
            folded.add(target.name)
            op.drop_operand_uses()
        graph.ops = kept
    return initial, folded


# ---------------------------------------------------------------------------
# Handles carried through WHILE loops


def _is_resource(value: Value) -> bool:
    t = value.type
    return isinstance(t, TensorType) and t.element == resource


def _callers(module: Module) -> dict[str, list[Op]]:
    """Graph name -> the ops that run it (WHILE cond/body, IF branches, CALL)."""
    callers: dict[str, list[Op]] = {}
    for _, op in module.ops():
        for target in referenced_by(op):
            callers.setdefault(target, []).append(op)
    return callers


def _carried_handle(op: Op, index: int, callers: dict[str, list[Op]],
                    module: Module) -> Op | str:
    """The VAR_HANDLE that WHILE `op` carries unchanged at `index`, or why not."""
    handle = _handle_op(op.operands[index])
    if handle is None:
        return "it carries a resource handle that is not made by a VAR_HANDLE"
    body, cond = (module.graphs.get(str(op.attrs.get(k))) for k in ("body", "cond"))
    if body is None or cond is None:
        return "its loop graphs are missing"
    if any(len(callers.get(g.name, [])) != 1 for g in (body, cond)):
        return "its loop graphs are shared with other ops"
    if body.outputs[index] is not body.inputs[index]:
        return "its body returns a different resource handle than it was given"
    return handle


def _drop_loop_handle(graph: Graph, op: Op, index: int, handle: Op,
                      module: Module) -> Op:
    """WHILE `op` without loop-carried value `index` (the resource handle of
    `handle`): the cond and body graphs make their own VAR_HANDLE for it, and
    uses of the loop's result use the handle itself (the body passes it through)."""
    for name in (str(op.attrs["cond"]), str(op.attrs["body"])):
        target = module.graphs[name]
        value = target.inputs[index]
        local = Op("tfl.var_handle", [], [value.type], dict(handle.attrs),
                   result_names=[target.unique_name(value.name)], loc=handle.loc)
        target.ops.insert(0, local)
        target.replace_value(value, local.results[0])
        target.inputs = [v for i, v in enumerate(target.inputs) if i != index]
        if name == str(op.attrs["body"]):
            target.outputs = [v for i, v in enumerate(target.outputs) if i != index]
    graph.replace_value(op.results[index], op.operands[index])
    keep = [i for i in range(len(op.operands)) if i != index]
    loop = Op(op.name, [op.operands[i] for i in keep], [op.results[i].type for i in keep],
              dict(op.attrs), result_names=[op.results[i].name for i in keep], loc=op.loc)
    for i, new in zip(keep, loop.results):
        graph.replace_value(op.results[i], new)
    op.drop_operand_uses()
    return loop


def lift_loop_handles(module: Module) -> None:
    """Take resource handles out of WHILE loops: TOSA's WHILE_LOOP carries only
    tensors, and a variable needs no carrying (VARIABLE_READ / WRITE name it).

    A WHILE that carries a handle to one variable, unchanged by its body, loses
    that loop-carried value; its cond and body graphs get their own VAR_HANDLE
    for the same (container, shared_name). Anything else is left, refused.
    """
    changed = True
    while changed:
        changed = False
        callers = None  # found when a loop carries a handle: most models have none
        for graph in module.graphs.values():
            for position, op in enumerate(graph.ops):
                if op.name != "tfl.while":
                    continue
                index = next((i for i, v in enumerate(op.operands) if _is_resource(v)), None)
                if index is None:
                    continue
                if callers is None:
                    callers = _callers(module)
                handle = _carried_handle(op, index, callers, module)
                if isinstance(handle, str):
                    _refuse([op], f"resource variables in a loop: {handle}")
                    continue
                graph.ops[position] = _drop_loop_handle(graph, op, index, handle, module)
                changed = True
                break
            if changed:
                break


# ---------------------------------------------------------------------------
# Step 2 and 3: accesses and declarations


def _collect(module: Module, skip: set[str]) -> dict[Key, _Variable]:
    """Every variable accessed outside the graphs in `skip`, with its handles and accesses.

    Accesses whose handle does not come from a VAR_HANDLE of the same graph are
    marked as refused right away.
    """
    variables: dict[Key, _Variable] = {}
    for graph in module.graphs.values():
        if graph.name in skip:
            continue
        for op in graph.ops:
            if op.name == "tfl.var_handle":
                variables.setdefault(_key(op), _Variable(_key(op))).handles.append(op)
            elif op.name in ("tfl.read_variable", "tfl.assign_variable"):
                handle = _handle_op(op.operands[0])
                if handle is None:
                    _refuse([op], "its resource handle is not made by a VAR_HANDLE in the "
                                  "same graph (handles passed between graphs are not supported)")
                    continue
                variable = variables.setdefault(_key(handle), _Variable(_key(handle)))
                variable.accesses.append(op)
                value = op.results[0] if op.name == "tfl.read_variable" else op.operands[1]
                variable.types.add(value.type)  # type: ignore[arg-type]
    return variables


def _problem(variable: _Variable) -> str | None:
    """Why `variable` cannot be a TOSA variable, or None."""
    label = f"resource variable {variable.key[1] or '(unnamed)'!r}"
    if len(variable.types) != 1:
        types = sorted(map(str, variable.types))
        return f"{label} is read and written with different types ({types})"
    (t,) = variable.types
    if not isinstance(t, TensorType) or not t.is_static:
        return f"{label} has the dynamic type {t}; TOSA variables have a static shape"
    if is_quantized(t.element):
        return f"{label} holds quantized values ({t.element}), which are not supported"
    if t.element.name not in VARIABLE_ELEMENTS:
        return (f"{label} holds {t.element}; TOSA variables hold only int8, float16 or "
                "float32 (EXT-VARIABLE)")
    if variable.initial is not None and tuple(variable.initial.shape) != t.shape:
        return (f"{label} is initialized with shape {list(variable.initial.shape)} but used "
                f"as {t}")
    return None


def _unique_names(variables: Iterable[_Variable]) -> None:
    taken: set[str] = set()
    for variable in variables:
        container, shared_name = variable.key
        base = f"{container}/{shared_name}" if container else (shared_name or "variable")
        name, n = base, 0
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        variable.name = name


def _rewrite_accesses(graph: Graph, by_op: dict[int, _Variable]) -> None:
    """READ_VARIABLE -> VARIABLE_READ, ASSIGN_VARIABLE -> VARIABLE_WRITE, in place."""
    new_ops: list[Op] = []
    for op in graph.ops:
        variable = by_op.get(id(op))
        if variable is None:
            new_ops.append(op)
            continue
        if op.name == "tfl.read_variable":
            old = op.results[0]
            read = Op("tosa.variable_read", [], [old.type], {"name": variable.name},
                      loc=op.loc)
            new_ops.append(read)
            old_name = old.name
            graph.replace_value(old, read.results[0])
            read.results[0].name = old_name
        else:
            new_ops.append(Op("tosa.variable_write", [op.operands[1]], [],
                              {"name": variable.name}, loc=op.loc))
        op.drop_operand_uses()
    graph.ops = [op for op in new_ops
                 if not (op.name == "tfl.var_handle" and not op.results[0].uses)]


def _declaration(variable: _Variable) -> Op:
    (t,) = variable.types
    attrs = {"name": variable.name, "var_shape": [int(d) for d in t.shape],
             "type": t.element.name}
    if variable.initial is not None:
        attrs["initial_value"] = np.asarray(variable.initial, dtype=numpy_dtype(t.element))
    return Op("tosa.variable", [], [], attrs, loc=f"variable {variable.key[1]!r}")


_GRAPH_ATTRS = ("callee", "cond_graph", "body_graph", "then_graph", "else_graph")


def referenced_by(op: Op) -> list[str]:
    """Names of the graphs `op` refers to (control flow, CALL, CALL_ONCE).

    The importer names a referenced graph in attribute `<x>` beside each
    `<x>_subgraph_index` (MLIR's names for IF and CALL_ONCE) and in CALL's
    `callee`; TOSA control flow names them in its graph attributes.
    """
    keys = list(_GRAPH_ATTRS)
    for key in op.attrs:
        if key.endswith(_INDEX_SUFFIX):
            base = key[: -len(_INDEX_SUFFIX)]
            keys.append(SUBGRAPH_ATTR_NAMES.get(base, base))
    return [str(op.attrs[k]) for k in keys if isinstance(op.attrs.get(k), str)]


def graph_references(module: Module) -> set[str]:
    """Names of every graph some op of `module` refers to."""
    return {name for _, op in module.ops() for name in referenced_by(op)}


def lower_resource_variables(module: Module) -> list[str]:
    """Lower resource variables to TOSA variables in place; returns the names declared."""
    initial, folded = _init_graphs(module)
    lift_loop_handles(module)
    variables = _collect(module, folded)
    for variable in variables.values():
        variable.initial = initial.get(variable.key)
    lowered = [v for v in variables.values() if v.accesses]
    for variable in list(lowered):
        reason = _problem(variable)
        if reason is not None:
            _refuse(variable.accesses + variable.handles, reason)
            lowered.remove(variable)
    _unique_names(lowered)
    by_op = {id(op): v for v in lowered for op in v.accesses}
    for graph in module.graphs.values():
        if graph.name not in folded:
            _rewrite_accesses(graph, by_op)
    main = module.main
    main.ops[:0] = [_declaration(v) for v in lowered]
    if not folded:
        return [v.name for v in lowered]  # no initialization graph to drop
    referenced = graph_references(module)
    for name in folded - referenced:
        if module.graphs[name] is not main:
            del module.graphs[name]
    return [v.name for v in lowered]
