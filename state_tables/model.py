"""The state model: plain, frozen data. I/O lives in ``state_tables.store``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypedDict

__all__ = ["Bookmark", "BookmarkEvent", "ContextRecord", "DqResult", "NodeState",
           "ProcessedFile", "Run", "RunOutput", "RunRecord", "RunStatus", "Watermark",
           "WatermarkRecord", "WorkflowNode"]

RunStatus = Literal["running", "succeeded", "failed", "aborted", "skipped"]
BookmarkEvent = Literal["commit", "rewind", "reset"]
NodeState = Literal["RUNNING", "SUCCEEDED", "FAILED", "TIMEOUT", "STOPPED", "SKIPPED"]


class RunOutput(TypedDict, total=False):
    """What a run did to one target: its entry in ``Run.outputs`` (JSON in the runs
    table). A target kind's tags say which kind it is (``framework.sinks.target_of``)."""

    #: the target holds the run's commit; ``pending``: being written (or staged): a crash
    #: leaves it to recovery, which asks the target
    written: bool
    pending: bool
    #: the commit was an earlier attempt's (a replay found it there)
    replayed: bool
    #: undone after a data-quality gate rejected a later write of the run
    rolled_back: bool
    #: the kind's tag: ``parquet`` (files) or ``jdbc``; absent for Delta
    format: str
    file_format: str  # files other than Parquet: json, csv, ...
    connection: str  # jdbc: the conf's connection name, the table, another database
    table: str
    database: str
    version: int  # Delta: the table's version after the commit
    files: int
    rows: int


class WatermarkRecord(TypedDict):
    """A watermark, as a run's record carries it."""

    column: str
    aggregate: Literal["max", "min"]
    value: Any
    value_type: str
    rows: int


class ContextRecord(TypedDict, total=False):
    """A context's bookmark, as a run's record carries it: the source kind, the state as
    the bookmarks table holds it and, for a file context, the files it tracked in the run
    (``[path, size, modified_ms, outcome]`` lists; None when there were too many)."""

    kind: str
    state: dict[str, Any]
    files: list[list[Any]] | None
    #: an older deltamark's: only the files read after the bookmark's settled time
    window: list[list[Any]] | None


class RunRecord(TypedDict, total=False):
    """What each target commit of a run carries of it (``framework.run.targets``): a Delta
    commit's ``userMetadata``, a Parquet manifest, a database target's mark. Empty for a
    commit made before deltamark wrote one."""

    job: str
    run_id: str
    run_seq: int
    mode: str
    bookmarks: dict[str, ContextRecord]
    watermarks: dict[str, WatermarkRecord]


@dataclass(frozen=True)
class Run:
    """One run of a job, as recorded in the ``runs`` table.

    ``inputs`` maps each context to its counts (``files``, ``bytes``, ...); ``outputs``
    maps each target written to what the write did (``version``, ``skipped``).
    ``skipped``: the run found nothing new before starting Spark (``framework.run.preflight``)
    and did nothing else.
    """

    job: str
    run_id: str
    run_seq: int
    status: RunStatus
    mode: str
    started_at: datetime
    ended_at: datetime | None = None
    attempt: int = 1
    arguments: Mapping[str, str] = field(default_factory=dict)
    inputs: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    outputs: Mapping[str, RunOutput] = field(default_factory=dict)
    error: str | None = None
    #: how recovery settled an interrupted run: replayed, aborted, ...
    recovery: str | None = None
    #: what decides the run besides its input: conf, arguments, code (``preflight``)
    fingerprint: str | None = None
    #: context -> how to plan that source again without Spark (None: it cannot be)
    sources: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    #: the run properties the job published (``ctx.publish``)
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Bookmark:
    """What one context (``transformation_ctx``) of a job had processed after a run.

    ``event``: ``commit`` (a run's new state), ``rewind`` (the state of an earlier run,
    restored) or ``reset`` (no state: the next run starts from nothing).
    """

    job: str
    context: str
    run_id: str
    run_seq: int
    source_kind: str
    state: Mapping[str, Any]
    event: BookmarkEvent = "commit"
    committed_at: datetime | None = None
    #: for a rewind: the run whose state this row restores
    restored_from_seq: int | None = None


@dataclass(frozen=True)
class ProcessedFile:
    """A file one context of a job tracked in one run (``modified_ms``: epoch
    milliseconds): read, or set aside (``outcome``: too_old, rewritten, adopted)."""

    job: str
    context: str
    run_id: str
    run_seq: int
    path: str
    size: int
    modified_ms: int
    outcome: str = "read"


@dataclass(frozen=True)
class Watermark:
    """The max (or min) of a column over what one context of a run processed."""

    job: str
    context: str
    run_id: str
    run_seq: int
    column: str
    aggregate: Literal["max", "min"]
    value: Any
    value_type: str  # Spark's simple type string: timestamp, date, bigint, ...
    rows: int
    committed_at: datetime | None = None


@dataclass(frozen=True)
class DqResult:
    """One rule of a rule set evaluated on what a run was about to write to a target.

    ``outcome``: passed | failed | error. ``action``: what the gate did with the rows:
    written (every rule passed), warned (written anyway), quarantined (rows breaking
    row-level rules went to the quarantine table) or rejected (nothing written).
    """

    job: str
    run_id: str
    run_seq: int
    attempt: int
    ruleset: str
    target: str
    policy: str
    rule: str
    kind: str
    outcome: str
    action: str
    rows: int
    observed: Any = None
    unexpected_count: int | None = None
    unexpected_percent: float | None = None
    sample: tuple[Any, ...] = ()
    message: str | None = None
    evaluated_at: datetime | None = None


@dataclass(frozen=True)
class WorkflowNode:
    """One job of one workflow run: what started it, how it ended, what it published.

    ``state``: RUNNING, then SUCCEEDED, FAILED, TIMEOUT (killed at its time limit),
    STOPPED (killed otherwise) or SKIPPED (its trigger's conditions can no longer hold).
    A resumed workflow run lists the jobs it reused with their earlier state and run.
    """

    workflow: str
    workflow_run_id: str
    job: str
    trigger: str
    state: NodeState
    run_id: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    #: the params the workflow gave the job (its args there, its trigger's args)
    arguments: Mapping[str, str] = field(default_factory=dict)
    #: the run properties when it started (also given as params, taking precedence)
    run_properties: Mapping[str, str] = field(default_factory=dict)
    #: the run properties the job published
    properties: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None
    #: the workflow run this one resumes (its row was reused or re-run here)
    resumed_from: str | None = None
    updated_at: datetime | None = None
