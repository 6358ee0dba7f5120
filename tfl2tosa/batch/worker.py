"""The worker process: runs jobs one model at a time, isolated from the batch.

Workers are started with the `spawn` method (a fresh interpreter: no state,
threads or locks inherited from the parent). A worker first imports what the
job needs (the converter, TensorFlow for validation) and tells the parent it
is ready; the parent's per-model deadline starts only then. After that the
worker is a warm template that never runs a model itself: each model runs in
a fork of it, so imports are paid once per worker while no model sees
another's memory growth or global state. The worker waits for the fork and,
if it died without a result, dies the same way (same signal or exit code),
so the parent diagnoses it as before. A worker that crashes, hangs or runs
out of memory is replaced; the model it was on is reported with that status
by the parent (see pool.py). A worker is the leader of its own process group,
so killing the group on a timeout takes the fork with it.

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
import importlib
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

# The worker's first message: its imports are done, models' deadlines may start.
READY = "ready"


def worker_main(conn: Connection, log_path: str, memory_limit: int | None,
                warm_up: tuple[str, ...] = ()) -> None:
    """Entry point of a spawned worker: import `warm_up`, then serve tasks, each
    in a fork, until told to stop."""
    os.setpgrp()
    log = open(log_path, "ab", buffering=0)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    faulthandler.enable(file=log)
    if memory_limit is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    import_for_jobs(warm_up)
    conn.send(READY)
    while True:
        try:
            task: Task | None = conn.recv()
        except EOFError:  # the parent is gone
            return
        if task is None:
            return
        pid = os.fork()
        if pid == 0:
            _serve_in_fork(conn, task)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            _die_like(status)


def import_for_jobs(modules: tuple[str, ...]) -> None:
    """Import what every job will need, so that forks find it loaded. An entry
    "a|b" imports the first of a, b that exists; "a:f" imports a and calls its
    f() (a module's own way of loading what it would load on demand). A module
    that fails to import is left to fail in the job, where it is reported."""
    # Quiet TensorFlow's C++ logging before it loads, as validation does.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for entry in modules:
        for name in entry.split("|"):
            try:
                module_name, _, function = name.partition(":")
                module = importlib.import_module(module_name)
                if function:
                    getattr(module, function)()
                break
            except Exception as exc:
                print(f"warm-up: cannot import {name}: {first_line(exc)}", flush=True)


def _serve_in_fork(conn: Connection, task: Task) -> None:
    """Run one task in the fork and exit it; never returns."""
    code = 1
    try:
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
        code = 0
    except SystemExit as exc:  # a job calling sys.exit: the worker exits with its code
        # (0 is kept for "result sent", so the worker goes on only then)
        code = exc.code if isinstance(exc.code, int) and exc.code != 0 else 1
    finally:
        sys.stdout.flush()
        os._exit(code)


def _die_like(status: int) -> None:
    """End the worker as its fork ended (a signal or an exit code without a result)."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        faulthandler.disable()  # the fork's dump is in the log already
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


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
