"""deltamark: Glue-style job bookmarks for PySpark, with the state in Delta tables."""

from framework.config import Settings, load_settings
from framework.errors import DeltamarkError
from framework.job import IncrementalJob, JobContext
from framework.runner import RunReport, run_job

__all__ = [
    "DeltamarkError",
    "IncrementalJob",
    "JobContext",
    "RunReport",
    "Settings",
    "load_settings",
    "run_job",
]
__version__ = "0.1.0"
