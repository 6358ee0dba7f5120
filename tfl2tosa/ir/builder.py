"""Creating ops at an insertion point, with names derived from what they replace."""

from __future__ import annotations

from typing import Any

from tfl2tosa.errors import IRError
from tfl2tosa.ir.core import Graph, Op, Value
from tfl2tosa.ir.types import Type


# op name -> its name without the dialect, the base of its results' names
_SHORT_NAMES: dict[str, str] = {}


class Builder:
    """Creates ops into `ops` (a list the caller splices into a graph).

    Results are named `<name_base>/<op short name>` so that every TOSA tensor
    can be traced back to the TFLite tensor it was lowered from; the rewrite
    driver gives the final replacement values the replaced op's own names.
    """

    def __init__(self, graph: Graph, ops: list[Op] | None = None, *, name_base: str = "",
                 loc: str = "") -> None:
        self.graph = graph
        self.ops = graph.ops if ops is None else ops
        self.name_base = name_base
        self.loc = loc
        self.created: list[Op] = []

    def create(self, name: str, operands: list[Value], result_types: list[Type],
               attrs: dict[str, Any] | None = None, *, result_names: list[str] | None = None,
               loc: str | None = None) -> Op:
        short = _SHORT_NAMES.get(name)
        if short is None:
            short = _SHORT_NAMES[name] = name.split(".", 1)[-1]
        base = f"{self.name_base}/{short}" if self.name_base else short
        unique_name = self.graph.unique_name
        if result_names:
            names = [unique_name(n) for n in result_names]
        elif len(result_types) == 1:  # most ops
            names = [unique_name(base)]
        else:
            names = [unique_name(base) for _ in result_types]
        op = Op(name, operands, result_types, attrs, result_names=names,
                loc=self.loc if loc is None else loc)
        self.ops.append(op)
        self.created.append(op)
        return op

    def op(self, name: str, operands: list[Value], result_type: Type, /, **attrs: Any) -> Value:
        """Create a single-result op and return its result."""
        return self.create(name, operands, [result_type], attrs).result

    def single(self, name: str, operands: list[Value], result_type: Type,
               attrs: dict[str, Any]) -> Value:
        """`create` for the usual op, one result named from the base: the same
        op, names and checks in one step. The op keeps `operands` and `attrs`,
        which the caller hands over."""
        short = _SHORT_NAMES.get(name)
        if short is None:
            short = _SHORT_NAMES[name] = name.split(".", 1)[-1]
        base = f"{self.name_base}/{short}" if self.name_base else short
        graph = self.graph
        names = graph._names
        if base in names:
            base = graph.unique_name(base)
        else:
            names.add(base)
        op = Op.__new__(Op)
        op.name = name
        op.operands = operands
        for i, value in enumerate(operands):
            if value.__class__ is not Value and not isinstance(value, Value):
                raise IRError(f"{name}: operand {i} is {type(value).__name__}, not a Value")
            value.uses.append((op, i))
        result = Value(base, result_type, op)
        op.results = [result]
        op.attrs = attrs
        op.loc = self.loc
        self.ops.append(op)
        self.created.append(op)
        return result
