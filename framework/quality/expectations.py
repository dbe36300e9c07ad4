"""great-expectations, imported on first use (it takes seconds), and its expectations by
name: what checking a rule set at load (``rules``) and running it (``gate``) share."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["build_expectation", "import_great_expectations"]


def import_great_expectations() -> Any:
    """The great_expectations module, imported on first use (it takes seconds)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations

    return great_expectations


def build_expectation(name: str, kwargs: Mapping[str, Any], *, meta: Mapping[str, Any] | None = None
                      ) -> Any:
    """The GX expectation ``name`` (a class in ``great_expectations.expectations``).

    Raises:
        ValueError: no such expectation. GX's own errors for bad arguments.
    """
    expectations = import_great_expectations().expectations
    cls = getattr(expectations, name, None)
    if not isinstance(cls, type):
        raise ValueError(f"great-expectations has no expectation {name}")
    return cls(**kwargs, meta=dict(meta or {}))
