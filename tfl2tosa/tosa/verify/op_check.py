"""Checks of one TOSA op against the op table: operand and result counts and
kinds, attributes, compile-time-constant operands and element-type modes;
`OpCheck` also gives the shape rules their helpers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    if value.__class__ is list and all(v.__class__ is int for v in value):
        return list(value)  # as the patterns write them
    if isinstance(value, np.ndarray):
        value = value.tolist() if value.ndim == 1 else None
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
            for v in value):
        return [int(v) for v in value]
    return None


# The attributes rules.bind_types and rules.refine_modes read, on any op: an
# acc_type is read even where the operator has none (NEGATE, REDUCE_SUM), where
# it is also reported as unknown.
_TYPE_ATTRIBUTES = ("scale32", "acc_type", "mode", "type")


class OpCheck:
    """The checks of one op; shape rules call its helpers.

    An op's checks run once per signature (its name, operand and result types
    and attributes) while `judging`: each problem found is recorded in `steps`,
    and a check that reads a constant operand's value (a zero point, RESCALE's
    shifts) is deferred into `steps` as a function, to be run again on every op
    with that signature. Outside judging a problem is reported at once.
    """

    __slots__ = ("checker", "graph", "op", "opdef", "types", "judging", "steps", "needs",
                 "failed_attrs")

    def __init__(self, checker: _Checker, graph: Graph | None, op: Op, opdef: OpDef,
                 types: dict[str, str] | None = None, *, judging: bool = False) -> None:
        self.checker = checker
        self.graph = graph
        self.op = op
        self.opdef = opdef
        self.types: dict[str, str] = {} if types is None else types
        self.judging = judging
        self.steps: list[str | Callable[[OpCheck], None]] = []
        # The feature sets this op needs, one of which must be enabled each.
        self.needs: list[tuple[str, ...]] = []
        self.failed_attrs = False

    def error(self, message: str) -> None:
        if self.judging:
            self.steps.append(message)
        else:
            self.checker.report(self.graph, self.op, message)

    def need(self, alternatives: tuple[str, ...]) -> None:
        if self.judging:
            self.needs.append(alternatives)
        else:
            self.checker.needs.append(alternatives)

    def defer(self, check: Callable[[OpCheck], None]) -> None:
        """Run `check`, which reads constant operands' values, on every op of
        this signature (now, if not judging)."""
        if self.judging:
            self.steps.append(check)
        else:
            check(self)

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
                t = value.type
                want = ShapeType if arg.kind == "shape" else TensorType
                if not isinstance(t, want):
                    self.error(f"{what} {arg.name!r} must be a "
                               f"{'shape_t' if want is ShapeType else 'tensor'}, got {t}")
                    continue
                if want is ShapeType:
                    continue  # ranks and one-value shapes are rules of tensors
                shape = t.shape
                if arg.rank is not None and shape is not None:
                    low, high = arg.rank
                    if not low <= len(shape) <= high:
                        wanted = str(low) if low == high else f"{low}..{high}"
                        self.error(f"{what} {arg.name!r} must have rank {wanted}, got {t}")
                problem = rules.one_value_problem(arg, t)
                if problem:
                    self.error(f"{what} {problem}")

    def check_constants(self) -> None:
        """Compile-time-constant operands come from tosa.const / tosa.const_shape:
        which op makes an operand is no part of the signature, so this is deferred."""
        args = rules.argument_of_each(self.opdef.inputs, len(self.op.operands))
        constants = tuple((i, arg.name, "tosa.const_shape" if arg.kind == "shape" else "tosa.const")
                          for i, arg in enumerate(args) if arg.ctc)
        if constants:
            self.defer(lambda c: c._check_producers(constants))

    def _check_producers(self, constants: tuple[tuple[int, str, str], ...]) -> None:
        operands = self.op.operands
        for i, name, wanted in constants:
            owner = operands[i].owner
            producer = owner.name if owner is not None else None
            if producer == wanted:
                continue
            if self.checker.dynamic:
                self.need(("EXT-DYNAMIC",))
            else:
                self.error(f"operand {name!r} must be a compile-time constant ({wanted}) "
                           f"without EXT-DYNAMIC; it comes from {producer or 'a graph input'}")

    # -- attributes ----------------------------------------------------------

    def check_attrs(self) -> None:
        known = self.opdef.attr_names
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
                self.need((needed,))
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

    def check_types(self) -> None:
        """Bind the type variables and find the type mode. This reads only element
        types and the binding attributes, so its verdict is kept for every op
        that has them (shapes vary more than element types)."""
        key = self._element_signature()
        verdict = self.checker.type_verdicts.get(key) if key is not None else None
        if verdict is None:
            verdict = self._judge_types()
            if key is not None:
                self.checker.type_verdicts[key] = verdict
        problems, needs, self.types = verdict
        for problem in problems:
            self.error(problem)
        for alternatives in needs:
            self.need(alternatives)

    def _element_signature(self) -> tuple[Any, ...] | None:
        """The op's name, the element type of each operand and result (the type
        itself if not a tensor) and its binding attributes; None if one of
        these cannot be a key."""
        op = self.op
        key: list[Any] = [op.name]
        for values in (op.operands, op.results):
            for v in values:
                t = v.type
                key.append(t.element if t.__class__ is TensorType else t)
            key.append(None)
        attrs = op.attrs
        for name in _TYPE_ATTRIBUTES:
            value = attrs.get(name)
            if value is not None and value.__class__ not in (bool, int, str):
                return None
            key += (value.__class__, value)
        return tuple(key)

    def _judge_types(self) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...],
                                    dict[str, str]]:
        """(problems, needs, bound type variables)."""
        opdef, op = self.opdef, self.op
        bound, problems = rules.bind_types(opdef, [v.type for v in op.operands],
                                           [v.type for v in op.results], op.attrs)
        if problems:
            return tuple(problems), (), {}
        candidates = rules.modes_fitting(opdef, bound)
        if not candidates:
            return (rules.no_mode_problem(opdef, bound),), (), bound
        candidates, problem = rules.refine_modes(opdef, candidates, op.attrs, bound)
        if problem:
            return (problem,), (), bound
        enabled = self.checker.enabled
        allowed = [m for m in candidates if m.allowed(enabled)]
        if not allowed:
            text = ", ".join(f"{v}={t}" for v, t in bound.items())
            needs = " or ".join(sorted({p for m in candidates for p in m.profiles}))
            return (f"type mode '{candidates[0].name}' ({text}) needs {needs}, which is "
                    f"not enabled",), (), bound
        return (), (tuple(alternative for alternative in allowed[0].profiles
                          if all(part in enabled for part in alternative.split("+"))),), bound

    # -- helpers for the shape rules -----------------------------------------

    def in_shape(self, i: int) -> tuple[int, ...] | None:
        return shape_of(self.op.operands[i])

    def out_shape(self, i: int = 0) -> tuple[int, ...] | None:
        return shape_of(self.op.results[i])

    def const(self, i: int) -> np.ndarray | None:
        """The value of operand i if it is a tosa.const, else None."""
        self._not_judging()
        owner = self.op.operands[i].owner
        if owner is not None and owner.name == "tosa.const":
            values = owner.attrs.get("values")
            if isinstance(values, np.ndarray):
                return values
        return None

    def const_scalar(self, i: int) -> int | float | None:
        values = self.const(i)
        return values.item(0) if values is not None and values.size else None  # the first

    def shape_values(self, i: int) -> list[int] | None:
        """The values of shape operand i if it is a tosa.const_shape, else None."""
        self._not_judging()
        owner = self.op.operands[i].owner
        if owner is not None and owner.name == "tosa.const_shape":
            return int_list(owner.attrs.get("values"))
        return None

    def _not_judging(self) -> None:
        # A verdict is shared by every op of a signature; a value read into it
        # would stand for other ops' constants.
        if self.judging:
            raise AssertionError(f"a check of {self.opdef.name} reads a constant operand "
                                 "without deferring")

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
        """ERROR_IF(type is not i8 && zp != 0) when zp is a constant; an i8 zero
        point may be any value, so it is not read."""
        if owner_type != "i8":
            self.defer(lambda c: c._zero_point_value(i, name, owner_type))

    def _zero_point_value(self, i: int, name: str, owner_type: str) -> None:
        value = self.const_scalar(i)
        problem = None if value is None else rules.zero_point_problem(name, owner_type, value)
        if problem:
            self.error(problem)
