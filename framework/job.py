"""The job base class and the context a run hands to it.

    from framework import IncrementalJob

    class OrdersIngest(IncrementalJob):
        def run(self, ctx):
            df = ctx.read_files(ctx.params["landing"], format="json",
                                transformation_ctx="orders_src")
            ctx.write_delta(df, ctx.params["target"], mode="append")

Sources pin what they read against the bookmark when they are called. The runner records
that plan before each target commits and makes it count once the run succeeds (the commit
protocol in ``framework.runner``).
"""

from __future__ import annotations

import functools
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from framework.bookmark_history import BookmarkHistory
from framework.config import text_value
from framework.delta import (
    AppTransaction,
    DeltaEngine,
    EmbeddedEngine,
    Filter,
    WriteMode,
    WriteResult,
)
from framework.errors import (
    DatabaseError,
    JobError,
    SourceError,
    one_line,
)
from framework.faults import crash_point
from framework.modes import BookmarkOptions
from framework.quality.policy import RunChecks
from framework.run_plan import RunIdentity, RunPlan, SourceRead
from framework.sinks import jdbc as jdbc_sink
from framework.sinks import parquet
from framework.sinks.delta import app_id
from framework.sources import delta as delta_source
from framework.sources import files, jdbc, malformed
from framework.sources.files import (
    FileBookmark,
    FileFormat,
    FilePlan,
    ListingMode,
    RewritePolicy,
)
from framework.sources.malformed import BadRecords
from framework.spark import named_column
from framework.target_runs import RunOutputs, check_target_write
from state_tables.model import Watermark
from state_tables.store import StateStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from framework.quality import RuleSet
    from framework.quality.gate import RuleOutcome

__all__ = ["Connections", "IncrementalJob", "JobContext", "TargetWriteHooks"]

#: Resolves a connection name from conf (or a jdbc: URL) to a ``jdbc.Connection``.
Connections = Callable[[str], jdbc.Connection]
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


class TargetWriteHooks(Protocol):
    """The commit protocol's steps around each target write (see ``framework.runner``)."""

    def before_target_write(self, ctx: JobContext) -> Callable[[], object]:
        """Start recording the run's plan so far; the returned callable waits until it is
        recorded. The target's data is written meanwhile; it commits only after."""

    def after_target_write(self, ctx: JobContext) -> None: ...


class JobContext:
    """What ``IncrementalJob.run`` gets: Spark, params, the run's identity, bookmarked I/O.

    Reads (``read_files``, ``read_jdbc``, ``read_delta``) plan what is new for their
    context against its bookmark; writes (``write_delta``, ``write_parquet``,
    ``write_jdbc``, ``write_files``) commit that plan with the rows, exactly once.

    Example::

        def run(self, ctx):
            new = ctx.read_delta("data/lake/bronze/orders", transformation_ctx="bronze")
            ctx.write_delta(new.where("amount > 0"), "data/lake/silver/orders",
                            mode="merge", merge_on="order_id", checks="silver_orders")

    Attributes:
        spark, params, job_name, run_id, run_seq, mode, log, dry_run
        run_properties: the workflow run's properties when the job started (read-only;
            ``publish`` adds to them for the jobs after this one)
        workflow_name, workflow_run_id: the workflow run this run is part of, or None
        run_plan: what the run's reads planned and will commit (``framework.run_plan``)
    """

    def __init__(self, *, spark: SparkSession, run: RunIdentity, params: Mapping[str, str],
                 bookmark: BookmarkOptions, store: StateStore, engine: DeltaEngine,
                 connections: Connections, checks: Mapping[str, RuleSet] | None = None,
                 hooks: TargetWriteHooks | None = None, dry_run: bool = False):
        self.spark = spark
        self.params = dict(params)
        self.job_name, self.run_id, self.run_seq = run.job, run.run_id, run.run_seq
        self.run_properties: Mapping[str, str] = MappingProxyType(dict(run.workflow.properties))
        self.workflow_name, self.workflow_run_id = run.workflow.name, run.workflow.run_id
        self.bookmark = bookmark
        self.mode = bookmark.mode
        self.dry_run = dry_run
        self.log = logging.getLogger(f"deltamark.job.{run.job}")
        self._run = run
        self._store = store
        self._engine = engine
        self._connections = connections
        self._checks = dict(checks or {})
        self._run_checks = RunChecks(job=run.job, run_id=run.run_id, run_seq=run.run_seq,
                                     attempt=run.attempt, store=store, log=self.log)
        self._hooks = hooks
        #: what this run reads and will commit (the runner records it)
        self.run_plan = RunPlan(run, bookmark, BookmarkHistory(store, run.job))
        self._outputs = RunOutputs(run.job)
        #: database writes staged, to land when the job's code has returned (targets)
        self._staged: list[str] = []
        self._published: dict[str, str] = {}

    # --- sources ----------------------------------------------------------------------

    def read_files(
        self,
        paths: str | Sequence[str],
        *,
        format: FileFormat,
        transformation_ctx: str | None = None,
        bookmark: bool = True,
        options: Mapping[str, Any] | None = None,
        schema: StructType | str | None = None,
        recurse: bool = True,
        exclusions: str | Sequence[str] = (),
        bounded_files: int | None = None,
        bounded_size: int | None = None,
        rewritten: RewritePolicy = "ignore",
        max_file_age: timedelta | None = None,
        listing: ListingMode = "full",
        reconcile_every: timedelta = timedelta(days=1),
        queue: str | None = None,
        lineage_column: str | None = None,
        bad_records: BadRecords = "fail",
        bad_records_table: str | None = None,
    ) -> DataFrame:
        """Read the files under ``paths`` that this context has not processed yet.

        Args:
            paths: a directory, file or glob-free URI, or several.
            format: json, csv, parquet, orc, xml (needs ``options={"rowTag": ...}``),
                text or avro.
            transformation_ctx: the bookmark's name; required unless ``bookmark=False``
                or the mode is disable.
            bookmark: False reads every file, every run, and records nothing.
            options: Spark reader options, passed through.
            schema: the rows' schema (also the schema of an empty read).
            recurse: descend into subdirectories (Hive-style ``key=value`` directories
                become columns).
            exclusions: glob patterns (or Glue's JSON array string) of paths to skip.
            bounded_files, bounded_size: read at most this many files / bytes, oldest
                first; the rest waits for later runs.
            rewritten: a file read before that changed since: ``ignore`` or ``reprocess``.
            max_file_age: new files modified longer ago than this are not read (as
                Glue's and Structured Streaming's); each is tracked as ``too_old``,
                counted and named in the log. None (default): every new file is read,
                whatever its modification time.
            listing: ``full`` (every file under ``paths``, every run), ``start_after``
                (keys that arrive in lexical order: only those after the greatest seen),
                ``partitions`` (date-named or ``key=value`` directories: the one holding
                the greatest key seen, and those after it) or ``notifications`` (S3
                event notifications in the SQS queue ``queue``, the source's own; needs
                boto3).
            reconcile_every: a partial listing mode lists in full this often; a file it
                finds is read like any new one.
            lineage_column: add the source file's URI to each row under this name.
            bad_records: what a malformed JSON, CSV or XML record does: ``fail`` the run
                (naming the file), ``drop`` it (counted as ``malformed`` in the run's
                inputs) or ``quarantine`` it: to ``bad_records_table``, a Delta table of
                context, file, line, record, run_id and run_seq, written in this run,
                exactly once (``framework.sources.malformed``). A reader ``mode`` option
                takes precedence.

        Raises:
            MissingContextError, SourceError
        """
        path_list = (paths,) if isinstance(paths, str) else tuple(paths)
        context = self.run_plan.context(transformation_ctx, bookmark,
                                        f"read_files({path_list!r})")
        source = files.FileSource(
            paths=path_list, format=format,
            options={str(k): text_value(v) for k, v in (options or {}).items()},
            schema=schema, recurse=recurse, exclusions=files.parse_exclusions(exclusions),
            bounded_files=bounded_files, bounded_size=bounded_size, rewritten=rewritten,
            max_file_age_ms=None if max_file_age is None else int(max_file_age / MILLISECOND),
            listing=listing, reconcile_ms=int(reconcile_every / MILLISECOND), queue=queue,
            lineage_column=lineage_column,
            bad_records=bad_records, bad_records_table=bad_records_table)
        if problems := source.problems():
            raise SourceError(self.job_name, context, "; ".join(problems))

        def plan_files(start: FileBookmark | None, end: FileBookmark | None,
                       advance: bool) -> FilePlan:
            try:  # a pause range lists in full: its bounds are two runs' bookmarks
                listed = (files.listed_for_run(source, start) if advance
                          else files.list_files(source))
            except (OSError, ValueError) as exc:
                raise SourceError(self.job_name, context, f"cannot list files: {exc}") from exc
            return files.plan_files(listed, source, start=start, end=end, advance=advance)

        plan = self.run_plan.plan(
            context, files.SOURCE_KIND, tracked=bookmark, plan=plan_files,
            pinned=lambda read: FilePlan(files=read.files, listed=len(read.files),
                                         state=read.state))
        self.run_plan.add(SourceRead(context, files.SOURCE_KIND, plan.counts(), plan.state,
                                     plan.files, plan.set_aside, nothing=not plan.files,
                                     description=source.description() if bookmark else None,
                                     acknowledge=plan.acknowledge))
        self.log.info("%s: %d of %d files to read (%d bytes), %d left for later runs%s",
                      context, len(plan.files), plan.listed, plan.bytes, plan.backlog,
                      "" if plan.complete else " (listed from the bookmark's last key)")
        for outcome, why in files.NOT_READ.items():
            if named := [s.file.path for s in plan.set_aside if s.outcome == outcome]:
                self.log.warning("%s: %d files %s, not read: %s%s", context, len(named),
                                 why, ", ".join(named[:10]),
                                 f" and {len(named) - 10} more" if len(named) > 10 else "")
        try:
            df = files.read_files(self.spark, source, plan)
            if source.bad_records == "fail" or not malformed.applies(source.format,
                                                                    source.options):
                return df
            df, bad = malformed.set_aside(df)
        except ValueError as exc:
            raise SourceError(self.job_name, context, str(exc)) from exc
        except Exception as exc:  # Spark's own errors (FAILFAST, a corrupt file): one line
            if not type(exc).__module__.startswith(("py4j", "pyspark")):
                raise
            found = files.first_malformed(self.spark, source, plan) if (
                source.bad_records == "fail"
                and malformed.applies(source.format, source.options)) else None
            raise SourceError(self.job_name, context, found or one_line(exc)) from exc
        if bad:
            self._set_aside(context, source, bad)
        return df

    def _set_aside(self, context: str, source: files.FileSource,
                   bad: list[tuple[str, str]]) -> None:
        """Count ``context``'s malformed records and, to quarantine them, write them."""
        self.run_plan.count(context, "malformed", len(bad))
        self.log.warning("%s: %d malformed records %s (first in %s)", context, len(bad),
                         "dropped" if source.bad_records == "drop"
                         else f"quarantined to {source.bad_records_table}", bad[0][0])
        if source.bad_records == "quarantine":
            rows = [(context, file, line, record, self.run_id, self.run_seq)
                    for file, line, record in malformed.located(bad)]
            self._quarantine(self.spark.createDataFrame(rows, malformed.QUARANTINE_SCHEMA),
                             source.bad_records_table)

    def read_delta(
        self,
        table: str,
        *,
        transformation_ctx: str | None = None,
        bookmark: bool = True,
        change_feed: bool | None = None,
        version: int | None = None,
    ) -> DataFrame:
        """Read what the Delta table ``table`` gained since this context's last run.

        The first run reads the whole table. Later runs read the versions after the
        bookmark, up to the version pinned when the read is planned: the appended rows,
        or with the table's Change Data Feed (``change_feed=None``: when the table has it)
        every insert, update and delete with ``_change_type``, ``_commit_version`` and
        ``_commit_timestamp``. This is how jobs chain: job B reads job A's target.
        ``bookmark=False`` reads the whole table, at ``version`` when given (e.g. the
        version an upstream job published in a workflow).

        Args:
            table: the Delta table's path (local or ``s3://``).
            transformation_ctx: the context whose bookmark the read follows (needed when
                ``bookmark`` is on).
            bookmark: off: read the whole table, whatever earlier runs read.
            change_feed: read the Change Data Feed (None: when the table has it).
            version: with ``bookmark=False``, the version to read.

        Returns:
            The rows the table gained (with the change columns when read from its feed).

        Raises:
            JobError: ``version`` with a bookmarked read.
            MissingContextError, TableNotFoundError
            ChangesUnavailableError: rows were changed in place and the table has no Change
                Data Feed, or the needed history is gone (reset the context to reload).
        """
        if version is not None and bookmark:
            raise JobError(self.job_name, f"read_delta({table!r}, version={version}): a "
                           "version is for whole-table reads; pass bookmark=False.")
        context = self.run_plan.context(transformation_ctx, bookmark, f"read_delta({table!r})")
        pinned_end = None if version is None else delta_source.DeltaState(table, version)
        plan = self.run_plan.plan(
            context, delta_source.SOURCE_KIND, tracked=bookmark,
            pinned=lambda read: delta_source.DeltaPlan.pinned(read.state),
            plan=lambda start, end, advance: delta_source.plan_delta(
                table, start=start, end=end or pinned_end, advance=advance))
        self.run_plan.add(SourceRead(
            context, delta_source.SOURCE_KIND, plan.counts(),
            plan.state() if plan.advance else None, nothing=not plan.counts()["versions"],
            description=delta_source.description(plan, tracked=bookmark, version=version)))
        self.log.info("%s: versions %s..%d of %s", context,
                      "0" if plan.after is None else plan.after + 1, plan.to, table)
        return delta_source.read_delta(self._engine, plan, change_feed=change_feed)

    def read_jdbc(
        self,
        table: str | None = None,
        *,
        connection: str,
        query: str | None = None,
        transformation_ctx: str | None = None,
        bookmark: bool = True,
        keys: str | Sequence[str] = (),
        sort_order: jdbc.SortOrder = "asc",
        primary_key: str | Sequence[str] = (),
        lookback: int | float | timedelta | None = None,
        partition_column: str | None = None,
        num_partitions: int | None = None,
        lower_bound: Any = None,
        upper_bound: Any = None,
        fetch_size: int = 50_000,
        options: Mapping[str, Any] | None = None,
    ) -> DataFrame:
        """Read the rows of a database table (or query) this context has not read yet.

        The first run reads every row. Later runs read the rows past the bookmark, up to
        the last row when the read is planned; rows inserted meanwhile wait for the next
        run, rows sharing the boundary key values are neither lost nor read twice.

        Args:
            table: the table (``schema.table`` allowed); or give ``query``, a SELECT.
            connection: a connection named in conf (``connections:``; credentials from
                ``${VAR}`` or conf/local.yaml), or a ``jdbc:`` URL.
            keys: the bookmark columns (Glue's jobBookmarkKeys); several form a compound
                key. Default: the table's primary key.
            sort_order: ``asc`` (new rows have higher keys) or ``desc``.
            primary_key: the columns that identify a row, when the table declares none
                (or for a query).
            lookback: also re-read rows whose first key is this far (a number, or a
                timedelta for date/time keys) before the bookmark: an ``updated_at`` key
                then sees updates. Write the result with ``mode="merge"``.
            partition_column, num_partitions, lower_bound, upper_bound: read in parallel
                (Spark's JDBC options). ``num_partitions`` alone partitions on the first
                key; the bounds default to the planned rows' min and max. Without them, a
                read on a numeric first key gets a partition per 100,000 rows, up to the
                session's parallelism.
            fetch_size: rows per round trip. options: Spark JDBC reader options.

        Raises:
            MissingContextError, SourceError (names the database, never the password)
        """
        key_list = (keys,) if isinstance(keys, str) else tuple(keys)
        id_list = (primary_key,) if isinstance(primary_key, str) else tuple(primary_key)
        resolved = self._connections(connection)
        context = self.run_plan.context(transformation_ctx, bookmark,
                                        f"read_jdbc({table or 'query'!r}, {resolved.display})")
        source = jdbc.JdbcSource(
            connection=resolved, table=table, query=query, keys=key_list,
            order=sort_order, primary_key=id_list, lookback=lookback,
            partition_column=partition_column, num_partitions=num_partitions,
            lower_bound=lower_bound, upper_bound=upper_bound, fetch_size=fetch_size,
            options={str(k): text_value(v) for k, v in (options or {}).items()})
        if problems := source.problems():
            raise SourceError(self.job_name, context, "; ".join(problems))
        try:
            plan = self.run_plan.plan(
                context, jdbc.SOURCE_KIND, tracked=bookmark,
                pinned=lambda read: jdbc.JdbcPlan.pinned(read.state),
                plan=lambda start, end, advance: jdbc.plan_jdbc(
                    self.spark, source, start=start, end=end, advance=advance))
            df = jdbc.read_jdbc(self.spark, source, plan)
        except DatabaseError as exc:
            raise SourceError(self.job_name, context, str(exc)) from exc
        self.run_plan.add(SourceRead(
            context, jdbc.SOURCE_KIND, plan.counts(), plan.state() if plan.advance else None,
            rereads=plan.lookback, nothing=not plan.rows,
            description=jdbc.description(connection, source, plan) if bookmark else None))
        self.log.info("%s: %d rows of %s", context, plan.rows, plan.source)
        return df

    # --- watermarks -------------------------------------------------------------------

    def watermark(self, df: DataFrame, column: str, *, transformation_ctx: str,
                  aggregate: Literal["max", "min"] = "max") -> Any:
        """Record the max (or min) of ``column`` over ``df`` for this run and return it.

        It counts once the run succeeds in enable mode (pause and disable runs leave the
        state as it was); the next run gets it from ``last_watermark``.
        A DataFrame without rows gives None and keeps the previous watermark.

        Raises:
            JobError: unknown column or aggregate, a column of a type a watermark is not
                (a number, string, date, timestamp or boolean), or the context already
                has one.
        """
        if aggregate not in ("max", "min"):
            raise JobError(self.job_name, f"watermark aggregate must be max or min, not "
                           f"{aggregate!r}")
        if column not in df.columns:
            raise JobError(self.job_name, f"watermark {transformation_ctx}: no column "
                           f"{column!r} (columns: {', '.join(df.columns)})")
        if transformation_ctx in self.run_plan.watermarks:
            raise JobError(self.job_name, f"watermark {transformation_ctx} is set twice in "
                           "one run; give each its own transformation_ctx.")
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        value_type = df.schema[column].dataType
        if not isinstance(value_type, T.NumericType | T.StringType | T.DateType |
                          T.TimestampType | T.TimestampNTZType | T.BooleanType):
            raise JobError(self.job_name, f"watermark {transformation_ctx}: column {column!r} "
                           f"is {value_type.simpleString()}; a watermark is a number, string, "
                           "date, timestamp or boolean.")

        agg = F.max if aggregate == "max" else F.min
        row = df.agg(agg(named_column(column)).alias("value"),
                     F.count(F.lit(1)).alias("rows")).first()
        if row["rows"] == 0:
            return None
        self.run_plan.watermarks[transformation_ctx] = Watermark(
            job=self.job_name, context=transformation_ctx, run_id=self.run_id,
            run_seq=self.run_seq, column=column, aggregate=aggregate, value=row["value"],
            value_type=value_type.simpleString(), rows=row["rows"])
        return row["value"]

    def last_watermark(self, transformation_ctx: str) -> Any:
        """The watermark the latest successful run recorded for this context, or None."""
        found = [w for w in self._store.watermarks(self.job_name)
                 if w.context == transformation_ctx]
        return found[0].value if found else None

    # --- targets ----------------------------------------------------------------------

    def write_delta(
        self,
        df: DataFrame,
        target: str,
        *,
        mode: WriteMode = "append",
        partition_by: Sequence[str] = (),
        replace_where: Sequence[Filter] = (),
        merge_schema: bool = False,
        merge_on: str | Sequence[str] = (),
        checks: str | None = None,
    ) -> WriteResult:
        """Write ``df`` to the Delta table ``target`` in one commit tagged with this run.

        ``mode`` is ``append``, ``overwrite`` or ``merge`` (upsert on the ``merge_on``
        columns; what a read with ``lookback`` needs, since it reads some rows again).

        ``checks`` names a rule set of the job's conf (``checks:``): its rules are
        evaluated on ``df`` first, and its policy decides. ``fail``: a failing rule writes
        nothing and fails the run. ``quarantine``: rows breaking row-level rules go to the
        rule set's quarantine table (with ``_dq_broken_rules``), the others to ``target``,
        both in this run; a failing table-level rule fails the run. ``warn``: write
        anyway. Results go to the ``dq_results`` state table. A DataFrame without rows (no
        new input) is not checked.

        The commit carries the app transaction (``deltamark:<job>``, run_seq) and, in its
        metadata, the run id and the state this run will commit
        (``target_runs.run_record``); a replay of the same run is skipped, and a target
        holding a run the state does not know is refused. Each target is written once per
        run. A DataFrame without columns (an empty read with no schema) writes nothing, nor
        does an append or merge of no rows in a run whose reads found nothing new: the
        target gets no empty version (the run still commits its bookmarks). In a dry run
        nothing is written (and no checks run).

        Args:
            df: the rows to write.
            target: the Delta table's path (local or ``s3://``); created by the first write.
            mode: ``append``, ``overwrite`` or ``merge``.
            partition_by: partition columns of a table this write creates.
            replace_where: with ``overwrite``, replace only the partitions matching these
                partition-column filters (``[("day", "=", "2024-01-01")]``).
            merge_schema: add the columns ``df`` has and the table lacks.
            merge_on: with ``merge``, the key column(s).
            checks: a rule set of the job's conf that gates the write.

        Returns:
            A ``WriteResult``: the table's version after the write; ``skipped`` when
            nothing was committed (a replay of a run the table holds, or no rows).

        Raises:
            JobError: the target was already written in this run, rows read again by a
                lookback would be appended, or ``checks`` names no rule set.
            DataQualityError: the checks failed (nothing was written).
            StateBehindTargetsError: the target holds a run the state does not know.
            SchemaMismatchError, WriteConflictError
        """
        write = functools.partial(
            self._write, target=target, mode=mode, partition_by=partition_by,
            replace_where=replace_where, merge_schema=merge_schema,
            merge_on=(merge_on,) if isinstance(merge_on, str) else tuple(merge_on))
        return self._checked_write(df, target, mode, checks, write)

    def write_parquet(self, df: DataFrame, target: str, *, partition_by: Sequence[str] = (),
                      checks: str | None = None) -> WriteResult:
        """Append ``df`` to the plain Parquet directory ``target``, exactly once per run.

        For readers that take only Parquet. The run's files and a manifest are committed
        the way ``framework.sinks.parquet`` describes; recovery and ``--restore-targets``
        rewinds delete this job's files precisely. ``result.version`` is the run_seq.
        ``checks`` works as in ``write_delta``. Prefer Delta where readers must never see
        part of a run.

        Raises:
            JobError: as ``write_delta``.
            DataQualityError: the checks failed (nothing was written).
        """
        return self.write_files(df, target, format="parquet", partition_by=partition_by,
                                checks=checks)

    def write_files(self, df: DataFrame, target: str, *, format: str,
                    options: Mapping[str, str] | None = None,
                    partition_by: Sequence[str] = (), checks: str | None = None
                    ) -> WriteResult:
        """Append ``df`` to the directory ``target`` as files of ``format`` (parquet,
        json, csv, orc, avro, xml, text; Spark's writer ``options``), exactly once per
        run, as ``write_parquet`` does.

        Raises:
            JobError: as ``write_delta``.
            DataQualityError: the checks failed (nothing was written).
        """
        write = functools.partial(self._write, target=target, mode="append",
                                  partition_by=partition_by, file_format=format,
                                  file_options=options)
        return self._checked_write(df, target, "append", checks, write)

    def write_jdbc(self, df: DataFrame, table: str, *, connection: str,
                   database: str | None = None, checks: str | None = None) -> WriteResult:
        """Append ``df``'s rows to the database table ``table``, exactly once per run.

        The rows are staged in the database while the job runs, and land in ``table``
        when the job's code has returned, in one database transaction with the run's
        mark (``framework.sinks.jdbc``): a crash, a retry or a gate rejecting a later
        write never duplicates or half-writes them. ``table`` (``schema.name``) is made
        from the rows' columns if it does not exist. ``connection`` names a connection
        of conf (``connections:``); ``database`` switches to another database of its
        server. ``checks`` works as in ``write_delta``. ``result.version`` is the run_seq.

        Raises:
            JobError: ``table`` is not a table name, or as ``write_delta``.
            DataQualityError: the checks failed (nothing was staged).
            DatabaseError: the database refused the rows.
        """
        try:
            jdbc_sink.check_table_name(table)
        except ValueError as exc:
            raise JobError(self.job_name, f"write_jdbc: {exc}.") from None
        target = jdbc_sink.target_key(connection, table)
        write = functools.partial(self._stage, target=target, output={
            **jdbc_sink.OUTPUT_TAG, "connection": connection, "table": table,
            **({"database": database} if database else {})})
        return self._checked_write(df, target, "append", checks, write)

    def _stage(self, df: DataFrame, *, target: str, output: Mapping[str, Any]
               ) -> WriteResult:
        self._outputs.claim(target)
        if self.dry_run or not df.columns or df.isEmpty():
            if not self.dry_run:
                self.log.info("%s: no rows to write: no commit", target)
            self._outputs.skip(target, **output)
            return WriteResult(version=self.run_seq, skipped=True)
        connection = jdbc_sink.output_connection(output, self._connections)
        rows = jdbc_sink.stage(self.spark, df, connection, output["table"],
                               job=self.job_name, run_seq=self.run_seq)
        crash_point("staged")
        self.log.info("staged %d rows for %s (they land when the job returns)", rows, target)
        self._outputs.start(target, **output, rows=rows)
        self._staged.append(target)
        return WriteResult(version=self.run_seq)

    def land_staged(self) -> None:
        """Land the rows ``write_jdbc`` staged, each table in one database transaction
        with the run's mark; the plan is recorded before each lands."""
        for target in self._staged:
            output = self._outputs.entry(target)
            planned = self._hooks.before_target_write(self) if self._hooks else (lambda: None)
            planned()
            connection = jdbc_sink.output_connection(output, self._connections)
            rows, replayed = jdbc_sink.land(
                self.spark, connection, output["table"], job=self.job_name,
                run_id=self.run_id, run_seq=self.run_seq, record=self.run_plan.record())
            self.log.info("%s %s (%d rows)", "found run already in" if replayed else "wrote",
                          target, rows if not replayed else output["rows"])
            self._outputs.land(target, replayed=replayed)
            if self._hooks:
                self._hooks.after_target_write(self)
        self._staged.clear()

    def _checked_write(self, df: DataFrame, target: str, mode: WriteMode, checks: str | None,
                       write: Callable[[DataFrame], WriteResult]) -> WriteResult:
        """``write(df)``, after the rule set ``checks`` (if any) let the rows through."""
        if mode == "append" and (rereading := self.run_plan.rereading()):
            raise JobError(self.job_name, f"{', '.join(rereading)} read rows again (lookback); "
                           f"appending them to {target} would duplicate them. Write with "
                           "mode='merge', merge_on=<primary key>.")
        if checks is not None and checks not in self._checks:
            raise JobError(self.job_name, f"checks={checks!r}: no such rule set under checks: "
                           f"in the job's conf (there: {', '.join(self._checks) or 'none'}).")
        self._outputs.claim(target)  # written twice: fail before any check runs
        if checks is None or self.dry_run or not df.columns:
            return write(df)
        return write(self._run_checks.gate(df, self._checks[checks], target=target,
                                           quarantine=self._quarantine))

    def _write(self, df: DataFrame, *, target: str, mode: WriteMode,
               partition_by: Sequence[str] = (), replace_where: Sequence[Filter] = (),
               merge_schema: bool = False, merge_on: Sequence[str] = (),
               file_format: str | None = None,
               file_options: Mapping[str, str] | None = None,
               engine: DeltaEngine | None = None) -> WriteResult:
        """Write to a Delta table (on ``engine``, else the job's Delta path), or with
        ``file_format`` to a directory of files."""
        engine = engine or self._engine
        self._outputs.claim(target)
        kind = {} if file_format is None else {**parquet.OUTPUT_TAG, **(
            {"file_format": file_format} if file_format != "parquet" else {})}
        # an append or merge of no rows changes nothing; an empty overwrite does
        read_nothing = self.run_plan.read_nothing()
        adds_rows_only = mode != "overwrite" and not replace_where
        if self.dry_run or not df.columns or (adds_rows_only and read_nothing
                                              and df.isEmpty()):
            if not self.dry_run:
                self.log.info("%s: no rows to write: no commit", target)
            self._outputs.skip(target, **kind)
            current = None if file_format else engine.version(target)
            return WriteResult(version=-1 if current is None else current, skipped=True)
        check_target_write(target, self.job_name, self.run_seq, self.run_id)
        self._outputs.start(target, **kind)
        planned = self._hooks.before_target_write(self) if self._hooks else (lambda: None)

        def staged() -> None:  # the data is written, uncommitted: it waits for the plan
            planned()
            crash_point("staged")

        try:  # the data is written while the plan is recorded; it commits only after
            if file_format:
                commit = parquet.write(df, target, job=self.job_name, run_id=self.run_id,
                                       run_seq=self.run_seq, attempt=self._run.attempt,
                                       partition_by=partition_by, record=self.run_plan.record(),
                                       before_commit=staged, file_format=file_format,
                                       options=file_options)
                result = WriteResult(version=self.run_seq, skipped=commit.replayed)
                written = {"files": len(commit.files), "rows": commit.rows}
            else:
                result = engine.write(
                    df, target, mode=mode, partition_by=partition_by,
                    replace_where=replace_where, merge_schema=merge_schema, merge_on=merge_on,
                    txn=AppTransaction(app_id(self.job_name), self.run_seq),
                    metadata={"deltamark": self.run_plan.record()}, before_commit=staged)
                written = {"version": result.version}
        finally:
            planned()  # also after a skipped or failed write: the record is done before we go on
        self.log.info("%s %s (%s)", "found run already in" if result.skipped else "wrote",
                      target, f"{written['files']} files, {written['rows']} rows"
                      if file_format else f"version {result.version}")
        self._outputs.land(target, replayed=result.skipped, **written)
        if self._hooks:
            self._hooks.after_target_write(self)
        return result

    def rolled_back(self, target: str) -> None:
        """``target``'s write of this run was undone (see ``runner``): it is no longer
        one of the run's writes."""
        self._outputs.roll_back(target)

    def evaluate_checks(self, df: DataFrame, ruleset: RuleSet, *, target: str,
                        record: bool = True) -> tuple[int, list[RuleOutcome]]:
        """Evaluate ``ruleset`` on ``df`` and record the outcomes, without acting on them
        (``RunChecks.evaluate``): the rows checked and each rule's outcome."""
        return self._run_checks.evaluate(df, ruleset, target=target, record=record)

    def _quarantine(self, rows: DataFrame, table: str) -> None:
        """Append rejected ``rows`` (a rule set's, or a source's malformed records) to the
        quarantine ``table``, in this run: through delta-rs, as the state tables are,
        unless the table has features only the native path writes (one a user made). The
        append then commits in milliseconds, where delta-spark first rebuilds the table's
        snapshot in Spark jobs (~1 s a run). They are this run's own rows, appended
        exactly once even when a source of the run reads rows again (a lookback)."""
        embedded = EmbeddedEngine(self.spark)
        self._write(rows, target=table, mode="append", merge_schema=True,
                    engine=embedded if embedded.can_write(table) else self._engine)

    # --- workflows --------------------------------------------------------------------

    def publish(self, name: str, value: Any) -> None:
        """Publish a run property (e.g. the version this run wrote): in a workflow, the jobs
        started after this one see it in ``ctx.run_properties`` (and as a param where a
        trigger maps it: ``args_from_properties``). Also in the run's report.

        Raises:
            JobError: ``name`` is not a plain name (letters, digits, ``_``, ``.``, ``-``).
        """
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", name):
            raise JobError(self.job_name, f"publish({name!r}): a run property's name is "
                           "letters, digits, '_', '.' or '-', starting with a letter or '_'.")
        self._published[name] = text_value(value)

    def published(self) -> dict[str, str]:
        return dict(self._published)

    def hold_bookmarks(self) -> None:
        """This run's bookmarks (and watermarks) will not count: it ends as a pause run
        (a Glue script that never called ``job.commit()``). Its writes stand."""
        self.run_plan.held = True

    def outputs(self) -> dict[str, dict[str, Any]]:
        """What each target of this run was written with (the runner records it)."""
        return self._outputs.recorded()

