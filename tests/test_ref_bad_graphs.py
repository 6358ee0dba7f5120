"""Invalid TOSA graphs the fuzz tests found escaping as internal errors: each now
ends in the project's error type (the `.tosa` reader or an ERROR_IF of the
reference model), before any large allocation."""

from __future__ import annotations

import numpy as np
import pytest
from tosa_graphs import build_case

import reference_model
from tfl2tosa.errors import SpecErrorIf, Tfl2TosaError, TosaFileError
from tfl2tosa.ir.types import TensorType
from tfl2tosa.tosa.ops import OPS
from tfl2tosa.tosa.reader import read_tosa
from tfl2tosa.tosa.writer import write_tosa

# Attributes whose absence the flatbuffer cannot mean as a default (a scalar 0 or
# false is simply not stored): vectors, enums without a default, names, values.
MISSING = [(name, attr.name) for name, definition in OPS.items() if definition.modes
           for attr in definition.attrs
           if not attr.optional and attr.fbs_field and attr.type not in ("i32", "bool")]


@pytest.mark.parametrize("op_name, attribute", MISSING,
                         ids=[f"{op}-{attr}" for op, attr in MISSING])
def test_the_reader_refuses_an_operator_without_a_required_attribute(op_name, attribute):
    case = build_case(op_name, OPS[op_name].modes[0], 0)
    op = next(o for o in case.module.main.ops if o.name == OPS[op_name].mlir)
    del op.attrs[attribute]
    with pytest.raises(TosaFileError, match=rf"{op_name}.*attribute {attribute} is missing"):
        read_tosa(write_tosa(case.module))


def _case(op_name: str):
    case = build_case(op_name, OPS[op_name].modes[0], 0)
    return case, {o.name: o for o in case.module.main.ops}


def _set_constant(op, values: np.ndarray) -> None:
    op.attrs["values"] = values
    op.results[0].type = TensorType(values.shape, op.results[0].type.element)


@pytest.mark.parametrize("op_name, shape_values", [
    ("PAD", [1 << 40, 0, 0, 2]),        # 2^40 rows of padding for a declared [3, 5]
    ("TILE", [1 << 40, 1]),             # 2^40 copies for a declared [4, 3]
    ("RESHAPE", [1, (1 << 62) + 1, 4]),  # 4 elements only after int64 wrap-around
], ids=["pad", "tile", "reshape"])
def test_a_shape_operand_that_disagrees_with_the_result_is_an_error_if(op_name, shape_values):
    case, ops = _case(op_name)
    ops["tosa.const_shape"].attrs["values"] = shape_values
    if op_name == "RESHAPE":  # 4 input elements: what the wrapped product says
        x = case.module.main.inputs[0]
        x.type = TensorType((4,), x.type.element)
        case.inputs[0] = np.ones(4, case.inputs[0].dtype)
    with pytest.raises(SpecErrorIf):
        reference_model.run(case.module, case.inputs)


def test_a_mul_shift_without_a_value_is_an_error_if():
    case, _ = _case("MUL")
    shift = [o for o in case.module.main.ops if o.name == "tosa.const"][-1]
    _set_constant(shift, np.zeros(0, np.int8))
    with pytest.raises(Tfl2TosaError, match="shift"):
        reference_model.run(case.module, case.inputs)


def test_a_rescale_zero_point_without_a_value_is_an_error_if():
    case, _ = _case("RESCALE")
    rescale = next(o for o in case.module.main.ops if o.name == "tosa.rescale")
    _set_constant(rescale.operands[3].owner, np.zeros(0, np.int8))
    with pytest.raises(Tfl2TosaError, match="zp"):
        reference_model.run(case.module, case.inputs)


@pytest.mark.parametrize("op_name", ["AVG_POOL2D", "MAX_POOL2D", "CONV2D", "DEPTHWISE_CONV2D",
                                     "TRANSPOSE_CONV2D"])
def test_a_window_op_whose_result_has_another_rank_is_an_error_if(op_name):
    case, _ = _case(op_name)
    op = next(o for o in case.module.main.ops if o.name == OPS[op_name].mlir)
    result = op.results[0]
    result.type = TensorType(result.type.shape[:2], result.type.element)  # rank 2, not 4
    with pytest.raises(SpecErrorIf, match="result has rank 2, not 4"):
        reference_model.run(case.module, case.inputs)


def test_a_float_convolution_with_a_signalling_nan_weight_runs_without_a_warning():
    """The prepared convolution widens the weights to float64; a signalling NaN
    (a mutant's spliced bytes) is quieted there, which numpy reports as an invalid
    cast. The result is NaN, as the general kernel gives, and nothing is printed."""
    import warnings

    fp32 = next(m for m in OPS["CONV2D"].modes if m.name == "fp32 with fp32 accumulate")
    case = build_case("CONV2D", fp32)
    weights = next(o for o in case.module.main.ops
                   if o.name == "tosa.const" and o.results[0].type.shape
                   and len(o.results[0].type.shape) == 4)
    values = np.array(weights.attrs["values"], dtype=np.float32)
    values.view(np.uint32).flat[0] = 0x7FA00000  # a signalling NaN
    weights.attrs["values"] = values
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outputs = reference_model.run(case.module, case.inputs)
    assert np.isnan(np.concatenate([np.ravel(o) for o in outputs.values()])).any()
