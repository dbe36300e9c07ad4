"""bench_incremental_files with the landing directory on S3 (S3Proxy on 127.0.0.1,
started here: it holds 100,000 objects and more, where moto's server slows down; state
and targets stay on local disk): deltamark's incremental run over N processed objects and
1,000 new ones, listing in full and from the last key (``start_after``: ListObjectsV2
StartAfter), against Structured Streaming's file source (Trigger.AvailableNow) listing
the same prefix through S3A, in the same warm session. Targets: ratio <= 0.5 listing in
full, <= 0.1 from the last key at 100,000 objects (its cost is what is new: at 1,000,
reading the new objects is most of either side's time).

DELTAMARK_BENCH_S3_FILES sets the sizes (default "1000"; 100,000 on demand: objects land
at ~1,000 a second, and each side's first run checks every one);
DELTAMARK_BENCH_S3_NEW_OBJECTS the new objects of each run (default 1,000).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tests.benchmarks.bench_incremental_files import order, report, scenario

NEW_OBJECTS = int(os.environ.get("DELTAMARK_BENCH_S3_NEW_OBJECTS", 1000))
TARGETS = {"full": 0.5, "start_after": 0.1}
TARGET_FROM = {"start_after": 100_000}


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
    from tests.s3 import S3ProxyServer

    sizes = [int(n) for n in os.environ.get("DELTAMARK_BENCH_S3_FILES", "1000").split(",")]
    server = S3ProxyServer()  # before the JVM: S3A takes the AWS environment at its start
    os.environ.update(server.environment)
    scratch = Path(tempfile.mkdtemp(prefix="deltamark-bench-s3-"))
    try:
        from framework.config import Settings, SparkSettings
        from framework.spark.session import spark_session

        spark = spark_session(Settings(spark=SparkSettings(master="local[*]")))
        spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
        results = {n: scenario(spark, scratch / f"conf{n}", str(scratch / f"n{n}"), n,
                               land_objects, new_files=NEW_OBJECTS, listings=tuple(TARGETS),
                               landing=f"{server.bucket()}/landing") for n in sizes}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        server.stop()
    report("bench_s3_files (S3Proxy on 127.0.0.1, S3A)", results, new_files=NEW_OBJECTS,
           targets=TARGETS, target_from=TARGET_FROM)


if __name__ == "__main__":
    main()
