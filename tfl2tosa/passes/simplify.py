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
from collections.abc import Callable, Hashable
from operator import itemgetter
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
    applied = apply_canonicalizations(module)
    dce(module)
    return applied


def apply_canonicalizations(module: Module) -> int:
    """`canonicalize` without its DCE; returns rewrites applied. Where none was
    and no op was dead before, none is after."""
    for name in PATTERN_MODULES:
        importlib.import_module(name)
    return len(rewrite_module(module, CANONICALIZATIONS, fixpoint=True).applied)


def dce(module: Module) -> int:
    """Remove dead ops from every graph; returns the number removed."""
    return sum(graph.erase_dead_ops() for graph in module.graphs.values())


# ---------------------------------------------------------------------------
# Common-subexpression elimination


def is_pure(op: Op) -> bool:
    """No side effects and no nested graphs: two identical ones compute the same."""
    return op.name not in _NOT_PURE and bool(op.results) and not op.attrs.get("side_effect")


_NOT_PURE = SIDE_EFFECT_OPS | CONTROL_FLOW_OPS


def _raw_bytes(array: np.ndarray) -> np.ndarray:
    """The array's bytes as a flat uint8 view (a copy only if not contiguous)."""
    contiguous = array if array.flags.c_contiguous else np.ascontiguousarray(array)
    return contiguous.reshape(-1).view(np.uint8)


# Arrays up to this many bytes enter a CSE key as their bytes. A larger array
# attribute enters as that many bytes (a constant's payload: elements) sampled
# evenly from it: keys of distinct weights still differ, no key reads a whole
# weight tensor, and ops with equal keys have their arrays compared byte for
# byte (`_same_arrays`). A larger array nested in a list or dict enters as a
# CRC-32 of its bytes.
_INLINE_BYTES = 64


def _freeze_float(value: float) -> Hashable:
    return ("float", value.hex())


def _freeze_sequence(value: list[Any] | tuple[Any, ...]) -> Hashable:
    return (value.__class__, tuple(map(_freeze, value)))


def _freeze_dict(value: dict[Any, Any]) -> Hashable:
    return ("dict", tuple(sorted((k, _freeze(v)) for k, v in value.items())))


def _freeze_plain(value: Any) -> Hashable:
    return (value.__class__, value)


def _freeze_array(value: np.ndarray) -> Hashable:
    raw = _raw_bytes(value)
    if raw.size <= _INLINE_BYTES:
        digest: Hashable = raw.tobytes()
    else:
        import zlib  # few graphs nest arrays in lists or dicts

        digest = zlib.crc32(raw)
    return ("array", value.dtype.str, value.shape, digest)


# The attribute classes met most, by class; the rest go through `_freeze`'s checks.
_FREEZERS: dict[type, Callable[[Any], Hashable]] = {
    int: _freeze_plain, bool: _freeze_plain, str: _freeze_plain, float: _freeze_float,
    list: _freeze_sequence, tuple: _freeze_sequence, dict: _freeze_dict,
    np.ndarray: _freeze_array,
}


def _freeze(value: Any) -> Hashable:
    """A hashable key equal only for attributes that mean the same thing.

    Arrays compare by dtype, shape and bytes (so -0.0 differs from 0.0 and a
    NaN equals itself). Python scalars keep their type (True is not 1) and
    floats compare bit-exactly.
    """
    freeze = _FREEZERS.get(value.__class__)
    if freeze is not None:
        return freeze(value)
    if isinstance(value, np.ndarray):
        return _freeze_array(value)
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str, value.tobytes())
    if isinstance(value, float):
        return _freeze_float(value)
    if isinstance(value, (list, tuple)):
        return _freeze_sequence(value)
    if isinstance(value, dict):
        return _freeze_dict(value)
    hash(value)  # anything else must be hashable as it is
    return (value.__class__, value)


_INT_ONLY = frozenset({int})
# Attribute classes whose values are their own key once their class is kept
# beside them (True == 1, but a bool attribute is not an int one).
_SCALAR_CLASSES = frozenset({bool, int, str})
# attribute names in an op's order -> (the names sorted, a getter that puts a
# tuple in that order, or None when already sorted)
_NAME_ORDERS: dict[tuple[str, ...], tuple[tuple[str, ...], Callable[[tuple], tuple] | None]] = {}


def _name_order(names: tuple[str, ...]) -> tuple[tuple[str, ...], Callable[[tuple], tuple] | None]:
    order = sorted(range(len(names)), key=names.__getitem__)
    if order == list(range(len(names))):
        return names, None
    getter = itemgetter(*order)  # more than one name: itemgetter returns a tuple
    return getter(names), getter


def _cse_key(op: Op) -> tuple[Hashable, bool] | None:
    """The op's key (name, operands, attributes), and whether ops with an equal
    key still need their arrays compared (a large array's key is a sample of
    it). None for an op with an attribute that cannot be compared. Ops with
    equal keys merge when their result types are equal too."""
    attrs = op.attrs
    classes = tuple(map(type, attrs.values()))
    if _SCALAR_CLASSES.issuperset(classes):
        # Most ops: names, values and classes in name order, without a loop.
        names = tuple(attrs)
        entry = _NAME_ORDERS.get(names)
        if entry is None:
            entry = _NAME_ORDERS[names] = _name_order(names)
        sorted_names, order = entry
        values = tuple(attrs.values())
        if order is not None:
            values, classes = order(values), order(classes)
        return (op.name, tuple(map(id, op.operands)),
                ("scalars", sorted_names, values, classes)), False
    sampled = False
    frozen: list[tuple[str, Hashable]] = []
    for name, value in op.attrs.items():
        cls = value.__class__
        if cls is np.ndarray:
            if value.dtype.hasobject:
                return None  # references, not values: their bytes say nothing
            if value.nbytes <= _INLINE_BYTES:
                # tobytes() gives C order whatever the strides: equal values, equal bytes.
                frozen.append((name, ("array", value.dtype, value.shape, value.tobytes())))
            else:
                raw = _raw_bytes(value)
                sample = raw[::raw.size // _INLINE_BYTES].tobytes()
                frozen.append((name, ("sampled", value.dtype, value.shape, sample)))
                sampled = True
        elif cls is bool or cls is int or cls is str:
            frozen.append((name, (cls, value)))
        elif (cls is list or cls is tuple) and _INT_ONLY.issuperset(map(type, value)):
            # Integers only (no bools), which compare exactly: the values themselves.
            frozen.append((name, (cls, "ints", tuple(value))))
        else:
            try:
                frozen.append((name, _freeze(value)))
            except TypeError:
                return None  # an attribute we cannot compare: leave the op alone
    if len(frozen) > 1:
        frozen.sort()
    return (op.name, tuple(map(id, op.operands)), tuple(frozen)), sampled


def _same_result_types(a: Op, b: Op) -> bool:
    # Not part of a key: hashing a type made moments ago costs more than
    # comparing the types of the few ops whose keys are equal.
    a_results, b_results = a.results, b.results
    if len(a_results) == 1 and len(b_results) == 1:
        return a_results[0].type == b_results[0].type
    return [v.type for v in a_results] == [v.type for v in b_results]


def _same_arrays(a: Op, b: Op) -> bool:
    """The array attributes of two ops with equal keys are equal byte for byte."""
    for name, value in a.attrs.items():
        if isinstance(value, np.ndarray) and not np.array_equal(_raw_bytes(value),
                                                                _raw_bytes(b.attrs[name])):
            return False
    return True


def _constant_key(op: Op) -> tuple[Hashable, bool] | None:
    """`_cse_key` for an op without operands: the same, or for the one shape
    most of them have (a single `values` array), the same facts in a flatter
    tuple that no key of another shape equals (a large array's sample is of
    elements, not bytes)."""
    attrs = op.attrs
    if len(attrs) == 1:
        value = attrs.get("values")
        if value.__class__ is np.ndarray:
            if value.dtype.hasobject:
                return None
            if value.nbytes <= _INLINE_BYTES:
                return (op.name, value.dtype, value.shape, value.tobytes()), False
            flat = value.ravel()
            sample = flat[::max(1, flat.size // _INLINE_BYTES)].tobytes()
            return (op.name, value.dtype, value.shape, sample, "sampled"), True
    return _cse_key(op)


def _twin(op: Op, entry: tuple[Hashable, bool] | None, other: Op) -> bool:
    """`other`, met before `op`, computes the same: an equal key, equal arrays
    where the key holds a sample of them, and equal result types."""
    if entry is None:
        return False
    other_entry = _cse_key(other)
    return (other_entry is not None and other_entry[0] == entry[0]
            and (not entry[1] or _same_arrays(other, op)) and _same_result_types(other, op))


def cse_graph(graph: Graph) -> int:
    """Merge identical pure ops of one graph; returns the number removed.

    Each op merges into the op met before it that computes the same (there is
    at most one: of two such earlier ops the later merged into the first). An
    op with operands finds it among the kept ops of its name and operands (by
    identity), so only ops that share every operand have their keys built;
    ops without operands are looked up by key.
    """
    # Ops without operands: key -> the first op kept with it, and (key, result
    # types) -> the first kept with those types where they differ from its. A
    # key that holds sampled arrays -> the one op kept with it, or once there
    # are more, result types -> the ops kept with them (most such keys have
    # one op, whose types are never hashed).
    constants: dict[Hashable, Op] = {}
    sampled: dict[Hashable, Op | dict[Hashable, list[Op]]] = {}
    # Pure ops with operands kept so far, by (name, id of each operand): the
    # only ops an op can merge into; a list where several differ otherwise.
    # Every operand is alive as long as the graph's ops are, so no id is reused.
    kept_by_operands: dict[tuple[Any, ...], Op | list[Op]] = {}
    kept: list[Op] = []
    removed = 0
    for op in graph.ops:
        first = None
        if is_pure(op):
            operands = op.operands
            if operands:
                key = (op.name, *map(id, operands))
                group = kept_by_operands.setdefault(key, op)
                if group is not op:
                    first = _earlier_twin(op, group)
                    if first is None:
                        if group.__class__ is Op:
                            group = kept_by_operands[key] = [group]
                        group.append(op)  # type: ignore[union-attr]
            else:
                first = _earlier_constant(op, constants, sampled)
        if first is None:
            kept.append(op)
            continue
        for old, new in zip(op.results, first.results):
            graph.replace_value(old, new)
        op.drop_operand_uses()
        removed += 1
    graph.ops = kept
    return removed


def _earlier_twin(op: Op, group: Op | list[Op]) -> Op | None:
    """The op of `group` (kept ops of `op`'s name and operands, met before it)
    that computes the same, if any."""
    entry = _cse_key(op)
    for other in (group,) if group.__class__ is Op else group:  # type: ignore[union-attr]
        if _twin(op, entry, other):  # type: ignore[arg-type]
            return other
    return None


def _earlier_constant(op: Op, constants: dict[Hashable, Op],
                      sampled: dict[Hashable, Op | dict[Hashable, list[Op]]]) -> Op | None:
    """The kept op without operands met before `op` that computes the same, if
    any; else `op` is recorded as the first with its key and types."""
    entry = _constant_key(op)
    if entry is None:
        return None
    key, is_sampled = entry
    if is_sampled:
        group = sampled.setdefault(key, op)
        if group is op:
            return None
        if group.__class__ is Op:  # a second op with this key: now group them by types
            group = sampled[key] = {_result_types(group): [group]}
        candidates = group.setdefault(_result_types(op), [])  # type: ignore[union-attr]
        first = next((c for c in candidates if _same_arrays(c, op)), None)
        if first is None:
            candidates.append(op)
        return first
    first = constants.setdefault(key, op)
    if first is op:
        return None
    if _same_result_types(first, op):
        return first
    first = constants.setdefault((key, _result_types(op)), op)
    return None if first is op else first


def _result_types(op: Op) -> Hashable:
    """The op's result types as a dict key."""
    results = op.results
    return results[0].type if len(results) == 1 else tuple(v.type for v in results)


def cse(module: Module) -> int:
    """Merge identical pure ops in every graph; returns the number removed."""
    return sum(cse_graph(graph) for graph in module.graphs.values())
