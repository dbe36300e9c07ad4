"""Before Spark starts: does this run have anything new to read?

Incremental jobs are scheduled often, and most runs find little or nothing new. Each run
records how its sources can be planned without Spark (``Run.sources``) and a fingerprint
of what decides it besides its input. The next run first plans those sources with
delta-rs, the file listing and the bookmark state; when none has anything new it is
recorded as ``skipped`` and ends there: no JVM, no target touched, bookmarks unchanged.

It never skips when

- the run is forced (``--force``), the job opts out (``skip_when_nothing_new: false`` in
  its conf: jobs that do time-based work), or the bookmark mode is not enable;
- the job's last run did not succeed (nor was skipped) in enable mode: it may need
  recovery or a retry, or held its bookmarks;
- the fingerprint differs from that run's: the job's conf, params, arguments or run
  properties, its code (the ``.py`` files beside its module or script), the settings or
  deltamark's version;
- a source that run read cannot be planned without Spark (an untracked file read, a
  database without a Python driver here, a read with lookback), or planning one fails
  (the run then reports the error itself).

A skipped run publishes the run properties of the run it repeats, so that a workflow's
downstream jobs get the same parameters (and can be skipped in turn).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.common.version import __version__
from framework.config import Settings
from framework.errors import DeltamarkError
from framework.run.bookmarks import BookmarkHistory
from framework.run.spec import JobSpec
from framework.sources import Backlog, source_kind
from state_tables.model import Run
from state_tables.store import StateStore

if TYPE_CHECKING:
    from framework.jdbc import Connection

__all__ = ["Preflight", "fingerprint", "preflight", "waiting"]

log = logging.getLogger("deltamark.preflight")


@dataclass(frozen=True)
class Preflight:
    """``skip``: nothing is new since ``compared`` (the job's last run); ``reason`` says
    what decided it, in words."""

    skip: bool
    reason: str
    compared: Run | None = None


def fingerprint(settings: Settings, spec: JobSpec, arguments: Mapping[str, str],
                mode: str, *, run_properties: Mapping[str, str] | None = None) -> str | None:
    """A hash of what decides a run besides its input (see the module docstring); None
    when the job's code cannot be found (then its runs are never skipped)."""
    code = _code_files(spec)
    if code is None:
        return None
    digest = hashlib.sha256()
    decided_by = {"deltamark": __version__, "mode": mode, "arguments": dict(arguments),
                  **({"run_properties": dict(run_properties)} if run_properties else {}),
                  "delta": settings.delta, "spark_conf": dict(settings.spark.conf),
                  "connections": {k: dict(v) for k, v in settings.connections.items()},
                  "buckets": {k: asdict(v) for k, v in settings.buckets.items()}}
    digest.update(json.dumps(decided_by, sort_keys=True, default=str).encode())
    for path in (spec.source, *code):
        digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _code_files(spec: JobSpec) -> list[Path] | None:
    """The ``.py`` files beside the job's module (or Glue script): its code and helpers."""
    if spec.code_file is None or spec.code_file.suffix != ".py":
        return None  # no source file (a compiled module)
    return sorted(spec.code_file.resolve().parent.glob("*.py"))


def preflight(spec: JobSpec, store: StateStore, *, fingerprint: str | None, mode: str,
              force: bool, skip_when_nothing_new: bool,
              connections: Callable[[str], Connection]) -> Preflight:
    """Plan the sources the job's last run read, without Spark, against the bookmarks.

    Never raises for a source: one that cannot be planned here makes the run go ahead.
    """
    if force:
        return Preflight(False, "forced (--force)")
    if not skip_when_nothing_new:
        return Preflight(False, "the job's conf says skip_when_nothing_new: false")
    if mode != "enable":
        return Preflight(False, f"bookmark mode {mode}: only enable runs are skipped")
    if fingerprint is None:
        return Preflight(False, "the job's code has no source file to compare")
    last = store.last_run(spec.name)
    if last is None:
        return Preflight(False, "the job's first run")
    if last.status not in ("succeeded", "skipped") or last.mode != "enable":
        return Preflight(False, f"its last run ({last.run_seq}) is {last.status} in "
                         f"{last.mode} mode, not a success in enable mode", last)
    if last.fingerprint != fingerprint:
        return Preflight(False, "the job's conf, arguments or code changed since its last "
                         f"run ({last.run_seq})", last)
    if not last.sources:
        return Preflight(False, f"its last run ({last.run_seq}) read no source", last)
    bookmarks = BookmarkHistory(store, spec.name)
    for context, description in last.sources.items():
        if description is None:
            return Preflight(False, f"{context} cannot be planned before Spark starts", last)
        try:
            new = _new_items(context, description, bookmarks, connections)
        except Exception as exc:  # noqa: BLE001 - whatever the cause: the run decides, reports
            log.info("preflight: %s not planned ahead: %s", context, exc)
            return Preflight(False, f"{context} could not be planned ahead ({_reason(exc)})",
                             last)
        if new is None:
            return Preflight(False, f"{context} cannot be planned before Spark starts", last)
        if new:
            return Preflight(False, f"{context} has new input: {new}", last)
    return Preflight(True, f"nothing new in {', '.join(last.sources)}", last)


def waiting(store: StateStore, job: str, connections: Callable[[str], Connection]
            ) -> dict[str, Backlog | str]:
    """What each source the job's last run read has that its bookmark has not seen (files
    and their bytes, versions or rows), planned as ``preflight`` plans it; for a source
    that cannot be planned without Spark, why."""
    last = store.last_run(job)
    if last is None:
        return {}
    bookmarks = BookmarkHistory(store, job)
    found: dict[str, Backlog | str] = {}
    for context, description in last.sources.items():
        new: Backlog | str | None
        try:
            new = None if description is None else _new_items(context, description,
                                                              bookmarks, connections)
        except Exception as exc:  # noqa: BLE001 - shown, as the run would report it
            new = f"could not be planned ahead ({_reason(exc)})"
        found[context] = "cannot be planned before Spark starts" if new is None else new
    return found


def _reason(exc: Exception) -> str:
    """A planning error as shown: its message when it is ours or the OS's, else its type."""
    return str(exc) if isinstance(exc, DeltamarkError | OSError) else type(exc).__name__


def _new_items(context: str, description: Mapping[str, Any], bookmarks: BookmarkHistory,
               connections: Callable[[str], Connection]) -> Backlog | None:
    """What the source has that the context's bookmark has not seen; None when it cannot
    be told here."""
    kind = source_kind(description.get("kind", ""))
    return None if kind is None else kind.new_items(context, description, bookmarks,
                                                    connections)
