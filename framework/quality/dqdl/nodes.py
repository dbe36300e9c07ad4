"""What a DQDL rule node says: the columns and quoted values it names, its comparison,
and the Glue name of the metric it observes."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta
from typing import Any

from framework.quality.dqdl.syntax import Condition, DqdlError, Simple
from framework.quality.rules import Rule, parse_rule


def column(node: Simple, *, condition: bool = True) -> str:
    """The one column a rule names, with a comparison (``condition``) or without."""
    if len(node.arguments) != 1 or not isinstance(node.arguments[0], str):
        raise DqdlError(f"{node.text}: {node.kind} takes one quoted column name")
    if condition:
        comparison(node)
    elif node.condition is not None:
        raise DqdlError(f"{node.text}: {node.kind} takes no comparison")
    return node.arguments[0]


def comparison(node: Simple) -> Condition:
    """The comparison of a rule that needs one."""
    if node.condition is None:
        raise DqdlError(f"{node.text}: {node.kind} needs a comparison, e.g. > 0, "
                        "between 1 and 5, in [\"a\", \"b\"], matches \"[a-z]+\"")
    return node.condition


def columns(node: Simple, *, condition: bool = False, count: int | None = None
             ) -> tuple[str, ...]:
    """The columns a rule names (``count`` of them if given), with a comparison or without."""
    if not node.arguments or (count is not None and len(node.arguments) != count):
        raise DqdlError(f"{node.text}: {node.kind} takes "
                        f"{count or 'one or more'} quoted column names")
    if condition:
        comparison(node)
    elif node.condition is not None:
        raise DqdlError(f"{node.text}: {node.kind} takes quoted column names only")
    return tuple(node.arguments)


def strings(node: Simple, count: int, example: str) -> list[str]:
    """The ``count`` quoted values a rule takes (``example`` shows them when they are not)."""
    if len(node.arguments) != count:
        raise DqdlError(f"{node.text}: {node.kind} takes {count} quoted "
                        f"{'value' if count == 1 else 'values'}, e.g. {example}")
    return list(node.arguments)


def yaml_kind(node: Simple, argument: Any) -> Rule:
    """The YAML kind of the same name (``rules.parse_rule``), with DQDL's text: IsUnique,
    IsPrimaryKey and ColumnExists mean the same in both."""
    return replace(parse_rule({node.kind: argument}), text=node.text)


def hours(value: Any, node: Simple) -> float:
    if not isinstance(value, timedelta):
        raise DqdlError(f"{node.text}: DataFreshness compares with a duration, e.g. "
                        "<= 24 hours, between 2 days and 5 days")
    return round(value.total_seconds() / 3600, 4)


def mapping(text: str) -> list[tuple[str, str]]:
    """``"a->b,c"``: the pairs (a, b), (c, c)."""
    pairs = []
    for part in text.split(","):
        mine, _, theirs = part.strip().partition("->")
        pairs.append((mine.strip(), (theirs or mine).strip()))
    return pairs


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def metric_name(node: Simple) -> str | None:
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
