"""Sources jobs read incrementally: one module (or package: ``files``) per kind,
registered in ``KINDS``.

A kind's module describes a read so that it can be planned again without Spark, plans it
from a bookmark, reads it, and answers what ``SourceKind`` asks; its bookmark is a frozen
dataclass (``framework.sources.bookmark_codec``). A new kind is its module, its entry here
and the ``JobContext`` method jobs read it with.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from framework.common import humanize

if TYPE_CHECKING:
    from framework.jdbc import Connection

__all__ = ["KINDS", "Backlog", "Bookmarks", "SourceKind", "source_kind"]

#: each source kind's module and bookmark state class, imported when first needed (a
#: read-only command showing a bookmark does not import every source's dependencies)
KINDS = {"files": "framework.sources.files:FileState",
         "delta": "framework.sources.delta:DeltaState",
         "jdbc": "framework.sources.jdbc:JdbcState",
         "iceberg": "framework.sources.iceberg:IcebergState"}


class Bookmarks(Protocol):
    """A job's committed bookmarks, as a source plans from them
    (``framework.run.bookmarks.BookmarkHistory``)."""

    def files(self, context: str) -> Any:
        """A file context's bookmark with the files it tracks (``files.FileBookmark``)."""

    def state(self, context: str, kind: str) -> Any:
        """The context's bookmark state, of its kind's class; None without one."""


@dataclass(frozen=True)
class Backlog:
    """What a source has past its context's bookmark, told without Spark: ``count`` of
    ``unit`` (file, version, row, message), and for files their ``bytes``. Not ``exact``:
    a database says whether a row is new, not how many; a queue, about how many
    messages it holds."""

    count: int
    unit: str
    bytes: int | None = None
    exact: bool = True

    def __bool__(self) -> bool:
        return self.count > 0

    def __str__(self) -> str:
        """``3 files (12.3 KB)``, ``2 versions``, ``new rows``, ``about 40 messages``."""
        if not self.exact:
            return (f"about {humanize.plural(self.count, self.unit)}" if self.count > 1
                    else f"new {self.unit}s" if self.count else f"no new {self.unit}s")
        said = humanize.plural(self.count, self.unit)
        return said if self.bytes is None or not self.count else (
            f"{said} ({humanize.size(self.bytes)})")


class SourceKind(Protocol):
    """What deltamark asks of a source kind's module, besides reading."""

    SOURCE_KIND: str

    def new_items(self, context: str, description: Any,
                  bookmarks: Bookmarks, connections: Callable[[str], Connection]
                  ) -> Backlog | None:
        """What the source a run described (``SourceRead.description``: the kind's own
        ``<Kind>Description``, read back from ``Run.sources``) has past ``context``'s
        bookmark in ``bookmarks``, told without Spark (a count of 0 is nothing new); None
        when it cannot be told here."""


def source_kind(kind: str) -> SourceKind | None:
    """The module of the source ``kind``; None for a kind this deltamark does not know."""
    if kind not in KINDS:
        return None
    return importlib.import_module(KINDS[kind].partition(":")[0])
