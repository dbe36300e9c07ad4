"""A run's reads (``JobRun.reads``): each source planned against its context's bookmark
(or a replay's pins), noted in the run's plan and lineage, and read with Spark; the
watermarks a job sets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from framework.common import humanize
from framework.errors import DatabaseError, IcebergError, JobError, SourceError, one_line
from framework.run.lineage import Dataset
from framework.run.plan import SourceRead
from framework.run.scope import RunScope
from framework.sources import delta as delta_source
from framework.sources import files, jdbc
from framework.sources import iceberg as iceberg_source
from framework.sources.files import (
    FileBookmark,
    FilePlan,
    FileSource,
    FilesRead,
    malformed,
    schema_drift,
)
from framework.spark import catalog
from framework.spark.lines import require_iceberg_runtime
from framework.spark.session import named_column
from state_tables.model import Watermark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


__all__ = ["RunReads"]


class RunReads:
    """``JobContext``'s reads, for one run."""

    def __init__(self, scope: RunScope, *, quarantine: Callable[[DataFrame, str], None]):
        self.scope, self._quarantine = scope, quarantine
        self.spark, self.plan, self.log = scope.spark, scope.plan, scope.log
        identity = scope.identity
        self.job_name, self.run_id, self.run_seq = (identity.job, identity.run_id,
                                                    identity.run_seq)

    def files(self, source: FileSource, *, transformation_ctx: str | None,
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

    def _schema_read(self, context: str, source: FileSource, plan: FilePlan,
                     read: FilesRead) -> None:
        """Record what ``read`` did to ``context``'s schema: in the state its run commits
        (the schema, its changes), its counts and the log."""
        if read.drift is not None and plan.state is not None:
            self.plan.update_state(context, dataclasses.replace(
                plan.state, schema=schema_drift.to_json(read.drift.schema),
                schema_changes=read.drift.changes or None,
                rescued_column=read.rescued_column))
        if read.rescued_column is not None:
            self.scope.rescued_columns.add(read.rescued_column)
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
            self.scope.schema_changes[context] = said
            self.log.warning("%s: schema: %s", context, "; ".join(said))

    def _set_aside(self, context: str, source: FileSource,
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
            self._quarantine(
                self.spark.createDataFrame(rows, malformed.QUARANTINE_SCHEMA),
                source.bad_records_table)

    def named_delta(self, table: str) -> str:
        """Where the catalog's Delta table ``table`` is (``JobContext.read_delta``)."""
        location = catalog.require(self.spark, table).location
        self.log.info("%s: the Delta table at %s", table, location)
        return location

    def delta(self, source: delta_source.DeltaSource, *, transformation_ctx: str | None,
              bookmark: bool, change_feed: bool | None, version: int | None) -> DataFrame:
        """``JobContext.read_delta``."""
        table = source.table
        if version is not None and bookmark:
            raise JobError(self.job_name, f"read_delta({table!r}, version={version}): a "
                           "version is for whole-table reads; pass bookmark=False.")
        context = self.plan.context(transformation_ctx, bookmark, f"read_delta({table!r})")
        if problems := source.problems():
            raise SourceError(self.job_name, context, "; ".join(problems))
        pinned_end = None if version is None else delta_source.DeltaState(table, version)
        plan = self.plan.plan(
            context, delta_source.SOURCE_KIND, tracked=bookmark,
            # a Delta context pins its DeltaState (no files), so run_plan has one to give
            pinned=lambda read: delta_source.DeltaPlan.pinned(
                cast(delta_source.DeltaState, read.state)),
            plan=lambda start, end, advance: delta_source.plan_delta(
                source, start=start, end=end or pinned_end, advance=advance))
        self.plan.add(SourceRead(
            context, delta_source.SOURCE_KIND, plan.counts(),
            plan.state() if plan.advance else None, nothing=not plan.counts()["versions"],
            description=delta_source.description(plan, source, tracked=bookmark,
                                                 version=version)))
        self.log.info("%s: versions %s..%d of %s%s", context,
                      "0" if plan.after is None else plan.after + 1, plan.to, table,
                      f" ({plan.backlog} left for later runs: capped)" if plan.backlog else "")
        return self._read(context, [Dataset.at_path(table)],
                          delta_source.read_delta(self.scope.engine, plan, change_feed=change_feed))

    def iceberg(self, source: iceberg_source.IcebergSource, *,
                transformation_ctx: str | None, bookmark: bool, changes: bool,
                keys: Sequence[str], expired: iceberg_source.Expired) -> DataFrame:
        """``JobContext.read_iceberg``."""
        require_iceberg_runtime()
        table = source.table
        context = self.plan.context(transformation_ctx, bookmark, f"read_iceberg({table!r})")
        if problems := source.problems():
            raise SourceError(self.job_name, context, "; ".join(problems))
        try:
            plan = self.plan.plan(
                context, iceberg_source.SOURCE_KIND, tracked=bookmark,
                # an Iceberg context pins its IcebergState, so run_plan has one to give
                pinned=lambda read: iceberg_source.IcebergPlan.pinned(
                    cast(iceberg_source.IcebergState, read.state)),
                plan=lambda start, end, advance: iceberg_source.plan_iceberg(
                    source, start=start, end=end, advance=advance, changes=changes,
                    expired=expired))
        except IcebergError as exc:
            raise SourceError(self.job_name, context, str(exc)) from exc
        self.plan.add(SourceRead(
            context, iceberg_source.SOURCE_KIND, plan.counts(),
            plan.state() if plan.advance else None, nothing=not plan.snapshots,
            description=iceberg_source.description(plan, source, tracked=bookmark)))
        self.log.info("%s: snapshots of %s after %s up to %s: %d%s", context, table,
                      plan.after or "none", plan.to or "none", plan.snapshots,
                      f" ({plan.backlog} left for later runs: capped)" if plan.backlog else "")
        return self._read(context, [Dataset.in_catalog(table)],
                          iceberg_source.read_iceberg(self.spark, plan, changes=changes,
                                                      keys=keys))

    def jdbc(self, source: jdbc.JdbcSource, *, connection: str,
                  transformation_ctx: str | None, bookmark: bool) -> DataFrame:
        """``JobContext.read_jdbc`` (``connection``: the name the job gave)."""
        context = self.plan.context(
            transformation_ctx, bookmark,
            f"read_jdbc({source.table or 'query'!r}, {source.connection.display})")
        if problems := source.problems():
            raise SourceError(self.job_name, context, "; ".join(problems))
        try:
            plan = self.plan.plan(
                context, jdbc.SOURCE_KIND, tracked=bookmark and not source.backfill,
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
            description=jdbc.description(connection, source, plan)
            if bookmark and not source.backfill else None))
        self.log.info("%s: %d rows of %s", context, plan.rows, plan.source)
        return self._read(context, [Dataset.in_database(source.connection,
                                                        source.table or source.relation)], df)

    def _read(self, context: str, datasets: list[Dataset], df: DataFrame) -> DataFrame:
        """``df``, once noted as what ``context`` read (the run's lineage)."""
        self.scope.lineage.inputs[context] = [d.with_schema(df.schema) for d in datasets]
        return df

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
        found = [w for w in self.scope.store.watermarks(self.job_name)
                 if w.context == transformation_ctx]
        return found[0].value if found else None
