"""Data-quality rule sets declared in a job's conf, parsed into plain data.

    checks:
      silver_orders:                   # ctx.write_delta(df, target, checks="silver_orders")
        policy: quarantine             # fail | quarantine | warn
        quarantine: data/lake/quarantine/orders
        rules:
          - IsComplete: order_id
          - IsPrimaryKey: [order_id]
          - ColumnValues: {column: amount, between: [0, 10000]}
          - ColumnValues: {column: status, in: [new, paid, shipped]}
          - ColumnValues: {column: email, matches: '^[^@ ]+@[^@ ]+$'}
          - Completeness: {column: email, at_least: 0.95}
          - RowCount: {at_least: 1}
          - expect_column_mean_to_be_between: {column: amount, max_value: 500}

The kinds are Glue DQDL's (IsComplete, Completeness, IsUnique, Uniqueness, IsPrimaryKey,
ColumnValues, ColumnLength, ColumnExists, RowCount, SchemaMatch, CustomSql); any other name
is a great-expectations expectation (``expect_...`` or its class name) with its arguments.
Each rule becomes one or more GX expectations. Row-level rules (IsComplete, IsUnique,
IsPrimaryKey, ColumnValues, ColumnLength) also say which rows break them: a ``quarantine``
policy moves those rows aside. NULLs pass ColumnValues and ColumnLength (as in GX); use
IsComplete to forbid them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from framework.config import unknown_keys
from framework.quality.regex import java_regex_problem
from framework.spark.session import named_column

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["DQDL_KINDS", "Policy", "Rule", "RuleSet", "parse_checks"]

Policy = Literal["fail", "quarantine", "warn"]

#: a GX expectation: its class name and keyword arguments
Expectation = tuple[str, Mapping[str, Any]]

# Spark simple type names -> the class names GX compares (ExpectColumnValuesToBeOfType).
_SPARK_TYPES = {
    "string": "StringType", "bigint": "LongType", "long": "LongType", "int": "IntegerType",
    "integer": "IntegerType", "smallint": "ShortType", "tinyint": "ByteType",
    "double": "DoubleType", "float": "FloatType", "boolean": "BooleanType",
    "date": "DateType", "timestamp": "TimestampType", "timestamp_ntz": "TimestampNTZType",
    "binary": "BinaryType", "decimal": "DecimalType",
}


@dataclass(frozen=True)
class Rule:
    """One rule: its DQDL-style text (unique in its set), the GX expectations that evaluate
    it, and for row-level rules what a passing row looks like."""

    kind: str
    text: str
    expectations: tuple[Expectation, ...]
    #: row-level rules: ("not_null" | "unique" | "between" | "in" | "matches" | "length",
    #: columns, argument), or ("sql", (), a Spark SQL predicate) for DQDL's (``dqdl``)
    row_check: tuple[str, tuple[str, ...], Any] | None = None
    #: SchemaMatch: (column, Spark type) pairs whose precision GX does not check (it checks
    #: the type's class only): compared with the DataFrame's schema, e.g. decimal(10,2)
    exact_types: tuple[tuple[str, str], ...] = ()
    #: a DQDL rule's metric where GX does not report it: a query over ``{batch}`` (braces
    #: escaped for GX) giving one number, the rule's observed value
    metric_query: str | None = None
    #: a DQDL composite evaluated rule by rule (Glue's default): its rules, joined by
    #: ``combine`` ("and" | "or"); its expectations are theirs
    parts: tuple[Rule, ...] = ()
    combine: str | None = None

    @property
    def row_level(self) -> bool:
        return self.row_check is not None

    def passes(self) -> Column:
        """A Spark boolean column: True for rows that satisfy this row-level rule."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        if self.row_check is None:
            raise TypeError(f"{self.text} is not a row-level rule")
        check, columns, arg = self.row_check
        if check == "sql":
            return F.expr(arg)
        cols = [named_column(c) for c in columns]
        if check == "not_null":
            return _all(c.isNotNull() for c in cols)
        if check == "unique":
            count = F.count(F.lit(1)).over(Window.partitionBy(*cols))
            return (_all(c.isNotNull() for c in cols) & (count == 1)) if arg else (
                cols[0].isNull() | (count == 1))
        value = F.length(cols[0]) if check == "length" else cols[0]
        if check == "in":
            test = value.isin(list(arg))
        elif check == "matches":
            test = value.rlike(arg)
        else:
            low, high = arg
            test = F.lit(True)
            if low is not None:
                test = test & (value >= F.lit(low))
            if high is not None:
                test = test & (value <= F.lit(high))
        return cols[0].isNull() | test


@dataclass(frozen=True)
class RuleSet:
    """A named set of rules gating writes, and what to do when one fails."""

    name: str
    policy: Policy
    rules: tuple[Rule, ...]
    #: the Delta table rows breaking row-level rules go to (policy quarantine)
    quarantine: str | None = None


DQDL_KINDS = ("IsComplete", "Completeness", "IsUnique", "Uniqueness", "IsPrimaryKey",
              "ColumnValues", "ColumnLength", "ColumnExists", "RowCount", "SchemaMatch",
              "CustomSql")


def parse_checks(raw: Any) -> tuple[dict[str, RuleSet], list[str]]:
    """The rule sets under a job's ``checks:`` key, and every problem found (each naming
    its key, e.g. ``checks.orders.rules[2]``)."""
    if not isinstance(raw, Mapping):
        return {}, ["checks: must be a mapping of rule-set name -> {policy, rules, ...}"]
    sets, problems = {}, []
    for name, body in raw.items():
        where = f"checks.{name}"
        if not isinstance(body, Mapping):
            problems.append(f"{where}: must be a mapping with policy, rules, quarantine")
            continue
        problems += unknown_keys(body, ("policy", "quarantine", "rules"), where)
        policy = body.get("policy", "fail")
        if policy not in get_args(Policy):
            problems.append(f"{where}.policy: '{policy}' is not one of fail, quarantine, warn")
        quarantine = body.get("quarantine")
        if policy == "quarantine" and not quarantine:
            problems.append(f"{where}.quarantine: policy quarantine needs the Delta table "
                            "the failing rows go to")
        elif quarantine and policy != "quarantine":
            problems.append(f"{where}.quarantine: only used with policy quarantine")
        raw_rules = body.get("rules")
        if not isinstance(raw_rules, list) or not raw_rules:
            problems.append(f"{where}.rules: must be a non-empty list of rules")
            raw_rules = []
        rules = []
        for i, raw_rule in enumerate(raw_rules):
            try:
                rules.append(parse_rule(raw_rule))
            except ValueError as exc:
                problems.append(f"{where}.rules[{i}]: {exc}")
        texts = [r.text for r in rules]
        problems += [f"{where}.rules: {t} is listed twice" for t in sorted(set(texts))
                     if texts.count(t) > 1]
        if policy == "quarantine" and rules and not any(r.row_level for r in rules):
            problems.append(f"{where}: policy quarantine needs at least one row-level rule "
                            "(IsComplete, IsUnique, IsPrimaryKey, ColumnValues, ColumnLength)")
        sets[str(name)] = RuleSet(str(name), policy, tuple(rules),
                                  str(quarantine) if quarantine else None)
    if not problems:
        problems += _gx_problems(r for s in sets.values() for r in s.rules)
    return sets, problems


def parse_rule(raw: Any) -> Rule:
    """One rule from its YAML form ``{Kind: argument}``.

    Raises:
        ValueError: with what is wrong and what was expected.
    """
    if not isinstance(raw, Mapping) or len(raw) != 1:
        raise ValueError("a rule is one 'Kind: argument' pair, e.g. 'IsComplete: order_id'")
    [(kind, arg)] = raw.items()
    parser = _PARSERS.get(kind)
    if parser is not None:
        return parser(arg)
    if not re.fullmatch(r"expect_[a-z0-9_]+|Expect[A-Za-z0-9]+|UnexpectedRowsExpectation",
                        str(kind)):
        raise ValueError(f"unknown rule '{kind}' (DQDL kinds: {', '.join(DQDL_KINDS)}; or a "
                         "great-expectations expectation, e.g. expect_column_mean_to_be_between)")
    if not isinstance(arg, Mapping):
        raise ValueError(f"{kind}: give the expectation's arguments as a mapping")
    class_name = _class_name(str(kind))
    text = f"{class_name}({', '.join(f'{k}={_show(v)}' for k, v in arg.items())})"
    return Rule(str(kind), text, ((class_name, dict(arg)),))


def _class_name(kind: str) -> str:
    return "".join(p.title() for p in kind.split("_")) if kind.startswith("expect_") else kind


def _gx_problems(rules: Any) -> list[str]:
    """Build the GX expectations of rules named after GX ones, so bad names and arguments
    fail at start-up (imports great-expectations only when there are such rules)."""
    own = {*DQDL_KINDS}
    foreign = [r for r in rules if r.kind not in own]
    if not foreign:
        return []
    from framework.quality.expectations import build_expectation

    problems = []
    for rule in foreign:
        for name, kwargs in rule.expectations:
            try:
                build_expectation(name, kwargs)
            except Exception as exc:  # noqa: BLE001 - GX raises pydantic and its own errors
                detail = " ".join(str(exc).split())
                problems.append(f"checks: {rule.kind}: {detail[:300]}")
    return problems


# --- the DQDL kinds ----------------------------------------------------------------------


def _column(arg: Any, kind: str) -> str:
    column = arg.get("column") if isinstance(arg, Mapping) else arg
    if not isinstance(column, str) or not column:
        raise ValueError(f"{kind}: name the column ('{kind}: order_id' or "
                         f"'{kind}: {{column: order_id, ...}}')")
    return column


def _options(arg: Any, kind: str, allowed: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(arg, Mapping):
        raise ValueError(f"{kind}: give a mapping with {', '.join(allowed)}")
    if unknown := [k for k in arg if k not in allowed]:
        raise ValueError(f"{kind}: unknown option {', '.join(map(str, unknown))} "
                         f"(known: {', '.join(allowed)})")
    return arg


def _bounds(arg: Mapping[str, Any], kind: str, *, numeric: bool = True
            ) -> tuple[Any, Any]:
    """``between: [low, high]`` or ``at_least`` and/or ``at_most`` (inclusive)."""
    if "between" in arg:
        if "at_least" in arg or "at_most" in arg:
            raise ValueError(f"{kind}: give between or at_least/at_most, not both")
        pair = arg["between"]
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError(f"{kind}: between takes [low, high]")
        low, high = pair
    else:
        low, high = arg.get("at_least"), arg.get("at_most")
    if low is None and high is None:
        raise ValueError(f"{kind}: give between: [low, high], at_least or at_most")
    for value in (low, high):
        if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
            continue
        if numeric:
            raise ValueError(f"{kind}: bounds must be numbers, not {value!r}")
        if not _is_date(value):
            raise ValueError(f"{kind}: bounds must be numbers or dates (2024-01-31, "
                             f"2024-01-31T12:00:00), not {value!r}")
    if low is not None and high is not None and not low <= high:
        raise ValueError(f"{kind}: the low bound {low!r} is above the high bound {high!r}")
    return low, high


def _is_date(value: Any) -> bool:
    """A date or a timestamp: YAML's (unquoted) or ISO text, as GX takes them."""
    from datetime import date, datetime

    if isinstance(value, date):
        return True
    try:
        datetime.fromisoformat(str(value))
    except ValueError:
        return False
    return True


def _show(value: Any) -> str:
    """A value as DQDL writes it: strings in double quotes, lists in brackets."""
    if isinstance(value, (list, tuple)):
        return f"[{', '.join(map(_show, value))}]"
    return f'"{value}"' if isinstance(value, str) else str(value)


def _range_text(low: Any, high: Any) -> str:
    if low is not None and high is not None:
        return f"between {_show(low)} and {_show(high)}"
    return f">= {_show(low)}" if low is not None else f"<= {_show(high)}"


def _is_complete(arg: Any) -> Rule:
    column = _column(arg, "IsComplete")
    return Rule("IsComplete", f'IsComplete "{column}"',
                (("ExpectColumnValuesToNotBeNull", {"column": column}),),
                ("not_null", (column,), None))


def _ratio(arg: Any, kind: str) -> tuple[str, float]:
    options = _options(arg, kind, ("column", "at_least"))
    column, ratio = _column(options, kind), options.get("at_least")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio <= 1:
        raise ValueError(f"{kind}: at_least must be a fraction between 0 and 1")
    return column, float(ratio)


def _completeness(arg: Any) -> Rule:
    column, ratio = _ratio(arg, "Completeness")
    return Rule("Completeness", f'Completeness "{column}" >= {ratio}',
                (("ExpectColumnProportionOfNonNullValuesToBeBetween",
                  {"column": column, "min_value": ratio}),))


def _is_unique(arg: Any) -> Rule:
    column = _column(arg, "IsUnique")
    return Rule("IsUnique", f'IsUnique "{column}"',
                (("ExpectColumnValuesToBeUnique", {"column": column}),),
                ("unique", (column,), False))


def _uniqueness(arg: Any) -> Rule:
    column, ratio = _ratio(arg, "Uniqueness")
    return Rule("Uniqueness", f'Uniqueness "{column}" >= {ratio}',
                (("ExpectColumnProportionOfUniqueValuesToBeBetween",
                  {"column": column, "min_value": ratio}),))


def _is_primary_key(arg: Any) -> Rule:
    columns = [arg] if isinstance(arg, str) else arg
    if not isinstance(columns, list) or not columns or not all(
            isinstance(c, str) and c for c in columns):
        raise ValueError("IsPrimaryKey: name the column, or list the columns of a compound key")
    unique = (("ExpectColumnValuesToBeUnique", {"column": columns[0]}) if len(columns) == 1
              else ("ExpectCompoundColumnsToBeUnique", {"column_list": list(columns)}))
    quoted = " ".join(f'"{c}"' for c in columns)
    return Rule("IsPrimaryKey", f"IsPrimaryKey {quoted}",
                (*(("ExpectColumnValuesToNotBeNull", {"column": c}) for c in columns), unique),
                ("unique", tuple(columns), True))


def _column_values(arg: Any) -> Rule:
    options = _options(arg, "ColumnValues",
                       ("column", "between", "at_least", "at_most", "in", "matches"))
    column = _column(options, "ColumnValues")
    forms = [f for f in ("in", "matches") if f in options]
    if len(forms) > 1 or (forms and any(k in options for k in ("between", "at_least",
                                                                "at_most"))):
        raise ValueError("ColumnValues: give one of between/at_least/at_most, in, matches")
    if "in" in options:
        values = options["in"]
        if not isinstance(values, list) or not values:
            raise ValueError("ColumnValues: in takes a non-empty list of values")
        return Rule("ColumnValues", f'ColumnValues "{column}" in {_show(values)}',
                    (("ExpectColumnValuesToBeInSet", {"column": column, "value_set": values}),),
                    ("in", (column,), tuple(values)))
    if "matches" in options:
        pattern = options["matches"]
        if problem := java_regex_problem(str(pattern)):
            raise ValueError(f"ColumnValues: matches is not a valid regex ({problem})")
        return Rule("ColumnValues", f'ColumnValues "{column}" matches {_show(str(pattern))}',
                    (("ExpectColumnValuesToMatchRegex", {"column": column, "regex": pattern}),),
                    ("matches", (column,), str(pattern)))
    low, high = _bounds(options, "ColumnValues", numeric=False)
    return Rule("ColumnValues", f'ColumnValues "{column}" {_range_text(low, high)}',
                (("ExpectColumnValuesToBeBetween",
                  {"column": column, "min_value": low, "max_value": high}),),
                ("between", (column,), (low, high)))


def _column_length(arg: Any) -> Rule:
    options = _options(arg, "ColumnLength", ("column", "between", "at_least", "at_most"))
    column = _column(options, "ColumnLength")
    low, high = _bounds(options, "ColumnLength")
    return Rule("ColumnLength", f'ColumnLength "{column}" {_range_text(low, high)}',
                (("ExpectColumnValueLengthsToBeBetween",
                  {"column": column, "min_value": low, "max_value": high}),),
                ("length", (column,), (low, high)))


def _column_exists(arg: Any) -> Rule:
    column = _column(arg, "ColumnExists")
    return Rule("ColumnExists", f'ColumnExists "{column}"',
                (("ExpectColumnToExist", {"column": column}),))


def _row_count(arg: Any) -> Rule:
    low, high = _bounds(_options(arg, "RowCount", ("between", "at_least", "at_most")),
                        "RowCount")
    return Rule("RowCount", f"RowCount {_range_text(low, high)}",
                (("ExpectTableRowCountToBeBetween", {"min_value": low, "max_value": high}),))


def _schema_match(arg: Any) -> Rule:
    options = _options(arg, "SchemaMatch", ("columns", "exact"))
    columns = options.get("columns")
    if not isinstance(columns, Mapping) or not columns:
        raise ValueError("SchemaMatch: columns must map each column to its Spark type "
                         "(string, bigint, double, date, timestamp, decimal, ...)")
    exact = options.get("exact", True)
    if not isinstance(exact, bool):
        raise ValueError("SchemaMatch: exact must be true or false")
    expectations: list[Expectation] = [
        ("ExpectTableColumnsToMatchSet", {"column_set": list(columns), "exact_match": exact})]
    exact_types = []
    for column, type_name in columns.items():
        base = str(type_name).lower().split("(")[0].strip()
        if base not in _SPARK_TYPES:
            raise ValueError(f"SchemaMatch: {column}: unknown type '{type_name}' (known: "
                             f"{', '.join(sorted(_SPARK_TYPES))})")
        expectations.append(("ExpectColumnValuesToBeOfType",
                             {"column": str(column), "type_": _SPARK_TYPES[base]}))
        if "(" in str(type_name):
            exact_types.append((str(column), _decimal_type(str(column), str(type_name))))
    described = ", ".join(f"{c} {t}" for c, t in columns.items())
    return Rule("SchemaMatch", f"SchemaMatch ({described}){'' if exact else ' and others'}",
                tuple(expectations), exact_types=tuple(exact_types))


def _decimal_type(column: str, declared: str) -> str:
    """``decimal(p[, s])`` as Spark writes it (``decimal(10,0)``); plain ``decimal`` takes
    any precision."""
    found = re.fullmatch(r"\s*decimal\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)\s*", declared, re.I)
    precision, scale = (int(found[1]), int(found[2] or 0)) if found else (0, 0)
    if not found or not 1 <= precision <= 38 or scale > precision:
        raise ValueError(f"SchemaMatch: {column}: '{declared}' is not a Spark type with "
                         "parameters; write decimal(precision, scale), precision 1-38")
    return f"decimal({precision},{scale})"


def _custom_sql(arg: Any) -> Rule:
    """``sql`` selects the rows that break the rule (it passes when there are none); with
    bounds, ``sql`` returns one value that must lie within them. ``primary`` is the data."""
    options = _options(arg, "CustomSql", ("sql", "between", "at_least", "at_most"))
    sql = options.get("sql")
    if not isinstance(sql, str) or not re.search(r"\bprimary\b", sql, re.I):
        raise ValueError("CustomSql: sql must be a query over the table 'primary', e.g. "
                         "SELECT * FROM primary WHERE amount < 0")
    query = re.sub(r"\bprimary\b", "{batch}", sql.replace("{", "{{").replace("}", "}}"),
                   flags=re.I)
    text = f'CustomSql "{sql}"'
    if any(k in options for k in ("between", "at_least", "at_most")):
        low, high = _bounds(options, "CustomSql")
        outside = " OR ".join(
            test for test in (f"value < {low!r}" if low is not None else "",
                              f"value > {high!r}" if high is not None else "") if test)
        query = f"SELECT * FROM ({query}) AS result(value) WHERE value IS NULL OR {outside}"
        text += f" {_range_text(low, high)}"
    return Rule("CustomSql", text,
                (("UnexpectedRowsExpectation", {"unexpected_rows_query": query}),))


_PARSERS = {"IsComplete": _is_complete, "Completeness": _completeness,
            "IsUnique": _is_unique, "Uniqueness": _uniqueness,
            "IsPrimaryKey": _is_primary_key, "ColumnValues": _column_values,
            "ColumnLength": _column_length, "ColumnExists": _column_exists,
            "RowCount": _row_count, "SchemaMatch": _schema_match, "CustomSql": _custom_sql}


def _all(tests: Any) -> Column:
    from functools import reduce

    return reduce(lambda a, b: a & b, tests)
