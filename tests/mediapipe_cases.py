"""Models built around MediaPipe's custom ops whose input is one image
[1, H, W, 3], so that MediaPipe's own runtime (ImageToTensorCalculator ->
InferenceCalculator with MediaPipe's op resolver) can run them: the judge of
tests/test_mediapipe_judged.py. The outputs MediaPipe gave are committed in
tests/fixtures/mediapipe/judged/ (made by tests/fixtures/mediapipe/judge.py).

Image pixels reach the model as p / 255 (the calculator's [0, 1] range);
images with few distinct values make ties.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
from conftest import TfliteBuilder
from flatbuffers import flexbuffers

PADDING = {"SAME": 1, "VALID": 2}
# MediaPipe registers the landmark ops' second definitions as version 2.
VERSIONS = {"Landmarks2TransformMatrix": 2, "TransformTensorBilinear": 2,
            "TransformLandmarks": 2}


def flex(**fields: object) -> bytes:
    fbb = flexbuffers.Builder()
    with fbb.Map():
        for key, value in fields.items():
            if isinstance(value, list):
                fbb.Key(key)
                fbb.TypedVectorFromElements(value)
            elif isinstance(value, int):
                fbb.Int(key, value)
            else:
                fbb.Float(key, float(value))
    return bytes(fbb.Finish())


class Case:
    """A model and the image it is judged on."""

    def __init__(self, b: TfliteBuilder, image: np.ndarray) -> None:
        for code in b.model.operatorCodes:
            if code.customCode:
                name = code.customCode.decode() if isinstance(code.customCode, bytes) \
                    else code.customCode
                code.version = VERSIONS.get(name, 1)
        self.model = b.to_bytes()
        self.image = image


def _image(shape: tuple[int, int], levels: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = np.linspace(0, 255, levels).astype(np.uint8)
    return values[rng.integers(0, levels, (*shape, 3))]


def _input(b: TfliteBuilder, image: np.ndarray) -> int:
    return b.tensor([1, *image.shape], "FLOAT32", "image")


def transpose_conv(hw: tuple[int, int], oc: int, k: tuple[int, int], padding: str,
                   stride: tuple[int, int], out_hw: tuple[int, int]) -> Callable[[], Case]:
    def make() -> Case:
        image = _image(hw, 256, 1)
        rng = np.random.default_rng(2)
        b = TfliteBuilder()
        x = _input(b, image)
        w = b.tensor([oc, *k, 3], "FLOAT32", "weights",
                     data=rng.normal(size=(oc, *k, 3)).astype(np.float32))
        bias = b.tensor([oc], "FLOAT32", "bias", data=rng.normal(size=oc).astype(np.float32))
        y = b.tensor([1, *out_hw, oc], "FLOAT32", "y")
        b.op("CUSTOM", [x, w, bias], [y], custom_code="Convolution2DTransposeBias",
             custom_options=struct.pack("<3i", PADDING[padding], stride[1], stride[0]))
        b.io([x], [y])
        return Case(b, image)
    return make


def _pool_options(padding: str, stride: tuple[int, int], size: tuple[int, int]) -> bytes:
    return struct.pack("<6i", PADDING[padding], stride[1], stride[0], size[1], size[0], 0)


def pool(hw: tuple[int, int], padding: str, stride: tuple[int, int], size: tuple[int, int],
         out_hw: tuple[int, int], unpool: bool) -> Callable[[], Case]:
    """MaxPoolingWithArgmax2D (float indices); with `unpool`, MaxUnpooling2D of
    its outputs back to the image size too."""
    def make() -> Case:
        image = _image(hw, 4, 3)
        b = TfliteBuilder()
        x = _input(b, image)
        pooled = b.tensor([1, *out_hw, 3], "FLOAT32", "pooled")
        indices = b.tensor([1, *out_hw, 3], "FLOAT32", "indices")
        options = _pool_options(padding, stride, size)
        b.op("CUSTOM", [x], [pooled, indices], custom_code="MaxPoolingWithArgmax2D",
             custom_options=options)
        outputs = [pooled, indices]
        if unpool:
            # MaxUnpooling2D's output: input * stride (its windows tile it).
            restored = b.tensor([1, out_hw[0] * stride[0], out_hw[1] * stride[1], 3],
                                "FLOAT32", "unpooled")
            b.op("CUSTOM", [pooled, indices], [restored], custom_code="MaxUnpooling2D",
                 custom_options=options)
            outputs.append(restored)
        b.io([x], outputs)
        return Case(b, image)
    return make


def landmark_ops(side: int, target: float, crop: tuple[int, int]) -> Callable[[], Case]:
    """The image's pixels as landmarks (scaled to pixel units) -> the matrix;
    the image sampled through it; the pixels as 2D landmarks moved by it."""
    def make() -> Case:
        image = _image((side, side), 256, 4)
        count = side * side
        b = TfliteBuilder()
        x = _input(b, image)

        def reshape(source: int, shape: list[int], name: str) -> int:
            target_shape = b.tensor([len(shape)], "INT32", name + "_shape",
                                    data=np.array(shape, np.int32))
            out = b.tensor(shape, "FLOAT32", name)
            b.op("RESHAPE", [source, target_shape], [out])
            return out

        points = reshape(x, [1, count, 3], "points")
        scale = b.tensor([1], "FLOAT32", "scale", data=np.array([side], np.float32))
        landmarks = b.tensor([1, count, 3], "FLOAT32", "landmarks")
        b.op("MUL", [points, scale], [landmarks], options=b.options("MulOptions"))
        matrix = b.tensor([1, 4, 4], "FLOAT32", "matrix")
        subset = [3, 7, 12, 20, 21, 30, 33, 41, 44, 50, 52, 60]  # pairs, as MediaPipe's
        b.op("CUSTOM", [landmarks], [matrix], custom_code="Landmarks2TransformMatrix",
             custom_options=flex(left_rotation_idx=1, right_rotation_idx=count - 2,
                                 target_rotation_radians=target, subset_idxs=subset,
                                 output_height=crop[0], output_width=crop[1], scale_x=1.5,
                                 scale_y=1.25))
        sampled = b.tensor([1, *crop, 3], "FLOAT32", "sampled")
        b.op("CUSTOM", [x, matrix], [sampled], custom_code="TransformTensorBilinear",
             custom_options=flex(output_height=crop[0], output_width=crop[1]))
        flat = reshape(landmarks, [1, count * 3 // 2, 2], "flat")
        moved = b.tensor([1, count * 3 // 2, 2], "FLOAT32", "moved")
        b.op("CUSTOM", [flat, matrix], [moved], custom_code="TransformLandmarks")
        b.io([x], [matrix, sampled, moved])
        return Case(b, image)
    return make


def transform_landmarks_3d() -> Case:
    """3D landmarks and a matrix, both read from the image's pixels."""
    image = _image((4, 4), 256, 5)
    b = TfliteBuilder()
    x = _input(b, image)

    def reshape(source: int, shape: list[int], name: str) -> int:
        target_shape = b.tensor([len(shape)], "INT32", name + "_shape",
                                data=np.array(shape, np.int32))
        out = b.tensor(shape, "FLOAT32", name)
        b.op("RESHAPE", [source, target_shape], [out])
        return out

    points = reshape(x, [1, 16, 3], "points")
    rows = reshape(x, [1, 4, 12], "rows")
    matrix = b.tensor([1, 4, 4], "FLOAT32", "matrix")
    begin = b.tensor([3], "INT32", "begin", data=np.zeros(3, np.int32))
    size = b.tensor([3], "INT32", "size", data=np.array([1, 4, 4], np.int32))
    b.op("SLICE", [rows, begin, size], [matrix])
    moved = b.tensor([1, 16, 3], "FLOAT32", "moved")
    b.op("CUSTOM", [points, matrix], [moved], custom_code="TransformLandmarks")
    b.io([x], [moved])
    return Case(b, image)


CASES: dict[str, Callable[[], Case]] = {
    "transpose_conv_same_k2_s2": transpose_conv((5, 4), 2, (2, 2), "SAME", (2, 2), (9, 8)),
    "transpose_conv_same_k3_s2": transpose_conv((5, 6), 4, (3, 3), "SAME", (2, 2), (9, 12)),
    "transpose_conv_same_k4_s2": transpose_conv((4, 4), 2, (4, 4), "SAME", (2, 2), (8, 8)),
    "transpose_conv_valid_k3_s2x1": transpose_conv((3, 4), 2, (3, 3), "VALID", (2, 1), (7, 6)),
    "pool_valid_2x2_s2": pool((6, 6), "VALID", (2, 2), (2, 2), (3, 3), unpool=True),
    "pool_same_2x2_s2_odd": pool((5, 7), "SAME", (2, 2), (2, 2), (3, 4), unpool=True),
    "pool_same_3x3_s3": pool((8, 7), "SAME", (3, 3), (3, 3), (3, 3), unpool=True),
    "pool_same_3x3_s2": pool((7, 6), "SAME", (2, 2), (3, 3), (4, 3), unpool=False),
    "pool_valid_3x2_s1x2": pool((6, 6), "VALID", (1, 2), (3, 2), (4, 3), unpool=False),
    "landmarks_target_0": landmark_ops(8, 0.0, (6, 5)),
    "landmarks_target_0.7": landmark_ops(8, 0.7, (4, 6)),
    "transform_landmarks_3d": transform_landmarks_3d,
}
