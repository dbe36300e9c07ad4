"""Glue's type classes (``awsglue.gluetypes``), served by Spark's.

``DynamicFrame.schema()`` is a Spark ``StructType`` (a frame has one schema, not one per
record), so a script that walks it, as Glue Studio's Drop Null Fields node does
(``for field in schema``, ``field.name``, ``field.dataType``, ``isinstance(...,
StringType)``, ``ArrayType.elementType``), gets Spark's types under Glue's names.
``Field`` and ``StructType`` build a schema as in Glue. ``ChoiceType`` (a field holding
several types), ``EnumType``, ``EntityType`` and ``UnknownType`` have no Spark counterpart:
making one fails with the one-line error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from framework.errors import GlueUnsupportedError

__all__ = ["ArrayType", "BinaryType", "BooleanType", "ByteType", "ChoiceType", "DataType",
           "DateType", "DecimalType", "DoubleType", "EntityType", "EnumType", "Field",
           "FloatType", "IntegerType", "LongType", "MapType", "NullType", "ShortType",
           "StringType", "StructType", "TimestampType", "UnknownType"]


def Field(name: str, dataType: DataType,  # noqa: N802, N803 - Glue's names
          properties: Mapping[str, Any] | None = None) -> StructField:
    """Glue's ``Field(name, dataType, properties)``: a nullable Spark ``StructField``."""
    return StructField(name, dataType, True, dict(properties or {}))


class _NoSparkType:
    """A Glue type with no Spark counterpart."""

    def __init__(self, *_: Any, **__: Any):
        raise GlueUnsupportedError(
            f"gluetypes.{type(self).__name__}",
            "a frame's fields have one Spark type each: resolve choices with "
            "resolveChoice(specs=[(path, 'cast:type')]) and use Spark's types")


class ChoiceType(_NoSparkType):
    """Glue's ChoiceType (not available: a field has one type)."""


class EnumType(_NoSparkType):
    """Glue's EnumType (not available)."""


class EntityType(_NoSparkType):
    """Glue's EntityType (not available)."""


class UnknownType(_NoSparkType):
    """Glue's UnknownType (not available)."""
