"""Glue's Data Quality Definition Language (DQDL): a ruleset's syntax, and its rules as
great-expectations evaluates them with Glue's meaning (``ruleset`` says how)."""

from framework.quality.dqdl.ruleset import (
    DQDL_RULE_TYPES,
    DqdlError,
    Ruleset,
    metric_of,
    parse_ruleset,
)

__all__ = ["DQDL_RULE_TYPES", "DqdlError", "Ruleset", "metric_of", "parse_ruleset"]
