"""A DQDL ruleset's text, parsed (``syntax``) into rules that great-expectations evaluates
with Glue's semantics: each node goes to its rule type's method (``rows``, ``dataset``,
``references``), composites are joined here.

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
from collections.abc import Mapping
from dataclasses import dataclass

from framework.quality.dqdl import nodes, sql
from framework.quality.dqdl.dataset import DatasetRules
from framework.quality.dqdl.references import ReferenceQueries
from framework.quality.dqdl.rows import RowRules
from framework.quality.dqdl.syntax import Composite, DqdlError, Simple, parse_nodes
from framework.quality.dqdl.values import DynamicValues, History
from framework.quality.rules import Rule

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
#: the rules on reference data, each a metric its query computes (``references``)
_ON_REFERENCES = {"RowCountMatch", "ReferentialIntegrity", "AggregateMatch", "DatasetMatch",
                  "SchemaMatch"}

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
        parsed = parse_nodes(f"Rules = [ {rule_text} ]")
    except DqdlError:
        return None
    node = parsed.rules[0]
    return nodes.metric_name(node) if isinstance(node, Simple) else None


class _Builder:
    """Rules from parsed nodes, for a frame's column types."""

    def __init__(self, column_types: Mapping[str, str], history: History | None,
                 references: Mapping[str, Mapping[str, str]], row_composites: bool):
        self.types = dict(column_types)
        self.values = DynamicValues(history)
        self.rows = RowRules(self.types, self.values)
        self.dataset = DatasetRules(self.types, self.values)
        self.references = ReferenceQueries(references, self.types)
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
            rule = self.dataset.metric(node, None, self.references.query(node))
        else:
            method = nodes.snake(node.kind)
            rule = (getattr(self.rows, method, None) or getattr(self.dataset, method))(node)
        if (metric := nodes.metric_name(node)) is not None:
            self.metrics.setdefault(rule.text, metric)
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
            return sql.row_rule("Composite", node.text, joined)
        # joined row by row too, for the rows each breaks (the verdict is the parts')
        rows = sql.row_rule("Composite", node.text, joined).expectations if joined else ()
        return Rule("Composite", node.text,
                    (*(e for p in parts for e in p.expectations), *rows),
                    ("sql", (), joined) if joined else None,
                    parts=tuple(parts), combine=node.operator)

