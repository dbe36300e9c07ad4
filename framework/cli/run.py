"""deltamark run JOB ..."""

import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from framework.cli._common import library_errors, options
from framework.common import humanize
from framework.config import Settings
from framework.errors import RunStopped
from framework.ops import admin
from framework.run import slots
from framework.sources import files

if TYPE_CHECKING:
    from framework.run.runner import RunReport

SHOWN_FILES = 20


def run(
    ctx: typer.Context,
    job: Annotated[str | None, typer.Argument(
        help="The job (conf/jobs/JOB.yaml); with --script, its name (default: the "
             "JOB_NAME arg).")] = None,
    script: Annotated[Path | None, typer.Option(
        help="Run this AWS Glue script (imports from framework.glue) as the job.")] = None,
    bookmark: Annotated[str | None, typer.Option(
        help="enable | disable | pause (Glue's job-bookmark-* names work too) "
             "(default: the job's conf, else enable).")] = None,
    bookmark_from: Annotated[str | None, typer.Option(
        help="pause: skip what this run had already processed.")] = None,
    bookmark_to: Annotated[str | None, typer.Option(
        help="pause: read up to what this run had processed.")] = None,
    arg: Annotated[list[str] | None, typer.Option(
        help="KEY=VALUE overriding a job param; repeat for several.")] = None,
    run_property: Annotated[list[str] | None, typer.Option(
        help="KEY=VALUE run property (ctx.run_properties); repeat for several.")] = None,
    workflow: Annotated[str | None, typer.Option(
        help="The workflow this run is part of (set by deltamark workflow run).")] = None,
    workflow_run_id: Annotated[str | None, typer.Option(
        help="The workflow run this run is part of.")] = None,
    dry_run: Annotated[bool, typer.Option(
        help="Plan and show what would be read; write and record nothing.")] = False,
    force: Annotated[bool, typer.Option(
        help="Run even when nothing is new (by default such a run is recorded as skipped "
             "without starting Spark).")] = False,
    until_caught_up: Annotated[bool, typer.Option(
        help="Run again, in this process, while a run leaves a backlog (bounded_files, "
             "bounded_size: what a capped run left).")] = False,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the report as JSON (with --until-caught-up, an array).")
    ] = False,
) -> None:
    """Run JOB once: read what its bookmarks have not seen, write, commit the bookmarks.

    When a deltamark server runs for this directory (deltamark server start), the run is
    a process it forks, with this one's arguments, environment and terminal.
    """
    args = dict(key_value(a) for a in arg or [])
    job = job or args.get("JOB_NAME") or (script.stem if script else None)
    if job is None:
        raise typer.BadParameter("name the job (or give --script)", param_hint="JOB")
    logging.getLogger("deltamark").setLevel(logging.INFO)
    cli = options(ctx)
    with library_errors(ctx, as_json=as_json):
        settings = cli.settings()
        if cli.argv is not None and (code := _on_server(settings, cli.argv)) is not None:
            raise typer.Exit(code)
        from framework.cli.progress import run_progress
        from framework.run.plan import WorkflowRun
        from framework.run.runner import run_job  # Spark and the job's code: only here

        properties = dict(key_value(p, "--run-property") for p in run_property or [])
        spec = None
        if script is not None:
            from framework.glue.script import script_job

            spec = script_job(script, job, args, catalog=settings.catalog)
        previous = signal.signal(signal.SIGTERM, _stop_run)
        try:
            # with --json, stdout is the report alone: what the job prints goes to stderr
            with run_progress(terminal=sys.stderr.isatty() and not as_json), \
                    contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
                reports: list[RunReport] = []
                while not reports or (until_caught_up and _behind(reports[-1])):
                    reports.append(run_job(
                        settings, job, bookmark=bookmark, bookmark_from=bookmark_from,
                        bookmark_to=bookmark_to, args=args, dry_run=dry_run, force=force,
                        spec=spec, workflow=WorkflowRun(workflow, workflow_run_id, properties)))
                    if not as_json:
                        typer.echo(_text(reports[-1]))
        finally:
            signal.signal(signal.SIGTERM, previous)
    if as_json:
        found = [asdict(r) for r in reports]
        typer.echo(json.dumps(found if until_caught_up else found[0], default=str))


def _behind(report: "RunReport") -> bool:
    """Whether a run succeeded and left a backlog (a capped read's rest)."""
    return report.status == "succeeded" and not report.dry_run and any(
        counts.get("backlog") for counts in report.inputs.values())


def _on_server(settings: Settings, argv: tuple[str, ...]) -> int | None:
    """Run this command on the kept server for ``settings``, if one runs: its exit code
    (128 + N for signal N). Signals this process gets are passed on to it."""
    from framework.server import find_server

    if (server := find_server(settings)) is None:
        return None
    slots.give_back()  # the server's process runs the command
    process = server.run(argv, env=os.environ, cwd=os.getcwd(), stdin=0, stdout=1, stderr=2)
    forwarded = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, lambda signum, _: process.send_signal(signum))
                for sig in forwarded}
    try:
        code = process.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code if code >= 0 else 128 - code


def _stop_run(signum: int, _frame: object) -> None:
    """SIGTERM: end the run as failed ("stopped by SIGTERM"), recorded, not cut short."""
    raise RunStopped(signum)


def key_value(text: str, option: str = "--arg") -> tuple[str, str]:
    """``KEY=VALUE`` from the command line (a usage error otherwise)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise typer.BadParameter(f"'{text}' is not KEY=VALUE", param_hint=option)
    return key, value


def _listed(paths: Sequence[str]) -> list[str]:
    shown = [f"        {p}" for p in paths[:SHOWN_FILES]]
    if len(paths) > SHOWN_FILES:
        shown.append(f"        ... and {len(paths) - SHOWN_FILES} more")
    return shown


def _text(report: "RunReport") -> str:
    if report.status == "skipped":
        return (f"{report.job}: {'dry run: would skip' if report.dry_run else 'skipped'} run "
                f"{report.run_seq} in {report.seconds:.2f} s, without starting Spark: "
                f"{report.preflight} since run {report.run_seq - 1} (--force runs anyway)")
    if report.dry_run:
        lines = [f"{report.job}: dry run as run {report.run_seq} (bookmark {report.mode}); "
                 "nothing was written or recorded"]
    else:
        lines = [f"{report.job}: run {report.run_seq} {report.status} in "
                 f"{report.seconds:.1f} s (run_id {report.run_id}, attempt {report.attempt}, "
                 f"bookmark {report.mode})"]
    if report.recovered:
        r = report.recovered
        lines.insert(0, f"{report.job}: first recovered the interrupted run {r.run_seq} "
                        f"({r.run_id}): {r.action.replace('_', ' ')}")
    for context, counts in report.inputs.items():
        lines.append(f"  read  {context}: {humanize.read(counts)}")
        if changes := report.schema_changes.get(context):
            lines.append(f"  schema {context}: {'; '.join(changes)}")
        if report.dry_run:
            lines += _listed(report.planned_files.get(context, []))
        for outcome, why in files.NOT_READ.items():
            if paths := [p for p, o in report.set_aside.get(context, []) if o == outcome]:
                lines.append(f"  not read, {why}: {len(paths)} files")
                lines += _listed(paths)
    for target, result in report.outputs.items():
        written = admin.describe_write(target, result, dry_run=report.dry_run)
        lines.append(f"  wrote {target}: {written}")
    return "\n".join(lines)
