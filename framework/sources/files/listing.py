"""What a file context's run lists (its roots, a full listing when due, the
listing handed over from preflight), and what is new before Spark starts.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from framework.sources import Backlog
from framework.sources.bookmark_codec import encode
from framework.sources.files import events as file_events
from framework.sources.files.model import FileBookmark, FilesDescription, FileSource, FileState, log
from framework.sources.files.planning import plan_files
from framework.sources.files.roots import Listing, list_found, list_roots

if TYPE_CHECKING:
    from framework.sources import Bookmarks

__all__ = ["list_files", "listed_for_run", "new_items"]


def list_files(source: FileSource, bookmark: FileBookmark | None = None, *,
               now_ms: int | None = None) -> Listing:
    """The files under ``source.paths`` a plan from ``bookmark`` needs: all of them, or
    with a partial listing mode, the keys after those the bookmark has listed, unless a
    full listing is due (``reconcile_every``, or a bookmark that does not track every
    file by name yet).

    Raises:
        FileNotFoundError: a path does not exist.
        ValueError: the event queue cannot be read.
    """
    full = _full_listing_due(source, bookmark, now_ms)
    if source.listing == "notifications" and source.queue:
        events = file_events.receive(source.queue, source.paths)
        if events.elsewhere:
            log.warning("%d objects announced in %s are not under %s: their messages are "
                        "taken all the same", events.elsewhere, source.queue,
                        ", ".join(source.paths))
        listing = (list_roots(source.paths, recurse=source.recurse,
                              exclusions=source.exclusions) if full else
                   Listing(list_found(source.paths, events.found,
                                      exclusions=source.exclusions), complete=False))
        return dataclasses.replace(listing, acknowledge=events.acknowledge)
    return list_roots(source.paths, recurse=source.recurse, exclusions=source.exclusions,
                      after=None if full or bookmark is None
                      else _listing_bounds(source, bookmark.state))


def _full_listing_due(source: FileSource, bookmark: FileBookmark | None,
                      now_ms: int | None) -> bool:
    """A full listing: the mode's, a first run's, one due by ``reconcile_every``, or a
    bookmark's that does not track every file by name yet."""
    if source.listing == "full" or bookmark is None:
        return True
    state = bookmark.state
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return (state.settled_ms is not None or state.full_listing_ms is None
            or now_ms - state.full_listing_ms >= source.reconcile_ms)


def _listing_bounds(source: FileSource, state: FileState) -> dict[str, str]:
    if source.listing == "start_after":
        return dict(state.listed_up_to)
    # partitions: the directory holding the greatest key is listed again, whole
    return {root: key.rpartition("/")[0] + "/" if "/" in key else ""
            for root, key in state.listed_up_to.items()}


def new_items(context: str, description: FilesDescription, bookmarks: Bookmarks,
              connections: Callable[[str], Any]) -> Backlog:
    """The files a read described by ``description`` would read, newly set aside (named
    in its run) or leave for later runs (a bound) that ``context``'s bookmark does not
    track, with their bytes (``framework.sources.SourceKind``)."""
    source = FileSource.from_description(description)
    bookmark = bookmarks.files(context)
    if source.queue and not _full_listing_due(source, bookmark, None):
        # taking the messages would hide them from the run: the queue says about how many
        return Backlog(file_events.waiting(source.queue), "message", exact=False)
    listing = list_files(source, bookmark)
    plan = plan_files(listing, source, start=bookmark, advance=True)
    new = len(plan.files) + len(plan.set_aside) + plan.backlog
    if new:
        _handed_over[_handover_key(source, bookmark)] = listing
        while len(_handed_over) > MAX_HANDED_OVER:
            del _handed_over[next(iter(_handed_over))]
    return Backlog(new, "file", bytes=plan.bytes + plan.backlog_bytes
                   + sum(s.file.size for s in plan.set_aside))


#: listings the no-op check made and found something new in, for the run that follows
#: (``listed_for_run``): by source description and bookmark state, the newest last
_handed_over: dict[str, Listing] = {}
MAX_HANDED_OVER = 4


def _handover_key(source: FileSource, bookmark: FileBookmark | None) -> str:
    state = encode(bookmark.state) if bookmark else None
    return json.dumps([source.description(), state], sort_keys=True, default=str)


def listed_for_run(source: FileSource, bookmark: FileBookmark | None) -> Listing:
    """The listing a run plans from: the one its no-op check just made against the same
    bookmark, if there is one (listed once, not twice: a file landing since belongs to
    the next run, as one landing during the run does), else a new one (``list_files``).
    """
    return (_handed_over.pop(_handover_key(source, bookmark), None)
            or list_files(source, bookmark))
