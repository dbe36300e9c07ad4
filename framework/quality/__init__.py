"""Data-quality gates: rule sets from a job's conf, evaluated with great-expectations
before a target write (``ctx.write_delta(..., checks=NAME)``)."""

from framework.quality.rules import DQDL_KINDS, Policy, Rule, RuleSet, parse_checks

__all__ = ["DQDL_KINDS", "Policy", "Rule", "RuleSet", "parse_checks"]
