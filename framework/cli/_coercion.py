"""Command-line values coerced without pydantic.

typer (from 0.2x) coerces each parameter's value through a pydantic ``TypeAdapter`` it
builds as the line is parsed: importing pydantic is ~0.1 s of every ``deltamark``
process, a sixth of a scheduled run that finds nothing new. deltamark's parameters are
text, paths, flags, numbers, lists of text and choices of an enum: ``Group`` coerces
those itself, before typer would, with one-line errors naming the option as typer's.
On a typer without that step, or for another kind of parameter, typer coerces as ever.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

import typer
from typer.core import TyperGroup

__all__ = ["Group"]

_PLAIN: tuple[type, ...] = (str, Path, bool, int, float)
_BOOLS = {"true": True, "1": True, "yes": True, "y": True, "on": True,
          "false": False, "0": False, "no": False, "n": False, "off": False}


class Group(TyperGroup):
    """The ``deltamark`` command: its whole tree's parameters coerced by ``_Coercion``."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        _install(self)
        return super().main(*args, **kwargs)


def _install(command: Any) -> None:
    # the help option: made once a command is parsed, and kept (a context of its own here)
    made_help = getattr(command, "_help_option", False) is None
    helps = [command.get_help_option(command.context_class(command))] if made_help else []
    for param in [*getattr(command, "params", ()), *filter(None, helps)]:
        descriptor = getattr(param, "type_descriptor", None)
        # typer builds _runtime_param on first use: set first, typer never builds its own
        if descriptor is not None and getattr(param, "_runtime_param", False) is None and (
                _kind(descriptor.annotation) is not None):
            param._runtime_param = _Coercion(descriptor.annotation, descriptor.parameter_info)
    for sub in (getattr(command, "commands", None) or {}).values():
        _install(sub)


def _kind(annotation: Any) -> type | None:
    """The type a value of ``annotation`` is coerced to (list[str]: str); None: not ours."""
    if get_origin(annotation) is list and get_args(annotation) == (str,):
        return str
    if isinstance(annotation, type) and (annotation in _PLAIN or issubclass(annotation,
                                                                            enum.Enum)):
        return annotation
    return None


@dataclass(frozen=True)
class _Coercion:
    """typer's runtime parameter protocol (``coerce``) for ``_PLAIN`` types and enums."""

    annotation: Any
    parameter_info: Any

    def coerce(self, value: Any, param: Any, ctx: typer.Context) -> Any:
        if value is None:
            return () if param.multiple or param.nargs == -1 else None
        try:
            if get_origin(self.annotation) is list:
                return [str(item) for item in value]
            return self._one(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), ctx=ctx, param=param) from None

    def _one(self, value: Any) -> Any:
        kind = self.annotation
        if isinstance(value, kind):
            found = value
        elif issubclass(kind, enum.Enum):
            choices = [str(member.value) for member in kind]
            if str(value) not in choices:
                raise ValueError(f"'{value}' is not one of {', '.join(choices)}.")
            found = kind(str(value))
        elif kind is bool:
            if str(value).lower() not in _BOOLS:
                raise ValueError(f"'{value}' is not a valid boolean.")
            found = _BOOLS[str(value).lower()]
        elif kind in (int, float):
            try:
                found = kind(value)
            except ValueError:
                raise ValueError(f"'{value}' is not a valid "
                                 f"{'integer' if kind is int else 'number'}.") from None
        else:
            found = kind(value)
        low, high = self.parameter_info.min, self.parameter_info.max
        if low is not None and found < low:
            raise ValueError(f"{found} is less than {low}, the least it takes.")
        if high is not None and found > high:
            raise ValueError(f"{found} is more than {high}, the most it takes.")
        return found
