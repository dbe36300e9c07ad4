"""What every command shares: global options, the error edge, and rendering."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer

from framework.config import Settings, load_settings
from framework.errors import DeltamarkError
from framework.state_io import open_store
from state_tables.store import StateStore

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


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
        settings = self.settings()
        return open_store(settings.state_root, retention_hours=settings.state_retention_hours)


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
    """Rows as a JSON array (``--json``: nothing else on stdout) or an aligned text table."""
    # cast: a dataclass row is an instance (never a class)
    records = [plain(asdict(cast("DataclassInstance", r)) if is_dataclass(r) else dict(r))
               for r in rows]
    if as_json:
        typer.echo(json.dumps(records, default=str))
        return
    if not records:
        typer.echo("(no rows)")
        return
    columns = list(records[0])
    cells = [[_cell(r.get(c)) for c in columns] for r in records]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    typer.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def plain(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, (dt.datetime, dt.date)) else v
            for k, v in record.items()}


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)
