"""Recovery of a job's last run when it did not succeed, at the start of the next.

If none of its targets has its transaction (a Parquet target: its manifest), nothing
landed: it is aborted, the files it moved into Parquet targets are deleted, and its input
stays pending. Otherwise some target has it and its job may not have finished: it is
replayed with the same run_seq on the same pinned input, the targets that have it skip
their write, the missing ones get theirs (when the job had finished, that is all of them:
the replay only records it).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from framework.common.redaction import redact
from framework.run.commit import execute
from framework.run.modes import BookmarkOptions
from framework.run.plan import PinnedRead, RunIdentity, WorkflowRun
from framework.run.spec import JobSpec
from framework.run.targets import discard_unlanded, landed_targets
from framework.sources.bookmark_codec import decode
from framework.sources.files import ListedFile
from state_tables.model import Run
from state_tables.store import StateStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from framework.delta import DeltaEngine
    from framework.run.lineage import RunEvents
    from framework.run.scope import Connections

__all__ = ["Recovery", "recover"]


@dataclass(frozen=True)
class Recovery:
    """What the start of a run did about the interrupted run before it."""

    run_id: str
    run_seq: int
    action: str  # aborted | replayed


def recover(spec: JobSpec, last: Run | None, store: StateStore, spark: SparkSession,
             engine: DeltaEngine, connections: Connections, params: Mapping[str, str],
             workflow: WorkflowRun, events: RunEvents) -> Recovery | None:
    """Settle the job's ``last`` run if it did not succeed (see the module docstring).

    A replay takes the last run's arguments; one recorded masked (it held a secret) is
    this run's ``params`` value that masks the same. It sees this run's ``workflow`` (run
    properties are not recorded with a run)."""
    # "committing": a status older versions recorded after the job returned; replayed too
    if last is None or last.status not in ("running", "committing", "failed"):
        return None
    from framework.sinks.jdbc import DatabaseTargets

    databases = DatabaseTargets(spark, connections)
    if not landed_targets(last, databases=databases):
        discard_unlanded(last, databases=databases)
        if last.status == "failed":
            return None
        aborted = dataclasses.replace(last, status="aborted", ended_at=datetime.now(UTC),
                                      recovery="aborted")
        store.record_run(aborted)
        events.emit(aborted)
        return Recovery(last.run_id, last.run_seq, "aborted")
    bookmarks, files = store.run_plan(spec.name, last.run_seq)
    by_context: dict[str, list[ListedFile]] = defaultdict(list)
    for f in files:
        by_context[f.context].append(ListedFile(f.path, f.size, f.modified_ms))
    states = {b.context: decode(b.source_kind, b.state) for b in bookmarks}
    pinned = {c: PinnedRead(tuple(by_context.get(c, ())), states.get(c))
              for c in {*by_context, *states}}
    identity = RunIdentity(job=spec.name, run_id=last.run_id, run_seq=last.run_seq,
                           pinned=pinned, attempt=last.attempt + 1, workflow=workflow)
    replayed = {k: params[k] if k in params and redact(params[k]) == v else v
                for k, v in last.arguments.items() if k not in ("bookmark_from", "bookmark_to")}
    options = BookmarkOptions.parse(spec.name, last.mode)
    execute(spec, identity, replayed, options, store, spark, engine, connections,
             recovery="replayed", events=events)
    return Recovery(last.run_id, last.run_seq, "replayed")
