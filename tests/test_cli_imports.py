"""What a `tfl2tosa` process imports for each command, read from `sys.modules` at
exit of a real CLI process (module sets, not times: the machine's load does not
change them).

- `--help` (top level and per command) and `--version` load no numpy: they need typer only.
- `convert` loads no TFLite runtime (tensorflow, ai_edge_litert), no rich (it
  prints nothing), none of the standard library's modules it has no use for
  on a successful conversion (tempfile and what it pulls in, json), no
  `dataclasses` (nor the `inspect` it brings) nor `fractions` (nor `decimal`)
  in any pattern family, and from
  `legalize` only the pattern families the model's ops need (a softmax
  loads legalize/softmax.py, not the other activations), nor the passes
  for ops the model does not have (calls, resource variables).
- A plain `convert` or `run` command line loads no typer (the fast path,
  tfl2tosa/cli/fast.py), and `convert` of a model without sparse tensors no
  module of the `tflite` package: the importer reads tables by its own reader
  and the schema description (tflite_import/flat.py, schema_data.py).
- A `.tosa` convert loads neither the MLIR printer, the generic IR printer
  (the `tosa` and `quant` dialects register their printing hooks in ir.core),
  the op definitions (the op table loads from tosa/op_table.py),
  flatc's reader classes nor the flatbuffers package (the writer builds with
  tosa/fbs/builder.py and flatc's builder functions, generated without that
  import).
- A plain `convert` or `run` loads no pathlib (nor the ntpath, fnmatch and
  urllib it brings): paths are shown and opened by tfl2tosa/paths.py.
- A plain `run` loads no `dataclasses` (nor `inspect`), neither flatc's
  reader classes nor the flatbuffers package (the `.tosa` reader reads tables
  itself), and no verifier (`tfl2tosa.tosa` loads its parts when asked).

The probe starts Python without `site` (-S) and puts site-packages on sys.path
itself, as an installed interpreter finds it: `site` would run this venv's
editable-install hook, which imports pathlib into every process and would hide
a module of ours that does.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent

# Runs the CLI as the installed script does (argv[0] named tfl2tosa), then
# prints the top-level packages and the modules it loaded (with repr, not json:
# the probe must not load what the tests look for).
PROBE = """
import atexit, sys
sys.path.extend(%r)
def report():
    names = set(sys.modules)
    print("\\n" + repr({"top": sorted({n.split(".")[0] for n in names}),
                       "all": sorted(names)}), file=sys.__stderr__)
atexit.register(report)
sys.argv = ["tfl2tosa"] + sys.argv[1:]
from tfl2tosa.cli import main
main()
"""


SITE_PACKAGES = list(dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib")))


def loaded_modules(*args: str, cwd: Path = ROOT) -> dict[str, list[str]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-S", "-c", PROBE % SITE_PACKAGES, *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)
    last = done.stderr.strip().splitlines()[-1]
    return ast.literal_eval(last)


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
    for heavy in ("tensorflow", "ai_edge_litert", "tflite_runtime", "rich", "typer", "click"):
        assert heavy not in modules["top"]
    # write_atomically makes its own temp file; printing (json) is not converting.
    for unused in ("tempfile", "shutil", "random", "bz2", "lzma", "zlib", "json", "dataclasses",
                   "inspect", "fractions", "decimal"):
        assert unused not in modules["top"]
    assert "tflite" not in modules["top"]
    patterns = {m for m in modules["all"] if m.startswith("legalize.")}
    # A conv/add/mean/softmax model: no recurrent, detection, control-flow or
    # complex-number families.
    for family in ("legalize.rnn", "legalize.detection", "legalize.control_flow",
                   "legalize.complex", "legalize.mediapipe", "legalize.lstm"):
        assert family not in patterns
    assert "legalize.conv" in patterns
    # Its one activation is the softmax, whose module stands apart from the
    # other activations' tables and kernels.
    assert "legalize.softmax" in patterns
    assert "legalize.activations" not in patterns
    # No CALL, composite or resource variable: those passes are not imported.
    for unused in ("tfl2tosa.passes.inline_calls", "tfl2tosa.passes.resource_variables"):
        assert unused not in modules["all"]


@pytest.mark.parametrize("model, families", [
    ("arch/lstm_classifier_int8", ("legalize.lstm", "legalize.rnn")),
    ("arch/lstm_classifier_dynamic_range", ("legalize.lstm", "legalize.rnn", "legalize.hybrid")),
    ("unit/int8/resize_bilinear_align_corners", ("legalize.resize",)),
    ("arch/attention_block_int16x8", ("legalize.conv",)),
    ("arch/mobilenet_tiny_float32", ("legalize.conv",)),
])
def test_convert_loads_no_dataclasses_fractions_or_tflite_package(tmp_path, model, families):
    # Records on the convert path are ir.types.Record / Frozen: importing
    # dataclasses (and inspect with it) would cost every conversion; so would
    # fractions (and decimal with it) where float.as_integer_ratio will do, and
    # the `tflite` package's module per table where schema_data describes them.
    modules = loaded_modules("convert", str(ROOT / f"models/{model}.tflite"),
                             "-o", str(tmp_path / "m.tosa"), "--report", str(tmp_path / "r.json"))
    assert (tmp_path / "m.tosa").stat().st_size > 0
    for family in ("legalize.driver", "legalize.registry") + families:
        assert family in modules["all"]
    for unused in ("dataclasses", "inspect", "fractions", "decimal", "tflite"):
        assert unused not in modules["top"]


PATHLIB_AND_ITS_IMPORTS = ("pathlib", "ntpath", "fnmatch", "urllib")


def test_the_probe_sees_pathlib_where_it_is_imported():
    # typer imports pathlib: were the probe's own start-up to import it, or to
    # miss it, the tests below could not fail.
    assert "pathlib" in loaded_modules("convert", "--help")["top"]


@pytest.mark.parametrize("options, written", [
    (["-o", "out.tosa"], ["out.tosa"]),
    ([], ["m.tosa"]),
    (["--report", "r.json"], ["m.tosa", "r.json"]),
    (["--emit", "mlir"], ["m.mlir"]),
    (["--emit", "mlir", "-o", "./o//m.mlir", "--report", "r.json"], ["o/m.mlir", "r.json"]),
], ids=["-o out.tosa", "default output", "--report", "--emit mlir",
        "--emit mlir -o ./o//m.mlir --report"])
def test_convert_loads_no_pathlib(tmp_path, options, written):
    (tmp_path / "o").mkdir()
    model = (ROOT / "models/arch/mobilenet_tiny_int8.tflite").read_bytes()
    (tmp_path / "m.tflite").write_bytes(model)
    modules = loaded_modules("convert", "m.tflite", *options, cwd=tmp_path)
    for name in written:
        assert (tmp_path / name).stat().st_size > 0
    for unused in PATHLIB_AND_ITS_IMPORTS:
        assert unused not in modules["top"]


@pytest.mark.parametrize("options, directory", [(["-o", "out"], "out"), ([], "."),
                                                (["-o", "./a//b/", "--json"], "a/b")],
                         ids=["-o out", "default output", "-o ./a//b/ --json"])
def test_run_loads_no_typer_nor_pathlib(tmp_path, options, directory):
    model = ROOT / "models/arch/mobilenet_tiny_int8.tflite"
    tosa = tmp_path / "m.tosa"
    loaded_modules("convert", str(model), "-o", str(tosa))
    from tfl2tosa.ir.types import numpy_dtype, storage_type
    from tfl2tosa.tosa.reader import read_tosa

    (x,) = read_tosa(str(tosa)).main.inputs
    np.save(tmp_path / "x.npy", np.zeros(x.type.shape, numpy_dtype(storage_type(x.type.element))))
    modules = loaded_modules("run", "m.tosa", "-i", "x.npy", *options, cwd=tmp_path)
    assert set((tmp_path / directory).glob("*.npy")) - {tmp_path / "x.npy"}
    for heavy in ("typer", "click", "tensorflow", "ai_edge_litert") + PATHLIB_AND_ITS_IMPORTS:
        assert heavy not in modules["top"]
    # The reader takes field slots from flatc's builder functions, and the reference
    # model's records are plain classes.
    assert "reference_model.kernels.tensor_ops" in modules["all"]
    for unused in ("dataclasses", "inspect", "flatbuffers"):
        assert unused not in modules["top"]
    assert "tfl2tosa.tosa.fbs.tosa_generated" not in modules["all"]
    assert "tfl2tosa.tosa.ops" in modules["all"]
    for unused in ("tfl2tosa.tosa.verify", "tfl2tosa.tosa.verify.op_check", "tfl2tosa.ir.printer"):
        assert unused not in modules["all"]


def test_a_usage_error_still_goes_to_typer(tmp_path):
    model = ROOT / "models/arch/mobilenet_tiny_int8.tflite"
    modules = loaded_modules("convert", str(model), "--no-such-option")
    assert "typer" in modules["top"]


def test_a_tosa_convert_loads_neither_the_mlir_printer_nor_the_fbs_readers(tmp_path):
    model = ROOT / "models/arch/mobilenet_tiny_int8.tflite"
    modules = loaded_modules("convert", str(model), "-o", str(tmp_path / "m.tosa"))
    assert (tmp_path / "m.tosa").stat().st_size > 0
    assert "tfl2tosa.tosa.writer" in modules["all"]
    assert "tfl2tosa.quant.ops" in modules["all"]  # registers its printer
    # The op table loads from its generated data, not by running its definitions.
    assert "tfl2tosa.tosa.op_table" in modules["all"]
    for unused in ("tfl2tosa.tosa.mlir", "tfl2tosa.tosa.fbs.tosa_generated",
                   "tfl2tosa.ir.printer", "tfl2tosa.tosa.op_definitions"):
        assert unused not in modules["all"]
    assert "flatbuffers" not in modules["top"]
