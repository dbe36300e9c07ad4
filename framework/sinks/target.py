"""What every kind of target does for the runs that write it: ``Target``.

A run names each target it writes by a key (a Delta table's or a directory's path, or
``jdbc://<connection>/<table>``) and records it in ``Run.outputs``. Each kind (``delta``,
``parquet``, ``jdbc`` in this package) keeps, with the rows it commits, which run of which
job committed them and that run's record (``TargetRun``); ``Target`` reads that back to
recover, roll back and restore runs, whatever the kind. ``framework.sinks.target_of``
picks the kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from state_tables.codecs import typed_value
from state_tables.model import Bookmark, ProcessedFile, RunOutput, RunRecord, Watermark

__all__ = ["MAX_RECORDED_FILES", "PrunedTarget", "RestoredTarget", "Target", "TargetRun",
           "Written"]

#: a target commit names the files a context tracked in its run up to this many
MAX_RECORDED_FILES = 1000


@dataclass(frozen=True)
class TargetRun:
    """One run of a job as a target holds it."""

    target: str
    run_seq: int
    run_id: str
    committed_at: datetime
    #: the Delta version of its commit; None in other kinds of target
    version: int | None
    #: its ``target_runs.run_record`` (empty for commits made before deltamark wrote one)
    record: RunRecord
    #: the run's entry for this target among its outputs (``Run.outputs``)
    output: RunOutput

    def plan(self) -> tuple[list[Bookmark], list[ProcessedFile], list[Watermark]]:
        """The state rows the run committed, rebuilt from its record.

        Raises:
            ValueError: the record lacks what the rows need (named in the message).
        """
        if not self.record:
            raise ValueError("its commit carries no record (made before deltamark kept "
                             "one, or no longer in the table's log)")
        job, run_id, seq = self.record["job"], self.run_id, self.run_seq
        bookmarks, files = [], []
        for context, entry in self.record.get("bookmarks", {}).items():
            if "kind" not in entry:
                raise ValueError(f"its commit predates the records deltamark keeps in "
                                 f"targets (context {context} has no kind)")
            # "window": a record of a deltamark that named only the files read after the
            # bookmark's settled time
            tracked = entry.get("files", entry.get("window", []))
            if tracked is None:
                raise ValueError(f"context {context} tracked more than "
                                 f"{MAX_RECORDED_FILES} files in the run, which the commit "
                                 "does not list")
            bookmarks.append(Bookmark(job=job, context=context, run_id=run_id, run_seq=seq,
                                      source_kind=entry["kind"], state=entry["state"]))
            files += [ProcessedFile(job=job, context=context, run_id=run_id, run_seq=seq,
                                    path=path, size=size, modified_ms=modified,
                                    outcome=rest[0] if rest else "read")
                      for path, size, modified, *rest in tracked]
        marks = [Watermark(job=job, context=context, run_id=run_id, run_seq=seq,
                           column=m["column"], aggregate=m["aggregate"],
                           value=typed_value(m["value"], m["value_type"]),
                           value_type=m["value_type"], rows=m["rows"])
                 for context, m in self.record.get("watermarks", {}).items()]
        return bookmarks, files, marks


@dataclass(frozen=True)
class RestoredTarget:
    """A Delta target returned to its content right after the run rewound to."""

    target: str
    from_version: int
    to_version: int | None  # None: the table was created later, so it is now emptied
    new_version: int


@dataclass(frozen=True)
class PrunedTarget:
    """A Parquet target whose files from runs after the run rewound to were deleted."""

    target: str
    removed_runs: tuple[int, ...]
    removed_files: int


@dataclass(frozen=True)
class Written:
    """What a run's commit put in a target, each figure None when the target cannot say."""

    rows: int | None = None
    files: int | None = None
    bytes: int | None = None


class Target(Protocol):
    """A target as the runs of a job see it, whatever its kind."""

    @property
    def key(self) -> str:
        """How runs name it (``Run.outputs``'s key)."""

    def describe(self, output: RunOutput) -> str:
        """What a run wrote here, in words, from its output entry (``Run.outputs``)."""

    def written(self, output: RunOutput) -> Written:
        """What a run's commit put here, from its output entry (and, for a Delta table,
        the commit's log entry)."""

    def runs(self, job: str, *, after_seq: int = 0) -> list[TargetRun]:
        """The runs of ``job`` committed here with a run_seq above ``after_seq``, oldest
        first."""

    def landed(self, job: str, run_seq: int) -> bool:
        """Whether run ``run_seq`` of ``job`` committed here."""

    def discard(self, job: str, run_seq: int) -> None:
        """Remove what run ``run_seq``, unfinished, left here without committing."""

    def roll_back(self, job: str, run_seq: int, run_id: str) -> bool:
        """Undo run ``run_seq``'s commit (a data-quality gate rejected a later write of
        the run): whether it was undone. It is not when it is no longer the newest commit
        here (logged), or when its rows were never committed."""

    def restore_blockers(self, job: str, run_seq: int) -> list[str]:
        """Why this target cannot return to its content right after run ``run_seq``:
        empty when it can (``restore``)."""

    def restore(self, job: str, run_seq: int, run_id: str
                ) -> RestoredTarget | PrunedTarget | None:
        """Return to the content right after run ``run_seq`` (``run_id``) committed,
        removing what later runs of ``job`` committed: what changed, or None."""
