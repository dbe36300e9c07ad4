"""Databases, for JDBC sources and targets alike: connections (``connection``), what a
connection offers deltamark's own queries (``database``), the JDBC client (``client``) and
the SQL that differs by database (``dialect``)."""

from framework.jdbc.client import connect, java_message
from framework.jdbc.connection import Connection, resolve_connection, settings_connections
from framework.jdbc.database import Column, Database, Transaction

__all__ = ["Column", "Connection", "Database", "Transaction", "connect", "java_message",
           "resolve_connection", "settings_connections"]
