"""Read the Change Data Feed of an upstream MERGE that updated every row of an N-row table
(2N change rows: pre- and post-images) through each Delta path's ``read_changes``, against
delta-spark's own ``readChangeFeed`` of the same range: same table, same session, same run.
Target: each path / delta-spark <= 1.2.

The change rows are read by Spark's tasks on both paths, so the driver process holds none
of them: its peak memory (resident set) before and after the reads is printed. Three
rounds after a warm-up, alternating, each read writing every row to Spark's ``noop`` sink.
Without Delta's jars nothing can make the table (under CI=true that is a failure).

DELTAMARK_BENCH_CHANGED_ROWS sets N (default 5 million).
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time

from tests.benchmarks import medians

TARGET = 1.2
ROUNDS = 4  # the first warms up


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    from pyspark.sql import functions as F

    from framework.config import Settings, SparkSettings
    from framework.delta import delta_engine, native_available
    from framework.delta.log import table_version
    from framework.spark.session import spark_session

    rows = int(os.environ.get("DELTAMARK_BENCH_CHANGED_ROWS", 5_000_000))
    # the upstream MERGE of millions of rows runs short of Spark's default 1g heap
    spark = spark_session(Settings(spark=SparkSettings(
        master="local[*]", conf={"spark.driver.memory": "2g"})))
    if not native_available(spark):
        message = "bench_delta_changes: Delta's jars are not on the session"
        if os.environ.get("CI") == "true":
            raise SystemExit(f"{message} (CI=true)")
        print(f"{message}: skipped")
        return
    scratch = tempfile.mkdtemp(prefix="deltamark-bench-")
    table = f"{scratch}/upstream"
    try:
        started = time.perf_counter()
        (spark.range(rows).select(
            "id", (F.col("id") % 1000).cast("int").alias("customer"),
            (F.col("id") * 0.37).alias("amount"),
            F.concat(F.lit("sku-"), (F.col("id") % 5000).cast("string")).alias("sku"))
         .write.format("delta").option("delta.enableChangeDataFeed", "true").save(table))
        spark.range(rows).select("id", (F.col("id") * 0.5).alias("amount")) \
            .createOrReplaceTempView("corrections")
        spark.sql(f"MERGE INTO delta.`{table}` AS t USING corrections AS s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET t.amount = s.amount")
        made = time.perf_counter() - started
        after, to = 0, table_version(table) or 0

        def delta_spark():
            return (spark.read.format("delta").option("readChangeFeed", "true")
                    .option("startingVersion", after + 1).option("endingVersion", to)
                    .load(table))

        readers = {"delta-spark": delta_spark}
        for name in ("native", "embedded"):
            engine = delta_engine(spark, mode=name)
            readers[name] = lambda engine=engine: engine.read_changes(table, after=after, to=to)
        counts = {name: read().count() for name, read in readers.items()}
        assert len(set(counts.values())) == 1 and counts["delta-spark"] == 2 * rows, counts
        peak_before = _peak_mb()
        times: dict[str, list[float]] = {name: [] for name in readers}
        for rep in range(ROUNDS):
            for name, read in readers.items():
                started = time.perf_counter()
                read().write.format("noop").mode("overwrite").save()
                if rep:
                    times[name].append(time.perf_counter() - started)
        peak_after = _peak_mb()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    median = medians("bench_delta_changes", times)
    print(f"\nbench_delta_changes: the change feed of a MERGE that updated {rows:,} rows "
          f"({2 * rows:,} change rows; table made in {made:.0f} s), {os.cpu_count()} cores, "
          f"median of {ROUNDS - 1} reads each (alternating) after a warm-up")
    print(f"{'reader':<14}{'seconds':>9}{'ratio':>8}")
    print(f"{'delta-spark':<14}{median['delta-spark']:>8.2f}s")
    for name in ("native", "embedded"):
        ratio = median[name] / median["delta-spark"]
        verdict = "ok" if ratio <= TARGET else "MISSED"
        print(f"{name:<14}{median[name]:>8.2f}s{ratio:>8.2f}  <= {TARGET} {verdict}")
    print(f"driver process peak memory: {peak_before:.0f} MB before the reads, "
          f"{peak_after:.0f} MB after ({peak_after - peak_before:+.0f} MB for "
          f"{len(readers) * ROUNDS} reads of {2 * rows:,} change rows)")


if __name__ == "__main__":
    main()
