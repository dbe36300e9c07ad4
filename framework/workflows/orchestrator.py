"""Run a workflow's graph on this machine; resume or stop a workflow run.

Each job runs as ``deltamark run JOB --json`` in its own process, so a time limit can
stop it and a failure cannot take the others down; the processes share one Spark JVM:
they are forked by a deltamark server (``framework.server``), the kept one for these
settings if it runs, else one private to the workflow run (on Spark Connect, processes of
their own: the Connect server is the shared Spark). Up to ``max_concurrency`` run
at once. When a job ends, every trigger watching it is looked at: a job starts once one
of its triggers' conditions hold, and is marked SKIPPED once none of them can hold any
more (and so on downstream). Every state change is a row in the ``workflow_runs`` state
table. A run holds one of its workflow's run slots (``max_concurrent_runs``) and stops
when asked to (``framework.workflows.control``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import IO, Literal

from framework.config import Settings
from framework.errors import ServerError, WorkflowError
from framework.run.lineage import Lineage, Parent, parent_env
from framework.server import CommandProcess, Launcher, launcher
from framework.state.table_io import open_store, settings_store
from framework.workflows import control
from framework.workflows.definition import Trigger, Workflow, load_workflow
from framework.workflows.history import WorkflowRunSummary, summarize
from state_tables.model import NodeState, WorkflowNode

__all__ = ["WorkflowReport", "resume_workflow", "run_workflow", "stop_workflow"]

#: how long a timed-out job gets to stop after SIGTERM before SIGKILL
STOP_GRACE_SECONDS = 10
FINAL = ("SUCCEEDED", "FAILED", "TIMEOUT", "STOPPED", "SKIPPED")


@dataclass(frozen=True)
class WorkflowReport:
    """A workflow run: each node's final state, and the run properties at the end."""

    workflow: str
    workflow_run_id: str
    nodes: tuple[WorkflowNode, ...]
    properties: Mapping[str, str]
    resumed_from: str | None = None

    @property
    def succeeded(self) -> bool:
        """Every job that ran succeeded (skipped branches are fine: their conditions said
        so)."""
        return all(n.state in ("SUCCEEDED", "SKIPPED") for n in self.nodes)


def run_workflow(settings: Settings, name: str, *, args: Mapping[str, str] | None = None
                 ) -> WorkflowReport:
    """Run workflow ``name`` from its start trigger; ``args`` are run properties.

    Raises:
        WorkflowNotFoundError, ConfigError: before anything runs.
        WorkflowError: the workflow has ``max_concurrent_runs`` runs in progress.
    """
    workflow = load_workflow(settings, name)
    return _Run(settings, workflow, {**workflow.run_properties, **(args or {})}).go()


def resume_workflow(settings: Settings, workflow_run_id: str, *,
                    from_jobs: Sequence[str] = ()) -> WorkflowReport:
    """Re-run the failed (timed-out, stopped) jobs of a workflow run, or ``from_jobs``, and
    every job downstream of them; reuse what the others did (Glue's ResumeWorkflowRun).

    The jobs keep their bookmarks, so a re-run job reads what the failed run did not
    commit. The resumed run gets a new id and records the reused jobs as they were. A job
    left RUNNING (the workflow's process was killed) counts as stopped.

    Raises:
        WorkflowError: no such workflow run, an unknown job in ``from_jobs``, or nothing
            to resume.
    """
    workflow, earlier = _recorded(settings, workflow_run_id)
    if unknown := [j for j in from_jobs if j not in workflow.jobs]:
        raise WorkflowError(workflow.name, f"--from {', '.join(unknown)}: not a job of this "
                            f"workflow (jobs: {', '.join(workflow.jobs)})")
    # A job still RUNNING there (its workflow process was killed) counts as stopped; if it
    # is in fact running, the job's lease refuses the second run.
    chosen = list(from_jobs) or [n.job for n in earlier
                                 if n.state in ("FAILED", "TIMEOUT", "STOPPED", "RUNNING")]
    if not chosen:
        raise WorkflowError(workflow.name, f"run {workflow_run_id} has no failed, timed-out "
                            "or stopped job; name the jobs to re-run with --from.")
    rerun = set(workflow.downstream(chosen))
    reused = [n for n in earlier if n.job in workflow.jobs and n.job not in rerun
              and n.state != "SKIPPED"]
    # the properties the earlier run started with (what its start jobs received), then
    # what the reused jobs published
    properties = dict(next((n.run_properties for n in earlier if n.job in workflow.jobs
                            and workflow.is_start_job(n.job)), {}))
    for node in reused:
        properties.update(node.properties)
    return _Run(settings, workflow, properties, reused=reused,
                resumed_from=workflow_run_id).go()


def stop_workflow(settings: Settings, workflow_run_id: str, *, wait_seconds: float = 120
                  ) -> WorkflowRunSummary:
    """Stop a running workflow run (Glue's StopWorkflowRun) and wait until it has stopped:
    its running jobs end STOPPED (SIGTERM: each records its run failed, "stopped by
    SIGTERM", bookmarks unchanged), the jobs not started are recorded STOPPED, so
    ``resume_workflow`` runs them.

    Raises:
        WorkflowError: no such workflow run, it is not running, or it is still stopping
            after ``wait_seconds``.
    """
    workflow, nodes = _recorded(settings, workflow_run_id)
    if workflow_run_id not in control.live_runs(settings, workflow):
        state = summarize(nodes, live=False).state
        raise WorkflowError(workflow.name, f"run {workflow_run_id} is not running (it is "
                            f"{state}); nothing to stop"
                            + (". Resume it: deltamark workflow resume "
                               f"{workflow_run_id}" if state == "INTERRUPTED" else ""))
    control.request_stop(settings, workflow_run_id)
    deadline = time.monotonic() + wait_seconds
    while workflow_run_id in control.live_runs(settings, workflow):
        if time.monotonic() > deadline:
            raise WorkflowError(workflow.name, f"run {workflow_run_id} was asked to stop and "
                                f"is still stopping after {wait_seconds:g} s")
        time.sleep(control.POLL_SECONDS / 2)
    return summarize(_recorded(settings, workflow_run_id)[1], live=False)


def _recorded(settings: Settings, workflow_run_id: str) -> tuple[Workflow, list[WorkflowNode]]:
    """The workflow of a recorded workflow run, and the run's nodes.

    Raises:
        WorkflowError: no such workflow run.
    """
    nodes = open_store(settings.state_root).workflow_run(workflow_run_id=workflow_run_id)
    if not nodes:
        raise WorkflowError(workflow_run_id, "no such workflow run. See deltamark workflow "
                            "runs NAME.")
    return load_workflow(settings, nodes[0].workflow), nodes


class _Run:
    """One workflow run in progress."""

    def __init__(self, settings: Settings, workflow: Workflow, properties: Mapping[str, str],
                 *, reused: Sequence[WorkflowNode] = (), resumed_from: str | None = None):
        self.settings, self.workflow = settings, workflow
        self.store = settings_store(settings)
        self.id = uuid.uuid4().hex
        self.properties = dict(properties)
        self.resumed_from = resumed_from
        self.nodes: dict[str, WorkflowNode] = {}
        self.reused = reused
        self.children: set[CommandProcess] = set()
        self.stopping = False
        #: where its lineage events go (None: nowhere), and what its jobs' runs are told
        self.lineage = Lineage.configured(settings)
        self.parent = Parent.from_env() if self.lineage else None
        self.env = dict(os.environ) if self.lineage is None else {
            **os.environ, **parent_env(self.lineage.child(workflow.name, self.id, self.parent))}

    def go(self) -> WorkflowReport:
        """Run the workflow's jobs as their triggers fire, until none can."""
        self._lineage("START")
        try:
            report = self._go()
        except BaseException:
            self._lineage("FAIL")
            raise
        self._lineage("COMPLETE" if report.succeeded else "FAIL")
        return report

    def _lineage(self, state: Literal["START", "COMPLETE", "FAIL"]) -> None:
        if self.lineage is not None:
            self.lineage.workflow_run(self.workflow.name, self.id, state, parent=self.parent)

    def _go(self) -> WorkflowReport:
        running: set[Future[WorkflowNode]] = set()
        with control.run_slot(self.settings, self.workflow, self.id), launcher(
                self.settings, jobs=self.workflow.max_concurrency) as jobs, \
                ThreadPoolExecutor(max_workers=self.workflow.max_concurrency) as pool:
            self._record([replace(n, workflow_run_id=self.id, resumed_from=self.resumed_from,
                                  updated_at=None) for n in self.reused])
            try:
                ready = self._settle()
                while ready or running:
                    for job, trigger in ready:
                        node = self._start(job, trigger)
                        running.add(pool.submit(self._execute, jobs, node))
                    done, _ = wait(running, timeout=control.POLL_SECONDS,
                                   return_when=FIRST_COMPLETED)
                    if not self.stopping and control.stop_requested(self.settings, self.id):
                        self._stop_jobs()
                    for future in done:
                        running.discard(future)
                        self._finish(future.result())
                    ready = [] if self.stopping else self._settle()
            except KeyboardInterrupt:  # stop the jobs, record them STOPPED, then stop too
                self._stop_jobs()
                for future in running:
                    self._finish(future.result())
                raise
            finally:
                control.clear_stop(self.settings, self.id)
        nodes = tuple(self.nodes[job] for job in self.workflow.jobs if job in self.nodes)
        return WorkflowReport(self.workflow.name, self.id, nodes, dict(self.properties),
                              self.resumed_from)

    def _finish(self, node: WorkflowNode) -> None:
        if node.run_id is None:  # it failed: its run is the job's latest, if it got that far
            last = self.store.last_run(node.job)
            assert node.started_at is not None  # set by _start, kept by _execute
            if last is not None and last.started_at >= node.started_at:
                node = replace(node, run_id=last.run_id)
        self.properties.update(node.properties)
        self._record([node])

    def _stop_jobs(self) -> None:
        """Stop the running jobs (they end STOPPED) and record the jobs not started yet
        as STOPPED, so a resume runs them."""
        self.stopping = True
        for process in list(self.children):  # their threads wait for them to end
            process.send_signal(signal.SIGTERM)
            killer = threading.Timer(STOP_GRACE_SECONDS, process.send_signal, (signal.SIGKILL,))
            killer.daemon = True
            killer.start()
        self._record([WorkflowNode(self.workflow.name, self.id, job, "", "STOPPED",
                                   error="the workflow run was stopped before it started",
                                   resumed_from=self.resumed_from)
                      for job in self.workflow.jobs if job not in self.nodes])

    def _settle(self) -> list[tuple[str, Trigger]]:
        """Decide every job that can be decided now: those to start (by the first of their
        triggers that fires); SKIPPED rows for those none of whose triggers can fire any
        more (repeated, as skips cascade)."""
        ready: list[tuple[str, Trigger]] = []
        changed = True
        while changed:
            changed = False
            for job in self.workflow.jobs:
                if job in self.nodes or any(job == j for j, _ in ready):
                    continue
                triggers = self.workflow.triggers_of(job)
                verdicts = [self._verdict(t) for t in triggers]
                if "fire" in verdicts:
                    ready.append((job, triggers[verdicts.index("fire")]))
                elif all(v == "never" for v in verdicts):
                    changed = True
                    self._record([WorkflowNode(
                        self.workflow.name, self.id, job, ", ".join(t.name for t in triggers),
                        "SKIPPED", error=_never(triggers), resumed_from=self.resumed_from)])
        return ready

    def _verdict(self, trigger: Trigger) -> Literal["fire", "never", "wait"]:
        if trigger.is_start:
            return "fire"
        outcomes: list[bool | None] = []
        for condition in trigger.conditions:
            node = self.nodes.get(condition.job)
            if node is None or node.state not in FINAL:
                outcomes.append(None)
            else:
                outcomes.append(node.state == condition.state)
        if trigger.logical == "all":
            return "never" if False in outcomes else "fire" if all(outcomes) else "wait"
        return "fire" if True in outcomes else "never" if None not in outcomes else "wait"

    def _start(self, job: str, trigger: Trigger) -> WorkflowNode:
        node = WorkflowNode(self.workflow.name, self.id, job, trigger.name, "RUNNING",
                            started_at=datetime.now(UTC),
                            arguments={**self.workflow.jobs[job].args,
                                       **trigger.arguments(self.properties)},
                            run_properties=dict(self.properties),
                            resumed_from=self.resumed_from)
        self._record([node])
        return node

    def _execute(self, jobs: Launcher, node: WorkflowNode) -> WorkflowNode:
        """Run the node's job in a process of its own, within its time limit."""
        settings = self.settings
        command = ["--conf-dir", str(settings.conf_dir), "--state-root",
                   str(settings.state_root), "run",
                   *self.workflow.jobs[node.job].run_arguments(), "--json",
                   f"--workflow={self.workflow.name}", f"--workflow-run-id={self.id}",
                   *(f"--arg={k}={v}" for k, v in node.arguments.items()),
                   *(f"--run-property={k}={v}" for k, v in node.run_properties.items())]
        limit = self.workflow.jobs[node.job].timeout_minutes
        state: NodeState
        error: str | None
        with (open(os.devnull) as stdin, tempfile.TemporaryFile("w+") as stdout,
              tempfile.TemporaryFile("w+") as stderr):
            try:
                process = jobs.run(command, env=self.env, cwd=os.getcwd(),
                                     stdin=stdin.fileno(), stdout=stdout.fileno(),
                                     stderr=stderr.fileno())
            except ServerError as exc:
                state, error = "FAILED", str(exc)
            else:
                self.children.add(process)
                try:
                    state, error = _outcome(process, limit, stderr)
                finally:
                    self.children.discard(process)
                if state == "STOPPED" and self.stopping:
                    error = "stopped by deltamark workflow stop"
            report = {} if state == "TIMEOUT" else _report(_text(stdout))
        return replace(node, state=state, run_id=report.get("run_id"),
                       ended_at=datetime.now(UTC), properties=report.get("properties") or {},
                       error=error, updated_at=None)

    def _record(self, nodes: Sequence[WorkflowNode]) -> None:
        for node in nodes:
            self.nodes[node.job] = node
        self.store.record_workflow_nodes(nodes)


def _outcome(process: CommandProcess, limit: float | None,
             stderr: IO[str]) -> tuple[NodeState, str | None]:
    """Wait for the job's process within its time limit (minutes): its state and error."""
    try:
        code = process.wait(timeout=limit * 60 if limit else None)
    except subprocess.TimeoutExpired:
        _stop(process)
        return "TIMEOUT", f"stopped after its time limit of {limit:g} minutes"
    except ServerError as exc:
        return "FAILED", str(exc)
    if code == 0:
        return "SUCCEEDED", None
    # a signal: a negative code, or 128 + N from a run that recorded it (RunStopped)
    return "FAILED" if 0 < code <= 128 else "STOPPED", _last_error(_text(stderr), code)


def _stop(process: CommandProcess) -> None:
    """SIGTERM the job's process group, SIGKILL it if it lingers."""
    for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_SECONDS), (signal.SIGKILL, None)):
        process.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired, ServerError):
            process.wait(timeout=wait_s)
            return


def _text(file: IO[str]) -> str:
    file.seek(0)
    return file.read()


def _report(stdout: str) -> dict:
    for line in reversed(stdout.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return {}


def _last_error(stderr: str, returncode: int) -> str:
    if returncode < 0:
        return f"stopped by {signal.Signals(-returncode).name}"
    lines = [line for line in stderr.strip().splitlines() if line.startswith("error:")]
    if lines:
        return lines[-1].removeprefix("error: ")[:2000]
    return f"exited with code {returncode}"


def _never(triggers: Sequence[Trigger]) -> str:
    """Why a job is skipped: none of its triggers can fire any more."""
    said = [f"{t.name}: {t.describe()}" for t in triggers]
    if len(said) == 1:
        return f"{said[0]} can no longer hold"
    return f"none of its triggers can fire any more ({'; '.join(said)})"
