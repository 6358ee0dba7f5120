"""Running a `.tosa` file on Arm's reference model (tosa-tools), the independent judge."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np


@dataclass
class Outcome:
    status: str                      # "valid" | "error" | "unpredictable"
    outputs: list[np.ndarray] = field(default_factory=list)
    message: str = ""


def silenced(fn: Callable[[], Any]) -> Any:
    """Run fn with file descriptors 1 and 2 on /dev/null: Arm's model logs from C++."""
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        return fn()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (null, *saved):
            os.close(fd)


def arm_input(array: np.ndarray) -> np.ndarray:
    # Arm's binding takes bf16 as its uint16 bit pattern and fp8 as uint8.
    if array.dtype == ml_dtypes.bfloat16:
        return array.view(np.uint16)
    if array.dtype in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2):
        return array.view(np.uint8)
    return array


def arm_output(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if array.dtype.kind == "V":  # bf16 / fp8 come back as raw bytes of the element size
        return array.view(dtype)
    return array.astype(dtype) if array.dtype != dtype else array


def run_arm(data: bytes, feeds: list[np.ndarray], dtypes: list[np.dtype]) -> Outcome:
    """Run serialized TOSA `data` on Arm's reference model; outputs cast to `dtypes`."""
    import tosa_reference_model

    status_enum = tosa_reference_model.GraphStatus
    try:
        outputs, status = silenced(
            lambda: tosa_reference_model.run(data, [arm_input(np.asarray(a)) for a in feeds]))
    except ValueError as exc:
        return Outcome("error", message=str(exc))
    if status == status_enum.TOSA_ERROR:
        return Outcome("error")
    if status == status_enum.TOSA_UNPREDICTABLE:
        return Outcome("unpredictable")
    return Outcome("valid", [arm_output(np.asarray(o), d) for o, d in zip(outputs, dtypes)])


def run_arm_in_fresh_process(data: bytes, feeds: list[np.ndarray],
                             dtypes: list[np.dtype]) -> Outcome:
    """`run_arm` in a new interpreter. Arm's model has crashed (SIGSEGV) its
    process on a graph with variables after other graphs ran in that process;
    in a test worker that ends the worker, and with it the test run. A crash
    here is an outcome ("crash", with the exit code) for the test to judge."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # no state of this process inherited
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_serve_one, args=(sender, data, feeds, dtypes))
    process.start()
    sender.close()  # the child's copy is then the only writer: its death is an EOF here
    try:
        outcome = receiver.recv()
    except EOFError:
        outcome = None
    process.join()
    receiver.close()
    if outcome is None:
        return Outcome("crash", message=f"Arm's model died (exit code {process.exitcode})")
    return outcome


def _serve_one(sender: Any, data: bytes, feeds: list[np.ndarray],
               dtypes: list[np.dtype]) -> None:
    sender.send(run_arm(data, feeds, dtypes))
    sender.close()
