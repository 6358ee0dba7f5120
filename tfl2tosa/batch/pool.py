"""Run jobs on a set of worker processes, surviving whatever a model does to them.

The parent keeps up to `jobs` workers busy. It waits on each busy worker's
pipe (a result) and process sentinel (death) with a deadline (`timeout`):

- a result arrives: the model is done, the worker takes the next model
  (unless the job ran out of memory: that worker exits and is replaced);
- the worker dies first: status crash (a signal or an exit code), or oom when
  SIGKILL came from outside (the kernel's OOM killer);
- the deadline passes: the worker is killed, status timeout. The deadline runs
  from the moment the worker can start the model: a fresh worker's start-up
  and imports (TensorFlow's above all) are not the model's time; a worker
  that is not ready within STARTUP_LIMIT is killed, and its model reported
  as timed out with that reason.

Each worker writes its output to a log file; the log written during a model
that crashed, hung or ran out of memory is attached to its result.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from tfl2tosa.batch.job import Job, JobOptions
from tfl2tosa.batch.worker import READY, worker_main

LOG_TAIL_CHARACTERS = 4000
# How long a fresh worker may take to import the converter and TensorFlow
# before it is presumed stuck (a loaded machine can take tens of seconds).
STARTUP_LIMIT = 300.0


@dataclass
class Task:
    id: int
    path: str
    options: JobOptions


class _Worker:
    """One worker process, the pipe to it, and the task it is on."""

    def __init__(self, context: Any, log_path: Path, memory_limit: int | None,
                 warm_up: tuple[str, ...]) -> None:
        self.conn, child_conn = context.Pipe()
        self.log_path = log_path
        self.process = context.Process(target=worker_main,
                                       args=(child_conn, str(log_path), memory_limit, warm_up),
                                       daemon=True)
        self.process.start()
        child_conn.close()
        self.ready = False
        self.task: Task | None = None
        self.timeout: float | None = None
        self.deadline = time.monotonic() + STARTUP_LIMIT
        self.log_offset = 0
        self.started = time.monotonic()

    def assign(self, task: Task, job: Job, timeout: float | None) -> None:
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.task = task
        self.timeout = timeout
        if self.ready:
            self._start_clock()
        self.conn.send((task.id, task.path, task.options, job))

    def became_ready(self) -> None:
        self.ready = True
        if self.task is not None:
            self._start_clock()

    def _start_clock(self) -> None:
        self.started = time.monotonic()
        self.deadline = self.started + self.timeout if self.timeout else float("inf")

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return text[-LOG_TAIL_CHARACTERS:]

    def kill(self) -> None:
        if self.process.is_alive():
            try:  # the worker's group: the worker and the fork running a model
                os.killpg(self.process.pid, signal.SIGKILL)
            except OSError:  # not yet its own group leader: no fork exists yet
                self.process.kill()
        self.process.join()
        self.conn.close()

    def ask_to_stop(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass

    def stop(self) -> None:
        self.process.join(timeout=5)
        self.kill()


def run_tasks(tasks: list[Task], job: Job, *, jobs: int, timeout: float | None,
              memory_limit: int | None, log_dir: Path, warm_up: tuple[str, ...] = (),
              on_start: Callable[[Task], None] = lambda task: None,
              on_finish: Callable[[Task, dict[str, Any]], None] = lambda task, result: None
              ) -> None:
    """Run every task; call on_finish exactly once per task, whatever happened."""
    context = multiprocessing.get_context("spawn")
    pending = deque(tasks)
    workers: list[_Worker | None] = [None] * max(1, min(jobs, len(tasks)))
    spawned = 0

    def finish(slot: int, result: dict[str, Any]) -> None:
        worker = workers[slot]
        task = worker.task
        result.setdefault("duration_s", time.monotonic() - worker.started)
        worker.task = None
        on_finish(task, result)

    def retire(slot: int, result: dict[str, Any]) -> None:
        worker = workers[slot]
        worker.kill()
        result["log_tail"] = worker.log_tail()
        finish(slot, result)
        workers[slot] = None

    try:
        while pending or any(w is not None and w.task is not None for w in workers):
            for slot, worker in enumerate(workers):
                if pending and (worker is None or worker.task is None):
                    if worker is None:
                        spawned += 1
                        worker = workers[slot] = _Worker(
                            context, log_dir / f"worker-{spawned}.log", memory_limit, warm_up)
                    task = pending.popleft()
                    worker.assign(task, job, timeout)
                    on_start(task)
            busy = {slot: w for slot, w in enumerate(workers) if w is not None and w.task}
            now = time.monotonic()
            next_deadline = min(w.deadline for w in busy.values())
            ready = wait([w.conn for w in busy.values()] + [w.process.sentinel
                                                           for w in busy.values()],
                         timeout=None if next_deadline == float("inf")
                         else max(0.0, next_deadline - now))
            for slot, worker in busy.items():
                if worker.conn in ready or worker.process.sentinel in ready:
                    _collect(slot, worker, finish, retire)
                elif time.monotonic() >= worker.deadline:
                    retire(slot, {"status": "timeout", "error": (
                        f"no result after {timeout:g} s: worker killed" if worker.ready else
                        f"the worker did not start within {STARTUP_LIMIT:g} s: killed")})
    finally:
        # Idle workers exit on request (all asked first, so they shut down together);
        # a worker still on a task (an exception or ^C in the parent) is killed.
        live = [w for w in workers if w is not None]
        for worker in live:
            if worker.task is None:
                worker.ask_to_stop()
        for worker in live:
            if worker.task is None:
                worker.stop()
            else:
                worker.kill()


def _collect(slot: int, worker: _Worker, finish: Callable, retire: Callable) -> None:
    """A worker's pipe or sentinel is ready: take its result, or diagnose its death."""
    try:
        if worker.conn.poll():
            message = worker.conn.recv()
            if message == READY:
                worker.became_ready()
                return
            _, result = message  # one task at a time: it is this worker's
            if result["status"] == "oom":
                retire(slot, result)  # the worker exits after a MemoryError
            else:
                finish(slot, result)
            return
    except (EOFError, OSError):
        pass
    worker.process.join(timeout=5)
    retire(slot, _death_result(worker.process.exitcode))


def _death_result(exitcode: int | None) -> dict[str, Any]:
    if exitcode is not None and exitcode < 0:
        number = -exitcode
        name = signal.Signals(number).name if number in signal.valid_signals() else str(number)
        if number == signal.SIGKILL:
            # We only SIGKILL on a timeout, handled elsewhere; from outside it is
            # almost always the kernel's OOM killer.
            return {"status": "oom", "error": "the worker was killed by SIGKILL "
                                              "(out of memory: the kernel's OOM killer?)"}
        return {"status": "crash", "error": f"the worker died with {name}"}
    return {"status": "crash", "error": f"the worker exited with code {exitcode} "
                                        f"before returning a result"}

