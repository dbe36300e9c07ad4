"""Delta-table sources: appends, the Change Data Feed, rewrites, lost history, chaining."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from typer.testing import CliRunner

from framework.cli import app
from framework.delta import delta_engine
from framework.errors import ChangesUnavailableError, JobError, JobFailedError
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
    # asked for the feed of versions that have none: one line, not Delta's own error
    plain = str(tmp_path / "plain")
    append(plain, [1])
    append(plain, [2])
    with pytest.raises(ChangesUnavailableError, match="Change Data Feed is off at version 1: "
                       "enable it") as error:
        delta_engine(spark, mode="native").read_changes(plain, after=0, to=1,
                                                        change_feed=True)
    assert "\n" not in str(error.value)


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
    from framework.ops import actions

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
    actions.reset(ws.settings, "copy", context="src")
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


def reader(ws, source, name, **read):
    """A job ``name`` copying ``source`` to a target of its own, read with ``read``."""
    ws.declare(name, cls="DeltaCopy", source=source, target=str(ws.root / name),
               read=json.dumps(read))
    return str(ws.root / name)


def ids_in(ws, path):
    if not DeltaTable.is_deltatable(path):
        return []
    return sorted(r.id for r in delta_engine(ws.spark, mode="embedded").read(path).collect())


def test_a_new_context_starts_where_it_is_told_and_refuses_what_the_table_lacks(ws, source):
    for i in range(5):  # versions 0 to 4
        append(source, [i])
        time.sleep(0.01)
    third = next(c for c in DeltaTable(source).history() if c["version"] == 3)["timestamp"]
    starts = {"from_2": {"starting_version": 2}, "latest": {"starting_version": "latest"},
              "from_3": {"starting_timestamp": datetime.fromtimestamp(third / 1000, UTC)
                         .isoformat()}}
    targets = {name: reader(ws, source, name, **read) for name, read in starts.items()}
    first = {name: ws.run(name).inputs["src"] for name in starts}
    assert first["from_2"] == {"from_version": 2, "to_version": 4, "versions": 3}
    assert first["latest"] == {"from_version": 5, "to_version": 4, "versions": 0}
    assert first["from_3"] == {"from_version": 3, "to_version": 4, "versions": 2}
    append(source, [5])
    for name in starts:
        ws.run(name)
    assert {name: ids_in(ws, path) for name, path in targets.items()} == {
        "from_2": [2, 3, 4, 5], "latest": [5], "from_3": [3, 4, 5]}
    shown = CliRunner().invoke(app, ["--conf-dir", str(ws.conf), "bookmarks", "show",
                                     "from_2"]).stdout
    assert "processed up to : version 5" in shown
    assert "started at      : starting_version=2" in shown

    bad = {"starting_version": 9}, {"starting_version": -1}, {"starting_timestamp": "soon"}, \
        {"starting_timestamp": "2999-01-01"}, {"bounded_files": 0}, \
        {"starting_version": 1, "starting_timestamp": "2020-01-01"}
    said = []
    for read in bad:
        reader(ws, source, "bad", **read)
        with pytest.raises(JobError) as error:
            ws.run("bad")
        said.append(str(error.value).splitlines())
    assert all(len(lines) == 1 for lines in said), said
    expected = [
        f"Delta table {source}: starting_version=9 is past its latest version 5. Give a "
        "version up to 5, or starting_version='latest'.",
        "source src: starting_version must be a version (0 or more) or 'latest', not -1",
        "source src: starting_timestamp must be a datetime or an ISO date or time "
        "('2026-12-01T08:00:00Z'), not 'soon'",
        f"Delta table {source}: starting_timestamp=2999-01-01T00:00:00+00:00 is after its "
        "latest commit (version 5 at ",
        "source src: bounded_files must be a positive integer, not 0",
        "source src: give starting_version or starting_timestamp, not both"]
    assert all(text in lines[0] for text, lines in zip(expected, said, strict=True)), said


def test_a_capped_backlog_drains_in_whole_versions_and_the_backlog_falls_to_0(ws, source):
    from framework.run import preflight

    append(source, [0])
    target = reader(ws, source, "capped", bounded_files=6)
    ws.run("capped")  # no bookmark, no starting position: the table as it is, whole
    for i in range(1, 21):  # versions 1 to 20, a file each
        append(source, [i])

    def waiting():
        return preflight.waiting(ws.store, "capped", lambda name: None)["src"].count

    drained = [waiting()]
    while (run := ws.run("capped")).inputs["src"].get("backlog"):
        drained.append(waiting())
        assert run.inputs["src"]["backlog"] == drained[-1]
    assert run.inputs["src"] == {"from_version": 19, "to_version": 20, "versions": 2}
    assert [*drained, waiting()] == [20, 14, 8, 2, 0]
    assert ids_in(ws, target) == list(range(21))
    assert ws.run("capped").status == "skipped"

    for i in range(21, 35):  # 14 more: one command drains them, run after run
        append(source, [i])
    said = CliRunner().invoke(app, ["--conf-dir", str(ws.conf), "run", "capped",
                                    "--until-caught-up", "--json"])
    assert said.exit_code == 0, said.output
    assert [r["inputs"]["src"].get("backlog", 0) for r in json.loads(said.stdout)] == [8, 2, 0]
    assert ids_in(ws, target) == list(range(35))


ONE_POSITION = "--version/--snapshot/--latest/--value: give exactly one"


def test_a_bookmark_set_by_hand_is_a_run_that_a_rewind_undoes(ws, source):
    from framework.ops import actions

    for i in range(4):  # versions 0 to 3
        append(source, [i])
    target = reader(ws, source, "copy")
    common = ["--conf-dir", str(ws.conf)]

    def deltamark(*args, code=0):
        result = CliRunner().invoke(app, [*common, *args])
        assert result.exit_code == code, result.output
        return result.output

    said = deltamark("bookmarks", "set", "copy", "--ctx", "src", "--version", "1", "--table",
                     source)
    [before] = ws.store.runs("copy")
    assert f"copy: run 1 ({before.run_id}) set src: version 1 of {source}" in said
    assert "to undo: deltamark bookmarks reset copy --ctx src" in said
    assert "bookmark set: src: version 1" in deltamark("runs", "list", "copy")
    assert ws.run().inputs["src"] == {"from_version": 2, "to_version": 3, "versions": 2}
    assert ids_in(ws, target) == [2, 3]
    append(source, [4])
    first = ws.store.runs("copy")[-1]
    said = deltamark("bookmarks", "set", "copy", "--ctx", "src", "--latest")
    assert f"to undo: deltamark bookmarks rewind copy --ctx src --to-run {first.run_id}" in said
    assert ws.run().status == "skipped"  # nothing after version 4
    actions.rewind(ws.settings, "copy", to_run=first.run_id, context="src")
    assert ws.run().inputs["src"]["from_version"] == 4
    assert ids_in(ws, target) == [2, 3, 4]

    for args, error in [
            (["--version", "9"], f"--version 9: {source} has versions 0 to 4"),
            (["--version", "1", "--latest"], ONE_POSITION), ([], ONE_POSITION),
            (["--value", "7"], "context src reads a delta source; --value sets a jdbc")]:
        assert error in deltamark("bookmarks", "set", "copy", "--ctx", "src", *args,
                                  code=2 if "give" in error else 1)
    assert "has no bookmark yet: name its table with --table" in deltamark(
        "bookmarks", "set", "copy", "--ctx", "other", "--latest", code=1)


def test_the_latest_version_is_found_from_the_log_without_loading_the_table(tmp_path):
    from framework.delta import log
    from framework.errors import TableNotFoundError

    path = str(tmp_path / "t")
    found = []
    for version in range(40):
        append(path, [version])
        if version == 12:
            DeltaTable(path).create_checkpoint()
        if version in (0, 1, 2, 12, 13, 39):
            found.append(log.latest_version(path))
    for old in range(12):  # log cleanup: the checkpoint at 12 stands for them
        (tmp_path / "t" / "_delta_log" / f"{old:020}.json").unlink()
    found.append(log.latest_version(path))
    assert found == [0, 1, 2, 12, 13, 39, 39]
    with pytest.raises(TableNotFoundError):
        log.latest_version(str(tmp_path / "none"))


def test_a_read_s_schema_comes_from_the_log_as_delta_rs_loads_it(tmp_path):
    """Commits, a checkpoint's two columns, log cleanup (the reference tables' tests cover
    delta-spark's checksum files)."""
    import importlib

    from framework.delta import log

    described = importlib.import_module("framework.delta.log.history")._described
    path = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1], pa.int64()), "p": ["a"]})
    write_deltalake(path, rows, partition_by=["p"],
                    configuration={"delta.enableChangeDataFeed": "true"})
    for version in range(1, 7):
        if version == 5:  # a new column
            rows = rows.append_column("extra", pa.array(["x"]))
        write_deltalake(path, rows, mode="append", schema_mode="merge")
        if version == 3:
            DeltaTable(path).create_checkpoint()

    def as_loaded(snap):
        return (json.loads(snap.schema_json), snap.partition_columns, snap.configuration,
                snap.reader_features)

    for version in range(7):
        assert as_loaded(described(path, version)) == as_loaded(
            log.snapshot(path, version=version)), version
    for old in range(3):  # log cleanup: the checkpoint at 3 stands for them
        (tmp_path / "t" / "_delta_log" / f"{old:020}.json").unlink()
    assert [as_loaded(described(path, v)) for v in (3, 4, 6)] == [
        as_loaded(log.snapshot(path, version=v)) for v in (3, 4, 6)]
    assert described(path, 1) is None  # gone: delta-rs says so (VersionNotFoundError)
