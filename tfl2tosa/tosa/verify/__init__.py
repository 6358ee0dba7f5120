"""Check a TOSA module against the TOSA 1.0 specification.

`verify` walks every graph and op and reports each problem as a Violation
naming the op, its graph and its location (which names the TFLite op it was
lowered from). The checks read the op table (`tfl2tosa.tosa.ops`) for operand
counts, attributes and element-type modes, and `tfl2tosa.tosa.rules` for the
type-mode binding and the specification's ERROR_IF conditions on shapes and
attributes, which the reference model applies too; where an operand is a
constant, the REQUIRE conditions a converter must never break are checked as
well. One small function per operator, found by its specification name.

The package: `op_check` checks one op against the op table (operands,
attributes, element types), `shapes` applies the shape and attribute rules of
the tensor, elementwise and data-layout operators, `control` the rules of the
operators that name graphs or variables; this module walks the graphs.

Dimensions that are dynamic (-1) or tensors that are unranked are skipped by
the shape rules; everything else is checked exactly.

Many ops of a graph look alike, so each op signature (name, operand and result
types, attributes: `signature`) is judged once: the problems found from it are
reported again at every op that has it, and the checks that read a constant
operand's values, or which op makes it, run on each op (`OpCheck.defer`).
Signatures that differ only in shapes share the checks of the op's counts and
attributes, found once per walk (`Form`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from typing import Any

import numpy as np

from tfl2tosa.errors import VerificationError
from tfl2tosa.ir.core import Graph, Module, Op
from tfl2tosa.ir.types import Frozen
from tfl2tosa.tosa.ops import BY_MLIR, EXTENSION_PROFILES, EXTENSIONS, OpDef

# Registers the rules of the operators that name graphs or variables.
from tfl2tosa.tosa.verify import control  # noqa: F401
from tfl2tosa.tosa.verify.op_check import OpCheck
from tfl2tosa.tosa.verify.shapes import SHAPE_RULES

# Every extension except EXT-DYNAMIC: a converter's output should keep shapes,
# zero points and tables compile-time constant, so that is checked unless asked.
DEFAULT_EXTENSIONS = tuple(e for e in EXTENSIONS if e != "EXT-DYNAMIC")

# How many violations the VerificationError message lists.
MESSAGE_VIOLATIONS = 5


class Violation(Frozen):
    """One way a graph breaks the specification (immutable, compared by its fields)."""

    op: Op | None       # None for graph-level problems (an undefined output)
    graph: str
    loc: str
    message: str

    _fields = ("op", "graph", "loc", "message")

    def __init__(self, op: Op | None, graph: str, loc: str, message: str) -> None:
        self._set(op, graph, loc, message)

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
           raise_on_error: bool = True, needed: set[str] | None = None) -> list[Violation]:
    """Report every TOSA 1.0 violation in `module`; raise VerificationError if any.

    `profile` and `extensions` select which type modes are allowed (an
    extension counts only together with a profile it is defined for). By
    default every extension but EXT-DYNAMIC is enabled. `needed`, if given,
    receives the extensions the graph cannot do without: those of type modes no
    profile provides (EXT-INT4's "signed 8x4" convolutions) and of enum values
    (RESCALE's DOUBLE_ROUND needs EXT-DOUBLEROUND).
    """
    if isinstance(module, Graph):
        graph, module = module, Module()
        module.add_graph(graph)
    checker = _Checker(module, enabled_features(profile, extensions))
    for graph in module.graphs.values():
        checker.check_graph(graph)
    if needed is not None:
        needed.update(_features_used(checker)[1])
    violations = checker.violations
    if violations and raise_on_error:
        lines = [str(v) for v in violations[:MESSAGE_VIOLATIONS]]
        more = len(violations) - len(lines)
        # The first line (all the CLI prints) names the first violation.
        text = (f"{len(violations)} TOSA violation(s): " + "\n  ".join(lines)
                + (f"\n  ... and {more} more" if more else ""))
        raise VerificationError(text, violations)
    return violations


def required_features(module: Module, profile: str | Sequence[str] = ("PRO-INT", "PRO-FP"),
                      extensions: Iterable[str] = DEFAULT_EXTENSIONS,
                      ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(profiles, extensions) a valid `module` uses, chosen among those enabled:
    what a target must support to run it (MLIR's tosa.target_env). Every op's
    type mode and attribute values need one of a few feature sets; the first
    enabled set of each counts, and an extension brings a profile it pairs with."""
    checker = _Checker(module, enabled_features(profile, extensions))
    for graph in module.graphs.values():
        checker.check_graph(graph)
    return _features_used(checker)


def _features_used(checker: _Checker) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(profiles, extensions) chosen for the needs `checker` recorded."""
    used: set[str] = set()
    # Needs with one choice first; a need with several is met by what is used
    # already when it can be (a bool op runs under PRO-INT or PRO-FP: a float
    # model should not need PRO-INT for it).
    for alternatives in sorted(set(checker.needs), key=lambda a: (len(a), a)):
        choices = [set(a.split("+")) for a in alternatives]
        if choices and not any(c <= used for c in choices):
            used.update(min(choices, key=len))
    for name in sorted(used):
        pairs = EXTENSION_PROFILES.get(name, ())
        if pairs and not used & set(pairs):
            used.add(next((p for p in pairs if p in checker.enabled), pairs[0]))
    order = ("PRO-INT", "PRO-FP", *EXTENSIONS)
    chosen = sorted(used, key=order.index)
    return (tuple(p for p in chosen if p.startswith("PRO-")),
            tuple(e for e in chosen if e.startswith("EXT-")))


# ---------------------------------------------------------------------------
# Module and graph walk


class _Checker:
    def __init__(self, module: Module, enabled: frozenset[str]) -> None:
        self.module = module
        self.enabled = enabled
        self.dynamic = "EXT-DYNAMIC" in enabled
        self.violations: list[Violation] = []
        # The feature sets, one of which a checked op (or attribute value)
        # needs ("PRO-INT", "PRO-FP+EXT-VARIABLE", "EXT-DOUBLEROUND"): those of
        # a signature's verdict once, those a deferred check finds per op.
        self.needs: list[tuple[str, ...]] = []
        self.variables = {op.attrs.get("name"): op for graph in module.graphs.values()
                          if "tosa.variable" in map(_NAME, graph.ops)  # few graphs have one
                          for op in graph.ops if op.name == "tosa.variable"}
        # The verdict of each op signature met (see `signature`). It lives for
        # one walk of one module, so the module's graph names and the enabled
        # features, which some checks read, are fixed.
        self.verdicts: dict[tuple[Any, ...], Verdict] = {}
        # The type-mode verdict of each element-type signature (OpCheck.check_types).
        self.type_verdicts: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        # The Form of each op name, operand and result count and attributes.
        self.forms: dict[tuple[Any, ...], Form] = {}
        # The problems a rule of shape operands' values found (shapes.shapes_rule).
        self.shape_value_problems: dict[tuple[Any, ...], list[str]] = {}

    def report(self, graph: Graph, op: Op | None, message: str) -> None:
        loc = op.loc if op is not None and op.loc else graph.name
        self.violations.append(Violation(op, graph.name, loc, message))

    def check_graph(self, graph: Graph) -> None:
        defined = set(graph.inputs)  # values compare by identity
        verdicts, needs = self.verdicts, self.needs
        for op in graph.ops:
            if not defined.issuperset(op.operands):
                for i, value in enumerate(op.operands):
                    if value not in defined:
                        self.report(graph, op, f"operand {i} ({value.name!r}) is used before "
                                               f"it is defined in graph {graph.name!r}")
            defined.update(op.results)
            # The op's checks: those of its signature's verdict, judged once.
            key = signature(op)
            verdict = verdicts.get(key) if key is not None else None
            if verdict is None:
                verdict = judge(self, op, key)
                if key is not None:
                    verdicts[key] = verdict
                needs.extend(verdict.needs)
            if verdict.steps:
                self._run_steps(graph, op, verdict)
        for value in graph.outputs:
            if value not in defined:
                self.report(graph, None, f"output {value.name!r} is not defined in the graph")

    def _run_steps(self, graph: Graph, op: Op, verdict: Verdict) -> None:
        c: OpCheck | None = None
        for step in verdict.steps:
            if isinstance(step, str):
                self.report(graph, op, step)
                continue
            if c is None:
                assert verdict.opdef is not None  # an op without one has no checks to run
                c = OpCheck(self, graph, op, verdict.opdef, verdict.types)
            step(c)


class Verdict:
    """The checks of one op signature: `steps`, in the order the checks run,
    are the problems found from the signature alone (messages) and the checks
    left to run on each op, which read constant operands' values or their
    producers (functions of an OpCheck); `needs` are the feature sets its type
    mode and attribute values need; `types` its bound type variables."""

    __slots__ = ("opdef", "steps", "needs", "types")

    def __init__(self, opdef: OpDef | None, steps: tuple[str | Callable[[OpCheck], None], ...],
                 needs: tuple[tuple[str, ...], ...], types: dict[str, str]) -> None:
        self.opdef = opdef
        self.steps = steps
        self.needs = needs
        self.types = types


def judge(checker: _Checker, op: Op, key: tuple[Any, ...] | None = None) -> Verdict:
    """Run the checks of `op`: those that read only its signature once, for
    every op that shares it; the others are left in the verdict's steps.
    `key` is its `signature`, if it has one."""
    opdef = BY_MLIR.get(op.name)
    if opdef is None:
        return Verdict(None, (f"{op.name} is not a TOSA 1.0 operator "
                              f"(dialect {op.dialect!r})",), (), {})
    c = OpCheck(checker, None, op, opdef, judging=True)
    form = _form(checker, c, key)
    if form.arity_ok:
        c.steps += form.attr_steps
        c.needs += form.attr_needs
        c.failed_attrs = form.failed_attrs
        c.check_arg_kinds()
        c.steps += form.constant_steps
        c.check_types()
        rule = SHAPE_RULES.get(opdef.name)
        if rule is not None and not c.failed_attrs:
            rule(c)
    else:
        c.steps += form.attr_steps
    return Verdict(opdef, tuple(c.steps), tuple(c.needs), c.types)


class Form:
    """What the checks that read only an op's name, operand and result counts
    and attributes find (`OpCheck.check_arity`, `check_attrs`,
    `check_constants`): many signatures share it (ops of one kind that
    differ in shapes), so it is worked out once per walk for all of them.
    `attr_steps` holds the arity problems instead when `arity_ok` is false."""

    __slots__ = ("arity_ok", "attr_steps", "attr_needs", "failed_attrs", "constant_steps")

    def __init__(self, c: OpCheck) -> None:
        self.arity_ok = c.check_arity()
        if self.arity_ok:
            c.check_attrs()
        self.attr_steps = tuple(c.steps)
        self.attr_needs = tuple(c.needs)
        self.failed_attrs = c.failed_attrs
        if self.arity_ok:
            c.check_constants()
        self.constant_steps = tuple(c.steps[len(self.attr_steps):])
        c.steps.clear()
        c.needs.clear()
        c.failed_attrs = False


def _form(checker: _Checker, c: OpCheck, key: tuple[Any, ...] | None) -> Form:
    """The op's Form, looked up by its name, operand and result counts and the
    attribute part of its signature `key` (made afresh without one)."""
    if key is None:
        return Form(c)
    op = c.op
    operands, results = len(op.operands), len(op.results)
    form_key = (op.name, operands, results, key[2 + operands + results:])
    form = checker.forms.get(form_key)
    if form is None:
        form = checker.forms[form_key] = Form(c)
    return form


# What an op's verdict depends on besides its name and operand and result
# types: its attributes, each as its class and value. A float keeps its text
# (0.0 and -0.0 are equal but read differently in a message); an array, only
# allowed as a `tensor` attribute, is checked by its shape alone (its values
# are read by deferred checks). An attribute of any other kind leaves the op
# without a signature: it is judged on its own.
_TENSOR_ATTRIBUTES = {opdef.mlir: frozenset(a.name for a in opdef.attrs if a.type == "tensor")
                      for opdef in BY_MLIR.values()}
_PLAIN = frozenset((int, bool, str))
_TYPE = attrgetter("type")  # a value's
_NAME = attrgetter("name")  # an op's
_INT = frozenset((int,))


def signature(op: Op) -> tuple[Any, ...] | None:
    """The op's name, operand and result types and attributes; None if an
    attribute value cannot be part of it."""
    attrs = op.attrs
    if not attrs:  # most ops: the key as it is
        return (op.name, *map(_TYPE, op.operands), None, *map(_TYPE, op.results))
    key: list[Any] = [op.name, *map(_TYPE, op.operands), None, *map(_TYPE, op.results)]
    for name, value in attrs.items():
        cls = value.__class__
        if cls in _PLAIN:
            key += (name, cls, value)
        elif cls is list or cls is tuple:
            if not set(map(type, value)) <= _INT:
                return None
            key += (name, cls, tuple(value))
        elif cls is float:
            key += (name, cls, repr(value))
        elif cls is np.ndarray and name in _TENSOR_ATTRIBUTES.get(op.name, ()):
            key += (name, cls, value.shape)
        else:
            return None
    return tuple(key)
