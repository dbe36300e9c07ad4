"""Which runs' bookmarks and processed files count for a context: its commits, replayed
with the rewinds and resets recorded after them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from state_tables.model import Bookmark

__all__ = ["ContextHistory", "RunSet", "valid_runs"]


@dataclass(frozen=True)
class ContextHistory:
    """One context's bookmark rows resolved: the current one, and the runs whose
    processed files count."""

    current: Bookmark
    valid_runs: Set[int] = frozenset()


class RunSet(Set[int]):
    """A set of run_seqs known from run ``since`` on; the whole set is computed by
    ``everything`` the first time an older run, the size or the members are asked for."""

    def __init__(self, recent: Set[int], *, since: int,
                 everything: Callable[[], Set[int]]):
        self._recent, self._since, self._everything = recent, since, everything
        self._all: Set[int] | None = None

    def __contains__(self, seq: object) -> bool:
        if isinstance(seq, int) and seq >= self._since:
            return seq in self._recent
        return seq in self._whole()

    def __iter__(self) -> Iterator[int]:
        return iter(self._whole())

    def __len__(self) -> int:
        return len(self._whole())

    def _whole(self) -> Set[int]:
        if self._all is None:
            self._all = self._everything()
        return self._all


def valid_runs(commits: Sequence[int], events: Sequence[Mapping[str, Any]],
                up_to: int | None) -> frozenset[int]:
    """Replay commits (ascending run_seq) and events (rewind / reset, in order): a reset
    empties the set; a rewind to run k brings back the set as it was right after k."""
    valid: set[int] = set()
    i = 0
    for event in events:
        if up_to is not None and event["run_seq"] >= up_to:
            break
        while i < len(commits) and commits[i] <= event["run_seq"]:
            valid.add(commits[i])
            i += 1
        valid = (set() if event["event"] == "reset" else
                 set(valid_runs(commits, events, event["restored_from_seq"])))
    valid.update(commits[i:] if up_to is None else (s for s in commits[i:] if s <= up_to))
    return frozenset(valid)
