"""Iceberg tables as incremental sources and exactly-once targets (framework.iceberg,
framework.sources.iceberg, framework.sinks.iceberg), on the tests' path catalog ``lake``.

They run on the Spark lines Iceberg has a Spark runtime for (3.5 and 4.1 in CI's
compatibility part); on the others, the one-line refusal is what is tested.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_exactly_once import (
    FULL_MATRIX,
    INSTANTS,
    assert_exactly_once,
    assert_recovered,
    crash,
    files,
    kill_when_committing,
    killed_run,
    object_names,
    objects,
)
from typer.testing import CliRunner

from framework import iceberg
from framework.cli import app
from framework.errors import IcebergError, JobFailedError, SparkFeatureError
from framework.ops import actions
from framework.run.targets import runs_in
from framework.spark.lines import installed_version, require_iceberg_runtime, spark_line

HAS_RUNTIME = spark_line().iceberg is not None
needs_runtime = pytest.mark.skipif(
    not HAS_RUNTIME, reason=f"Iceberg has no Spark runtime for Spark {spark_line().name}: "
    "these run in the compatibility part, on 3.5 and 4.1")


def test_a_line_without_iceberg_runtime_refuses_in_one_line():
    if HAS_RUNTIME:
        require_iceberg_runtime()  # nothing to refuse
        return
    with pytest.raises(SparkFeatureError) as refused:
        require_iceberg_runtime()
    assert str(refused.value) == ("Iceberg tables: Iceberg has no Spark runtime for Spark "
                                  f"{installed_version()}; they need Spark 3.5, 4.0, 4.1")


def test_tables_are_named_catalog_namespace_table():
    iceberg.configure({"spark.sql.catalog.lake": iceberg.CATALOG_CLASSES[0],
                       "spark.sql.catalog.lake.type": "hadoop"})
    assert iceberg.split_name("lake.db.t") == ("lake", ("db", "t"))
    with pytest.raises(IcebergError, match=r"no Iceberg catalog 'other' \(catalogs: lake\)"):
        iceberg.split_name("other.db.t")
    with pytest.raises(IcebergError, match=r"name Iceberg tables catalog\.namespace\.table"):
        iceberg.split_name("lake.t")


@pytest.fixture
def chain(ws):
    """files -> bronze (Iceberg, appended) -> silver (Iceberg, merged on id)."""
    namespace = ws.use_iceberg()
    bronze, silver = f"{namespace}.bronze", f"{namespace}.silver"
    ws.declare("bronze", cls="FilesToIceberg", table=bronze, lineage="source_file")
    ws.declare("silver", cls="IcebergToIceberg", source=bronze, target=silver)
    return ws, bronze, silver


def ids(spark, table: str) -> list[int]:
    return sorted(r.id for r in spark.table(table).select("id").collect())


@needs_runtime
@pytest.mark.compat
def test_a_chain_of_iceberg_tables_runs_incrementally_and_skips_when_nothing_is_new(chain):
    ws, bronze, silver = chain
    ws.land(rows=2)
    ws.land(rows=1)
    assert ws.run("bronze").status == "succeeded"
    first = ws.run("silver")
    assert first.inputs["src"] == {"snapshots": 1}
    assert ids(ws.spark, silver) == [100, 101, 200]
    ws.land(rows=2)
    ws.run("bronze")
    second = ws.run("silver")
    assert second.inputs["src"] == {"snapshots": 1}
    assert ids(ws.spark, silver) == [100, 101, 200, 300, 301]
    # each run's snapshot names it (on Spark 3.5 a merge's MERGE snapshot is followed by
    # an empty one naming the run); the bookmark is the snapshot read up to
    marks = [s.mark() for s in iceberg.history(silver)]
    assert [(m["job"], m["run_seq"]) for m in marks if m] == [("silver", 1), ("silver", 2)]
    # found by the table's name alone, as the checks that the state knows every run do
    assert [r.run_seq for r in runs_in(silver, "silver")] == [1, 2]
    [bookmark] = ws.store.bookmarks("silver")
    assert bookmark.state["snapshot"] == iceberg.current(bronze).snapshot_id
    # nothing new: both runs are skipped before Spark is asked anything
    assert ws.run("bronze").status == "skipped"
    assert ws.run("silver").status == "skipped"
    ws.land(rows=1)
    assert ws.run("bronze").status == "succeeded"
    assert ws.run("silver").status == "succeeded"
    assert ids(ws.spark, silver) == [100, 101, 200, 300, 301, 400]


@needs_runtime
@pytest.mark.compat
def test_changes_give_inserts_updates_and_deletes(chain):
    ws, bronze, silver = chain
    ws.declare("silver", cls="IcebergToIceberg", source=bronze, target=silver, changes="true")
    ws.land(rows=3)
    ws.run("bronze")
    assert ws.run("silver").properties["changes"] == "INSERT:100,INSERT:101,INSERT:102"
    ws.spark.sql(f"UPDATE {bronze} SET source_file = 'changed' WHERE id = 101")
    ws.spark.sql(f"DELETE FROM {bronze} WHERE id = 102")
    ws.spark.sql(f"INSERT INTO {bronze} (id, source_file, _rescued_data) "
                 "VALUES (103, 'typed', NULL)")
    report = ws.run("silver")
    assert report.inputs["src"] == {"snapshots": 3}
    assert report.properties["changes"] == (
        "DELETE:102,INSERT:103,UPDATE_AFTER:101,UPDATE_BEFORE:101")


@needs_runtime
@pytest.mark.compat
def test_rows_changed_in_place_are_not_silently_missed(chain):
    ws, bronze, _ = chain
    ws.land(rows=2)
    ws.run("bronze")
    ws.run("silver")
    ws.spark.sql(f"DELETE FROM {bronze} WHERE id = 100")
    with pytest.raises(JobFailedError) as failed:
        ws.run("silver")
    message = str(failed.value)
    # copy-on-write: the delete rewrote the file holding the row
    assert "(overwrite) changed rows in place" in message, message
    assert "read_iceberg(..., changes=True)" in message


@needs_runtime
@pytest.mark.compat
def test_a_changelog_over_delete_files_fails_naming_the_way_out(chain):
    ws, bronze, silver = chain
    ws.declare("silver", cls="IcebergToIceberg", source=bronze, target=silver, changes="true")
    ws.land(rows=2)
    ws.run("bronze")
    ws.run("silver")
    ws.spark.sql(f"ALTER TABLE {bronze} SET TBLPROPERTIES ('format-version' = '2', "
                 "'write.delete.mode' = 'merge-on-read')")
    ws.spark.sql(f"DELETE FROM {bronze} WHERE id = 100")
    with pytest.raises(JobFailedError) as failed:
        ws.run("silver")
    assert "has delete files (merge-on-read), which Iceberg's changelog cannot read" in str(
        failed.value)
    assert "rewrite_position_delete_files" in str(failed.value)


@needs_runtime
@pytest.mark.compat
def test_a_new_context_starts_where_it_is_told_and_a_cap_takes_whole_snapshots(chain):
    ws, bronze, silver = chain
    namespace = silver.rsplit(".", 1)[0]
    for _ in range(3):  # bronze's snapshots: 100, 200, 300
        ws.land(rows=1)
        ws.run("bronze")
    second, third = iceberg.history(bronze)[1:3]
    reads = {"from_2": {"starting_snapshot": second.snapshot_id, "bounded_files": 1},
             "latest": {"starting_snapshot": "latest"},
             "from_3": {"starting_timestamp": datetime.fromtimestamp(
                 third.timestamp_ms / 1000, UTC).isoformat()}}
    for name, read in reads.items():
        ws.declare(name, cls="IcebergToIceberg", source=bronze, target=f"{namespace}.{name}",
                   read=json.dumps(read))
    first = {name: ws.run(name).inputs["src"] for name in reads}
    assert first == {"from_2": {"snapshots": 1, "backlog": 1}, "latest": {"snapshots": 0},
                     "from_3": {"snapshots": 1}}
    ws.land(rows=1)
    ws.run("bronze")
    assert [ws.run("from_2").inputs["src"] for _ in range(2)] == [
        {"snapshots": 1, "backlog": 1}, {"snapshots": 1}]
    for name in ("latest", "from_3"):
        ws.run(name)
    assert {name: ids(ws.spark, f"{namespace}.{name}") for name in reads} == {
        "from_2": [200, 300, 400], "latest": [400], "from_3": [300, 400]}
    [bookmark] = ws.store.bookmarks("from_2")
    assert bookmark.state["starting"] == f"starting_snapshot={second.snapshot_id}"
    said = CliRunner().invoke(app, ["--conf-dir", str(ws.conf), "bookmarks", "set", "latest",
                                    "--ctx", "src", "--snapshot", str(second.snapshot_id)])
    assert said.exit_code == 0, said.output
    assert ws.run("latest").inputs["src"] == {"snapshots": 2}  # the third and fourth
    assert ids(ws.spark, f"{namespace}.latest") == [300, 400]

    ws.declare("bad", cls="IcebergToIceberg", source=bronze, target=f"{namespace}.bad",
               read=json.dumps({"starting_snapshot": 12345}))
    with pytest.raises(JobFailedError, match="starting_snapshot=12345 is not in the table's "
                       "history"):
        ws.run("bad")


@needs_runtime
@pytest.mark.compat
def test_an_expired_bookmark_fails_naming_the_way_out_or_refreshes_in_full(chain):
    ws, bronze, silver = chain
    ws.land(rows=1)
    ws.run("bronze")
    ws.run("silver")
    ws.land(rows=1)
    ws.run("bronze")
    ws.land(rows=1)
    ws.run("bronze")
    catalog, identifier = iceberg.split_name(bronze)
    ws.spark.sql(f"CALL {catalog}.system.expire_snapshots(table => '{'.'.join(identifier)}', "
                 "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)")
    with pytest.raises(JobFailedError) as failed:
        ws.run("silver")
    assert "expired='full_refresh'" in str(failed.value)
    assert "reset the reading context" in str(failed.value)
    ws.declare("silver", cls="IcebergToIceberg", source=bronze, target=silver,
               expired="full_refresh")
    assert ws.run("silver").status == "succeeded"
    assert ids(ws.spark, silver) == [100, 200, 300]


@needs_runtime
@pytest.mark.compat
def test_a_bookmark_whose_own_snapshot_expired_reads_on_from_its_children(chain):
    ws, bronze, silver = chain
    ws.land(rows=1)
    ws.run("bronze")
    ws.run("silver")
    read_up_to = iceberg.current(bronze).snapshot_id
    for _ in range(2):
        ws.land(rows=1)
        ws.run("bronze")
    catalog, identifier = iceberg.split_name(bronze)
    ws.spark.sql(f"CALL {catalog}.system.expire_snapshots(table => '{'.'.join(identifier)}', "
                 f"snapshot_ids => array({read_up_to}L))")
    assert read_up_to not in [s.snapshot_id for s in iceberg.history(bronze)]
    assert ws.run("silver").inputs["src"] == {"snapshots": 2}
    assert ids(ws.spark, silver) == [100, 200, 300]


@needs_runtime
@pytest.mark.compat
@pytest.mark.parametrize("step", ["staged", "target_committed"])
def test_a_crash_around_the_iceberg_commit_then_recovery_writes_every_row_once(ws, step):
    table = f"{ws.use_iceberg()}.target"
    ws.declare("copy", cls="FilesToIceberg", table=table, lineage="source_file")
    ws.land(rows=2)
    crash(ws, "copy", step)
    ws.land(rows=1)
    report = ws.run("copy")
    assert report.status == "succeeded"
    assert ids(ws.spark, table) == [100, 101, 200]
    action = ws.store.runs("copy")[-1].recovery or report.recovered.action
    assert action == ("aborted" if step == "staged" else "replayed"), action
    marks = [s.mark()["run_seq"] for s in iceberg.history(table)]
    assert len(marks) == len(set(marks))  # no run committed twice


@needs_runtime
@pytest.mark.compat
@pytest.mark.parametrize("catalog", ["path", "path on S3", "jdbc"])
def test_a_run_killed_from_outside_as_its_iceberg_commit_appears_lands_every_row_once(
        ws, request, catalog):
    """The run and its JVM SIGKILLed as the table's commit appears: in a path catalog (on
    a disk, on S3), its next metadata file (the version hint is written after it); in a
    JDBC catalog, the catalog's row naming that file. In CI; at every instant with
    DELTAMARK_FULL_MATRIX=1. The next run recovers: each row once, each run once."""
    if catalog != "path" and spark_line().name != "4.1":
        pytest.skip(f"a {catalog} catalog's commit and its recovery are Iceberg's and "
                    "deltamark's own on every line: killed on 4.1 (CI's part there)")

    def rows(name):
        ws.spark.catalog.refreshTable(name)  # committed by other processes too
        return sorted((r.id, r.source_file.rsplit("/", 1)[-1])
                      for r in ws.spark.table(name).collect())

    def run():
        assert ws.run("copy").status == "succeeded"

    def referenced(name) -> set[str]:
        """The data files the table's snapshot holds (by name)."""
        ws.spark.catalog.refreshTable(name)
        return {r.file_path.rsplit("/", 1)[-1]
                for r in ws.spark.table(f"{name}.files").select("file_path").collect()}

    if catalog == "path":
        table = f"{ws.use_iceberg()}.target"
        directory = Path(ws.spark.conf.get("spark.sql.catalog.lake.warehouse"),
                         *table.split(".")[1:])
        commits = files(directory / "metadata", "v*.metadata.json")
        data_dir = str(directory / "data")
    elif catalog == "path on S3":
        warehouse = f"{request.getfixturevalue('bucket')}/warehouse"
        table = f"""{ws.use_iceberg({"spark.sql.catalog.s3kill": iceberg.CATALOG_CLASSES[0],
                                     "spark.sql.catalog.s3kill.type": "hadoop",
                                     "spark.sql.catalog.s3kill.warehouse": warehouse
                                     })}.target"""
        directory = "/".join([warehouse, *table.split(".")[1:]])
        # a commit renames (on S3: copies) a <uuid>.metadata.json written first to its
        # version's name: that name appearing is the commit
        commits = objects(f"{directory}/metadata", "v*.metadata.json")
        data_dir = f"{directory}/data"
    else:  # its runs are processes of their own, whose sessions find the JDBC driver
        import pyarrow as pa
        from pyiceberg.catalog.sql import SqlCatalog

        db = request.getfixturevalue("pg_server").database()
        ws.connect(db)
        table = f"""{ws.use_iceberg({
            "spark.sql.catalog.pgkill": iceberg.CATALOG_CLASSES[0],
            "spark.sql.catalog.pgkill.type": "jdbc", "spark.sql.catalog.pgkill.uri": db.url,
            "spark.sql.catalog.pgkill.jdbc.user": db.user,
            "spark.sql.catalog.pgkill.jdbc.password": db.password,
            "spark.sql.catalog.pgkill.warehouse": str(ws.root / "warehouse")},
            session=False)}.target"""
        reader = SqlCatalog("pgkill", uri=db.url.replace("jdbc:postgresql://", (
            f"postgresql+psycopg://{db.user}:{db.password}@")),
            warehouse=f"file://{ws.root}/warehouse")
        reader.create_namespace(table.split(".")[1])  # the table made without a JVM
        reader.create_table(table.split(".", 1)[1], schema=pa.schema(
            [("id", pa.int64()), ("source_file", pa.string()), ("_rescued_data", pa.string())]))
        data_dir = str(Path(ws.root, "warehouse", *table.split(".")[1:], "data"))

        def commits() -> int:  # the version of the metadata file the catalog's row names
            found = db.query("SELECT metadata_location FROM iceberg_tables WHERE "
                             "table_name = 'target'")
            return int(found[0][0].rsplit("/", 1)[1].split("-")[0]) if found else 0

        def rows(name):
            found = reader.load_table(name.split(".", 1)[1]).scan().to_arrow().to_pylist()
            return sorted((r["id"], r["source_file"].rsplit("/", 1)[-1]) for r in found)

        def referenced(name) -> set[str]:
            files = reader.load_table(name.split(".", 1)[1]).inspect.files()["file_path"]
            return {path.rsplit("/", 1)[-1] for path in files.to_pylist()}

        def run():
            process = ws.start_run("copy")
            _, err = process.communicate(timeout=300)
            assert process.returncode == 0, err[-3000:]

    def unreferenced(name) -> set[str]:
        """The data files under the table's directory its snapshot does not hold."""
        return set(object_names(data_dir, "*.parquet", recursive=True)) - referenced(name)

    ws.declare("copy", cls="FilesToIceberg", table=table, lineage="source_file")
    if catalog != "jdbc":
        ws.land(rows=1)
        run()  # the table made: a later commit is one more metadata file
    for instant in INSTANTS if FULL_MATRIX else ["at"]:
        ws.land(rows=2)
        left = unreferenced(table)
        kill_when_committing(ws, ws.start_run("copy", own_group=True), instant, commits,
                             objects(data_dir, "*.parquet", recursive=True))
        killed = killed_run(ws.store, instant)
        ws.land(rows=1)
        run()
        assert_recovered(ws.store, killed, instant)
        assert_exactly_once(ws, table, rows=rows, staged=None)
        # a write killed before its commit leaves its files, as any uncommitted Iceberg
        # write does (remove_orphan_files takes them); one that committed, none
        if instant != "before":
            assert not unreferenced(table) - left, f"{instant}: files of no snapshot left"
        marks = [s.mark()["run_seq"] for s in iceberg.history(table)]
        assert len(marks) == len(set(marks)), instant  # no run committed twice


@needs_runtime
@pytest.mark.compat
def test_an_iceberg_target_takes_new_fields_and_promotions_given_merge_schema(ws):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = f"{ws.use_iceberg()}.drift"
    ws.declare("copy", cls="FilesToIceberg", table=table, format="parquet")
    pq.write_table(pa.table({"id": pa.array([1], pa.int32()), "s": [{"x": 1}]}),
                   ws.landing / "1.parquet")
    ws.run("copy")
    # int32 -> int64, a new column, a new nested field: refused in one line, files unread
    pq.write_table(pa.table({"id": pa.array([3_000_000_000], pa.int64()),
                             "s": [{"x": 2, "y": "new"}], "coupon": ["c"]}),
                   ws.landing / "2.parquet")
    with pytest.raises(JobFailedError) as refused:
        ws.run("copy")
    assert ("the rows bring id int -> bigint, + s.y string, + coupon string: pass "
            "merge_schema=True") in str(refused.value)
    ws.declare("copy", cls="FilesToIceberg", table=table, format="parquet",
               merge_schema="true")
    assert ws.run("copy").inputs["src"]["files"] == 1
    rows = {r.id: r for r in ws.spark.table(table).collect()}
    assert {i: (r.s.x, r.s.y, r.coupon) for i, r in rows.items()} == {
        1: (1, None, None), 3_000_000_000: (2, "new", "c")}
    assert dict(ws.spark.table(table).dtypes)["id"] == "bigint"


@needs_runtime
@pytest.mark.compat
def test_rewind_with_restore_targets_rolls_an_iceberg_target_back(ws):
    table = f"{ws.use_iceberg()}.target"
    ws.declare("copy", cls="FilesToIceberg", table=table)
    runs = []
    for _ in range(3):
        ws.land(rows=1)
        runs.append(ws.run("copy"))
    done = actions.rewind(ws.settings, "copy", to_run=runs[0].run_id, restore_targets=True)
    [restored] = done.restored
    assert restored.to_version == runs[0].outputs[table]["version"]
    assert ids(ws.spark, table) == [100]
    ws.run("copy")
    assert ids(ws.spark, table) == [100, 200, 300]


@needs_runtime
@pytest.mark.compat
def test_a_rejected_run_rolls_its_iceberg_write_back(ws):
    table = f"{ws.use_iceberg()}.archive"
    rules = [{"IsComplete": "email"}]
    ws.declare("copy", cls="CheckedCopy", checks={"orders": {"policy": "fail", "rules": rules}},
               ruleset="orders", iceberg_archive=table)
    (ws.landing / "orders-1.json").write_text(
        '{"order_id": 1, "email": "a@x.com", "amount": 1.0, "status": "new"}\n')
    ws.run("copy")
    (ws.landing / "orders-2.json").write_text(
        '{"order_id": 2, "email": null, "amount": 1.0, "status": "new"}\n')
    with pytest.raises(JobFailedError):
        ws.run("copy")
    assert f"rolled back: {table}" in ws.store.last_run("copy").error
    assert sorted(r.order_id for r in ws.spark.table(table).collect()) == [1]


@needs_runtime
@pytest.mark.compat
def test_the_rows_a_run_read_stay_readable_for_spark_v2_writers(ws):
    table = f"{ws.use_iceberg()}.own"
    ws.declare("copy", cls="FilesToIcebergBySpark", table=table)
    ws.land(rows=2)
    assert ws.run("copy").status == "succeeded"
    assert ids(ws.spark, table) == [100, 101]


@needs_runtime
@pytest.mark.compat
def test_a_jdbc_catalog_on_postgresql_written_by_pyiceberg_is_read_incrementally(ws, pg_server):
    """Bronze is written by another tool (pyiceberg's SQL catalog, no JVM); silver's run is
    a process of its own: deltamark puts the JDBC driver where Iceberg's catalog finds it
    when its session starts."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    db = pg_server.database()
    ws.connect(db)  # the JDBC driver in spark.jars
    namespace = ws.use_iceberg({
        "spark.sql.catalog.pg": iceberg.CATALOG_CLASSES[0],
        "spark.sql.catalog.pg.type": "jdbc", "spark.sql.catalog.pg.uri": db.url,
        "spark.sql.catalog.pg.jdbc.user": db.user,
        "spark.sql.catalog.pg.jdbc.password": db.password,
        "spark.sql.catalog.pg.warehouse": str(ws.root / "warehouse")}, session=False)
    bronze, silver = f"{namespace}.bronze", f"{namespace}.silver"
    producer = SqlCatalog("pg", uri=db.url.replace("jdbc:postgresql://", (
        f"postgresql+psycopg://{db.user}:{db.password}@")), warehouse=f"file://{ws.root}/warehouse")
    producer.create_namespace(namespace.split(".")[1])
    rows = pa.table({"id": pa.array([100, 101], pa.int64())})
    producer.create_table(bronze.split(".", 1)[1], schema=rows.schema).append(rows)
    ws.declare("silver", cls="IcebergToIceberg", source=bronze, target=silver)
    process = ws.start_run("silver")
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    # pyiceberg's SQL catalog reads the tables Spark's JDBC catalog keeps, and back
    [mark] = [s.mark() for s in iceberg.history(silver)]
    assert (mark["job"], mark["run_seq"]) == ("silver", 1)
    assert sorted(producer.load_table(silver.split(".", 1)[1]).scan().to_arrow()["id"]
                  .to_pylist()) == [100, 101]
    assert ws.store.last_run("silver").inputs["src"] == {"snapshots": 1}
    assert ws.run("silver").status == "skipped"  # decided before Spark is asked anything


@needs_runtime
@pytest.mark.compat
def test_a_path_catalog_on_s3_is_read_without_a_jvm_too(ws, bucket):
    namespace = ws.use_iceberg({"spark.sql.catalog.s3lake": iceberg.CATALOG_CLASSES[0],
                                "spark.sql.catalog.s3lake.type": "hadoop",
                                "spark.sql.catalog.s3lake.warehouse": f"{bucket}/warehouse"})
    bronze, silver = f"{namespace}.bronze", f"{namespace}.silver"
    ws.declare("bronze", cls="FilesToIceberg", table=bronze)
    ws.declare("silver", cls="IcebergToIceberg", source=bronze, target=silver)
    ws.land(rows=2)
    ws.run("bronze")
    assert ws.run("silver").inputs["src"] == {"snapshots": 1}
    assert ids(ws.spark, silver) == [100, 101]
    # pyiceberg reads the table's metadata on S3 (AWS_ENDPOINT_URL, as S3A does)
    assert iceberg.current(silver).mark()["run_seq"] == 1
    assert ws.run("bronze").status == ws.run("silver").status == "skipped"


@needs_runtime
@pytest.mark.compat
def test_a_pause_run_rereads_the_snapshots_between_two_runs(chain):
    ws, _, silver = chain
    runs = []
    for _ in range(3):
        ws.land(rows=1)
        ws.run("bronze")
        runs.append(ws.run("silver"))
    report = ws.run("silver", bookmark="pause", bookmark_from=runs[0].run_id,
                    bookmark_to=runs[1].run_id)
    assert report.inputs["src"] == {"snapshots": 1}  # bronze's second snapshot, again
    assert ids(ws.spark, silver) == [100, 200, 300]  # merged: nothing twice
    assert ws.store.bookmarks("silver")[0].run_seq == 3  # a pause moves no bookmark


@pytest.mark.parametrize("kind", ["hadoop", "jdbc"])
def test_a_driver_without_pyiceberg_is_told_the_extra_to_install(tmp_path, monkeypatch, kind):
    """pyiceberg missing where deltamark imports it (this Python, the driver's): the error
    names the extra, not Spark's workers."""
    import sys

    from framework.errors import MissingExtraError, one_line

    for name in [m for m in sys.modules if m.split(".")[0] in ("pyiceberg", "sqlalchemy")]:
        monkeypatch.setitem(sys.modules, name, None)  # an import of it fails
    monkeypatch.setitem(sys.modules, "pyiceberg", None)
    catalog = "spark.sql.catalog.lake"
    iceberg.configure({catalog: iceberg.CATALOG_CLASSES[0], f"{catalog}.type": kind,
                       f"{catalog}.warehouse": str(tmp_path),
                       f"{catalog}.uri": f"jdbc:sqlite:{tmp_path}/catalog.db"})
    try:
        with pytest.raises(MissingExtraError) as raised:
            iceberg.current("lake.db.bronze")
    finally:
        iceberg.configure({})
    said = one_line(JobFailedError("j", "r1", raised.value))
    assert "Iceberg table lake.db.bronze needs pyiceberg" in said, said
    assert "pip install 'deltamark[iceberg]'" in said and "workers" not in said


@needs_runtime
@pytest.mark.compat
def test_change_records_applied_to_iceberg_tables_late_repeated_and_rolled_back(ws):
    from test_apply_changes import COLUMNS, SCD1, full_history, histories, latest_states, runs_of

    from framework.delta.changes import ApplyChanges
    from framework.sinks import iceberg as sink

    catalog = ws.use_iceberg()
    changes = histories(25, seed=11)
    batches = runs_of(changes, 3, seed=11)
    history = ApplyChanges(keys=("id",), sequence_by=("ts",), apply_as_deletes="Op = 'D'",
                           except_columns=("Op",), scd_type=2)
    for name, options in (("current", SCD1), ("history", history)):
        for seq, batch in enumerate(batches, 1):
            sink.write(ws.spark, ws.spark.createDataFrame(batch, COLUMNS), f"{catalog}.{name}",
                       mode="apply_changes", keys=("id",), job="cdc", run_id=f"r{seq}",
                       run_seq=seq, record={}, before_commit=lambda: None, changes=options)
    current = {tuple(r) for r in ws.spark.table(f"{catalog}.current").collect()}
    assert current == latest_states(changes)
    assert {tuple(r) for r in ws.spark.table(f"{catalog}.history").collect()} == \
        full_history(changes)
    # a replay writes nothing; a rolled-back run takes its tombstones along
    sink.write(ws.spark, ws.spark.createDataFrame(batches[2], COLUMNS), f"{catalog}.current",
               mode="apply_changes", keys=("id",), job="cdc", run_id="r3", run_seq=3,
               record={}, before_commit=lambda: None, changes=SCD1)
    assert {tuple(r) for r in ws.spark.table(f"{catalog}.current").collect()} == current
    target = sink.IcebergTarget(f"{catalog}.current")
    assert target.roll_back("cdc", 3, "r3")
    assert target.restore("cdc", 1, "r1") is not None
    for seq in (2, 3):
        sink.write(ws.spark, ws.spark.createDataFrame(batches[seq - 1], COLUMNS),
                   f"{catalog}.current", mode="apply_changes", keys=("id",), job="cdc",
                   run_id=f"r{seq}b", run_seq=seq + 2, record={}, before_commit=lambda: None,
                   changes=SCD1)
    assert {tuple(r) for r in ws.spark.table(f"{catalog}.current").collect()} == current
