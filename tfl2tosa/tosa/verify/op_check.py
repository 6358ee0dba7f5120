"""Checks of one TOSA op against the op table: operand and result counts and
kinds, attributes, compile-time-constant operands and element-type modes;
`OpCheck` also gives the shape rules their helpers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tfl2tosa.ir.core import Graph, Op, Value
from tfl2tosa.ir.types import (
    SCALAR_TYPES,
    ShapeType,
    TensorType,
)
from tfl2tosa.tosa import rules
from tfl2tosa.tosa.ops import (
    ENUM_EXTENSIONS,
    ENUMS,
    Arg,
    OpDef,
    TypeMode,
)

if TYPE_CHECKING:
    from tfl2tosa.tosa.verify import _Checker


def element_name(value: Value) -> str | None:
    """The scalar type name of a value's element (quantized: its storage)."""
    return rules.element_name(value.type)


def shape_of(value: Value) -> tuple[int, ...] | None:
    t = value.type
    return t.shape if isinstance(t, TensorType) else None


known = rules.known


def int_list(value: Any) -> list[int] | None:
    if isinstance(value, np.ndarray):
        value = value.tolist() if value.ndim == 1 else None
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
            for v in value):
        return [int(v) for v in value]
    return None


class OpCheck:
    """The checks of one op; shape rules call its helpers."""

    def __init__(self, checker: _Checker, graph: Graph, op: Op, opdef: OpDef) -> None:
        self.checker = checker
        self.graph = graph
        self.op = op
        self.opdef = opdef
        self.mode: TypeMode | None = None
        self.types: dict[str, str] = {}
        self.failed_attrs = False

    def error(self, message: str) -> None:
        self.checker.report(self.graph, self.op, message)

    # -- operands and results ------------------------------------------------

    def pairs(self, args: tuple[Arg, ...], values: list[Value]) -> list[tuple[Arg, Value]]:
        """Match values to specification arguments; a tensor list takes the rest."""
        return list(zip(rules.argument_of_each(args, len(values)), values))

    def check_arity(self) -> bool:
        problems = rules.arity_problems(self.opdef, len(self.op.operands), len(self.op.results))
        for problem in problems:
            self.error(problem)
        return not problems

    def check_arg_kinds(self) -> None:
        for what, args, values in (("operand", self.opdef.inputs, self.op.operands),
                                   ("result", self.opdef.outputs, self.op.results)):
            for arg, value in self.pairs(args, values):
                want = ShapeType if arg.kind == "shape" else TensorType
                if not isinstance(value.type, want):
                    self.error(f"{what} {arg.name!r} must be a "
                               f"{'shape_t' if want is ShapeType else 'tensor'}, "
                               f"got {value.type}")
                    continue
                shape = shape_of(value)
                if arg.rank is not None and shape is not None:
                    low, high = arg.rank
                    if not low <= len(shape) <= high:
                        wanted = str(low) if low == high else f"{low}..{high}"
                        self.error(f"{what} {arg.name!r} must have rank {wanted}, "
                                   f"got {value.type}")
                problem = rules.one_value_problem(arg, value.type)
                if problem:
                    self.error(f"{what} {problem}")

    def check_constants(self) -> None:
        """Compile-time-constant operands come from tosa.const / tosa.const_shape."""
        for arg, value in self.pairs(self.opdef.inputs, self.op.operands):
            if not arg.ctc:
                continue
            producer = value.owner.name if value.owner is not None else None
            wanted = "tosa.const_shape" if arg.kind == "shape" else "tosa.const"
            if producer != wanted and self.checker.dynamic:
                self.checker.needs.append(("EXT-DYNAMIC",))
            elif producer != wanted:
                source = producer or "a graph input"
                self.error(f"operand {arg.name!r} must be a compile-time constant ({wanted}) "
                           f"without EXT-DYNAMIC; it comes from {source}")

    # -- attributes ----------------------------------------------------------

    def check_attrs(self) -> None:
        known = {a.name: a for a in self.opdef.attrs}
        for name in self.op.attrs:
            if name not in known:
                self.error(f"unknown attribute {name!r} (allowed: "
                           f"{', '.join(known) or 'none'})")
        for a in self.opdef.attrs:
            if a.name not in self.op.attrs:
                if not a.optional:
                    self.error(f"missing attribute {a.name!r}")
                    self.failed_attrs = True
                continue
            message = self.attr_problem(a.type, self.op.attrs[a.name])
            if message:
                self.error(f"attribute {a.name!r} {message}")
                self.failed_attrs = True

    def attr_problem(self, kind: str, value: Any) -> str | None:
        if kind in ("i32[]", "i64[]"):
            return None if int_list(value) is not None else f"must be a list of ints, " \
                                                             f"got {value!r}"
        if kind == "i32":
            ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
            return None if ok and -2**31 <= int(value) < 2**31 else f"must be an i32, got {value!r}"
        if kind == "bool":
            return None if isinstance(value, (bool, np.bool_)) else f"must be a bool, " \
                                                                    f"got {value!r}"
        if kind == "string":
            return None if isinstance(value, str) else f"must be a string, got {value!r}"
        if kind in ENUMS:
            if value not in ENUMS[kind]:
                return f"must be one of {', '.join(ENUMS[kind])}, got {value!r}"
            needed = ENUM_EXTENSIONS.get(kind, {}).get(value)
            if needed and needed not in self.checker.enabled:
                return f"value {value} needs {needed}"
            if needed:
                self.checker.needs.append((needed,))
            return None
        if kind == "value":
            ok = isinstance(value, (int, float, np.integer, np.floating)) \
                and not isinstance(value, (bool, np.bool_))
            return None if ok else f"must be a number, got {value!r}"
        if kind == "graph":
            if not isinstance(value, str) or value not in self.checker.module.graphs:
                return f"must name a graph of the module, got {value!r}"
            return None
        if kind == "tensor":
            return None if isinstance(value, np.ndarray) else f"must be a numpy array, " \
                                                              f"got {type(value).__name__}"
        if kind == "var_type":
            return None if value in SCALAR_TYPES else f"must be an element type name, " \
                                                      f"got {value!r}"
        return None

    def attr(self, name: str) -> Any:
        if name in self.op.attrs:
            return self.op.attrs[name]
        return self.opdef.attr(name).default

    # -- element types -------------------------------------------------------

    def check_types(self) -> TypeMode | None:
        opdef, op = self.opdef, self.op
        bound, problems = rules.bind_types(opdef, [v.type for v in op.operands],
                                           [v.type for v in op.results], op.attrs)
        for problem in problems:
            self.error(problem)
        if problems:
            return None
        self.types = bound
        candidates = rules.modes_fitting(opdef, bound)
        if not candidates:
            self.error(rules.no_mode_problem(opdef, bound))
            return None
        candidates, problem = rules.refine_modes(opdef, candidates, op.attrs, bound)
        if problem:
            self.error(problem)
            return None
        allowed = [m for m in candidates if m.allowed(self.checker.enabled)]
        if not allowed:
            text = ", ".join(f"{v}={t}" for v, t in bound.items())
            needs = " or ".join(sorted({p for m in candidates for p in m.profiles}))
            self.error(f"type mode '{candidates[0].name}' ({text}) needs {needs}, which is "
                       f"not enabled")
            return None
        self.checker.needs.append(tuple(alternative for alternative in allowed[0].profiles
                                        if all(part in self.checker.enabled
                                               for part in alternative.split("+"))))
        return allowed[0]

    # -- helpers for the shape rules -----------------------------------------

    def in_shape(self, i: int) -> tuple[int, ...] | None:
        return shape_of(self.op.operands[i])

    def out_shape(self, i: int = 0) -> tuple[int, ...] | None:
        return shape_of(self.op.results[i])

    def const(self, i: int) -> np.ndarray | None:
        """The value of operand i if it is a tosa.const, else None."""
        owner = self.op.operands[i].owner
        if owner is not None and owner.name == "tosa.const":
            values = owner.attrs.get("values")
            if isinstance(values, np.ndarray):
                return values
        return None

    def const_scalar(self, i: int) -> int | float | None:
        values = self.const(i)
        return values.reshape(-1)[0].item() if values is not None and values.size else None

    def shape_values(self, i: int) -> list[int] | None:
        """The values of shape operand i if it is a tosa.const_shape, else None."""
        owner = self.op.operands[i].owner
        if owner is not None and owner.name == "tosa.const_shape":
            return int_list(owner.attrs.get("values"))
        return None

    def ints(self, name: str, length: int) -> list[int] | None:
        values = int_list(self.attr(name))
        if values is not None and len(values) != length:
            self.error(f"attribute {name!r} must have {length} values, got {len(values)}")
            return None
        return values

    def expect_shape(self, what: str, got: tuple[int, ...] | None,
                     want: Sequence[int] | None) -> None:
        problem = rules.shape_problem(what, got, want)
        if problem:
            self.error(problem)

    def zero_point(self, i: int, name: str, owner_type: str) -> None:
        """ERROR_IF(type is not i8 && zp != 0) when zp is a constant."""
        value = self.const_scalar(i)
        problem = None if value is None else rules.zero_point_problem(name, owner_type, value)
        if problem:
            self.error(problem)
