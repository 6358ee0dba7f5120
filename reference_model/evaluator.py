"""The evaluator: runs a TOSA graph op by op over numpy arrays.

Each graph is first compiled into an execution plan (`reference_model.plan`):
kernels found by specification name (`tosa.reduce_max` -> REDUCE_MAX through
the op table), type modes checked, constants folded, every value given a slot.
A run then walks the plan's steps and checks each result against the type the
graph declares. Control flow runs other graphs of the module by name (each
compiled on first use); variables live for the whole run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from reference_model.kernels import KernelNeeded
from reference_model.plan import (
    GraphPlan,
    Step,
    check_results,
    compile_graph,
    declared_shape,
    expected_dtype,
    shape_matches,
)
from tfl2tosa.errors import IRError, ReferenceModelError, SpecErrorIf, SpecRequire
from tfl2tosa.ir.core import Graph, Module, Value
from tfl2tosa.ir.types import DYNAMIC, NoneType, TensorType, Type, storage_type

# A value as computed -> the value the rest of the run uses instead.
Substitution = Callable[[np.ndarray], np.ndarray]


class CompiledModel:
    """A module's graphs compiled once, to run many times.

        compiled = reference_model.compile(module)
        for x in feeds:
            outputs = compiled.run([x])

    The plans reflect the module when it was compiled: compile again after
    changing it (a VARIABLE's initial_value is read at run time, not compiled).
    """

    def __init__(self, module: Module) -> None:
        self.module = module
        self._plans: dict[str, GraphPlan] = {}
        try:
            self.plan(module.main.name)  # the entry graph now; the others on first use
        except IRError as exc:
            raise ReferenceModelError(str(exc)) from exc

    def plan(self, name: str) -> GraphPlan:
        plan = self._plans.get(name)
        if plan is None:
            plan = self._plans[name] = compile_graph(self.module.graphs[name])
        return plan

    def run(self, inputs: Sequence[Any] | Mapping[str, Any], *,
            keep_intermediates: bool = False,
            substitute: Mapping[str, Substitution] | None = None) -> dict[str, np.ndarray]:
        """Run the entry graph (see `reference_model.run`); variables start afresh.

        `substitute` maps names of entry-graph values to functions that see the
        value as computed and return what the rest of the run uses instead
        (validate anchors hybrid ops' inputs to TFLite's tensors with it).
        """
        try:
            return Evaluator(self.module, keep_intermediates=keep_intermediates,
                             compiled=self, substitute=substitute).run(inputs)
        except IRError as exc:
            raise ReferenceModelError(str(exc)) from exc


class Evaluator:
    """Runs the graphs of one module. One instance per run (variables are per run)."""

    def __init__(self, module: Module, *, keep_intermediates: bool = False,
                 compiled: CompiledModel | None = None,
                 substitute: Mapping[str, Substitution] | None = None) -> None:
        self.module = module
        self.keep_intermediates = keep_intermediates
        self.substitute = substitute or {}
        self.variables: dict[str, np.ndarray] = {}
        self.intermediates: dict[str, np.ndarray] = {}
        self.compiled = compiled if compiled is not None else CompiledModel(module)

    def run(self, inputs: Sequence[Any] | Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run the entry graph; return {output name: array}, in the graph's output order.

        With keep_intermediates, every other tensor of the entry graph follows,
        in execution order (inputs first).
        """
        graph = self.module.main
        arrays = _bind_inputs(graph, inputs)
        outputs = self.run_graph(graph, arrays, record=self.keep_intermediates,
                                 substitute=self.substitute)
        result = {value.name: array for value, array in zip(graph.outputs, outputs)}
        for name, array in self.intermediates.items():
            result.setdefault(name, array)
        return result

    def run_graph(self, graph: Graph, inputs: list[np.ndarray], *, record: bool = False,
                  substitute: Mapping[str, Substitution] | None = None) -> list[np.ndarray]:
        known = self.module.graphs.get(graph.name) is graph
        plan = self.compiled.plan(graph.name) if known else compile_graph(graph)
        slots = list(plan.initial)
        for slot, value, array in zip(plan.input_slots, graph.inputs, inputs):
            slots[slot] = _conform(array, value,
                                   f"input {value.name!r} of graph {graph.name!r}")
        if substitute:
            failed = self._run_substituted(plan, slots, substitute)
        else:
            failed = self._run_steps(plan.steps, slots)
        if failed is not None:
            raise failed
        if record:
            self.intermediates = {v.name: slots[plan.slot_of[id(v)]] for v in graph.values()
                                  if slots[plan.slot_of[id(v)]] is not None}
        if plan.output_error is not None:
            raise plan.output_error
        return [slots[slot] for slot in plan.output_slots]

    def _run_substituted(self, plan: GraphPlan, slots: list[Any],
                         substitute: Mapping[str, Substitution]) -> SpecRequire | None:
        """The plan's steps in stretches, each substituted value replaced right
        after the step that computes it (a graph input before the first step)."""
        wanted = {plan.slot_of[id(v)]: v for v in plan.graph.values()
                  if v.name in substitute and id(v) in plan.slot_of}
        after = {slot: -1 for slot in wanted if slot in plan.input_slots}
        for index, step in enumerate(plan.steps):
            after.update((slot, index) for slot in step.result_slots if slot in wanted)
        failed: SpecRequire | None = None
        start = 0
        for index in sorted(set(after.values())):
            stretch_failed = self._run_steps(plan.steps[start:index + 1], slots)
            failed = failed or stretch_failed
            start = index + 1
            for slot in [s for s, i in after.items() if i == index]:
                value = wanted[slot]
                if slots[slot] is not None:
                    slots[slot] = _conform(substitute[value.name](slots[slot]), value,
                                           f"the substitute for {value.name!r}")
        stretch_failed = self._run_steps(plan.steps[start:], slots)
        return failed or stretch_failed

    def _run_steps(self, steps: Sequence[Step], slots: list[Any]) -> SpecRequire | None:
        # Prepared kernels run with floating-point errors ignored (their overflows to
        # infinity and NaNs are meant), set once here rather than once per op; a step
        # without one runs its registered kernel under the caller's settings.
        callers = np.geterr()
        with np.errstate(all="ignore"):
            return self._run_steps_quietly(steps, slots, callers)

    def _run_steps_quietly(self, steps: Sequence[Step], slots: list[Any],
                           callers: dict[str, str]) -> SpecRequire | None:
        variables, run_graph = self.variables, self._run_named_graph
        failed: SpecRequire | None = None
        for step in steps:
            if step.error is not None:
                # A new exception each run: the plan's own must not collect tracebacks.
                raise type(step.error)(str(step.error))
            operands = [slots[i] for i in step.operands]
            try:
                try:
                    prepared = step.prepared
                    if prepared is not None:
                        try:
                            results = prepared(operands)
                        except KernelNeeded:
                            # The op's own kernel, quiet as the prepared one ran.
                            results = step.kernel_call()(operands, variables, run_graph)
                    else:
                        with np.errstate(**callers):
                            results = step.call(operands, variables, run_graph)
                except (SpecErrorIf, SpecRequire) as exc:
                    # Helpers shared by kernels (numerics) do not know the op: name it here.
                    if not str(exc).startswith(step.where):
                        raise type(exc)(f"{step.where}: {exc}") from exc
                    raise
                single = step.single
                if single is not None and len(results) == 1:
                    # The common case of check_results, inline: one array of the
                    # declared dtype and static shape.
                    array = results[0]
                    slot, dtype, shape = single
                    if array.__class__ is np.ndarray and array.dtype == dtype \
                            and array.shape == shape:
                        slots[slot] = array
                        continue
                results = check_results(step, results)
            except SpecRequire as exc:
                # The result is unpredictable from here on, but an ERROR_IF further on
                # still makes the graph invalid whatever its data: keep checking the
                # rest with placeholder values, and report the REQUIRE only if no
                # ERROR_IF shows up.
                failed = failed or exc
                results = [_placeholder(check.value, failed) for check in step.results]
            for slot, array in zip(step.result_slots, results):
                slots[slot] = array
        return failed

    def _run_named_graph(self, name: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
        graph = self.module.graphs.get(name)
        if graph is None:
            raise SpecErrorIf(f"control flow refers to graph {name!r}, which the module lacks")
        if len(inputs) != len(graph.inputs):
            raise SpecErrorIf(f"graph {name!r} takes {len(graph.inputs)} inputs, "
                              f"{len(inputs)} given")
        return self.run_graph(graph, inputs)


def _placeholder(value: Value, failed: SpecRequire) -> np.ndarray:
    """Zeros of the value's declared type, standing in for an unpredictable result."""
    dtype = expected_dtype(value.type)
    shape = declared_shape(value.type)
    if dtype is None or shape is None or DYNAMIC in shape:
        raise failed  # nothing to stand in with: report the REQUIRE now
    return np.zeros(shape, dtype=dtype)


def _bind_inputs(graph: Graph, inputs: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
    names = [v.name for v in graph.inputs]
    if isinstance(inputs, Mapping):
        unknown = [k for k in inputs if k not in names]
        if unknown:
            raise ReferenceModelError(f"unknown input name(s) {unknown}; graph inputs are {names}")
        missing = [n for n in names if n not in inputs]
        if missing:
            raise ReferenceModelError(f"missing input(s) {missing}; graph inputs are {names}")
        return [inputs[n] for n in names]
    inputs = list(inputs)
    if len(inputs) != len(names):
        raise ReferenceModelError(f"graph {graph.name!r} takes {len(names)} inputs {names}, "
                                  f"{len(inputs)} given")
    return inputs


def _conform(array: Any, value: Value, what: str) -> np.ndarray:
    """Convert `array` to the value's dtype if every element survives; check the shape."""
    if isinstance(value.type, NoneType):
        raise ReferenceModelError(f"{what} has no type")
    given = np.asarray(array)
    dtype = expected_dtype(value.type)
    if dtype is not None and given.dtype != dtype:
        given = _safe_convert(given, dtype, value.type, what)
    if not shape_matches(given.shape, declared_shape(value.type)):
        raise ReferenceModelError(f"{what} has shape {list(given.shape)}, the graph expects "
                                  f"{value.type}")
    _check_narrow_int_range(given, value.type, f"{what} ({value.type})")
    return given


def _safe_convert(given: np.ndarray, dtype: np.dtype, value_type: Type, what: str) -> np.ndarray:
    problem = f"{what} is {given.dtype}, the graph expects {value_type}"
    if given.dtype.kind in "OUSV" and given.dtype.kind != dtype.kind:
        raise ReferenceModelError(problem)
    try:
        with np.errstate(all="ignore"):
            converted = given.astype(dtype)
            back = converted.astype(given.dtype)
    except (TypeError, ValueError) as exc:
        raise ReferenceModelError(f"{problem}: {exc}") from None
    same = (back == given) | (_isnan(back) & _isnan(given))
    if not bool(np.all(same)):
        raise ReferenceModelError(f"{problem}, and some values do not fit it")
    return converted


def _check_narrow_int_range(array: np.ndarray, value_type: Type, what: str) -> None:
    # i4 and i48 are held in wider numpy ints: check their own range.
    if not isinstance(value_type, TensorType) or not array.size:
        return
    element = storage_type(value_type.element)
    if element.name in ("i4", "i48") and (array.min() < element.min_value
                                          or array.max() > element.max_value):
        raise ReferenceModelError(f"{what}: values outside the {element} range")


def _isnan(array: np.ndarray) -> np.ndarray:
    try:
        return np.isnan(array)
    except TypeError:
        return np.zeros(array.shape, dtype=bool)


def evaluate(module: Module, inputs: Sequence[Any] | Mapping[str, Any], *,
             keep_intermediates: bool = False) -> dict[str, np.ndarray]:
    try:
        return Evaluator(module, keep_intermediates=keep_intermediates).run(inputs)
    except IRError as exc:
        raise ReferenceModelError(str(exc)) from exc
