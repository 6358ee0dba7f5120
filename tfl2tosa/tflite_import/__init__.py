"""Read a `.tflite` flatbuffer into a Module of `tfl` ops.

`load(source)` takes a path (memory-mapped), bytes or a memoryview and
returns a Module; anything wrong with the input raises ModelError with one
line naming the problem.

Conventions (legalization patterns rely on these):

- Graphs: subgraph 0 is `main`; others keep their name when it is unique and
  an identifier, else `subgraph_<i>`. `graph.attrs["tensor_index"]` maps value
  name -> TFLite tensor index; `graph.attrs["shape_signatures"]` (only where it
  differs from `shape`) maps value name -> shape_signature, -1 for dynamic
  dims. Types use `shape` (what the interpreter allocates); an empty shape is
  a scalar.
- Ops: `tfl.<lowercase builtin name>` (`tfl.conv_2d`, `tfl.while`,
  `tfl.stablehlo_add`), `loc` = `"<graph>:op<i>:<BUILTIN_NAME>"`, results named
  after their TFLite tensors (uniquified with `_1`, `_2`, ...). Operands are
  in TFLite order; an omitted optional operand (index -1) is the result of
  the graph's one `tfl.no_value` op (type `none`).
- Attributes: the fields of builtin_options / builtin_options_2, snake_case as
  in schema.fbs; enum fields as schema names (`padding="SAME"`,
  `fused_activation_function="RELU6"`, `quantized_bias_type="FLOAT32"`,
  unknown enum values as `"UNKNOWN_<n>"`); numeric vectors as tuples, ubyte
  vectors as bytes, strings as str. `<x>_subgraph_index` fields stay and gain
  `<x>` = graph name (`cond`, `body`, `comparator`, ...), except IF's
  `then_branch` / `else_branch` and CALL_ONCE's `session_init_function` (MLIR's
  names); CALL's `subgraph` gains `callee`. LSTM-style `intermediates` become
  attr `intermediates` (list of TensorType).
- `tfl.custom`: attrs `custom_code` (str), `custom_version` (int, the operator
  code's version), `custom_options` (bytes).
- `tfl.unknown` (a builtin code newer than the `tflite` package, or the
  schema's placeholder 127): attrs `builtin_code` (int), `op_name`
  (`"BUILTIN_209"`, or the schema name where known).
- Constants: `tfl.pseudo_const` with attr `value`, a read-only numpy view into
  the model (never a copy), dtype = storage type, shape = tensor shape; the
  result type carries any quantization. Special cases:
  int4 -> `value` is the packed uint8 bytes (two values a byte, low nibble
  first), attr `packed_int4=True`; sparse -> `value` is the 1-D array of
  stored values, attr `sparsity` = {traversal_order, block_map, dim_metadata:
  [{format: "DENSE"|"SPARSE_CSR", dense_size, array_segments, array_indices}]};
  string -> object array of bytes; resource/variant -> raw uint8 bytes with
  `opaque_bytes=True`. A tensor with no data but zero elements is an empty
  constant.
- Variables (TFLite `is_variable` tensors, the state of LSTM/RNN/SVDF ops):
  `tfl.variable`, no operands, result typed as the tensor, attr `fill_value`
  (int): TFLite zero-fills them, int8 ones with their zero point.
- Quantization: one scale -> UniformQuantized(storage, f32, scale, zp) even
  when quantized_dimension is set; more -> UniformQuantizedPerAxis along
  quantized_dimension. Storage bounds are the full range (TFLite records no
  narrow range). Only integer tensors with scales are quantized.
- Module attrs: `schema_version`, `description`, `source` (path, if any),
  `metadata` (name -> read-only uint8 view), `signature_defs` (list of
  {signature_key, subgraph, subgraph_index, inputs: {alias: value name},
  outputs: {alias: value name}}).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tfl2tosa.ir.core import Module


class _LazyTflitePackage(types.ModuleType):
    """The `tflite` package, loading each generated module on first use.

    The package's `__init__` imports every one of its generated modules (one per
    schema table or enum) at every start of the command line, and a model needs
    a few of them. Every public name `X` of the package is the class `X`
    of module `tflite.X`, so `tflite.X` imports just that module. Any other
    name (the builder functions `XStart`, `XAddY`, ...) runs the package's real
    `__init__` into this module once, so code that uses the whole package still
    finds everything.
    """

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            module = _import_generated(f"tflite.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"tflite.{name}":
                raise
            return self._whole_package(name)
        value = getattr(module, name)
        setattr(self, name, value)
        return value

    def _whole_package(self, name: str) -> Any:
        if not self.__dict__.get("_whole_package_loaded"):
            self._whole_package_loaded = True
            with _numpy_probe_answered():
                with open(self.__file__, "rb") as file:
                    code = compile(file.read(), self.__file__, "exec")
                exec(code, self.__dict__)
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module 'tflite' has no attribute {name!r}") from None


@contextmanager
def _numpy_probe_answered() -> Iterator[None]:
    """Answer flatbuffers' numpy probe directly while generated modules load.

    Each generated module calls `flatbuffers.compat.import_numpy()`, which
    searches sys.path for numpy anew. numpy is a dependency (the IR has
    imported it already), so the probe returns it; it is restored afterwards.
    """
    import numpy
    from flatbuffers import compat

    probe = compat.import_numpy
    compat.import_numpy = lambda: numpy
    try:
        yield
    finally:
        compat.import_numpy = probe


def load_whole_schema() -> None:
    """Load every generated module now (a batch worker, before it forks per model).
    A `tflite` package imported before this module is whole already."""
    package = tflite_package()
    if isinstance(package, _LazyTflitePackage):
        package._whole_package("__version__")


def _import_generated(name: str) -> types.ModuleType:
    with _numpy_probe_answered():
        return importlib.import_module(name)


def tflite_package() -> types.ModuleType:
    """The `tflite` package, lazy unless it was imported whole before: the importer
    reads models by `schema_data`, and only sparse tensors use generated classes."""
    if "tflite" not in sys.modules:
        _install_lazy_tflite()
    return sys.modules["tflite"]


def _install_lazy_tflite() -> None:
    spec = importlib.util.find_spec("tflite")
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError("the `tflite` package is not installed")
    package = _LazyTflitePackage("tflite")
    package.__file__ = spec.origin
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    package.__package__ = "tflite"
    sys.modules["tflite"] = package


from tfl2tosa.tflite_import.importer import import_model
from tfl2tosa.tflite_import.source import Source, check_identifier, open_source

__all__ = ["load"]


def load(source: Source) -> Module:
    """Import a TFLite model from a path, bytes or a memoryview."""
    buf, path = open_source(source)
    origin = path if path is not None else f"<{len(buf)}-byte model>"
    check_identifier(buf, origin)
    return import_model(buf, origin, path)
