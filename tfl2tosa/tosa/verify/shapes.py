"""Shape and attribute rules of the tensor, elementwise and data-layout
operators (the specification's ERROR_IF conditions), by specification op name:
each applies the rules of `tfl2tosa.tosa.rules`, which the reference model's
kernels apply too, to an op's declared shapes and constant operands.

A rule runs once per op signature (`OpCheck`): what it reads of constant
operands' values it reads in a deferred check (`OpCheck.defer`), and a rule
registered with `reads_values` is deferred whole. A rule registered with
`reads_shapes` (RESHAPE, SLICE, ...) is deferred whole too, but reads only the
first input's and the result's types and the values of the `shape_t` operands:
its problems are kept per those types and the ops that make the shape
operands (patterns share one `tosa.const_shape` among their ops), for the walk."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tfl2tosa.ir.types import ShapeType
from tfl2tosa.tosa import rules
from tfl2tosa.tosa.verify.op_check import OpCheck, int_list, shape_of

ShapeRule = Callable[[OpCheck], None]
SHAPE_RULES: dict[str, ShapeRule] = {}
# A rule of shape operands' values: an op's check -> the problems it finds.
ShapeValuesRule = Callable[[OpCheck], list[str]]


def rule(*names: str, reads_values: bool = False) -> Callable[[ShapeRule], ShapeRule]:
    """Register a rule; `reads_values`: it reads constant operands or other ops
    throughout, so it runs on every op."""
    def register(fn: ShapeRule) -> ShapeRule:
        for name in names:
            SHAPE_RULES[name] = (lambda c: c.defer(fn)) if reads_values else fn
        return fn
    return register


def shapes_rule(*names: str) -> Callable[[ShapeValuesRule], ShapeValuesRule]:
    """Register a rule that reads only the first input's and the result's types and
    the values of the other operands (shape_t operands): it runs on every op, its
    problems kept per those types and the ops making the other operands."""
    def register(fn: ShapeValuesRule) -> ShapeValuesRule:
        def check(c: OpCheck) -> None:
            op = c.op
            key = (fn, op.operands[0].type, op.results[0].type,
                   *[value.owner for value in op.operands[1:]])
            problems = c.checker.shape_value_problems.get(key)
            if problems is None:
                problems = c.checker.shape_value_problems[key] = fn(c)
            _report(c, problems)

        for name in names:
            SHAPE_RULES[name] = lambda c: c.defer(check)
        return fn
    return register


def _report(c: OpCheck, problems: list[str]) -> None:
    for problem in problems:
        c.error(problem)


def _conv_zero_points(c: OpCheck) -> None:
    c.zero_point(3, "input_zp", c.types.get("in_t", ""))
    c.zero_point(4, "weight_zp", c.types.get("weight_t", ""))


@rule("CONV2D", "DEPTHWISE_CONV2D", "CONV3D")
def _convolution(c: OpCheck) -> None:
    _conv_zero_points(c)
    x, w = c.in_shape(0), c.in_shape(1)
    if x is None or w is None:
        return
    _report(c, rules.convolution_problems(
        c.opdef.name, x, w, c.in_shape(2), c.out_shape(), int_list(c.attr("pad")),
        int_list(c.attr("stride")), int_list(c.attr("dilation"))))


@rule("TRANSPOSE_CONV2D")
def _transpose_conv2d(c: OpCheck) -> None:
    _conv_zero_points(c)
    x, w = c.in_shape(0), c.in_shape(1)
    if x is None or w is None:
        return
    _report(c, rules.transpose_conv2d_problems(
        x, w, c.in_shape(2), c.out_shape(), int_list(c.attr("out_pad")),
        int_list(c.attr("stride"))))


@rule("AVG_POOL2D", "MAX_POOL2D")
def _pool2d(c: OpCheck) -> None:
    if c.opdef.name == "AVG_POOL2D":
        element = c.types.get("in_out_t", "")
        c.zero_point(1, "input_zp", element)
        c.zero_point(2, "output_zp", element)
    x = c.in_shape(0)
    if x is None:
        return
    _report(c, rules.pool2d_problems(x, c.out_shape(), int_list(c.attr("kernel")),
                                     int_list(c.attr("stride")), int_list(c.attr("pad"))))


@rule("MATMUL")
def _matmul(c: OpCheck) -> None:
    element = c.types.get("in_t", "")
    c.zero_point(2, "A_zp", element)
    c.zero_point(3, "B_zp", element)
    a, b = c.in_shape(0), c.in_shape(1)
    if a is not None and b is not None:
        _report(c, rules.matmul_problems(a, b, c.out_shape()))


@rule("FFT2D", "RFFT2D")
def _fft(c: OpCheck) -> None:
    x = c.in_shape(0)
    if x is not None:
        imag = c.in_shape(1) if c.opdef.name == "FFT2D" else None
        _report(c, rules.fft_problems(c.opdef.name, x, imag, [c.out_shape(0), c.out_shape(1)]))


@rule("ARGMAX")
def _argmax(c: OpCheck) -> None:
    x = c.in_shape(0)
    if x is not None:
        _report(c, rules.argmax_problems(x, c.attr("axis"), c.out_shape()))


def _broadcast(c: OpCheck, shapes: list[tuple[int, ...] | None]) -> None:
    """Elementwise broadcast: equal ranks, each dimension equal or 1 (ERROR_IF)."""
    out = c.out_shape()
    if any(s is None for s in shapes) or out is None:
        return
    _report(c, rules.elementwise_problems(shapes, out))


@rule("ADD", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "INTDIV",
      "LOGICAL_AND", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "LOGICAL_OR", "LOGICAL_XOR",
      "MAXIMUM", "MINIMUM", "POW", "SUB", "EQUAL", "GREATER", "GREATER_EQUAL", "SELECT")
def _elementwise(c: OpCheck) -> None:
    count = 3 if c.opdef.name == "SELECT" else 2
    _broadcast(c, [c.in_shape(i) for i in range(count)])
    if c.opdef.name in ("ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT"):
        bits = {"i8": 8, "i16": 16, "i32": 32}.get(c.types.get("in_out_t", ""))
        if bits:
            c.defer(lambda c: _shift_amounts(c, bits))


def _shift_amounts(c: OpCheck, bits: int) -> None:
    amounts = c.const(1)
    if amounts is not None and (amounts.min(initial=0) < 0 or amounts.max(initial=0) > bits - 1):
        c.error(f"shift amounts must be in 0..{bits - 1} (REQUIRE)")


@rule("MUL")
def _mul(c: OpCheck) -> None:
    _broadcast(c, [c.in_shape(0), c.in_shape(1)])
    c.defer(_mul_shift)


def _mul_shift(c: OpCheck) -> None:
    shift = c.const_scalar(2)
    if shift is None:
        return
    if c.types.get("in_t") != "i32" and shift != 0:
        c.error(f"shift must be 0 unless the inputs are i32, got {shift} (REQUIRE)")
    elif not 0 <= shift <= 63:
        c.error(f"shift must be in 0..63, got {shift} (REQUIRE)")


def _same_shape(c: OpCheck) -> None:
    problem = rules.shape_problem("output", c.out_shape(), c.in_shape(0))
    if problem:
        c.error(problem)


for _name in ("ERF", "SIGMOID", "TANH", "ABS", "BITWISE_NOT", "CEIL", "CLZ", "COS", "EXP",
              "FLOOR", "LOG", "LOGICAL_NOT", "RECIPROCAL", "RSQRT", "SIN", "CAST", "IDENTITY"):
    SHAPE_RULES[_name] = _same_shape


@rule("NEGATE")
def _negate(c: OpCheck) -> None:
    _same_shape(c)
    element = c.types.get("in_out_t", "")
    c.zero_point(1, "input1_zp", element)
    c.zero_point(2, "output_zp", element)


@rule("CLAMP")
def _clamp(c: OpCheck) -> None:
    _same_shape(c)
    _report(c, rules.clamp_problems(c.attr("min_val"), c.attr("max_val"),
                                    c.types.get("in_out_t", "")))


@rule("TABLE")
def _table(c: OpCheck) -> None:
    _same_shape(c)
    table = c.in_shape(1)
    if table is not None:
        _report(c, rules.table_problems(c.types.get("in_t", ""), table))


@rule("REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PRODUCT", "REDUCE_SUM")
def _reduce(c: OpCheck) -> None:
    x = c.in_shape(0)
    if x is not None:
        _report(c, rules.reduce_problems(x, c.attr("axis"), c.out_shape()))


@rule("CONCAT")
def _concat(c: OpCheck) -> None:
    shapes = [shape_of(v) for v in c.op.operands]
    if all(s is not None for s in shapes):
        _report(c, rules.concat_problems(shapes, c.attr("axis"), c.out_shape()))


@shapes_rule("PAD")
def _pad(c: OpCheck) -> list[str]:
    x = c.in_shape(0)
    return [] if x is None else rules.pad_problems(x, c.shape_values(1), c.out_shape())


@shapes_rule("RESHAPE")
def _reshape(c: OpCheck) -> list[str]:
    x = c.in_shape(0)
    return [] if x is None else rules.reshape_problems(x, c.shape_values(1), c.out_shape())


@shapes_rule("SLICE")
def _slice(c: OpCheck) -> list[str]:
    x = c.in_shape(0)
    return [] if x is None else rules.slice_problems(x, c.shape_values(1), c.shape_values(2),
                                                     c.out_shape())


@shapes_rule("TILE")
def _tile(c: OpCheck) -> list[str]:
    x = c.in_shape(0)
    return [] if x is None else rules.tile_problems(x, c.shape_values(1), c.out_shape())


@rule("TRANSPOSE")
def _transpose(c: OpCheck) -> None:
    x = c.in_shape(0)
    if x is not None:
        _report(c, rules.transpose_problems(x, int_list(c.attr("perms")), c.out_shape()))


@rule("REVERSE")
def _reverse(c: OpCheck) -> None:
    x = c.in_shape(0)
    if x is not None:
        _report(c, rules.reverse_problems(x, c.attr("axis"), c.out_shape()))


@rule("GATHER")
def _gather(c: OpCheck) -> None:
    values, indices = c.in_shape(0), c.in_shape(1)
    if values is not None and indices is not None:
        _report(c, rules.gather_problems(values, indices, c.out_shape()))


@rule("SCATTER")
def _scatter(c: OpCheck) -> None:
    values, indices, updates = c.in_shape(0), c.in_shape(1), c.in_shape(2)
    if values is not None and indices is not None and updates is not None:
        _report(c, rules.scatter_problems(values, indices, updates, c.out_shape()))


@shapes_rule("RESIZE")
def _resize(c: OpCheck) -> list[str]:
    x = c.in_shape(0)
    if x is None:
        return []
    return rules.resize_problems(x, c.out_shape(), c.shape_values(1), c.shape_values(2),
                                 c.shape_values(3))


@rule("RESCALE")
def _rescale(c: OpCheck) -> None:
    _same_shape(c)
    x = c.in_shape(0)
    per_channel = c.attr("per_channel")
    in_t, out_t = c.types.get("in_t", ""), c.types.get("out_t", "")
    _report(c, rules.rescale_attribute_problems(
        in_t, out_t, c.attr("scale32"), c.attr("rounding_mode"), c.attr("input_unsigned"),
        c.attr("output_unsigned")))
    # A zero point is read only where a rule can fail: any i8 value is allowed.
    read_in, read_out = in_t != "i8", out_t != "i8"
    if read_in or read_out:
        c.defer(lambda c: _rescale_zero_points(c, read_in, read_out))
    _report(c, rules.rescale_rank_problems(per_channel, None if x is None else len(x)))
    _report(c, rules.rescale_count_problems(x, per_channel, [("multiplier", c.in_shape(1)),
                                                              ("shift", c.in_shape(2))]))
    c.defer(_rescale_values)


def _rescale_zero_points(c: OpCheck, read_in: bool, read_out: bool) -> None:
    _report(c, rules.rescale_zero_point_problems(
        c.types.get("in_t", ""), c.types.get("out_t", ""),
        c.const_scalar(3) if read_in else None, c.const_scalar(4) if read_out else None,
        c.attr("input_unsigned"), c.attr("output_unsigned")))


def _rescale_values(c: OpCheck) -> None:
    shifts = c.const(2)
    if shifts is not None and shifts.size:
        low, high = _bounds(shifts)
        if low < 2 or high > 62:
            c.error(f"shift values must be in 2..62, got {low}..{high} (REQUIRE)")
    multipliers = c.const(1)
    if c.attr("scale32") and multipliers is not None and multipliers.size \
            and _bounds(multipliers)[0] < 0:
        c.error("multiplier values must be >= 0 (REQUIRE)")


def _bounds(values: np.ndarray) -> tuple[Any, Any]:
    """values.min(), values.max() of a non-empty array; a single value is taken
    as it is, without numpy's reductions (a per-tensor multiplier or shift)."""
    if values.size == 1:
        only = values.reshape(-1)[0]
        return only, only
    return values.min(), values.max()


@rule("CONST")
def _const(c: OpCheck) -> None:
    values = c.op.attrs.get("values")
    out = c.out_shape()
    if isinstance(values, np.ndarray) and out is not None:
        c.expect_shape("values", tuple(values.shape), out)
    if c.types.get("out_t") == "i4" and isinstance(values, np.ndarray):
        c.defer(_int4_values)


def _int4_values(c: OpCheck) -> None:
    # int4_t is [-7, 7]: TOSA's number formats exclude -8 (Arm's reference model
    # reads it as another value).
    values = c.op.attrs["values"]
    if values.size and int(values.min()) < -7:
        c.error("int4 values must be in -7..7 (int4_t excludes -8)")


@rule("CONST_SHAPE")
def _const_shape(c: OpCheck) -> None:
    values = int_list(c.op.attrs.get("values"))
    out = c.op.results[0].type
    if values is not None and isinstance(out, ShapeType) and out.rank != len(values):
        c.error(f"!tosa.shape<{out.rank}> cannot hold {len(values)} values")
