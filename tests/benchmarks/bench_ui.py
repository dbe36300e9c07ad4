"""The operations page (``deltamark ui``) with 10,000 runs of history: each page (and
``/metrics``) served (Flask's test client: the server's whole work, state reads and
templates) on the demo's jobs grown to 10,000 runs, beside the same pages on a state of 10
runs.
Target: every page's median <= 300 ms with the history.

The history: the demo's five jobs with 2,000 runs each, scheduled as hourly jobs are: three
runs in four find nothing new (one ``skipped`` row, no bookmark), the others read and
write (a running and a final row, their bookmarks; six data-quality rules a run for the
two gated jobs); and 2,000 runs of the orders pipeline workflow whose jobs are those runs,
written in commits of 100 runs with the store's own maintenance, as bench_state_store
does.
"""

from __future__ import annotations

import datetime as dt
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from framework.config import load_settings
from framework.delta import log
from framework.state.table_io import open_store
from framework.ui.app import create_app
from state_tables.codecs import bookmark_row, dq_row, node_row, run_row
from state_tables.model import Bookmark, DqResult, Run, WorkflowNode
from state_tables.schemas import BOOKMARKS, DQ_RESULTS, RUNS, WORKFLOW_RUNS

ROOT = Path(__file__).resolve().parents[2]
JOBS = ("orders_ingest", "orders_silver", "orders_gold", "customers_sync", "order_documents")
PIPELINE = ("orders_ingest", "orders_silver", "orders_gold")
GATED = ("orders_ingest", "orders_silver")
PAGES = ("/", "/jobs/orders_ingest", "/jobs/orders_silver", "/workflows/orders_pipeline",
         "/api/jobs/orders_ingest", "/metrics")
SAMPLES = 15
TARGET_MS = 300.0
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _rows(job: str, seq: int) -> tuple[list[dict], list[dict], list[dict]]:
    started = T0 + dt.timedelta(minutes=15 * seq)
    run = Run(job=job, run_id=f"{job}-{seq}", run_seq=seq, status="running", mode="enable",
              started_at=started, arguments={"landing": "data/landing/orders"})
    if seq % 4:
        return [run_row(Run(**{**run.__dict__, "status": "skipped",
                                "ended_at": started}))], [], []
    done = Run(**{**run.__dict__, "status": "failed" if seq % 50 == 0 else "succeeded",
                  "ended_at": started + dt.timedelta(seconds=8 + seq % 7),
                  "inputs": {"src": {"files": 1 + seq % 3, "listed": seq, "bytes": 5000,
                                     "backlog": 0, "rewritten_skipped": 0}},
                  "outputs": {f"data/lake/{job}": {"written": True, "version": seq}},
                  "properties": {"silver_version": str(seq)}})
    runs = [run_row(run), run_row(done)]
    marks = [bookmark_row(Bookmark(job=job, context="src", run_id=run.run_id, run_seq=seq,
                                    source_kind="files", committed_at=started,
                                    state={"settled_ms": seq, "files_total": seq}))]
    dq = [dq_row(DqResult(job=job, run_id=run.run_id, run_seq=seq, attempt=1, ruleset="r",
                           target=f"data/lake/{job}", policy="fail", rule=f"rule {i}",
                           kind="row", outcome="passed", action="written", rows=1000,
                           unexpected_count=0, evaluated_at=started))
          for i in range(6)] if job in GATED else []
    return runs, marks, dq


def _seed(root: str, runs_per_job: int) -> None:
    store = open_store(root)
    for start in range(1, runs_per_job + 1, 100):
        seqs = range(start, min(start + 100, runs_per_job + 1))
        for job in JOBS:
            runs, marks, dq = zip(*(_rows(job, s) for s in seqs), strict=True)
            for table, rows in ((RUNS, runs), (BOOKMARKS, marks), (DQ_RESULTS, dq)):
                flat = [row for part in rows for row in part]
                if flat:
                    log.append_rows(store.path(table), pa.Table.from_pylist(
                        flat, schema=table.schema), upkeep=store.io.upkeep)
        nodes = [node_row(WorkflowNode(
            "orders_pipeline", f"w{s}", job, "t", state, run_id=f"{job}-{s}",
            started_at=T0 + dt.timedelta(minutes=15 * s),
            ended_at=T0 + dt.timedelta(minutes=15 * s, seconds=30),
            updated_at=T0 + dt.timedelta(minutes=15 * s, seconds=i)))
            for s in seqs for i, job in enumerate(PIPELINE)
            for state in ("RUNNING", "SUCCEEDED")]
        log.append_rows(store.path(WORKFLOW_RUNS), pa.Table.from_pylist(
            nodes, schema=WORKFLOW_RUNS.schema), upkeep=store.io.upkeep)


def _times(root: str) -> dict[str, float]:
    """Each page's median time (ms) over SAMPLES requests."""
    client = create_app(load_settings(conf_dir=ROOT / "conf", state_root=root)).test_client()
    medians = {}
    for page in PAGES:
        took = []
        for _ in range(SAMPLES):
            started = time.perf_counter()
            response = client.get(page)
            took.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, (page, response.status_code)
        medians[page] = statistics.median(took)
    return medians


def main() -> None:
    work = tempfile.mkdtemp(prefix="bench-ui-")
    try:
        _seed(f"{work}/small", 2)
        _seed(f"{work}/large", 2_000)
        small, large = _times(f"{work}/small"), _times(f"{work}/large")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"bench_ui: page medians, 10 runs -> 10,000 runs (target <= {TARGET_MS:.0f} ms "
          "with the history)")
    for page in PAGES:
        print(f"  {page:<28} {small[page]:7.1f} ms -> {large[page]:7.1f} ms  "
              f"(x{large[page] / small[page]:.1f})")
    worst = max(large.values())
    verdict = "met" if worst <= TARGET_MS else "MISSED"
    print(f"bench_ui: slowest page {worst:.0f} ms: target {verdict}")


if __name__ == "__main__":
    main()
