"""MediaPipe's custom ops: single-op models built here, converted, run on our
reference model and judged by numpy transcriptions of MediaPipe's definitions
(tests/mediapipe_ref.py, themselves checked on hand-derived cases) and by
Arm's reference model running the written `.tosa`."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from arm import run_arm
from conftest import TfliteBuilder
from tflite_ref import write_model

import mediapipe_ref
import reference_model
from tfl2tosa.errors import ConversionError
from tfl2tosa.pipeline import convert
from tfl2tosa.tosa.writer import write_tosa

PADDING = {"SAME": 1, "VALID": 2}


def ours_and_arm(path, feeds: list[np.ndarray]) -> list[np.ndarray]:
    """Our reference model's outputs, after checking Arm's give the same."""
    module, conversion = convert(path)
    assert {o["path"] for o in conversion.outcomes} == {"float"}
    ours = list(reference_model.run(module, feeds).values())
    theirs = run_arm(write_tosa(module), feeds, [a.dtype for a in ours])
    assert theirs.status == "valid", theirs.message
    for mine, arm in zip(ours, theirs.outputs):
        np.testing.assert_allclose(arm, mine, rtol=1e-6, atol=1e-6)
    return ours


# ---------------------------------------------------------------------------
# Convolution2DTransposeBias


def transpose_conv_model(x_shape, weights: np.ndarray, bias: np.ndarray, padding: str,
                         stride_h: int, stride_w: int, out_hw: tuple[int, int]) -> TfliteBuilder:
    b = TfliteBuilder()
    x = b.tensor(list(x_shape), "FLOAT32", "x")
    w = b.tensor(list(weights.shape), "FLOAT32", "w", data=weights.astype(np.float32))
    bias_t = b.tensor(list(bias.shape), "FLOAT32", "bias", data=bias.astype(np.float32))
    y = b.tensor([x_shape[0], *out_hw, weights.shape[0]], "FLOAT32", "y")
    options = struct.pack("<3i", PADDING[padding], stride_w, stride_h)
    b.op("CUSTOM", [x, w, bias_t], [y], custom_code="Convolution2DTransposeBias",
         custom_options=options)
    b.io([x], [y])
    return b


def test_transpose_conv_reference_hand_derived():
    """VALID, stride 2, a 2x2 filter of ones: each input value fills its own
    2x2 block, plus the bias. SAME, stride 2, a 3x3 filter on 2x2: the pad is
    3 - (2 - 1) % 2 - 1 = 1, split 0 before and 1 after, so the output is the
    first 4x4 of the full 5x5 scatter."""
    x = np.array([1, 2, 3, 4], np.float32).reshape(1, 2, 2, 1)
    ones = np.ones((1, 2, 2, 1), np.float32)
    out = mediapipe_ref.convolution_2d_transpose_bias(x, ones, np.array([0.5]), "VALID", 2, 2)
    expected = np.array([[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]) + 0.5
    np.testing.assert_array_equal(out[0, :, :, 0], expected)
    taps = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    full = np.zeros((5, 5))
    for y in range(2):
        for xx in range(2):
            full[2 * y:2 * y + 3, 2 * xx:2 * xx + 3] += x[0, y, xx, 0] * taps[0, :, :, 0]
    same = mediapipe_ref.convolution_2d_transpose_bias(x, taps, np.zeros(1), "SAME", 2, 2)
    np.testing.assert_array_equal(same[0, :, :, 0], full[:4, :4])


TRANSPOSE_CASES = {
    # (input shape, filter (oc, kh, kw), padding, stride h, w)
    "same_k2_s2": ((1, 5, 4, 3), (2, 2, 2), "SAME", 2, 2),
    "same_k3_s2": ((1, 4, 5, 3), (2, 3, 3), "SAME", 2, 2),
    "same_k4_s2": ((1, 3, 3, 2), (3, 4, 4), "SAME", 2, 2),
    "same_k3_s1": ((2, 4, 4, 2), (2, 3, 3), "SAME", 1, 1),
    "valid_k3_s2": ((1, 3, 4, 2), (2, 3, 3), "VALID", 2, 2),
    "valid_k2_s3x1": ((1, 3, 3, 2), (1, 2, 2), "VALID", 3, 1),
    "same_k5x3_s3x2": ((1, 4, 4, 2), (2, 5, 3), "SAME", 3, 2),
}


@pytest.mark.parametrize("case", TRANSPOSE_CASES)
def test_convolution_2d_transpose_bias(tmp_path, case):
    x_shape, (oc, kh, kw), padding, sh, sw = TRANSPOSE_CASES[case]
    rng = np.random.default_rng(7)
    weights = rng.normal(size=(oc, kh, kw, x_shape[3])).astype(np.float32)
    bias = rng.normal(size=(oc,)).astype(np.float32)
    x = rng.normal(size=x_shape).astype(np.float32)
    expected = mediapipe_ref.convolution_2d_transpose_bias(x, weights, bias, padding, sh, sw)
    path = write_model(transpose_conv_model(x_shape, weights, bias, padding, sh, sw,
                                            expected.shape[1:3]), tmp_path / "m.tflite")
    (ours,) = ours_and_arm(path, [x])
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)


def test_transpose_conv_output_size_must_be_the_kernels(tmp_path):
    weights, bias = np.ones((1, 2, 2, 1), np.float32), np.zeros(1, np.float32)
    path = write_model(transpose_conv_model((1, 3, 3, 1), weights, bias, "SAME", 2, 2, (5, 6)),
                       tmp_path / "m.tflite")
    with pytest.raises(ConversionError, match="not the size the kernel gives"):
        convert(path)


# ---------------------------------------------------------------------------
# MaxPoolingWithArgmax2D and MaxUnpooling2D


def pool_options(padding: str, sh: int, sw: int, fh: int, fw: int, activation: int = 0) -> bytes:
    return struct.pack("<6i", PADDING[padding], sw, sh, fw, fh, activation)


def argmax_model(x_shape, padding, sh, sw, fh, fw, index_type="FLOAT32",
                 activation: int = 0) -> TfliteBuilder:
    n, h, w, c = x_shape
    oh, _ = mediapipe_ref.pool_padding(h, sh, fh, padding)
    ow, _ = mediapipe_ref.pool_padding(w, sw, fw, padding)
    b = TfliteBuilder()
    x = b.tensor(list(x_shape), "FLOAT32", "x")
    y = b.tensor([n, oh, ow, c], "FLOAT32", "pooled")
    i = b.tensor([n, oh, ow, c], index_type, "indices")
    b.op("CUSTOM", [x], [y, i], custom_code="MaxPoolingWithArgmax2D",
         custom_options=pool_options(padding, sh, sw, fh, fw, activation))
    b.io([x], [y, i])
    return b


def test_argmax_reference_hand_derived():
    """2x2 windows, stride 2, on a 4x4 plane: maxima 6 (at window offset 1,0
    -> index 2), 8 (1,1 -> 3), 9 (0,0 -> 0) and 7 with a tie (first, 0,1 -> 1),
    each index stored as a float plus 0.1."""
    plane = np.array([[1, 0, 3, 2],
                      [6, 5, 4, 8],
                      [9, 1, 2, 7],
                      [3, 2, 7, 0]], np.float32).reshape(1, 4, 4, 1)
    values, indices = mediapipe_ref.max_pooling_with_argmax_2d(plane, "VALID", 2, 2, 2, 2)
    np.testing.assert_array_equal(values[0, :, :, 0], [[6, 8], [9, 7]])
    np.testing.assert_array_equal(indices[0, :, :, 0],
                                  np.float32([[2, 3], [0, 1]]) + np.float32(0.1))
    unpooled = mediapipe_ref.max_unpooling_2d(values, indices, 4, 4, "VALID", 2, 2, 2, 2)
    np.testing.assert_array_equal(unpooled[0, :, :, 0], [[0, 0, 0, 0],
                                                         [6, 0, 0, 8],
                                                         [9, 0, 0, 7],
                                                         [0, 0, 0, 0]])


ARGMAX_CASES = {
    # (input shape, padding, stride h, w, filter h, w)
    "valid_2x2_s2": ((1, 6, 6, 3), "VALID", 2, 2, 2, 2),
    "same_2x2_s2_odd": ((1, 5, 7, 2), "SAME", 2, 2, 2, 2),
    "same_3x3_s2": ((2, 7, 6, 2), "SAME", 2, 2, 3, 3),
    "valid_3x2_s1x2": ((1, 6, 6, 2), "VALID", 1, 2, 3, 2),
    "same_3x3_s1": ((1, 4, 4, 1), "SAME", 1, 1, 3, 3),
}


@pytest.mark.parametrize("case", ARGMAX_CASES)
def test_max_pooling_with_argmax(tmp_path, case):
    x_shape, padding, sh, sw, fh, fw = ARGMAX_CASES[case]
    rng = np.random.default_rng(11)
    # Few distinct values: many ties, where the first maximum must win.
    x = rng.integers(-3, 3, size=x_shape).astype(np.float32)
    path = write_model(argmax_model(x_shape, padding, sh, sw, fh, fw), tmp_path / "m.tflite")
    values, indices = ours_and_arm(path, [x])
    want_values, want_indices = mediapipe_ref.max_pooling_with_argmax_2d(x, padding, sh, sw,
                                                                         fh, fw)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(indices, want_indices)


def test_int32_pool_indices_are_refused(tmp_path):
    """MediaPipe's kernels keep indices in float32 only."""
    path = write_model(argmax_model((1, 4, 4, 1), "VALID", 2, 2, 2, 2, "INT32"),
                       tmp_path / "m.tflite")
    with pytest.raises(ConversionError, match="float32 indices"):
        convert(path)


def test_max_pooling_with_argmax_relu6(tmp_path):
    x = np.random.default_rng(0).normal(0, 5, (1, 4, 4, 2)).astype(np.float32)
    path = write_model(argmax_model(x.shape, "VALID", 2, 2, 2, 2, activation=3),
                       tmp_path / "m.tflite")
    values, indices = ours_and_arm(path, [x])
    want_values, want_indices = mediapipe_ref.max_pooling_with_argmax_2d(x, "VALID", 2, 2, 2, 2)
    np.testing.assert_array_equal(values, np.clip(want_values, 0, 6))
    np.testing.assert_array_equal(indices, want_indices)


def unpool_model(x_shape, out_hw, padding, sh, sw, fh, fw, index_type="FLOAT32"
                 ) -> TfliteBuilder:
    b = TfliteBuilder()
    x = b.tensor(list(x_shape), "FLOAT32", "x")
    i = b.tensor(list(x_shape), index_type, "indices")
    y = b.tensor([x_shape[0], *out_hw, x_shape[3]], "FLOAT32", "unpooled")
    b.op("CUSTOM", [x, i], [y], custom_code="MaxUnpooling2D",
         custom_options=pool_options(padding, sh, sw, fh, fw))
    b.io([x, i], [y])
    return b


UNPOOL_CASES = {
    # (pooled shape, padding, stride = filter h, w): the output is pooled * stride
    "valid_2x2": ((1, 3, 3, 3), "VALID", 2, 2),
    "same_2x2": ((1, 3, 4, 2), "SAME", 2, 2),
    "same_3x2": ((2, 2, 3, 1), "SAME", 3, 2),
}


@pytest.mark.parametrize("case", UNPOOL_CASES)
def test_max_unpooling(tmp_path, case):
    (n, h, w, c), padding, sh, sw = UNPOOL_CASES[case]
    oh, ow = h * sh, w * sw
    rng = np.random.default_rng(13)
    x = rng.normal(size=(n, h, w, c)).astype(np.float32)
    # Stored indices as the pooling writes them (k + 0.1), some exact k too.
    indices = rng.integers(0, sh * sw, size=(n, h, w, c)).astype(np.float32)
    indices[..., ::2] += np.float32(0.1)
    path = write_model(unpool_model((n, h, w, c), (oh, ow), padding, sh, sw, sh, sw),
                       tmp_path / "m.tflite")
    (ours,) = ours_and_arm(path, [x, indices])
    want = mediapipe_ref.max_unpooling_2d(x, indices, oh, ow, padding, sh, sw, sh, sw)
    np.testing.assert_array_equal(ours, want)


@pytest.mark.parametrize("filter_size", [3, 1])
def test_unpooling_windows_not_tiling_are_refused(tmp_path, filter_size):
    path = write_model(unpool_model((1, 3, 3, 1), (6, 6), "SAME", 2, 2, filter_size,
                                    filter_size), tmp_path / "m.tflite")
    with pytest.raises(ConversionError, match="filter == stride"):
        convert(path)
