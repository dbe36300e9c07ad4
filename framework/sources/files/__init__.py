"""Incremental file sources: list the files, plan against the bookmark, read with Spark.

A file context tracks every file it has met by name, in the ``processed_files`` state
table: its path, size and modification time, and its outcome (read, or set aside and why).
A file not tracked yet is new, whatever its modification time: a file copied in with an
old one (``rsync -a``, ``cp -p``, ``tar x``), an S3 multipart upload older than the last
listing, a writer with a skewed clock. Nothing is left unread without being named:

- ``max_file_age`` (opt-in, as Glue's and Structured Streaming's): a new file older than
  that is not read but tracked with outcome ``too_old``, counted, and named in the log;
- a file read before that shows up again with another size or modification time has been
  rewritten: policy ``ignore`` (default) tracks its new version as ``rewritten`` without
  reading it, ``reprocess`` reads it again;
- a bounded run (``bounded_files``, ``bounded_size``) reads the oldest first and leaves
  the rest, untracked, to the next runs.

Listing (``listing``): ``full`` lists everything under the roots every run. Where keys
arrive in lexical order, ``start_after`` lists only the keys after the greatest key
tracked, and ``partitions`` lists the date-named or ``key=value`` directory holding it and
those after it; ``notifications`` takes what S3 event notifications in an SQS queue
announce (``framework.sources.files.events``). Each lists in full every
``reconcile_every`` (keys are sometimes out of order, events are not guaranteed), and a
file found so is read like any new one.

A bookmark written by a deltamark that counted every file modified before a *settled*
time as processed keeps that meaning for the files it saw: the next run tracks those
files by name (outcome ``adopted``), and from then on only names count.

By phase: model.py (a source, its bookmark state and plan), listing.py (what a run's
sources list, and what is new before Spark starts), planning.py (the listing against the
bookmark), reading.py (the plan read with Spark, by column name); beside them, roots.py
(listing the roots, in full or from a key), events.py (S3 event notifications),
listed_reads.py, json_schema.py, schema_drift.py, malformed.py and avro.py.
"""

from framework.sources.files.listed_reads import ListedFile
from framework.sources.files.listing import list_files, listed_for_run, new_items
from framework.sources.files.model import (
    DEFAULT_RECONCILE_MS,
    LISTING_MODES,
    NOT_READ,
    SOURCE_KIND,
    TRACKED,
    FileBookmark,
    FileFormat,
    FilePlan,
    FileSource,
    FileState,
    ListingMode,
    Outcome,
    RewritePolicy,
    SetAside,
)
from framework.sources.files.planning import plan_files, within_partitions
from framework.sources.files.reading import FilesRead, first_malformed, parse_exclusions, read_files

__all__ = [
    "DEFAULT_RECONCILE_MS",
    "LISTING_MODES",
    "NOT_READ",
    "SOURCE_KIND",
    "TRACKED",
    "FileBookmark",
    "FileFormat",
    "FilePlan",
    "FileSource",
    "FileState",
    "FilesRead",
    "ListedFile",
    "ListingMode",
    "Outcome",
    "RewritePolicy",
    "SetAside",
    "first_malformed",
    "list_files",
    "listed_for_run",
    "new_items",
    "parse_exclusions",
    "plan_files",
    "read_files",
    "within_partitions",
]
