"""Tensor operators (TOSA 1.0 chapter "Tensor Operators").

Integer convolutions and MATMUL are exact. Each kernel subtracts the zero
points, pads with zeros (so padding contributes 0 after the subtraction, as
the pseudocode's `value = 0` outside the input does), and sums one matrix
product per kernel tap. The products are summed in float32 when every partial
sum is provably an integer below 2^24, in float64 below 2^53 (then every
float addition is exact, whatever order BLAS uses) and in int64 otherwise. The pseudocode's
`apply_add_s<acc_t>` REQUIREs every partial sum, in its loop order, to fit the
accumulator; when the cheap bound (terms x max|input| x max|weight|) does not
already prove that, the partial sums are checked exactly.

Float convolutions (CONV2D, CONV3D, DEPTHWISE_CONV2D) follow the pseudocode
literally: each product rounded to `acc_t`, added to `acc_t` one at a time in
its loop order (kernel taps, then input channels), the sum cast to `out_t` and
the bias added after. The specification allows any order within its
dot-product error bound; this one is what Arm's reference model and TFLite's
float reference kernels compute, so a float convolution gives their bits, and a
later op that rounds to an integer (a hybrid op quantizing its input) rounds
as they do. TRANSPOSE_CONV2D, MATMUL and AVG_POOL2D compute in float64, round
once to `acc_t` and then to `out_t`: the exact result rounded, at least as
accurate as accumulating in `acc_t` itself.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Sequence

import numpy as np

from reference_model import numerics
from reference_model.kernels import (
    KernelContext,
    KernelNeeded,
    Prepared,
    StaticOp,
    float_compute,
    kernel,
    prepared,
)
from tfl2tosa.errors import SpecErrorIf
from tfl2tosa.ir.types import ScalarType, numpy_dtype, scalar_type
from tfl2tosa.tosa import rules
from tfl2tosa.tosa.ops import ACC_TYPE_ELEMENT

# Above this many elements the im2col patch matrix is not built; taps are summed one by one.
_PATCH_LIMIT = 1 << 25
# In-order float sums (_accumulate_in_order): up to this many products are made at
# once and reduced by one numpy call; larger sums update blocks of this many
# running sums, one term at a time (a block and its products stay in cache).
_ORDERED_PRODUCTS = 1 << 19
_ORDERED_BLOCK = 1 << 16


# ---------------------------------------------------------------------------
# Shared pieces


def _zero_point(ctx: KernelContext, index: int, element: ScalarType, name: str) -> float | int:
    """The [1] zero-point operand; ERROR_IF non-zero unless the tensor is i8."""
    value = np.asarray(ctx.inputs[index]).reshape(-1)
    ctx.error_if(value.size != 1, f"{name} must have one element")
    zp = int(value[0]) if element.is_integer else float(value[0])
    problem = rules.zero_point_problem(name, element.name, zp)
    if problem:
        ctx.error_if(True, problem)
    return zp


def _output_dtype(ctx: KernelContext, index: int = 0) -> np.dtype:
    return numpy_dtype(ctx.output_types[index].element)


def _window_slice(start: int, count: int, stride: int) -> slice:
    return slice(start, start + (count - 1) * stride + 1, stride)


class _Accumulation:
    """How a dot-product kernel accumulates: integer (exact, acc_bits) or float."""

    __slots__ = ("integer", "acc_bits", "acc_dtype")

    def __init__(self, integer: bool, acc_bits: int = 0,
                 acc_dtype: np.dtype | None = None) -> None:
        self.integer = integer
        self.acc_bits = acc_bits             # width of acc_t for integers (32 or 48)
        self.acc_dtype = acc_dtype           # numpy dtype of acc_t for floats


@functools.lru_cache(maxsize=32)
def _accumulation(acc_element: ScalarType) -> _Accumulation:
    if acc_element.is_integer:
        return _Accumulation(True, acc_bits=acc_element.bits)
    return _Accumulation(False, acc_dtype=numpy_dtype(acc_element))


def _acc_type(ctx: KernelContext) -> ScalarType:
    acc_type = ctx.attrs.get("acc_type")
    ctx.error_if(acc_type not in ACC_TYPE_ELEMENT, f"unknown acc_type {acc_type!r}")
    return scalar_type(ACC_TYPE_ELEMENT[acc_type])


def _centered(array: np.ndarray, zp: float, integer: bool) -> np.ndarray:
    """value - zp, in int64 (integers: exact) or float64 (floats: exact conversion)."""
    if integer:
        return numerics.as_int64(array) - np.int64(zp)
    with np.errstate(invalid="ignore"):  # NaN and infinite values carry through
        return np.asarray(array).astype(np.float64) - zp


def _max_abs(array: np.ndarray) -> int:
    """max |x| of an integer array (min/max avoid an |x| temporary; a few dozen
    values cost less as a Python list)."""
    if array.size <= 32:
        return max(map(abs, array.reshape(-1).tolist()), default=0)
    return max(-int(array.min()), int(array.max()))


def _exact_dtype(terms: int, x_bound: int, w_bound: int) -> type:
    """The cheapest dtype in which every partial sum of `terms` integer products
    |x| <= x_bound times |w| <= w_bound is exact: float32 (integers below 2^24),
    float64 (below 2^53) or int64."""
    largest = terms * x_bound * w_bound
    if largest < 1 << 24:
        return np.float32
    return np.float64 if largest < 1 << 53 else np.int64


def _needs_partial_sum_check(terms: int, x_bound: int, w_bound: int, bits: int) -> bool:
    """False if no partial sum of `terms` products can leave the `bits`-wide range."""
    return terms * x_bound * w_bound > numerics.int_max(bits)


def _accumulate_in_order(acc: np.ndarray, columns: np.ndarray, weights: np.ndarray) -> None:
    """acc[p, oc] += columns[k, p] * weights[k, oc] for k = 0, 1, ..., each product
    and each sum rounded to acc's float dtype (the pseudocode's apply_mul_s and
    apply_add_s in acc_t, no fused multiply-add). acc [P, OC] and columns [K, P]
    are C-contiguous; acc is updated in place."""
    terms, (positions, out_channels) = columns.shape[0], acc.shape
    sums = positions * out_channels
    with np.errstate(all="ignore"):  # overflow to infinity and NaN results are meant
        if terms * sums <= _ORDERED_PRODUCTS:
            # Rows: acc, then each term's products. numpy reduces an axis that is not
            # the fastest in memory by adding each row to the running result in order
            # (pairwise summation is only for the fastest axis; numpy.sum's notes),
            # so a single running sum gets a second, zero column.
            stacked = np.zeros((terms + 1, max(sums, 2)), acc.dtype)
            stacked[0, :sums] = acc.reshape(-1)
            stacked[1:, :sums] = (columns[:, :, None] * weights[:, None, :]).reshape(terms, -1)
            acc[...] = np.add.reduce(stacked, axis=0)[:sums].reshape(acc.shape)
            return
        rows = max(1, _ORDERED_BLOCK // max(1, out_channels))
        product = np.empty((min(rows, positions), out_channels), acc.dtype)
        multiply, add = np.multiply, np.add
        for start in range(0, positions, rows):
            block = acc[start:start + rows]
            term = product[:block.shape[0]]
            for column, weight in zip(columns[:, start:start + rows, None], weights):
                multiply(column, weight, out=term)
                add(block, term, out=block)


def _finish(ctx: KernelContext, acc: np.ndarray, bias: np.ndarray, channels: int,
            accumulation: _Accumulation) -> np.ndarray:
    """out = static_cast<out_t>(acc) + bias[oc or 0] (apply_add_s<out_t> for integers)."""
    bias = np.asarray(bias).reshape(-1)
    out_dtype = _output_dtype(ctx)
    if accumulation.integer:
        # acc itself fits acc_t: it is the last partial sum, which the caller checked.
        out_bits = ctx.element(0, output=True).bits
        total = numerics.apply_add_s(numerics.as_int64(acc), numerics.as_int64(bias), out_bits)
        return total.astype(out_dtype)
    rounded = numerics.round_to_float(acc, accumulation.acc_dtype)
    as_out = numerics.round_to_float(rounded.astype(np.float64), out_dtype)
    return float_compute(np.add, out_dtype, as_out, bias.astype(out_dtype))


# ---------------------------------------------------------------------------
# Convolution engine shared by CONV2D and CONV3D


class _Window:
    """Spatial geometry of a (dilated, strided) window per spatial dimension."""

    __slots__ = ("kernel", "stride", "dilation", "pad", "out")

    def __init__(self, kernel: tuple[int, ...], stride: tuple[int, ...],
                 dilation: tuple[int, ...], pad: tuple[tuple[int, int], ...],
                 out: tuple[int, ...]) -> None:
        self.kernel = kernel
        self.stride = stride
        self.dilation = dilation
        self.pad = pad                       # (before, after) per spatial dimension
        self.out = out

    def taps(self) -> Iterator[tuple[int, ...]]:
        return itertools.product(*(range(k) for k in self.kernel))

    def tap_view(self, padded: np.ndarray, tap: tuple[int, ...]) -> np.ndarray:
        """The input positions tap `tap` reads for every output: [N, *out, C]."""
        index = (slice(None),) + tuple(
            _window_slice(t * d, o, s)
            for t, d, o, s in zip(tap, self.dilation, self.out, self.stride)) + (slice(None),)
        return padded[index]


def _window(ctx: KernelContext | type[_Unlocated], spatial_in: Sequence[int],
            kernel: Sequence[int], pad: Sequence[int], stride: Sequence[int],
            dilation: Sequence[int], declared: Sequence[int | None]) -> _Window:
    dims = len(spatial_in)
    ctx.check(rules.attribute_problems(pad, "pad", 2 * dims, 0)
           + rules.attribute_problems(stride, "stride", dims, 1)
           + rules.attribute_problems(dilation, "dilation", dims, 1))
    out, problems = rules.window_sizes(spatial_in, kernel, pad, stride, dilation, declared)
    ctx.check(problems)
    pairs = tuple((pad[2 * i], pad[2 * i + 1]) for i in range(dims))
    return _Window(tuple(kernel), tuple(stride), tuple(dilation), pairs, tuple(out))


def _pad_spatial(x: np.ndarray, pad: tuple[tuple[int, int], ...]) -> np.ndarray:
    return np.pad(x, ((0, 0),) + pad + ((0, 0),))


def _convolve(x: np.ndarray, w: np.ndarray, window: _Window, accumulation: _Accumulation
              ) -> np.ndarray:
    """sum over taps and input channels of x[n, pos(tap), ic] * w[oc, tap, ic].

    x: [N, *spatial, IC] with zero points removed; w: [OC, *kernel, IC].
    Returns [N, *out, OC] as int64 (integers) or acc_t (floats). Integers: one
    matrix product over the im2col patches [N*out, taps*IC] when they fit in
    memory, else one product per tap; floats: _convolve_in_order.
    """
    if not accumulation.integer:
        return _convolve_in_order(x, w, window, accumulation.acc_dtype)
    taps = math.prod(window.kernel)
    terms = taps * x.shape[-1]
    x_bound, w_bound = _max_abs(x), _max_abs(w)
    work = _exact_dtype(terms, x_bound, w_bound)
    padded = _pad_spatial(x, window.pad).astype(work, copy=False)
    weights = w.astype(work, copy=False)
    out_shape = (x.shape[0],) + window.out + (w.shape[0],)
    if x.shape[0] * math.prod(window.out) * terms <= _PATCH_LIMIT:
        patches = np.empty((x.shape[0],) + window.out + (taps, x.shape[-1]), dtype=work)
        for i, tap in enumerate(window.taps()):
            patches[..., i, :] = window.tap_view(padded, tap)
        acc = (patches.reshape(-1, terms) @ weights.reshape(w.shape[0], terms).T).reshape(out_shape)
    else:
        acc = np.zeros(out_shape, dtype=work)
        for tap in window.taps():
            acc += window.tap_view(padded, tap) @ weights[(slice(None),) + tap].T
    if _needs_partial_sum_check(terms, x_bound, w_bound, accumulation.acc_bits):
        _require_conv_partial_sums(_pad_spatial(x, window.pad), w, window,
                                   accumulation.acc_bits)
    return acc.astype(np.int64)  # exact integers in any of the three dtypes


def _convolve_in_order(x: np.ndarray, w: np.ndarray, window: _Window, acc_dtype: np.dtype
                       ) -> np.ndarray:
    """The float sum in the pseudocode's order: taps (row-major), then input
    channels, one term at a time in acc_t (_accumulate_in_order). The terms are the
    im2col columns [taps*IC, N*out] when they fit in memory, else one tap's at a time.

    A padded position adds 0 * w = +-0, which leaves a running sum that starts at
    +0.0 unchanged, as the pseudocode's skipping it does; but not for an infinite
    or NaN weight (0 * inf is NaN), so with one of those each tap sums over the
    positions inside the input only."""
    channels, out_channels = x.shape[-1], w.shape[0]
    taps = math.prod(window.kernel)
    positions = x.shape[0] * math.prod(window.out)
    with np.errstate(invalid="ignore"):  # widening quiets a signalling NaN, as intended
        padded = _pad_spatial(x.astype(acc_dtype), window.pad)
        weights = np.ascontiguousarray(w.astype(acc_dtype).reshape(out_channels, -1).T)
    acc = np.zeros((positions, out_channels), acc_dtype)
    if any(map(any, window.pad)) and not np.isfinite(weights).all():
        inside = _pad_spatial(np.ones(x.shape[:-1] + (1,), bool), window.pad)
        for i, tap in enumerate(window.taps()):
            rows = np.flatnonzero(window.tap_view(inside, tap))
            columns = np.ascontiguousarray(
                window.tap_view(padded, tap).reshape(positions, channels)[rows].T)
            part = acc[rows]
            _accumulate_in_order(part, columns, weights[i * channels:(i + 1) * channels])
            acc[rows] = part
    elif positions * taps * channels <= _PATCH_LIMIT:
        columns = np.empty((taps, channels, positions), acc_dtype)
        for i, tap in enumerate(window.taps()):
            columns[i] = window.tap_view(padded, tap).reshape(positions, channels).T
        _accumulate_in_order(acc, columns.reshape(taps * channels, positions), weights)
    else:
        for i, tap in enumerate(window.taps()):
            columns = np.ascontiguousarray(
                window.tap_view(padded, tap).reshape(positions, channels).T)
            _accumulate_in_order(acc, columns, weights[i * channels:(i + 1) * channels])
    return acc.reshape((x.shape[0],) + window.out + (out_channels,))


def _require_conv_partial_sums(padded: np.ndarray, w: np.ndarray, window: _Window,
                               bits: int) -> None:
    """Check every partial sum in the pseudocode's order (taps, then input channels).

    Only reached when the cheap bound fails. Out-of-bounds taps add 0 (the
    pseudocode skips them), which leaves the partial sums unchanged.
    """
    for n in range(padded.shape[0]):
        running = np.zeros(window.out + (w.shape[0],), dtype=np.int64)
        for tap in window.taps():
            view = window.tap_view(padded[n:n + 1], tap)[0]       # [*out, IC]
            products = view[..., None, :] * w[(slice(None),) + tap]  # [*out, OC, IC]
            prefix = running[..., None] + np.cumsum(products, axis=-1)
            numerics.require_fits(prefix, bits, "every convolution partial sum (apply_add_s)")
            running = prefix[..., -1]


def _conv_nd(ctx: KernelContext, dims: int) -> list[np.ndarray]:
    x, w, bias = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    in_element, w_element = ctx.element(0), ctx.element(1)
    in_zp = _zero_point(ctx, 3, in_element, "input_zp")
    w_zp = _zero_point(ctx, 4, w_element, "weight_zp")
    pad, stride, dilation = ctx.attrs["pad"], ctx.attrs["stride"], ctx.attrs["dilation"]
    declared = ctx.output_shape()
    ctx.check(rules.convolution_problems(ctx.op_name, x.shape, w.shape, np.shape(bias),
                                           declared, pad, stride, dilation))
    spatial_declared = declared[1:1 + dims] if declared else (None,) * dims
    window = _window(ctx, x.shape[1:1 + dims], w.shape[1:1 + dims], pad, stride, dilation,
                     spatial_declared)
    accumulation = _accumulation(_acc_type(ctx))
    if accumulation.integer:
        x, w = _centered(x, in_zp, True), _centered(w, w_zp, True)
    # Float zero points are 0 (ERROR_IF above): the values as they are.
    acc = _convolve(x, w, window, accumulation)
    return [_finish(ctx, acc, bias, w.shape[0], accumulation)]


@kernel("CONV2D")
def conv2d(ctx: KernelContext) -> list[np.ndarray]:
    """CONV2D: input [N,IH,IW,IC], weight [OC,KH,KW,IC], pad [top,bottom,left,right]."""
    return _conv_nd(ctx, 2)


@kernel("CONV3D")
def conv3d(ctx: KernelContext) -> list[np.ndarray]:
    """CONV3D: input [N,ID,IH,IW,IC], weight [OC,KD,KH,KW,IC].

    pad is [d0, d1, top, bottom, left, right]; stride and dilation [d, y, x].
    """
    return _conv_nd(ctx, 3)


@kernel("DEPTHWISE_CONV2D")
def depthwise_conv2d(ctx: KernelContext) -> list[np.ndarray]:
    """DEPTHWISE_CONV2D: input [N,IH,IW,C], weight [KH,KW,C,M], output channel c*M + m.

    Each output is a sum over the KH*KW taps only, so the partial sums are the
    running per-tap sums: for integers checked exactly (int64 holds them) when
    needed, for floats each product and sum rounded to acc_t (see the module's
    docstring).
    """
    x, w, bias = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    in_element, w_element = ctx.element(0), ctx.element(1)
    in_zp = _zero_point(ctx, 3, in_element, "input_zp")
    w_zp = _zero_point(ctx, 4, w_element, "weight_zp")
    pad, stride, dilation = ctx.attrs["pad"], ctx.attrs["stride"], ctx.attrs["dilation"]
    declared = ctx.output_shape()
    ctx.check(rules.convolution_problems("DEPTHWISE_CONV2D", x.shape, w.shape, np.shape(bias),
                                           declared, pad, stride, dilation))
    window = _window(ctx, x.shape[1:3], w.shape[0:2], pad, stride, dilation,
                     declared[1:3] if declared else (None, None))
    accumulation = _accumulation(_acc_type(ctx))
    integer = accumulation.integer
    taps = w.shape[0] * w.shape[1]
    check = False
    if integer:
        xc, wc = _centered(x, in_zp, True), _centered(w, w_zp, True)
        bounds = (_max_abs(xc), _max_abs(wc))
        # The running per-tap sums are exact in the cheapest of float32 / float64 / int64
        # that holds every partial sum (see _exact_dtype).
        work = _exact_dtype(taps, *bounds)
        check = _needs_partial_sum_check(taps, *bounds, accumulation.acc_bits)
    else:
        # Float zero points are 0 (ERROR_IF above); each product and sum in acc_t.
        xc, wc, work = x, w, accumulation.acc_dtype
    with np.errstate(invalid="ignore"):  # widening quiets a signalling NaN, as intended
        padded = _pad_spatial(xc, window.pad).astype(work, copy=False)
        weights = wc.astype(work, copy=False)
    channels, multiplier = w.shape[2], w.shape[3]
    acc = np.zeros((x.shape[0],) + window.out + (channels, multiplier), dtype=work)
    # Taps outside the input are skipped (see _convolve_in_order): only an infinite
    # or NaN float weight makes a padded one differ.
    inside = None
    if not integer and any(map(any, window.pad)) and not np.isfinite(weights).all():
        inside = _pad_spatial(np.ones(x.shape[:-1] + (1,), bool), window.pad)
    with np.errstate(all="ignore"):  # float overflow to infinity and NaN results are meant
        for tap in window.taps():
            term = window.tap_view(padded, tap)[..., None] * weights[tap]
            if inside is not None:
                term[~window.tap_view(inside, tap)[..., 0]] = 0
            acc += term
            if check:
                numerics.require_fits(acc, accumulation.acc_bits,
                                      "every depthwise partial sum (apply_add_s)")
    acc = acc.reshape(acc.shape[:3] + (channels * multiplier,))
    if integer:
        acc = acc.astype(np.int64)  # exact integers in any of the three dtypes
    return [_finish(ctx, acc, bias, channels * multiplier, accumulation)]


@kernel("TRANSPOSE_CONV2D")
def transpose_conv2d(ctx: KernelContext) -> list[np.ndarray]:
    """TRANSPOSE_CONV2D: input [N,IH,IW,IC], weight [OC,KH,KW,IC], out_pad [t, b, l, r].

    Input pixel (iy, ix) times weight tap (ky, kx) lands on output
    (iy*stride_y + out_pad_top + ky, ix*stride_x + out_pad_left + kx); positions
    outside the output (negative out_pad crops) are dropped.
    """
    x, w, bias = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    in_element, w_element = ctx.element(0), ctx.element(1)
    in_zp = _zero_point(ctx, 3, in_element, "input_zp")
    w_zp = _zero_point(ctx, 4, w_element, "weight_zp")
    out_pad, stride = list(ctx.attrs["out_pad"]), list(ctx.attrs["stride"])
    ctx.check(rules.transpose_conv2d_problems(x.shape, w.shape, np.shape(bias),
                                                ctx.output_shape(), out_pad, stride))
    kernel_hw = w.shape[1:3]
    out_hw = tuple((x.shape[1 + i] - 1) * stride[i] + out_pad[2 * i] + out_pad[2 * i + 1]
                   + kernel_hw[i] for i in range(2))
    accumulation = _accumulation(_acc_type(ctx))
    integer = accumulation.integer
    xc, wc = _centered(x, in_zp, integer), _centered(w, w_zp, integer)
    terms = kernel_hw[0] * kernel_hw[1] * x.shape[3]
    bounds = (_max_abs(xc), _max_abs(wc)) if integer else (0, 0)
    work = _exact_dtype(terms, *bounds) if integer else np.float64
    acc = np.zeros((x.shape[0],) + out_hw + (w.shape[0],), dtype=work)
    for ky, kx in itertools.product(range(kernel_hw[0]), range(kernel_hw[1])):
        rows = _scatter_range(x.shape[1], stride[0], out_pad[0] + ky, out_hw[0])
        cols = _scatter_range(x.shape[2], stride[1], out_pad[2] + kx, out_hw[1])
        if rows is None or cols is None:
            continue
        (iy, oy), (ix, ox) = rows, cols
        tap = xc[:, iy, ix].astype(work) @ wc[:, ky, kx, :].T.astype(work)
        acc[:, oy, ox] += tap
    if integer:
        acc = acc.astype(np.int64)
        if _needs_partial_sum_check(terms, *bounds, accumulation.acc_bits):
            _require_transpose_partial_sums(xc, wc, stride, out_pad, out_hw,
                                            accumulation.acc_bits)
    return [_finish(ctx, acc, bias, w.shape[0], accumulation)]


def _scatter_range(in_size: int, stride: int, offset: int, out_size: int
                   ) -> tuple[slice, slice] | None:
    """Input indices i with 0 <= i*stride + offset < out_size, and their output slice."""
    first = max(0, -(offset // stride))  # ceil(-offset / stride)
    last = min(in_size - 1, (out_size - 1 - offset) // stride)
    if last < first:
        return None
    start = first * stride + offset
    return slice(first, last + 1), slice(start, last * stride + offset + 1, stride)


def _require_transpose_partial_sums(xc: np.ndarray, wc: np.ndarray, stride: Sequence[int],
                                    out_pad: Sequence[int], out_hw: tuple[int, int],
                                    bits: int) -> None:
    """Exact partial sums in the pseudocode order (ky, kx, ic) for every output."""
    running = np.zeros((xc.shape[0],) + out_hw + (wc.shape[0],), dtype=np.int64)
    for ky, kx in itertools.product(range(wc.shape[1]), range(wc.shape[2])):
        rows = _scatter_range(xc.shape[1], stride[0], out_pad[0] + ky, out_hw[0])
        cols = _scatter_range(xc.shape[2], stride[1], out_pad[2] + kx, out_hw[1])
        if rows is None or cols is None:
            continue
        (iy, oy), (ix, ox) = rows, cols
        products = xc[:, iy, ix][..., None, :] * wc[:, ky, kx, :]   # [N, h, w, OC, IC]
        prefix = running[:, oy, ox][..., None] + np.cumsum(products, axis=-1)
        numerics.require_fits(prefix, bits, "every transpose convolution partial sum")
        running[:, oy, ox] = prefix[..., -1]


# ---------------------------------------------------------------------------
# MATMUL


@kernel("MATMUL")
def matmul(ctx: KernelContext) -> list[np.ndarray]:
    """MATMUL: A [N,H,C] x B [N,C,W] -> [N,H,W], zero points removed, out_t accumulates."""
    a, b = ctx.inputs[0], ctx.inputs[1]
    element = ctx.element(0)
    a_zp = _zero_point(ctx, 2, element, "A_zp")
    b_zp = _zero_point(ctx, 3, ctx.element(1), "B_zp")
    ctx.check(rules.matmul_problems(a.shape, b.shape, ctx.output_shape()))
    out_element = ctx.element(0, output=True)
    out_dtype = _output_dtype(ctx)
    integer = element.is_integer
    ac, bc = _centered(a, a_zp, integer), _centered(b, b_zp, integer)
    if not integer:
        return [numerics.round_to_float(ac @ bc, out_dtype)]
    terms, bounds = a.shape[2], (_max_abs(ac), _max_abs(bc))
    work = _exact_dtype(terms, *bounds)
    product = (ac.astype(work) @ bc.astype(work)).astype(np.int64)
    if _needs_partial_sum_check(terms, *bounds, out_element.bits):
        products = ac[:, :, None, :] * bc.transpose(0, 2, 1)[:, None, :, :]  # [N, H, W, C]
        prefix = np.cumsum(products, axis=-1)
        numerics.require_fits(prefix, out_element.bits, "every MATMUL partial sum (apply_add_s)")
    return [product.astype(out_dtype)]


@prepared("MATMUL")
def prepare_matmul(op: StaticOp) -> Prepared | None:
    """MATMUL with static shapes and constant zero points, the checks done once.

    Floats: the kernel's float64 product rounded once. Integers: when the input
    types bound every partial sum inside out_t and inside the exact range of a
    float work dtype (as for the prepared convolutions), one product in that
    dtype; a constant B is centred once."""
    element, b_element = op.element(0), op.element(1)
    a_shape, b_shape = op.static_shape(0), op.static_shape(1)
    zero_points = op.constants[2:4]
    if element is None or b_element is None or a_shape is None or b_shape is None \
            or len(zero_points) != 2 or any(zp is None or zp.size != 1 for zp in zero_points):
        return None
    if len(a_shape) != 3 or len(b_shape) != 3 or a_shape[0] != b_shape[0] \
            or a_shape[2] != b_shape[1] \
            or op.static_shape(0, output=True) != (a_shape[0], a_shape[1], b_shape[2]):
        return None  # an ERROR_IF: the kernel reports it
    out_dtype = numpy_dtype(op.output_types[0].element)
    a_zp, b_zp = (zp.reshape(-1)[0].item() for zp in zero_points)
    if element.is_float:
        return _prepared_float_matmul(a_zp, b_zp, out_dtype)
    if not element.is_integer or (element.name != "i8" and a_zp != 0) \
            or (b_element.name != "i8" and b_zp != 0):
        return None
    x_bound = _type_bound(element, a_zp)
    weight = op.constants[1]
    w_bound = _type_bound(b_element, b_zp) if weight is None else (
        max(int(weight.max()) - b_zp, b_zp - int(weight.min())) if weight.size else 0)
    terms = a_shape[2]
    work = _exact_dtype(terms, x_bound, w_bound)
    if work is np.int64 or _needs_partial_sum_check(
            terms, x_bound, w_bound, op.element(0, output=True).bits):
        return None
    centred_b = None
    if weight is not None:
        centred_b = weight.astype(work)
        if b_zp:
            centred_b -= b_zp

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        a = operands[0].astype(work)
        if a_zp:
            a -= a_zp
        b = centred_b
        if b is None:
            b = operands[1].astype(work)
            if b_zp:
                b -= b_zp
        return [(a @ b).astype(out_dtype)]
    return run


def _type_bound(element: ScalarType, zp: int) -> int:
    """max |x - zp| over the values a signed integer type's array can hold (i4 by its
    int8 storage)."""
    half = 1 << (max(element.bits, 8) - 1)
    return max(half - 1 - zp, zp + half)


def _prepared_float_matmul(a_zp: float, b_zp: float, out_dtype: np.dtype) -> Prepared | None:
    # +0.0 exactly: the kernel subtracts the zero point, and x - (-0.0) turns -0.0
    # into +0.0.
    if any(zp != 0 or np.signbit(zp) for zp in (a_zp, b_zp)):
        return None

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        a, b = operands[0].astype(np.float64), operands[1].astype(np.float64)
        return [numerics.round_to_float(a @ b, out_dtype)]
    return run


# ---------------------------------------------------------------------------
# Pooling


def _pool_window(ctx: KernelContext, x: np.ndarray) -> _Window:
    kernel_hw, stride, pad = ctx.attrs["kernel"], ctx.attrs["stride"], ctx.attrs["pad"]
    declared = ctx.output_shape()
    ctx.check(rules.pool2d_problems(x.shape, declared, kernel_hw, stride, pad))
    return _window(ctx, x.shape[1:3], kernel_hw, pad, stride, (1, 1),
                   declared[1:3] if declared else (None, None))


def _valid_counts(in_size: int, out_size: int, kernel: int, stride: int, pad_before: int
                  ) -> np.ndarray:
    """For each output position, how many of the kernel's positions fall inside the input."""
    start = np.arange(out_size) * stride - pad_before
    return np.minimum(start + kernel, in_size) - np.maximum(start, 0)


@kernel("AVG_POOL2D")
def avg_pool2d(ctx: KernelContext) -> list[np.ndarray]:
    """AVG_POOL2D: mean over the in-bounds part of each window (padding not counted).

    Integers: acc = sum(x - input_zp), then apply_scale_32 by reciprocal_scale(count)
    (single rounding: ties go up, and the multiplier's +1 pushes exact halves of
    negative sums away from zero too), + output_zp, clip.
    """
    x = ctx.inputs[0]
    element = ctx.element(0)
    in_zp = _zero_point(ctx, 1, element, "input_zp")
    out_zp = _zero_point(ctx, 2, element, "output_zp")
    window = _pool_window(ctx, x)
    acc_element = _acc_type(ctx)
    out_dtype = _output_dtype(ctx)
    integer = element.is_integer
    xc = _centered(x, in_zp, integer)
    padded = _pad_spatial(xc, window.pad)
    count_check = integer and _needs_partial_sum_check(window.kernel[0] * window.kernel[1],
                                                       _max_abs(xc), 1, acc_element.bits)
    acc = np.zeros((x.shape[0],) + window.out + (x.shape[3],), dtype=xc.dtype)
    for tap in window.taps():
        acc += window.tap_view(padded, tap)
        if count_check:  # one term per tap: the running sums are the partial sums
            numerics.require_fits(acc, acc_element.bits, "every AVG_POOL2D partial sum")
    count = (_valid_counts(x.shape[1], window.out[0], window.kernel[0], window.stride[0],
                           window.pad[0][0])[:, None]
             * _valid_counts(x.shape[2], window.out[1], window.kernel[1], window.stride[1],
                             window.pad[1][0])[None, :])[None, :, :, None]
    if integer:
        multiplier, shift = numerics.reciprocal_scale(count)
        scaled = numerics.apply_scale_32(acc, multiplier, shift, False)
        scaled = numerics.apply_add_s(scaled, out_zp, acc_element.bits)
        return [numerics.saturate(scaled, element.bits).astype(out_dtype)]
    acc_dtype = numpy_dtype(acc_element)
    acc_rounded = numerics.round_to_float(acc, acc_dtype).astype(np.float64)
    mean = numerics.round_to_float(acc_rounded / count, acc_dtype)
    return [numerics.round_to_float(mean.astype(np.float64), out_dtype)]


@kernel("MAX_POOL2D")
def max_pool2d(ctx: KernelContext) -> list[np.ndarray]:
    """MAX_POOL2D: maximum over the in-bounds part of each window.

    Padding takes the pseudocode's starting value (the type's minimum, -inf,
    or NaN for nan_mode IGNORE), so it never wins over an in-bounds value.
    """
    x = ctx.inputs[0]
    window = _pool_window(ctx, x)
    nan_mode = ctx.attrs.get("nan_mode", "PROPAGATE")
    if ctx.element(0).is_integer:
        values, fill = numerics.as_int64(x), np.iinfo(x.dtype).min
    else:
        values = x.astype(np.float64)
        fill = np.nan if nan_mode == "IGNORE" else -np.inf
    padded = np.pad(values, ((0, 0),) + window.pad + ((0, 0),), constant_values=fill)
    result = None
    for tap in window.taps():
        view = window.tap_view(padded, tap)
        result = view if result is None else numerics.nan_max(result, view, nan_mode)
    return [np.asarray(result).astype(x.dtype)]


# ---------------------------------------------------------------------------
# ARGMAX


@kernel("ARGMAX")
def argmax(ctx: KernelContext) -> list[np.ndarray]:
    """ARGMAX: first index of the maximum along `axis` (the axis is removed).

    Floats, PROPAGATE: a NaN compares above everything, so the first NaN wins
    (what numpy's argmax does). IGNORE: NaNs are skipped; an all-NaN slice
    gives 0, the pseudocode's initial index.
    """
    x = ctx.inputs[0]
    axis = int(ctx.attrs["axis"])
    ctx.check(rules.argmax_problems(x.shape, axis, ctx.output_shape()))
    out_dtype = _output_dtype(ctx)
    ctx.require(x.shape[axis] - 1 <= np.iinfo(out_dtype).max, "the index fits the output type")
    if ctx.element(0).is_integer:
        return [np.argmax(x, axis=axis).astype(out_dtype)]
    values = x.astype(np.float64)
    if ctx.attrs.get("nan_mode", "PROPAGATE") == "PROPAGATE":
        return [np.argmax(values, axis=axis).astype(out_dtype)]
    with np.errstate(invalid="ignore"):
        largest = np.fmax.reduce(values, axis=axis, keepdims=True)
    return [np.argmax(values == largest, axis=axis).astype(out_dtype)]


# ---------------------------------------------------------------------------
# FFT


@kernel("FFT2D")
def fft2d(ctx: KernelContext) -> list[np.ndarray]:
    """FFT2D: unnormalized 2-D DFT of input_real + i*input_imag over [H, W], per batch.

    Forward uses exp(-2*pi*i*(...)), inverse exp(+2*pi*i*(...)) without the
    1/(H*W) factor. Computed in complex128 and rounded once to the output type.
    """
    real, imag = ctx.inputs[0], ctx.inputs[1]
    ctx.check(rules.fft_problems("FFT2D", real.shape, imag.shape,
                                   [ctx.output_shape(0), ctx.output_shape(1)]))
    values = real.astype(np.float64) + 1j * imag.astype(np.float64)
    if ctx.attrs.get("inverse", False):
        result = np.fft.ifft2(values, axes=(1, 2)) * (real.shape[1] * real.shape[2])
    else:
        result = np.fft.fft2(values, axes=(1, 2))
    dtype = _output_dtype(ctx)
    return [numerics.round_to_float(result.real, dtype),
            numerics.round_to_float(result.imag, dtype)]


@kernel("RFFT2D")
def rfft2d(ctx: KernelContext) -> list[np.ndarray]:
    """RFFT2D: forward 2-D DFT of a real input, columns 0 .. W/2 of the last axis.

    The imaginary part is exactly 0 at rows {0, H/2} x columns {0, W/2}, as the
    pseudocode writes it (those bins of a real signal are real).
    """
    real = ctx.inputs[0]
    ctx.check(rules.fft_problems("RFFT2D", real.shape, None,
                                   [ctx.output_shape(0), ctx.output_shape(1)]))
    height, width = real.shape[1], real.shape[2]
    result = np.fft.rfft2(real.astype(np.float64), axes=(1, 2))
    imag = result.imag.copy()
    rows = np.array(sorted({0, height // 2}))
    cols = np.array(sorted({0, width // 2}))
    imag[:, rows[:, None], cols[None, :]] = 0.0
    dtype = _output_dtype(ctx)
    return [numerics.round_to_float(result.real, dtype), numerics.round_to_float(imag, dtype)]


# ---------------------------------------------------------------------------
# Prepared CONV2D and DEPTHWISE_CONV2D: constant weights decoded once
#
# A converted model's weights, bias and zero points are constants, and its
# shapes are static, so everything but the input is known before a run: the
# window, the weights as a matrix in the exact work dtype, and whether any
# partial sum or the bias addition could leave out_t. The work dtype and the
# partial-sum test use the input type's whole range (|x - zp| <= 255 for int8),
# which bounds what the kernel computes from the data, so results are the
# kernel's; cases that would need the exact partial-sum check, int64 work, or a
# patch matrix past _PATCH_LIMIT are left to the kernel.
#
# Integer runs do not subtract input_zp from the data. The input is padded with
# input_zp itself (so a padded position still contributes (zp - zp) * w = 0) and
#   sum (x - zp) * w = sum x * w - zp * sum w,
# so zp * sum w per output channel is taken off the bias once. |x| <= 2^(bits-1)
# is within the |x - zp| bound, so the raw sums are exact in the same work dtype.


class _ConvSetup:
    __slots__ = ("window", "input_shape", "work", "in_zp", "integer", "accumulation", "bias",
                 "bias_check", "out_dtype", "out_bits")

    def __init__(self, window: _Window, input_shape: tuple[int, ...], work: type,
                 in_zp: float, integer: bool, accumulation: _Accumulation, bias: np.ndarray,
                 bias_check: bool, out_dtype: np.dtype, out_bits: int) -> None:
        self.window = window
        self.input_shape = input_shape
        self.work = work          # float32 / float64: exact for integers; floats: acc_t
        self.in_zp = in_zp
        self.integer = integer
        self.accumulation = accumulation
        # integers: bias - input_zp * (sum of the channel's centered weights), in
        # out_t's dtype when no sum can leave it (bias_check False), else int64;
        # floats: the bias in the output float type
        self.bias = bias
        self.bias_check = bias_check  # apply_add_s<out_t>(acc, bias) may leave out_t
        self.out_dtype = out_dtype
        self.out_bits = out_bits


class _Unlocated:
    """error_if for geometry shared by ops: its errors only make a preparer give up
    (the kernel then reports them with the op's location)."""

    @staticmethod
    def error_if(condition: bool, message: str) -> None:
        if condition:
            raise SpecErrorIf(message)

    @staticmethod
    def check(problems: list[str]) -> None:
        if problems:
            raise SpecErrorIf(problems[0])


@functools.lru_cache(maxsize=256)
def _static_window(spatial_in: tuple[int, ...], kernel_hw: tuple[int, ...],
                   pad: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...],
                   declared: tuple[int, ...]) -> _Window:
    """_window for static facts, shared by the many ops of one geometry."""
    return _window(_Unlocated, spatial_in, kernel_hw, pad, stride, dilation, declared)


_ACCUMULATION_BY_NAME: dict[str, _Accumulation] = {}


def _static_accumulation(op: StaticOp) -> _Accumulation:
    acc_type = op.attrs.get("acc_type")
    found = _ACCUMULATION_BY_NAME.get(acc_type)
    if found is None:
        op.error_if(acc_type not in ACC_TYPE_ELEMENT, f"unknown acc_type {acc_type!r}")
        found = _ACCUMULATION_BY_NAME[acc_type] = _accumulation(
            scalar_type(ACC_TYPE_ELEMENT[acc_type]))
    return found


def _exact_and_unchecked(terms: int, x_bound: int, w_bound: int, acc_bits: int) -> bool:
    """Every partial sum exact in float64 or cheaper, and none can leave acc_t."""
    return _exact_dtype(terms, x_bound, w_bound) is not np.int64 \
        and not _needs_partial_sum_check(terms, x_bound, w_bound, acc_bits)


def _conv_setup(op: StaticOp, kernel_hw: tuple[int, int], weight_channels: int,
                channels: int, weight_matrix: np.ndarray, fold_zp: bool = True
                ) -> tuple[_ConvSetup, np.ndarray] | None:
    """Shared set-up, or None. weight_matrix: the stored weights as a [K, OC] view,
    K the terms of one output channel's sum; returned centered in the work dtype,
    in the view's memory layout (floats: in acc_t, as a C-contiguous copy).
    fold_zp: integer runs take the raw input and input_zp * sum(w) off the bias (see
    above); else they subtract input_zp from the input (cheaper for unpadded 1x1
    convolutions, where the subtraction is one pass and the sums would cost more)."""
    x_shape, out_shape = op.static_shape(0), op.static_shape(0, output=True)
    bias, in_zp_array, w_zp_array = op.constants[2:5]
    out_channels = weight_matrix.shape[1]
    if x_shape is None or out_shape is None or bias is None or in_zp_array is None \
            or w_zp_array is None or len(x_shape) != 4 or len(out_shape) != 4 \
            or in_zp_array.size != 1 or w_zp_array.size != 1 \
            or x_shape[3] != weight_channels or out_shape[3] != out_channels:
        return None
    bias = bias.reshape(-1)
    if bias.size != out_channels and bias.size != 1:
        return None
    in_element, w_element = op.element(0), op.element(1)
    accumulation = _static_accumulation(op)
    integer = accumulation.integer
    in_zp = in_zp_array.item(0)
    w_zp = w_zp_array.item(0)
    if integer != in_element.is_integer \
            or (in_zp and in_element.name != "i8") or (w_zp and w_element.name != "i8"):
        return None
    window = _static_window(x_shape[1:3], kernel_hw, tuple(op.attrs["pad"]),
                            tuple(op.attrs["stride"]), tuple(op.attrs["dilation"]),
                            out_shape[1:3])
    out_element = op.element(0, output=True)
    out_dtype = numpy_dtype(out_element)
    if not integer:
        # Float zero points are 0 (checked above): the weights as they are, in acc_t.
        # A signalling NaN among them is quieted by a widening (FE_INVALID); the
        # result is NaN either way, as in the general kernel.
        acc_dtype = accumulation.acc_dtype
        with np.errstate(invalid="ignore"):
            weights = np.ascontiguousarray(weight_matrix.astype(acc_dtype))
        return _ConvSetup(window, x_shape, acc_dtype, float(in_zp), False, accumulation,
                          bias.astype(out_dtype), False, out_dtype, 0), weights
    terms = kernel_hw[0] * kernel_hw[1] * channels
    x_bound = _type_bound(in_element, in_zp)
    # The weight type's range first: it settles the common cases without a pass
    # over the weights; else the stored weights' extremes.
    w_bound = _type_bound(w_element, w_zp)
    acc_bits = accumulation.acc_bits
    if _exact_dtype(terms, x_bound, w_bound) is not np.float32 \
            or _needs_partial_sum_check(terms, x_bound, w_bound, acc_bits):
        w_bound = max(int(weight_matrix.max()) - w_zp, w_zp - int(weight_matrix.min())) \
            if weight_matrix.size else 0
        if not _exact_and_unchecked(terms, x_bound, w_bound, acc_bits):
            return None
    work = _exact_dtype(terms, x_bound, w_bound)
    # Centered in the work dtype, which holds every |w - w_zp| <= w_bound exactly.
    matrix = weight_matrix.astype(work)
    if w_zp:
        matrix -= w_zp
    bias_bound = _max_abs(bias)
    corrected = bias
    if in_zp and fold_zp:
        # Column sums by a product with ones (cheaper than a strided sum), exact:
        # every partial sum is an integer of at most terms * w_bound, which the work
        # dtype holds.
        sums = np.ones(matrix.shape[0], work) @ matrix
        corrected = bias.astype(np.int64) - in_zp * sums.astype(np.int64)
    out_max = numerics.int_max(out_element.bits)
    # The raw sum, the corrected bias and their total (acc + bias, the kernel's
    # apply_add_s) all fit out_t: then one addition in its dtype gives the result.
    fits = terms * x_bound * w_bound + bias_bound <= out_max \
        and terms * (1 << (max(in_element.bits, 8) - 1)) * w_bound <= out_max \
        and bias_bound + abs(in_zp) * terms * w_bound <= out_max
    return _ConvSetup(window, x_shape, work, in_zp, True, accumulation,
                      corrected.astype(out_dtype if fits else np.int64), not fits,
                      out_dtype, out_element.bits), matrix


def _padded_input(x: np.ndarray, setup: _ConvSetup) -> np.ndarray:
    """x in the work dtype (acc_t), zero-padded: a zeros array and one slice write
    (np.pad costs more than the arithmetic on small tensors). Floats only, whose
    zero points are 0."""
    (top, bottom), (left, right) = setup.window.pad
    with np.errstate(invalid="ignore"):  # widening quiets a signalling NaN, as intended
        if not (top or bottom or left or right):
            return x.astype(setup.work, copy=False)
        n, h, w, c = x.shape
        padded = np.zeros((n, h + top + bottom, w + left + right, c), setup.work)
        padded[:, top:top + h, left:left + w] = x
    return padded


def _raw_padded_input(x: np.ndarray, setup: _ConvSetup) -> np.ndarray:
    """x padded with input_zp, in its own dtype (integers; x itself without padding)."""
    (top, bottom), (left, right) = setup.window.pad
    if not (top or bottom or left or right):
        # _window_view reads the array's memory by its strides: make it one block.
        return x if x.flags.c_contiguous else np.ascontiguousarray(x)
    n, h, w, c = x.shape
    if setup.in_zp:
        padded = np.full((n, h + top + bottom, w + left + right, c), setup.in_zp, x.dtype)
    else:
        padded = np.zeros((n, h + top + bottom, w + left + right, c), x.dtype)
    padded[:, top:top + h, left:left + w] = x
    return padded


def _window_view(padded: np.ndarray, window: _Window, taps_first: bool) -> np.ndarray:
    """Every output's window as a strided view of the padded input (no copy):
    [N, OH, OW, KH, KW, C], or [KH, KW, N, OH, OW, C] with taps_first."""
    n_stride, h_stride, w_stride, c_stride = padded.strides
    (kh, kw), (sy, sx), (dy, dx), (oh, ow) = (window.kernel, window.stride,
                                              window.dilation, window.out)
    positions = ((padded.shape[0], oh, ow), (n_stride, h_stride * sy, w_stride * sx))
    taps = ((kh, kw), (h_stride * dy, w_stride * dx))
    first, second = (taps, positions) if taps_first else (positions, taps)
    return np.ndarray(first[0] + second[0] + (padded.shape[3],), padded.dtype, padded, 0,
                      first[1] + second[1] + (c_stride,))


_FLOAT32 = np.dtype(np.float32)


def _finish_float(setup: _ConvSetup, acc: np.ndarray) -> list[np.ndarray]:
    """The kernel's _finish for floats: acc rounded to acc_t, then out_t, plus bias."""
    if setup.out_dtype == _FLOAT32 and setup.accumulation.acc_dtype == _FLOAT32:
        # For fp32 the sum is already out_t: the bias added in fp32, in place.
        with np.errstate(all="ignore"):
            acc += setup.bias
        return [acc]
    rounded = numerics.round_to_float(acc, setup.accumulation.acc_dtype)
    as_out = numerics.round_to_float(rounded.astype(np.float64), setup.out_dtype)
    return [float_compute(np.add, setup.out_dtype, as_out, setup.bias)]


def _finish_integer(setup: _ConvSetup, raw: np.ndarray) -> list[np.ndarray]:
    """The raw sum (exact integers in the work dtype) plus the corrected bias."""
    if not setup.bias_check:
        # Each part and the total fit out_t's dtype: one exact addition in it.
        total = raw.astype(setup.out_dtype)
        total += setup.bias
        return [total]
    total = raw.astype(np.int64)
    total += setup.bias
    if total.size and (
            total.min() < numerics.int_min(setup.out_bits)
            or total.max() > numerics.int_max(setup.out_bits)):
        raise KernelNeeded  # reports apply_add_s's REQUIRE
    return [total.astype(setup.out_dtype)]


@prepared("CONV2D")
def prepare_conv2d(op: StaticOp) -> Prepared | None:
    """CONV2D with constant weights: one matrix product over the im2col patches."""
    weight = op.constants[1] if len(op.constants) > 1 else None
    if weight is None or weight.ndim != 4:
        return None
    out_channels, kh, kw, channels = weight.shape
    terms = kh * kw * channels
    # [terms, OC]: the transposed view the kernel multiplies by.
    attrs = op.attrs
    direct = kh == 1 and kw == 1 and not any(attrs["pad"]) and not any(
        s != 1 for s in attrs["stride"])
    found = _conv_setup(op, (kh, kw), channels, channels,
                        weight.reshape(out_channels, terms).T, fold_zp=not direct)
    if found is None:
        return None
    setup, matrix = found
    window = setup.window
    n = setup.input_shape[0]
    positions = n * window.out[0] * window.out[1]
    if positions * terms > _PATCH_LIMIT:
        return None
    out_shape = (n,) + window.out + (out_channels,)
    work, in_zp = setup.work, setup.in_zp
    if setup.integer:
        def run_integer(operands: list[np.ndarray]) -> list[np.ndarray]:
            x = operands[0]
            if direct:
                patches = x.reshape(positions, terms).astype(work)
                if in_zp:
                    patches -= in_zp
            else:
                view = _window_view(_raw_padded_input(x, setup), window, False)
                patches = view.astype(work, order="C").reshape(positions, terms)
            return _finish_integer(setup, (patches @ matrix).reshape(out_shape))
        return run_integer
    if any(map(any, window.pad)) and not np.isfinite(matrix).all():
        return None  # padded taps must be skipped: the kernel does that

    def run_float(operands: list[np.ndarray]) -> list[np.ndarray]:
        # The im2col columns [taps*IC, positions] in the kernel's term order.
        padded = _padded_input(operands[0], setup)
        if direct:
            columns = np.ascontiguousarray(padded.reshape(positions, terms).T)
        else:
            view = _window_view(padded, window, True)            # [KH, KW, N, OH, OW, C]
            columns = np.ascontiguousarray(view.transpose(0, 1, 5, 2, 3, 4)).reshape(
                terms, positions)
        acc = np.zeros((positions, out_channels), work)
        _accumulate_in_order(acc, columns, matrix)
        return _finish_float(setup, acc.reshape(out_shape))
    return run_float


@prepared("DEPTHWISE_CONV2D")
def prepare_depthwise_conv2d(op: StaticOp) -> Prepared | None:
    """DEPTHWISE_CONV2D with constant weights. Integers: the taps gathered once and
    summed by one einsum (exact in any order); floats: one multiply and one add per
    tap in acc_t, in the kernel's order."""
    weight = op.constants[1] if len(op.constants) > 1 else None
    if weight is None or weight.ndim != 4:
        return None
    kh, kw, channels, multiplier = weight.shape
    taps = kh * kw
    found = _conv_setup(op, (kh, kw), channels, 1, weight.reshape(taps, channels * multiplier))
    if found is None:
        return None
    setup, matrix = found
    window = setup.window
    out_shape = (setup.input_shape[0],) + window.out + (channels * multiplier,)
    if setup.integer:
        positions = setup.input_shape[0] * window.out[0] * window.out[1]
        work = setup.work
        tap_weights = matrix.reshape(taps, channels, multiplier)
        if multiplier == 1:
            tap_weights, subscripts = tap_weights.reshape(taps, channels), "tpc,tc->pc"
        else:
            subscripts = "tpc,tcm->pcm"

        def run_integer(operands: list[np.ndarray]) -> list[np.ndarray]:
            view = _window_view(_raw_padded_input(operands[0], setup), window, True)
            gathered = view.astype(work, order="C").reshape(taps, positions, channels)
            raw = np.einsum(subscripts, gathered, tap_weights)
            return _finish_integer(setup, raw.reshape(out_shape))
        return run_integer
    if any(map(any, window.pad)) and not np.isfinite(matrix).all():
        return None  # padded taps must be skipped: the kernel does that
    tap_index = [(slice(None),) + tuple(_window_slice(t * d, o, s) for t, d, o, s in zip(
        tap, window.dilation, window.out, window.stride)) + (slice(None),)
        for tap in window.taps()]
    tap_weights = [row if multiplier == 1 else row.reshape(channels, multiplier)
                   for row in matrix]
    acc_shape = out_shape if multiplier == 1 else out_shape[:3] + (channels, multiplier)

    def run_float(operands: list[np.ndarray]) -> list[np.ndarray]:
        padded = _padded_input(operands[0], setup)
        # The running sum starts at +0.0 as the kernel's does (a first term of -0.0
        # would otherwise stay -0.0).
        acc = np.zeros(acc_shape, setup.work)
        with np.errstate(all="ignore"):  # overflow to infinity and NaN results are meant
            for index, weights in zip(tap_index, tap_weights):
                view = padded[index]
                acc += view * weights if multiplier == 1 else view[..., None] * weights
        return _finish_float(setup, acc.reshape(out_shape))
    return run_float
