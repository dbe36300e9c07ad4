"""Databases, for JDBC sources and targets alike: connections (``connection``), the client
for deltamark's own queries (``client``) and the SQL that differs by database
(``dialect``)."""

from framework.jdbc.client import Column, Database, Transaction, connect, java_message
from framework.jdbc.connection import Connection, resolve_connection, settings_connections

__all__ = ["Column", "Connection", "Database", "Transaction", "connect", "java_message",
           "resolve_connection", "settings_connections"]
