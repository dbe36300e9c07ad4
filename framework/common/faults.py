"""Fault injection for the crash tests: a no-op unless ``DELTAMARK_CRASH_AT`` is set."""

from __future__ import annotations

import os
import signal

__all__ = ["CRASH_ENV", "crash_point"]

#: Fault injection for the crash tests: ``<step>`` or ``<step>:<n>`` (the n-th time) makes
#: the process SIGKILL itself there. Steps: started, plan_recorded (between a plan's rows
#: and its run row), planned (the plan recorded, while a target's data is written), staged
#: (a target's data written, before it commits), tombstones_recorded (an apply_changes
#: write's delete tombstones committed, before its target commit), parquet_moved (after
#: each file moved into a Parquet target), target_committed, returned (the job's code
#: returned, before the run is recorded succeeded).
CRASH_ENV = "DELTAMARK_CRASH_AT"


def crash_point(step: str) -> None:
    """Fault injection for the crash tests (``DELTAMARK_CRASH_AT``); a no-op otherwise."""
    wanted = os.environ.get(CRASH_ENV)
    if not wanted:
        return
    name, _, nth = wanted.partition(":")
    if name != step:
        return
    _CRASH_COUNTS[step] = _CRASH_COUNTS.get(step, 0) + 1
    if _CRASH_COUNTS[step] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)


_CRASH_COUNTS: dict[str, int] = {}
