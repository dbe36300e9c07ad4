"""An incremental run over a directory that holds many processed files and 100 new ones:
deltamark's example job (jobs/orders_ingest.py) against Spark Structured Streaming's file
source with Trigger.AvailableNow writing the same rows through foreachBatch, on the same
directory, in the same warm Spark session (JVM start excluded for both).

Each side first processes the existing files, which are empty: both list them and Spark
skips reading them, so that untimed first run costs seconds, not minutes. Then, three
times, 100 new files land and each side runs once (listing all N + 100 files, reading the
100 new ones): the median is compared. Done at 10,000 and 50,000 processed files (100,000
on demand), to show how each grows. Target: ratio <= 0.5.

A second deltamark side runs the README's job (``CopyOrders`` below: no schema given, so
the context infers its schema on its first read, keeps it, and reads later runs with it,
evolved by what their files bring). Target: ratio <= 0.3.

DELTAMARK_BENCH_FILES sets the sizes (default "10000,50000").
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from framework import IncrementalJob

TARGET = 0.5
#: the side running the README's job, which reads without a schema
README_SIDE, README_TARGET = "README job", 0.3
NEW_FILES = 100
ROUNDS = 3


def order(i: int) -> str:
    return json.dumps({"order_id": f"o{i}", "customer_id": f"c{i % 97}", "country": "PT",
                       "amount": i % 500 / 10, "ordered_at": "2026-11-20T10:00:00"}) + "\n"


def land_local(landing: str, start: int, count: int, *, age_s: float, empty: bool) -> None:
    os.makedirs(landing, exist_ok=True)
    stamp = time.time() - age_s
    for i in range(start, start + count):
        path = f"{landing}/orders-{i:07}.json"
        with open(path, "w") as out:
            out.write("" if empty else order(i))
        os.utime(path, (stamp, stamp))


class CopyOrders(IncrementalJob):
    """The README's job (its jobs/copy_orders.py)."""

    def run(self, ctx):
        df = ctx.read_files(ctx.params["landing"], format="json",
                            transformation_ctx="orders_src")
        ctx.write_delta(df, ctx.params["target"], mode="append", merge_schema=True)


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def scenario(spark, conf: Path, root: str, processed: int,
             land: Callable[..., None] = land_local, *, new_files: int = NEW_FILES,
             listings: Sequence[str] = ("full",), landing: str | None = None
             ) -> dict[str, float]:
    """Both sides over ``landing`` (a local path or URI; ``root/landing`` by default),
    state and targets under ``root``, deltamark's conf in ``conf``; ``land(landing,
    start, count, age_s=..., empty=...)`` writes files ``start`` to ``start + count``.
    deltamark runs a job a listing mode (``listings``): each is a side, named
    "deltamark (<listing>)"; README_SIDE among them runs the README's job instead."""
    from pyspark.sql import functions as F

    from framework import load_settings, run_job
    from framework.delta import AppTransaction, delta_engine, log
    from jobs.orders_ingest import ORDER_SCHEMA

    landing = landing or f"{root}/landing"
    (conf / "jobs").mkdir(parents=True)
    (conf / "deltamark.yaml").write_text(f"state_root: {root}/state\ndelta: embedded\n")
    jobs = {listing: f"ingest_{index}" for index, listing in enumerate(listings)}
    for listing, job in jobs.items():
        params = {"landing": landing, "target": f"{root}/dm_target_{job}"}
        (conf / "jobs" / f"{job}.yaml").write_text(json.dumps(
            {"class": f"{CopyOrders.__module__}:CopyOrders", "params": params}
            if listing == README_SIDE else {"class": "jobs.orders_ingest:OrdersIngest",
                                            "params": params | {"listing": listing}}))
    settings = load_settings(conf_dir=conf)
    ss_target, checkpoint = f"{root}/ss_target", f"{root}/ss_checkpoint"

    def write_batch(df, batch_id: int) -> None:  # where the query runs (on Connect: there)
        delta_engine(df.sparkSession, mode="embedded").write(
            df.withColumn("loaded_by_run", F.lit(batch_id + 1)), ss_target,
            txn=AppTransaction("ss", batch_id + 1))

    def deltamark(listing: str) -> int:
        return run_job(settings, jobs[listing],
                       spark=spark).inputs["orders_src"]["files"]

    def structured_streaming() -> None:
        stream = (spark.readStream.format("json").schema(ORDER_SCHEMA).load(landing)
                  .withColumn("source_file", F.col("_metadata.file_path"))
                  .withColumn("order_date", F.to_date("ordered_at")))
        query = (stream.writeStream.foreachBatch(write_batch)
                 .option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()

    land(landing, 0, processed, age_s=3600, empty=True)
    for listing in listings:
        deltamark(listing)
    structured_streaming()
    samples: dict[str, list[float]] = {"structured streaming": []}
    for round_ in range(ROUNDS):
        land(landing, processed + round_ * new_files, new_files, age_s=0, empty=False)
        for listing in listings:
            found: list[int] = []
            samples.setdefault(f"deltamark ({listing})", []).append(
                _timed(lambda listing=listing, found=found: found.append(deltamark(listing))))
            assert found == [new_files], (listing, found)
        samples["structured streaming"].append(_timed(structured_streaming))
        loaded = log.added(ss_target, log.table_version(ss_target) or 0)
        assert loaded is not None and loaded.rows == new_files, loaded
    return {k: statistics.median(v) for k, v in samples.items()}


def main() -> None:
    from framework.config import Settings, SparkSettings
    from framework.spark.session import spark_session

    sizes = [int(n) for n in os.environ.get("DELTAMARK_BENCH_FILES", "10000,50000").split(",")]
    spark = spark_session(Settings(spark=SparkSettings(master="local[*]")))
    # Fair to Structured Streaming: its batches also read explicit file lists, which Spark
    # checks in a listing job of up to 10,000 tasks unless told otherwise (deltamark's
    # reads give Spark the files' sizes and times, which it then does not check).
    spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
    scratch = Path(tempfile.mkdtemp(prefix="deltamark-bench-files-"))
    try:
        results = {n: scenario(spark, scratch / f"conf{n}", str(scratch / f"n{n}"), n,
                               listings=("full", README_SIDE))
                   for n in sizes}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    report("bench_incremental_files", results,
           targets={"full": TARGET, README_SIDE: README_TARGET})


def report(name: str, results: dict[int, dict[str, float]], *, new_files: int = NEW_FILES,
           targets: Mapping[str, float] | None = None,
           target_from: Mapping[str, int] | None = None) -> None:
    """Print each size's medians, each deltamark side's ratio to Structured Streaming and
    its verdict (``targets``: by listing mode, holding from the N of ``target_from``),
    and how each side grows."""
    targets = targets or {"full": TARGET}
    print(f"\n{name}: {new_files} new JSON files beside N processed ones, "
          f"{os.cpu_count()} cores, median of {ROUNDS} incremental runs, warm JVM")
    print(f"{'processed N':>12}  {'side':<28}{'seconds':>9}{'ratio':>8}  target")
    for n, r in results.items():
        streaming = r["structured streaming"]
        print(f"{n:>12,}  {'structured streaming':<28}{streaming:>8.2f}s")
        for side, seconds in r.items():
            if side.startswith("deltamark"):
                mode = side.removeprefix("deltamark (").rstrip(")")
                target = targets[mode]
                ratio = seconds / streaming
                verdict = "ok" if ratio <= target else "MISSED"
                if n < (least := (target_from or {}).get(mode, 0)):
                    verdict += f" here; the target is for N >= {least:,}"
                print(f"{'':>12}  {side:<28}{seconds:>8.2f}s{ratio:>8.2f}  <= {target} "
                      f"{verdict}")
    if len(results) > 1:
        small, large = min(results), max(results)
        for side in results[large]:
            growth = results[large][side] / results[small][side]
            print(f"  {side}: {growth:.2f}x the time at {large:,} vs {small:,} processed files")


if __name__ == "__main__":
    main()
