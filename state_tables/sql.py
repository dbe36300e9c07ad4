"""Read-only SQL over the state tables and their views (DataFusion, through the store's
``TableIO``).

Tables: every state table by its name (``runs``, ``bookmarks``, ``processed_files``).
Views: ``current_runs``, each run in its newest status; ``current_bookmarks``, the newest
row per job and context.
"""

from __future__ import annotations

import pyarrow as pa

from state_tables.errors import ReadOnlySqlError
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

#: the plans of queries (DataFusion's names for a logical plan's root); anything else
#: (Dml, CopyTo, CreateView, DropTable, SetVariable, Explain, ...) is refused
_QUERY_PLANS = frozenset({
    "Projection", "Filter", "Sort", "Limit", "Aggregate", "Window", "Join", "Union",
    "Distinct", "SubqueryAlias", "TableScan", "Values", "EmptyRelation", "Unnest",
    "RecursiveQuery", "DescribeTable"})


def run_sql(store: StateStore, statement: str) -> pa.Table:
    """Run one read-only SQL query over the state tables (empty where none was written).

    Whether it only reads is decided by DataFusion's own plan of the statement, not by
    its text. Example::

        rows = run_sql(open_store("data/state"),
                       "SELECT run_seq, status FROM runs WHERE job = 'orders_ingest'")
        rows.to_pylist()  # [{'run_seq': 1, 'status': 'succeeded'}, ...]

    Raises:
        ReadOnlySqlError: the statement would write or change the session, or is more
            than one statement.
    """
    if not statement.strip():
        raise ReadOnlySqlError("sql: the statement is empty; give one query.")
    tables = {name: (store.path(table), table.schema) for name, table in TABLES.items()}
    views = [f"CREATE VIEW {name} AS {body}" for name, body in VIEWS.items()]
    return store.io.query(statement, tables, setup=views, check_plan=_require_query)


def _require_query(plan: str) -> None:
    if plan == "Statements":
        raise ReadOnlySqlError("sql: give one statement only.")
    if plan == "Explain":
        raise ReadOnlySqlError("sql: EXPLAIN is not offered (EXPLAIN ANALYZE would run the "
                               "statement); run the query itself.")
    if plan not in _QUERY_PLANS:
        raise ReadOnlySqlError(
            f"sql: refused, the statement is a {plan}, not a query; deltamark sql is "
            "read-only (SELECT, WITH, VALUES, SHOW, DESCRIBE).")
