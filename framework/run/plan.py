"""What one run reads and will commit: each context's plan and watermark.

``JobContext`` fills a ``RunPlan`` as the job reads: every source kind is planned the same
way (``RunPlan.plan``), from the job's bookmarks as the run's mode reads them, or, in a
replay, from what the interrupted run pinned. The runner records the plan before each
target commits (``unpersisted``), and each target commit carries it (``record``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from framework.errors import JobError, MissingContextError
from framework.run.bookmarks import BookmarkHistory
from framework.run.modes import BookmarkOptions
from framework.sources import files
from framework.sources.bookmark_codec import BookmarkState, encode
from state_tables.model import Bookmark, ProcessedFile, RunRecord, Watermark

__all__ = ["PinnedRead", "RunIdentity", "RunPlan", "SourceRead", "WorkflowRun"]

log = logging.getLogger("deltamark.run")


@dataclass(frozen=True)
class SourceRead:
    """What one context of this run reads, and its state once the run commits."""

    context: str
    kind: str
    counts: Mapping[str, int]
    state: BookmarkState | None
    files_read: tuple[files.ListedFile, ...] = ()
    #: files tracked without being read (``FilePlan.set_aside``)
    set_aside: tuple[files.SetAside, ...] = ()
    #: rows read in earlier runs are read again (a lookback): appending them duplicates
    rereads: bool = False
    #: how to plan this source again without Spark (``framework.run.preflight``); None: it
    #: cannot be, and the job's next run always starts Spark
    description: Mapping[str, Any] | None = None
    #: the plan reads nothing (no file, no version, no row)
    nothing: bool = False
    #: once the run's bookmarks count: let go of what planning consumed (queue messages)
    acknowledge: Callable[[], None] | None = None


@dataclass(frozen=True)
class PinnedRead:
    """What one context of an interrupted run had planned: replays read exactly this."""

    files: tuple[files.ListedFile, ...]
    state: BookmarkState | None


@dataclass(frozen=True)
class WorkflowRun:
    """The workflow run a job runs in (none when run alone), and the run properties it
    started with: the workflow's, the workflow run's, and those earlier jobs published."""

    name: str | None = None
    run_id: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunIdentity:
    """Which run this is."""

    job: str
    run_id: str
    run_seq: int
    #: run_seq of the runs named by --bookmark-from / --bookmark-to, in pause mode.
    range_seqs: tuple[int, int] | None = None
    #: a replay of an interrupted run: each context's pinned plan
    pinned: Mapping[str, PinnedRead] | None = None
    #: 1 for a first try, +1 for each retry or replay
    attempt: int = 1
    workflow: WorkflowRun = field(default_factory=WorkflowRun)


class RunPlan:
    """The reads and watermarks of run ``run``, planned from ``bookmarks`` for the mode of
    ``options``."""

    def __init__(self, run: RunIdentity, options: BookmarkOptions, bookmarks: BookmarkHistory):
        self.run, self.options, self.bookmarks = run, options, bookmarks
        self.reads: dict[str, SourceRead] = {}
        self.watermarks: dict[str, Watermark] = {}  # by transformation_ctx
        #: each context's kind and the bookmark state it was planned from, as stored
        self.started: dict[str, tuple[str, dict[str, Any] | None]] = {}
        #: the run ends as a pause run: its bookmarks and watermarks do not count
        self.held = False
        self._persisted: set[str] = set(run.pinned or ())  # a replay's plan is recorded
        self._recorded_watermarks: set[str] = set()

    # --- planning ---------------------------------------------------------------------

    def context(self, transformation_ctx: str | None, bookmark: bool, what: str) -> str:
        """The context a read of ``what`` plans under; an untracked read gets a name.

        Raises:
            JobError: the context is read twice in this run.
            MissingContextError: a tracked read without ``transformation_ctx``.
        """
        if transformation_ctx:
            if transformation_ctx in self.reads:
                raise JobError(self.run.job, f"transformation_ctx '{transformation_ctx}' is "
                               "used twice in one run; give each source its own.")
            return transformation_ctx
        if bookmark and self.options.reads_bookmark:
            raise MissingContextError(self.run.job, what)
        return f"(untracked) {what}"

    def plan(self, context: str, kind: str, *, tracked: bool,
             plan: Callable[[Any, Any, bool], Any],
             pinned: Callable[[PinnedRead], Any]) -> Any:
        """Plan one source of kind ``kind``: ``plan(start, end, advance)``, from the
        context's bookmarks as the run's mode reads them (none when not ``tracked``), or
        in a replay ``pinned(read)``, from what the interrupted run pinned."""
        replayed = (self.run.pinned or {}).get(context)
        if replayed is not None and (replayed.state is not None or replayed.files):
            return pinned(replayed)
        if not tracked or not self.options.reads_bookmark:
            return plan(None, None, False)

        def bookmark_at(seq: int | None) -> Any:
            if kind == files.SOURCE_KIND:  # with the files it tracks by name
                return self.bookmarks.files(context, up_to_seq=seq)
            return self.bookmarks.state(context, kind, up_to_seq=seq)

        if self.run.range_seqs:
            first, last = self.run.range_seqs
            start = bookmark_at(first)
            found = plan(start, bookmark_at(last), False)
        else:
            start = bookmark_at(None)
            found = plan(start, None, self.options.advances)
        state = start.state if kind == files.SOURCE_KIND and start is not None else start
        self.started[context] = (kind, None if state is None else encode(state))
        return found

    def add(self, read: SourceRead) -> None:
        self.reads[read.context] = read

    def update_state(self, context: str, state: BookmarkState) -> None:
        """Replace the state ``context`` commits (what reading it found, e.g. its files'
        schema)."""
        self.reads[context] = dataclasses.replace(self.reads[context], state=state)

    def count(self, context: str, name: str, value: int) -> None:
        """Add a count to what ``context`` read (e.g. its malformed records)."""
        read = self.reads[context]
        self.reads[context] = dataclasses.replace(read, counts={**read.counts, name: value})

    def committed(self) -> None:
        """The run succeeded: where its bookmarks count, each read lets go of what its
        planning consumed. A failure here loses nothing (the messages come back, and a
        later run finds their files tracked), so it is only logged."""
        if self.held or not self.options.advances:
            return
        for read in self.reads.values():
            if read.acknowledge is not None:
                try:
                    read.acknowledge()
                except Exception as exc:  # noqa: BLE001 - see above
                    log.warning("%s: what planning consumed was not let go, a later run "
                                "will: %s", read.context, exc)

    # --- what the reads tell the writes -----------------------------------------------

    def rereading(self) -> list[str]:
        """The contexts that read rows again (a lookback)."""
        return [r.context for r in self.reads.values() if r.rereads]

    def read_nothing(self) -> bool:
        """Every source was read, and none had anything to read."""
        return bool(self.reads) and all(r.nothing for r in self.reads.values())

    # --- what the runner records ------------------------------------------------------

    def inputs(self) -> dict[str, Mapping[str, int]]:
        return {r.context: r.counts for r in self.reads.values()}

    def sources(self) -> dict[str, Mapping[str, Any] | None]:
        """Each context's description for planning it again (``SourceRead.description``)."""
        return {r.context: r.description for r in self.reads.values()}

    def planned_files(self) -> dict[str, list[str]]:
        return {r.context: [f.path for f in r.files_read] for r in self.reads.values()}

    def set_aside(self) -> dict[str, list[tuple[str, str]]]:
        """Each context's files tracked without being read: (path, outcome)."""
        return {r.context: [(s.file.path, s.outcome) for s in r.set_aside]
                for r in self.reads.values() if r.set_aside}

    def unpersisted(self) -> tuple[list[Bookmark], list[ProcessedFile], list[Watermark]]:
        """The bookmark rows, processed files and watermarks not yet written to the state
        tables, which are now taken as written (the runner writes them)."""
        reads = [r for r in self.reads.values() if r.context not in self._persisted]
        marks = [w for c, w in self.watermarks.items() if c not in self._recorded_watermarks]
        self._persisted.update(r.context for r in reads)
        self._recorded_watermarks.update(w.context for w in marks)
        return (*self._rows(reads), marks)

    def record(self) -> RunRecord:
        """What this run's target commits carry (``target_runs.run_record``)."""
        from framework.run.targets import run_record  # a run's, not a skip's
        bookmarks, tracked = self._rows(self.reads.values())
        return run_record(self.run.job, self.run.run_id, self.run.run_seq,
                          "pause" if self.held else self.options.mode, bookmarks, tracked,
                          self.watermarks.values())

    def _rows(self, reads: Iterable[SourceRead]) -> tuple[list[Bookmark], list[ProcessedFile]]:
        bookmarks = [Bookmark(job=self.run.job, context=r.context, run_id=self.run.run_id,
                              run_seq=self.run.run_seq, source_kind=r.kind,
                              state=encode(r.state))
                     for r in reads if r.state is not None]
        tracked = [self._tracked(r.context, f, "read") for r in reads for f in r.files_read]
        tracked += [self._tracked(r.context, s.file, s.outcome) for r in reads
                    for s in r.set_aside]
        return bookmarks, tracked

    def _tracked(self, context: str, file: files.ListedFile, outcome: str) -> ProcessedFile:
        return ProcessedFile(job=self.run.job, context=context, run_id=self.run.run_id,
                             run_seq=self.run.run_seq, path=file.path, size=file.size,
                             modified_ms=file.modified_ms, outcome=outcome)
