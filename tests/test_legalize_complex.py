"""RFFT2D, REAL, IMAG, COMPLEX_ABS against the TFLite interpreter.

The zoo's two RFFT2D models (tf.signal.rfft2d followed by real + imag, and by
abs) plus builder models for what the converter does not emit: fft_length
smaller than the input (TFLite crops) and larger (zero-pads), batch axes,
rank 2, large magnitudes where a naive |z| overflows, and the refusals: a
complex graph output, a complex value feeding an op other than
REAL/IMAG/COMPLEX_ABS, and an fft_length that is not a power of two.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from e2e import check_model, model_path

from tfl2tosa.pipeline import convert
from tfl2tosa.errors import ConversionError


@pytest.mark.parametrize("relative", ["unit/float32/rfft2d_real_imag.tflite",
                                      "unit/float32/rfft2d_complex_abs.tflite"])
def test_zoo_model(relative: str) -> None:
    check_model(model_path(relative), allowed_paths=("float",))


def rfft_model(b, path: Path, in_shape: list[int], fft: tuple[int, int],
               consumers: tuple[str, ...] = ("REAL", "IMAG")) -> Path:
    """x -> RFFT2D(fft) -> each consumer (REAL/IMAG/COMPLEX_ABS) -> outputs."""
    x = b.tensor(in_shape, "FLOAT32", "x")
    length = b.tensor([2], "INT32", "fft_length", data=np.array(fft, np.int32))
    out_shape = [*in_shape[:-2], fft[0], fft[1] // 2 + 1]
    z = b.tensor(out_shape, "COMPLEX64", "z")
    b.op("RFFT2D", [x, length], [z])
    outputs = []
    for code in consumers:
        y = b.tensor(out_shape, "FLOAT32", code.lower())
        b.op(code, [z], [y])
        outputs.append(y)
    b.io([x], outputs)
    path.write_bytes(b.to_bytes())
    return path


CASES = {
    "same_size_real_imag": ([1, 4, 8], (4, 8), ("REAL", "IMAG")),
    "crop_both_axes": ([1, 6, 10], (4, 8), ("REAL", "IMAG", "COMPLEX_ABS")),
    "pad_both_axes": ([1, 3, 5], (4, 8), ("REAL", "IMAG", "COMPLEX_ABS")),
    "crop_height_pad_width": ([2, 8, 3], (4, 4), ("REAL", "IMAG")),
    "batch_axes_rank4": ([2, 3, 4, 4], (4, 4), ("COMPLEX_ABS", "REAL")),
    "rank2": ([8, 4], (8, 4), ("IMAG", "COMPLEX_ABS")),
    "width_two": ([1, 4, 2], (4, 2), ("REAL", "IMAG")),
    "height_one": ([1, 1, 4], (1, 4), ("REAL", "IMAG", "COMPLEX_ABS")),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rfft2d_chain_matches_tflite(name: str, builder, tmp_path: Path) -> None:
    in_shape, fft, consumers = CASES[name]
    check_model(rfft_model(builder, tmp_path / f"{name}.tflite", in_shape, fft, consumers),
                allowed_paths=("float",))


def test_complex_abs_of_large_magnitudes(builder, tmp_path: Path) -> None:
    """Bins near 1e21: their squares overflow float32, TFLite's hypot does not."""
    path = rfft_model(builder, tmp_path / "large.tflite", [1, 4, 8], (4, 8), ("COMPLEX_ABS",))
    rng = np.random.default_rng(1)
    feeds = [[(rng.uniform(-2, 2, (1, 4, 8)) * 1e20).astype(np.float32)]]
    _, report = check_model(path, allowed_paths=("float",), inputs=feeds)
    assert all(np.isfinite(o.max_abs_error) for o in report.outputs)


def test_complex_graph_output_is_refused(builder, tmp_path: Path) -> None:
    x = builder.tensor([1, 4, 8], "FLOAT32", "x")
    length = builder.tensor([2], "INT32", "fft_length", data=np.array([4, 8], np.int32))
    z = builder.tensor([1, 4, 5], "COMPLEX64", "z")
    builder.op("RFFT2D", [x, length], [z])
    builder.io([x], [z])
    path = tmp_path / "complex_out.tflite"
    path.write_bytes(builder.to_bytes())
    with pytest.raises(ConversionError, match="complex result is a graph output"):
        convert(path)


def test_complex_value_feeding_another_op_is_refused(builder, tmp_path: Path) -> None:
    x = builder.tensor([1, 4, 8], "FLOAT32", "x")
    length = builder.tensor([2], "INT32", "fft_length", data=np.array([4, 8], np.int32))
    z = builder.tensor([1, 4, 5], "COMPLEX64", "z")
    shape = builder.tensor([2], "INT32", "shape", data=np.array([4, 5], np.int32))
    flat = builder.tensor([4, 5], "COMPLEX64", "flat")
    y = builder.tensor([4, 5], "FLOAT32", "y")
    builder.op("RFFT2D", [x, length], [z])
    builder.op("RESHAPE", [z, shape], [flat])
    builder.op("REAL", [flat], [y])
    builder.io([x], [y])
    path = tmp_path / "complex_reshape.tflite"
    path.write_bytes(builder.to_bytes())
    with pytest.raises(ConversionError, match="feeds tfl.reshape"):
        convert(path)


@pytest.mark.parametrize("in_shape, fft, reason", [
    ([1, 4, 6], (4, 6), "must be powers of two"),
    # TFLite's kernel returns values that are not the DFT for width 1.
    ([1, 4, 1], (4, 1), "width 1 is not supported"),
], ids=["not_power_of_two", "width_one"])
def test_fft_length_is_refused(in_shape, fft, reason: str, builder, tmp_path: Path) -> None:
    path = rfft_model(builder, tmp_path / "refused.tflite", in_shape, fft, ("REAL",))
    with pytest.raises(ConversionError, match=reason):
        convert(path)
