"""A listing planned against the context's bookmark: what is new, changed, adopted,
too old or left for the next runs.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from framework.errors import one_line
from framework.sources.files.listed_reads import ListedFile
from framework.sources.files.model import FileBookmark, FilePlan, FileSource, FileState, SetAside
from framework.sources.files.roots import Listing
from state_tables.rows import arrow_array, arrow_scalar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


__all__ = ["plan_files", "within_partitions"]


def within_partitions(spark: SparkSession, listing: Listing, condition: str) -> Listing:
    """``listing`` without the files whose ``key=value`` directories' values (text) do not
    meet the Spark SQL ``condition`` (one small Spark query over the distinct values).

    Raises:
        ValueError: the condition is not one Spark can evaluate on those values (a column
            that is not a partition key, bad syntax).
    """
    from urllib.parse import unquote

    from pyspark.sql.types import StringType, StructField, StructType

    keys = listing.files["key"].to_pylist()
    found = [dict(unquote(part).split("=", 1) for part in key.split("/")[:-1] if "=" in part)
             for key in keys]
    names = sorted({name for values in found for name in values})
    rows = sorted({tuple(values.get(n) for n in names) for values in found},
                  key=lambda row: tuple(v or "" for v in row))
    schema = StructType([StructField(n, StringType()) for n in names])
    try:
        kept = {tuple(row) for row in spark.createDataFrame(rows, schema).where(condition)
                .collect()}
    except Exception as exc:  # Spark's analysis and parse errors
        raise ValueError(f"the partition predicate {condition!r} does not apply to the "
                         f"partition keys found ({', '.join(names) or 'none'}): "
                         f"{one_line(exc)}") from exc
    mask = [tuple(values.get(n) for n in names) in kept for values in found]
    return dataclasses.replace(listing, files=listing.files.filter(arrow_array(mask, pa.bool_())))


def plan_files(
    listing: Listing,
    source: FileSource,
    *,
    start: FileBookmark | None,
    end: FileBookmark | None = None,
    advance: bool,
    now_ms: int | None = None,
) -> FilePlan:
    """Choose the files to read: those ``start`` does not track (all when None), and,
    with ``end``, that ``end`` had processed; oldest first within the bounds.

    With ``advance``, the plan carries the state to commit once the run succeeds and the
    files it tracks without reading them.
    """
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    listed = listing.files
    candidates = _untracked(listed, start)
    new, changed, adopted = _statuses(candidates, start)
    too_old = _false(len(candidates))
    if source.max_file_age_ms is not None:
        too_old = pc.and_(new, pc.less(candidates["modified_ms"],
                                       now_ms - source.max_file_age_ms))
        new = pc.and_not(new, too_old)
    wanted = pc.or_(new, changed) if source.rewritten == "reprocess" else new
    if end is not None:  # only what ``end`` had processed
        missing = _untracked(candidates, end)
        end_new, end_changed, _ = _statuses(missing, end)
        unprocessed = missing.filter(pc.or_(end_new, end_changed))["path"]
        wanted = pc.and_not(wanted, pc.is_in(candidates["path"], value_set=unprocessed))
    pending = candidates.filter(wanted).sort_by([("modified_ms", "ascending"),
                                                ("path", "ascending")])
    chosen = _bounded(pending, source)
    plan = FilePlan(files=_listed_files(chosen), listed=len(listed),
                    backlog=len(pending) - len(chosen),
                    backlog_bytes=(pc.sum(pending["size"]).as_py() or 0)
                    - (pc.sum(chosen["size"]).as_py() or 0),
                    too_old=_count(too_old),
                    rewritten=0 if source.rewritten == "reprocess" else _count(changed),
                    complete=listing.complete, acknowledge=listing.acknowledge)
    if not advance:
        return plan
    set_aside = [SetAside(f, "too_old") for f in _listed_files(candidates.filter(too_old))]
    if source.rewritten == "ignore":
        set_aside += [SetAside(f, "rewritten")
                      for f in _listed_files(candidates.filter(changed))]
    set_aside += [SetAside(f, "adopted") for f in _listed_files(candidates.filter(adopted))]
    previous = start.state if start else FileState()
    state = FileState(
        files_total=previous.files_total + len(chosen),
        bytes_total=previous.bytes_total + plan.bytes,
        too_old_total=previous.too_old_total + plan.too_old,
        listed_up_to=(_listed_up_to(listed, pending.slice(len(chosen)), source.paths,
                                    previous.listed_up_to)
                      if source.listing in ("start_after", "partitions") else {}),
        full_listing_ms=now_ms if listing.complete else previous.full_listing_ms,
        schema=previous.schema, rescued_column=previous.rescued_column)
    return dataclasses.replace(plan, set_aside=tuple(set_aside), state=state)


def _untracked(files: pa.Table, bookmark: FileBookmark | None) -> pa.Table:
    """``files`` less those tracked as they are (path, size and modification time): a
    hash anti-join, so a million listed and tracked files cost a tenth of a second and
    the rest of planning looks at what is new or changed only."""
    if bookmark is None or not len(files):
        return files
    # Acero's own module: Table.join imports pyarrow.dataset, and with it pandas (0.3 s)
    from pyarrow._acero import Declaration, HashJoinNodeOptions, TableSourceNodeOptions

    identity = ["path", "size", "modified_ms"]
    return Declaration("hashjoin", HashJoinNodeOptions("left anti", identity, identity), [
        Declaration("table_source", TableSourceNodeOptions(files)),
        Declaration("table_source", TableSourceNodeOptions(
            bookmark.tracked.select(identity)))]).to_table().select(files.column_names)


def _statuses(files: pa.Table, bookmark: FileBookmark | None
              ) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Three masks over ``files`` (none tracked as they are), as ``bookmark`` sees each:
    new (its path is not tracked), changed (a path read before, with another size or
    modification time) and adopted (not tracked, but counted as processed by the
    bookmark's settled time). A file only ever set aside as too old is new once changed:
    it was never read.
    """
    if bookmark is None:
        return _true(len(files)), _false(len(files)), _false(len(files))
    tracked = bookmark.tracked
    seen = tracked.filter(pc.is_in(tracked["path"], value_set=files["path"]))
    too_old = arrow_scalar("too_old", pa.string())
    were_read = seen.filter(pc.not_equal(seen["outcome"], too_old))["path"]
    changed = pc.is_in(files["path"], value_set=were_read)
    new = pc.invert(changed)
    adopted = _false(len(files))
    if bookmark.state.settled_ms is not None:
        untracked = pc.invert(pc.is_in(files["path"], value_set=seen["path"]))
        adopted = pc.and_(untracked, pc.less_equal(files["modified_ms"],
                                                   bookmark.state.settled_ms))
        new = pc.and_not(new, adopted)
    return new, changed, adopted


def _false(n: int) -> pa.Array:
    return pc.is_valid(pa.nulls(n, pa.bool_()))


def _true(n: int) -> pa.Array:
    return pc.invert(_false(n))


def _count(mask: pa.Array) -> int:
    return pc.sum(mask).as_py() or 0


def _listed_files(rows: pa.Table) -> tuple[ListedFile, ...]:
    return tuple(ListedFile(path, size, modified) for path, size, modified in zip(
        rows["path"].to_pylist(), rows["size"].to_pylist(), rows["modified_ms"].to_pylist(),
        strict=True))


def _bounded(pending: pa.Table, source: FileSource) -> pa.Table:
    if source.bounded_files is not None:
        return pending.slice(0, source.bounded_files)
    if source.bounded_size is None or not len(pending):
        return pending
    total = pc.cumulative_sum(pending["size"]).to_pylist()
    fits = sum(1 for t in total if t <= source.bounded_size)
    return pending.slice(0, max(fits, 1))


def _listed_up_to(listed: pa.Table, backlog: pa.Table, roots: Sequence[str],
                  previous: Mapping[str, str]) -> dict[str, str]:
    """Each root's greatest key listed below which nothing is left untracked (the
    smallest key of ``backlog``, what a bounded run leaves for later)."""
    found = {}
    for index, root in enumerate(roots):
        keys = listed.filter(pc.equal(listed["root"], index))["key"]
        candidates = [previous[root]] if root in previous else []
        waiting = backlog.filter(pc.equal(backlog["root"], index))["key"]
        if len(waiting):
            first_waiting = pc.min(waiting).as_py()
            keys = keys.filter(pc.less(keys, first_waiting))
            candidates = [k for k in candidates if k < first_waiting]
        if len(keys):
            candidates.append(pc.max(keys).as_py())
        if candidates:
            found[root] = max(candidates)
    return found
