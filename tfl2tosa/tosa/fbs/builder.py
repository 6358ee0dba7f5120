"""A lean flatbuffer builder that lays bytes out exactly as `flatbuffers.Builder` does.

The writer spends most of its time in `flatbuffers.Builder`: every scalar goes
through alignment (`Prep`), a range check and a generic `Place`. This class
keeps the same algorithm, so files stay byte for byte what that builder
writes, with less work per call: the buffer is zero-filled, so padding is a
move of `head`; scalars are packed with precompiled structs; vtables are
written in one pack; vectors of offsets and of int32 are written in one pack.

It answers the calls the flatc-generated TOSA code makes (`StartObject`,
`Prepend<Type>Slot`, `PrependUOffsetTRelativeSlot`, `EndObject`, `StartVector`)
and the ones the writer makes. A table the writer builds many times (an
operator, a tensor, an attribute table) is built by `Table` in one call, from
a `TableLayout` read once from the generated `<Table>Start` and
`<Table>Add<Field>` functions: the same bytes as those calls. Which fields are
present and the start's alignment fix a table's padding, field positions and
vtable, so each such combination is worked out once (`_TablePlan`) and its
tables are then one struct pack each. `StringVectorsTables` writes a block's
operators (each one's attribute table, input and output name vectors, location
and table), mostly one pack each; `Int32VectorTable` a tensor and its shape in one.

The layout rules followed (see flatbuffers' python/flatbuffers/builder.py):
the buffer grows downwards from its end, offsets are distances from the end,
a scalar is aligned to its own size, a vector's length word to 4 bytes with
its elements aligned after it, an object's vtable is written after it and
shared with any earlier object whose field offsets (trailing empty fields
dropped) are the same.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter, ne, sub
from typing import Any

import numpy as np

# flatbuffers' size limit for a buffer (its Builder.MAX_BUFFER_SIZE).
MAX_BUFFER_SIZE = 2 ** 31

_BOOL = struct.Struct("<?")
_UINT8 = struct.Struct("<B")
_UINT16 = struct.Struct("<H")
_INT32 = struct.Struct("<i")
_UINT32 = struct.Struct("<I")
_UINT64 = struct.Struct("<Q")
# flatbuffers' type name of each scalar slot's packer, for its range error
_TYPE_NAMES = {_BOOL: "bool", _UINT8: "uint8", _INT32: "int32", _UINT32: "uint32",
               _UINT64: "uint64"}


_VECTOR_PACKERS: dict[tuple[str, int], struct.Struct] = {}


def _vector_packer(code: str, count: int) -> struct.Struct:
    """The struct of a vector's length word and `count` elements of format `code`."""
    packer = _VECTOR_PACKERS.get((code, count))
    if packer is None:
        packer = _VECTOR_PACKERS[code, count] = struct.Struct(f"<I{count}{code}")
    return packer


class OffsetArithmeticError(ValueError):
    """An offset that points forward in the buffer: a table or vector used before it is built."""


class Builder:
    """Builds one flatbuffer back to front, as `flatbuffers.Builder(size)` would."""

    def __init__(self, size: int = 1024) -> None:
        self.Bytes = bytearray(size)
        self.head = size
        self.minalign = 1
        self._vtable: list[int] = []
        self._object_end = 0
        self._vtables: dict[tuple[int, ...], int] = {}
        self._plan_vtables: dict[_TablePlan, int] = {}  # `_vtables` of a plan's vtable key
        self._vector_length = 0
        self._shared: dict[str, int] = {}
        self._last_table: tuple[int, _TablePlan] | None = None  # when `Table` packed it whole
        # `StringVectorsTables`' packs by (layout, text layout) and shape, and
        # the parts they are made of: tails by shape, children by (layout, values)
        self._row_plans: dict[tuple[TableLayout, TableLayout],
                              dict[tuple[Any, ...], _RowPlan]] = {}
        self._tails: dict[tuple[Any, ...], _TailPlan] = {}
        self._children: dict[tuple[Any, ...], _ChildPlan] = {}
        # `Int32VectorTables`' packs by (layout, values, length)
        self._vector_tables: dict[tuple[Any, ...], _VectorTablePlan] = {}

    # -- positions and space

    def Offset(self) -> int:
        """The current position as a distance from the buffer's end."""
        return len(self.Bytes) - self.head

    def Prep(self, size: int, additional: int) -> None:
        """Pad so that `size`-aligned data can follow `additional` more bytes."""
        self.minalign = max(self.minalign, size)
        pad = -(len(self.Bytes) - self.head + additional) & (size - 1)
        while self.head < pad + size + additional:
            self._grow()
        self.head -= pad  # the buffer is zero-filled: padding is already in place

    def _grow(self) -> None:
        old = len(self.Bytes)
        if old >= MAX_BUFFER_SIZE:
            raise ValueError("flatbuffers: cannot grow buffer beyond 2 gigabytes")
        new = min(2 * old, MAX_BUFFER_SIZE) or 1
        grown = bytearray(new)
        grown[new - old:] = self.Bytes
        self.Bytes = grown
        self.head += new - old

    def _prep4(self, additional: int) -> int:
        """Prep(4, additional), returning the new head: the alignment of every
        offset, length word and vtable offset, said once for the calls below."""
        if self.minalign < 4:
            self.minalign = 4
        pad = (self.head - len(self.Bytes) - additional) & 3
        while self.head < pad + 4 + additional:
            self._grow()
        self.head -= pad
        return self.head

    def _place(self, packer: struct.Struct, value: int | bool) -> None:
        self.head -= packer.size
        packer.pack_into(self.Bytes, self.head, value)

    def PrependUOffsetTRelative(self, offset: int) -> None:
        """An offset field: the distance from where it is written to `offset`."""
        pad = (self.head - len(self.Bytes)) & 3
        if self.head < pad + 4 or self.minalign < 4:
            self.Prep(4, 0)  # the general case: grow, record the alignment
        else:
            self.head -= pad
        here = len(self.Bytes) - self.head
        if offset > here:
            raise OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
        self.head -= 4
        _UINT32.pack_into(self.Bytes, self.head, here - offset + 4)

    # -- tables

    def StartObject(self, field_count: int) -> None:
        self._vtable = [0] * field_count
        self._last_table = None
        self._object_end = self.Offset()

    def Slot(self, slot: int) -> None:
        self._vtable[slot] = self.Offset()

    def _scalar_slot(self, packer: struct.Struct, type_name: str, slot: int,
                     value: int | bool, default: int | bool) -> None:
        if value != default:
            self.Prep(packer.size, 0)
            try:
                packer.pack_into(self.Bytes, self.head - packer.size, value)
            except struct.error:
                # flatbuffers' own wording for a value out of the field's range
                raise TypeError(f"bad number {value} for type {type_name}") from None
            self.head -= packer.size
            self._vtable[slot] = len(self.Bytes) - self.head

    def PrependBoolSlot(self, slot: int, value: bool, default: bool) -> None:
        self._scalar_slot(_BOOL, "bool", slot, value, default)

    def PrependUint8Slot(self, slot: int, value: int, default: int) -> None:
        self._scalar_slot(_UINT8, "uint8", slot, value, default)

    def PrependInt32Slot(self, slot: int, value: int, default: int) -> None:
        self._scalar_slot(_INT32, "int32", slot, value, default)

    def PrependUint32Slot(self, slot: int, value: int, default: int) -> None:
        self._scalar_slot(_UINT32, "uint32", slot, value, default)

    def PrependUint64Slot(self, slot: int, value: int, default: int) -> None:
        self._scalar_slot(_UINT64, "uint64", slot, value, default)

    def PrependUOffsetTRelativeSlot(self, slot: int, offset: int, default: int) -> None:
        if offset != default:
            self.PrependUOffsetTRelative(offset)
            self._vtable[slot] = len(self.Bytes) - self.head

    def EndObject(self) -> int:
        """Write the object's vtable offset and its vtable (or point at an equal one)."""
        self.head = self._prep4(0) - 4  # the object's vtable offset, written below
        object_offset = len(self.Bytes) - self.head
        vtable = self._vtable
        used = len(vtable)
        while used and not vtable[used - 1]:
            used -= 1
        key = tuple([object_offset - at if at else 0 for at in vtable[:used]])
        existing = self._vtables.get(key)
        if existing is not None:
            _INT32.pack_into(self.Bytes, self.head, existing - object_offset)
            return object_offset
        fields = key
        # vtable: its size, the object's size, then one uint16 per field
        entries = [2 * (used + 2), object_offset - self._object_end, *fields]
        size = 2 * len(entries)
        self.Prep(2, size)
        self.head -= size
        struct.pack_into(f"<{len(entries)}H", self.Bytes, self.head, *entries)
        _INT32.pack_into(self.Bytes, len(self.Bytes) - object_offset,
                         self.Offset() - object_offset)
        self._vtables[key] = self.Offset()
        return object_offset

    def Table(self, layout: TableLayout, values: Sequence[Any]) -> int:
        """A whole table: what `<Table>Start`, one `<Table>Add<Field>` per value in
        `layout`'s order and `<Table>End` write. A value equal to its field's
        default is left out, as the generated functions leave it out.

        Which fields are present and where the table starts (modulo its widest
        field) fix its whole layout: padding, field positions, vtable. That
        layout is worked out once (`_TablePlan`) and the table, its vtable
        already written, is then one struct pack; anything else (a vtable not
        yet written, a buffer to grow, a value the pack refuses) goes through
        `_table_by_fields`, which writes what the generated code would, or
        raises its error."""
        head = self.head
        start = len(self.Bytes) - head
        present = tuple(map(ne, values, layout.defaults))
        plan = layout.plans[start & layout.align_mask].get(present)
        if plan is None:
            plan = layout.plans[start & layout.align_mask][present] = _TablePlan(
                layout, present, start & layout.align_mask)
        vtable = self._plan_vtables.get(plan)
        if vtable is None:
            vtable = self._vtables.get(plan.vtable_key)
            if vtable is None:
                return self._table_by_fields(layout, values)
            self._plan_vtables[plan] = vtable
        size = plan.size
        if head < size:
            return self._table_by_fields(layout, values)
        args = list(plan.present_values(values))
        for at, delta in plan.offsets:
            if args[at] > start:  # not yet built: let the general path refuse it
                return self._table_by_fields(layout, values)
            args[at] = start + delta - args[at]
        object_offset = start + size
        try:
            plan.packer.pack_into(self.Bytes, head - size, vtable - object_offset, *args)
        except struct.error:
            return self._table_by_fields(layout, values)
        self.head = head - size
        if self.minalign < plan.minalign:
            self.minalign = plan.minalign
        self._last_table = (start, plan)
        return object_offset

    def StringVectorsTable(self, layout: TableLayout, values: tuple[Any, ...],
                           child: int | tuple[TableLayout, tuple[Any, ...]],
                           string_lists: Sequence[Sequence[str]],
                           text_layout: TableLayout, text: str) -> int:
        """A table whose fields are `values` (numbers), then `child`, then one
        vector of shared strings per list in `string_lists`, then (if `text` is
        not empty) a table of `text_layout` holding `text` as its one string;
        else that field is 0. `child` is the offset of a table built before, or
        a table's (layout, values) to build here first: a TOSA operator, its
        attribute table, inputs, outputs and location.

        The same bytes as `Table` for the child, `CreateSharedStringVector` per
        list, `CreateString` and `Table` twice (see `StringVectorsTables`)."""
        if len(string_lists) == 2:
            first, last = string_lists
            return self.StringVectorsTables(layout, text_layout,
                                            ((values, child, first, last, text),))[0]
        return self._string_vectors_table(layout, values, child, string_lists,
                                          text_layout, text)

    def StringVectorsTables(self, layout: TableLayout, text_layout: TableLayout,
                            rows: Iterable[tuple[tuple[Any, ...],
                                                 int | tuple[TableLayout, tuple[Any, ...]],
                                                 Sequence[str], Sequence[str], str]]
                            ) -> list[int]:
        """`StringVectorsTable(layout, values, child, (first, last), text_layout,
        text)` of each row (values, child, first, last, text), one after
        another: the operators of a block.

        Each piece those calls write leaves the buffer 4-aligned, so once it
        is, the pieces follow one another without padding but the strings'.
        The usual operator (its child a table of numbers only or one built
        before, inputs whose names are written, one result whose name is not,
        a location) is then one pack: from the lowest address, the table, the
        location's table, its text, the outputs vector, the result's name, the
        inputs vector and the child unless built before (`_RowPlan`), laid out
        once per shape: the table's numbers, the child's, the input count and
        the padded sizes of the text and the name. Any other row, or one whose
        tables' vtables are not yet written, takes the general calls."""
        plans = self._row_plans.get((layout, text_layout))
        if plans is None:
            plans = self._row_plans[layout, text_layout] = {}
        shared = self._shared
        offsets: list[int] = []
        for values, child, first, last, text in rows:
            head = self.head
            data = self.Bytes
            if child and len(last) == 1 and text and not (head - len(data)) & 3 \
                    and last[0] not in shared:
                raw = text.encode()
                name_raw = last[0].encode()
                # A child built before (an offset) is no part of the shape.
                key = (values, child if child.__class__ is tuple else None, len(first),
                       (len(raw) + 4) & -4, (len(name_raw) + 8) & -4)
                try:
                    plan = plans.get(key)
                except TypeError:  # not hashable: not numbers only
                    plan = None
                else:
                    if plan is None:
                        plan = self._row_plan(layout, text_layout, plans, key)
                inputs = list(map(shared.get, first))
                if plan is not None and None not in inputs:
                    size = plan.size
                    if head < size:
                        while self.head < size:
                            self._grow()
                        head, data = self.head, self.Bytes
                    start = len(data) - head  # where the child (if packed here) ends
                    if plan.child_fields is None:
                        child_offset = child
                        packed_child: tuple[Any, ...] = ()
                        if child_offset > start:  # not yet built: the general calls refuse it
                            offsets.append(self._string_vectors_table(
                                layout, values, child, (first, last), text_layout, text))
                            continue
                    else:
                        child_offset = start + plan.child_size
                        packed_child = (plan.vtable - child_offset, plan.child_fields)
                    top = start + plan.inputs_from_start  # input i is `top - 4 * i` from the end
                    count = len(inputs)
                    if count == 1:
                        input_fields: Any = (top - inputs[0],)
                    elif count == 2:
                        input_fields = (top - inputs[0], top - 4 - inputs[1])
                    else:
                        input_fields = map(sub, range(top, top - 4 * count, -4), inputs)
                    name = top + plan.name_from_inputs
                    table_top = name + 4  # the outputs vector's one element
                    plan.packer.pack_into(
                        data, head - size, plan.table_vtable_from_top - table_top,
                        plan.table_constants, table_top + plan.child_from_top - child_offset,
                        plan.table_constants_after_child, plan.text_vtable_from_top - table_top,
                        plan.text_constants, len(raw), raw, plan.outputs, len(name_raw),
                        name_raw, plan.inputs_head, *input_fields, *packed_child)
                    shared[last[0]] = name
                    self.head = head - size
                    self._last_table = (table_top + plan.table_start_from_top, plan.table_plan)
                    offsets.append(table_top + plan.table_end_from_top)
                    continue
            offsets.append(self._string_vectors_table(layout, values, child, (first, last),
                                                      text_layout, text))
        return offsets

    def _row_plan(self, layout: TableLayout, text_layout: TableLayout,
                  plans: dict[tuple[Any, ...], _RowPlan], key: tuple[Any, ...]) -> _RowPlan | None:
        """`StringVectorsTables`' pack for `key`, made once the vtables of its
        child (if packed with it), table and text table are written (None until
        then)."""
        values, child, count, text_size, name_size = key
        packed = None
        if child is not None:
            packed = self._children.get(child)
            if packed is None:
                packed = self._child_plan(*child)
                if packed is None:
                    return None
        tail_key = (layout, values, text_layout, 1, text_size)
        tail = self._tails.get(tail_key)
        if tail is None:
            tail = self._tail_plan(tail_key)
            if tail is None:
                return None
        plan = plans[key] = _RowPlan(packed, tail, count, name_size)
        return plan

    def _string_vectors_table(self, layout: TableLayout, values: tuple[Any, ...],
                              child: int | tuple[TableLayout, tuple[Any, ...]],
                              string_lists: Sequence[Sequence[str]],
                              text_layout: TableLayout, text: str) -> int:
        """`StringVectorsTable` by the general calls."""
        fields = list(values)
        fields.append(self.Table(*child) if child.__class__ is tuple else child)  # type: ignore[misc]
        fields += [self.CreateSharedStringVector(texts) for texts in string_lists]
        fields.append(self.Table(text_layout, (self.CreateString(text),)) if text else 0)
        return self.Table(layout, fields)

    def _child_plan(self, layout: TableLayout, values: tuple[Any, ...]) -> _ChildPlan | None:
        """The packed bytes of a table of numbers only, its vtable already written
        and its start 4-aligned; None where that does not hold (yet)."""
        if layout.align_mask != 3:
            return None
        present = tuple(map(ne, values, layout.defaults))
        plan = layout.plans[0].get(present)
        if plan is None or plan.offsets:
            return None
        vtable = self._vtables.get(plan.vtable_key)
        if vtable is None:
            return None
        try:
            fields = plan.packer.pack(0, *plan.present_values(values))[4:]
        except struct.error:  # out of its fields' range: `Table` says which
            return None
        try:
            child = self._children[layout, values] = _ChildPlan(plan.size, fields, vtable)
        except TypeError:
            return None
        return child

    def _tail_plan(self, key: tuple[Any, ...]) -> _TailPlan | None:
        """The tail of `StringVectorsTables`' packs for `key`, made once both its tables'
        vtables are written (None until then)."""
        layout, values, text_layout, count, text_size = key
        if layout.align_mask != 3 or text_layout.align_mask != 3 \
                or len(text_layout.fields) != 1 or len(layout.fields) != len(values) + 4:
            return None
        present = tuple(map(ne, values, layout.defaults)) + (True,) * 4
        table_plan = layout.plans[0].get(present)
        if table_plan is None:
            table_plan = layout.plans[0][present] = _TablePlan(layout, present, 0)
        text_plan = text_layout.plans[0].get(_ONE_FIELD)
        if text_plan is None:
            text_plan = text_layout.plans[0][_ONE_FIELD] = _TablePlan(text_layout, _ONE_FIELD, 0)
        table_vtable = self._vtables.get(table_plan.vtable_key)
        text_vtable = self._vtables.get(text_plan.vtable_key)
        if table_vtable is None or text_vtable is None or len(text_plan.offsets) != 1 \
                or table_plan.minalign > 4:
            return None
        tail = self._tails[key] = _TailPlan(table_plan, table_vtable, text_plan, text_vtable,
                                            values, count, text_size)
        return tail

    def Int32VectorTable(self, layout: TableLayout, first: int, ints: Sequence[int],
                         values: tuple[Any, ...]) -> int:
        """A table whose first field is `first` (the offset of something built
        before), its second a vector of the int32s `ints` built right before it
        (`CreateInt32Vector`), then `values` (numbers, or offsets left out as 0):
        a tensor, its name and shape (see `Int32VectorTables`)."""
        return self.Int32VectorTables(layout, ((first, ints, values, None),))[0]

    def Int32VectorTables(self, layout: TableLayout,
                          rows: Iterable[tuple[int, Sequence[int], tuple[Any, ...],
                                               Callable[[], None] | None]]) -> list[int]:
        """`Int32VectorTable(layout, first, ints, values)` of each row (first,
        ints, values, then), one after another, calling `then` (unless None)
        right after its row's table is written, when `FieldOffset` tells where
        the table's fields are: the tensors of a block. Once the buffer is
        4-aligned and the table's vtable written, a row's vector and table are
        one pack (`_VectorTablePlan`)."""
        plans = self._vector_tables
        offsets: list[int] = []
        for first, ints, values, then in rows:
            head = self.head
            count = len(ints)
            if not (head - len(self.Bytes)) & 3 and self.minalign >= 4 and first:
                key = (layout, values, count)
                packed = plans.get(key)
                if packed is None:
                    packed = self._vector_table_plan(key)
                if packed is not None and head >= packed.size:
                    size = packed.size
                    start = len(self.Bytes) - head + 4 * count + 4  # the vector's and the table's
                    if first > start:
                        raise OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
                    try:
                        packed.packer.pack_into(
                            self.Bytes, head - size, packed.vtable_from_start - start,
                            packed.before_first, start + packed.first_from_start - first,
                            packed.after_first, *ints)
                    except struct.error:  # a value out of range: the general calls refuse it
                        pass
                    else:
                        self.head = head - size
                        self._last_table = (start, packed.plan)
                        offsets.append(start + packed.plan.size)
                        if then is not None:
                            then()
                        continue
            offsets.append(self.Table(layout, (first, self.CreateInt32Vector(ints), *values)))
            if then is not None:
                then()
        return offsets

    def _vector_table_plan(self, key: tuple[Any, ...]) -> _VectorTablePlan | None:
        """`Int32VectorTable`'s pack for `key`, once its table's vtable is written
        (None until then)."""
        layout, values, count = key
        if layout.align_mask != 3 or len(layout.fields) != len(values) + 2 or any(
                packer is None and value != default
                for (_, packer, default), value in zip(layout.fields[2:], values)):
            return None  # not numbers only
        present = (True, True, *map(ne, values, layout.defaults[2:]))
        plan = layout.plans[0].get(present)
        if plan is None or plan.minalign > 4:
            return None
        vtable = self._vtables.get(plan.vtable_key)
        if vtable is None:
            return None
        packed = self._vector_tables[key] = _VectorTablePlan(plan, vtable, values, count)
        return packed

    def _table_by_fields(self, layout: TableLayout, values: Sequence[Any]) -> int:
        """`Table` field by field, as the generated functions write it."""
        data = self.Bytes
        end = len(data)
        head = self.head
        self._vtable = vtable = [0] * layout.field_count
        self._object_end = end - head
        self._last_table = None
        for (slot, packer, default), value in zip(layout.fields, values):
            if value == default:
                continue
            size = 4 if packer is None else packer.size
            if self.minalign < size:
                self.minalign = size
            pad = (head - end) & (size - 1)  # Prep(size, 0)
            while head < pad + size:
                self.head = head
                self._grow()
                data, head = self.Bytes, self.head
                end = len(data)
            head -= pad
            if packer is None:  # PrependUOffsetTRelative(value)
                here = end - head
                if value > here:
                    self.head = head
                    raise OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
                head -= 4
                _UINT32.pack_into(data, head, here - value + 4)
            else:
                try:
                    packer.pack_into(data, head - size, value)
                except struct.error:
                    self.head = head
                    raise TypeError(f"bad number {value} for type "
                                    f"{_TYPE_NAMES[packer]}") from None
                head -= size
            vtable[slot] = end - head
        self.head = head
        return self.EndObject()

    def FieldOffset(self, slot: int) -> int:
        """Where the last table written put field `slot`, as a distance from the
        buffer's end (what `Offset()` said right after the field was written)."""
        if self._last_table is not None:
            start, plan = self._last_table
            return start + plan.field_ends[slot]
        return self._vtable[slot]

    # -- vectors and strings

    def StartVector(self, element_size: int, count: int, alignment: int) -> int:
        self.Prep(4, element_size * count)
        if alignment > 4:  # after the length word's alignment, 1, 2 and 4 hold too
            self.Prep(alignment, element_size * count)
        self._vector_length = count
        return self.Offset()

    def EndVector(self) -> int:
        self._place(_UINT32, self._vector_length)
        return self.Offset()

    def CreateString(self, text: str) -> int:
        raw = text.encode()
        size = len(raw)
        head = self._prep4(size + 1) - size - 1  # the terminating zero is already there
        self.Bytes[head:head + size] = raw
        head -= 4
        _UINT32.pack_into(self.Bytes, head, size)
        self.head = head
        return len(self.Bytes) - head

    def CreateSharedString(self, text: str) -> int:
        offset = self._shared.get(text)
        if offset is None:
            offset = self._shared[text] = self.CreateString(text)
        return offset

    def CreateSharedStringVector(self, texts: Sequence[str]) -> int:
        """A vector of strings, each written once per buffer (`CreateSharedString`)."""
        try:
            offsets = list(map(self._shared.__getitem__, texts))
        except KeyError:  # a string's first use: written before the vector, in order
            offsets = list(map(self.CreateSharedString, texts))
        return self.CreateOffsetVector(offsets)

    def CreateNumpyVector(self, array: np.ndarray) -> int:
        """A vector of a 1-D little-endian numpy array's elements."""
        self.StartVector(array.itemsize, array.size, array.dtype.alignment)
        raw = array.tobytes()
        self.head -= len(raw)
        self.Bytes[self.head:self.head + len(raw)] = raw
        return self.EndVector()

    def CreateInt32Vector(self, values: Sequence[int]) -> int:
        count = len(values)
        head = self._prep4(4 * count) - 4 * count - 4
        _vector_packer("i", count).pack_into(self.Bytes, head, count, *values)
        self.head = head
        return len(self.Bytes) - head

    def CreateOffsetVector(self, offsets: Sequence[int]) -> int:
        """A vector of offsets to tables or strings, in the given order."""
        count = len(offsets)
        data = self.Bytes
        head = self.head
        pad = (head - len(data)) & 3  # Prep(4, 4 * count): the elements keep 4-alignment
        if head < pad + 4 * count + 4 or self.minalign < 4:
            head = self._prep4(4 * count)
            data = self.Bytes
        else:
            head -= pad
        # Element i is written where the buffer is `top - 4 * i` from its end.
        top = len(data) - head + 4 * count
        if offsets and max(offsets) > top - 4 * count:
            raise OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
        head -= 4 * count + 4
        _vector_packer("I", count).pack_into(
            data, head, count, *map(sub, range(top, top - 4 * count, -4), offsets))
        self.head = head
        return len(data) - head

    def CreateByteVector(self, raw: bytes, alignment: int = 1) -> int:
        self.StartVector(1, len(raw), alignment)
        self.head -= len(raw)
        self.Bytes[self.head:self.head + len(raw)] = raw
        return self.EndVector()

    # -- the root

    def Finish(self, root: int, file_identifier: bytes) -> None:
        self.Prep(self.minalign, 8)
        self.Prep(4, 4)
        self.head -= 4
        self.Bytes[self.head:self.head + 4] = file_identifier
        self.PrependUOffsetTRelative(root)

    def Output(self) -> bytearray:
        return self.Bytes[self.head:]


# `present` of a table whose one field is given
_ONE_FIELD = (True,)


class TableLayout:
    """A table's field count and, in the order the writer adds them, each field's
    (slot, packer or None for an offset, default), as the generated code has them."""

    __slots__ = ("align_mask", "defaults", "field_count", "fields", "plans")

    def __init__(self, field_count: int,
                 fields: tuple[tuple[int, struct.Struct | None, Any], ...]) -> None:
        self.field_count = field_count
        self.fields = fields
        self.defaults = tuple(default for _, _, default in fields)
        # A start position modulo the widest alignment decides every padding.
        self.align_mask = max([4] + [packer.size for _, packer, _ in fields if packer]) - 1
        # per start & align_mask: {fields present: its plan}, made when first met
        self.plans: list[dict[tuple[bool, ...], _TablePlan]] = [
            {} for _ in range(self.align_mask + 1)]


class _TablePlan:
    """One table's bytes for a given set of present fields and start alignment:
    the struct that packs its vtable offset and fields (padding included), which
    values go in it, and the vtable it needs, all worked out once by following
    `Prep` and `EndObject` from a start position with that alignment."""

    __slots__ = ("field_ends", "indices", "minalign", "offsets", "packer", "present_values",
                 "size", "vtable_key")

    def __init__(self, layout: TableLayout, present: tuple[bool, ...], residue: int) -> None:
        pos = residue  # a stand-in start: only its alignment matters
        placed: list[tuple[int, str, int]] = []  # (distance from end, format, value index)
        self.minalign = 4
        self.field_ends: dict[int, int] = {}
        ends = [0] * layout.field_count
        for index, ((slot, packer, _), is_present) in enumerate(zip(layout.fields, present)):
            if not is_present:
                continue
            size = 4 if packer is None else packer.size
            self.minalign = max(self.minalign, size)
            pos += (-pos & (size - 1)) + size
            placed.append((pos, "I" if packer is None else packer.format[-1], index))
            ends[slot] = pos
            self.field_ends[slot] = pos - residue
        object_offset = pos + (-pos & 3) + 4
        self.size = object_offset - residue
        used = len(ends)
        while used and not ends[used - 1]:
            used -= 1
        self.vtable_key = tuple([object_offset - at if at else 0 for at in ends[:used]])
        # Lowest address first: the vtable offset, then the fields last added first.
        fmt, cursor = ["<i"], object_offset - 4
        indices: list[int] = []
        self.offsets: list[tuple[int, int]] = []  # (argument index, field end - start)
        for field_end, code, index in reversed(placed):
            field_size = struct.calcsize("<" + code)
            gap = cursor - field_end
            if gap:
                fmt.append(f"{gap}x")
            fmt.append(code)
            cursor = field_end - field_size
            if layout.fields[index][1] is None:  # an offset, made relative when packed
                self.offsets.append((len(indices), field_end - residue))
            indices.append(index)
        if cursor != residue:
            fmt.append(f"{cursor - residue}x")
        self.packer = struct.Struct("".join(fmt))
        self.indices = tuple(indices)  # the index in `values` of each packed value
        # values -> the present ones, in the packer's order (itemgetter of one
        # index returns the value alone)
        self.present_values: Callable[[Sequence[Any]], Sequence[Any]] = (
            itemgetter(*indices) if len(indices) > 1
            else (lambda values, at=indices[0]: (values[at],)) if indices
            else (lambda values: ()))


class _ChildPlan:
    """A table of numbers only, as `StringVectorsTables` packs it below the
    inputs vector: its size, its fields' bytes and its vtable."""

    __slots__ = ("fields", "size", "vtable")

    def __init__(self, size: int, fields: bytes, vtable: int) -> None:
        self.size = size
        self.fields = fields
        self.vtable = vtable


class _TailPlan:
    """The lower part of a `_RowPlan`, for one shape (its table's plan and
    number fields, the last vector's length, the text's padded size): from the
    lowest address up, the table, the text's table, the text and the last
    vector of strings. Every position in it is a fixed distance from `top`,
    the last vector's first element; the packed values are put in order by
    `order` from (the table's vtable offset, its child field, its first
    vector field, the text table's vtable offset, the text's length, the text,
    *`constants`)."""

    __slots__ = ("child_from_top", "constants", "first_vector_from_top", "order",
                 "packer", "size", "table_end_from_top", "table_plan", "text_plan",
                 "text_table_from_top", "text_vtable_from_top", "vtable_from_top")

    def __init__(self, table_plan: _TablePlan, table_vtable: int, text_plan: _TablePlan,
                 text_vtable: int, values: tuple[Any, ...], count: int, text_size: int) -> None:
        self.table_plan = table_plan
        self.text_plan = text_plan
        # Above `top`: the vector's length word, the text's length word, bytes,
        # terminating zero and padding, then the text table (where the table starts).
        text_from_top = 4 + 4 + text_size
        text_table = self.text_table_from_top = text_from_top + text_plan.size
        self.table_end_from_top = text_table + table_plan.size
        self.vtable_from_top = table_vtable - self.table_end_from_top
        self.text_vtable_from_top = text_vtable - text_table
        ((_, text_field),) = text_plan.offsets
        # Each packed table value's place in the tuple `order` reads: a value of
        # `values` (a constant), the child (1), the first vector (2), the last
        # vector and the text table (constants).
        given = len(values)
        place = {**{index: 6 + index for index in range(given)},
                 given: 1, given + 1: 2, given + 2: 6 + given, given + 3: 7 + given}
        deltas = dict(table_plan.offsets)  # packed value -> its field's distance from the start
        last_vector = 4  # the last vector's offset (its length word), from `top`
        self.child_from_top = self.first_vector_from_top = 0
        last_vector_field = text_table_field = 0
        for at, index in enumerate(table_plan.indices):
            if index == given:
                self.child_from_top = text_table + deltas[at]
            elif index == given + 1:
                self.first_vector_from_top = text_table + deltas[at]
            elif index == given + 2:
                last_vector_field = text_table + deltas[at] - last_vector
            elif index == given + 3:
                text_table_field = deltas[at]
        self.constants = (*values, last_vector_field, text_table_field, text_field, count)
        self.order = itemgetter(0, *[place[index] for index in table_plan.indices], 3,
                                8 + given, 4, 5, 9 + given)
        self.packer = struct.Struct("<" + table_plan.packer.format[1:]
                                    + text_plan.packer.format[1:]
                                    + f"I{text_size}sI{count}I")
        self.size = self.packer.size


class _RowPlan:
    """What `StringVectorsTables` packs for one shape of row: from the lowest
    address, the tail (`_TailPlan`: the table, the location's table and text,
    the outputs vector with its one element), the result's name (its length
    word, bytes and padding: `name_size` bytes), the inputs vector (`count`
    elements) and, unless it was built before, the child (`_ChildPlan`).

    Positions are fixed distances from `start`, the buffer's offset before
    the row: the inputs vector's first element (`top`) is `inputs_from_start`
    above it, the name `name_from_inputs` above `top` and the outputs
    vector's element (the tail's top) 4 above the name. What varies from row
    to row (the two vtable offsets, the child field, the text, the name, the
    inputs and the child's vtable offset) is packed between constant runs of
    bytes worked out once."""

    __slots__ = ("child_fields", "child_from_top", "child_size", "inputs_from_start",
                 "inputs_head", "name_from_inputs", "outputs", "packer", "size",
                 "table_constants", "table_constants_after_child", "table_end_from_top",
                 "table_plan", "table_start_from_top", "table_vtable_from_top",
                 "text_constants", "text_vtable_from_top", "vtable")

    def __init__(self, child: _ChildPlan | None, tail: _TailPlan, count: int,
                 name_size: int) -> None:
        # A child packed here: its size, fields' bytes (None: built before) and vtable
        self.child_size = child.size if child is not None else 0
        self.child_fields = child.fields if child is not None else None
        self.vtable = child.vtable if child is not None else 0
        self.inputs_from_start = self.child_size + 4 * count
        self.inputs_head = _UINT32.pack(count)
        self.name_from_inputs = 4 + name_size  # past the inputs' length word and the name
        self.table_plan = tail.table_plan
        self.table_vtable_from_top = tail.vtable_from_top
        self.text_vtable_from_top = tail.text_vtable_from_top
        self.child_from_top = tail.child_from_top
        self.table_start_from_top = tail.text_table_from_top
        self.table_end_from_top = tail.table_end_from_top
        # The tail with every varying value 0, cut into the constant runs
        # between them: the table's fields after its vtable offset (before and
        # after the child field; the inputs field's distance is the same in
        # every row), the text table's after its own vtable offset, and the
        # outputs vector (its length and element).
        inputs_field = self.name_from_inputs + 4 + tail.first_vector_from_top - 4
        sample = tail.packer.pack(*tail.order((0, 0, inputs_field, 0, 0, b"", *tail.constants)),
                                  4)
        table_size, text_table_size = tail.table_plan.size, tail.text_plan.size
        # A field `end` from the table's start lies `table size - end` bytes
        # above its lowest address.
        child_field = table_size - (tail.child_from_top - tail.text_table_from_top)
        self.table_constants = sample[4:child_field]
        self.table_constants_after_child = sample[child_field + 4:table_size]
        self.text_constants = sample[table_size + 4:table_size + text_table_size]
        self.outputs = sample[-8:]
        text_size = tail.size - table_size - text_table_size - 12
        child_format = "" if child is None else f"i{len(child.fields)}s"
        self.packer = struct.Struct(
            f"<i{len(self.table_constants)}sI{len(self.table_constants_after_child)}s"
            f"i{len(self.text_constants)}sI{text_size}s8sI{name_size - 4}s4s{count}I"
            + child_format)
        self.size = self.packer.size


class _VectorTablePlan:
    """What `Int32VectorTables` packs for one shape (the table's plan and number
    fields, the vector's length): the table, then the vector. Positions are
    fixed distances from `start`, the vector's offset and the table's start.
    What varies from row to row (the vtable offset, the first field, the
    vector's elements) is packed between constant runs of bytes worked out
    once: the table's fields before and after the first, and the vector's
    length."""

    __slots__ = ("after_first", "before_first", "first_from_start", "packer", "plan", "size",
                 "vtable_from_start")

    def __init__(self, plan: _TablePlan, vtable: int, values: tuple[Any, ...],
                 count: int) -> None:
        self.plan = plan
        self.vtable_from_start = vtable - plan.size
        deltas = dict(plan.offsets)  # packed value -> its field's distance from the start
        self.first_from_start = vector_field = 0
        for at, index in enumerate(plan.indices):
            if index == 0:
                self.first_from_start = deltas[at]
            elif index == 1:
                vector_field = deltas[at]  # the vector starts where the table does
        # The table with its vtable offset and first field 0, cut around the
        # first field, which lies `table size - its distance` above the table's
        # lowest address.
        table = plan.packer.pack(0, *plan.present_values((0, vector_field, *values)))
        first = plan.size - self.first_from_start
        self.before_first = table[4:first]
        self.after_first = table[first + 4:] + _UINT32.pack(count)
        self.packer = struct.Struct(f"<i{len(self.before_first)}sI{len(self.after_first)}s"
                                    f"{count}i")
        self.size = self.packer.size


class _LayoutProbe:
    """Stands in for a Builder to record what generated functions would write."""

    _PACKERS = {"PrependBoolSlot": _BOOL, "PrependUint8Slot": _UINT8,
                "PrependInt32Slot": _INT32, "PrependUint32Slot": _UINT32,
                "PrependUint64Slot": _UINT64, "PrependUOffsetTRelativeSlot": None}

    def __init__(self) -> None:
        self.field_count = -1
        self.fields: list[tuple[int, struct.Struct | None, Any]] = []

    def StartObject(self, field_count: int) -> None:
        self.field_count = field_count

    def __getattr__(self, name: str) -> Callable[[int, Any, Any], None]:
        if name not in self._PACKERS:
            raise AttributeError(name)
        packer = self._PACKERS[name]

        def record(slot: int, _value: Any, default: Any) -> None:
            self.fields.append((slot, packer, default))

        return record


def table_layout(start: Callable[[Any], None],
                 *adds: Callable[[Any, Any], None]) -> TableLayout:
    """The layout of the table that `start` opens, with the fields `adds` write
    (generated `<Table>Start` and `<Table>Add<Field>` functions), in that order."""
    probe = _LayoutProbe()
    start(probe)
    for add in adds:
        add(probe, 0)
    return TableLayout(probe.field_count, tuple(probe.fields))
