"""A job's committed bookmarks, as its sources plan from them.

Used by a run's sources (``JobContext``) and, before Spark starts, by the preflight that
decides whether there is anything new (``framework.run.preflight``): both see the same state.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import cast

from framework.errors import SourceError
from framework.sources import files
from framework.sources.bookmark_codec import BookmarkState, decode
from state_tables.store import StateStore
from state_tables.validity import ContextHistory

__all__ = ["BookmarkHistory"]


class BookmarkHistory:
    """The bookmarks of ``job`` in ``store``; ``up_to_seq`` reads them as they were after
    that run (a pause range), None as they are now."""

    def __init__(self, store: StateStore, job: str):
        self.store, self.job = store, job

    def current(self, context: str, kind: str, *, up_to_seq: int | None = None
                ) -> ContextHistory | None:
        """The context's resolved bookmarks, or None when it has none (or was reset).

        Raises:
            SourceError: the context holds another kind of source's bookmark.
        """
        history = self.store.histories(self.job, context=context, up_to_seq=up_to_seq).get(context)
        if history is None or history.current.event == "reset":
            return None
        if history.current.source_kind != kind:
            raise SourceError(self.job, context,
                              f"this context holds a {history.current.source_kind} bookmark, "
                              f"not a {kind} one. Give each source its own "
                              "transformation_ctx.")
        return history

    def state(self, context: str, kind: str, *, up_to_seq: int | None = None
              ) -> BookmarkState | None:
        """The context's bookmark state (its source kind's), or None."""
        history = self.current(context, kind, up_to_seq=up_to_seq)
        return decode(kind, history.current.state) if history else None

    def files(self, context: str, *, up_to_seq: int | None = None) -> files.FileBookmark | None:
        """A file context's bookmark with the files it tracks by name, or None."""
        history = self.current(context, files.SOURCE_KIND, up_to_seq=up_to_seq)
        if history is None:
            return None
        # KINDS names FileState as the file kind's state class
        state = cast(files.FileState, decode(files.SOURCE_KIND, history.current.state))
        # read on a thread of its own: the caller lists the source meanwhile
        reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="deltamark-tracked")
        reading = reader.submit(self.store.tracked_files, self.job, context,
                                history.valid_runs)
        reader.shutdown(wait=False)
        return files.FileBookmark(state=state, reading=reading)
