"""Bookmark states: what each source kind commits in the ``bookmarks`` table's ``state``.

Each kind's state is a frozen dataclass in the kind's module, named in
``framework.sources.KINDS``.
``encode`` and ``decode`` are the one codec between those classes and the JSON objects the
table holds: a field is stored under its name (or its ``key`` metadata, for a name Python
reserves), nested states and tuples as objects and lists, and a field missing from an older
state takes its default (a field with ``stored_when_set`` metadata is stored only when not
None: one kept for older states). A state class also says, in ``describe``, what it means to people.

A state class's ``state_version`` grows when its fields change incompatibly: version 1
states carry no number, later ones carry ``state_version``, and a state newer than this
deltamark is refused rather than misread.

    >>> state = decode("delta", {"table": "lake/orders", "version": 7, "from_version": 3})
    >>> state.version, encode(state)["table"]
    (7, 'lake/orders')
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from framework.errors import BookmarkStateError
from framework.sources import KINDS

__all__ = ["BookmarkState", "decode", "describe", "encode"]

VERSION_KEY = "state_version"
_UPGRADE = "Upgrade deltamark to read it."


class BookmarkState(Protocol):
    """A source kind's bookmark: a frozen dataclass named in ``KINDS``."""

    kind: ClassVar[str]
    state_version: ClassVar[int]

    def describe(self) -> list[tuple[str, str]]:
        """What the bookmark means, as (label, text) lines for people."""


def encode(state: BookmarkState) -> dict[str, Any]:
    """``state`` as the JSON object the bookmarks table holds."""
    found: dict[str, Any] = _to_json(state)
    if state.state_version > 1:
        found[VERSION_KEY] = state.state_version
    return found


def decode(kind: str, data: Mapping[str, Any]) -> BookmarkState:
    """The ``kind`` source's state stored as ``data``.

    Raises:
        BookmarkStateError: the kind is unknown, the state newer than this deltamark, or
            damaged (a field missing or of another shape).
    """
    if kind not in KINDS:
        raise BookmarkStateError(kind, f"this deltamark has no such source. {_UPGRADE}")
    cls = _state_class(kind)
    found = data.get(VERSION_KEY, 1)
    if isinstance(found, int) and found > cls.state_version:
        raise BookmarkStateError(kind, f"its version {found} is newer than this "
                                 f"deltamark's ({cls.state_version}). {_UPGRADE}")
    try:
        if not isinstance(found, int):
            raise ValueError(f"{VERSION_KEY} {found!r} is not a number")
        state: BookmarkState = _from_json(cls, data)
        return state
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise BookmarkStateError(kind, f"{str(dict(data))[:200]} is damaged ({exc}). Reset "
                                 "its context to read its source from the start.") from None


def describe(kind: str, data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What the stored state means, as (label, text) lines; a state this deltamark cannot
    read is shown key by key."""
    try:
        return decode(kind, data).describe()
    except BookmarkStateError:
        return [(key, str(value)) for key, value in data.items()]


@functools.cache
def _state_class(kind: str) -> Any:
    module, _, name = KINDS[kind].partition(":")
    return getattr(importlib.import_module(module), name)


def _key(field: dataclasses.Field[Any]) -> str:
    key: str = field.metadata.get("key", field.name)
    return key


def _to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {_key(f): _to_json(getattr(value, f.name)) for f in dataclasses.fields(value)
                if getattr(value, f.name) is not None or not f.metadata.get("stored_when_set")}
    if isinstance(value, tuple):
        return [_to_json(v) for v in value]
    return value


def _from_json(kind: Any, value: Any) -> Any:
    if value is None:
        return None
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        [kind] = [k for k in typing.get_args(kind) if k is not type(None)]
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = _hints(kind)
        return kind(**{f.name: _from_json(hints[f.name], value[_key(f)])
                       for f in dataclasses.fields(kind) if f.init and _key(f) in value})
    if typing.get_origin(kind) is tuple:
        items = typing.get_args(kind)
        if len(items) == 2 and items[1] is Ellipsis:
            return tuple(_from_json(items[0], v) for v in value)
        return tuple(_from_json(k, v) for k, v in zip(items, value, strict=True))
    if kind in (int, str, bool) and not isinstance(value, kind):
        raise ValueError(f"{value!r} is not of type {kind.__name__}")
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)
