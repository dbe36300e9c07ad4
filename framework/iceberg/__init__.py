"""Iceberg tables without a JVM: their catalogs, snapshots and run marks, through pyiceberg.

Users configure Iceberg catalogs as Spark users do, with ``spark.sql.catalog.<name>.*``
in the ``spark: conf:`` of ``conf/deltamark.yaml``; deltamark derives from the same settings
what pyiceberg needs (``configure``), so planning a read, the no-JVM pre-run check and a
target's run history read a table's metadata in Python, as delta-rs does for Delta:

- ``type: hadoop`` (a path catalog): the table's newest metadata file under
  ``<warehouse>/<namespace>/<table>/metadata``, read as a static table;
- ``type: jdbc`` (``uri: jdbc:postgresql://...`` or ``jdbc:sqlite:...``): pyiceberg's SQL
  catalog on the same database (the two share their tables);
- ``type: rest``, ``hive``, ``glue``: pyiceberg's catalog of that type, with the same
  properties.

Tables are named as Spark names them: ``catalog.namespace.table``. A run's commit to an
Iceberg target carries the run in its snapshot's summary (``MARK_PREFIX`` keys).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framework import storage
from framework.errors import IcebergError, MissingExtraError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = ["CATALOG_CLASSES", "EXTENSION", "MARK_PREFIX", "RUNTIME", "Snapshot", "configure",
           "current", "exists", "history", "is_catalog", "names_table",
           "split_name"]

#: the Spark catalog classes of Iceberg
CATALOG_CLASSES = ("org.apache.iceberg.spark.SparkCatalog",
                   "org.apache.iceberg.spark.SparkSessionCatalog")
#: the name Iceberg's Spark runtime jars start with
RUNTIME = "iceberg-spark-runtime"
#: Iceberg's SQL extensions (MERGE INTO, CALL): deltamark adds them to sessions that have
#: an Iceberg catalog
EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
#: the snapshot-summary keys a run's commit carries: ``deltamark.job``, ``.run_seq``,
#: ``.run_id`` and ``.record`` (the run's record, JSON)
MARK_PREFIX = "deltamark."

_CATALOG = "spark.sql.catalog."
#: the Spark conf's catalogs, by name: their ``spark.sql.catalog.<name>.*`` properties
_configured: dict[str, dict[str, str]] = {}
#: pyiceberg's catalogs made from them (a SQL catalog holds its database's engine)
_catalogs: dict[str, Catalog] = {}


@dataclass(frozen=True)
class Snapshot:
    """One snapshot of a table: its id, its parent's, its operation (``append``,
    ``overwrite``, ``delete``, ``replace``) and its summary's other properties."""

    snapshot_id: int
    parent_id: int | None
    sequence_number: int
    timestamp_ms: int
    operation: str
    summary: Mapping[str, str]

    def mark(self) -> dict[str, Any]:
        """The deltamark run that committed it (``job``, ``run_seq``, ``run_id``,
        ``record``; ``commits``: how many snapshots up to this one it made), or an empty
        dict."""
        found = {key.removeprefix(MARK_PREFIX): value for key, value in self.summary.items()
                 if key.startswith(MARK_PREFIX)}
        if not found:
            return {}
        return {**found, "run_seq": int(found.get("run_seq", 0)),
                "commits": int(found.get("commits", 1)),
                "record": json.loads(found["record"]) if "record" in found else {}}


def configure(conf: Mapping[str, str]) -> None:
    """Take the Iceberg catalogs of a Spark conf (``spark.sql.catalog.<name>`` naming an
    Iceberg catalog class, and its properties): ``current`` and ``history`` reach them."""
    _configured.clear()
    _catalogs.clear()
    for key, value in conf.items():
        name = key.removeprefix(_CATALOG)
        if key.startswith(_CATALOG) and "." not in name and value in CATALOG_CLASSES:
            prefix = f"{key}."
            _configured[name] = {k.removeprefix(prefix): v for k, v in conf.items()
                                 if k.startswith(prefix)}


def is_catalog(conf: Mapping[str, str], *, of_type: str | None = None) -> bool:
    """Whether a Spark conf names an Iceberg catalog (of type ``of_type``, when given:
    ``hadoop``, ``jdbc``, ...)."""
    return any(key.startswith(_CATALOG) and value in CATALOG_CLASSES
               and (of_type is None or _type(conf, f"{key}.") == of_type)
               for key, value in conf.items())


def _type(conf: Mapping[str, str], prefix: str) -> str:
    """The type of the catalog whose properties start with ``prefix``."""
    return conf.get(f"{prefix}type") or _type_of_impl(conf.get(f"{prefix}catalog-impl", ""))


def names_table(key: str) -> bool:
    """Whether ``key`` names a table of a configured catalog (``catalog.namespace.table``),
    not a path."""
    parts = key.split(".")
    return "/" not in key and len(parts) >= 3 and parts[0] in _configured


def split_name(table: str) -> tuple[str, tuple[str, ...]]:
    """``catalog.namespace.table`` as the catalog's name and the identifier in it.

    Raises:
        IcebergError: the name is not of a configured Iceberg catalog.
    """
    catalog, _, rest = table.partition(".")
    identifier = tuple(rest.split(".")) if rest else ()
    if catalog not in _configured:
        known = ", ".join(sorted(_configured)) or "none is configured"
        raise IcebergError(table, f"no Iceberg catalog '{catalog}' (catalogs: {known}); name "
                           "tables catalog.namespace.table, with the catalog set in spark: "
                           f"conf: as spark.sql.catalog.{catalog}: "
                           f"{CATALOG_CLASSES[0]}")
    if len(identifier) < 2:
        raise IcebergError(table, "name Iceberg tables catalog.namespace.table")
    return catalog, identifier


def current(table: str) -> Snapshot | None:
    """The table's current snapshot; None while it has none (created, never written).

    Raises:
        IcebergError: no such table, or its catalog cannot be reached.
    """
    loaded = _load(table)
    snapshot = loaded.current_snapshot()
    return None if snapshot is None else _snapshot(snapshot)


def history(table: str, *, missing_ok: bool = False) -> list[Snapshot]:
    """The current snapshot and its ancestors still in the table's metadata, oldest first
    (expired ones end the chain); with ``missing_ok``, none for a table not there.

    Raises:
        IcebergError: no such table (unless ``missing_ok``), or its catalog cannot be
            reached.
    """
    try:
        loaded = _load(table)
    except IcebergError as exc:
        if missing_ok and exc.missing:
            return []
        raise
    by_id = {s.snapshot_id: s for s in loaded.snapshots()}
    chain = []
    snapshot = loaded.current_snapshot()
    while snapshot is not None:
        chain.append(_snapshot(snapshot))
        parent = snapshot.parent_snapshot_id
        snapshot = by_id.get(parent) if parent is not None else None
    return chain[::-1]


def location(table: str) -> str:
    """Where the table's files are (a path, or an object-store URI).

    Raises:
        IcebergError: no such table, or its catalog cannot be reached.
    """
    found = _load(table).location()
    return found.removeprefix("file://") if found.startswith("file:///") \
        else found.removeprefix("file:")


def exists(table: str) -> bool:
    """Whether the catalog holds ``table``.

    Raises:
        IcebergError: the name is not of a configured catalog, or it cannot be reached.
    """
    try:
        _load(table)
    except IcebergError as exc:
        if exc.missing:
            return False
        raise
    return True


def _snapshot(snapshot: Any) -> Snapshot:
    return Snapshot(snapshot.snapshot_id, snapshot.parent_snapshot_id,
                    snapshot.sequence_number or 0, snapshot.timestamp_ms,
                    snapshot.summary.operation.value if snapshot.summary else "append",
                    dict(snapshot.summary.additional_properties) if snapshot.summary else {})


def _load(table: str) -> Table:
    catalog, identifier = split_name(table)
    properties = _configured[catalog]
    kind = properties.get("type", "")
    try:
        if kind == "hadoop":
            return _hadoop_table(table, properties, identifier)
        from pyiceberg.catalog import load_catalog
        from pyiceberg.exceptions import NoSuchTableError

        if catalog not in _catalogs:
            _catalogs[catalog] = load_catalog(catalog,
                                              **_pyiceberg_properties(table, properties))
        try:
            return _catalogs[catalog].load_table(identifier)
        except NoSuchTableError:
            raise IcebergError(table, "no such table in its catalog", missing=True) from None
    except IcebergError:
        raise
    except ImportError as exc:
        raise MissingExtraError(exc, f"Iceberg table {table}") from exc
    except Exception as exc:
        raise IcebergError(table, f"cannot read it: {type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc


def _hadoop_table(table: str, properties: Mapping[str, str],
                  identifier: tuple[str, ...]) -> Table:
    """A path catalog's table, from its newest metadata file: a commit is that file's
    appearance (``v<N>.metadata.json``); the version hint is written after it, so a
    reader trusting the hint misses a commit whose writer died in between."""
    from pyiceberg.table import StaticTable

    warehouse = properties.get("warehouse")
    if not warehouse:
        raise IcebergError(table, "its hadoop catalog has no warehouse (spark.sql.catalog."
                           f"{table.split('.')[0]}.warehouse)")
    metadata = "/".join([_pyiceberg_uri(warehouse).rstrip("/"), *identifier, "metadata"])
    newest = _newest_metadata_file(metadata)
    if newest is None:
        raise IcebergError(table, f"no such table (no metadata file under {metadata})",
                           missing=True)
    return StaticTable.from_metadata(f"{metadata}/{newest}",
                                     properties=storage.pyiceberg_options())


#: a path catalog's metadata files, by version (Iceberg's HadoopTableOperations)
_METADATA_FILE = re.compile(r"v(\d+)(?:\.gz)?\.metadata\.json")


def _newest_metadata_file(metadata: str) -> str | None:
    """The name of the highest version's metadata file under the directory ``metadata``;
    None when there is none."""
    import pyarrow.fs as pafs

    fs, path, _ = storage.filesystem(metadata)
    try:
        names = [info.base_name for info in fs.get_file_info(pafs.FileSelector(path))]
    except FileNotFoundError:
        return None
    versions = {int(m[1]): name for name in names if (m := _METADATA_FILE.fullmatch(name))}
    return versions[max(versions)] if versions else None


def _pyiceberg_properties(table: str, properties: Mapping[str, str]) -> dict[str, str]:
    """A Spark catalog's properties as pyiceberg's ``load_catalog`` takes them."""
    found = {key: value for key, value in properties.items()
             if not key.startswith(("jdbc.", "io-impl", "catalog-impl"))}
    kind = _type(properties, "")
    if kind == "jdbc":
        found["type"] = "sql"
        found["uri"] = _sqlalchemy_url(table, properties)
    elif kind:
        found["type"] = kind
    if "warehouse" in found:
        found["warehouse"] = _pyiceberg_uri(found["warehouse"])
    return {**storage.pyiceberg_options(), **found}


def _type_of_impl(impl: str) -> str:
    return {"org.apache.iceberg.jdbc.JdbcCatalog": "jdbc",
            "org.apache.iceberg.rest.RESTCatalog": "rest",
            "org.apache.iceberg.hive.HiveCatalog": "hive",
            "org.apache.iceberg.aws.glue.GlueCatalog": "glue"}.get(impl, "")


def _sqlalchemy_url(table: str, properties: Mapping[str, str]) -> str:
    """A JDBC catalog's ``jdbc:`` URL as the SQLAlchemy URL pyiceberg's SQL catalog takes
    (PostgreSQL through psycopg, SQLite)."""
    uri = properties.get("uri", "")
    user, password = properties.get("jdbc.user"), properties.get("jdbc.password")
    if uri.startswith("jdbc:sqlite:"):
        return "sqlite:///" + uri.removeprefix("jdbc:sqlite:").removeprefix("file:")
    if uri.startswith("jdbc:postgresql://"):
        from urllib.parse import quote

        credentials = "" if not user else (
            quote(user, safe="") + (f":{quote(password, safe='')}" if password else "") + "@")
        return f"postgresql+psycopg://{credentials}{uri.removeprefix('jdbc:postgresql://')}"
    raise IcebergError(table, f"its jdbc catalog's uri {uri.split('?')[0]!r} is not one "
                       "deltamark reads without a JVM (jdbc:postgresql:, jdbc:sqlite:)")


def _pyiceberg_uri(path: str) -> str:
    """A Spark path as pyiceberg reads it: ``s3a://`` is ``s3://``, a local one absolute."""
    scheme, _, rest = path.partition("://")
    return f"s3://{rest}" if scheme in storage.S3_SCHEMES else storage.absolute(path)
