"""The job base class and the context a run hands to it.

    from framework import IncrementalJob

    class OrdersIngest(IncrementalJob):
        def run(self, ctx):
            df = ctx.read_files(ctx.params["landing"], format="json",
                                transformation_ctx="orders_src")
            ctx.write_delta(df, ctx.params["target"], mode="append")

Sources pin what they read against the bookmark when they are called. The runner records
that plan before each target commits and makes it count once the run succeeds (the commit
protocol in ``framework.run.runner``).
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from framework.config import text_value
from framework.delta import Filter, WriteMode, WriteResult
from framework.delta.changes import ApplyChanges
from framework.errors import JobError
from framework.sinks.iceberg import WriteMode as IcebergWriteMode
from framework.sources import delta as delta_source
from framework.sources import files, jdbc
from framework.sources.files import FileFormat, ListingMode, RewritePolicy
from framework.sources.files.malformed import BadRecords
from framework.sources.files.schema_drift import EvolutionMode
from framework.sources.iceberg import Expired, IcebergSource
from framework.spark import catalog

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from framework.run.job_run import JobRun

__all__ = ["IncrementalJob", "JobContext", "job_run"]

MILLISECOND = timedelta(milliseconds=1)


class IncrementalJob(ABC):
    """Base class of deltamark jobs. Implement ``run``; read and write through ``ctx``.

    Each read takes only what its context (``transformation_ctx``) has not read in an
    earlier run; each write commits with the state the run moves its bookmarks to, once.

    Example::

        # jobs/orders_ingest.py
        class OrdersIngest(IncrementalJob):
            def run(self, ctx: JobContext) -> None:
                df = ctx.read_files(ctx.params["landing"], format="json",
                                    transformation_ctx="orders_src")
                ctx.write_delta(df, ctx.params["target"], mode="append")

        # conf/jobs/orders_ingest.yaml
        class: jobs.orders_ingest:OrdersIngest
        params: {landing: data/landing/orders, target: data/lake/bronze/orders}

        $ deltamark run orders_ingest
    """

    @abstractmethod
    def run(self, ctx: JobContext) -> None:
        """Do one run's work. Raising leaves every bookmark where it was."""


class JobContext:
    """What ``IncrementalJob.run`` gets: Spark, params, the run's identity, bookmarked I/O.

    Reads (``read_*``) plan what is new for their context against its bookmark; writes
    (``write_*``) commit it with the rows, exactly once. Options: docs/sources.md, docs/jobs.md.

    Example::

        def run(self, ctx):
            new = ctx.read_delta("data/lake/bronze/orders", transformation_ctx="bronze")
            ctx.write_delta(new.where("amount > 0"), "data/lake/silver/orders",
                            mode="merge", merge_on="order_id", checks="silver_orders")

    Attributes:
        spark, params, job_name, run_id, run_seq, mode, bookmark, log, dry_run
        run_properties: the workflow run's properties as the job began (read-only; see ``publish``)
        workflow_name, workflow_run_id: the workflow run this run is part of, or None
    """

    def __init__(self, run: JobRun, params: Mapping[str, str]):
        """Made by the runner, which keeps ``run`` (its side of the run)."""
        self._run, scope, workflow = run, run.scope, run.scope.identity.workflow
        self.spark, self.params, self.log = scope.spark, dict(params), run.log
        self.job_name, self.run_id, self.run_seq = run.job_name, run.run_id, run.run_seq
        self.bookmark, self.dry_run = scope.plan.options, scope.dry_run
        self.mode = self.bookmark.mode
        self.run_properties: Mapping[str, str] = MappingProxyType(dict(workflow.properties))
        self.workflow_name, self.workflow_run_id = workflow.name, workflow.run_id

    def read_files(
        self, paths: str | Sequence[str], *, format: FileFormat,
        transformation_ctx: str | None = None, bookmark: bool = True,
        options: Mapping[str, Any] | None = None, schema: StructType | str | None = None,
        recurse: bool = True, exclusions: str | Sequence[str] = (),
        bounded_files: int | None = None, bounded_size: int | None = None,
        rewritten: RewritePolicy = "ignore", max_file_age: timedelta | None = None,
        listing: ListingMode = "full", reconcile_every: timedelta = timedelta(days=1),
        queue: str | None = None, lineage_column: str | None = None,
        bad_records: BadRecords = "fail", bad_records_table: str | None = None,
        partition_filter: str | None = None,
        schema_evolution: EvolutionMode | None = None, schema_hints: str | None = None,
        rescued_data_column: str | bool = True, choice_types: bool = False,
    ) -> DataFrame:
        """Read the files under ``paths`` (URIs, no globs) this context has not read yet,
        every file by column name, with the schema the context has read so far.

        Args:
            format: json, csv, parquet, orc, xml (``options={"rowTag": ...}``), text, avro.
            transformation_ctx: the bookmark's name; needed unless ``bookmark=False``
                (every file, every run, nothing recorded) or the mode is disable.
            options: Spark reader options; a CSV file's first line is its header unless
                ``header=False``.
            schema: the rows' (and an empty read's) schema.
            recurse: descend into subdirectories (``key=value`` ones become columns).
            exclusions: glob patterns (or Glue's JSON array string) of paths to skip.
            bounded_files, bounded_size: at most this many files / bytes, oldest first.
            rewritten: a file read before that changed: ``ignore`` or ``reprocess``.
            max_file_age: new files older than this are not read but tracked as ``too_old``.
            listing: ``full``, ``start_after``, ``partitions`` or ``notifications`` (from
                the SQS ``queue``); a partial listing lists in full ``reconcile_every``.
            lineage_column: add each row's source file URI under this name.
            bad_records: a malformed record: ``fail`` the run, ``drop`` it (counted) or
                ``quarantine`` it to the Delta table ``bad_records_table``.
            partition_filter: a Spark SQL condition on the ``key=value`` directories
                (Glue's ``push_down_predicate``): files it leaves out are not tracked.
            schema_evolution, schema_hints, rescued_data_column, choice_types: fields the
                context's schema lacks, types for inferred columns, where values that do
                not fit go (``_rescued_data``): docs/sources.md.

        Raises:
            MissingContextError, SourceError
        """
        source = files.FileSource(
            paths=_as_tuple(paths), format=format, options=_reader_options(format, options),
            schema=schema, recurse=recurse, exclusions=files.parse_exclusions(exclusions),
            bounded_files=bounded_files, bounded_size=bounded_size, rewritten=rewritten,
            max_file_age_ms=None if max_file_age is None else int(max_file_age / MILLISECOND),
            listing=listing, reconcile_ms=int(reconcile_every / MILLISECOND), queue=queue,
            lineage_column=lineage_column, bad_records=bad_records,
            bad_records_table=bad_records_table, partition_filter=partition_filter,
            schema_evolution=schema_evolution, schema_hints=schema_hints,
            rescued_data_column=rescued_data_column, choice_types=choice_types)
        return self._run.reads.files(source, transformation_ctx=transformation_ctx,
                                    bookmark=bookmark)

    def read_delta(self, path: str | None = None, *, table: str | None = None,
                   transformation_ctx: str | None = None,
                   bookmark: bool = True, change_feed: bool | None = None,
                   version: int | None = None,
                   starting_version: int | Literal["latest"] | None = None,
                   starting_timestamp: datetime | str | None = None,
                   bounded_files: int | None = None, bounded_size: int | None = None
                   ) -> DataFrame:
        """Read what the Delta table at ``path`` (or the catalog's ``table``: ``table``,
        ``db.table`` or ``catalog.db.table``, through the Spark session's catalog) gained
        since this context's last run: the versions after the bookmark, up to the one
        pinned when the read is planned: the appended rows or, from the Change Data Feed
        (``change_feed=None``: when the table has it), every change with
        ``_change_type``, ``_commit_version`` and ``_commit_timestamp``. ``bookmark=False``
        reads the whole table, at ``version`` when given.

        Args:
            starting_version, starting_timestamp: where a context without a bookmark starts
                (default: the whole table): version N onwards, ``"latest"`` (what is
                committed after its first run), or the first version committed at or after
                a time (naive: UTC), as Delta's streaming source. Later runs go on from
                the bookmark.
            bounded_files, bounded_size: at most this many data files added / bytes a run,
                in whole versions (at least one); later runs read the rest.

        Raises:
            MissingContextError, TableNotFoundError, JobError (``version`` with a bookmarked read)
            CatalogError: ``table`` is not a Delta table of the catalog (no such table or
                database, a view, another format).
            SourceError: a bad option (named).
            ChangesUnavailableError: rows were changed in place and the table has no Change
                Data Feed, the needed history is gone (reset the context to reload), or
                the starting position is not in the table's history.
        """
        where, named = self._path_or_table("read_delta", path, table)
        location = self._run.reads.named_delta(where) if named else where
        source = delta_source.DeltaSource(
            location, start=starting_version, starting_timestamp=starting_timestamp,
            bounded_files=bounded_files, bounded_size=bounded_size)
        return self._run.reads.delta(source, transformation_ctx=transformation_ctx,
                                    bookmark=bookmark, change_feed=change_feed, version=version)

    def read_iceberg(self, table: str, *, transformation_ctx: str | None = None,
                     bookmark: bool = True, changes: bool = False,
                     keys: str | Sequence[str] = (), expired: Expired = "fail",
                     starting_snapshot: int | Literal["latest"] | None = None,
                     starting_timestamp: datetime | str | None = None,
                     bounded_files: int | None = None, bounded_size: int | None = None
                     ) -> DataFrame:
        """Read what the Iceberg table ``table`` (``catalog.namespace.table``) gained since
        this context's last run, as ``read_delta`` does: snapshots, the rows they appended
        or, with ``changes=True``, Iceberg's changelog (``_change_type``: ``INSERT``,
        ``DELETE``, and ``UPDATE_BEFORE``/``UPDATE_AFTER`` where ``keys`` identify a row;
        ``_change_ordinal``, ``_commit_snapshot_id``). ``expired="full_refresh"`` rereads
        the table when the bookmark's snapshot expired (or was rolled back).
        ``starting_snapshot`` (that snapshot onwards, or ``"latest"``) or
        ``starting_timestamp`` start a context without a bookmark, and ``bounded_files`` /
        ``bounded_size`` cap a run in whole snapshots, as ``read_delta``'s options do.

        Raises:
            IcebergError: no such table or catalog; without ``changes``, snapshots that
                changed rows in place; the bookmark's snapshot expired (``expired="fail"``).
            MissingContextError, SparkFeatureError (a Spark line Iceberg has no runtime for)
        """
        source = IcebergSource(table, start=starting_snapshot,
                               starting_timestamp=starting_timestamp,
                               bounded_files=bounded_files, bounded_size=bounded_size)
        return self._run.reads.iceberg(
            source, transformation_ctx=transformation_ctx, bookmark=bookmark, changes=changes,
            keys=_as_tuple(keys), expired=expired)

    def read_jdbc(
        self, table: str | None = None, *, connection: str, query: str | None = None,
        transformation_ctx: str | None = None, bookmark: bool = True,
        keys: str | Sequence[str] = (), sort_order: jdbc.SortOrder = "asc",
        primary_key: str | Sequence[str] = (), lookback: int | float | timedelta | None = None,
        partition_column: str | None = None, num_partitions: int | None = None,
        lower_bound: Any = None, upper_bound: Any = None, fetch_size: int = 50_000,
        options: Mapping[str, Any] | None = None, initial_value: Any = None,
        end_value: Any = None, bounded_rows: int | None = None,
    ) -> DataFrame:
        """Read the rows of a database ``table`` (or a SELECT ``query``) past the bookmark,
        up to the last row when the read is planned; none lost or read twice.

        Args:
            connection: a connection named in conf (``connections:``) or a ``jdbc:`` URL.
            keys: the bookmark columns (Glue's jobBookmarkKeys; default: the primary key).
            sort_order: ``asc`` (new rows have higher keys) or ``desc``.
            primary_key: the columns that identify a row, when the table declares none.
            lookback: re-read rows this far behind the bookmark, for updates (``merge`` them).
            partition_column, num_partitions, lower_bound, upper_bound, fetch_size, options:
                Spark's JDBC reader options (a numeric first key: 100,000 rows a partition).
            initial_value: where a context without a bookmark starts: rows whose first key
                is at or past it (dlt's ``initial_value``).
            end_value: with ``initial_value``, a backfill of the rows before it; such a
                read neither reads nor moves the bookmark.
            bounded_rows: about this many rows a run, in key order (whole key values);
                later runs read the rest.

        Raises:
            MissingContextError, SourceError (names the database, never the password)
        """
        source = jdbc.JdbcSource(
            connection=self._run.connections(connection), table=table, query=query,
            keys=_as_tuple(keys), order=sort_order, primary_key=_as_tuple(primary_key),
            lookback=lookback, partition_column=partition_column,
            num_partitions=num_partitions, lower_bound=lower_bound, upper_bound=upper_bound,
            fetch_size=fetch_size, options=_texts(options), initial_value=initial_value,
            end_value=end_value, bounded_rows=bounded_rows)
        return self._run.reads.jdbc(source, connection=connection,
                                   transformation_ctx=transformation_ctx, bookmark=bookmark)

    def watermark(self, df: DataFrame, column: str, *, transformation_ctx: str,
                  aggregate: Literal["max", "min"] = "max") -> Any:
        """Record the max (or min) of ``column`` over ``df`` and return it (None without rows:
        the previous one stays). It counts once the run succeeds in enable mode; the next run
        gets it from ``last_watermark``. Raises JobError: an unknown column or aggregate, a
        column not a number, string, date, timestamp or boolean, or a context set twice."""
        return self._run.reads.watermark(df, column, transformation_ctx=transformation_ctx,
                                   aggregate=aggregate)

    def last_watermark(self, transformation_ctx: str) -> Any:
        """The watermark the latest successful run recorded for this context, or None."""
        return self._run.reads.last_watermark(transformation_ctx)

    def write_delta(
        self, df: DataFrame, target: str | None = None, *, table: str | None = None,
        location: str | None = None, mode: WriteMode = "append",
        partition_by: Sequence[str] = (), replace_where: Sequence[Filter] = (),
        merge_schema: bool = False, merge_on: str | Sequence[str] = (), checks: str | None = None,
        keys: str | Sequence[str] = (), sequence_by: str | Sequence[str] = (),
        apply_as_deletes: str | None = None, except_columns: Sequence[str] = (),
        scd_type: Literal[1, 2] = 1, track_history_columns: Sequence[str] | None = None,
        tombstone_retention: timedelta | None = None,
    ) -> WriteResult:
        """Write ``df`` to the Delta table at ``target`` (or the catalog's ``table``) in one
        commit carrying this run (a replay of it is skipped; a target holding a run the
        state does not know, refused). A ``table`` the catalog lacks is made by the write
        at ``location`` (default: its database's location) and entered in the catalog.
        No empty version: nothing is written of rows of no columns, or of no rows appended
        or merged in a run that read nothing new. A dry run writes (and checks) nothing.

        Args:
            mode: ``append``, ``overwrite`` (only the partitions ``replace_where`` filters such
                as ``[("day", "=", "2024-01-01")]`` match), ``merge`` (upsert on ``merge_on``)
                or ``apply_changes``: ``df`` holds change records (docs/jobs.md), applied by
                ``keys`` in ``sequence_by`` order: the latest change of a key wins, rows
                ``apply_as_deletes`` (SQL) holds for delete it, a change older than the
                table's row for its key (or than its delete, for ``tombstone_retention``:
                by default the job conf's ``tombstone_retention_hours``, a week) is
                ignored; ``except_columns`` are not stored; ``scd_type=2`` keeps each
                key's history in ``__START_AT``/``__END_AT`` rows, a new one when one of
                ``track_history_columns`` (default: all) changes.
            partition_by: the partition columns of a table this write creates.
            merge_schema: add the columns ``df`` has and the table lacks.
            checks: a rule set of the job's conf (``checks:``) evaluated on ``df`` first;
                its policy fails the run, quarantines rows or warns (docs/data-quality.md).

        Returns:
            A ``WriteResult``: the table's version; ``skipped`` when nothing was committed.

        Raises:
            JobError: the target was already written in this run, rows read again by a
                lookback would be appended, or ``checks`` names no rule set.
            DataQualityError (nothing was written), StateBehindTargetsError,
            SchemaMismatchError, WriteConflictError
            DeltaTableError: bad ``merge_on``.
            ChangeRecordsError: bad apply_changes options or change records.
            CatalogError: ``table`` is not a Delta table (a view, another format), its
                database does not exist, or the catalog cannot hold a new one.
        """
        where, named = self._path_or_table("write_delta", target, table)
        if location is not None and not named:
            raise JobError(self.job_name, "write_delta: location= places a new table= "
                           "of the catalog; a path is its own location.")
        changes = self._changes(
            mode == "apply_changes" or bool(keys) or bool(sequence_by), keys=keys,
            sequence_by=sequence_by, apply_as_deletes=apply_as_deletes,
            except_columns=except_columns, scd_type=scd_type,
            track_history_columns=track_history_columns,
            tombstone_retention=tombstone_retention)
        return self._run.writes.delta(
            df, where, named=named, location=location, mode=mode, partition_by=partition_by,
            replace_where=replace_where, merge_schema=merge_schema, checks=checks,
            merge_on=_as_tuple(merge_on), changes=changes)

    def _path_or_table(self, call: str, path: str | None, table: str | None
                       ) -> tuple[str, bool]:
        """A Delta table's path or its catalog name (one of them), and whether it is the
        name. 0.1 named the path ``table``: a ``table`` with a ``/`` is a path."""
        if path is not None and table is None:
            if catalog.is_name(path) and "." in path:
                self.log.warning("%s(%r) is a path (a directory of that name); the catalog's "
                                 "table of that name is table=%r", call, path, path)
            return path, False
        if path is None and table is not None:
            if "/" not in table:  # a name (``catalog.require`` refuses one that is not)
                return table, True
            warnings.warn(f"{call}(table={table!r}): a path is the first argument now; "
                          "table= is a catalog name", DeprecationWarning, stacklevel=3)
            return table, False
        raise JobError(self.job_name, f"{call}: give the table's path or its catalog name "
                       "(table=), one of them.")

    def _changes(self, applied: bool, *, keys: str | Sequence[str],
                 sequence_by: str | Sequence[str], apply_as_deletes: str | None,
                 except_columns: Sequence[str], scd_type: Literal[1, 2],
                 track_history_columns: Sequence[str] | None,
                 tombstone_retention: timedelta | None) -> ApplyChanges | None:
        """The apply_changes options of a write (None: the write applies no changes)."""
        if not applied:
            return None
        return ApplyChanges(
            keys=_as_tuple(keys), sequence_by=_as_tuple(sequence_by),
            apply_as_deletes=apply_as_deletes, except_columns=tuple(except_columns),
            scd_type=scd_type,
            tombstone_retention=tombstone_retention or self._run.scope.tombstone_retention,
            track_history_columns=None if track_history_columns is None
            else tuple(track_history_columns))

    def write_iceberg(
        self, df: DataFrame, table: str, *, mode: IcebergWriteMode = "append",
        keys: str | Sequence[str] = (), merge_schema: bool = False, checks: str | None = None,
        sequence_by: str | Sequence[str] = (), apply_as_deletes: str | None = None,
        except_columns: Sequence[str] = (), scd_type: Literal[1, 2] = 1,
        track_history_columns: Sequence[str] | None = None,
        tombstone_retention: timedelta | None = None,
    ) -> WriteResult:
        """Write ``df`` to the Iceberg table ``table`` (``catalog.namespace.table``; created when
        missing) in one snapshot carrying this run, as ``write_delta`` does (``checks`` too):
        ``mode`` ``append``, ``overwrite`` (the whole table), ``merge`` (an upsert on ``keys``)
        or ``apply_changes`` (change records, with the options ``write_delta`` takes).
        With ``merge_schema``, the table first takes the rows' new columns and struct fields
        and Iceberg's promotions (int -> long, float -> double, decimal precision). Returns a
        ``WriteResult`` (``version``: the snapshot id).

        Raises:
            IcebergError, JobError, DataQualityError, StateBehindTargetsError
            SparkFeatureError: a Spark line Iceberg has no runtime for.
            ChangeRecordsError: bad apply_changes options or change records.
        """
        changes = self._changes(
            mode == "apply_changes" or bool(sequence_by), keys=keys, sequence_by=sequence_by,
            apply_as_deletes=apply_as_deletes, except_columns=except_columns,
            scd_type=scd_type, track_history_columns=track_history_columns,
            tombstone_retention=tombstone_retention)
        return self._run.writes.iceberg(df, table, mode=mode, checks=checks, keys=_as_tuple(keys),
                                       merge_schema=merge_schema, changes=changes)

    def write_parquet(self, df: DataFrame, target: str, *, partition_by: Sequence[str] = (),
                      checks: str | None = None) -> WriteResult:
        """``write_files(format="parquet")``: append ``df`` to the Parquet directory ``target``."""
        return self.write_files(df, target, format="parquet", partition_by=partition_by,
                                checks=checks)

    def write_files(self, df: DataFrame, target: str, *, format: str,
                    options: Mapping[str, str] | None = None, partition_by: Sequence[str] = (),
                    checks: str | None = None) -> WriteResult:
        """Append ``df`` to the directory ``target`` as files of ``format`` (parquet, json,
        csv, orc, avro, xml, text; Spark's writer ``options``), with a manifest, exactly
        once per run; ``result.version`` is the run_seq. Raises as ``write_delta``."""
        return self._run.writes.files(df, target, file_format=format, options=options,
                                     partition_by=partition_by, checks=checks)

    def write_jdbc(self, df: DataFrame, table: str, *, connection: str,
                   database: str | None = None, checks: str | None = None) -> WriteResult:
        """Append ``df``'s rows to the database table ``table`` (made if missing), exactly
        once per run: staged while the job runs, landed when it returns, in one database
        transaction with the run's mark (``framework.sinks.jdbc``). ``connection`` names a
        connection of conf; ``database``, another database of its server.

        Raises:
            JobError (``table`` is not a table name), DataQualityError, DatabaseError
        """
        return self._run.writes.jdbc(df, table, connection=connection, database=database,
                                    checks=checks)

    def publish(self, name: str, value: Any) -> None:
        """Publish a run property (e.g. the version written): the workflow's later jobs see
        it in ``ctx.run_properties`` (and as a param through ``args_from_properties``).
        Raises JobError: ``name`` is not letters, digits, ``_``, ``.`` and ``-``."""
        self._run.publish(name, value)


def job_run(ctx: JobContext) -> JobRun:
    """The runner's side of ``ctx``: for the runner and the Glue layer, not for jobs."""
    return ctx._run


def _as_tuple(value: str | Sequence[str]) -> tuple[str, ...]:
    """One string or several, as a tuple."""
    return (value,) if isinstance(value, str) else tuple(value)


def _reader_options(format: str, options: Mapping[str, Any] | None) -> dict[str, str]:
    """Spark's reader options: a CSV file's first line is its header unless said otherwise
    (as pandas, polars and DuckDB read CSV)."""
    texts = _texts(options)
    if format == "csv" and "header" not in {k.lower() for k in texts}:
        texts["header"] = "true"
    return texts


def _texts(options: Mapping[str, Any] | None) -> dict[str, str]:
    """Reader options as Spark takes them: text keys and values."""
    return {str(k): text_value(v) for k, v in (options or {}).items()}
