"""What the table sources (Delta, Iceberg) share: their options (where a context without a
bookmark starts, and the cap of one run in whole versions or snapshots)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, Self, TypeGuard

__all__ = ["Cap", "TableSource", "is_count", "starting_time", "time_problems"]


def is_count(value: object) -> TypeGuard[int]:
    """An int, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def starting_time(value: datetime | str | None) -> datetime | None:
    """A ``starting_timestamp`` as an aware datetime (text: an ISO date or time; no zone:
    UTC).

    Raises:
        ValueError, TypeError: text that is not an ISO date or time; another type.
    """
    if value is None:
        return None
    when = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def time_problems(value: datetime | str | None) -> list[str]:
    """What is wrong with a ``starting_timestamp``, naming it."""
    try:
        starting_time(value)
    except (TypeError, ValueError):
        return ["starting_timestamp must be a datetime or an ISO date or time "
                f"('2026-12-01T08:00:00Z'), not {value!r}"]
    return []


@dataclass(frozen=True)
class Cap:
    """At most ``files`` data files added, or ``size`` bytes, a run (``bounded_files``,
    ``bounded_size``): whole versions or snapshots, at least one."""

    files: int | None = None
    size: int | None = None

    def problems(self) -> list[str]:
        """What is wrong with the options, one line each, naming them."""
        found = []
        if self.files is not None and self.size is not None:
            found.append("give bounded_files or bounded_size, not both")
        for name, value in (("bounded_files", self.files), ("bounded_size", self.size)):
            if value is not None and (not is_count(value) or value < 1):
                found.append(f"{name} must be a positive integer, not {value!r}")
        return found

    def __bool__(self) -> bool:
        return self.files is not None or self.size is not None

    def taken(self, added: Iterable[tuple[int, int]]) -> int:
        """How many of the units (versions, snapshots) that added ``added`` (files and
        bytes each, oldest first; read only as far as needed) one run takes."""
        limit = self.files if self.files is not None else self.size
        total = count = 0
        for count, (files, size) in enumerate(added, 1):
            total += files if self.files is not None else size
            if limit is not None and total > limit and count > 1:
                return count - 1
        return count


@dataclass(frozen=True)
class TableSource:
    """How a context reads a table of its kind: ``table``; where it starts without a
    bookmark (at most one of ``start``, given as the kind's ``POSITION`` option: a
    version or snapshot, that one included, or ``"latest"`` for what is committed after
    the first run; ``starting_timestamp``: the first one committed at or after it, naive
    times being UTC); and what one run takes at most (``cap``)."""

    #: the job's name for ``start`` (``starting_version``), and what it names
    POSITION: ClassVar[str]
    UNIT: ClassVar[str]

    table: str
    start: int | Literal["latest"] | None = None
    starting_timestamp: datetime | str | None = None
    bounded_files: int | None = None
    bounded_size: int | None = None

    def problems(self) -> list[str]:
        """What is wrong with the options, one line each (naming the option)."""
        found = []
        if self.start is not None and self.starting_timestamp is not None:
            found.append(f"give {self.POSITION} or starting_timestamp, not both")
        if self.start not in (None, "latest") and not (
                is_count(self.start) and self.start >= 0):
            found.append(f"{self.POSITION} must be a {self.UNIT} or 'latest', not "
                         f"{self.start!r}")
        return [*found, *time_problems(self.starting_timestamp), *self.cap.problems()]

    @property
    def cap(self) -> Cap:
        return Cap(self.bounded_files, self.bounded_size)

    @property
    def starting_time(self) -> datetime | None:
        """``starting_timestamp`` as an aware datetime."""
        return starting_time(self.starting_timestamp)

    @property
    def starting(self) -> str | None:
        """The starting position as the job gave it (``starting_version=5``), if any."""
        if self.start is not None:
            return f"{self.POSITION}={self.start}"
        when = self.starting_time
        return None if when is None else f"starting_timestamp={when.isoformat()}"

    def plain(self) -> dict[str, Any]:
        """The options as JSON-ready data (a run's description of the read)."""
        when = self.starting_time
        return {"table": self.table, self.POSITION: self.start,
                "starting_timestamp": None if when is None else when.isoformat(),
                "bounded_files": self.bounded_files, "bounded_size": self.bounded_size}

    @classmethod
    def from_plain(cls, data: Any) -> Self:
        """The options ``plain`` gave."""
        return cls(data["table"], data.get(cls.POSITION), data.get("starting_timestamp"),
                   data.get("bounded_files"), data.get("bounded_size"))
