"""A scheduled run that finds nothing new, as a scheduler starts it: a whole ``deltamark
run`` process (the example ingest job over N processed files: skipped before Spark starts)
against a whole Structured Streaming process (Trigger.AvailableNow on the same directory,
its checkpoint up to date, writing through foreachBatch). Each side first processes the N
files, then a batch of 100 new ones, untimed and in one process of their own (as on a
schedule: Structured Streaming re-plans its last batch when it starts, and a last batch of
N files would cost it ~20 s);
then each runs ROUNDS times, alternating. Target: ratio <= 0.2. The same no-op run on
Spark Connect (SPARK_REMOTE naming a port where no server listens: a run that sent the
server a request would fail) is timed beside them, and so are read-only commands on the
same state (runs list, bookmarks show, sql); target < 1 s each.

DELTAMARK_BENCH_NOOP_FILES sets N (default 10,000), DELTAMARK_BENCH_NOOP_ROUNDS the rounds
(default 3).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks.bench_incremental_files import land_local
from tests.connect import free_port

TARGET = 0.2
ROUNDS = int(os.environ.get("DELTAMARK_BENCH_NOOP_ROUNDS", 3))


def stream(landing: str, checkpoint: str, target: str) -> None:
    """One AvailableNow run of Structured Streaming's file source (its own process)."""
    from pyspark.sql import functions as F

    from framework.config import Settings, SparkSettings
    from framework.delta import AppTransaction, delta_engine
    from framework.spark import spark_session
    from jobs.orders_ingest import ORDER_SCHEMA

    spark = spark_session(Settings(spark=SparkSettings(master="local[*]")))
    # Fair to Structured Streaming (as in bench_incremental_files): explicit file lists are
    # checked in a listing job of up to 10,000 tasks unless told otherwise.
    spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
    engine = delta_engine(spark, mode="embedded")

    def write_batch(df, batch_id: int) -> None:
        engine.write(df, target, txn=AppTransaction("ss", batch_id + 1))

    query = (spark.readStream.format("json").schema(ORDER_SCHEMA).load(landing)
             .withColumn("source_file", F.col("_metadata.file_path"))
             .writeStream.foreachBatch(write_batch).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()


def prepare(conf_dir: str, landing: str, checkpoint: str, target: str, files: str) -> None:
    """Both sides' history, untimed, in one process (one JVM): each processes the N files,
    then 100 new ones."""
    from framework import load_settings, run_job

    settings = load_settings(conf_dir=conf_dir)
    for start, count, age_s in ((0, int(files), 3600), (int(files), 100, 0)):
        land_local(landing, start, count, age_s=age_s, empty=start == 0)
        report = run_job(settings, "ingest")
        assert report.status == "succeeded", report
        stream(landing, checkpoint, target)


def _process(command: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    """Run ``command`` to the end: its wall time (s) and peak memory (KB, that process)."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env={**os.environ, **(env or {})})
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    _out, err = child.communicate()
    if status != 0:
        raise SystemExit(f"bench_noop: {' '.join(command[2:])} failed:\n{err.decode()[-2000:]}")
    return seconds, usage.ru_maxrss


def main() -> None:
    files = int(os.environ.get("DELTAMARK_BENCH_NOOP_FILES", 10_000))
    scratch = Path(tempfile.mkdtemp(prefix="deltamark-bench-noop-"))
    landing = str(scratch / "landing")
    (scratch / "conf" / "jobs").mkdir(parents=True)
    (scratch / "conf" / "deltamark.yaml").write_text(f"state_root: {scratch}/state\n")
    (scratch / "conf" / "jobs" / "ingest.yaml").write_text(json.dumps({
        "class": "jobs.orders_ingest:OrdersIngest",
        "params": {"landing": landing, "target": str(scratch / "dm_target")}}))
    python = sys.executable
    deltamark = [python, "-m", "framework", "--conf-dir", str(scratch / "conf"), "run", "ingest"]
    streaming = [landing, str(scratch / "checkpoint"), str(scratch / "ss_target")]
    structured_streaming = [python, "-m", "tests.benchmarks.bench_noop", "stream", *streaming]
    try:
        _process([python, "-m", "tests.benchmarks.bench_noop", "prepare",
                  str(scratch / "conf"), *streaming, str(files)])
        samples: dict[str, list[float]] = {"deltamark": [], "structured streaming": [],
                                           "on Spark Connect": [], "read-only": []}
        conf = ["--conf-dir", str(scratch / "conf")]
        read_only = [[python, "-m", "framework", *conf, *args, "--json"] for args in (
            ["runs", "list"], ["bookmarks", "show", "ingest"],
            ["sql", "select * from current_bookmarks"])]
        memory: list[int] = []
        nowhere = {"SPARK_REMOTE": f"sc://127.0.0.1:{free_port()}"}
        for _ in range(ROUNDS):
            seconds, peak = _process(deltamark)
            samples["deltamark"].append(seconds)
            memory.append(peak)
            samples["structured streaming"].append(_process(structured_streaming)[0])
            samples["on Spark Connect"].append(_process(deltamark, nowhere)[0])
            samples["read-only"] += [_process(command)[0] for command in read_only]
        from framework.state_io import open_store

        runs = open_store(scratch / "state").runs("ingest")
        statuses = [r.status for r in runs]
        assert statuses == ["succeeded"] * 2 + ["skipped"] * 2 * ROUNDS, statuses
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    median = {side: statistics.median(values) for side, values in samples.items()}
    ratio = median["deltamark"] / median["structured streaming"]
    print(f"\nbench_noop: a run with nothing new among {files:,} processed files, whole "
          f"processes, {os.cpu_count()} cores, median of {ROUNDS} (alternating)")
    print(f"{'structured streaming':>22}{'deltamark':>11}{'ratio':>8}  target")
    print(f"{median['structured streaming']:>21.2f}s{median['deltamark']:>10.2f}s"
          f"{ratio:>8.2f}  <= {TARGET} {'ok' if ratio <= TARGET else 'MISSED'}")
    print(f"  deltamark's no-op run: peak memory {max(memory) / 1024:.0f} MB (no JVM)")
    connect = median["on Spark Connect"]
    print(f"  the same on Spark Connect: {connect:.2f}s, no request to the server  "
          f"< 1 s {'ok' if connect < 1 else 'MISSED'}")
    read = median["read-only"]
    print(f"  a read-only command (runs list, bookmarks show, sql): {read:.2f}s  "
          f"< 1 s {'ok' if read < 1 else 'MISSED'}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["stream"]:
        stream(*sys.argv[2:5])
    elif sys.argv[1:2] == ["prepare"]:
        prepare(*sys.argv[2:7])
    else:
        main()
