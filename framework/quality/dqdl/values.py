"""The values a rule compares with, computed: ``last(k)`` from the metric's earlier
values, its aggregates, ``now()`` and durations (DQDL's dynamic rules)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from framework.quality.dqdl import nodes
from framework.quality.dqdl.syntax import Condition, DqdlError, Expression, Simple

#: earlier values of a metric (its Glue name), newest first
History = Callable[[str], Sequence[float]]


class DynamicValues:
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
        name = nodes.metric_name(node)
        found = list(self.history(name))[:count] if self.history and name else []
        return [float(v) for v in found] or [0.0]


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
