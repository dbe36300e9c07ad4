"""Write then fully read N rows through each Delta path (native: delta-spark; embedded:
delta-rs with Spark's Parquet I/O), through plain delta-spark with no deltamark in between
(``format("delta")``) and through Spark's own Parquet writer/reader: same data, same
session, same run. Targets: what deltamark adds to delta-spark, native / plain delta-spark
<= 1.05; embedded / Spark's Parquet <= 1.1. Native / Parquet is printed as a reference
(delta-spark's statistics make Delta slower than Parquet: Delta's cost, not deltamark's).

Four rounds, the first a warm-up on a tenth of the rows; each writes the three tables
once, then reads them three times, alternating (a write's time varies by up to 2x from one
round to the next on two cores: three measured rounds keep one slow write from deciding).
Without Delta's jars the native column is left out (under CI=true that is a failure).

DELTAMARK_BENCH_ROWS sets N (default 10 million).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from functools import partial

from tests.benchmarks import medians

# each path's baseline column (delta: plain delta-spark) and target ratio
BASELINES = {"native": ("delta", 1.05), "embedded": ("parquet", 1.1)}
READS = 3  # per round
ROUNDS = 4  # the first warms up


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    from pyspark.sql import functions as F

    from framework.config import Settings, SparkSettings
    from framework.delta import delta_engine, native_available
    from framework.spark.session import spark_session

    rows = int(os.environ.get("DELTAMARK_BENCH_ROWS", 10_000_000))
    spark = spark_session(Settings(spark=SparkSettings(master="local[*]")))
    paths = ["native", "embedded"]
    if not native_available(spark):
        if os.environ.get("CI") == "true":
            raise SystemExit("bench_delta_io: Delta's jars are not on the session (CI=true)")
        paths.remove("native")
    engines = {name: delta_engine(spark, mode=name) for name in paths}

    def data(n: int):
        return spark.range(n).select(
            F.col("id"),
            (F.col("id") % 1000).cast("int").alias("customer"),
            (F.col("id") * 0.37).alias("amount"),
            F.concat(F.lit("sku-"), (F.col("id") % 5000).cast("string")).alias("sku"),
            F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id")).alias("ts"),
        )

    scratch = tempfile.mkdtemp(prefix="deltamark-bench-")

    def write(column: str, path: str, n: int) -> None:
        if column in engines:
            engines[column].write(data(n), path)
        else:
            data(n).write.format(column).save(path)

    def read(column: str, path: str) -> None:  # every row, every column, nothing kept
        df = engines[column].read(path) if column in engines else (
            spark.read.format(column).load(path))
        df.write.format("noop").mode("overwrite").save()

    plain = ["parquet", "delta"] if "native" in paths else ["parquet"]
    columns = [*plain, *paths]
    times: dict[tuple[str, str], list[float]] = {
        (step, c): [] for step in ("write", "read") for c in columns}
    try:
        for rep in range(ROUNDS):  # the first round warms up the JVM and is discarded
            where = {c: f"{scratch}/{c}{rep}" for c in columns}
            n = rows if rep else rows // 10
            sample = {("write", c): [_timed(partial(write, c, where[c], n))] for c in columns}
            for _ in range(READS):  # reads are short: alternate several to even out noise
                for c in columns:
                    sample.setdefault(("read", c), []).append(_timed(partial(read, c, where[c])))
            if rep:
                for key, values in sample.items():
                    times[key] += values
        for name, engine in engines.items():
            assert engine.read(f"{scratch}/{name}1").count() == rows
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    median = medians("bench_delta_io", times)
    measured = ROUNDS - 1
    print(f"\nbench_delta_io: {rows:,} rows, 5 columns, {os.cpu_count()} cores, median of "
          f"{measured} writes and {measured * READS} reads (alternating) after a warm-up round")
    print("(native against plain delta-spark: what deltamark adds; against Spark's Parquet: "
          "for reference)")
    print(f"{'step':<8}{'spark parquet':>15}{'delta-spark':>13}" + "".join(
        f"{name + ' delta':>16}{'ratio':>7}{'':<15}" for name in paths))
    for step in ("write", "read"):
        line = f"{step:<8}{median[step, 'parquet']:>14.2f}s"
        line += f"{median[step, 'delta']:>12.2f}s" if "delta" in columns else f"{'-':>13}"
        for name in paths:
            base, target = BASELINES[name]
            ratio = median[step, name] / median[step, base]
            verdict = "ok" if ratio <= target else "MISSED"
            line += (f"{median[step, name]:>15.2f}s{ratio:>7.2f}  <= {target} {verdict:<6}")
            if name == "native":
                line += f" ({median[step, name] / median[step, 'parquet']:.2f}x parquet)"
        print(line.rstrip())


if __name__ == "__main__":
    main()
