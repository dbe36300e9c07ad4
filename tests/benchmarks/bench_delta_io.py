"""Write then fully read N rows through the embedded Delta path and through Spark's own
Parquet writer/reader: same data, same session, same run. Target: each ratio <= 1.25.

Three rounds, the first a warm-up; each writes both tables once, then reads both three
times, alternating.

DELTAMARK_BENCH_ROWS sets N (default 10 million).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time

TARGET = 1.25
READS = 3  # per round


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    from pyspark.sql import functions as F

    from framework.config import Settings, SparkSettings
    from framework.delta import delta_engine
    from framework.spark import spark_session

    rows = int(os.environ.get("DELTAMARK_BENCH_ROWS", 10_000_000))
    spark = spark_session(Settings(spark=SparkSettings(master="local[*]")))
    engine = delta_engine(spark, "embedded")
    data = spark.range(rows).select(
        F.col("id"),
        (F.col("id") % 1000).cast("int").alias("customer"),
        (F.col("id") * 0.37).alias("amount"),
        F.concat(F.lit("sku-"), (F.col("id") % 5000).cast("string")).alias("sku"),
        F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id")).alias("ts"),
    )
    scratch = tempfile.mkdtemp(prefix="deltamark-bench-")

    def full_read(df) -> None:
        df.write.format("noop").mode("overwrite").save()

    times: dict[str, list[float]] = {k: [] for k in ("pw", "dw", "pr", "dr")}
    try:
        for rep in range(3):  # the first round warms up the JVM and is discarded
            parquet, delta = f"{scratch}/parquet{rep}", f"{scratch}/delta{rep}"
            sample = {
                "pw": [_timed(lambda p=parquet: data.write.parquet(p))],
                "dw": [_timed(lambda d=delta: engine.write(data, d))],
                "pr": [], "dr": [],
            }
            for _ in range(READS):  # reads are short: alternate several to even out noise
                sample["pr"].append(_timed(lambda p=parquet: full_read(spark.read.parquet(p))))
                sample["dr"].append(_timed(lambda d=delta: full_read(engine.read(d))))
            if rep:
                for key, values in sample.items():
                    times[key] += values
        assert engine.read(f"{scratch}/delta1").count() == rows
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    median = {k: statistics.median(v) for k, v in times.items()}
    print("bench_delta_io samples: " + "; ".join(
        f"{k} {', '.join(f'{t:.2f}' for t in v)}" for k, v in times.items()))
    print(f"\nbench_delta_io: {rows:,} rows, 5 columns, {os.cpu_count()} cores, median of "
          f"2 writes and {2 * READS} reads (alternating) after a warm-up round")
    print(f"{'step':<8}{'spark parquet':>15}{'embedded delta':>16}{'ratio':>8}  target")
    for step, base, ours in (("write", "pw", "dw"), ("read", "pr", "dr")):
        ratio = median[ours] / median[base]
        verdict = "ok" if ratio <= TARGET else "MISSED"
        print(f"{step:<8}{median[base]:>14.2f}s{median[ours]:>15.2f}s{ratio:>8.2f}  "
              f"<= {TARGET} {verdict}")


if __name__ == "__main__":
    main()
