"""Upstream Delta tables as users have them, read incrementally on both Delta paths.

The tables are built like the Delta Acceptance Testing suite's (delta-incubator/dat), by
delta-spark itself: partitions with NULLs, schema changes, every primitive and nested
type, checkpoints, no statistics, deletion vectors, a CHECK constraint, the Change Data
Feed, generated columns, column mapping (name and id), timestamp_ntz, Iceberg
compatibility. Each is read as a job reads it: in full at its first version range, then
the versions after; both reads are compared row for row with delta-spark's own read of the
same versions (``versionAsOf``, ``readChangeFeed``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest

from framework.delta import delta_engine
from framework.delta.log import table_version
from framework.sources.delta import DeltaSource, plan_delta, read_delta


@dataclass(frozen=True)
class Reference:
    """A table: made by ``first`` (read in full), grown by ``then`` (read as changes)."""

    create: str
    first: tuple[str, ...]
    then: tuple[str, ...]
    change_feed: bool = False


CDF = "'delta.enableChangeDataFeed' = 'true'"
DV = "'delta.enableDeletionVectors' = 'true'"
NAME_MAPPING = ("'delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', "
                "'delta.minWriterVersion' = '5'")
ALL_TYPES = ("b TINYINT, s SMALLINT, i INT, l BIGINT, f FLOAT, d DOUBLE, dec DECIMAL(10,2), "
             "flag BOOLEAN, str STRING, bin BINARY, day DATE, ts TIMESTAMP, "
             "st STRUCT<a: INT, b: STRING>, arr ARRAY<STRUCT<x: BIGINT>>, "
             "m MAP<STRING, STRUCT<y: DOUBLE>>")


def all_types_row(n: int) -> str:
    return (f"({n}, {n}, {n}, {n}, {n}.5, {n}.25, {n}.10, {'true' if n % 2 else 'false'}, "
            f"'s{n}', X'0{n}', DATE'2024-01-0{n}', TIMESTAMP'2024-01-0{n} 10:00:00', "
            f"named_struct('a', {n}, 'b', 'b{n}'), array(named_struct('x', {n})), "
            f"map('k{n}', named_struct('y', {n}.5)))")


TABLES = {
    "appends": Reference(
        "(id BIGINT, name STRING)", ("INSERT INTO {t} VALUES (1, 'a'), (2, NULL)",),
        ("INSERT INTO {t} VALUES (3, 'c')", "INSERT INTO {t} VALUES (4, 'd')")),
    "partitions_with_nulls": Reference(
        "(id BIGINT, p STRING, day DATE) PARTITIONED BY (p, day)",
        ("INSERT INTO {t} VALUES (1, 'a', DATE'2024-01-01'), (2, NULL, NULL), "
         "(3, 'a b+c/d=e', DATE'2024-01-02')",),
        ("INSERT INTO {t} VALUES (4, NULL, DATE'2024-01-03'), (5, 'ü', NULL)",)),
    "schema_change": Reference(
        "(id BIGINT, name STRING)", ("INSERT INTO {t} VALUES (1, 'a')",),
        ("ALTER TABLE {t} ADD COLUMNS (extra DOUBLE)", "INSERT INTO {t} VALUES (2, 'b', 2.5)")),
    "all_types": Reference(
        f"({ALL_TYPES})", (f"INSERT INTO {{t}} VALUES {all_types_row(1)}, {all_types_row(2)}",),
        (f"INSERT INTO {{t}} VALUES {all_types_row(3)}",)),
    "checkpoints": Reference(
        "(id BIGINT) TBLPROPERTIES ('delta.checkpointInterval' = '2')",
        tuple(f"INSERT INTO {{t}} VALUES ({n})" for n in range(3)),
        tuple(f"INSERT INTO {{t}} VALUES ({n})" for n in range(3, 6))),
    "no_statistics": Reference(
        "(id BIGINT, name STRING) TBLPROPERTIES ('delta.dataSkippingNumIndexedCols' = '0')",
        ("INSERT INTO {t} VALUES (1, 'a')",), ("INSERT INTO {t} VALUES (2, 'b')",)),
    "deletion_vectors": Reference(
        f"(id BIGINT, p STRING) PARTITIONED BY (p) TBLPROPERTIES ({DV})",
        ("INSERT INTO {t} SELECT id, CAST(id % 2 AS STRING) FROM range(20)",
         "DELETE FROM {t} WHERE id % 3 = 0"),
        ("INSERT INTO {t} SELECT id, 'new' FROM range(20, 25)",)),
    "deletion_vectors_enabled_unused": Reference(
        f"(id BIGINT) TBLPROPERTIES ({DV})", ("INSERT INTO {t} VALUES (1), (2)",),
        ("INSERT INTO {t} VALUES (3)",)),
    "check_constraint": Reference(
        "(id BIGINT, qty INT)",
        ("ALTER TABLE {t} ADD CONSTRAINT positive CHECK (qty > 0)",
         "INSERT INTO {t} VALUES (1, 5)"),
        ("INSERT INTO {t} VALUES (2, 7)",)),
    "change_feed": Reference(
        f"(id BIGINT, v STRING) TBLPROPERTIES ({CDF})",
        ("INSERT INTO {t} SELECT id, 'v' FROM range(10)",),
        ("UPDATE {t} SET v = 'u' WHERE id < 3", "DELETE FROM {t} WHERE id = 9",
         "MERGE INTO {t} AS t USING (SELECT id, 'm' AS v FROM range(8, 12)) AS s "
         "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
         "INSERT INTO {t} VALUES (100, 'i')"),
        change_feed=True),
    "change_feed_partitioned": Reference(
        f"(id BIGINT, p STRING) PARTITIONED BY (p) TBLPROPERTIES ({CDF})",
        ("INSERT INTO {t} SELECT id, CAST(id % 3 AS STRING) FROM range(9)",),
        ("DELETE FROM {t} WHERE p = '1'", "UPDATE {t} SET id = id + 100 WHERE p = '2'"),
        change_feed=True),
    "change_feed_deletion_vectors": Reference(
        f"(id BIGINT, v STRING) TBLPROPERTIES ({CDF}, {DV})",
        ("INSERT INTO {t} SELECT id, 'v' FROM range(10)", "DELETE FROM {t} WHERE id < 2"),
        ("DELETE FROM {t} WHERE id IN (4, 5)", "UPDATE {t} SET v = 'u' WHERE id = 7",
         "DELETE FROM {t} WHERE id > 8", "INSERT INTO {t} VALUES (50, 'i')"),
        change_feed=True),
    "generated_columns": Reference(
        "(id BIGINT, doubled BIGINT GENERATED ALWAYS AS (id * 2))",
        ("INSERT INTO {t} (id) VALUES (1), (2)",), ("INSERT INTO {t} (id) VALUES (3)",)),
    "column_mapping_name": Reference(
        f"(id BIGINT, `my col` STRING, s STRUCT<x: INT, y: STRING>, p STRING) "
        f"PARTITIONED BY (p) TBLPROPERTIES ({NAME_MAPPING})",
        ("INSERT INTO {t} VALUES (1, 'x', named_struct('x', 1, 'y', 'a'), 'a'), "
         "(2, 'y', NULL, NULL)",
         "ALTER TABLE {t} RENAME COLUMN `my col` TO renamed"),
        ("INSERT INTO {t} VALUES (3, 'z', named_struct('x', 3, 'y', 'c'), 'b')",
         "ALTER TABLE {t} RENAME COLUMN s.y TO why",
         "INSERT INTO {t} VALUES (4, 'w', named_struct('x', 4, 'why', 'd'), NULL)")),
    "column_mapping_id": Reference(
        "(id BIGINT, name STRING) TBLPROPERTIES ('delta.columnMapping.mode' = 'id', "
        "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')",
        ("INSERT INTO {t} VALUES (1, 'a')",),
        ("ALTER TABLE {t} ADD COLUMNS (extra INT)", "INSERT INTO {t} VALUES (2, 'b', 3)")),
    "column_mapping_change_feed": Reference(
        f"(id BIGINT, v STRING) TBLPROPERTIES ({NAME_MAPPING}, {CDF})",
        ("INSERT INTO {t} SELECT id, 'v' FROM range(5)",),
        ("UPDATE {t} SET v = 'u' WHERE id = 1", "DELETE FROM {t} WHERE id = 2"),
        change_feed=True),
    "timestamp_ntz": Reference(
        "(id BIGINT, at TIMESTAMP_NTZ)",
        ("INSERT INTO {t} VALUES (1, TIMESTAMP_NTZ'2024-01-01 10:00:00')",),
        ("INSERT INTO {t} VALUES (2, TIMESTAMP_NTZ'2024-02-01 11:30:00')",)),
    "iceberg_compat": Reference(
        "(id BIGINT, name STRING) TBLPROPERTIES ('delta.enableIcebergCompatV2' = 'true', "
        f"{NAME_MAPPING})",
        ("INSERT INTO {t} VALUES (1, 'a')",), ("INSERT INTO {t} VALUES (2, 'b')",)),
}


@pytest.fixture(scope="module")
def references(spark, tmp_path_factory):
    """Builds a table by its name with delta-spark, once: its path and the last version of
    its first part."""
    from framework.delta import native_available

    if not native_available(spark):
        from databases import unavailable

        unavailable("the reference tables are made by delta-spark: Delta's jars are not on "
                    "this Spark session (bash .ci/setup.sh resolves them with mvn)")
    root = tmp_path_factory.mktemp("reference")
    built = {}

    def build(name):
        if name not in built:
            table = TABLES[name]
            path = str(root / name)
            target = f"delta.`{path}`"
            spark.sql(f"CREATE TABLE {target} {_using_delta(table.create)}")
            for statement in table.first:
                spark.sql(statement.replace("{t}", target))
            first = table_version(path)
            for statement in table.then:
                spark.sql(statement.replace("{t}", target))
            built[name] = (path, first)
        return built[name]

    return build


def _using_delta(create):
    """``(columns) options`` as ``(columns) USING delta options``."""
    depth = 0
    for at, char in enumerate(create):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return f"{create[:at + 1]} USING delta {create[at + 1:]}"
    raise AssertionError(create)


def rows(df):
    """A DataFrame's rows as a multiset of their values, comparable across readers (which
    may name nested fields apart: delta-spark reads an old version of a table with column
    mapping with its fields' latest names)."""
    def values(value):
        if isinstance(value, tuple):
            return tuple(values(v) for v in value)
        if isinstance(value, list):
            return [values(v) for v in value]
        if isinstance(value, dict):
            return {k: values(v) for k, v in value.items()}
        return value

    return Counter(repr(values(row)) for row in df.collect())


@pytest.mark.parametrize("name", TABLES)
def test_reference_tables_read_incrementally_as_delta_spark_reads_them(
        spark, references, delta_path, name):
    path, first = references(name)
    table = TABLES[name]
    engine = delta_engine(spark, mode=delta_path)

    def deltamark(after, to):
        plan = plan_delta(DeltaSource(path), start=None if after is None else _state(path, after),
                          end=_state(path, to), advance=True)
        df = read_delta(engine, plan, change_feed=None)
        return df.drop("_commit_timestamp") if table.change_feed else df

    full = deltamark(None, first)
    expected = spark.read.format("delta").option("versionAsOf", first).load(path)
    assert rows(full.select(*_columns(expected))) == rows(expected)

    last = table_version(path)
    increment = deltamark(first, last)
    if table.change_feed:
        latest = (spark.read.format("delta").option("readChangeFeed", "true")
                  .option("startingVersion", first + 1).option("endingVersion", last)
                  .load(path).drop("_commit_timestamp"))
        expected_rows = rows(latest)
    else:  # appends only: the rows at the last version the first lacked
        latest = spark.read.format("delta").option("versionAsOf", last).load(path)
        before = spark.read.format("delta").option("versionAsOf", first).load(path)
        expected_rows = rows(latest) - rows(_as_later(before, latest))
    assert increment.count() > 0
    assert rows(increment.select(*_columns(latest))) == expected_rows


def _columns(df):
    return [f"`{c}`" for c in df.columns]


def _as_later(before, latest):
    """``before``'s rows with ``latest``'s columns (an added column is NULL in them)."""
    from pyspark.sql import functions as F

    return before.select(*[F.col(f"`{c}`") if c in before.columns else
                           F.lit(None).cast(latest.schema[c].dataType).alias(c)
                           for c in latest.columns])


def _state(path, version):
    from framework.sources.delta import DeltaState

    return DeltaState(table=path, version=version)


@pytest.mark.parametrize("name", TABLES)
def test_reference_tables_are_described_from_the_log_as_delta_rs_loads_them(references, name):
    """A read's schema, partitioning, configuration and features, from the commits and the
    checkpoint's two columns: as delta-rs says them having loaded the table, at each
    version."""
    import importlib
    import json

    from framework.delta.log import snapshot

    described = importlib.import_module("framework.delta.log.history")._described
    path, first = references(name)
    for version in range(first, table_version(path) + 1):
        told, loaded = described(path, version), snapshot(path, version=version)
        assert told is not None, (name, version)
        assert (json.loads(told.schema_json), told.partition_columns, told.configuration,
                told.reader_features) == (json.loads(loaded.schema_json),
                                          loaded.partition_columns, loaded.configuration,
                                          loaded.reader_features), (name, version)


def test_a_change_feed_read_gives_delta_spark_s_commit_times(spark, references, delta_path):
    path, first = references("change_feed_deletion_vectors")
    engine = delta_engine(spark, mode=delta_path)
    last = table_version(path)
    mine = engine.read_changes(path, after=first, to=last)
    theirs = (spark.read.format("delta").option("readChangeFeed", "true")
              .option("startingVersion", first + 1).option("endingVersion", last).load(path))
    assert rows(mine.select("_commit_version", "_commit_timestamp")) == \
        rows(theirs.select("_commit_version", "_commit_timestamp"))
