"""Tables by their catalog name, as the Spark session's own catalog knows them.

deltamark has no metastore client: whatever catalog the user's Spark is configured with
(Spark's Hive support over a metastore, the Glue Data Catalog on EMR and Glue, Unity
Catalog on Databricks) is the one asked. A name is ``table``, ``db.table`` or
``catalog.db.table``. A table's entry is read with ``SHOW TABLE EXTENDED``, which, unlike
``DESCRIBE``, needs no reader of the table's format on the session: a session of the
embedded Delta path, without Delta's jars, finds a Delta table's location too.

Catalog calls: a lookup makes two (does the database exist, the table's entry);
registering a new Delta table two more (the database's location, ``CREATE TABLE``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from framework import storage
from framework.errors import CatalogError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["NamedTable", "checked", "is_name", "lasting", "lookup", "new_location",
           "register_delta", "register_location", "require", "require_lasting"]

#: one part of a name: letters, digits and underscores (Hive's), backquoted or not
_PART = re.compile(r"`?([A-Za-z0-9_]+)`?")

#: a Hive table's input format or SerDe -> the file format it holds
_HIVE_FORMATS = {"parquet": "parquet", "orc": "orc", "avro": "avro", "json": "json",
                 "opencsv": "csv", "lazysimpleserde": "csv", "textinputformat": "csv"}

#: storage properties that are the catalog's, not reader options
_NOT_OPTIONS = frozenset({"path", "serialization.format"})

#: a Hive SerDe's properties -> Spark's reader options
_SERDE_OPTIONS = {"field.delim": "sep", "separatorChar": "sep", "quoteChar": "quote",
                  "escapeChar": "escape"}


@dataclass(frozen=True)
class NamedTable:
    """A table's catalog entry: ``location`` (a local path or an object-store URI), its
    ``format`` (delta, json, csv, parquet, ...), ``kind`` (MANAGED, EXTERNAL or VIEW),
    partition columns, reader options and table properties."""

    name: str
    location: str
    format: str
    kind: str
    partition_columns: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)
    properties: Mapping[str, str] = field(default_factory=dict)


def is_name(text: str) -> bool:
    """Whether ``text`` reads as a table name (1 to 3 dotted parts) rather than a path."""
    parts = text.split(".")
    return 1 <= len(parts) <= 3 and all(_PART.fullmatch(p) for p in parts)


def lookup(spark: SparkSession, name: str) -> NamedTable | None:
    """``name``'s entry in the session's catalog, or None when its database has no such
    table.

    Raises:
        CatalogError: ``name`` is not a table name, or its database (or catalog) does not
            exist.
    """
    *namespace, table = _parts(name)
    where = ".".join(namespace)
    if namespace and not spark.catalog.databaseExists(where):
        raise CatalogError(name, f"no database {where} in {_catalog(spark, namespace)}. "
                           f"Create it (CREATE DATABASE {where}) or check the session's "
                           "catalog conf (docs/catalogs.md).")
    listed = spark.sql(f"SHOW TABLE EXTENDED {'IN ' + where if where else ''} "
                       f"LIKE '{table}'").collect()
    entry = next((row for row in listed if row["tableName"].lower() == table.lower()), None)
    if entry is None:
        return None
    if entry["isTemporary"]:
        return NamedTable(name, "", "", "VIEW")
    return _entry(name, entry["information"])


def require(spark: SparkSession, name: str, *, format: str | None = "delta") -> NamedTable:
    """``name``'s entry, which must be a table (of ``format``, unless None).

    Raises:
        CatalogError: no such table or database, a view, or a table of another format.
    """
    found = lookup(spark, name)
    if found is None:
        raise CatalogError(name, f"no such table in {_catalog(spark, _parts(name)[:-1])}. "
                           "Check the name (SHOW TABLES), or pass a path instead.")
    return checked(found, format=format)


def checked(found: NamedTable, *, format: str | None = "delta") -> NamedTable:
    """``found``, a table (of ``format``, unless None).

    Raises:
        CatalogError: a view, or a table of another format.
    """
    name = found.name
    if found.kind == "VIEW":
        raise CatalogError(name, "it is a view; deltamark reads and writes tables by name. "
                           "Name the table the view selects from.")
    if format is not None and found.format != format:
        raise CatalogError(name, f"it is a {found.format or 'Hive'} table at {found.location}, "
                           f"not {format.title()}. Name a {format.title()} table.")
    return found


def lasting(spark: SparkSession, name: str) -> bool:
    """Whether a table ``name`` made now outlives the process: not in Spark's in-memory
    catalog (a later run, or another job, would not find it)."""
    return len(_parts(name)) == 3 or _implementation(spark) != "in-memory"


def require_lasting(spark: SparkSession, name: str) -> None:
    """Refuse to create ``name`` where it would not outlive the process (``lasting``).

    Raises:
        CatalogError
    """
    if not lasting(spark, name):
        raise CatalogError(name, "the session's catalog is Spark's in-memory one, which "
                           "forgets a table when the run ends. Configure a metastore "
                           "(spark.sql.catalogImplementation: hive; docs/catalogs.md) "
                           "or write to a path.")


def new_location(spark: SparkSession, name: str) -> str:
    """Where a table ``name`` that does not exist yet goes: under its database's
    location, where Spark puts a managed table."""
    *namespace, table = _parts(name)
    where = ".".join(namespace) or spark.catalog.currentDatabase()
    root = spark.catalog.getDatabase(where).locationUri
    return storage.join(storage.absolute(root), table.lower())


def register_delta(spark: SparkSession, name: str, location: str) -> None:
    """Enter the Delta table at ``location`` in the catalog as ``name`` (its schema and
    partitions are the table's), unless ``name`` is there already."""
    register_location(spark, name, location, format="delta")


def register_location(spark: SparkSession, name: str, location: str, *, format: str,
                      partitioned: bool = False) -> None:
    """Enter the table at ``location`` (Delta, or files of ``format``: their schema and
    ``key=value`` partitions inferred) in the catalog as ``name``, unless it is there
    already; a ``partitioned`` table of files then gets its new partitions."""
    quoted = ".".join(f"`{part}`" for part in _parts(name))
    if not re.fullmatch(r"\w+", format):
        raise CatalogError(name, f"format {format!r} is not a Spark data source name.")
    where = location.replace("'", "\\'")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {quoted} USING {format} LOCATION '{where}'")
    if partitioned and format != "delta":
        spark.sql(f"ALTER TABLE {quoted} RECOVER PARTITIONS")


def _parts(name: str) -> list[str]:
    if not is_name(name):
        raise CatalogError(name, "not a table name: give table, db.table or catalog.db.table "
                           "(letters, digits and _), or a path.")
    return [_PART.fullmatch(part).group(1) for part in name.split(".")]  # type: ignore[union-attr]


def _entry(name: str, information: str) -> NamedTable:
    """A table's entry from ``SHOW TABLE EXTENDED``'s ``Key: value`` lines."""
    said = dict(line.split(": ", 1) for line in information.splitlines() if ": " in line)
    properties = _listed(said.get("Table Properties", ""))
    options = {_SERDE_OPTIONS.get(key, key): value
               for key, value in _listed(said.get("Storage Properties", "")).items()
               if key not in _NOT_OPTIONS}
    if "skip.header.line.count" in properties:  # a crawler's CSV table with a header
        options.setdefault("header", str(properties["skip.header.line.count"] != "0").lower())
    return NamedTable(
        name, location=storage.absolute(said.get("Location", "")),
        format=_format(said, properties), kind=said.get("Type", "").upper(),
        partition_columns=tuple(re.findall(r"`([^`]+)`", said.get("Partition Columns", ""))),
        options=options, properties=properties)


def _format(said: Mapping[str, str], properties: Mapping[str, str]) -> str:
    """A table's format: its provider, or for a Hive table (a Glue crawler's) its
    ``classification``, else what its SerDe or input format reads."""
    provider = said.get("Provider", "").lower()
    if provider and provider != "hive":
        return provider
    if classification := properties.get("classification"):
        return classification.lower()
    hive = f"{said.get('Serde Library', '')} {said.get('InputFormat', '')}".lower()
    return next((found for key, found in _HIVE_FORMATS.items() if key in hive), "")


def _listed(text: str) -> dict[str, str]:
    """``[a=1, b=2]`` as a mapping."""
    items = text.strip().removeprefix("[").removesuffix("]")
    return dict(item.split("=", 1) for item in items.split(", ") if "=" in item)


def _implementation(spark: SparkSession) -> str:
    return spark.conf.get("spark.sql.catalogImplementation", "in-memory") or "in-memory"


def _catalog(spark: SparkSession, namespace: list[str]) -> str:
    """The catalog a name's namespace is in, as a message names it."""
    if len(namespace) == 2:
        return f"catalog {namespace[0]}"
    return f"the session's catalog ({spark.catalog.currentCatalog()}, {_implementation(spark)})"
