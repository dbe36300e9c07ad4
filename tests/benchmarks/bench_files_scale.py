"""A file context that has read a million small files, in a date layout on local disk
(``YYYY/MM/DD/HH/part-N.json``), finds the 1,000 that land next: discovery and planning
(the bookmark's state read, the listing, the plan) in each listing mode, and the no-op
check once they are read, side by side with a bare recursive listing of the same tree
(pyarrow's, the floor of any full listing). No Spark: this is what runs before it.

Also a first run's schema over the whole backlog (``framework.sources.files.json_schema``: the
driver infers it from a sample of the files, not from all of them). Targets: that <= 1x
the bare listing; a full listing's plan and the no-op check <= 1.5x the bare listing; with
``start_after`` or ``partitions`` <= 0.1x at a million files (their cost is what is new,
so their ratio shrinks as the history grows); the state <= 100 bytes a tracked file on
disk, its read and a run's commit <= 1 s each, the planning process under 1 GB resident.

DELTAMARK_BENCH_SCALE_FILES sets the number of files already read (default 1,000,000).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta

import pyarrow.fs as pafs

JOB, CONTEXT = "landing_scale", "landing"
NEW_FILES = 1000
RUNS = 100  # the history's runs, each reading an equal share
ROUNDS = 3
TARGETS = {"full": 1.5, "noop": 1.5, "start_after": 0.1, "partitions": 0.1, "schema": 1}
FULL_SIZE = 1_000_000  # the partial listings' targets hold from this many files
FIRST_HOUR = datetime(2026, 10, 1, tzinfo=UTC)


def land(root: str, start: int, count: int, per_hour: int) -> list[tuple[str, int, int]]:
    """Files ``start`` to ``start + count``, ``per_hour`` to an hour directory: (path,
    size, modified_ms) each."""
    made = []
    for i in range(start, start + count):
        hour = FIRST_HOUR + timedelta(hours=i // per_hour)
        directory = f"{root}/{hour:%Y/%m/%d/%H}"
        if i % per_hour == 0 or i == start:
            os.makedirs(directory, exist_ok=True)
        path = f"{directory}/part-{i:07}.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.write(fd, b'{"id": %d}\n' % i)
        os.close(fd)
        stat = os.stat(path)
        made.append((path, stat.st_size, stat.st_mtime_ns // 1_000_000))
    return made


def source(root: str, listing: str):
    from framework.sources.files import FileSource

    return FileSource(paths=(root,), format="json", listing=listing)


def commit(store, run_seq: int, files: list[tuple[str, int, int]], state) -> None:
    """Record run ``run_seq`` of the job as a run would: its tracked files and state."""
    from framework.sources.bookmark_codec import encode
    from state_tables.model import Bookmark, ProcessedFile, Run

    now = datetime.now(UTC)
    run = Run(job=JOB, run_id=f"r{run_seq}", run_seq=run_seq, status="succeeded",
              mode="enable", started_at=now, ended_at=now)
    store.record_run(run, bookmarks=[Bookmark(
        job=JOB, context=CONTEXT, run_id=run.run_id, run_seq=run_seq, source_kind="files",
        state=encode(state))], files=[ProcessedFile(
            job=JOB, context=CONTEXT, run_id=run.run_id, run_seq=run_seq, path=p, size=s,
            modified_ms=m) for p, s, m in files])


def plan(root: str, state_root: str, listing: str):
    """The bookmark's state read, the listing and the plan, as a run makes them (each
    run a new process: nothing cached from an earlier one)."""
    from framework.delta import log
    from framework.run.bookmarks import BookmarkHistory
    from framework.sources.files import list_files, plan_files
    from framework.state.table_io import open_store

    log.forget_open_tables()
    src = source(root, listing)
    bookmark = BookmarkHistory(open_store(state_root), JOB).files(CONTEXT)
    return plan_files(list_files(src, bookmark), src, start=bookmark, advance=True)


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def median(action) -> float:
    return statistics.median(timed(action) for _ in range(ROUNDS))


def bare_listing(root: str) -> int:
    return len(pafs.LocalFileSystem().get_file_info(pafs.FileSelector(root, recursive=True)))


def planning_rss_mb(root: str, state_root: str) -> float:
    """Peak resident memory of a process that plans with a full listing (MB): its own
    high-water mark (``VmHWM``; a forked child's ``ru_maxrss`` counts its parent's)."""
    found = subprocess.run([sys.executable, "-m", "tests.benchmarks.bench_files_scale",
                            "plan", root, state_root], capture_output=True, text=True,
                           check=True)
    return int(found.stdout.split()[-1]) / 1024


def peak_kb() -> int:
    with open("/proc/self/status") as status:
        return int(next(line.split()[1] for line in status if line.startswith("VmHWM")))


def main() -> None:
    from framework.delta import log
    from framework.sources.files import FileState, json_schema
    from framework.sources.files.listed_reads import ListedFile
    from framework.state.table_io import open_store

    processed = int(os.environ.get("DELTAMARK_BENCH_SCALE_FILES", "1000000"))
    per_hour = max(processed // 1000, 1)
    work = tempfile.mkdtemp(prefix="deltamark-scale-")
    root, state_root = f"{work}/landing", f"{work}/state"
    try:
        started = time.perf_counter()
        done = land(root, 0, processed, per_hour)
        store = open_store(state_root)
        share = -(-processed // RUNS)
        for seq in range(1, RUNS + 1):
            part = done[(seq - 1) * share:seq * share]
            state = FileState(files_total=min(seq * share, processed),
                              listed_up_to={root: os.path.relpath(part[-1][0], root)},
                              full_listing_ms=int(time.time() * 1000))
            commit(store, seq, part, state)
        store.tidy()
        land(root, processed, NEW_FILES, per_hour)
        print(f"bench_files_scale: {processed:,} files read by {RUNS} runs, {NEW_FILES:,} new "
              f"(set up in {time.perf_counter() - started:.0f} s)")

        listing_s = median(lambda: bare_listing(root))
        seconds = {}
        for listing in ("full", "start_after", "partitions"):
            found = plan(root, state_root, listing)
            assert len(found.files) == NEW_FILES, (listing, len(found.files))
            seconds[listing] = median(lambda listing=listing: plan(root, state_root, listing))
        read_s = median(lambda: (log.forget_open_tables(),
                                 open_store(state_root).tracked_files(
                                     JOB, CONTEXT, set(range(1, RUNS + 1)))))
        rss_mb = planning_rss_mb(root, state_root)
        backlog = [ListedFile(*file) for file in done]
        first_schema = json_schema.infer(json_schema.sample(backlog, {}) or [], {})
        assert first_schema is not None and first_schema.fieldNames() == ["id"], first_schema
        seconds["schema"] = median(
            lambda: json_schema.infer(json_schema.sample(backlog, {}) or [], {}))
        planned = plan(root, state_root, "full")
        commit_s = timed(lambda: commit(store, RUNS + 1, [
            (f.path, f.size, f.modified_ms) for f in planned.files], planned.state))
        assert not plan(root, state_root, "full").files
        seconds["noop"] = median(lambda: plan(root, state_root, "full"))
        files_on_disk, bytes_on_disk = store.io.footprint(f"{state_root}/processed_files")

        print(f"  bare recursive listing (pyarrow) of {processed + NEW_FILES:,} files: "
              f"{listing_s:.2f} s")
        for name, label in (("full", "plan with a full listing"),
                            ("noop", "no-op check (full listing), once read"),
                            ("start_after", "plan listing after the last key"),
                            ("partitions", "plan listing the newest partition on"),
                            ("schema", "first run's schema, from a sample")):
            ratio = seconds[name] / listing_s
            verdict = "met" if ratio <= TARGETS[name] else "MISSED"
            if name in ("start_after", "partitions") and processed < FULL_SIZE:
                verdict = f"{verdict} here; the target is for {FULL_SIZE:,} files"
            print(f"  {label:<40} {seconds[name]:7.2f} s  ratio {ratio:5.2f} "
                  f"(target <= {TARGETS[name]}: {verdict})")
        per_file = bytes_on_disk / (processed + NEW_FILES)
        print(f"  state on disk: {per_file:.0f} bytes a tracked file ({files_on_disk} files) "
              f"(target <= 100: {'met' if per_file <= 100 else 'MISSED'})")
        for label, value in (("state read", read_s), ("run commit", commit_s)):
            print(f"  {label}: {value:.2f} s (target <= 1 s: "
                  f"{'met' if value <= 1 else 'MISSED'})")
        print(f"  planning process peak RSS: {rss_mb:.0f} MB (target < 1024 MB: "
              f"{'met' if rss_mb < 1024 else 'MISSED'})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["plan"]:
        plan(sys.argv[2], sys.argv[3], "full")
        print(peak_kb())
    else:
        main()
