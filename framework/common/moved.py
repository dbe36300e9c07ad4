"""The old paths of the modules that moved when framework/ was grouped by concern (0.2):
importing one imports the module that lives there now, with a DeprecationWarning, for one
release (ruff's TID251 keeps the project itself off them). ``python -m`` runs the new
module. ``framework.spark``'s old names are served by that package (``spark.session``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import CodeType, ModuleType

__all__ = ["MOVED", "SPLIT", "old_paths_importable"]

#: a module's old path -> where it lives now
MOVED = {
    "framework.humanize": "framework.common.humanize",
    "framework.redaction": "framework.common.redaction",
    "framework.faults": "framework.common.faults",
    "framework.lease": "framework.storage.lease",
    "framework.spark_types": "framework.spark.types",
    "framework.spark_lines": "framework.spark.lines",
    "framework.jars": "framework.spark.jars",
    "framework.local_jvm": "framework.spark.local_jvm",
    "framework.state_io": "framework.state.table_io",
    "framework.watermarks": "framework.state.watermarks",
    "framework.runner": "framework.run.runner",
    "framework.preflight": "framework.run.preflight",
    "framework.run_plan": "framework.run.plan",
    "framework.job_run": "framework.run.job_run",
    "framework.job_config": "framework.run.spec",
    "framework.job": "framework.run.job",
    "framework.modes": "framework.run.modes",
    "framework.bookmark_history": "framework.run.bookmarks",
    "framework.target_runs": "framework.run.targets",
    "framework.lineage": "framework.run.lineage",
    "framework.admin": "framework.ops.admin",
    "framework.metrics": "framework.ops.metrics",
    "framework.local_jvm_setup": "framework.setup.local_jvm",
    "framework.sources.file_listing": "framework.sources.files.roots",
    "framework.sources.file_events": "framework.sources.files.events",
    "framework.sources.listed_reads": "framework.sources.files.listed_reads",
    "framework.sources.avro": "framework.sources.files.avro",
    "framework.sources.malformed": "framework.sources.files.malformed",
    "framework.sources.schema_drift": "framework.sources.files.schema_drift",
    "framework.sources.json_schema": "framework.sources.files.json_schema",
    "framework.quality.dqdl_syntax": "framework.quality.dqdl.syntax",
}

#: an old module split in two: its old path holds the names of both new modules
SPLIT = {"framework.admin": "framework.ops.actions"}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path (after every other finder) and loads it as the new module."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def exec_module(self, module: ModuleType) -> None:
        # the import statement returns what sys.modules holds once this ends: the new
        # module, or for a split one the old module holding the names of both
        new = importlib.import_module(_moved(module.__name__))
        if (other := SPLIT.get(module.__name__)) is None:
            sys.modules[module.__name__] = new
            return
        for part in (new, importlib.import_module(other)):
            module.__dict__.update({name: value for name, value in vars(part).items()
                                    if not name.startswith("__")})

    def get_code(self, fullname: str) -> CodeType:
        """``python -m <old path>``: runs the new module as ``__main__``."""
        return compile(f"import runpy\nrunpy.run_module({_moved(fullname)!r}, "
                       "run_name='__main__', alter_sys=True)\n", fullname, "exec")


def _moved(old: str) -> str:
    new = MOVED[old]
    warnings.warn(f"{old} is now {new}; the old path goes in the next release",
                  DeprecationWarning, stacklevel=3)
    return new


def old_paths_importable() -> None:
    """Serve the old paths (once per process)."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
