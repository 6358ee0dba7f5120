"""The inputs `validate` feeds both runs: seeded values over each input type's
whole range, or drawn from a real range (`--input-range`) for ops with a domain."""

from __future__ import annotations

from typing import Any

import numpy as np

from tfl2tosa.errors import UsageError


# A real-valued range for one input: its index in TFLite's input order or its
# name (None: every input) -> (low, high).
InputRanges = dict[int | str | None, tuple[float, float]]


def parse_input_range(text: str) -> tuple[int | str | None, tuple[float, float]]:
    """`LO:HI`, `INDEX=LO:HI` or `NAME=LO:HI` (the CLI's --input-range)."""
    key: int | str | None = None
    spec = text
    if "=" in text:
        name, spec = text.rsplit("=", 1)
        key = int(name) if name.isdigit() else name
    try:
        low, high = (float(v) for v in spec.split(":"))
    except ValueError:
        raise UsageError(f"input range {text!r} is not [NAME=]LOW:HIGH") from None
    if not low < high:
        raise UsageError(f"input range {text!r}: LOW must be below HIGH")
    return key, (low, high)


def ranged_input(rng: np.random.Generator, detail: dict[str, Any],
                 bounds: tuple[float, float]) -> np.ndarray:
    """Real values uniform in [low, high), quantized with the input's own scale
    and zero point when it is an integer tensor (rounded and saturated)."""
    shape, dtype = list(detail["shape"]), np.dtype(detail["dtype"])
    real = rng.uniform(*bounds, size=shape)
    if not np.issubdtype(dtype, np.integer):
        return real.astype(dtype)
    scale, zero_point = detail.get("quantization", (0.0, 0))
    stored = np.round(real / scale) + zero_point if scale else np.round(real)
    info = np.iinfo(dtype)
    return np.clip(stored, info.min, info.max).astype(dtype)


def _range_for(ranges: InputRanges, index: int, name: str) -> tuple[float, float] | None:
    for key in (index, name, None):
        if key in ranges:
            return ranges[key]
    return None


def _draw_input(rng: np.random.Generator, detail: dict[str, Any],
                real_range: tuple[float, float] | None) -> np.ndarray:
    if real_range is None:
        return random_input(rng, list(detail["shape"]), detail["dtype"])
    return ranged_input(rng, detail, real_range)


def random_input(rng: np.random.Generator, shape: list[int], dtype: np.dtype) -> np.ndarray:
    """Uniform over the type's range for integers; uniform in [-2, 2) for floats
    (covers both signs and the interesting region of most activations)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        if dtype.itemsize >= 4:  # indices and sizes: keep them small
            return rng.integers(0, 4, size=shape).astype(dtype)
        return rng.integers(info.min, int(info.max) + 1, size=shape).astype(dtype)
    return rng.uniform(-2.0, 2.0, size=shape).astype(dtype)
