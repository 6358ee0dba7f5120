"""`run_batch`: discover models, run them in isolated workers, write every report.

Output directory layout (DIR is --out; ids as in discover.py):

    DIR/<id without .tflite>.tosa          the converted model (only when it converted)
    DIR/<id without .tflite>.report.json   that model's record (schema: report.py)
    DIR/report.json                        the batch report
    DIR/report.xml                         JUnit XML, one testcase per model
    DIR/report.md                          Markdown summary (for $GITHUB_STEP_SUMMARY)

Per-model files end in `.tosa` or `.report.json`, so they never collide with
the batch files. Everything is written atomically (temp file + rename).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tfl2tosa.batch.discover import ModelInput, UsageError, discover, select_shard
from tfl2tosa.batch.job import Job, JobOptions, convert_and_validate, warm_up_modules
from tfl2tosa.batch.junit import to_junit
from tfl2tosa.batch.kaggle import Downloader, kagglehub_download
from tfl2tosa.batch.markdown import to_markdown
from tfl2tosa.batch.pool import Task, run_tasks
from tfl2tosa.batch.records import ABNORMAL_STATUSES, SCHEMA_VERSION, json_safe
from tfl2tosa.batch.report import ReportError, build_report, exit_code, load_report
from tfl2tosa.pipeline import write_atomically

# Looked up at call time (not bound as a default argument) so that tests can
# replace it for the worker processes too: the job travels to them by reference.
default_job: Job = convert_and_validate


@dataclass
class BatchOptions:
    inputs: list[str]
    out_dir: str
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    timeout: float | None = 300.0
    memory_limit: int | None = 8 << 30
    validate: bool = True
    fallback: bool = True
    disabled: tuple[str, ...] = ()
    runs: int = 3
    seed: int = 0
    input_ranges: tuple[str, ...] = ()   # validate's --input-range, for every model
    hybrid: str = "emulate"              # convert's --hybrid, for every model
    kernels: str | None = None           # convert's --kernels (JobOptions.kernels)
    shard: tuple[int, int] | None = None
    resume: bool = False
    baseline: str | None = None
    root: str | None = None
    json_path: str | None = None       # default DIR/report.json
    junit_path: str | None = None      # default DIR/report.xml
    markdown_path: str | None = None   # default DIR/report.md
    html_path: str | None = None       # default DIR/report.html, with the [html] extra

    def job_options(self, output: str | None) -> JobOptions:
        return JobOptions(output=output, validate=self.validate, fallback=self.fallback,
                          disabled=tuple(self.disabled), runs=self.runs, seed=self.seed,
                          input_ranges=tuple(self.input_ranges), hybrid=self.hybrid,
                          kernels=self.kernels)

    def limits(self) -> dict[str, Any]:
        return {"timeout_s": self.timeout, "memory_limit_bytes": self.memory_limit}

    def to_dict(self) -> dict[str, Any]:
        return {"inputs": list(self.inputs), "jobs": self.jobs, **self.limits(),
                **self.job_options(None).fingerprint(),
                "baseline": self.baseline, "resume": self.resume}


class Listener(Protocol):
    """What the command line shows while a batch runs (all optional to implement)."""

    def planned(self, total: int, resumed: int) -> None: ...
    def started(self, model: ModelInput) -> None: ...
    def finished(self, model: ModelInput, record: dict[str, Any]) -> None: ...


class _Silent:
    def planned(self, total: int, resumed: int) -> None:
        pass

    def started(self, model: ModelInput) -> None:
        pass

    def finished(self, model: ModelInput, record: dict[str, Any]) -> None:
        pass


@dataclass
class BatchResult:
    report: dict[str, Any]
    exit_code: int
    written: dict[str, str]       # "json" / "junit" / "markdown" -> path
    interrupted: bool = False     # Ctrl-C: the report holds the models that finished


def _check_input_ranges(texts: tuple[str, ...]) -> None:
    """Refuse a malformed --input-range before any worker starts (each job parses
    them again: workers get the texts, as the report records them)."""
    if not texts:
        return
    from tfl2tosa import errors
    from tfl2tosa.validation import parse_input_range

    for text in texts:
        try:
            parse_input_range(text)
        except errors.UsageError as exc:
            raise UsageError(str(exc)) from None


def run_batch(options: BatchOptions, *, job: Job | None = None,
              download: Downloader = kagglehub_download,
              listener: Listener | None = None) -> BatchResult:
    """Run the batch. Raises UsageError (exit code 2) for bad inputs or options."""
    listener = listener or _Silent()
    if options.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    _check_input_ranges(options.input_ranges)
    if options.kernels is not None:
        from tfl2tosa.kernels import KERNELS

        if options.kernels not in KERNELS:
            raise UsageError(f"--kernels {options.kernels!r}: one of {', '.join(KERNELS)}")
    baseline = _load_baseline(options.baseline)
    out = Path(options.out_dir)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; give a directory")
    discovery = discover(options.inputs, root=options.root, exclude=out, download=download)
    if not discovery.models and not discovery.errors:
        raise UsageError(f"no .tflite models found in {' '.join(options.inputs)}")
    models = discovery.models
    shard_index, shard_count = options.shard or (1, 1)
    if options.shard is not None:
        models = select_shard(models, shard_index, shard_count)
    out.mkdir(parents=True, exist_ok=True)

    records: dict[str, dict[str, Any]] = {}
    todo: list[tuple[ModelInput, str, int]] = []
    for model in models:
        digest, size = _sha256(model.path), os.path.getsize(model.path)
        _remove_temporaries(out, model)
        previous = _complete_record(out, model, digest, options) if options.resume else None
        if previous is not None:
            records[model.id] = {**previous, "resumed": True}
        else:
            _remove_outputs(out, model)
            todo.append((model, digest, size))
    listener.planned(len(models), len(records))
    interrupted = False
    try:
        _run(todo, options, job or default_job, out, records, listener)
    except KeyboardInterrupt:
        # The workers are gone (pool.py kills busy ones); every finished model has its
        # record: report those, and which models never ran.
        interrupted = True
        for model, _, _ in todo:
            if model.id not in records:
                _remove_temporaries(out, model)

    report = build_report(
        [records[m.id] for m in models if m.id in records],
        not_run=[m.id for m in models if m.id not in records] if interrupted else None,
        input_errors=[{"input": e.input, "error": e.error} for e in discovery.errors],
        options=options.to_dict(),
        shards=[{"index": shard_index, "count": shard_count, "models": len(models),
                 "discovered": len(discovery.models)}],
        baseline=baseline, baseline_source=options.baseline or "")
    written = write_reports(report, json_path=options.json_path or out / "report.json",
                            junit_path=options.junit_path or out / "report.xml",
                            markdown_path=options.markdown_path or out / "report.md",
                            html_path=options.html_path or _default_html(out))
    return BatchResult(report, exit_code(report), written, interrupted)


def _load_baseline(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        return load_report(path)
    except ReportError as exc:
        raise UsageError(f"--baseline {exc}") from None


def _run(todo: list[tuple[ModelInput, str, int]], options: BatchOptions, job: Job, out: Path,
         records: dict[str, dict[str, Any]], listener: Listener) -> None:
    by_task: dict[int, tuple[ModelInput, str, int]] = {}
    tasks: list[Task] = []
    for number, (model, digest, size) in enumerate(todo):
        target = out / model.tosa_name
        target.parent.mkdir(parents=True, exist_ok=True)
        tasks.append(Task(number, model.path, options.job_options(str(target))))
        by_task[number] = (model, digest, size)

    def on_finish(task: Task, result: dict[str, Any]) -> None:
        model, digest, size = by_task[task.id]
        if result["status"] in ABNORMAL_STATUSES:
            _remove_temporaries(out, model)
        record = make_record(model, digest, size, result, options, out)
        write_atomically(out / model.report_name,
                         json.dumps(json_safe(record), indent=2).encode())
        records[model.id] = record
        listener.finished(model, record)

    with tempfile.TemporaryDirectory(prefix="tfl2tosa-batch-logs-") as log_dir:
        run_tasks(tasks, job, jobs=options.jobs, timeout=options.timeout,
                  memory_limit=options.memory_limit, log_dir=Path(log_dir),
                  warm_up=warm_up_modules(job, options.validate),
                  on_start=lambda task: listener.started(by_task[task.id][0]),
                  on_finish=on_finish)


def make_record(model: ModelInput, digest: str, size: int, result: dict[str, Any],
                options: BatchOptions, out: Path) -> dict[str, Any]:
    """A model's record: what the job returned plus what the batch knows."""
    written = (out / model.tosa_name).is_file()
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "id": model.id,
        "path": model.path,
        "source": model.source,
        "sha256": digest,
        "size_bytes": size,
        "status": result["status"],
        "error": result.get("error"),
        "output": model.tosa_name if written else None,
        "conversion": result.get("conversion"),
        "validation": result.get("validation"),
        "duration_s": result.get("duration_s"),
        "max_rss_bytes": result.get("max_rss_bytes"),
        "options": options.job_options(None).fingerprint(),
        "limits": options.limits(),
        "resumed": False,
    }
    for extra in ("traceback", "log_tail"):
        if result.get(extra):
            record[extra] = result[extra]
    return record


def _complete_record(out: Path, model: ModelInput, digest: str,
                     options: BatchOptions) -> dict[str, Any] | None:
    """The record a previous run left for this model, if it still holds: same
    schema, same input bytes, same conversion options, its .tosa present when it
    says so, and (for timeout/oom) the same limits, which decided that outcome."""
    try:
        with open(out / model.report_name, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(record, dict) or record.get("schema_version") != SCHEMA_VERSION:
        return None
    if record.get("sha256") != digest or record.get("id") != model.id:
        return None
    if record.get("options") != options.job_options(None).fingerprint():
        return None
    if record.get("output") and not (out / record["output"]).is_file():
        return None
    if record.get("status") in ("timeout", "oom") and record.get("limits") != options.limits():
        return None
    return record


def _remove_outputs(out: Path, model: ModelInput) -> None:
    """A model about to run must not keep last run's outputs: a stale .tosa beside a
    new failure would contradict the report."""
    for name in (model.tosa_name, model.report_name):
        (out / name).unlink(missing_ok=True)


def _remove_temporaries(out: Path, model: ModelInput) -> None:
    """A killed worker or an interrupted batch may leave write_atomically's temp files
    (`.NAME.xxxx`) of the model's .tosa and of its report."""
    for name in (model.tosa_name, model.report_name):
        target = out / name
        if target.parent.is_dir():
            for leftover in target.parent.glob(f".{glob.escape(target.name)}.*"):
                leftover.unlink(missing_ok=True)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _default_html(out: Path) -> Path | None:
    """DIR/report.html when matplotlib (the [html] extra) is installed."""
    import importlib.util

    return out / "report.html" if importlib.util.find_spec("matplotlib") else None


def _html(report: dict[str, Any]) -> bytes:
    from tfl2tosa.html import batch_page

    return batch_page(report).encode()


def write_reports(report: dict[str, Any], *, json_path: str | os.PathLike | None,
                  junit_path: str | os.PathLike | None,
                  markdown_path: str | os.PathLike | None,
                  html_path: str | os.PathLike | None = None) -> dict[str, str]:
    """Write the batch report in each requested form; return what was written where."""
    written: dict[str, str] = {}
    forms: dict[str, tuple[Any, Callable[[dict[str, Any]], bytes]]] = {
        "json": (json_path, lambda r: json.dumps(r, indent=2).encode()),
        "junit": (junit_path, to_junit),
        "markdown": (markdown_path, lambda r: to_markdown(r).encode()),
        "html": (html_path, _html),
    }
    for form, (path, render) in forms.items():
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, render(report))
            written[form] = str(path)
    return written
