"""bench_incremental_files with the landing directory, state and targets on S3 (moto's
server on 127.0.0.1, started here): deltamark's incremental run over N processed objects
and 100 new ones against Structured Streaming's file source (Trigger.AvailableNow)
listing the same prefix through S3A, in the same warm session. Target: ratio <= 0.5.

DELTAMARK_BENCH_S3_FILES sets the sizes (default "2000"; the issue's 10,000 and 50,000 on
demand: moto stores ~50-150 objects a second here, so seeding 60,000 takes 10-20 min).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.benchmarks.bench_incremental_files import order, report, scenario


def land_objects(landing: str, start: int, count: int, *, age_s: float) -> None:
    """Objects cannot be back-dated: ``age_s`` is ignored (they are older by landing first)."""
    from framework import storage

    fs, base, _ = storage.filesystem(landing)

    def put(i: int) -> None:
        with fs.open_output_stream(f"{base}/orders-{i:07}.json") as out:
            out.write(order(i).encode())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(start, start + count)))


def main() -> None:
    from tests.s3 import S3Server

    sizes = [int(n) for n in os.environ.get("DELTAMARK_BENCH_S3_FILES", "2000").split(",")]
    server = S3Server()  # before the JVM: S3A takes the AWS environment at its start
    os.environ.update(server.environment)
    scratch = Path(tempfile.mkdtemp(prefix="deltamark-bench-s3-"))
    try:
        from framework.config import Settings, SparkSettings
        from framework.spark import spark_session

        spark = spark_session(Settings(spark=SparkSettings(master="local[*]")))
        spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
        results = {n: scenario(spark, scratch / f"conf{n}", f"{server.bucket()}/n{n}", n,
                               land_objects) for n in sizes}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        server.stop()
    report("bench_s3_files (moto S3 on 127.0.0.1, S3A)", results)


if __name__ == "__main__":
    main()
