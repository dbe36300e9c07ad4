"""How deltamark reaches a database: a ``Connection`` (URL, credentials, driver) from a
name in conf (``connections:``, ``${VAR}`` from the environment) or a ``jdbc:`` URL."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from framework.common.redaction import redact, remember_credentials, remember_secret
from framework.config import SETTINGS_FILE, Settings, text_value
from framework.errors import ConfigError, DatabaseError

__all__ = ["DRIVERS", "Connection", "resolve_connection", "settings_connections"]

DRIVERS: Mapping[str, str] = {
    "postgresql": "org.postgresql.Driver",
    "sqlite": "org.sqlite.JDBC",
    "mysql": "com.mysql.cj.jdbc.Driver",
    "mariadb": "org.mariadb.jdbc.Driver",
    "sqlserver": "com.microsoft.sqlserver.jdbc.SQLServerDriver",
    "oracle": "oracle.jdbc.OracleDriver",
    "h2": "org.h2.Driver",
}

_ENV_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Connection:
    """How to reach a database. The password never appears in reprs, logs or state."""

    url: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    driver: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        remember_credentials(self.url)
        remember_secret(self.password)

    @property
    def dialect(self) -> str:
        """The URL's subprotocol: ``postgresql`` in ``jdbc:postgresql://...``."""
        return self.url.split(":", 2)[1] if self.url.count(":") >= 2 else ""

    @property
    def driver_class(self) -> str:
        if self.driver or self.dialect in DRIVERS:
            return self.driver or DRIVERS[self.dialect]
        raise DatabaseError(self.display, f"no known JDBC driver for '{self.dialect}' URLs; "
                            "give the driver's class name as the connection's driver")

    @property
    def display(self) -> str:
        """The URL with any credentials in it masked."""
        return redact(self.url)

    @property
    def sqlite_file(self) -> str | None:
        """The file of a ``jdbc:sqlite:PATH[?...]`` URL (None: another database, or one in
        memory)."""
        if self.dialect != "sqlite":
            return None
        path = self.url.split(":", 2)[2].partition("?")[0]
        return None if not path or path.startswith(":") else path

    def spark_url(self) -> str:
        """The URL as Spark is given it: a SQLite file's path made absolute here (a
        Spark Connect server, elsewhere, would read it from its own directory)."""
        if (path := self.sqlite_file) is None or os.path.isabs(path):
            return self.url
        return f"jdbc:sqlite:{os.path.abspath(path)}{self.url.split(':', 2)[2][len(path):]}"

    def jdbc_properties(self) -> dict[str, str]:
        """The driver properties, with user and password."""
        credentials = {"user": self.user, "password": self.password}
        return {**self.properties, **{k: v for k, v in credentials.items() if v is not None}}


def settings_connections(settings: Settings) -> Callable[[str], Connection]:
    """``resolve_connection`` for the connections ``settings`` declare."""
    return functools.partial(resolve_connection, configured=settings.connections,
                             conf_file=str(settings.conf_dir / SETTINGS_FILE))


def resolve_connection(name_or_url: str, configured: Mapping[str, Mapping[str, Any]], *,
                       conf_file: str) -> Connection:
    """The connection named in conf (``${VAR}`` read from the environment), or a JDBC URL.

    Raises:
        ConfigError: an unknown name, or a variable that is not set.
    """
    if name_or_url.startswith("jdbc:"):
        return Connection(url=name_or_url)
    if name_or_url not in configured:
        known = ", ".join(sorted(configured)) or "none"
        raise ConfigError(conf_file, [f"connections: no connection '{name_or_url}' (known: "
                                      f"{known}); name one, or give a jdbc: URL"])
    raw = configured[name_or_url]
    problems: list[str] = []

    def resolve(key: str, value: Any) -> str:
        def variable(match: re.Match[str]) -> str:
            if match[1] not in os.environ:
                problems.append(f"connections.{name_or_url}.{key}: environment variable "
                                f"{match[1]} is not set")
                return ""
            return os.environ[match[1]]

        return _ENV_VARIABLE.sub(variable, text_value(value))

    values = {key: resolve(key, value) for key, value in raw.items()
              if key != "properties" and value is not None}
    properties = {str(k): resolve(f"properties.{k}", v)
                  for k, v in (raw.get("properties") or {}).items()}
    if problems:
        raise ConfigError(conf_file, problems)
    return Connection(url=values["url"], user=values.get("user"),
                      password=values.get("password"), driver=values.get("driver"),
                      properties=properties)

