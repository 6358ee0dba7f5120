"""One set of TOSA rules (`tfl2tosa.tosa.rules`) read by two checkers: a graph that
breaks a rule is reported by the verifier on its declared types and raised as a
SpecErrorIf by the reference model, in the same words. Each case breaks one rule
of a valid single-op graph from tests/tosa_graphs.py."""

from __future__ import annotations

import re

import numpy as np
import pytest
from tosa_graphs import build_case

import reference_model
from tfl2tosa.errors import SpecErrorIf
from tfl2tosa.ir.types import TensorType
from tfl2tosa.tosa.ops import OPS
from tfl2tosa.tosa.verify import verify


def _mode(op_name: str, mode_name: str):
    return next(m for m in OPS[op_name].modes if m.name == mode_name)


def _op(case, op_name: str):
    return next(o for o in case.module.main.ops if o.name == OPS[op_name].mlir)


def _set_attr(name, value):
    def breaking(case, op):
        op.attrs[name] = value
    return breaking


def _result_dim(dimension, delta):
    def breaking(case, op):
        shape = list(op.results[0].type.shape)
        shape[dimension] += delta
        op.results[0].type = TensorType(tuple(shape), op.results[0].type.element)
    return breaking


def _tile_multiples(case, op):
    op.operands[1].owner.attrs["values"] = [0, 1]


def _two_zero_points(case, op):
    zp = op.operands[1].owner
    zp.attrs["values"] = np.zeros(2, zp.attrs["values"].dtype)
    zp.results[0].type = TensorType((2,), zp.results[0].type.element)


CASES = [
    ("rescale_multiplier_type", "RESCALE", "8-bit to 8-bit", _set_attr("scale32", False),
     "multiplier must be i16 when scale32 is False"),
    ("conv2d_acc_type", "CONV2D", "signed 8x8 with int32 accumulate",
     _set_attr("acc_type", "FP32"), "acc_type FP32 does not fit"),
    ("conv2d_output_size", "CONV2D", "fp32 with fp32 accumulate", _result_dim(1, 1),
     "output dimension 1 must be"),
    ("max_pool2d_pad", "MAX_POOL2D", "fp32", _set_attr("pad", [3, 0, 0, 0]),
     "must be smaller than the kernel"),
    ("reverse_axis", "REVERSE", "fp32", _set_attr("axis", 5), "axis 5 is out of range"),
    ("reduce_sum_output", "REDUCE_SUM", "fp32", _result_dim(0, 1), "output shape must be"),
    ("clamp_bounds", "CLAMP", "fp32", _set_attr("max_val", -7.0), "is smaller than min_val"),
    ("tile_multiples", "TILE", "fp32", _tile_multiples, "multiples [0, 1] must be positive"),
    ("transpose_perms", "TRANSPOSE", "fp32", _set_attr("perms", [0, 0]),
     "is not a permutation"),
    ("negate_zero_point_values", "NEGATE", "signed 8", _two_zero_points,
     "'input1_zp' must have shape [1] (one value), got [2]"),
]


@pytest.mark.parametrize("op_name, mode_name, breaking, message",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_verifier_and_the_reference_model_apply_one_rule(op_name, mode_name, breaking,
                                                             message):
    case = build_case(op_name, _mode(op_name, mode_name))
    assert verify(case.module, raise_on_error=False) == []
    breaking(case, _op(case, op_name))
    violations = verify(case.module, raise_on_error=False)
    assert any(message in v.message for v in violations), violations
    with pytest.raises(SpecErrorIf, match=f"ERROR_IF .*{re.escape(message)}"):
        reference_model.run(case.module, case.inputs)
