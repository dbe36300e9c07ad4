"""The Spark runtime: the session (local, cluster or Spark Connect), the Spark lines
and their jars, Spark's types, the local JVM's extras.

Before 0.2, ``framework.spark`` was the session module: its names are still served from
here, with a DeprecationWarning, for one release (import them from ``spark.session``).
"""

from typing import Any

#: ``framework.spark.session.__all__`` as it was when the module moved
_OLD_NAMES = frozenset({
    "ThreadWrapper", "default_parallelism", "inheriting_threads", "is_connect", "json_schema",
    "named_column", "quoted", "require_classic", "session_conf", "sessions_from",
    "spark_session", "temporary_conf", "to_arrow", "try_cast"})


def __getattr__(name: str) -> Any:
    if name not in _OLD_NAMES:  # a submodule not imported yet, among others
        raise AttributeError(f"module 'framework.spark' has no attribute {name!r}")
    import importlib
    import warnings

    session = importlib.import_module("framework.spark.session")
    warnings.warn(f"framework.spark.{name} is now framework.spark.session.{name}; the old "
                  "path goes in the next release", DeprecationWarning, stacklevel=2)
    value = globals()[name] = getattr(session, name)  # warned once
    return value
