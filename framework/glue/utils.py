"""``getResolvedOptions``: Glue job arguments, parsed and checked the way Glue does.

    from framework.glue.utils import getResolvedOptions   # was: from awsglue.utils import ...

    args = getResolvedOptions(sys.argv, ["JOB_NAME", "landing"])
    args["JOB_NAME"], args["landing"], args["job_bookmark_option"]

Glue passes job arguments as ``--NAME value`` (``--NAME=value`` works too). The names asked
for are required; the bookmark arguments are Glue's own and are always read:
``--job-bookmark-option`` (job-bookmark-enable / -disable / -pause), the legacy
``--continuation-option`` (continuation-enabled / -readonly / -ignore, the same modes), and
``--job-bookmark-from`` / ``--job-bookmark-to`` (pause only, both or neither).
"""

from __future__ import annotations

from collections.abc import Sequence

from framework.errors import BookmarkOptionError, GlueArgumentError
from framework.run.modes import GLUE_FLAGS, BookmarkOptions

__all__ = ["getResolvedOptions"]

BOOKMARK_OPTION = "job-bookmark-option"
CONTINUATION_OPTION = "continuation-option"
RANGE_OPTIONS = ("job-bookmark-from", "job-bookmark-to")
BOOKMARK_CHOICES = ("job-bookmark-enable", "job-bookmark-disable", "job-bookmark-pause")
CONTINUATION_CHOICES = {"continuation-enabled": "job-bookmark-enable",
                        "continuation-readonly": "job-bookmark-pause",
                        "continuation-ignore": "job-bookmark-disable"}
RESERVED = (BOOKMARK_OPTION, CONTINUATION_OPTION, *RANGE_OPTIONS)


def getResolvedOptions(  # noqa: N802 (Glue's name)
        args: Sequence[str], options: Sequence[str]) -> dict[str, str | None]:
    """The values of ``options`` in ``args`` (``sys.argv``: the script name first), plus
    ``job_bookmark_option`` (default job-bookmark-disable, as in Glue),
    ``job_bookmark_from`` and ``job_bookmark_to``.

    Raises:
        GlueArgumentError: a reserved name asked for, a required argument missing or
            without a value, an unknown bookmark option, both bookmark options given,
            or a from/to range that does not fit the mode.
    """
    if reserved := [o for o in options if o in RESERVED]:
        raise GlueArgumentError(f"Using reserved arguments --{', --'.join(reserved)}")
    given = _parse(list(args[1:]), known={*options, *RESERVED})
    missing = [o for o in options if o not in given]
    if missing:
        raise GlueArgumentError("the following arguments are required: "
                                + ", ".join(f"--{o}" for o in missing))
    mode = given.get(BOOKMARK_OPTION)
    if mode is not None and mode not in BOOKMARK_CHOICES:
        raise GlueArgumentError(_invalid_choice(BOOKMARK_OPTION, mode, BOOKMARK_CHOICES))
    legacy = given.get(CONTINUATION_OPTION)
    if legacy is not None:
        if legacy not in CONTINUATION_CHOICES:
            raise GlueArgumentError(_invalid_choice(CONTINUATION_OPTION, legacy,
                                                    tuple(CONTINUATION_CHOICES)))
        if mode is not None:
            raise GlueArgumentError(f"--{BOOKMARK_OPTION} and --{CONTINUATION_OPTION} are "
                                    "both given; use --job-bookmark-option only")
        mode = CONTINUATION_CHOICES[legacy]
    mode = mode or "job-bookmark-disable"
    start, end = (given.get(name) for name in RANGE_OPTIONS)
    try:
        BookmarkOptions.parse("glue script", mode, from_run=start, to_run=end, flags=GLUE_FLAGS)
    except BookmarkOptionError as exc:
        raise GlueArgumentError(exc.message) from None
    resolved: dict[str, str | None] = {o: given[o] for o in options}
    resolved |= {"job_bookmark_option": mode, "job_bookmark_from": start,
                 "job_bookmark_to": end}
    return resolved


def _parse(words: list[str], *, known: set[str]) -> dict[str, str]:
    """``--name value`` and ``--name=value`` pairs. A ``known`` name without a value is an
    error; other words are ignored, as Glue's parser ignores unknown arguments."""
    found: dict[str, str] = {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("--"):
            continue
        name, sep, value = word[2:].partition("=")
        if not sep:
            if i >= len(words) or words[i].startswith("--"):
                if name in known:
                    raise GlueArgumentError(f"argument --{name}: expected one argument")
                continue
            value = words[i]
            i += 1
        found[name] = value
    return found


def _invalid_choice(name: str, value: str, choices: Sequence[str]) -> str:
    return (f"argument --{name}: invalid choice: '{value}' (choose from "
            f"{', '.join(repr(c) for c in choices)})")
