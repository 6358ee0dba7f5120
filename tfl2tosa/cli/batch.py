"""`tfl2tosa batch INPUTS... --out DIR` and `tfl2tosa report merge`.

Only the command-line surface lives here; the batch machinery and its rich
display are imported when a command runs, so other commands start fast.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import typer

from tfl2tosa.cli.typer_app import HYBRID_HELP, app, fail

report_app = typer.Typer(help="Work with batch reports.", no_args_is_help=True)
app.add_typer(report_app, name="report")

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int | None:
    """"8G", "512M", "1.5GiB", "123456" (bytes) -> bytes; "0" or "none" -> no limit."""
    if text.strip().lower() in ("0", "none", "off", "unlimited"):
        return None
    match = _SIZE.match(text)
    if not match:
        raise typer.BadParameter(f"{text!r}: expected a size such as 8G, 512M or none")
    number, unit = float(match[1]), match[2].lower()
    return int(number * 1024 ** " kmgt".index(unit or " "))


BATCH_EXAMPLES = """

Examples:

  tfl2tosa batch models/ -o results/

  tfl2tosa batch 'zoo/**/*.tflite' -o results/ --jobs 4 --baseline last/report.json

  tfl2tosa batch models/ -o results/ --shard 2/4 --resume
"""


@app.command("batch", help="Convert and validate many models, each in an isolated worker; "
                           "write reports (report.json, report.xml, report.md, report.html)."
                           "\n\nExit code: 0 every model passed (with --baseline: nothing "
                           "regressed); 1 a model failed or regressed, or an input could not "
                           "be read; 2 a usage error." + BATCH_EXAMPLES)
def batch_command(
    inputs: list[str] = typer.Argument(..., metavar="INPUT",
                                       help="Model files, directories (searched "
                                       "recursively), globs, or Kaggle handles "
                                       "kaggle:OWNER/MODEL/tfLite/VARIATION(/VERSION)."),
    out: Path = typer.Option(None, "-o", "--output", help="Output directory (.tosa files, "
                             "per-model and batch reports); required."),
    out_alias: Path = typer.Option(None, "--out", hidden=True),
    jobs: int = typer.Option(os.cpu_count() or 1, "--jobs", "-j", min=1,
                             help="Models converted in parallel."),
    timeout: float = typer.Option(300.0, "--timeout", min=0,
                                  help="Seconds per model before its worker is killed "
                                       "(0: no limit)."),
    memory_limit: str = typer.Option("8G", "--memory-limit",
                                     help="Address-space cap per worker (RLIMIT_AS), e.g. 4G; "
                                          "none for no cap."),
    no_validate: bool = typer.Option(False, "--no-validate",
                                     help="Convert only; do not compare with TFLite."),
    no_fallback: bool = typer.Option(False, "--no-fallback",
                                     help="Refuse quantized ops without an integer lowering."),
    disable: list[str] = typer.Option([], "--disable", help="Switch a pattern off (by label)."),
    hybrid: str = typer.Option("emulate", "--hybrid", help=HYBRID_HELP),
    kernels: str = typer.Option(None, "--kernels",
                                help="As convert's: which TFLite kernels integer ops reproduce "
                                     "(reference, optimized, litert-optimized). Default: the "
                                     "kernels TFLite validates each model on (reference with "
                                     "--no-validate), so each .tosa is the one judged."),
    runs: int = typer.Option(3, "--runs", min=1, help="Random inputs per validation."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random inputs."),
    input_range: list[str] = typer.Option(
        [], "--input-range",
        help="As validate's, for every model: draw inputs from a real-valued range "
             "[NAME|INDEX=]LOW:HIGH (no name: every input)."),
    baseline: Path = typer.Option(None, "--baseline", help="A previous report.json: fail "
                                  "only on regressions against it."),
    shard: str = typer.Option(None, "--shard", help="K/N: process only the K-th of N "
                              "slices of the sorted model list."),
    resume: bool = typer.Option(False, "--resume", help="Skip models whose report in DIR is "
                                "complete and whose input is unchanged."),
    root: Path = typer.Option(None, "--root", help="Model ids (and output paths) are "
                              "relative to this directory (default: the working directory)."),
    json_path: Path = typer.Option(None, "--json", help="Batch report (default DIR/report.json)."),
    junit_path: Path = typer.Option(None, "--junit", help="JUnit XML (default DIR/report.xml)."),
    markdown_path: Path = typer.Option(None, "--markdown",
                                       help="Markdown summary (default DIR/report.md)."),
    html_path: Path = typer.Option(None, "--html",
                                   help="HTML page: status, error distribution, regressions "
                                        "(default DIR/report.html when the [html] extra is "
                                        "installed)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    from tfl2tosa.batch import BatchOptions, UsageError, parse_shard, run_batch
    from tfl2tosa.batch.console import ProgressDisplay, print_summary, summary_console

    if out is not None and out_alias is not None and out != out_alias:
        raise fail("give the output directory once: -o/--output (--out is its old spelling)", 2)
    out = out if out is not None else out_alias
    if out is None:
        raise fail("give the output directory: -o/--output DIR", 2)
    if html_path is not None:
        from tfl2tosa.html import require_matplotlib

        require_matplotlib()
    try:
        options = BatchOptions(
            inputs=list(inputs), out_dir=str(out), jobs=jobs, timeout=timeout or None,
            memory_limit=parse_size(memory_limit), validate=not no_validate,
            fallback=not no_fallback, disabled=tuple(disable), runs=runs, seed=seed,
            input_ranges=tuple(input_range), hybrid=hybrid, kernels=kernels,
            shard=parse_shard(shard) if shard else None, resume=resume,
            baseline=str(baseline) if baseline else None, root=str(root) if root else None,
            json_path=str(json_path) if json_path else None,
            junit_path=str(junit_path) if junit_path else None,
            markdown_path=str(markdown_path) if markdown_path else None,
            html_path=str(html_path) if html_path else None)
        with ProgressDisplay(enabled=progress) as display:
            result = run_batch(options, listener=display)
    except UsageError as exc:
        raise fail(str(exc), 2) from None
    console = summary_console()
    print_summary(console, result.report)
    for form, path in result.written.items():
        console.print(f"{form} report: {path}")
    if "html" not in result.written:
        console.print("no report.html: it needs matplotlib (pip install 'tfl2tosa[html]')")
    if result.interrupted:
        not_run = len(result.report["interrupted"]["not_run"])
        typer.echo(f"interrupted: the report holds the {len(result.report['models'])} "
                   f"model(s) that finished; {not_run} did not run", err=True)
        raise typer.Exit(130)
    raise typer.Exit(result.exit_code)


@report_app.command("merge", help="Merge shard reports into one.\n\nExit code as for "
                                  "`batch`; 2 for reports that cannot be merged (e.g. of "
                                  "different schema versions).\n\nExamples:\n\n"
                                  "  tfl2tosa report merge shard*/report.json -o report.json "
                                  "--junit report.xml")
def merge_command(
    reports: list[Path] = typer.Argument(..., metavar="REPORT",
                                         help="Shard reports (report.json of each)."),
    output: Path = typer.Option(None, "-o", "--output", help="Merged JSON report."),
    junit_path: Path = typer.Option(None, "--junit", help="Also write JUnit XML here."),
    markdown_path: Path = typer.Option(None, "--markdown", help="Also write Markdown here."),
    html_path: Path = typer.Option(None, "--html",
                                   help="Also write the HTML page here (the [html] extra)."),
    baseline: Path = typer.Option(None, "--baseline",
                                  help="Compare the merged whole with this report."),
) -> None:
    from tfl2tosa.batch import ReportError, load_report, merge_reports, write_reports
    from tfl2tosa.batch.console import print_summary, summary_console
    from tfl2tosa.batch.report import exit_code

    if output is None and junit_path is None and markdown_path is None and html_path is None:
        raise fail("nothing to write: give -o, --junit, --markdown or --html", 2)
    if html_path is not None:
        from tfl2tosa.html import require_matplotlib

        require_matplotlib()
    try:
        previous = load_report(baseline) if baseline is not None else None
        merged = merge_reports([str(p) for p in reports], baseline=previous,
                               baseline_source=str(baseline) if baseline else "")
    except ReportError as exc:
        raise fail(str(exc), 2) from None
    write_reports(merged, json_path=output, junit_path=junit_path, markdown_path=markdown_path,
                  html_path=html_path)
    console = summary_console()
    print_summary(console, merged)
    raise typer.Exit(exit_code(merged))
