"""What a Glue script finds in its process while ``deltamark run --script`` runs it:
``import awsglue...`` resolves to deltamark's Glue layer (no ``awsglue`` package is
installed anywhere), and ``SparkContext()`` is the run's own context, as it is the first
one in a Glue job. On Spark Connect, where this process has no SparkContext (and
``pyspark-client`` no ``pyspark.context``), it is a stand-in, ``ConnectSparkContext``.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from framework.errors import GlueUnsupportedError
from framework.spark.session import is_connect, require_classic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["AWSGLUE_MODULES", "ConnectSparkContext", "glue_environment"]

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


class ConnectSparkContext:
    """``SparkContext()`` (and ``SparkContext.getOrCreate()``) in a Glue script run on
    Spark Connect: ``version``, ``appName`` and ``setLogLevel`` (which leaves the server's
    log level as the server has it) are served; anything else needs a SparkContext in
    this process and refuses in one line."""

    spark: ClassVar[Any] = None

    def __init__(self, *args: Any, **kwargs: Any):
        pass  # its arguments (master, appName, conf) are the run's to set, in conf

    @classmethod
    def getOrCreate(cls, conf: Any = None) -> ConnectSparkContext:  # noqa: N802
        return cls()

    @property
    def version(self) -> str:
        return str(self.spark.version)

    @property
    def appName(self) -> str | None:  # noqa: N802
        return self.spark.conf.get("spark.app.name", None)

    def setLogLevel(self, logLevel: str) -> None:  # noqa: N802, N803
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        require_classic(self.spark, f"SparkContext.{name}")
        raise AttributeError(name)


@contextlib.contextmanager
def glue_environment(spark: SparkSession) -> Iterator[None]:
    """``awsglue`` importable and ``SparkContext()`` giving the context of ``spark`` (its
    stand-in on Spark Connect) while the block runs; everything is as before afterwards."""
    context = (_connect_spark_context(spark) if is_connect(spark)
               else _shared_spark_context(spark.sparkContext))
    with _awsglue_importable(), _studio_transforms(), context:
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


@contextlib.contextmanager
def _connect_spark_context(spark: SparkSession) -> Iterator[None]:
    """``pyspark.context.SparkContext`` and ``pyspark.SparkContext`` are a
    ``ConnectSparkContext`` of ``spark``, with or without a classic pyspark installed."""
    import pyspark

    stand_in = type("SparkContext", (ConnectSparkContext,), {"spark": spark})
    module = ModuleType("pyspark.context", "SparkContext on Spark Connect (deltamark's)")
    module.SparkContext = stand_in  # type: ignore[attr-defined]
    names = vars(pyspark)
    saved_module, saved_class = sys.modules.get("pyspark.context"), names.get("SparkContext")
    sys.modules["pyspark.context"], names["SparkContext"] = module, stand_in
    try:
        yield
    finally:
        for space, key, saved in ((sys.modules, "pyspark.context", saved_module),
                                  (names, "SparkContext", saved_class)):
            if saved is None:
                space.pop(key, None)
            else:
                space[key] = saved
