"""Glue's Data Quality Definition Language (DQDL): a ruleset's text, parsed
(``framework.quality.dqdl_syntax``) into rules that great-expectations evaluates with
Glue's semantics.

    Rules = [
        RowCount between (0.9 * avg(last(10))) and (1.1 * avg(last(10))),
        IsComplete "order_id",
        ColumnValues "amount" between 0 and 10000 where "status = 'paid'",
        ColumnValues "email" matches "[^@ ]+@[^@ ]+" with threshold > 0.9,
        StandardDeviation "amount" < 500,
        ReferentialIntegrity "customer_id" "customers.id" = 1.0,
        (ColumnExists "email") and (IsComplete "email")
    ]

Glue's meaning is kept (``docs/glue.md`` lists it rule by rule): ``between`` excludes its
bounds and ``not between`` includes them; ColumnValues fails NULLs but for ``!=`` and
``not in``; ``matches`` matches the whole value; ColumnLength counts a NULL as length 0;
``where`` keeps the rows a rule is said of (rows it leaves out pass a row-level rule); a
composite judges each of its rules on the whole frame, then joins the outcomes (row by row
with ``row_composites``); ``last(k)`` is the rule's metric in the k latest earlier
evaluations of the same ruleset (``history``; 0.0 when there are none).

Each rule is one ``Rule``. Row-level rules (IsComplete, ColumnValues, ColumnLength,
ColumnDataType) carry their test as a Spark SQL predicate, and GX counts the rows failing
it; IsUnique and IsPrimaryKey are GX's uniqueness expectations. A rule on the whole frame
is a GX expectation bounding its metric where GX has one with Glue's meaning (RowCount,
ColumnCount, Completeness, Mean, Sum), else a query that GX runs for the value breaking
the comparison, the value itself being the rule's ``metric_query``.
"""

from __future__ import annotations

import functools
import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from framework.quality.dqdl_syntax import (
    Composite,
    Condition,
    DqdlError,
    Expression,
    Keyword,
    Simple,
    parse_nodes,
)
from framework.quality.rules import Rule, parse_rule
from framework.spark.session import quoted

__all__ = ["DQDL_RULE_TYPES", "DqdlError", "Ruleset", "metric_of", "parse_ruleset"]

#: the DQDL rule types deltamark evaluates
DQDL_RULE_TYPES = (
    "AggregateMatch", "ColumnCorrelation", "ColumnCount", "ColumnDataType", "ColumnExists",
    "ColumnLength", "ColumnNamesMatchPattern", "ColumnValues", "Completeness", "CustomSql",
    "DataFreshness", "DatasetMatch", "DistinctValuesCount", "Entropy", "IsComplete",
    "IsPrimaryKey", "IsUnique", "Mean", "ReferentialIntegrity", "RowCount", "RowCountMatch",
    "SchemaMatch", "StandardDeviation", "Sum", "Uniqueness", "UniqueValueRatio", "Variance")

#: DQDL rule types refused, each with the reason
REFUSED = {
    "DetectAnomalies": "Glue's anomaly detection is AWS's own model; compare with earlier "
                       "runs by a dynamic rule instead, e.g. RowCount between "
                       "0.8 * avg(last(10)) and 1.2 * avg(last(10))",
    **{kind: "it checks S3 objects, not the frame; deltamark's sources track the files they "
             "read (deltamark files ...)"
       for kind in ("FileFreshness", "FileMatch", "FileUniqueness", "FileSize")},
}

#: the rule types that take ``with threshold`` and ``where``, as Glue's parser has them
_THRESHOLD = {"ColumnValues", "ColumnDataType", "CustomSql"}
_WHERE = {"RowCount", "Completeness", "IsComplete", "ColumnDataType", "ColumnCorrelation",
          "Uniqueness", "IsUnique", "Mean", "Sum", "StandardDeviation", "Variance", "Entropy",
          "DistinctValuesCount", "UniqueValueRatio", "ColumnLength", "IsPrimaryKey",
          "ColumnValues", "DataFreshness"}
#: the rules on reference data, each a metric its query computes (``_ReferenceQueries``)
_ON_REFERENCES = {"RowCountMatch", "ReferentialIntegrity", "AggregateMatch", "DatasetMatch",
                  "SchemaMatch"}

#: the GX expectation bounding each dataset metric GX has with Glue's meaning
_METRIC_EXPECTATIONS = {
    "RowCount": "ExpectTableRowCountToBeBetween",
    "ColumnCount": "ExpectTableColumnCountToBeBetween",
    "Completeness": "ExpectColumnProportionOfNonNullValuesToBeBetween",
    "Mean": "ExpectColumnMeanToBeBetween",
    "Sum": "ExpectColumnSumToBeBetween",
}
#: negative comparisons, which NULLs pass in ColumnValues
_NEGATIVE = ("!=", "not in")
#: ColumnDataType's type names -> Spark's
_DATA_TYPES = {"boolean": "boolean", "date": "date", "timestamp": "timestamp",
               "integer": "int", "int": "int", "long": "bigint", "bigint": "bigint",
               "short": "smallint", "byte": "tinyint", "double": "double", "float": "float",
               "string": "string"}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

#: earlier values of a metric (its Glue name), newest first
History = Callable[[str], Sequence[float]]


@dataclass(frozen=True)
class Ruleset:
    """A parsed DQDL ruleset: its rules in order, the Glue name of the metric each rule
    observes (``Dataset.*.RowCount``, ``Column.amount.Mean``), and each dynamic rule as
    evaluated (its ``last(k)`` values filled in)."""

    rules: tuple[Rule, ...]
    metrics: Mapping[str, str]
    #: an ``Analyzers = [...]`` section was given (and left out: it only profiles)
    analyzers: bool = False
    evaluated: Mapping[str, str] | None = None


def parse_ruleset(text: str, column_types: Mapping[str, str], *,
                  history: History | None = None,
                  references: Mapping[str, Mapping[str, str]] | None = None,
                  row_composites: bool = False) -> Ruleset:
    """The rules of a DQDL ruleset, for a frame whose columns have ``column_types`` (Spark
    simple type names). A rule naming a column the frame lacks is one GX reports as not
    evaluated (outcome error), as Glue fails that rule and goes on.

    Args:
        history: earlier values of a metric, for dynamic rules (none: ``last(k)`` is 0.0).
        references: the reference datasets' column types by alias (Glue's
            ``additional_data_sources``), which the rules read as tables of that name.
        row_composites: join a composite's rules row by row (Glue's
            ``compositeRuleEvaluation.method: ROW``), not outcome by outcome.

    Raises:
        DqdlError: a syntax error, or a rule deltamark does not evaluate (naming it).
    """
    nodes = parse_nodes(text)
    builder = _Builder(column_types, history, references or {}, row_composites)
    rules = [builder.rule(node) for node in nodes.rules]
    texts = [r.text for r in rules]
    if duplicated := sorted({t for t in texts if texts.count(t) > 1}):
        raise DqdlError(f"{duplicated[0]}: listed twice")
    return Ruleset(tuple(rules), builder.metrics, nodes.analyzers, builder.values.evaluated)


@functools.lru_cache(maxsize=4096)
def metric_of(rule_text: str) -> str | None:
    """The Glue name of the metric a rule (as ``Rule.text`` has it) observes, if any."""
    try:
        nodes = parse_nodes(f"Rules = [ {rule_text} ]")
    except DqdlError:
        return None
    node = nodes.rules[0]
    return _metric_name(node) if isinstance(node, Simple) else None


def _metric_name(node: Simple) -> str | None:
    """Glue's name for ``node``'s metric (as EvaluatedMetrics reports it)."""
    args, kind = node.arguments, node.kind
    column = args[0] if args else "*"
    names = {
        "RowCount": "Dataset.*.RowCount", "ColumnCount": "Dataset.*.ColumnCount",
        "Completeness": f"Column.{column}.Completeness",
        "IsComplete": f"Column.{column}.Completeness",
        "Uniqueness": f"Column.{column}.Uniqueness" if len(args) < 2
        else f"Multicolumn.{','.join(args)}.Uniqueness",
        "IsUnique": f"Column.{column}.Uniqueness",
        "IsPrimaryKey": f"Column.{column}.Uniqueness" if len(args) < 2
        else f"Multicolumn.{','.join(args)}.Uniqueness",
        "UniqueValueRatio": f"Column.{column}.UniqueValueRatio",
        "DistinctValuesCount": f"Column.{column}.DistinctValuesCount",
        "Entropy": f"Column.{column}.Entropy", "Mean": f"Column.{column}.Mean",
        "Sum": f"Column.{column}.Sum",
        "StandardDeviation": f"Column.{column}.StandardDeviation",
        "Variance": f"Column.{column}.Variance",
        "ColumnCorrelation": f"Multicolumn.{','.join(args)}.ColumnCorrelation",
        "ColumnValues": f"Column.{column}.ColumnValues.Compliance",
        "ColumnLength": f"Column.{column}.ColumnLength.Compliance",
        "ColumnDataType": f"Column.{column}.ColumnDataType.Compliance",
        "DataFreshness": f"Column.{column}.DataFreshness.Compliance",
        "CustomSql": "Dataset.*.CustomSQL" if node.condition else
        "Dataset.*.CustomSQL.Compliance",
        "RowCountMatch": f"Dataset.{column}.RowCountMatch",
        "DatasetMatch": f"Dataset.{column}.DatasetMatch",
        "SchemaMatch": f"Dataset.{column}.SchemaMatch",
        "ReferentialIntegrity": "Column.{}.ReferentialIntegrity".format(
            args[1].split(".", 1)[0] if len(args) > 1 else "*"),
        "AggregateMatch": f"Column.{column}.AggregateMatch",
        "ColumnNamesMatchPattern": "Dataset.*.ColumnNamesPatternMatchRatio",
    }
    return names.get(kind)


class _Builder:
    """Rules from parsed nodes, for a frame's column types."""

    def __init__(self, column_types: Mapping[str, str], history: History | None,
                 references: Mapping[str, Mapping[str, str]], row_composites: bool):
        self.types = dict(column_types)
        self.values = _Values(history)
        self.references = _ReferenceQueries(references, self.types)
        self.row_composites = row_composites
        self.metrics: dict[str, str] = {}

    def rule(self, node: Simple | Composite) -> Rule:
        if isinstance(node, Composite):
            return self._composite(node)
        if node.kind in REFUSED:
            raise DqdlError(f"{node.text}: {node.kind} is not evaluated by deltamark: "
                            f"{REFUSED[node.kind]}")
        if node.kind not in DQDL_RULE_TYPES:
            raise DqdlError(f"{node.text}: {node.kind} is not a DQDL rule type (rule types: "
                            f"{', '.join(DQDL_RULE_TYPES)})")
        if node.threshold is not None and node.kind not in _THRESHOLD:
            raise DqdlError(f"{node.text}: {node.kind} takes no 'with threshold' (in Glue "
                            f"only {', '.join(sorted(_THRESHOLD))} do)")
        if node.where is not None and node.kind not in _WHERE:
            raise DqdlError(f"{node.text}: {node.kind} takes no where clause (as in Glue)")
        if node.kind in _ON_REFERENCES:
            rule = self._metric(node, None, self.references.query(node))
        else:
            rule = getattr(self, f"_{_snake(node.kind)}")(node)
        if (name := _metric_name(node)) is not None:
            self.metrics.setdefault(rule.text, name)
        return rule

    # --- composites -------------------------------------------------------------------

    def _composite(self, node: Composite) -> Rule:
        parts = [self.rule(part) for part in node.parts]
        predicates = [p.row_check[2] if p.row_check is not None and p.row_check[0] == "sql"
                      else None for p in parts]
        joined = None
        if all(predicates):
            joined = f" {node.operator.upper()} ".join(f"({p})" for p in predicates)
        if self.row_composites:
            if joined is None:
                raise DqdlError(f"{node.text}: joined row by row (compositeRuleEvaluation."
                                "method ROW), a composite takes only row-level rules without"
                                " a threshold (IsComplete, ColumnValues, ColumnLength, "
                                "ColumnDataType)")
            return _row_rule("Composite", node.text, joined)
        # joined row by row too, for the rows each breaks (the verdict is the parts')
        rows = _row_rule("Composite", node.text, joined).expectations if joined else ()
        return Rule("Composite", node.text,
                    (*(e for p in parts for e in p.expectations), *rows),
                    ("sql", (), joined) if joined else None,
                    parts=tuple(parts), combine=node.operator)

    # --- row-level rules --------------------------------------------------------------

    def _is_complete(self, node: Simple) -> Rule:
        column = _column(node, condition=False)
        return self._row(node, f"{quoted(column)} IS NOT NULL")

    def _column_values(self, node: Simple) -> Rule:
        column, condition = _column(node), _condition(node)
        return self._row(node, self._values_test(node, column, condition))

    def _column_length(self, node: Simple) -> Rule:
        column, condition = _column(node), _condition(node)
        values = self.values.resolved(node, condition)
        if condition.operator in ("matches", "not matches") or not all(
                _is_number(v) for v in values):
            raise DqdlError(f"{node.text}: ColumnLength compares the length with numbers")
        # Glue counts a NULL as a string of length 0
        return self._row(node, _compare(f"coalesce(length({quoted(column)}), 0)",
                                        condition.operator, values))

    def _column_data_type(self, node: Simple) -> Rule:
        column, condition = _column(node), _condition(node)
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
            test = f"try_to_timestamp({value}, {_literal(str(node.tags['format']))})"
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
            return _row_rule(node.kind, node.text, predicate)
        share = f"avg(CASE WHEN {_braced(predicate)} THEN 1.0D ELSE 0.0D END)"
        return self._scalar(node, f"SELECT {share} FROM {self._rows(node)}", node.threshold)

    def _is_unique(self, node: Simple) -> Rule:
        if node.where is None and len(node.arguments) == 1:
            return _yaml_kind(node, _column(node, condition=False))
        return self._unique_rows(node, primary=False)

    def _is_primary_key(self, node: Simple) -> Rule:
        if node.where is None:
            return _yaml_kind(node, list(_columns(node)))
        return self._unique_rows(node, primary=True)

    def _unique_rows(self, node: Simple, *, primary: bool) -> Rule:
        """IsUnique of several columns, or either rule with ``where``: GX counts the rows
        (of those ``where`` keeps) whose values others have too (or, for a key, NULL)."""
        columns = [_braced(quoted(c)) for c in _columns(node)]
        keys = ", ".join(columns)
        shared = f"count(*) OVER (PARTITION BY {keys})"
        nulls = " OR ".join(f"{c} IS NULL" for c in columns)
        query = (f"SELECT * FROM (SELECT *, {shared} AS __deltamark_rows FROM "
                 f"{self._rows(node)}) AS keyed WHERE __deltamark_rows > 1"
                 + (f" OR {nulls}" if primary else ""))
        return Rule(node.kind, node.text, (("UnexpectedRowsExpectation",
                                            {"unexpected_rows_query": query}),))

    # --- dataset-level rules ----------------------------------------------------------

    def _column_exists(self, node: Simple) -> Rule:
        return _yaml_kind(node, _column(node, condition=False))

    def _row_count(self, node: Simple) -> Rule:
        if node.arguments:
            raise DqdlError(f"{node.text}: RowCount takes a comparison only, e.g. RowCount > 0")
        return self._metric(node, {}, "SELECT count(*) FROM {rows}")

    def _column_count(self, node: Simple) -> Rule:
        if node.arguments:
            raise DqdlError(f"{node.text}: ColumnCount takes a comparison only")
        return self._metric(node, {}, str(len(self.types)), whole=True)

    def _completeness(self, node: Simple) -> Rule:
        column = _braced(quoted(_column(node)))
        return self._metric(node, {"column": _column(node)}, (
            f"SELECT avg(CASE WHEN {column} IS NOT NULL THEN 1.0D ELSE 0.0D END) FROM {{rows}}"))

    def _mean(self, node: Simple) -> Rule:
        column = _braced(quoted(_column(node)))
        return self._metric(node, {"column": _column(node)},
                            f"SELECT avg({column}) FROM {{rows}}")

    def _sum(self, node: Simple) -> Rule:
        column = _braced(quoted(_column(node)))
        return self._metric(node, {"column": _column(node)},
                            f"SELECT sum({column}) FROM {{rows}}")

    def _standard_deviation(self, node: Simple) -> Rule:
        column = _braced(quoted(_column(node)))  # Glue's is the population's
        return self._metric(node, None, f"SELECT stddev_pop({column}) FROM {{rows}}")

    def _variance(self, node: Simple) -> Rule:
        column = _braced(quoted(_column(node)))
        return self._metric(node, None, f"SELECT var_pop({column}) FROM {{rows}}")

    def _entropy(self, node: Simple) -> Rule:
        """-Σ p·ln p over the values' shares of the rows not NULL (Glue's, in nats)."""
        column = _braced(quoted(_column(node)))
        counts = (f"SELECT count(*) AS n FROM {{rows}} WHERE {column} IS NOT NULL "
                  f"GROUP BY {column}")
        return self._metric(node, None, (
            f"SELECT -sum((n / t) * ln(n / t)) FROM ({counts}) AS counts CROSS JOIN "
            f"(SELECT CAST(count({column}) AS DOUBLE) AS t FROM {{rows}}) AS total"))

    def _distinct_values_count(self, node: Simple) -> Rule:
        column = _braced(quoted(_column(node)))  # NULL counts as a value, as in Glue
        return self._metric(node, None, (
            f"SELECT count(DISTINCT {column}) + max(CASE WHEN {column} IS NULL THEN 1 "
            f"ELSE 0 END) FROM {{rows}}"))

    def _uniqueness(self, node: Simple) -> Rule:
        """Glue's uniqueness: the share of the rows (not all NULL) whose values no other
        row has."""
        return self._metric(node, None, self._frequencies(node, "sum(n)"))

    def _unique_value_ratio(self, node: Simple) -> Rule:
        """The share of the distinct values (not NULL) that only one row has."""
        return self._metric(node, None, self._frequencies(node, "count(*)"))

    def _frequencies(self, node: Simple, total: str) -> str:
        columns = [_braced(quoted(c)) for c in _columns(node, condition=True)]
        present = " OR ".join(f"{c} IS NOT NULL" for c in columns)
        groups = (f"SELECT count(*) AS n FROM {{rows}} WHERE {present} "
                  f"GROUP BY {', '.join(columns)}")
        return f"SELECT CAST(count_if(n = 1) AS DOUBLE) / {total} FROM ({groups}) AS groups"

    def _column_correlation(self, node: Simple) -> Rule:
        first, second = (_braced(quoted(c)) for c in _columns(node, condition=True,
                                                                    count=2))
        return self._metric(node, None, f"SELECT corr({first}, {second}) FROM {{rows}}")

    def _data_freshness(self, node: Simple) -> Rule:
        """Every row's age (hours since its time) meets the comparison: NULL fails."""
        column, condition = _column(node), _condition(node)
        ages = [_hours(v, node) for v in self.values.resolved(node, condition)]
        age = (f"round((unix_timestamp(current_timestamp()) - unix_timestamp(try_cast("
               f"{_braced(quoted(column))} AS TIMESTAMP))) / 3600, 2)")
        fresh = _compare(age, condition.operator, ages)
        share = f"SELECT avg(CASE WHEN {fresh} THEN 1.0D ELSE 0.0D END) FROM {{rows}}"
        return self._metric(node, None, share, condition=Condition("=", (1.0,)))

    def _custom_sql(self, node: Simple) -> Rule:
        if len(node.arguments) != 1:
            raise DqdlError(f"{node.text}: CustomSql takes one query, e.g. CustomSql "
                            '"select count(*) from primary" > 0')
        [query] = node.arguments
        if not re.search(r"\bprimary\b", query, re.I):
            raise DqdlError(f"{node.text}: the query must read the table 'primary'")
        braced = re.sub(r"\bprimary\b", "{batch}", _braced(query), flags=re.I)
        if node.condition is not None:
            return self._metric(node, None, braced)
        # the rows the query returns pass; the others fail (matched on the columns it
        # returns, NULLs alike)
        return self._custom_rows(node, braced)

    def _custom_rows(self, node: Simple, query: str) -> Rule:
        names = re.findall(r"(?is)^\s*select\s+(.*?)\s+from\s", _unbraced(query))
        columns = [c.strip().strip("`") for c in names[0].split(",")] if names else []
        known = {c.lower() for c in self.types}
        if not columns or not all(c.lower() in known for c in columns):
            raise DqdlError(f"{node.text}: a CustomSql without a comparison selects columns"
                            " of primary (the rows it returns pass), e.g. CustomSql \"select "
                            "id from primary where amount > 0\"")
        on = " AND ".join(f"all_rows.{_braced(quoted(c))} <=> passed.{_braced(quoted(c))}"
                          for c in columns)
        failing = (f"SELECT all_rows.* FROM {{batch}} AS all_rows LEFT ANTI JOIN ({query}) "
                   f"AS passed ON {on}")
        if node.threshold is None:
            return Rule(node.kind, node.text, (("UnexpectedRowsExpectation",
                                                {"unexpected_rows_query": failing}),))
        share = (f"SELECT 1.0 - CAST((SELECT count(*) FROM ({failing}) AS failing) AS DOUBLE)"
                 f" / (SELECT count(*) FROM {{batch}})")
        return self._scalar(node, share, node.threshold)

    def _column_names_match_pattern(self, node: Simple) -> Rule:
        [pattern] = _strings(node, 1, 'ColumnNamesMatchPattern "[a-z_]+"')
        if node.condition is not None:
            raise DqdlError(f"{node.text}: ColumnNamesMatchPattern takes no comparison")
        names = list(self.types)
        matching = sum(1 for n in names if re.search(pattern, n))
        ratio = matching / len(names) if names else 1.0
        return self._scalar(node, f"SELECT {ratio!r}", Condition("=", (1.0,)), metric=True)

    # --- metrics and comparisons ------------------------------------------------------

    def _metric(self, node: Simple, domain: Mapping[str, Any] | None, query: str, *,
                whole: bool = False, condition: Condition | None = None) -> Rule:
        """A rule on a dataset metric: GX's expectation of it where it has one with Glue's
        meaning (``domain``: its column; no ``where``, a range), else ``query`` (over
        ``{rows}``, the rows ``where`` keeps) compared by GX."""
        condition = condition or _condition(node)
        values = self.values.resolved(node, condition)
        expectation = _METRIC_EXPECTATIONS.get(node.kind)
        if (expectation and domain is not None and node.where is None
                and condition.operator in (">", ">=", "<", "<=", "=", "between")
                and all(_is_number(v) for v in values)):
            bounds = _bounds(condition.operator, values, whole=whole)
            return Rule(node.kind, node.text, ((expectation, {**domain, **bounds}),))
        if not all(_is_number(v) for v in values):
            raise DqdlError(f"{node.text}: {node.kind} is compared with numbers")
        query = query.replace("{rows}", self._rows(node))
        if not query.lstrip().upper().startswith("SELECT"):
            query = f"SELECT {query}"
        return self._scalar(node, query, Condition(condition.operator, tuple(values)),
                            metric=True)

    def _scalar(self, node: Simple, query: str, condition: Condition, *,
                metric: bool = False) -> Rule:
        """A rule on the one value ``query`` computes (braces escaped for GX): GX finds it
        failing when the value breaks ``condition`` (or is NULL)."""
        values = self.values.resolved(node, condition)
        test = _braced(_compare("value", condition.operator, values))
        check = (f"SELECT value FROM (SELECT ({query}) AS value) AS metric "
                 f"WHERE NOT coalesce({test}, false)")
        return Rule(node.kind, node.text, (("UnexpectedRowsExpectation",
                                                   {"unexpected_rows_query": check}),),
                    metric_query=query if metric else None)

    def _rows(self, node: Simple) -> str:
        """The rows a rule is said of: the frame's, or those its ``where`` keeps."""
        if node.where is None:
            return "{batch}"
        return f"(SELECT * FROM {{batch}} WHERE {_braced(node.where)}) AS kept"

    # --- ColumnValues -----------------------------------------------------------------

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
            test = f"{name} RLIKE {_literal('^(?:' + str(pattern) + ')$')}"
            found = test if operator == "matches" else f"NOT ({test})"
            return f"{name} IS NOT NULL AND ({found})"
        if keywords or operator in ("=", "!=", "in", "not in"):
            positive = operator in ("=", "in")
            tests = [_keyword(name, k) for k in keywords]
            if plain:
                operand = self._operand(column, plain)
                tests.append(f"{operand} IN ({', '.join(_sql_value(v) for v in plain)})"
                             if len(plain) > 1 or operator in ("in", "not in")
                             else f"{operand} = {_sql_value(plain[0])}")
            matched = " OR ".join(f"({t})" for t in tests)
            null_listed = any(k.name == "NULL" for k in keywords)
            if positive:
                return matched if null_listed else f"{name} IS NOT NULL AND ({matched})"
            if null_listed:
                return f"{name} IS NOT NULL AND NOT ({matched})"
            return f"{name} IS NULL OR NOT ({matched})"
        operand = self._operand(column, values)
        test = _compare(operand, operator, [_sql_value(v) for v in values], literal=True)
        return f"{name} IS NOT NULL AND ({test})"

    def _operand(self, column: str, values: Sequence[Any]) -> str:
        """The column as compared: a string column compared with numbers is read as a
        number (NULL where it is not one, so the row fails); compared with dates, a column
        is read as a date (a ``"yyyy-mm-dd"``) or a time (``now()``)."""
        name = quoted(column)
        if values and all(_is_number(v) for v in values) and self.types.get(column) == "string":
            return f"try_cast({name} AS DOUBLE)"
        if values and all(isinstance(v, datetime) for v in values):
            return f"try_cast({name} AS TIMESTAMP)"
        if values and all(isinstance(v, str) and _DATE.fullmatch(v) for v in values):
            return f"try_cast({name} AS DATE)"  # a time compares by its day, as in Glue
        return name


class _ReferenceQueries:
    """The queries of the rules on reference data, which read each reference dataset as a
    table of its alias."""

    def __init__(self, references: Mapping[str, Mapping[str, str]],
                 types: Mapping[str, str]):
        self.references = references
        self.types = types

    def query(self, node: Simple) -> str:
        """The query computing the metric of ``node``, a rule on reference data."""
        return getattr(self, f"_{_snake(node.kind)}")(node)

    def _row_count_match(self, node: Simple) -> str:
        [alias] = _strings(node, 1, 'RowCountMatch "reference" >= 0.9')
        table = self._table(node, alias)
        return (f"SELECT CAST((SELECT count(*) FROM {{batch}}) AS DOUBLE) / "
                f"(SELECT count(*) FROM {table})")

    def _referential_integrity(self, node: Simple) -> str:
        """The share of rows whose values (all of them) are among the reference's."""
        mine, theirs = _strings(node, 2, 'ReferentialIntegrity "id" "reference.id" = 1.0')
        alias, _, listed = theirs.partition(".")
        table = self._table(node, alias)
        columns = [c.strip() for c in mine.split(",")]
        others = [c.strip() for c in listed.strip("{}").split(",")]
        if len(columns) != len(others) or not listed:
            raise DqdlError(f"{node.text}: name as many reference columns as columns "
                            "(\"a,b\" \"reference.{x,y}\")")
        keys = ", ".join(f"{_braced(quoted(o))} AS k{i}" for i, o in enumerate(others))
        on = " AND ".join(f"p.{_braced(quoted(c))} = r.k{i}" for i, c in enumerate(columns))
        return (f"SELECT avg(CASE WHEN r.found THEN 1.0D ELSE 0.0D END) FROM {{batch}} AS p "
                f"LEFT JOIN (SELECT DISTINCT {keys}, true AS found FROM {table}) AS r ON {on}")

    def _aggregate_match(self, node: Simple) -> str:
        """sum or avg of a column over that of another (of the frame or a reference)."""
        first, second = (self._aggregate(node, a) for a in _strings(
            node, 2, 'AggregateMatch "sum(amount)" "sum(reference.amount)" >= 0.9'))
        return (f"SELECT CASE WHEN b = 0 THEN CASE WHEN a = 0 THEN 1.0D ELSE 0.0D END ELSE "
                f"a / b END FROM (SELECT CAST(({first}) AS DOUBLE) AS a, CAST(({second}) AS "
                f"DOUBLE) AS b) AS aggregates")

    def _aggregate(self, node: Simple, text: str) -> str:
        found = re.fullmatch(r"\s*(sum|avg)\s*\(\s*(.+?)\s*\)\s*", text, re.I)
        if not found:
            raise DqdlError(f"{node.text}: {text!r} is not sum(column) or avg(column)")
        function, column = found[1].lower(), found[2]
        alias, dot, name = column.rpartition(".")
        if dot and alias in self.references:
            return f"SELECT {function}({_braced(quoted(name))}) FROM {self._table(node, alias)}"
        return f"SELECT {function}({_braced(quoted(column))}) FROM {{batch}}"

    def _dataset_match(self, node: Simple) -> str:
        """The share of rows whose key the reference has, with the same values in the
        compared columns (all others, or those mapped); keys must be unique on both sides,
        else the value is NULL and the rule fails."""
        if len(node.arguments) not in (2, 3):
            raise DqdlError(f'{node.text}: DatasetMatch takes "reference" "key->ref_key" and '
                            'optionally "column->ref_column", and a comparison')
        alias, keys, *compared = node.arguments
        table = self._table(node, alias)
        key_pairs = _mapping(keys)
        pairs = _mapping(compared[0]) if compared else [
            (c, c) for c in self.types if c not in {k for k, _ in key_pairs}]
        on = " AND ".join(f"p.{_braced(quoted(a))} = r.{_braced(quoted(b))}"
                          for a, b in key_pairs)
        same = " AND ".join(f"p.{_braced(quoted(a))} <=> r.{_braced(quoted(b))}"
                            for a, b in pairs) or "true"
        mine = ", ".join(_braced(quoted(a)) for a, _ in key_pairs)
        theirs = ", ".join(_braced(quoted(b)) for _, b in key_pairs)
        unique = (f"(SELECT count(*) = count(DISTINCT {mine}) FROM {{batch}}) AND "
                  f"(SELECT count(*) = count(DISTINCT {theirs}) FROM {table})")
        matched = (f"SELECT avg(CASE WHEN r.__deltamark_found AND {same} THEN 1.0D ELSE 0.0D "
                   f"END) FROM {{batch}} AS p LEFT JOIN (SELECT *, true AS __deltamark_found "
                   f"FROM {table}) AS r ON {on}")
        return f"SELECT CASE WHEN {unique} THEN ({matched}) END"

    def _schema_match(self, node: Simple) -> str:
        """The share of columns with the reference's name and type (0 when the counts
        differ)."""
        [alias] = _strings(node, 1, 'SchemaMatch "reference" = 1.0')
        self._table(node, alias)
        theirs = self.references[alias]
        if len(theirs) != len(self.types):
            ratio = 0.0
        else:
            same = sum(1 for c, t in self.types.items() if theirs.get(c) == t)
            ratio = same / len(self.types) if self.types else 1.0
        return f"SELECT {ratio!r}"

    def _table(self, node: Simple, alias: str) -> str:
        if alias not in self.references:
            given = ", ".join(sorted(self.references)) or "none"
            raise DqdlError(f"{node.text}: no reference data named {alias!r} (give it in "
                            f"additional_data_sources; given: {given})")
        return _braced(quoted(alias))


class _Values:
    """A rule's comparison values computed, ``last(k)`` from the metric's ``history``;
    ``evaluated`` has each dynamic rule with its values filled in."""

    def __init__(self, history: History | None):
        self.history = history
        self.evaluated: dict[str, str] = {}
        self.now = datetime.now(UTC).replace(second=0, microsecond=0, tzinfo=None)

    def resolved(self, node: Simple, condition: Condition) -> list[Any]:
        """The condition's values computed: numbers, texts, keywords, datetimes."""
        values = [self._value(node, v) for v in condition.values]
        if any(isinstance(v, Expression) and v.dynamic for v in condition.values):
            shown = " and ".join(_show(v) for v in values) if "between" in \
                condition.operator else ", ".join(_show(v) for v in values)
            self.evaluated[node.text] = (f"{node.text.split(condition.operator)[0].strip()} "
                                         f"{condition.operator} {shown}")
        return values

    def _value(self, node: Simple, value: Any) -> Any:
        if not isinstance(value, Expression):
            return value
        try:
            return self._evaluate(node, value.tree)
        except (ArithmeticError, IndexError, TypeError, ValueError) as exc:
            raise DqdlError(f"{node.text}: cannot compute {value.text} ({exc})") from exc

    def _evaluate(self, node: Simple, tree: tuple[Any, ...]) -> Any:
        kind = tree[0]
        if kind == "number":
            return tree[1]
        if kind == "now":
            return self.now
        if kind == "negate":
            return -self._evaluate(node, tree[1])
        if kind == "duration":
            amount = self._evaluate(node, tree[1])
            return timedelta(**{tree[2]: amount})
        if kind == "size":
            raise DqdlError(f"{node.text}: sizes are for file rules, not evaluated here")
        if kind == "op":
            left, right = self._evaluate(node, tree[2]), self._evaluate(node, tree[3])
            if isinstance(left, list) or isinstance(right, list):
                raise DqdlError(f"{node.text}: last(k) gives a list: aggregate it (avg, min,"
                                " max, sum, median, std, index)")
            return {"+": lambda: left + right, "-": lambda: left - right,
                    "*": lambda: left * right, "/": lambda: left / right}[tree[1]]()
        name, arguments = tree[1], [self._evaluate(node, a) for a in tree[2]]
        if name == "last":
            return self._last(node, int(arguments[0]) if arguments else 1)
        if name == "index":
            series, position = arguments
            return series[int(position)]
        functions: dict[str, Callable[[Any], Any]] = {
            "avg": statistics.fmean, "median": statistics.median, "min": min, "max": max,
            "sum": math.fsum, "std": statistics.pstdev, "abs": abs}
        if name not in functions:
            raise DqdlError(f"{node.text}: no function {name}() (functions: last, "
                            f"{', '.join(functions)}, index, now)")
        [argument] = arguments
        if name == "abs":
            return abs(argument)
        return functions[name](argument if isinstance(argument, list) else [argument])

    def _last(self, node: Simple, count: int) -> list[float]:
        """The rule's metric in the ``count`` latest earlier evaluations (0.0 if none)."""
        name = _metric_name(node)
        found = list(self.history(name))[:count] if self.history and name else []
        return [float(v) for v in found] or [0.0]


def _column(node: Simple, *, condition: bool = True) -> str:
    """The one column a rule names, with a comparison (``condition``) or without."""
    if len(node.arguments) != 1 or not isinstance(node.arguments[0], str):
        raise DqdlError(f"{node.text}: {node.kind} takes one quoted column name")
    if condition:
        _condition(node)
    elif node.condition is not None:
        raise DqdlError(f"{node.text}: {node.kind} takes no comparison")
    return node.arguments[0]


def _condition(node: Simple) -> Condition:
    """The comparison of a rule that needs one."""
    if node.condition is None:
        raise DqdlError(f"{node.text}: {node.kind} needs a comparison, e.g. > 0, "
                        "between 1 and 5, in [\"a\", \"b\"], matches \"[a-z]+\"")
    return node.condition


def _columns(node: Simple, *, condition: bool = False, count: int | None = None
             ) -> tuple[str, ...]:
    """The columns a rule names (``count`` of them if given), with a comparison or without."""
    if not node.arguments or (count is not None and len(node.arguments) != count):
        raise DqdlError(f"{node.text}: {node.kind} takes "
                        f"{count or 'one or more'} quoted column names")
    if condition:
        _condition(node)
    elif node.condition is not None:
        raise DqdlError(f"{node.text}: {node.kind} takes quoted column names only")
    return tuple(node.arguments)


def _strings(node: Simple, count: int, example: str) -> list[str]:
    """The ``count`` quoted values a rule takes (``example`` shows them when they are not)."""
    if len(node.arguments) != count:
        raise DqdlError(f"{node.text}: {node.kind} takes {count} quoted "
                        f"{'value' if count == 1 else 'values'}, e.g. {example}")
    return list(node.arguments)


def _yaml_kind(node: Simple, argument: Any) -> Rule:
    """The YAML kind of the same name (``rules.parse_rule``), with DQDL's text: IsUnique,
    IsPrimaryKey and ColumnExists mean the same in both."""
    return replace(parse_rule({node.kind: argument}), text=node.text)


def _row_rule(kind: str, text: str, predicate: str) -> Rule:
    """A row-level rule: GX counts the rows failing ``predicate`` (NULL fails)."""
    query = f"SELECT * FROM {{batch}} WHERE NOT coalesce({_braced(predicate)}, false)"
    return Rule(kind, text, (("UnexpectedRowsExpectation", {"unexpected_rows_query": query}),),
                ("sql", (), predicate))


def _compare(operand: str, operator: str, values: Sequence[Any], *, literal: bool = False
             ) -> str:
    """``operand`` compared by ``operator`` with ``values`` (SQL texts when ``literal``,
    else Python values)."""
    texts = [str(v) for v in values] if literal else [_sql_value(v) for v in values]
    if operator in (">", ">=", "<", "<=", "="):
        return f"{operand} {operator} {texts[0]}"
    if operator == "!=":
        return f"{operand} <> {texts[0]}"
    if operator == "between":
        return f"{operand} > {texts[0]} AND {operand} < {texts[1]}"
    if operator == "not between":
        return f"({operand} <= {texts[0]} OR {operand} >= {texts[1]})"
    if operator in ("in", "not in"):
        test = f"{operand} IN ({', '.join(texts)})"
        return test if operator == "in" else f"NOT ({test})"
    raise DqdlError(f"'{operator}' does not compare numbers")


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


def _keyword(name: str, keyword: Keyword) -> str:
    if keyword.name == "NULL":
        return f"{name} IS NULL"
    if keyword.name == "EMPTY":
        return f"{name} = ''"
    return f"length(trim({name})) = 0 AND length({name}) > 0"


def _hours(value: Any, node: Simple) -> float:
    if not isinstance(value, timedelta):
        raise DqdlError(f"{node.text}: DataFreshness compares with a duration, e.g. "
                        "<= 24 hours, between 2 days and 5 days")
    return round(value.total_seconds() / 3600, 4)


def _mapping(text: str) -> list[tuple[str, str]]:
    """``"a->b,c"``: the pairs (a, b), (c, c)."""
    pairs = []
    for part in text.split(","):
        mine, _, theirs = part.strip().partition("->")
        pairs.append((mine.strip(), (theirs or mine).strip()))
    return pairs


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _sql_value(value: Any) -> str:
    if _is_number(value):
        return repr(value)
    if isinstance(value, datetime):
        return f"TIMESTAMP'{value.isoformat(sep=' ')}'"
    if isinstance(value, str) and _DATE.fullmatch(value):
        return f"DATE'{value}'"
    return _literal(str(value))


def _literal(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def _show(value: Any) -> str:
    if _is_number(value):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return str(value)


def _braced(sql: str) -> str:
    """``sql`` with its braces doubled, as GX's query template needs."""
    return sql.replace("{", "{{").replace("}", "}}")


def _unbraced(sql: str) -> str:
    return sql.replace("{{", "{").replace("}}", "}")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
