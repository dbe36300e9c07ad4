"""Reads and writes the state tables through a ``TableIO``: framework's reads and writes
them with delta-rs (``framework.state.table_io``), in milliseconds, with no Spark and no JVM."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from state_tables.codecs import (
    bookmark_from,
    bookmark_row,
    current_nodes,
    dq_result_from,
    dq_row,
    file_from,
    file_row,
    first_per,
    node_row,
    run_from,
    run_row,
    watermark_from,
    watermark_row,
)
from state_tables.errors import StateSchemaError
from state_tables.model import (
    Bookmark,
    DqResult,
    ProcessedFile,
    Run,
    Watermark,
    WorkflowNode,
)
from state_tables.rows import arrow_array, arrow_scalar, empty_rows, mask, python_rows, rows_table
from state_tables.schemas import (
    BOOKMARKS,
    DQ_RESULTS,
    PROCESSED_FILES,
    RUNS,
    TABLES,
    WATERMARKS,
    WORKFLOW_RUNS,
    StateTable,
    upgrade,
)
from state_tables.validity import ContextHistory, RunSet, valid_runs

__all__ = ["StateStore", "TableIO", "TableSize"]

#: filters on a table's rows: (column, operator, value), all of which a row passes
Filters = Sequence[tuple[str, str, Any]]

# A context's current bookmark is looked for in the rows of its last this many runs first.
RECENT_RUNS = 10
#: sorts first: a time the store stamps on every row it writes is never missing on reads
_NEVER = datetime.min.replace(tzinfo=UTC)


class TableIO(Protocol):
    """The Delta tables under a state root, as the store reads and writes them.

    ``framework.state.table_io.DeltaTableIO`` is deltamark's (delta-rs);
    ``framework.state.table_io.open_store`` gives a store on it. Each state table is a
    small unpartitioned Delta table that only grows by appends.
    """

    def join(self, root: str, name: str) -> str:
        """The path or URI of table ``name`` under ``root``."""

    def append(self, path: str, rows: pa.Table, *, tag: Mapping[str, Any] | None) -> None:
        """Append ``rows`` in one commit (creating the table), ``tag`` in its commit info."""

    def read(self, path: str, *, filters: Filters | None, columns: Sequence[str] | None
             ) -> pa.Table | None:
        """The rows passing ``filters`` (only ``columns`` if given); None if no table."""

    def read_newest(self, path: str, *, column: str, within: int, filters: Filters,
                    columns: Sequence[str] | None) -> pa.Table | None:
        """As ``read``, less the rows whose integer ``column`` is more than ``within`` below
        its largest value among them."""

    def exists(self, path: str) -> bool:
        """Whether a table is there."""

    def tidy(self, path: str) -> int:
        """Remove rows that repeat another row exactly, compact the table and delete what
        its retention lets go, now; returns how many rows it removed."""

    def footprint(self, path: str) -> tuple[int, int]:
        """The table's files and bytes."""

    def query(self, sql: str, tables: Mapping[str, tuple[str, pa.Schema]], *,
              setup: Sequence[str], check_plan: Callable[[str], None]) -> pa.Table:
        """Run one SQL statement over the tables ``{name: (path, schema)}`` (see
        ``framework.delta.log.query``)."""


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
        self.root = os.fspath(root)
        self.io = io

    def path(self, table: StateTable) -> str:
        return self.io.join(self.root, table.name)

    # --- writes ---------------------------------------------------------------------

    def record_run(self, run: Run, *, bookmarks: Sequence[Bookmark] = (),
                   files: Sequence[ProcessedFile] = ()) -> None:
        """Record a run's status, after the plan rows it brings (``record_plan``)."""
        self.record_plan(run, bookmarks=bookmarks, files=files)
        self._append(RUNS, [run_row(run)], {**_tag(run), "status": run.status})

    def record_plan(self, run: Run, *, bookmarks: Sequence[Bookmark] = (),
                    files: Sequence[ProcessedFile] = (),
                    watermarks: Sequence[Watermark] = ()) -> None:
        """Record the bookmark states and files a run plans to commit.

        They count only once their run is ``succeeded`` in enable mode: they are written
        before the run's target commits (its pinned plan) and become valid with the run
        row that says so.
        """
        if files:
            self._append(PROCESSED_FILES, [file_row(f) for f in files], _tag(run))
        if bookmarks:
            self.record_bookmarks(bookmarks, tag=_tag(run))
        if watermarks:
            self._append(WATERMARKS, [watermark_row(w) for w in watermarks], _tag(run))

    def record_bookmarks(self, bookmarks: Sequence[Bookmark], *,
                         tag: Mapping[str, Any] | None = None) -> None:
        """Append bookmark rows (a run's plan, or a rewind or reset) in one commit."""
        self._append(BOOKMARKS, [bookmark_row(b) for b in bookmarks], tag)

    def record_dq_results(self, results: Sequence[DqResult]) -> None:
        """Append the results of one rule set's evaluation in one commit (each row's
        ``evaluated_at`` defaults to now, so rows keep their order)."""
        if results:
            self._append(DQ_RESULTS, [dq_row(r) for r in results],
                         {"job": results[0].job, "run_seq": results[0].run_seq,
                          "run_id": results[0].run_id})

    def record_workflow_nodes(self, nodes: Sequence[WorkflowNode]) -> None:
        """Append workflow node states in one commit."""
        if nodes:
            self._append(WORKFLOW_RUNS, [node_row(n) for n in nodes],
                         {"workflow": nodes[0].workflow,
                          "workflow_run_id": nodes[0].workflow_run_id})

    def _append(self, table: StateTable, rows: list[dict[str, Any]],
                tag: Mapping[str, Any] | None = None) -> None:
        self.io.append(self.path(table), rows_table(rows, table.schema), tag=tag)

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
        return self._runs(self._read(RUNS, {"job": job}))

    def recent_runs(self, last: int, job: str | None = None, *, skipped: bool = True
                    ) -> list[Run]:
        """Each job's (or ``job``'s) ``last`` runs by run_seq, in their current status, by
        job then run_seq: chosen before the rows become ``Run`` objects, so a long history
        costs one read (and imports no pandas). ``skipped=False``: the last runs that did not
        find nothing new (a skipped run has one row, status ``skipped``)."""
        rows = self._read(RUNS, {"job": job})
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
        rows = self._read_where(RUNS, [("job", "=", job)], newest_within=0)
        return self._runs(rows)[0] if len(rows) else None

    def job_names(self) -> list[str]:
        """Every job with a recorded run."""
        return sorted(pc.unique(self._read_where(RUNS, [], columns=["job"])["job"]).to_pylist())

    def written_targets(self, job: str, *, since_seq: int = 0) -> list[str]:
        """Every target a run of ``job`` (from run ``since_seq`` on) wrote or began to
        write, as recorded."""
        outputs = self._read_where(RUNS, [("job", "=", job), ("run_seq", ">=", since_seq)],
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
        rows = self._read_where(RUNS, [("status", "=", "skipped")], columns=["run_id"])
        return set(rows["run_id"].to_pylist()) & set(run_ids)

    def find_run(self, run_id: str) -> Run | None:
        """The run with this id, in its current status."""
        found = self._runs(self._read_where(RUNS, [("run_id", "=", run_id)]))
        return found[0] if found else None

    def _runs(self, rows: pa.Table) -> list[Run]:
        newest = first_per(sorted(_upgraded(RUNS, rows), key=lambda r: r["updated_at"],
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
        """Each context's bookmark rows resolved: its current bookmark and the runs whose
        processed files still count (a rewind brings back the set as of its run; a reset
        empties it).

        With ``context``, only its rows of the last ``RECENT_RUNS`` runs are read when they
        hold its current bookmark, so a long history costs what a short one does:
        ``valid_runs`` reads the older rows if asked about their runs. (Older rewinds and
        resets change neither: they act on runs before them.)
        """
        filters = _bookmark_filters(job, context, up_to_seq)
        if context is not None:
            recent = self._read_where(BOOKMARKS, filters, newest_within=RECENT_RUNS)
            if len(recent):
                since = max(0, pc.max(recent["run_seq"]).as_py() - RECENT_RUNS)
                found = self._resolve(job, recent, up_to_seq, since=since)
                if context in found:
                    return found
        return self._resolve(job, self._read_where(BOOKMARKS, filters), up_to_seq)

    def _resolve(self, job: str, rows: pa.Table, up_to_seq: int | None, *,
                 since: int = 0) -> dict[str, ContextHistory]:
        """``histories`` from the job's bookmark rows: all of them, or (``since`` > 0) those
        from run ``since`` on."""
        if not len(rows):
            return {}
        if pc.max(rows["schema_version"]).as_py() > BOOKMARKS.version:
            upgrade(BOOKMARKS, python_rows(rows.slice(0, 1))[0])  # raises StateSchemaError
        is_commit = mask(rows, [("event", "=", "commit")])
        keep = pc.or_(pc.invert(is_commit), pc.is_in(
            rows["run_seq"], value_set=self._committed_seqs(job, since=since)))
        if up_to_seq is not None:
            keep = pc.and_(keep, pc.or_(mask(rows, [("run_seq", "<", up_to_seq)]), pc.and_(
                mask(rows, [("run_seq", "=", up_to_seq)]), is_commit)))
        rows = rows.filter(keep).append_column("_is_event", pc.invert(is_commit.filter(keep)))
        histories = {}
        for name in sorted(pc.unique(rows["context"]).to_pylist()):
            mine = rows.filter(mask(rows, [("context", "=", name)])).sort_by(
                [("run_seq", "ascending"), ("_is_event", "ascending"),
                 ("committed_at", "ascending")])
            current = bookmark_from(upgrade(BOOKMARKS, python_rows(
                mine.slice(len(mine) - 1).drop_columns(["_is_event"]))[0]))
            commits = mine.filter(pc.invert(mine["_is_event"]))["run_seq"].to_pylist()
            events = mine.filter(mine["_is_event"]).select(
                ["run_seq", "event", "restored_from_seq"]).to_pylist()
            valid = valid_runs(commits, events, None)
            histories[name] = ContextHistory(current, RunSet(
                valid, since=since, everything=functools.partial(
                    self._all_valid_runs, job, name, up_to_seq)) if since else valid)
        return histories

    def _all_valid_runs(self, job: str, context: str, up_to_seq: int | None) -> Set[int]:
        rows = self._read_where(BOOKMARKS, _bookmark_filters(job, context, up_to_seq))
        return self._resolve(job, rows, up_to_seq)[context].valid_runs

    def watermarks(self, job: str | None = None, *, up_to_seq: int | None = None
                   ) -> list[Watermark]:
        """The newest counting watermark of each job and context (a run's watermarks count
        once it succeeded in enable mode, as bookmarks do); with ``up_to_seq``, as they
        stood after that run."""
        filters: list[tuple[str, str, Any]] = [("job", "=", job)] if job else []
        if up_to_seq is not None:
            filters.append(("run_seq", "<=", up_to_seq))
        rows = self._read_where(WATERMARKS, filters)
        committed = {name: set(self._committed_seqs(name).to_pylist())
                     for name in pc.unique(rows["job"]).to_pylist()}
        newest: dict[tuple[str, str], Watermark] = {}
        for mark in sorted((watermark_from(r) for r in _upgraded(WATERMARKS, rows)),
                           key=lambda w: (w.job, w.context, -w.run_seq)):
            if mark.run_seq in committed[mark.job]:
                newest.setdefault((mark.job, mark.context), mark)
        return list(newest.values())

    def dq_results(self, job: str, *, run_id: str | None = None) -> list[DqResult]:
        """The data-quality results of one run of ``job`` (default: its latest run that
        has some), from that run's latest attempt, in evaluation order."""
        filters = [("job", "=", job)] + ([("run_id", "=", run_id)] if run_id else [])
        rows = self._read_where(DQ_RESULTS, filters)
        if not len(rows):
            return []
        if run_id is None:
            rows = rows.filter(pc.equal(rows["run_seq"], pc.max(rows["run_seq"])))
        rows = rows.filter(pc.equal(rows["attempt"], pc.max(rows["attempt"])))
        return sorted((dq_result_from(r) for r in _upgraded(DQ_RESULTS, rows)),
                      key=lambda r: r.evaluated_at or _NEVER)

    def dq_history(self, job: str, ruleset: str, *, before_seq: int) -> list[DqResult]:
        """The data-quality results of ``job``'s rule set ``ruleset`` in its runs before
        ``before_seq``, each run's latest attempt, newest run first (what dynamic rules
        such as ``RowCount > avg(last(10))`` compare with)."""
        rows = self._read_where(DQ_RESULTS, [("job", "=", job), ("ruleset", "=", ruleset),
                                             ("run_seq", "<", before_seq)])
        results = [dq_result_from(r) for r in _upgraded(DQ_RESULTS, rows)] if len(rows) else []
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
        rows = self._read_where(WORKFLOW_RUNS, filters)
        if not len(rows):
            return []
        if workflow_run_id is None:  # the latest: the run of the newest row
            newest = rows.sort_by([("updated_at", "descending")]).slice(0, 1)
            rows = rows.filter(pc.equal(rows["workflow_run_id"],
                                        newest["workflow_run_id"][0]))
        return current_nodes(_upgraded(WORKFLOW_RUNS, rows))

    def workflow_runs(self, workflow: str, *, limit: int | None = None
                      ) -> list[list[WorkflowNode]]:
        """The runs of ``workflow`` (the newest ``limit``, or all), the newest first, each
        as ``workflow_run`` gives it."""
        rows = self._read_where(WORKFLOW_RUNS, [("workflow", "=", workflow)])
        if limit is not None and len(rows):
            began = rows.group_by("workflow_run_id").aggregate([("updated_at", "min")])
            newest = began.sort_by([("updated_at_min", "descending")]).slice(0, limit)
            rows = rows.filter(pc.is_in(rows["workflow_run_id"],
                                        value_set=newest["workflow_run_id"]))
        by_run: dict[str, list[dict[str, Any]]] = {}
        for row in _upgraded(WORKFLOW_RUNS, rows):
            by_run.setdefault(row["workflow_run_id"], []).append(row)
        runs = [current_nodes(rows) for rows in by_run.values()]
        return sorted(runs, key=lambda nodes: min(n.updated_at or _NEVER for n in nodes),
                      reverse=True)

    def _committed_seqs(self, job: str, *, since: int = 0) -> pa.Array:
        """run_seq of the job's runs (from run ``since`` on) that succeeded in enable mode
        (a final status)."""
        runs = self._read_where(RUNS, [("job", "=", job), ("status", "=", "succeeded"),
                                       ("mode", "=", "enable"), ("run_seq", ">=", since)],
                                columns=["run_seq"])
        return pc.unique(runs["run_seq"])

    def bookmark_log(self, job: str, *, context: str | None = None
                     ) -> list[tuple[Bookmark, bool]]:
        """Every bookmark row of ``job`` in order, each with whether it counts (a run's
        plan counts once the run succeeded in enable mode; rewinds and resets always)."""
        filters = [("job", "=", job)] + ([("context", "=", context)] if context else [])
        rows = self._read_where(BOOKMARKS, filters)
        committed = set(self._committed_seqs(job).to_pylist())
        ordered = sorted((bookmark_from(r) for r in _upgraded(BOOKMARKS, rows)),
                         key=lambda b: (b.run_seq, b.event != "commit", b.committed_at,
                                        b.context))
        return [(b, b.event != "commit" or b.run_seq in committed) for b in ordered]

    def processed_files(self, job: str, context: str, *, modified_after_ms: int | None = None,
                        paths: Sequence[str] | None = None,
                        run_seqs: Set[int] | None = None) -> list[ProcessedFile]:
        """Files ``context`` of ``job`` has read: all, those modified after a time, or with
        one of ``paths``; with ``run_seqs``, only those read by these runs.
        """
        if paths is not None and not paths:
            return []
        filters: list[tuple[str, str, Any]] = [("job", "=", job), ("context", "=", context)]
        if modified_after_ms is not None:
            filters.append(("modified_ms", ">", modified_after_ms))
        if paths is not None:
            filters.append(("path", "in", list(paths)))
        rows = self._read_where(PROCESSED_FILES, filters)
        found = (file_from(r) for r in _upgraded(PROCESSED_FILES, rows))
        return [f for f in found if run_seqs is None or f.run_seq in run_seqs]

    def tracked_files(self, job: str, context: str, run_seqs: Set[int]) -> pa.Table:
        """The files ``context`` of ``job`` tracked in the runs ``run_seqs``: a row per file
        and run, with columns path, size, modified_ms and outcome, read as Arrow columns
        (a context tracking a million files costs one read, no Python object a file).

        Raises:
            StateSchemaError: a row is newer than this deltamark.
        """
        rows = self._read_where(PROCESSED_FILES, [("job", "=", job), ("context", "=", context)],
                                columns=["schema_version", "run_seq", "path", "size",
                                         "modified_ms", "outcome"])
        newest = pc.max(rows["schema_version"]).as_py() if len(rows) else None
        if newest is not None and newest > PROCESSED_FILES.version:
            raise StateSchemaError(PROCESSED_FILES.name, newest, PROCESSED_FILES.version)
        valid = pc.is_in(rows["run_seq"], value_set=arrow_array(sorted(run_seqs), pa.int64()))
        if not pc.all(valid).as_py():
            rows = rows.filter(valid)
        # rows of layout 1 are all read
        outcome = pc.fill_null(rows["outcome"], arrow_scalar("read", pa.string()))
        return pa.table([rows["path"], rows["size"], rows["modified_ms"], outcome],
                        names=["path", "size", "modified_ms", "outcome"])

    def run_plan(self, job: str, run_seq: int) -> tuple[list[Bookmark], list[ProcessedFile]]:
        """The bookmark states and files run ``run_seq`` pinned, whether it committed or not."""
        where = [("job", "=", job), ("run_seq", "=", run_seq)]
        bookmarks = [bookmark_from(r) for r in _upgraded(BOOKMARKS,
                                                         self._read_where(BOOKMARKS, where))]
        files = [file_from(r) for r in _upgraded(PROCESSED_FILES,
                                             self._read_where(PROCESSED_FILES, where))]
        return [b for b in bookmarks if b.event == "commit"], files

    def _read(self, table: StateTable, equal: Mapping[str, str | None]) -> pa.Table:
        return self._read_where(
            table, [(column, "=", value) for column, value in equal.items() if value is not None])

    def _read_where(self, table: StateTable, filters: list[tuple[str, str, Any]],
                    columns: Sequence[str] | None = None, *,
                    newest_within: int | None = None) -> pa.Table:
        """The rows passing ``filters``; with ``newest_within``, only those whose run_seq
        is at most that far below the newest of them."""
        if newest_within is None:
            rows = self.io.read(self.path(table), filters=filters or None, columns=columns)
        else:
            rows = self.io.read_newest(self.path(table), column="run_seq", within=newest_within,
                                       filters=filters, columns=columns)
        wanted = table.schema if columns is None else pa.schema(
            [table.schema.field(c) for c in columns])
        if rows is None:
            return empty_rows(wanted)
        for missing in (f for f in wanted if f.name not in rows.column_names):
            # a nullable column added after this table was created: null in its old rows
            rows = rows.append_column(missing, pa.nulls(len(rows), missing.type))
        return rows


@dataclass(frozen=True)
class TableSize:
    """A state table's files and bytes before and after ``StateStore.tidy``, and the rows
    it removed as exact copies of others."""

    table: str
    before: tuple[int, int]
    after: tuple[int, int]
    copies_removed: int = 0


def _bookmark_filters(job: str, context: str | None, up_to_seq: int | None
                      ) -> list[tuple[str, str, Any]]:
    """The bookmark rows of ``job`` (and ``context``), up to run ``up_to_seq``."""
    return ([("job", "=", job)] + ([("context", "=", context)] if context else [])
            + ([] if up_to_seq is None else [("run_seq", "<=", up_to_seq)]))


def _upgraded(table: StateTable, rows: pa.Table) -> Iterable[dict[str, Any]]:
    return (upgrade(table, row) for row in python_rows(rows))


def _tag(run: Run) -> dict[str, Any]:
    return {"job": run.job, "run_seq": run.run_seq, "run_id": run.run_id}
