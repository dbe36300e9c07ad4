"""The example workflow (conf/workflows/orders_pipeline.yaml: ingest -> silver -> gold) over
a small new batch each round: a whole ``deltamark workflow run`` process against the same
three jobs run one after another in one warm Spark session (``run_job`` in this process,
gold given the silver version as the workflow gives it), on a server kept between runs
(``deltamark server start``, as for a frequent schedule). Each side has its own copy of the
project (conf, landing, lake, state) and gets the same batches; a first round warms up,
then ROUNDS alternate. Target: ratio <= 1.5. For reference, the last round also runs the
workflow on a server of its own (its JVM starts with the run, cold each time, so it runs
once: its project's first run, on the last round's batch).

DELTAMARK_BENCH_WORKFLOW_ORDERS sets the orders per batch (default 1,000);
DELTAMARK_BENCH_WORKFLOW_COLD=0 leaves out the cold reference (it has no target);
DELTAMARK_BENCH_WORKFLOW_ROUNDS sets the rounds (default 3).
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
ROUNDS = int(os.environ.get("DELTAMARK_BENCH_WORKFLOW_ROUNDS", 3))
JOBS = ("orders_ingest", "orders_silver", "orders_gold")
CONF = Path(__file__).resolve().parents[2] / "conf"
DELTAMARK = [sys.executable, "-m", "framework", "--conf-dir", "conf"]
ENVIRONMENT = {**os.environ, "DELTAMARK_STATE_ROOT": "data/state"}


def main() -> None:
    from framework import load_settings, run_job
    from framework.spark.session import spark_session
    from jobs.orders_landing import land

    orders = int(os.environ.get("DELTAMARK_BENCH_WORKFLOW_ORDERS", 1000))
    scratch = Path(tempfile.mkdtemp(prefix="deltamark-bench-workflow-"))
    sides = ["one session", "own server", "kept server"]
    if os.environ.get("DELTAMARK_BENCH_WORKFLOW_COLD") == "0":
        sides.remove("own server")
    projects = {side: scratch / side.replace(" ", "-") for side in sides}
    for project in projects.values():
        shutil.copytree(CONF, project / "conf", ignore=shutil.ignore_patterns("local.yaml"))
        shutil.copytree(CONF.parent / "jobs", project / "jobs",  # the code beside its conf
                        ignore=shutil.ignore_patterns("__pycache__"))
    here = os.getcwd()
    os.chdir(projects["one session"])  # the example's params are paths relative to it
    try:
        settings = load_settings(conf_dir="conf", state_root="data/state")
        spark = spark_session(settings)
        _deltamark(projects["kept server"], "server", "start", "--idle-minutes", "30")

        def one_session() -> None:
            properties: dict[str, str] = {}
            for job in JOBS:
                report = run_job(settings, job, spark=spark, args=properties)
                assert report.status == "succeeded", report
                properties |= report.properties

        samples: dict[str, list[float]] = {side: [] for side in projects}
        for round_ in range(ROUNDS + 1):  # the first round warms up
            for side, project in projects.items():
                if side == "own server" and round_ < ROUNDS:
                    continue  # cold each time: one run, on the last round's batch
                land(project / "data/landing/orders", batches=1, orders=orders)
                started = time.perf_counter()
                if side == "one session":
                    one_session()
                else:
                    _deltamark(project, "workflow", "run", "orders_pipeline")
                if round_:
                    samples[side].append(time.perf_counter() - started)
    finally:
        os.chdir(here)
        _deltamark(projects["kept server"], "server", "stop")
        shutil.rmtree(scratch, ignore_errors=True)

    median = {side: statistics.median(values) for side, values in samples.items()}
    baseline = median["one session"]
    print(f"\nbench_workflow: ingest -> silver -> gold over {orders:,} new orders a round, "
          f"{os.cpu_count()} cores, median of {ROUNDS} rounds after a warm-up round")
    print(f"{'deltamark workflow run':>46}{'one warm session':>18}{'ratio':>7}  target")
    for side, label, target in (("kept server", "on a kept server (warm JVM)", TARGET),
                                ("own server", "on a server of its own (cold JVM)", None)):
        if side not in median:
            continue
        ratio = median[side] / baseline
        verdict = (f"<= {target} {'ok' if ratio <= target else 'MISSED'}" if target
                   else "none: a new JVM's first job (one run)")
        print(f"  {label:<34}{median[side]:>8.2f} s{baseline:>16.2f} s{ratio:>7.2f}  {verdict}")


def _deltamark(project: Path, *args: str) -> None:
    done = subprocess.run([*DELTAMARK, *args], cwd=project, capture_output=True, text=True,
                          env=ENVIRONMENT)
    if done.returncode:
        raise SystemExit(f"bench_workflow: deltamark {' '.join(args)} failed:\n{done.stdout}"
                         f"{done.stderr[-2000:]}")


if __name__ == "__main__":
    main()
