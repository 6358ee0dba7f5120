"""keras-hub backbones from small configs with seeded random weights (no presets), as
fixed-shape batch-1 Keras models converted by TFLiteConverter.from_keras_model in the
flavours of the main zoo (models/generate.py): float32, int8, int16x8, dynamic range and
float16 weights."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

SEQUENCE = 8
VOCAB = 64
IMAGE = 32
CALIBRATION_SAMPLES = 16
FLAVOURS = ("float32", "int8", "int16x8", "dynamic_range", "float16")


def _text(backbone, extra_inputs: dict[str, str]):
    """token_ids [1, SEQUENCE] -> sequence output; other backbone inputs built inside."""
    import keras
    ids = keras.Input((SEQUENCE,), batch_size=1, dtype="int32", name="token_ids")
    feed = {"token_ids": ids}
    for name, kind in extra_inputs.items():
        feed[name] = keras.ops.ones_like(ids) if kind == "ones" else keras.ops.zeros_like(ids)
    output = backbone(feed)
    if isinstance(output, dict):
        output = output["sequence_output"]
    return keras.Model(ids, output), [(0, VOCAB)]


def bert():
    import keras_hub
    config = dict(vocabulary_size=VOCAB, num_layers=1, num_heads=2, hidden_dim=32,
                  intermediate_dim=64, max_sequence_length=16)
    backbone = keras_hub.models.BertBackbone(**config, dropout=0.0)
    return (*_text(backbone, {"padding_mask": "ones", "segment_ids": "zeros"}),
            {"class": "BertBackbone", **config})


def gpt2():
    import keras_hub
    config = dict(vocabulary_size=VOCAB, num_layers=1, num_heads=2, hidden_dim=32,
                  intermediate_dim=64, max_sequence_length=16)
    backbone = keras_hub.models.GPT2Backbone(**config, dropout=0.0)
    return (*_text(backbone, {"padding_mask": "ones"}), {"class": "GPT2Backbone", **config})


def llama():
    import keras_hub
    config = dict(vocabulary_size=VOCAB, num_layers=1, num_query_heads=4, num_key_value_heads=2,
                  hidden_dim=32, intermediate_dim=64)
    backbone = keras_hub.models.LlamaBackbone(**config)
    return (*_text(backbone, {"padding_mask": "ones"}), {"class": "LlamaBackbone", **config})


def _image(backbone):
    import keras
    pixels = keras.Input((IMAGE, IMAGE, 3), batch_size=1, name="images")
    return keras.Model(pixels, backbone(pixels)), [(0.0, 1.0)]


def mobilenet_v3():
    """MobileNetV3-style: hard-swish, squeeze-and-excite blocks."""
    import keras_hub
    config = dict(
        stackwise_expansion=[[40, 56], [64, 72]], stackwise_num_blocks=[2, 2],
        stackwise_num_filters=[[16, 16], [24, 24]], stackwise_kernel_size=[[3, 3], [5, 5]],
        stackwise_num_strides=[[2, 1], [2, 1]], stackwise_se_ratio=[[None, None], [0.25, 0.25]],
        stackwise_activation=[["relu", "relu"], ["hard_swish", "hard_swish"]],
        stackwise_padding=[[1, 1], [2, 2]], output_num_filters=32, depthwise_filters=8,
        depthwise_stride=2, depthwise_residual=False, last_layer_filter=48,
        squeeze_and_excite=0.5, input_num_filters=16)
    backbone = keras_hub.models.MobileNetBackbone(**config, image_shape=(IMAGE, IMAGE, 3))
    return (*_image(backbone), {"class": "MobileNetBackbone", **config})


def densenet():
    """Conv/BatchNorm/ReLU dense blocks with concatenation and pooling transitions (the
    int16x8 keras-hub backbone: the converter refuses int16x8 for MobileNet's HARD_SWISH
    and DeiT's NEG)."""
    import keras_hub
    config = dict(stackwise_num_repeats=[1, 1], compression_ratio=0.5, growth_rate=8)
    backbone = keras_hub.models.DenseNetBackbone(**config, image_shape=(IMAGE, IMAGE, 3))
    return (*_image(backbone), {"class": "DenseNetBackbone", **config})


def deit():
    import keras_hub
    config = dict(patch_size=8, num_layers=1, num_heads=2, hidden_dim=32, intermediate_dim=64)
    backbone = keras_hub.models.DeiTBackbone(**config, image_shape=(IMAGE, IMAGE, 3))
    return (*_image(backbone), {"class": "DeiTBackbone", **config})


MODELS: dict[str, Callable] = {"bert": bert, "gpt2": gpt2, "llama": llama,
                               "mobilenet_v3": mobilenet_v3, "densenet": densenet,
                               "deit": deit}


def _samples(model, ranges, rng) -> list[list[np.ndarray]]:
    samples = []
    for _ in range(CALIBRATION_SAMPLES):
        sample = []
        for spec, (low, high) in zip(model.inputs, ranges):
            shape = tuple(spec.shape)
            if "int" in str(spec.dtype):
                sample.append(rng.integers(int(low), int(high), size=shape).astype(np.int32))
            else:
                sample.append(rng.uniform(low, high, size=shape).astype(np.float32))
        samples.append(sample)
    return samples


def convert(name: str, flavour: str):
    import keras
    import tensorflow as tf
    from toolchain_case import Built
    # Layer names (kept as tensor names) count the models built before in the process.
    keras.backend.clear_session()
    keras.utils.set_random_seed(0)
    model, ranges, config = MODELS[name]()
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    samples = _samples(model, ranges, np.random.default_rng(5))
    recipe = "TFLiteConverter.from_keras_model"
    if flavour != "float32":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if flavour in ("int8", "int16x8"):
        converter.representative_dataset = lambda: iter(samples)
        if flavour == "int8":
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            io = tf.int8
        else:
            converter.target_spec.supported_ops = [
                tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
            io = tf.int16
        # Only float inputs and outputs change type; token ids stay int32.
        if all(s.dtype == "float32" for s in model.inputs):
            converter.inference_input_type = io
        converter.inference_output_type = io
        recipe += f", {flavour}: representative dataset ({CALIBRATION_SAMPLES} seeded samples)"
    elif flavour == "dynamic_range":
        recipe += ", dynamic range: optimizations=[DEFAULT], no dataset"
    elif flavour == "float16":
        converter.target_spec.supported_types = [tf.float16]
        recipe += ", float16 weights"
    data = bytes(converter.convert())
    return Built(data, ranges, config, recipe)


def cases() -> list:
    from toolchain_case import Case
    return [Case(f"keras_hub/{name}_{flavour}.tflite",
                 lambda name=name, flavour=flavour: convert(name, flavour))
            for name in MODELS for flavour in FLAVOURS]
