"""Reference-model kernels: one function per TOSA operator, registered by name.

A kernel takes a KernelContext and returns the op's output arrays. Array
conventions: bool as numpy bool_, i4 unpacked in int8, i48 in int64, bf16 and
fp8 through ml_dtypes, shape_t values as 1-D int64 arrays.
Kernels are grouped in modules by specification chapter; importing this
package imports them all so every kernel is registered.
Records here and in the plan are plain classes with `__slots__`, not
dataclasses: a `tfl2tosa run` imports no `dataclasses` (README).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from reference_model.numerics import holds_anywhere, holds_everywhere
from tfl2tosa.errors import SpecErrorIf, SpecRequire
from tfl2tosa.ir.types import ScalarType, ShapeType, TensorType, Type, storage_type
from tfl2tosa.tosa import rules


class KernelContext:
    """What a kernel is called with: the op's operands, attributes and types."""

    __slots__ = ("op_name", "inputs", "attrs", "input_types", "output_types", "loc",
                 "run_graph", "variables")

    def __init__(self, op_name: str, inputs: list[np.ndarray], attrs: dict[str, Any],
                 input_types: list[Type], output_types: list[Type], loc: str = "",
                 run_graph: Callable[[str, list[np.ndarray]], list[np.ndarray]] | None = None,
                 variables: dict[str, np.ndarray] | None = None) -> None:
        self.op_name = op_name              # specification name, e.g. "CONV2D"
        self.inputs = inputs                # operand values in specification order
        self.attrs = attrs                  # by specification attribute name
        self.input_types = input_types
        self.output_types = output_types
        self.loc = loc                      # where the op came from, for error messages
        # Runs another graph of the module (control flow): name, inputs -> outputs.
        self.run_graph = run_graph
        self.variables = {} if variables is None else variables

    def where(self) -> str:
        return f"{self.op_name} ({self.loc})" if self.loc else self.op_name

    def error_if(self, condition: Any, message: str) -> None:
        """Raise SpecErrorIf when a specification ERROR_IF condition holds."""
        if holds_anywhere(condition):
            raise SpecErrorIf(f"{self.where()}: ERROR_IF {message}")

    def check(self, problems: list[str]) -> None:
        """Raise SpecErrorIf for the first broken rule `problems` names (tfl2tosa.tosa.rules)."""
        if problems:
            raise SpecErrorIf(f"{self.where()}: ERROR_IF {problems[0]}")

    def require(self, condition: Any, message: str) -> None:
        """Raise SpecRequire unless a specification REQUIRE condition holds everywhere."""
        if not holds_everywhere(condition):
            raise SpecRequire(f"{self.where()}: REQUIRE {message} does not hold")

    def expect_output_shape(self, shape: tuple[int, ...], index: int = 0) -> None:
        """ERROR_IF the declared (static) result shape is not `shape`.

        Kernels call this before any data-dependent REQUIRE: an invalid graph
        is an error whatever its data."""
        declared = self.output_shape(index)
        if declared is None or declared == shape:
            return
        problem = rules.shape_problem("output", declared, shape)
        if problem:
            self.error_if(True, problem)

    def element(self, index: int = 0, *, output: bool = False) -> ScalarType:
        """The scalar element type of an operand (or result): quantized types give storage."""
        types = self.output_types if output else self.input_types
        value_type = types[index]
        if not isinstance(value_type, TensorType):
            raise SpecErrorIf(f"{self.where()}: operand {index} is {value_type}, not a tensor")
        return storage_type(value_type.element)

    def output_shape(self, index: int = 0) -> tuple[int, ...] | None:
        value_type = self.output_types[index]
        if isinstance(value_type, ShapeType):
            return (value_type.rank,)
        return value_type.shape if isinstance(value_type, TensorType) else None


Kernel = Callable[[KernelContext], list[np.ndarray]]
KERNELS: dict[str, Kernel] = {}


class StaticOp:
    """What is known about an op before any run: a preparer's input."""

    __slots__ = ("op_name", "attrs", "input_types", "output_types", "loc", "constants")

    def __init__(self, op_name: str, attrs: dict[str, Any], input_types: list[Type],
                 output_types: list[Type], loc: str = "",
                 constants: list[np.ndarray | None] | None = None) -> None:
        self.op_name = op_name
        self.attrs = attrs
        self.input_types = input_types
        self.output_types = output_types
        self.loc = loc
        # The operands that are CONST / CONST_SHAPE results, as arrays; None for the others.
        self.constants = [] if constants is None else constants

    def where(self) -> str:
        return f"{self.op_name} ({self.loc})" if self.loc else self.op_name

    def static_shape(self, index: int, *, output: bool = False) -> tuple[int, ...] | None:
        """The declared shape of an operand (or result) when every dimension is known."""
        value_type = (self.output_types if output else self.input_types)[index]
        if isinstance(value_type, TensorType) and value_type.is_static:
            return tuple(value_type.shape)
        return None

    def element(self, index: int, *, output: bool = False) -> ScalarType | None:
        value_type = (self.output_types if output else self.input_types)[index]
        if not isinstance(value_type, TensorType):
            return None
        return storage_type(value_type.element)

    def error_if(self, condition: Any, message: str) -> None:
        """As KernelContext.error_if, for static checks (the preparer then gives up)."""
        if holds_anywhere(condition):
            raise SpecErrorIf(f"{self.where()}: ERROR_IF {message}")


class KernelNeeded(Exception):
    """Raised by a prepared kernel for operands it leaves to the registered kernel
    (a data-dependent REQUIRE to report, a value only the kernel computes): the
    evaluator then runs the op's registered kernel on them, whose results or error
    (with the op's own location) stand. A prepared kernel may serve every op that
    shares its static facts, so it never reports for one op itself."""


# A prepared kernel: operand arrays in, result arrays out, for the ops of one set of
# static facts (attributes, types, constant operands' values), decoded and checked
# once; a compile gives every op with those facts the same prepared kernel, so it
# keeps nothing that tells the ops apart (their locations). The evaluator runs it
# with numpy's floating-point errors ignored (no np.errstate of its own needed).
Prepared = Callable[[list[np.ndarray]], list[np.ndarray]]
# A preparer returns the prepared kernel, or None when the op is not a case it
# handles (the registered kernel then runs it). It must give exactly the kernel's
# results, and raise KernelNeeded for operands whose results or errors it leaves
# to the kernel.
PREPARERS: dict[str, Callable[[StaticOp], Prepared | None]] = {}


def prepared(*names: str) -> Callable:
    """Register a preparer for one or more specification op names."""

    def register(fn: Callable[[StaticOp], Prepared | None]) -> Callable:
        for name in names:
            if name in PREPARERS:
                raise RuntimeError(f"two preparers registered for {name}")
            PREPARERS[name] = fn
        return fn

    return register


def kernel(*names: str) -> Callable[[Kernel], Kernel]:
    """Register a kernel for one or more specification op names."""

    def register(fn: Kernel) -> Kernel:
        for name in names:
            if name in KERNELS:
                raise RuntimeError(f"two kernels registered for {name}")
            KERNELS[name] = fn
        return fn

    return register


# --- helpers shared by the kernel families ----------------------------------

# ml_dtypes' float formats are numpy "V" (void) kinds; name them explicitly.
_NARROW_FLOAT_NAMES = frozenset({"bfloat16", "float8_e4m3fn", "float8_e5m2"})


def is_float_dtype(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype.name in _NARROW_FLOAT_NAMES


def broadcast_shape(ctx: KernelContext, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The specification's broadcast_shape: equal ranks, each dim equal or 1 (else ERROR_IF);
    and ERROR_IF(shape != broadcast_shape(...)) for the op's declared result shape."""
    result, problem = rules.broadcast_shape(shapes)
    if problem:
        ctx.error_if(True, problem)
    ctx.expect_output_shape(result)
    return result


def float_compute(fn: Callable[..., np.ndarray], out_dtype: np.dtype,
                  *arrays: np.ndarray) -> np.ndarray:
    """Apply `fn` in float32 and round once to `out_dtype` (round to nearest even).

    For +, -, *, / and sqrt this is the correctly rounded result for fp16,
    bf16 and fp8: float32 has at least 2p+2 significand bits for each of
    them, so rounding twice (to float32, then to the format) equals rounding
    once (Figueroa, "When is double rounding innocuous?", 1995).
    """
    with np.errstate(all="ignore"):  # overflow to infinity and NaN results are meant
        result = fn(*(np.asarray(a).astype(np.float32) for a in arrays))
        return np.asarray(result).astype(out_dtype)


def float64_compute(fn: Callable[..., np.ndarray], out_dtype: np.dtype,
                    *arrays: np.ndarray) -> np.ndarray:
    """Apply `fn` in float64 and round once to `out_dtype`: for functions whose
    specification gives an error bound against an fp64 reference (EXP, LOG, ...)."""
    from reference_model.numerics import round_to_float

    with np.errstate(all="ignore"):
        result = fn(*(np.asarray(a).astype(np.float64) for a in arrays))
        return round_to_float(result, out_dtype)


# Every chapter module registers its kernels on import. Imported last, so the
# chapter modules can import the names above from this package.
from reference_model.kernels import (  # noqa: F401
    activation,
    comparison,
    control_flow,
    custom,
    data_layout,
    data_nodes,
    elementwise_binary,
    elementwise_ternary,
    elementwise_unary,
    image,
    reduction,
    scatter_gather,
    tensor_ops,
    type_conversion,
    variable,
)
