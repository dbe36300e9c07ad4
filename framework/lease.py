"""One run of a job at a time: an exclusive OS file lock per job under the state root.

The lock (``<state_root>/_leases/<job>.lock``) is held for the whole run and names its
holder (run id, pid, host, start time). The kernel releases it when the process ends,
however it ends (SIGKILL included), so a dead run never blocks its job: the next run
takes the lock and recovers what the dead one left. Works on local disks and on shared
file systems that honour ``flock`` (NFSv4); not on object stores.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from framework.errors import ConcurrentRunError

__all__ = ["job_lease", "lease_holder"]


def _path(state_root: Path, job: str) -> Path:
    return Path(state_root) / "_leases" / f"{job}.lock"


@contextlib.contextmanager
def job_lease(state_root: Path, job: str, run_id: str) -> Iterator[None]:
    """Hold ``job``'s lease for ``run_id`` while the block runs.

    Raises:
        ConcurrentRunError: another live process holds it; names that run.
    """
    path = _path(state_root, job)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConcurrentRunError(job, _read(fd)) from None
        holder = {"run_id": run_id, "pid": os.getpid(), "host": socket.gethostname(),
                  "since": datetime.now(UTC).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def lease_holder(state_root: Path, job: str) -> dict[str, Any] | None:
    """Who holds ``job``'s lease now, or None when nobody does."""
    path = _path(state_root, job)
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read(fd: int) -> dict[str, Any]:
    raw = os.pread(fd, 4096, 0)
    try:
        return json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return {}
