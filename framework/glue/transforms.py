"""The transforms Glue scripts import with ``from awsglue.transforms import *``.

Each is a class whose ``apply`` (or the instance called) runs the ``DynamicFrame`` method
of the same meaning, as in awsglue. Glue's transforms that deltamark does not provide are
here too, so that a script using one fails with a line naming it and what to do instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from framework.errors import GlueUnsupportedError
from framework.glue.dynamicframe import DynamicFrame, DynamicFrameCollection

__all__ = ["ApplyMapping", "DropFields", "DropNullFields", "ErrorsAsDynamicFrame", "Filter",
           "FlatMap", "Join", "Map", "MapToCollection", "Relationalize", "RenameField",
           "ResolveChoice", "SelectFields", "SelectFromCollection", "Spigot", "SplitFields",
           "SplitRows", "Unbox", "Union", "UnnestFrame"]


class _Transform:
    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply(*args, **kwargs)


class ApplyMapping(_Transform):
    """``ApplyMapping.apply(frame=, mappings=[(source, type, target, type), ...])``."""

    @classmethod
    def apply(cls, frame: DynamicFrame, mappings: Sequence[Sequence[str]],
              case_sensitive: bool = False, transformation_ctx: str = "", **_: Any
              ) -> DynamicFrame:
        return frame.apply_mapping(mappings, case_sensitive)


class SelectFields(_Transform):
    """``SelectFields.apply(frame=, paths=[...])``."""

    @classmethod
    def apply(cls, frame: DynamicFrame, paths: Sequence[str], transformation_ctx: str = "",
              **_: Any) -> DynamicFrame:
        return frame.select_fields(paths)


class DropFields(_Transform):
    """``DropFields.apply(frame=, paths=[...])``."""

    @classmethod
    def apply(cls, frame: DynamicFrame, paths: Sequence[str], transformation_ctx: str = "",
              **_: Any) -> DynamicFrame:
        return frame.drop_fields(paths)


class RenameField(_Transform):
    """``RenameField.apply(frame=, old_name=, new_name=)``."""

    @classmethod
    def apply(cls, frame: DynamicFrame, old_name: str, new_name: str,
              transformation_ctx: str = "", **_: Any) -> DynamicFrame:
        return frame.rename_field(old_name, new_name)


class ResolveChoice(_Transform):
    """``ResolveChoice.apply(frame=, specs=[(path, action)], choice=...)``."""

    @classmethod
    def apply(cls, frame: DynamicFrame, specs: Sequence[tuple[str, str]] | None = None,
              choice: str = "", transformation_ctx: str = "", **_: Any) -> DynamicFrame:
        return frame.resolveChoice(specs, choice)


class DropNullFields(_Transform):
    """``DropNullFields.apply(frame=)``: without the fields null in every record."""

    @classmethod
    def apply(cls, frame: DynamicFrame, transformation_ctx: str = "", **_: Any
              ) -> DynamicFrame:
        return frame.drop_null_fields()


class Filter(_Transform):
    """``Filter.apply(frame=, f=lambda record: ...)``."""

    @classmethod
    def apply(cls, frame: DynamicFrame, f: Callable[[Mapping[str, Any]], bool],
              transformation_ctx: str = "", **_: Any) -> DynamicFrame:
        return frame.filter(f)


class Map(_Transform):
    """``Map.apply(frame=, f=lambda record: record)``."""

    @classmethod
    def apply(cls, frame: DynamicFrame, f: Callable[[dict[str, Any]], Mapping[str, Any]],
              transformation_ctx: str = "", **_: Any) -> DynamicFrame:
        return frame.map(f)


class Join(_Transform):
    """``Join.apply(frame1, frame2, keys1, keys2)``: an equality join keeping both sides'
    fields."""

    @classmethod
    def apply(cls, frame1: DynamicFrame, frame2: DynamicFrame, keys1: str | Sequence[str],
              keys2: str | Sequence[str], transformation_ctx: str = "", **_: Any
              ) -> DynamicFrame:
        return frame1.join(keys1, keys2, frame2)


class Union(_Transform):
    """``Union.apply(frame1=, frame2=)``: the records of both."""

    @classmethod
    def apply(cls, frame1: DynamicFrame, frame2: DynamicFrame, transformation_ctx: str = "",
              **_: Any) -> DynamicFrame:
        return frame1.union(frame2)


class SelectFromCollection(_Transform):
    """``SelectFromCollection.apply(dfc=, key=)``."""

    @classmethod
    def apply(cls, dfc: DynamicFrameCollection, key: str, transformation_ctx: str = "",
              **_: Any) -> DynamicFrame:
        return dfc.select(key)


class Relationalize(_Transform):
    """``Relationalize.apply(frame=..., staging_path=..., name="root")``: Glue's layout, with
    deterministic keys (``framework.transforms.relationalize``)."""

    @classmethod
    def apply(cls, frame: DynamicFrame, staging_path: str = "", name: str = "roottable",
              options: Any = None, transformation_ctx: str = "", **_: Any
              ) -> DynamicFrameCollection:
        return frame.relationalize(name, staging_path)


class NotProvided(_Transform):
    """A Glue transform deltamark does not provide: using it fails naming it and
    ``alternative``."""

    alternative = ("do the same with Spark on frame.toDF(), then "
                   "DynamicFrame.fromDF(df, glueContext, name)")

    @classmethod
    def apply(cls, *_: Any, **__: Any) -> Any:
        raise GlueUnsupportedError(f"{cls.__name__}.apply", cls.alternative)


class Spigot(NotProvided):
    """Glue's Spigot (not provided)."""


class SplitFields(NotProvided):
    """Glue's SplitFields (not provided)."""


class SplitRows(NotProvided):
    """Glue's SplitRows (not provided)."""


class Unbox(NotProvided):
    """Glue's Unbox (not provided)."""


class UnnestFrame(NotProvided):
    """Glue's UnnestFrame (not provided)."""


class FlatMap(NotProvided):
    """Glue's FlatMap (not provided)."""


class MapToCollection(NotProvided):
    """Glue's MapToCollection (not provided)."""


class ErrorsAsDynamicFrame(NotProvided):
    """Glue's ErrorsAsDynamicFrame (not provided)."""
