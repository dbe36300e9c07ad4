"""Workflow declarations: ``conf/workflows/<name>.yaml``, validated all at once.

    description: orders from landing to gold
    schedule: "0 6 * * *"            # cron, for an external scheduler (see export)
    max_concurrency: 2               # jobs running at once
    max_concurrent_runs: 1           # runs of this workflow at once (Glue's MaxConcurrentRuns)
    run_properties: {region: eu}     # every job sees them in ctx.run_properties
    jobs:                            # conf/jobs/<name>.yaml, with params for this workflow
      orders_ingest: {args: {landing: data/landing/orders}, timeout_minutes: 30}
      orders_silver: {}
      orders_gold: {}
      glue_orders: {script: jobs/glue_orders.py, args: {job-bookmark-option: job-bookmark-enable}}
      notify: {}
    triggers:
      - start: [orders_ingest]                       # the start trigger (no condition)
      - name: refine
        when: {all: [{orders_ingest: SUCCEEDED}]}    # all (Glue's AND) or any (ANY)
        start: [orders_silver]
      - when: {all: [{orders_silver: SUCCEEDED}]}
        start: [orders_gold]
        args: {mode: daily}                          # override the job's args
        args_from_properties: {version: silver_version}  # param <- run property
      - name: alert                                  # a second trigger of one job: it
        when: {any: [{orders_silver: FAILED}, {orders_gold: FAILED}]}  # starts when the
        start: [notify]                              # first of its triggers fires

Parameters a job gets, lowest precedence first: its conf params, the workflow's ``args``
for it, then its trigger's ``args`` and ``args_from_properties``. Run properties (the
workflow's, those given to ``workflow run --arg``, and those earlier jobs published) are
apart, in ``ctx.run_properties``: a property becomes a param only where a trigger maps it.
A job with several triggers runs once, started by the first that fires, and is skipped
when none of them can fire any more.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from framework.config import Settings, read_yaml, scalar_mapping, unknown_keys
from framework.errors import ConfigError, WorkflowNotFoundError
from framework.run.spec import job_names

__all__ = ["Condition", "JobState", "Trigger", "Workflow", "WorkflowJob", "load_workflow",
           "workflow_names"]

JobState = Literal["SUCCEEDED", "FAILED", "TIMEOUT", "STOPPED"]

KNOWN_KEYS = ("description", "schedule", "max_concurrency", "max_concurrent_runs",
              "run_properties", "jobs", "triggers")
TRIGGER_KEYS = ("name", "when", "start", "args", "args_from_properties")
JOB_KEYS = ("args", "timeout_minutes", "script")
_CRON_FIELD = re.compile(r"^(\*|\d+(-\d+)?)(/\d+)?(,(\*|\d+(-\d+)?)(/\d+)?)*$")


@dataclass(frozen=True)
class Condition:
    """``job`` ended in ``state``."""

    job: str
    state: JobState


@dataclass(frozen=True)
class Trigger:
    """Starts ``start`` when its conditions hold (``all`` of them, or ``any``); the start
    trigger has none."""

    name: str
    start: tuple[str, ...]
    conditions: tuple[Condition, ...] = ()
    logical: Literal["all", "any"] = "all"
    args: Mapping[str, str] = field(default_factory=dict)
    #: params of the jobs it starts, taken from run properties: {param: property}
    args_from_properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_start(self) -> bool:
        return not self.conditions

    def describe(self) -> str:
        """Its conditions as a sentence, e.g. ``(b SUCCEEDED AND c SUCCEEDED)``."""
        joined = f" {'AND' if self.logical == 'all' else 'OR'} ".join(
            f"{c.job} {c.state}" for c in self.conditions)
        return f"({joined})" if len(self.conditions) > 1 else joined

    def arguments(self, properties: Mapping[str, str]) -> dict[str, str]:
        """The params it gives the jobs it starts: its ``args``, and the mapped run
        properties that are set."""
        return {**self.args, **{param: properties[name] for param, name
                                in self.args_from_properties.items() if name in properties}}


@dataclass(frozen=True)
class WorkflowJob:
    """A job in a workflow: its args for this workflow, its time limit, and for an AWS Glue
    script run as the job (``deltamark run --script``), the script."""

    name: str
    args: Mapping[str, str] = field(default_factory=dict)
    timeout_minutes: float | None = None
    script: Path | None = None

    def run_arguments(self) -> list[str]:
        """What follows ``deltamark run``: the job, and its script if it has one."""
        return [self.name, *(("--script", str(self.script)) if self.script else ())]


@dataclass(frozen=True)
class Workflow:
    """A validated workflow: its jobs and the triggers between them."""

    name: str
    source: Path
    jobs: Mapping[str, WorkflowJob]
    triggers: tuple[Trigger, ...]
    description: str = ""
    schedule: str | None = None
    max_concurrency: int = 2
    max_concurrent_runs: int = 1
    run_properties: Mapping[str, str] = field(default_factory=dict)

    def triggers_of(self, job: str) -> tuple[Trigger, ...]:
        """The triggers that start ``job`` (validation makes it at least one)."""
        return tuple(t for t in self.triggers if job in t.start)

    def is_start_job(self, job: str) -> bool:
        """Whether the start trigger starts ``job`` (then no other trigger does)."""
        return any(t.is_start for t in self.triggers_of(job))

    def downstream(self, jobs: Sequence[str]) -> list[str]:
        """``jobs`` and every job a trigger starts after them, in workflow order."""
        found = set(jobs)
        changed = True
        while changed:
            changed = False
            for trigger in self.triggers:
                if any(c.job in found for c in trigger.conditions):
                    new = set(trigger.start) - found
                    found |= new
                    changed = changed or bool(new)
        return [name for name in self.jobs if name in found]


def workflow_names(settings: Settings) -> list[str]:
    """The workflows declared under ``<conf>/workflows``."""
    return sorted(p.stem for p in (settings.conf_dir / "workflows").glob("*.yaml"))


def load_workflow(settings: Settings, name: str) -> Workflow:
    """Read and validate the workflow ``name``.

    Raises:
        WorkflowNotFoundError: no such file.
        ConfigError: every problem in the file (unknown jobs, cycles, unreachable jobs,
            conflicting triggers, bad keys), each naming its key.
    """
    path = settings.conf_dir / "workflows" / f"{name}.yaml"
    if not path.is_file():
        raise WorkflowNotFoundError(name, str(settings.conf_dir), workflow_names(settings))
    raw = read_yaml(path)
    problems = unknown_keys(raw, KNOWN_KEYS)

    schedule = raw.get("schedule")
    if schedule is not None and not _is_cron(schedule):
        problems.append(f"schedule: '{schedule}' is not a cron expression of 5 fields "
                        "(minute hour day-of-month month day-of-week)")
    concurrency = _whole(raw, "max_concurrency", 2, problems)
    runs = _whole(raw, "max_concurrent_runs", 1, problems)
    properties, bad = scalar_mapping(raw.get("run_properties"), "run_properties")
    problems += bad

    jobs: dict[str, WorkflowJob] = {}
    declared = set(job_names(settings))
    raw_jobs = raw.get("jobs")
    if not isinstance(raw_jobs, Mapping) or not raw_jobs:
        problems.append("jobs: must map each job (conf/jobs/<job>.yaml) to its settings")
        raw_jobs = {}
    for job, body in raw_jobs.items():
        where = f"jobs.{job}"
        body = body or {}
        if not isinstance(body, Mapping):
            problems.append(f"{where}: must be a mapping with {', '.join(JOB_KEYS)}")
            continue
        problems += unknown_keys(body, JOB_KEYS, where)
        script = Path(body["script"]).absolute() if body.get("script") else None
        if script is not None and not script.is_file():
            problems.append(f"{where}.script: no such file {body['script']} (relative paths "
                            "start at the working directory)")
        if script is None and job not in declared:
            problems.append(f"{where}: unknown job (jobs in conf/jobs: "
                            f"{', '.join(sorted(declared)) or 'none'}; a Glue script "
                            "takes script: PATH)")
        args, bad = scalar_mapping(body.get("args"), f"{where}.args")
        problems += bad
        timeout = body.get("timeout_minutes")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(
                timeout, (int, float)) or timeout <= 0):
            problems.append(f"{where}.timeout_minutes: must be a positive number")
            timeout = None
        jobs[str(job)] = WorkflowJob(str(job), args, timeout, script)

    triggers = []
    raw_triggers = raw.get("triggers")
    if not isinstance(raw_triggers, list) or not raw_triggers:
        problems.append("triggers: must be a list, starting with the start trigger "
                        "({start: [job, ...]})")
        raw_triggers = []
    for i, body in enumerate(raw_triggers):
        trigger, bad = _trigger(body, i, jobs)
        problems += bad
        if trigger is not None:
            triggers.append(trigger)
    if jobs and len(triggers) == len(raw_triggers):
        problems += _graph_problems(jobs, triggers)
    if problems:
        raise ConfigError(str(path), problems)
    return Workflow(name=name, source=path, jobs=jobs, triggers=tuple(triggers),
                    description=str(raw.get("description", "")),
                    schedule=schedule, max_concurrency=concurrency, max_concurrent_runs=runs,
                    run_properties=properties)


def _whole(raw: Mapping[str, Any], key: str, default: int, problems: list[str]) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        problems.append(f"{key}: must be a whole number, at least 1")
        return 1
    return value


def _trigger(body: Any, i: int, jobs: Mapping[str, WorkflowJob]
             ) -> tuple[Trigger | None, list[str]]:
    where = f"triggers[{i}]"
    if not isinstance(body, Mapping):
        return None, [f"{where}: must be a mapping with {', '.join(TRIGGER_KEYS)}"]
    name = str(body.get("name") or f"trigger_{i}")
    where = f"triggers[{i}] ({name})" if body.get("name") else where
    problems = unknown_keys(body, TRIGGER_KEYS, where)
    start = body.get("start")
    if isinstance(start, str):
        start = [start]
    if not isinstance(start, list) or not start:
        problems.append(f"{where}.start: list the jobs it starts")
        start = []
    problems += [f"{where}.start: '{job}' is not a job of this workflow (jobs:)"
                 for job in start if job not in jobs]
    args, bad = scalar_mapping(body.get("args"), f"{where}.args")
    problems += bad
    mapped, bad = scalar_mapping(body.get("args_from_properties"),
                                 f"{where}.args_from_properties")
    problems += bad
    conditions: list[Condition] = []
    logical: Literal["all", "any"] = "all"
    when = body.get("when")
    if when is not None:
        if not isinstance(when, Mapping) or len(when) != 1 or next(iter(when)) not in (
                "all", "any"):
            problems.append(f"{where}.when: must be {{all: [...]}} or {{any: [...]}} of "
                            "{job: STATE}")
        else:
            [(logical, raw_conditions)] = when.items()
            if not isinstance(raw_conditions, list) or not raw_conditions:
                problems.append(f"{where}.when.{logical}: list conditions, e.g. "
                                "[{orders_ingest: SUCCEEDED}]")
                raw_conditions = []
            for condition in raw_conditions:
                if not isinstance(condition, Mapping) or len(condition) != 1:
                    problems.append(f"{where}.when.{logical}: each condition is one "
                                    "'job: STATE' pair")
                    continue
                [(job, state)] = condition.items()
                if job not in jobs:
                    problems.append(f"{where}.when: '{job}' is not a job of this workflow")
                if state not in get_args(JobState):
                    problems.append(f"{where}.when: {job}: '{state}' is not one of "
                                    f"{', '.join(get_args(JobState))}")
                conditions.append(Condition(str(job), state))
    return Trigger(name, tuple(map(str, start)), tuple(conditions), logical, args,
                   mapped), problems


def _graph_problems(jobs: Mapping[str, WorkflowJob], triggers: Sequence[Trigger]
                    ) -> list[str]:
    problems = []
    starts = [t for t in triggers if t.is_start]
    if not starts:
        problems.append("triggers: no start trigger (one without 'when' starts the workflow)")
    elif len(starts) > 1:
        problems.append("triggers: conflicting start triggers "
                        f"({', '.join(t.name for t in starts)}); keep one")
    started_by: dict[str, list[Trigger]] = {}
    for trigger in triggers:
        for job in trigger.start:
            started_by.setdefault(job, []).append(trigger)
    for job, by in started_by.items():
        if len(by) > 1 and any(t.is_start for t in by):
            others = ", ".join(t.name for t in by if not t.is_start)
            problems.append(f"triggers: the start trigger and {others} start {job}; a job the "
                            "workflow starts with has no other trigger")
    names = [t.name for t in triggers]
    problems += [f"triggers: two triggers are named {name}; names must differ"
                 for name in sorted({n for n in names if names.count(n) > 1})]
    # edges: a condition's job -> the jobs its trigger starts
    edges = {job: {s for t in triggers for s in t.start if any(c.job == job
                                                                 for c in t.conditions)}
             for job in jobs}
    if cycle := _cycle(edges):
        problems.append(f"triggers: cycle {' -> '.join(cycle)}")
    reachable = {job for t in starts for job in t.start}
    frontier = list(reachable)
    while frontier:
        for nxt in edges.get(frontier.pop(), ()):
            if nxt not in reachable:
                reachable.add(nxt)
                frontier.append(nxt)
    if starts:
        problems += [f"jobs.{job}: unreachable (no trigger chain from the start trigger "
                     "starts it)" for job in jobs if job not in reachable]
    return problems


def _cycle(edges: Mapping[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in edges:
        if node not in state and (found := visit(node)):
            return found
    return None


def _is_cron(text: Any) -> bool:
    fields = str(text).split()
    return len(fields) == 5 and all(_CRON_FIELD.match(f) for f in fields)
