"""Numpy transcriptions of MediaPipe's custom ops, written from their
definitions in mediapipe/util/tflite/operations/*.cc (loops over positions as
the kernels run, not the lowering's formulation): the judges of the lowerings
in legalize/mediapipe.py, which TFLite cannot run."""

from __future__ import annotations

import numpy as np


def pool_padding(size: int, stride: int, filter_size: int, padding: str) -> tuple[int, int]:
    """TFLite's ComputePaddingHeightWidth for one axis: (pooled size, leading pad)."""
    out = -(-size // stride) if padding == "SAME" else (size - filter_size) // stride + 1
    total = max((out - 1) * stride + filter_size - size, 0)
    return out, total // 2


def convolution_2d_transpose_bias(x: np.ndarray, weights: np.ndarray, bias: np.ndarray,
                                  padding: str, stride_h: int, stride_w: int) -> np.ndarray:
    """transpose_conv_bias.cc: output sized stride * (in - 1) + filter - pad
    (pad = max(0, filter - (in - 1) % stride - 1) for SAME, 0 for VALID);
    input (y, x) times filter tap (ky, kx) lands on (y * stride - pad / 2 + ky,
    ...), then the bias is added."""
    n, ih, iw, _ = x.shape
    oc, kh, kw, _ = weights.shape
    pads = [max(0, k - (size - 1) % s - 1) if padding == "SAME" else 0
            for k, size, s in ((kh, ih, stride_h), (kw, iw, stride_w))]
    oh, ow = stride_h * (ih - 1) + kh - pads[0], stride_w * (iw - 1) + kw - pads[1]
    top, left = pads[0] // 2, pads[1] // 2
    out = np.zeros((n, oh, ow, oc), np.float64)
    w64 = weights.astype(np.float64)
    for y in range(ih):
        for xx in range(iw):
            for ky in range(kh):
                for kx in range(kw):
                    oy, ox = y * stride_h - top + ky, xx * stride_w - left + kx
                    if 0 <= oy < oh and 0 <= ox < ow:
                        out[:, oy, ox, :] += x[:, y, xx, :].astype(np.float64) @ w64[:, ky, kx, :].T
    return (out + bias.astype(np.float64)).astype(np.float32)


def max_pooling_with_argmax_2d(x: np.ndarray, padding: str, stride_h: int, stride_w: int,
                               filter_h: int, filter_w: int) -> tuple[np.ndarray, np.ndarray]:
    """max_pool_argmax.cc: per output, the window's first strictly greatest
    value (starting from the lowest float) and its window-local index
    filter_y * filter_w + filter_x, stored as a float plus 0.1f."""
    n, h, w, c = x.shape
    oh, top = pool_padding(h, stride_h, filter_h, padding)
    ow, left = pool_padding(w, stride_w, filter_w, padding)
    values = np.zeros((n, oh, ow, c), np.float32)
    indices = np.zeros((n, oh, ow, c), np.float32)
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    best, where = np.finfo(np.float32).min, 0
                    for fy in range(filter_h):
                        for fx in range(filter_w):
                            iy, ix = oy * stride_h - top + fy, ox * stride_w - left + fx
                            if 0 <= iy < h and 0 <= ix < w and x[b, iy, ix, ch] > best:
                                best, where = x[b, iy, ix, ch], fy * filter_w + fx
                    values[b, oy, ox, ch] = best
                    indices[b, oy, ox, ch] = np.float32(where) + np.float32(0.1)
    return values, indices


def max_unpooling_2d(x: np.ndarray, indices: np.ndarray, out_h: int, out_w: int, padding: str,
                     stride_h: int, stride_w: int, filter_h: int, filter_w: int) -> np.ndarray:
    """max_unpooling.cc: zeros, then each value written at in * stride - pad +
    its window-local offset (k / filter_w, k % filter_w), k = int(index)."""
    n, h, w, c = x.shape
    _, top = pool_padding(out_h, stride_h, filter_h, padding)
    _, left = pool_padding(out_w, stride_w, filter_w, padding)
    out = np.zeros((n, out_h, out_w, c), np.float32)
    for b in range(n):
        for y in range(h):
            for xx in range(w):
                for ch in range(c):
                    k = int(indices[b, y, xx, ch])
                    oy, ox = y * stride_h - top + k // filter_w, xx * stride_w - left + k % filter_w
                    if 0 <= oy < out_h and 0 <= ox < out_w:
                        out[b, oy, ox, ch] = x[b, y, xx, ch]
    return out
