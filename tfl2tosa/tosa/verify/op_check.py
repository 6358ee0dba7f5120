"""Checks of one TOSA op against the op table: operand and result counts and
kinds, attributes, compile-time-constant operands and element-type modes;
`OpCheck` also gives the shape rules their helpers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tfl2tosa.ir.core import Graph, Op, Value
from tfl2tosa.ir.types import (
    DYNAMIC,
    SCALAR_TYPES,
    ShapeType,
    TensorType,
    storage_type,
)
from tfl2tosa.tosa.ops import (
    ACC_TYPE_ELEMENT,
    ENUM_EXTENSIONS,
    ENUMS,
    Arg,
    OpDef,
    TypeMode,
)

if TYPE_CHECKING:
    from tfl2tosa.tosa.verify import _Checker

# Fixed element types named in argument tables.
_FIXED_TYPES = {"i8_t": "i8", "i16_t": "i16", "i32_t": "i32", "bool_t": "i1"}

# The op table is fixed, so what follows from an argument list or an op's
# modes alone is worked out once per op kind. Entries are keyed by the table's
# tuples and keep them (checked by identity), so a key is never reused.
_ARITIES: dict[int, tuple[tuple[Arg, ...], tuple[int, bool]]] = {}
_ARGUMENTS: dict[tuple[int, int], tuple[tuple[Arg, ...], tuple[Arg, ...]]] = {}
_MODES: dict[tuple[int, tuple[tuple[str, str], ...]], tuple[OpDef, list[TypeMode]]] = {}


def _arity(args: tuple[Arg, ...]) -> tuple[int, bool]:
    """(number of fixed arguments, whether a tensor list takes any number more)."""
    entry = _ARITIES.get(id(args))
    if entry is None or entry[0] is not args:
        entry = _ARITIES[id(args)] = (args, (sum(1 for a in args if a.kind != "tensor_list"),
                                             any(a.kind == "tensor_list" for a in args)))
    return entry[1]


def _argument_of_each(args: tuple[Arg, ...], count: int) -> tuple[Arg, ...]:
    """The argument each of `count` values is, in order; a tensor list takes the
    rest; values past the last argument get none."""
    key = (id(args), count)
    entry = _ARGUMENTS.get(key)
    if entry is None or entry[0] is not args:
        out: list[Arg] = []
        for k, arg in enumerate(args):
            if arg.kind == "tensor_list":
                fixed_after = sum(1 for a in args[k + 1:] if a.kind != "tensor_list")
                out.extend([arg] * max(0, count - len(out) - fixed_after))
            elif len(out) < count:
                out.append(arg)
        entry = _ARGUMENTS[key] = (args, tuple(out))
    return entry[1]


def _modes_fitting(opdef: OpDef, bound: dict[str, str]) -> list[TypeMode]:
    """The op's type modes that agree with every bound type variable."""
    key = (id(opdef), tuple(bound.items()))
    entry = _MODES.get(key)
    if entry is None or entry[0] is not opdef:
        entry = _MODES[key] = (opdef, [m for m in opdef.modes
                                       if all(m.types.get(v, t) == t for v, t in bound.items())])
    return list(entry[1])


def element_name(value: Value) -> str | None:
    """The scalar type name of a value's element (quantized: its storage)."""
    t = value.type
    if isinstance(t, ShapeType):
        return "shape"
    if isinstance(t, TensorType):
        return storage_type(t.element).name
    return None


def shape_of(value: Value) -> tuple[int, ...] | None:
    t = value.type
    return t.shape if isinstance(t, TensorType) else None


def known(*dims: int) -> bool:
    return all(d != DYNAMIC for d in dims)


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
        return list(zip(_argument_of_each(args, len(values)), values))

    def check_arity(self) -> bool:
        ok = True
        for what, args, values in (("operand", self.opdef.inputs, self.op.operands),
                                   ("result", self.opdef.outputs, self.op.results)):
            fixed, has_list = _arity(args)
            if has_list and len(values) < fixed or not has_list and len(values) != fixed:
                names = ", ".join(a.name for a in args) or "none"
                self.error(f"expects {'at least ' if has_list else ''}{fixed} {what}(s) "
                           f"({names}), got {len(values)}")
                ok = False
        if self.opdef.name == "CONCAT" and not self.op.operands:
            self.error("CONCAT needs at least one input")
            ok = False
        return ok

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
                if arg.shape == "[1]" and shape is not None and len(shape) == 1 \
                        and known(shape[0]) and shape[0] != 1:
                    self.error(f"{what} {arg.name!r} must have shape [1], got {value.type}")

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

    def bind_types(self) -> dict[str, str] | None:
        """Type variable -> element name; None (after reporting) if operands disagree."""
        bound: dict[str, str] = {}
        sources: dict[str, str] = {}
        scale32 = self.op.attrs.get("scale32")
        ok = True
        pairs = self.pairs(self.opdef.inputs, self.op.operands) + \
            self.pairs(self.opdef.outputs, self.op.results)
        if self.opdef.name == "VARIABLE" and isinstance(self.op.attrs.get("type"), str):
            bound["in_t"], sources["in_t"] = self.op.attrs["type"], "attribute 'type'"
        for arg, value in pairs:
            element = element_name(value)
            if element is None or element == "shape" or not arg.type_var:
                continue
            var = arg.type_var
            if var == "mul_t":  # RESCALE: the multiplier is i32 with scale32, else i16
                if isinstance(scale32, bool):
                    want = "i32" if scale32 else "i16"
                    if element != want:
                        self.error(f"multiplier must be {want} when scale32 is {scale32}, "
                                   f"got {element}")
                        ok = False
                continue
            if var in _FIXED_TYPES:
                if element != _FIXED_TYPES[var]:
                    self.error(f"{arg.name!r} must be {_FIXED_TYPES[var]}, got {element}")
                    ok = False
                continue
            if var in bound and bound[var] != element:
                self.error(f"{arg.name!r} is {element} but {sources[var]} is {bound[var]} "
                           f"(both are {var})")
                ok = False
                continue
            bound[var], sources[var] = element, repr(arg.name)
        return bound if ok else None

    def check_types(self) -> TypeMode | None:
        bound = self.bind_types()
        if bound is None:
            return None
        self.types = bound
        candidates = _modes_fitting(self.opdef, bound)
        text = ", ".join(f"{v}={t}" for v, t in bound.items())
        if not candidates:
            self.error(f"element types ({text}) match no TOSA 1.0 type mode of "
                       f"{self.opdef.name}")
            return None
        candidates = self.refine_modes(candidates)
        if not candidates:
            return None
        allowed = [m for m in candidates if m.allowed(self.checker.enabled)]
        if not allowed:
            needs = " or ".join(sorted({p for m in candidates for p in m.profiles}))
            self.error(f"type mode '{candidates[0].name}' ({text}) needs {needs}, which is "
                       f"not enabled")
            return None
        self.checker.needs.append(tuple(alternative for alternative in allowed[0].profiles
                                        if all(part in self.checker.enabled
                                               for part in alternative.split("+"))))
        return allowed[0]

    def refine_modes(self, candidates: list[TypeMode]) -> list[TypeMode]:
        """Modes that also fit acc_type (conv, pooling) and RESIZE's mode."""
        acc = self.op.attrs.get("acc_type")
        if acc in ACC_TYPE_ELEMENT and any("acc_t" in m.types for m in candidates):
            fitting = [m for m in candidates if m.types.get("acc_t") == ACC_TYPE_ELEMENT[acc]]
            if not fitting:
                allowed = sorted({k for m in candidates for k, e in ACC_TYPE_ELEMENT.items()
                                  if m.types.get("acc_t") == e})
                self.error(f"acc_type {acc} does not fit these element types (allowed: "
                           f"{', '.join(allowed)})")
            return fitting
        if self.opdef.name == "RESIZE" and self.op.attrs.get("mode") in ("NEAREST", "BILINEAR"):
            other = "bilinear" if self.op.attrs["mode"] == "NEAREST" else "nearest"
            fitting = [m for m in candidates if other not in m.name]
            if not fitting:
                self.error(f"{self.op.attrs['mode']} resize cannot produce "
                           f"{self.types.get('out_t')} from {self.types.get('in_t')}")
            return fitting
        return candidates

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
        if got is None or want is None:
            return
        if len(got) != len(want) or not all(
                g == w or not known(g, w) for g, w in zip(got, want)):
            self.error(f"{what} shape must be {list(want)}, got {list(got)}")

    def expect_rank(self, what: str, shape: tuple[int, ...] | None, rank: int) -> bool:
        if shape is None:
            return False
        if len(shape) != rank:
            self.error(f"{what} must have rank {rank}, got {len(shape)}")
            return False
        return True

    def zero_point(self, i: int, name: str, owner_type: str, allowed: Sequence[str]) -> None:
        """ERROR_IF(type not in allowed && zp != 0) when zp is a constant."""
        value = self.const_scalar(i)
        if value is not None and value != 0 and owner_type not in allowed:
            self.error(f"{name} must be 0 for {owner_type}, got {value}")
