"""Listing a file source's roots: in full, or from a key on (``Listing``).

A full listing returns every file under each root. Where keys arrive in lexical order
(timestamps or sequence numbers in the names, date-named directories), a listing can start
from a key instead, and cost what is new rather than everything ever landed: on an object
store, a ``ListObjectsV2`` with ``StartAfter``; on local disk, a sorted walk that skips the
directories whose every key lies before it. ``framework.sources.files`` chooses which
(its listing modes) and reconciles partial listings with full ones.

Like Spark, names starting with ``_`` or ``.`` are hidden (``_SUCCESS``, ``.crc``,
``_delta_log``), except ``key=value`` partition directories.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from framework.storage import filesystem, is_local, local_path, object_store

__all__ = ["LISTED", "Listing", "list_roots"]

#: a listing's columns: the URI Spark reads, size, modification time, and the file's key
#: below its root with the root's index in the source's paths
LISTED = pa.schema([("path", pa.string()), ("size", pa.int64()), ("modified_ms", pa.int64()),
                    ("root", pa.int32()), ("key", pa.string())])


@dataclass(frozen=True)
class Listing:
    """The files found under a source's roots (``LISTED`` rows, in no order)."""

    files: pa.Table
    #: every file under every root was listed (not only keys after a bound)
    complete: bool

    def __len__(self) -> int:
        return len(self.files)


def list_roots(paths: Sequence[str], *, recurse: bool, exclusions: Sequence[str],
               after: Mapping[str, str] | None = None) -> Listing:
    """The data files under ``paths`` minus hidden files and ``exclusions`` (glob patterns
    on the URI or the key); with ``after``, only the keys greater than ``after[root]``
    under the roots it names (a root it does not name is listed in full).

    Raises:
        FileNotFoundError: a path does not exist.
    """
    after = after or {}
    columns: dict[str, list] = {name: [] for name in LISTED.names}
    complete = True
    for index, root in enumerate(paths):
        fs, base, to_uri = filesystem(root)
        info = fs.get_file_info(base)
        if info.type == pafs.FileType.File:
            found: Iterator[tuple[str, int, int]] = iter(
                [(os.path.basename(base), info.size, info.mtime_ns // 1_000_000)])
            prefix = base[:len(base) - len(os.path.basename(base))]
        elif info.type != pafs.FileType.Directory:
            raise FileNotFoundError(f"{root} does not exist")
        elif root in after and recurse:
            complete = False
            prefix = base.rstrip("/") + "/"
            found = _keys_after(root, fs, prefix, after[root])
        else:
            prefix = base.rstrip("/") + "/"
            found = _all_keys(fs, base, recurse)
        for key, size, modified_ms in found:
            if ("/_" in f"/{key}" or "/." in f"/{key}") and _hidden(key):
                continue
            uri = to_uri(prefix + key)
            if exclusions and any(fnmatch.fnmatchcase(uri, p) or fnmatch.fnmatchcase(key, p)
                                  for p in exclusions):
                continue
            columns["path"].append(uri)
            columns["size"].append(size)
            columns["modified_ms"].append(modified_ms)
            columns["root"].append(index)
            columns["key"].append(key)
    return Listing(pa.table(columns, schema=LISTED), complete=complete)


def _hidden(key: str) -> bool:
    return any(part.startswith(("_", ".")) and "=" not in part for part in key.split("/"))


def _all_keys(fs: pafs.FileSystem, base: str, recurse: bool) -> Iterator[tuple[str, int, int]]:
    cut = len(base.rstrip("/")) + 1
    for item in fs.get_file_info(pafs.FileSelector(base, recursive=recurse)):
        if item.type == pafs.FileType.File:
            yield item.path[cut:], item.size, item.mtime_ns // 1_000_000


def _keys_after(root: str, fs: pafs.FileSystem, prefix: str, bound: str
                ) -> Iterator[tuple[str, int, int]]:
    if is_local(root):
        yield from _local_keys_after(local_path(root), "", bound)
        return
    import obstore

    for batch in obstore.list(object_store(root), offset=bound, chunk_size=1000):
        for item in batch:
            key, size = item["path"], item["size"]
            # obstore lists a folder marker ("key/", as S3A and consoles make) as "key"
            if size == 0 and (not key or fs.get_file_info(prefix + key).type
                              != pafs.FileType.File):
                continue
            yield key, size, int(item["last_modified"].timestamp() * 1000)


def _local_keys_after(base: str, directory: str, bound: str) -> Iterator[tuple[str, int, int]]:
    """The files below ``base/directory`` whose key is greater than ``bound``, skipping
    each directory whose keys all sort before it (``D/...`` < ``bound`` unless ``bound``
    itself starts with ``D/``)."""
    with os.scandir(os.path.join(base, directory)) as entries:
        ordered = sorted(entries, key=lambda e: e.name)
    for entry in ordered:
        key = directory + entry.name
        if entry.is_dir(follow_symlinks=True):
            inside = key + "/"
            if inside > bound or bound.startswith(inside):
                yield from _local_keys_after(base, inside, bound)
        elif key > bound and entry.is_file(follow_symlinks=True):
            stat = entry.stat()
            yield key, stat.st_size, stat.st_mtime_ns // 1_000_000
