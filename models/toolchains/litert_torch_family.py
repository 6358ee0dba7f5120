"""LiteRT Torch producers: Hugging Face `transformers` models from small configs, the
generative API's layers (high-level function boundaries, a KV cache), and PT2E int8.

Every builder returns a `Built` (generate.py): the .tflite bytes, each model input's
real range (model order, half-open for integers) and the config it was made from.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable

import torch

SEQUENCE = 8
VOCAB = 64
IMAGE = 16


@dataclasses.dataclass
class TorchModel:
    """A module, its sample arguments and each argument's real range."""

    module: torch.nn.Module
    args: tuple[torch.Tensor, ...]
    ranges: list[tuple[float, float]]
    config: dict


class LastHiddenState(torch.nn.Module):
    """A `transformers` model called with one positional input, returning its last hidden
    state (a tensor, not a ModelOutput, so the export has one output)."""

    def __init__(self, model: torch.nn.Module, argument: str) -> None:
        super().__init__()
        self.model = model
        self.argument = argument

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(**{self.argument: x}).last_hidden_state


def _config_dict(config) -> dict:
    keep = {}
    for key, value in config.to_diff_dict().items():
        if isinstance(value, (int, float, str, bool)) or value is None or (
                isinstance(value, list) and all(isinstance(v, (int, float, str)) for v in value)):
            keep[key] = value
    keep["class"] = type(config).__name__
    return keep


def _tokens(config, model_class, **extra) -> TorchModel:
    model = model_class(config).eval()
    ids = torch.randint(0, VOCAB, (1, SEQUENCE), generator=torch.Generator().manual_seed(1))
    return TorchModel(LastHiddenState(model, "input_ids").eval(), (ids,), [(0, VOCAB)],
                      _config_dict(config))


def _image(config, model_class, size: int = IMAGE) -> TorchModel:
    model = model_class(config).eval()
    pixels = torch.rand((1, 3, size, size), generator=torch.Generator().manual_seed(1))
    return TorchModel(LastHiddenState(model, "pixel_values").eval(), (pixels,), [(0.0, 1.0)],
                      _config_dict(config))


def bert() -> TorchModel:
    import transformers
    config = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=16, attn_implementation="eager")
    return _tokens(config, transformers.BertModel)


def gpt2() -> TorchModel:
    import transformers
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=2,
                                     n_positions=16, attn_implementation="eager")
    return _tokens(config, transformers.GPT2Model)


def llama() -> TorchModel:
    """RoPE, RMSNorm, grouped-query attention (4 query heads sharing 2 key/value heads)."""
    import transformers
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
        attn_implementation="eager")
    return _tokens(config, transformers.LlamaModel)


def t5_encoder() -> TorchModel:
    import transformers
    config = transformers.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=1,
                                   num_heads=4, attn_implementation="eager")
    return _tokens(config, transformers.T5EncoderModel)


def vit() -> TorchModel:
    import transformers
    config = transformers.ViTConfig(
        image_size=IMAGE, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=64, attn_implementation="eager")
    return _image(config, transformers.ViTModel)


def swin() -> TorchModel:
    import transformers
    config = transformers.SwinConfig(
        image_size=IMAGE, patch_size=2, num_channels=3, embed_dim=16, depths=[1, 1],
        num_heads=[1, 2], window_size=4, mlp_ratio=2.0)
    return _image(config, transformers.SwinModel)


def convnext() -> TorchModel:
    import transformers
    config = transformers.ConvNextConfig(num_channels=3, num_stages=2, hidden_sizes=[16, 32],
                                         depths=[1, 1], patch_size=2, image_size=IMAGE)
    return _image(config, transformers.ConvNextModel)


def whisper_encoder() -> TorchModel:
    import transformers
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    config = transformers.WhisperConfig(
        vocab_size=VOCAB, d_model=32, encoder_layers=1, encoder_attention_heads=2,
        encoder_ffn_dim=64, decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=64,
        num_mel_bins=16, max_source_positions=SEQUENCE, attn_implementation="eager")
    model = WhisperEncoder(config).eval()
    features = torch.rand((1, 16, 2 * SEQUENCE), generator=torch.Generator().manual_seed(1))
    return TorchModel(LastHiddenState(model, "input_features").eval(), (features * 2 - 1,),
                      [(-1.0, 1.0)], _config_dict(config))


# The generative API's own layers (litert_torch.generative.layers).
KV_CACHE_LENGTH = 16


def _generative_config(enable_hlfb: bool):
    import litert_torch.generative.layers.model_config as cfg
    norm = cfg.NormalizationConfig(type=cfg.NormalizationType.RMS_NORM, enable_hlfb=enable_hlfb)
    block = cfg.TransformerBlockConfig(
        attn_config=cfg.AttentionConfig(num_heads=4, head_dim=8, num_query_groups=2,
                                        rotary_base=10_000, rotary_percentage=1.0),
        ff_config=cfg.FeedForwardConfig(type=cfg.FeedForwardType.GATED,
                                        activation=cfg.ActivationConfig(cfg.ActivationType.SILU),
                                        intermediate_size=64),
        pre_attention_norm_config=norm, post_attention_norm_config=norm)
    return cfg.ModelConfig(vocab_size=VOCAB, num_layers=1, max_seq_len=KV_CACHE_LENGTH,
                           embedding_dim=32, block_configs=block, final_norm_config=norm,
                           enable_hlfb=enable_hlfb)


def _generative_description(config) -> dict:
    attention = config.block_config(0).attn_config
    return {"class": "litert_torch.generative", "embedding_dim": config.embedding_dim,
            "num_layers": config.num_layers, "vocab_size": config.vocab_size,
            "num_heads": attention.num_heads, "head_dim": attention.head_dim,
            "num_query_groups": attention.num_query_groups, "norm": "rms_norm",
            "feed_forward": "gated silu", "enable_hlfb": config.enable_hlfb}


class GenerativeBlock(torch.nn.Module):
    """Embedding -> RoPE transformer block -> final norm -> logits, with no KV cache."""

    def __init__(self, config) -> None:
        super().__init__()
        from litert_torch.generative.layers import attention, builder
        import litert_torch.generative.layers.attention_utils as attention_utils
        self.embedding = torch.nn.Embedding(config.vocab_size, config.embedding_dim)
        block = config.block_config(0)
        block.attn_config.enable_kv_cache = False
        self.block = attention.TransformerBlock(block, config)
        self.final_norm = builder.build_norm(config.embedding_dim, config.final_norm_config)
        self.lm_head = torch.nn.Linear(config.embedding_dim, config.vocab_size, bias=False)
        self.rope = attention_utils.build_rope_cache(size=config.max_seq_len,
                                                     dim=block.attn_config.head_dim,
                                                     base=block.attn_config.rotary_base)
        self.mask = attention_utils.build_causal_mask_cache(size=config.max_seq_len)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1])
        cos, sin = (r.index_select(0, positions) for r in self.rope)
        mask = self.mask.index_select(2, positions)[:, :, :, : tokens.shape[1]]
        x = self.block(self.embedding(tokens), (cos, sin), mask, positions)
        return self.lm_head(self.final_norm(x))


def generative_block_hlfb() -> TorchModel:
    """rms_norm and scaled_dot_product_attention as STABLEHLO_COMPOSITE ops."""
    config = _generative_config(enable_hlfb=True)
    torch.manual_seed(0)
    ids = torch.randint(0, VOCAB, (1, SEQUENCE), generator=torch.Generator().manual_seed(1))
    return TorchModel(GenerativeBlock(config).eval(), (ids,), [(0, VOCAB)],
                      _generative_description(config))


class KVCacheDecoder(torch.nn.Module):
    """One decode step of the generative API's toy model: the new key/value rows go into
    the cache at `input_pos` (DYNAMIC_UPDATE_SLICE at a run-time position)."""

    def __init__(self, config) -> None:
        super().__init__()
        from litert_torch.generative.examples.test_models import toy_model_with_kv_cache
        self.model = toy_model_with_kv_cache.ToyModelWithKVCache(config)

    def forward(self, tokens, input_pos, k_cache, v_cache):
        from litert_torch.generative.layers import kv_cache as kv_utils
        cache = kv_utils.KVCache((kv_utils.KVCacheEntry(k_cache, v_cache),))
        out = self.model(tokens, input_pos, cache)
        entry = out["kv_cache"].caches[0]
        return out["logits"], entry.k_cache, entry.v_cache


def _kv_cache(enable_hlfb: bool) -> TorchModel:
    from litert_torch.generative.layers import kv_cache as kv_utils
    config = _generative_config(enable_hlfb=enable_hlfb)
    torch.manual_seed(0)
    model = KVCacheDecoder(config).eval()
    entry = kv_utils.KVCache.from_model_config(KV_CACHE_LENGTH, config).caches[0]
    cache_rng = torch.Generator().manual_seed(2)
    k = torch.rand(entry.k_cache.shape, generator=cache_rng) * 2 - 1
    v = torch.rand(entry.v_cache.shape, generator=cache_rng) * 2 - 1
    args = (torch.tensor([[3]], dtype=torch.int32), torch.tensor([5], dtype=torch.int32), k, v)
    description = _generative_description(config) | {"kv_cache_length": KV_CACHE_LENGTH,
                                                     "signature": "decode (1 token)"}
    return TorchModel(model, args, [(0, VOCAB), (0, KV_CACHE_LENGTH), (-1.0, 1.0), (-1.0, 1.0)],
                      description)


def kv_cache_decode() -> TorchModel:
    return _kv_cache(enable_hlfb=False)


def kv_cache_decode_hlfb() -> TorchModel:
    return _kv_cache(enable_hlfb=True)


FLOAT_MODELS: dict[str, Callable[[], TorchModel]] = {
    "bert": bert, "gpt2": gpt2, "llama": llama, "t5_encoder": t5_encoder, "vit": vit,
    "swin": swin, "convnext": convnext, "whisper_encoder": whisper_encoder,
    "generative_block_hlfb": generative_block_hlfb, "kv_cache_decode": kv_cache_decode,
    "kv_cache_decode_hlfb": kv_cache_decode_hlfb,
}
# PT2E int8 (static, per-channel weights) on these.
PT2E_MODELS = ("bert", "gpt2", "llama", "t5_encoder", "vit", "swin", "convnext",
               "whisper_encoder")
CALIBRATION_SAMPLES = 8


def sample_like(args: tuple[torch.Tensor, ...], ranges, generator: torch.Generator):
    samples = []
    for arg, (low, high) in zip(args, ranges):
        if arg.dtype.is_floating_point:
            samples.append(torch.rand(arg.shape, generator=generator) * (high - low) + low)
        else:
            samples.append(torch.randint(int(low), int(high), arg.shape, generator=generator,
                                         dtype=arg.dtype))
    return tuple(samples)


def _export(module: torch.nn.Module, args) -> bytes:
    import litert_torch
    edge = litert_torch.convert(module, args)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.tflite")
        edge.export(path)
        with open(path, "rb") as f:
            return f.read()


def build_float(name: str) -> tuple[bytes, TorchModel]:
    torch.manual_seed(0)
    made = FLOAT_MODELS[name]()
    return _export(made.module, made.args), made


def build_pt2e(name: str) -> tuple[bytes, TorchModel]:
    """Static int8 through PT2E: symmetric per-channel weights, MinMax-observed activations
    calibrated on seeded samples in each input's range."""
    from litert_torch.quantize import pt2e_quantizer
    from torchao.quantization.pt2e import quantize_pt2e
    torch.manual_seed(0)
    made = FLOAT_MODELS[name]()
    exported = torch.export.export(made.module, made.args).module()
    quantizer = pt2e_quantizer.PT2EQuantizer().set_global(
        pt2e_quantizer.get_symmetric_quantization_config(is_per_channel=True))
    prepared = quantize_pt2e.prepare_pt2e(exported, quantizer)
    generator = torch.Generator().manual_seed(3)
    for _ in range(CALIBRATION_SAMPLES):
        prepared(*sample_like(made.args, made.ranges, generator))
    converted = quantize_pt2e.convert_pt2e(prepared, fold_quantize=False)
    made.config = made.config | {"pt2e": "symmetric per-channel int8, MinMax observers"}
    return _export(converted, made.args), made


def cases() -> list:
    from toolchain_case import Built, Case

    def float_case(name: str) -> Case:
        def build() -> Built:
            data, made = build_float(name)
            return Built(data, made.ranges, made.config, "litert_torch.convert, float32")
        return Case(f"litert_torch/{name}_float32.tflite", build)

    def pt2e_case(name: str) -> Case:
        def build() -> Built:
            data, made = build_pt2e(name)
            return Built(data, made.ranges, made.config,
                         "PT2E int8: symmetric per-channel weights, static activations")
        return Case(f"litert_torch/{name}_pt2e_int8.tflite", build)

    return [float_case(n) for n in FLOAT_MODELS] + [pt2e_case(n) for n in PT2E_MODELS]
