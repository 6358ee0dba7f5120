"""Rules of the operators that name graphs (COND_IF, WHILE_LOOP) or variables
(VARIABLE, VARIABLE_READ, VARIABLE_WRITE)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tfl2tosa.ir.core import Value
from tfl2tosa.ir.types import (
    TensorType,
    storage_type,
)
from tfl2tosa.tosa import rules
from tfl2tosa.tosa.verify.op_check import OpCheck, element_name, int_list, known, shape_of
from tfl2tosa.tosa.verify.shapes import rule


def _signature(values: Iterable[Value]) -> list[Any]:
    return [v.type for v in values]


def _same_types(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, TensorType) and isinstance(y, TensorType):
            if storage_type(x.element) != storage_type(y.element):
                return False
            if x.shape is not None and y.shape is not None and (
                    len(x.shape) != len(y.shape)
                    or any(p != q and known(p, q) for p, q in zip(x.shape, y.shape))):
                return False
        elif x != y:
            return False
    return True


def _text(types: list[Any]) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


@rule("COND_IF", reads_values=True)
def _cond_if(c: OpCheck) -> None:
    condition = c.in_shape(0)
    problem = None if condition is None else rules.condition_problem("condition", condition)
    if problem:
        c.error(problem)
    inputs = _signature(c.op.operands[1:])
    outputs = _signature(c.op.results)
    for key in ("then_graph", "else_graph"):
        graph = c.checker.module.graphs[c.op.attrs[key]]
        if not _same_types(_signature(graph.inputs), inputs):
            c.error(f"{key} {graph.name!r} takes {_text(_signature(graph.inputs))}, "
                    f"but the op passes {_text(inputs)}")
        if not _same_types(_signature(graph.outputs), outputs):
            c.error(f"{key} {graph.name!r} returns {_text(_signature(graph.outputs))}, "
                    f"but the op yields {_text(outputs)}")


@rule("WHILE_LOOP", reads_values=True)
def _while_loop(c: OpCheck) -> None:
    inputs = _signature(c.op.operands)
    if not _same_types(_signature(c.op.results), inputs):
        c.error(f"results {_text(_signature(c.op.results))} must match the inputs "
                f"{_text(inputs)}")
    cond = c.checker.module.graphs[c.op.attrs["cond_graph"]]
    body = c.checker.module.graphs[c.op.attrs["body_graph"]]
    if not _same_types(_signature(cond.inputs), inputs):
        c.error(f"cond_graph {cond.name!r} takes {_text(_signature(cond.inputs))}, but the "
                f"loop carries {_text(inputs)}")
    out = cond.outputs
    if len(out) != 1 or not isinstance(out[0].type, TensorType) \
            or storage_type(out[0].type.element).name != "i1" \
            or (out[0].type.is_static and out[0].type.num_elements != 1):
        c.error(f"cond_graph {cond.name!r} must return one single-element bool tensor, "
                f"returns {_text(_signature(out))}")
    for side, values in (("takes", body.inputs), ("returns", body.outputs)):
        if not _same_types(_signature(values), inputs):
            c.error(f"body_graph {body.name!r} {side} {_text(_signature(values))}, but the "
                    f"loop carries {_text(inputs)}")


@rule("VARIABLE_READ", "VARIABLE_WRITE", reads_values=True)
def _variable_access(c: OpCheck) -> None:
    name = c.op.attrs["name"]
    declaration = c.checker.variables.get(name)
    if declaration is None:
        c.error(f"variable {name!r} is not declared by a tosa.variable")
        return
    value = c.op.results[0] if c.opdef.name == "VARIABLE_READ" else c.op.operands[0]
    element, shape = element_name(value), shape_of(value)
    declared_type = declaration.attrs.get("type")
    if declared_type is not None and element != declared_type:
        c.error(f"variable {name!r} holds {declared_type}, accessed as {element}")
    c.expect_shape(f"variable {name!r}", shape, int_list(declaration.attrs.get("var_shape")))


@rule("VARIABLE", reads_values=True)
def _variable(c: OpCheck) -> None:
    initial = c.op.attrs.get("initial_value")
    var_shape = int_list(c.op.attrs.get("var_shape"))
    if isinstance(initial, np.ndarray) and var_shape is not None:
        problem = rules.initial_value_problem(c.op.attrs["name"], initial.shape, var_shape)
        if problem:
            c.error(problem)
    duplicates = [op for _, op in c.checker.module.ops()
                  if op.name == "tosa.variable" and op.attrs.get("name") == c.op.attrs["name"]]
    if len(duplicates) > 1 and duplicates[0] is not c.op:
        c.error(f"variable {c.op.attrs['name']!r} is declared more than once")
