"""One run of a job at a time, one tidy of a state table at a time, and on a local disk
one commit to it at a time: leases.

A job's lease (``<state_root>/_leases/<job>.lock``) is held for the whole run and names its
holder (run id, pid, host, start time).

- On a local state root it is an exclusive OS file lock. The kernel releases it when the
  process ends, however it ends (SIGKILL included), so a dead run never blocks its job: the
  next run takes the lock and recovers what the dead one left. Shared file systems that
  honour ``flock`` (NFSv4) work too.
- On an object store it is an object created only if absent (``If-None-Match: *``), with
  an expiry the holder pushes forward every third of ``LEASE_SECONDS`` by a write
  conditional on the object's ETag. A dead run's lease expires and the next run takes it
  over (again conditionally, so of two contenders one wins); ``deltamark runs abort``
  takes over the lease of the run it aborts at once. A holder that ran on this machine (the
  same boot and process namespace) and whose process is gone is taken over at once too.

A state table's upkeep lease (``<table>/_upkeep.lock``, the same two kinds) is held while a
process compacts, checkpoints and vacuums the table; a process that finds it held leaves
the tidy to its holder.

On a local disk, appends to a state table also take turns (``<table>/_commit.lock``): a
wave of hundreds of runs committing at once would otherwise spend its time losing races
(each loser rewrites and retries; 100 appends at once took 41 s, taking turns 15). On an object
store, Delta's put-if-absent orders the commits.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypedDict, cast

from framework import storage
from framework.errors import ConcurrentRunError, WriteConflictError

__all__ = ["LEASE_SECONDS", "LeaseHolder", "commit_turn", "job_lease", "lease_holder",
           "upkeep_lease"]

log = logging.getLogger("deltamark.lease")

#: how long an object-store lease outlives its holder's last heartbeat
LEASE_SECONDS = 60


@contextlib.contextmanager
def job_lease(state_root: str | os.PathLike[str], job: str, run_id: str, *,
              take_over_from: str | None = None) -> Iterator[None]:
    """Hold ``job``'s lease for ``run_id`` while the block runs.

    Args:
        take_over_from: on an object store, take the lease even from this run while it
            has not expired (an operator aborting that run).

    Raises:
        ConcurrentRunError: another live run holds it; names that run.
    """
    lease = _lease(storage.join(os.fspath(state_root), "_leases"), f"{job}.lock", job)
    try:
        lease.acquire(_holder(run_id), take_over_from)
    except _Taken as taken:
        raise ConcurrentRunError(job, taken.holder) from None
    try:
        yield
    finally:
        lease.release()


@contextlib.contextmanager
def upkeep_lease(table: str) -> Iterator[bool]:
    """Whether this process may tidy the Delta table at ``table`` (a path or URI) now:
    yields True while it holds the table's upkeep lease (``_upkeep.lock`` in the table's
    directory, which Delta readers and VACUUM leave alone), False at once when another
    process holds it. Two compactions at once would each add a copy of the same rows."""
    lease = _lease(table, "_upkeep.lock", f"upkeep of {table}")
    try:
        lease.acquire(_holder(f"upkeep-{os.getpid()}"), None)
    except _Taken:
        yield False
        return
    try:
        yield True
    finally:
        lease.release()


@contextlib.contextmanager
def commit_turn(table: str, timeout_seconds: float) -> Iterator[None]:
    """Hold this process's turn to commit to the Delta table at ``table`` while the block
    runs: on a local disk, an exclusive lock on ``_commit.lock`` in its directory, waited
    for up to ``timeout_seconds``; elsewhere, no wait.

    Raises:
        WriteConflictError: other processes held the turn for ``timeout_seconds``.
    """
    if not storage.is_local(table):
        yield
        return
    path = storage.join(storage.local_path(table), "_commit.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline, pause = time.monotonic() + timeout_seconds, 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise WriteConflictError(table, (
                        f"other processes held its commit lock ({path}) for "
                        f"{timeout_seconds:.0f} s; nothing was written. Run again, or "
                        "start fewer runs at once on this state root.")) from None
                time.sleep(pause)
                pause = min(2 * pause, 0.05)
        yield
    finally:
        os.close(fd)  # lets the lock go


def lease_holder(state_root: str | os.PathLike[str], job: str) -> LeaseHolder | None:
    """Who holds ``job``'s lease now, or None when nobody does (or its lease expired)."""
    directory = storage.join(os.fspath(state_root), "_leases")
    if not storage.is_local(directory):
        holder, _ = _ObjectLease(directory, f"{job}.lock", job).read()
        return None if holder is None or _expired(holder) or _gone(holder) else holder
    path = storage.join(storage.local_path(directory), f"{job}.lock")
    if not os.path.exists(path):
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _parse(os.pread(fd, 4096, 0))
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class LeaseHolder(TypedDict, total=False):
    """Who holds a job's lease, as its lock file or object holds it (JSON, read by other
    processes; ``{}`` when unreadable)."""

    run_id: str
    pid: int
    host: str
    #: this boot and pid namespace (``_machine``): where ``pid`` names one process
    machine: str | None
    since: str  # ISO time the lease was taken
    expires: str  # an object-store lease's: ISO time, pushed forward by its heartbeat


def _holder(run_id: str) -> LeaseHolder:
    return {"run_id": run_id, "pid": os.getpid(), "host": socket.gethostname(),
            "machine": _machine(), "since": datetime.now(UTC).isoformat(timespec="seconds")}


def _machine() -> str | None:
    """This boot of this machine and this process namespace: where a pid means one process
    (containers on one host share the boot but not the namespace)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            return f"{boot.read().strip()}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return None


def _gone(holder: LeaseHolder) -> bool:
    """Whether the holder ran here and its process has ended (no need to wait for expiry)."""
    if holder.get("machine") is None or holder.get("machine") != _machine():
        return False
    try:
        os.kill(int(holder["pid"]), 0)
    except ProcessLookupError:
        return True
    except (OSError, KeyError, TypeError, ValueError):
        return False
    return False


class _Taken(Exception):  # noqa: N818 - an outcome of acquire, caught in this module
    """Another live holder has the lease."""

    def __init__(self, holder: LeaseHolder):
        super().__init__(holder)
        self.holder = holder


class _Lease(Protocol):
    def acquire(self, holder: LeaseHolder, take_over_from: str | None) -> None:
        """Take the lease for ``holder``; raises ``_Taken`` naming who has it."""

    def release(self) -> None:
        """Let the lease go."""


def _lease(directory: str, name: str, purpose: str) -> _Lease:
    """Lease ``name`` in ``directory``: a file lock on a local disk, an object elsewhere."""
    if storage.is_local(directory):
        return _FileLease(storage.join(storage.local_path(directory), name))
    return _ObjectLease(directory, name, purpose)


class _FileLease:
    """An exclusive OS lock on a file, which the kernel releases when its process ends."""

    def __init__(self, path: str):
        self.path = path
        self.fd: int | None = None

    def acquire(self, holder: LeaseHolder, take_over_from: str | None) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            found = _parse(os.pread(fd, 4096, 0))
            os.close(fd)
            raise _Taken(found) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


class _ObjectLease:
    """A lease object on an object store, kept alive by a heartbeat while held."""

    def __init__(self, directory: str, name: str, purpose: str):
        self.purpose = purpose
        self.store = storage.object_store(directory)
        self.key = name
        self.tag: str | None = None
        self.stop = threading.Event()
        self.beating: threading.Thread | None = None

    def read(self) -> tuple[LeaseHolder | None, str | None]:
        """The holder and the object's ETag, or (None, None) when there is no lease."""
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            found = obstore.get(self.store, self.key)
        except (NotFoundError, FileNotFoundError):
            return None, None
        return _parse(bytes(found.bytes())), found.meta["e_tag"]

    def acquire(self, holder: LeaseHolder, take_over_from: str | None) -> None:
        self.tag = self._take(holder, take_over_from)
        self.beating = threading.Thread(target=self._heartbeat, args=(holder,),
                                        name=f"lease {self.key}", daemon=True)
        self.beating.start()

    def release(self) -> None:
        import obstore

        self.stop.set()
        if self.beating is not None:
            self.beating.join()
        with contextlib.suppress(Exception):  # an expired lease is released anyway
            if self.read()[1] == self.tag:
                obstore.delete(self.store, self.key)

    def _heartbeat(self, holder: LeaseHolder) -> None:
        from obstore.exceptions import PreconditionError

        while not self.stop.wait(LEASE_SECONDS / 3):
            try:
                self.tag = self._put(holder, {"e_tag": self.tag})
            except PreconditionError:
                log.error("%s: %s lost its lease (it expired and another process took it "
                          "over)", self.purpose, holder.get("run_id"))
                return
            except Exception as exc:  # noqa: BLE001 - a network blip: the next beat tries again
                log.warning("%s: lease heartbeat failed (%s)", self.purpose, exc)

    def _take(self, holder: LeaseHolder, take_over_from: str | None) -> str | None:
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        try:
            return self._put(holder, "create")
        except AlreadyExistsError:
            pass
        current, tag = self.read()
        if current is not None and not _expired(current) and not _gone(current) and \
                current.get("run_id") != take_over_from:
            raise _Taken(current)
        try:  # expired, dead, or the operator's: take it over unless someone just did
            return self._put(holder, {"e_tag": tag} if tag else "create")
        except (AlreadyExistsError, PreconditionError):
            raise _Taken(self.read()[0] or {}) from None

    def _put(self, holder: LeaseHolder, mode: Any) -> str | None:
        import obstore

        expires = datetime.now(UTC) + timedelta(seconds=LEASE_SECONDS)
        body = json.dumps({**holder, "expires": expires.isoformat(timespec="seconds")})
        return obstore.put(self.store, self.key, body.encode(), mode=mode)["e_tag"]


def _expired(holder: LeaseHolder) -> bool:
    try:
        return datetime.fromisoformat(holder["expires"]) < datetime.now(UTC)
    except (KeyError, TypeError, ValueError):
        return True  # no readable expiry: not a lease anyone can be holding


def _parse(raw: bytes) -> LeaseHolder:
    try:
        found = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return {}
    return cast(LeaseHolder, found) if isinstance(found, dict) else {}
