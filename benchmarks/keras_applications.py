"""Large quantized benchmark models: EfficientNetB0, DenseNet121 and NASNetMobile, int8 and int16x8.

    .venv/bin/python benchmarks/keras_applications.py [--force] [--only NAME ...]

Benchmark models, not test fixtures, made as `benchmarks/mobilenet_v2.py` makes
its MobileNetV2: Keras' application with `weights=None` and seeded random
weights (nothing is downloaded), kernels given He's variance
(`mobilenet_v2.rescale_kernels`), converted by TensorFlow's TFLite converter with
the zoo's flavour settings and calibration. Files go to `benchmarks/.cache/`
(git-ignored), named with a digest of this file and of mobilenet_v2.py, and are
made again only when missing or with `--force`. Each model takes TensorFlow a
while to calibrate: generate them once, before benchmarking.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
CACHE = BENCHMARKS / ".cache"
FLAVOURS = ("int8", "int16x8")
# name -> (keras.applications attribute, input shape)
MODELS = {
    "efficientnet_b0": ("EfficientNetB0", (224, 224, 3)),
    "densenet121": ("DenseNet121", (224, 224, 3)),
    "nasnet_mobile": ("NASNetMobile", (224, 224, 3)),
}


def model_path(name: str, flavour: str) -> Path:
    digest = hashlib.sha256(Path(__file__).read_bytes()
                            + (BENCHMARKS / "mobilenet_v2.py").read_bytes()).hexdigest()[:8]
    return CACHE / f"{name}_{flavour}.{digest}.tflite"


def keras_application_paths(names: tuple[str, ...] = tuple(MODELS),
                            force: bool = False) -> list[Path]:
    """The cached `.tflite` files, generating the missing ones first."""
    for name in names:
        missing = [f for f in FLAVOURS if force or not model_path(name, f).exists()]
        if missing:
            generate(name, missing)
    return [model_path(name, flavour) for name in names for flavour in FLAVOURS]


def generate(name: str, flavours: list[str]) -> None:
    """Build one Keras application with seeded weights, convert it in each flavour."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    sys.path.insert(0, str(BENCHMARKS))
    import tensorflow as tf
    from mobilenet_v2 import rescale_kernels, write_flavours

    tf.get_logger().setLevel("ERROR")
    tf.keras.utils.set_random_seed(0)
    application, input_shape = MODELS[name]
    keras_model = getattr(tf.keras.applications, application)(
        input_shape=input_shape, include_top=True, weights=None, classes=1000)
    rescale_kernels(keras_model, tf.keras.layers.DepthwiseConv2D)
    write_flavours(keras_model, name, input_shape, flavours,
                   lambda flavour: model_path(name, flavour))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="regenerate even if cached")
    parser.add_argument("--only", nargs="*", choices=list(MODELS), default=list(MODELS))
    args = parser.parse_args()
    for path in keras_application_paths(tuple(args.only), args.force):
        print(f"{path.name} ({path.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
