"""Execution plans: a graph compiled once into a list of steps over numbered slots.

Compiling does, once per graph, everything that does not depend on the data:
the op's specification name and kernel, the type-mode ERROR_IF check (the
rules of `tfl2tosa.tosa.rules`, which the verifier applies too), each
operand's and result's slot (a list index instead of a dict lookup), the dtype
and shape every result must have, and the values of CONST and CONST_SHAPE ops,
which are computed at compile time and sit in their slots before a run starts.
A kernel with a `prepared` form (see `reference_model.kernels.PREPARERS`) also
decodes its attributes and constant operands here and checks what is static.

A plan holds no run state: variables, intermediates and REQUIRE bookkeeping
belong to the evaluator that runs it. Errors found while compiling are kept on
the step and raised when the step runs, so a run reports them exactly where
and when an op-by-op run would (an op in a branch never taken never fails).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from reference_model.kernels import KERNELS, PREPARERS, KernelContext, Prepared, StaticOp
from tfl2tosa.errors import (ReferenceModelError, ResourceLimitError, SpecErrorIf, SpecRequire,
                             Tfl2TosaError)
from tfl2tosa.ir.core import Graph, Op, Value
from tfl2tosa.limits import check_tensor, element_count, max_tensor_bytes
from tfl2tosa.memo import BoundedMemo
from tfl2tosa.ir.types import DYNAMIC, ShapeType, TensorType, Type, numpy_dtype, storage_type
from tfl2tosa.tosa import rules
from tfl2tosa.tosa.ops import BY_MLIR, OPS, OpDef
from tfl2tosa.tosa.rules import BINDING_ATTRIBUTES

# Runs another graph of the module by name (control flow): inputs -> outputs.
GraphRunner = Callable[[str, list[np.ndarray]], list[np.ndarray]]
# One step's work: operand arrays, the run's variables and graph runner -> result arrays.
StepCall = Callable[[list[np.ndarray], dict[str, np.ndarray], GraphRunner], list[np.ndarray]]

# The ops computed at compile time, by IR name: their results depend on attributes only.
_CONSTANT_OPS = {"tosa.const": "CONST", "tosa.const_shape": "CONST_SHAPE"}


# The plan's records are plain classes with __slots__, as the kernels' are: making a
# NamedTuple class generates and compiles code, which every `tfl2tosa run` would pay
# when it imports this module.


class ResultCheck:
    """What one result must be: its slot, numpy dtype, and declared shape."""

    __slots__ = ("slot", "value", "dtype", "static_shape", "declared")

    def __init__(self, slot: int, value: Value, dtype: np.dtype | None,
                 static_shape: tuple[int, ...] | None,
                 declared: tuple[int, ...] | None) -> None:
        self.slot = slot
        self.value = value
        self.dtype = dtype
        self.static_shape = static_shape    # the declared shape when fully static
        self.declared = declared            # the declared shape (may hold DYNAMIC)


# Per result: (numpy dtype, static shape, declared shape), as _type_facts gives.
TypeFacts = tuple[np.dtype | None, tuple[int, ...] | None, tuple[int, ...] | None]


class _Template:
    """What a step takes from its op's name and operand / result types alone, shared by
    every op with the same name and types (they passed the type-mode check)."""

    __slots__ = ("spec_name", "input_types", "output_types", "facts", "single",
                 "largest_result")

    def __init__(self, spec_name: str, input_types: list[Type], output_types: list[Type],
                 facts: tuple[TypeFacts, ...],
                 single: tuple[np.dtype, tuple[int, ...]] | None, largest_result: int) -> None:
        self.spec_name = spec_name
        self.input_types = input_types      # shared: kernels and preparers only read them
        self.output_types = output_types
        self.facts = facts                  # per result
        self.single = single                # one result, static shape: (dtype, shape)
        self.largest_result = largest_result  # bytes of the largest static result (0: none)


class Step:
    """One op of the plan: its operand and result slots and how to run it."""

    __slots__ = ("op", "operands", "result_slots", "call", "error", "prepared", "single",
                 "spec_name", "facts", "checks")

    def __init__(self, op: Op, operands: tuple[int, ...], result_slots: tuple[int, ...],
                 call: StepCall) -> None:
        self.op = op
        self.operands = operands
        self.result_slots = result_slots
        self.call = call                        # the registered kernel, unless prepared
        self.error: Exception | None = None     # found at compile time, raised when run
        # The prepared kernel, called on the operands alone (no variables, no graphs);
        # runs instead of `call` when there is one.
        self.prepared: Prepared | None = None
        # (slot, dtype, shape) of a single result with a static shape: what a run
        # checks inline before the general check_results.
        self.single: tuple[int, np.dtype, tuple[int, ...]] | None = None
        self.spec_name: str | None = None       # None until the op is known as a TOSA op
        self.facts: tuple[TypeFacts, ...] | None = None  # per result, once types are known
        self.checks: tuple[ResultCheck, ...] | None = None   # made on first use

    @property
    def where(self) -> str:
        """The op in messages (made only when one is needed)."""
        op, name = self.op, self.spec_name
        if name is None:
            return f"{op.name} at {op.loc}" if op.loc else op.name
        return f"{name} ({op.loc})" if op.loc else name

    def kernel_call(self) -> StepCall:
        """The registered kernel's call, which a prepared step hands operands to
        (KernelNeeded)."""
        if self.call is _never:
            op = self.op
            self.call = _generic_call(op, self.spec_name, [v.type for v in op.operands],
                                      [v.type for v in op.results])
        return self.call

    @property
    def results(self) -> tuple[ResultCheck, ...]:
        """What each result must be: the general check of the kernel's results."""
        checks = self.checks
        if checks is None:
            facts = self.facts or tuple(_type_facts(v.type) for v in self.op.results)
            checks = self.checks = tuple(
                ResultCheck(slot, value, *value_facts) for slot, value, value_facts
                in zip(self.result_slots, self.op.results, facts))
        return checks


class GraphPlan:
    """A compiled graph: its steps over numbered slots."""

    __slots__ = ("graph", "slot_count", "input_slots", "output_slots", "steps", "initial",
                 "slot_of", "output_error")

    def __init__(self, graph: Graph, slot_count: int, input_slots: tuple[int, ...],
                 output_slots: tuple[int, ...], steps: list[Step], initial: list[Any],
                 slot_of: dict[int, int], output_error: ReferenceModelError | None) -> None:
        self.graph = graph
        self.slot_count = slot_count
        self.input_slots = input_slots
        self.output_slots = output_slots
        self.steps = steps
        self.initial = initial                  # constants folded in, None elsewhere
        self.slot_of = slot_of                  # id(value) -> slot
        self.output_error = output_error


def compile_graph(graph: Graph) -> GraphPlan:
    """Compile one graph; never raises for a bad op (its step raises when run)."""
    slot_of: dict[int, int] = {}
    for value in graph.inputs:
        slot_of.setdefault(id(value), len(slot_of))
    steps: list[Step] = []
    initial_values: dict[int, np.ndarray] = {}
    # The tensor budget, read once: a step whose results all fit it needs no check.
    # An unreadable budget (a bad environment variable) is left for each step's
    # check_tensor to report.
    try:
        budget = max_tensor_bytes()
    except Tfl2TosaError:
        budget = -1
    prepared_forms: dict[tuple, Prepared | None] = {}
    for op in graph.ops:
        name = op.name
        if name == "tosa.const" and _bind_constant(op, slot_of, initial_values):
            continue
        operands = tuple([slot_of.get(id(v), -1) for v in op.operands])
        results = op.results
        for value in results:
            slot_of[id(value)] = len(slot_of)
        folded = _fold_constant(op) if name in _CONSTANT_OPS else None
        if folded is not None:
            initial_values.update((slot_of[id(v)], array) for v, array in zip(results, folded))
        else:
            steps.append(_step(op, operands, tuple([slot_of[id(v)] for v in results]),
                               initial_values, budget, prepared_forms))
    initial: list[Any] = [None] * len(slot_of)
    for slot, array in initial_values.items():
        initial[slot] = array
    output_error = None
    undefined = [v.name for v in graph.outputs if id(v) not in slot_of]
    if undefined:
        output_error = ReferenceModelError(f"graph {graph.name!r} returns {undefined}, which "
                                           "it does not define")
    return GraphPlan(graph, len(slot_of), tuple(slot_of[id(v)] for v in graph.inputs),
                     tuple(slot_of.get(id(v), -1) for v in graph.outputs), steps, initial,
                     slot_of, output_error)


def _step(op: Op, operands: tuple[int, ...], result_slots: tuple[int, ...],
          constants: dict[int, np.ndarray], budget: int,
          prepared_forms: dict[tuple, Prepared | None]) -> Step:
    step = Step(op, operands, result_slots, _never)
    if -1 in operands:
        missing = next(v for v, slot in zip(op.operands, operands) if slot == -1)
        step.error = ReferenceModelError(f"{step.where} uses {missing.name!r}, which is not "
                                         "defined earlier in its graph")
        return step
    key = (op.name, *[id(v.type) for v in op.operands], None,
           *[id(v.type) for v in op.results], *_binding_values(op))
    known = _TEMPLATES.get(key)
    if known is not None:
        template = known[1]
    else:
        try:
            template = _template(op, key)
        except (ReferenceModelError, SpecErrorIf) as exc:
            step.spec_name = _known_name(op)
            step.error = exc
            return step
    spec_name = step.spec_name = template.spec_name
    step.facts = template.facts
    if template.largest_result > budget:
        for dtype, static_shape, _ in template.facts:
            if dtype is not None and static_shape is not None:
                try:
                    check_tensor(static_shape, dtype.itemsize, f"{step.where} result")
                except ResourceLimitError as exc:
                    step.error = exc
                    return step
    if template.single is not None:
        step.single = (result_slots[0], *template.single)
    preparer = PREPARERS.get(spec_name)
    if preparer is not None:
        operand_constants = [constants.get(slot) for slot in operands]
        facts = _static_facts(key, op.attrs, operand_constants)
        if facts is None:
            step.prepared = _prepare(preparer, op, template, operand_constants)
        else:
            form = prepared_forms.get(facts, _UNPREPARED)
            if form is _UNPREPARED:
                form = prepared_forms[facts] = _prepare(preparer, op, template,
                                                        operand_constants)
            step.prepared = form
    if step.prepared is None:
        step.call = _generic_call(op, spec_name, template.input_types, template.output_types)
    return step


# Step templates by op name and the ids of its operand and result types (the reader
# shares one type object per distinct type; a tuple of ints hashes in C). Each entry
# holds its types, so their ids stay theirs while the entry exists.
_SIGNATURE_LIMIT = 1 << 14
_TEMPLATES: BoundedMemo = BoundedMemo(_SIGNATURE_LIMIT)


def _template(op: Op, key: tuple) -> _Template:
    """Check the op's name and type mode (raising their errors) and describe it."""
    spec_name = specification_name(op)
    input_types = [v.type for v in op.operands]
    output_types = [v.type for v in op.results]
    _check_type_mode_once(op, OPS[spec_name], input_types, output_types)
    facts = tuple(_type_facts(t) for t in output_types)
    single = None
    if len(facts) == 1 and facts[0][0] is not None and facts[0][1] is not None:
        single = (facts[0][0], facts[0][1])
    largest = max((math.ceil(element_count(shape) * dtype.itemsize)
                   for dtype, shape, _ in facts if dtype is not None and shape is not None),
                  default=0)
    template = _Template(spec_name, input_types, output_types, facts, single, largest)
    _TEMPLATES.keep(key, ((*input_types, *output_types), template))
    return template


def _known_name(op: Op) -> str | None:
    """The op's specification name when it has a kernel (what its messages name)."""
    name = specification_name_or_none(op)
    return name if name in KERNELS else None


def _never(operands: list[np.ndarray], variables: dict[str, np.ndarray],
           run_graph: GraphRunner) -> list[np.ndarray]:
    raise AssertionError("the step has no kernel call (a compile-time error, or a "
                         "prepared kernel that runs instead)")


def _generic_call(op: Op, spec_name: str, input_types: list[Type],
                  output_types: list[Type]) -> StepCall:
    kernel = KERNELS[spec_name]
    attrs, loc = op.attrs, op.loc

    def call(operands: list[np.ndarray], variables: dict[str, np.ndarray],
             run_graph: GraphRunner) -> list[np.ndarray]:
        return kernel(KernelContext(
            op_name=spec_name, inputs=operands, attrs=attrs, input_types=input_types,
            output_types=output_types, loc=loc, run_graph=run_graph, variables=variables))

    return call


# Stands for "no prepared kernel made yet" among the forms made, where None means the
# preparer declined.
_UNPREPARED: Any = object()

# Constant operands up to this many elements are part of the key that lets ops share
# one prepared kernel; an op with a larger one (weights, tables) is prepared alone.
_KEYED_CONSTANT_SIZE = 64


def _static_facts(signature: tuple, attrs: dict[str, Any],
                  constants: list[np.ndarray | None]) -> tuple | None:
    """Everything a preparer reads of an op, exactly, as a key: the op's name and
    types (`signature`), its attributes and its constant operands' values. Ops with
    equal keys get one prepared kernel (it keeps nothing of the op it was made
    for). None when an attribute or constant is not cheap to key exactly."""
    parts: list[Any] = [signature]
    # Constants first: an op with a large one (a convolution's weights) is known to
    # be unshareable before its attributes are keyed.
    for array in constants:
        if array is None:
            parts.append(None)
        elif array.size <= _KEYED_CONSTANT_SIZE:
            parts.append((array.dtype, array.shape, array.tobytes()))
        else:
            return None
    for name, value in attrs.items():
        kind = value.__class__
        if kind is str or kind is bool or kind is int:
            parts.append((name, kind, value))
        elif kind is float and value == value:
            parts.append((name, kind, repr(value)))   # repr tells -0.0 from 0.0
        elif kind is list and all(v.__class__ is int for v in value):
            parts.append((name, kind, tuple(value)))
        else:
            return None  # a NaN (its payload), an array, a numpy scalar, ...
    return tuple(parts)


def _prepare(preparer: Callable[[StaticOp], Prepared | None], op: Op, template: _Template,
             constants: list[np.ndarray | None]) -> Prepared | None:
    static = StaticOp(template.spec_name, op.attrs, template.input_types,
                      template.output_types, op.loc, constants)
    try:
        return preparer(static)
    except Tfl2TosaError:
        # Something wrong with the op (an ERROR_IF, a bad attribute): the registered
        # kernel reports it when a run reaches the op. Any other exception is a bug
        # in the preparer and propagates.
        return None


def _bind_constant(op: Op, slot_of: dict[int, int],
                   initial_values: dict[int, np.ndarray]) -> bool:
    """The common CONST, bound straight into its slot: no operands, one result whose
    type already passed the type-mode check, and `values` an array of exactly the
    declared dtype and shape (what the reader and the converter make). False for any
    other CONST, which _fold_constant handles."""
    results = op.results
    if op.operands or len(results) != 1:
        return False
    value = results[0]
    values = op.attrs.get("values")
    if values.__class__ is not np.ndarray:
        return False
    value_type = value.type
    if (op.name, None, id(value_type)) not in _VALID_BY_ID:
        return False
    dtype, static_shape, _ = _type_facts(value_type)
    if values.dtype != dtype or values.shape != static_shape:
        return False
    slot = slot_of[id(value)] = len(slot_of)
    initial_values[slot] = values
    return True


def _fold_constant(op: Op) -> list[np.ndarray] | None:
    """Run a CONST / CONST_SHAPE op now; None if that fails (the op then becomes a step
    and reports the failure when the run reaches it)."""
    spec_name = _CONSTANT_OPS[op.name]
    try:
        _check_type_mode_once(op, OPS[spec_name])
    except SpecErrorIf:
        return None
    values = op.attrs.get("values")
    if spec_name == "CONST" and len(op.results) == 1 and isinstance(values, np.ndarray):
        # What the CONST kernel returns for an array already of the declared dtype
        # (the reader's and the converter's constants): the array itself.
        value_type = op.results[0].type
        if isinstance(value_type, TensorType):
            dtype, static_shape, _ = _type_facts(value_type)
            if values.shape == static_shape and values.dtype == dtype:
                return [values]
    if spec_name == "CONST_SHAPE" and len(op.results) == 1 and isinstance(values, list) \
            and isinstance(op.results[0].type, ShapeType):
        # What the CONST_SHAPE kernel returns, when it fits the declared rank.
        try:
            array = np.asarray(values, dtype=np.int64).reshape(-1)
        except (TypeError, ValueError, OverflowError):
            array = None  # the kernel below reports it
        if array is not None and array.shape == (op.results[0].type.rank,):
            return [array]
    try:
        results = KERNELS[spec_name](KernelContext(
            op_name=spec_name, inputs=[], attrs=op.attrs, input_types=[],
            output_types=[v.type for v in op.results], loc=op.loc))
    except (SpecErrorIf, SpecRequire, ReferenceModelError, KeyError):
        return None
    if len(results) != len(op.results):
        return None
    for array, value in zip(results, op.results):
        dtype = expected_dtype(value.type)
        if not isinstance(array, np.ndarray) or (dtype is not None and array.dtype != dtype) \
                or not shape_matches(array.shape, declared_shape(value.type)):
            return None
    return results


def check_results(step: Step, results: list[np.ndarray]) -> list[np.ndarray]:
    """The kernel's results, checked against the op's declared types."""
    if len(results) != len(step.results):
        raise ReferenceModelError(f"{step.where}: the kernel made {len(results)} results, "
                                  f"the op declares {len(step.results)}")
    checked = []
    for array, check in zip(results, step.results):
        array = np.asarray(array)
        if check.dtype is not None and array.dtype != check.dtype:
            raise ReferenceModelError(
                f"{step.where}: result {check.value.name!r} is {array.dtype}, the graph "
                f"declares {check.value.type} (reference model kernel bug)")
        if array.shape != check.static_shape and not shape_matches(array.shape,
                                                                    check.declared):
            raise SpecErrorIf(f"{step.where}: result {check.value.name!r} has shape "
                              f"{list(array.shape)} but the graph declares {check.value.type}")
        checked.append(array)
    return checked


# Per declared type: its numpy dtype, static shape and declared shape. Types are
# immutable, and a model's values share a few dozen of them.
_TYPE_FACTS: BoundedMemo = BoundedMemo(_SIGNATURE_LIMIT)


# The same, by the type object's identity: the reader shares one object per
# distinct type, and an id look-up skips the Python-level __hash__ of the types
# that have one (shape types; tensor and scalar types are interned and hash by
# identity already). Each entry keeps its type alive, so the id cannot be
# reused while the entry exists.
_TYPE_FACTS_BY_ID: BoundedMemo = BoundedMemo(_SIGNATURE_LIMIT)


def _type_facts(value_type: Type) -> tuple[np.dtype | None, tuple[int, ...] | None,
                                           tuple[int, ...] | None]:
    known = _TYPE_FACTS_BY_ID.get(id(value_type))
    if known is not None:
        return known[1]
    try:
        facts = _TYPE_FACTS[value_type]
        _TYPE_FACTS_BY_ID.keep(id(value_type), (value_type, facts))
        return facts
    except KeyError:
        pass
    except TypeError:  # a type that cannot be hashed
        return _work_out_type_facts(value_type)
    facts = _TYPE_FACTS.keep(value_type, _work_out_type_facts(value_type))
    _TYPE_FACTS_BY_ID.keep(id(value_type), (value_type, facts))
    return facts


def _work_out_type_facts(value_type: Type) -> tuple[np.dtype | None, tuple[int, ...] | None,
                                                    tuple[int, ...] | None]:
    declared = declared_shape(value_type)
    static = declared if declared is not None and DYNAMIC not in declared else None
    return expected_dtype(value_type), static, declared


# ---------------------------------------------------------------------------
# Op names and type modes


def specification_name(op: Op) -> str:
    """The TOSA specification name of `op`, or ReferenceModelError if it is no TOSA op."""
    name = specification_name_or_none(op)
    if name is None or name not in KERNELS:
        where = f" at {op.loc}" if op.loc else ""
        raise ReferenceModelError(f"{op.name}{where} is not a TOSA operator the reference "
                                  "model can run")
    return name


def specification_name_or_none(op: Op) -> str | None:
    opdef = BY_MLIR.get(op.name)
    if opdef is not None:
        return opdef.name
    # `tosa.<name in lower case>` names every TOSA 1.0 op; used when the op
    # table does not list the op (e.g. while it is being filled in).
    return op.opname.upper() if op.dialect == "tosa" else None


# Op name and what check_type_mode reads of the operand / result types (_mode_facts)
# and binding attributes, for ops that passed it: the check depends on nothing else,
# and models repeat the same few of these many times, over tensors of many shapes.
_VALID_SIGNATURES: BoundedMemo = BoundedMemo(_SIGNATURE_LIMIT)
# The same signatures by the types' identities (op name, then the ids): a tuple of
# ints hashes in C, where a shape type's __hash__ is Python (tensor and scalar
# types are interned and hash by identity). Each entry's value holds its types,
# so their ids stay theirs while the entry exists.
_VALID_BY_ID: BoundedMemo = BoundedMemo(_SIGNATURE_LIMIT)


def _check_type_mode_once(op: Op, opdef: OpDef, input_types: list[Type] | None = None,
                          output_types: list[Type] | None = None) -> None:
    if input_types is None or output_types is None:
        input_types = [v.type for v in op.operands]
        output_types = [v.type for v in op.results]
    binding = _binding_values(op)
    by_id = (op.name, *map(id, input_types), None, *map(id, output_types), *binding)
    if by_id in _VALID_BY_ID:
        return
    signature = (op.name, *map(_mode_facts, input_types), None,
                 *map(_mode_facts, output_types), *binding)
    try:
        if signature not in _VALID_SIGNATURES:
            check_type_mode(op, opdef)
            _VALID_SIGNATURES.keep(signature, True)
    except TypeError:  # a type that cannot be hashed: check it every time
        check_type_mode(op, opdef)
        return
    _VALID_BY_ID.keep(by_id, (*input_types, *output_types))


def _mode_facts(value_type: Type) -> Any:
    """What rules.type_mode_problem reads of an operand or result type: its element
    type's name (quantized: its storage) and whether it can hold one value (a [1]
    argument must); a shape type or any other kind of type by its kind. Shapes of
    tensors play no other part, so tensors of many shapes share one check."""
    if isinstance(value_type, TensorType):
        dims = value_type.shape
        many = value_type.is_static and any(d != 1 for d in dims)  # type: ignore[union-attr]
        return (storage_type(value_type.element).name, many)
    return value_type.__class__


def _binding_values(op: Op) -> tuple:
    """The op's attributes that take part in binding its type mode (rules.BINDING_ATTRIBUTES),
    as parts of a cache key."""
    names = BINDING_ATTRIBUTES.get(op.name)
    if names is None:
        return ()
    attrs = op.attrs
    return tuple(v if v.__class__ in (str, bool) else repr(v)
                 for v in [attrs.get(name) for name in names])


def check_type_mode(op: Op, opdef: OpDef) -> None:
    """ERROR_IF the op's operand or result count is not the operator's, or its element
    types are no type mode of the operator (in any profile): tfl2tosa.tosa.rules."""
    problem = rules.type_mode_problem(opdef, [v.type for v in op.operands],
                                      [v.type for v in op.results], op.attrs)
    if problem is not None:
        where = f"{opdef.name} ({op.loc})" if op.loc else opdef.name
        raise SpecErrorIf(f"{where}: ERROR_IF {problem}")


# ---------------------------------------------------------------------------
# Declared types


def expected_dtype(value_type: Type) -> np.dtype | None:
    if isinstance(value_type, TensorType):
        try:
            return _numpy_dtype(value_type.element)
        except TypeError:  # an element type that cannot be hashed
            return numpy_dtype(value_type.element)
    if isinstance(value_type, ShapeType):
        return np.dtype(np.int64)
    return None


@functools.lru_cache(maxsize=256)
def _numpy_dtype(element: Any) -> np.dtype:
    return numpy_dtype(element)


def declared_shape(value_type: Type) -> tuple[int, ...] | None:
    if isinstance(value_type, ShapeType):
        return (value_type.rank,)
    return value_type.shape if isinstance(value_type, TensorType) else None


def shape_matches(shape: tuple[int, ...], declared: tuple[int, ...] | None) -> bool:
    if declared is None:
        return True
    return len(shape) == len(declared) and all(d == DYNAMIC or d == s
                                               for s, d in zip(shape, declared))
