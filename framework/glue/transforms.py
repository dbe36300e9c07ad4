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
    """``ResolveChoice.apply(frame=, specs=[(path, action)], choice=..., database=,
    table_name=)``."""

    @classmethod
    def apply(cls, frame: DynamicFrame, specs: Sequence[tuple[str, str]] | None = None,
              choice: str = "", database: str | None = None, table_name: str | None = None,
              transformation_ctx: str = "", **_: Any) -> DynamicFrame:
        return frame.resolveChoice(specs, choice, database, table_name)


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


class UnnestFrame(_Transform):
    """``UnnestFrame.apply(frame=)``: struct fields as top-level ``a.b`` fields."""

    @classmethod
    def apply(cls, frame: DynamicFrame, transformation_ctx: str = "", **_: Any
              ) -> DynamicFrame:
        return frame.unnest()


class SplitFields(_Transform):
    """``SplitFields.apply(frame=, paths=[...], name1=, name2=)``."""

    @classmethod
    def apply(cls, frame: DynamicFrame, paths: Sequence[str], name1: str | None = None,
              name2: str | None = None, transformation_ctx: str = "", **_: Any
              ) -> DynamicFrameCollection:
        return frame.split_fields(paths, name1 or f"{frame.name}_1",
                                  name2 or f"{frame.name}_2")


class SplitRows(_Transform):
    """``SplitRows.apply(frame=, comparison_dict={...}, name1=, name2=)``."""

    @classmethod
    def apply(cls, frame: DynamicFrame, comparison_dict: Mapping[str, Mapping[str, Any]],
              name1: str = "frame1", name2: str = "frame2", transformation_ctx: str = "",
              **_: Any) -> DynamicFrameCollection:
        return frame.split_rows(comparison_dict, name1, name2)


class Unbox(_Transform):
    """``Unbox.apply(frame=, path=, format="json" | "csv", separator=...)``."""

    @classmethod
    def apply(cls, frame: DynamicFrame, path: str, format: str, transformation_ctx: str = "",
              **options: Any) -> DynamicFrame:
        return frame.unbox(path, format, **options)


class Spigot(_Transform):
    """``Spigot.apply(frame=, path=, options={"topk": 100})``: a sample written aside."""

    @classmethod
    def apply(cls, frame: DynamicFrame, path: str, options: Mapping[str, Any] | None = None,
              transformation_ctx: str = "", **_: Any) -> DynamicFrame:
        return frame.spigot(path, options)


class MapToCollection(_Transform):
    """``MapToCollection.apply(dfc=, callable=f)``: ``f(frame, name)`` on each frame."""

    @classmethod
    def apply(cls, dfc: DynamicFrameCollection,
              callable: Callable[[DynamicFrame, str], DynamicFrame],
              transformation_ctx: str = "", **_: Any) -> DynamicFrameCollection:
        return DynamicFrameCollection({name: callable(dfc[name], name) for name in dfc},
                                      dfc.glue_ctx)


class FlatMap(_Transform):
    """``FlatMap.apply(dfc=, BaseTransform=T, frame_name="frame", **args)``: ``T.apply``
    on each frame, the frames it returns gathered."""

    @classmethod
    def apply(cls, dfc: DynamicFrameCollection, BaseTransform: Any,  # noqa: N803
              frame_name: str = "frame", transformation_ctx: str = "", **base_kwargs: Any
              ) -> DynamicFrameCollection:
        frames: dict[str, DynamicFrame] = {}
        for name in dfc:
            result = BaseTransform.apply(**{frame_name: dfc[name]}, **base_kwargs)
            if isinstance(result, DynamicFrameCollection):
                frames.update({f"{name}_{key}": result[key] for key in result})
            else:
                frames[name] = result
        return DynamicFrameCollection(frames, dfc.glue_ctx)


class NotProvided(_Transform):
    """A Glue transform deltamark does not provide: using it fails naming it and
    ``alternative``."""

    alternative = ("do the same with Spark on frame.toDF(), then "
                   "DynamicFrame.fromDF(df, glueContext, name)")

    @classmethod
    def apply(cls, *_: Any, **__: Any) -> Any:
        raise GlueUnsupportedError(f"{cls.__name__}.apply", cls.alternative)


class ErrorsAsDynamicFrame(_Transform):
    """``ErrorsAsDynamicFrame.apply(frame=)``: the error records left out on the way to
    ``frame`` (``DynamicFrame.errorsAsDynamicFrame``)."""

    @classmethod
    def apply(cls, frame: DynamicFrame, transformation_ctx: str = "", **_: Any
              ) -> DynamicFrame:
        return frame.errorsAsDynamicFrame()
