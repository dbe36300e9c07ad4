"""The file bookmark's planning rules, run by run, without Spark.

Each run lists files, plans against the bookmark the previous runs committed, and commits
the plan (state plus files read) the way the runner does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from framework.sources.files import FileBookmark, FileSource, FileState, ListedFile, plan_files

MINUTE = 60_000
BAND = 15 * MINUTE
T = 1_800_000_000_000  # a fixed "now", epoch ms


def f(name: str, modified_ms: int, size: int = 10) -> ListedFile:
    return ListedFile(f"/in/{name}", size, modified_ms)


@dataclass
class Context:
    """One file context's committed history, like the bookmarks + processed_files tables."""

    state: FileState | None = None
    read: list[tuple[ListedFile, int]] = field(default_factory=list)
    seq: int = 0
    states: dict[int, tuple[FileState, int]] = field(default_factory=dict)

    def bookmark(self, up_to: int | None = None) -> FileBookmark | None:
        up_to = self.seq if up_to is None else up_to
        if up_to not in self.states:
            return None
        state, _ = self.states[up_to]
        mine = [(x, s) for x, s in self.read if s <= up_to]
        window = {x.path: (x.modified_ms, x.size) for x, _ in mine
                  if x.modified_ms > state.settled_ms}
        return FileBookmark(state, window,
                            lambda paths: {x.path for x, _ in mine if x.path in set(paths)})

    def run(self, listed, now, **options) -> list[str]:
        source = FileSource(paths=("/in",), format="json", **options)
        plan = plan_files(listed, source, start=self.bookmark(), advance=True, now_ms=now)
        self.seq += 1
        self.read += [(x, self.seq) for x in plan.files]
        self.states[self.seq] = (plan.state, self.seq)
        self.state = plan.state
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


def test_late_files_inside_the_window_are_read_older_ones_count_as_done():
    ctx = Context()
    assert ctx.run([f("new", T)], T) == ["new"]
    late = f("late", T - 10 * MINUTE)  # modified before files already read, listed now
    too_late = f("too_late", T - BAND - 2 * MINUTE)
    assert ctx.run([f("new", T), late, too_late], T + MINUTE) == ["late"]


def test_the_window_is_configurable():
    ctx = Context()
    ctx.run([f("new", T)], T, max_band_ms=30 * MINUTE)
    assert ctx.run([f("new", T), f("late", T - 20 * MINUTE)], T + MINUTE,
                   max_band_ms=30 * MINUTE) == ["late"]


def test_state_stays_compact_the_window_moves_on():
    ctx = Context()
    for hour in range(5):
        now = T + hour * 60 * MINUTE
        listed = [f(f"h{h}-{i}", T + h * 60 * MINUTE - 1000) for h in range(hour + 1)
                  for i in range(20)]
        assert len(ctx.run(listed, now)) == 20
    assert ctx.state.settled_ms == T + 4 * 60 * MINUTE - BAND
    assert len(ctx.bookmark().window) == 20  # only the newest hour is tracked by name
    assert ctx.state.files_total == 100


def test_bounded_files_takes_the_oldest_first_and_splits_same_time_groups():
    ctx = Context()
    listed = [f(f"{i:02}", T - 3 * MINUTE + (i // 4) * MINUTE) for i in range(10)]
    runs = [ctx.run(listed, T + k, bounded_files=3) for k in range(5)]
    assert runs == [["00", "01", "02"], ["03", "04", "05"], ["06", "07", "08"], ["09"], []]


def test_bounded_files_keeps_a_backlog_older_than_the_window():
    ctx = Context()
    old = [f(f"old{i}", T - 5 * 60 * MINUTE + i) for i in range(6)]
    assert ctx.run(old, T, bounded_files=4) == ["old0", "old1", "old2", "old3"]
    assert ctx.run(old, T + 60 * MINUTE, bounded_files=4) == ["old4", "old5"]


def test_bounded_size_reads_at_least_one_file():
    ctx = Context()
    listed = [f("a", T - 3000, 60), f("b", T - 2000, 60), f("c", T - 1000, 200)]
    assert ctx.run(listed, T, bounded_size=130) == ["a", "b"]
    assert ctx.run(listed, T, bounded_size=130) == ["c"]


def test_rewritten_files_are_ignored_by_default():
    ctx = Context()
    ctx.run([f("a", T - MINUTE), f("old", T - 2 * BAND)], T)
    rewritten = [f("a", T + MINUTE, 20), f("old", T + MINUTE, 20)]
    source = FileSource(paths=("/in",), format="json")
    plan = plan_files(rewritten, source, start=ctx.bookmark(), advance=True, now_ms=T + 2000)
    assert plan.files == () and plan.rewritten == 2


def test_rewritten_files_are_read_again_with_reprocess():
    ctx = Context()
    ctx.run([f("a", T - MINUTE), f("old", T - 2 * BAND)], T)
    rewritten = [f("a", T + MINUTE, 20), f("old", T + MINUTE, 20)]
    assert ctx.run(rewritten, T + 2 * MINUTE, rewritten="reprocess") == ["a", "old"]
    assert ctx.run(rewritten, T + 3 * MINUTE, rewritten="reprocess") == []


def test_pause_range_reads_what_run_to_had_and_run_from_had_not():
    ctx = Context()
    a, b, c, d = (f(n, T + i * MINUTE) for i, n in enumerate("abcd"))
    ctx.run([a], T)
    ctx.run([a, b], T + MINUTE)
    ctx.run([a, b, c], T + 2 * MINUTE)
    source = FileSource(paths=("/in",), format="json")
    plan = plan_files([a, b, c, d], source, start=ctx.bookmark(1), end=ctx.bookmark(3),
                      advance=False)
    assert [x.path for x in plan.files] == ["/in/b", "/in/c"] and plan.state is None


def test_without_a_bookmark_everything_is_read_and_nothing_is_committed():
    source = FileSource(paths=("/in",), format="json")
    plan = plan_files([f("a", T), f("b", T)], source, start=None, advance=False)
    assert len(plan.files) == 2 and plan.state is None


def test_the_settled_time_never_goes_back():
    ctx = Context()
    ctx.run([f("a", T)], T)
    before = ctx.state.settled_ms
    ctx.run([f("a", T)], T - 60 * MINUTE)  # the clock went back an hour
    assert ctx.state.settled_ms == before
