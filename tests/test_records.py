"""The hand-written records (tfl2tosa.ir.types.Record and Frozen) behave as the
`dataclasses` they replace: each is held to a dataclass with the same name and
fields, built by `dataclasses.make_dataclass`, on repr, equality, hashing,
`asdict`, `replace`, pickling and assignment."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from legalize.driver import LegalizeResult, OpOutcome
from legalize.registry import Registered
from legalize.resize import AxisScale
from tfl2tosa.ir.types import FrozenInstanceError, Record
from tfl2tosa.pipeline import ConversionReport


def twin(record: type, frozen: bool, defaults: dict[str, object]) -> type:
    """The dataclass `record` was before: same name, fields and defaults."""
    fields = [(name, object, dataclasses.field(default_factory=defaults[name]))
              if callable(defaults.get(name)) else
              (name, object, dataclasses.field(default=defaults[name]))
              if name in defaults else (name, object) for name in record._fields]
    return dataclasses.make_dataclass(record.__name__, fields, frozen=frozen)


OUTCOME_TWIN = twin(OpOutcome, True, {"pattern": "", "reason": "", "weights": ""})
REPORT_TWIN = twin(ConversionReport, False, {
    "kernels": "reference", "ops_in": dict, "ops_out": dict, "outcomes": list,
    "composites": list, "extensions": list, "errors": list, "timings": dict,
    "hybrid": "emulate"})

OUTCOME_ARGS = ("tfl.conv_2d", "main:op0:CONV_2D", "i8,i8,i32 -> i8", "integer")


def test_frozen_record_is_its_dataclass():
    ours, theirs = OpOutcome(*OUTCOME_ARGS, pattern="conv"), OUTCOME_TWIN(*OUTCOME_ARGS,
                                                                          pattern="conv")
    assert repr(ours) == repr(theirs)
    assert ours.to_dict() == dataclasses.asdict(theirs)
    assert list(ours.to_dict()) == list(dataclasses.asdict(theirs))
    same, other = OpOutcome(*OUTCOME_ARGS, pattern="conv"), OpOutcome(*OUTCOME_ARGS)
    assert ours == same and hash(ours) == hash(same)
    assert (ours == other) == (theirs == OUTCOME_TWIN(*OUTCOME_ARGS))
    assert ours != theirs  # another class, as between two dataclasses
    assert repr(ours.replace(reason="why")) == repr(dataclasses.replace(theirs, reason="why"))
    with pytest.raises(TypeError):
        ours.replace(colour="red")
    with pytest.raises(TypeError):
        dataclasses.replace(theirs, colour="red")


def test_assigning_to_a_frozen_record_raises_an_attribute_error():
    outcome = OpOutcome(*OUTCOME_ARGS)
    for record in (outcome, OUTCOME_TWIN(*OUTCOME_ARGS)):
        with pytest.raises(AttributeError):
            record.path = "float"  # type: ignore[misc]
        with pytest.raises(AttributeError):
            del record.path  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        outcome.path = "float"  # type: ignore[misc]


def test_frozen_record_pickles_to_an_equal_one():
    outcome = OpOutcome(*OUTCOME_ARGS, reason="why")
    hash(outcome)  # the cached hash is not pickled
    copy = pickle.loads(pickle.dumps(outcome))
    assert copy == outcome and hash(copy) == hash(outcome) and repr(copy) == repr(outcome)
    scale = AxisScale(2, 1, 0, -1)
    assert pickle.loads(pickle.dumps(scale)) == scale


def test_mutable_record_is_its_dataclass():
    kwargs = {"model": "m.tflite", "ops_in": {"tfl.add": 1},
              "outcomes": [{"op_name": "tfl.add", "path": "float"}],
              "composites": [{"name": "c", "attributes": {"axes": [1, 2], "eps": 1e-6}}],
              "hybrid": "float"}
    ours, theirs = ConversionReport(**kwargs), REPORT_TWIN(**kwargs)
    assert repr(ours) == repr(theirs)
    assert repr(ConversionReport("m")) == repr(REPORT_TWIN("m"))
    data, expected = ours.to_dict(), dataclasses.asdict(theirs)
    assert data.pop("summary") == {"integer": 0, "float": 1, "fallback": 0, "unsupported": 0}
    assert data == expected and list(data) == list(expected)
    # Copies, not the report's own containers.
    data["composites"][0]["attributes"]["axes"].append(3)
    assert ours.composites[0]["attributes"]["axes"] == [1, 2]
    # Fresh defaults for each record, as default_factory gives.
    first, second = ConversionReport("a"), ConversionReport("b")
    first.errors.append("x")
    assert second.errors == [] == REPORT_TWIN("b").errors
    assert ConversionReport(**kwargs) == ours
    assert pickle.loads(pickle.dumps(ours)) == ours
    ours.errors = ["changed"]
    assert ConversionReport(**kwargs) != ours
    with pytest.raises(TypeError):
        hash(ours)
    with pytest.raises(TypeError):
        hash(theirs)


def test_to_dict_copies_nested_records():
    outcome = OpOutcome(*OUTCOME_ARGS)
    result = LegalizeResult([outcome])
    assert result.to_dict() == {"outcomes": [outcome.to_dict()]}
    twin_result = twin(LegalizeResult, False, {})([OUTCOME_TWIN(*OUTCOME_ARGS)])
    assert result.to_dict() == dataclasses.asdict(twin_result)


def test_records_of_functions_compare_and_hash_by_fields():
    def lower(op, rw):
        return None

    a = Registered(lower, "p", "float", ("tfl.add",), ("f32",))
    b = Registered(lower, "p", "float", ("tfl.add",), ("f32",))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a.weights == () and a != Registered(lower, "p", "float", ("tfl.add",), ("f32",), (1,))


def test_record_is_the_one_base():
    assert issubclass(OpOutcome, Record) and issubclass(ConversionReport, Record)
    assert issubclass(FrozenInstanceError, AttributeError)
