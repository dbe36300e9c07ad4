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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from framework.storage import filesystem, is_local, object_store
from state_tables.rows import arrow_array, arrow_scalar

__all__ = ["LISTED", "Listing", "list_found", "list_roots"]

#: a listing's columns: the URI Spark reads, size, modification time, and the file's key
#: below its root with the root's index in the source's paths
LISTED = pa.schema([("path", pa.string()), ("size", pa.int64()), ("modified_ms", pa.int64()),
                    ("root", pa.int32()), ("key", pa.string())])


#: files converted to Arrow at a time
CHUNK = 65536


@dataclass(frozen=True)
class Listing:
    """The files found under a source's roots (``LISTED`` rows, in no order)."""

    files: pa.Table
    #: every file under every root was listed (not only keys after a bound)
    complete: bool
    #: once the run planned from it has committed: what the listing consumed is let go
    #: (an event queue's messages)
    acknowledge: Callable[[], None] | None = None

    def __len__(self) -> int:
        return len(self.files)


def list_roots(paths: Sequence[str], *, recurse: bool, exclusions: Sequence[str],
               after: Mapping[str, str] | None = None) -> Listing:
    """The data files under ``paths`` minus hidden files and ``exclusions`` (glob patterns
    on the URI or the key); with ``after``, only the keys greater than ``after[root]``
    under the roots it names (a root it does not name is listed in full).

    A million files cost the store's listing plus Arrow columns: no Python object a file
    outlives the listing.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    after = after or {}
    parts, complete = [], True
    for index, root in enumerate(paths):
        fs, base, to_uri = filesystem(root)
        info = fs.get_file_info(base)
        if info.type == pafs.FileType.File:
            prefix = base[:len(base) - len(base.rpartition("/")[2])]
            found = _files([base], [info.size], [info.mtime_ns])
        elif info.type != pafs.FileType.Directory:
            if _an_empty_prefix(root, fs, base):
                continue
            raise FileNotFoundError(f"{root} does not exist")
        elif root in after and recurse:
            complete = False
            prefix = base.rstrip("/") + "/"
            found = _files(*zip(*_after(root, fs, prefix, after[root]), strict=True))
        else:
            prefix = base.rstrip("/") + "/"
            found = _all_files(fs, base, recurse)
        parts.append(_data_files(found, index, prefix, to_uri(""), exclusions))
    return Listing(pa.concat_tables(parts) if parts else LISTED.empty_table(),
                   complete=complete)


def _an_empty_prefix(root: str, fs: pafs.FileSystem, base: str) -> bool:
    """Whether ``root`` is a prefix with nothing under it in a bucket that exists: on an
    object store a prefix exists only once an object is under it (a new job's landing zone
    before its first file), as an empty directory on a disk; a missing bucket stays an
    error."""
    bucket, _, key = base.partition("/")
    return (not is_local(root) and bool(key.strip("/"))
            and fs.get_file_info(bucket).type == pafs.FileType.Directory)


def list_found(paths: Sequence[str], found: Iterable[tuple[int, str, int, int]], *,
               exclusions: Sequence[str]) -> pa.Table:
    """``LISTED`` rows of files found otherwise than by listing (root index, native path,
    size, modification time in ns each), less hidden files and ``exclusions``."""
    by_root: dict[int, list[tuple[str, int, int]]] = {}
    for index, path, size, mtime_ns in found:
        by_root.setdefault(index, []).append((path, size, mtime_ns))
    parts = []
    for index, rows in sorted(by_root.items()):
        _, base, to_uri = filesystem(paths[index])
        parts.append(_data_files(_files(*zip(*rows, strict=True)), index,
                                 base.rstrip("/") + "/", to_uri(""), exclusions))
    return pa.concat_tables(parts) if parts else LISTED.empty_table()


def _files(paths: Sequence[str] = (), sizes: Sequence[int | None] = (),
           mtimes_ns: Sequence[int | None] = ()) -> pa.Table:
    """Native paths with their sizes and modification times (ns) as a table (a directory
    has neither: its size is null)."""
    return pa.table({"path": arrow_array(paths, pa.string()),
                     "size": arrow_array(sizes, pa.int64()),
                     "mtime_ns": arrow_array(mtimes_ns, pa.int64())})


def _all_files(fs: pafs.FileSystem, base: str, recurse: bool) -> pa.Table:
    found = fs.get_file_info(pafs.FileSelector(base, recursive=recurse))
    parts = []
    while found:  # to Arrow a slice at a time, each FileInfo freed once converted
        part = found[-CHUNK:]
        del found[-CHUNK:]
        parts.append(_files([i.path for i in part], [i.size for i in part],
                            [i.mtime_ns for i in part]))
    listed = pa.concat_tables(parts) if parts else _files()
    return listed.filter(pc.is_valid(listed["size"]))  # a directory has no size


def _data_files(found: pa.Table, root: int, prefix: str, scheme: str,
                exclusions: Sequence[str]) -> pa.Table:
    """``found`` (under ``prefix``) as ``LISTED`` rows, less hidden files and
    ``exclusions``."""
    key = pc.utf8_slice_codeunits(found["path"], len(prefix))
    uri = pc.binary_join_element_wise(arrow_scalar(scheme, pa.string()), found["path"],
                                      arrow_scalar("", pa.string())) if scheme else found["path"]
    keep = pc.invert(pc.match_substring_regex(key, "(^|/)[_.]"))
    if not pc.all(keep).as_py():  # a name starting with _ or .: hidden unless key=value
        keep = arrow_array([k or not _hidden(key) for k, key in zip(
            keep.to_pylist(), key.to_pylist(), strict=True)], pa.bool_())
    if exclusions:
        keep = arrow_array([k and not any(fnmatch.fnmatchcase(u, p) or fnmatch.fnmatchcase(n, p)
                                          for p in exclusions)
                            for k, u, n in zip(keep.to_pylist(), uri.to_pylist(),
                                               key.to_pylist(), strict=True)], pa.bool_())
    listed = pa.table([uri, found["size"],
                       pc.divide(found["mtime_ns"], arrow_scalar(1_000_000, pa.int64())),
                       pa.nulls(len(found), pa.int32()).fill_null(
                           arrow_scalar(root, pa.int32())), key], schema=LISTED)
    return listed if pc.all(keep).as_py() else listed.filter(keep)


def _hidden(key: str) -> bool:
    return any(part.startswith(("_", ".")) and "=" not in part for part in key.split("/"))


def _after(root: str, fs: pafs.FileSystem, prefix: str, bound: str
           ) -> Iterator[tuple[str, int, int]]:
    """(native path, size, modification time in ns) of the files under ``root`` whose key
    is greater than ``bound``."""
    if is_local(root):
        yield from _local_after(prefix, "", bound)
        return
    import obstore

    for batch in obstore.list(object_store(root), offset=bound, chunk_size=1000):
        for item in batch:
            key, size = item["path"], item["size"]
            # obstore lists a folder marker ("key/", as S3A and consoles make) as "key"
            if size == 0 and (not key or fs.get_file_info(prefix + key).type
                              != pafs.FileType.File):
                continue
            yield prefix + key, size, int(item["last_modified"].timestamp() * 1000) * 1_000_000


def _local_after(prefix: str, directory: str, bound: str) -> Iterator[tuple[str, int, int]]:
    """The files below ``prefix + directory`` whose key is greater than ``bound``,
    skipping each directory whose keys all sort before it (``D/...`` < ``bound`` unless
    ``bound`` itself starts with ``D/``)."""
    with os.scandir(prefix + directory) as entries:
        ordered = sorted(entries, key=lambda e: e.name)
    for entry in ordered:
        key = directory + entry.name
        if entry.is_dir(follow_symlinks=True):
            inside = key + "/"
            if inside > bound or bound.startswith(inside):
                yield from _local_after(prefix, inside, bound)
        elif key > bound and entry.is_file(follow_symlinks=True):
            stat = entry.stat()
            yield prefix + key, stat.st_size, stat.st_mtime_ns
