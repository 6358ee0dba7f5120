"""Canonicalization patterns of the `quant` dialect (MLIR's folders in QuantOps.cpp).

Each pattern replaces a cast by the value an inverse cast consumed, when the
types say the pair is an identity:

- `dcast(qcast(x)) -> x` when x's type is the dcast result type;
- `qcast(dcast(x)) -> x` when x's type is the qcast result type (the same
  quantization parameters; otherwise the pair is a requantization);
- `scast(scast(x)) -> x` when x's type is the outer result type.

The dropped casts become dead; `canonicalize` removes them.
"""

from __future__ import annotations

from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.passes.simplify import canonicalization
from tfl2tosa.quant.ops import DCAST, QCAST, SCAST


def _fold_inverse(op: Op, inverse: str) -> list[Value] | Failure:
    source = op.operands[0].owner
    if source is None or source.name != inverse:
        return Failure(f"{op.name}: operand is not produced by {inverse}")
    original = source.operands[0]
    if original.type != op.result.type:
        return Failure(f"{op.name}: {inverse} input type {original.type} differs from "
                       f"result type {op.result.type}")
    return [original]


@canonicalization(DCAST)
def fold_dcast_of_qcast(op: Op, rw: Rewriter) -> list[Value] | Failure:
    return _fold_inverse(op, QCAST)


@canonicalization(QCAST)
def fold_qcast_of_dcast(op: Op, rw: Rewriter) -> list[Value] | Failure:
    return _fold_inverse(op, DCAST)


@canonicalization(SCAST)
def fold_scast_of_scast(op: Op, rw: Rewriter) -> list[Value] | Failure:
    return _fold_inverse(op, SCAST)
