"""deltamark: Glue-style job bookmarks for PySpark, with the state in Delta tables."""

from typing import TYPE_CHECKING, Any

from framework.common.moved import old_paths_importable
from framework.common.version import __version__ as __version__

if TYPE_CHECKING:
    from framework.config import Settings, load_settings
    from framework.errors import DeltamarkError
    from framework.run.job import IncrementalJob, JobContext
    from framework.run.runner import RunReport, run_job

__all__ = [
    "DeltamarkError",
    "IncrementalJob",
    "JobContext",
    "RunReport",
    "Settings",
    "load_settings",
    "run_job",
]

# Imported on first use: the read-only CLI commands import framework.* modules and should
# not pay for the job machinery (pyarrow.parquet, the Delta engines) they never touch.
_HOMES = {"Settings": "framework.config", "load_settings": "framework.config",
          "DeltamarkError": "framework.errors", "IncrementalJob": "framework.run.job",
          "JobContext": "framework.run.job", "RunReport": "framework.run.runner",
          "run_job": "framework.run.runner"}


old_paths_importable()


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'framework' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
