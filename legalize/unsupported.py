"""Named refusals for TFL ops that TOSA cannot express.

Each op listed here gets a pattern that always returns a Failure whose reason
says, in a user's terms, why no TOSA graph can compute it; the driver puts
that reason into the ConversionError next to the op and its location (e.g.
`tfl.unique (f32 -> f32,i32) at main:op0:UNIQUE: its output shape depends on ...`). The patterns are
registered with `types=()`, so the coverage table lists these ops as
unsupported for every element type.

The reasons fall in four groups: output shapes that depend on the input
values (TOSA tensors have shapes fixed when the graph is built), random
numbers (TOSA graphs are deterministic), string and resource state (TOSA has
only numeric tensors), and markers that are not operations.
"""

from __future__ import annotations

from legalize.registry import pattern
from tfl2tosa.ir.core import Op
from tfl2tosa.ir.rewrite import Failure, Rewriter

_DATA_DEPENDENT_SHAPE = ("its output shape depends on the input values, and TOSA tensors have "
                         "shapes fixed when the graph is built")
_RANDOM = "it draws random numbers, and TOSA has no random number generator"
_HASH_TABLE = ("it keeps a hash table (resource and string state), and TOSA has only "
               "numeric tensors")

REASONS: dict[str, str] = {
    "tfl.unique": f"{_DATA_DEPENDENT_SHAPE} (one output per distinct value)",
    "tfl.where": f"{_DATA_DEPENDENT_SHAPE} (one row per true element)",
    "tfl.embedding_lookup_sparse": f"{_DATA_DEPENDENT_SHAPE} (the dense shape is an input)",
    "tfl.random_uniform": _RANDOM,
    "tfl.random_standard_normal": _RANDOM,
    "tfl.multinomial": _RANDOM,
    "tfl.stablehlo_rng_bit_generator": _RANDOM,
    "tfl.hashtable": _HASH_TABLE,
    "tfl.hashtable_find": _HASH_TABLE,
    "tfl.hashtable_import": _HASH_TABLE,
    "tfl.hashtable_size": _HASH_TABLE,
    "tfl.lsh_projection": ("it hashes its input bytes with a string hash (farmhash), which "
                           "TOSA's arithmetic cannot compute"),
    "tfl.skip_gram": "it builds n-grams of strings, and TOSA has no string type",
    "tfl.delegate": "it marks a subgraph handed to a TFLite delegate; it is not an operation",
    "tfl.placeholder_for_greater_op_codes": "it is a schema marker, not an operation",
}


@pattern(*REASONS, kind="any", types=())
def not_expressible_in_tosa(op: Op, rw: Rewriter) -> Failure:
    """Refuse with the reason for this op."""
    return Failure(REASONS[op.name])


# Ops that their family's pattern refuses for some operand types only.
REFUSED_FOR_SOME_TYPES = {
    # legalize/misc.py: a BITCAST between different element types reinterprets
    # bits, which TOSA's arithmetic cannot express.
    "tfl.bitcast",
}


def may_be_refused(op_names: set[str]) -> set[str]:
    """Of `op_names`, those a conversion may refuse by name rather than lower."""
    return set(op_names) & (set(REASONS) | REFUSED_FOR_SOME_TYPES)
