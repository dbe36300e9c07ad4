"""The state root after 10,000 runs of one job, each committing its state as a real run
does (a start row; the plan, its processed file and a running row; the final row: five
commits), beside the same root after 100 runs.

The store's retention is 0 hours here (conf takes 1 at least; 0 is safe with one writing
process): it stands for a history whose runs are older than the retention, which a
benchmark cannot wait for. Within the retention, files stay, as the reads and commits of
concurrent runs need them.

Targets: after 10,000 runs, fewer than 1,000 files and under 30 MB; a run's state read and
commit no slower than after 100 runs (ratio of medians <= 1.2), each sample read as a new
process reads (no cached table handles or files), the runs on the two roots alternating (a
copy of the root at 100 runs is kept); and every run still reachable by a rewind.

DELTAMARK_BENCH_STATE_RUNS sets the runs (default 10,000: ~10 minutes on 2 cores, 58 ms a
run; .ci/run takes 1,000, the same targets on a tenth of the history).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shutil
import statistics
import tempfile
import time

from framework import storage
from framework.delta import log
from framework.state.table_io import open_store
from state_tables.model import Bookmark, ProcessedFile, Run
from state_tables.store import StateStore

RUNS = int(os.environ.get("DELTAMARK_BENCH_STATE_RUNS", 10_000))
EARLY = 100
SAMPLES = 30
JOB, CONTEXT = "orders", "landing"
MAX_FILES, MAX_MB, MAX_RATIO = 1_000, 30.0, 1.2
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _read(store: StateStore, seq: int) -> None:
    """What run ``seq`` reads of the state before it plans."""
    last = store.last_run(JOB)
    store.written_targets(JOB, since_seq=max(0, seq - 100))
    current = store.histories(JOB, context=CONTEXT).get(CONTEXT)
    assert (last.run_seq if last else 0) == seq - 1
    assert current is None or current.current.run_seq == seq - 1
    store.tracked_files(JOB, CONTEXT, current.valid_runs if current else set())


def _commit(store: StateStore, seq: int) -> None:
    """Run ``seq``'s five state commits."""
    run = Run(job=JOB, run_id=f"r{seq}", run_seq=seq, status="running", mode="enable",
              started_at=T0, arguments={"landing": "s3://landing/orders"})
    store.record_run(run)
    store.record_plan(run, bookmarks=[Bookmark(job=JOB, context=CONTEXT, run_id=run.run_id,
                                     run_seq=seq, source_kind="files",
                                     state={"settled_ms": seq, "files_total": seq})],
                      files=[ProcessedFile(job=JOB, context=CONTEXT, run_id=run.run_id,
                                     run_seq=seq, path=f"s3://landing/orders/f{seq}.json",
                                     size=1_000, modified_ms=seq)])
    outputs = {"s3://lake/orders": {"written": True, "version": seq, "rows": 1_000}}
    store.record_run(dataclasses.replace(run, outputs=outputs))
    store.record_run(dataclasses.replace(run, status="succeeded", ended_at=T0,
                                         outputs=outputs))


def _timed_run(store: StateStore, seq: int) -> float:
    """Run ``seq``'s state read and commit in ms, read as a new process reads."""
    log.forget_open_tables()
    started = time.perf_counter()
    _read(store, seq)
    _commit(store, seq)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    root = tempfile.mkdtemp(prefix="deltamark-state-size-")
    early_root = f"{root}-early"
    try:
        store = open_store(root, retention_hours=0)
        started = time.perf_counter()
        for seq in range(1, EARLY + 1):
            _commit(store, seq)
        shutil.copytree(root, early_root)
        early_files, early_bytes = storage.footprint(root)
        for seq in range(EARLY + 1, RUNS + 1):
            _commit(store, seq)
        seconds = time.perf_counter() - started
        files, size = storage.footprint(root)
        # the two roots' runs alternate, so that both see the machine as it is then
        beside = open_store(early_root, retention_hours=0)
        early, late = [], []
        for i in range(1, SAMPLES + 1):
            early.append(_timed_run(beside, EARLY + i))
            late.append(_timed_run(store, RUNS + i))
        first = store.histories(JOB, context=CONTEXT, up_to_seq=1)[CONTEXT].current
        assert first.run_id == "r1" and first.state["settled_ms"] == 1
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(early_root, ignore_errors=True)

    ratio = statistics.median(late) / statistics.median(early)
    mb = size / 1e6
    print(f"\nbench_state_size: one job's state root, {RUNS:,} runs of 5 state commits each "
          f"({seconds / RUNS * 1000:.0f} ms a run), retention passed")
    print(f"{'after':<14}{'files':>8}{'MB':>9}{'read + commit, median':>24}")
    print(f"{f'{EARLY:,} runs':<14}{early_files:>8}{early_bytes / 1e6:>9.2f}"
          f"{statistics.median(early):>22.1f}ms  (baseline)")
    print(f"{f'{RUNS:,} runs':<14}{files:>8}{mb:>9.2f}{statistics.median(late):>22.1f}ms")
    print(f"files {files} < {MAX_FILES:,} {'ok' if files < MAX_FILES else 'MISSED'}; "
          f"{mb:.2f} MB < {MAX_MB:.0f} {'ok' if mb < MAX_MB else 'MISSED'}; "
          f"ratio {ratio:.2f} <= {MAX_RATIO} {'ok' if ratio <= MAX_RATIO else 'MISSED'}; "
          "run 1 still reachable by a rewind: yes")


if __name__ == "__main__":
    main()
