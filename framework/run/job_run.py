"""One run's machinery behind the ``JobContext`` its job holds: the plan its reads make,
its target writes and what each was written with, the database rows it staged, its
data-quality gate, the properties it publishes. The runner owns it (and calls the commit
protocol's steps through ``TargetWriteHooks``); the Glue layer reaches it with
``framework.run.job.job_run``. Job code never does.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from framework.config import text_value
from framework.delta import (
    DeltaEngine,
)
from framework.errors import JobError
from framework.quality.policy import RunChecks
from framework.run.bookmarks import BookmarkHistory
from framework.run.lineage import RunDatasets
from framework.run.modes import BookmarkOptions
from framework.run.plan import RunIdentity, RunPlan
from framework.run.reads import RunReads
from framework.run.scope import Connections, RunScope
from framework.run.writes import RunWrites
from framework.sources.bookmark_codec import encode
from state_tables.model import DqResult, RunOutput
from state_tables.store import StateStore

if TYPE_CHECKING:
    from datetime import timedelta

    from pyspark.sql import DataFrame, SparkSession

    from framework.quality import RuleSet
    from framework.quality.gate import RuleOutcome

__all__ = ["Connections", "JobRun", "TargetWriteHooks"]


class TargetWriteHooks(Protocol):
    """The commit protocol's steps around each target write (see ``framework.run.runner``)."""

    def before_target_write(self, run: JobRun) -> Callable[[], object]:
        """Start recording the run's plan so far; the returned callable waits until it is
        recorded. The target's data is written meanwhile; it commits only after."""

    def after_target_write(self, run: JobRun) -> None: ...


class JobRun:
    """A run's reads (``reads``), writes (``writes``) and records, for ``JobContext`` to
    call and the runner to commit: ``plan`` (what the reads planned and will commit),
    ``outputs()``, ``published()``, ``writes.land_staged()``, ``writes.rolled_back()``.
    What its reads and writes share is its ``scope``."""

    def __init__(self, *, spark: SparkSession, run: RunIdentity, bookmark: BookmarkOptions,
                 store: StateStore, engine: DeltaEngine, connections: Connections,
                 tombstone_retention: timedelta, checks: Mapping[str, RuleSet] | None = None,
                 hooks: TargetWriteHooks | None = None, dry_run: bool = False):
        self.job_name, self.run_id, self.run_seq = run.job, run.run_id, run.run_seq
        self.log = logging.getLogger(f"deltamark.job.{run.job}")
        self.connections = connections
        #: what this run reads and will commit (the runner records it)
        self.plan = RunPlan(run, bookmark, BookmarkHistory(store, run.job))
        self.scope = RunScope(spark=spark, identity=run, plan=self.plan, engine=engine,
                              store=store, connections=connections, log=self.log,
                              dry_run=dry_run, tombstone_retention=tombstone_retention)
        self.checks = RunChecks(job=run.job, run_id=run.run_id, run_seq=run.run_seq,
                                attempt=run.attempt, store=store, log=self.log)
        self.writes = RunWrites(self.scope, rule_sets=checks or {}, checks=self.checks,
                                hooks=None if hooks is None else _Bound(hooks, self))
        self.reads = RunReads(self.scope, quarantine=self.writes.quarantine)
        self._published: dict[str, str] = {}

    @property
    def schema_changes(self) -> dict[str, list[str]]:
        """Context -> what its files changed in its schema, in words (the run's report)."""
        return self.scope.schema_changes

    def evaluate_checks(self, df: DataFrame, ruleset: RuleSet, *, target: str,
                        record: bool = True) -> tuple[int, list[RuleOutcome]]:
        """Evaluate ``ruleset`` on ``df`` and record the outcomes, without acting on them
        (``RunChecks.evaluate``): the rows checked and each rule's outcome."""
        return self.checks.evaluate(df, ruleset, target=target, record=record)

    def dq_history(self, ruleset: str) -> list[DqResult]:
        """The results of ``ruleset`` in this job's earlier runs, newest run first
        (``RunChecks.history``)."""
        return self.checks.history(ruleset)

    # --- workflows --------------------------------------------------------------------

    def publish(self, name: str, value: Any) -> None:
        """Publish a run property (e.g. the version this run wrote): in a workflow, the jobs
        started after this one see it in ``ctx.run_properties`` (and as a param where a
        trigger maps it: ``args_from_properties``). Also in the run's report.

        Raises:
            JobError: ``name`` is not a plain name (letters, digits, ``_``, ``.``, ``-``).
        """
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", name):
            raise JobError(self.job_name, f"publish({name!r}): a run property's name is "
                           "letters, digits, '_', '.' or '-', starting with a letter or '_'.")
        self._published[name] = text_value(value)

    def published(self) -> dict[str, str]:
        return dict(self._published)

    def hold_bookmarks(self) -> None:
        """This run's bookmarks (and watermarks) will not count: it ends as a pause run
        (a Glue script that never called ``job.commit()``). Its writes stand."""
        self.plan.held = True

    def outputs(self) -> dict[str, RunOutput]:
        """What each target of this run was written with (the runner records it)."""
        return self.writes.recorded()

    def datasets(self) -> RunDatasets:
        """What this run read and wrote, as its lineage events name them."""
        reads = self.plan.reads.values()
        return dataclasses.replace(
            self.scope.lineage,
            started={r.context: self.plan.started.get(r.context, (r.kind, None))
                     for r in reads},
            states={r.context: None if r.state is None else encode(r.state) for r in reads})


@dataclass(frozen=True)
class _Bound:
    """The runner's hooks bound to the run they record (``WriteHooks``)."""

    hooks: TargetWriteHooks
    run: JobRun

    def before_target_write(self) -> Callable[[], object]:
        return self.hooks.before_target_write(self.run)

    def after_target_write(self) -> None:
        self.hooks.after_target_write(self.run)
