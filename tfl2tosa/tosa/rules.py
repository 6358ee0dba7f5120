"""The TOSA 1.0 specification's rules for one op, written once.

The op table (`tfl2tosa.tosa.ops`) says what each operator takes; this module
says when an op breaks it: how operand and result element types bind the type
variables of a type mode, and the ERROR_IF conditions on shapes and attributes.
Two readers apply these rules: the verifier (`tfl2tosa.tosa.verify`) on the
declared types of a converted graph, reporting every problem; the reference
model (`reference_model`) on the types and arrays of a run, raising the first
as a SpecErrorIf. A rule returns a problem as a message (None: no problem) or
a list of messages, and never raises for bad input.

Shapes are tuples of ints in which DYNAMIC (-1) marks a dimension not known;
a rule checks only what is known.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tfl2tosa.ir.types import (
    DYNAMIC,
    SCALAR_TYPES,
    ShapeType,
    TensorType,
    Type,
    numpy_dtype,
    storage_type,
)
from tfl2tosa.tosa.ops import ACC_TYPE_ELEMENT, BY_MLIR, OPS, Arg, OpDef, TypeMode

# Type variables of argument tables that name one element type.
FIXED_TYPES = {"i8_t": "i8", "i16_t": "i16", "i32_t": "i32", "bool_t": "i1"}

# The op table is fixed, so what follows from an argument list or an op's
# modes alone is worked out once per op kind. Entries are keyed by the table's
# tuples and keep them (checked by identity), so a key is never reused.
_ARITIES: dict[int, tuple[tuple[Arg, ...], tuple[int, bool]]] = {}
_ARGUMENTS: dict[tuple[int, int], tuple[tuple[Arg, ...], tuple[Arg, ...]]] = {}
_MODES: dict[tuple[int, tuple[tuple[str, str], ...]], tuple[OpDef, tuple[TypeMode, ...]]] = {}


def known(*dims: int) -> bool:
    return DYNAMIC not in dims


# ---------------------------------------------------------------------------
# Operands, results and type modes


def arity(args: tuple[Arg, ...]) -> tuple[int, bool]:
    """(number of fixed arguments, whether a tensor list takes any number more)."""
    entry = _ARITIES.get(id(args))
    if entry is None or entry[0] is not args:
        entry = _ARITIES[id(args)] = (args, (sum(1 for a in args if a.kind != "tensor_list"),
                                             any(a.kind == "tensor_list" for a in args)))
    return entry[1]


def arity_problems(opdef: OpDef, operand_count: int, result_count: int) -> list[str]:
    """ERROR_IF the op has not the operator's number of operands or results."""
    problems = []
    for what, args, count in (("operand", opdef.inputs, operand_count),
                              ("result", opdef.outputs, result_count)):
        fixed, has_list = arity(args)
        if has_list and count < fixed or not has_list and count != fixed:
            names = ", ".join(a.name for a in args) or "none"
            problems.append(f"expects {'at least ' if has_list else ''}{fixed} {what}(s) "
                            f"({names}), got {count}")
    if opdef.name == "CONCAT" and not operand_count:
        problems.append("CONCAT needs at least one input")
    return problems


def argument_of_each(args: tuple[Arg, ...], count: int) -> tuple[Arg, ...]:
    """The argument each of `count` values is, in order; a tensor list takes the
    rest; values past the last argument get none."""
    key = (id(args), count)
    entry = _ARGUMENTS.get(key)
    if entry is None or entry[0] is not args:
        out: list[Arg] = []
        for k, arg in enumerate(args):
            if arg.kind == "tensor_list":
                fixed_after = sum(1 for a in args[k + 1:] if a.kind != "tensor_list")
                out.extend([arg] * max(0, count - len(out) - fixed_after))
            elif len(out) < count:
                out.append(arg)
        entry = _ARGUMENTS[key] = (args, tuple(out))
    return entry[1]


def element_name(value_type: Type) -> str | None:
    """The scalar type name of a type's element (quantized: its storage); "shape"
    for shape_t."""
    if isinstance(value_type, ShapeType):
        return "shape"
    if isinstance(value_type, TensorType):
        return storage_type(value_type.element).name
    return None


def bind_types(opdef: OpDef, input_types: Sequence[Type], output_types: Sequence[Type],
               attrs: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """(type variable -> element name, problems): every argument of one type
    variable must have the same element type; fixed ones (i8_t, bool_t) theirs;
    RESCALE's multiplier is i32 with scale32, else i16; VARIABLE's `type`
    attribute binds its in_t."""
    bound: dict[str, str] = {}
    sources: dict[str, str] = {}
    problems: list[str] = []
    if opdef.name == "VARIABLE" and isinstance(attrs.get("type"), str):
        bound["in_t"], sources["in_t"] = attrs["type"], "attribute 'type'"
    for args, types in ((opdef.inputs, input_types), (opdef.outputs, output_types)):
        for arg, value_type in zip(argument_of_each(args, len(types)), types):
            var = arg.type_var
            if not var or arg.kind == "shape":
                continue
            element = element_name(value_type)
            if element is None or element == "shape":
                continue
            if var == "mul_t":
                scale32 = attrs.get("scale32")
                want = ("i32" if scale32 else "i16") if isinstance(scale32, bool) else element
                if element != want:
                    problems.append(f"multiplier must be {want} when scale32 is {scale32}, "
                                    f"got {element}")
                continue
            fixed = FIXED_TYPES.get(var)
            if fixed is not None:
                if element != fixed:
                    problems.append(f"{arg.name!r} must be {fixed}, got {element}")
                continue
            if var in bound and bound[var] != element:
                problems.append(f"{arg.name!r} is {element} but {sources[var]} is "
                                f"{bound[var]} (both are {var})")
                continue
            bound[var], sources[var] = element, repr(arg.name)
    return bound, problems


def modes_fitting(opdef: OpDef, bound: dict[str, str]) -> tuple[TypeMode, ...]:
    """The op's type modes that agree with every bound type variable."""
    key = (id(opdef), tuple(bound.items()))
    entry = _MODES.get(key)
    if entry is None or entry[0] is not opdef:
        entry = _MODES[key] = (opdef, tuple(
            m for m in opdef.modes if all(m.types.get(v, t) == t for v, t in bound.items())))
    return entry[1]


def no_mode_problem(opdef: OpDef, bound: dict[str, str]) -> str:
    text = ", ".join(f"{v}={t}" for v, t in bound.items())
    return f"element types ({text}) match no TOSA 1.0 type mode of {opdef.name}"


def refine_modes(opdef: OpDef, candidates: Sequence[TypeMode], attrs: dict[str, Any],
                 bound: dict[str, str]) -> tuple[Sequence[TypeMode], str | None]:
    """The modes that also fit acc_type (convolutions, pooling) and RESIZE's
    mode, and the problem when none does."""
    acc = attrs.get("acc_type")
    if acc in ACC_TYPE_ELEMENT and any("acc_t" in m.types for m in candidates):
        fitting = [m for m in candidates if m.types.get("acc_t") == ACC_TYPE_ELEMENT[acc]]
        if fitting:
            return fitting, None
        allowed = sorted({k for m in candidates for k, e in ACC_TYPE_ELEMENT.items()
                          if m.types.get("acc_t") == e})
        return fitting, (f"acc_type {acc} does not fit these element types (allowed: "
                         f"{', '.join(allowed)})")
    if opdef.name == "RESIZE" and attrs.get("mode") in ("NEAREST", "BILINEAR"):
        other = "bilinear" if attrs["mode"] == "NEAREST" else "nearest"
        fitting = [m for m in candidates if other not in m.name]
        if fitting:
            return fitting, None
        return fitting, (f"{attrs['mode']} resize cannot produce {bound.get('out_t')} "
                         f"from {bound.get('in_t')}")
    return candidates, None


def one_value_problem(arg: Arg, value_type: Type) -> str | None:
    """ERROR_IF a [1] argument (a zero point, MUL's shift, PAD's pad_const) does
    not hold one value."""
    # A static shape holds one value exactly when every dimension is 1.
    if arg.shape == "[1]" and isinstance(value_type, TensorType) and value_type.is_static \
            and any(d != 1 for d in value_type.shape):
        return f"{arg.name!r} must have shape [1] (one value), got {list(value_type.shape)}"
    return None


def type_mode_problem(opdef: OpDef, input_types: Sequence[Type],
                      output_types: Sequence[Type], attrs: dict[str, Any]) -> str | None:
    """The first reason the op's counts, [1] arguments or element types fit no
    type mode of the operator (in any profile); None if they fit one."""
    problems = arity_problems(opdef, len(input_types), len(output_types))
    if problems:
        return problems[0]
    for args, types in ((opdef.inputs, input_types), (opdef.outputs, output_types)):
        for arg, value_type in zip(argument_of_each(args, len(types)), types):
            problem = one_value_problem(arg, value_type)
            if problem:
                return problem
    bound, problems = bind_types(opdef, input_types, output_types, attrs)
    if problems:
        return problems[0]
    if not opdef.modes:
        return None
    candidates = modes_fitting(opdef, bound)
    if not candidates:
        return no_mode_problem(opdef, bound)
    return refine_modes(opdef, candidates, attrs, bound)[1]


# The attributes that take part in binding a type mode: RESCALE's scale32 gives
# the multiplier's type, acc_type and RESIZE's mode choose among the modes,
# VARIABLE's type binds in_t. By IR op name, for the ops that have any.
BINDING_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    opdef.mlir: names for opdef in BY_MLIR.values()
    if (names := tuple(a.name for a in opdef.attrs
                       if a.name in ("scale32", "acc_type", "mode", "type")))}


# ---------------------------------------------------------------------------
# Shapes


def shape_problem(what: str, got: Sequence[int] | None, want: Sequence[int] | None
                  ) -> str | None:
    """ERROR_IF a shape is not the one the operator gives; DYNAMIC matches any size."""
    if got is None or want is None:
        return None
    if len(got) == len(want) and all(g == w or g == DYNAMIC or w == DYNAMIC
                                     for g, w in zip(got, want)):
        return None
    return f"{what} shape must be {list(want)}, got {list(got)}"


def rank_problem(what: str, shape: Sequence[int], rank: int) -> str | None:
    return None if len(shape) == rank else f"{what} has rank {len(shape)}, not {rank}"


def axis_problem(axis: int, rank: int) -> str | None:
    return None if 0 <= axis < rank else f"axis {axis} is out of range for rank {rank}"


def zero_point_problem(name: str, element: str, zp: float) -> str | None:
    """ERROR_IF a zero point is not 0 on a tensor that is not i8."""
    if zp != 0 and element != "i8":
        return f"zero point {name} must be 0 for {element}, got {zp}"
    return None


def broadcast_shape(shapes: Sequence[Sequence[int]]) -> tuple[tuple[int, ...] | None,
                                                             str | None]:
    """The specification's broadcast_shape: equal ranks, each dimension equal or 1."""
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        return None, (f"operands must have equal ranks (reshape first), got "
                      f"{[list(s) for s in shapes]}")
    result = list(shapes[0])
    for shape in shapes[1:]:
        for i, dim in enumerate(shape):
            have = result[i]
            if dim == have or dim == 1:
                continue
            if have == 1:
                result[i] = dim
            elif dim == DYNAMIC or have == DYNAMIC:
                result[i] = DYNAMIC if dim == DYNAMIC else dim
            else:
                return None, (f"shapes {[list(s) for s in shapes]} do not broadcast in "
                              f"dimension {i}")
    return tuple(result), None


# ---------------------------------------------------------------------------
# Sliding windows: convolutions, pooling, RESIZE


def attribute_problems(values: Sequence[int] | None, name: str, length: int, low: int
                       ) -> list[str]:
    """ERROR_IF an attribute list has not `length` values, each >= low."""
    if values is None:
        return []
    if len(values) != length:
        return [f"attribute {name!r} must have {length} values, got {len(values)}"]
    if min(values, default=low) < low:
        return [f"attribute {name!r} must be >= {low}, got {list(values)}"]
    return []


def output_size(what: str, numerator: int, denominator: int, declared: int | None
                ) -> tuple[int | None, str | None]:
    """idiv_check(numerator, denominator) + 1: the size of a window or RESIZE
    output dimension; ERROR_IF the division is not exact or the declared size
    (None or DYNAMIC: any) differs."""
    if denominator <= 0:
        return None, None  # the attribute's own rule reports it
    if numerator < 0:
        return None, f"{what}: the window does not fit the padded input ({numerator} < 0)"
    if numerator % denominator:
        return None, f"{what}: {numerator} is not divisible by {denominator}"
    size = numerator // denominator + 1
    if declared is not None and declared != DYNAMIC and declared != size:
        return size, f"{what} must be {size}, got {declared}"
    return size, None


def window_sizes(spatial_in: Sequence[int], kernel: Sequence[int], pad: Sequence[int],
                 stride: Sequence[int], dilation: Sequence[int],
                 declared: Sequence[int | None]) -> tuple[list[int | None], list[str]]:
    """Output sizes of a dilated, strided window over the padded input (CONV2D,
    CONV3D, DEPTHWISE_CONV2D; pooling with dilation 1 and `kernel - 1` counted
    as the window's extent), and the problems: per spatial dimension i,
    ERROR_IF(declared != idiv_check(in - 1 + pads - (kernel - 1) * dilation, stride) + 1)."""
    sizes: list[int | None] = []
    problems = []
    for i, size in enumerate(spatial_in):
        if size == DYNAMIC or kernel[i] == DYNAMIC:
            sizes.append(None)
            continue
        numerator = size - 1 + pad[2 * i] + pad[2 * i + 1] - (kernel[i] - 1) * dilation[i]
        out, problem = output_size(f"output dimension {1 + i}", numerator, stride[i],
                                   declared[i])
        sizes.append(out)
        if problem:
            problems.append(problem)
    return sizes, problems


def convolution_problems(op_name: str, x: Sequence[int], w: Sequence[int],
                         bias: Sequence[int] | None, out: Sequence[int] | None,
                         pad: Sequence[int] | None, stride: Sequence[int] | None,
                         dilation: Sequence[int] | None) -> list[str]:
    """CONV2D, CONV3D, DEPTHWISE_CONV2D: ranks, channels, batch, bias and output size."""
    spatial = 3 if op_name == "CONV3D" else 2
    attributes = (attribute_problems(pad, "pad", 2 * spatial, 0)
                  + attribute_problems(stride, "stride", spatial, 1)
                  + attribute_problems(dilation, "dilation", spatial, 1))
    problems = list(attributes)
    ranked = [p for p in (rank_problem("input", x, spatial + 2),
                          rank_problem("weight", w, spatial + 2),
                          rank_problem("result", out, spatial + 2) if out is not None else None)
              if p]
    if ranked:
        return problems + ranked
    if op_name == "DEPTHWISE_CONV2D":
        kernel, in_channels = w[:2], w[2]
        out_channels = w[2] * w[3] if known(w[2], w[3]) else DYNAMIC
    else:
        kernel, in_channels, out_channels = w[1:-1], w[-1], w[0]
    if known(x[-1], in_channels) and x[-1] != in_channels:
        problems.append(f"input has {x[-1]} channels but the weight expects {in_channels}")
    if out is not None and known(out[-1], out_channels) and out[-1] != out_channels:
        problems.append(f"output has {out[-1]} channels, expected {out_channels}")
    if out is not None and known(x[0], out[0]) and x[0] != out[0]:
        problems.append(f"batch {x[0]} of the input differs from {out[0]} of the output")
    problems += bias_problems(bias, out_channels)
    if attributes or pad is None or stride is None or dilation is None:
        return problems
    declared = out[1:-1] if out is not None else (None,) * spatial
    return problems + window_sizes(x[1:-1], kernel, pad, stride, dilation, declared)[1]


def bias_problems(bias: Sequence[int] | None, out_channels: int) -> list[str]:
    if bias and len(bias) == 1 and known(bias[0], out_channels) \
            and bias[0] not in (1, out_channels):
        return [f"bias has {bias[0]} values; it must have 1 or OC = {out_channels}"]
    return []


def transpose_conv2d_problems(x: Sequence[int], w: Sequence[int], bias: Sequence[int] | None,
                              out: Sequence[int] | None, out_pad: Sequence[int] | None,
                              stride: Sequence[int] | None) -> list[str]:
    """TRANSPOSE_CONV2D: ranks, channels, bias, out_pad > -kernel and the output size
    (in - 1) * stride + out_pad_before + out_pad_after + kernel."""
    attributes = (attribute_problems(out_pad, "out_pad", 4, -(1 << 31))
                  + attribute_problems(stride, "stride", 2, 1))
    problems = list(attributes)
    ranked = [p for p in (rank_problem("input", x, 4), rank_problem("weight", w, 4),
                          rank_problem("result", out, 4) if out is not None else None) if p]
    if ranked:
        return problems + ranked
    if known(x[3], w[3]) and x[3] != w[3]:
        problems.append(f"input has {x[3]} channels but the weight expects {w[3]}")
    if out is not None and known(out[3], w[0]) and out[3] != w[0]:
        problems.append(f"output has {out[3]} channels, expected OC = {w[0]}")
    problems += bias_problems(bias, w[0])
    if attributes or out_pad is None or stride is None:
        return problems
    for i, k in enumerate((w[1], w[2])):
        if known(k) and (out_pad[2 * i] <= -k or out_pad[2 * i + 1] <= -k):
            problems.append(f"out_pad {list(out_pad)} must be > -{k} (the kernel size)")
        elif out is not None and known(x[1 + i], k, out[1 + i]):
            want = (x[1 + i] - 1) * stride[i] + out_pad[2 * i] + out_pad[2 * i + 1] + k
            if out[1 + i] != want:
                problems.append(f"output dimension {1 + i} must be {want}, got {out[1 + i]}")
    return problems


def pool2d_problems(x: Sequence[int], out: Sequence[int] | None, kernel: Sequence[int] | None,
                    stride: Sequence[int] | None, pad: Sequence[int] | None) -> list[str]:
    """AVG_POOL2D, MAX_POOL2D: kernel, stride >= 1, 0 <= pad < kernel, N and C kept,
    and the output size idiv_check(in + pads - kernel, stride) + 1."""
    problems = (attribute_problems(kernel, "kernel", 2, 1)
                + attribute_problems(stride, "stride", 2, 1)
                + attribute_problems(pad, "pad", 4, 0))
    ok = not problems and kernel is not None and stride is not None and pad is not None
    if ok and (pad[0] >= kernel[0] or pad[1] >= kernel[0] or pad[2] >= kernel[1]
               or pad[3] >= kernel[1]):
        problems.append(f"pad {list(pad)} must be smaller than the kernel {list(kernel)}")
        ok = False
    ranked = [p for p in (rank_problem("input", x, 4),
                          rank_problem("result", out, 4) if out is not None else None) if p]
    if ranked:
        return problems + ranked
    if out is not None:
        for d in (0, 3):
            if known(x[d], out[d]) and x[d] != out[d]:
                problems.append(f"input dimension {d} ({x[d]}) differs from the output's "
                                f"({out[d]})")
    if ok:
        problems += window_sizes(x[1:3], kernel, pad, stride, (1, 1),
                                 out[1:3] if out is not None else (None, None))[1]
    return problems


def resize_problems(x: Sequence[int], out: Sequence[int] | None, scale: Sequence[int] | None,
                    offset: Sequence[int] | None, border: Sequence[int] | None) -> list[str]:
    """RESIZE: N and C kept, dimensions below 16384, scale, offset and border in
    range, and each output size idiv_check((in - 1) * scale_n - offset + border,
    scale_d) + 1."""
    ranked = [p for p in (rank_problem("input", x, 4),
                          rank_problem("result", out, 4) if out is not None else None) if p]
    if ranked:
        return ranked
    problems = []
    if out is not None:
        for d in (0, 3):
            if known(x[d], out[d]) and x[d] != out[d]:
                problems.append(f"input dimension {d} ({x[d]}) differs from the output's "
                                f"({out[d]})")
    if any(known(d) and d >= 16384 for d in (*x[1:3], *(out[1:3] if out is not None else ()))):
        problems.append("image height and width must be below 16384")
    if scale is None or offset is None or border is None:
        return problems
    if (len(scale), len(offset), len(border)) != (4, 2, 2):
        return problems + [f"scale/offset/border must have 4/2/2 values, got {list(scale)}, "
                           f"{list(offset)}, {list(border)}"]
    if min(scale) <= 0:
        return problems + [f"scale {list(scale)} must be positive"]
    for i in range(2):
        n, d = scale[2 * i], scale[2 * i + 1]
        if n > 2048:
            problems.append(f"scale numerator {n} must be <= 2048")
        if d >= 16 * n:
            problems.append(f"scale {n}/{d} is below the 1/16 downscale limit")
        if not -n <= offset[i] < 16 * n:
            problems.append(f"offset {offset[i]} must be in [-{n}, {16 * n})")
        if not -16 * n <= border[i] < n:
            problems.append(f"border {border[i]} must be in [-{16 * n}, {n})")
        if known(x[1 + i]):
            numerator = (x[1 + i] - 1) * n - offset[i] + border[i]
            problems += [p for p in output_size(f"output dimension {1 + i}", numerator, d,
                                                out[1 + i] if out is not None else None)[1:]
                         if p]
    return problems



# ---------------------------------------------------------------------------
# MATMUL, FFT, ARGMAX, reductions, scatter and gather


def matmul_problems(a: Sequence[int], b: Sequence[int], out: Sequence[int] | None
                    ) -> list[str]:
    """MATMUL: A [N,H,C] times B [N,C,W] is [N,H,W]."""
    problems = [p for p in (rank_problem("A", a, 3), rank_problem("B", b, 3),
                            rank_problem("result", out, 3) if out is not None else None) if p]
    if problems:
        return problems
    if known(a[2], b[1]) and a[2] != b[1]:
        problems.append(f"A is [N,H,C] with C = {a[2]} but B is [N,C,W] with C = {b[1]}")
    if known(a[0], b[0]) and a[0] != b[0]:
        problems.append(f"batch of A ({a[0]}) differs from batch of B ({b[0]})")
    return problems + [p for p in (shape_problem("output", out, (a[0], a[1], b[2])),) if p]


def fft_problems(op_name: str, real: Sequence[int], imag: Sequence[int] | None,
                 outs: Sequence[Sequence[int] | None]) -> list[str]:
    """FFT2D, RFFT2D: [N,H,W] inputs with H and W powers of two; RFFT2D's outputs
    are [N,H,W/2+1]."""
    problem = rank_problem("input_real", real, 3)
    if problem:
        return [problem]
    problems = [f"{name} = {real[d]} must be a power of two" for d, name in ((1, "H"), (2, "W"))
                if known(real[d]) and (real[d] < 1 or real[d] & (real[d] - 1))]
    if op_name == "FFT2D":
        problems += [p for p in (shape_problem("input_imag", imag, real),) if p]
        want: Sequence[int] = real
    else:
        want = (real[0], real[1], real[2] // 2 + 1 if known(real[2]) else DYNAMIC)
    for name, out in zip(("output_real", "output_imag"), outs):
        problem = shape_problem(name, out, want)
        if problem:
            problems.append(problem)
    return problems


def argmax_problems(x: Sequence[int], axis: int, out: Sequence[int] | None) -> list[str]:
    """ARGMAX removes `axis`."""
    problem = axis_problem(axis, len(x))
    if problem:
        return [problem]
    problem = shape_problem("output", out, (*x[:axis], *x[axis + 1:]))
    return [problem] if problem else []


def reduce_problems(x: Sequence[int], axis: int, out: Sequence[int] | None) -> list[str]:
    """A reduction keeps `axis` with size 1."""
    problem = axis_problem(axis, len(x))
    if problem:
        return [problem]
    problem = shape_problem("output", out, (*x[:axis], 1, *x[axis + 1:]))
    return [problem] if problem else []


def reverse_problems(x: Sequence[int], axis: int, out: Sequence[int] | None) -> list[str]:
    """REVERSE keeps the shape; `axis` names one of its dimensions."""
    problem = axis_problem(axis, len(x)) or shape_problem("output", out, x)
    return [problem] if problem else []


def gather_problems(values: Sequence[int], indices: Sequence[int], out: Sequence[int] | None
                    ) -> list[str]:
    """GATHER: values [N,K,C] and indices [N,W] give [N,W,C]."""
    problems = [p for p in (rank_problem("values", values, 3),
                            rank_problem("indices", indices, 2)) if p]
    if problems:
        return problems
    if known(values[0], indices[0]) and values[0] != indices[0]:
        problems.append(f"values batch {values[0]} differs from indices batch {indices[0]}")
    problem = shape_problem("output", out, (values[0], indices[1], values[2]))
    return problems + ([problem] if problem else [])


def scatter_problems(values: Sequence[int], indices: Sequence[int], updates: Sequence[int],
                     out: Sequence[int] | None) -> list[str]:
    """SCATTER: values_in [N,K,C], indices [N,W] and input [N,W,C] give [N,K,C]."""
    problems = [p for p in (rank_problem("values_in", values, 3),
                            rank_problem("indices", indices, 2),
                            rank_problem("input", updates, 3)) if p]
    if problems:
        return problems
    if known(values[0], indices[0]) and values[0] != indices[0]:
        problems.append(f"values_in batch {values[0]} differs from indices batch {indices[0]}")
    return problems + [p for p in (
        shape_problem("input", updates, (values[0], indices[1], values[2])),
        shape_problem("values_out", out, values)) if p]


# ---------------------------------------------------------------------------
# Elementwise and data layout


def elementwise_problems(shapes: Sequence[Sequence[int]], out: Sequence[int] | None
                         ) -> list[str]:
    """Operands broadcast (equal ranks, each dimension equal or 1) to the result's shape."""
    if out is not None and any(len(s) != len(out) for s in shapes):
        return [f"operands and result must have equal ranks (reshape first), got "
                f"{[list(s) for s in shapes]} -> {list(out)}"]
    shape, problem = broadcast_shape(shapes)
    if problem:
        return [problem]
    problem = shape_problem("output", out, shape)
    return [problem] if problem else []


def concat_problems(shapes: Sequence[Sequence[int]], axis: int, out: Sequence[int] | None
                    ) -> list[str]:
    """CONCAT: inputs of one rank that differ only along `axis`; the output sums it."""
    if not shapes:
        return ["CONCAT needs at least one input"]
    first = shapes[0]
    problem = axis_problem(axis, len(first))
    if problem:
        return [problem]
    for s in shapes:
        if len(s) != len(first):
            return [f"all inputs must have rank {len(first)}, got {[list(s) for s in shapes]}"]
        for d, (got, expected) in enumerate(zip(s, first)):
            if d != axis and known(got, expected) and got != expected:
                return [f"input shape {list(s)} differs from {list(first)} outside axis {axis} "
                        f"(only axis {axis} may differ)"]
    total = 0
    for s in shapes:
        total = total + s[axis] if known(total, s[axis]) else DYNAMIC
    want = [DYNAMIC if d != axis and any(s[d] == DYNAMIC for s in shapes) else first[d]
            for d in range(len(first))]
    want[axis] = total
    problem = shape_problem("output", out, want)
    return [problem] if problem else []


def pad_problems(x: Sequence[int], padding: Sequence[int] | None, out: Sequence[int] | None
                 ) -> list[str]:
    """PAD: 2 * rank padding values, none negative; input1 has rank >= 1."""
    if not x:
        return ["PAD of a rank-0 tensor"]
    if padding is None:
        return []
    if len(padding) != 2 * len(x):
        return [f"padding must have 2 * rank = {2 * len(x)} values, got {len(padding)}"]
    if min(padding) < 0:
        return [f"padding must be >= 0, got negative values in {list(padding)}"]
    want = [d + padding[2 * i] + padding[2 * i + 1] if known(d) else DYNAMIC
            for i, d in enumerate(x)]
    problem = shape_problem("output", out, want)
    return [problem] if problem else []


def _elements(shape: Sequence[int]) -> int:
    count = 1
    for d in shape:
        count *= d  # Python integers: no wrap-around
    return count


def reshape_problems(x: Sequence[int], shape: Sequence[int] | None, out: Sequence[int] | None
                     ) -> list[str]:
    """RESHAPE: the shape operand is the output's, of non-negative sizes, and holds
    the input's element count."""
    problems = []
    if shape is not None and min(shape, default=0) < 0:
        return [f"shape {list(shape)} has a negative dimension"]
    if shape is not None:
        problem = shape_problem("output (from the shape operand)", out, shape)
        if problem:
            problems.append(problem)
    target = shape if shape is not None else out
    if target is not None and known(*x, *target) and _elements(x) != _elements(target):
        problems.append(f"element count changes from {list(x)} ({_elements(x)} elements) to "
                        f"{list(target)} ({_elements(target)} elements)")
    return problems


def slice_problems(x: Sequence[int], start: Sequence[int] | None,
                   size: Sequence[int] | None, out: Sequence[int] | None) -> list[str]:
    """SLICE: start >= 0 and size >= 1 per dimension, start + size within it."""
    if start is None or size is None:
        return []
    if len(start) != len(x) or len(size) != len(x):
        return [f"start and size must have rank {len(x)} values, got {list(start)} and "
                f"{list(size)}"]
    for d, (dim, s, n) in enumerate(zip(x, start, size)):
        if s < 0:
            reason = f"start[{d}] = {s} < 0"
        elif n <= 0:
            reason = f"size[{d}] = {n} <= 0"
        elif known(dim) and s + n > dim:
            reason = f"start[{d}] + size[{d}] = {s + n} > {dim}"
        else:
            continue
        return [f"{reason}: slice start {list(start)} size {list(size)} does not fit the "
                f"input {list(x)}"]
    problem = shape_problem("output", out, size)
    return [problem] if problem else []


def tile_problems(x: Sequence[int], multiples: Sequence[int] | None,
                  out: Sequence[int] | None) -> list[str]:
    """TILE: a positive multiple per dimension; the output multiplies each."""
    if multiples is None:
        return []
    if len(multiples) != len(x):
        return [f"multiples must have {len(x)} values, got {list(multiples)}"]
    if min(multiples, default=1) <= 0:
        return [f"multiples {list(multiples)} must be positive"]
    problem = shape_problem("output", out, [d * m if known(d) else DYNAMIC
                                            for d, m in zip(x, multiples)])
    return [problem] if problem else []


def transpose_problems(x: Sequence[int], perms: Sequence[int] | None,
                       out: Sequence[int] | None) -> list[str]:
    """TRANSPOSE: perms is a permutation of the dimensions; output dimension i is
    input dimension perms[i]."""
    if perms is None:
        return []
    if sorted(perms) != list(range(len(x))):
        return [f"perms {list(perms)} is not a permutation of 0..{len(x) - 1}"]
    problem = shape_problem("output", out, [x[p] for p in perms])
    return [problem] if problem else []




def clamp_problems(low: float, high: float, element_name: str) -> list[str]:
    """CLAMP: bounds that are values of the element type (integers: in its range;
    floats: not NaN, compared in the type), min_val <= max_val."""
    element = SCALAR_TYPES.get(element_name)
    if element is None:
        return []
    if np.isnan(low) or np.isnan(high):
        return ["min_val and max_val must not be NaN"]
    if element.is_integer:
        problems = [f"{name} {value} is not a value of {element}"
                    for name, value in (("min_val", low), ("max_val", high))
                    if value != int(value) or not element.min_value <= value <= element.max_value]
        if not problems and high < low:
            problems.append(f"max_val {high} is smaller than min_val {low}")
        return problems
    dtype = numpy_dtype(element)
    if np.asarray(high, dtype) < np.asarray(low, dtype):
        return [f"max_val {high} is smaller than min_val {low}"]
    return []


def table_problems(in_t: str, table: Sequence[int]) -> list[str]:
    """TABLE: a 1-D table of the mode's TABLE_SIZE entries (256 for i8, 513 for i16)."""
    size = next((m.params["TABLE_SIZE"] for m in OPS["TABLE"].modes
                 if m.types["in_t"] == in_t), None)
    if size is None or (len(table) == 1 and not known(table[0])):
        return []
    if len(table) != 1 or table[0] != size:
        return [f"table must have {size} entries for {in_t} input, got shape {list(table)}"]
    return []


# ---------------------------------------------------------------------------
# Control flow and variables


def condition_problem(what: str, shape: Sequence[int]) -> str | None:
    """COND_IF's condition and WHILE_LOOP's cond_graph result hold one boolean."""
    if known(*shape) and _elements(shape) != 1:
        return f"{what} must have one element, got shape {list(shape)}"
    return None


def initial_value_problem(name: str, shape: Sequence[int], var_shape: Sequence[int]
                          ) -> str | None:
    """VARIABLE's initial_value has the variable's shape."""
    return shape_problem(f"initial_value of variable {name!r}", shape, var_shape)


# ---------------------------------------------------------------------------
# RESCALE


def rescale_problems(in_t: str, out_t: str, in_zp: int | None, out_zp: int | None,
                     scale32: bool, rounding_mode: str, per_channel: bool,
                     input_unsigned: bool, output_unsigned: bool, rank: int | None
                     ) -> list[str]:
    """RESCALE's attributes and zero points (None: not known): 48-bit input only
    without scale32, DOUBLE_ROUND only with it, unsigned only for 8 and 16 bits
    on one side and never towards or from 32/48 bits; a zero point is 0 except
    on i8, and 0 or 32768 on unsigned 16 bits; per_channel needs rank >= 1."""
    return (rescale_attribute_problems(in_t, out_t, scale32, rounding_mode, input_unsigned,
                                       output_unsigned)
            + rescale_zero_point_problems(in_t, out_t, in_zp, out_zp, input_unsigned,
                                          output_unsigned)
            + rescale_rank_problems(per_channel, rank))


def rescale_attribute_problems(in_t: str, out_t: str, scale32: bool, rounding_mode: str,
                               input_unsigned: bool, output_unsigned: bool) -> list[str]:
    """The attribute rules of rescale_problems."""
    problems = []
    if scale32 and in_t == "i48":
        problems.append("scale32 must be false for a 48-bit input")
    if not scale32 and rounding_mode == "DOUBLE_ROUND":
        problems.append("DOUBLE_ROUND needs scale32")
    if rounding_mode not in ("SINGLE_ROUND", "DOUBLE_ROUND", "INEXACT_ROUND"):
        problems.append(f"unknown rounding_mode {rounding_mode!r}")
    if input_unsigned and output_unsigned:
        problems.append("input_unsigned and output_unsigned cannot both be true")
    if input_unsigned and (in_t not in ("i8", "i16") or out_t == "i32"):
        problems.append(f"input_unsigned is not allowed for {in_t} -> {out_t}")
    if output_unsigned and (out_t not in ("i8", "i16") or in_t in ("i32", "i48")):
        problems.append(f"output_unsigned is not allowed for {in_t} -> {out_t}")
    return problems


def rescale_zero_point_problems(in_t: str, out_t: str, in_zp: int | None, out_zp: int | None,
                                input_unsigned: bool, output_unsigned: bool) -> list[str]:
    """The zero point rules of rescale_problems."""
    problems = []
    for name, zp, element, unsigned in (("input_zp", in_zp, in_t, input_unsigned),
                                        ("output_zp", out_zp, out_t, output_unsigned)):
        if zp is None:
            continue
        if element == "i16" and unsigned:
            if zp & 0xFFFF not in (0, 32768):
                problems.append(f"{name} of unsigned 16-bit must be 0 or 32768, "
                                f"got {zp & 0xFFFF}")
        elif element != "i8" and zp != 0:
            problems.append(f"{name} must be 0 for {element}, got {zp}")
    return problems


def rescale_rank_problems(per_channel: bool, rank: int | None) -> list[str]:
    """ERROR_IF per_channel with a rank-0 input."""
    if rank is not None and per_channel and rank < 1:
        return ["per_channel needs an input of rank >= 1"]
    return []


def rescale_count_problems(x: Sequence[int] | None, per_channel: bool,
                           counts: Sequence[tuple[str, Sequence[int] | None]]) -> list[str]:
    """The multiplier and shift hold one value per channel (the last dimension)
    with per_channel, else one."""
    if per_channel and x is not None and not x:
        return []  # rescale_problems reports it
    channels = (x[-1] if x else DYNAMIC) if per_channel else 1
    return [f"{name} has {s[0]} values; per_channel = {per_channel} needs {channels}"
            for name, s in counts
            if s is not None and len(s) == 1 and known(s[0], channels) and s[0] != channels]

