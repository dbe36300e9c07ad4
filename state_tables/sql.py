"""Read-only SQL (DataFusion, through delta-rs) over the state tables and their views.

Tables: every state table by its name (``runs``, ``bookmarks``, ``processed_files``).
Views: ``current_runs``, each run in its newest status; ``current_bookmarks``, the newest
row per job and context.
"""

from __future__ import annotations

import re

import pyarrow as pa

from framework.delta import log
from framework.errors import ReadOnlySqlError
from state_tables.schemas import BOOKMARKS, RUNS, TABLES
from state_tables.store import StateStore

__all__ = ["VIEWS", "run_sql"]

VIEWS = {
    "current_runs": f"""
        SELECT {", ".join(RUNS.docs())} FROM (
            SELECT *, ROW_NUMBER() OVER (
                PARTITION BY job, run_id ORDER BY updated_at DESC) AS _n
            FROM runs) AS ranked
        WHERE _n = 1""",
    "current_bookmarks": f"""
        SELECT {", ".join(BOOKMARKS.docs())} FROM (
            SELECT *, ROW_NUMBER() OVER (
                PARTITION BY job, context ORDER BY run_seq DESC, committed_at DESC) AS _n
            FROM bookmarks) AS ranked
        WHERE _n = 1""",
}

_VIEW_SOURCE = {"current_runs": RUNS.name, "current_bookmarks": BOOKMARKS.name}
_QUERY_START = {"select", "with", "values", "show", "describe", "explain"}
_WRITES = {"insert", "update", "delete", "merge", "create", "drop", "alter", "copy",
           "truncate"}


def run_sql(store: StateStore, statement: str) -> pa.Table:
    """Run one read-only SQL query over the state tables.

    Raises:
        ReadOnlySqlError: the statement would write, or is more than one statement.
    """
    _require_read_only(statement)
    tables = {name: store.path(table) for name, table in TABLES.items()}
    views = [f"CREATE VIEW {name} AS {body}" for name, body in VIEWS.items()
             if log.is_table(tables[_VIEW_SOURCE[name]])]
    return log.query(statement, tables, setup=views)


def _require_read_only(statement: str) -> None:
    # Drop comments and quoted text, so keywords inside them do not count.
    code = re.sub(r"--[^\n]*|/\*.*?\*/", " ", statement, flags=re.S)
    code = re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", " ", code)
    if ";" in code.strip().rstrip(";"):
        raise ReadOnlySqlError("sql: give one statement only (found ';' between statements).")
    words = re.findall(r"[a-z_]+", code.lower())
    if not words or words[0] not in _QUERY_START:
        raise ReadOnlySqlError(
            "sql: only queries run here (SELECT, WITH, VALUES, SHOW, DESCRIBE, EXPLAIN); "
            "the state tables are read-only through deltamark sql.")
    if writes := sorted(_WRITES.intersection(words)):
        raise ReadOnlySqlError(
            f"sql: refused, the statement contains {', '.join(w.upper() for w in writes)}; "
            "deltamark sql is read-only.")
