"""The state model's dataclasses as state table rows, and back (``StateStore``'s codecs):
JSON columns encoded with sorted keys, the store's time stamped on each row written, a
watermark's value typed again from its recorded type."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from state_tables.model import Bookmark, DqResult, ProcessedFile, Run, Watermark, WorkflowNode
from state_tables.schemas import (
    BOOKMARKS,
    DQ_RESULTS,
    PROCESSED_FILES,
    RUNS,
    WATERMARKS,
    WORKFLOW_RUNS,
)

__all__ = ["bookmark_from", "bookmark_row", "current_nodes", "dq_result_from", "dq_row",
           "file_from", "file_row", "first_per", "node_from", "node_row", "run_from", "run_row",
           "typed_value", "watermark_from", "watermark_row"]


def first_per(rows: Iterable[dict[str, Any]], key: Sequence[str]) -> list[dict[str, Any]]:
    """The first of ``rows`` for each value of ``key``."""
    seen: set[tuple[Any, ...]] = set()
    first = []
    for row in rows:
        if (k := tuple(row[c] for c in key)) not in seen:
            seen.add(k)
            first.append(row)
    return first


def _now() -> datetime:
    return datetime.now(UTC)


def run_row(run: Run) -> dict[str, Any]:
    return {
        "schema_version": RUNS.version, "job": run.job, "run_id": run.run_id,
        "run_seq": run.run_seq, "attempt": run.attempt, "status": run.status,
        "mode": run.mode, "started_at": run.started_at, "ended_at": run.ended_at,
        "arguments": json.dumps(dict(run.arguments), sort_keys=True), "error": run.error,
        "inputs": json.dumps(_plain(run.inputs), sort_keys=True),
        "outputs": json.dumps(_plain(run.outputs), sort_keys=True, default=str),
        "updated_at": _now(), "recovery": run.recovery, "fingerprint": run.fingerprint,
        "sources": json.dumps(dict(run.sources), sort_keys=True, default=str),
        "properties": json.dumps(dict(run.properties), sort_keys=True),
    }


def _plain(mapping: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    return {key: dict(value) for key, value in mapping.items()}


def run_from(row: dict[str, Any]) -> Run:
    return Run(job=row["job"], run_id=row["run_id"], run_seq=row["run_seq"],
               attempt=row["attempt"], status=row["status"], mode=row["mode"],
               started_at=row["started_at"], ended_at=row["ended_at"],
               arguments=json.loads(row["arguments"]), inputs=json.loads(row["inputs"]),
               outputs=json.loads(row["outputs"]), error=row["error"],
               recovery=row["recovery"], fingerprint=row["fingerprint"],
               sources=json.loads(row["sources"]), properties=json.loads(row["properties"]))


def bookmark_row(bookmark: Bookmark) -> dict[str, Any]:
    return {
        "schema_version": BOOKMARKS.version, "job": bookmark.job, "context": bookmark.context,
        "run_id": bookmark.run_id, "run_seq": bookmark.run_seq,
        "source_kind": bookmark.source_kind,
        "state": json.dumps(dict(bookmark.state), sort_keys=True, default=str),
        "event": bookmark.event, "committed_at": bookmark.committed_at or _now(),
        "restored_from_seq": bookmark.restored_from_seq,
    }


def bookmark_from(row: dict[str, Any]) -> Bookmark:
    return Bookmark(job=row["job"], context=row["context"], run_id=row["run_id"],
                    run_seq=row["run_seq"], source_kind=row["source_kind"],
                    state=json.loads(row["state"]), event=row["event"],
                    committed_at=row["committed_at"],
                    restored_from_seq=row["restored_from_seq"])


def file_row(file: ProcessedFile) -> dict[str, Any]:
    return {"schema_version": PROCESSED_FILES.version, "job": file.job, "context": file.context,
            "run_id": file.run_id, "run_seq": file.run_seq, "path": file.path,
            "size": file.size, "modified_ms": file.modified_ms, "outcome": file.outcome}


def file_from(row: dict[str, Any]) -> ProcessedFile:
    return ProcessedFile(job=row["job"], context=row["context"], run_id=row["run_id"],
                         run_seq=row["run_seq"], path=row["path"], size=row["size"],
                         modified_ms=row["modified_ms"], outcome=row["outcome"])


def watermark_row(mark: Watermark) -> dict[str, Any]:
    return {"schema_version": WATERMARKS.version, "job": mark.job, "context": mark.context,
            "run_id": mark.run_id, "run_seq": mark.run_seq, "column": mark.column,
            "aggregate": mark.aggregate, "value": json.dumps(mark.value, default=_iso),
            "value_type": mark.value_type, "rows": mark.rows,
            "committed_at": mark.committed_at or _now()}


def watermark_from(row: dict[str, Any]) -> Watermark:
    return Watermark(job=row["job"], context=row["context"], run_id=row["run_id"],
                     run_seq=row["run_seq"], column=row["column"], aggregate=row["aggregate"],
                     value=typed_value(json.loads(row["value"]), row["value_type"]),
                     value_type=row["value_type"], rows=row["rows"],
                     committed_at=row["committed_at"])


def _iso(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def typed_value(value: Any, value_type: str) -> Any:
    """Back from JSON to the Python value Spark gives for ``value_type``."""
    if value is None:
        return None
    if value_type.startswith("timestamp"):
        return datetime.fromisoformat(value)
    if value_type == "date":
        return date.fromisoformat(value)
    if value_type.startswith("decimal"):
        return Decimal(value)
    return value


def dq_row(result: DqResult) -> dict[str, Any]:
    return {"schema_version": DQ_RESULTS.version, "job": result.job, "run_id": result.run_id,
            "run_seq": result.run_seq, "attempt": result.attempt, "ruleset": result.ruleset,
            "target": result.target, "policy": result.policy, "rule": result.rule,
            "kind": result.kind, "outcome": result.outcome, "action": result.action,
            "rows": result.rows,
            "observed": None if result.observed is None else json.dumps(
                result.observed, default=_iso),
            "unexpected_count": result.unexpected_count,
            "unexpected_percent": result.unexpected_percent,
            "sample": json.dumps(list(result.sample), default=_iso),
            "message": result.message, "evaluated_at": result.evaluated_at or _now()}


def dq_result_from(row: dict[str, Any]) -> DqResult:
    return DqResult(job=row["job"], run_id=row["run_id"], run_seq=row["run_seq"],
                    attempt=row["attempt"], ruleset=row["ruleset"], target=row["target"],
                    policy=row["policy"], rule=row["rule"], kind=row["kind"],
                    outcome=row["outcome"], action=row["action"], rows=row["rows"],
                    observed=None if row["observed"] is None else json.loads(row["observed"]),
                    unexpected_count=row["unexpected_count"],
                    unexpected_percent=row["unexpected_percent"],
                    sample=tuple(json.loads(row["sample"] or "[]")), message=row["message"],
                    evaluated_at=row["evaluated_at"])


def node_row(node: WorkflowNode) -> dict[str, Any]:
    return {"schema_version": WORKFLOW_RUNS.version, "workflow": node.workflow,
            "workflow_run_id": node.workflow_run_id, "job": node.job, "trigger": node.trigger,
            "state": node.state, "run_id": node.run_id, "started_at": node.started_at,
            "ended_at": node.ended_at,
            "arguments": json.dumps(dict(node.arguments), sort_keys=True),
            "run_properties": json.dumps(dict(node.run_properties), sort_keys=True),
            "properties": json.dumps(dict(node.properties), sort_keys=True),
            "error": node.error, "resumed_from": node.resumed_from,
            "updated_at": node.updated_at or _now()}


def current_nodes(rows: Iterable[dict[str, Any]]) -> list[WorkflowNode]:
    """One workflow run's nodes in their latest state, in the order they first appeared."""
    ordered = sorted(rows, key=lambda r: r["updated_at"])
    current = first_per(reversed(ordered), ("job",))
    first_seen = {r["job"]: i for i, r in reversed(list(enumerate(ordered)))}
    return [node_from(r) for r in sorted(current, key=lambda r: first_seen[r["job"]])]


def node_from(row: dict[str, Any]) -> WorkflowNode:
    return WorkflowNode(workflow=row["workflow"], workflow_run_id=row["workflow_run_id"],
                        job=row["job"], trigger=row["trigger"], state=row["state"],
                        run_id=row["run_id"], started_at=row["started_at"],
                        ended_at=row["ended_at"], arguments=json.loads(row["arguments"]),
                        run_properties=json.loads(row["run_properties"]),
                        properties=json.loads(row["properties"]), error=row["error"],
                        resumed_from=row["resumed_from"], updated_at=row["updated_at"])
