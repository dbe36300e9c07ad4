"""The state store: one object for the state tables under a root, read and written through
a ``TableIO`` (framework's is delta-rs, ``framework.state.table_io``: milliseconds, no Spark,
no JVM). It writes and reads runs, data-quality results and workflow runs itself, and
leaves what contexts read (bookmarks, watermarks, files) to ``ContextReads``."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Collection, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from state_tables.codecs import (
    bookmark_row,
    current_nodes,
    dq_result_from,
    dq_row,
    file_row,
    first_per,
    node_row,
    run_from,
    run_row,
    watermark_row,
)
from state_tables.contexts import ContextReads
from state_tables.model import (
    Bookmark,
    DqResult,
    ProcessedFile,
    Run,
    Watermark,
    WorkflowNode,
)
from state_tables.rows import mask
from state_tables.schemas import (
    BOOKMARKS,
    DQ_RESULTS,
    PROCESSED_FILES,
    RUNS,
    TABLES,
    WATERMARKS,
    WORKFLOW_RUNS,
    StateTable,
)
from state_tables.tables import StateTables, TableIO, upgraded
from state_tables.validity import ContextHistory

__all__ = ["StateStore", "TableIO", "TableSize"]

#: sorts first: a time the store stamps on every row it writes is never missing on reads
_NEVER = datetime.min.replace(tzinfo=UTC)


class StateStore:
    """The state tables under one state root (``<root>/runs``, ``<root>/bookmarks``, ...).

    Tables are created on first write. Example::

        # framework.state.table_io: StateStore(root, DeltaTableIO())
        store = open_store("data/state")
        store.record_run(run, bookmarks=[bookmark])
        store.bookmarks("orders_ingest")

    Args:
        root: a local path or an object-store URI.
        io: reads and writes the tables.
    """

    def __init__(self, root: str | os.PathLike[str], io: TableIO):
        self.tables = StateTables(root, io)
        self.root, self.io = self.tables.root, io
        self._contexts = ContextReads(self.tables)

    def path(self, table: StateTable) -> str:
        return self.tables.path(table)

    # --- writes ---------------------------------------------------------------------

    def record_run(self, run: Run, *, bookmarks: Sequence[Bookmark] = (),
                   files: Sequence[ProcessedFile] = ()) -> None:
        """Record a run's status, after the plan rows it brings (``record_plan``)."""
        self.record_plan(run, bookmarks=bookmarks, files=files)
        self.tables.append(RUNS, [run_row(run)], {**_tag(run), "status": run.status})

    def record_plan(self, run: Run, *, bookmarks: Sequence[Bookmark] = (),
                    files: Sequence[ProcessedFile] = (),
                    watermarks: Sequence[Watermark] = ()) -> None:
        """Record the bookmark states and files a run plans to commit.

        They count only once their run is ``succeeded`` in enable mode: they are written
        before the run's target commits (its pinned plan) and become valid with the run
        row that says so.
        """
        if files:
            self.tables.append(PROCESSED_FILES, [file_row(f) for f in files], _tag(run))
        if bookmarks:
            self.record_bookmarks(bookmarks, tag=_tag(run))
        if watermarks:
            self.tables.append(WATERMARKS, [watermark_row(w) for w in watermarks], _tag(run))

    def record_bookmarks(self, bookmarks: Sequence[Bookmark], *,
                         tag: Mapping[str, Any] | None = None) -> None:
        """Append bookmark rows (a run's plan, or a rewind or reset) in one commit."""
        self.tables.append(BOOKMARKS, [bookmark_row(b) for b in bookmarks], tag)

    def record_dq_results(self, results: Sequence[DqResult]) -> None:
        """Append the results of one rule set's evaluation in one commit (each row's
        ``evaluated_at`` defaults to now, so rows keep their order)."""
        if results:
            self.tables.append(DQ_RESULTS, [dq_row(r) for r in results],
                         {"job": results[0].job, "run_seq": results[0].run_seq,
                          "run_id": results[0].run_id})

    def record_workflow_nodes(self, nodes: Sequence[WorkflowNode]) -> None:
        """Append workflow node states in one commit."""
        if nodes:
            self.tables.append(WORKFLOW_RUNS, [node_row(n) for n in nodes],
                         {"workflow": nodes[0].workflow,
                          "workflow_run_id": nodes[0].workflow_run_id})

    def tidy(self) -> list[TableSize]:
        """Tidy every state table now, as writes do from time to time: compact,
        checkpoint, and delete the files and log entries past the retention; and remove
        the rows that repeat another row exactly (before tidies took a lease, two
        processes' compactions at once doubled rows): ``TableSize.copies_removed``."""
        sizes = []
        for table in TABLES.values():
            before = self.io.footprint(self.path(table))
            removed = self.io.tidy(self.path(table))
            sizes.append(TableSize(table.name, before, self.io.footprint(self.path(table)),
                                   removed))
        return sizes

    # --- reads ----------------------------------------------------------------------

    def runs(self, job: str | None = None) -> list[Run]:
        """Recorded runs in their current status, by job then run_seq."""
        return self._runs(self.tables.read(RUNS, [("job", "=", job)] if job else []))

    def recent_runs(self, last: int, job: str | None = None, *, skipped: bool = True
                    ) -> list[Run]:
        """Each job's (or ``job``'s) ``last`` runs by run_seq, in their current status, by
        job then run_seq: chosen before the rows become ``Run`` objects, so a long history
        costs one read (and imports no pandas). ``skipped=False``: the last runs that did not
        find nothing new (a skipped run has one row, status ``skipped``)."""
        rows = self.tables.read(RUNS, [("job", "=", job)] if job else [])
        if not skipped:
            rows = rows.filter(mask(rows, [("status", "!=", "skipped")]))
        if not len(rows):
            return []
        seqs: dict[str, set[int]] = {}
        for name, seq in zip(rows["job"].to_pylist(), rows["run_seq"].to_pylist(), strict=True):
            seqs.setdefault(name, set()).add(seq)
        oldest = {name: sorted(found)[-last:][0] for name, found in seqs.items()}
        wanted = functools.reduce(pc.or_kleene, [
            mask(rows, [("job", "=", name), ("run_seq", ">=", seq)])
            for name, seq in oldest.items()])
        return self._runs(rows.filter(wanted))

    def last_run(self, job: str) -> Run | None:
        """The job's run with the highest run_seq, in its current status."""
        rows = self.tables.read(RUNS, [("job", "=", job)], newest_within=0)
        return self._runs(rows)[0] if len(rows) else None

    def job_names(self) -> list[str]:
        """Every job with a recorded run."""
        return sorted(pc.unique(self.tables.read(RUNS, [], columns=["job"])["job"]).to_pylist())

    def written_targets(self, job: str, *, since_seq: int = 0) -> list[str]:
        """Every target a run of ``job`` (from run ``since_seq`` on) wrote or began to
        write, as recorded."""
        outputs = self.tables.read(RUNS, [("job", "=", job), ("run_seq", ">=", since_seq)],
                                   columns=["outputs"])["outputs"]
        return sorted({target for entry in pc.unique(outputs).to_pylist()
                       for target, out in json.loads(entry).items()
                       if out.get("written") or out.get("pending")})

    def holds_state(self) -> bool:
        """Whether any state table is under the root (no run, workflow or watermark has
        written to it otherwise)."""
        return any(self.io.exists(self.path(table)) for table in TABLES.values())

    def skipped_runs(self, run_ids: Collection[str]) -> set[str]:
        """Which of ``run_ids`` found nothing new and were skipped (status ``skipped``)."""
        if not run_ids:
            return set()
        rows = self.tables.read(RUNS, [("status", "=", "skipped")], columns=["run_id"])
        return set(rows["run_id"].to_pylist()) & set(run_ids)

    def find_run(self, run_id: str) -> Run | None:
        """The run with this id, in its current status."""
        found = self._runs(self.tables.read(RUNS, [("run_id", "=", run_id)]))
        return found[0] if found else None

    def _runs(self, rows: pa.Table) -> list[Run]:
        newest = first_per(sorted(upgraded(RUNS, rows), key=lambda r: r["updated_at"],
                                   reverse=True), ("job", "run_id"))
        return sorted((run_from(r) for r in newest), key=lambda r: (r.job, r.run_seq))

    def bookmarks(self, job: str, *, context: str | None = None,
                  up_to_seq: int | None = None) -> list[Bookmark]:
        """The current bookmark of each context of ``job``.

        With ``up_to_seq``, the bookmarks as they stood right after run ``up_to_seq``.
        A context that was reset has no bookmark.
        """
        found = self.histories(job, context=context, up_to_seq=up_to_seq)
        return [h.current for h in found.values() if h.current.event != "reset"]

    def histories(self, job: str, *, context: str | None = None,
                  up_to_seq: int | None = None) -> dict[str, ContextHistory]:
        """Each context's current bookmark and the runs whose processed files still count
        (``ContextReads.histories``)."""
        return self._contexts.histories(job, context=context, up_to_seq=up_to_seq)

    def watermarks(self, job: str | None = None, *, up_to_seq: int | None = None
                   ) -> list[Watermark]:
        """The newest counting watermark of each job and context; with ``up_to_seq``, as
        they stood after that run (``ContextReads.watermarks``)."""
        return self._contexts.watermarks(job, up_to_seq=up_to_seq)

    def dq_results(self, job: str, *, run_id: str | None = None) -> list[DqResult]:
        """The data-quality results of one run of ``job`` (default: its latest run that
        has some), from that run's latest attempt, in evaluation order."""
        filters = [("job", "=", job)] + ([("run_id", "=", run_id)] if run_id else [])
        rows = self.tables.read(DQ_RESULTS, filters)
        if not len(rows):
            return []
        if run_id is None:
            rows = rows.filter(pc.equal(rows["run_seq"], pc.max(rows["run_seq"])))
        rows = rows.filter(pc.equal(rows["attempt"], pc.max(rows["attempt"])))
        return sorted((dq_result_from(r) for r in upgraded(DQ_RESULTS, rows)),
                      key=lambda r: r.evaluated_at or _NEVER)

    def dq_history(self, job: str, ruleset: str, *, before_seq: int) -> list[DqResult]:
        """The data-quality results of ``job``'s rule set ``ruleset`` in its runs before
        ``before_seq``, each run's latest attempt, newest run first (what dynamic rules
        such as ``RowCount > avg(last(10))`` compare with)."""
        rows = self.tables.read(DQ_RESULTS, [("job", "=", job), ("ruleset", "=", ruleset),
                                             ("run_seq", "<", before_seq)])
        results = [dq_result_from(r) for r in upgraded(DQ_RESULTS, rows)] if len(rows) else []
        latest: dict[int, int] = {}
        for result in results:
            latest[result.run_seq] = max(latest.get(result.run_seq, 0), result.attempt)
        return sorted((r for r in results if r.attempt == latest[r.run_seq]),
                      key=lambda r: (-r.run_seq, r.evaluated_at or _NEVER))

    def workflow_run(self, workflow: str | None = None, *, workflow_run_id: str | None = None
                     ) -> list[WorkflowNode]:
        """The nodes of one workflow run in their current state, in the order they started:
        the run ``workflow_run_id``, or ``workflow``'s latest."""
        filters = [(c, "=", v) for c, v in (("workflow", workflow),
                                             ("workflow_run_id", workflow_run_id)) if v]
        rows = self.tables.read(WORKFLOW_RUNS, filters)
        if not len(rows):
            return []
        if workflow_run_id is None:  # the latest: the run of the newest row
            newest = rows.sort_by([("updated_at", "descending")]).slice(0, 1)
            rows = rows.filter(pc.equal(rows["workflow_run_id"],
                                        newest["workflow_run_id"][0]))
        return current_nodes(upgraded(WORKFLOW_RUNS, rows))

    def workflow_runs(self, workflow: str, *, limit: int | None = None
                      ) -> list[list[WorkflowNode]]:
        """The runs of ``workflow`` (the newest ``limit``, or all), the newest first, each
        as ``workflow_run`` gives it."""
        rows = self.tables.read(WORKFLOW_RUNS, [("workflow", "=", workflow)])
        if limit is not None and len(rows):
            began = rows.group_by("workflow_run_id").aggregate([("updated_at", "min")])
            newest = began.sort_by([("updated_at_min", "descending")]).slice(0, limit)
            rows = rows.filter(pc.is_in(rows["workflow_run_id"],
                                        value_set=newest["workflow_run_id"]))
        by_run: dict[str, list[dict[str, Any]]] = {}
        for row in upgraded(WORKFLOW_RUNS, rows):
            by_run.setdefault(row["workflow_run_id"], []).append(row)
        runs = [current_nodes(rows) for rows in by_run.values()]
        return sorted(runs, key=lambda nodes: min(n.updated_at or _NEVER for n in nodes),
                      reverse=True)

    def bookmark_log(self, job: str, *, context: str | None = None
                     ) -> list[tuple[Bookmark, bool]]:
        """Every bookmark row of ``job`` in order, each with whether it counts
        (``ContextReads.bookmark_log``)."""
        return self._contexts.bookmark_log(job, context=context)

    def processed_files(self, job: str, context: str, *, modified_after_ms: int | None = None,
                        paths: Sequence[str] | None = None,
                        run_seqs: Set[int] | None = None) -> list[ProcessedFile]:
        """Files ``context`` of ``job`` has read (``ContextReads.processed_files``)."""
        return self._contexts.processed_files(job, context, modified_after_ms=modified_after_ms,
                                              paths=paths, run_seqs=run_seqs)

    def tracked_files(self, job: str, context: str, run_seqs: Set[int]) -> pa.Table:
        """The files ``context`` of ``job`` tracked in the runs ``run_seqs``, as Arrow
        columns (``ContextReads.tracked_files``)."""
        return self._contexts.tracked_files(job, context, run_seqs)

    def run_plan(self, job: str, run_seq: int) -> tuple[list[Bookmark], list[ProcessedFile]]:
        """The bookmark states and files run ``run_seq`` pinned, whether it committed or not."""
        return self._contexts.run_plan(job, run_seq)


@dataclass(frozen=True)
class TableSize:
    """A state table's files and bytes before and after ``StateStore.tidy``, and the rows
    it removed as exact copies of others."""

    table: str
    before: tuple[int, int]
    after: tuple[int, int]
    copies_removed: int = 0


def _tag(run: Run) -> dict[str, Any]:
    return {"job": run.job, "run_seq": run.run_seq, "run_id": run.run_id}
