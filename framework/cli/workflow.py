"""deltamark workflow ..."""

import json
import os
import shlex
from collections.abc import Set
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from framework.cli._common import (
    SKIPPED_OPTION,
    Skipped,
    library_errors,
    options,
    plain,
    render,
    zoned,
)
from framework.cli.run import key_value
from framework.common import humanize
from framework.ops import admin
from state_tables.model import WorkflowNode

if TYPE_CHECKING:
    from framework.workflows import WorkflowReport, WorkflowRunSummary

app = typer.Typer(help="Workflows: jobs started by triggers on other jobs' outcomes.",
                  no_args_is_help=True)


@app.command("run")
def run(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The workflow (conf/workflows/NAME.yaml).")],
    arg: Annotated[list[str] | None, typer.Option(
        help="KEY=VALUE run property, given to every job; repeat for several.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Run NAME's jobs as its triggers say; exit 1 if a job failed or timed out."""
    from framework.workflows import run_workflow

    with library_errors(ctx):
        report = run_workflow(options(ctx).settings(), name,
                              args=dict(key_value(a) for a in arg or []))
        _show(ctx, report, as_json=as_json)


@app.command("resume")
def resume(
    ctx: typer.Context,
    workflow_run_id: Annotated[str, typer.Argument(help="The workflow run to resume.")],
    from_: Annotated[list[str] | None, typer.Option(
        "--from", help="Re-run this job and everything downstream (default: the failed "
                       "ones); repeat for several.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Re-run a workflow run's failed jobs (or --from JOB) and all downstream of them."""
    from framework.workflows import resume_workflow

    with library_errors(ctx):
        report = resume_workflow(options(ctx).settings(), workflow_run_id,
                                 from_jobs=from_ or [])
        _show(ctx, report, as_json=as_json)


@app.command("stop")
def stop(
    ctx: typer.Context,
    workflow_run_id: Annotated[str, typer.Argument(help="The workflow run to stop.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the run as JSON.")] = False,
) -> None:
    """Stop a running workflow run: its running jobs end STOPPED, no more start (Glue's
    StopWorkflowRun); waits until it has stopped. Resume it with workflow resume."""
    from framework.workflows import stop_workflow

    with library_errors(ctx):
        summary = stop_workflow(options(ctx).settings(), workflow_run_id)
    if as_json:
        render([summary], as_json=True)
    else:
        typer.echo(f"workflow {summary.workflow}: run {summary.workflow_run_id} "
                   f"{summary.state} ({_jobs(summary)})")


@app.command("runs")
def runs(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The workflow.")],
    limit: Annotated[int, typer.Option(help="Show the newest N runs.")] = 20,
    skipped: SKIPPED_OPTION = Skipped.fold,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """NAME's runs, newest first: state, start and end, jobs per state, what it resumes. A
    run whose every job found nothing new is skipped (--skipped)."""
    from framework.workflows import workflow_runs

    with library_errors(ctx):
        found = workflow_runs(options(ctx).settings(), name, limit=limit)
    if skipped is Skipped.hide:
        found = [r for r in found if not r.found_nothing_new]
    if as_json:
        render(found, as_json=True)
        return
    rows = found if skipped is Skipped.show else humanize.fold(
        found, skipped=lambda r: r.found_nothing_new)
    render([_stretch(r) if isinstance(r, list) else _run_line(r) for r in rows],
           as_json=False)


@app.command("status")
def status(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The workflow.")],
    run_id: Annotated[str | None, typer.Option(
        "--run", help="This workflow run (default: the latest).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Each job of NAME's latest workflow run (or --run): trigger, state, timings, run id."""
    with library_errors(ctx):
        store = options(ctx).store()
        nodes = store.workflow_run(name, workflow_run_id=run_id)
        if not nodes:
            admin.require_workflow(options(ctx).settings(), name)
    if as_json:
        render(nodes, as_json=True)
        return
    if nodes:
        first = nodes[0]
        resumed = f" (resumes {first.resumed_from})" if first.resumed_from else ""
        typer.echo(f"workflow {name}: run {first.workflow_run_id}{resumed}")
    skipped_runs = store.skipped_runs({n.run_id for n in nodes if n.run_id})
    render([{"job": n.job, "trigger": n.trigger, "state": _state(n, skipped_runs),
             "run_id": n.run_id, zoned("started"): _time(n.started_at),
             "took": _took(n.started_at, n.ended_at),
             "published": ", ".join(f"{k}={v}" for k, v in n.properties.items()),
             "error": n.error} for n in nodes],
           as_json=False)


@app.command("export")
def export(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The workflow.")],
    format_: Annotated[str, typer.Option("--format", help="airflow")] = "airflow",
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write to this file (default: stdout).")] = None,
    deltamark: Annotated[str, typer.Option(
        help="The command the tasks run (e.g. the full path of the venv's deltamark).")
    ] = "deltamark",
    workdir: Annotated[Path, typer.Option(
        help="The directory the jobs run in (default: this one).")] = Path("."),
) -> None:
    """Print (or write) NAME as an Apache Airflow 3 DAG whose tasks call deltamark run and
    decide as deltamark workflow run does."""
    if format_ != "airflow":
        raise typer.BadParameter(f"'{format_}': the only format is airflow",
                                 param_hint="--format")
    from framework import storage
    from framework.workflows import airflow_dag, load_workflow

    with library_errors(ctx):
        settings = options(ctx).settings()
        root = settings.state_root
        command = [*shlex.split(deltamark), "--conf-dir", str(settings.conf_dir.absolute()),
                   "--state-root", os.path.abspath(root) if storage.is_local(root) else root]
        source = airflow_dag(load_workflow(settings, name), deltamark=command,
                             workdir=workdir.absolute())
    if output is None:
        typer.echo(source, nl=False)
    else:
        output.write_text(source)
        typer.echo(f"wrote {output}")


def _jobs(summary: "WorkflowRunSummary") -> str:
    return humanize.job_states(summary.jobs, summary.nothing_new)


def _state(node: WorkflowNode, skipped_runs: Set[str]) -> str:
    return humanize.node_state(node.state, nothing_new=node.run_id in skipped_runs)


def _time(when: datetime | None) -> str:
    return humanize.local_time(when) if when else ""


def _took(started: datetime | None, ended: datetime | None) -> str:
    return humanize.duration((ended - started).total_seconds()) if started and ended else ""


def _run_line(run: "WorkflowRunSummary") -> dict[str, object]:
    return {"workflow_run_id": run.workflow_run_id,
            "state": humanize.node_state(run.state, nothing_new=run.found_nothing_new),
            zoned("started"): _time(run.started_at), "took": _took(run.started_at, run.ended_at),
            "jobs": _jobs(run), "resumed_from": run.resumed_from}


def _stretch(runs: "list[WorkflowRunSummary]") -> dict[str, object]:
    """A stretch of runs that found nothing new (newest first), on one line."""
    return {"workflow_run_id": f"{len(runs)} runs", "state": humanize.NOTHING_NEW,
            zoned("started"): f"{_time(runs[-1].started_at)} to {_time(runs[0].started_at)}",
            "took": "", "jobs": "--skipped show lists each", "resumed_from": None}


def _show(ctx: typer.Context, report: "WorkflowReport", *, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({**asdict(report), "nodes": [plain(asdict(n))
                                                           for n in report.nodes]},
                              default=str))
    else:
        skipped_runs = options(ctx).store().skipped_runs(
            {n.run_id for n in report.nodes if n.run_id})
        typer.echo(f"workflow {report.workflow}: run {report.workflow_run_id} "
                   f"{'succeeded' if report.succeeded else 'failed'}")
        for node in report.nodes:
            took = _took(node.started_at, node.ended_at)
            detail = f": {node.error}" if node.error else ""
            typer.echo(f"  {node.job:<24} {_state(node, skipped_runs)}"
                       f"{f' in {took}' if took else ''}{detail}")
    if not report.succeeded:
        raise typer.Exit(1)
