"""Read a job's current bookmarks and commit one run's state rows, with 10,000 earlier runs
of that job in the state tables, beside the same pair on empty tables; then the same with
the state root on S3 (moto's server on 127.0.0.1, started here).
Targets: median <= 50 ms for the pair with history on a local disk, <= 250 ms on S3.
DELTAMARK_BENCH_STATE_SAMPLES sets the pairs timed on each side (default 60).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import statistics
import tempfile
import time

import pyarrow as pa

from framework.delta import log
from framework.state.table_io import open_store
from state_tables.codecs import bookmark_row, run_row
from state_tables.model import Bookmark, Run
from state_tables.schemas import BOOKMARKS, RUNS
from state_tables.store import StateStore

HISTORY = 10_000
SAMPLES = int(os.environ.get("DELTAMARK_BENCH_STATE_SAMPLES", 60))
CONTEXTS = ("orders_src", "customers_src")
TARGET_MS = 50.0
TARGET_S3_MS = 250.0
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _run(seq: int) -> Run:
    return Run(job="orders", run_id=f"r{seq}", run_seq=seq, status="succeeded", mode="enable",
               started_at=T0, ended_at=T0, arguments={"landing": "s3://landing/orders"})


def _marks(seq: int) -> list[Bookmark]:
    return [Bookmark(job="orders", context=c, run_id=f"r{seq}", run_seq=seq,
                     source_kind="files", state={"high_water": seq, "files": [f"f{seq}.json"]},
                     committed_at=T0)
            for c in CONTEXTS]


def _seed(store: StateStore) -> None:
    """10,000 runs in 100 commits of 100 runs, with the store's own maintenance."""
    for start in range(1, HISTORY + 1, 100):
        seqs = range(start, start + 100)
        log.append_rows(store.path(RUNS), pa.Table.from_pylist(
            [run_row(_run(s)) for s in seqs], schema=RUNS.schema),
            upkeep=store.io.upkeep)
        log.append_rows(store.path(BOOKMARKS), pa.Table.from_pylist(
            [bookmark_row(b) for s in seqs for b in _marks(s)], schema=BOOKMARKS.schema),
            upkeep=store.io.upkeep)


def _measure(store: StateStore, first_seq: int) -> list[float]:
    took = []
    for seq in range(first_seq, first_seq + SAMPLES):
        started = time.perf_counter()
        current = store.bookmarks("orders")
        store.record_run(_run(seq), bookmarks=_marks(seq))
        took.append((time.perf_counter() - started) * 1000)
        assert len(current) == len(CONTEXTS)
    return took


def _pair(root: str) -> tuple[list[float], list[float]]:
    """The pair's times on empty tables and with the history, under ``root``."""
    empty = open_store(f"{root}/empty")
    empty.record_run(_run(0), bookmarks=_marks(0))
    baseline = _measure(empty, 1)
    loaded = open_store(f"{root}/loaded")
    _seed(loaded)
    with_history = _measure(loaded, HISTORY + 1)
    assert loaded.bookmarks("orders")[0].run_seq == HISTORY + SAMPLES
    return baseline, with_history


def main() -> None:
    from tests.s3 import S3Server

    root = tempfile.mkdtemp(prefix="deltamark-state-bench-")
    try:
        local = _pair(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    server = S3Server()
    os.environ.update(server.environment)
    try:
        on_s3 = _pair(f"{server.bucket()}/state")
    finally:
        server.stop()

    def p95(values: list[float]) -> float:
        return statistics.quantiles(values, n=20)[-1]

    print(f"\nbench_state_store: read current bookmarks + commit one run ({len(CONTEXTS)} "
          f"contexts), {SAMPLES} samples")
    print(f"{'state root':<12}{'tables':<22}{'median':>10}{'p95':>10}  target")
    for where, (baseline, with_history), target in (("local disk", local, TARGET_MS),
                                                     ("s3 (moto)", on_s3, TARGET_S3_MS)):
        med_base, med_hist = statistics.median(baseline), statistics.median(with_history)
        verdict = "ok" if med_hist <= target else "MISSED"
        print(f"{where:<12}{'empty (baseline)':<22}{med_base:>8.1f}ms{p95(baseline):>8.1f}ms")
        print(f"{where:<12}{f'{HISTORY:,} earlier runs':<22}{med_hist:>8.1f}ms"
              f"{p95(with_history):>8.1f}ms  ratio {med_hist / med_base:.2f}; median <= "
              f"{target:.0f} ms {verdict}")


if __name__ == "__main__":
    main()
