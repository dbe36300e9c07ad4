"""The SQL that DQDL's rules hand to great-expectations: constants, comparisons, the rows
a rule is said of, and the rules GX evaluates as queries (braces doubled for its templates).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from framework.quality.dqdl.syntax import Condition, DqdlError, Keyword, Simple
from framework.quality.rules import Rule

if TYPE_CHECKING:
    from framework.quality.dqdl.values import DynamicValues

DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def row_rule(kind: str, text: str, predicate: str) -> Rule:
    """A row-level rule: GX counts the rows failing ``predicate`` (NULL fails)."""
    query = f"SELECT * FROM {{batch}} WHERE NOT coalesce({braced(predicate)}, false)"
    return Rule(kind, text, (("UnexpectedRowsExpectation", {"unexpected_rows_query": query}),),
                ("sql", (), predicate))


def compare(operand: str, operator: str, values: Sequence[Any], *, literal: bool = False
             ) -> str:
    """``operand`` compared by ``operator`` with ``values`` (SQL texts when ``literal``,
    else Python values)."""
    texts = [str(v) for v in values] if literal else [constant(v) for v in values]
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


def keyword(name: str, keyword: Keyword) -> str:
    if keyword.name == "NULL":
        return f"{name} IS NULL"
    if keyword.name == "EMPTY":
        return f"{name} = ''"
    return f"length(trim({name})) = 0 AND length({name}) > 0"


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def constant(value: Any) -> str:
    """A Python value as a SQL constant."""
    if is_number(value):
        return repr(value)
    if isinstance(value, datetime):
        return f"TIMESTAMP'{value.isoformat(sep=' ')}'"
    if isinstance(value, str) and DATE.fullmatch(value):
        return f"DATE'{value}'"
    return literal(str(value))


def literal(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def braced(text: str) -> str:
    """``text`` with its braces doubled, as GX's query template needs."""
    return text.replace("{", "{{").replace("}", "}}")


def unbraced(text: str) -> str:
    return text.replace("{{", "{").replace("}}", "}")


def scalar_rule(node: Simple, query: str, condition: Condition, values: DynamicValues, *,
                metric: bool = False) -> Rule:
    """A rule on the one value ``query`` computes (braces escaped for GX): GX finds it
    failing when the value breaks ``condition`` (or is NULL)."""
    test = braced(compare("value", condition.operator, values.resolved(node, condition)))
    check = (f"SELECT value FROM (SELECT ({query}) AS value) AS metric "
             f"WHERE NOT coalesce({test}, false)")
    return Rule(node.kind, node.text, (("UnexpectedRowsExpectation",
                                        {"unexpected_rows_query": check}),),
                metric_query=query if metric else None)


def rows(node: Simple) -> str:
    """The rows a rule is said of: the frame's, or those its ``where`` keeps."""
    if node.where is None:
        return "{batch}"
    return f"(SELECT * FROM {{batch}} WHERE {braced(node.where)}) AS kept"
