"""The counts a rule set's DQDL rules need, measured in a few narrow passes.

Left to itself, great-expectations runs a Spark job per column (its metrics filter each
column's NULLs first) and one more per uniqueness rule, so ten rules read the rows about
ten times. ``measure`` computes those counts in at most three concurrent jobs: every row-level
test becomes a column and one aggregation sums them all; distinct counts (Uniqueness) take
a second aggregation; a uniqueness key of one integer column is found unique from a word of
bits per 64 values, and any other key takes a window that counts each key's rows, over the key
columns alone (what crosses its shuffle is the keys, not the tests). GX still evaluates
every expectation: ``answers`` hands it these counts under its own metric names
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
from framework.spark.session import inheriting_threads, named_column

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
    """Count ``df``'s rows and what the DQDL ``rules`` need, in a few narrow passes. Rules
    these cannot measure exactly as GX would (a missing column, a type GX treats apart) are
    left to GX; a pass that Spark refuses (e.g. a regex Java rejects) leaves them all."""
    from pyspark.sql import functions as F

    plan = _Plan({f.name: f.dataType.typeName() for f in df.schema.fields})
    for rule in _with_parts(rules):
        if rule.row_check is not None and rule.row_check[0] == "sql" and not _resolves(
                df, rule.row_check[2]):
            continue  # GX says what is wrong with it
        plan.add(rule)
    try:
        rows, values = plan.run(df)
    except Exception as exc:  # noqa: BLE001 - Spark's analysis and runtime errors alike
        log.debug("one-pass measure refused (%s): GX measures every rule", exc)
        return Measured(rows=df.agg(F.count(F.lit(1))).collect()[0][0])
    return Measured(rows=rows, answers=tuple(plan.answers(rows, values)))


class _Plan:
    """Three narrow Spark jobs: one aggregation of every row test (each a column) and of
    the integer keys' ranges, one of the distinct counts, and the uniqueness keys' (bit
    words, or a window per key over the key columns alone: carrying the tests across that
    shuffle would move ten times the bytes)."""

    def __init__(self, types: Mapping[str, str]) -> None:
        self.types = types
        self.tests: dict[str, Column] = {}
        self.keys: list[tuple[str, ...]] = []
        #: (metric, columns, arguments, what counts it: a test, a distinct column or a key)
        self.metrics: list[tuple[str, tuple[str, ...], Mapping[str, Any], str]] = []

    def _count(self, metric: str, columns: tuple[str, ...], arguments: Mapping[str, Any],
               *, test: Column | None = None, distinct: str = "",
               key: tuple[str, ...] = ()) -> None:
        """Measure ``metric`` as the rows where ``test`` holds, the distinct values of the
        column ``distinct``, or the rows of ``key``'s window; once per metric, columns
        and arguments."""
        if any(m[:3] == (metric, columns, arguments) for m in self.metrics):
            return
        if test is not None:
            source = f"__deltamark_test_{len(self.tests)}"
            self.tests[source] = test
        elif key:
            if key not in self.keys:
                self.keys.append(key)
            source = _key_rows(self.keys.index(key))
        else:
            source = distinct
        self.metrics.append((metric, columns, arguments, source))

    def add(self, rule: Rule) -> None:
        if rule.row_check is not None and rule.row_check[0] == "sql":
            # a DQDL row rule: GX counts the rows its query returns, those failing the test
            from pyspark.sql import functions as F

            name, kwargs = rule.expectations[-1]
            if name == "UnexpectedRowsExpectation":
                self._count("unexpected_rows_query.row_count", (), dict(kwargs),
                            test=~F.coalesce(rule.passes(), F.lit(False)))
            return
        columns = _columns(rule)
        if not columns or any(c not in self.types for c in columns):
            return  # GX says what is missing
        for column in columns:
            self._count("column_values.nonnull.unexpected_count", (column,), {},
                        test=named_column(column).isNull())
        if rule.kind == "Completeness":
            self._count("column.non_null_count", columns, {},
                        test=named_column(columns[0]).isNotNull())
        elif rule.kind == "Uniqueness":
            self._count("column.distinct_values.count", columns, {}, distinct=columns[0])
        elif rule.row_check is not None:
            self._row_check(rule, rule.row_check)

    def _row_check(self, rule: Rule, row_check: tuple[str, tuple[str, ...], Any]) -> None:
        """Measure the row-level ``rule``'s counts; ``row_check`` is its ``row_check``."""
        check, columns, arg = row_check
        if check == "not_null":
            return  # its NULL counts are measured
        if check == "unique":
            self._count("unique", columns, {}, key=columns)
            return
        [column] = columns
        kind = self.types[column]
        if (check == "between" and kind not in _NUMERIC) or (
                check == "length" and kind != "string"):
            return  # GX checks these types its own way
        arguments = ({"value_set": list(arg)} if check == "in" else
                     {"regex": arg} if check == "matches" else
                     {"min_value": arg[0], "max_value": arg[1]})
        self._count(f"{_MAP_METRICS[check]}.unexpected_count", columns, arguments,
                    test=named_column(column).isNotNull() & ~rule.passes())

    def run(self, df: DataFrame) -> tuple[int, list[Any]]:
        """The row count, and each metric's value (a pair for a uniqueness key: its rows
        sharing their values with others, and its rows not all NULL). The passes run as
        concurrent Spark jobs (alone, each leaves cores idle at its stage boundaries); the
        keys' waits for the integer keys' ranges, which the tests' pass also takes."""
        from concurrent.futures import ThreadPoolExecutor

        from pyspark.sql import functions as F

        distinct = [c for m, *_, c in self.metrics if m == "column.distinct_values.count"]
        integers = list(dict.fromkeys(key[0] for key in self.keys if len(key) == 1 and
                                      self.types[key[0]] in _INTEGRAL))
        aggregates = [F.count(F.lit(1)), *map(F.count_if, self.tests.values()),
                      *(f(named_column(c)) for c in integers for f in (F.min, F.max, F.count))]
        with ThreadPoolExecutor(3, thread_name_prefix="deltamark-measure") as pool:
            # local properties (scheduler pool, job group) and tags follow the jobs there
            inherit = inheriting_threads(df.sparkSession)
            tests = pool.submit(inherit(lambda: df.agg(*aggregates).collect()[0]))
            counted = pool.submit(inherit(lambda: df.agg(*(
                F.count_distinct(named_column(c)) for c in distinct)).collect()[0]
                if distinct else ()))

            def keys() -> list[tuple[int, int]]:
                found = tests.result()[1 + len(self.tests):]
                ranges = {c: tuple(found[3 * i:3 * i + 3]) for i, c in enumerate(integers)}
                return self._key_counts(df, ranges)

            keyed = pool.submit(inherit(keys))
        row = tests.result()
        values = dict(zip(self.tests, row[1:1 + len(self.tests)], strict=True))
        values |= zip(distinct, counted.result(), strict=True)
        values |= zip(map(_key_rows, range(len(self.keys))), keyed.result(), strict=True)
        return row[0], [values[source] for *_, source in self.metrics]

    def _key_counts(self, df: DataFrame, ranges: Mapping[str, tuple[Any, Any, int]]
                    ) -> list[tuple[int, int]]:
        """For each uniqueness key: its rows sharing their values with others (GX's
        window) and its rows not all NULL. A key of one integer column (``ranges``: its
        lowest and highest value and rows not NULL) whose values are all distinct and
        fill enough of their range is found so from bit words; the others take the
        window."""
        distinct = _distinct_integers(df, ranges)
        counts: dict[int, tuple[int, int]] = {}
        for i, key in enumerate(self.keys):
            found = distinct.get(key[0]) if len(key) == 1 else None
            if found is not None and found[0] == found[1]:
                counts[i] = (0, found[1])
        rest = [i for i in range(len(self.keys)) if i not in counts]
        if rest:
            counts |= zip(rest, self._window_counts(df, [self.keys[i] for i in rest]),
                          strict=True)
        return [counts[i] for i in range(len(self.keys))]

    def _window_counts(self, df: DataFrame, keys: Sequence[tuple[str, ...]]
                       ) -> list[tuple[int, int]]:
        """For each of ``keys``: its rows sharing their values with others (GX's window)
        and its rows not all NULL, from the key columns alone (what crosses a shuffle is
        only the keys: eight bytes a row for a number)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        columns = list(dict.fromkeys(c for key in keys for c in key))
        frame = df.select(*(named_column(c).alias(f"__deltamark_key_{i}")
                            for i, c in enumerate(columns)))
        partitions = _shuffle_partitions(df)
        aggregates = []
        for i, key in enumerate(keys):
            parts = [F.col(f"__deltamark_key_{columns.index(c)}") for c in key]
            if partitions:  # else adaptive execution packs the keys into as many partitions
                # as cores, and each partition's sort spills to disk
                frame = frame.repartition(partitions, *parts)
            frame = frame.withColumn(_key_rows(i), F.count(F.lit(1)).over(
                Window.partitionBy(*parts)))
            present = ~_every(part.isNull() for part in parts)
            aggregates += [F.count_if(present & (F.col(_key_rows(i)) > 1)),
                           F.count_if(present)]
        [row] = frame.agg(*aggregates).collect()
        return [(row[2 * i], row[2 * i + 1]) for i in range(len(keys))]

    def answers(self, rows: int, values: Sequence[Any]) -> list[Answer]:
        found = [Answer("table.row_count", (), rows)]
        for (metric, columns, arguments, _), value in zip(self.metrics, values, strict=True):
            if metric != "unique":
                found.append(Answer(metric, columns, value, arguments))
            elif len(columns) == 1:
                found.append(Answer("column_values.unique.unexpected_count", columns, value[0]))
            else:
                found += [Answer("compound_columns.unique.unexpected_count", columns, value[0]),
                          Answer("compound_columns.unique.filtered_row_count", columns,
                                 value[1])]
        for answer in list(found):
            # GX builds the Spark expression an answered count is computed from
            # (``*.aggregate_fn``) before it asks for the count: it is never used
            found.append(Answer(f"{answer.metric}.aggregate_fn", answer.columns, None,
                                answer.arguments))
            if answer.metric.endswith(".unexpected_count") and answer.value == 0:
                # no row breaks it: GX would find no sample either, nor need the rows'
                # condition for one
                values_metric = answer.metric.removesuffix(".unexpected_count")
                found += [Answer(f"{values_metric}.unexpected_values", answer.columns, [],
                                 answer.arguments),
                          Answer(f"{values_metric}.condition", answer.columns, None,
                                 answer.arguments)]
        return found


_INTEGRAL = {"byte", "short", "integer", "long"}
_NUMERIC = _INTEGRAL | {"float", "double", "decimal"}


#: bit words count an integer column's distinct values when the values fill at least this
#: share of their range: a 64-value word then stands for 8 rows or more, while sparse values
#: (hashes, random ids) would each cost a word where the window moves 8 bytes
DENSE_ENOUGH = 1 / 8


def _distinct_integers(df: DataFrame, ranges: Mapping[str, tuple[Any, Any, int]]
                       ) -> dict[str, tuple[int, int]]:
    """For each integer column of ``ranges`` (its lowest and highest value, and its rows
    not NULL) whose values are dense enough: its distinct values and its rows not NULL,
    exactly. The values are grouped by 64 (``v >> 6``), each group ORs one bit per value
    (``1 << (v & 63)``) and the distinct values are the bits set: one code-generated hash
    aggregation, and what crosses the shuffle is a word per 64 values a partition holds,
    not a row per value as for a window or ``count_distinct``."""
    from pyspark.sql import functions as F

    found = {}
    for column, (low, high, rows) in ranges.items():
        if not rows or rows < (high - low + 1) * DENSE_ENOUGH:
            continue
        value = named_column(column).cast("long")
        bit = F.call_function("shiftleft", F.lit(1).cast("long"),
                              value.bitwiseAND(F.lit(63)).cast("int"))
        words = (df.where(value.isNotNull()).groupBy(F.shiftright(value, 6).alias("word"))
                 .agg(F.bit_or(bit).alias("bits")))
        found[column] = (words.agg(F.sum(F.bit_count("bits"))).collect()[0][0], rows)
    return found


def _with_parts(rules: Sequence[Rule]) -> list[Rule]:
    """``rules`` and the rules of their composites (GX evaluates every part's expectations)."""
    return [r for rule in rules for r in (*_with_parts(rule.parts), rule)]


def _resolves(df: DataFrame, predicate: str) -> bool:
    """Whether Spark can analyse the SQL ``predicate`` on ``df``'s columns."""
    from pyspark.sql import functions as F

    try:
        df.select(F.expr(predicate)).schema  # noqa: B018 - analysed, on Spark Connect too
    except Exception:  # noqa: BLE001 - Spark's analysis and parse errors alike
        return False
    return True


def _columns(rule: Rule) -> tuple[str, ...]:
    if rule.row_check is not None:
        return rule.row_check[1]
    if rule.kind in ("Completeness", "Uniqueness"):
        [(_, kwargs)] = rule.expectations
        return (kwargs["column"],) if "column" in kwargs else ()  # DQDL's is SQL
    return ()


def _shuffle_partitions(df: DataFrame) -> int | None:
    """``spark.sql.shuffle.partitions`` when it is a number."""
    setting = df.sparkSession.conf.get("spark.sql.shuffle.partitions")
    return int(setting) if setting and setting.isdigit() else None


def _key_rows(i: int) -> str:
    return f"__deltamark_rows_{i}"


def _every(tests: Any) -> Column:
    from functools import reduce

    return reduce(lambda a, b: a & b, tests)
