"""TFLite's window geometry made exact for TOSA: padding, stride and dilation
of convolutions and pooling windows, forward and transposed.

Geometry follows TFLite's `ComputePaddingHeightWidth` (tensorflow/lite/kernels/
padding.h): SAME pads `total // 2` before and the rest after. TOSA requires the
output size to be exact (`(in - 1 + pads - (k - 1) * dilation) / stride + 1`
without remainder), so rows a window never reads are trimmed from the padding
after, then sliced off the input. Used by the float and integer convolution
and pooling patterns; registers no pattern itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from legalize.common import tensor_type
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.tosa import build


def same_or_valid_pads(padding: str, in_size: int, out_size: int, kernel: int, stride: int,
                       dilation: int = 1) -> tuple[int, int] | Failure:
    """(before, after) padding of one spatial dim as TFLite computes it."""
    if padding == "VALID":
        return 0, 0
    if padding != "SAME":
        return Failure(f"padding {padding!r} is not supported")
    effective = (kernel - 1) * dilation + 1
    total = max((out_size - 1) * stride + effective - in_size, 0)
    return total // 2, total - total // 2


def fit_windows(padding: str, in_sizes: Sequence[int], out_sizes: Sequence[int],
                kernels: Sequence[int], strides: Sequence[int],
                dilations: Sequence[int]) -> tuple[list[int], list[int]] | Failure:
    """TOSA pads [before0, after0, before1, ...] and the input size each dim keeps.

    Input rows past the last window (VALID with a remainder, or SAME with
    stride > kernel) are first taken out of the padding after, then cut from
    the input, so that TOSA's exact output-size rule holds.
    """
    pads: list[int] = []
    used: list[int] = []
    for size, out, k, s, d in zip(in_sizes, out_sizes, kernels, strides, dilations):
        pair = same_or_valid_pads(padding, size, out, k, s, d)
        if isinstance(pair, Failure):
            return pair
        before, after = pair
        excess = size + before + after - ((k - 1) * d + 1) - (out - 1) * s
        if excess < 0:
            return Failure(f"output size {out} does not fit input {size}, kernel {k}, "
                           f"stride {s}, dilation {d}")
        trim = min(excess, after)
        pads += [before, after - trim]
        used.append(size - (excess - trim))
    return pads, used


def trimmed_input(rw: Rewriter, x: Value, used: Sequence[int]) -> Value:
    """`x` [N, *spatial, C] cut to the spatial sizes in `used`."""
    shape = list(tensor_type(x).shape)
    if list(used) == shape[1:-1]:
        return x
    return build.slice(rw, x, [0] * len(shape), [shape[0], *used, shape[-1]])


def pool_window(op: Op, rw: Rewriter, x: Value) -> tuple[Value, dict[str, list[int]]] | Failure:
    """`x` (the input of Pool2DOptions op `op`, or a stand-in of the same shape)
    trimmed to the rows the windows read, and TOSA's kernel/stride/pad."""
    _, ih, iw, _ = tensor_type(x).shape
    result = tensor_type(op.results[0])
    kernel = [int(op.attrs["filter_height"]), int(op.attrs["filter_width"])]
    stride = [int(op.attrs["stride_h"]), int(op.attrs["stride_w"])]
    fitted = fit_windows(op.attrs["padding"], (ih, iw), result.shape[1:3], kernel, stride,
                         (1, 1))
    if isinstance(fitted, Failure):
        return fitted
    pads, used = fitted
    return trimmed_input(rw, x, used), {"kernel": kernel, "stride": stride, "pad": pads}


def per_axis_attribute(op: Op, name: str, axes: str) -> list[int]:
    """Per-axis attributes, e.g. stride_h/stride_w -> [sh, sw]; missing ones are 1."""
    return [int(op.attrs.get(name.format(a), 1)) for a in axes]


def conv_window(op: Op, in_sizes: Sequence[int], out_sizes: Sequence[int],
                kernel: Sequence[int], axes: str = "hw"
                ) -> tuple[list[int], list[int], list[int], list[int]] | Failure:
    """(pad, stride, dilation, used input sizes) of a convolution's window as
    TOSA takes them, from the op's padding, stride_<axis> and
    dilation_<axis>_factor attributes (`axes` "hw" or "dhw")."""
    stride = per_axis_attribute(op, "stride_{}", axes)
    dilation = per_axis_attribute(op, "dilation_{}_factor", axes)
    fitted = fit_windows(op.attrs.get("padding"), in_sizes, out_sizes, kernel, stride, dilation)
    if isinstance(fitted, Failure):
        return fitted
    pads, used = fitted
    return pads, stride, dilation, used


def transposed_pad_before(padding: str, out_size: int, kernel: int, stride: int,
                          dilation: int = 1) -> int | Failure:
    """The padding TFLite's transposed convolutions remove from the front.

    transpose_conv.cc / conv3d_transpose.cc compute it as the padding of the
    forward convolution from the *output* size: `ComputePaddingWithOffset` with
    that convolution's output size `ComputeOutSize(padding, out_size, ...)`.
    """
    effective = (kernel - 1) * dilation + 1
    if padding == "SAME":
        forward_out = (out_size + stride - 1) // stride
    elif padding == "VALID":
        forward_out = (out_size - effective + stride) // stride
    else:
        return Failure(f"padding {padding!r} is not supported")
    return max((forward_out - 1) * stride + effective - out_size, 0) // 2


def transposed_window(op: Op, in_sizes: Sequence[int], out_sizes: Sequence[int],
                      kernel: Sequence[int]
                      ) -> tuple[list[int], list[int], list[int]] | Failure:
    """TOSA's out_pad [before0, after0, before1, after1], the stride and the
    input sizes that reach the output of TRANSPOSE_CONV `op` (its padding and
    stride_h / stride_w attributes).

    reference_ops::TransposeConv writes input row y, tap ky to output
    y * stride - pad + ky and drops what falls outside: out_pad_before = -pad,
    and the pad after makes the requested size. Input rows whose every output
    falls past the end contribute nothing: they are cut, so that out_pad_after
    stays above -kernel (TOSA ERROR_IF).
    """
    stride = per_axis_attribute(op, "stride_{}", "hw")
    out_pad: list[int] = []
    used: list[int] = []
    for size, out, k, s in zip(in_sizes, out_sizes, kernel, stride):
        before = transposed_pad_before(op.attrs.get("padding"), out, k, s)
        if isinstance(before, Failure):
            return Failure(f"{op.name}: {before.reason}")
        size = min(size, (out - 1 + before) // s + 1)
        used.append(size)
        out_pad += [-before, out - ((size - 1) * s + k) + before]
    if any(p <= -k for p, k in zip(out_pad, (kernel[0], kernel[0], kernel[1], kernel[1]))):
        return Failure(f"{op.name}: output {list(out_sizes)} is not reachable")
    return out_pad, stride, used
