"""Simplifying passes over a Module: canonicalize, common-subexpression elimination, DCE.

- `canonicalize(module)`: apply every registered canonicalization pattern to a
  fixpoint, then remove the ops that became dead (as MLIR's canonicalizer does).
- `cse(module)`: merge identical pure ops (same name, operands, attributes and
  result types); the first occurrence survives. Constants are included.
- `dce(module)`: remove ops whose results nobody uses (side effects are kept).

Canonicalization patterns are registered by op name with `@canonicalization`;
the modules that define them are listed in `PATTERN_MODULES` and imported
when `canonicalize` first runs.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from tfl2tosa.ir.core import SIDE_EFFECT_OPS, Graph, Module, Op
from tfl2tosa.ir.rewrite import Pattern, rewrite_module

# Modules whose import registers canonicalization patterns.
PATTERN_MODULES = ("tfl2tosa.quant.canonicalize",)

# op name -> canonicalization patterns, tried in order
CANONICALIZATIONS: dict[str, list[Pattern]] = {}

# Ops that run other graphs: merging two of them is only sound if those graphs
# are pure, which CSE does not try to prove.
CONTROL_FLOW_OPS = frozenset({"tosa.cond_if", "tosa.while_loop", "tfl.if", "tfl.while",
                              "tfl.call_once"})


def canonicalization(*op_names: str) -> Callable[[Pattern], Pattern]:
    """Register a canonicalization pattern for one or more op names."""

    def register(fn: Pattern) -> Pattern:
        for name in op_names:
            CANONICALIZATIONS.setdefault(name, []).append(fn)
        return fn

    return register


def canonicalize(module: Module) -> int:
    """Apply canonicalization patterns to a fixpoint, then DCE; returns rewrites applied."""
    for name in PATTERN_MODULES:
        importlib.import_module(name)
    record = rewrite_module(module, CANONICALIZATIONS, fixpoint=True)
    dce(module)
    return len(record.applied)


def dce(module: Module) -> int:
    """Remove dead ops from every graph; returns the number removed."""
    return sum(graph.erase_dead_ops() for graph in module.graphs.values())


# ---------------------------------------------------------------------------
# Common-subexpression elimination


def is_pure(op: Op) -> bool:
    """No side effects and no nested graphs: two identical ones compute the same."""
    return (op.name not in SIDE_EFFECT_OPS and op.name not in CONTROL_FLOW_OPS
            and not op.attrs.get("side_effect") and bool(op.results))


def _raw_bytes(array: np.ndarray) -> np.ndarray:
    """The array's bytes as a flat uint8 view (a copy only if not contiguous)."""
    contiguous = array if array.flags.c_contiguous else np.ascontiguousarray(array)
    return contiguous.reshape(-1).view(np.uint8)


# Arrays up to this many bytes are compared by their bytes, larger ones by a digest.
_INLINE_BYTES = 64


def _freeze(value: Any) -> Hashable:
    """A hashable key equal only for attributes that mean the same thing.

    Arrays compare by dtype, shape and bytes (so -0.0 differs from 0.0 and a
    NaN equals itself). Small arrays enter the key as their bytes; larger ones
    as a CRC-32 of them, so the pass keeps no copy of the weights
    (`_same_arrays` confirms a match). Python scalars keep their type (True
    is not 1) and floats compare bit-exactly.
    """
    if isinstance(value, np.ndarray):
        raw = _raw_bytes(value)
        digest = raw.tobytes() if raw.size <= _INLINE_BYTES else zlib.crc32(raw)
        return ("array", value.dtype.str, value.shape, digest)
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str, value.tobytes())
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _freeze(v)) for k, v in value.items())))
    hash(value)  # anything else must be hashable as it is
    return (type(value).__name__, value)


def _cse_key(op: Op) -> Hashable | None:
    try:
        attrs = tuple(sorted((k, _freeze(v)) for k, v in op.attrs.items()))
    except TypeError:
        return None  # an attribute we cannot compare: leave the op alone
    return (op.name, tuple(id(v) for v in op.operands), attrs,
            tuple(v.type for v in op.results))


def _same_arrays(a: Op, b: Op) -> bool:
    """The array attributes of two ops with equal keys are equal byte for byte."""
    for name, value in a.attrs.items():
        if isinstance(value, np.ndarray) and not np.array_equal(_raw_bytes(value),
                                                                _raw_bytes(b.attrs[name])):
            return False
    return True


def cse_graph(graph: Graph) -> int:
    """Merge identical pure ops of one graph; returns the number removed."""
    seen: dict[Hashable, Op] = {}
    kept: list[Op] = []
    removed = 0
    for op in graph.ops:
        key = _cse_key(op) if is_pure(op) else None
        first = seen.get(key) if key is not None else None
        if first is not None and not _same_arrays(first, op):
            first, key = None, None  # a digest collision: keep both
        if first is None:
            if key is not None:
                seen[key] = op
            kept.append(op)
            continue
        for old, new in zip(op.results, first.results):
            graph.replace_value(old, new)
        op.drop_operand_uses()
        removed += 1
    graph.ops = kept
    return removed


def cse(module: Module) -> int:
    """Merge identical pure ops in every graph; returns the number removed."""
    return sum(cse_graph(graph) for graph in module.graphs.values())
