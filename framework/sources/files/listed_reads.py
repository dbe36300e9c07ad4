"""Spark reads of files deltamark has listed already, with their sizes and times.

Given explicit paths, Spark checks each one before reading it: on S3 that is three
requests a file (an existence check, then a listing and a HEAD), and a name holding
``[``, ``{`` or ``*`` is taken for a glob (not found, or another file read). Given a
*manifest* instead, the metadata log that Spark's own file sink keeps beside its output
(one line per file: URI, size, time), Spark plans from the manifest alone. So deltamark
writes a run's manifest into a private local directory and has Spark load it: the files
are read without one more request each, whatever their names. Spark reads the manifest
again whenever it plans the DataFrame anew (a v2 writer such as ``df.writeTo`` does), so
manifests stay until ``release_manifests`` (the runner's, when the job's code returns; at
the latest when the process exits).

Spark infers partition columns (``key=value`` directories) from the files' own paths,
walking up from each file. That matches a read below ``base_path`` exactly when neither
``base_path`` nor a directory above it is named ``key=value``; in the rare layouts where
one is, the files are read as explicit paths (glob characters escaped), as before.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar, overload
from urllib.parse import quote

from framework.spark.session import default_parallelism, is_connect, temporary_conf
from framework.storage import is_local

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

__all__ = ["ListedFile", "read_each", "read_listed", "release_manifests"]

#: files of an object store read at once by ``read_each`` (each read is a round trip)
REMOTE_READERS = 16
MANIFEST_VERSION = "v1"  # FileStreamSinkLog.VERSION, unchanged since Spark 2.0
GLOB_CHARACTER = re.compile(r"([\\\[\]{}*?])")  # escaped with a backslash in Hadoop globs


#: the manifest directories of this process's reads not yet released
_manifests: list[str] = []


def release_manifests() -> None:
    """Remove the manifests of the reads made so far: their DataFrames can no longer be
    read."""
    while _manifests:
        shutil.rmtree(_manifests.pop(), ignore_errors=True)


atexit.register(release_manifests)


@dataclass(frozen=True)
class ListedFile:
    """A file as listed: ``path`` is what Spark reads (absolute path or URI)."""

    path: str
    size: int
    modified_ms: int


Read = TypeVar("Read")


def read_each(read: Callable[[ListedFile], Read], files: Sequence[ListedFile]) -> list[Read]:
    """``read`` of each of ``files``, in order: on an object store ``REMOTE_READERS`` at
    once; on local disk one after another (faster than threads: 0.35 s for 10,000 small
    files against 0.9 s with 16 threads, and 2 ms against 13 ms for 100)."""
    if len(files) < 2 or all(is_local(f.path) for f in files):
        return [read(file) for file in files]
    with ThreadPoolExecutor(min(REMOTE_READERS, len(files))) as pool:
        return list(pool.map(read, files))


def read_listed(spark: SparkSession, files: Sequence[ListedFile], *, format: str,
                options: Mapping[str, str], schema: StructType | str | None,
                base_path: str | None) -> DataFrame:
    """``files`` (not empty) as one DataFrame, with the partition columns of their
    ``key=value`` directories below ``base_path`` (none without one).

    Raises:
        ValueError: Spark would not read every file: a reader option filters some, some
            are in ``key=value`` directories and others not (Spark skips those), or a
            local file's name holds ``:``.
    """
    if unreadable := next((f.path for f in files if "://" not in f.path
                           and ":" in os.path.basename(f.path)), None):
        raise ValueError(  # Hadoop parses the name of its checksum file as a URI
            f"{unreadable}: Spark cannot read a local file whose name holds ':'. Rename it, "
            "or exclude it (exclusions)")
    reader = spark.read.format(format).options(**options)
    if schema is not None:
        reader = reader.schema(schema)
    # a Connect server reads no manifest in this process's temporary directory
    layout = "explicit" if is_connect(spark) else _layout(files, base_path, options)
    if layout == "explicit":
        if base_path:
            reader = reader.option("basePath", base_path)
        with _explicit_path_listing(spark, [f.path for f in files]):
            return reader.load([GLOB_CHARACTER.sub(r"\\\1", f.path) for f in files])
    if layout == "flat":  # else Spark would read only files directly in the manifest's dir
        reader = reader.option("recursiveFileLookup", "true")
    manifest = tempfile.mkdtemp(prefix="deltamark-read-")
    _manifests.append(manifest)
    _write_manifest(manifest, files)
    with temporary_conf(spark, {"spark.sql.streaming.fileStreamSink.ignoreMetadata":
                                "false"}):
        df = reader.load(manifest)
        if schema is None and (nullable := _nullable(df.schema)) != df.schema:
            # Spark's other file reads make every column nullable; a manifest's read
            # keeps what the files declare (Avro's non-null fields)
            df = reader.schema(nullable).load(manifest)
    if (planned := len(df._jdf.inputFiles())) != len(files):
        raise ValueError(
            f"Spark planned {planned} of the {len(files)} files listed under "
            f"{base_path or files[0].path}: does a reader option filter files "
            f"({', '.join(sorted(options)) or 'none given'})? Use exclusions instead")
    return df


def _layout(files: Sequence[ListedFile], base_path: str | None,
            options: Mapping[str, str]) -> Literal["flat", "partitioned", "explicit"]:
    """``flat``: no partition columns to infer; ``partitioned``: Spark infers them from
    the manifest's paths as it would below ``base_path``; ``explicit``: it would not.

    Raises:
        ValueError: some files are in ``key=value`` directories, others not.
    """
    if any(key.lower() == "basepath" for key in options):
        return "explicit"  # the user's own, which must be an ancestor of what Spark loads
    if base_path is None:
        return "flat"
    prefix = base_path.rstrip("/") + "/"
    inside = {f.path: any("=" in d for d in f.path.removeprefix(prefix).split("/")[:-1])
              for f in files}
    if not any(inside.values()):
        return "flat"
    if not all(inside.values()):
        outside = next(path for path, partitioned in inside.items() if not partitioned)
        raise ValueError(
            f"{outside} is not in a key=value directory below {base_path} while other files "
            "are: Spark would skip it. Move it, or exclude it (exclusions)")
    above = base_path.split("://", 1)[-1].strip("/").split("/")
    return "explicit" if any("=" in d for d in above) else "partitioned"


@overload
def _nullable(data_type: StructType) -> StructType: ...
@overload
def _nullable(data_type: DataType) -> DataType: ...
def _nullable(data_type: DataType) -> DataType:
    """``data_type`` with every field, element and value nullable."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(data_type, StructType):
        return StructType([StructField(f.name, _nullable(f.dataType), True, f.metadata)
                           for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return ArrayType(_nullable(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(_nullable(data_type.keyType), _nullable(data_type.valueType), True)
    return data_type


def _write_manifest(directory: str, files: Sequence[ListedFile]) -> None:
    os.mkdir(os.path.join(directory, "_spark_metadata"))
    with open(os.path.join(directory, "_spark_metadata", "0"), "w") as out:
        out.write(MANIFEST_VERSION)
        for f in files:
            out.write("\n" + json.dumps({
                "path": _hadoop_uri(f.path), "size": f.size, "isDir": False,
                "modificationTime": f.modified_ms, "blockReplication": 1,
                "blockSize": 32 * 1024 * 1024, "action": "add"}))


def _hadoop_uri(path: str) -> str:
    """The URI Hadoop's ``Path`` parses back into ``path`` (spaces, ``%``, ``#``, ``?``
    and non-ASCII characters percent-encoded)."""
    if "://" not in path:
        return "file://" + quote(path, safe="/")
    scheme, rest = path.split("://", 1)
    authority, _, key = rest.partition("/")
    return f"{scheme}://{authority}/{quote(key, safe='/')}"


def _explicit_path_listing(spark: SparkSession, paths: Sequence[str]
                           ) -> contextlib.AbstractContextManager[None]:
    """Size the check Spark makes of each explicit path before reading.

    By default more than 32 paths start a listing job of up to 10,000 tasks: 20 s for
    10,000 files on 2 cores. Local files are checked on the driver instead (~1 s per
    10,000). Remote ones are requests, one after another within a task: a job of one task
    per core of the application, so that a cluster checks them all at once.
    """
    if all("://" not in p for p in paths):
        return temporary_conf(spark, {
            "spark.sql.sources.parallelPartitionDiscovery.threshold": str(len(paths) + 1)})
    return temporary_conf(spark, {
        "spark.sql.sources.parallelPartitionDiscovery.parallelism":
        str(min(len(paths), default_parallelism(spark)))})
