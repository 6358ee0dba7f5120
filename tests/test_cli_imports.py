"""What a `tfl2tosa` process imports for each command, read from `sys.modules` at
exit of a real CLI process (module sets, not times: the machine's load does not
change them).

- `--help` (top level and per command) and `--version` load no numpy: they need typer only.
- `convert` loads no TFLite runtime (tensorflow, ai_edge_litert), no rich (it
  prints nothing), and from `legalize` only the pattern families the model's
  ops need.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Runs the CLI as the installed script does (argv[0] named tfl2tosa), then
# prints the top-level packages and the legalize modules it loaded.
PROBE = """
import atexit, json, sys
def report():
    names = set(sys.modules)
    print("\\n" + json.dumps({"top": sorted({n.split(".")[0] for n in names}),
                             "all": sorted(names)}), file=sys.__stderr__)
atexit.register(report)
sys.argv = ["tfl2tosa"] + sys.argv[1:]
from tfl2tosa.cli import main
main()
"""


def loaded_modules(*args: str) -> dict[str, list[str]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    last = done.stderr.strip().splitlines()[-1]
    return json.loads(last)


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["convert", "--help"], ["run", "--help"],
                                  ["inspect", "--help"], ["tosa-info", "--help"],
                                  ["batch", "--help"], ["validate", "--help"]],
                         ids=lambda a: " ".join(a))
def test_help_and_version_load_no_numpy(args):
    modules = loaded_modules(*args)
    assert "typer" in modules["top"]  # the probe did run the CLI
    assert "numpy" not in modules["top"]


def test_convert_loads_no_tflite_runtime_no_rich_and_only_the_models_patterns(tmp_path):
    model = ROOT / "models/arch/mobilenet_tiny_int8.tflite"
    modules = loaded_modules("convert", str(model), "-o", str(tmp_path / "m.tosa"))
    assert (tmp_path / "m.tosa").stat().st_size > 0
    for heavy in ("tensorflow", "ai_edge_litert", "tflite_runtime", "rich"):
        assert heavy not in modules["top"]
    patterns = {m for m in modules["all"] if m.startswith("legalize.")}
    # A conv/add/mean/softmax model: no recurrent, detection, control-flow or
    # complex-number families.
    for family in ("legalize.rnn", "legalize.detection", "legalize.control_flow",
                   "legalize.complex", "legalize.mediapipe", "legalize.lstm"):
        assert family not in patterns
    assert "legalize.conv" in patterns
