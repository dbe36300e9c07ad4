"""Run AWS Glue PySpark scripts on any Spark with deltamark's bookmarks: the shapes Glue
scripts import (``awsglue.utils.getResolvedOptions`` so far)."""

from framework.glue.utils import getResolvedOptions

__all__ = ["getResolvedOptions"]
