"""Delta targets, as the runs that write them see them (``DeltaTarget``).

Each run commits with the app transaction (``app_id(job)``, run_seq) and its record in the
commit's ``userMetadata`` under ``deltamark`` (``framework.delta`` writes them): the
transaction says which runs landed, the history which run made each commit. A run that
ended unlanded is fenced out with its transaction committed alone (``deltamarkFence``).
Rolling back and restoring are Delta RESTOREs (or an emptying, when the run created the
table) tagged ``deltamarkRollback`` or ``deltamarkRestore``; each also removes the delete
tombstones of the runs it undoes (``framework.delta.changes``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime

from framework.delta import log
from framework.delta.changes import forget_tombstones, tombstones_path
from framework.sinks.target import RestoredTarget, TargetRun, Written
from state_tables.model import RunOutput

__all__ = ["DeltaTarget", "app_id"]

logger = logging.getLogger(__name__)


#: the commit metadata of a fence (``DeltaTarget.discard``)
FENCE = "deltamarkFence"


def app_id(job: str) -> str:
    """The Delta app-transaction id of ``job``'s target commits (version = run_seq)."""
    return f"deltamark:{job}"


@dataclass(frozen=True)
class DeltaTarget:
    """A Delta table written by runs (``Target``)."""

    key: str

    def describe(self, output: RunOutput) -> str:
        return f"version {output['version']}"

    def written(self, output: RunOutput) -> Written:
        added = log.added(self.key, output["version"])
        return Written() if added is None else Written(added.rows, added.files, added.bytes)

    def runs(self, job: str, *, after_seq: int = 0) -> list[TargetRun]:
        newest = log.transaction_version(self.key, app_id(job)) or 0
        if newest <= after_seq:
            return []  # the usual answer, from the log's snapshot without its history
        found, fenced = [], False
        for commit in log.history(self.key):
            mine = commit.user_metadata.get("deltamark", {})
            fenced |= _fenced(commit, job, newest)
            if mine.get("job") == job and mine.get("run_seq", 0) > after_seq:
                found.append(TargetRun(self.key, mine["run_seq"], mine.get("run_id", "?"),
                                       commit.timestamp, commit.version, mine,
                                       {"written": True, "version": commit.version}))
        if not found and not fenced:  # its commit left the log (retention): known by number
            found.append(TargetRun(self.key, newest, "?", datetime.fromtimestamp(0, UTC),
                                   None, {}, {"written": True}))
        return found[::-1]

    def landed(self, job: str, run_seq: int) -> bool:
        newest = log.transaction_version(self.key, app_id(job)) or 0
        if newest != run_seq:
            return newest > run_seq
        # the run's own transaction: its write, or the fence of a recovery that stopped
        # before it recorded the run aborted (asked only in recoveries: the history is read)
        return not any(_fenced(commit, job, run_seq) for commit in log.history(self.key))

    def discard(self, job: str, run_seq: int) -> None:
        """Fence the run out: its app transaction committed with no data, so a write of
        it that goes on elsewhere (a Spark Connect server's, whose client died) skips or
        fails instead of landing after the next run re-read its input. (An uncommitted
        write is invisible; a table the run would have created has nothing to fence.)"""
        if log.is_table(self.key):
            log.fence(self.key, log.AppTransaction(app_id(job), run_seq),
                      user_metadata={FENCE: {"job": job, "run_seq": run_seq}})
            forget_tombstones(tombstones_path(self.key), app_id(job), from_run=run_seq)

    def roll_back(self, job: str, run_seq: int, run_id: str) -> bool:
        newest = log.history(self.key, limit=1)[0]
        mine = newest.user_metadata.get("deltamark", {})
        if (mine.get("job"), mine.get("run_seq")) != (job, run_seq):
            logger.warning("cannot roll back %s: another writer committed since", self.key)
            return False
        tag = {"deltamarkRollback": {"job": job, "run_id": run_id}}
        if newest.version == 0:
            log.delete_all(self.key, user_metadata=tag)
        else:
            log.restore(self.key, newest.version - 1, user_metadata=tag)
        forget_tombstones(tombstones_path(self.key), app_id(job), from_run=run_seq)
        return True

    def restore_blockers(self, job: str, run_seq: int) -> list[str]:
        if not log.is_table(self.key):
            return [f"{self.key} is not a Delta table here (moved or deleted? a relative "
                    f"path is read from {os.getcwd()})"]
        _, later = self._since(job, run_seq)
        return [f"{self.key} v{c.version} ({c.operation} at {c.timestamp:%Y-%m-%d %H:%M:%S}) "
                "by another writer" for c in later if not _by_deltamark(c, job)]

    def restore(self, job: str, run_seq: int, run_id: str) -> RestoredTarget | None:
        keep, later = self._since(job, run_seq)
        if not later:
            return None
        tag = {"deltamarkRestore": {"job": job, "to_run": run_id}}
        new = (log.restore(self.key, keep, user_metadata=tag) if keep is not None
               else log.delete_all(self.key, user_metadata=tag))
        forget_tombstones(tombstones_path(self.key), app_id(job), from_run=run_seq + 1)
        return RestoredTarget(self.key, later[0].version, keep, new)

    def _since(self, job: str, run_seq: int) -> tuple[int | None, list[log.Commit]]:
        """The version right after ``job``'s newest commit up to run ``run_seq`` (None:
        the table was created later), and the commits after it, newest first."""
        if not log.is_table(self.key):
            return None, []
        commits = log.history(self.key)  # newest first
        keep = next((c.version for c in commits
                     if (mine := c.user_metadata.get("deltamark", {})).get("job") == job
                     and mine.get("run_seq", 0) <= run_seq), None)
        return keep, [c for c in commits if keep is None or c.version > keep]


def _fenced(commit: log.Commit, job: str, run_seq: int) -> bool:
    """Whether ``commit`` is the fence of ``job``'s run ``run_seq``."""
    fence = commit.user_metadata.get(FENCE, {})
    return bool(fence.get("job") == job and fence.get("run_seq") == run_seq)


def _by_deltamark(commit: log.Commit, job: str) -> bool:
    """Whether ``job``'s runs or deltamark's actions on them made this target commit: a
    run's write (or the schema change before it), the rollback of a rejected run, or a
    restore."""
    meta = commit.user_metadata
    return (meta.get("deltamark", {}).get("job") == job
            or meta.get(log.SCHEMA_CHANGE, {}).get("job") == job
            or meta.get("deltamarkRollback", {}).get("job") == job
            or meta.get(FENCE, {}).get("job") == job
            or "deltamarkRestore" in meta)
