"""A workflow's runs as an operator lists them (``deltamark workflow runs``): one line each,
read from the ``workflow_runs`` state table, with whether its process still runs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from framework.config import Settings
from framework.state.table_io import open_store
from framework.workflows import control
from framework.workflows.definition import load_workflow
from state_tables.model import WorkflowNode

__all__ = ["WorkflowRunSummary", "summarize", "workflow_runs"]

RunState = Literal["RUNNING", "SUCCEEDED", "FAILED", "STOPPED", "INTERRUPTED"]


@dataclass(frozen=True)
class WorkflowRunSummary:
    """One workflow run: how it ended (FAILED when a job failed or timed out, else STOPPED
    when one was stopped), or RUNNING, or INTERRUPTED (its process died with jobs running);
    when; how many of its jobs ended in each state, and how many of those that succeeded
    found nothing new (their runs were skipped before starting Spark)."""

    workflow: str
    workflow_run_id: str
    state: RunState
    started_at: datetime | None
    ended_at: datetime | None
    jobs: Mapping[str, int]
    resumed_from: str | None = None
    nothing_new: int = 0

    @property
    def found_nothing_new(self) -> bool:
        """It succeeded, and every job it ran found nothing new."""
        return (self.state == "SUCCEEDED" and self.nothing_new > 0
                and self.nothing_new == self.jobs.get("SUCCEEDED", 0))


def workflow_runs(settings: Settings, name: str, *, limit: int | None = None
                  ) -> list[WorkflowRunSummary]:
    """The runs of workflow ``name`` (the newest ``limit``, or all), the newest first.

    Raises:
        WorkflowNotFoundError, ConfigError: no valid workflow ``name``.
    """
    workflow = load_workflow(settings, name)
    live = control.live_runs(settings, workflow)
    store = open_store(settings.state_root)
    runs = store.workflow_runs(name, limit=limit)
    skipped = store.skipped_runs({n.run_id for nodes in runs for n in nodes if n.run_id})
    return [summarize(nodes, live=nodes[0].workflow_run_id in live, skipped_runs=skipped)
            for nodes in runs]


def summarize(nodes: Sequence[WorkflowNode], *, live: bool,
              skipped_runs: Set[str] = frozenset()) -> WorkflowRunSummary:
    """The summary of one run's nodes; ``live``: its process holds its slot now;
    ``skipped_runs``: the job runs that found nothing new (of these nodes' or more)."""
    counts: Counter[str] = Counter(n.state for n in nodes)
    if live:
        state: RunState = "RUNNING"
    elif counts["RUNNING"]:
        state = "INTERRUPTED"
    elif counts["FAILED"] or counts["TIMEOUT"]:
        state = "FAILED"
    elif counts["STOPPED"]:
        state = "STOPPED"
    else:
        state = "SUCCEEDED"
    started = [n.started_at for n in nodes if n.started_at]
    ended = [n.ended_at for n in nodes if n.ended_at]
    return WorkflowRunSummary(nodes[0].workflow, nodes[0].workflow_run_id, state,
                              min(started, default=None),
                              None if live else max(ended, default=None), dict(counts),
                              nodes[0].resumed_from,
                              sum(1 for n in nodes if n.state == "SUCCEEDED"
                                  and n.run_id in skipped_runs))
