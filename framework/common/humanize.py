"""Figures as people read them: sizes, counts, durations, times, and what a run read.

The CLI's text and the operations page say things in these words; ``--json`` and the
page's ``/api/`` routes keep the raw values.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TypeVar

__all__ = ["NOTHING_NEW", "ago", "duration", "fold", "job_states", "local_time", "node_state",
           "plural", "read", "size", "utc"]

T = TypeVar("T")

#: a workflow job (or run) whose job runs found nothing new and were skipped
NOTHING_NEW = "skipped: nothing new"


def size(n_bytes: int) -> str:
    """``127706`` -> ``128 KB`` (decimal units, three significant figures)."""
    if n_bytes < 1000:
        return plural(n_bytes, "byte")
    for unit, scale in (("KB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12)):
        value = float(f"{n_bytes / scale:.3g}")
        if value < 1000 or unit == "TB":
            return f"{value:g} {unit}"
    raise AssertionError("unreachable: the last unit returns")


def plural(count: int, noun: str) -> str:
    """``plural(1, "file")`` -> ``1 file``; ``plural(3, "file")`` -> ``3 files``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def duration(seconds: float) -> str:
    """``0.031`` -> ``0.03 s``; ``8.2`` -> ``8.2 s``; ``65`` -> ``1 min 5 s``; ``7500`` ->
    ``2 h 5 min``."""
    if seconds < 1:
        return f"{seconds:.1g} s"
    if seconds < 59.5:
        return f"{seconds:.1f} s" if seconds < 9.95 else f"{seconds:.0f} s"
    whole = round(seconds)
    for unit, scale, smaller, smaller_scale in (("d", 86400, "h", 3600),
                                                ("h", 3600, "min", 60), ("min", 60, "s", 1)):
        if whole >= scale:
            rest = whole % scale // smaller_scale
            return f"{whole // scale} {unit}" + (f" {rest} {smaller}" if rest else "")
    raise AssertionError("unreachable: 59.5 seconds or more round to a minute at least")


def ago(when: datetime, now: datetime | None = None) -> str:
    """How long before ``now`` (default: this moment), in its largest unit: ``5 min ago``,
    ``3 h ago``, ``2 d ago``."""
    seconds = int(((now or datetime.now(UTC)) - when).total_seconds())
    for unit, scale in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= scale:
            return f"{seconds // scale} {unit} ago"
    return f"{seconds} s ago" if seconds >= 1 else "just now"


def local_time(when: datetime) -> str:
    """``when`` in this machine's time zone, to the second: ``2026-11-27 00:39:46``."""
    return f"{when.astimezone():%Y-%m-%d %H:%M:%S}"


def utc(when: datetime) -> str:
    """``when`` in UTC, to the second, saying so: ``2026-11-27 00:39:46 UTC``."""
    return f"{when.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def read(counts: Mapping[str, int]) -> str:
    """What one source of a run read, from its counts in the runs table: files
    (``1 of 3 files (5.11 KB)``, and what it left), Delta versions, Iceberg snapshots or
    database rows; counts
    of another shape (an older deltamark's) as they are."""
    if "to_version" in counts:
        last = counts["to_version"]
        first = counts.get("from_version", last)
        if counts.get("versions", last - first + 1) <= 0:
            return f"no new version (at version {last})"
        read = f"version {last}" if first == last else f"versions {first} to {last}"
        return read + (f", {plural(counts['backlog'], 'version')} left for later runs"
                       if counts.get("backlog") else "")
    if "files" in counts:
        said = [(f"{counts['files']} of {plural(counts['listed'], 'file')}"
                 if "listed" in counts else plural(counts["files"], "file"))
                + (f" ({size(counts['bytes'])})" if "bytes" in counts else "")]
        if counts.get("backlog"):
            said.append(f"{counts['backlog']} left for later runs")
        if counts.get("rewritten_skipped"):
            said.append(f"{plural(counts['rewritten_skipped'], 'rewritten file')} skipped")
        if counts.get("too_old"):
            said.append(f"{counts['too_old']} older than max_file_age")
        return ", ".join(said)
    if "rows" in counts:
        return plural(counts["rows"], "row")
    if "snapshots" in counts:  # an Iceberg table's
        read = plural(counts["snapshots"], "snapshot") if counts["snapshots"] else (
            "no new snapshot")
        return read + (f", {counts['backlog']} left for later runs"
                       if counts.get("backlog") else "")
    return ", ".join(f"{value} {key}" for key, value in counts.items()) or "nothing counted"


def job_states(jobs: Mapping[str, int], nothing_new: int = 0) -> str:
    """How many of a workflow run's jobs ended in each state, those that succeeded with
    nothing new apart: ``2 SUCCEEDED, 1 nothing new``."""
    counts = {**jobs, "SUCCEEDED": jobs.get("SUCCEEDED", 0) - nothing_new,
              "nothing new": nothing_new}
    return ", ".join(f"{count} {state}" for state, count in sorted(counts.items()) if count)


def node_state(state: str, *, nothing_new: bool) -> str:
    """A workflow job's state (or a workflow run's) as shown: ``NOTHING_NEW`` when its runs
    found nothing new (the stored state stays SUCCEEDED)."""
    return NOTHING_NEW if nothing_new else state


def fold(items: Sequence[T], *, skipped: Callable[[T], bool],
         group: Callable[[T], Hashable] = lambda _: None) -> list[T | list[T]]:
    """``items`` in order, with each stretch of two or more consecutive skipped ones
    (consecutive within their ``group``: a job, a workflow) gathered in one list, at the
    place of its first."""
    shown: list[T | list[T]] = []
    stretches: dict[Hashable, list[T]] = {}
    for item in items:
        key = group(item)
        if not skipped(item):
            stretches.pop(key, None)
            shown.append(item)
        elif key in stretches:
            stretches[key].append(item)
        else:
            stretches[key] = [item]
            shown.append(stretches[key])
    return [s[0] if isinstance(s, list) and len(s) == 1 else s for s in shown]
