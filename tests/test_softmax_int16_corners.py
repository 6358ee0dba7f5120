"""int16 SOFTMAX (legalize/softmax.py softmax_int16) at the corners of
TFLite's reference_ops::SoftmaxInt16, judged by TFLite's builtin reference
kernels and Arm's reference model (check_integer): rows of equal logits,
rows whose sum of exponentials normalizes to the top of the reciprocal
table's input (TFLite saturates it to int16), and input scales whose
multiplier shifts left far enough that TFLite's `diff * 2^shift` wraps.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_legalize_integer import check_integer, softmax_model


def _rows(n: int) -> np.ndarray:
    """Equal rows at both int16 ends and 0, one-hot rows, alternating extremes."""
    rows = [np.full(n, 0), np.full(n, 32767), np.full(n, -32768),
            np.r_[32767, np.full(n - 1, -32768)], np.resize([32767, -32768], n),
            np.resize([-32768, 32767, 0], n)]
    return np.stack(rows).astype(np.int16)


@pytest.mark.parametrize("n", [1, 2, 1000, 1024, 4096])
@pytest.mark.parametrize("scale", [3.6127260905072234e-11, 3.0e-4, 1.0, 100.0])
def test_equal_and_extreme_rows(tmp_path, n, scale) -> None:
    """scale 3.6e-11 is EfficientNetB0 int16x8's classifier (seeded weights)."""
    rows = _rows(n)
    check_integer(softmax_model(tmp_path, rows.shape, 1.0, scale, 0, "INT16", "INT16"),
                  inputs=[[rows]])


def test_sum_normalizing_to_the_reciprocal_tables_end(tmp_path) -> None:
    """Eight logits at the row's max and a ninth swept over every int16 value
    below it: the sums 8 * 32767 + e (e every exp table output) include
    2^18 - 1, whose normalized (sum << 13) + 2^13 is 2^31, so `shifted_sum`
    is 2^17 and its recentred value 32768 saturates to 32767 in TFLite."""
    sweep = np.arange(-32768, 32767, dtype=np.int64)
    rows = np.concatenate([np.full((sweep.size, 8), 32767), sweep[:, None]], axis=1)
    rows = rows.astype(np.int16)
    check_integer(softmax_model(tmp_path, rows.shape, 1.0, 3.0e-4, 0, "INT16", "INT16"),
                  inputs=[[rows]])


@pytest.mark.parametrize("scale", [1.0e-3, 0.5, 30.0, 5.0e4])
def test_left_shifted_multipliers(tmp_path, scale) -> None:
    """Every difference, for input multipliers from 6.5 (no wrap) to 3.3e8 (TFLite's
    `diff * 2^shift` wraps in int32 for most differences)."""
    x = np.arange(-32768, 32768, dtype=np.int64).reshape(256, 256)
    rows = np.concatenate([x, np.full((256, 1), 32767)], axis=1).astype(np.int16)
    check_integer(softmax_model(tmp_path, rows.shape, 1.0, scale, 0, "INT16", "INT16"),
                  inputs=[[rows]])


def test_rows_whose_sum_can_overflow_int32_are_refused(tmp_path) -> None:
    """65539 exponentials of 32767 pass 2^31 - 1 in TFLite's int32 sum (undefined
    behaviour there): the integer pattern refuses such rows by name."""
    from tfl2tosa.pipeline import convert
    _, conversion = convert(softmax_model(tmp_path, (1, 65539), 1.0, 3.0e-4, 0,
                                          "INT16", "INT16"))
    [outcome] = [o for o in conversion.outcomes if o["op_name"] == "tfl.softmax"]
    assert outcome["pattern"] != "softmax_int16"
    assert "overflow TFLite's int32 sum" in str(outcome), outcome
