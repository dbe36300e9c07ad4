"""Bookmark modes with Glue's semantics and argument errors.

- ``enable``: read what earlier runs have not processed; the bookmark advances when the
  run succeeds. deltamark's default (Glue's default is disable).
- ``disable``: read everything; the bookmark is neither used nor changed.
- ``pause``: read from the current bookmark without advancing it; with ``from_run`` and
  ``to_run``, read exactly what run FROM had not yet processed and run TO had (both or
  neither).

Glue's names (``job-bookmark-enable`` ...) and legacy names (``continuation-enabled`` /
``continuation-readonly`` / ``continuation-ignore``) are accepted too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from framework.common.redaction import redact_values
from framework.errors import BookmarkOptionError

__all__ = ["CLI_FLAGS", "GLUE_FLAGS", "BookmarkMode", "BookmarkOptions"]

BookmarkMode = Literal["enable", "disable", "pause"]

#: how the from, to and pause options are spelled: on deltamark's CLI, in a Glue script
CLI_FLAGS = ("--bookmark-from", "--bookmark-to", "--bookmark pause")
GLUE_FLAGS = ("--job-bookmark-from", "--job-bookmark-to",
              "--job-bookmark-option job-bookmark-pause")

_ALIASES = {
    **{mode: mode for mode in get_args(BookmarkMode)},
    **{f"job-bookmark-{mode}": mode for mode in get_args(BookmarkMode)},
    "continuation-enabled": "enable",
    "continuation-readonly": "pause",
    "continuation-ignore": "disable",
}


@dataclass(frozen=True)
class BookmarkOptions:
    """How a run uses its bookmarks. Build with ``BookmarkOptions.parse``."""

    mode: BookmarkMode = "enable"
    from_run: str | None = None
    to_run: str | None = None

    @property
    def reads_bookmark(self) -> bool:
        return self.mode != "disable"

    @property
    def advances(self) -> bool:
        return self.mode == "enable"

    def recorded_arguments(self, params: Mapping[str, str]) -> dict[str, str]:
        """A run's effective arguments as recorded (secrets masked): its ``params``, and a
        pause's range."""
        return redact_values({**params, **{k: v for k, v in (("bookmark_from", self.from_run),
                                                             ("bookmark_to", self.to_run)) if v}})

    @classmethod
    def parse(cls, job: str, mode: str, *, from_run: str | None = None,
              to_run: str | None = None, flags: tuple[str, str, str] = CLI_FLAGS
              ) -> BookmarkOptions:
        """Validate a mode and its range the way Glue does.

        ``flags`` names the from, to and pause options in messages: deltamark's CLI
        (``CLI_FLAGS``) or a Glue script's arguments (``GLUE_FLAGS``).

        Raises:
            BookmarkOptionError: unknown mode; from/to outside pause; only one of them.
        """
        from_flag, to_flag, pause_flag = flags
        resolved = _ALIASES.get(mode.strip().lower())
        if resolved is None:
            raise BookmarkOptionError(
                job, f"bookmark mode '{mode}' is not one of enable, disable, pause "
                "(Glue's job-bookmark-* and continuation-* names work too).")
        given = [name for name, value in ((from_flag, from_run), (to_flag, to_run)) if value]
        if given and resolved != "pause":
            raise BookmarkOptionError(
                job, f"Invalid option(s): {' and '.join(given)} only apply with "
                f"{pause_flag} (the mode is {resolved}).")
        if len(given) == 1:
            missing = to_flag if from_run else from_flag
            raise BookmarkOptionError(
                job, f"Missing option or value for {missing}: pause with a range needs "
                f"both {from_flag} and {to_flag} (or neither).")
        return cls(mode=resolved, from_run=from_run or None, to_run=to_run or None)
