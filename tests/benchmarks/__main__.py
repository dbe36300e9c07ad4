"""Run the benchmarks, each in its own process (its own Spark session and JVM):

    python -m tests.benchmarks [--ci] [delta_io] [delta_changes] [state_store] [state_size]
                               [state_load] [incremental_files] [files_scale] [s3_files] [noop]
                               [workflow] [jdbc] [relationalize] [quality] [ui]
                               [iceberg_source] [connect_files] [delta_planning]
                               [apply_changes]

Without ``--ci``, at the sizes docs/benchmarks.md quotes. ``--ci`` (.ci/run) runs those of
CI_BENCHMARKS (unless others are named) with less data and fewer rounds (CI_SIZES: the
same targets, side by side as ever); a ``DELTAMARK_BENCH_*`` variable set in the
environment still wins. Exits 1 if any of them failed to run (a missed target is printed,
not an error).
"""

import os
import subprocess
import sys
import time

BENCHMARKS = ("delta_io", "delta_changes", "state_store", "state_size", "state_load",
              "incremental_files", "files_scale", "s3_files", "noop", "workflow", "jdbc",
              "relationalize", "quality", "ui", "iceberg_source", "connect_files",
              "delta_planning", "apply_changes")

#: what CI runs (about 3 minutes on a slow 2-core machine): deltamark's own cost of a run,
#: which a change anywhere can raise and no test times: the state store's read and commit,
#: a run with nothing new (a whole process), the read-only commands, the operations page,
#: planning a Delta source (a big upstream table against a small one).
#: The others weigh Spark's work against Spark's (the Delta paths, incremental files and
#: S3 against Structured Streaming, JDBC, Relationalize, gates, Connect, workflows,
#: Iceberg) or load the machine (a wave of runs, a million files): at CI's sizes their
#: figures swung with the machine, and they took 18 of a slow CI's 21 benchmark minutes.
#: An issue touching them runs them by hand, at full size (docs/benchmarks.md), or
#: ``--ci NAME`` at CI's.
CI_BENCHMARKS = ("state_store", "noop", "ui", "delta_planning")

#: CI's sizes (in brackets, the full ones; then what a size showed).
#: Kept: bench_jdbc's and bench_iceberg_source's tables (5 and 10 million rows: at 2 and 4
#: million a run's fixed cost missed their 0.1 ratios), bench_files_scale's 200,000 tracked
#: files (at 100,000 its listings' fixed costs show), bench_noop's 10,000.
CI_SIZES = {
    "DELTAMARK_BENCH_ROWS": "1500000",  # bench_delta_io (10 million; its 5% swings at 4 too)
    "DELTAMARK_BENCH_CHANGED_ROWS": "2000000",  # bench_delta_changes (5 million; at 1: 1.2x)
    "DELTAMARK_BENCH_STATE_SAMPLES": "20",  # bench_state_store (60 pairs a side)
    "DELTAMARK_BENCH_STATE_RUNS": "300",  # bench_state_size (10,000 runs)
    # bench_state_load (200 and 6, on local and S3): on S3 a wave of 50 took 62 s of moto on
    # the same 2 cores; tests/test_s3.py commits from 4 processes at once there
    "DELTAMARK_BENCH_LOAD_JOBS": "40", "DELTAMARK_BENCH_LOAD_REAL": "1",
    "DELTAMARK_BENCH_LOAD_ON": "local",
    "DELTAMARK_BENCH_FILES": "10000",  # bench_incremental_files (10,000 and 50,000)
    "DELTAMARK_BENCH_SCALE_FILES": "200000",  # bench_files_scale (a million)
    "DELTAMARK_BENCH_S3_NEW_OBJECTS": "300",  # bench_s3_files (1,000 a run)
    "DELTAMARK_BENCH_WORKFLOW_COLD": "0",  # bench_workflow: no cold reference (no target)
    "DELTAMARK_BENCH_WORKFLOW_ROUNDS": "2",  # (3; ratio 1.14 against 1.5)
    "DELTAMARK_BENCH_NOOP_ROUNDS": "2",  # (3; ratio 0.16 against 0.2, Structured Streaming
                                         # ~13 s of each ~20 s round)
    "DELTAMARK_BENCH_JDBC_WARM_UP": "2", "DELTAMARK_BENCH_JDBC_ROUNDS": "3",  # (4 and 5)
    "DELTAMARK_BENCH_DOCUMENTS": "150000",  # bench_relationalize (a million)
    "DELTAMARK_BENCH_QUALITY_ROWS": "500000",  # bench_quality (5 million)
    "DELTAMARK_BENCH_CONNECT_FILES": "5000",  # bench_connect_files (10,000)
    "DELTAMARK_BENCH_APPLY_ROWS": "1000000",  # bench_apply_changes (10 million)
}


def ran(name: str) -> bool:
    """Whether bench_``name`` ran to the end; prints how long it took."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", f"tests.benchmarks.bench_{name}"])
    print(f"(bench_{name}: {time.monotonic() - started:.0f} s)", flush=True)
    return done.returncode == 0


names = [arg for arg in sys.argv[1:] if arg != "--ci"]
ci = "--ci" in sys.argv[1:]
if ci:
    os.environ.update(CI_SIZES | {k: v for k, v in os.environ.items() if k in CI_SIZES})
started = time.monotonic()
failed = [name for name in names or (CI_BENCHMARKS if ci else BENCHMARKS) if not ran(name)]
print(f"(benchmarks: {time.monotonic() - started:.0f} s)")
if failed:
    sys.exit(f"benchmarks that did not run to the end: {', '.join(failed)}")
