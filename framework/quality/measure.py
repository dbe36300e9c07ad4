"""The counts a rule set's DQDL rules need, measured in one pass over the rows.

Left to itself, great-expectations runs a Spark job per column (its metrics filter each
column's NULLs first) and one more per uniqueness rule, so ten rules read the rows about
ten times. ``measure`` computes those counts in one pass instead: every row-level test
becomes a column, one window per uniqueness key counts each key's rows, and one
aggregation sums them all (distinct counts, for Uniqueness, take a second, narrow
aggregation: after a window they would cost one more shuffle of every row). GX still
evaluates every expectation: ``answers`` hands it these counts under its own metric names
(``Measured.answer``), and GX computes anything else itself (samples of failing rules,
schemas, CustomSql and GX-named expectations).

A count is answered only where the row test is the one GX's Spark metric applies (the same
Spark expression on the same rows); ``tests/test_quality.py`` checks each against GX.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from framework.quality.rules import Rule

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["Measured", "measure"]

log = logging.getLogger(__name__)

#: GX's map metric for each row check of a single column
_MAP_METRICS = {"between": "column_values.between", "in": "column_values.in_set",
                "matches": "column_values.match_regex",
                "length": "column_values.value_length.between"}


@dataclass(frozen=True)
class Answer:
    """A metric's value for one domain (a column, or a list of columns) and the value
    arguments it was measured for (GX may add others only at these defaults)."""

    metric: str
    columns: tuple[str, ...]
    value: Any
    arguments: Mapping[str, Any] = field(default_factory=dict)


#: value arguments GX adds to ours, at the defaults our row tests assume
_DEFAULTS = {"strict_min": False, "strict_max": False}


@dataclass(frozen=True)
class Measured:
    """The row count, and the metric values measured for GX."""

    rows: int
    answers: tuple[Answer, ...] = ()

    def answer(self, metric: str, domain: Mapping[str, Any], arguments: Mapping[str, Any]
               ) -> tuple[bool, Any]:
        """``(True, value)`` when this metric was measured for ``domain`` (GX's domain
        kwargs) and ``arguments`` (its value kwargs); ``(False, None)`` otherwise."""
        if domain.get("row_condition") is not None or domain.get("table") is not None:
            return False, None
        if "column_list" in domain and domain.get("ignore_row_if") != "all_values_are_missing":
            return False, None
        columns = tuple(domain.get("column_list") or ([domain["column"]] if "column" in domain
                                                      else ()))
        given = {k: v for k, v in arguments.items() if k != "result_format"}
        for known in self.answers:
            if known.metric != metric or known.columns != columns:
                continue
            extra = {k: v for k, v in given.items() if k not in known.arguments}
            if all(given.get(k) == v for k, v in known.arguments.items()) and all(
                    k in _DEFAULTS and v == _DEFAULTS[k] for k, v in extra.items()):
                return True, known.value
        return False, None


def measure(df: DataFrame, rules: Sequence[Rule]) -> Measured:
    """Count ``df``'s rows and what the DQDL ``rules`` need, in one pass. Rules this
    pass cannot measure exactly as GX would (a missing column, a type GX treats apart) are
    left to GX; a pass that Spark refuses (e.g. a regex Java rejects) leaves them all."""
    from pyspark.sql import functions as F

    plan = _Plan({f.name: f.dataType.typeName() for f in df.schema.fields})
    for rule in rules:
        plan.add(rule)
    try:
        rows, values = plan.run(df)
    except Exception as exc:  # noqa: BLE001 - Spark's analysis and runtime errors alike
        log.debug("one-pass measure refused (%s): GX measures every rule", exc)
        return Measured(rows=df.agg(F.count(F.lit(1))).collect()[0][0])
    return Measured(rows=rows, answers=tuple(plan.answers(rows, values)))


class _Plan:
    """The pass: a few small columns per row (each test's outcome, the uniqueness keys),
    a window per uniqueness key counting its rows, and one aggregation of them all. Only
    those small columns cross the window's shuffle."""

    def __init__(self, types: Mapping[str, str]) -> None:
        self.types = types
        self.row_columns: dict[str, Column] = {}
        self.keys: list[tuple[str, ...]] = []
        #: (metric, columns, arguments, the row column it counts, whether it is distinct)
        self.metrics: list[tuple[str, tuple[str, ...], Mapping[str, Any], str, bool]] = []

    def _count(self, metric: str, columns: tuple[str, ...], test: Column | None,
               arguments: Mapping[str, Any] | None = None, *, distinct: str = "") -> None:
        """Measure ``metric`` as the rows where ``test`` holds (or, with ``distinct``, the
        distinct values of that column); once per metric, columns and arguments."""
        if any(m[:3] == (metric, columns, arguments or {}) for m in self.metrics):
            return
        name = distinct or f"__deltamark_test_{len(self.row_columns)}"
        if not distinct:
            self.row_columns[name] = test
        self.metrics.append((metric, columns, arguments or {}, name, bool(distinct)))

    def add(self, rule: Rule) -> None:
        columns = _columns(rule)
        if not columns or any(c not in self.types for c in columns):
            return  # GX says what is missing
        for column in columns:
            self._count("column_values.nonnull.unexpected_count", (column,),
                        _col(column).isNull())
        if rule.kind == "Completeness":
            self._count("column.non_null_count", columns, _col(columns[0]).isNotNull())
        elif rule.kind == "Uniqueness":
            self._count("column.distinct_values.count", columns, None, distinct=columns[0])
        elif rule.row_check is not None:
            self._row_check(rule)

    def _row_check(self, rule: Rule) -> None:
        check, columns, arg = rule.row_check
        if check == "not_null":
            return  # its NULL counts are measured
        if check == "unique":
            if columns not in self.keys:
                self.keys.append(columns)
            present = ~_every(_col(c).isNull() for c in columns)
            self._count(_key_rows(self.keys.index(columns)), columns, present)
            return
        [column] = columns
        kind = self.types[column]
        if (check == "between" and kind not in _NUMERIC) or (
                check == "length" and kind != "string"):
            return  # GX checks these types its own way
        arguments = ({"value_set": list(arg)} if check == "in" else
                     {"regex": arg} if check == "matches" else
                     {"min_value": arg[0], "max_value": arg[1]})
        self._count(f"{_MAP_METRICS[check]}.unexpected_count", columns,
                    _col(column).isNotNull() & ~rule.passes(), arguments)

    def run(self, df: DataFrame) -> tuple[int, list[Any]]:
        """The row count, and each metric's value (a pair for a uniqueness key: its rows
        sharing their values with others, and its rows not all NULL)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        keys = list(dict.fromkeys(c for key in self.keys for c in key))
        frame = df.select(*(_col(c).alias(f"__deltamark_key_{i}") for i, c in enumerate(keys)),
                          *(test.alias(name) for name, test in self.row_columns.items()))
        for i, key in enumerate(self.keys):  # GX's window: the rows sharing the key's values
            window = Window.partitionBy(*(F.col(f"__deltamark_key_{keys.index(c)}")
                                          for c in key))
            frame = frame.withColumn(_key_rows(i), F.count(F.lit(1)).over(window))
        aggregates, distinct = [F.count(F.lit(1))], []
        for metric, _, _, name, is_distinct in self.metrics:
            if is_distinct:  # apart: after a window, a distinct count costs a second shuffle
                distinct.append(F.count_distinct(_col(name)))
            elif metric.startswith("__deltamark_rows_"):
                aggregates.append(F.struct(F.count_if(F.col(name) & (F.col(metric) > 1)),
                                           F.count_if(F.col(name))))
            else:
                aggregates.append(F.count_if(F.col(name)))
        [row] = frame.agg(*aggregates).collect()
        counts = iter(df.agg(*distinct).collect()[0] if distinct else ())
        found = iter(row[1:])
        return row[0], [next(counts) if m[4] else next(found) for m in self.metrics]

    def answers(self, rows: int, values: Sequence[Any]) -> list[Answer]:
        found = [Answer("table.row_count", (), rows)]
        for (metric, columns, arguments, _, _), value in zip(self.metrics, values, strict=True):
            if not metric.startswith("__deltamark_rows_"):
                found.append(Answer(metric, columns, value, arguments))
            elif len(columns) == 1:
                found.append(Answer("column_values.unique.unexpected_count", columns, value[0]))
            else:
                found += [Answer("compound_columns.unique.unexpected_count", columns, value[0]),
                          Answer("compound_columns.unique.filtered_row_count", columns,
                                 value[1])]
        for answer in list(found):
            if answer.metric.endswith(".unexpected_count") and answer.value == 0:
                # no row breaks it: GX would find no sample either
                values_metric = answer.metric.removesuffix(".unexpected_count")
                found.append(Answer(f"{values_metric}.unexpected_values", answer.columns, [],
                                    answer.arguments))
        return found


_NUMERIC = {"byte", "short", "integer", "long", "float", "double", "decimal"}


def _col(name: str) -> Column:
    """The top-level column ``name`` (dots, spaces and backticks in it taken literally)."""
    from pyspark.sql import functions as F

    return F.col("`{}`".format(name.replace("`", "``")))


def _columns(rule: Rule) -> tuple[str, ...]:
    if rule.row_check is not None:
        return rule.row_check[1]
    if rule.kind in ("Completeness", "Uniqueness"):
        [(_, kwargs)] = rule.expectations
        return (kwargs["column"],)
    return ()


def _key_rows(i: int) -> str:
    return f"__deltamark_rows_{i}"


def _every(tests: Any) -> Column:
    from functools import reduce

    return reduce(lambda a, b: a & b, tests)
