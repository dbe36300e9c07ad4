"""How many runs get going at once on this machine: run slots.

A scheduler starts hundreds of ``deltamark run`` at the top of the hour, and most find
nothing new. Started all at once, each imports its libraries at the same time as all the
others (~40 MB of private memory and ~0.4 s of CPU each: 1,000 at once on 2 cores and
24 GB ran the kernel out of memory), and the process whose turn it is to commit to a
state table gets a sliver of a core while hundreds wait for the turn.

So a ``deltamark run`` process first takes one of the machine's run slots, before it
imports anything heavy, and gives it back when it starts Spark (a real run's work is
Spark's to schedule) or ends (a skip). A slot is an exclusive ``flock`` on a file in the
user's runtime or temporary directory: the kernel gives it back when the process ends,
however it ends. A process finding every slot taken sleeps in the kernel, queued on one.
``DELTAMARK_RUN_SLOTS`` sets how many there are (default: 4 per core; 0: no limit).

This module imports only the standard library: it runs before the rest of a command loads.
"""

from __future__ import annotations

import fcntl
import os
import tempfile

__all__ = ["SLOTS_ENV", "directory", "give_back", "slot_count", "take"]

SLOTS_ENV = "DELTAMARK_RUN_SLOTS"
#: slots per core the machine gives this process, by default
PER_CORE = 4

_held: int | None = None  # the descriptor of the slot this process holds


def slot_count() -> int:
    """How many runs may get going at once here (0: any number): ``DELTAMARK_RUN_SLOTS``,
    else ``PER_CORE`` per core this process may use."""
    configured = os.environ.get(SLOTS_ENV, "").strip()
    if configured:
        try:
            return max(int(configured), 0)
        except ValueError:
            raise ValueError(f"{SLOTS_ENV}={configured!r} is not a whole number of run "
                             "slots (0: no limit)") from None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return PER_CORE * (cores or 1)


def directory() -> str:
    """Where this machine's run slots are, for this user (``<n>.lock``, n from 0)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return os.path.join(base, f"deltamark-run-slots-{os.getuid()}")


def take() -> None:
    """Hold one of this machine's run slots, waiting (asleep) until one is free. Where
    there is no limit, or no temporary directory to share, it returns at once."""
    global _held
    count = slot_count()
    if _held is not None or count == 0:
        return
    slots: list[int] = []
    try:
        os.makedirs(directory(), mode=0o700, exist_ok=True)
        for n in range(count):
            slots.append(os.open(os.path.join(directory(), f"{n}.lock"),
                                 os.O_RDWR | os.O_CREAT, 0o600))
        free = next((fd for fd in slots if _locked(fd, wait=False)), None)
        if free is None:  # queue on one slot: processes started together spread over all
            free = slots[os.getpid() % count]
            _locked(free, wait=True)
    except OSError:  # no directory to share, or no flock there: no limit
        free = None
    for fd in slots:
        if fd != free:
            os.close(fd)
    _held = free


def give_back() -> None:
    """Give back this process's run slot, if it holds one."""
    global _held
    if _held is not None:
        os.close(_held)  # lets the lock go
        _held = None


def _locked(fd: int, *, wait: bool) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
