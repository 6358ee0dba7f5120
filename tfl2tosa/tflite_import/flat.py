"""Reading flatbuffer tables field by field with `struct`, for the tables a model
holds by the hundred (tensors, operators, buffers).

The `tflite` package's generated accessors re-read a table's vtable and
re-check every offset in several Python calls per field, a cost each of a
large model's tables pays again. A `Table` reads its vtable once and each
field in one `unpack_from`. The rules are flatbuffers' own (a field absent
from the vtable holds its default; a vector is a uint32 length followed by
its items; a string is a vector of bytes), and any bad offset raises what
`reading` turns into a ModelError: struct.error past the end, IndexError
before the start.

The few tables read once per model or per op (the model root, operator
codes, options, signatures) are read as the `tflite` package's generated
accessors read them, by a `SchemaTable`: the same reads in the same order,
so the same defaults and the same failures, without importing a module per
table. Sparsity parameters, rare, keep the generated classes.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from tfl2tosa.tflite_import.schema_data import TABLES

# Field kinds for `Table.scalar`, little-endian as flatbuffers stores them.
BOOL = struct.Struct("<?")
I8 = struct.Struct("<b")
U8 = struct.Struct("<B")
I32 = struct.Struct("<i")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
U16 = struct.Struct("<H")  # vtable entries

# Slots are vtable byte offsets: field n of a table is slot 4 + 2n (schema order).
INT32_VECTOR = np.dtype("<i4")
_EMPTY_INT32 = np.zeros(0, dtype=np.int32)
_EMPTY_INT32.flags.writeable = False


class Table:
    """One table of a flatbuffer: its position and its vtable, read once."""

    __slots__ = ("buf", "pos", "vtable", "vtable_size")

    def __init__(self, buf: Any, pos: int) -> None:
        vtable = pos - I32.unpack_from(buf, pos)[0]
        if vtable < 0:
            raise IndexError(f"a vtable at offset {vtable} is before the start of the model")
        self.buf = buf
        self.pos = pos
        self.vtable = vtable
        self.vtable_size = U16.unpack_from(buf, vtable)[0]

    def field(self, slot: int) -> int:
        """The absolute position of field `slot`, 0 if absent."""
        if slot >= self.vtable_size:
            return 0
        offset = U16.unpack_from(self.buf, self.vtable + slot)[0]
        return self.pos + offset if offset else 0

    def scalar(self, slot: int, kind: struct.Struct, default: Any = 0) -> Any:
        at = self.field(slot)
        return kind.unpack_from(self.buf, at)[0] if at else default

    def table(self, slot: int) -> Table | None:
        at = self.field(slot)
        return Table(self.buf, at + U32.unpack_from(self.buf, at)[0]) if at else None

    def union_position(self, slot: int) -> int | None:
        """Where the table of a union field starts (its type is a separate field)."""
        at = self.field(slot)
        return at + U32.unpack_from(self.buf, at)[0] if at else None

    def vector(self, slot: int) -> tuple[int, int]:
        """(position of the first item, item count) of a vector field, (0, 0) if absent."""
        at = self.field(slot)
        if not at:
            return 0, 0
        start = at + U32.unpack_from(self.buf, at)[0]
        return start + 4, U32.unpack_from(self.buf, start)[0]

    def array(self, slot: int, dtype: np.dtype = INT32_VECTOR) -> np.ndarray:
        """A numeric vector field as a numpy view into the model (empty int32 if absent)."""
        start, length = self.vector(slot)
        if not start:
            return _EMPTY_INT32
        return np.frombuffer(self.buf, dtype=dtype, count=length, offset=start)

    def string(self, slot: int) -> bytes | None:
        at = self.field(slot)
        if not at:
            return None
        start = at + U32.unpack_from(self.buf, at)[0]
        length = U32.unpack_from(self.buf, start)[0]
        return bytes(self.buf[start + 4:start + 4 + length])

    def table_offset(self, vector_start: int, index: int) -> int:
        """Where item `index` of a vector of tables starting at `vector_start` begins."""
        at = vector_start + 4 * index
        return at + U32.unpack_from(self.buf, at)[0]

    def table_at(self, vector_start: int, index: int) -> Table:
        """Item `index` of a vector of tables starting at `vector_start`."""
        return Table(self.buf, self.table_offset(vector_start, index))


_U16_RUNS = [struct.Struct(f"<{n}H") for n in range(33)]
_I32_RUNS = [struct.Struct(f"<{n}i") for n in range(9)]


def field_offsets(table: Table) -> tuple[int, ...]:
    """The offsets of a table's fields from its start, field 0 first, read from
    its vtable in one call (0: absent; fields past the vtable are absent). The
    fields are those `Table.field` reads: a slot below the vtable's size."""
    count = (table.vtable_size - 3) // 2
    if count <= 0:
        return ()
    run = _U16_RUNS[count] if count < len(_U16_RUNS) else struct.Struct(f"<{count}H")
    return run.unpack_from(table.buf, table.vtable + 4)


def int32_tuple(buf: Any, at: int) -> tuple[int, ...]:
    """The [int] vector whose offset is stored at `at`, as a tuple."""
    start = at + U32.unpack_from(buf, at)[0]
    length = U32.unpack_from(buf, start)[0]
    run = _I32_RUNS[length] if length < len(_I32_RUNS) else struct.Struct(f"<{length}i")
    return run.unpack_from(buf, start + 4)


def root(buf: Any) -> Table:
    """The root table of a flatbuffer."""
    return Table(buf, U32.unpack_from(buf, 0)[0])


# ---------------------------------------------------------------------------
# Tables read as flatc's generated Python reads them (flatbuffers.table.Table)

_STRUCTS = {kind: struct.Struct("<" + kind) for kind in "?bBhHiIqQfd"}
_UOFFSET_MAX = (1 << 32) - 1


def _uoffset(n: int) -> int:
    """flatbuffers' check of an offset before it reads there (number_types.enforce_number)."""
    if not 0 <= n <= _UOFFSET_MAX:
        raise TypeError(f"bad number {n} for type uint32")
    return n


# table name -> accessor name -> (vtable slot, kind, value type, default)
_ACCESSORS: dict[str, dict[str, tuple[int, str, str, Any]]] = {}


def accessors(table: str) -> dict[str, tuple[int, str, str, Any]]:
    """The accessors of `table` (schema_data.TABLES), by name."""
    found = _ACCESSORS.get(table)
    if found is None:
        found = _ACCESSORS[table] = {name: rest for name, *rest in TABLES[table]}
    return found


class SchemaTable:
    """A table read by its description in `schema_data.TABLES`, as the `tflite`
    package's class of that name reads it: `t.Version()`, `t.OperatorCodes(i)`,
    `t.OperatorCodesLength()`, `t.XAsNumpy()` (0 when absent), or
    `read(accessor)`. Offsets are checked where flatbuffers checks them."""

    __slots__ = ("buf", "pos", "table")

    def __init__(self, table: str, buf: Any, pos: int) -> None:
        self.table = table
        self.buf = buf
        self.pos = _uoffset(pos)

    @classmethod
    def root(cls, table: str, buf: Any) -> SchemaTable:
        return cls(table, buf, U32.unpack_from(buf, 0)[0])

    def _get(self, kind: struct.Struct, at: int) -> Any:
        return kind.unpack_from(self.buf, _uoffset(at))[0]

    def offset(self, slot: int) -> int:
        """Where field `slot` is, from the table's start (0: absent)."""
        vtable = self.pos - self._get(I32, self.pos)
        if slot < self._get(U16, vtable):
            return self._get(U16, vtable + slot)
        return 0

    def _vector(self, at: int) -> int:
        at = _uoffset(at) + self.pos
        return at + self._get(U32, at) + 4

    def _vector_length(self, at: int) -> int:
        at = _uoffset(at) + self.pos
        at += U32.unpack_from(self.buf, at)[0]
        return U32.unpack_from(self.buf, at)[0]

    def read(self, accessor: str, index: int = 0) -> Any:
        """What the generated `accessor()` (for a vector, `accessor(index)`) returns."""
        slot, kind, value_type, default = accessors(self.table)[accessor]
        at = self.offset(slot)
        if not at:
            return default
        if kind == "number":
            return self._get(_STRUCTS[value_type], at + self.pos)
        if kind == "bool":
            return bool(self._get(_STRUCTS[value_type], at + self.pos))
        if kind == "string":
            at = _uoffset(at + self.pos)
            at += U32.unpack_from(self.buf, at)[0]
            length = U32.unpack_from(self.buf, at)[0]
            return bytes(self.buf[at + 4:at + 4 + length])
        item = self._vector(at)
        if kind == "vector":
            size = _STRUCTS[value_type].size
            return self._get(_STRUCTS[value_type], item + int(index) * size)
        item += int(index) * 4
        return SchemaTable(value_type, self.buf, _uoffset(item) + U32.unpack_from(self.buf,
                                                                                 item)[0])

    def length(self, accessor: str) -> int:
        """What the generated `<accessor>Length()` returns."""
        at = self.offset(accessors(self.table)[accessor][0])
        return self._vector_length(at) if at else 0

    def as_numpy(self, accessor: str) -> np.ndarray | int:
        """What the generated `<accessor>AsNumpy()` returns: a view, or 0 when absent."""
        slot, _, value_type, _ = accessors(self.table)[accessor]
        at = self.offset(slot)
        if not at:
            return 0
        start = self._vector(at)
        return np.frombuffer(self.buf, dtype=np.dtype("<" + value_type),
                             count=self._vector_length(at), offset=start)

    def __getattr__(self, name: str) -> Any:
        """The generated class's method `name`, for code written against it."""
        if name.startswith("__"):
            raise AttributeError(name)
        described = accessors(self.table)
        if name in described:
            return lambda index=0: self.read(name, index)
        for suffix, method in (("Length", self.length), ("AsNumpy", self.as_numpy)):
            if name.endswith(suffix) and name[:-len(suffix)] in described:
                return lambda: method(name[:-len(suffix)])
        raise AttributeError(f"{self.table} has no accessor {name!r}")
