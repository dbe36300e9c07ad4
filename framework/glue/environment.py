"""What a Glue script finds in its process while ``deltamark run --script`` runs it:
``import awsglue...`` resolves to deltamark's Glue layer (no ``awsglue`` package is
installed anywhere), and ``SparkContext()`` is the run's own context, as it is the first
one in a Glue job.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from framework.errors import GlueUnsupportedAttributeError, GlueUnsupportedError

__all__ = ["AWSGLUE_MODULES", "GlueApi", "glue_environment"]

#: the awsglue modules a script may import, and deltamark's module serving each
AWSGLUE_MODULES = {
    "awsglue": "framework.glue",
    "awsglue.context": "framework.glue.context",
    "awsglue.dynamicframe": "framework.glue.dynamicframe",
    "awsglue.gluetypes": "framework.glue.gluetypes",
    "awsglue.job": "framework.glue.job",
    "awsglue.transforms": "framework.glue.transforms",
    "awsglue.utils": "framework.glue.utils",
    "awsglueml": "framework.glue.ml",
    "awsglueml.transforms": "framework.glue.ml",
    "awsgluedq": "framework.glue.dataquality",
    "awsgluedq.transforms": "framework.glue.dataquality",
}


class GlueApi:
    """An awsglue class: a public name it does not have is a Glue call deltamark does not
    serve, which fails with the one-line error naming it (not a bare AttributeError)."""

    #: how scripts name the object (``GlueContext``, ``glueContext.write_dynamic_frame``)
    glue_name = "awsglue"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise GlueUnsupportedAttributeError(
            f"{self.glue_name}.{name}", "the calls served are listed in docs/glue.md")


@contextlib.contextmanager
def glue_environment(spark_context: Any) -> Iterator[None]:
    """``awsglue`` importable and ``SparkContext()`` giving ``spark_context`` while the
    block runs; everything is as before afterwards."""
    with _awsglue_importable(), _studio_transforms(), _shared_spark_context(spark_context):
        yield


class _UnknownAwsGlueModule(importlib.abc.MetaPathFinder):
    """An awsglue module deltamark does not serve: the one-line error, not ImportError."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        top = fullname.split(".", 1)[0]
        if top in ("awsglue", "awsglueml", "awsgluedq"):
            served = ", ".join(sorted(AWSGLUE_MODULES))
            raise GlueUnsupportedError(f"import {fullname}", f"the modules served are {served}")


class _UnknownStudioModule(importlib.abc.MetaPathFinder):
    """A Glue Studio ``gs_*`` module that neither deltamark nor the script's paths have:
    the one-line error, not ImportError."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        from framework.glue.studio import STUDIO_TRANSFORMS

        if fullname.startswith("gs_"):
            raise GlueUnsupportedError(
                f"import {fullname}", f"Glue Studio's transforms served are "
                f"{', '.join(STUDIO_TRANSFORMS)}; do the same with Spark on frame.toDF()")


@contextlib.contextmanager
def _awsglue_importable() -> Iterator[None]:
    saved: dict[str, ModuleType | None] = {name: sys.modules.get(name)
                                           for name in AWSGLUE_MODULES}
    finder = _UnknownAwsGlueModule()
    for alias, module in AWSGLUE_MODULES.items():
        sys.modules[alias] = importlib.import_module(module)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for alias, saved_module in saved.items():
            if saved_module is None:
                sys.modules.pop(alias, None)
            else:
                sys.modules[alias] = saved_module


@contextlib.contextmanager
def _studio_transforms() -> Iterator[None]:
    """Glue Studio's ``gs_*`` modules importable, and each one's transform a method of
    ``DynamicFrame`` and of Spark's ``DataFrame`` (``framework.glue.studio``)."""
    from pyspark.sql import DataFrame

    from framework.glue.dynamicframe import DynamicFrame
    from framework.glue.studio import STUDIO_TRANSFORMS

    saved = {name: sys.modules.get(name) for name in STUDIO_TRANSFORMS}
    finder = _UnknownStudioModule()
    sys.meta_path.append(finder)  # last: a script's own gs_ module is found first
    for name, transform in STUDIO_TRANSFORMS.items():
        sys.modules[name] = ModuleType(name, f"Glue Studio's {name} (deltamark's)")
        setattr(DataFrame, name, _on_data_frame(transform))
        setattr(DynamicFrame, name, _on_dynamic_frame(name, transform))
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name, module in saved.items():
            delattr(DataFrame, name)
            delattr(DynamicFrame, name)
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _on_data_frame(transform: Any) -> Any:
    def method(self: Any, **kwargs: Any) -> Any:
        return transform(self, **kwargs)
    return method


def _on_dynamic_frame(name: str, transform: Any) -> Any:
    def method(self: Any, **kwargs: Any) -> Any:
        df = self.toDF()
        if not df.columns:  # a run with nothing new: nothing to transform
            return self
        return self._with(transform(df, **kwargs))
    method.__name__ = name
    return method


@contextlib.contextmanager
def _shared_spark_context(active: Any) -> Iterator[None]:
    """``SparkContext(...)`` returns ``active`` (its arguments are the job's to set, in
    conf), where pyspark would refuse a second context."""
    from pyspark import SparkContext

    had_new = "__new__" in SparkContext.__dict__
    original_init = SparkContext.__init__

    def shared_new(cls: type, *args: Any, **kwargs: Any) -> Any:
        return active if cls is SparkContext else object.__new__(cls)

    def shared_init(self: Any, *args: Any, **kwargs: Any) -> None:
        if self is not active:
            original_init(self, *args, **kwargs)

    SparkContext.__new__ = shared_new  # type: ignore[method-assign]
    SparkContext.__init__ = shared_init  # type: ignore[method-assign]
    try:
        yield
    finally:
        SparkContext.__init__ = original_init  # type: ignore[method-assign]
        if not had_new:
            del SparkContext.__new__
