"""One run's machinery behind the ``JobContext`` its job holds: the plan its reads make,
its target writes and what each was written with, the database rows it staged, its
data-quality gate, the properties it publishes. The runner owns it (and calls the commit
protocol's steps through ``TargetWriteHooks``); the Glue layer reaches it with
``framework.run.job.job_run``. Job code never does.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from framework import iceberg
from framework.common import humanize
from framework.common.faults import crash_point
from framework.config import text_value
from framework.delta import (
    AppTransaction,
    DeltaEngine,
    EmbeddedEngine,
    Filter,
    WriteMode,
    WriteResult,
)
from framework.errors import DatabaseError, IcebergError, JobError, SourceError, one_line
from framework.jdbc import Connection
from framework.quality.policy import RunChecks
from framework.run.bookmarks import BookmarkHistory
from framework.run.lineage import Dataset, RunDatasets
from framework.run.modes import BookmarkOptions
from framework.run.plan import RunIdentity, RunPlan, SourceRead
from framework.run.targets import RunOutputs, check_target_write
from framework.sinks import iceberg as iceberg_sink
from framework.sinks import jdbc as jdbc_sink
from framework.sinks import parquet
from framework.sinks.delta import app_id
from framework.sources import delta as delta_source
from framework.sources import files, jdbc
from framework.sources import iceberg as iceberg_source
from framework.sources.bookmark_codec import encode
from framework.sources.files import FileBookmark, FilePlan, malformed, schema_drift
from framework.spark.lines import require_iceberg_runtime
from framework.spark.session import named_column
from state_tables.model import DqResult, RunOutput, Watermark
from state_tables.store import StateStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from framework.quality import RuleSet
    from framework.quality.gate import RuleOutcome

__all__ = ["Connections", "JobRun", "TargetWriteHooks"]

#: Resolves a connection name from conf (or a jdbc: URL) to a ``Connection``.
Connections = Callable[[str], Connection]


class TargetWriteHooks(Protocol):
    """The commit protocol's steps around each target write (see ``framework.run.runner``)."""

    def before_target_write(self, run: JobRun) -> Callable[[], object]:
        """Start recording the run's plan so far; the returned callable waits until it is
        recorded. The target's data is written meanwhile; it commits only after."""

    def after_target_write(self, run: JobRun) -> None: ...


class JobRun:
    """A run's reads, writes and records, for ``JobContext`` to call and the runner to
    commit: ``plan`` (what the reads planned and will commit), ``outputs()``,
    ``published()``, ``land_staged()``, ``rolled_back()``."""

    def __init__(self, *, spark: SparkSession, run: RunIdentity, bookmark: BookmarkOptions,
                 store: StateStore, engine: DeltaEngine, connections: Connections,
                 checks: Mapping[str, RuleSet] | None = None,
                 hooks: TargetWriteHooks | None = None, dry_run: bool = False):
        self.spark = spark
        self.identity = run
        self.job_name, self.run_id, self.run_seq = run.job, run.run_id, run.run_seq
        self.bookmark = bookmark
        self.dry_run = dry_run
        self.log = logging.getLogger(f"deltamark.job.{run.job}")
        self.connections = connections
        #: what this run reads and will commit (the runner records it)
        self.plan = RunPlan(run, bookmark, BookmarkHistory(store, run.job))
        self._store = store
        self._engine = engine
        self._checks = dict(checks or {})
        self._run_checks = RunChecks(job=run.job, run_id=run.run_id, run_seq=run.run_seq,
                                     attempt=run.attempt, store=store, log=self.log)
        self._hooks = hooks
        self._outputs = RunOutputs(run.job)
        #: database writes staged, to land when the job's code has returned (targets)
        self._staged: list[str] = []
        self._published: dict[str, str] = {}
        #: context -> what its files changed in its schema, in words (the run's report)
        self.schema_changes: dict[str, list[str]] = {}
        #: the rescued-data columns of the run's file reads
        self._rescued_columns: set[str] = set()
        self._datasets = RunDatasets()

    # --- sources ----------------------------------------------------------------------

    def read_files(self, source: files.FileSource, *, transformation_ctx: str | None,
                   bookmark: bool) -> DataFrame:
        """``JobContext.read_files``: plan ``source`` against its context's bookmark, read."""
        context = self.plan.context(transformation_ctx, bookmark,
                                    f"read_files({source.paths!r})")
        if problems := source.problems():
            raise SourceError(self.job_name, context, "; ".join(problems))

        def plan_files(start: FileBookmark | None, end: FileBookmark | None,
                       advance: bool) -> FilePlan:
            try:  # a pause range lists in full: its bounds are two runs' bookmarks
                listed = (files.listed_for_run(source, start) if advance
                          else files.list_files(source))
            except (OSError, ValueError) as exc:
                raise SourceError(self.job_name, context, f"cannot list files: {exc}") from exc
            if source.partition_filter:
                try:
                    within = files.within_partitions(self.spark, listed,
                                                     source.partition_filter)
                except ValueError as exc:
                    raise SourceError(self.job_name, context, str(exc)) from exc
                self.log.info("%s: %d of %d files in partitions %s leaves out, neither read "
                              "nor tracked", context, len(listed) - len(within), len(listed),
                              source.partition_filter)
                listed = within
            return files.plan_files(listed, source, start=start, end=end, advance=advance)

        plan = self.plan.plan(
            context, files.SOURCE_KIND, tracked=bookmark, plan=plan_files,
            # a file context pins a FileState (or files alone)
            pinned=lambda read: FilePlan(files=read.files, listed=len(read.files),
                                         state=cast("files.FileState | None", read.state)))
        self.plan.add(SourceRead(context, files.SOURCE_KIND, plan.counts(), plan.state,
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
            read = files.read_files(self.spark, source, plan, run_id=self.run_id)
            self._schema_read(context, source, plan, read)
            df, datasets = read.df, [Dataset.at_path(path) for path in source.paths]
            if source.bad_records == "fail" or not malformed.applies(source.format,
                                                                    source.options):
                return self._read(context, datasets, df)
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
        return self._read(context, datasets, df)

    def _schema_read(self, context: str, source: files.FileSource, plan: FilePlan,
                     read: files.FilesRead) -> None:
        """Record what ``read`` did to ``context``'s schema: in the state its run commits
        (the schema, its changes), its counts and the log."""
        if read.drift is not None and plan.state is not None:
            self.plan.update_state(context, dataclasses.replace(
                plan.state, schema=schema_drift.to_json(read.drift.schema),
                schema_changes=read.drift.changes or None,
                rescued_column=read.rescued_column))
        if read.rescued_column is not None:
            self._rescued_columns.add(read.rescued_column)
        said = []
        if read.drift is not None and read.drift.changes != ("first read",):
            said += list(read.drift.changes)
        if read.drift is not None and read.drift.new:
            mode = source.evolution_mode
            if mode == "rescue":  # their values are counted as rescued below
                said.append(f"new, kept out of the schema (schema_evolution='rescue'): "
                            f"{', '.join(read.drift.new)}")
            else:
                self.plan.count(context, "new_columns_left_out", len(read.drift.new))
                said.append(f"left out (schema_evolution={mode!r}): "
                            f"{', '.join(read.drift.new)}")
        if read.rescued:
            self.plan.count(context, "rescued", sum(read.rescued.values()))
            said += [f"{name}: {humanize.plural(count, 'value')} rescued to "
                     f"{read.rescued_column}" for name, count in read.rescued.items()]
        if said:
            self.schema_changes[context] = said
            self.log.warning("%s: schema: %s", context, "; ".join(said))

    def _set_aside(self, context: str, source: files.FileSource,
                   bad: list[tuple[str, str]]) -> None:
        """Count ``context``'s malformed records and, to quarantine them, write them."""
        self.plan.count(context, "malformed", len(bad))
        self.log.warning("%s: %d malformed records %s (first in %s)", context, len(bad),
                         "dropped" if source.bad_records == "drop"
                         else f"quarantined to {source.bad_records_table}", bad[0][0])
        if source.bad_records == "quarantine":
            assert source.bad_records_table  # read_files refused the source without one
            rows = [(context, file, line, record, self.run_id, self.run_seq)
                    for file, line, record in malformed.located(bad)]
            self._quarantine(self.spark.createDataFrame(rows, malformed.QUARANTINE_SCHEMA),
                             source.bad_records_table)

    def read_delta(self, table: str, *, transformation_ctx: str | None, bookmark: bool,
                   change_feed: bool | None, version: int | None) -> DataFrame:
        """``JobContext.read_delta``."""
        if version is not None and bookmark:
            raise JobError(self.job_name, f"read_delta({table!r}, version={version}): a "
                           "version is for whole-table reads; pass bookmark=False.")
        context = self.plan.context(transformation_ctx, bookmark, f"read_delta({table!r})")
        pinned_end = None if version is None else delta_source.DeltaState(table, version)
        plan = self.plan.plan(
            context, delta_source.SOURCE_KIND, tracked=bookmark,
            # a Delta context pins its DeltaState (no files), so run_plan has one to give
            pinned=lambda read: delta_source.DeltaPlan.pinned(
                cast(delta_source.DeltaState, read.state)),
            plan=lambda start, end, advance: delta_source.plan_delta(
                table, start=start, end=end or pinned_end, advance=advance))
        self.plan.add(SourceRead(
            context, delta_source.SOURCE_KIND, plan.counts(),
            plan.state() if plan.advance else None, nothing=not plan.counts()["versions"],
            description=delta_source.description(plan, tracked=bookmark, version=version)))
        self.log.info("%s: versions %s..%d of %s", context,
                      "0" if plan.after is None else plan.after + 1, plan.to, table)
        return self._read(context, [Dataset.at_path(table)],
                          delta_source.read_delta(self._engine, plan, change_feed=change_feed))

    def read_iceberg(self, table: str, *, transformation_ctx: str | None, bookmark: bool,
                     changes: bool, keys: Sequence[str],
                     expired: iceberg_source.Expired) -> DataFrame:
        """``JobContext.read_iceberg``."""
        require_iceberg_runtime()
        context = self.plan.context(transformation_ctx, bookmark, f"read_iceberg({table!r})")
        try:
            plan = self.plan.plan(
                context, iceberg_source.SOURCE_KIND, tracked=bookmark,
                # an Iceberg context pins its IcebergState, so run_plan has one to give
                pinned=lambda read: iceberg_source.IcebergPlan.pinned(
                    cast(iceberg_source.IcebergState, read.state)),
                plan=lambda start, end, advance: iceberg_source.plan_iceberg(
                    table, start=start, end=end, advance=advance, changes=changes,
                    expired=expired))
        except IcebergError as exc:
            raise SourceError(self.job_name, context, str(exc)) from exc
        self.plan.add(SourceRead(
            context, iceberg_source.SOURCE_KIND, plan.counts(),
            plan.state() if plan.advance else None, nothing=not plan.snapshots,
            description=iceberg_source.description(plan, tracked=bookmark)))
        self.log.info("%s: snapshots of %s after %s up to %s: %d", context, table,
                      plan.after or "none", plan.to or "none", plan.snapshots)
        return self._read(context, [Dataset.in_catalog(table)],
                          iceberg_source.read_iceberg(self.spark, plan, changes=changes,
                                                      keys=keys))

    def read_jdbc(self, source: jdbc.JdbcSource, *, connection: str,
                  transformation_ctx: str | None, bookmark: bool) -> DataFrame:
        """``JobContext.read_jdbc`` (``connection``: the name the job gave)."""
        context = self.plan.context(
            transformation_ctx, bookmark,
            f"read_jdbc({source.table or 'query'!r}, {source.connection.display})")
        if problems := source.problems():
            raise SourceError(self.job_name, context, "; ".join(problems))
        try:
            plan = self.plan.plan(
                context, jdbc.SOURCE_KIND, tracked=bookmark,
                # a JDBC context pins its JdbcState (no files), so run_plan has one to give
                pinned=lambda read: jdbc.JdbcPlan.pinned(cast(jdbc.JdbcState, read.state)),
                plan=lambda start, end, advance: jdbc.plan_jdbc(
                    self.spark, source, start=start, end=end, advance=advance))
            df = jdbc.read_jdbc(self.spark, source, plan)
        except DatabaseError as exc:
            raise SourceError(self.job_name, context, str(exc)) from exc
        self.plan.add(SourceRead(
            context, jdbc.SOURCE_KIND, plan.counts(), plan.state() if plan.advance else None,
            rereads=plan.lookback, nothing=not plan.rows,
            description=jdbc.description(connection, source, plan) if bookmark else None))
        self.log.info("%s: %d rows of %s", context, plan.rows, plan.source)
        return self._read(context, [Dataset.in_database(source.connection,
                                                        source.table or source.relation)], df)

    def _read(self, context: str, datasets: list[Dataset], df: DataFrame) -> DataFrame:
        """``df``, once noted as what ``context`` read (the run's lineage)."""
        self._datasets.inputs[context] = [d.with_schema(df.schema) for d in datasets]
        return df

    # --- watermarks -------------------------------------------------------------------

    def watermark(self, df: DataFrame, column: str, *, transformation_ctx: str,
                  aggregate: Literal["max", "min"]) -> Any:
        """``JobContext.watermark``."""
        if aggregate not in ("max", "min"):
            raise JobError(self.job_name, f"watermark aggregate must be max or min, not "
                           f"{aggregate!r}")
        if column not in df.columns:
            raise JobError(self.job_name, f"watermark {transformation_ctx}: no column "
                           f"{column!r} (columns: {', '.join(df.columns)})")
        if transformation_ctx in self.plan.watermarks:
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
        assert row is not None  # an aggregate without grouping has exactly one row
        if row["rows"] == 0:
            return None
        self.plan.watermarks[transformation_ctx] = Watermark(
            job=self.job_name, context=transformation_ctx, run_id=self.run_id,
            run_seq=self.run_seq, column=column, aggregate=aggregate, value=row["value"],
            value_type=value_type.simpleString(), rows=row["rows"])
        return row["value"]

    def last_watermark(self, transformation_ctx: str) -> Any:
        found = [w for w in self._store.watermarks(self.job_name)
                 if w.context == transformation_ctx]
        return found[0].value if found else None

    # --- targets ----------------------------------------------------------------------

    def write_delta(self, df: DataFrame, target: str, *, mode: WriteMode,
                    partition_by: Sequence[str], replace_where: Sequence[Filter],
                    merge_schema: bool, merge_on: Sequence[str], checks: str | None
                    ) -> WriteResult:
        """``JobContext.write_delta``."""
        write = functools.partial(
            self._write, target=target, mode=mode, partition_by=partition_by,
            replace_where=replace_where, merge_schema=merge_schema, merge_on=merge_on)
        self._datasets.outputs[target] = Dataset.at_path(target, df.schema)
        return self._checked_write(df, target, mode, checks, write)

    def write_files(self, df: DataFrame, target: str, *, file_format: str,
                    options: Mapping[str, str] | None, partition_by: Sequence[str],
                    checks: str | None) -> WriteResult:
        """``JobContext.write_files``."""
        write = functools.partial(self._write, target=target, mode="append",
                                  partition_by=partition_by, file_format=file_format,
                                  file_options=options)
        self._datasets.outputs[target] = Dataset.at_path(target, df.schema)
        return self._checked_write(df, target, "append", checks, write)

    def write_iceberg(self, df: DataFrame, table: str, *, mode: iceberg_sink.WriteMode,
                      keys: Sequence[str], merge_schema: bool, checks: str | None
                      ) -> WriteResult:
        """``JobContext.write_iceberg``."""
        require_iceberg_runtime()
        iceberg.split_name(table)  # a table of no configured catalog: before any check runs
        self._datasets.outputs[table] = Dataset.in_catalog(table, df.schema)
        return self._checked_write(df, table, mode, checks, functools.partial(
            self._write_iceberg, table=table, mode=mode, keys=keys,
            merge_schema=merge_schema))

    def _write_iceberg(self, df: DataFrame, *, table: str, mode: iceberg_sink.WriteMode,
                       keys: Sequence[str], merge_schema: bool) -> WriteResult:
        def commit(staged: Callable[[], None]) -> tuple[WriteResult, RunOutput]:
            # Spark writes and commits in one go: the plan is recorded before it starts
            written = iceberg_sink.write(
                self.spark, df, table, mode=mode, keys=keys, job=self.job_name,
                run_id=self.run_id, run_seq=self.run_seq, record=self.plan.record(),
                before_commit=staged, merge_schema=merge_schema)
            return (WriteResult(version=written.snapshot or 0, skipped=written.replayed),
                    {"version": written.snapshot or 0})

        return self._committed(df, target=table, kind=iceberg_sink.OUTPUT_TAG,
                               adds_rows_only=mode != "overwrite", current=lambda: None,
                               commit=commit, said=lambda written: f"snapshot {written['version']}")

    def write_jdbc(self, df: DataFrame, table: str, *, connection: str,
                   database: str | None, checks: str | None) -> WriteResult:
        """``JobContext.write_jdbc``."""
        try:
            jdbc_sink.check_table_name(table)
        except ValueError as exc:
            raise JobError(self.job_name, f"write_jdbc: {exc}.") from None
        target = jdbc_sink.target_key(connection, table)
        output: RunOutput = {**jdbc_sink.OUTPUT_TAG, "connection": connection, "table": table}
        if database:
            output["database"] = database
        write = functools.partial(self._stage, target=target, output=output)
        self._datasets.outputs[target] = Dataset.in_database(
            jdbc_sink.output_connection(output, self.connections), table, df.schema)
        return self._checked_write(df, target, "append", checks, write)

    def _stage(self, df: DataFrame, *, target: str, output: RunOutput) -> WriteResult:
        self._outputs.claim(target)
        if self.dry_run or not df.columns or df.isEmpty():
            if not self.dry_run:
                self.log.info("%s: no rows to write: no commit", target)
            self._outputs.skip(target, **output)
            return WriteResult(version=self.run_seq, skipped=True)
        connection = jdbc_sink.output_connection(output, self.connections)
        rows = jdbc_sink.stage(self.spark, df, connection, output["table"],
                               job=self.job_name, run_seq=self.run_seq)
        crash_point("staged")
        self.log.info("staged %d rows for %s (they land when the job returns)", rows, target)
        self._outputs.start(target, **output | RunOutput(rows=rows))
        self._staged.append(target)
        return WriteResult(version=self.run_seq)

    def land_staged(self) -> None:
        """Land the rows ``write_jdbc`` staged, each table in one database transaction
        with the run's mark; the plan is recorded before each lands."""
        for target in self._staged:
            output = self._outputs.entry(target)
            planned = self._hooks.before_target_write(self) if self._hooks else (lambda: None)
            planned()
            connection = jdbc_sink.output_connection(output, self.connections)
            rows, replayed = jdbc_sink.land(
                self.spark, connection, output["table"], job=self.job_name,
                run_id=self.run_id, run_seq=self.run_seq, record=self.plan.record())
            self.log.info("%s %s (%d rows)", "found run already in" if replayed else "wrote",
                          target, rows if not replayed else output["rows"])
            self._outputs.land(target, replayed=replayed)
            if self._hooks:
                self._hooks.after_target_write(self)
        self._staged.clear()

    def _checked_write(self, df: DataFrame, target: str, mode: WriteMode, checks: str | None,
                       write: Callable[[DataFrame], WriteResult]) -> WriteResult:
        """``write(df)``, after the rule set ``checks`` (if any) let the rows through."""
        if mode == "append" and (rereading := self.plan.rereading()):
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
        kind: RunOutput = {} if file_format is None else {**parquet.OUTPUT_TAG}
        if file_format not in (None, "parquet"):
            kind["file_format"] = file_format

        def commit(staged: Callable[[], None]) -> tuple[WriteResult, RunOutput]:
            if file_format:
                files = parquet.write(df, target, job=self.job_name, run_id=self.run_id,
                                      run_seq=self.run_seq, attempt=self.identity.attempt,
                                      partition_by=partition_by, record=self.plan.record(),
                                      before_commit=staged, file_format=file_format,
                                      options=file_options)
                return (WriteResult(version=self.run_seq, skipped=files.replayed),
                        {"files": len(files.files), "rows": files.rows})
            result = engine.write(
                df, target, mode=mode, partition_by=partition_by,
                replace_where=replace_where, merge_schema=merge_schema, merge_on=merge_on,
                txn=AppTransaction(app_id(self.job_name), self.run_seq),
                metadata={"deltamark": self.plan.record()}, before_commit=staged,
                # a table an empty first read made of the rescued-data column (before
                # deltamark made none) takes the first real columns
                placeholders=self._rescued_columns)
            return result, {"version": result.version}

        return self._committed(
            df, target=target, kind=kind,
            # an append or merge of no rows changes nothing; an empty overwrite does
            adds_rows_only=mode != "overwrite" and not replace_where,
            current=lambda: None if file_format else engine.version(target), commit=commit,
            said=lambda written: f"{written['files']} files, {written['rows']} rows"
            if file_format else f"version {written['version']}")

    def _committed(self, df: DataFrame, *, target: str, kind: RunOutput, adds_rows_only: bool,
                   current: Callable[[], int | None],
                   commit: Callable[[Callable[[], None]], tuple[WriteResult, RunOutput]],
                   said: Callable[[RunOutput], str]) -> WriteResult:
        """The commit protocol around one write to ``target`` (its output tagged ``kind``):
        nothing to write (a dry run, no columns, or no rows added in a run that read
        nothing: the target's ``current`` version), else ``commit(staged)``, whose
        ``staged()`` waits until the run's plan is recorded before the target commits;
        it gives the result and what to record of it (``said`` puts that in words)."""
        self._outputs.claim(target)
        if self.dry_run or not df.columns or (adds_rows_only and self.plan.read_nothing()
                                              and df.isEmpty()):
            if not self.dry_run:
                self.log.info("%s: no rows to write: no commit", target)
            self._outputs.skip(target, **kind)
            version = current()
            return WriteResult(version=-1 if version is None else version, skipped=True)
        check_target_write(target, self.job_name, self.run_seq, self.run_id)
        self._outputs.start(target, **kind)
        planned = self._hooks.before_target_write(self) if self._hooks else (lambda: None)

        def staged() -> None:  # the data is written, uncommitted: it waits for the plan
            planned()
            crash_point("staged")

        try:  # the data is written while the plan is recorded; it commits only after
            result, written = commit(staged)
        finally:
            planned()  # also after a skipped or failed write: the record is done before we go on
        self.log.info("%s %s (%s)", "found run already in" if result.skipped else "wrote",
                      target, said(written))
        self._outputs.land(target, **written | RunOutput(replayed=result.skipped))
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

    def dq_history(self, ruleset: str) -> list[DqResult]:
        """The results of ``ruleset`` in this job's earlier runs, newest run first
        (``RunChecks.history``)."""
        return self._run_checks.history(ruleset)

    def _quarantine(self, rows: DataFrame, table: str) -> None:
        """Append rejected ``rows`` (a rule set's, or a source's malformed records) to the
        quarantine ``table``, in this run: through delta-rs, as the state tables are,
        unless the table has features only the native path writes (one a user made). The
        append then commits in milliseconds, where delta-spark first rebuilds the table's
        snapshot in Spark jobs (~1 s a run). They are this run's own rows, appended
        exactly once even when a source of the run reads rows again (a lookback)."""
        embedded = EmbeddedEngine(self.spark)
        self._datasets.outputs[table] = Dataset.at_path(table, rows.schema)
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
        self.plan.held = True

    def outputs(self) -> dict[str, RunOutput]:
        """What each target of this run was written with (the runner records it)."""
        return self._outputs.recorded()

    def datasets(self) -> RunDatasets:
        """What this run read and wrote, as its lineage events name them."""
        reads = self.plan.reads.values()
        return dataclasses.replace(
            self._datasets,
            started={r.context: self.plan.started.get(r.context, (r.kind, None))
                     for r in reads},
            states={r.context: None if r.state is None else encode(r.state) for r in reads})
