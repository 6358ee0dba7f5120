"""The importer reads the model root, operator codes, metadata, signatures and
every builtin options table by `schema_data.py` (tfl2tosa/tflite_import/
describe.py), not by the `tflite` package's generated classes. The generated
code (flatbuffers' compiler output for schema.fbs) is the judge: the
description is current with it, and a `flat.SchemaTable` returns what the
generated accessor returns, or raises what it raises, on every table of the
zoo's models and of corrupted copies of them."""

from __future__ import annotations

import random
import struct

import flatbuffers
import numpy as np
import pytest
import tflite

from conftest import zoo_models
from tfl2tosa.tflite_import import describe, flat, schema
from tfl2tosa.tflite_import.flat import U8, SchemaTable
from tfl2tosa.tflite_import.schema_data import ENUMS, TABLES

MODELS = zoo_models()
SMALL = [p for p in MODELS if p.stat().st_size < 40_000]


def test_schema_data_is_current():
    assert describe.DATA_PATH.read_text() == describe.render(*describe.build()), (
        "tfl2tosa/tflite_import/schema_data.py is stale: run "
        "`python -m tfl2tosa.tflite_import.describe --update`")


def test_every_enum_field_and_options_table_is_described():
    assert set(schema._ENUM_FIELDS.values()) <= set(ENUMS)
    for union in ("BuiltinOptions", "BuiltinOptions2"):
        assert {n for n in ENUMS[union].values() if n != "NONE"} <= set(TABLES)
    assert schema.BUILTIN_NAMES[schema.CUSTOM_CODE] == "CUSTOM"
    assert schema.TENSOR_TYPE_NAMES == {v: k for k, v in vars(tflite.TensorType).items()
                                        if not k.startswith("_")}


def _outcome(call) -> tuple:
    """What a call returned, or raised, in a form two readers can be compared in."""
    try:
        value = call()
    except Exception as exc:  # the failure itself is what is compared
        return ("raises", type(exc).__name__, str(exc))
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.tobytes())
    if isinstance(value, SchemaTable):
        return ("table", value.pos)
    if hasattr(value, "_tab"):
        return ("table", value._tab.Pos)
    return ("value", type(value).__name__, repr(value))


def _generated(table: str, data: bytes, pos: int):
    generated = getattr(tflite, table)()
    generated.Init(data, pos)
    return generated


def _stored_code(operator_code) -> int:
    """OperatorCode.builtin_code as stored, read with the generated table's reader."""
    tab = operator_code._tab
    at = tab.Offset(10)
    return tab.Get(flatbuffers.number_types.Int32Flags, tab.Pos + at) if at else 0


def _compare(table: str, data: bytes, pos: int, tables: list[tuple[str, int]]) -> int:
    """Compare every accessor of `table` at `pos`; queue the tables it points to.
    Returns the number of readings compared."""
    ours = _outcome(lambda: SchemaTable(table, data, pos))
    assert ours[0] == _outcome(lambda: _generated(table, data, pos))[0], (table, pos)
    if ours[0] == "raises":
        assert ours == _outcome(lambda: _generated(table, data, pos))
        return 1
    mine, theirs = SchemaTable(table, data, pos), _generated(table, data, pos)
    compared = 0
    for accessor, _, kind, item_type, _ in TABLES[table]:
        if table == "OperatorCode" and accessor == "BuiltinCode":
            # Described as the stored field (the generated accessor substitutes the
            # deprecated byte below 127): judged by the generated table's raw read.
            assert _outcome(lambda: mine.read(accessor)) == _outcome(lambda: _stored_code(theirs))
            compared += 1
            continue
        if kind not in ("vector", "tables"):
            assert _outcome(lambda: mine.read(accessor)) == _outcome(
                getattr(theirs, accessor)), (table, accessor)
            compared += 1
            continue
        length = _outcome(lambda: mine.length(accessor))
        assert length == _outcome(getattr(theirs, accessor + "Length")), (table, accessor)
        if kind == "vector":
            assert _outcome(lambda: mine.as_numpy(accessor)) == _outcome(
                getattr(theirs, accessor + "AsNumpy")), (table, accessor)
        if length[0] == "value" and 0 < int(length[2]) < 1 << 20:
            for index in {0, int(length[2]) - 1}:
                got = _outcome(lambda: mine.read(accessor, index))
                assert got == _outcome(lambda: getattr(theirs, accessor)(index)), (
                    table, accessor, index)
                if kind == "tables" and got[0] == "table" and item_type in TABLES:
                    tables.append((item_type, got[1]))
        compared += 3
    return compared


def _options_tables(data: bytes) -> list[tuple[str, int]]:
    """(options table, position) of every operator, found with the importer's
    own reader (as far as a corrupted model lets them be found)."""
    found = []
    try:
        root = flat.root(data)
        start, count = root.vector(8)
        for i in range(min(count, 64)):
            operators, length = root.table_at(start, i).vector(10)
            for j in range(min(length, 4096)):
                operator = root.table_at(start, i).table_at(operators, j)
                for type_slot, table_slot, names in schema._OPTIONS_SLOTS:
                    name = names.get(operator.scalar(type_slot, U8))
                    position = operator.union_position(table_slot)
                    if name is not None and position is not None:
                        found.append((name, position))
    except (struct.error, IndexError, ValueError):
        pass
    return found


def _walk(data: bytes, tables: list[tuple[str, int]] | None = None) -> list[tuple[str, int]]:
    """Compare the two readers on every described table of a model reached from
    `tables` (by default the root and the options tables); the tables compared."""
    if tables is None:
        tables = [("Model", struct.unpack_from("<I", data, 0)[0]), *_options_tables(data)]
    seen: list[tuple[str, int]] = []
    while tables:
        entry = tables.pop()
        if entry in seen or len(seen) > 2_000:
            continue
        seen.append(entry)
        _compare(entry[0], data, entry[1], tables)
    return seen


@pytest.mark.parametrize("path", MODELS[::3], ids=lambda p: p.stem)
def test_schema_tables_read_what_generated_classes_read(path) -> None:
    assert len(_walk(path.read_bytes())) > 1


INTERESTING_32 = (0, 1, 3, 4, 0x7F, 0x80, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFC,
                  0xFFFFFFFF)
INTERESTING_16 = (0, 1, 3, 4, 0x7F, 0x7FFF, 0xFFFF)


def _mutants(data: bytes, table: int, rng: random.Random):
    """Copies of `data` with one word of the table at `table` overwritten: its
    offset to its vtable, a vtable entry, or a field's first four bytes."""
    vtable = table - struct.unpack_from("<i", data, table)[0]
    size = struct.unpack_from("<H", data, vtable)[0]
    entries = [vtable + 2 * k for k in range(size // 2)]
    fields = [table + struct.unpack_from("<H", data, e)[0] for e in entries[2:]]
    for at, values, form in ([(table, INTERESTING_32, "<I")]
                             + [(e, INTERESTING_16, "<H") for e in entries]
                             + [(f, INTERESTING_32, "<I") for f in fields if f != table]):
        for value in rng.sample(values, 4):
            mutant = bytearray(data)
            if at + struct.calcsize(form) <= len(data):
                struct.pack_into(form, mutant, at, value)
                yield bytes(mutant)


@pytest.mark.parametrize("path", SMALL[::12], ids=lambda p: p.stem)
def test_schema_tables_fail_as_generated_classes_fail_on_corrupted_models(path) -> None:
    """Each table read overwritten where a reader looks (its vtable offset,
    vtable entries, fields: offsets, lengths, values): the same values or the
    same exceptions from both readers."""
    data = path.read_bytes()
    rng = random.Random(path.name)
    intact = _walk(data)
    for table, position in intact[:40]:
        for mutant in _mutants(data, position, rng):
            _walk(mutant, [(table, position)])
