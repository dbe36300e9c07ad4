"""Settings from ``conf/deltamark.yaml``, validated all at once.

Precedence, highest first: CLI options, environment (``DELTAMARK_CONF_DIR``,
``DELTAMARK_STATE_ROOT``), ``conf/local.yaml`` (git-ignored, for secrets and machine
specifics), ``conf/deltamark.yaml``, built-in defaults.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import yaml

from framework import iceberg, storage
from framework.errors import ConfigError

__all__ = ["CatalogTable", "DeltaMode", "Settings", "SparkSettings",
           "load_settings", "read_yaml", "scalar_mapping", "text_value", "unknown_keys"]

DeltaMode = Literal["auto", "native", "embedded"]
STATE_RETENTION_HOURS = 1
#: how long a state commit keeps trying against other processes' commits (seconds)
STATE_COMMIT_TIMEOUT_SECONDS = 600

SETTINGS_FILE = "deltamark.yaml"
LOCAL_FILE = "local.yaml"


@dataclass(frozen=True)
class SparkSettings:
    """How deltamark builds its SparkSession."""

    master: str = "local[*]"
    app_name: str = "deltamark"
    conf: Mapping[str, str] = field(default_factory=dict)
    #: a Spark Connect server (``sc://host:port``) to run on instead of a JVM of our own;
    #: ``SPARK_REMOTE`` names one too (``remote_url``)
    remote: str | None = None

    def remote_url(self) -> str | None:
        """The Spark Connect server jobs run on: ``remote``, else ``SPARK_REMOTE``."""
        return self.remote or os.environ.get("SPARK_REMOTE") or None


@dataclass(frozen=True)
class CatalogTable:
    """A table of the local catalog Glue scripts read with ``from_catalog`` (``catalog:``,
    keyed ``database.table``): its location and how to read it."""

    location: str
    #: delta, or a file format (json, csv, parquet, orc, avro, xml, text)
    format: str
    #: reader options (Spark's names, or Glue's format_options names)
    options: Mapping[str, str] = field(default_factory=dict)
    #: the columns and their types as a crawler records them (CSV is read by position
    #: into them; ``resolveChoice(choice="match_catalog")`` casts to them)
    columns: Mapping[str, str] = field(default_factory=dict)


#: the column types a catalog table declares (Hive's names, as Glue's catalog has them)
CATALOG_TYPES = ("string", "bigint", "int", "smallint", "tinyint", "double", "float",
                 "boolean", "date", "timestamp", "decimal(p,s)")

CATALOG_FORMATS = ("delta", "json", "csv", "parquet", "orc", "avro", "xml", "text")


@dataclass(frozen=True)
class Settings:
    """Everything deltamark reads from configuration."""

    conf_dir: Path = Path("conf")
    #: a local path or an object-store URI (``s3://bucket/state``)
    state_root: str = "data/state"
    #: how long the state tables keep files and log entries no current read needs (for
    #: readers and writers in flight; rewinds do not need them)
    state_retention_hours: int = STATE_RETENTION_HOURS
    #: how long a state commit keeps trying when other processes' commits to the same
    #: table keep winning (many jobs at once) before the run fails
    state_commit_timeout_seconds: int = STATE_COMMIT_TIMEOUT_SECONDS
    delta: DeltaMode = "auto"
    spark: SparkSettings = field(default_factory=SparkSettings)
    #: database connections by name: url, user, password, driver, properties. Values may
    #: name environment variables as ``${VAR}``; they are resolved when a job connects.
    connections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)
    #: per-bucket S3 options by bucket name; the AWS environment configures the others
    buckets: Mapping[str, storage.BucketSettings] = field(default_factory=dict)
    #: the tables Glue scripts read with ``from_catalog``, by ``database.table``
    catalog: Mapping[str, CatalogTable] = field(default_factory=dict)
    #: the OpenLineage namespace of deltamark's jobs (``lineage: {namespace: ...}``;
    #: ``OPENLINEAGE_NAMESPACE`` overrides it): ``framework.run.lineage``
    lineage_namespace: str | None = None


def load_settings(
    *, conf_dir: str | Path | None = None, state_root: str | Path | None = None
) -> Settings:
    """Read and validate the settings; every problem is reported in one ``ConfigError``.
    Example::

        settings = load_settings(conf_dir="conf")  # conf/deltamark.yaml, conf/local.yaml
        settings.state_root

    Args:
        conf_dir: overrides ``DELTAMARK_CONF_DIR`` and the default ``conf``.
        state_root: overrides ``DELTAMARK_STATE_ROOT`` and the file's ``state_root``.

    The settings' ``buckets`` apply to this process's object-store access from then on
    (``storage.configure``), as the AWS environment variables they complement do, and the
    Iceberg catalogs of ``spark: conf:`` to its Iceberg metadata reads (``iceberg.configure``).

    Raises:
        ConfigError: naming the file and each bad key.
    """
    directory = Path(conf_dir or os.environ.get("DELTAMARK_CONF_DIR") or "conf")
    raw: dict[str, Any] = {}
    for name in (SETTINGS_FILE, LOCAL_FILE):
        raw = _merge(raw, read_yaml(directory / name))
    env_root = os.environ.get("DELTAMARK_STATE_ROOT")
    if state_root is not None or env_root:
        raw["state_root"] = str(state_root or env_root)
    settings = _parse(raw, source=str(directory / SETTINGS_FILE), conf_dir=directory)
    storage.configure(settings.buckets)
    iceberg.configure(settings.spark.conf)
    return settings


def read_yaml(path: Path) -> dict[str, Any]:
    """The mapping in a YAML file ({} when absent); ``ConfigError`` naming it otherwise."""
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), [f"not valid YAML ({exc})".replace("\n", " ")]) from exc
    if not isinstance(data, dict):
        raise ConfigError(str(path), ["the top level must be a mapping of keys"])
    return data


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def unknown_keys(mapping: Mapping[str, Any], known: Sequence[str], where: str = ""
                 ) -> list[str]:
    """A problem for each key of ``mapping`` not in ``known``, named ``where.key``."""
    prefix = f"{where}." if where else ""
    return [f"unknown key '{prefix}{key}' (known: {', '.join(known)})"
            for key in mapping if key not in known]


def _parse(raw: Mapping[str, Any], *, source: str, conf_dir: Path) -> Settings:
    problems: list[str] = []
    problems += unknown_keys(
        raw, sorted(("state_root", "state_retention_hours", "state_commit_timeout_seconds",
                     "delta", "spark", "connections",
                     "buckets", "catalog", "lineage")))

    delta = raw.get("delta", "auto")
    if delta not in get_args(DeltaMode):
        problems.append(f"delta: '{delta}' is not one of auto, native, embedded")

    state_root = raw.get("state_root", "data/state")
    if not isinstance(state_root, str) or not state_root:
        problems.append("state_root: must be a non-empty path or URI")

    retention = raw.get("state_retention_hours", STATE_RETENTION_HOURS)
    if isinstance(retention, bool) or not isinstance(retention, int) or retention < 1:
        problems.append(f"state_retention_hours: '{retention}' is not a whole number of "
                        "hours, 1 or more (reads and commits of other runs in flight need "
                        "the files that long)")

    patience = raw.get("state_commit_timeout_seconds", STATE_COMMIT_TIMEOUT_SECONDS)
    if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
        problems.append(f"state_commit_timeout_seconds: '{patience}' is not a whole number "
                        "of seconds, 1 or more")

    spark_raw = raw.get("spark") or {}
    spark = SparkSettings()
    if not isinstance(spark_raw, Mapping):
        problems.append("spark: must be a mapping with master, app_name, conf, remote")
    else:
        problems += unknown_keys(spark_raw, sorted(("master", "app_name", "conf", "remote")),
                                 "spark")
        for key in ("master", "app_name", "remote"):
            if key in spark_raw and not isinstance(spark_raw[key], str):
                problems.append(f"spark.{key}: must be a string")
        if isinstance(remote := spark_raw.get("remote"), str) and not remote.startswith("sc://"):
            problems.append(f"spark.remote: '{remote}' is not a Spark Connect URL "
                            "(sc://host:port)")
        conf = spark_raw.get("conf") or {}
        if not isinstance(conf, Mapping):
            problems.append("spark.conf: must be a mapping of Spark property -> value")
            conf = {}
        spark = SparkSettings(
            master=str(spark_raw.get("master", spark.master)),
            app_name=str(spark_raw.get("app_name", spark.app_name)),
            conf={str(k): text_value(v) for k, v in conf.items()},
            remote=str(spark_raw["remote"]) if spark_raw.get("remote") else None,
        )

    connections = raw.get("connections") or {}
    if not isinstance(connections, Mapping):
        problems.append("connections: must be a mapping of name -> {url, user, password, ...}")
        connections = {}
    for name, connection in connections.items():
        problems += _connection_problems(str(name), connection)

    buckets, bucket_problems = _buckets(raw.get("buckets"))
    problems += bucket_problems
    catalog, catalog_problems = _catalog(raw.get("catalog"))
    problems += catalog_problems

    lineage = raw.get("lineage") or {}
    if not isinstance(lineage, Mapping):
        problems.append("lineage: must be a mapping with namespace")
        lineage = {}
    problems += unknown_keys(lineage, ["namespace"], "lineage")
    namespace = lineage.get("namespace")
    if namespace is not None and (not isinstance(namespace, str) or not namespace):
        problems.append("lineage.namespace: must be a non-empty string (the OpenLineage "
                        "namespace of deltamark's jobs)")

    if problems:
        raise ConfigError(source, problems)
    return Settings(conf_dir=conf_dir, state_root=state_root,
                    state_retention_hours=retention, state_commit_timeout_seconds=patience,
                    delta=delta, spark=spark,
                    connections={str(k): dict(v) for k, v in connections.items()},
                    buckets=buckets, catalog=catalog, lineage_namespace=namespace)


BUCKET_KEYS = ("endpoint_url", "region")


def _buckets(raw: Any) -> tuple[dict[str, storage.BucketSettings], list[str]]:
    if raw is None:
        return {}, []
    if not isinstance(raw, Mapping):
        return {}, ["buckets: must be a mapping of bucket name -> {endpoint_url, region}"]
    buckets, problems = {}, []
    for name, options in raw.items():
        where = f"buckets.{name}"
        if not isinstance(name, str) or not name or any(c in name for c in "/: "):
            problems.append(f"{where}: a bucket's bare name, without s3:// or a path")
            continue
        if not isinstance(options, Mapping):
            problems.append(f"{where}: must be a mapping with {', '.join(BUCKET_KEYS)}")
            continue
        problems += unknown_keys(options, BUCKET_KEYS, where)
        endpoint, region = options.get("endpoint_url"), options.get("region")
        if endpoint is not None and not (isinstance(endpoint, str) and
                                         endpoint.startswith(("http://", "https://"))):
            problems.append(f"{where}.endpoint_url: must be an http:// or https:// URL")
        if region is not None and not (isinstance(region, str) and region):
            problems.append(f"{where}.region: must be a region name (eu-west-1)")
        buckets[name] = storage.BucketSettings(endpoint_url=endpoint, region=region)
    return buckets, problems


def _catalog(raw: Any) -> tuple[dict[str, CatalogTable], list[str]]:
    if raw is None:
        return {}, []
    if not isinstance(raw, Mapping):
        return {}, ["catalog: must be a mapping of database.table -> {location, format, "
                    "options}"]
    tables, problems = {}, []
    for name, table in raw.items():
        where = f"catalog.{name}"
        if not isinstance(name, str) or name.count(".") != 1 or "" in name.split("."):
            problems.append(f"{where}: name a table as database.table")
            continue
        if not isinstance(table, Mapping):
            problems.append(f"{where}: must be a mapping with location, format, options")
            continue
        problems += unknown_keys(table, ("location", "format", "options", "columns"), where)
        location, kind = table.get("location"), str(table.get("format", "")).lower()
        if not isinstance(location, str) or not location:
            problems.append(f"{where}.location: must be a path or URI")
        if kind not in CATALOG_FORMATS:
            problems.append(f"{where}.format: '{table.get('format')}' is not one of "
                            f"{', '.join(CATALOG_FORMATS)}")
        options, option_problems = scalar_mapping(table.get("options"), f"{where}.options")
        problems += option_problems
        columns, column_problems = scalar_mapping(table.get("columns"), f"{where}.columns")
        columns = {column: str(kind_).strip().lower() for column, kind_ in columns.items()}
        problems += column_problems + [
            f"{where}.columns.{column}: '{kind_}' is not one of {', '.join(CATALOG_TYPES)}"
            for column, kind_ in columns.items() if kind_ not in CATALOG_TYPES[:-1]
            and not re.fullmatch(r"decimal\(\s*\d+\s*,\s*\d+\s*\)", kind_)]
        tables[name] = CatalogTable(location=str(location), format=kind, options=options,
                                    columns=columns)
    return tables, problems


CONNECTION_KEYS = ("url", "user", "password", "driver", "properties")


def _connection_problems(name: str, connection: Any) -> list[str]:
    if not isinstance(connection, Mapping):
        return [f"connections.{name}: must be a mapping with {', '.join(CONNECTION_KEYS)}"]
    problems = unknown_keys(connection, CONNECTION_KEYS, f"connections.{name}")
    url = connection.get("url")
    if not isinstance(url, str) or not url.startswith("jdbc:"):
        problems.append(f"connections.{name}.url: must be a JDBC URL (jdbc:...)")
    if not isinstance(connection.get("properties") or {}, Mapping):
        problems.append(f"connections.{name}.properties: must be a mapping of name -> value")
    return problems


def scalar_mapping(raw: Any, where: str) -> tuple[dict[str, str], list[str]]:
    """A YAML mapping of name -> single value (params, args) as text, and its problems,
    each naming ``where`` (None is an empty mapping)."""
    if raw is None:
        return {}, []
    if not isinstance(raw, Mapping):
        return {}, [f"{where}: must be a mapping of name -> value"]
    problems = [f"{where}.{k}: must be a single value (string, number or bool)"
                for k, v in raw.items() if isinstance(v, (Mapping, list)) or v is None]
    return {str(k): text_value(v) for k, v in raw.items()}, problems


def text_value(value: Any) -> str:
    """A YAML or Python scalar as the text Spark and job params expect (``true``, not
    ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)
