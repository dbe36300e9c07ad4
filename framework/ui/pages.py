"""What each page of ``deltamark ui`` shows, as plain data (the JSON routes return it as
is; the templates lay it out). Read from the state tables with delta-rs only: no JVM."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from framework.common import humanize
from framework.config import Settings
from framework.errors import DeltamarkError
from framework.jdbc import settings_connections
from framework.ops import admin
from framework.ops.admin import bookmark_history
from framework.ops.metrics import failures_in_a_row
from framework.run import preflight
from framework.run.spec import job_names
from framework.state.table_io import open_store
from framework.workflows.definition import Workflow, load_workflow, workflow_names
from framework.workflows.history import WorkflowRunSummary, workflow_runs
from state_tables.model import Run

__all__ = ["RUNS_SHOWN", "job_page", "overview", "rewind_preview", "waiting", "workflow_page"]

#: runs shown on a job's page and in its charts (the newest)
RUNS_SHOWN = 200
#: runs per job in the overview's sparkline
SPARK_RUNS = 30
#: bookmark changes shown per context (the newest)
HISTORY_SHOWN = 50


def overview(settings: Settings) -> dict[str, Any]:
    """Every job (declared or with runs): its last run; its last success, failures in a
    row and rows or files per run for a sparkline among its newest ``SPARK_RUNS`` runs that
    started Spark (runs that found nothing new skipped it); every workflow's latest run;
    and ``no_state``, the line saying the state root holds no state (None when it does).
    (The input waiting is ``waiting``, one job at a time: it lists sources.)"""
    store = open_store(settings.state_root)
    newest = {run.job: run for run in store.recent_runs(1)}
    by_job: dict[str, list[Run]] = defaultdict(list)
    for run in store.recent_runs(SPARK_RUNS, skipped=False):
        by_job[run.job].append(run)
    now = datetime.now(UTC)
    jobs = []
    for name in sorted(set(job_names(settings)) | set(newest)):
        runs = by_job.get(name, [])
        last = newest.get(name)
        succeeded = [r for r in runs if r.status == "succeeded"]
        failures = failures_in_a_row(runs)
        jobs.append({
            "job": name,
            "last_status": last.status if last else None,
            "last_run_at": _when(last),
            "last_run_age": _age(now, _when(last)),
            "last_success_at": _when(succeeded[-1]) if succeeded else None,
            "failures_in_a_row": f"{failures}+" if failures == SPARK_RUNS else failures,
            "last_error": last.error if last and last.status == "failed" else None,
            "volume": [_volume(r) for r in runs],
        })
    workflows: list[dict[str, Any]] = []
    for name in workflow_names(settings):
        try:
            latest = workflow_runs(settings, name, limit=1)
        except DeltamarkError as exc:  # a broken workflow file: shown, not fatal to the page
            workflows.append({"workflow": name, "error": str(exc)})
            continue
        workflows.append({"workflow": name, "error": None,
                          "latest": _summary(latest[0]) if latest else None})
    return {"generated_at": now.isoformat(), "state_root": str(settings.state_root),
            "no_state": admin.no_state(settings), "jobs": jobs, "workflows": workflows}


def job_page(settings: Settings, job: str, *, dq_run: str | None = None) -> dict[str, Any]:
    """One job: its newest runs (what each read and wrote, its error and recovery), the
    series for the charts (the runs that started Spark), each context's bookmark and
    history, its watermarks, and the data-quality results of one run (default: the newest
    that has some)."""
    store = open_store(settings.state_root)
    runs = store.recent_runs(RUNS_SHOWN, job)
    rows = [{**_plain(asdict(r)), "seconds": _seconds(r), "volume": _volume(r)}
            for r in reversed(runs)]
    ran = [r for r in runs if r.status != "skipped"]
    history: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for change in reversed(bookmark_history(store, job)):
        if len(history[change["context"]]) < HISTORY_SHOWN:
            history[change["context"]].append(_plain(change))
    contexts = [{"context": b.context, "current": _plain(asdict(b)),
                 "history": history[b.context]}
                for b in sorted(store.bookmarks(job), key=lambda b: b.context)]
    dq = store.dq_results(job, run_id=dq_run)
    return {
        "job": job,
        "runs": rows,
        "series": {"run_seq": [r.run_seq for r in ran],
                   "seconds": [_seconds(r) for r in ran],
                   "volume": [_volume(r) for r in ran]},
        "contexts": contexts,
        "watermarks": [_plain(asdict(w)) for w in store.watermarks(job)],
        "dq": [_plain(asdict(r)) for r in dq],
        "dq_run": dq[0].run_id if dq else None,
        "rewind_targets": [{"run_id": r.run_id, "run_seq": r.run_seq,
                            "ended_at": _iso(r.ended_at)}
                           for r in reversed(runs) if r.status == "succeeded"][:50],
    }


def waiting(settings: Settings, job: str) -> dict[str, Any]:
    """The input waiting for ``job``: what each source its last run read has that its
    bookmark has not seen, planned without Spark (``framework.run.preflight``)."""
    found = preflight.waiting(open_store(settings.state_root), job,
                              settings_connections(settings))
    said = "; ".join(f"{context}: {new}" for context, new in found.items()
                     if isinstance(new, str) or new)
    return {"job": job,
            "sources": {c: n if isinstance(n, str) else asdict(n)
                        for c, n in found.items()},
            "said": said or ("nothing new" if found else "no source read yet")}


def rewind_preview(settings: Settings, job: str, to_run: str) -> list[dict[str, Any]]:
    """What a rewind to ``to_run`` with ``--restore-targets`` would take out of the
    targets: each later run's writes (target, version or files, rows)."""
    runs = open_store(settings.state_root).runs(job)
    after = next((r.run_seq for r in runs if r.run_id == to_run), None)
    if after is None:
        return []
    return [{"run_seq": r.run_seq, "run_id": r.run_id, "target": target, **written}
            for r in runs if r.run_seq > after
            for target, written in r.outputs.items() if written.get("written")]


def workflow_page(settings: Settings, name: str) -> dict[str, Any]:
    """One workflow: its graph laid out in columns (a job's column: the longest chain of
    triggers before it), coloured by its latest run's states, and its runs. A job whose
    run found nothing new (skipped before starting Spark) is marked ``nothing_new``."""
    workflow = load_workflow(settings, name)
    runs = workflow_runs(settings, name, limit=RUNS_SHOWN)
    store = open_store(settings.state_root)
    latest = store.workflow_run(name) if runs else []
    skipped = store.skipped_runs({n.run_id for n in latest if n.run_id})
    nodes = [{**_plain(asdict(n)), "took": _took(n.started_at, n.ended_at),
              "nothing_new": n.run_id in skipped} for n in latest]
    return {"workflow": name, "description": workflow.description,
            "graph": _graph(workflow, {n["job"]: n for n in nodes}),
            "latest": nodes, "runs": [_summary(r) for r in runs]}


def _summary(run: WorkflowRunSummary) -> dict[str, Any]:
    return {**_plain(asdict(run)), "took": _took(run.started_at, run.ended_at),
            "found_nothing_new": run.found_nothing_new}


def _graph(workflow: Workflow, latest: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    column: dict[str, int] = {}

    def depth(job: str) -> int:
        if job not in column:
            before = [c.job for t in workflow.triggers_of(job) for c in t.conditions]
            column[job] = 1 + max((depth(j) for j in before), default=-1)
        return column[job]

    for job in workflow.jobs:
        depth(job)
    rows: dict[int, int] = defaultdict(int)
    nodes: dict[str, dict[str, Any]] = {}
    for job in workflow.jobs:
        node = latest.get(job, {})
        nodes[job] = {"job": job, "x": 40 + column[job] * 300, "y": 40 + rows[column[job]] * 90,
                      "state": node.get("state", "NOT RUN"),
                      "nothing_new": node.get("nothing_new", False)}
        rows[column[job]] += 1
    edges = [{"from": c.job, "to": job, "label": f"{t.name}: {c.state}",
              "x1": nodes[c.job]["x"] + 160, "y1": nodes[c.job]["y"] + 22,
              "x2": nodes[job]["x"], "y2": nodes[job]["y"] + 22}
             for job in workflow.jobs for t in workflow.triggers_of(job) for c in t.conditions]
    return {"nodes": list(nodes.values()), "edges": edges,
            "width": 40 + (max(column.values(), default=0) + 1) * 300,
            "height": 40 + max(rows.values(), default=1) * 90}


def _volume(run: Run) -> int:
    """What a run read: rows where sources count them, else files."""
    return sum(int(c.get("rows", c.get("files", 0)) or 0) for c in run.inputs.values())


def _seconds(run: Run) -> float | None:
    return _took(run.started_at, run.ended_at)


def _took(started: datetime | None, ended: datetime | None) -> float | None:
    """Seconds from ``started`` to ``ended`` (None until both are known)."""
    if started is None or ended is None:
        return None
    return round((ended - started).total_seconds(), 3)


def _when(run: Run | None) -> str | None:
    return None if run is None else _iso(run.ended_at or run.started_at)


def _age(now: datetime, when: str | None) -> str | None:
    return None if when is None else humanize.ago(datetime.fromisoformat(when), now)


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def _plain(record: dict[str, Any]) -> dict[str, Any]:
    return {k: _iso(v) if isinstance(v, datetime) else list(v) if isinstance(v, Sequence)
            and not isinstance(v, str) else v for k, v in record.items()}
