"""Check a TOSA module against the TOSA 1.0 specification.

`verify` walks every graph and op and reports each problem as a Violation
naming the op, its graph and its location (which names the TFLite op it was
lowered from). The checks read the op table (`tfl2tosa.tosa.ops`) for operand
counts, attributes and element-type modes; the shape and attribute rules below
restate the specification's ERROR_IF conditions (and, where an operand is a
constant, the REQUIRE conditions a converter must never break), one small
function per operator found by its specification name.

Dimensions that are dynamic (-1) or tensors that are unranked are skipped by
the shape rules; everything else is checked exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfl2tosa.errors import VerificationError
from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.types import (
    DYNAMIC,
    SCALAR_TYPES,
    ScalarType,
    ShapeType,
    TensorType,
    storage_type,
)
from tfl2tosa.tosa.ops import (
    ACC_TYPE_ELEMENT,
    BY_MLIR,
    ENUM_EXTENSIONS,
    ENUMS,
    EXTENSION_PROFILES,
    EXTENSIONS,
    Arg,
    OpDef,
    TypeMode,
)

# Every extension except EXT-DYNAMIC: a converter's output should keep shapes,
# zero points and tables compile-time constant, so that is checked unless asked.
DEFAULT_EXTENSIONS = tuple(e for e in EXTENSIONS if e != "EXT-DYNAMIC")

# How many violations the VerificationError message lists.
MESSAGE_VIOLATIONS = 5

# Fixed element types named in argument tables.
_FIXED_TYPES = {"i8_t": "i8", "i16_t": "i16", "i32_t": "i32", "bool_t": "i1"}


@dataclass(frozen=True)
class Violation:
    """One way a graph breaks the specification."""

    op: Op | None       # None for graph-level problems (an undefined output)
    graph: str
    loc: str
    message: str

    def __str__(self) -> str:
        what = self.op.name if self.op is not None else f"graph {self.graph!r}"
        return f"{what} @ {self.loc or self.graph}: {self.message}"


def enabled_features(profile: str | Iterable[str],
                     extensions: Iterable[str]) -> frozenset[str]:
    """Profiles plus the extensions that one of them supports."""
    profiles = {profile} if isinstance(profile, str) else set(profile)
    usable = {e for e in extensions if profiles & set(EXTENSION_PROFILES.get(e, ()))}
    return frozenset(profiles | usable)


def verify(module: Module | Graph, profile: str | Sequence[str] = ("PRO-INT", "PRO-FP"),
           extensions: Iterable[str] = DEFAULT_EXTENSIONS, *,
           raise_on_error: bool = True) -> list[Violation]:
    """Report every TOSA 1.0 violation in `module`; raise VerificationError if any.

    `profile` and `extensions` select which type modes are allowed (an
    extension counts only together with a profile it is defined for). By
    default every extension but EXT-DYNAMIC is enabled.
    """
    if isinstance(module, Graph):
        graph, module = module, Module()
        module.add_graph(graph)
    checker = _Checker(module, enabled_features(profile, extensions))
    for graph in module.graphs.values():
        checker.check_graph(graph)
    violations = checker.violations
    if violations and raise_on_error:
        lines = [str(v) for v in violations[:MESSAGE_VIOLATIONS]]
        more = len(violations) - len(lines)
        text = (f"{len(violations)} TOSA violation(s):\n  " + "\n  ".join(lines)
                + (f"\n  ... and {more} more" if more else ""))
        raise VerificationError(text, violations)
    return violations


# ---------------------------------------------------------------------------
# Module and graph walk


class _Checker:
    def __init__(self, module: Module, enabled: frozenset[str]) -> None:
        self.module = module
        self.enabled = enabled
        self.dynamic = "EXT-DYNAMIC" in enabled
        self.violations: list[Violation] = []
        self.variables = {op.attrs.get("name"): op for _, op in module.ops()
                          if op.name == "tosa.variable"}

    def report(self, graph: Graph, op: Op | None, message: str) -> None:
        loc = op.loc if op is not None and op.loc else graph.name
        self.violations.append(Violation(op, graph.name, loc, message))

    def check_graph(self, graph: Graph) -> None:
        defined = {id(v) for v in graph.inputs}
        for op in graph.ops:
            for i, value in enumerate(op.operands):
                if id(value) not in defined:
                    self.report(graph, op, f"operand {i} ({value.name!r}) is used before it "
                                           f"is defined in graph {graph.name!r}")
            defined.update(id(v) for v in op.results)
            self.check_op(graph, op)
        for value in graph.outputs:
            if id(value) not in defined:
                self.report(graph, None, f"output {value.name!r} is not defined in the graph")

    def check_op(self, graph: Graph, op: Op) -> None:
        opdef = BY_MLIR.get(op.name)
        if opdef is None:
            self.report(graph, op, f"{op.name} is not a TOSA 1.0 operator "
                                   f"(dialect {op.dialect!r})")
            return
        c = _OpCheck(self, graph, op, opdef)
        if not c.check_arity():
            return
        c.check_attrs()
        c.check_arg_kinds()
        c.check_constants()
        c.mode = c.check_types()
        rule = SHAPE_RULES.get(opdef.name)
        if rule is not None and not c.failed_attrs:
            rule(c)


# ---------------------------------------------------------------------------
# One op

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


def _element(value: Value) -> str | None:
    """The scalar type name of a value's element (quantized: its storage)."""
    t = value.type
    if isinstance(t, ShapeType):
        return "shape"
    if isinstance(t, TensorType):
        return storage_type(t.element).name
    return None


def _shape(value: Value) -> tuple[int, ...] | None:
    t = value.type
    return t.shape if isinstance(t, TensorType) else None


def _known(*dims: int) -> bool:
    return all(d != DYNAMIC for d in dims)


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, np.ndarray):
        value = value.tolist() if value.ndim == 1 else None
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
            for v in value):
        return [int(v) for v in value]
    return None


class _OpCheck:
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
                shape = _shape(value)
                if arg.rank is not None and shape is not None:
                    low, high = arg.rank
                    if not low <= len(shape) <= high:
                        wanted = str(low) if low == high else f"{low}..{high}"
                        self.error(f"{what} {arg.name!r} must have rank {wanted}, "
                                   f"got {value.type}")
                if arg.shape == "[1]" and shape is not None and len(shape) == 1 \
                        and _known(shape[0]) and shape[0] != 1:
                    self.error(f"{what} {arg.name!r} must have shape [1], got {value.type}")

    def check_constants(self) -> None:
        """Compile-time-constant operands come from tosa.const / tosa.const_shape."""
        if self.checker.dynamic:
            return
        for arg, value in self.pairs(self.opdef.inputs, self.op.operands):
            if not arg.ctc:
                continue
            producer = value.owner.name if value.owner is not None else None
            wanted = "tosa.const_shape" if arg.kind == "shape" else "tosa.const"
            if producer != wanted:
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
            return None if _int_list(value) is not None else f"must be a list of ints, " \
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
            element = _element(value)
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
        return _shape(self.op.operands[i])

    def out_shape(self, i: int = 0) -> tuple[int, ...] | None:
        return _shape(self.op.results[i])

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
            return _int_list(owner.attrs.get("values"))
        return None

    def ints(self, name: str, length: int) -> list[int] | None:
        values = _int_list(self.attr(name))
        if values is not None and len(values) != length:
            self.error(f"attribute {name!r} must have {length} values, got {len(values)}")
            return None
        return values

    def expect_shape(self, what: str, got: tuple[int, ...] | None,
                     want: Sequence[int] | None) -> None:
        if got is None or want is None:
            return
        if len(got) != len(want) or not all(
                g == w or not _known(g, w) for g, w in zip(got, want)):
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


# ---------------------------------------------------------------------------
# Shape and attribute rules, by specification op name

ShapeRule = Callable[[_OpCheck], None]
SHAPE_RULES: dict[str, ShapeRule] = {}


def rule(*names: str) -> Callable[[ShapeRule], ShapeRule]:
    def register(fn: ShapeRule) -> ShapeRule:
        for name in names:
            SHAPE_RULES[name] = fn
        return fn
    return register


def _exact_div(c: _OpCheck, what: str, numerator: int, denominator: int) -> int | None:
    """idiv_check: the division must be exact (specification ERROR_IF)."""
    if denominator <= 0:
        return None
    if numerator % denominator:
        c.error(f"{what}: {numerator} is not divisible by {denominator}")
        return None
    return numerator // denominator


def _check_out_dim(c: _OpCheck, what: str, got: int, numerator: int, stride: int) -> None:
    if not _known(got):
        return
    quotient = _exact_div(c, what, numerator, stride)
    if quotient is not None and got != quotient + 1:
        c.error(f"{what} must be {quotient + 1}, got {got}")


def _positive(c: _OpCheck, name: str, values: list[int] | None) -> bool:
    if values is not None and any(v < 1 for v in values):
        c.error(f"attribute {name!r} must be >= 1, got {values}")
        return False
    return values is not None


def _non_negative(c: _OpCheck, name: str, values: list[int] | None) -> bool:
    if values is not None and any(v < 0 for v in values):
        c.error(f"attribute {name!r} must be >= 0, got {values}")
        return False
    return values is not None


def _conv_zero_points(c: _OpCheck) -> None:
    c.zero_point(3, "input_zp", c.types.get("in_t", ""), ("i8",))
    c.zero_point(4, "weight_zp", c.types.get("weight_t", ""), ("i8",))


def _bias(c: _OpCheck, out_channels: int) -> None:
    bias = c.in_shape(2)
    if bias and len(bias) == 1 and _known(bias[0], out_channels) \
            and bias[0] not in (1, out_channels):
        c.error(f"bias has {bias[0]} values; it must have 1 or OC = {out_channels}")


@rule("CONV2D", "DEPTHWISE_CONV2D", "CONV3D")
def _convolution(c: _OpCheck) -> None:
    spatial = 3 if c.opdef.name == "CONV3D" else 2
    _conv_zero_points(c)
    pad = c.ints("pad", 2 * spatial)
    stride = c.ints("stride", spatial)
    dilation = c.ints("dilation", spatial)
    ok = _non_negative(c, "pad", pad) & _positive(c, "stride", stride) \
        & _positive(c, "dilation", dilation)
    x, w, out = c.in_shape(0), c.in_shape(1), c.out_shape()
    rank = spatial + 2
    if not (c.expect_rank("input", x, rank) and c.expect_rank("weight", w, rank)
            and c.expect_rank("output", out, rank)):
        return
    if c.opdef.name == "DEPTHWISE_CONV2D":
        kernel, in_channels = w[:2], w[2]
        out_channels = w[2] * w[3] if _known(w[2], w[3]) else DYNAMIC
    else:
        kernel, in_channels, out_channels = w[1:-1], w[-1], w[0]
    if _known(x[-1], in_channels) and x[-1] != in_channels:
        c.error(f"input has {x[-1]} channels but the weight expects {in_channels}")
    if _known(out[-1], out_channels) and out[-1] != out_channels:
        c.error(f"output has {out[-1]} channels, expected {out_channels}")
    if _known(x[0], out[0]) and x[0] != out[0]:
        c.error(f"batch {x[0]} of the input differs from {out[0]} of the output")
    _bias(c, out_channels)
    if not ok:
        return
    for i in range(spatial):
        if _known(x[1 + i], kernel[i]):
            numerator = (x[1 + i] - 1 + pad[2 * i] + pad[2 * i + 1]
                         - (kernel[i] - 1) * dilation[i])
            _check_out_dim(c, f"output dimension {1 + i}", out[1 + i], numerator, stride[i])


@rule("TRANSPOSE_CONV2D")
def _transpose_conv2d(c: _OpCheck) -> None:
    _conv_zero_points(c)
    out_pad, stride = c.ints("out_pad", 4), c.ints("stride", 2)
    ok = _positive(c, "stride", stride)
    x, w, out = c.in_shape(0), c.in_shape(1), c.out_shape()
    if not (c.expect_rank("input", x, 4) and c.expect_rank("weight", w, 4)
            and c.expect_rank("output", out, 4)):
        return
    if _known(x[3], w[3]) and x[3] != w[3]:
        c.error(f"input has {x[3]} channels but the weight expects {w[3]}")
    if _known(out[3], w[0]) and out[3] != w[0]:
        c.error(f"output has {out[3]} channels, expected OC = {w[0]}")
    _bias(c, w[0])
    if not ok or out_pad is None:
        return
    for i, k in enumerate((w[1], w[2])):
        if _known(k) and (out_pad[2 * i] <= -k or out_pad[2 * i + 1] <= -k):
            c.error(f"out_pad {out_pad} must be > -{k} (the kernel size)")
        elif _known(x[1 + i], k, out[1 + i]):
            want = (x[1 + i] - 1) * stride[i] + out_pad[2 * i] + out_pad[2 * i + 1] + k
            if out[1 + i] != want:
                c.error(f"output dimension {1 + i} must be {want}, got {out[1 + i]}")


@rule("AVG_POOL2D", "MAX_POOL2D")
def _pool2d(c: _OpCheck) -> None:
    if c.opdef.name == "AVG_POOL2D":
        element = c.types.get("in_out_t", "")
        c.zero_point(1, "input_zp", element, ("i8",))
        c.zero_point(2, "output_zp", element, ("i8",))
    kernel, stride, pad = c.ints("kernel", 2), c.ints("stride", 2), c.ints("pad", 4)
    ok = _positive(c, "kernel", kernel) & _positive(c, "stride", stride) \
        & _non_negative(c, "pad", pad)
    if ok and (pad[0] >= kernel[0] or pad[1] >= kernel[0] or pad[2] >= kernel[1]
               or pad[3] >= kernel[1]):
        c.error(f"pad {pad} must be smaller than the kernel {kernel}")
        ok = False
    x, out = c.in_shape(0), c.out_shape()
    if not (c.expect_rank("input", x, 4) and c.expect_rank("output", out, 4)):
        return
    for d in (0, 3):
        if _known(x[d], out[d]) and x[d] != out[d]:
            c.error(f"input dimension {d} ({x[d]}) differs from the output's ({out[d]})")
    if ok:
        for i in range(2):
            if _known(x[1 + i]):
                numerator = x[1 + i] + pad[2 * i] + pad[2 * i + 1] - kernel[i]
                _check_out_dim(c, f"output dimension {1 + i}", out[1 + i], numerator,
                               stride[i])


@rule("MATMUL")
def _matmul(c: _OpCheck) -> None:
    element = c.types.get("in_t", "")
    c.zero_point(2, "A_zp", element, ("i8",))
    c.zero_point(3, "B_zp", element, ("i8",))
    a, b, out = c.in_shape(0), c.in_shape(1), c.out_shape()
    if not (c.expect_rank("A", a, 3) and c.expect_rank("B", b, 3)
            and c.expect_rank("output", out, 3)):
        return
    if _known(a[2], b[1]) and a[2] != b[1]:
        c.error(f"A is [N,H,C] with C = {a[2]} but B is [N,C,W] with C = {b[1]}")
    if _known(a[0], b[0]) and a[0] != b[0]:
        c.error(f"batch of A ({a[0]}) differs from batch of B ({b[0]})")
    c.expect_shape("output", out, (a[0], a[1], b[2]))


@rule("FFT2D", "RFFT2D")
def _fft(c: _OpCheck) -> None:
    x = c.in_shape(0)
    if not c.expect_rank("input_real", x, 3):
        return
    for d, name in ((1, "H"), (2, "W")):
        if _known(x[d]) and (x[d] < 1 or x[d] & (x[d] - 1)):
            c.error(f"{name} = {x[d]} must be a power of two")
    if c.opdef.name == "FFT2D":
        c.expect_shape("input_imag", c.in_shape(1), x)
        want: tuple[int, ...] = x
    else:
        want = (x[0], x[1], x[2] // 2 + 1 if _known(x[2]) else DYNAMIC)
    c.expect_shape("output_real", c.out_shape(0), want)
    c.expect_shape("output_imag", c.out_shape(1), want)


@rule("ARGMAX")
def _argmax(c: _OpCheck) -> None:
    x = c.in_shape(0)
    if x is None:
        return
    axis = c.attr("axis")
    if not 0 <= axis < len(x):
        c.error(f"axis {axis} is out of range for rank {len(x)}")
        return
    c.expect_shape("output", c.out_shape(), x[:axis] + x[axis + 1:])


def _broadcast(c: _OpCheck, shapes: list[tuple[int, ...] | None]) -> None:
    """Elementwise broadcast: equal ranks, each dimension equal or 1 (ERROR_IF)."""
    out = c.out_shape()
    if any(s is None for s in shapes) or out is None:
        return
    ranks = {len(s) for s in shapes} | {len(out)}
    if len(ranks) > 1:
        c.error(f"operands and result must have equal ranks (reshape first), got "
                f"{[list(s) for s in shapes]} -> {list(out)}")
        return
    want = []
    for dims in zip(*shapes):
        sizes = {d for d in dims if d != 1}
        if DYNAMIC in sizes:
            want.append(DYNAMIC)
        elif len(sizes) > 1:
            c.error(f"shapes {[list(s) for s in shapes]} do not broadcast")
            return
        else:
            want.append(sizes.pop() if sizes else 1)
    c.expect_shape("output", out, want)


@rule("ADD", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "INTDIV",
      "LOGICAL_AND", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "LOGICAL_OR", "LOGICAL_XOR",
      "MAXIMUM", "MINIMUM", "POW", "SUB", "EQUAL", "GREATER", "GREATER_EQUAL", "SELECT")
def _elementwise(c: _OpCheck) -> None:
    count = 3 if c.opdef.name == "SELECT" else 2
    _broadcast(c, [c.in_shape(i) for i in range(count)])
    if c.opdef.name in ("ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT"):
        amounts = c.const(1)
        bits = {"i8": 8, "i16": 16, "i32": 32}.get(c.types.get("in_out_t", ""))
        if amounts is not None and bits and (amounts.min(initial=0) < 0
                                             or amounts.max(initial=0) > bits - 1):
            c.error(f"shift amounts must be in 0..{bits - 1} (REQUIRE)")


@rule("MUL")
def _mul(c: _OpCheck) -> None:
    _broadcast(c, [c.in_shape(0), c.in_shape(1)])
    shift = c.const_scalar(2)
    if shift is None:
        return
    if c.types.get("in_t") != "i32" and shift != 0:
        c.error(f"shift must be 0 unless the inputs are i32, got {shift} (REQUIRE)")
    elif not 0 <= shift <= 63:
        c.error(f"shift must be in 0..63, got {shift} (REQUIRE)")


def _same_shape(c: _OpCheck) -> None:
    c.expect_shape("output", c.out_shape(), c.in_shape(0))


for _name in ("ERF", "SIGMOID", "TANH", "ABS", "BITWISE_NOT", "CEIL", "CLZ", "COS", "EXP",
              "FLOOR", "LOG", "LOGICAL_NOT", "RECIPROCAL", "RSQRT", "SIN", "CAST", "IDENTITY",
              "REVERSE"):
    SHAPE_RULES[_name] = _same_shape


@rule("NEGATE")
def _negate(c: _OpCheck) -> None:
    _same_shape(c)
    element = c.types.get("in_out_t", "")
    c.zero_point(1, "input1_zp", element, ("i8",))
    c.zero_point(2, "output_zp", element, ("i8",))


@rule("CLAMP")
def _clamp(c: _OpCheck) -> None:
    _same_shape(c)
    low, high = c.attr("min_val"), c.attr("max_val")
    if np.isnan(low) or np.isnan(high):
        c.error("min_val and max_val must not be NaN")
    elif high < low:
        c.error(f"max_val {high} is smaller than min_val {low}")
    element = SCALAR_TYPES.get(c.types.get("in_out_t", ""))
    if isinstance(element, ScalarType) and element.is_integer:
        for name, value in (("min_val", low), ("max_val", high)):
            if value != int(value) or not element.min_value <= value <= element.max_value:
                c.error(f"{name} {value} is not a value of {element}")


@rule("TABLE")
def _table(c: _OpCheck) -> None:
    _same_shape(c)
    table = c.in_shape(1)
    if c.mode is not None and table is not None and len(table) == 1 and _known(table[0]):
        size = c.mode.params["TABLE_SIZE"]
        if table[0] != size:
            c.error(f"table must have {size} entries for {c.types.get('in_t')} input, "
                    f"got {table[0]}")


@rule("REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PRODUCT", "REDUCE_SUM")
def _reduce(c: _OpCheck) -> None:
    x = c.in_shape(0)
    if x is None:
        return
    axis = c.attr("axis")
    if not 0 <= axis < len(x):
        c.error(f"axis {axis} is out of range for rank {len(x)}")
        return
    c.expect_shape("output", c.out_shape(), x[:axis] + (1,) + x[axis + 1:])


@rule("CONCAT")
def _concat(c: _OpCheck) -> None:
    shapes = [_shape(v) for v in c.op.operands]
    out = c.out_shape()
    if any(s is None for s in shapes) or out is None:
        return
    axis = c.attr("axis")
    if not 0 <= axis < len(out):
        c.error(f"axis {axis} is out of range for rank {len(out)}")
        return
    if any(len(s) != len(out) for s in shapes):
        c.error(f"all inputs must have the output's rank {len(out)}")
        return
    want = list(out)
    total = 0
    for s in shapes:
        for d, (got, expected) in enumerate(zip(s, out)):
            if d != axis and _known(got, expected) and got != expected:
                c.error(f"input shape {list(s)} differs from the output {list(out)} "
                        f"outside axis {axis}")
                return
        total = total + s[axis] if _known(total, s[axis]) else DYNAMIC
    want[axis] = total
    c.expect_shape("output", out, want)


@rule("PAD")
def _pad(c: _OpCheck) -> None:
    x, padding = c.in_shape(0), c.shape_values(1)
    if x is None or padding is None:
        return
    if len(padding) != 2 * len(x):
        c.error(f"padding must have 2 * rank = {2 * len(x)} values, got {len(padding)}")
        return
    if any(p < 0 for p in padding):
        c.error(f"padding must be >= 0, got {padding}")
        return
    want = [d + padding[2 * i] + padding[2 * i + 1] if _known(d) else DYNAMIC
            for i, d in enumerate(x)]
    c.expect_shape("output", c.out_shape(), want)


@rule("RESHAPE")
def _reshape(c: _OpCheck) -> None:
    x, out, values = c.in_shape(0), c.out_shape(), c.shape_values(1)
    if values is not None and out is not None:
        c.expect_shape("output (from the shape operand)", out, values)
    if x is not None and out is not None and _known(*x, *out) \
            and int(np.prod(x, dtype=np.int64)) != int(np.prod(out, dtype=np.int64)):
        c.error(f"element count changes from {list(x)} to {list(out)}")


@rule("SLICE")
def _slice(c: _OpCheck) -> None:
    x, start, size = c.in_shape(0), c.shape_values(1), c.shape_values(2)
    if x is None or start is None or size is None:
        return
    if len(start) != len(x) or len(size) != len(x):
        c.error(f"start and size must have rank {len(x)} values, got {start} and {size}")
        return
    for i, (d, s, n) in enumerate(zip(x, start, size)):
        if s < 0 or n <= 0 or (_known(d) and s + n > d):
            c.error(f"slice start {start} size {size} does not fit the input {list(x)} "
                    f"(dimension {i})")
            return
    c.expect_shape("output", c.out_shape(), size)


@rule("TILE")
def _tile(c: _OpCheck) -> None:
    x, multiples = c.in_shape(0), c.shape_values(1)
    if x is None or multiples is None:
        return
    if len(multiples) != len(x):
        c.error(f"multiples must have {len(x)} values, got {multiples}")
        return
    c.expect_shape("output", c.out_shape(),
                   [d * m if _known(d) else DYNAMIC for d, m in zip(x, multiples)])


@rule("TRANSPOSE")
def _transpose(c: _OpCheck) -> None:
    x, perms = c.in_shape(0), _int_list(c.attr("perms"))
    if x is None or perms is None:
        return
    if sorted(perms) != list(range(len(x))):
        c.error(f"perms {perms} is not a permutation of 0..{len(x) - 1}")
        return
    c.expect_shape("output", c.out_shape(), [x[p] for p in perms])


@rule("GATHER")
def _gather(c: _OpCheck) -> None:
    values, indices = c.in_shape(0), c.in_shape(1)
    if not (c.expect_rank("values", values, 3) and c.expect_rank("indices", indices, 2)):
        return
    if _known(values[0], indices[0]) and values[0] != indices[0]:
        c.error(f"values batch {values[0]} differs from indices batch {indices[0]}")
    c.expect_shape("output", c.out_shape(), (values[0], indices[1], values[2]))


@rule("SCATTER")
def _scatter(c: _OpCheck) -> None:
    values, indices, updates = c.in_shape(0), c.in_shape(1), c.in_shape(2)
    if not (c.expect_rank("values_in", values, 3) and c.expect_rank("indices", indices, 2)
            and c.expect_rank("input", updates, 3)):
        return
    c.expect_shape("input", updates, (values[0], indices[1], values[2]))
    if _known(values[0], indices[0]) and values[0] != indices[0]:
        c.error(f"values_in batch {values[0]} differs from indices batch {indices[0]}")
    c.expect_shape("values_out", c.out_shape(), values)


@rule("RESIZE")
def _resize(c: _OpCheck) -> None:
    scale, offset, border = c.shape_values(1), c.shape_values(2), c.shape_values(3)
    x, out = c.in_shape(0), c.out_shape()
    if not (c.expect_rank("input", x, 4) and c.expect_rank("output", out, 4)):
        return
    for d in (0, 3):
        if _known(x[d], out[d]) and x[d] != out[d]:
            c.error(f"input dimension {d} ({x[d]}) differs from the output's ({out[d]})")
    if any(_known(d) and d >= 16384 for d in (*x[1:3], *out[1:3])):
        c.error("image height and width must be below 16384")
    if scale is None or offset is None or border is None:
        return
    if (len(scale), len(offset), len(border)) != (4, 2, 2):
        c.error(f"scale/offset/border must have 4/2/2 values, got {scale}, {offset}, {border}")
        return
    if min(scale) <= 0:
        c.error(f"scale {scale} must be positive")
        return
    for i in range(2):
        n, d = scale[2 * i], scale[2 * i + 1]
        if n > 2048:
            c.error(f"scale numerator {n} must be <= 2048")
        if d >= 16 * n:
            c.error(f"scale {n}/{d} is below the 1/16 downscale limit")
        if not -n <= offset[i] < 16 * n:
            c.error(f"offset {offset[i]} must be in [-{n}, {16 * n})")
        if not -16 * n <= border[i] < n:
            c.error(f"border {border[i]} must be in [-{16 * n}, {n})")
        if _known(x[1 + i]):
            numerator = (x[1 + i] - 1) * n - offset[i] + border[i]
            _check_out_dim(c, f"output dimension {1 + i}", out[1 + i], numerator, d)


@rule("RESCALE")
def _rescale(c: _OpCheck) -> None:
    _same_shape(c)
    in_t, out_t = c.types.get("in_t", ""), c.types.get("out_t", "")
    scale32, rounding = c.attr("scale32"), c.attr("rounding_mode")
    per_channel = c.attr("per_channel")
    in_unsigned, out_unsigned = c.attr("input_unsigned"), c.attr("output_unsigned")
    if scale32 and in_t == "i48":
        c.error("scale32 must be false for a 48-bit input")
    if not scale32 and rounding == "DOUBLE_ROUND":
        c.error("DOUBLE_ROUND needs scale32")
    if in_unsigned and out_unsigned:
        c.error("input_unsigned and output_unsigned cannot both be true")
    # Unsigned is u8/u16 only, and never paired with 32/48-bit on the other side.
    if in_unsigned and (in_t not in ("i8", "i16") or out_t == "i32"):
        c.error(f"input_unsigned is not allowed for {in_t} -> {out_t}")
    if out_unsigned and (out_t not in ("i8", "i16") or in_t in ("i32", "i48")):
        c.error(f"output_unsigned is not allowed for {in_t} -> {out_t}")
    for i, name, element, unsigned in ((3, "input_zp", in_t, in_unsigned),
                                       (4, "output_zp", out_t, out_unsigned)):
        zp = c.const_scalar(i)
        if zp is None:
            continue
        if element == "i16" and unsigned:
            if zp & 0xFFFF not in (0, 32768):
                c.error(f"{name} of unsigned 16-bit must be 0 or 32768, got {zp & 0xFFFF}")
        elif element != "i8" and zp != 0:
            c.error(f"{name} must be 0 for {element}, got {zp}")
    x = c.in_shape(0)
    if x is not None and per_channel and not x:
        c.error("per_channel needs an input of rank >= 1")
        return
    channels = (x[-1] if x else DYNAMIC) if per_channel else 1
    for i, name in ((1, "multiplier"), (2, "shift")):
        s = c.in_shape(i)
        if s is not None and len(s) == 1 and _known(s[0], channels) and s[0] != channels:
            c.error(f"{name} has {s[0]} values; per_channel = {per_channel} needs {channels}")
    shifts = c.const(2)
    if shifts is not None and shifts.size and (shifts.min() < 2 or shifts.max() > 62):
        c.error(f"shift values must be in 2..62, got {shifts.min()}..{shifts.max()} (REQUIRE)")
    multipliers = c.const(1)
    if scale32 and multipliers is not None and multipliers.size and multipliers.min() < 0:
        c.error("multiplier values must be >= 0 (REQUIRE)")


@rule("CONST")
def _const(c: _OpCheck) -> None:
    values = c.op.attrs.get("values")
    out = c.out_shape()
    if isinstance(values, np.ndarray) and out is not None:
        c.expect_shape("values", tuple(values.shape), out)


@rule("CONST_SHAPE")
def _const_shape(c: _OpCheck) -> None:
    values = _int_list(c.op.attrs.get("values"))
    out = c.op.results[0].type
    if values is not None and isinstance(out, ShapeType) and out.rank != len(values):
        c.error(f"!tosa.shape<{out.rank}> cannot hold {len(values)} values")


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
                    or any(p != q and _known(p, q) for p, q in zip(x.shape, y.shape))):
                return False
        elif x != y:
            return False
    return True


def _text(types: list[Any]) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


@rule("COND_IF")
def _cond_if(c: _OpCheck) -> None:
    condition = c.in_shape(0)
    if condition is not None and _known(*condition) and int(np.prod(condition)) != 1:
        c.error(f"condition must have one element, got shape {list(condition)}")
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


@rule("WHILE_LOOP")
def _while_loop(c: _OpCheck) -> None:
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


@rule("VARIABLE_READ", "VARIABLE_WRITE")
def _variable_access(c: _OpCheck) -> None:
    name = c.op.attrs["name"]
    declaration = c.checker.variables.get(name)
    if declaration is None:
        c.error(f"variable {name!r} is not declared by a tosa.variable")
        return
    value = c.op.results[0] if c.opdef.name == "VARIABLE_READ" else c.op.operands[0]
    element, shape = _element(value), _shape(value)
    declared_type = declaration.attrs.get("type")
    if declared_type is not None and element != declared_type:
        c.error(f"variable {name!r} holds {declared_type}, accessed as {element}")
    c.expect_shape(f"variable {name!r}", shape, _int_list(declaration.attrs.get("var_shape")))


@rule("VARIABLE")
def _variable(c: _OpCheck) -> None:
    initial = c.op.attrs.get("initial_value")
    var_shape = _int_list(c.op.attrs.get("var_shape"))
    if isinstance(initial, np.ndarray) and var_shape is not None:
        c.expect_shape("initial_value", tuple(initial.shape), var_shape)
    duplicates = [op for _, op in c.checker.module.ops()
                  if op.name == "tosa.variable" and op.attrs.get("name") == c.op.attrs["name"]]
    if len(duplicates) > 1 and duplicates[0] is not c.op:
        c.error(f"variable {c.op.attrs['name']!r} is declared more than once")
