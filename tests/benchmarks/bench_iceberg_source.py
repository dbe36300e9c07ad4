"""An Iceberg source read incrementally: 1% new rows in a 10,000,000-row table.

deltamark's example job (jobs/orders_iceberg.py) reads a bronze Iceberg table and writes a
silver one, in the same warm Spark session (JVM start excluded), two ways:

- incremental: bookmarked, it reads the snapshot of new rows only and appends them;
- full read: the same job with bookmarks disabled (Glue's ``job-bookmark-disable``), which
  reads the whole table and overwrites the target, as a job without bookmarks must.

Three times, 1% new rows (100,000) are appended to bronze and each side runs once: the
medians are compared. Target: ratio <= 0.1. Runs on a Spark line with an Iceberg runtime
(CI: .venv/spark-4.1); elsewhere it says why it did not.

DELTAMARK_BENCH_ICEBERG_ROWS sets the table's size (default 10,000,000).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

TARGET = 0.1
ROUNDS = 3


def orders(spark, start: int, count: int):
    return spark.range(start, start + count).selectExpr(
        "concat('o', id) AS order_id", "concat('c', id % 97) AS customer_id",
        "CASE WHEN id % 3 = 0 THEN 'PT' ELSE 'ES' END AS country",
        "CAST(id % 500 AS DOUBLE) / 2 AS amount",
        "TIMESTAMP '2026-11-20 10:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 86400) "
        "AS ordered_at")


def main() -> None:
    from framework import load_settings, run_job
    from framework.config import Settings, SparkSettings
    from framework.spark.lines import spark_line
    from framework.spark.session import spark_session

    line = spark_line()
    if line.iceberg is None:
        print(f"bench_iceberg_source: not run: Iceberg has no Spark runtime for Spark "
              f"{line.name} (CI runs it with .venv/spark-4.1)")
        return
    rows = int(os.environ.get("DELTAMARK_BENCH_ICEBERG_ROWS", "10000000"))
    new = rows // 100
    scratch = Path(tempfile.mkdtemp(prefix="deltamark-bench-iceberg-"))
    catalog = {"spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
               "spark.sql.catalog.lake.type": "hadoop",
               "spark.sql.catalog.lake.warehouse": str(scratch / "warehouse")}
    spark = spark_session(Settings(spark=SparkSettings(master="local[*]", conf=catalog)))
    conf = scratch / "conf"
    (conf / "jobs").mkdir(parents=True)
    (conf / "deltamark.yaml").write_text(json.dumps(
        {"state_root": str(scratch / "state"), "spark": {"conf": catalog}}))
    for name, mode, bookmark in (("incremental", "append", "enable"),
                                 ("full", "overwrite", "disable")):
        (conf / "jobs" / f"{name}.yaml").write_text(json.dumps({
            "class": "jobs.orders_iceberg:OrdersToSilver", "bookmark": bookmark,
            "skip_when_nothing_new": False,
            "params": {"source": "lake.sales.bronze", "target": f"lake.sales.{name}",
                       "mode": mode}}))
    settings = load_settings(conf_dir=conf)
    try:
        started = time.perf_counter()
        orders(spark, 0, rows).writeTo("lake.sales.bronze").using("iceberg").create()
        print(f"bench_iceberg_source: bronze of {rows:,} rows written in "
              f"{time.perf_counter() - started:.0f} s")
        run_job(settings, "incremental", spark=spark)  # the first run reads it all: untimed
        samples: dict[str, list[float]] = {"incremental": [], "full": []}
        for round_ in range(ROUNDS):
            orders(spark, rows + round_ * new, new).writeTo("lake.sales.bronze").append()
            for name in samples:
                started = time.perf_counter()
                report = run_job(settings, name, spark=spark)
                samples[name].append(time.perf_counter() - started)
                assert report.status == "succeeded", report
            read = spark.table("lake.sales.incremental").count()
            assert read == rows + (round_ + 1) * new, read
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    incremental, full = (statistics.median(samples[k]) for k in ("incremental", "full"))
    ratio = incremental / full
    print(f"bench_iceberg_source: {new:,} new rows (1%) in a {rows:,}-row Iceberg table, "
          f"Spark {line.name}, median of {ROUNDS}")
    print(f"  {'side':<38} seconds   ratio")
    print(f"  {'full read (bookmarks disabled)':<38} {full:7.2f}    1.00")
    print(f"  {'deltamark incremental (snapshots)':<38} {incremental:7.2f}    {ratio:.2f}  "
          f"(target <= {TARGET}: {'met' if ratio <= TARGET else 'MISSED'})")


if __name__ == "__main__":
    main()
