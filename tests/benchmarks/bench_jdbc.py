"""An incremental database read against a full reload, on a PostgreSQL table of 5 million
rows where 1% are new since the last run.

- deltamark: a job reads the table with ``ctx.read_jdbc`` (bookmark on the primary key)
  and appends what it read to a Delta table.
- full reload: Spark's JDBC reader reads the whole table in parallel (partitioned on the
  primary key, one partition per core) and overwrites a Delta table with it, the way jobs
  without bookmarks do.

Both in the same Spark session, writing through the same Delta engine. Each round inserts
1% new rows, then runs both; four warm-up rounds (the JVM compiles the JDBC and Parquet
paths for a while), then five timed rounds whose medians are compared.
Target: ratio <= 0.1. DELTAMARK_BENCH_JDBC_ROWS sets the table size (default 5,000,000);
DELTAMARK_BENCH_JDBC_WARM_UP and DELTAMARK_BENCH_JDBC_ROUNDS the rounds (4 and 5).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from framework import IncrementalJob, JobContext

TARGET = 0.1
WARM_UP = int(os.environ.get("DELTAMARK_BENCH_JDBC_WARM_UP", 4))
ROUNDS = int(os.environ.get("DELTAMARK_BENCH_JDBC_ROUNDS", 5))
NEW_SHARE = 0.01

CREATE = ("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id INTEGER NOT NULL, "
          "amount NUMERIC(10, 2) NOT NULL, status TEXT NOT NULL, ordered_at TIMESTAMP NOT NULL)")
INSERT = ("INSERT INTO orders SELECT g, g % 10000, (g % 100000) / 100.0, "
          "(ARRAY['paid', 'shipped', 'returned'])[g % 3 + 1], "
          "TIMESTAMP '2026-01-01' + g * INTERVAL '1 second' "
          "FROM generate_series({first}, {last}) AS g")


class OrdersCopy(IncrementalJob):
    """The benchmark's job: new orders from the database, appended to Delta."""

    def run(self, ctx: JobContext) -> None:
        orders = ctx.read_jdbc("orders", connection="bench", transformation_ctx="orders_db")
        ctx.write_delta(orders, ctx.params["target"])


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def scenario(spark, scratch: Path, db, total: int) -> dict[str, float]:
    from framework import load_settings, run_job
    from framework.delta import delta_engine

    new = int(total * NEW_SHARE)
    conf = scratch / "conf"
    (conf / "jobs").mkdir(parents=True)
    os.environ["DELTAMARK_BENCH_DB_PASSWORD"] = db.password
    (conf / "deltamark.yaml").write_text(json.dumps({
        "state_root": str(scratch / "state"), "delta": "embedded",
        "connections": {"bench": {"url": db.url, "user": db.user,
                                  "password": "${DELTAMARK_BENCH_DB_PASSWORD}"}}}))
    (conf / "jobs" / "copy.yaml").write_text(json.dumps({
        "class": f"{__name__}:OrdersCopy", "params": {"target": str(scratch / "dm_target")}}))
    settings = load_settings(conf_dir=conf)
    engine = delta_engine(spark, mode="embedded")

    def deltamark() -> int:
        return run_job(settings, "copy", spark=spark).inputs["orders_db"]["rows"]

    def full_reload() -> None:
        lower, upper = db.query("SELECT MIN(id), MAX(id) FROM orders")[0]
        df = (spark.read.format("jdbc").option("url", db.url)
              .option("driver", "org.postgresql.Driver").option("dbtable", "orders")
              .option("user", db.user).option("password", db.password)
              .option("fetchsize", "50000").option("partitionColumn", "id")
              .option("lowerBound", str(lower)).option("upperBound", str(upper))
              .option("numPartitions", str(os.cpu_count())).load())
        engine.write(df, str(scratch / "full_target"), mode="overwrite")

    loaded = total - (WARM_UP + ROUNDS) * new
    db.execute(CREATE, INSERT.format(first=1, last=loaded), "ANALYZE orders")
    first_run = _timed(lambda: deltamark())
    samples: dict[str, list[float]] = {"deltamark": [], "full reload": []}
    read: list[int] = []
    for round_ in range(WARM_UP + ROUNDS):
        first = loaded + round_ * new + 1
        db.execute(INSERT.format(first=first, last=first + new - 1))
        timed = {"deltamark": _timed(lambda: read.append(deltamark())),
                 "full reload": _timed(full_reload)}
        for side, seconds in timed.items():
            if round_ >= WARM_UP:
                samples[side].append(seconds)
    assert read == [new] * (WARM_UP + ROUNDS), read
    rows = engine.read(str(scratch / "dm_target")).count()
    assert rows == total == engine.read(str(scratch / "full_target")).count(), rows
    print("bench_jdbc rounds: " + "; ".join(
        f"{k} {', '.join(f'{t:.2f}' for t in v)}" for k, v in samples.items()))
    return {"first": first_run, **{k: statistics.median(v) for k, v in samples.items()}}


def main() -> None:
    import pytest

    from framework.config import Settings, SparkSettings
    from framework.spark.session import spark_session
    from tests.databases import JARS, PostgresServer

    total = int(os.environ.get("DELTAMARK_BENCH_JDBC_ROWS", "5000000"))
    try:
        server = PostgresServer()
    except pytest.skip.Exception as skipped:
        print(f"\nbench_jdbc: not run: {skipped}")
        return
    scratch = Path(tempfile.mkdtemp(prefix="deltamark-bench-jdbc-"))
    try:
        spark = spark_session(Settings(spark=SparkSettings(
            master="local[*]", conf={"spark.jars": JARS["postgresql"]})))
        result = scenario(spark, scratch, server.database(), total)
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    ratio = result["deltamark"] / result["full reload"]
    verdict = "ok" if ratio <= TARGET else "MISSED"
    print(f"\nbench_jdbc: PostgreSQL table of {total:,} rows, {NEW_SHARE:.0%} new per run, "
          f"{os.cpu_count()} cores, median of {ROUNDS} rounds after {WARM_UP} warm-up rounds")
    print(f"{'full reload':>12}{'deltamark':>11}{'ratio':>8}  target")
    print(f"{result['full reload']:>11.2f}s{result['deltamark']:>10.2f}s{ratio:>8.3f}  "
          f"<= {TARGET} {verdict}   (deltamark's first run, all rows: {result['first']:.1f}s)")


if __name__ == "__main__":
    main()
