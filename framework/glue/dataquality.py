"""Glue's data-quality transform (``awsgluedq.transforms``): ``EvaluateDataQuality``
evaluates a DQDL ruleset on a frame with great-expectations (``framework.quality.dqdl``),
as the data-quality node of every Glue Studio script does before its targets.

``process_rows`` returns Glue's collection: ``ruleOutcomes`` (one row per rule: ``Rule``,
``Outcome`` Passed/Failed, ``FailureReason``, ``EvaluatedMetrics``, ``EvaluatedRule``),
``rowLevelOutcomes`` (the rows with ``DataQualityRulesPass``, ``DataQualityRulesFail``,
``DataQualityRulesSkip`` and ``DataQualityEvaluationResult``) and ``originalData``. As in
Glue the outcomes gate nothing by themselves (a script asserts on them); "publishing" them
records them in the run's ``dq_results`` state table, under the evaluation context.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from framework.errors import GlueRulesetError
from framework.glue.active_run import active_run
from framework.glue.dynamicframe import DynamicFrame, DynamicFrameCollection
from framework.run.job import job_run

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from framework.quality.dqdl import Ruleset
    from framework.quality.gate import RuleOutcome
    from state_tables.model import DqResult

__all__ = ["EvaluateDataQuality"]

_RULE_OUTCOMES_SCHEMA = ("Rule string, Outcome string, FailureReason string, "
                         "EvaluatedMetrics map<string, double>, EvaluatedRule string")


class EvaluateDataQuality:
    """``EvaluateDataQuality().process_rows(frame=, ruleset=, publishing_options=,
    additional_options=)``, and ``EvaluateDataQuality.apply(...)`` (its rule outcomes)."""

    DATA_QUALITY_RULE_OUTCOMES_KEY = "ruleOutcomes"
    DATA_QUALITY_ROW_LEVEL_OUTCOMES_KEY = "rowLevelOutcomes"
    DATA_QUALITY_ORIGINAL_DATA_KEY = "originalData"

    @classmethod
    def apply(cls, frame: DynamicFrame, ruleset: str,
              publishing_options: Mapping[str, Any] | None = None, **kwargs: Any
              ) -> DynamicFrame:
        """The rule outcomes of ``ruleset`` on ``frame`` (one row per rule)."""
        return cls().process_rows(frame, ruleset, publishing_options, **kwargs)[
            cls.DATA_QUALITY_RULE_OUTCOMES_KEY]

    def process_rows(self, frame: DynamicFrame, ruleset: str,
                     publishing_options: Mapping[str, Any] | None = None,
                     additional_options: Mapping[str, Any] | None = None,
                     additional_data_sources: Mapping[str, DynamicFrame] | None = None,
                     **_: Any) -> DynamicFrameCollection:
        """Evaluate the DQDL ``ruleset`` on ``frame``: rule outcomes, row-level outcomes
        and the original data. ``publishing_options``: ``dataQualityEvaluationContext``
        names the results in ``dq_results`` (and the history dynamic rules such as
        ``RowCount > avg(last(10))`` read); ``enableDataQualityResultsPublishing``
        (default true) records them. ``additional_options``:
        ``compositeRuleEvaluation.method`` ROW joins a composite's rules row by row
        (default: rule by rule, on the whole frame); the others are Glue's tuning.
        ``additional_data_sources``: frames by the name rules give them
        (``ReferentialIntegrity "id" "reference.id" = 1.0``, ``select ... from
        reference``).

        Raises:
            GlueRulesetError: a rule deltamark cannot evaluate, or a syntax error.
        """
        from framework.quality import RuleSet
        from framework.quality.dqdl import DqdlError, parse_ruleset

        options = dict(publishing_options or {})
        context = str(options.get("dataQualityEvaluationContext") or "EvaluateDataQuality")
        if not isinstance(ruleset, str):
            raise GlueRulesetError(context, "ruleset must be DQDL text ('Rules = [ ... ]'), "
                                   f"not {type(ruleset).__name__}")
        ctx, df = active_run().ctx, frame.toDF()
        references = {alias: source.toDF() for alias, source in
                      (additional_data_sources or {}).items()}
        method = str((additional_options or {}).get("compositeRuleEvaluation.method", ""))
        try:
            parsed = parse_ruleset(
                ruleset, _types(df), history=_history(job_run(ctx).dq_history(context)),
                references={alias: _types(ref) for alias, ref in references.items()},
                row_composites=method.upper() == "ROW")
        except DqdlError as exc:
            raise GlueRulesetError(context, str(exc)) from exc
        if parsed.analyzers:
            ctx.log.info("EvaluateDataQuality %s: Analyzers are not evaluated (they only "
                         "profile)", context)
        rows = 0
        outcomes: list[RuleOutcome] = []
        if df.columns and parsed.rules:  # a run with nothing new has no fields
            with _views(references):
                rows, outcomes = job_run(ctx).evaluate_checks(
                    df, RuleSet(context, "warn", parsed.rules), target=frame.name or context,
                    record=str(options.get("enableDataQualityResultsPublishing", True)
                               ).lower() == "true")
        glue = frame.glue_ctx
        return DynamicFrameCollection({
            self.DATA_QUALITY_RULE_OUTCOMES_KEY: DynamicFrame(
                _rule_outcomes(ctx.spark, outcomes, parsed, rows), glue, "ruleOutcomes"),
            self.DATA_QUALITY_ROW_LEVEL_OUTCOMES_KEY: DynamicFrame(
                _row_level_outcomes(df, outcomes), glue, "rowLevelOutcomes"),
            self.DATA_QUALITY_ORIGINAL_DATA_KEY: frame,
        }, glue)


def _types(df: DataFrame) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in df.schema.fields}


def _history(results: Sequence[DqResult]) -> Callable[[str], list[float]]:
    """A metric's values in earlier runs (``results``, newest run first), one a run."""
    from framework.quality.dqdl import metric_of

    def values(metric: str) -> list[float]:
        found: dict[int, float] = {}
        for result in results:
            if (isinstance(result.observed, int | float) and result.outcome != "error"
                    and metric_of(result.rule) == metric):
                found.setdefault(result.run_seq, float(result.observed))
        return list(found.values())

    return values


@contextlib.contextmanager
def _views(references: Mapping[str, DataFrame]) -> Iterator[None]:
    """The reference frames as the session's temporary views of their names, while the
    rules read them."""
    for alias, ref in references.items():
        ref.createOrReplaceTempView(alias)
    try:
        yield
    finally:
        for alias, ref in references.items():
            ref.sparkSession.catalog.dropTempView(alias)


def _rule_outcomes(spark: Any, outcomes: list[RuleOutcome], parsed: Ruleset, rows: int
                   ) -> DataFrame:
    """One row per rule, as Glue's ``ruleOutcomes``; ``EvaluatedRule`` is a dynamic rule
    with the values it was compared with."""
    records = []
    for outcome in outcomes:
        text = outcome.rule.text
        records.append((text, "Passed" if outcome.outcome == "passed" else "Failed",
                        _failure_reason(outcome, parsed, rows),
                        _metrics(outcome, parsed, rows),
                        (parsed.evaluated or {}).get(text, text)))
    return spark.createDataFrame(records, _RULE_OUTCOMES_SCHEMA)


def _failure_reason(outcome: RuleOutcome, parsed: Ruleset, rows: int) -> str | None:
    if outcome.outcome == "passed":
        return None
    if outcome.outcome == "error":
        return f"Rule could not be evaluated: {outcome.message}"
    if outcome.parts:
        return "; ".join(f"{p.rule.text}: {_failure_reason(p, parsed, rows)}"
                         for p in outcome.parts if p.outcome != "passed")
    if outcome.rule.row_level:
        return f"{outcome.unexpected_count or 0} of {rows} rows do not meet the rule"
    if isinstance(outcome.observed, int | float) and outcome.rule.text in parsed.metrics:
        return f"Value: {outcome.observed} does not meet the constraint requirement"
    return "The value does not meet the constraint requirement"


def _metrics(outcome: RuleOutcome, parsed: Ruleset, rows: int) -> dict[str, float]:
    """The rule's metric under Glue's name: the value it observed (a rule on the whole
    frame), or the share of rows meeting it (a row-level rule); a composite's rules'."""
    if outcome.outcome == "error" and not outcome.parts:
        return {}
    if outcome.parts:
        return {name: value for part in outcome.parts
                for name, value in _metrics(part, parsed, rows).items()}
    name = parsed.metrics.get(outcome.rule.text)
    if outcome.rule.row_level:
        return {name or "Compliance": 1 - (outcome.unexpected_count or 0) / rows}
    if name is not None and isinstance(outcome.observed, int | float) and not isinstance(
            outcome.observed, bool):
        return {name: float(outcome.observed)}
    return {}


def _row_level_outcomes(df: DataFrame, outcomes: list[RuleOutcome]) -> DataFrame:
    """``df`` with Glue's row-level columns: the row-level rules each row meets and breaks,
    the rules said of the whole frame (skipped here) and Passed/Failed."""
    from functools import reduce

    from pyspark.sql import functions as F

    tests: dict[str, Column] = {o.rule.text: F.coalesce(o.rule.passes(), F.lit(False))
                                for o in outcomes
                                if o.rule.row_level and o.outcome != "error"}
    skipped = [o.rule.text for o in outcomes if o.rule.text not in tests]

    def texts(selected: list[Column]) -> Column:
        return F.filter(F.array(*selected), lambda t: t.isNotNull()) if selected else \
            F.array().cast("array<string>")

    every = reduce(lambda a, b: a & b, tests.values(), F.lit(True))
    return df.select(
        "*",
        texts([F.when(t, F.lit(text)) for text, t in tests.items()]).alias(
            "DataQualityRulesPass"),
        texts([F.when(~t, F.lit(text)) for text, t in tests.items()]).alias(
            "DataQualityRulesFail"),
        F.array(*map(F.lit, skipped)).cast("array<string>").alias("DataQualityRulesSkip"),
        F.when(every, "Passed").otherwise("Failed").alias("DataQualityEvaluationResult"))
