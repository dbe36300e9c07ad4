"""A rule set applied to the rows a run writes: evaluate, record, then act on its policy.

``JobContext`` gates a write given ``checks=`` (``RunChecks.gate``); Glue's
EvaluateDataQuality only evaluates and records (``RunChecks.evaluate``). Outcomes go to the
``dq_results`` state table under the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from framework.errors import DataQualityError
from state_tables.model import DqResult
from state_tables.store import StateStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from framework.quality.gate import RuleOutcome
    from framework.quality.rules import RuleSet

__all__ = ["RunChecks"]


@dataclass(frozen=True)
class RunChecks:
    """The rule sets' gate of one run: who the run is and where its outcomes go."""

    job: str
    run_id: str
    run_seq: int
    attempt: int
    store: StateStore
    log: logging.Logger

    def evaluate(self, df: DataFrame, ruleset: RuleSet, *, target: str,
                 record: bool = True) -> tuple[int, list[RuleOutcome]]:
        """Evaluate ``ruleset`` on ``df`` and record the outcomes in ``dq_results`` (with the
        action its policy takes, under ``target``), without acting on them.

        Returns:
            The rows checked and each rule's outcome; ``(0, [])`` for rows with nothing in
            them (an increment with nothing new), which are not checked.
        """
        from framework.quality import gate

        measured = gate.measure(df, ruleset.rules)
        if measured.rows == 0:
            self.log.info("checks %s: no rows to check for %s", ruleset.name, target)
            return 0, []
        outcomes = gate.evaluate(df, ruleset, measured=measured)
        action = gate.action(ruleset, outcomes)
        if record:
            self.store.record_dq_results([DqResult(
                job=self.job, run_id=self.run_id, run_seq=self.run_seq, attempt=self.attempt,
                ruleset=ruleset.name, target=target, policy=ruleset.policy, rule=o.rule.text,
                kind=o.rule.kind, outcome=o.outcome, action=action, rows=measured.rows,
                observed=o.observed, unexpected_count=o.unexpected_count,
                unexpected_percent=o.unexpected_percent, sample=o.sample, message=o.message)
                for o in outcomes])
        return measured.rows, outcomes

    def history(self, ruleset: str) -> list[DqResult]:
        """The results of ``ruleset`` in this job's earlier runs, newest run first."""
        return self.store.dq_history(self.job, ruleset, before_seq=self.run_seq)

    def gate(self, df: DataFrame, ruleset: RuleSet, *, target: str,
             quarantine: Callable[[DataFrame, str], object]) -> DataFrame:
        """Evaluate ``ruleset`` on ``df``, record the outcomes and apply its policy.

        ``df`` is not cached: the gate reads it once (``gate.measure``) and the write reads
        it again, as a source's plan pins what it reads (files, versions, key ranges).

        Args:
            target: the table the rows are for.
            quarantine: appends rows breaking row-level rules (with ``_dq_broken_rules``,
                ``_dq_job``, ``_dq_run_id``, ``_dq_target``) to the table it is given.

        Returns:
            The rows to write to ``target``: all of them, or those left after the
            quarantine.

        Raises:
            DataQualityError: the policy rejects the rows.
        """
        from pyspark.sql import functions as F

        from framework.quality import gate

        rows, outcomes = self.evaluate(df, ruleset, target=target)
        if rows == 0:
            return df
        action = gate.action(ruleset, outcomes)
        failed = [o for o in outcomes if o.outcome != "passed"]
        summaries = [o.summary() for o in failed]
        if action == "rejected":
            hint = (f"see deltamark dq results {self.job} --run {self.run_id}."
                    if ruleset.policy == "fail" else
                    "only row-level rules can quarantine rows; fix the data or the rule.")
            raise DataQualityError(self.job, ruleset.name, target, summaries, hint)
        if action == "warned":
            self.log.warning("checks %s: %d of %d rules failed for %s (written anyway): %s",
                             ruleset.name, len(failed), len(outcomes), target,
                             "; ".join(summaries))
        if action != "quarantined":
            return df
        # only the failed rules: GX found no row breaking the others
        passing, broken = gate.split(df, [o.rule for o in outcomes if o.outcome == "failed"])
        # only policy quarantine quarantines, and parse_rulesets refuses it without a table
        table = ruleset.quarantine
        assert table is not None
        quarantine(broken.select("*", F.lit(self.job).alias("_dq_job"),
                                 F.lit(self.run_id).alias("_dq_run_id"),
                                 F.lit(target).alias("_dq_target")), table)
        self.log.warning("checks %s: %s to %s", ruleset.name, "; ".join(summaries), table)
        return passing
