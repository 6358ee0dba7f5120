"""Elementwise ternary operators (TOSA 1.0 chapter "Elementwise Ternary Operators")."""

from __future__ import annotations

import numpy as np

from reference_model.kernels import KernelContext, Prepared, StaticOp, broadcast_shape, kernel, \
    prepared
from reference_model.kernels.elementwise_binary import static_broadcast
from tfl2tosa.ir.types import numpy_dtype


@kernel("SELECT")
def select(ctx: KernelContext) -> list[np.ndarray]:
    condition, on_true, on_false = ctx.inputs
    broadcast_shape(ctx, condition.shape, on_true.shape, on_false.shape)
    return [np.where(condition.astype(bool), on_true, on_false).astype(on_true.dtype)]


@prepared("SELECT")
def prepare_select(op: StaticOp) -> Prepared | None:
    """Static shapes, a bool condition and both choices of one numpy number type:
    the kernel's np.where without its copies (the condition already is bool, and
    the choice has the choices' dtype)."""
    condition, on_true = op.element(0), op.element(1)
    if condition is None or on_true is None or condition.name != "i1" \
            or op.element(2) != on_true \
            or numpy_dtype(on_true).kind not in "biuf" or not static_broadcast(op, 3):
        return None

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [np.where(operands[0], operands[1], operands[2])]
    return run
