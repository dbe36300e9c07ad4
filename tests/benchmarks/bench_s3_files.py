"""bench_incremental_files with the landing directory, state and targets on S3 (moto's
server on 127.0.0.1, started here): deltamark's incremental run over N processed objects
and 100 new ones against Structured Streaming's file source (Trigger.AvailableNow)
listing the same prefix through S3A, in the same warm session. Target: ratio <= 0.5.

DELTAMARK_BENCH_S3_FILES sets the sizes (default "1000"; the issue's 10,000 and 50,000 on
demand: objects land at ~250 a second, and each side's first run checks every one).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tests.benchmarks.bench_incremental_files import order, report, scenario


def land_objects(landing: str, start: int, count: int, *, age_s: float, empty: bool) -> None:
    """Objects cannot be back-dated: ``age_s`` is ignored (they are older by landing first)."""
    import asyncio

    import obstore

    from framework import storage

    store = storage.object_store(landing)

    async def put_all() -> None:
        for first in range(start, start + count, 64):  # 64 requests in flight
            await asyncio.gather(*(
                obstore.put_async(store, f"orders-{i:07}.json",
                                  b"" if empty else order(i).encode())
                for i in range(first, min(first + 64, start + count))))

    asyncio.run(put_all())


def main() -> None:
    from tests.s3 import S3Server

    sizes = [int(n) for n in os.environ.get("DELTAMARK_BENCH_S3_FILES", "1000").split(",")]
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
