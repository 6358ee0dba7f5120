"""Values, ops, graphs and modules: the one in-memory IR every stage works on.

An op is a name (`tfl.conv_2d`, `tosa.rescale`, `quant.qcast`), operand values,
result values and attributes (plain Python values; numpy arrays for constants).
Graphs keep ops in topological order and every value knows its uses, so a
rewrite replaces uses without scanning the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import chain, filterfalse, repeat
from operator import attrgetter
from typing import Any

from tfl2tosa.errors import IRError
from tfl2tosa.ir.types import Type


class Value:
    """An SSA value: a graph input (owner None) or an op result."""

    __slots__ = ("name", "type", "owner", "index", "uses")

    def __init__(self, name: str, type: Type, owner: Op | None = None, index: int = 0) -> None:
        self.name = name
        self.type = type
        self.owner = owner
        self.index = index
        self.uses: list[tuple[Op, int]] = []

    def __repr__(self) -> str:
        return f"Value({self.name!r}: {self.type})"

    def replace_all_uses_with(self, new: Value) -> None:
        if new is self:
            return
        for op, i in self.uses:
            op.operands[i] = new
            new.uses.append((op, i))
        self.uses = []


class Op:
    """One operation. `loc` says where it came from (TFLite subgraph/op index/tensor)."""

    __slots__ = ("name", "operands", "results", "attrs", "loc")

    def __init__(self, name: str, operands: Iterable[Value], result_types: Iterable[Type],
                 attrs: dict[str, Any] | None = None, *, result_names: Iterable[str] = (),
                 loc: str = "") -> None:
        self.name = name
        self.operands: list[Value] = list(operands)
        for i, value in enumerate(self.operands):
            if value.__class__ is not Value and not isinstance(value, Value):
                raise IRError(f"{name}: operand {i} is {type(value).__name__}, not a Value")
            value.uses.append((self, i))
        names = result_names if isinstance(result_names, (list, tuple)) else list(result_names)
        if names and result_types.__class__ is list and len(result_types) == 1:
            self.results = [Value(names[0], result_types[0], self)]  # most ops
        else:
            count = len(names)
            self.results = [Value(names[i] if i < count else "", t, self, i)
                            for i, t in enumerate(result_types)]
        self.attrs: dict[str, Any] = dict(attrs) if attrs else {}
        self.loc = loc

    @classmethod
    def assemble(cls, name: str, operands: list[Value], result_types: list[Type],
                 result_names: list[str], attrs: dict[str, Any], loc: str = "") -> Op:
        """An op from parts the caller vouches for: every operand is a Value and
        `result_names` names every result. The op keeps `operands` and `attrs`
        (no copies). For readers that build an op per model operator; `Op(...)` checks
        its operands and copies its arguments."""
        op = cls.__new__(cls)
        op.name = name
        op.operands = operands
        for i, value in enumerate(operands):
            value.uses.append((op, i))
        if len(result_types) == 1:  # most ops
            op.results = [Value(result_names[0], result_types[0], op)]
        else:
            op.results = [Value(result_name, result_type, op, i) for i, (result_name, result_type)
                          in enumerate(zip(result_names, result_types))]
        op.attrs = attrs
        op.loc = loc
        return op

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def opname(self) -> str:
        """The name without its dialect: `conv_2d` for `tfl.conv_2d`."""
        return self.name.split(".", 1)[-1]

    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise IRError(f"{self.name} has {len(self.results)} results, not one")
        return self.results[0]

    def set_operand(self, index: int, value: Value) -> None:
        old = self.operands[index]
        old.uses.remove((self, index))
        self.operands[index] = value
        value.uses.append((self, index))

    def drop_operand_uses(self) -> None:
        for i, value in enumerate(self.operands):
            try:
                value.uses.remove((self, i))
            except ValueError:
                pass

    def __repr__(self) -> str:
        ins = ", ".join(v.name for v in self.operands)
        outs = ", ".join(v.name for v in self.results)
        return f"Op({self.name}({ins}) -> {outs})"


class Graph:
    """A function: inputs, ops in topological order, outputs.

    `signature` carries TFLite signature-def names for inputs/outputs where known.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.ops: list[Op] = []
        self.attrs: dict[str, Any] = {}
        self._names: set[str] = set()
        # base -> the last suffix given to it: names are never released, so the
        # next free `base_N` is past it (keeps naming linear, not quadratic).
        self._last_suffix: dict[str, int] = {}

    def unique_name(self, base: str) -> str:
        """`base` if unused in this graph, else `base_1`, `base_2`, ..."""
        base = base or "t"
        names = self._names
        if base not in names:
            names.add(base)
            return base
        n = self._last_suffix.get(base, 0) + 1
        name = f"{base}_{n}"
        while name in names:
            n += 1
            name = f"{base}_{n}"
        self._last_suffix[base] = n
        names.add(name)
        return name

    def add_input(self, name: str, type: Type) -> Value:
        value = Value(self.unique_name(name), type)
        self.inputs.append(value)
        return value

    def append(self, op: Op) -> Op:
        self._name_results(op)
        self.ops.append(op)
        return op

    def extend(self, ops: Iterable[Op]) -> None:
        """Append each op in turn (as `append` does)."""
        for op in ops:
            self._name_results(op)
            self.ops.append(op)

    def _name_results(self, op: Op) -> None:
        names = self._names
        for value in op.results:
            name = value.name
            # unique_name's first case inline: most results already have a free name.
            if name and name not in names:
                names.add(name)
            else:
                value.name = self.unique_name(name or op.opname)

    def set_outputs(self, outputs: Iterable[Value]) -> None:
        self.outputs = list(outputs)

    def replace_value(self, old: Value, new: Value) -> None:
        """Replace every use of `old` (including as a graph output) with `new`."""
        old.replace_all_uses_with(new)
        if old in self.outputs:  # values compare by identity
            self.outputs = [new if v is old else v for v in self.outputs]

    def erase_dead_ops(self) -> int:
        """Remove ops whose results are unused and that are not graph outputs.

        Ops with side effects (`attrs["side_effect"]`, or the known stateful
        names in SIDE_EFFECT_OPS) are kept. Returns the number removed.
        """
        live_outputs = {id(v) for v in self.outputs}
        # An op only dies after an op dead from the start is removed. Where every
        # op has results and every result is used or a graph output, none is:
        # map, chain and filterfalse find that without a Python step per op.
        ops = self.ops
        if all(map(_RESULTS, ops)) and all(
                id(v) in live_outputs
                for v in filterfalse(_USES, chain.from_iterable(map(_RESULTS, ops)))):
            return 0
        kept: list[Op] = []
        removed = 0
        for op in reversed(self.ops):
            results = op.results
            if len(results) == 1:  # most ops
                value = results[0]
                used = bool(value.uses) or id(value) in live_outputs
            else:
                used = any(v.uses or id(v) in live_outputs for v in results)
            if used or op.name in SIDE_EFFECT_OPS or op.attrs.get("side_effect"):
                kept.append(op)
            else:
                op.drop_operand_uses()
                removed += 1
        kept.reverse()
        self.ops = kept
        return removed

    def values(self) -> Iterator[Value]:
        yield from self.inputs
        for op in self.ops:
            yield from op.results

    def verify_structure(self) -> None:
        """Check SSA dominance (topological order) and use lists; raise IRError."""
        defined = {id(v) for v in self.inputs}
        for op in self.ops:
            for i, v in enumerate(op.operands):
                if id(v) not in defined:
                    raise IRError(f"{self.name}: {op.name} ({op.loc or 'no location'}) uses "
                                  f"{v.name!r} before it is defined (cycle or missing producer)")
                if (op, i) not in v.uses:
                    raise IRError(f"{self.name}: use list of {v.name!r} misses {op.name}")
            defined.update(id(v) for v in op.results)
        for v in self.outputs:
            if id(v) not in defined:
                raise IRError(f"{self.name}: output {v.name!r} is not defined")

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {len(self.inputs)} inputs, {len(self.ops)} ops)"


# Ops that must survive dead-code elimination even when their results are unused,
# and that CSE never merges: a VARIABLE_READ's value depends on the writes before it,
# and a loop or branch may write variables even when none of its results is used.
SIDE_EFFECT_OPS = frozenset({
    "tfl.assign_variable", "tfl.call_once", "tosa.variable", "tosa.variable_write",
    "tosa.variable_read", "tosa.custom", "tosa.while_loop", "tosa.cond_if",
})


_RESULTS = attrgetter("results")  # an op's
_USES = attrgetter("uses")  # a value's


class Module:
    """Named graphs; the first (usually `main`) is the entry point."""

    def __init__(self) -> None:
        self.graphs: dict[str, Graph] = {}
        self.attrs: dict[str, Any] = {}

    def add_graph(self, graph: Graph) -> Graph:
        if graph.name in self.graphs:
            raise IRError(f"module already has a graph named {graph.name!r}")
        self.graphs[graph.name] = graph
        return graph

    @property
    def main(self) -> Graph:
        if not self.graphs:
            raise IRError("module has no graphs")
        return next(iter(self.graphs.values()))

    def ops(self) -> Iterator[tuple[Graph, Op]]:
        """(graph, op) for every op of every graph, in order (each graph's op
        list as it is when its turn comes). Several passes walk every op:
        zip and chain make the pairs without a Python frame per op."""
        return chain.from_iterable(zip(repeat(graph), graph.ops)
                                   for graph in self.graphs.values())

    def __repr__(self) -> str:
        return f"Module({list(self.graphs)})"


# How a dialect's ops print (ir.printer reads these). Kept here rather than in
# the printer so that a dialect registers without loading the printer, which
# converting to .tosa does not use.
# dialect name -> formatter(op, attribute name, value) returning MLIR text or None
AttrFormatter = Callable[[Op, str, Any], str | None]
ATTR_FORMATTERS: dict[str, AttrFormatter] = {}

# dialect name -> printer(op, operand names) returning the op's custom form
# without results and location (`quant.qcast %0 : tensor<4xf32> to ...`), or
# None to fall back to the generic form. The `quant` dialect registers one.
OpPrinter = Callable[[Op, list[str]], str | None]
OP_PRINTERS: dict[str, OpPrinter] = {}
