"""Incremental database sources over JDBC: read the rows a table gained since the last run.

A context's bookmark is a position in the order of its bookmark keys: one column, or
several compared column by column (a compound key). With ``asc`` new rows have higher
keys, with ``desc`` lower ones. The keys default to the table's primary key.

- A run pins the end of its range when it plans the read: rows inserted while it runs
  belong to the next run.
- Rows that share the key values at the end of the range are told apart by the primary
  key: the bookmark lists the ones read, so the next run reads the others and none twice.
- With ``lookback``, a run re-reads the rows whose first key lies within that distance
  before the bookmark, so an ``updated_at`` key also sees updated rows and late commits.
  Those rows are read again: write them with ``mode="merge"`` on the primary key.
- Rows whose bookmark keys are NULL are never read.
- A context without a bookmark starts at ``initial_value`` of the first key (that value
  included), as dlt's ``initial_value``; with ``end_value`` too the read is a backfill of
  that range (the end excluded) that neither reads nor moves the bookmark.
- ``bounded_rows`` caps a run at about that many rows in key order (whole key values: the
  rows sharing the last one's come along); later runs read the rest.

The few queries a plan needs (columns, primary key, the range's end, its row count) run on
the Spark driver's JVM through the JDBC driver; the rows come through Spark's JDBC reader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict, cast

from framework.errors import DatabaseError
from framework.jdbc import dialect
from framework.jdbc.client import connect, java_message, spark_errors
from framework.jdbc.connection import Connection
from framework.jdbc.database import Column, Database, shorten
from framework.jdbc.dbapi import python_connection
from framework.sources import Backlog
from framework.spark.session import default_parallelism

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from framework.sources import Bookmarks

__all__ = ["SOURCE_KIND", "JdbcPlan", "JdbcSource", "JdbcState", "description", "new_items",
           "plan_jdbc", "read_jdbc"]

SOURCE_KIND = "jdbc"

SortOrder = Literal["asc", "desc"]

#: Rows sharing the key values at a range's end are listed in the bookmark, up to this many.
MAX_BOUNDARY_ROWS = 10_000
#: Without partitioning options, a read on a numeric key gets a partition per this many rows.
AUTO_PARTITION_ROWS = 100_000


@dataclass(frozen=True)
class JdbcSource:
    """What ``JobContext.read_jdbc`` asks for (see its docstring)."""

    connection: Connection
    table: str | None = None
    query: str | None = None
    keys: tuple[str, ...] = ()
    order: SortOrder = "asc"
    primary_key: tuple[str, ...] = ()
    lookback: int | float | Decimal | timedelta | None = None
    partition_column: str | None = None
    num_partitions: int | None = None
    lower_bound: Any = None
    upper_bound: Any = None
    fetch_size: int = 50_000
    options: Mapping[str, str] = field(default_factory=dict)
    initial_value: Any = None
    end_value: Any = None
    bounded_rows: int | None = None

    @property
    def display(self) -> str:
        what = f"table {self.table}" if self.table else "query"
        return f"{self.connection.display} ({what})"

    @property
    def relation(self) -> str:
        """The rows as a SQL FROM item: the table, or the query as a subquery (without a
        trailing ``;``, and closed on a line of its own, past a trailing ``--`` comment)."""
        if self.table:
            return self.table
        assert self.query is not None  # problems(), checked before any read, requires one
        return f"({self.query.strip().rstrip(';').rstrip()}\n) deltamark_query"

    def problems(self) -> list[str]:
        problems = []
        if bool(self.table) == bool(self.query):
            problems.append("give either table or query")
        if self.order not in ("asc", "desc"):
            problems.append(f"sort order must be asc or desc, not {self.order!r}")
        if self.query and not self.keys:
            problems.append("a query has no primary key: give keys")
        if self.lookback is not None and not isinstance(
                self.lookback, int | float | Decimal | timedelta):
            problems.append("lookback must be a number (numeric keys) or a timedelta")
        if self.num_partitions is not None and self.num_partitions < 1:
            problems.append("num_partitions must be at least 1")
        if (self.lower_bound is None) != (self.upper_bound is None):
            problems.append("give both lower_bound and upper_bound, or neither")
        if self.partition_column and self.num_partitions is None:
            problems.append("partition_column needs num_partitions")
        if self.end_value is not None and self.initial_value is None:
            problems.append("end_value needs initial_value (a backfill of that key range)")
        if self.bounded_rows is not None and (
                not isinstance(self.bounded_rows, int) or isinstance(self.bounded_rows, bool)
                or self.bounded_rows < 1):
            problems.append(f"bounded_rows must be a positive integer, not "
                            f"{self.bounded_rows!r}")
        elif self.bounded_rows is not None and self.end_value is not None:
            problems.append("bounded_rows does not cap a backfill (end_value): it is read in "
                            "one run")
        return problems

    @property
    def backfill(self) -> bool:
        """A read of the range ``initial_value`` to ``end_value`` that leaves the bookmark
        alone."""
        return self.end_value is not None



@dataclass(frozen=True)
class Position:
    """A place in key order: key values, and the rows at exactly those values read so far
    (their row ids; empty when the keys identify rows)."""

    values: tuple[str, ...]
    boundary: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class JdbcState:
    """A database context's bookmark: the key ``position`` it read up to; with the
    rows its run read (after ``from_``, ``where``), pinned for a replay."""

    kind: ClassVar[str] = SOURCE_KIND
    state_version: ClassVar[int] = 1

    source: str
    keys: tuple[str, ...]
    order: SortOrder
    row_id: tuple[str, ...]
    lookback: bool
    position: Position | None
    from_: Position | None = field(metadata={"key": "from"})
    where: str
    rows: int
    partitioning: tuple[str, str, str, int] | None = None

    def describe(self) -> list[tuple[str, str]]:
        keys = ", ".join(self.keys)
        lines = [("source", self.source),
                 ("keys", f"{keys} ({self.order}); rows identified by "
                  f"{', '.join(self.row_id)}")]
        if self.position is None:
            return [*lines, ("processed up to", "nothing (the source was empty)")]
        lines.append(("processed up to", f"{keys} = {', '.join(self.position.values)} (the "
                      "next run reads the rows after it" + (
                          ", and re-reads a lookback before it)" if self.lookback else ")")))
        if self.position.boundary:
            lines.append(("at that value", f"{len(self.position.boundary)} rows read, by "
                          f"{', '.join(self.row_id)}; others at it are read next"))
        return [*lines, ("last run", f"{self.rows} rows")]


@dataclass(frozen=True)
class JdbcPlan:
    """The rows one run reads: ``WHERE where`` over the source, pinned when planned.

    ``to`` is the bookmark the run commits (``advance``); ``after`` the one it started from.
    """

    source: str
    keys: tuple[str, ...]
    order: SortOrder
    row_id: tuple[str, ...]
    after: Position | None
    to: Position | None
    where: str
    rows: int
    partitioning: tuple[str, str, str, int] | None = None
    lookback: bool = False
    advance: bool = False
    #: the key and row-id columns as the database types them (not in a replay's plan)
    columns: tuple[Column, ...] = ()
    #: the rows a cap (``bounded_rows``) left for later runs
    backlog: int = 0

    def state(self) -> JdbcState:
        """The bookmark to commit; it also pins the rows for a replay."""
        return JdbcState(source=self.source, keys=self.keys, order=self.order,
                         row_id=self.row_id, lookback=self.lookback, position=self.to,
                         from_=self.after, where=self.where, rows=self.rows,
                         partitioning=self.partitioning)

    @classmethod
    def pinned(cls, state: JdbcState) -> JdbcPlan:
        return cls(source=state.source, keys=state.keys, order=state.order,
                   row_id=state.row_id, after=state.from_, to=state.position,
                   where=state.where, rows=state.rows, lookback=state.lookback,
                   advance=True, partitioning=state.partitioning)

    def counts(self) -> dict[str, int]:
        return {"rows": self.rows, "backlog": self.backlog} if self.backlog else {
            "rows": self.rows}



# --- planning -----------------------------------------------------------------------------

def plan_jdbc(spark: SparkSession, source: JdbcSource, *, start: JdbcState | None,
              end: JdbcState | None = None, advance: bool) -> JdbcPlan:
    """Pin the rows after ``start``'s position (when None: from ``initial_value``, or all)
    up to ``end``'s position, or up to the source's last row now (``end_value``: before
    it; ``bounded_rows``: about that many rows on).

    Raises:
        DatabaseError: the connection or a query failed, a key column does not exist,
            no keys were given for a table without a primary key, or the bookmark was
            taken with other keys.
    """
    with connect(spark, source.connection) as db:
        columns = db.columns(source.relation)
        by_name = {c.name.lower(): c for c in columns}
        primary_key = source.primary_key or (db.primary_key(source.table) if source.table
                                             else ())
        key_names = source.keys or primary_key
        if not key_names:
            raise DatabaseError(source.display, "has no primary key: give keys (the bookmark "
                                "columns, e.g. an id or updated_at)")
        keys = [_column(by_name, name, source) for name in key_names]
        row_id = [_column(by_name, name, source) for name in primary_key] or keys
        sql = _Sql(source.connection.dialect, keys, row_id, source.order)
        after = _checked_position(start, source, sql)
        bounds = sql.bounds(None if after else source.initial_value, source.end_value)
        to = (_checked_position(end, source, sql) if end is not None
              else _pin_end(db, source, sql, after, bounds))
        where = " AND ".join([*sql.not_null(), *bounds, sql.after(after, source.lookback),
                              sql.up_to(to)])
        backlog = 0
        if source.bounded_rows is not None and end is None and to is not None:
            backlog = int(cast(str, db.rows(
                f"SELECT COUNT(*) FROM {source.relation} WHERE "
                f"{' AND '.join([*sql.not_null(), *bounds, sql.after(to, None)])}")[0][0]))
        partition = (_column(by_name, source.partition_column, source)
                     if source.partition_column else
                     keys[0] if source.num_partitions or keys[0].numeric else None)
        rows, partitioning = _count(db, source, where, partition,
                                    parallelism=default_parallelism(spark))
    return JdbcPlan(source=source.display, keys=sql.key_names, order=source.order,
                    row_id=sql.row_id_names, after=after, to=to, where=where, rows=rows,
                    partitioning=partitioning, lookback=source.lookback is not None,
                    advance=advance, columns=tuple(dict.fromkeys([*keys, *row_id])),
                    backlog=backlog)


def _column(by_name: Mapping[str, Column], name: str, source: JdbcSource) -> Column:
    found = by_name.get(name.strip('"`').lower())
    if found is None:
        raise DatabaseError(source.display, f"has no column {name!r} (columns: "
                            f"{', '.join(c.name for c in by_name.values())})")
    return found


def _checked_position(state: JdbcState | None, source: JdbcSource, sql: _Sql
                      ) -> Position | None:
    if state is None:
        return None
    if state.keys != sql.key_names or state.order != source.order:
        raise DatabaseError(source.display, f"the bookmark was taken over keys "
                            f"{list(state.keys)} ({state.order}), not {list(sql.key_names)} "
                            f"({source.order}). Reset the context to read with other keys.")
    position = state.position
    if position is not None and position.boundary and not sql.needs_boundary:
        position = replace(position, boundary=())
    return position


def _pin_end(db: Database, source: JdbcSource, sql: _Sql, after: Position | None,
             bounds: Sequence[str]) -> Position | None:
    """The last position now, at or past ``after`` (``after`` when no row is past it)
    within ``bounds``; with ``bounded_rows``, that of the bounded_rows-th row past it."""
    values = _nth_values(db, source, sql, [*sql.not_null(), *bounds, sql.after(after, None)])
    if values is None:
        values = _last_values(db, source, sql, [*sql.not_null(), *bounds, *(
            [sql.at_or_past(after)] if after else [])])
    if values is None:
        return after
    conditions = [*sql.not_null(), *(f"{sql.quote(key.name)} = {sql.literal(value, key)}"
                                     for key, value in zip(sql.keys, values, strict=True))]
    boundary: tuple[tuple[str, ...], ...] = ()
    if sql.needs_boundary and source.lookback is None:
        ids = ", ".join(sql.quote(c.name) for c in sql.row_id)
        rows = db.rows(f"SELECT {ids} FROM {source.relation} WHERE "
                       f"{' AND '.join(conditions)}", limit=MAX_BOUNDARY_ROWS + 1)
        if len(rows) > MAX_BOUNDARY_ROWS:
            raise DatabaseError(source.display, f"more than {MAX_BOUNDARY_ROWS} rows share the "
                                f"key values {values}: make the keys tell rows apart (add a "
                                "column to keys), or read with lookback and merge")
        boundary = tuple(sorted(tuple(v or "" for v in row) for row in rows))
    return Position(tuple(values), boundary)


def _last_values(db: Database, source: JdbcSource, sql: _Sql, conditions: list[str]
                 ) -> list[str] | None:
    """The keys' values of the last row in key order among ``conditions``' (None: none)."""
    values: list[str] = []
    aggregate = "MAX" if source.order == "asc" else "MIN"
    for key in sql.keys:
        rows = db.rows(f"SELECT {aggregate}({sql.quote(key.name)}) FROM "
                       f"{source.relation} WHERE {' AND '.join(conditions)}")
        value = rows[0][0] if rows else None
        if value is None:
            return None
        values.append(value)
        conditions = [*conditions, f"{sql.quote(key.name)} = {sql.literal(value, key)}"]
    return values


def _nth_values(db: Database, source: JdbcSource, sql: _Sql, conditions: list[str]
                ) -> list[str] | None:
    """The keys' values of the bounded_rows-th row in key order among ``conditions``'
    (None: no cap, or fewer rows)."""
    if source.bounded_rows is None:
        return None
    keys = ", ".join(sql.quote(k.name) for k in sql.keys)
    order = ", ".join(f"{sql.quote(k.name)} {source.order.upper()}" for k in sql.keys)
    rows = db.rows(dialect.nth_row(
        source.connection.dialect, f"SELECT {keys} FROM {source.relation} WHERE "
        f"{' AND '.join(conditions)} ORDER BY {order}", source.bounded_rows))
    return [cast(str, v) for v in rows[0]] if rows else None


def _count(db: Database, source: JdbcSource, where: str, partition: Column | None, *,
           parallelism: int) -> tuple[int, tuple[str, str, str, int] | None]:
    """The plan's row count, and its parallel-read partitioning (column, lower, upper, n):
    as asked, or on a numeric first key one partition per AUTO_PARTITION_ROWS rows, up to
    the session's parallelism."""
    quoted = partition and dialect.quote(source.connection.dialect, partition.name)
    bounds = f", MIN({quoted}), MAX({quoted})" if partition else ""
    rows = db.rows(f"SELECT COUNT(*){bounds} FROM {source.relation} WHERE {where}")
    count = int(cast(str, rows[0][0]))  # COUNT(*) is never NULL
    partitions = source.num_partitions or min(parallelism, count // AUTO_PARTITION_ROWS)
    if partition is None or count == 0 or partitions < 2:
        return count, None
    if source.lower_bound is not None:
        lower, upper = str(source.lower_bound), str(source.upper_bound)
    else:
        lower, upper = (_spark_bound(v, partition) for v in rows[0][1:])
    return count, (partition.name, lower, upper, partitions)


def _spark_bound(value: str | None, column: Column) -> str:
    """A bound as Spark's partitionColumn reader parses it (integers, UTC timestamps)."""
    if value is None:
        return "0"
    if column.numeric:
        return str(int(Decimal(value)))
    parsed = _parse_temporal(value)
    if isinstance(parsed, datetime) and parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return str(parsed)


def _parse_temporal(value: str) -> date | datetime:
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return date.fromisoformat(value)


class _Sql:
    """The SQL of a read's range: key comparisons and literals in the source's dialect."""

    def __init__(self, dialect: str, keys: Sequence[Column], row_id: Sequence[Column],
                 order: SortOrder):
        self.dialect = dialect
        self.keys = tuple(keys)
        self.row_id = tuple(row_id)
        self.key_names = tuple(c.name for c in keys)
        self.row_id_names = tuple(c.name for c in row_id)
        self.past, self.before = (">", "<") if order == "asc" else ("<", ">")
        #: keys that do not contain the row id may repeat: list the rows at the boundary
        self.needs_boundary = not set(self.row_id_names) <= set(self.key_names)

    def quote(self, name: str) -> str:
        return dialect.quote(self.dialect, name)

    def literal(self, value: str, column: Column) -> str:
        if column.numeric and _is_number(value):
            return value
        return dialect.literal(self.dialect, value, column)

    def not_null(self) -> list[str]:
        return [f"{self.quote(c.name)} IS NOT NULL" for c in self.keys]

    def _compare(self, values: Sequence[str], op: str, *, inclusive: bool = False) -> str:
        """Lexicographic ``keys op values`` (``op`` is ``<`` or ``>``; ``inclusive`` adds
        ``=``): ``a > 1 OR (a = 1 AND b > 2)``, or simply ``a > 1`` for one key."""
        terms = []
        for i, key in enumerate(self.keys):
            last_op = f"{op}=" if inclusive and i == len(self.keys) - 1 else op
            terms.append(" AND ".join(
                [*(f"{self.quote(k.name)} = {self.literal(v, k)}"
                   for k, v in zip(self.keys[:i], values[:i], strict=True)),
                 f"{self.quote(key.name)} {last_op} {self.literal(values[i], key)}"]))
        if len(terms) == 1:
            return terms[0]
        return "(" + " OR ".join(f"({t})" for t in terms) + ")"

    def _equal(self, values: Sequence[str]) -> str:
        return "(" + " AND ".join(f"{self.quote(k.name)} = {self.literal(v, k)}"
                                  for k, v in zip(self.keys, values, strict=True)) + ")"

    def _among(self, ids: Sequence[Sequence[str]]) -> str:
        if len(self.row_id) == 1:
            column = self.row_id[0]
            listed = ", ".join(self.literal(i[0], column) for i in ids)
            return f"{self.quote(column.name)} IN ({listed})"
        return "(" + " OR ".join(
            "(" + " AND ".join(f"{self.quote(c.name)} = {self.literal(v, c)}"
                               for c, v in zip(self.row_id, i, strict=True)) + ")"
            for i in ids) + ")"

    def bounds(self, initial: Any, end: Any) -> list[str]:
        """The first key from ``initial`` (included) and before ``end``, where given."""
        key, found = self.keys[0], []
        for value, op in ((initial, f"{self.past}="), (end, self.before)):
            if value is not None:
                found.append(f"{self.quote(key.name)} {op} {self.literal(str(value), key)}")
        return found

    def at_or_past(self, position: Position) -> str:
        return self._compare(position.values, self.past, inclusive=True)

    def after(self, position: Position | None, lookback: Any) -> str:
        """Rows past ``position``: the ones at it not yet read too; with ``lookback`` every
        row from that far before it."""
        if position is None:
            return "1=1"
        if lookback is not None:
            key = self.keys[0]
            start = _moved(position.values[0], key, lookback, back=self.past == ">")
            op = ">=" if self.past == ">" else "<="
            return f"{self.quote(key.name)} {op} {self.literal(start, key)}"
        if not position.boundary:
            return self._compare(position.values, self.past)
        return (f"({self._compare(position.values, self.past)} OR "
                f"({self._equal(position.values)} AND NOT {self._among(position.boundary)}))")

    def up_to(self, position: Position | None) -> str:
        """Rows up to ``position``: at it, only the rows it lists (when it lists them)."""
        if position is None:
            return "1=0"
        if not position.boundary:
            return self._compare(position.values, self.before, inclusive=True)
        return (f"({self._compare(position.values, self.before)} OR "
                f"({self._equal(position.values)} AND {self._among(position.boundary)}))")


def _is_number(value: str) -> bool:
    try:
        return Decimal(value).is_finite()
    except InvalidOperation:
        return False


def _moved(value: str, key: Column, lookback: Any, *, back: bool) -> str:
    """``value`` moved ``lookback`` back (or forward, for descending keys)."""
    sign = -1 if back else 1
    if key.numeric and _is_number(value):
        if isinstance(lookback, timedelta):
            raise DatabaseError(key.name, "a numeric key takes a numeric lookback, not a "
                                "timedelta")
        return str(Decimal(value) + sign * Decimal(str(lookback)))
    if not isinstance(lookback, timedelta):
        raise DatabaseError(key.name, "a date or time key takes a timedelta lookback")
    try:
        return str(_parse_temporal(value) + sign * lookback)
    except ValueError:
        raise DatabaseError(key.name, f"lookback needs a numeric, date or time key; "
                            f"{value!r} is neither") from None


# --- reading ------------------------------------------------------------------------------

def read_jdbc(spark: SparkSession, source: JdbcSource, plan: JdbcPlan) -> DataFrame:
    """The plan's rows through Spark's JDBC reader, in parallel when partitioned.

    Raises:
        DatabaseError: the driver is missing or the database refused the read.
    """
    connection = source.connection
    options = {"url": connection.spark_url(), "driver": connection.driver_class,
               "dbtable": f"(SELECT * FROM {source.relation} WHERE {plan.where}) deltamark_read",
               "fetchsize": str(source.fetch_size), **connection.jdbc_properties()}
    if plan.partitioning is not None:
        column, lower, upper, partitions = plan.partitioning
        options |= {"partitionColumn": column, "lowerBound": lower, "upperBound": upper,
                    "numPartitions": str(partitions)}
    reader = spark.read.format("jdbc").options(**{**options, **source.options})  # user wins
    try:
        return reader.load()
    except spark_errors() as exc:
        raise DatabaseError(connection.display, f"cannot read: {java_message(exc)}") from None


# --- planning ahead, without Spark ----------------------------------------------------------


class JdbcDescription(TypedDict):
    """A database read as its run records it (``Run.sources``): the connection's name, the
    relation, the key order and columns, and each column as the database typed it
    (``[name, jdbc_type, type_name]``)."""

    kind: str
    connection: str
    relation: str
    order: SortOrder
    keys: list[str]
    row_id: list[str]
    columns: list[list[Any]]


def description(connection: str, source: JdbcSource, plan: JdbcPlan
                ) -> JdbcDescription | None:
    """What planning the read again without Spark needs (``framework.run.preflight``), as plain
    data; None for a read that re-reads rows (lookback) or a URL that may hold credentials.
    ``connection`` is the name (or URL) the job gave."""
    if (source.lookback is not None or not plan.columns
            or (connection.startswith("jdbc:") and source.connection.dialect != "sqlite")):
        return None
    return {"kind": SOURCE_KIND, "connection": connection, "relation": source.relation,
            "order": source.order, "keys": list(plan.keys), "row_id": list(plan.row_id),
            "columns": [[c.name, c.jdbc_type, c.type_name] for c in plan.columns]}


def new_items(context: str, description: JdbcDescription, bookmarks: Bookmarks,
              connections: Callable[[str], Connection]) -> Backlog | None:
    """Whether the source a run described has a row past ``context``'s bookmark (a
    count of 1, not exact: at least one row; else 0); None when no Python driver here
    reaches the database (SQLite always; PostgreSQL with psycopg):
    ``framework.sources.SourceKind``.

    Raises:
        DatabaseError: the query failed.
    """
    state = bookmarks.state(context, SOURCE_KIND)
    if state is not None and (list(state.keys) != description["keys"]
                              or state.order != description["order"]):
        return None  # the run refuses the bookmark: let it say so
    connection = connections(description["connection"])
    by_name = {name: Column(name, jdbc_type, type_name)
               for name, jdbc_type, type_name in description["columns"]}
    sql = _Sql(connection.dialect, [by_name[k] for k in description["keys"]],
               [by_name[k] for k in description["row_id"]], description["order"])
    after = state.position if state else None
    where = " AND ".join([*sql.not_null(), sql.after(after, None)])
    query = f"SELECT 1 FROM {description['relation']} WHERE {where} LIMIT 1"
    with python_connection(connection) as db:
        if db is None:
            return None
        try:
            return Backlog(len(db.execute(query).fetchall()), "row", exact=False)
        except Exception as exc:  # noqa: BLE001 - each driver has its own error classes
            raise DatabaseError(connection.display, f"{exc} (in: {shorten(query)})") from None


