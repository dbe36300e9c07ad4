"""What each context of a job has read, as far as it counts: its bookmark rows resolved by
the runs that committed (the current bookmark, the runs whose files still count, as
rewinds and resets left them), its watermarks, and the files it tracked."""

from __future__ import annotations

import functools
from collections.abc import Sequence, Set
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from state_tables.codecs import bookmark_from, file_from, watermark_from
from state_tables.errors import StateSchemaError
from state_tables.model import Bookmark, ProcessedFile, Watermark
from state_tables.rows import arrow_array, arrow_scalar, mask, python_rows
from state_tables.schemas import BOOKMARKS, PROCESSED_FILES, WATERMARKS, upgrade
from state_tables.tables import StateTables, upgraded
from state_tables.validity import ContextHistory, RunSet, valid_runs

__all__ = ["RECENT_RUNS", "ContextReads"]

# A context's current bookmark is looked for in the rows of its last this many runs first.
RECENT_RUNS = 10


class ContextReads:
    """A job's contexts as the state tables record them: ``StateStore``'s reads of
    bookmarks, watermarks and tracked files."""

    def __init__(self, tables: StateTables):
        self.tables = tables

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
        filters = bookmark_filters(job, context, up_to_seq)
        if context is not None:
            recent = self.tables.read(BOOKMARKS, filters, newest_within=RECENT_RUNS)
            if len(recent):
                since = max(0, pc.max(recent["run_seq"]).as_py() - RECENT_RUNS)
                found = self._resolve(job, recent, up_to_seq, since=since)
                if context in found:
                    return found
        return self._resolve(job, self.tables.read(BOOKMARKS, filters), up_to_seq)

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
            rows["run_seq"], value_set=self.tables.committed_seqs(job, since=since)))
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
        rows = self.tables.read(BOOKMARKS, bookmark_filters(job, context, up_to_seq))
        return self._resolve(job, rows, up_to_seq)[context].valid_runs

    def watermarks(self, job: str | None = None, *, up_to_seq: int | None = None
                   ) -> list[Watermark]:
        """The newest counting watermark of each job and context (a run's watermarks count
        once it succeeded in enable mode, as bookmarks do); with ``up_to_seq``, as they
        stood after that run."""
        filters: list[tuple[str, str, Any]] = [("job", "=", job)] if job else []
        if up_to_seq is not None:
            filters.append(("run_seq", "<=", up_to_seq))
        rows = self.tables.read(WATERMARKS, filters)
        committed = {name: set(self.tables.committed_seqs(name).to_pylist())
                     for name in pc.unique(rows["job"]).to_pylist()}
        newest: dict[tuple[str, str], Watermark] = {}
        for mark in sorted((watermark_from(r) for r in upgraded(WATERMARKS, rows)),
                           key=lambda w: (w.job, w.context, -w.run_seq)):
            if mark.run_seq in committed[mark.job]:
                newest.setdefault((mark.job, mark.context), mark)
        return list(newest.values())

    def bookmark_log(self, job: str, *, context: str | None = None
                     ) -> list[tuple[Bookmark, bool]]:
        """Every bookmark row of ``job`` in order, each with whether it counts (a run's
        plan counts once the run succeeded in enable mode; rewinds and resets always)."""
        filters = [("job", "=", job)] + ([("context", "=", context)] if context else [])
        rows = self.tables.read(BOOKMARKS, filters)
        committed = set(self.tables.committed_seqs(job).to_pylist())
        ordered = sorted((bookmark_from(r) for r in upgraded(BOOKMARKS, rows)),
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
        rows = self.tables.read(PROCESSED_FILES, filters)
        found = (file_from(r) for r in upgraded(PROCESSED_FILES, rows))
        return [f for f in found if run_seqs is None or f.run_seq in run_seqs]

    def tracked_files(self, job: str, context: str, run_seqs: Set[int]) -> pa.Table:
        """The files ``context`` of ``job`` tracked in the runs ``run_seqs``: a row per file
        and run, with columns path, size, modified_ms and outcome, read as Arrow columns
        (a context tracking a million files costs one read, no Python object a file).

        Raises:
            StateSchemaError: a row is newer than this deltamark.
        """
        rows = self.tables.read(PROCESSED_FILES, [("job", "=", job), ("context", "=", context)],
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
        where = [("job", "=", job), ("run_seq", "=", run_seq)]
        bookmarks = [bookmark_from(r) for r in upgraded(BOOKMARKS,
                                                         self.tables.read(BOOKMARKS, where))]
        files = [file_from(r) for r in upgraded(PROCESSED_FILES,
                                             self.tables.read(PROCESSED_FILES, where))]
        return [b for b in bookmarks if b.event == "commit"], files

def bookmark_filters(job: str, context: str | None, up_to_seq: int | None
                     ) -> list[tuple[str, str, Any]]:
    """The bookmark rows of ``job`` (and ``context``), up to run ``up_to_seq``."""
    return ([("job", "=", job)] + ([("context", "=", context)] if context else [])
            + ([] if up_to_seq is None else [("run_seq", "<=", up_to_seq)]))
