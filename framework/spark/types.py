"""Spark types compared and converted without a JVM: which widen to which, and the SQL
that brings a value of one type to another by field name.

``Conversion`` writes that SQL: struct fields are matched by name (a missing one is NULL),
arrays and maps converted element by element, a widening cast as it is. Where a value may
not fit (a string to a number, a struct to an array, a field the wanted struct lacks) it
notes a *misfit*: the value's name, the SQL of the value and the condition under which it
did not fit, for the caller to rescue or refuse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from framework.spark.session import quoted

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

__all__ = ["CHOICE", "Conversion", "Misfit", "literal", "same", "sql_type", "widens"]

#: the field metadata key of a *choice* column (Glue's choice type): a text column whose
#: values are of the type it names, or not
CHOICE = "deltamark.glue.choice"


def widens(narrow: DataType, wide: DataType) -> bool:
    """Whether every value of ``narrow`` is one of ``wide``, as Delta's type widening
    sees it: byte/short/int -> long, decimal, double; long -> decimal; float -> double;
    decimal precision up; a NULL type to any."""
    from pyspark.sql.types import (
        ByteType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        NullType,
        ShortType,
    )

    if same(narrow, wide) or isinstance(narrow, NullType):
        return True
    integers: list[type[DataType]] = [ByteType, ShortType, IntegerType, LongType]
    kind = type(narrow)
    if kind in integers and type(wide) in integers:
        return integers.index(kind) <= integers.index(type(wide))
    if kind in (ByteType, ShortType, IntegerType) and isinstance(wide, DoubleType):
        return True
    if kind in integers and isinstance(wide, DecimalType):
        digits = (3, 5, 10, 20)[integers.index(kind)]
        return wide.precision - wide.scale >= digits
    if isinstance(narrow, FloatType):
        return isinstance(wide, DoubleType)
    if isinstance(narrow, DecimalType) and isinstance(wide, DecimalType):
        return (wide.scale >= narrow.scale
                and wide.precision - wide.scale >= narrow.precision - narrow.scale)
    return False


def same(one: DataType, other: DataType) -> bool:
    """Whether two types are equal but for nullability and field metadata."""
    return _bare(one.jsonValue()) == _bare(other.jsonValue())


def _bare(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _bare(v) for k, v in node.items()
                if k not in ("nullable", "containsNull", "valueContainsNull", "metadata")}
    return [_bare(v) for v in node] if isinstance(node, list) else node


def sql_type(data_type: DataType) -> str:
    """``data_type`` in Spark SQL, its field names quoted."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, StructType):
        return "STRUCT<" + ", ".join(f"{quoted(f.name)}: {sql_type(f.dataType)}"
                                     for f in data_type.fields) + ">"
    if isinstance(data_type, ArrayType):
        return f"ARRAY<{sql_type(data_type.elementType)}>"
    if isinstance(data_type, MapType):
        return f"MAP<{sql_type(data_type.keyType)}, {sql_type(data_type.valueType)}>"
    return data_type.simpleString()


def _lost(ref: str, given: DataType, wanted: DataType, cast: str) -> str:
    """SQL: the value ``ref`` did not convert (``cast``) to ``wanted`` whole. Text fits
    where Spark reads it as a value of the type, in whatever form (' 7', '+7', '09' for
    an int, '5.5' for a decimal(10,2), '2024-01-02T03:04:05Z' for a timestamp), unless
    the type cannot hold all of it ('5.555' for a decimal(10,2), a time of day for a
    date); any other value fits where it converts back to itself (20.5 does not fit a
    bigint)."""
    from pyspark.sql.types import DateType, DecimalType, StringType

    if not isinstance(given, StringType):
        return f"{cast} IS NULL OR NOT (try_cast({cast} AS {sql_type(given)}) <=> {ref})"
    if isinstance(wanted, DecimalType):  # compared at the most digits the type's integers leave
        exact = f"DECIMAL(38, {38 - (wanted.precision - wanted.scale)})"
        return f"{cast} IS NULL OR NOT (CAST({cast} AS {exact}) <=> try_cast({ref} AS {exact}))"
    if isinstance(wanted, DateType):
        return (f"{cast} IS NULL OR NOT (CAST({cast} AS TIMESTAMP) <=> "
                f"try_cast({ref} AS TIMESTAMP))")
    return f"{cast} IS NULL"


def literal(text: str) -> str:
    """A string literal in Spark SQL."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class Misfit:
    """A value that may not fit where it is converted to: ``name`` (a dotted path),
    ``value`` (SQL of the value as read) and ``condition`` (SQL: it did not fit)."""

    name: str
    value: str
    condition: str


@dataclass
class Conversion:
    """SQL converting values by name (``convert``), collecting ``misfits``. A field the
    wanted struct lacks is a misfit where its name differs from one of the wanted's only
    in case, or where ``new_fields_misfit``; else it is left out."""

    new_fields_misfit: bool = True
    misfits: list[Misfit] = field(default_factory=list)
    depth: int = 0

    def convert(self, ref: str, given: DataType, wanted: DataType, name: str) -> str:
        """SQL of the value ``ref`` (of type ``given``) as ``wanted``."""
        from pyspark.sql.types import ArrayType, MapType, StringType, StructType

        nested = (StructType, ArrayType, MapType)
        if same(given, wanted):
            return ref
        if isinstance(wanted, StringType):  # any value's text fits a string
            return f"to_json({ref})" if isinstance(given, nested) else f"CAST({ref} AS STRING)"
        if isinstance(given, StructType) and isinstance(wanted, StructType):
            return self._struct(ref, given, wanted, name)
        if isinstance(given, ArrayType) and isinstance(wanted, ArrayType):
            element = f"x{self.depth}"
            body, inner = self._inner(element, given.elementType, wanted.elementType, name)
            if inner:  # the whole array is a misfit when one of its elements is
                self.misfits.append(Misfit(name, ref, f"exists({ref}, {element} -> {inner})"))
            return f"transform({ref}, {element} -> {body})"
        if isinstance(given, MapType) and isinstance(wanted, MapType) and \
                same(given.keyType, wanted.keyType):
            value = f"v{self.depth}"
            body, inner = self._inner(value, given.valueType, wanted.valueType, name)
            if inner:
                self.misfits.append(Misfit(name, ref,
                                           f"exists(map_values({ref}), {value} -> {inner})"))
            return f"transform_values({ref}, (k{self.depth}, {value}) -> {body})"
        if widens(given, wanted):
            return f"CAST({ref} AS {sql_type(wanted)})"
        if isinstance(given, nested) or isinstance(wanted, nested):
            self.misfits.append(Misfit(name, ref, f"{ref} IS NOT NULL"))
            return f"CAST(NULL AS {sql_type(wanted)})"
        cast = f"try_cast({ref} AS {sql_type(wanted)})"
        misfit = f"{ref} IS NOT NULL AND ({_lost(ref, given, wanted, cast)})"
        self.misfits.append(Misfit(name, ref, misfit))
        return f"CASE WHEN {misfit} THEN NULL ELSE {cast} END"

    def extras(self, ref: str, given: StructType, wanted: StructType, prefix: str) -> None:
        """Note the fields of ``given`` that ``wanted`` lacks (where ``extra`` says)."""
        names = set(wanted.fieldNames())
        lowered = {name.lower() for name in names}
        for f in given.fields:
            if f.name not in names and (self.new_fields_misfit or f.name.lower() in lowered):
                inner = f"{ref}{quoted(f.name)}"
                self.misfits.append(Misfit(f"{prefix}{f.name}", inner, f"{inner} IS NOT NULL"))

    def _struct(self, ref: str, given: StructType, wanted: StructType, name: str) -> str:
        names = given.fieldNames()
        parts = [f"{literal(f.name)}, " + (
            self.convert(f"{ref}.{quoted(f.name)}", given[f.name].dataType, f.dataType,
                         f"{name}.{f.name}")
            if f.name in names else f"CAST(NULL AS {sql_type(f.dataType)})")
            for f in wanted.fields]
        self.extras(f"{ref}.", given, wanted, f"{name}.")
        return f"CASE WHEN {ref} IS NULL THEN NULL ELSE named_struct({', '.join(parts)}) END"

    def _inner(self, ref: str, given: DataType, wanted: DataType, name: str
               ) -> tuple[str, str]:
        """The conversion of an element (or map value) ``ref``, and the SQL condition
        that it did not fit ('' when it always does)."""
        inner = Conversion(self.new_fields_misfit, depth=self.depth + 1)
        body = inner.convert(ref, given, wanted, name)
        return body, " OR ".join(f"({m.condition})" for m in inner.misfits)
