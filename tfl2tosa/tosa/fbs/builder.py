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
`<Table>Add<Field>` functions: the same bytes as those calls, in one loop. The layout rules followed (see flatbuffers'
python/flatbuffers/builder.py): the buffer grows downwards from its end,
offsets are distances from the end, a scalar is aligned to its own size, a
vector's length word to 4 bytes with its elements aligned after it, an
object's vtable is written after it and shared with any earlier object whose
field offsets (trailing empty fields dropped) are the same.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
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
        self._vector_length = 0
        self._shared: dict[str, int] = {}

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
        default is left out, as the generated functions leave it out."""
        data = self.Bytes
        end = len(data)
        head = self.head
        self._vtable = vtable = [0] * layout.field_count
        self._object_end = end - head
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
        self._vector_length = size
        return len(self.Bytes) - head

    def CreateSharedString(self, text: str) -> int:
        offset = self._shared.get(text)
        if offset is None:
            offset = self._shared[text] = self.CreateString(text)
        return offset

    def CreateSharedStringVector(self, texts: Sequence[str]) -> int:
        """A vector of strings, each written once per buffer (`CreateSharedString`)."""
        shared = self._shared
        offsets: list[int] = []
        for text in texts:
            offset = shared.get(text)
            if offset is None:
                offset = shared[text] = self.CreateString(text)
            offsets.append(offset)
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
        head = self._prep4(4 * count) - 4 * count
        struct.pack_into(f"<{count}i", self.Bytes, head, *values)
        head -= 4
        _UINT32.pack_into(self.Bytes, head, count)
        self.head = head
        self._vector_length = count
        return len(self.Bytes) - head

    def CreateOffsetVector(self, offsets: Sequence[int]) -> int:
        """A vector of offsets to tables or strings, in the given order."""
        count = len(offsets)
        head = self._prep4(4 * count)
        # Element i sits 4 * (count - i) bytes further from the end than `base`.
        base = len(self.Bytes) - head
        if offsets and max(offsets) > base:
            raise OffsetArithmeticError("flatbuffers: Offset arithmetic error.")
        head -= 4 * count
        struct.pack_into(f"<{count}I", self.Bytes, head,
                         *[base + 4 * (count - i) - offset for i, offset in enumerate(offsets)])
        head -= 4
        _UINT32.pack_into(self.Bytes, head, count)
        self.head = head
        self._vector_length = count
        return len(self.Bytes) - head

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


class TableLayout:
    """A table's field count and, in the order the writer adds them, each field's
    (slot, packer or None for an offset, default), as the generated code has them."""

    __slots__ = ("field_count", "fields")

    def __init__(self, field_count: int,
                 fields: tuple[tuple[int, struct.Struct | None, Any], ...]) -> None:
        self.field_count = field_count
        self.fields = fields


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
