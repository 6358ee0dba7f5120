"""Shape and attribute rules of the tensor, elementwise and data-layout
operators (the specification's ERROR_IF conditions), by specification op name."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tfl2tosa.ir.types import (
    DYNAMIC,
    SCALAR_TYPES,
    ScalarType,
    ShapeType,
)
from tfl2tosa.tosa.verify.op_check import OpCheck, int_list, known, shape_of

ShapeRule = Callable[[OpCheck], None]
SHAPE_RULES: dict[str, ShapeRule] = {}


def rule(*names: str) -> Callable[[ShapeRule], ShapeRule]:
    def register(fn: ShapeRule) -> ShapeRule:
        for name in names:
            SHAPE_RULES[name] = fn
        return fn
    return register


def _exact_div(c: OpCheck, what: str, numerator: int, denominator: int) -> int | None:
    """idiv_check: the division must be exact (specification ERROR_IF)."""
    if denominator <= 0:
        return None
    if numerator % denominator:
        c.error(f"{what}: {numerator} is not divisible by {denominator}")
        return None
    return numerator // denominator


def _check_out_dim(c: OpCheck, what: str, got: int, numerator: int, stride: int) -> None:
    if not known(got):
        return
    quotient = _exact_div(c, what, numerator, stride)
    if quotient is not None and got != quotient + 1:
        c.error(f"{what} must be {quotient + 1}, got {got}")


def _positive(c: OpCheck, name: str, values: list[int] | None) -> bool:
    if values is not None and any(v < 1 for v in values):
        c.error(f"attribute {name!r} must be >= 1, got {values}")
        return False
    return values is not None


def _non_negative(c: OpCheck, name: str, values: list[int] | None) -> bool:
    if values is not None and any(v < 0 for v in values):
        c.error(f"attribute {name!r} must be >= 0, got {values}")
        return False
    return values is not None


def _conv_zero_points(c: OpCheck) -> None:
    c.zero_point(3, "input_zp", c.types.get("in_t", ""), ("i8",))
    c.zero_point(4, "weight_zp", c.types.get("weight_t", ""), ("i8",))


def _bias(c: OpCheck, out_channels: int) -> None:
    bias = c.in_shape(2)
    if bias and len(bias) == 1 and known(bias[0], out_channels) \
            and bias[0] not in (1, out_channels):
        c.error(f"bias has {bias[0]} values; it must have 1 or OC = {out_channels}")


@rule("CONV2D", "DEPTHWISE_CONV2D", "CONV3D")
def _convolution(c: OpCheck) -> None:
    spatial = 3 if c.opdef.name == "CONV3D" else 2
    _conv_zero_points(c)
    pad = c.ints("pad", 2 * spatial)
    stride = c.ints("stride", spatial)
    dilation = c.ints("dilation", spatial)
    ok = _non_negative(c, "pad", pad) & _positive(c, "stride", stride) \
        & _positive(c, "dilation", dilation)
    x, w, out = c.in_shape(0), c.in_shape(1), c.out_shape()
    rank = spatial + 2
    if not (c.expect_rank("input", x, rank) and c.expect_rank("weight", w, rank)
            and c.expect_rank("output", out, rank)):
        return
    if c.opdef.name == "DEPTHWISE_CONV2D":
        kernel, in_channels = w[:2], w[2]
        out_channels = w[2] * w[3] if known(w[2], w[3]) else DYNAMIC
    else:
        kernel, in_channels, out_channels = w[1:-1], w[-1], w[0]
    if known(x[-1], in_channels) and x[-1] != in_channels:
        c.error(f"input has {x[-1]} channels but the weight expects {in_channels}")
    if known(out[-1], out_channels) and out[-1] != out_channels:
        c.error(f"output has {out[-1]} channels, expected {out_channels}")
    if known(x[0], out[0]) and x[0] != out[0]:
        c.error(f"batch {x[0]} of the input differs from {out[0]} of the output")
    _bias(c, out_channels)
    if not ok:
        return
    for i in range(spatial):
        if known(x[1 + i], kernel[i]):
            numerator = (x[1 + i] - 1 + pad[2 * i] + pad[2 * i + 1]
                         - (kernel[i] - 1) * dilation[i])
            _check_out_dim(c, f"output dimension {1 + i}", out[1 + i], numerator, stride[i])


@rule("TRANSPOSE_CONV2D")
def _transpose_conv2d(c: OpCheck) -> None:
    _conv_zero_points(c)
    out_pad, stride = c.ints("out_pad", 4), c.ints("stride", 2)
    ok = _positive(c, "stride", stride)
    x, w, out = c.in_shape(0), c.in_shape(1), c.out_shape()
    if not (c.expect_rank("input", x, 4) and c.expect_rank("weight", w, 4)
            and c.expect_rank("output", out, 4)):
        return
    if known(x[3], w[3]) and x[3] != w[3]:
        c.error(f"input has {x[3]} channels but the weight expects {w[3]}")
    if known(out[3], w[0]) and out[3] != w[0]:
        c.error(f"output has {out[3]} channels, expected OC = {w[0]}")
    _bias(c, w[0])
    if not ok or out_pad is None:
        return
    for i, k in enumerate((w[1], w[2])):
        if known(k) and (out_pad[2 * i] <= -k or out_pad[2 * i + 1] <= -k):
            c.error(f"out_pad {out_pad} must be > -{k} (the kernel size)")
        elif known(x[1 + i], k, out[1 + i]):
            want = (x[1 + i] - 1) * stride[i] + out_pad[2 * i] + out_pad[2 * i + 1] + k
            if out[1 + i] != want:
                c.error(f"output dimension {1 + i} must be {want}, got {out[1 + i]}")


@rule("AVG_POOL2D", "MAX_POOL2D")
def _pool2d(c: OpCheck) -> None:
    if c.opdef.name == "AVG_POOL2D":
        element = c.types.get("in_out_t", "")
        c.zero_point(1, "input_zp", element, ("i8",))
        c.zero_point(2, "output_zp", element, ("i8",))
    kernel, stride, pad = c.ints("kernel", 2), c.ints("stride", 2), c.ints("pad", 4)
    ok = _positive(c, "kernel", kernel) & _positive(c, "stride", stride) \
        & _non_negative(c, "pad", pad)
    if ok and (pad[0] >= kernel[0] or pad[1] >= kernel[0] or pad[2] >= kernel[1]
               or pad[3] >= kernel[1]):
        c.error(f"pad {pad} must be smaller than the kernel {kernel}")
        ok = False
    x, out = c.in_shape(0), c.out_shape()
    if not (c.expect_rank("input", x, 4) and c.expect_rank("output", out, 4)):
        return
    for d in (0, 3):
        if known(x[d], out[d]) and x[d] != out[d]:
            c.error(f"input dimension {d} ({x[d]}) differs from the output's ({out[d]})")
    if ok:
        for i in range(2):
            if known(x[1 + i]):
                numerator = x[1 + i] + pad[2 * i] + pad[2 * i + 1] - kernel[i]
                _check_out_dim(c, f"output dimension {1 + i}", out[1 + i], numerator,
                               stride[i])


@rule("MATMUL")
def _matmul(c: OpCheck) -> None:
    element = c.types.get("in_t", "")
    c.zero_point(2, "A_zp", element, ("i8",))
    c.zero_point(3, "B_zp", element, ("i8",))
    a, b, out = c.in_shape(0), c.in_shape(1), c.out_shape()
    if not (c.expect_rank("A", a, 3) and c.expect_rank("B", b, 3)
            and c.expect_rank("output", out, 3)):
        return
    if known(a[2], b[1]) and a[2] != b[1]:
        c.error(f"A is [N,H,C] with C = {a[2]} but B is [N,C,W] with C = {b[1]}")
    if known(a[0], b[0]) and a[0] != b[0]:
        c.error(f"batch of A ({a[0]}) differs from batch of B ({b[0]})")
    c.expect_shape("output", out, (a[0], a[1], b[2]))


@rule("FFT2D", "RFFT2D")
def _fft(c: OpCheck) -> None:
    x = c.in_shape(0)
    if not c.expect_rank("input_real", x, 3):
        return
    for d, name in ((1, "H"), (2, "W")):
        if known(x[d]) and (x[d] < 1 or x[d] & (x[d] - 1)):
            c.error(f"{name} = {x[d]} must be a power of two")
    if c.opdef.name == "FFT2D":
        c.expect_shape("input_imag", c.in_shape(1), x)
        want: tuple[int, ...] = x
    else:
        want = (x[0], x[1], x[2] // 2 + 1 if known(x[2]) else DYNAMIC)
    c.expect_shape("output_real", c.out_shape(0), want)
    c.expect_shape("output_imag", c.out_shape(1), want)


@rule("ARGMAX")
def _argmax(c: OpCheck) -> None:
    x = c.in_shape(0)
    if x is None:
        return
    axis = c.attr("axis")
    if not 0 <= axis < len(x):
        c.error(f"axis {axis} is out of range for rank {len(x)}")
        return
    c.expect_shape("output", c.out_shape(), x[:axis] + x[axis + 1:])


def _broadcast(c: OpCheck, shapes: list[tuple[int, ...] | None]) -> None:
    """Elementwise broadcast: equal ranks, each dimension equal or 1 (ERROR_IF)."""
    out = c.out_shape()
    if any(s is None for s in shapes) or out is None:
        return
    ranks = {len(s) for s in shapes} | {len(out)}
    if len(ranks) > 1:
        c.error(f"operands and result must have equal ranks (reshape first), got "
                f"{[list(s) for s in shapes]} -> {list(out)}")
        return
    want = []
    for dims in zip(*shapes):
        sizes = {d for d in dims if d != 1}
        if DYNAMIC in sizes:
            want.append(DYNAMIC)
        elif len(sizes) > 1:
            c.error(f"shapes {[list(s) for s in shapes]} do not broadcast")
            return
        else:
            want.append(sizes.pop() if sizes else 1)
    c.expect_shape("output", out, want)


@rule("ADD", "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "INTDIV",
      "LOGICAL_AND", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "LOGICAL_OR", "LOGICAL_XOR",
      "MAXIMUM", "MINIMUM", "POW", "SUB", "EQUAL", "GREATER", "GREATER_EQUAL", "SELECT")
def _elementwise(c: OpCheck) -> None:
    count = 3 if c.opdef.name == "SELECT" else 2
    _broadcast(c, [c.in_shape(i) for i in range(count)])
    if c.opdef.name in ("ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT"):
        amounts = c.const(1)
        bits = {"i8": 8, "i16": 16, "i32": 32}.get(c.types.get("in_out_t", ""))
        if amounts is not None and bits and (amounts.min(initial=0) < 0
                                             or amounts.max(initial=0) > bits - 1):
            c.error(f"shift amounts must be in 0..{bits - 1} (REQUIRE)")


@rule("MUL")
def _mul(c: OpCheck) -> None:
    _broadcast(c, [c.in_shape(0), c.in_shape(1)])
    shift = c.const_scalar(2)
    if shift is None:
        return
    if c.types.get("in_t") != "i32" and shift != 0:
        c.error(f"shift must be 0 unless the inputs are i32, got {shift} (REQUIRE)")
    elif not 0 <= shift <= 63:
        c.error(f"shift must be in 0..63, got {shift} (REQUIRE)")


def _same_shape(c: OpCheck) -> None:
    c.expect_shape("output", c.out_shape(), c.in_shape(0))


for _name in ("ERF", "SIGMOID", "TANH", "ABS", "BITWISE_NOT", "CEIL", "CLZ", "COS", "EXP",
              "FLOOR", "LOG", "LOGICAL_NOT", "RECIPROCAL", "RSQRT", "SIN", "CAST", "IDENTITY",
              "REVERSE"):
    SHAPE_RULES[_name] = _same_shape


@rule("NEGATE")
def _negate(c: OpCheck) -> None:
    _same_shape(c)
    element = c.types.get("in_out_t", "")
    c.zero_point(1, "input1_zp", element, ("i8",))
    c.zero_point(2, "output_zp", element, ("i8",))


@rule("CLAMP")
def _clamp(c: OpCheck) -> None:
    _same_shape(c)
    low, high = c.attr("min_val"), c.attr("max_val")
    if np.isnan(low) or np.isnan(high):
        c.error("min_val and max_val must not be NaN")
    elif high < low:
        c.error(f"max_val {high} is smaller than min_val {low}")
    element = SCALAR_TYPES.get(c.types.get("in_out_t", ""))
    if isinstance(element, ScalarType) and element.is_integer:
        for name, value in (("min_val", low), ("max_val", high)):
            if value != int(value) or not element.min_value <= value <= element.max_value:
                c.error(f"{name} {value} is not a value of {element}")


@rule("TABLE")
def _table(c: OpCheck) -> None:
    _same_shape(c)
    table = c.in_shape(1)
    if c.mode is not None and table is not None and len(table) == 1 and known(table[0]):
        size = c.mode.params["TABLE_SIZE"]
        if table[0] != size:
            c.error(f"table must have {size} entries for {c.types.get('in_t')} input, "
                    f"got {table[0]}")


@rule("REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PRODUCT", "REDUCE_SUM")
def _reduce(c: OpCheck) -> None:
    x = c.in_shape(0)
    if x is None:
        return
    axis = c.attr("axis")
    if not 0 <= axis < len(x):
        c.error(f"axis {axis} is out of range for rank {len(x)}")
        return
    c.expect_shape("output", c.out_shape(), x[:axis] + (1,) + x[axis + 1:])


@rule("CONCAT")
def _concat(c: OpCheck) -> None:
    shapes = [shape_of(v) for v in c.op.operands]
    out = c.out_shape()
    if any(s is None for s in shapes) or out is None:
        return
    axis = c.attr("axis")
    if not 0 <= axis < len(out):
        c.error(f"axis {axis} is out of range for rank {len(out)}")
        return
    if any(len(s) != len(out) for s in shapes):
        c.error(f"all inputs must have the output's rank {len(out)}")
        return
    want = list(out)
    total = 0
    for s in shapes:
        for d, (got, expected) in enumerate(zip(s, out)):
            if d != axis and known(got, expected) and got != expected:
                c.error(f"input shape {list(s)} differs from the output {list(out)} "
                        f"outside axis {axis}")
                return
        total = total + s[axis] if known(total, s[axis]) else DYNAMIC
    want[axis] = total
    c.expect_shape("output", out, want)


@rule("PAD")
def _pad(c: OpCheck) -> None:
    x, padding = c.in_shape(0), c.shape_values(1)
    if x is None or padding is None:
        return
    if len(padding) != 2 * len(x):
        c.error(f"padding must have 2 * rank = {2 * len(x)} values, got {len(padding)}")
        return
    if any(p < 0 for p in padding):
        c.error(f"padding must be >= 0, got {padding}")
        return
    want = [d + padding[2 * i] + padding[2 * i + 1] if known(d) else DYNAMIC
            for i, d in enumerate(x)]
    c.expect_shape("output", c.out_shape(), want)


@rule("RESHAPE")
def _reshape(c: OpCheck) -> None:
    x, out, values = c.in_shape(0), c.out_shape(), c.shape_values(1)
    if values is not None and out is not None:
        c.expect_shape("output (from the shape operand)", out, values)
    if x is not None and out is not None and known(*x, *out) \
            and int(np.prod(x, dtype=np.int64)) != int(np.prod(out, dtype=np.int64)):
        c.error(f"element count changes from {list(x)} to {list(out)}")


@rule("SLICE")
def _slice(c: OpCheck) -> None:
    x, start, size = c.in_shape(0), c.shape_values(1), c.shape_values(2)
    if x is None or start is None or size is None:
        return
    if len(start) != len(x) or len(size) != len(x):
        c.error(f"start and size must have rank {len(x)} values, got {start} and {size}")
        return
    for i, (d, s, n) in enumerate(zip(x, start, size)):
        if s < 0 or n <= 0 or (known(d) and s + n > d):
            c.error(f"slice start {start} size {size} does not fit the input {list(x)} "
                    f"(dimension {i})")
            return
    c.expect_shape("output", c.out_shape(), size)


@rule("TILE")
def _tile(c: OpCheck) -> None:
    x, multiples = c.in_shape(0), c.shape_values(1)
    if x is None or multiples is None:
        return
    if len(multiples) != len(x):
        c.error(f"multiples must have {len(x)} values, got {multiples}")
        return
    c.expect_shape("output", c.out_shape(),
                   [d * m if known(d) else DYNAMIC for d, m in zip(x, multiples)])


@rule("TRANSPOSE")
def _transpose(c: OpCheck) -> None:
    x, perms = c.in_shape(0), int_list(c.attr("perms"))
    if x is None or perms is None:
        return
    if sorted(perms) != list(range(len(x))):
        c.error(f"perms {perms} is not a permutation of 0..{len(x) - 1}")
        return
    c.expect_shape("output", c.out_shape(), [x[p] for p in perms])


@rule("GATHER")
def _gather(c: OpCheck) -> None:
    values, indices = c.in_shape(0), c.in_shape(1)
    if not (c.expect_rank("values", values, 3) and c.expect_rank("indices", indices, 2)):
        return
    if known(values[0], indices[0]) and values[0] != indices[0]:
        c.error(f"values batch {values[0]} differs from indices batch {indices[0]}")
    c.expect_shape("output", c.out_shape(), (values[0], indices[1], values[2]))


@rule("SCATTER")
def _scatter(c: OpCheck) -> None:
    values, indices, updates = c.in_shape(0), c.in_shape(1), c.in_shape(2)
    if not (c.expect_rank("values_in", values, 3) and c.expect_rank("indices", indices, 2)
            and c.expect_rank("input", updates, 3)):
        return
    c.expect_shape("input", updates, (values[0], indices[1], values[2]))
    if known(values[0], indices[0]) and values[0] != indices[0]:
        c.error(f"values_in batch {values[0]} differs from indices batch {indices[0]}")
    c.expect_shape("values_out", c.out_shape(), values)


@rule("RESIZE")
def _resize(c: OpCheck) -> None:
    scale, offset, border = c.shape_values(1), c.shape_values(2), c.shape_values(3)
    x, out = c.in_shape(0), c.out_shape()
    if not (c.expect_rank("input", x, 4) and c.expect_rank("output", out, 4)):
        return
    for d in (0, 3):
        if known(x[d], out[d]) and x[d] != out[d]:
            c.error(f"input dimension {d} ({x[d]}) differs from the output's ({out[d]})")
    if any(known(d) and d >= 16384 for d in (*x[1:3], *out[1:3])):
        c.error("image height and width must be below 16384")
    if scale is None or offset is None or border is None:
        return
    if (len(scale), len(offset), len(border)) != (4, 2, 2):
        c.error(f"scale/offset/border must have 4/2/2 values, got {scale}, {offset}, {border}")
        return
    if min(scale) <= 0:
        c.error(f"scale {scale} must be positive")
        return
    for i in range(2):
        n, d = scale[2 * i], scale[2 * i + 1]
        if n > 2048:
            c.error(f"scale numerator {n} must be <= 2048")
        if d >= 16 * n:
            c.error(f"scale {n}/{d} is below the 1/16 downscale limit")
        if not -n <= offset[i] < 16 * n:
            c.error(f"offset {offset[i]} must be in [-{n}, {16 * n})")
        if not -16 * n <= border[i] < n:
            c.error(f"border {border[i]} must be in [-{16 * n}, {n})")
        if known(x[1 + i]):
            numerator = (x[1 + i] - 1) * n - offset[i] + border[i]
            _check_out_dim(c, f"output dimension {1 + i}", out[1 + i], numerator, d)


@rule("RESCALE")
def _rescale(c: OpCheck) -> None:
    _same_shape(c)
    in_t, out_t = c.types.get("in_t", ""), c.types.get("out_t", "")
    scale32, rounding = c.attr("scale32"), c.attr("rounding_mode")
    per_channel = c.attr("per_channel")
    in_unsigned, out_unsigned = c.attr("input_unsigned"), c.attr("output_unsigned")
    if scale32 and in_t == "i48":
        c.error("scale32 must be false for a 48-bit input")
    if not scale32 and rounding == "DOUBLE_ROUND":
        c.error("DOUBLE_ROUND needs scale32")
    if in_unsigned and out_unsigned:
        c.error("input_unsigned and output_unsigned cannot both be true")
    # Unsigned is u8/u16 only, and never paired with 32/48-bit on the other side.
    if in_unsigned and (in_t not in ("i8", "i16") or out_t == "i32"):
        c.error(f"input_unsigned is not allowed for {in_t} -> {out_t}")
    if out_unsigned and (out_t not in ("i8", "i16") or in_t in ("i32", "i48")):
        c.error(f"output_unsigned is not allowed for {in_t} -> {out_t}")
    for i, name, element, unsigned in ((3, "input_zp", in_t, in_unsigned),
                                       (4, "output_zp", out_t, out_unsigned)):
        zp = c.const_scalar(i)
        if zp is None:
            continue
        if element == "i16" and unsigned:
            if zp & 0xFFFF not in (0, 32768):
                c.error(f"{name} of unsigned 16-bit must be 0 or 32768, got {zp & 0xFFFF}")
        elif element != "i8" and zp != 0:
            c.error(f"{name} must be 0 for {element}, got {zp}")
    x = c.in_shape(0)
    if x is not None and per_channel and not x:
        c.error("per_channel needs an input of rank >= 1")
        return
    channels = (x[-1] if x else DYNAMIC) if per_channel else 1
    for i, name in ((1, "multiplier"), (2, "shift")):
        s = c.in_shape(i)
        if s is not None and len(s) == 1 and known(s[0], channels) and s[0] != channels:
            c.error(f"{name} has {s[0]} values; per_channel = {per_channel} needs {channels}")
    shifts = c.const(2)
    if shifts is not None and shifts.size and (shifts.min() < 2 or shifts.max() > 62):
        c.error(f"shift values must be in 2..62, got {shifts.min()}..{shifts.max()} (REQUIRE)")
    multipliers = c.const(1)
    if scale32 and multipliers is not None and multipliers.size and multipliers.min() < 0:
        c.error("multiplier values must be >= 0 (REQUIRE)")


@rule("CONST")
def _const(c: OpCheck) -> None:
    values = c.op.attrs.get("values")
    out = c.out_shape()
    if isinstance(values, np.ndarray) and out is not None:
        c.expect_shape("values", tuple(values.shape), out)
    # int4_t is [-7, 7]: TOSA's number formats exclude -8 (Arm's reference model
    # reads it as another value).
    if c.types.get("out_t") == "i4" and isinstance(values, np.ndarray) and values.size \
            and int(values.min()) < -7:
        c.error("int4 values must be in -7..7 (int4_t excludes -8)")


@rule("CONST_SHAPE")
def _const_shape(c: OpCheck) -> None:
    values = int_list(c.op.attrs.get("values"))
    out = c.op.results[0].type
    if values is not None and isinstance(out, ShapeType) and out.rank != len(values):
        c.error(f"!tosa.shape<{out.rank}> cannot hold {len(values)} values")
