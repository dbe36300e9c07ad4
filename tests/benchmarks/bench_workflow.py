"""The example workflow (conf/workflows/orders_pipeline.yaml: ingest -> silver -> gold) over
a small new batch each round: a whole ``deltamark workflow run`` process against the same
three jobs run one after another in one warm Spark session (``run_job`` in this process,
gold given the silver version as the workflow gives it). Each side has its own copy of
the project (conf, landing, lake, state) and gets the same batches; a first round warms
up, then ROUNDS alternate. Target: ratio <= 1.5.

DELTAMARK_BENCH_WORKFLOW_ORDERS sets the orders per batch (default 1,000).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.5
ROUNDS = 3
JOBS = ("orders_ingest", "orders_silver", "orders_gold")
CONF = Path(__file__).resolve().parents[2] / "conf"


def main() -> None:
    from framework import load_settings, run_job
    from framework.spark import spark_session
    from jobs.orders_landing import land

    orders = int(os.environ.get("DELTAMARK_BENCH_WORKFLOW_ORDERS", 1000))
    scratch = Path(tempfile.mkdtemp(prefix="deltamark-bench-workflow-"))
    workflow, warm = scratch / "workflow", scratch / "warm"
    for project in (workflow, warm):
        shutil.copytree(CONF, project / "conf", ignore=shutil.ignore_patterns("local.yaml"))
    command = [sys.executable, "-m", "framework", "--conf-dir", "conf", "workflow", "run",
               "orders_pipeline"]
    here = os.getcwd()
    os.chdir(warm)  # the example's params are paths relative to the project
    try:
        settings = load_settings(conf_dir="conf", state_root="data/state")
        spark = spark_session(settings)

        def one_session() -> None:
            properties: dict[str, str] = {}
            for job in JOBS:
                report = run_job(settings, job, spark=spark, args=properties)
                assert report.status == "succeeded", report
                properties |= report.properties

        def whole_workflow() -> None:
            done = subprocess.run(command, cwd=workflow, capture_output=True, text=True,
                                  env={**os.environ, "DELTAMARK_STATE_ROOT": "data/state"})
            if done.returncode:
                raise SystemExit(f"bench_workflow: the workflow failed:\n{done.stdout}"
                                 f"{done.stderr[-2000:]}")

        samples: dict[str, list[float]] = {"workflow": [], "one session": []}
        for round_ in range(ROUNDS + 1):  # the first round warms up
            for project in (workflow, warm):
                land(project / "data/landing/orders", batches=1, orders=orders)
            for side, action in (("workflow", whole_workflow), ("one session", one_session)):
                started = time.perf_counter()
                action()
                if round_:
                    samples[side].append(time.perf_counter() - started)
    finally:
        os.chdir(here)
        shutil.rmtree(scratch, ignore_errors=True)

    median = {side: statistics.median(values) for side, values in samples.items()}
    ratio = median["workflow"] / median["one session"]
    print(f"\nbench_workflow: ingest -> silver -> gold over {orders:,} new orders a round, "
          f"{os.cpu_count()} cores, median of {ROUNDS} rounds after a warm-up round")
    print(f"{'one warm session':>17}{'deltamark workflow run':>24}{'ratio':>8}  target")
    print(f"{median['one session']:>16.2f}s{median['workflow']:>23.2f}s{ratio:>8.2f}  "
          f"<= {TARGET} {'ok' if ratio <= TARGET else 'MISSED'}")


if __name__ == "__main__":
    main()
