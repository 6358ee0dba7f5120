"""AI Edge Quantizer recipes applied to the LiteRT Torch float models of this zoo (the
committed `litert_torch/<model>_float32.tflite` files, so run the litert_torch family
first). Calibration: seeded random inputs drawn from each input's range in the manifest."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CALIBRATION_SAMPLES = 8
MODELS = ("bert", "gpt2", "llama", "t5_encoder", "vit", "swin", "convnext", "whisper_encoder",
          "generative_block_hlfb", "kv_cache_decode", "kv_cache_decode_hlfb")


def _dynamic_int4_blockwise():
    from ai_edge_quantizer import qtyping, recipe_manager
    manager = recipe_manager.RecipeManager()
    manager.add_dynamic_config(regex=".*", operation_name=qtyping.TFLOperationName.ALL_SUPPORTED,
                               num_bits=4, granularity=qtyping.QuantGranularity.BLOCKWISE_32)
    return manager.get_quantization_recipe()


def _recipes() -> dict[str, tuple[Callable, str]]:
    from ai_edge_quantizer import recipe
    return {
        "static_a8w8": (recipe.static_wi8_ai8, "static_wi8_ai8: int8 activations, int8 weights"),
        "static_a16w8": (recipe.static_wi8_ai16,
                         "static_wi8_ai16: int16 activations, int8 weights, int64 bias"),
        "dynamic_wi8": (recipe.dynamic_wi8_afp32,
                        "dynamic_wi8_afp32: int8 per-channel weights, float activations "
                        "quantized at run time"),
        "weight_only_wi8": (recipe.weight_only_wi8_afp32,
                            "weight_only_wi8_afp32: int8 weights dequantized to float"),
        "weight_only_wi4": (recipe.weight_only_wi4_afp32,
                            "weight_only_wi4_afp32: int4 per-channel weights dequantized to float"),
        # Weight-only blockwise leaves every weight in float (AI Edge Quantizer 0.10.0).
        "dynamic_wi4_b32": (_dynamic_int4_blockwise,
                            "dynamic int4 weights, blockwise (block 32, float16 scales), "
                            "float activations"),
    }


def _float_entry(model: str) -> dict:
    manifest = json.loads((HERE / "manifest.json").read_text())
    path = f"litert_torch/{model}_float32.tflite"
    for entry in manifest["models"]:
        if entry["path"] == path:
            return entry
    raise FileNotFoundError(f"{path} is not in the manifest: run the litert_torch family first")


def _calibration(data: bytes, ranges: list) -> dict:
    """Seeded samples for the model's one signature, keyed by signature input name."""
    from ai_edge_litert.interpreter import Interpreter
    interpreter = Interpreter(model_content=data)
    (key, signature), = interpreter.get_signature_list().items()
    runner = interpreter.get_signature_runner(key)
    details = runner.get_input_details()
    # The signature's inputs map to model inputs by tensor index; ranges are in model order.
    model_order = [d["index"] for d in interpreter.get_input_details()]
    rng = np.random.default_rng(4)
    samples = []
    for _ in range(CALIBRATION_SAMPLES):
        sample = {}
        for name, detail in details.items():
            low, high = ranges[model_order.index(detail["index"])]
            dtype = np.dtype(detail["dtype"])
            if np.issubdtype(dtype, np.integer):
                sample[name] = rng.integers(int(low), int(high), size=detail["shape"]).astype(dtype)
            else:
                sample[name] = rng.uniform(low, high, size=detail["shape"]).astype(dtype)
        samples.append(sample)
    return {key: samples}


def quantize(model: str, recipe_name: str):
    from ai_edge_quantizer import quantizer
    from toolchain_case import Built
    entry = _float_entry(model)
    data = (HERE / entry["path"]).read_bytes()
    ranges = [tuple(i["range"]) for i in entry["inputs"]]
    make_recipe, description = _recipes()[recipe_name]
    q = quantizer.Quantizer(bytearray(data), make_recipe())
    calibration = q.calibrate(_calibration(data, ranges)) if q.need_calibration else None
    result = q.quantize(calibration, enable_progress_report=False)
    return Built(bytes(result.quantized_model), ranges,
                 entry["config"] | {"source": entry["path"]}, description)


def cases() -> list:
    from toolchain_case import Case
    names = ("static_a8w8", "static_a16w8", "dynamic_wi8", "weight_only_wi8", "weight_only_wi4",
             "dynamic_wi4_b32")
    return [Case(f"ai_edge_quantizer/{model}_{recipe}.tflite",
                 lambda model=model, recipe=recipe: quantize(model, recipe))
            for model in MODELS for recipe in names]
