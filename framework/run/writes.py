"""A run's target writes (``JobRun.writes``): each checked by its rule set, written
while the run's plan is recorded and committed only after (the commit protocol's hooks),
database rows staged to land when the job returns, malformed and rejected rows
quarantined; what each target was written with.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from framework import iceberg, storage
from framework.common.faults import crash_point
from framework.delta import (
    AppTransaction,
    DeltaEngine,
    EmbeddedEngine,
    Filter,
    WriteMode,
    WriteResult,
    native_available,
)
from framework.errors import CatalogError, JobError
from framework.quality.policy import RunChecks
from framework.run.lineage import Dataset
from framework.run.scope import RunScope
from framework.run.targets import RunOutputs, check_target_write
from framework.sinks import iceberg as iceberg_sink
from framework.sinks import jdbc as jdbc_sink
from framework.sinks import parquet
from framework.sinks.delta import app_id
from framework.spark import catalog
from framework.spark.lines import require_iceberg_runtime
from state_tables.model import RunOutput

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from framework.delta.changes import ApplyChanges
    from framework.quality import RuleSet

__all__ = ["RunWrites", "WriteHooks"]


class WriteHooks(Protocol):
    """What the commit protocol does around each target write (``JobRun`` binds the
    runner's ``TargetWriteHooks`` to its run)."""

    def before_target_write(self) -> Callable[[], object]:
        """Start recording the run's plan; the returned callable waits until it is."""

    def after_target_write(self) -> None: ...


class RunWrites:
    """``JobContext``'s writes, for one run."""

    def __init__(self, scope: RunScope, *, rule_sets: Mapping[str, RuleSet], checks: RunChecks,
                 hooks: WriteHooks | None):
        self.scope, self._hooks = scope, hooks
        self._checks, self._run_checks = dict(rule_sets), checks
        self.spark, self.plan, self.log = scope.spark, scope.plan, scope.log
        self.identity, self.connections = scope.identity, scope.connections
        self.dry_run = scope.dry_run
        self.job_name, self.run_id, self.run_seq = (self.identity.job, self.identity.run_id,
                                                    self.identity.run_seq)
        self._outputs = RunOutputs(self.identity.job)
        #: database writes staged, to land when the job's code has returned (targets)
        self._staged: list[str] = []

    def delta(self, df: DataFrame, target: str, *, named: bool = False,
              location: str | None = None, mode: WriteMode, partition_by: Sequence[str],
              replace_where: Sequence[Filter], merge_schema: bool, merge_on: Sequence[str],
              checks: str | None, changes: ApplyChanges | None = None) -> WriteResult:
        """``JobContext.write_delta`` to the table at ``target``, or with ``named`` to the
        catalog's table ``target`` (``_named``), entered in the catalog once a write made
        it."""
        name, new = target, False
        if named:
            target, new = self._named(name, location)
        write = functools.partial(
            self._write, target=target, mode=mode, partition_by=partition_by,
            replace_where=replace_where, merge_schema=merge_schema, merge_on=merge_on,
            changes=changes)
        self.scope.lineage.outputs[target] = Dataset.at_path(target, df.schema)
        result = self._checked_write(df, target, mode, checks, write)
        if new and not self.dry_run and self.scope.engine.version(target) is not None:
            # made now, or by a run killed before it entered it
            catalog.register_delta(self.spark, name, target)
        return result

    def _named(self, table: str, location: str | None) -> tuple[str, bool]:
        """Where the catalog's Delta table ``table`` is, and whether the catalog lacks it:
        then it goes to ``location`` (default: under its database's location), where the
        write makes it.

        Raises:
            CatalogError: not a Delta table; a table elsewhere than ``location``; a new
                table the catalog cannot hold (Spark's in-memory catalog, or a session
                without Delta's jars: they enter a Delta table).
        """
        found = catalog.lookup(self.spark, table)
        if found is not None:
            where = catalog.checked(found).location
            if location is not None and storage.absolute(location) != where:
                raise CatalogError(table, f"it is at {where}, not at location={location} "
                                   "(location= places a new table). Drop location=.")
            return where, False
        catalog.require_lasting(self.spark, table)
        if not native_available(self.spark):
            raise CatalogError(table, "not in the catalog, and a Spark session without "
                               "Delta's jars (the embedded path) cannot enter a Delta table "
                               "there. Create it once where they are (CREATE TABLE ... USING "
                               "delta LOCATION '...'), or write to a path.")
        where = storage.absolute(location) if location else catalog.new_location(
            self.spark, table)
        self.log.info("%s: a new Delta table at %s", table, where)
        return where, True

    def files(self, df: DataFrame, target: str, *, file_format: str,
                    options: Mapping[str, str] | None, partition_by: Sequence[str],
                    checks: str | None) -> WriteResult:
        """``JobContext.write_files``."""
        write = functools.partial(self._write, target=target, mode="append",
                                  partition_by=partition_by, file_format=file_format,
                                  file_options=options)
        self.scope.lineage.outputs[target] = Dataset.at_path(target, df.schema)
        return self._checked_write(df, target, "append", checks, write)

    def iceberg(self, df: DataFrame, table: str, *, mode: iceberg_sink.WriteMode,
                      keys: Sequence[str], merge_schema: bool, checks: str | None,
                      changes: ApplyChanges | None = None) -> WriteResult:
        """``JobContext.write_iceberg``."""
        require_iceberg_runtime()
        iceberg.split_name(table)  # a table of no configured catalog: before any check runs
        self.scope.lineage.outputs[table] = Dataset.in_catalog(table, df.schema)
        return self._checked_write(df, table, mode, checks, functools.partial(
            self._write_iceberg, table=table, mode=mode, keys=keys,
            merge_schema=merge_schema, changes=changes))

    def _write_iceberg(self, df: DataFrame, *, table: str, mode: iceberg_sink.WriteMode,
                       keys: Sequence[str], merge_schema: bool,
                       changes: ApplyChanges | None) -> WriteResult:
        def commit(staged: Callable[[], None]) -> tuple[WriteResult, RunOutput]:
            # Spark writes and commits in one go: the plan is recorded before it starts
            written = iceberg_sink.write(
                self.spark, df, table, mode=mode, keys=keys, job=self.job_name,
                run_id=self.run_id, run_seq=self.run_seq, record=self.plan.record(),
                before_commit=staged, merge_schema=merge_schema, changes=changes)
            return (WriteResult(version=written.snapshot or 0, skipped=written.replayed),
                    {"version": written.snapshot or 0})

        return self._committed(df, target=table, kind=iceberg_sink.OUTPUT_TAG,
                               adds_rows_only=mode != "overwrite", current=lambda: None,
                               commit=commit, said=lambda written: f"snapshot {written['version']}")

    def jdbc(self, df: DataFrame, table: str, *, connection: str,
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
        self.scope.lineage.outputs[target] = Dataset.in_database(
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
            planned = self._before_target_write()
            planned()
            connection = jdbc_sink.output_connection(output, self.connections)
            rows, replayed = jdbc_sink.land(
                self.spark, connection, output["table"], job=self.job_name,
                run_id=self.run_id, run_seq=self.run_seq, record=self.plan.record())
            self.log.info("%s %s (%d rows)", "found run already in" if replayed else "wrote",
                          target, rows if not replayed else output["rows"])
            self._outputs.land(target, replayed=replayed)
            self._after_target_write()
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
                                           quarantine=self.quarantine))

    def _write(self, df: DataFrame, *, target: str, mode: WriteMode,
               partition_by: Sequence[str] = (), replace_where: Sequence[Filter] = (),
               merge_schema: bool = False, merge_on: Sequence[str] = (),
               changes: ApplyChanges | None = None, file_format: str | None = None,
               file_options: Mapping[str, str] | None = None,
               engine: DeltaEngine | None = None) -> WriteResult:
        """Write to a Delta table (on ``engine``, else the job's Delta path), or with
        ``file_format`` to a directory of files."""
        engine = engine or self.scope.engine
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
                changes=changes, txn=AppTransaction(app_id(self.job_name), self.run_seq),
                metadata={"deltamark": self.plan.record()}, before_commit=staged,
                # a table an empty first read made of the rescued-data column (before
                # deltamark made none) takes the first real columns
                placeholders=self.scope.rescued_columns)
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
        planned = self._before_target_write()

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
        self._after_target_write()
        return result

    def rolled_back(self, target: str) -> None:
        """``target``'s write of this run was undone (see ``runner``): it is no longer
        one of the run's writes."""
        self._outputs.roll_back(target)

    def quarantine(self, rows: DataFrame, table: str) -> None:
        """Append rejected ``rows`` (a rule set's, or a source's malformed records) to the
        quarantine ``table``, in this run: through delta-rs, as the state tables are,
        unless the table has features only the native path writes (one a user made). The
        append then commits in milliseconds, where delta-spark first rebuilds the table's
        snapshot in Spark jobs (~1 s a run). They are this run's own rows, appended
        exactly once even when a source of the run reads rows again (a lookback)."""
        embedded = EmbeddedEngine(self.spark)
        self.scope.lineage.outputs[table] = Dataset.at_path(table, rows.schema)
        self._write(rows, target=table, mode="append", merge_schema=True,
                    engine=embedded if embedded.can_write(table) else self.scope.engine)

    def _before_target_write(self) -> Callable[[], object]:
        return self._hooks.before_target_write() if self._hooks else (lambda: None)

    def _after_target_write(self) -> None:
        if self._hooks:
            self._hooks.after_target_write()

    def recorded(self) -> dict[str, RunOutput]:
        """What each target was written with."""
        return self._outputs.recorded()
