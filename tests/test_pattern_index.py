"""Pattern modules load on demand: the generated index must be current, and a
conversion that loads only what its ops need must equal one with every
pattern loaded."""

import subprocess
import sys
from pathlib import Path

import pytest

from legalize import index
from tfl2tosa.errors import UsageError
from tfl2tosa.pipeline import convert

ROOT = Path(__file__).resolve().parent.parent


def test_index_is_current():
    assert index.INDEX_PATH.read_text() == index.render(index.build_index()), (
        "legalize/pattern_index.py is stale: run `python -m legalize.index --update`")


# Converts each model twice in a fresh interpreter: first with modules loaded on
# demand, then after `load_all()`; prints whether the bytes agree and which
# family modules the first conversion needed.
LAZY_VS_FULL = """
import sys
from pathlib import Path
from tfl2tosa.pipeline import convert, emit
lazy = {}
for path in sys.argv[1:]:
    lazy[path] = emit(convert(path)[0], "tosa")
loaded = sorted(m for m in sys.modules if m.startswith("legalize."))
import legalize
legalize.load_all()
for path in sys.argv[1:]:
    assert emit(convert(path)[0], "tosa") == lazy[path], path
print(" ".join(loaded))
"""


def test_lazy_loading_converts_like_a_full_load():
    models = [ROOT / "models/unit/float32/add.tflite",
              *sorted((ROOT / "models/arch").glob("mobilenet_tiny_*.tflite"))]
    done = subprocess.run([sys.executable, "-c", LAZY_VS_FULL, *map(str, models)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    # MobileNet needs the conv family (float and integer) and the integer
    # data ops (uint8 wrappers), not LSTMs or FFTs.
    assert {"legalize.conv", "legalize.integer.data"} <= loaded
    assert not {"legalize.rnn", "legalize.complex"} & loaded


def test_patterns_that_cannot_serve_a_model_are_not_imported():
    """Hybrid patterns serve only quantized weights with float activations: a
    float or fully quantized model does not import their module, and converts
    as with it loaded (test above)."""
    models = [ROOT / "models/arch/mobilenet_tiny_float32.tflite",
              ROOT / "models/arch/mobilenet_tiny_int8.tflite"]
    code = ("import sys\nfrom tfl2tosa.pipeline import convert\n"
            "for path in sys.argv[1:]:\n    convert(path)\n"
            "print(' '.join(m for m in sys.modules if m.startswith('legalize.')))")
    done = subprocess.run([sys.executable, "-c", code, *map(str, models)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert "legalize.conv" in loaded
    assert "legalize.hybrid" not in loaded


def test_unknown_disabled_label_is_a_usage_error():
    with pytest.raises(UsageError, match="no_such_pattern"):
        convert(ROOT / "models/unit/float32/add.tflite", disabled={"no_such_pattern"})
