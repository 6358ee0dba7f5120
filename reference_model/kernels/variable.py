"""Variables (TOSA 1.0 chapter "Variable Operators"): VARIABLE, VARIABLE_READ, VARIABLE_WRITE.

Variables live in `ctx.variables` (name -> array), which the evaluator keeps
for the whole run, across graphs.
"""

from __future__ import annotations

import numpy as np

from reference_model.kernels import KernelContext, kernel
from tfl2tosa.ir.types import numpy_dtype, scalar_type
from tfl2tosa.tosa import rules


@kernel("VARIABLE")
def variable(ctx: KernelContext) -> list[np.ndarray]:
    name = ctx.attrs["name"]
    ctx.error_if(name in ctx.variables, f"variable {name!r} is declared twice")
    shape = tuple(int(d) for d in ctx.attrs.get("var_shape", ()))
    initial = ctx.attrs.get("initial_value")
    if initial is None:
        element = ctx.attrs["type"]
        dtype = numpy_dtype(scalar_type(element) if isinstance(element, str) else element)
        ctx.variables[name] = np.zeros(shape, dtype=dtype)
    else:
        initial = np.asarray(initial)
        problem = rules.initial_value_problem(name, initial.shape, shape)
        if problem:
            ctx.error_if(True, problem)
        ctx.variables[name] = initial.copy()
    return []


def _declared(ctx: KernelContext) -> str:
    name = ctx.attrs["name"]
    ctx.error_if(name not in ctx.variables, f"variable {name!r} is not declared")
    return name


@kernel("VARIABLE_WRITE")
def variable_write(ctx: KernelContext) -> list[np.ndarray]:
    name = _declared(ctx)
    value, stored = ctx.inputs[0], ctx.variables[name]
    ctx.error_if(value.shape != stored.shape or value.dtype != stored.dtype,
                 f"writes {value.dtype}{list(value.shape)} to variable {name!r} of "
                 f"{stored.dtype}{list(stored.shape)}")
    ctx.variables[name] = value.copy()
    return []


@kernel("VARIABLE_READ")
def variable_read(ctx: KernelContext) -> list[np.ndarray]:
    return [ctx.variables[_declared(ctx)].copy()]
