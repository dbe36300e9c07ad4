"""The contract every Delta path keeps. Runs on embedded; on native when the jars are there."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import uuid

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from framework.delta import AppTransaction, InvalidFilterError, delta_engine, log
from framework.errors import (
    ConstraintViolationError,
    DeltaTableError,
    SchemaMismatchError,
    TableNotFoundError,
    UnsupportedTableFeatureError,
    VersionNotFoundError,
)
from framework.spark.session import temporary_conf


def commits(path):
    return sorted(f for f in os.listdir(os.path.join(path, "_delta_log")) if f.endswith(".json"))


def orders(spark, n=100, offset=0):
    return spark.range(offset, offset + n).select(
        F.col("id"),
        (F.col("id") % 3).cast("int").alias("k"),
        F.element_at(F.array(F.lit("007"), F.lit("a b/c=d"), F.lit("x%y")),
                     (F.col("id") % 3 + 1).cast("int")).alias("s"),
        (F.col("id") * 1.5).alias("amount"),
        F.timestamp_seconds(F.col("id") * 3600).alias("ts"),
        F.date_add(F.lit(dt.date(2024, 1, 1)), (F.col("id") % 5).cast("int")).alias("day"),
    )


def sorted_rows(df):
    return sorted(tuple(r) for r in df.collect())


def test_round_trip_keeps_rows_types_and_one_commit_per_write(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    data = orders(spark)
    result = engine.write(data, path, partition_by=["s"])
    assert (result.version, result.skipped) == (0, False)
    back = engine.read(path)
    assert back.schema.simpleString() == data.schema.simpleString()
    assert sorted_rows(back) == sorted_rows(data)
    engine.write(orders(spark, 50, 100), path)
    assert len(commits(path)) == 2
    assert engine.read(path).count() == 150


def test_partition_values_that_need_escaping_come_back_exactly(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    data = orders(spark, 30).withColumn("s", F.when(F.col("id") == 0, None).otherwise(F.col("s")))
    engine.write(data, path, partition_by=["s", "day"])
    assert sorted_rows(engine.read(path)) == sorted_rows(data)
    got = {r.s for r in engine.read(path).select("s").distinct().collect()}
    assert got == {None, "007", "a b/c=d", "x%y"}


def test_tables_are_readable_by_delta_rs_with_accepted_protocol(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    engine.write(orders(spark), path, partition_by=["k"])
    table = DeltaTable(path)
    protocol = table.protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) <= (3, 7)
    assert table.metadata().partition_columns == ["k"]
    count = QueryBuilder().register("t", table).execute("select count(*) AS n, sum(id) AS s from t")
    assert pa.table(count.read_all()).to_pylist() == [{"n": 100, "s": sum(range(100))}]


def test_reads_tables_written_by_delta_rs(engine, tmp_path):
    path = str(tmp_path / "t")
    data = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()),
                     "part": ["a", "b", None, "a"],
                     "ts": pa.array([dt.datetime(2024, 1, i, tzinfo=dt.UTC) for i in range(1, 5)],
                                    pa.timestamp("us", tz="UTC"))})
    write_deltalake(path, data, partition_by=["part"])
    rows = sorted(engine.read(path).collect(), key=lambda r: r.id)
    assert [(r.id, r.part) for r in rows] == [(1, "a"), (2, "b"), (3, None), (4, "a")]
    assert rows[0].ts == dt.datetime(2024, 1, 1)  # session time zone is UTC
    assert engine.read(path, filters=[("part", "=", "a")]).count() == 2


def test_overwrite_whole_table_and_replace_where(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    engine.write(orders(spark, 90), path, partition_by=["k"])
    engine.write(orders(spark, 9).where("k = 1").withColumn("amount", F.lit(-1.0)), path,
                 mode="overwrite", replace_where=[("k", "=", 1)])
    counts = {r.k: r["count"] for r in engine.read(path).groupBy("k").count().collect()}
    assert counts == {0: 30, 1: 3, 2: 30}
    assert engine.read(path).where("k = 1 and amount != -1").count() == 0
    engine.write(orders(spark, 6), path, mode="overwrite")
    assert engine.read(path).count() == 6


def test_replace_where_refuses_rows_outside_it_and_commits_nothing(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    engine.write(orders(spark, 9), path, partition_by=["k"])
    before = commits(path)
    with pytest.raises((DeltaTableError, PySparkException)):
        engine.write(orders(spark, 9), path, mode="overwrite", replace_where=[("k", "=", 1)])
    assert commits(path) == before
    assert engine.read(path).count() == 9


def test_schema_is_enforced_with_a_clear_error(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    engine.write(orders(spark, 10), path)
    with pytest.raises(SchemaMismatchError) as error:
        engine.write(orders(spark, 10).withColumn("k", F.col("k").cast("string")), path)
    assert error.value.path == path
    assert "column 'k' is string in the data but int in the table" in str(error.value)
    with pytest.raises(SchemaMismatchError, match="new column"):
        engine.write(orders(spark, 10).withColumn("extra", F.lit(1)), path)
    assert len(commits(path)) == 1


@pytest.mark.compat
def test_merge_schema_adds_columns_and_fills_missing_ones(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    engine.write(orders(spark, 10), path)
    engine.write(orders(spark, 5, 10).withColumn("extra", F.lit("x")), path, merge_schema=True)
    engine.write(orders(spark, 5, 20).drop("amount"), path)
    reordered = orders(spark, 5, 30).withColumn("extra", F.lit("y"))
    engine.write(reordered.select(*reversed(reordered.columns)), path)
    back = engine.read(path)
    assert back.columns == ["id", "k", "s", "amount", "ts", "day", "extra"]
    assert back.where("extra = 'x'").count() == 5
    assert sorted_rows(back.where("extra = 'y'")) == sorted_rows(reordered)
    assert back.where("amount is null").count() == 5
    assert engine.read(path, version=0).columns[-1] == "day"


def test_app_transaction_is_committed_and_a_replay_is_skipped(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    first = engine.write(orders(spark, 10), path, txn=AppTransaction("job-a", 1),
                         metadata={"run_id": "r1", "run_seq": 1})
    assert engine.transaction_version(path, "job-a") == 1
    replay = engine.write(orders(spark, 10), path, txn=AppTransaction("job-a", 1))
    assert replay.skipped and replay.version == first.version
    assert engine.read(path).count() == 10
    engine.write(orders(spark, 10, 10), path, txn=AppTransaction("job-a", 2))
    assert engine.transaction_version(path, "job-a") == 2
    assert engine.transaction_version(path, "job-b") is None
    history = engine.history(path)
    assert [c.version for c in history] == [1, 0]
    assert history[1].user_metadata == {"run_id": "r1", "run_seq": 1}


def test_a_failed_write_leaves_no_visible_data(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    engine.write(orders(spark, 10), path)
    failing = orders(spark, 10).withColumn(
        "amount", F.when(F.col("id") == 7, F.raise_error(F.lit("boom"))).otherwise(F.col("amount")))
    with pytest.raises((PySparkException, Py4JJavaError)):  # delta-spark's is not converted
        engine.write(failing, path)
    assert len(commits(path)) == 1
    assert engine.read(path).count() == 10
    leftovers = [f for _, _, files in os.walk(path) for f in files if f.endswith(".parquet")]
    if engine.name == "embedded":  # its staging is removed; delta-spark's failed tasks
        # leave files in the table that no commit names (VACUUM deletes them)
        assert len(leftovers) == len(DeltaTable(path).file_uris())


def test_time_travel_by_version_and_timestamp(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    engine.write(orders(spark, 10), path)
    engine.write(orders(spark, 10, 10), path)
    committed = engine.history(path)[-1].timestamp
    assert engine.read(path, version=0).count() == 10
    assert engine.read(path, timestamp=committed).count() == 10
    assert engine.read(path).count() == 20
    with pytest.raises(VersionNotFoundError) as error:
        engine.read(path, version=7)
    assert error.value.path == path


def test_filters_prune_partitions_and_skip_files_by_statistics(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    for batch in range(4):  # four files with disjoint id ranges
        engine.write(orders(spark, 25, batch * 25).coalesce(1), path)
    assert len(engine.read(path).inputFiles()) == 4
    skipped = engine.read(path, filters=[("id", ">=", 60)])
    assert len(skipped.inputFiles()) == 2
    assert skipped.count() == 40
    listed = engine.read(path, filters=[("id", "in", [3, 80])])
    late = engine.read(path, filters=[("ts", ">", dt.datetime(1970, 1, 2))])  # max of file 1
    assert listed.count() == 2 and late.count() == 75
    # delta-spark 4.4 skips no file for an IN list, and compares timestamps with a
    # millisecond's slack (its statistics are truncated): only the embedded path is exact.
    if engine.name == "embedded":
        assert len(listed.inputFiles()) == 2 and len(late.inputFiles()) == 3
    assert engine.read(path, filters=[("id", "<", 0)]).count() == 0

    parted = str(tmp_path / "p")
    engine.write(orders(spark, 30), parted, partition_by=["k"])
    pruned = engine.read(parted, filters=[("k", "=", 2)])
    assert {r.k for r in pruned.collect()} == {2}
    assert all("k=2" in f for f in pruned.inputFiles())


def test_bad_filters_name_the_table(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    engine.write(orders(spark, 3), path)
    with pytest.raises(InvalidFilterError, match="nope"):
        engine.read(path, filters=[("nope", "=", 1)])
    with pytest.raises(InvalidFilterError, match="op"):
        engine.read(path, filters=[("id", "~", 1)])


def test_a_path_delta_rs_would_decode_is_refused_before_anything_is_written(engine, spark,
                                                                             tmp_path):
    path = str(tmp_path / "sales%41")  # delta-rs would look in tmp_path/salesA
    with pytest.raises(DeltaTableError, match=r"sales%41: delta-rs reads '%41'"):
        engine.write(orders(spark, 1), path)
    assert not os.path.exists(path)
    with pytest.raises(DeltaTableError, match="'%41'"):
        engine.read(path)
    for taken in ("sales%", "100%_done", "p%zz"):  # no escape: read back where written
        engine.write(orders(spark, 1), str(tmp_path / taken))
        assert engine.read(str(tmp_path / taken)).count() == 1
    assert not log.is_table(path)  # a probe (is it a Delta target?) is answered, not refused


def test_missing_table_is_a_clear_error(engine, tmp_path):
    with pytest.raises(TableNotFoundError) as error:
        engine.read(str(tmp_path / "absent"))
    assert "no Delta table there" in str(error.value)


@pytest.mark.parametrize("configuration", [
    {"delta.enableDeletionVectors": "true"}, {"delta.columnMapping.mode": "name"}])
def test_embedded_reads_tables_with_features_it_honours(spark, tmp_path, configuration):
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"a": [1, 2]}), configuration=configuration)
    assert sorted_rows(delta_engine(spark, mode="embedded").read(path)) == [(1,), (2,)]


@pytest.mark.parametrize("widened", [False, True], ids=["enabled", "in use"])
def test_embedded_refuses_only_a_feature_in_use_it_cannot_honour(spark, tmp_path, widened):
    """Type widening merely enabled reads; a column whose type was widened (its older files
    hold the narrower type) is refused, naming the feature, the column and the way out."""
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": pa.array([1, 2], pa.int64())}))
    entry = path / "_delta_log" / "00000000000000000000.json"
    actions = [json.loads(line) for line in entry.read_text().splitlines()]
    for action in actions:
        if "protocol" in action:
            action["protocol"] = {"minReaderVersion": 3, "minWriterVersion": 7,
                                  "readerFeatures": ["typeWidening"],
                                  "writerFeatures": ["typeWidening"]}
        if "metaData" in action and widened:
            schema = json.loads(action["metaData"]["schemaString"])
            schema["fields"][0]["metadata"] = {"delta.typeChanges": [
                {"fromType": "integer", "toType": "long"}]}
            action["metaData"]["schemaString"] = json.dumps(schema)
    entry.write_text("".join(json.dumps(a) + "\n" for a in actions))
    engine = delta_engine(spark, mode="embedded")
    if not widened:
        assert sorted_rows(engine.read(str(path))) == [(1,), (2,)]
        return
    with pytest.raises(UnsupportedTableFeatureError) as error:
        engine.read(str(path))
    assert error.value.features == ("typeWidening (column a)",)
    assert "embedded path cannot read. Read it with the native path" in str(error.value)


def spark_made_table(spark, path, columns, *constraints, properties=""):
    """A Delta table as delta-spark makes it (needs Delta's jars on the session)."""
    from framework.delta import native_available

    if not native_available(spark):
        from databases import unavailable

        unavailable("tables with constraints are made by delta-spark: Delta's jars are not "
                    "on this Spark session (bash .ci/setup.sh resolves them with mvn)")
    spark.sql(f"CREATE TABLE delta.`{path}` ({columns}) USING delta {properties}")
    for i, check in enumerate(constraints):
        spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT c{i} CHECK ({check})")


@pytest.mark.parametrize("rows, broken", [
    ([(0, "x", (1,))], "CHECK constraint c0 (a > 0)"),
    ([(None, "x", (1,))], "CHECK constraint c0 (a > 0)"),  # NULL breaks a CHECK too
    ([(1, None, (1,))], "NOT NULL column b is NULL"),
    ([(1, "x", (None,))], "NOT NULL column s.x is NULL"),
    ([(1, "x", None)], "NOT NULL column s.x is NULL"),  # as delta-spark: through a NULL s
], ids=["check", "check on NULL", "not null", "nested not null", "nested under NULL"])
def test_rows_breaking_a_table_s_constraints_are_refused_whole(engine, spark, tmp_path,
                                                               rows, broken):
    """Both paths refuse a write with a row that breaks a NOT NULL column or a CHECK
    constraint (of a table delta-spark made), and write none of its rows."""
    path = str(tmp_path / "t")
    spark_made_table(spark, path, "a BIGINT, b STRING NOT NULL, s STRUCT<x: BIGINT NOT NULL>",
                     "a > 0")
    schema = "a BIGINT, b STRING, s STRUCT<x: BIGINT>"
    engine.write(spark.createDataFrame([(5, "ok", (1,))], schema), path)
    before = commits(path)
    with pytest.raises((ConstraintViolationError, Py4JJavaError, PySparkException)) as error:
        engine.write(spark.createDataFrame([(7, "fine", (2,)), *rows], schema), path)
    if engine.name == "embedded":
        assert error.type is ConstraintViolationError
        assert broken in str(error.value) and path in str(error.value)
    assert commits(path) == before
    assert sorted_rows(engine.read(path)) == [(5, "ok", (1,))]


def test_a_merge_breaking_a_check_constraint_is_refused_whole(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    spark_made_table(spark, path, "a BIGINT, k BIGINT NOT NULL", "a > 0")
    schema = "a BIGINT, k BIGINT"
    engine.write(spark.createDataFrame([(5, 1)], schema), path)
    before = commits(path)
    with pytest.raises((ConstraintViolationError, Py4JJavaError, PySparkException)) as error:
        engine.write(spark.createDataFrame([(6, 1), (0, 2)], schema), path, mode="merge",
                     merge_on=["k"])
    if engine.name == "embedded":
        assert error.type is ConstraintViolationError
        assert "CHECK constraint c0 (a > 0)" in str(error.value)
    assert commits(path) == before
    assert sorted_rows(engine.read(path)) == [(5, 1)]


@pytest.mark.parametrize("columns, properties, feature", [
    ("a BIGINT, b BIGINT GENERATED ALWAYS AS (a * 2)", "", "generated column b"),
    ("a BIGINT, b BIGINT", "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')",
     "columnMapping (name)"),
], ids=["generated column", "column mapping"])
def test_embedded_refuses_to_write_what_it_would_write_wrong(engine, spark, tmp_path,
                                                              columns, properties, feature):
    """Column mapping names data files' columns apart, a generated column takes the
    table's value: the embedded path refuses to write such tables, the native path
    writes them."""
    path = str(tmp_path / "t")
    spark_made_table(spark, path, columns, properties=properties)
    rows = spark.createDataFrame([(1, 2)], "a BIGINT, b BIGINT")
    if engine.name == "native":
        engine.write(rows, path)
        assert sorted_rows(engine.read(path)) == [(1, 2)]
        return
    with pytest.raises(UnsupportedTableFeatureError) as error:
        engine.write(rows, path)
    assert feature in error.value.features and "Write it with the native path" in str(
        error.value)
    assert len(commits(path)) == 1  # the creation only


def test_data_files_outside_partition_directories_are_read_by_the_log(engine, spark,
                                                                       tmp_path):
    """Partition values come from the log: files another writer placed outside ``col=value``
    directories (as delta-spark does for tables with column mapping) read right."""
    path = tmp_path / "t"
    delta_engine(spark, mode="embedded").write(orders(spark, 6), str(tmp_path / "written"),
                                               partition_by=["k"])
    shutil.copytree(tmp_path / "written", path)
    log_file = path / "_delta_log" / "00000000000000000000.json"
    moved = []
    for line in log_file.read_text().splitlines():
        action = json.loads(line)
        if "add" in action:
            name = f"{uuid.uuid4().hex}.parquet"
            shutil.move(str(path / action["add"]["path"]), str(path / name))
            action["add"]["path"] = name
        moved.append(json.dumps(action))
    log_file.write_text("\n".join(moved) + "\n")
    assert sorted_rows(engine.read(str(path))) == sorted_rows(orders(spark, 6))


@pytest.mark.spark  # starts Spark in a process of its own
def test_native_without_jars_is_a_one_line_error():
    # A machine where the set-up could not reach Maven: no jars on the session.
    code = ("import framework.spark.jars\n"
            "framework.spark.jars.class_path = lambda: ''\n"
            "from framework.config import Settings, SparkSettings\n"
            "from framework.delta import delta_engine\n"
            "from framework.errors import DeltaEngineUnavailableError\n"
            "from framework.spark.session import spark_session\n"
            "spark = spark_session(Settings(spark=SparkSettings(master='local[1]')))\n"
            "print('AUTO', delta_engine(spark, mode='auto').name)\n"
            "try:\n    delta_engine(spark, mode='native')\n"
            "except DeltaEngineUnavailableError as e:\n    print('ERROR', e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=180)
    assert "AUTO embedded" in done.stdout, done.stderr[-2000:]
    [message] = [line for line in done.stdout.splitlines() if line.startswith("ERROR")]
    assert "spark.jars" in message and "embedded" in message


def test_a_merge_into_a_table_named_by_a_relative_path(engine, spark, tmp_path):
    """As jobs name their targets (``lake/customers``, relative to where they run: here,
    where this process and its JVM run)."""
    path = os.path.relpath(tmp_path / "t")
    engine.write(spark.createDataFrame([(1, "ann")], "id INT, name STRING"), path)
    engine.write(spark.createDataFrame([(1, "anne"), (2, "bob")], "id INT, name STRING"),
                 path, mode="merge", merge_on=["id"])
    assert sorted(map(tuple, engine.read(path).collect())) == [(1, "anne"), (2, "bob")]


@pytest.mark.compat
def test_merge_upserts_on_its_keys_in_one_commit_and_replays_are_skipped(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    rows = [(1, "ann"), (2, "bob")]
    assert engine.write(spark.createDataFrame(rows, "id INT, name STRING"), path, mode="merge",
                        merge_on=["id"]).version == 0  # a new table: created
    changes = spark.createDataFrame([(2, "bobby"), (3, "cy")], "id INT, name STRING")
    txn = AppTransaction("job", 2)
    assert engine.write(changes, path, mode="merge", merge_on=["id"], txn=txn,
                        metadata={"run": 2}).version == 1
    assert sorted_rows(engine.read(path)) == [(1, "ann"), (2, "bobby"), (3, "cy")]
    assert engine.history(path, limit=1)[0].user_metadata == {"run": 2}
    assert engine.write(changes, path, mode="merge", merge_on=["id"], txn=txn).skipped
    empty = spark.createDataFrame([], "id INT, name STRING")
    assert engine.write(empty, path, mode="merge", merge_on=["id"],
                        txn=AppTransaction("job", 3)).version == 2
    assert engine.transaction_version(path, "job") == 3
    assert len(commits(path)) == 3


def test_merge_refuses_missing_repeated_and_null_keys(engine, spark, tmp_path):
    path = str(tmp_path / "t")
    engine.write(spark.createDataFrame([(1, "a")], "id INT, name STRING"), path)
    cases = [([(1, "a"), (1, "b")], ["id"], "unique and not NULL.*id=1"),
             ([(None, "a")], ["id"], "id=None"),
             ([(1, "a")], ["nope"], r"merge_on column\(s\) \['nope'\] are not in the data"),
             ([(1, "a")], [], "mode='merge' and merge_on go together")]
    for rows, keys, message in cases:
        df = spark.createDataFrame(rows, "id INT, name STRING")
        with pytest.raises(DeltaTableError, match=message):
            engine.write(df, path, mode="merge", merge_on=keys)
    assert len(commits(path)) == 1


@pytest.mark.compat
def test_a_small_write_from_files_is_one_file_the_driver_writes_as_spark_would(spark, tmp_path):
    """Rows read from files through projections and filters only, a few MB at most, are
    written by the driver from Arrow: the same rows, types and statistics as Spark's
    writer gives, in one file; a row breaking a constraint still refuses the write."""
    engine = delta_engine(spark, mode="embedded")
    typed = orders(spark, 40).select(
        "*", F.col("k").cast("tinyint").alias("b"), F.col("k").cast("smallint").alias("h"),
        F.col("amount").cast("float").alias("f"), F.col("amount").cast("decimal(12,2)").alias("d"),
        F.col("s").cast("binary").alias("bin"), F.col("ts").cast("timestamp_ntz").alias("ntz"),
        (F.col("k") == 1).alias("flag"),
        F.when(F.col("id") % 4 > 0, F.struct("k", F.array("s", F.lit(None)).alias("tags")))
        .alias("nested"),
        F.create_map("s", F.array(F.struct("amount", "day"))).alias("lines"))
    typed.write.parquet(str(tmp_path / "landed"))
    landed = spark.read.parquet(str(tmp_path / "landed")).where("id >= 4")
    by_driver, by_spark = str(tmp_path / "driver"), str(tmp_path / "spark")
    # Arrow's timestamps carry the session's time zone (Spark 3.5's did not match the rows')
    with temporary_conf(spark, {"spark.sql.session.timeZone": "America/New_York"}):
        engine.write(landed, by_driver)
    engine.write(landed.repartition(3), by_spark)  # a plan the driver does not write
    [file] = log.snapshot(by_driver).files
    spark_files = log.snapshot(by_spark).files
    assert len(spark_files) > 1
    assert engine.read(by_driver).schema == engine.read(by_spark).schema == landed.schema
    assert sorted_rows(engine.read(by_driver)) == sorted_rows(engine.read(by_spark))
    assert DeltaTable(by_driver).to_pyarrow_table().sort_by("id").equals(
        DeltaTable(by_spark).to_pyarrow_table().sort_by("id"))
    assert file.num_records == sum(f.num_records for f in spark_files) == 36
    for bound, pick in (("min_values", min), ("max_values", max)):  # None: no statistic
        assert getattr(file, bound) == {
            column: None if None in values else pick(values) for column in file.min_values
            for values in [[getattr(f, bound)[column] for f in spark_files]]}, bound
    assert file.null_counts == {
        column: None if None in counts else sum(counts) for column in file.null_counts
        for counts in [[f.null_counts[column] for f in spark_files]]}
    spark_made_table(spark, str(tmp_path / "checked"), "id BIGINT", "id < 30")
    with pytest.raises(ConstraintViolationError, match="id < 30"):
        engine.write(landed.select("id"), str(tmp_path / "checked"))
    assert not log.snapshot(str(tmp_path / "checked")).files
