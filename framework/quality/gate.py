"""Evaluate a rule set with great-expectations on a Spark DataFrame; split rows for quarantine.

great-expectations takes seconds to import, so it is imported here, on first use, and only
by jobs that have rules. Rules are evaluated in one GX validation, given the counts that
``measure`` took in one pass over the rows; GX reads the rows again only for what that pass
does not answer, such as sample values of the expectations that failed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from framework.errors import is_java_trace, java_summary
from framework.quality.expectations import build_expectation, import_great_expectations
from framework.quality.measure import Answer, Measured, measure
from framework.quality.rules import Rule, RuleSet

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

__all__ = ["BROKEN_RULES_COLUMN", "Measured", "RuleOutcome", "action", "evaluate", "mark",
           "measure", "split"]

Outcome = Literal["passed", "failed", "error"]
Action = Literal["written", "warned", "quarantined", "rejected"]

#: the quarantine table's column listing the rules each row broke
BROKEN_RULES_COLUMN = "_dq_broken_rules"

SAMPLE_SIZE = 5


@dataclass(frozen=True)
class RuleOutcome:
    """What evaluating one rule found."""

    rule: Rule
    outcome: Outcome
    #: GX's observed value (a count, ratio, type, ...) when the rule has one
    observed: Any = None
    #: rows that broke the rule (summed over its expectations), for row-level kinds
    unexpected_count: int | None = None
    unexpected_percent: float | None = None
    sample: tuple[Any, ...] = ()
    #: why the rule could not be evaluated (outcome error)
    message: str | None = None
    #: a composite's rules' outcomes (each judged on the whole frame)
    parts: tuple[RuleOutcome, ...] = ()

    def summary(self) -> str:
        """One short line: the rule and what broke it."""
        if self.outcome == "error":
            return f"{self.rule.text}: error ({self.message})"
        detail = []
        if self.unexpected_count:
            detail.append(f"{self.unexpected_count} rows")
        elif self.observed is not None:
            detail.append(f"observed {self.observed!r}")
        if self.sample:
            detail.append("e.g. " + ", ".join(repr(v) for v in self.sample[:3]))
        return f"{self.rule.text}" + (f" ({'; '.join(detail)})" if detail else "")


def evaluate(df: DataFrame, ruleset: RuleSet, *, measured: Measured | None = None
             ) -> list[RuleOutcome]:
    """Evaluate every rule of ``ruleset`` on ``df``, given what ``measure`` found there
    (measured here when not given). A rule that cannot be evaluated (a missing column, bad
    SQL) has outcome error."""
    # Rules may share an expectation (IsPrimaryKey and IsUnique); GX runs each once.
    unique = list(dict.fromkeys(_key(e) for rule in ruleset.rules for e in rule.expectations))
    measured = measured or measure(df, ruleset.rules)
    metrics, counts = _queried(df, ruleset.rules, unique, measured)
    found = _validate(df, unique, replace(measured, answers=measured.answers + counts))
    fields = {f.name: f.dataType for f in df.schema.fields}
    actual_types = {name: kind.simpleString() for name, kind in fields.items()}
    outcomes = []
    for rule in ruleset.rules:
        outcome = _judged(rule, found, metrics)
        if mismatch := _numbers_against_another_type(rule, fields):
            outcome = replace(outcome, outcome="error", message=mismatch)
        wrong = {column: actual_types[column] for column, declared in rule.exact_types
                 if actual_types.get(column, declared) != declared}
        if wrong and outcome.outcome == "passed":
            outcome = replace(outcome, outcome="failed", observed=wrong)
        outcomes.append(outcome)
    return outcomes


def _judged(rule: Rule, found: Mapping[tuple[str, str], Any],
            metrics: Mapping[str, Any]) -> RuleOutcome:
    """``rule``'s outcome from GX's results (``found``) and the metric values measured; a
    composite's from its rules' outcomes, joined by its operator."""
    if not rule.parts:
        outcome = _outcome(rule, [found[_key(e)] for e in rule.expectations])
        if rule.text in metrics and outcome.outcome != "error":
            outcome = replace(outcome, observed=metrics[rule.text])
        return outcome
    parts = tuple(_judged(part, found, metrics) for part in rule.parts)
    results = [p.outcome for p in parts]
    verdict: Outcome
    if rule.combine == "and":
        verdict = "passed" if all(r == "passed" for r in results) else (
            "failed" if "failed" in results else "error")
    else:
        verdict = "passed" if "passed" in results else (
            "error" if "error" in results else "failed")
    errors = [f"{p.rule.text}: {p.message}" for p in parts if p.message]
    # a composite of row-level rules: the rows failing them joined (its last expectation)
    rows = _outcome(rule, [found[_key(rule.expectations[-1])]]) if rule.row_level else None
    return RuleOutcome(rule=rule, outcome=verdict, parts=parts,
                       unexpected_count=rows.unexpected_count if rows else None,
                       unexpected_percent=rows.unexpected_percent if rows else None,
                       sample=rows.sample if rows else (),
                       message="; ".join(errors) if verdict == "error" else None)


def _queried(df: DataFrame, rules: Sequence[Rule], expectations: Sequence[tuple[str, str]],
             measured: Measured) -> tuple[dict[str, Any], tuple[Answer, ...]]:
    """In one Spark query: the value of each rule's ``metric_query`` (composites' rules
    included), by rule text, and the rows each query expectation that ``measured`` does not
    answer returns, for GX (which would run a Spark job per query)."""
    def walk(found: Sequence[Rule]) -> list[Rule]:
        return [r for rule in found for r in (*walk(rule.parts), rule)
                if r.metric_query is not None]

    metric_rules = list({r.text: r for r in walk(rules)}.values())
    queries = [json.loads(kwargs)["unexpected_rows_query"] for name, kwargs in expectations
               if name == "UnexpectedRowsExpectation"]
    arguments = [{"unexpected_rows_query": q} for q in queries]
    counted = [a for a in arguments
               if not measured.answer("unexpected_rows_query.row_count", {}, a)[0]]
    values = _scalars(df, [*(r.metric_query or "" for r in metric_rules),
                           *(f"SELECT count(*) FROM ({a['unexpected_rows_query']}) AS failing"
                             for a in counted)])
    metrics = {r.text: values[i] for i, r in enumerate(metric_rules) if i in values}
    counts = tuple(Answer("unexpected_rows_query.row_count", (), values[i], a)
                   for i, a in enumerate(counted, start=len(metric_rules)) if i in values)
    return metrics, counts


def _scalars(df: DataFrame, queries: Sequence[str]) -> dict[int, Any]:
    """The one value each of ``queries`` (over ``{batch}``, braces escaped) gives, by
    index, in one Spark query; a query Spark refuses (a missing column, a failing cast) has
    none, and GX reports its error."""
    import uuid

    if not queries:
        return {}
    view = f"deltamark_dq_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(view)
    spark = df.sparkSession
    texts = [q.format(batch=view) for q in queries]

    def select(chosen: Sequence[int]) -> dict[int, Any]:
        columns = ", ".join(f"({texts[i]}) AS v{n}" for n, i in enumerate(chosen))
        return dict(zip(chosen, map(_number, spark.sql(f"SELECT {columns}").collect()[0]),
                        strict=True))

    def refused(chosen: Sequence[int]) -> dict[int, Any]:
        try:
            return select(chosen)
        except Exception:  # noqa: BLE001 - Spark's analysis and runtime errors alike
            return {}

    def analysed(text: str) -> bool:
        try:
            spark.sql(text).schema  # noqa: B018 - analysed, on Spark Connect too
        except Exception:  # noqa: BLE001 - Spark's analysis and parse errors alike
            return False
        return True

    try:
        found = refused(range(len(texts)))
        if not found:  # those Spark analyses together, else (a runtime error) one by one
            good = [i for i, text in enumerate(texts) if analysed(text)]
            found = refused(good) or {i: v for n in good for i, v in refused([n]).items()}
        return found
    finally:
        spark.catalog.dropTempView(view)


def _number(value: Any) -> Any:
    from decimal import Decimal

    return float(value) if isinstance(value, Decimal) else value


def _numbers_against_another_type(rule: Rule, fields: Mapping[str, DataType]) -> str | None:
    """Why a range of numbers cannot be checked on the rule's column, when its values are
    not numbers: an error on every Spark line (Spark 4's ANSI cast fails; Spark 3.5's would
    make every value NULL, and the rule pass)."""
    from pyspark.sql.types import NumericType

    if rule.row_check is None or rule.row_check[0] != "between":
        return None
    [column], bounds = rule.row_check[1], [b for b in rule.row_check[2] if b is not None]
    kind = fields.get(column)
    if kind is None or isinstance(kind, NumericType) or not bounds or not all(
            isinstance(b, int | float) and not isinstance(b, bool) for b in bounds):
        return None
    return f"column {column} holds {kind.simpleString()}, which {rule.text} cannot compare " \
        "with numbers"


def _outcome(rule: Rule, results: Sequence[Any]) -> RuleOutcome:
    def values(name: str) -> list[Any]:
        return [r.result[name] for r in results if (r.result or {}).get(name) is not None]

    errors = [e for e in map(_error, results) if e]
    counts, percents, observed = (values("unexpected_count"), values("unexpected_percent"),
                                  values("observed_value"))
    if rule.row_level and not counts and observed:  # a query's rows: the rows failing
        counts, observed = observed, []
    sample = [v for r in results if not r.success and (r.result or {}).get("unexpected_count")
              for v in r.result.get("partial_unexpected_list") or ()]
    return RuleOutcome(
        rule=rule,
        outcome="error" if errors else "passed" if all(r.success for r in results)
        else "failed",
        observed=observed[0] if len(observed) == 1 else observed or None,
        unexpected_count=sum(counts) if counts else None,
        unexpected_percent=max(percents) if percents else None,
        sample=tuple(sample[:SAMPLE_SIZE]), message="; ".join(errors) or None)


def action(ruleset: RuleSet, outcomes: Sequence[RuleOutcome]) -> Action:
    """What the gate does with the rows, by the rule set's policy: write them (every rule
    passed), write them with a warning, quarantine the rows breaking row-level rules (only
    when nothing else failed), or reject them all."""
    failed = [o for o in outcomes if o.outcome != "passed"]
    if not failed:
        return "written"
    if ruleset.policy == "warn":
        return "warned"
    if ruleset.policy == "quarantine" and all(o.rule.row_level and o.outcome == "failed"
                                              for o in failed):
        return "quarantined"
    return "rejected"


def mark(df: DataFrame, rules: Sequence[Rule]) -> DataFrame:
    """``df`` with ``_dq_broken_rules``: the texts of the row-level rules each row breaks
    (empty for rows that pass them all)."""
    from pyspark.sql import functions as F

    return df.withColumn(BROKEN_RULES_COLUMN,
                         F.coalesce(_broken_rules(rules), F.array().cast("array<string>")))


def split(df: DataFrame, rules: Sequence[Rule]) -> tuple[DataFrame, DataFrame]:
    """The rows of ``df`` that pass every row-level rule of ``rules``, and the others with
    ``_dq_broken_rules`` (as ``mark``). Only the rows that break a rule build that list."""
    from pyspark.sql import functions as F

    marked = df.withColumn(BROKEN_RULES_COLUMN, _broken_rules(rules))
    broken = F.col(BROKEN_RULES_COLUMN).isNotNull()
    return marked.where(~broken).drop(BROKEN_RULES_COLUMN), marked.where(broken)


def _broken_rules(rules: Sequence[Rule]) -> Column:
    """The texts of the row-level ``rules`` a row breaks; NULL when it breaks none."""
    from functools import reduce

    from pyspark.sql import functions as F

    tests = {r.text: F.coalesce(r.passes(), F.lit(False)) for r in rules if r.row_level}
    every = reduce(lambda a, b: a & b, tests.values(), F.lit(True))
    return F.when(~every, F.filter(F.array(*(F.when(~test, F.lit(text))
                                             for text, test in tests.items())),
                                   lambda text: text.isNotNull()))


def _validate(df: DataFrame, expectations: Sequence[tuple[str, str]], measured: Measured
              ) -> dict[tuple[str, str], Any]:
    """Run ``expectations`` (keys from ``_key``) in one GX validation, GX taking the metrics
    ``measured`` answers from it: results by key."""
    gx = import_great_expectations()
    context = gx.get_context(mode="ephemeral", project_config=_project_config())
    source = context.data_sources.add_spark("deltamark", persist=False)
    _answer_from(source.get_execution_engine(), measured)
    batch = source.add_dataframe_asset("rows").add_batch_definition_whole_dataframe("all")
    suite = gx.ExpectationSuite(name="checks")
    for i, (name, kwargs) in enumerate(expectations):
        suite.add_expectation(build_expectation(name, json.loads(kwargs), meta={"at": i}))
    validation = gx.ValidationDefinition(name="checks", data=batch,
                                         suite=context.suites.add(suite))
    result = validation.run(batch_parameters={"dataframe": df}, result_format={
        "result_format": "BASIC", "partial_unexpected_count": SAMPLE_SIZE})
    return {expectations[r.expectation_config.meta["at"]]: r for r in result.results}


def _answer_from(engine: Any, measured: Measured) -> None:
    """Make GX's execution ``engine`` (this validation's own) take the metrics ``measured``
    answers from it, and compute each of the others once. GX computes a batch of metrics
    in one call that stops at the first one failing (a rule's missing column) and tries
    the batch again, three times per failing metric: left alone, one bad rule made every
    query rule run about seven times."""
    from great_expectations.exceptions import MetricResolutionError

    compute = engine.resolve_metrics
    computed: dict[Any, Any] = {}
    failures: dict[Any, MetricResolutionError] = {}

    def resolve_metrics(metrics_to_resolve: Any, metrics: Any = None,
                        runtime_configuration: Any = None) -> dict[Any, Any]:
        answered, rest = {}, []
        for metric in metrics_to_resolve:
            known, value = measured.answer(metric.metric_name, metric.metric_domain_kwargs,
                                           metric.metric_value_kwargs or {})
            if known:
                answered[metric.id] = value
            elif metric.metric_name == "unexpected_rows_query.table":
                answered[metric.id] = []  # the rows themselves: not in BASIC results
            elif metric.id not in computed and metric.id not in failures:
                rest.append(metric)
        # together (GX bundles aggregates); once one failed, one by one
        batches = [rest] if rest else []
        while batches:
            batch = batches.pop()
            try:
                computed.update(compute(metrics_to_resolve=batch, metrics=metrics,
                                        runtime_configuration=runtime_configuration))
            except MetricResolutionError as error:
                if len(batch) == 1:
                    failures[batch[0].id] = error
                else:
                    batches += [[m] for m in batch]
        if failing := [failures[m.id] for m in metrics_to_resolve if m.id in failures]:
            raise failing[0]  # GX counts it against the metrics it names, then asks again
        return {**{m.id: computed[m.id] for m in metrics_to_resolve if m.id in computed},
                **answered}

    engine.resolve_metrics = resolve_metrics


def _key(expectation: tuple[str, Mapping[str, Any]]) -> tuple[str, str]:
    name, kwargs = expectation
    return name, json.dumps(kwargs, sort_keys=True, default=str)


def _error(result: Any) -> str | None:
    info = result.exception_info or {}
    if info.get("raised_exception"):
        return _one_line(str(info.get("exception_message")))
    # several exceptions come keyed by metric
    messages = [v.get("exception_message") for v in info.values()
                if isinstance(v, Mapping) and v.get("raised_exception")]
    return _one_line(str(messages[0])) if messages else None


def _one_line(message: str) -> str:
    """GX's message of an exception, short, in one line (a JVM error: its first and root
    messages, not its stack trace)."""
    if is_java_trace(message):
        message = java_summary(message)
    return " ".join(message.split())[:300]


def _project_config() -> Any:
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    return DataContextConfig(store_backend_defaults=InMemoryStoreBackendDefaults(),
                             analytics_enabled=False,
                             progress_bars=ProgressBarsConfig(globally=False))
