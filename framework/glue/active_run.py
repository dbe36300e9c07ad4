"""The run a Glue script is in: what ``GlueContext``, ``Job`` and the workflow calls of
that script serve (``framework.glue.script`` makes it current while the script runs)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from framework.errors import GlueUnsupportedError

if TYPE_CHECKING:
    from framework.config import CatalogTable
    from framework.run.job import JobContext

__all__ = ["GlueRun", "active_run", "current_run"]


@dataclass
class GlueRun:
    """The run a Glue script is in, the catalog its ``from_catalog`` reads, and whether it
    called ``job.commit()``."""

    ctx: JobContext
    catalog: Mapping[str, CatalogTable] = field(default_factory=dict)
    committed: bool = False


_CURRENT: contextvars.ContextVar[GlueRun] = contextvars.ContextVar("deltamark_glue_run")


@contextlib.contextmanager
def current_run(run: GlueRun) -> Iterator[None]:
    """Make ``run`` the one ``GlueContext`` objects serve while the block runs."""
    token = _CURRENT.set(run)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def active_run() -> GlueRun:
    """The run of the script calling (``GlueUnsupportedError`` outside one)."""
    run = _CURRENT.get(None)
    if run is None:
        raise GlueUnsupportedError("GlueContext outside deltamark run --script",
                                   "run the script with deltamark run --script PATH")
    return run
