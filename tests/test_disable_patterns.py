"""`--disable LABEL` switches a pattern off everywhere, including where another
pattern delegates to it (the uint8 wrapper runs the int8 patterns)."""

from __future__ import annotations

from test_legalize_integer_data import T, check_uint8, one_op

from tfl2tosa.pipeline import convert

U8 = "UINT8"


def _uint8_add(tmp_path):
    return one_op(tmp_path, "ADD", [T((2, 5), U8, 0.02, 120), T((2, 5), U8, 0.03, 130)],
                  [T((2, 5), U8, 0.05, 125)],
                  lambda b: b.options("AddOptions"))


def test_uint8_add_takes_the_int8_pattern_through_its_twin(tmp_path):
    check_uint8(_uint8_add(tmp_path), "tfl.add", "uint8_as_int8", runs=2)


def test_disabling_the_int8_pattern_disables_it_under_the_uint8_wrapper(tmp_path):
    _, conversion = convert(_uint8_add(tmp_path), disabled={"add_int"})
    [add] = [o for o in conversion.outcomes if o["op_name"] == "tfl.add"]
    assert add["path"] == "fallback", add
