"""What every command shares: global options, the error edge, and rendering."""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from framework.common import humanize
from framework.config import Settings, load_settings
from framework.errors import DeltamarkError
from framework.ops.admin import no_state
from framework.state.table_io import settings_store
from state_tables.store import StateStore

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class Skipped(enum.Enum):
    """How a list shows runs that found nothing new (skipped before starting Spark)."""

    fold = "fold"
    show = "show"
    hide = "hide"


SKIPPED_OPTION = Annotated[Skipped, typer.Option(
    help="Runs that found nothing new: fold each stretch of them into one line, show each, "
         "or hide them (--json: fold shows each).")]


@dataclass(frozen=True)
class CliOptions:
    conf_dir: Path | None
    state_root: str | None
    debug: bool
    #: the process's command line when it is the ``deltamark`` command itself (not a
    #: caller of the app in-process): what a command hands to a deltamark server
    argv: tuple[str, ...] | None = None

    def settings(self) -> Settings:
        return load_settings(conf_dir=self.conf_dir, state_root=self.state_root)

    def store(self) -> StateStore:
        """The state tables, for reading; a root that holds none is said on stderr."""
        settings = self.settings()
        if note := no_state(settings):
            typer.echo(note, err=True)
        return settings_store(settings)


def options(ctx: typer.Context) -> CliOptions:
    return ctx.find_root().obj


@contextlib.contextmanager
def library_errors(ctx: typer.Context, *, as_json: bool = False) -> Iterator[None]:
    """Print a deltamark error as one line on stderr and exit with its code, 1 for most
    (traceback with --debug).
    ``as_json``: the command promised JSON on stdout: the error goes there too, as
    ``{"status": "failed", "error": ..., "error_type": ..., "job": ..., "run_id": ...}``."""
    try:
        yield
    except DeltamarkError as exc:
        if options(ctx).debug:
            raise
        if as_json:
            typer.echo(json.dumps({"status": "failed", "error": str(exc),
                                   "error_type": type(exc).__name__,
                                   "job": getattr(exc, "job", None),
                                   "run_id": getattr(exc, "run_id", None)}))
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None


def render(rows: Sequence[Mapping[str, Any] | Any], *, as_json: bool) -> None:
    """Rows as a JSON array (``--json``: nothing else on stdout, times in ISO 8601) or an
    aligned text table (times in this machine's zone, named in their column's header)."""
    # cast: a dataclass row is an instance (never a class)
    records = [asdict(cast("DataclassInstance", r)) if is_dataclass(r) else dict(r)
               for r in rows]
    if as_json:
        typer.echo(json.dumps([plain(r) for r in records], default=str))
        return
    if not records:
        typer.echo("(no rows)")
        return
    columns = list(records[0])
    cells = [[_cell(r.get(c)) for c in columns] for r in records]
    header = [zoned(c) if any(isinstance(r.get(c), dt.datetime) for r in records) else c
              for c in columns]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(header)]
    typer.echo("  ".join(c.ljust(w) for c, w in zip(header, widths, strict=True)).rstrip())
    for row in cells:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def zoned(column: str) -> str:
    """A column of local times, named with this machine's time zone: ``started (CET)``."""
    return f"{column} ({dt.datetime.now().astimezone().tzname()})"


def plain(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, (dt.datetime, dt.date)) else v
            for k, v in record.items()}


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return humanize.local_time(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)
