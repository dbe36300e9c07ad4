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

What a no-op costs the machine, beside its floor: the CPU time (user + system) of the
deltamark process and of the read-only commands against that of a process that only
imports what any of them must (deltalake, pyarrow's Parquet and compute), measured in the
same rounds. Targets: a no-op run <= 1.6x the floor, a read-only command <= 2x; a no-op
run's peak memory <= 150 MB.

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
CPU_TARGETS = {"no-op run": 1.6, "read-only": 2.0}
MEMORY_TARGET_MB = 150
#: what any deltamark command imports: the floor of a process's CPU time
FLOOR = "import deltalake, pyarrow.parquet, pyarrow.compute"
ROUNDS = int(os.environ.get("DELTAMARK_BENCH_NOOP_ROUNDS", 3))


def stream(landing: str, checkpoint: str, target: str) -> None:
    """One AvailableNow run of Structured Streaming's file source (its own process)."""
    from pyspark.sql import functions as F

    from framework.config import Settings, SparkSettings
    from framework.delta import AppTransaction, delta_engine
    from framework.spark.session import spark_session
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


def _process(command: list[str], env: dict[str, str] | None = None
             ) -> tuple[float, int, float]:
    """Run ``command`` to the end: its wall time (s), peak memory (KB) and CPU time (user
    and system, s), of that process alone."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env={**os.environ, **(env or {})})
    # the pipes are read once it ends: what these commands print fits in a pipe's buffer
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    _out, err = child.communicate()
    if status != 0:
        raise SystemExit(f"bench_noop: {' '.join(command[2:])} failed:\n{err.decode()[-2000:]}")
    return seconds, usage.ru_maxrss, usage.ru_utime + usage.ru_stime


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
        cpu: dict[str, list[float]] = {"floor": [], "no-op run": [], "read-only": []}
        nowhere = {"SPARK_REMOTE": f"sc://127.0.0.1:{free_port()}"}
        for _ in range(ROUNDS):
            seconds, peak, used = _process(deltamark)
            samples["deltamark"].append(seconds)
            memory.append(peak)
            cpu["no-op run"].append(used)
            cpu["floor"].append(_process([python, "-c", FLOOR])[2])
            samples["structured streaming"].append(_process(structured_streaming)[0])
            samples["on Spark Connect"].append(_process(deltamark, nowhere)[0])
            for command in read_only:
                seconds, _, used = _process(command)
                samples["read-only"].append(seconds)
                cpu["read-only"].append(used)
        from framework.state.table_io import open_store

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
    peak = max(memory) / 1024
    print(f"  deltamark's no-op run: peak memory {peak:.0f} MB (no JVM)  <= "
          f"{MEMORY_TARGET_MB} MB {'ok' if peak <= MEMORY_TARGET_MB else 'MISSED'}")
    floor = statistics.median(cpu["floor"])
    print(f"  CPU time (user + system), median, against a process importing what every "
          f"command must ({floor:.2f} s):")
    for side, target in CPU_TARGETS.items():
        used = statistics.median(cpu[side])
        print(f"{side:>22}{used:>10.2f}s{used / floor:>8.2f}  <= {target} "
              f"{'ok' if used / floor <= target else 'MISSED'}")
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
