"""Image operators (TOSA 1.0 chapter "Image Operators"): RESIZE."""

from __future__ import annotations

import numpy as np

from reference_model import numerics
from reference_model.kernels import KernelContext, kernel
from tfl2tosa.ir.types import numpy_dtype
from tfl2tosa.tosa import rules


class _Axis:
    """Sampling positions along one spatial axis, in the pseudocode's integer terms.

    For output index o: y = o * scale_d + offset, i = floor(y / scale_n),
    remainder r = y - i * scale_n in [0, scale_n), neighbours i0 = max(i, 0)
    and i1 = min(i + 1, size - 1).
    """

    __slots__ = ("scale_n", "remainder", "lower", "upper")

    def __init__(self, scale_n: int, remainder: np.ndarray, lower: np.ndarray,
                 upper: np.ndarray) -> None:
        self.scale_n = scale_n
        self.remainder = remainder
        self.lower = lower
        self.upper = upper


def _axis(out_size: int, in_size: int, scale_n: int, scale_d: int, offset: int) -> _Axis:
    position = np.arange(out_size, dtype=np.int64) * scale_d + offset
    index = position // scale_n  # floor division: idiv_floor
    remainder = position - index * scale_n
    return _Axis(scale_n, remainder, np.maximum(index, 0), np.minimum(index + 1, in_size - 1))


def _output_size(in_size: int, scale_n: int, scale_d: int, offset: int, border: int) -> int:
    return ((in_size - 1) * scale_n - offset + border) // scale_d + 1


@kernel("RESIZE")
def resize(ctx: KernelContext) -> list[np.ndarray]:
    """RESIZE in NEAREST or BILINEAR mode over the H and W dimensions of [N,IH,IW,C].

    Integer BILINEAR returns the weighted sum scaled by scale_y_n * scale_x_n
    (i8 -> i32, i16 -> i48), exactly as the pseudocode. Integer and float
    NEAREST take i1 when 2 * remainder >= scale_n (the float form dy >= 0.5
    evaluated exactly). Float BILINEAR is computed in float64 and rounded once,
    the fp64 reference of the precision requirements.
    """
    x = ctx.inputs[0]
    scale = [int(v) for v in np.asarray(ctx.inputs[1]).reshape(-1)]
    offset = [int(v) for v in np.asarray(ctx.inputs[2]).reshape(-1)]
    border = [int(v) for v in np.asarray(ctx.inputs[3]).reshape(-1)]
    mode = ctx.attrs["mode"]
    ctx.error_if(mode not in ("NEAREST", "BILINEAR"), f"unknown mode {mode!r}")
    source, target = ctx.element(0), ctx.element(0, output=True)
    ctx.error_if(source.is_float and source != target, "float RESIZE keeps the input type")
    problems = rules.resize_problems(x.shape, ctx.output_shape(), scale, offset, border)
    if problems:
        ctx.error_if(True, problems[0])
    _, in_h, in_w, _ = x.shape
    out_h = _output_size(in_h, scale[0], scale[1], offset[0], border[0])
    out_w = _output_size(in_w, scale[2], scale[3], offset[1], border[1])
    rows = _axis(out_h, in_h, scale[0], scale[1], offset[0])
    cols = _axis(out_w, in_w, scale[2], scale[3], offset[1])
    out_dtype = numpy_dtype(target)
    if mode == "NEAREST":
        iy = np.where(2 * rows.remainder >= rows.scale_n, rows.upper, rows.lower)
        ix = np.where(2 * cols.remainder >= cols.scale_n, cols.upper, cols.lower)
        return [x[:, iy][:, :, ix].astype(out_dtype)]
    if source.is_integer:
        return [_bilinear(numerics.as_int64(x), rows, cols, rows.scale_n, cols.scale_n,
                          rows.remainder, cols.remainder).astype(out_dtype)]
    dy = rows.remainder / rows.scale_n
    dx = cols.remainder / cols.scale_n
    result = _bilinear(x.astype(np.float64), rows, cols, 1.0, 1.0, dy, dx)
    return [numerics.round_to_float(result, out_dtype)]


def _bilinear(x: np.ndarray, rows: _Axis, cols: _Axis, unit_y: float, unit_x: float,
              dy: np.ndarray, dx: np.ndarray) -> np.ndarray:
    """v00 (uy - dy)(ux - dx) + v01 (uy - dy) dx + v10 dy (ux - dx) + v11 dy dx."""
    top, bottom = x[:, rows.lower], x[:, rows.upper]
    v00, v01 = top[:, :, cols.lower], top[:, :, cols.upper]
    v10, v11 = bottom[:, :, cols.lower], bottom[:, :, cols.upper]
    wy = dy[None, :, None, None]
    wx = dx[None, None, :, None]
    return (v00 * (unit_y - wy) * (unit_x - wx) + v01 * (unit_y - wy) * wx
            + v10 * wy * (unit_x - wx) + v11 * wy * wx)
