"""Resource variables (tfl2tosa/passes/resource_variables.py) against the TFLite interpreter,
across invocations.

Models are written by the TFLite converter from `tf.Variable`s updated in a
`tf.function` (`experimental_enable_resource_variables`). Both sides are
driven here, because the state must carry over: the TFLite interpreter is
invoked several times in a row (its CALL_ONCE initializes the variables on the
first invocation only); our reference model and Arm's run the TOSA graph once
per invocation, each starting from the variables' values after the previous
run (written into the VARIABLE declarations' initial values, which is what a
persistent TOSA variable holds at the start of an invocation).
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from arm import run_arm_in_fresh_process

import tfl2tosa.tflite_import
from reference_model.evaluator import Evaluator
from tfl2tosa.pipeline import convert
from tfl2tosa.errors import ConversionError
from tfl2tosa.ir.core import Module
from tfl2tosa.passes.resource_variables import REASON_ATTR, lower_resource_variables
from tfl2tosa.tosa.writer import write_tosa
from tfl2tosa.validation import compare, float_tolerance

_GENERATOR = r'''
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf


class Affine(tf.Module):
    """Read, write, read again: the second read must see the write."""

    def __init__(self):
        self.v = tf.Variable(tf.constant([[1.0, 2.0, 3.0]]))

    @tf.function(input_signature=[tf.TensorSpec([1, 3], tf.float32)])
    def __call__(self, x):
        self.v.assign(self.v * 0.5 + x)
        return self.v + 1.0


class LoopAndTwoVariables(tf.Module):
    """One variable updated in a loop (the converter carries its handle through
    WHILE), another scaled by the input."""

    def __init__(self):
        self.total = tf.Variable(tf.zeros([1, 3]))
        self.scale = tf.Variable(tf.constant([0.5, -1.0, 2.0]))

    @tf.function(input_signature=[tf.TensorSpec([1, 3], tf.float32)])
    def __call__(self, x):
        for _ in tf.range(3):
            self.total.assign_add(x * 0.5)
        self.scale.assign(self.scale * x[0] + 0.25)
        return self.total - self.scale


class Counter(tf.Module):
    """An int32 variable, which TOSA variables cannot hold."""

    def __init__(self):
        self.n = tf.Variable(0)

    @tf.function(input_signature=[tf.TensorSpec([1, 3], tf.float32)])
    def __call__(self, x):
        self.n.assign_add(1)
        return x * tf.cast(self.n, tf.float32)


MODELS = {"affine": Affine, "loop_and_two_variables": LoopAndTwoVariables,
          "counter": Counter}

for name, cls in MODELS.items():
    module = cls()
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.__call__.get_concrete_function()], module)
    converter.experimental_enable_resource_variables = True
    with open(os.path.join(sys.argv[1], name + ".tflite"), "wb") as f:
        f.write(converter.convert())
'''
MODEL_NAMES = ("affine", "loop_and_two_variables", "counter")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """name -> path of each model above, written by the TFLite converter (in a
    subprocess: AutoGraph reads the functions' source from the script file)."""
    directory = tmp_path_factory.mktemp("stateful")
    script = directory / "generate.py"
    script.write_text(_GENERATOR)
    result = subprocess.run([sys.executable, str(script), str(directory)],
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return {name: directory / f"{name}.tflite" for name in MODEL_NAMES}


@pytest.fixture
def with_stateful_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """convert() with the pass run right after import (a second run of the pass,
    once convert calls it itself, changes nothing)."""
    load = tfl2tosa.tflite_import.load

    def load_and_lower(source):
        module = load(source)
        lower_resource_variables(module)
        return module

    monkeypatch.setattr(tfl2tosa.tflite_import, "load", load_and_lower)


def tflite_invocations(path: Path, feeds: list[np.ndarray]) -> list[np.ndarray]:
    """One interpreter, invoked once per feed: the variables carry over."""
    import tensorflow as tf

    warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
    interp = tf.lite.Interpreter(model_path=str(path))
    interp.allocate_tensors()
    (source,), (target,) = interp.get_input_details(), interp.get_output_details()
    outputs = []
    for x in feeds:
        interp.set_tensor(source["index"], x)
        interp.invoke()
        outputs.append(interp.get_tensor(target["index"]).copy())
    return outputs


def set_state(module: Module, state: dict[str, np.ndarray]) -> None:
    for op in module.main.ops:
        if op.name == "tosa.variable":
            op.attrs["initial_value"] = state[op.attrs["name"]]


def tosa_invocations(module: Module, feeds: list[np.ndarray], *, arm: bool = True
                     ) -> list[np.ndarray]:
    """Our reference model, one run per feed from the previous run's variables;
    with `arm`, Arm's reference model must agree on every run."""
    outputs = []
    for x in feeds:
        evaluator = Evaluator(module)
        (ours,) = evaluator.run([x]).values()
        if arm:
            (theirs,) = _arm_run(module, x, ours.dtype)
            assert np.array_equal(theirs, ours), (theirs, ours)
        outputs.append(ours)
        set_state(module, evaluator.variables)
    return outputs


def _arm_run(module: Module, x: np.ndarray, dtype: np.dtype) -> list[np.ndarray]:
    outcome = run_arm_in_fresh_process(write_tosa(module), [x], [dtype])
    assert outcome.status == "valid", outcome.message
    return outcome.outputs


FEEDS = [np.array([[1.0, 2.0, 3.0]], np.float32), np.array([[0.5, 0.25, -1.0]], np.float32),
         np.array([[-2.0, 0.0, 1.5]], np.float32)]


# Arm's reference model takes from seconds to minutes for a WHILE_LOOP whose body
# accesses variables (the same with tosa-opt's own serialization of the graph),
# so the loop model runs there only in the long test run.
ARM_EVERY_RUN = {"affine": True, "loop_and_two_variables": False}


@pytest.mark.parametrize("name", list(ARM_EVERY_RUN))
def test_state_carries_over_like_tflite(name: str, models, with_stateful_pass) -> None:
    module, report = convert(models[name])
    assert {o["path"] for o in report.outcomes} <= {"float"}
    assert any(op.name == "tosa.variable" for op in module.main.ops)
    family, bounds = float_tolerance({o["op_name"] for o in report.outcomes})
    expected = tflite_invocations(models[name], FEEDS)
    ours = tosa_invocations(module, FEEDS, arm=ARM_EVERY_RUN[name])
    for run, (want, got) in enumerate(zip(expected, ours)):
        result = compare(f"run {run}", want, got, lsb_tolerance=0, float_bounds=bounds,
                         family=family)
        assert result.within_tolerance, result


@pytest.mark.slow
def test_loop_model_agrees_with_arm(models, with_stateful_pass) -> None:
    module, _ = convert(models["loop_and_two_variables"])
    tosa_invocations(module, FEEDS[:1], arm=True)


def test_initial_values_come_from_the_init_graph(models) -> None:
    from tfl2tosa.tflite_import import load

    module = load(models["loop_and_two_variables"])
    graphs = set(module.graphs)
    names = lower_resource_variables(module)
    declared = {op.attrs["name"]: op for op in module.main.ops if op.name == "tosa.variable"}
    assert sorted(names) == sorted(declared)
    values = sorted(tuple(np.asarray(op.attrs["initial_value"]).reshape(-1).tolist())
                    for op in declared.values())
    assert values == [(0.0, 0.0, 0.0), (0.5, -1.0, 2.0)]
    # The initialization graph is gone with its CALL_ONCE; the loop graphs stay.
    assert len(module.graphs) == len(graphs) - 1
    remaining = {op.name for _, op in module.ops()}
    assert not remaining & {"tfl.call_once", "tfl.var_handle", "tfl.read_variable",
                            "tfl.assign_variable"}
    # Running the pass again changes nothing.
    assert lower_resource_variables(module) == []


def test_int32_variable_is_refused_with_reason(models, with_stateful_pass) -> None:
    with pytest.raises(ConversionError) as error:
        convert(models["counter"])
    message = str(error.value)
    assert "TOSA variables hold only int8, float16 or float32" in message
    assert "i32" in message
    assert {f.op_name for f in error.value.failures} >= {"tfl.read_variable",
                                                         "tfl.assign_variable"}


def test_refused_ops_carry_the_reason(models) -> None:
    from tfl2tosa.tflite_import import load

    module = load(models["counter"])
    lower_resource_variables(module)
    reasons = {op.attrs.get(REASON_ATTR) for _, op in module.ops()
               if op.name in ("tfl.read_variable", "tfl.assign_variable", "tfl.var_handle")}
    assert len(reasons) == 1 and "int8, float16 or float32" in reasons.pop()
