"""The state model: plain, frozen data. I/O lives in ``state_tables.store``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

__all__ = ["Bookmark", "BookmarkEvent", "DqResult", "NodeState", "ProcessedFile", "Run",
           "RunStatus", "Watermark", "WorkflowNode"]

RunStatus = Literal["running", "succeeded", "failed", "aborted", "skipped"]
BookmarkEvent = Literal["commit", "rewind", "reset"]
NodeState = Literal["RUNNING", "SUCCEEDED", "FAILED", "TIMEOUT", "STOPPED", "SKIPPED"]


@dataclass(frozen=True)
class Run:
    """One run of a job, as recorded in the ``runs`` table.

    ``inputs`` maps each context to its counts (``files``, ``bytes``, ...); ``outputs``
    maps each target written to what the write did (``version``, ``skipped``).
    ``skipped``: the run found nothing new before starting Spark (``framework.preflight``)
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
    outputs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
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
