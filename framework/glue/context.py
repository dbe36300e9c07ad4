"""``GlueContext``: Glue's reads and writes, served by the deltamark run the script is in.

A script run by ``deltamark run --script`` finds its run's ``JobContext`` here: sources
read with a ``transformation_ctx`` are bookmarked like any deltamark source, and writes are
exactly-once Delta commits of the run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from framework import storage
from framework.errors import GlueUnsupportedError
from framework.glue.active_run import active_run
from framework.glue.api import GlueApi
from framework.glue.catalog import catalog_table
from framework.glue.dynamicframe import DynamicFrame
from framework.spark import catalog
from framework.spark.session import temporary_conf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from framework.sources.files import FileFormat
    from framework.sources.jdbc import SortOrder

__all__ = ["GlueContext", "Sink"]

#: Glue's format_options -> Spark reader options
_FORMAT_OPTIONS = {"withHeader": "header", "separator": "sep", "quoteChar": "quote",
                   "escaper": "escape", "multiline": "multiLine", "multiLine": "multiLine",
                   "rowTag": "rowTag", "encoding": "encoding"}
_GLUE_ONLY_READ_OPTIONS = ("optimizePerformance",)
#: Glue's read options that choose records, which Spark would ignore: refused, not dropped
_UNREAD_OPTIONS = {"jsonPath": "read the JSON whole and select the records with Spark on "
                               "toDF() (explode the array the path names)"}
_DATABASES = ("postgresql", "mysql", "sqlserver", "oracle", "redshift", "jdbc")


logger = logging.getLogger(__name__)


class GlueContext(GlueApi):
    """Glue's context: ``spark_session``, ``create_dynamic_frame``, ``create_data_frame``,
    ``write_dynamic_frame`` (and their method forms, ``create_dynamic_frame_from_options``
    ...). Made inside a script run by ``deltamark run --script``."""

    glue_name = "GlueContext"

    def __init__(self, spark_context: Any = None, **_: Any):
        self._run = active_run()
        self._ctx = self._run.ctx
        self.spark_session = self._ctx.spark
        self.create_dynamic_frame = _Reader(self, dynamic=True)
        self.create_data_frame = _Reader(self, dynamic=False)
        self.write_dynamic_frame = _Writer(self)
        # the method forms of the same calls (create_dynamic_frame_from_options, ...)
        self.create_dynamic_frame_from_options = self.create_dynamic_frame.from_options
        self.create_dynamic_frame_from_catalog = self.create_dynamic_frame.from_catalog
        self.create_data_frame_from_options = self.create_data_frame.from_options
        self.create_data_frame_from_catalog = self.create_data_frame.from_catalog
        self.write_dynamic_frame_from_options = self.write_dynamic_frame.from_options
        self.write_dynamic_frame_from_catalog = self.write_dynamic_frame.from_catalog
        self.write_dynamic_frame_from_jdbc_conf = self.write_dynamic_frame.from_jdbc_conf

    def get_logger(self) -> Any:
        return self._ctx.log

    def getSink(self, connection_type: str = "s3", path: str = "",  # noqa: N802
                partitionKeys: Sequence[str] = (), transformation_ctx: str = "",  # noqa: N803
                enableUpdateCatalog: bool = False, **_: Any) -> Sink:  # noqa: N803
        """Glue Studio's sink: ``setFormat``, ``setCatalogInfo``, ``writeFrame``; with
        ``enableUpdateCatalog``, each write enters the table in the Spark session's
        catalog (or finds it there) and adds its new partitions."""
        return Sink(self, connection_type, path, partitionKeys, update_catalog=enableUpdateCatalog)

    def purge_s3_path(self, s3_path: str, options: Mapping[str, Any] | None = None,
                      transformation_ctx: str = "") -> None:
        """Delete the files under ``s3_path`` (any path or URI) older than
        ``options["retentionPeriod"]`` hours (default 168), as Glue does. A Delta table is
        refused: overwrite it instead. Not part of the run's exactly-once commit."""
        from framework.delta import log

        if log.is_table(s3_path):
            raise GlueUnsupportedError(
                f"purge_s3_path({s3_path!r}) on a Delta table",
                "write it with mode='overwrite' (ctx.write_delta) to replace its rows")
        hours = float((options or {}).get("retentionPeriod", 168))
        removed = storage.delete_older_than(s3_path, hours * 3600)
        self._ctx.log.info("purge_s3_path(%s): %d files deleted", s3_path, removed)


class Sink(GlueApi):
    """``glueContext.getSink(path=..., connection_type="s3", partitionKeys=[...])``, as Glue
    Studio's scripts use it; ``setCatalogInfo`` names the catalog table that
    ``enableUpdateCatalog`` keeps (Glue's ``UPDATE_IN_DATABASE``: the table's schema is
    its files')."""

    glue_name = "glueContext.getSink(...)"

    def __init__(self, glue: GlueContext, connection_type: str, path: str,
                 partition_keys: Sequence[str], *, update_catalog: bool = False):
        self._glue, self._connection_type = glue, connection_type
        self._update_catalog = update_catalog
        self._options = {"path": path, "partitionKeys": list(partition_keys)}
        self._format: str | None = None
        self._format_options: dict[str, Any] = {}
        self.catalog_info: dict[str, str] = {}

    def setFormat(self, format: str, **options: Any) -> None:  # noqa: N802
        self._format, self._format_options = format, options

    def setCatalogInfo(self, catalogDatabase: str, catalogTableName: str,  # noqa: N802, N803
                       **_: Any) -> None:
        self.catalog_info = {"database": catalogDatabase, "table": catalogTableName}

    def writeFrame(self, dynamic_frame: DynamicFrame, **_: Any) -> DynamicFrame:  # noqa: N802
        written = self._glue.write_dynamic_frame.from_options(
            dynamic_frame, self._connection_type, self._options, format=self._format,
            format_options=self._format_options)
        if self._update_catalog and self.catalog_info:
            self._enter_in_catalog()
        return written

    def _enter_in_catalog(self) -> None:
        """Enter the table ``setCatalogInfo`` names (once) and its new partitions, unless
        the session's catalog is Spark's in-memory one: a script made in Glue Studio then
        runs on a laptop unchanged."""
        spark, info = self._glue.spark_session, self.catalog_info
        name, kind = f"{info['database']}.{info['table']}", (self._format or "parquet").lower()
        if not catalog.lasting(spark, name):
            logger.warning("getSink(enableUpdateCatalog=True): %s not entered: the Spark "
                           "session's catalog is its in-memory one", name)
            return
        catalog.lookup(spark, name)  # no such database: one line
        catalog.register_location(
            spark, name, storage.absolute(str(self._options["path"])),
            format="delta" if kind == "delta" else _SINK_FORMATS.get(kind, kind),
            partitioned=bool(self._options["partitionKeys"]))


class _Reader(GlueApi):
    def __init__(self, glue: GlueContext, *, dynamic: bool):
        self._glue, self._dynamic = glue, dynamic
        self.glue_name = f"glueContext.create_{'dynamic_frame' if dynamic else 'data_frame'}"

    def from_options(self, connection_type: str, connection_options: Mapping[str, Any],
                     format: str | None = None, format_options: Mapping[str, Any] | None = None,
                     transformation_ctx: str = "", push_down_predicate: str = "",
                     **_: Any) -> DynamicFrame | DataFrame:
        """Read S3-style paths (``s3``: any path or URI Spark reads; ``push_down_predicate``
        keeps the ``key=value`` directories it selects), a Delta table (``delta``:
        ``path``) or a database table (``postgresql``, ``mysql``, ...: ``url``,
        ``dbtable``, ``jobBookmarkKeys``, ``jobBookmarkKeysSortOrder``)."""
        ctx, options = self._glue._ctx, dict(connection_options)
        tracked = bool(transformation_ctx)
        if connection_type == "s3":
            # cast: the script's format, unchecked here; the source's problems() rejects a
            # format it does not read
            file_format = cast("FileFormat", (format or "json").lower())
            # Glue's CSV has no header unless withHeader says so
            reader_options = {**({"header": "false"} if file_format == "csv" else {}),
                              **_read_options(format_options or {})}
            df = ctx.read_files(
                _paths(options.get("paths")), format=file_format,
                transformation_ctx=transformation_ctx or None, bookmark=tracked,
                options=reader_options,
                recurse=str(options.get("recurse", True)).lower() == "true",
                exclusions=options.get("exclusions", ()),
                bounded_files=_number(options.get("boundedFiles")),
                bounded_size=_number(options.get("boundedSize")),
                partition_filter=push_down_predicate or None,
                # a Glue frame has the columns of its files alone (no rescued-data
                # column): a value another run's files typed otherwise makes a choice
                rescued_data_column=False, choice_types=True)
        elif push_down_predicate:
            raise GlueUnsupportedError(
                f"push_down_predicate on connection_type={connection_type!r}",
                "filter the frame after reading it (a bookmark counts the versions or rows "
                "read, not partitions)")
        elif connection_type == "delta":
            df = ctx.read_delta(options["path"], transformation_ctx=transformation_ctx or None,
                                bookmark=tracked)
        elif connection_type in _DATABASES:
            if "user" in options or "password" in options:
                raise GlueUnsupportedError("credentials in connection_options", _CREDENTIALS)
            df = ctx.read_jdbc(
                options["dbtable"], connection=options.get("connectionName") or options["url"],
                transformation_ctx=transformation_ctx or None, bookmark=tracked,
                keys=_keys(options.get("jobBookmarkKeys")),
                # cast: the script's order, unchecked here; the source's problems() rejects
                # anything but asc or desc
                sort_order=cast("SortOrder",
                                str(options.get("jobBookmarkKeysSortOrder", "asc")).lower()))
        else:
            raise GlueUnsupportedError(f"from_options(connection_type={connection_type!r})",
                                       "s3 (any path Spark reads), delta, or a JDBC database")
        return DynamicFrame(df, self._glue, transformation_ctx) if self._dynamic else df

    def from_catalog(self, database: str = "", table_name: str = "",
                     transformation_ctx: str = "", push_down_predicate: str = "",
                     additional_options: Mapping[str, Any] | None = None, **_: Any
                     ) -> DynamicFrame | DataFrame:
        """Read a table of the local catalog (``catalog:`` in conf/deltamark.yaml) as
        ``from_options`` reads its location; ``additional_options`` as its
        connection_options. ``push_down_predicate`` and ``additional_options``'
        ``catalogPartitionPredicate`` (Spark SQL conditions on the partition keys, whose
        values are text) keep the partitions they select: the files of the others are
        neither read nor tracked, so a later run without them reads them."""
        options = dict(additional_options or {})
        predicates = [p for p in (options.pop("catalogPartitionPredicate", ""),
                                  push_down_predicate) if p]
        table = catalog_table(self._glue._run, database, table_name,
                               "create_dynamic_frame")
        if table.format == "delta":
            return self.from_options("delta", {"path": table.location, **options},
                                     transformation_ctx=transformation_ctx,
                                     push_down_predicate=" AND ".join(predicates))
        # partition values are text, as the catalog's partition keys are (an account id's
        # leading 0 stays)
        with temporary_conf(self._glue.spark_session,
                            {"spark.sql.sources.partitionColumnTypeInference.enabled": "false"}):
            read = self.from_options("s3", {"paths": [table.location], **options},
                                     format=table.format, format_options=table.options,
                                     transformation_ctx=transformation_ctx,
                                     push_down_predicate=" AND ".join(
                                         f"({p})" for p in predicates))
        if table.format != "csv":
            return read
        df = read.toDF() if isinstance(read, DynamicFrame) else read
        if df.columns:  # else nothing new: no fields
            df = _as_catalogued(df, f"{database}.{table_name}", table.columns)
        return DynamicFrame(df, self._glue, transformation_ctx) if self._dynamic else df


#: Glue's sink formats -> deltamark's file formats (delta is a Delta table)
_SINK_FORMATS = {"parquet": "parquet", "glueparquet": "parquet", "json": "json", "csv": "csv",
                 "orc": "orc", "avro": "avro", "xml": "xml"}
_CREDENTIALS = ("declare the connection under connections: in conf/deltamark.yaml "
                "(password from ${VAR}) and pass connection_options={'connectionName': NAME, "
                "'dbtable': ...}")
#: Glue's write format_options -> Spark writer options
_WRITE_OPTIONS = {"writeHeader": "header", "separator": "sep", "quoteChar": "quote",
                  "escaper": "escape", "rowTag": "rowTag", "compression": "compression"}


class _Writer(GlueApi):
    glue_name = "glueContext.write_dynamic_frame"

    def __init__(self, glue: GlueContext):
        self._glue = glue

    def from_options(self, frame: DynamicFrame, connection_type: str = "s3",
                     connection_options: Mapping[str, Any] | None = None,
                     format: str | None = None, format_options: Mapping[str, Any] | None = None,
                     transformation_ctx: str = "", **_: Any) -> DynamicFrame:
        """Write ``frame`` to ``connection_options["path"]`` once in this run: a Delta
        table (``format`` delta, the default) or a directory of files (``parquet``,
        ``glueparquet``, ``json``, ``csv``, ``orc``, ``avro``, ``xml``, with Glue's
        ``format_options``); ``partitionKeys`` partition the files (a new Delta table)."""
        options = dict(connection_options or {})
        kind = (format or "delta").lower()
        if connection_type in _DATABASES:
            return self._to_database(frame, options, "write_dynamic_frame.from_options("
                                     f"connection_type={connection_type!r})")
        if connection_type not in ("s3", "delta") or (kind != "delta"
                                                       and kind not in _SINK_FORMATS):
            raise GlueUnsupportedError(
                f"write_dynamic_frame.from_options(connection_type={connection_type!r}, "
                f"format={format!r})", "format delta, or files: "
                f"{', '.join(_SINK_FORMATS)}; deltamark writes them exactly once")
        if not options.get("path"):
            raise GlueUnsupportedError("write_dynamic_frame.from_options without a path",
                                       "give connection_options={'path': ...}")
        ctx, partition_by = self._glue._ctx, options.get("partitionKeys") or ()
        if kind == "delta":
            ctx.write_delta(frame.toDF(), options["path"], partition_by=partition_by)
        else:
            ctx.write_files(frame.toDF(), options["path"], format=_SINK_FORMATS[kind],
                            options=_write_options(kind, format_options or {}),
                            partition_by=partition_by)
        return frame

    def from_jdbc_conf(self, frame: DynamicFrame, catalog_connection: str = "",
                       connection_options: Mapping[str, Any] | None = None,
                       transformation_ctx: str = "", **_: Any) -> DynamicFrame:
        """Append ``frame`` to ``connection_options["dbtable"]`` through the connection
        of conf named ``catalog_connection`` (``database`` switches to another database
        of its server), exactly once per run (``JobContext.write_jdbc``)."""
        return self._to_database(
            frame, {**(connection_options or {}), "connectionName": catalog_connection},
            f"write_dynamic_frame.from_jdbc_conf(catalog_connection={catalog_connection!r})")

    def _to_database(self, frame: DynamicFrame, options: Mapping[str, Any], call: str
                     ) -> DynamicFrame:
        if "user" in options or "password" in options:
            raise GlueUnsupportedError(f"{call} with credentials in connection_options",
                                       _CREDENTIALS)
        if actions := [k for k in ("preactions", "postactions") if options.get(k)]:
            raise GlueUnsupportedError(
                f"{call} with {' and '.join(actions)}",
                "deltamark appends the frame exactly once and runs no SQL around it; to "
                "merge, write to a Delta table (ctx.write_delta(mode='merge', "
                "merge_on=...)), or run the statements in the database after the job")
        if not options.get("connectionName") or not options.get("dbtable"):
            raise GlueUnsupportedError(
                f"{call} without connectionName and dbtable", "name a connection of "
                "conf/deltamark.yaml: connection_options={'connectionName': NAME, "
                "'dbtable': 'schema.table'}")
        self._glue._ctx.write_jdbc(frame.toDF(), str(options["dbtable"]),
                                   connection=str(options["connectionName"]),
                                   database=options.get("database") or None)
        return frame

    def from_catalog(self, frame: DynamicFrame, database: str = "", table_name: str = "",
                     transformation_ctx: str = "",
                     additional_options: Mapping[str, Any] | None = None, **_: Any
                     ) -> DynamicFrame:
        """Write ``frame`` to a table of the local catalog, as ``from_options`` writes its
        location (a Delta or Parquet table)."""
        table = catalog_table(self._glue._run, database, table_name,
                               "write_dynamic_frame")
        return self.from_options(frame, "s3", {"path": table.location, **(
            additional_options or {})}, format=table.format)


def _as_catalogued(df: DataFrame, table: str, columns: Mapping[str, str]) -> DataFrame:
    """A CSV table's text columns as the catalog has them: named and typed by its
    ``columns`` (by position; choice types where values are not of theirs), else named
    as a crawler names them (trimmed, lower case), as text."""
    from framework.glue.choice import typed_by_catalog
    from framework.spark.session import named_column

    if columns:
        return typed_by_catalog(df, table, columns)
    return df.select(*(named_column(c).alias(c.strip().lower()) for c in df.columns))


def _write_options(kind: str, glue_options: Mapping[str, Any]) -> dict[str, str]:
    """Spark writer options for Glue's ``format_options`` (Glue's CSV has a header unless
    ``writeHeader`` is false; Glue-only options such as useGlueParquetWriter go)."""
    options = {"header": "true"} if kind == "csv" else {}
    for name, value in glue_options.items():
        if name in _WRITE_OPTIONS:
            options[_WRITE_OPTIONS[name]] = str(value).lower() if isinstance(value, bool) \
                else str(value)
    return options


def _read_options(glue_options: Mapping[str, Any]) -> dict[str, Any]:
    """Spark reader options for Glue's ``format_options``: ``quoteChar: -1`` turns quoting
    off; Glue-only options (``optimizePerformance``, its vectorised CSV reader) go."""
    options = {}
    for name, value in glue_options.items():
        if name in _GLUE_ONLY_READ_OPTIONS:
            continue
        if name in _UNREAD_OPTIONS:
            raise GlueUnsupportedError(f"format_options {name!r}", _UNREAD_OPTIONS[name])
        if name == "quoteChar" and str(value) == "-1":
            value = ""
        options[_FORMAT_OPTIONS.get(name, name)] = value
    return options


def _paths(value: Any) -> Sequence[str]:
    if isinstance(value, str):
        return [value]
    if not value:
        raise GlueUnsupportedError("from_options(connection_type='s3') without paths",
                                   "give connection_options={'paths': [...]}")
    return list(value)


def _number(value: Any) -> int | None:
    return None if value in (None, "") else int(value)


def _keys(value: Any) -> list[str]:
    if value in (None, ""):
        return []
    return json.loads(value) if isinstance(value, str) and value.startswith("[") else (
        [value] if isinstance(value, str) else list(value))
