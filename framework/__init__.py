"""deltamark: Glue-style job bookmarks for PySpark, with the state in Delta tables."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Imported on first use: the read-only CLI commands import framework.* modules and should
# not pay for the job machinery (pyarrow.parquet, the Delta engines) they never touch.
_HOMES = {"Settings": "framework.config", "load_settings": "framework.config",
          "DeltamarkError": "framework.errors", "IncrementalJob": "framework.job",
          "JobContext": "framework.job", "RunReport": "framework.runner",
          "run_job": "framework.runner"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'framework' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
