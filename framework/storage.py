"""Where files live: a local directory or an object store, seen through pyarrow.fs."""

from __future__ import annotations

import os
from collections.abc import Callable

import pyarrow.fs as pafs

__all__ = ["filesystem"]


def filesystem(root: str) -> tuple[pafs.FileSystem, str, Callable[[str], str]]:
    """The filesystem holding ``root``, ``root``'s path on it, and a function turning a
    path on it back into a URI Spark reads (``s3a://...`` stays ``s3a``)."""
    if "://" not in root or root.startswith("file://"):
        local = os.path.abspath(root.removeprefix("file://"))
        return pafs.LocalFileSystem(), local, lambda p: p
    scheme = root.split("://", 1)[0]
    # Spark's Hadoop names for S3; pyarrow knows the store as s3.
    found, base = pafs.FileSystem.from_uri(
        "s3://" + root.split("://", 1)[1] if scheme in ("s3a", "s3n") else root)
    return found, base, lambda p: f"{scheme}://{p}"
