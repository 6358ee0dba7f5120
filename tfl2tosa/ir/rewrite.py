"""The pattern-rewrite driver: find a pattern by op name, call it, replace uses.

A pattern is `pattern(op, rewriter) -> list[Value] | Failure | None`:
- a list of values replaces the op's results, one for one;
- `Failure(reason)` (or None) means "does not match"; the reason is recorded.
  A Failure is truthy, so checks compose: `if failed := require_float(op):
  return failed`, or `return require_float(op) or require_static(op) or ...`.
Patterns never mutate the graph themselves; they create ops through the
rewriter, which places them where the matched op stood.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tfl2tosa.errors import IRError
from tfl2tosa.ir.builder import Builder
from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.types import Frozen


class Failure(Frozen):
    """A pattern's "no match", with the reason a user would want to read
    (immutable, compared by its reason)."""

    reason: str

    _fields = ("reason",)

    def __init__(self, reason: str) -> None:
        # _set, written out: patterns that do not apply make one each.
        state = self.__dict__
        state["reason"] = reason
        state["_k"] = (reason,)


PatternResult = Sequence[Value] | Failure | None
Pattern = Callable[[Op, "Rewriter"], PatternResult]


class Rewriter(Builder):
    """A Builder positioned at the op being rewritten. `disabled` holds the
    pattern labels switched off, for patterns that delegate to other patterns."""

    def __init__(self, graph: Graph, ops: list[Op], op: Op,
                 disabled: frozenset[str] = frozenset()) -> None:
        base = op.results[0].name if op.results else op.opname
        super().__init__(graph, ops, name_base=base, loc=op.loc)
        self.matched = op
        self.disabled = disabled


class RewriteRecord:
    """What a rewrite did: which patterns applied and why others did not."""

    def __init__(self, applied: list[tuple[Op, str]] | None = None,
                 failures: list[tuple[Op, str]] | None = None) -> None:
        self.applied: list[tuple[Op, str]] = [] if applied is None else applied
        self.failures: list[tuple[Op, str]] = [] if failures is None else failures

    def extend(self, other: RewriteRecord) -> None:
        self.applied.extend(other.applied)
        self.failures.extend(other.failures)


def _pattern_name(pattern: Pattern) -> str:
    return getattr(pattern, "__name__", repr(pattern))


def rewrite_graph(graph: Graph, patterns: Mapping[str, Pattern | Sequence[Pattern]],
                  *, fixpoint: bool = False, max_iterations: int = 32) -> RewriteRecord:
    """Apply patterns keyed by op name to every op of `graph`.

    Several patterns for one name are tried in order; the first match wins.
    With `fixpoint`, ops created by patterns are visited again until nothing
    changes (for canonicalization); otherwise each original op is visited once.
    """
    record = RewriteRecord()
    for _ in range(max_iterations):
        changed = _rewrite_once(graph, patterns, record)
        if not (fixpoint and changed):
            return record
    raise IRError(f"{graph.name}: rewriting did not converge in {max_iterations} iterations")


def _rewrite_once(graph: Graph, patterns: Mapping[str, Pattern | Sequence[Pattern]],
                  record: RewriteRecord) -> bool:
    new_ops: list[Op] = []
    changed = False
    for op in graph.ops:
        candidates = patterns.get(op.name)
        if candidates is None:
            new_ops.append(op)
            continue
        if callable(candidates):
            candidates = [candidates]
        reasons = []
        for pattern in candidates:
            mark = len(new_ops)
            rewriter = Rewriter(graph, new_ops, op)
            result = pattern(op, rewriter)
            if isinstance(result, Failure) or result is None:
                discard_since(new_ops, mark)
                reasons.append(result.reason if isinstance(result, Failure)
                               else f"{_pattern_name(pattern)} does not apply")
                continue
            replace_op(graph, op, list(result))
            record.applied.append((op, _pattern_name(pattern)))
            changed = True
            break
        else:
            new_ops.append(op)
            record.failures.append((op, "; ".join(reasons)))
    graph.ops = new_ops
    return changed


def discard_since(ops: list[Op], mark: int) -> None:
    """Undo ops a failed pattern created before giving up."""
    for created in reversed(ops[mark:]):
        created.drop_operand_uses()
    del ops[mark:]


def replace_op(graph: Graph, op: Op, values: list[Value]) -> None:
    if len(values) != len(op.results):
        raise IRError(f"pattern for {op.name} returned {len(values)} values for "
                      f"{len(op.results)} results")
    # Values this rewrite created are named `<first result's name>/<op>` (the
    # Rewriter's name base); each final value takes the name of the tensor it
    # replaces, so names keep pointing back at the TFLite tensors. A value
    # returned for two results is renamed once.
    if len(values) == 1:  # most ops: the loop below, for one result
        old, new = op.results[0], values[0]
        if new.owner is not None and new.name.startswith(old.name + "/"):
            new.name, old.name = old.name, new.name
        graph.replace_value(old, new)
        op.drop_operand_uses()
        return
    base = op.results[0].name + "/" if op.results else None
    renamed: set[int] = set()
    for old, new in zip(op.results, values):
        created_here = new.name.startswith(old.name + "/") or (
            base is not None and new.name.startswith(base))
        if new.owner is not None and created_here and id(new) not in renamed:
            new.name, old.name = old.name, new.name
            renamed.add(id(new))
        graph.replace_value(old, new)
    op.drop_operand_uses()


def rewrite_module(module: Module, patterns: Mapping[str, Pattern | Sequence[Pattern]],
                   **kwargs: bool | int) -> RewriteRecord:
    record = RewriteRecord()
    for graph in module.graphs.values():
        record.extend(rewrite_graph(graph, patterns, **kwargs))  # type: ignore[arg-type]
    return record
