"""DQDL's row-level rules (IsComplete, ColumnValues, ColumnLength, ColumnDataType, IsUnique,
IsPrimaryKey): each a Spark SQL test of a row that GX counts the rows failing."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from framework.quality.dqdl import nodes, sql
from framework.quality.dqdl.syntax import Condition, DqdlError, Keyword, Simple
from framework.quality.dqdl.values import DynamicValues
from framework.quality.rules import Rule
from framework.spark.session import quoted

#: ColumnDataType's type names -> Spark's
_DATA_TYPES = {"boolean": "boolean", "date": "date", "timestamp": "timestamp",
               "integer": "int", "int": "int", "long": "bigint", "bigint": "bigint",
               "short": "smallint", "byte": "tinyint", "double": "double", "float": "float",
               "string": "string"}


class RowRules:
    """The row-level rules, for a frame's column types; a method per rule type."""

    def __init__(self, types: Mapping[str, str], values: DynamicValues):
        self.types = types
        self.values = values

    def is_complete(self, node: Simple) -> Rule:
        column = nodes.column(node, condition=False)
        return self._row(node, f"{quoted(column)} IS NOT NULL")

    def column_values(self, node: Simple) -> Rule:
        column, condition = nodes.column(node), nodes.comparison(node)
        return self._row(node, self._values_test(node, column, condition))

    def column_length(self, node: Simple) -> Rule:
        column, condition = nodes.column(node), nodes.comparison(node)
        values = self.values.resolved(node, condition)
        if condition.operator in ("matches", "not matches") or not all(
                sql.is_number(v) for v in values):
            raise DqdlError(f"{node.text}: ColumnLength compares the length with numbers")
        # Glue counts a NULL as a string of length 0
        return self._row(node, sql.compare(f"coalesce(length({quoted(column)}), 0)",
                                        condition.operator, values))

    def column_data_type(self, node: Simple) -> Rule:
        column, condition = nodes.column(node), nodes.comparison(node)
        if condition.operator not in ("=", "!=") or not isinstance(condition.values[0], str):
            raise DqdlError(f"{node.text}: ColumnDataType compares with = or != a type name,"
                            ' e.g. ColumnDataType "id" = "INTEGER"')
        name = condition.values[0].strip().lower()
        spark_type = _DATA_TYPES.get(name) or (
            name if re.fullmatch(r"decimal\(\s*\d+\s*,\s*\d+\s*\)", name) else None)
        if spark_type is None:
            raise DqdlError(f"{node.text}: no type {condition.values[0]!r} (types: "
                            f"{', '.join(sorted(_DATA_TYPES))}, DECIMAL(p,s))")
        value = quoted(column)
        if "format" in node.tags and spark_type in ("date", "timestamp"):
            test = f"try_to_timestamp({value}, {sql.literal(str(node.tags['format']))})"
        else:
            test = f"try_cast({value} AS {spark_type})"
        fits = f"{test} IS NOT NULL"
        return self._row(node, fits if condition.operator == "=" else f"NOT ({fits})")

    def _row(self, node: Simple, predicate: str) -> Rule:
        """A row-level rule testing ``predicate`` on the rows ``where`` keeps (the others
        pass); with a threshold, a rule on the share of those rows meeting it."""
        if node.threshold is None:
            if node.where is not None:
                predicate = f"NOT coalesce(({node.where}), false) OR ({predicate})"
            return sql.row_rule(node.kind, node.text, predicate)
        share = f"avg(CASE WHEN {sql.braced(predicate)} THEN 1.0D ELSE 0.0D END)"
        return sql.scalar_rule(node, f"SELECT {share} FROM {sql.rows(node)}", node.threshold,
                               self.values)

    def is_unique(self, node: Simple) -> Rule:
        if node.where is None and len(node.arguments) == 1:
            return nodes.yaml_kind(node, nodes.column(node, condition=False))
        return self._unique_rows(node, primary=False)

    def is_primary_key(self, node: Simple) -> Rule:
        if node.where is None:
            return nodes.yaml_kind(node, list(nodes.columns(node)))
        return self._unique_rows(node, primary=True)

    def _unique_rows(self, node: Simple, *, primary: bool) -> Rule:
        """IsUnique of several columns, or either rule with ``where``: GX counts the rows
        (of those ``where`` keeps) whose values others have too (or, for a key, NULL)."""
        columns = [sql.braced(quoted(c)) for c in nodes.columns(node)]
        keys = ", ".join(columns)
        shared = f"count(*) OVER (PARTITION BY {keys})"
        nulls = " OR ".join(f"{c} IS NULL" for c in columns)
        query = (f"SELECT * FROM (SELECT *, {shared} AS __deltamark_rows FROM "
                 f"{sql.rows(node)}) AS keyed WHERE __deltamark_rows > 1"
                 + (f" OR {nulls}" if primary else ""))
        return Rule(node.kind, node.text, (("UnexpectedRowsExpectation",
                                            {"unexpected_rows_query": query}),))

    def _values_test(self, node: Simple, column: str, condition: Condition) -> str:
        """ColumnValues' row test: NULLs fail but for != and not in (a NULL in the list
        turns that round); NULL, EMPTY and WHITESPACES_ONLY name those values."""
        values = self.values.resolved(node, condition)
        name = quoted(column)
        keywords = [v for v in values if isinstance(v, Keyword)]
        plain = [v for v in values if not isinstance(v, Keyword)]
        operator = condition.operator
        if operator in ("matches", "not matches"):
            [pattern] = plain
            test = f"{name} RLIKE {sql.literal('^(?:' + str(pattern) + ')$')}"
            found = test if operator == "matches" else f"NOT ({test})"
            return f"{name} IS NOT NULL AND ({found})"
        if keywords or operator in ("=", "!=", "in", "not in"):
            positive = operator in ("=", "in")
            tests = [sql.keyword(name, k) for k in keywords]
            if plain:
                operand = self._operand(column, plain)
                tests.append(f"{operand} IN ({', '.join(sql.constant(v) for v in plain)})"
                             if len(plain) > 1 or operator in ("in", "not in")
                             else f"{operand} = {sql.constant(plain[0])}")
            matched = " OR ".join(f"({t})" for t in tests)
            null_listed = any(k.name == "NULL" for k in keywords)
            if positive:
                return matched if null_listed else f"{name} IS NOT NULL AND ({matched})"
            if null_listed:
                return f"{name} IS NOT NULL AND NOT ({matched})"
            return f"{name} IS NULL OR NOT ({matched})"
        operand = self._operand(column, values)
        test = sql.compare(operand, operator, [sql.constant(v) for v in values], literal=True)
        return f"{name} IS NOT NULL AND ({test})"

    def _operand(self, column: str, values: Sequence[Any]) -> str:
        """The column as compared: a string column compared with numbers is read as a
        number (NULL where it is not one, so the row fails); compared with dates, a column
        is read as a date (a ``"yyyy-mm-dd"``) or a time (``now()``)."""
        name = quoted(column)
        if values and all(sql.is_number(v) for v in values) and self.types.get(column) == "string":
            return f"try_cast({name} AS DOUBLE)"
        if values and all(isinstance(v, datetime) for v in values):
            return f"try_cast({name} AS TIMESTAMP)"
        if values and all(isinstance(v, str) and sql.DATE.fullmatch(v) for v in values):
            return f"try_cast({name} AS DATE)"  # a time compares by its day, as in Glue
        return name
