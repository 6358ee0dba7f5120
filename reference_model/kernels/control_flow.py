"""Control flow (TOSA 1.0 chapter "Control Flow Operators"): COND_IF and WHILE_LOOP.

The branch and loop graphs are other graphs of the same module, named by the
op's graph attributes; the evaluator runs them through `ctx.run_graph`, which
checks each graph's inputs against its signature.
"""

from __future__ import annotations

import numpy as np

from reference_model.kernels import KernelContext, kernel
from tfl2tosa.errors import ReferenceModelError
from tfl2tosa.tosa import rules


def _runner(ctx: KernelContext):
    if ctx.run_graph is None:
        raise ReferenceModelError(f"{ctx.where()}: control flow needs the module's other graphs")
    return ctx.run_graph


def _truth(ctx: KernelContext, condition: np.ndarray, what: str) -> bool:
    problem = rules.condition_problem(what, np.shape(condition))
    if problem:
        ctx.error_if(True, problem)
    return bool(np.asarray(condition).reshape(-1)[0])


@kernel("COND_IF")
def cond_if(ctx: KernelContext) -> list[np.ndarray]:
    run_graph = _runner(ctx)
    condition, inputs = ctx.inputs[0], list(ctx.inputs[1:])
    branch = ctx.attrs["then_graph"] if _truth(ctx, condition, "condition") else ctx.attrs["else_graph"]
    return run_graph(branch, inputs)


@kernel("WHILE_LOOP")
def while_loop(ctx: KernelContext) -> list[np.ndarray]:
    run_graph = _runner(ctx)
    values = list(ctx.inputs)
    while True:
        result = run_graph(ctx.attrs["cond_graph"], values)
        ctx.error_if(len(result) != 1, f"cond_graph returns {len(result)} values, not one")
        if not _truth(ctx, result[0], "cond_graph's result"):
            return values
        values = run_graph(ctx.attrs["body_graph"], values)
        ctx.error_if(len(values) != len(ctx.inputs),
                     f"body_graph returns {len(values)} values for {len(ctx.inputs)} loop values")
