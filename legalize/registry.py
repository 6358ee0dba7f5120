"""The pattern registry: TFL op name -> the patterns that lower it, in order.

A pattern is a function `(op, rewriter) -> list[Value] | Failure | None` (see
`tfl2tosa.ir.rewrite`). It is registered for one or more TFL op names with
`@pattern("tfl.add", "tfl.sub")`; its label (the function name unless given)
is what `--disable LABEL` switches off. `kind` declares which ops it lowers,
and the driver hands it no other (`serves`):

- "float": ops on float32/float16/bfloat16/int32/bool data, with no quantized
  tensor; with `weights` (operand indices) also ops whose only quantized
  tensors are constants at those operands, which it dequantizes at conversion;
- "integer": ops with quantized tensors, in integer arithmetic bit exact with
  TFLite (`types` names the storage types it serves);
- "hybrid": ops whose only quantized tensors are constant weights, computed as
  TFLite's hybrid (dynamic-range) kernels do;
- "any": every op (type-generic data movement).

`types` declares which element-type columns of the coverage table the pattern
serves (the README's table is generated from these declarations). An op's
patterns are tried by kind (`KINDS`), then in the order of their family
modules in `legalize.MODULES`, then in source order; the first that returns
values wins. Order matters only between patterns that serve the same op.

Custom ops (TFLite's CUSTOM operator, told apart by its custom code) are
registered under `custom_op("Code")`, i.e. `tfl.custom:Code`, beside the
builtin names; `op_key` sends a custom op to its code's patterns, and an
unknown code to `tfl.custom`'s, which refuses it by name.

Family modules are imported on demand: `patterns_for` imports the modules
the generated index (`legalize/pattern_index.py`, see `legalize/index.py`)
names for an op, so converting a model loads only what its ops need.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

from tfl2tosa.ir.core import Op
from tfl2tosa.ir.rewrite import Pattern
from tfl2tosa.ir.types import Frozen


class Registered(Frozen):
    fn: Pattern
    label: str
    kind: str  # "float" | "integer" | "hybrid" | "any"
    op_names: tuple[str, ...]
    types: tuple[str, ...]
    weights: tuple[int, ...]  # operands a float pattern takes as quantized constants

    _fields = ("fn", "label", "kind", "op_names", "types", "weights")

    def __init__(self, fn: Pattern, label: str, kind: str, op_names: tuple[str, ...],
                 types: tuple[str, ...], weights: tuple[int, ...] = ()) -> None:
        self._set(fn, label, kind, op_names, types, weights)


# Coverage-table columns: float32, float16, int32, bool; int8, uint8, int16x8;
# int4 weights (declared only by the patterns that read int4 constants).
FLOAT_COLUMNS = ("f32", "f16", "i32", "bool")
QUANTIZED_COLUMNS = ("i8", "u8", "i16")
WEIGHT_COLUMNS = ("i4",)
DEFAULT_TYPES = {"float": ("f32", "f16"), "integer": ("i8", "u8"), "hybrid": ("f32",),
                 "any": FLOAT_COLUMNS + QUANTIZED_COLUMNS}


PATTERNS: dict[str, list[Registered]] = {}
LABELS: dict[str, Registered] = {}
# (op name, kinds) -> its patterns of those kinds in the order they are tried,
# worked out once per op (every op of every model asks); registering a pattern
# starts it afresh.
_ORDERED: dict[tuple[str, tuple[str, ...]], list[Registered]] = {}
# The kinds in the order their patterns are tried where several serve one op:
# TFLite's hybrid arithmetic before the float lowering of dequantized weights,
# type-generic data movement before the integer patterns (the uint8 wrappers
# come first among those: `legalize.integer.data` leads the module list).
KINDS = ("hybrid", "float", "any", "integer")


def try_order(entry: Registered, module_rank: dict[str, int]) -> tuple[int, int]:
    """Where `entry` stands among an op's patterns: by kind, then by its
    module's place in `module_rank` (then, the sort being stable, by source order)."""
    return KINDS.index(entry.kind), module_rank[entry.fn.__module__]


def pattern(*op_names: str, kind: str = "float", label: str | None = None,
            types: tuple[str, ...] | None = None,
            weights: tuple[int, ...] = ()) -> Callable[[Pattern], Pattern]:
    """Register `fn` as a lowering of each of `op_names` (`tfl.xxx`).

    A function may be registered more than once, under other labels and
    kinds, when one lowering serves both paths (a label per path, as the
    conversion report names them)."""
    if kind not in KINDS:
        raise ValueError(f"pattern kind must be one of {KINDS}, not {kind!r}")
    if weights and kind != "float":
        raise ValueError("only a float pattern declares quantized constant weights")
    types = DEFAULT_TYPES[kind] if types is None else tuple(types)
    unknown = set(types) - set(FLOAT_COLUMNS + QUANTIZED_COLUMNS + WEIGHT_COLUMNS)
    if unknown:
        raise ValueError(f"unknown coverage columns {sorted(unknown)}")

    def register(fn: Pattern) -> Pattern:
        name = label or fn.__name__
        if name in LABELS:
            raise RuntimeError(f"two patterns labelled {name!r}")
        entry = Registered(fn, name, kind, tuple(op_names), types, tuple(weights))
        LABELS[name] = entry
        for op_name in op_names:
            PATTERNS.setdefault(op_name, []).append(entry)
        _ORDERED.clear()
        return fn

    return register


def _index() -> dict[str, tuple[tuple[str, str], ...]]:
    from legalize.pattern_index import PATTERNS as index

    return index


def _registered(op_name: str, kinds: tuple[str, ...]) -> list[Registered]:
    """The patterns of `op_name` of `kinds` in the order a full import tries
    them, importing the modules that register them first (only those: a
    float model needs no hybrid or uint8 module)."""
    request = (op_name, kinds)
    cached = _ORDERED.get(request)
    if cached is not None:
        return cached
    from legalize.pattern_index import KINDS as kind_of

    indexed = _index().get(op_name, ())
    for module, label in indexed:
        kind = kind_of.get(label)  # None: a (stale) index's unknown label, imported
        if kind is None or kind in kinds:
            importlib.import_module(module)
    ordered = [LABELS[label] for _, label in indexed
               if label in LABELS and LABELS[label].kind in kinds]
    # A pattern the (stale) index does not know yet still runs, last.
    ordered += [e for e in PATTERNS.get(op_name, ()) if e not in ordered and e.kind in kinds]
    _ORDERED[request] = ordered
    return ordered


CUSTOM = "tfl.custom"


def custom_op(custom_code: str) -> str:
    """The registry key of the custom op `custom_code`."""
    return f"{CUSTOM}:{custom_code}"


def op_key(op: Op) -> str:
    """The registry key `op`'s patterns are found under: its name, or for a
    custom op with patterns of its own, `custom_op(its custom code)`."""
    if op.name != CUSTOM:
        return op.name
    key = custom_op(str(op.attrs.get("custom_code", "")))
    return key if key in _index() or key in PATTERNS else CUSTOM


def known_custom_ops() -> list[str]:
    """The custom codes that have patterns, without importing the patterns."""
    prefix = custom_op("")
    return sorted(key[len(prefix):] for key in {*_index(), *PATTERNS} if key.startswith(prefix))


def patterns_for(op_name: str, disabled: frozenset[str] = frozenset(),
                 kinds: tuple[str, ...] = KINDS) -> list[Registered]:
    """`op_name`'s patterns of `kinds` (in `KINDS` order) not `disabled`, in the
    order they are tried."""
    return [p for p in _registered(op_name, kinds) if p.label not in disabled]


@functools.cache
def known_labels() -> frozenset[str]:
    """Every pattern label (what `--disable` accepts), without importing the patterns."""
    return frozenset(label for entries in _index().values() for _, label in entries)
