"""The words the CLI and the page say figures in (framework.common.humanize), on the shapes the
runs table has held, older deltamarks' included."""

import datetime as dt

import pytest

from framework.common import humanize
from framework.ops import admin
from framework.sources import Backlog


@pytest.mark.parametrize(("n_bytes", "said"), [
    (0, "0 bytes"), (1, "1 byte"), (999, "999 bytes"), (5109, "5.11 KB"),
    (127706, "128 KB"), (999_999, "1 MB"), (1_234_567_890, "1.23 GB"),
    (3 * 10**15, "3000 TB")])
def test_sizes(n_bytes, said):
    assert humanize.size(n_bytes) == said


@pytest.mark.parametrize(("seconds", "said"), [
    (0, "0 s"), (0.031, "0.03 s"), (8.24, "8.2 s"), (9.96, "10 s"), (59.6, "1 min"),
    (65, "1 min 5 s"), (3600, "1 h"), (7500, "2 h 5 min"), (90061, "1 d 1 h")])
def test_durations(seconds, said):
    assert humanize.duration(seconds) == said


def test_how_long_ago():
    now = dt.datetime(2026, 11, 27, 12, tzinfo=dt.UTC)
    assert [humanize.ago(now - dt.timedelta(seconds=s), now) for s in (0, 5, 300, 7200,
                                                                       200000)] == [
        "just now", "5 s ago", "5 min ago", "2 h ago", "2 d ago"]


@pytest.mark.parametrize(("counts", "said"), [
    ({"files": 1, "listed": 3, "bytes": 127706, "backlog": 0, "rewritten_skipped": 0},
     "1 of 3 files (128 KB)"),
    ({"files": 2, "listed": 9, "bytes": 10, "backlog": 4, "rewritten_skipped": 1,
      "too_old": 3},
     "2 of 9 files (10 bytes), 4 left for later runs, 1 rewritten file skipped, 3 older "
     "than max_file_age"),
    ({"files": 2}, "2 files"),  # an early deltamark's counts
    ({"from_version": 3, "to_version": 5, "versions": 3}, "versions 3 to 5"),
    ({"from_version": 0, "to_version": 0, "versions": 1}, "version 0"),
    ({"from_version": 6, "to_version": 5, "versions": 0}, "no new version (at version 5)"),
    ({"rows": 1}, "1 row"), ({"rows": 120}, "120 rows"),
    ({"snapshots": 1}, "1 snapshot"), ({"snapshots": 0}, "no new snapshot"),
    ({"pages": 3}, "3 pages"), ({}, "nothing counted")])
def test_what_a_source_read(counts, said):
    assert humanize.read(counts) == said


@pytest.mark.parametrize(("output", "said"), [
    ({"written": True, "version": 3}, "version 3"),
    ({"written": True, "version": 3, "replayed": True},
     "version 3 (an earlier attempt's commit)"),
    ({"written": True, "format": "parquet", "files": 2, "rows": 40}, "2 Parquet files, 40 rows"),
    ({"written": True, "format": "jdbc", "rows": 7, "connection": "shop", "table": "t"},
     "7 rows"),
    ({"written": False}, "nothing written"), ({"pending": True}, "being written"),
    ({"written": True, "rolled_back": True}, "rolled back"),
    ({"written": True}, "written"),  # an entry of another shape: as it is
])
def test_what_a_run_wrote(output, said):
    assert admin.describe_write("lake/orders", output) == said


def test_stretches_of_skipped_items_fold_within_their_group():
    runs = [("a", 1, "ok"), ("a", 2, "skip"), ("b", 1, "skip"), ("a", 3, "skip"),
            ("b", 2, "ok"), ("a", 4, "ok"), ("a", 5, "skip")]
    folded = humanize.fold(runs, skipped=lambda r: r[2] == "skip", group=lambda r: r[0])
    assert folded == [("a", 1, "ok"), [("a", 2, "skip"), ("a", 3, "skip")], ("b", 1, "skip"),
                      ("b", 2, "ok"), ("a", 4, "ok"), ("a", 5, "skip")]


def test_workflow_job_states_set_the_nothing_new_apart():
    assert humanize.job_states({"SUCCEEDED": 3}, 2) == "1 SUCCEEDED, 2 nothing new"
    assert humanize.job_states({"FAILED": 1, "SKIPPED": 2}) == "1 FAILED, 2 SKIPPED"


@pytest.mark.parametrize(("backlog", "said"), [
    (Backlog(3, "file", bytes=12_300), "3 files (12.3 KB)"),
    (Backlog(1, "file", bytes=900), "1 file (900 bytes)"),
    (Backlog(0, "file", bytes=0), "0 files"),
    (Backlog(2, "version"), "2 versions"),
    (Backlog(1, "row", exact=False), "new rows"),
    (Backlog(0, "row", exact=False), "no new rows"),
    (Backlog(40, "message", exact=False), "about 40 messages"),
])
def test_a_backlog_is_said_in_words(backlog, said):
    assert str(backlog) == said and bool(backlog) == (backlog.count > 0)
