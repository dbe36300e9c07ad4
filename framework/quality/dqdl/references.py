"""The rules on reference data (Glue's ``additional_data_sources``): each a metric that a
query computes, reading each reference dataset as a table of its alias."""

from __future__ import annotations

import re
from collections.abc import Mapping

from framework.quality.dqdl import nodes, sql
from framework.quality.dqdl.syntax import DqdlError, Simple
from framework.spark.session import quoted


class ReferenceQueries:
    """The queries of the rules on reference data, which read each reference dataset as a
    table of its alias."""

    def __init__(self, references: Mapping[str, Mapping[str, str]],
                 types: Mapping[str, str]):
        self.references = references
        self.types = types

    def query(self, node: Simple) -> str:
        """The query computing the metric of ``node``, a rule on reference data."""
        return getattr(self, f"_{nodes.snake(node.kind)}")(node)

    def _row_count_match(self, node: Simple) -> str:
        [alias] = nodes.strings(node, 1, 'RowCountMatch "reference" >= 0.9')
        table = self._table(node, alias)
        return (f"SELECT CAST((SELECT count(*) FROM {{batch}}) AS DOUBLE) / "
                f"(SELECT count(*) FROM {table})")

    def _referential_integrity(self, node: Simple) -> str:
        """The share of rows whose values (all of them) are among the reference's."""
        mine, theirs = nodes.strings(node, 2, 'ReferentialIntegrity "id" "reference.id" = 1.0')
        alias, _, listed = theirs.partition(".")
        table = self._table(node, alias)
        columns = [c.strip() for c in mine.split(",")]
        others = [c.strip() for c in listed.strip("{}").split(",")]
        if len(columns) != len(others) or not listed:
            raise DqdlError(f"{node.text}: name as many reference columns as columns "
                            "(\"a,b\" \"reference.{x,y}\")")
        keys = ", ".join(f"{sql.braced(quoted(o))} AS k{i}" for i, o in enumerate(others))
        on = " AND ".join(f"p.{sql.braced(quoted(c))} = r.k{i}" for i, c in enumerate(columns))
        return (f"SELECT avg(CASE WHEN r.found THEN 1.0D ELSE 0.0D END) FROM {{batch}} AS p "
                f"LEFT JOIN (SELECT DISTINCT {keys}, true AS found FROM {table}) AS r ON {on}")

    def _aggregate_match(self, node: Simple) -> str:
        """sum or avg of a column over that of another (of the frame or a reference)."""
        first, second = (self._aggregate(node, a) for a in nodes.strings(
            node, 2, 'AggregateMatch "sum(amount)" "sum(reference.amount)" >= 0.9'))
        return (f"SELECT CASE WHEN b = 0 THEN CASE WHEN a = 0 THEN 1.0D ELSE 0.0D END ELSE "
                f"a / b END FROM (SELECT CAST(({first}) AS DOUBLE) AS a, CAST(({second}) AS "
                f"DOUBLE) AS b) AS aggregates")

    def _aggregate(self, node: Simple, text: str) -> str:
        found = re.fullmatch(r"\s*(sum|avg)\s*\(\s*(.+?)\s*\)\s*", text, re.I)
        if not found:
            raise DqdlError(f"{node.text}: {text!r} is not sum(column) or avg(column)")
        function, column = found[1].lower(), found[2]
        alias, dot, name = column.rpartition(".")
        if dot and alias in self.references:
            return f"SELECT {function}({sql.braced(quoted(name))}) FROM {self._table(node, alias)}"
        return f"SELECT {function}({sql.braced(quoted(column))}) FROM {{batch}}"

    def _dataset_match(self, node: Simple) -> str:
        """The share of rows whose key the reference has, with the same values in the
        compared columns (all others, or those mapped); keys must be unique on both sides,
        else the value is NULL and the rule fails."""
        if len(node.arguments) not in (2, 3):
            raise DqdlError(f'{node.text}: DatasetMatch takes "reference" "key->ref_key" and '
                            'optionally "column->ref_column", and a comparison')
        alias, keys, *compared = node.arguments
        table = self._table(node, alias)
        key_pairs = nodes.mapping(keys)
        pairs = nodes.mapping(compared[0]) if compared else [
            (c, c) for c in self.types if c not in {k for k, _ in key_pairs}]
        on = " AND ".join(f"p.{sql.braced(quoted(a))} = r.{sql.braced(quoted(b))}"
                          for a, b in key_pairs)
        same = " AND ".join(f"p.{sql.braced(quoted(a))} <=> r.{sql.braced(quoted(b))}"
                            for a, b in pairs) or "true"
        mine = ", ".join(sql.braced(quoted(a)) for a, _ in key_pairs)
        theirs = ", ".join(sql.braced(quoted(b)) for _, b in key_pairs)
        unique = (f"(SELECT count(*) = count(DISTINCT {mine}) FROM {{batch}}) AND "
                  f"(SELECT count(*) = count(DISTINCT {theirs}) FROM {table})")
        matched = (f"SELECT avg(CASE WHEN r.__deltamark_found AND {same} THEN 1.0D ELSE 0.0D "
                   f"END) FROM {{batch}} AS p LEFT JOIN (SELECT *, true AS __deltamark_found "
                   f"FROM {table}) AS r ON {on}")
        return f"SELECT CASE WHEN {unique} THEN ({matched}) END"

    def _schema_match(self, node: Simple) -> str:
        """The share of columns with the reference's name and type (0 when the counts
        differ)."""
        [alias] = nodes.strings(node, 1, 'SchemaMatch "reference" = 1.0')
        self._table(node, alias)
        theirs = self.references[alias]
        if len(theirs) != len(self.types):
            ratio = 0.0
        else:
            same = sum(1 for c, t in self.types.items() if theirs.get(c) == t)
            ratio = same / len(self.types) if self.types else 1.0
        return f"SELECT {ratio!r}"

    def _table(self, node: Simple, alias: str) -> str:
        if alias not in self.references:
            given = ", ".join(sorted(self.references)) or "none"
            raise DqdlError(f"{node.text}: no reference data named {alias!r} (give it in "
                            f"additional_data_sources; given: {given})")
        return sql.braced(quoted(alias))
