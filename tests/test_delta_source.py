"""Delta-table sources: appends, the Change Data Feed, rewrites, lost history, chaining."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from typer.testing import CliRunner

from framework.cli import app
from framework.delta import delta_engine
from framework.errors import ChangesUnavailableError, JobFailedError
from jobs import orders_landing

CONF = str(Path(__file__).parents[1] / "conf")


@pytest.fixture
def source(ws, delta_path):
    """An upstream Delta table, written by someone else (delta-rs), and a copy job on it."""
    path = str(ws.root / "upstream")
    ws.declare(cls="DeltaCopy", source=path)
    return path


def append(path, ids, **kwargs):
    write_deltalake(path, pa.table({"id": pa.array(ids, pa.int64())}), mode="append",
                    **kwargs)


def target_ids(ws):
    return sorted(r.id for r in delta_engine(ws.spark, mode="embedded").read(ws.target).collect())


@pytest.mark.compat
def test_appends_are_read_once_up_to_the_pinned_version(ws, source):
    append(source, [1, 2])
    first = ws.run()
    assert first.inputs["src"] == {"from_version": 0, "to_version": 0, "versions": 1}
    append(source, [3])
    append(source, [4])
    DeltaTable(source).optimize.compact()  # rewrites files, changes no data
    second = ws.run()
    assert second.inputs["src"] == {"from_version": 1, "to_version": 3, "versions": 3}
    assert target_ids(ws) == [1, 2, 3, 4]
    assert ws.store.bookmarks("copy")[0].state["version"] == 3


def test_rows_committed_during_a_run_belong_to_the_next(ws, source):
    ws.declare(cls="DeltaCopy", source=source, grow_source_during_run="true")
    append(source, [1])
    ws.run()
    assert target_ids(ws) == [1]
    ws.declare(cls="DeltaCopy", source=source)
    ws.run()
    assert target_ids(ws) == [1, 10_001]


def test_rewrites_without_a_change_feed_are_an_error(ws, source):
    append(source, [1, 2])
    ws.run()
    DeltaTable(source).delete("id = 1")
    with pytest.raises(JobFailedError) as failed:
        ws.run()
    assert isinstance(failed.value.cause, ChangesUnavailableError)
    assert "v1 DELETE changed existing rows" in str(failed.value)
    assert "delta.enableChangeDataFeed=true" in str(failed.value)
    assert ws.store.bookmarks("copy")[0].state["version"] == 0


def test_a_rewrite_read_without_the_feed_that_is_on_says_to_read_the_feed(spark, tmp_path):
    path = str(tmp_path / "upstream")
    append(path, [1, 2], configuration={"delta.enableChangeDataFeed": "true"})
    DeltaTable(path).delete("id = 1")
    with pytest.raises(ChangesUnavailableError) as error:
        delta_engine(spark, mode="embedded").read_changes(path, after=0, to=1,
                                                          change_feed=False)
    assert "v1 DELETE changed existing rows" in str(error.value)
    assert "Read the table with change_feed=True (its Change Data Feed is on)" in str(
        error.value)


@pytest.mark.compat
def test_change_data_feed_gives_inserts_updates_and_deletes(ws, source):
    append(source, [1, 2, 3], configuration={"delta.enableChangeDataFeed": "true"})
    first = ws.run()
    assert first.inputs["src"]["versions"] == 1
    table = DeltaTable(source)
    table.update(updates={"id": "20"}, predicate="id = 2")
    table.delete("id = 3")
    append(source, [4])
    ws.run()
    rows = delta_engine(ws.spark, mode="embedded").read(ws.target).collect()
    changes = sorted((r._change_type, r.id) for r in rows)
    assert changes == [("delete", 3), ("insert", 1), ("insert", 2), ("insert", 3),
                       ("insert", 4), ("update_postimage", 20), ("update_preimage", 2)]


@pytest.mark.compat
def test_a_table_as_databricks_makes_it_is_read_run_after_run(ws, source):
    """Deletion vectors on (Databricks' default for new tables), a renamed column (column
    mapping), the change feed on: three runs (first, nothing new, deletes and updates) give
    each change once, on both paths."""
    from framework.delta import native_available

    if not native_available(ws.spark):
        from databases import unavailable

        unavailable("the table is made by delta-spark: Delta's jars are not on this Spark "
                    "session (bash .ci/setup.sh resolves them with mvn)")
    table = f"delta.`{source}`"
    ws.spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING) USING delta TBLPROPERTIES ("
                 "'delta.enableDeletionVectors' = 'true', "
                 "'delta.enableChangeDataFeed' = 'true', 'delta.columnMapping.mode' = 'name', "
                 "'delta.minReaderVersion' = '3', 'delta.minWriterVersion' = '7')")
    ws.spark.sql(f"INSERT INTO {table} SELECT id, 'v' FROM range(1, 6)")
    ws.spark.sql(f"ALTER TABLE {table} RENAME COLUMN v TO value")
    assert ws.run().inputs["src"]["versions"] == 3
    assert ws.run().status == "skipped"  # nothing new: planned without Spark
    ws.spark.sql(f"DELETE FROM {table} WHERE id = 1")
    ws.spark.sql(f"UPDATE {table} SET value = 'u' WHERE id = 2")
    ws.run()
    rows = delta_engine(ws.spark, mode="embedded").read(ws.target).collect()
    assert sorted((r._change_type, r.id, r.value) for r in rows) == [
        ("delete", 1, "v"), *[("insert", n, "v") for n in range(1, 6)],
        ("update_postimage", 2, "u"), ("update_preimage", 2, "v")]


@pytest.mark.compat
def test_a_change_feed_older_than_a_week_is_read_and_a_lost_one_is_a_clear_error(engine,
                                                                                 tmp_path):
    """delta-spark refuses time travel past deletedFileRetentionDuration (7 days), which a
    weekly job's bookmark is: both paths read the range while its files are there, and
    both say so, in one line, when its log entries are gone."""
    path = str(tmp_path / "upstream")
    append(path, [1, 2], configuration={"delta.enableChangeDataFeed": "true"})
    DeltaTable(path).update(updates={"id": "20"}, predicate="id = 2")
    append(path, [3])
    ten_days_ago = time.time() - 10 * 86_400
    for entry in (Path(path) / "_delta_log").glob("*.json"):
        os.utime(entry, (ten_days_ago, ten_days_ago))
    rows = engine.read_changes(path, after=0, to=2).collect()
    assert sorted((r._change_type, r.id) for r in rows) == [
        ("insert", 3), ("update_postimage", 20), ("update_preimage", 2)]
    DeltaTable(path).create_checkpoint()
    (Path(path) / "_delta_log" / f"{1:020}.json").unlink()  # as log retention would
    with pytest.raises(ChangesUnavailableError) as error:
        engine.read_changes(path, after=0, to=2)
    assert "history after version 0 is no longer there" in str(error.value)
    assert "\n" not in str(error.value)


def test_lost_history_is_a_clear_error_and_a_reset_recovers(ws, source):
    from framework.ops import admin

    append(source, [1])
    ws.run()
    append(source, [2])
    append(source, [3])
    DeltaTable(source).create_checkpoint()
    (Path(source) / "_delta_log" / f"{1:020}.json").unlink()  # as log retention would
    with pytest.raises(JobFailedError) as failed:
        ws.run()
    message = str(failed.value)
    assert "history after version 0 is no longer there" in message
    assert "log retention" in message and "Reset the reading context" in message
    admin.reset(ws.settings, "copy", context="src")
    assert ws.run().inputs["src"]["from_version"] == 0


def test_vacuumed_files_are_a_clear_error(ws, source):
    append(source, [1])
    ws.run()
    before = set(DeltaTable(source).file_uris())
    append(source, [2])
    [added] = set(DeltaTable(source).file_uris()) - before
    Path(added.removeprefix("file://")).unlink()  # as VACUUM would after a rewrite
    with pytest.raises(JobFailedError, match=r"data files removed.*VACUUM"):
        ws.run()


def test_chained_example_jobs_read_only_new_bronze_versions(spark, tmp_path):
    landing, bronze, silver = (tmp_path / "landing", str(tmp_path / "bronze"),
                               str(tmp_path / "silver"))
    common = ["--conf-dir", CONF, "--state-root", str(tmp_path / "state")]

    def deltamark(*args):
        result = CliRunner().invoke(app, [*common, *args])
        assert result.exit_code == 0, result.output
        return result.stdout

    ingest = ["run", "orders_ingest", "--arg", f"landing={landing}", "--arg",
              f"target={bronze}"]
    refine = ["run", "orders_silver", "--arg", f"bronze={bronze}", "--arg", f"target={silver}"]
    orders_landing.land(landing, batches=2, orders=30)
    deltamark(*ingest)
    assert "read  bronze_src: version 0\n" in deltamark(*refine)
    orders_landing.land(landing, batches=1, orders=30)
    deltamark(*ingest)
    assert "read  bronze_src: version 1\n" in deltamark(*refine)
    rows = delta_engine(spark, mode="embedded").read(silver)
    assert rows.count() == 90 and rows.select("order_id").distinct().count() == 90
    shown = deltamark("bookmarks", "show", "orders_silver")
    assert "processed up to : version 1" in shown and f"table           : {bronze}" in shown
