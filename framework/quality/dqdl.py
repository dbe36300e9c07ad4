"""Glue's Data Quality Definition Language (DQDL): a ruleset's text, parsed into rules that
great-expectations evaluates with Glue's semantics.

    Rules = [
        RowCount > 0,
        IsComplete "order_id",
        ColumnValues "amount" between 0 and 10000,
        (ColumnValues "status" in ["new", "paid"]) or (ColumnValues "status" = "shipped"),
        ColumnValues "email" matches "^[^@ ]+@[^@ ]+$" with threshold > 0.9
    ]

Where DQDL and deltamark's YAML kinds differ, DQDL's meaning is kept: ``between a and b``
excludes its bounds, and ColumnValues and ColumnLength fail NULLs (their negative forms,
``!=``, ``not in``, ``not between`` and ``not matches``, pass them). Each rule is one
``Rule``. Row-level rules (IsComplete, ColumnValues, ColumnLength and their and/or
composites) carry their test as a Spark SQL predicate (``row_check`` "sql"), and GX counts
the rows failing it; IsUnique and IsPrimaryKey are the YAML kinds' GX expectations. A rule
on the whole frame is a GX expectation bounding its metric (named as Glue names it in
``Ruleset.metrics``), or, where GX has no such metric (Uniqueness, CustomSql, a ``with
threshold`` share of rows), a query GX runs for the value breaking the comparison.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from framework.quality.rules import Rule, parse_rule
from framework.spark import quoted

__all__ = ["DQDL_RULE_TYPES", "DqdlError", "Ruleset", "parse_ruleset"]

#: the DQDL rule types deltamark evaluates
DQDL_RULE_TYPES = ("ColumnCount", "ColumnExists", "ColumnLength", "ColumnValues",
                   "Completeness", "CustomSql", "DistinctValuesCount", "IsComplete",
                   "IsPrimaryKey", "IsUnique", "Mean", "RowCount", "Sum", "Uniqueness")

#: the GX expectation bounding each dataset metric
_METRIC_EXPECTATIONS = {
    "RowCount": "ExpectTableRowCountToBeBetween",
    "ColumnCount": "ExpectTableColumnCountToBeBetween",
    "Completeness": "ExpectColumnProportionOfNonNullValuesToBeBetween",
    "Mean": "ExpectColumnMeanToBeBetween",
    "Sum": "ExpectColumnSumToBeBetween",
    "DistinctValuesCount": "ExpectColumnUniqueValueCountToBeBetween",
}
_NEGATIVE = ("!=", "not in", "not between", "not matches")


class DqdlError(ValueError):
    """A ruleset deltamark cannot evaluate: says which rule and why."""


@dataclass(frozen=True)
class Ruleset:
    """A parsed DQDL ruleset: its rules in order, and the Glue name of the metric each
    dataset-level rule observes (``Dataset.*.RowCount``, ``Column.amount.Mean``)."""

    rules: tuple[Rule, ...]
    metrics: Mapping[str, str]
    #: an ``Analyzers = [...]`` section was given (and left out: it only profiles)
    analyzers: bool = False


def parse_ruleset(text: str, column_types: Mapping[str, str]) -> Ruleset:
    """The rules of a DQDL ruleset (``Rules = [ ... ]``), for a frame whose columns have
    ``column_types`` (Spark simple type names: numbers compare with string columns as
    numbers, as in Glue). A rule naming a column the frame lacks is one GX reports as not
    evaluated (outcome error), as Glue fails that rule and goes on.

    Raises:
        DqdlError: a syntax error, or a rule deltamark does not evaluate (naming it).
    """
    parser = _Parser(text)
    parser.expect("Rules")
    parser.expect("=")
    parser.expect("[")
    nodes = [parser.rule()]
    while parser.accept(","):
        nodes.append(parser.rule())
    parser.expect("]")
    parser.accept(",")
    analyzers = parser.skip_analyzers()
    if not parser.at_end():
        raise DqdlError(f"after the rules: unexpected {parser.peek_text()!r}")
    builder = _Builder(column_types)
    rules = [builder.rule(node) for node in nodes]
    texts = [r.text for r in rules]
    if duplicated := sorted({t for t in texts if texts.count(t) > 1}):
        raise DqdlError(f"{duplicated[0]}: listed twice")
    return Ruleset(tuple(rules), builder.metrics, analyzers)


# --- syntax -------------------------------------------------------------------------------

_TOKEN = re.compile(r"""\s*(?:
    (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
  | (?P<symbol>>=|<=|!=|[=<>\[\](),+\-*/])
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
)""", re.VERBOSE)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    start: int
    end: int

    @property
    def value(self) -> Any:
        if self.kind == "string":
            return re.sub(r'\\(["\\])', r"\1", self.text[1:-1])
        if self.kind == "number":
            number = float(self.text)
            return int(number) if number.is_integer() and re.fullmatch(r"-?\d+", self.text) \
                else number
        return self.text


@dataclass(frozen=True)
class _Condition:
    operator: str  # > >= < <= = != between, not between, in, not in, matches, not matches
    values: tuple[Any, ...]


@dataclass(frozen=True)
class _Simple:
    text: str
    kind: str
    arguments: tuple[Any, ...]
    condition: _Condition | None
    threshold: _Condition | None


@dataclass(frozen=True)
class _Composite:
    text: str
    operator: str  # and, or
    parts: tuple[_Simple | _Composite, ...]


class _Parser:
    def __init__(self, text: str):
        self.text, self.tokens, position = text, [], 0
        while position < len(text):
            found = _TOKEN.match(text, position)
            if not found or found.end() == position:
                rest = text[position:].strip()
                if not rest:
                    break
                raise DqdlError(f"cannot read {rest[:30]!r} (at character {position})")
            position = found.end()
            kind = found.lastgroup
            assert kind is not None  # every alternative of _TOKEN is a named group
            if kind != "comment":
                self.tokens.append(_Token(kind, found.group(kind), found.start(kind),
                                          found.end(kind)))
        self.at = 0

    def at_end(self) -> bool:
        return self.at >= len(self.tokens)

    def peek(self) -> _Token | None:
        return None if self.at_end() else self.tokens[self.at]

    def peek_text(self) -> str:
        token = self.peek()
        return "the end" if token is None else token.text

    def accept(self, text: str) -> _Token | None:
        token = self.peek()
        if token is not None and token.kind in ("symbol", "word") and (
                token.text.lower() == text.lower()):
            self.at += 1
            return token
        return None

    def expect(self, text: str) -> _Token:
        token = self.accept(text)
        if token is None:
            raise DqdlError(f"expected {text!r}, found {self.peek_text()!r}")
        return token

    def skip_analyzers(self) -> bool:
        """Read past an ``Analyzers = [...]`` section, if one comes next."""
        if not self.accept("Analyzers"):
            return False
        self.expect("=")
        self.expect("[")
        depth = 1
        while depth:
            if self.at_end():
                raise DqdlError("Analyzers = [...]: the list is not closed")
            depth += {"[": 1, "]": -1}.get(self.tokens[self.at].text, 0)
            self.at += 1
        return True

    def value(self) -> Any:
        token = self.peek()
        if token is None or token.kind not in ("string", "number"):
            raise DqdlError(f"expected a number or a quoted value, found {self.peek_text()!r}"
                            " (date expressions such as now() are not evaluated)")
        self.at += 1
        return token.value

    def rule(self) -> _Simple | _Composite:
        start = self.peek()
        if self.accept("("):
            parts, operators = [self._closed()], []
            while (token := self.accept("and") or self.accept("or")) is not None:
                operators.append(token.text.lower())
                self.expect("(")
                parts.append(self._closed())
            if not operators:
                return parts[0]
            if len(set(operators)) > 1:
                raise DqdlError(f"{self._since(start)}: mixes 'and' with 'or'; group them "
                                "with parentheses")
            return _Composite(self._since(start), operators[0], tuple(parts))
        return self._simple()

    def _closed(self) -> _Simple | _Composite:
        """A rule in parentheses, the '(' already read."""
        inner = self.rule()
        self.expect(")")
        return inner

    def _simple(self) -> _Simple:
        start = self.peek()
        if start is None or start.kind != "word":
            raise DqdlError(f"expected a rule, found {self.peek_text()!r}")
        self.at += 1
        arguments = []
        while (token := self.peek()) is not None and token.kind == "string":
            arguments.append(token.value)
            self.at += 1
        condition = self._condition()
        threshold = None
        if self.accept("with"):
            self.expect("threshold")
            threshold = self._condition()
            if threshold is None:
                raise DqdlError(f"{self._since(start)}: 'with threshold' takes a comparison "
                                "such as '> 0.9'")
        if self.accept("where"):
            raise DqdlError(f"{self._since(start)} where ...: where clauses are not evaluated;"
                            " filter the frame before evaluating it")
        return _Simple(self._since(start), start.text, tuple(arguments), condition, threshold)

    def _condition(self) -> _Condition | None:
        negated = bool(self.accept("not"))
        for operator in (">=", "<=", "!=", ">", "<", "="):
            if not negated and self.accept(operator):
                return _Condition(operator, (self.value(),))
        prefix = "not " if negated else ""
        if self.accept("between"):
            low = self.value()
            self.expect("and")
            return _Condition(prefix + "between", (low, self.value()))
        if self.accept("in"):
            self.expect("[")
            values = [self.value()]
            while self.accept(","):
                values.append(self.value())
            self.expect("]")
            return _Condition(prefix + "in", tuple(values))
        if self.accept("matches"):
            return _Condition(prefix + "matches", (self.value(),))
        if negated:
            raise DqdlError(f"'not' must be followed by between, in or matches, not "
                            f"{self.peek_text()!r}")
        return None

    def _since(self, start: _Token | None) -> str:
        """The source text from ``start`` to the last token read, whitespace collapsed."""
        first = start.start if start else 0
        last = self.tokens[self.at - 1].end if self.at else first
        return " ".join(self.text[first:last].split())


# --- meaning ------------------------------------------------------------------------------


class _Builder:
    """Rules from parsed nodes, for a frame's column types."""

    def __init__(self, column_types: Mapping[str, str]):
        self.types = dict(column_types)
        self.metrics: dict[str, str] = {}

    def rule(self, node: _Simple | _Composite) -> Rule:
        if isinstance(node, _Composite):
            predicates = [self.predicate(part, within=node.text) for part in node.parts]
            joined = f" {node.operator.upper()} ".join(f"({p})" for p in predicates)
            return _row_rule("Composite", node.text, joined)
        if node.kind not in DQDL_RULE_TYPES:
            raise DqdlError(f"{node.text}: {node.kind} is not evaluated by deltamark (rule "
                            f"types: {', '.join(DQDL_RULE_TYPES)})")
        return getattr(self, f"_{_snake(node.kind)}")(node)

    def predicate(self, node: _Simple | _Composite, *, within: str) -> str:
        """A composite's part as a row predicate (only row-level rules combine)."""
        if isinstance(node, _Composite):
            return f" {node.operator.upper()} ".join(
                f"({self.predicate(p, within=within)})" for p in node.parts)
        rule = self.rule(node)
        if rule.row_check is None or rule.row_check[0] != "sql" or node.threshold:
            raise DqdlError(f"{within}: only row-level rules without a threshold combine "
                            "with and/or (IsComplete, ColumnValues, ColumnLength)")
        return rule.row_check[2]

    # --- row-level rules --------------------------------------------------------------

    def _is_complete(self, node: _Simple) -> Rule:
        column = self._column(node, condition=False)
        return _row_rule(node.kind, node.text, f"{quoted(column)} IS NOT NULL")

    def _column_values(self, node: _Simple) -> Rule:
        column, condition = self._column(node), self._condition(node)
        test = _compare(self._operand(column, condition), condition)
        return self._row_or_threshold(node, _null_rule(column, condition, test))

    def _column_length(self, node: _Simple) -> Rule:
        column, condition = self._column(node), self._condition(node)
        if condition.operator in ("in", "not in", "matches", "not matches") or not all(
                _is_number(v) for v in condition.values):
            raise DqdlError(f"{node.text}: ColumnLength compares the length with numbers")
        test = _compare(f"length({quoted(column)})", condition)
        return self._row_or_threshold(node, _null_rule(column, condition, test))

    def _row_or_threshold(self, node: _Simple, predicate: str) -> Rule:
        if node.threshold is None:
            return _row_rule(node.kind, node.text, predicate)
        # the share of rows meeting it: a rule on the whole frame, as RowCount is
        share = f"avg(CASE WHEN {_braced(predicate)} THEN 1.0 ELSE 0.0 END)"
        return _scalar_rule(node.kind, node.text, f"SELECT {share} FROM {{batch}}",
                            node.threshold)

    def _is_unique(self, node: _Simple) -> Rule:
        return _yaml_kind(node, self._column(node, condition=False))

    def _is_primary_key(self, node: _Simple) -> Rule:
        return _yaml_kind(node, list(self._columns(node)))

    # --- dataset-level rules ----------------------------------------------------------

    def _column_exists(self, node: _Simple) -> Rule:
        return _yaml_kind(node, self._column(node, condition=False))

    def _row_count(self, node: _Simple) -> Rule:
        return self._metric(node, {}, "Dataset.*.RowCount")

    def _column_count(self, node: _Simple) -> Rule:
        return self._metric(node, {}, "Dataset.*.ColumnCount", whole=True)

    def _completeness(self, node: _Simple) -> Rule:
        column = self._column(node)
        return self._metric(node, {"column": column}, f"Column.{column}.Completeness")

    def _mean(self, node: _Simple) -> Rule:
        column = self._column(node)
        return self._metric(node, {"column": column}, f"Column.{column}.Mean")

    def _sum(self, node: _Simple) -> Rule:
        column = self._column(node)
        return self._metric(node, {"column": column}, f"Column.{column}.Sum")

    def _distinct_values_count(self, node: _Simple) -> Rule:
        column = self._column(node)
        return self._metric(node, {"column": column},
                            f"Column.{column}.DistinctValuesCount")

    def _uniqueness(self, node: _Simple) -> Rule:
        """Glue's (Deequ's) uniqueness: the share of all rows whose value no other row has."""
        column = _braced(quoted(self._column(node)))
        once = (f"SELECT count(*) AS rows FROM {{batch}} WHERE {column} IS NOT NULL "
                f"GROUP BY {column}")
        metric = (f"SELECT CAST(count_if(rows = 1) AS DOUBLE) / (SELECT count(*) FROM "
                  f"{{batch}}) FROM ({once}) AS frequencies")
        return _scalar_rule(node.kind, node.text, metric, self._condition(node))

    def _custom_sql(self, node: _Simple) -> Rule:
        if len(node.arguments) != 1 or node.condition is None:
            raise DqdlError(f"{node.text}: CustomSql takes a query returning one value and "
                            "a comparison, e.g. CustomSql \"select count(*) from primary\" > 0")
        [query] = node.arguments
        if not re.search(r"\bprimary\b", query, re.I):
            raise DqdlError(f"{node.text}: the query must read the table 'primary'")
        braced = query.replace("{", "{{").replace("}", "}}")
        return _scalar_rule(node.kind, node.text,
                            re.sub(r"\bprimary\b", "{batch}", braced, flags=re.I),
                            node.condition)

    def _metric(self, node: _Simple, domain: Mapping[str, Any], metric: str, *,
                whole: bool = False) -> Rule:
        """A dataset metric's GX expectation, with DQDL's comparison as its bounds."""
        expectation = _METRIC_EXPECTATIONS[node.kind]
        if node.condition is None or node.arguments[len(domain):]:
            example = f'{node.kind} "amount" > 0' if domain else f"{node.kind} > 0"
            raise DqdlError(f"{node.text}: {node.kind} takes "
                            f"{'a column and ' if domain else ''}a comparison, e.g. {example}")
        bounds = _bounds(node, node.condition, whole=whole)
        self.metrics[node.text] = metric
        return Rule(node.kind, node.text, ((expectation, {**domain, **bounds}),))

    # --- arguments --------------------------------------------------------------------

    def _column(self, node: _Simple, *, condition: bool = True) -> str:
        if len(node.arguments) != 1 or not isinstance(node.arguments[0], str):
            raise DqdlError(f"{node.text}: {node.kind} takes one quoted column name")
        if condition:
            self._condition(node)
        elif node.condition is not None:
            raise DqdlError(f"{node.text}: {node.kind} takes no comparison")
        return node.arguments[0]

    def _condition(self, node: _Simple) -> _Condition:
        """The comparison of a rule that needs one."""
        if node.condition is None:
            raise DqdlError(f"{node.text}: {node.kind} needs a comparison, e.g. > 0, "
                            "between 1 and 5, in [\"a\", \"b\"], matches \"[a-z]+\"")
        return node.condition

    def _columns(self, node: _Simple) -> tuple[str, ...]:
        if not node.arguments or node.condition is not None:
            raise DqdlError(f"{node.text}: {node.kind} takes quoted column names only")
        return tuple(node.arguments)

    def _operand(self, column: str, condition: _Condition) -> str:
        """The column as compared: a string column compared with numbers is read as a
        number (NULL where it is not one, so the row fails)."""
        name = quoted(column)
        numeric = condition.operator not in ("matches", "not matches") and all(
            _is_number(v) for v in condition.values)
        if numeric and self.types.get(column) == "string":
            return f"try_cast({name} AS DOUBLE)"
        return name


def _yaml_kind(node: _Simple, argument: Any) -> Rule:
    """The YAML kind of the same name (``rules.parse_rule``), with DQDL's text: IsUnique,
    IsPrimaryKey and ColumnExists mean the same in both."""
    return replace(parse_rule({node.kind: argument}), text=node.text)


def _row_rule(kind: str, text: str, predicate: str) -> Rule:
    """A row-level rule: GX counts the rows failing ``predicate`` (NULL fails)."""
    query = f"SELECT * FROM {{batch}} WHERE NOT coalesce({_braced(predicate)}, false)"
    return Rule(kind, text, (("UnexpectedRowsExpectation", {"unexpected_rows_query": query}),),
                ("sql", (), predicate))


def _scalar_rule(kind: str, text: str, metric_query: str, condition: _Condition) -> Rule:
    """A rule on one value that ``metric_query`` computes: it fails when the value breaks
    ``condition`` (or is NULL). ``metric_query`` has its braces escaped for GX already."""
    test = _braced(_compare("value", condition))
    query = (f"SELECT value FROM (SELECT ({metric_query}) AS value) AS metric "
             f"WHERE NOT coalesce({test}, false)")
    return Rule(kind, text, (("UnexpectedRowsExpectation", {"unexpected_rows_query": query}),))


def _null_rule(column: str, condition: _Condition, test: str) -> str:
    """DQDL's NULL handling: a NULL fails a positive comparison and passes a negative one."""
    if condition.operator in _NEGATIVE:
        return f"{quoted(column)} IS NULL OR ({test})"
    return f"{quoted(column)} IS NOT NULL AND ({test})"


def _compare(operand: str, condition: _Condition) -> str:
    values = [_literal(v) for v in condition.values]
    operator = condition.operator
    if operator in (">", ">=", "<", "<=", "="):
        return f"{operand} {operator} {values[0]}"
    if operator == "!=":
        return f"{operand} <> {values[0]}"
    if operator == "between":
        return f"{operand} > {values[0]} AND {operand} < {values[1]}"
    if operator == "not between":
        return f"{operand} <= {values[0]} OR {operand} >= {values[1]}"
    if operator in ("in", "not in"):
        test = f"{operand} IN ({', '.join(values)})"
        return test if operator == "in" else f"NOT ({test})"
    test = f"{operand} RLIKE {values[0]}"
    return test if operator == "matches" else f"NOT ({test})"


def _bounds(node: _Simple, condition: _Condition, *, whole: bool) -> dict[str, Any]:
    """GX's min/max (strict or not) for ``node``'s comparison ``condition``; ``whole``
    counts take integer bounds (ColumnCount's expectation has no strict bounds)."""
    if condition.operator not in (">", ">=", "<", "<=", "=", "between") or not all(
            _is_number(v) for v in condition.values):
        raise DqdlError(f"{node.text}: {node.kind} is compared with numbers by >, >=, <, "
                        "<=, = or between")
    value = condition.values[0]
    low = high = None
    strict_low = strict_high = False
    if condition.operator in (">", ">="):
        low, strict_low = value, condition.operator == ">"
    elif condition.operator in ("<", "<="):
        high, strict_high = value, condition.operator == "<"
    elif condition.operator == "=":
        low = high = value
    else:
        (low, high), strict_low, strict_high = condition.values, True, True
    if not whole:
        return {"min_value": low, "max_value": high, "strict_min": strict_low,
                "strict_max": strict_high}
    if low is not None:
        low = math.floor(low) + 1 if strict_low else math.ceil(low)
    if high is not None:
        high = math.ceil(high) - 1 if strict_high else math.floor(high)
    return {"min_value": low, "max_value": high}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _literal(value: Any) -> str:
    if _is_number(value):
        return repr(value)
    escaped = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def _braced(sql: str) -> str:
    """``sql`` with its braces doubled, as GX's query template needs."""
    return sql.replace("{", "{{").replace("}", "}}")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
