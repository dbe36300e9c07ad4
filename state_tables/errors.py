"""The root of deltamark's one error hierarchy, and the state tables' own errors.

They live here, below ``framework``, so that the state tables raise them without importing
it; ``framework.errors`` builds the rest of the hierarchy on ``DeltamarkError`` and hands
these on, so ``from framework.errors import DeltamarkError`` is the import to write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

__all__ = ["DeltamarkError", "ReadOnlySqlError", "StateSchemaError"]


def _unchanged(text: str) -> str:
    return text


class DeltamarkError(Exception):
    """Root of every error deltamark raises on purpose. Its text never holds a secret:
    ``redact`` masks them (``framework.errors`` installs ``framework.common.redaction.redact``)."""

    #: the exit code of a command that ends with it
    exit_code = 1
    #: masks the secrets in a message; every error's text goes through it
    redact: ClassVar[Callable[[str], str]] = _unchanged

    def __str__(self) -> str:
        return DeltamarkError.redact(super().__str__())


class ReadOnlySqlError(DeltamarkError):
    """A statement given to ``deltamark sql`` would write, or is not one query."""


class StateSchemaError(DeltamarkError):
    """A state table's schema version is unknown to this deltamark (no migration step)."""

    def __init__(self, table: str, found: int, supported: int):
        self.table, self.found, self.supported = table, found, supported
        problem = (f"schema version {found} is newer than this deltamark understands "
                   f"({supported}). Upgrade deltamark." if found > supported else
                   f"no migration step from schema version {found} towards {supported}. "
                   "This is a deltamark bug: report it.")
        super().__init__(f"state table {table}: {problem}")
