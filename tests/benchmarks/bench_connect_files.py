"""bench_incremental_files over Spark Connect: deltamark's example job run by a Connect
client (this process, no JVM of its own) against Structured Streaming's file source with
Trigger.AvailableNow started through the same client, both executed by one Connect
server on this machine (started here, warm for both sides; its start is not timed).
Same directory, files and rounds as bench_incremental_files. Target: ratio <= 0.5.

DELTAMARK_BENCH_CONNECT_FILES sets the sizes (default "10000").
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tests.benchmarks.bench_incremental_files import report, scenario


def main() -> None:
    from framework.config import Settings, SparkSettings
    from framework.spark.session import spark_session
    from tests.connect import ConnectServer

    sizes = [int(n) for n in os.environ.get("DELTAMARK_BENCH_CONNECT_FILES", "10000").split(",")]
    server = ConnectServer({}, deltamark_on_workers=True)  # Structured Streaming's
    # foreachBatch writes each batch through deltamark's engine, in the server's workers
    scratch = Path(tempfile.mkdtemp(prefix="deltamark-bench-connect-"))
    try:
        spark = spark_session(Settings(spark=SparkSettings(remote=server.url)))
        try:
            # as bench_incremental_files sets it, for Structured Streaming's batches
            spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
            results = {n: scenario(spark, scratch / f"conf{n}", str(scratch / f"n{n}"), n)
                       for n in sizes}
        finally:
            spark.stop()  # before the server: an open session retries it for minutes at exit
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    report("bench_connect_files (Spark Connect)", results)


if __name__ == "__main__":
    main()
