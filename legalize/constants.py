"""Constants: `tfl.pseudo_const` becomes `tosa.const` holding the same array.

The array stays the read-only view into the model file (packed int4 data is
unpacked, the one copy made here); patterns that need a
transformed copy (a transposed filter, a rescaled bias) make their own
constant, and dead originals are removed by DCE. `tfl.no_value` (an omitted
optional operand) is left for its consumers to notice and for DCE to remove.
"""

from __future__ import annotations

from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.tflite_import.tensors import unpack_int4


@pattern("tfl.pseudo_const", kind="any")
def const(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """A sparse constant holds only its stored values: not a tensor TOSA can
    hold, so only DENSIFY may read it (it gets the sparsity format along). A
    packed int4 constant (two values a byte) is unpacked here, once, into an
    i4 constant whose values every consumer reads like any other weights."""
    sparsity = op.attrs.get("sparsity")
    if sparsity is not None:
        readers = sorted({user.name for user, _ in op.result.uses})
        if any(r != "tfl.densify" for r in readers):
            return Failure("sparse weights are only supported through DENSIFY (read by "
                           f"{', '.join(readers) or 'nothing'})")
    values = op.attrs["value"]
    if op.attrs.get("packed_int4"):
        values = unpack_int4(values, op.result.type.shape)
    const = rw.create("tosa.const", [], [op.result.type], {"values": values})
    if sparsity is not None:
        const.attrs["sparsity"] = sparsity
    return [const.result]
