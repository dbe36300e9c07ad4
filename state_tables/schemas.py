"""Schemas of the state tables, every column documented, and their migrations.

Each row carries ``schema_version``. Rows written by an older deltamark are upgraded on
read one step at a time through ``MIGRATIONS``; a missing step is an error, never a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from state_tables.errors import StateSchemaError

__all__ = [
    "BOOKMARKS",
    "DQ_RESULTS",
    "PROCESSED_FILES",
    "RUNS",
    "TABLES",
    "WATERMARKS",
    "WORKFLOW_RUNS",
    "StateTable",
    "reference",
    "upgrade",
]

TS = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class StateTable:
    """A state table: its directory name under the state root, what a row is, its columns
    and their docs."""

    name: str
    version: int
    row: str
    columns: tuple[tuple[str, pa.DataType, bool, str], ...]  # name, type, nullable, doc

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([pa.field(n, t, nullable=null) for n, t, null, _ in self.columns])

    def docs(self) -> dict[str, str]:
        return {name: doc for name, _, _, doc in self.columns}


RUNS = StateTable(
    name="runs",
    row="one row per job run and status it reached (the newest is current)",
    version=3,
    columns=(
        ("schema_version", pa.int32(), False, "version of this row's layout"),
        ("job", pa.string(), False, "job name (conf/jobs/<job>.yaml)"),
        ("run_id", pa.string(), False, "unique id of the run"),
        ("run_seq", pa.int64(), False, "per-job run number; only grows, never reused"),
        ("attempt", pa.int32(), False, "1 for a first try, +1 for each retry of a failed run"),
        ("status", pa.string(), False, "running | succeeded | failed | aborted | skipped "
         "(nothing new: found before Spark started); a run has a row per status it reached, "
         "the newest (updated_at) is current"),
        ("mode", pa.string(), False, "bookmark mode: enable | disable | pause"),
        ("started_at", TS, False, "when the run started (UTC)"),
        ("ended_at", TS, True, "when the run ended (UTC)"),
        ("arguments", pa.string(), False, "JSON object of the run's effective arguments"),
        ("error", pa.string(), True, "one-line error of a failed run"),
        ("inputs", pa.string(), True, "JSON object: context -> what it read "
         "(files, bytes, listed, backlog, rewritten_skipped, malformed)"),
        ("outputs", pa.string(), True, "JSON object: target -> what the run wrote "
         "there (written, version, or files and rows; replayed, rolled_back)"),
        ("updated_at", TS, True, "when this row was written (UTC)"),
        ("recovery", pa.string(), True, "how recovery settled an interrupted run: "
         "replayed | aborted (nothing landed) | aborted_by_operator | "
         "rewound (superseded by a rewind or reset)"),
        ("fingerprint", pa.string(), True, "hash of what decides the run besides its input "
         "(the job's conf and code, arguments, deltamark's version): a run is skipped for "
         "nothing new only when the run before it has the same"),
        ("sources", pa.string(), True, "JSON object: context -> how to plan that source "
         "again without Spark (null: it cannot be, so the next run is never skipped)"),
        ("properties", pa.string(), True, "JSON object: the run properties the job "
         "published (a skipped run publishes those of the run it repeats)"),
    ),
)

BOOKMARKS = StateTable(
    name="bookmarks",
    row="one row per job, context and run (and per rewind or reset)",
    version=2,
    columns=(
        ("schema_version", pa.int32(), False, "version of this row's layout"),
        ("job", pa.string(), False, "job name"),
        ("context", pa.string(), False, "transformation_ctx of the source, transform or sink"),
        ("run_id", pa.string(), False, "the run that wrote this state"),
        ("run_seq", pa.int64(), False, "that run's per-job number"),
        ("source_kind", pa.string(), False, "what the state describes: files, jdbc, delta, ..."),
        ("state", pa.string(), False, "the context's state after the run, as a JSON object"),
        ("event", pa.string(), False, "commit (a run's new state; counts once the run has "
         "succeeded in enable mode) | rewind | reset"),
        ("committed_at", TS, False, "when this state was written (UTC)"),
        ("restored_from_seq", pa.int64(), True, "rewind: the run whose state it restores"),
    ),
)

PROCESSED_FILES = StateTable(
    name="processed_files",
    row="one row per job, context, run and file tracked (read, or set aside)",
    version=2,
    columns=(
        ("schema_version", pa.int32(), False, "version of this row's layout"),
        ("job", pa.string(), False, "job name"),
        ("context", pa.string(), False, "transformation_ctx of the file source"),
        ("run_id", pa.string(), False, "the run that read the file"),
        ("run_seq", pa.int64(), False, "that run's per-job number"),
        ("path", pa.string(), False, "the file's full path or URI"),
        ("size", pa.int64(), False, "its size in bytes when read"),
        ("modified_ms", pa.int64(), False, "its modification time when read (epoch ms)"),
        ("outcome", pa.string(), True, "read | too_old (older than max_file_age: not read) "
         "| rewritten (changed since read, policy ignore: not read again) | adopted "
         "(counted as processed by a bookmark from before deltamark tracked every file)"),
    ),
)

WATERMARKS = StateTable(
    name="watermarks",
    row="one row per job, context and run",
    version=1,
    columns=(
        ("schema_version", pa.int32(), False, "version of this row's layout"),
        ("job", pa.string(), False, "job name"),
        ("context", pa.string(), False, "transformation_ctx the watermark belongs to"),
        ("run_id", pa.string(), False, "the run that computed it"),
        ("run_seq", pa.int64(), False, "that run's number; counts once it succeeded in "
         "enable mode"),
        ("column", pa.string(), False, "the column aggregated"),
        ("aggregate", pa.string(), False, "max | min"),
        ("value", pa.string(), True, "the value as JSON (ISO text for dates and times)"),
        ("value_type", pa.string(), False, "its Spark type: timestamp, date, bigint, ..."),
        ("rows", pa.int64(), False, "rows the aggregate was taken over"),
        ("committed_at", TS, False, "when this row was written (UTC)"),
    ),
)

DQ_RESULTS = StateTable(
    name="dq_results",
    row="one row per job, run (attempt), rule set and rule checked before a write",
    version=1,
    columns=(
        ("schema_version", pa.int32(), False, "version of this row's layout"),
        ("job", pa.string(), False, "job name"),
        ("run_id", pa.string(), False, "the run whose rows were checked"),
        ("run_seq", pa.int64(), False, "that run's per-job number"),
        ("attempt", pa.int32(), False, "that run's attempt (a replay checks again)"),
        ("ruleset", pa.string(), False, "the rule set (checks.<name> in the job's conf)"),
        ("target", pa.string(), False, "the target the rule set gated"),
        ("policy", pa.string(), False, "fail | quarantine | warn"),
        ("rule", pa.string(), False, "the rule, written as in Glue DQDL"),
        ("kind", pa.string(), False, "IsComplete, ColumnValues, ... or a GX expectation"),
        ("outcome", pa.string(), False, "passed | failed | error (could not be evaluated)"),
        ("action", pa.string(), False, "what the gate did: written | warned | quarantined "
         "| rejected (nothing written)"),
        ("rows", pa.int64(), False, "rows checked"),
        ("observed", pa.string(), True, "GX's observed value, as JSON"),
        ("unexpected_count", pa.int64(), True, "rows breaking the rule (row-level rules)"),
        ("unexpected_percent", pa.float64(), True, "their percentage of non-null values"),
        ("sample", pa.string(), True, "JSON list of up to 5 failing values"),
        ("message", pa.string(), True, "why the rule could not be evaluated"),
        ("evaluated_at", TS, False, "when (UTC)"),
    ),
)

WORKFLOW_RUNS = StateTable(
    name="workflow_runs",
    row="one row per workflow run, job and state it reached (the newest is current)",
    version=1,
    columns=(
        ("schema_version", pa.int32(), False, "version of this row's layout"),
        ("workflow", pa.string(), False, "workflow name (conf/workflows/<workflow>.yaml)"),
        ("workflow_run_id", pa.string(), False, "unique id of the workflow run"),
        ("job", pa.string(), False, "the job (node) this row is about"),
        ("trigger", pa.string(), False, "the trigger that started (or skipped) it"),
        ("state", pa.string(), False, "RUNNING | SUCCEEDED | FAILED | TIMEOUT | STOPPED | "
         "SKIPPED; a node has a row per state it reached, the newest (updated_at) is current"),
        ("run_id", pa.string(), True, "the job's run (runs table)"),
        ("started_at", TS, True, "when the job started (UTC)"),
        ("ended_at", TS, True, "when it ended (UTC)"),
        ("arguments", pa.string(), False, "JSON object: the params the workflow gave the job "
         "(its args in the workflow, its trigger's args)"),
        ("run_properties", pa.string(), False, "JSON object: the run properties when it "
         "started (also given as params, taking precedence)"),
        ("properties", pa.string(), False, "JSON object: the run properties it published"),
        ("error", pa.string(), True, "why it failed, timed out or was skipped"),
        ("resumed_from", pa.string(), True, "the workflow run this one resumes"),
        ("updated_at", TS, False, "when this row was written (UTC)"),
    ),
)

TABLES: Mapping[str, StateTable] = {
    t.name: t for t in (RUNS, BOOKMARKS, PROCESSED_FILES, WATERMARKS, DQ_RESULTS,
                        WORKFLOW_RUNS)}

# MIGRATIONS[table][n] turns a row of version n into a row of version n + 1.
MIGRATIONS: Mapping[str, Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "runs": {
        1: lambda row: {**row, "inputs": row.get("inputs") or "{}",
                        "outputs": row.get("outputs") or "{}",
                        "updated_at": row.get("updated_at") or row["ended_at"]
                        or row["started_at"], "recovery": row.get("recovery")},
        2: lambda row: {**row, "fingerprint": row.get("fingerprint"),
                        "sources": row.get("sources") or "{}",
                        "properties": row.get("properties") or "{}"},
    },
    "bookmarks": {1: lambda row: {**row, "restored_from_seq": None}},
    "processed_files": {1: lambda row: {**row, "outcome": row.get("outcome") or "read"}},
    "watermarks": {},
    "dq_results": {},
    "workflow_runs": {},
}


def reference() -> str:
    """The state tables' reference in Markdown, as docs/state-tables.md holds it."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    parts = []
    for table in TABLES.values():
        parts.append(f"### `{table.name}`\n\n{table.row[0].upper()}{table.row[1:]}; "
                     f"layout version {table.version}.\n\n| column | type | meaning |\n"
                     "|---|---|---|\n")
        parts.extend(f"| {name} | {type_}{'' if nullable else ', not null'} | {cell(doc)} |\n"
                     for name, type_, nullable, doc in table.columns)
        parts.append("\n")
    return "".join(parts).rstrip("\n") + "\n"


def upgrade(table: StateTable, row: dict[str, Any]) -> dict[str, Any]:
    """Bring one stored row to ``table.version``, step by step.

    Raises:
        StateSchemaError: the row is newer than this deltamark, or a step is missing.
    """
    found = row["schema_version"]
    if found > table.version:
        raise StateSchemaError(table.name, found, table.version)
    while row["schema_version"] < table.version:
        step = MIGRATIONS[table.name].get(row["schema_version"])
        if step is None:
            raise StateSchemaError(table.name, row["schema_version"], table.version)
        row = {**step(row), "schema_version": row["schema_version"] + 1}
    return row


if __name__ == "__main__":
    print(reference(), end="")
