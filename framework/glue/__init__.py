"""Run AWS Glue PySpark scripts on any Spark with deltamark's bookmarks.

The modules mirror ``awsglue``'s. A script run with ``deltamark run --script`` imports
them as ``awsglue...``, unchanged (``framework.glue.environment``); code outside a script
imports them from here::

    from framework.glue.utils import getResolvedOptions      # awsglue.utils
    from framework.glue.context import GlueContext           # awsglue.context
    from framework.glue.job import Job                       # awsglue.job
    from framework.glue.dynamicframe import DynamicFrame     # awsglue.dynamicframe
    from framework.glue.transforms import Relationalize      # awsglue.transforms
    from framework.glue.ml import FindMatches                # awsglueml.transforms (fails)
    from framework.glue.workflow import get_workflow_run_properties  # boto3's Glue client

and runs with ``deltamark run --script PATH --arg JOB_NAME=... --arg NAME=VALUE``.
"""

from framework.glue.context import GlueContext
from framework.glue.dynamicframe import DynamicFrame, DynamicFrameCollection
from framework.glue.job import Job
from framework.glue.transforms import Relationalize
from framework.glue.utils import getResolvedOptions

__all__ = ["DynamicFrame", "DynamicFrameCollection", "GlueContext", "Job", "Relationalize",
           "getResolvedOptions"]
