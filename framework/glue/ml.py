"""Glue's ML transforms (``awsglueml.transforms``): they run only inside AWS Glue, so using
one fails with a message saying what to do instead."""

from __future__ import annotations

from framework.glue.transforms import NotProvided

__all__ = ["FillMissingValues", "FindIncrementalMatches", "FindMatches"]


class _GlueOnly(NotProvided):
    alternative = ("Glue's ML transforms run only in AWS Glue; train and apply a model "
                   "with Spark ML (pyspark.ml) on frame.toDF() instead")


class FindMatches(_GlueOnly):
    """Glue's FindMatches (not available outside Glue)."""


class FindIncrementalMatches(_GlueOnly):
    """Glue's FindIncrementalMatches (not available outside Glue)."""


class FillMissingValues(_GlueOnly):
    """Glue's FillMissingValues (not available outside Glue)."""
