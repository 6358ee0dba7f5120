"""The worker process: runs jobs one model at a time, isolated from the batch.

Workers are started with the `spawn` method (a fresh interpreter: no state,
threads or locks inherited from the parent) and live on from model to model
so that TensorFlow is imported once per worker, not once per model. A worker
that crashes, hangs or runs out of memory is replaced; the model it was on is
reported with that status by the parent (see pool.py).

Inside the worker
- stdout and stderr (TensorFlow's logging, faulthandler's crash traceback)
  go to a log file, whose tail the parent attaches to a crashed model's record;
- the address space is capped with RLIMIT_AS (`--memory-limit`), so an
  allocation past the cap raises MemoryError (status oom) instead of taking
  the machine down.

TEST-ONLY HOOK: when the environment variable TFL2TOSA_TEST_CRASH_ON holds a
comma-separated list of file names, a worker given a model with one of those
names kills itself with SIGSEGV before running the job. The test suite uses it
to crash a worker the way a segfault in the TFLite interpreter would; nothing
else sets it. It is read per task, in the worker, from the environment the
batch was started with.
"""

from __future__ import annotations

import faulthandler
import os
import resource
import signal
import sys
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

from tfl2tosa.batch.job import Job, JobOptions
from tfl2tosa.batch.records import STATUSES, first_line

TEST_CRASH_VARIABLE = "TFL2TOSA_TEST_CRASH_ON"

# (task id, model path, options, job) from the parent; None asks the worker to exit.
Task = tuple[int, str, JobOptions, Job]


def worker_main(conn: Connection, log_path: str, memory_limit: int | None) -> None:
    """Entry point of a spawned worker: serve tasks until told to stop."""
    # Ctrl-C reaches the whole process group: the parent handles it (it kills busy
    # workers and writes the report of what finished), so a worker must not die of it
    # first and be recorded as a crash.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    log = open(log_path, "ab", buffering=0)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    faulthandler.enable(file=log)
    if memory_limit is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    while True:
        try:
            task: Task | None = conn.recv()
        except EOFError:  # the parent is gone
            return
        if task is None:
            return
        task_id, path, options, job = task
        print(f"--- {path}", flush=True)
        _crash_if_test_asks(path)
        result = run_job(job, path, options)
        try:
            conn.send((task_id, result))
        except MemoryError:
            conn.send((task_id, _oom_result()))
        except Exception as exc:  # an injected job returned something unpicklable
            conn.send((task_id, {"status": "error",
                                 "error": f"cannot return the result: {first_line(exc)}"}))
        if result["status"] == "oom":
            return  # after a MemoryError the heap may be in any state: start afresh


def run_job(job: Job, path: str, options: JobOptions) -> dict[str, Any]:
    """Run one job; any exception it lets out becomes the record's error."""
    start = time.perf_counter()
    try:
        result = dict(job(path, options))
        if result.get("status") not in STATUSES:
            result = {"status": "error",
                      "error": f"the job returned status {result.get('status')!r}"}
    except MemoryError:
        result = _oom_result()
    except Exception as exc:
        result = {"status": "error", "error": f"{type(exc).__name__}: {first_line(exc)}",
                  "traceback": traceback.format_exc()}
    result["duration_s"] = time.perf_counter() - start
    # ru_maxrss is in KiB on Linux (bytes on macOS); the peak of the worker so far.
    scale = 1 if sys.platform == "darwin" else 1024
    result["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    return result


def _oom_result() -> dict[str, Any]:
    return {"status": "oom", "error": "MemoryError: the model needs more than --memory-limit"}


def _crash_if_test_asks(path: str) -> None:
    names = os.environ.get(TEST_CRASH_VARIABLE, "")
    if os.path.basename(path) in {n.strip() for n in names.split(",") if n.strip()}:
        os.kill(os.getpid(), signal.SIGSEGV)
