"""Where files live: local paths and object-store URIs (``s3://``, ``s3a://``), in one module.

Every other module addresses storage through these functions, never with ``Path(uri)``
(which folds ``s3://`` into ``s3:/``). Object-store configuration is what an AWS user
already has: the standard environment variables (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``,
``AWS_PROFILE``) and files, read by delta-rs, pyarrow, obstore and Spark's S3A themselves.
Only what those libraries cannot derive (an ``http://`` endpoint, S3A's endpoint and path
style) is set here, plus the per-bucket endpoint and region of conf's ``buckets:``
(``configure``); credentials never pass through deltamark.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode

import pyarrow.fs as pafs

if TYPE_CHECKING:
    from obstore.store import S3Config

__all__ = ["BucketSettings", "absolute", "configure", "delta_options", "exists", "filesystem",
           "is_local", "join", "local_path", "object_store", "read_bytes", "spark_conf"]

S3_SCHEMES = ("s3", "s3a", "s3n")


@dataclass(frozen=True)
class BucketSettings:
    """Options of one S3 bucket that differ from the AWS environment's (``buckets:``)."""

    #: the bucket's S3 endpoint (``https://...``; ``http://`` for a local server)
    endpoint_url: str | None = None
    region: str | None = None

# conf's per-bucket options (``buckets:``), for this process, like the AWS variables.
_buckets: dict[str, BucketSettings] = {}


def configure(buckets: Mapping[str, BucketSettings]) -> None:
    """Address each bucket of ``buckets`` with its own endpoint and region from now on."""
    if dict(buckets) != _buckets:
        _buckets.clear()
        _buckets.update(buckets)
        _bucket_filesystem.cache_clear()


def is_local(uri: str | os.PathLike[str]) -> bool:
    """Whether ``uri`` is a local path (plain, or ``file:``)."""
    text = os.fspath(uri)
    return "://" not in text or text.startswith("file:")


def local_path(uri: str | os.PathLike[str]) -> str:
    """The absolute local path of a local ``uri``."""
    text = os.fspath(uri)
    return os.path.abspath(text.removeprefix("file://") if text.startswith("file://")
                           else text.removeprefix("file:"))


def absolute(uri: str | os.PathLike[str]) -> str:
    """A local ``uri`` as an absolute path; an object-store URI as given."""
    return local_path(uri) if is_local(uri) else os.fspath(uri)


def join(root: str | os.PathLike[str], *parts: str) -> str:
    """``root``/``parts``: a local path joined as the OS does, a URI with ``/``."""
    text = os.fspath(root)
    if is_local(text):
        return os.path.join(text, *parts)
    return "/".join([text.rstrip("/"), *(p.strip("/") for p in parts)])


def filesystem(root: str) -> tuple[pafs.FileSystem, str, Callable[[str], str]]:
    """The filesystem holding ``root``, ``root``'s path on it, and a function turning a
    path on it back into a URI Spark reads (``s3a://...`` stays ``s3a``)."""
    if is_local(root):
        return pafs.LocalFileSystem(), local_path(root), lambda p: p
    scheme, rest = root.split("://", 1)
    # Spark's Hadoop names for S3; pyarrow knows the store as s3.
    found = _bucket_filesystem("s3" if scheme in S3_SCHEMES else scheme, rest.split("/", 1)[0])
    return found, rest.rstrip("/"), lambda p: f"{scheme}://{p}"


@functools.lru_cache(maxsize=64)
def _bucket_filesystem(scheme: str, bucket: str) -> pafs.FileSystem:
    """One filesystem per bucket (making one without a region resolves the bucket's
    region: a request)."""
    query = ""
    if scheme == "s3" and (own := _buckets.get(bucket)):
        query = "?" + urlencode(_named(own, "endpoint_override", "region"))
    return pafs.FileSystem.from_uri(f"{scheme}://{bucket}{query}")[0]


def exists(uri: str) -> bool:
    """Whether there is a file (or directory) at ``uri``."""
    fs, path, _ = filesystem(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def modified(uri: str) -> datetime | None:
    """When the file at ``uri`` was last modified (UTC), or None when there is none."""
    fs, path, _ = filesystem(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound or info.mtime is None:
        return None
    return info.mtime.astimezone(UTC)


def footprint(uri: str) -> tuple[int, int]:
    """How many files lie under ``uri``, and their bytes (0, 0 when nothing is there)."""
    fs, path, _ = filesystem(uri)
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return 0, 0
    found = [i for i in fs.get_file_info(pafs.FileSelector(path, recursive=True))
             if i.type == pafs.FileType.File]
    return len(found), sum(i.size for i in found)


def delete_older_than(uri: str, seconds: float) -> int:
    """Delete the files under ``uri`` last modified more than ``seconds`` ago; returns how
    many."""
    fs, path, _ = filesystem(uri)
    cutoff = time.time() - seconds
    old = [i.path for i in fs.get_file_info(pafs.FileSelector(path, allow_not_found=True,
                                                              recursive=True))
           if i.type == pafs.FileType.File and i.mtime is not None
           and i.mtime.timestamp() <= cutoff]
    for found in old:
        fs.delete_file(found)
    return len(old)


def read_bytes(uri: str) -> bytes | None:
    """The whole content of the file at ``uri``, or None when there is none."""
    fs, path, _ = filesystem(uri)
    try:
        with fs.open_input_stream(path) as stream:
            return stream.read()
    except FileNotFoundError:
        return None


def write_bytes(uri: str, data: bytes) -> None:
    """Make ``data`` the whole content of the file at ``uri`` (creating its folders)."""
    fs, path, _ = filesystem(uri)
    if is_local(uri):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with fs.open_output_stream(path) as stream:
        stream.write(data)


def delete(uri: str) -> None:
    """Remove the file at ``uri`` if there is one."""
    fs, path, _ = filesystem(uri)
    with contextlib.suppress(FileNotFoundError):
        fs.delete_file(path)


def object_store(uri: str) -> Any:
    """An obstore store rooted at ``uri``, for what needs put-if-absent (the job lease)."""
    from obstore.store import from_url

    own = _own(uri)
    # _named's keys are the S3Config options "endpoint" and "region", its values strings
    config = cast("S3Config", _named(own, "endpoint", "region"))
    return from_url(uri.replace("s3a://", "s3://", 1).replace("s3n://", "s3://", 1),
                    config=config or None,
                    client_options={"allow_http": True} if _plain_http(own, os.environ)
                    else None)


def delta_options(uri: str, *, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """delta-rs ``storage_options`` for the table at ``uri``: its bucket's options from
    conf; the rest comes from the environment, which delta-rs reads itself."""
    if is_local(uri):
        return {}
    own = _own(uri)
    options = _named(own, "AWS_ENDPOINT_URL", "AWS_REGION")
    if _plain_http(own, environ):
        options["AWS_ALLOW_HTTP"] = "true"
    return options


def pyiceberg_options(*, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """pyiceberg's S3 FileIO properties from the AWS environment (what S3A reads too);
    the unset ones left out."""
    found = {"s3.endpoint": _endpoint(environ),
             "s3.region": environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION"),
             "s3.access-key-id": environ.get("AWS_ACCESS_KEY_ID"),
             "s3.secret-access-key": environ.get("AWS_SECRET_ACCESS_KEY"),
             "s3.session-token": environ.get("AWS_SESSION_TOKEN")}
    return {key: value for key, value in found.items() if value}


def spark_conf(*, buckets: Mapping[str, BucketSettings] | None = None,
               environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Spark conf for object stores: ``s3://`` served by S3A, S3A pointed at
    ``AWS_ENDPOINT_URL`` and ``AWS_REGION`` when they are set, and each of ``buckets`` at
    its own endpoint and region (S3A's per-bucket options). Credentials stay in the
    environment, where S3A's default providers find them."""
    conf = {"spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
    conf |= _s3a_conf("spark.hadoop.fs.s3a", _endpoint(environ),
                      environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION"))
    for name, own in (buckets or {}).items():
        conf |= _s3a_conf(f"spark.hadoop.fs.s3a.bucket.{name}", own.endpoint_url, own.region)
    return conf


def _s3a_conf(prefix: str, endpoint: str | None, region: str | None) -> dict[str, str]:
    conf: dict[str, str] = {}
    if endpoint:
        conf |= {f"{prefix}.endpoint": endpoint, f"{prefix}.path.style.access": "true",
                 f"{prefix}.connection.ssl.enabled": str(endpoint.startswith("https://")).lower()}
    if region:
        conf[f"{prefix}.endpoint.region"] = region
    return conf


def _own(uri: str) -> BucketSettings:
    """The conf's options for the bucket of the object-store ``uri`` (none: all unset)."""
    return _buckets.get(uri.split("://", 1)[1].split("/", 1)[0]) or BucketSettings()


def _named(own: BucketSettings, endpoint: str, region: str) -> dict[str, str]:
    """``own``'s endpoint and region under the option names a client takes (unset: left
    out)."""
    return {key: value for key, value in ((endpoint, own.endpoint_url), (region, own.region))
            if value}


def _plain_http(own: BucketSettings, environ: Mapping[str, str]) -> bool:
    """Whether the bucket's endpoint (its own, else the environment's) is ``http://``."""
    return (own.endpoint_url or _endpoint(environ)).startswith("http://")


def _endpoint(environ: Mapping[str, str]) -> str:
    return environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL") or ""
