"""Prometheus metrics of every job, from the state tables: served at ``deltamark ui``'s
``/metrics`` and printed by ``deltamark metrics`` (for a node exporter's text-file
collector). Read with delta-rs and the pre-run check's planning only: no JVM.

Per job: the newest run's status and start, the figures of the newest run that started
Spark (duration, what it read and wrote), failures in a row, the last success. Per
context: the input waiting past its bookmark, planned as the pre-run check plans it. Per
rule set: the rules that failed in the newest run that evaluated it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from framework.config import Settings
from framework.jdbc import settings_connections
from framework.run import preflight
from framework.run.spec import job_names
from framework.sinks import written
from framework.sources import Backlog
from framework.state.table_io import open_store
from state_tables.model import Run
from state_tables.store import StateStore

__all__ = ["CONTENT_TYPE", "RUN_STATUSES", "Metrics", "failures_in_a_row"]

#: the exposition format ``exposition`` writes
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: each job has one ``deltamark_job_last_run_status`` series per status: 1 for its newest
#: run's, 0 for the others (an alert matches a status without knowing its siblings)
RUN_STATUSES = ("running", "succeeded", "failed", "aborted", "skipped")
#: runs looked at for failures in a row and the last success (more only without a success)
RECENT_RUNS = 30


@dataclass
class _Waiting:
    at: float
    last_run: str
    found: Mapping[str, Backlog | str]


class Metrics:
    """The metrics of ``settings``' jobs, gathered anew for each ``exposition``. The input
    waiting is planned again for a job when its last run changed or ``backlog_every``
    seconds have passed (planning lists sources: a scrape every 15 s need not)."""

    def __init__(self, settings: Settings, *, backlog_every: float = 0):
        self.settings = settings
        self.backlog_every = backlog_every
        self._waiting: dict[str, _Waiting] = {}

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text exposition format (``CONTENT_TYPE``)."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        return generate_latest(registry)

    def collect(self) -> Iterator[Metric]:
        """``prometheus_client``'s collector protocol: every family, freshly read."""
        store = open_store(self.settings.state_root)
        newest = {run.job: run for run in store.recent_runs(1)}
        ran: dict[str, list[Run]] = {}
        for run in store.recent_runs(RECENT_RUNS, skipped=False):
            ran.setdefault(run.job, []).append(run)
        families = _Families()
        now = datetime.now(UTC).timestamp()
        for job in sorted(set(job_names(self.settings)) | set(newest)):
            last = newest.get(job)
            if last is None:
                continue
            for status in RUN_STATUSES:
                families.set("job_last_run_status", "1 for the status of the job's newest "
                             "run, 0 for the other statuses", int(last.status == status),
                             job=job, status=status)
            families.set("job_last_run_start_timestamp_seconds", "When the job's newest run "
                         "started", last.started_at.timestamp(), job=job)
            runs = ran.get(job, [])
            if runs:
                self._figures(families, job, runs[-1])
            families.set("job_failures_in_a_row", "Failed runs since the job's last run that "
                         f"did not fail (counted up to {RECENT_RUNS})",
                         failures_in_a_row(runs), job=job)
            success = _last_success(store, job, runs)
            if success is not None:
                ended = (success.ended_at or success.started_at).timestamp()
                families.set("job_last_success_timestamp_seconds", "When the job's last "
                             "successful run ended", ended, job=job)
                families.set("job_seconds_since_last_success", "Seconds since the job's last "
                             "successful run ended", now - ended, job=job)
            self._backlog(families, store, job, last)
            self._quality(families, store, job)
        yield from families.all()

    def _figures(self, families: _Families, job: str, run: Run) -> None:
        """What the newest run that started Spark took, read and wrote."""
        of = "of the job's newest run that started Spark (runs that found nothing new did not)"
        if run.ended_at is not None:
            families.set("job_last_run_duration_seconds", f"Duration {of}",
                         (run.ended_at - run.started_at).total_seconds(), job=job)
        for counts in run.inputs.values():
            for name in ("files", "bytes", "rows", "versions"):
                if name in counts:
                    families.add(f"job_last_run_{name}_read", f"{name.capitalize()} read {of}",
                                 int(counts[name]), job=job)
        for target, output in run.outputs.items():
            if (figures := written(target, output)) is None:
                continue
            for name in ("rows", "files", "bytes"):
                if (value := getattr(figures, name)) is not None:
                    families.add(f"job_last_run_{name}_written", f"{name.capitalize()} "
                                 f"written {of}, as its targets' commits hold them", value,
                                 job=job)

    def _backlog(self, families: _Families, store: StateStore, job: str, last: Run) -> None:
        kept = self._waiting.get(job)
        if (kept is None or kept.last_run != last.run_id
                or time.monotonic() - kept.at >= self.backlog_every):
            found = preflight.waiting(store, job, settings_connections(self.settings))
            kept = self._waiting[job] = _Waiting(time.monotonic(), last.run_id, found)
        for context, new in kept.found.items():
            planned = not isinstance(new, str)
            families.set("source_backlog_planned", "1 when the context's input waiting could "
                         "be planned before Spark starts, else 0", int(planned), job=job,
                         context=context)
            if isinstance(new, str):
                continue
            families.set("source_backlog_pending", "1 when the context has input past its "
                         "bookmark, else 0", int(bool(new)), job=job, context=context)
            if new.exact:
                families.set(f"source_backlog_{new.unit}s", f"{new.unit.capitalize()}s past "
                             "the context's bookmark", new.count, job=job, context=context)
            if new.bytes is not None:
                families.set("source_backlog_bytes", "Bytes of the files past the context's "
                             "bookmark", new.bytes, job=job, context=context)

    def _quality(self, families: _Families, store: StateStore, job: str) -> None:
        for result in store.dq_results(job):  # of the newest run that evaluated rules
            failed = int(result.outcome != "passed")
            families.set("dq_rule_failed", "1 when the rule failed (or could not be "
                         "evaluated) in the newest run that evaluated its rule set", failed,
                         job=job, ruleset=result.ruleset, target=result.target,
                         rule=result.rule)
            families.add("dq_rules_failed", "Rules of the rule set that failed in the newest "
                         "run that evaluated it", failed, job=job, ruleset=result.ruleset,
                         target=result.target)


def failures_in_a_row(runs: Sequence[Run]) -> int:
    """How many of ``runs`` (oldest first) failed since the last one that did not."""
    failures = 0
    for run in reversed(runs):
        if run.status != "failed":
            break
        failures += 1
    return failures


def _last_success(store: StateStore, job: str, runs: list[Run]) -> Run | None:
    """The job's last successful run: among its recent ``runs``, else in all of them."""
    recent = [r for r in runs if r.status == "succeeded"]
    if recent:
        return recent[-1]
    if len(runs) < RECENT_RUNS:  # the recent runs are all it has
        return None
    older = [r for r in store.runs(job) if r.status == "succeeded"]
    return older[-1] if older else None


class _Families:
    """Gauge families by name (``deltamark_`` prefixed), with their series."""

    def __init__(self) -> None:
        self._families: dict[str, GaugeMetricFamily] = {}
        self._values: dict[str, dict[tuple[str, ...], float]] = {}

    def set(self, name: str, documentation: str, value: float, **labels: str) -> None:
        """The series of ``name`` with ``labels`` is ``value``."""
        if name not in self._families:
            self._families[name] = GaugeMetricFamily(f"deltamark_{name}", documentation,
                                                     labels=list(labels))
            self._values[name] = {}
        self._values[name][tuple(labels.values())] = float(value)

    def add(self, name: str, documentation: str, value: float, **labels: str) -> None:
        """Add ``value`` to the series of ``name`` with ``labels`` (from 0)."""
        found = self._values.get(name, {}).get(tuple(labels.values()), 0.0)
        self.set(name, documentation, found + value, **labels)

    def all(self) -> Iterator[Metric]:
        for name, family in self._families.items():
            for labels, value in self._values[name].items():
                family.add_metric(list(labels), value)
            yield family
