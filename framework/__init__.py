"""deltamark: Glue-style job bookmarks for PySpark, with the state in Delta tables."""

from framework.config import Settings, load_settings
from framework.errors import DeltamarkError

__all__ = ["DeltamarkError", "Settings", "load_settings"]
__version__ = "0.1.0"
