"""Planning a Delta source does not grow with the upstream table: the same job over an
upstream table of 500 data files and one of 50,000 (checkpointed), each run with nothing
new (a skip, decided before Spark starts) and with one new version (an incremental run,
Spark reading that version's file). Target: 50,000 / 500 <= 1.1 for both.

The large table's files are add actions in its log for files that are not there: planning
and an incremental read touch the log and the new version's files only (a whole-table read
would fail). Seven rounds, alternating between the tables, the first a warm-up; medians.

DELTAMARK_BENCH_PLANNING_FILES sets the two sizes (default ``500,50000``; a million by hand).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from framework import IncrementalJob

TARGET = 1.1
ROUNDS = 7  # the first warms up


class CopyNewVersions(IncrementalJob):
    """The versions the upstream table gained, appended to the job's target."""

    def run(self, ctx):
        df = ctx.read_delta(ctx.params["source"], transformation_ctx="upstream",
                            starting_version="latest")
        ctx.write_delta(df, ctx.params["target"])


def make_upstream(path: str, files: int) -> None:
    """A table of ``files`` data files (absent), checkpointed, then one real version."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(path, pa.table({"id": pa.array([0], pa.int64())}))
    now = int(time.time() * 1000)
    lines = [json.dumps({"commitInfo": {"timestamp": now, "operation": "WRITE"}})]
    lines += [json.dumps({"add": {
        "path": f"absent-{i:07d}.parquet", "partitionValues": {}, "size": 500,
        "modificationTime": now, "dataChange": True,
        "stats": json.dumps({"numRecords": 1})}}) for i in range(files)]
    Path(path, "_delta_log", f"{1:020d}.json").write_text("\n".join(lines) + "\n")
    DeltaTable(path).create_checkpoint()
    append(path, 1)


def append(path: str, value: int) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(path, pa.table({"id": pa.array([value], pa.int64())}), mode="append")


def main() -> None:
    from framework import load_settings, run_job
    from framework.spark.session import spark_session

    sizes = [int(n) for n in os.environ.get("DELTAMARK_BENCH_PLANNING_FILES",
                                            "500,50000").split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="deltamark-bench-"))
    try:
        (scratch / "conf" / "jobs").mkdir(parents=True)
        (scratch / "conf" / "deltamark.yaml").write_text(json.dumps(
            {"state_root": str(scratch / "state"), "delta": "embedded",
             "spark": {"master": "local[2]"}}))
        for n in sizes:
            make_upstream(str(scratch / f"upstream-{n}"), n)
            (scratch / "conf" / "jobs" / f"copy_{n}.yaml").write_text(json.dumps({
                "class": f"{__name__}:CopyNewVersions",
                "params": {"source": str(scratch / f"upstream-{n}"),
                           "target": str(scratch / f"target-{n}")}}))
        settings = load_settings(conf_dir=scratch / "conf")
        spark = spark_session(settings)
        for n in sizes:  # the first run records where the job starts: the latest version
            assert run_job(settings, f"copy_{n}", spark=spark).status == "succeeded"
        timed: dict[tuple[int, str], list[float]] = {}
        for round_ in range(ROUNDS):
            for n in sizes:
                for kind in ("skip", "incremental"):
                    if kind == "incremental":
                        append(str(scratch / f"upstream-{n}"), 100 + round_)
                    started = time.perf_counter()
                    report = run_job(settings, f"copy_{n}", spark=spark)
                    took = time.perf_counter() - started
                    expected = "skipped" if kind == "skip" else "succeeded"
                    assert report.status == expected, (kind, report)
                    if round_:
                        timed.setdefault((n, kind), []).append(took)
        small, large = sizes[0], sizes[-1]
        print(f"bench_delta_planning: the same job over upstream tables of {small:,} and "
              f"{large:,} files (medians of {ROUNDS - 1} rounds)")
        for kind in ("skip", "incremental"):
            a, b = (statistics.median(timed[(n, kind)]) for n in (small, large))
            ratio = b / a
            verdict = "ok" if ratio <= TARGET else f"MISSED (target <= {TARGET})"
            print(f"  {kind:<12} {a * 1000:8.1f} ms at {small:,} files, {b * 1000:8.1f} ms at "
                  f"{large:,}: ratio {ratio:.2f} {verdict}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
