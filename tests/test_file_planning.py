"""The file bookmark's planning rules, run by run, without Spark.

Each run lists files, plans against the bookmark the previous runs committed, and commits
the plan (state plus files tracked) the way the runner does. Modification times are
hostile on purpose: days old, in the future, equal to the last run's time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from framework.sources.files import (
    TRACKED,
    FileBookmark,
    FileSource,
    FileState,
    ListedFile,
    plan_files,
)
from framework.sources.files.roots import LISTED, Listing

MINUTE = 60_000
DAY = 24 * 60 * MINUTE
T = 1_800_000_000_000  # a fixed "now", epoch ms


def f(name: str, modified_ms: int, size: int = 10) -> ListedFile:
    return ListedFile(f"/in/{name}", size, modified_ms)


def listing(files: list[ListedFile], *, complete: bool = True) -> Listing:
    return Listing(pa.table({"path": [x.path for x in files], "size": [x.size for x in files],
                             "modified_ms": [x.modified_ms for x in files],
                             "root": [0] * len(files),
                             "key": [x.path.removeprefix("/in/") for x in files]},
                            schema=LISTED), complete=complete)


@dataclass
class Context:
    """One file context's committed history, like the bookmarks + processed_files tables."""

    state: FileState | None = None
    tracked: list[tuple[ListedFile, str, int]] = field(default_factory=list)
    seq: int = 0
    states: dict[int, FileState] = field(default_factory=dict)
    last_plan: object = None

    def bookmark(self, up_to: int | None = None) -> FileBookmark | None:
        up_to = self.seq if up_to is None else up_to
        if up_to not in self.states:
            return None
        mine = [(x, o) for x, o, s in self.tracked if s <= up_to]
        rows = pa.table({"path": [x.path for x, _ in mine], "size": [x.size for x, _ in mine],
                         "modified_ms": [x.modified_ms for x, _ in mine],
                         "outcome": [o for _, o in mine]}, schema=TRACKED)
        return FileBookmark(self.states[up_to], rows)

    def run(self, listed, now, *, complete: bool = True, **options) -> list[str]:
        source = FileSource(paths=("/in",), format="json", **options)
        plan = plan_files(listing(listed, complete=complete), source, start=self.bookmark(),
                          advance=True, now_ms=now)
        self.seq += 1
        self.tracked += [(x, "read", self.seq) for x in plan.files]
        self.tracked += [(s.file, s.outcome, self.seq) for s in plan.set_aside]
        self.states[self.seq] = self.state = plan.state
        self.last_plan = plan
        return sorted(x.path.removeprefix("/in/") for x in plan.files)


def test_each_file_is_read_once_and_new_files_on_the_next_run():
    ctx = Context()
    listed = [f("a", T - 2 * MINUTE), f("b", T - MINUTE)]
    assert ctx.run(listed, T) == ["a", "b"]
    assert ctx.run(listed, T + MINUTE) == []
    listed.append(f("c", T + MINUTE))
    assert ctx.run(listed, T + 2 * MINUTE) == ["c"]
    assert ctx.state.files_total == 3 and ctx.state.bytes_total == 30


def test_many_files_sharing_one_modification_time():
    ctx = Context()
    same = T - 1000
    first = [f(f"x{i:03}", same) for i in range(50)]
    assert len(ctx.run(first, T)) == 50
    second = first + [f(f"y{i:03}", same) for i in range(50)]  # same ms, listed later
    assert ctx.run(second, T + 500) == [f"y{i:03}" for i in range(50)]
    assert ctx.run(second, T + 1000) == []


def test_a_file_landing_with_any_modification_time_is_read_once():
    ctx = Context()
    listed = [f("first", T)]
    assert ctx.run(listed, T) == ["first"]
    listed += [f("rsync_a", T - 2 * DAY),         # cp -p, rsync -a, tar x keep old times
               f("future", T + 3 * DAY),          # a writer with a clock days ahead
               f("same_ms_as_last_run", T),       # equal to the previous run's time
               f("epoch", 0)]
    assert ctx.run(listed, T + MINUTE) == ["epoch", "future", "rsync_a", "same_ms_as_last_run"]
    assert ctx.run(listed, T + 2 * MINUTE) == []
    assert ctx.run(listed, T + 5 * DAY) == []


def test_the_state_keeps_totals_the_files_are_tracked_by_name():
    ctx = Context()
    for hour in range(5):
        listed = [f(f"h{h}-{i}", T + h * 60 * MINUTE) for h in range(hour + 1)
                  for i in range(20)]
        assert len(ctx.run(listed, T + hour * 60 * MINUTE)) == 20
    assert ctx.state == FileState(files_total=100, bytes_total=1000,
                                  full_listing_ms=T + 4 * 60 * MINUTE)
    assert len(ctx.bookmark().tracked) == 100


def test_max_file_age_sets_old_files_aside_and_names_them_once():
    ctx = Context()
    old, fresh = f("old", T - 3 * DAY), f("fresh", T - MINUTE)
    assert ctx.run([old, fresh], T, max_file_age_ms=DAY) == ["fresh"]
    plan = ctx.last_plan
    assert plan.counts()["too_old"] == 1 and [(s.file.path, s.outcome) for s in plan.set_aside] \
        == [("/in/old", "too_old")]
    assert ctx.state.too_old_total == 1
    assert ctx.run([old, fresh], T + MINUTE, max_file_age_ms=DAY) == []
    assert ctx.last_plan.set_aside == ()  # named once, in the run that found it
    # Touched since (a fresh version of a file never read), it is read.
    assert ctx.run([f("old", T + MINUTE), fresh], T + 2 * MINUTE, max_file_age_ms=DAY) == ["old"]


def test_without_max_file_age_nothing_is_too_old():
    ctx = Context()
    assert ctx.run([f("ancient", 1)], T) == ["ancient"]
    assert "too_old" not in ctx.last_plan.counts()


def test_bounded_files_takes_the_oldest_first_and_splits_same_time_groups():
    ctx = Context()
    listed = [f(f"{i:02}", T - 3 * MINUTE + (i // 4) * MINUTE) for i in range(10)]
    runs = [ctx.run(listed, T + k, bounded_files=3) for k in range(5)]
    assert runs == [["00", "01", "02"], ["03", "04", "05"], ["06", "07", "08"], ["09"], []]


def test_bounded_files_keeps_a_backlog_of_old_files():
    ctx = Context()
    old = [f(f"old{i}", T - 5 * 60 * MINUTE + i) for i in range(6)]
    assert ctx.run(old, T, bounded_files=4) == ["old0", "old1", "old2", "old3"]
    assert ctx.last_plan.backlog == 2
    assert ctx.run(old, T + 60 * MINUTE, bounded_files=4) == ["old4", "old5"]


def test_bounded_size_reads_at_least_one_file():
    ctx = Context()
    listed = [f("a", T - 3000, 60), f("b", T - 2000, 60), f("c", T - 1000, 200)]
    assert ctx.run(listed, T, bounded_size=130) == ["a", "b"]
    assert ctx.run(listed, T, bounded_size=130) == ["c"]


def test_rewritten_files_are_set_aside_by_default_and_named_once():
    ctx = Context()
    ctx.run([f("a", T - MINUTE), f("old", T - 2 * DAY)], T)
    # Rewritten: another size, or the same size with an older time (cp -p of an older copy).
    rewritten = [f("a", T + MINUTE, 20), f("old", T - 3 * DAY)]
    assert ctx.run(rewritten, T + 2 * MINUTE) == []
    assert ctx.last_plan.rewritten == 2
    assert sorted((s.file.path, s.outcome) for s in ctx.last_plan.set_aside) == [
        ("/in/a", "rewritten"), ("/in/old", "rewritten")]
    assert ctx.run(rewritten, T + 3 * MINUTE) == [] and ctx.last_plan.rewritten == 0


def test_rewritten_files_are_read_again_with_reprocess():
    ctx = Context()
    ctx.run([f("a", T - MINUTE), f("old", T - 2 * DAY)], T)
    rewritten = [f("a", T + MINUTE, 20), f("old", T - 3 * DAY)]
    assert ctx.run(rewritten, T + 2 * MINUTE, rewritten="reprocess") == ["a", "old"]
    assert ctx.run(rewritten, T + 3 * MINUTE, rewritten="reprocess") == []


def test_pause_range_reads_what_run_to_had_and_run_from_had_not():
    ctx = Context()
    a, b, c, d = (f(n, T + i * MINUTE) for i, n in enumerate("abcd"))
    ctx.run([a], T)
    ctx.run([a, b], T + MINUTE)
    ctx.run([a, b, c], T + 2 * MINUTE)
    source = FileSource(paths=("/in",), format="json")
    plan = plan_files(listing([a, b, c, d]), source, start=ctx.bookmark(1),
                      end=ctx.bookmark(3), advance=False)
    assert [x.path for x in plan.files] == ["/in/b", "/in/c"] and plan.state is None


def test_without_a_bookmark_everything_is_read_and_nothing_is_committed():
    source = FileSource(paths=("/in",), format="json")
    plan = plan_files(listing([f("a", T), f("b", T)]), source, start=None, advance=False)
    assert len(plan.files) == 2 and plan.state is None


def test_a_bookmark_from_before_tracking_by_name_keeps_what_it_counted_as_processed():
    # A deltamark that counted files modified before a settled time as processed, and
    # tracked by name only the newer ones (here: "recent").
    ctx = Context()
    ctx.states[1] = FileState(settled_ms=T - 15 * MINUTE, files_total=2)
    ctx.tracked = [(f("recent", T - MINUTE), "read", 1)]
    ctx.seq = 1
    listed = [f("counted", T - DAY), f("recent", T - MINUTE), f("new", T)]
    assert ctx.run(listed, T + MINUTE) == ["new"]
    assert [(s.file.path, s.outcome) for s in ctx.last_plan.set_aside] == [
        ("/in/counted", "adopted")]
    assert ctx.state.settled_ms is None and ctx.state.files_total == 3
    # From now on only names count: an old file landing later is read.
    assert ctx.run([*listed, f("copied_in", T - 2 * DAY)], T + 2 * MINUTE) == ["copied_in"]


# --- listing modes --------------------------------------------------------------------


def test_start_after_bounds_the_next_listing_and_a_full_listing_reconciles():
    ctx = Context()
    keys = [f(f"2026-11-26T10-{i:02}.json", T + i) for i in range(3)]
    ctx.run(keys, T, listing="start_after")
    assert ctx.state.listed_up_to == {"/in": "2026-11-26T10-02.json"}
    # A key out of lexical order is not in a partial listing, so not read there...
    late = f("2026-11-26T09-59.json", T + 10)
    newer = f("2026-11-26T10-03.json", T + 11)
    assert ctx.run([newer], T + MINUTE, complete=False, listing="start_after") == [
        "2026-11-26T10-03.json"]
    assert ctx.state.full_listing_ms == T
    # ...and the next full listing finds and reads it.
    assert ctx.run([*keys, late, newer], T + DAY, listing="start_after") == [
        "2026-11-26T09-59.json"]
    assert ctx.state.full_listing_ms == T + DAY


def test_start_after_stops_before_the_backlog_of_a_bounded_run():
    ctx = Context()
    keys = [f(f"k{i}", T + i) for i in range(5)]
    assert ctx.run(keys, T, listing="start_after", bounded_files=2) == ["k0", "k1"]
    assert ctx.state.listed_up_to == {"/in": "k1"}
    assert ctx.run(keys[2:], T, complete=False, listing="start_after", bounded_files=2) == [
        "k2", "k3"]
    assert ctx.state.listed_up_to == {"/in": "k3"}


def test_listing_options_are_checked_in_one_line_each():
    def problems(**options) -> list[str]:
        return FileSource(paths=options.pop("paths", ("s3://b/in",)), format="json",
                          **options).problems()

    assert problems(listing="sideways") == [
        "listing must be one of full, start_after, partitions, notifications, not 'sideways'"]
    assert problems(listing="start_after", recurse=False) == [
        "listing='start_after' lists below the roots: it needs recurse=True"]
    assert problems(listing="notifications") == [
        "listing='notifications' and queue (the SQS queue URL the bucket's events arrive "
        "in) go together"]
    assert problems(listing="notifications", queue="https://sqs/q", paths=("/local",)) == [
        "listing='notifications' reads S3 events: /local is not an s3:// path"]
    assert problems(max_file_age_ms=0) == [
        "max_file_age must be positive (or None: read every new file)"]
    assert problems(listing="notifications", queue="https://sqs/q") == []
