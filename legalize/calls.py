"""CALL and STABLEHLO_COMPOSITE: the pattern that refuses what inlining left.

Both are inlined before legalization by the module pass
`tfl2tosa.passes.inline_calls` (a pattern sees one graph, and the callee's ops
still need lowering). An op that reaches the legalization could not be inlined;
this pattern gives the reason the pass recorded.
"""

from __future__ import annotations

from legalize.registry import pattern
from tfl2tosa.ir.core import Op
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.passes.inline_calls import CALLEE_ATTRS, SCHEMA_NAMES
from tfl2tosa.passes.resource_variables import REASON_ATTR


@pattern(*CALLEE_ATTRS, kind="any", types=())
def call(op: Op, rw: Rewriter) -> Failure:
    """A CALL or composite that reached the legalization (inline_calls runs
    before it): why it was not inlined."""
    reason = op.attrs.get(REASON_ATTR)
    if reason is None:
        return Failure(f"{op.name}: {SCHEMA_NAMES[op.name]} is inlined before legalization "
                       "(tfl2tosa.passes.inline_calls), which did not run")
    return Failure(str(reason))
