"""DQDL's rules on the whole frame: each a metric (RowCount, Mean, Entropy, CustomSql...)
that GX bounds with its own expectation where it has one with Glue's meaning, else a query
whose value GX compares."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from framework.quality.dqdl import nodes, sql
from framework.quality.dqdl.syntax import Condition, DqdlError, Simple
from framework.quality.dqdl.values import DynamicValues
from framework.quality.rules import Rule
from framework.spark.session import quoted

#: the GX expectation bounding each dataset metric GX has with Glue's meaning
_METRIC_EXPECTATIONS = {
    "RowCount": "ExpectTableRowCountToBeBetween",
    "ColumnCount": "ExpectTableColumnCountToBeBetween",
    "Completeness": "ExpectColumnProportionOfNonNullValuesToBeBetween",
    "Mean": "ExpectColumnMeanToBeBetween",
    "Sum": "ExpectColumnSumToBeBetween",
}


class DatasetRules:
    """The rules on the whole frame, for its column types; a method per rule type."""

    def __init__(self, types: Mapping[str, str], values: DynamicValues):
        self.types = types
        self.values = values

    def column_exists(self, node: Simple) -> Rule:
        return nodes.yaml_kind(node, nodes.column(node, condition=False))

    def row_count(self, node: Simple) -> Rule:
        if node.arguments:
            raise DqdlError(f"{node.text}: RowCount takes a comparison only, e.g. RowCount > 0")
        return self.metric(node, {}, "SELECT count(*) FROM {rows}")

    def column_count(self, node: Simple) -> Rule:
        if node.arguments:
            raise DqdlError(f"{node.text}: ColumnCount takes a comparison only")
        return self.metric(node, {}, str(len(self.types)), whole=True)

    def completeness(self, node: Simple) -> Rule:
        column = sql.braced(quoted(nodes.column(node)))
        return self.metric(node, {"column": nodes.column(node)}, (
            f"SELECT avg(CASE WHEN {column} IS NOT NULL THEN 1.0D ELSE 0.0D END) FROM {{rows}}"))

    def mean(self, node: Simple) -> Rule:
        column = sql.braced(quoted(nodes.column(node)))
        return self.metric(node, {"column": nodes.column(node)},
                            f"SELECT avg({column}) FROM {{rows}}")

    def sum(self, node: Simple) -> Rule:
        column = sql.braced(quoted(nodes.column(node)))
        return self.metric(node, {"column": nodes.column(node)},
                            f"SELECT sum({column}) FROM {{rows}}")

    def standard_deviation(self, node: Simple) -> Rule:
        column = sql.braced(quoted(nodes.column(node)))  # Glue's is the population's
        return self.metric(node, None, f"SELECT stddev_pop({column}) FROM {{rows}}")

    def variance(self, node: Simple) -> Rule:
        column = sql.braced(quoted(nodes.column(node)))
        return self.metric(node, None, f"SELECT var_pop({column}) FROM {{rows}}")

    def entropy(self, node: Simple) -> Rule:
        """-Σ p·ln p over the values' shares of the rows not NULL (Glue's, in nats)."""
        column = sql.braced(quoted(nodes.column(node)))
        counts = (f"SELECT count(*) AS n FROM {{rows}} WHERE {column} IS NOT NULL "
                  f"GROUP BY {column}")
        return self.metric(node, None, (
            f"SELECT -sum((n / t) * ln(n / t)) FROM ({counts}) AS counts CROSS JOIN "
            f"(SELECT CAST(count({column}) AS DOUBLE) AS t FROM {{rows}}) AS total"))

    def distinct_values_count(self, node: Simple) -> Rule:
        column = sql.braced(quoted(nodes.column(node)))  # NULL counts as a value, as in Glue
        return self.metric(node, None, (
            f"SELECT count(DISTINCT {column}) + max(CASE WHEN {column} IS NULL THEN 1 "
            f"ELSE 0 END) FROM {{rows}}"))

    def uniqueness(self, node: Simple) -> Rule:
        """Glue's uniqueness: the share of the rows (not all NULL) whose values no other
        row has."""
        return self.metric(node, None, self._frequencies(node, "sum(n)"))

    def unique_value_ratio(self, node: Simple) -> Rule:
        """The share of the distinct values (not NULL) that only one row has."""
        return self.metric(node, None, self._frequencies(node, "count(*)"))

    def _frequencies(self, node: Simple, total: str) -> str:
        columns = [sql.braced(quoted(c)) for c in nodes.columns(node, condition=True)]
        present = " OR ".join(f"{c} IS NOT NULL" for c in columns)
        groups = (f"SELECT count(*) AS n FROM {{rows}} WHERE {present} "
                  f"GROUP BY {', '.join(columns)}")
        return f"SELECT CAST(count_if(n = 1) AS DOUBLE) / {total} FROM ({groups}) AS groups"

    def column_correlation(self, node: Simple) -> Rule:
        first, second = (sql.braced(quoted(c)) for c in nodes.columns(node, condition=True,
                                                                    count=2))
        return self.metric(node, None, f"SELECT corr({first}, {second}) FROM {{rows}}")

    def data_freshness(self, node: Simple) -> Rule:
        """Every row's age (hours since its time) meets the comparison: NULL fails."""
        column, condition = nodes.column(node), nodes.comparison(node)
        ages = [nodes.hours(v, node) for v in self.values.resolved(node, condition)]
        age = (f"round((unix_timestamp(current_timestamp()) - unix_timestamp(try_cast("
               f"{sql.braced(quoted(column))} AS TIMESTAMP))) / 3600, 2)")
        fresh = sql.compare(age, condition.operator, ages)
        share = f"SELECT avg(CASE WHEN {fresh} THEN 1.0D ELSE 0.0D END) FROM {{rows}}"
        return self.metric(node, None, share, condition=Condition("=", (1.0,)))

    def custom_sql(self, node: Simple) -> Rule:
        if len(node.arguments) != 1:
            raise DqdlError(f"{node.text}: CustomSql takes one query, e.g. CustomSql "
                            '"select count(*) from primary" > 0')
        [query] = node.arguments
        if not re.search(r"\bprimary\b", query, re.I):
            raise DqdlError(f"{node.text}: the query must read the table 'primary'")
        braced = re.sub(r"\bprimary\b", "{batch}", sql.braced(query), flags=re.I)
        if node.condition is not None:
            return self.metric(node, None, braced)
        # the rows the query returns pass; the others fail (matched on the columns it
        # returns, NULLs alike)
        return self._custom_rows(node, braced)

    def _custom_rows(self, node: Simple, query: str) -> Rule:
        names = re.findall(r"(?is)^\s*select\s+(.*?)\s+from\s", sql.unbraced(query))
        columns = [c.strip().strip("`") for c in names[0].split(",")] if names else []
        known = {c.lower() for c in self.types}
        if not columns or not all(c.lower() in known for c in columns):
            raise DqdlError(f"{node.text}: a CustomSql without a comparison selects columns"
                            " of primary (the rows it returns pass), e.g. CustomSql \"select "
                            "id from primary where amount > 0\"")
        on = " AND ".join(f"all_rows.{sql.braced(quoted(c))} <=> passed.{sql.braced(quoted(c))}"
                          for c in columns)
        failing = (f"SELECT all_rows.* FROM {{batch}} AS all_rows LEFT ANTI JOIN ({query}) "
                   f"AS passed ON {on}")
        if node.threshold is None:
            return Rule(node.kind, node.text, (("UnexpectedRowsExpectation",
                                                {"unexpected_rows_query": failing}),))
        share = (f"SELECT 1.0 - CAST((SELECT count(*) FROM ({failing}) AS failing) AS DOUBLE)"
                 f" / (SELECT count(*) FROM {{batch}})")
        return sql.scalar_rule(node, share, node.threshold, self.values)

    def column_names_match_pattern(self, node: Simple) -> Rule:
        [pattern] = nodes.strings(node, 1, 'ColumnNamesMatchPattern "[a-z_]+"')
        if node.condition is not None:
            raise DqdlError(f"{node.text}: ColumnNamesMatchPattern takes no comparison")
        names = list(self.types)
        matching = sum(1 for n in names if re.search(pattern, n))
        ratio = matching / len(names) if names else 1.0
        return sql.scalar_rule(node, f"SELECT {ratio!r}", Condition("=", (1.0,)),
                               self.values, metric=True)

    # --- metrics and comparisons ------------------------------------------------------

    def metric(self, node: Simple, domain: Mapping[str, Any] | None, query: str, *,
                whole: bool = False, condition: Condition | None = None) -> Rule:
        """A rule on a dataset metric: GX's expectation of it where it has one with Glue's
        meaning (``domain``: its column; no ``where``, a range), else ``query`` (over
        ``{rows}``, the rows ``where`` keeps) compared by GX."""
        condition = condition or nodes.comparison(node)
        values = self.values.resolved(node, condition)
        expectation = _METRIC_EXPECTATIONS.get(node.kind)
        if (expectation and domain is not None and node.where is None
                and condition.operator in (">", ">=", "<", "<=", "=", "between")
                and all(sql.is_number(v) for v in values)):
            bounds = _bounds(condition.operator, values, whole=whole)
            return Rule(node.kind, node.text, ((expectation, {**domain, **bounds}),))
        if not all(sql.is_number(v) for v in values):
            raise DqdlError(f"{node.text}: {node.kind} is compared with numbers")
        query = query.replace("{rows}", sql.rows(node))
        if not query.lstrip().upper().startswith("SELECT"):
            query = f"SELECT {query}"
        return sql.scalar_rule(node, query, Condition(condition.operator, tuple(values)),
                               self.values, metric=True)


def _bounds(operator: str, values: Sequence[Any], *, whole: bool) -> dict[str, Any]:
    """GX's min/max (strict or not) for a comparison; ``whole`` counts take integer
    bounds (ColumnCount's expectation has no strict bounds)."""
    value = values[0]
    low = high = None
    strict_low = strict_high = False
    if operator in (">", ">="):
        low, strict_low = value, operator == ">"
    elif operator in ("<", "<="):
        high, strict_high = value, operator == "<"
    elif operator == "=":
        low = high = value
    else:
        (low, high), strict_low, strict_high = values, True, True
    if not whole:
        return {"min_value": low, "max_value": high, "strict_min": strict_low,
                "strict_max": strict_high}
    if low is not None:
        low = math.floor(low) + 1 if strict_low else math.ceil(low)
    if high is not None:
        high = math.ceil(high) - 1 if strict_high else math.floor(high)
    return {"min_value": low, "max_value": high}
