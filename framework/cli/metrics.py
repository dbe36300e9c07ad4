"""deltamark metrics"""

import os
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from framework.cli._common import library_errors, options
from framework.ops import admin


def metrics(
    ctx: typer.Context,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write to this file instead (replaced whole, so that a "
        "node exporter's text-file collector never reads half of it).")] = None,
) -> None:
    """Print every job's Prometheus metrics, as deltamark ui serves them at /metrics: for
    a node exporter's text-file collector (from cron, for example: deltamark metrics -o
    /var/lib/node_exporter/deltamark.prom). No JVM."""
    from framework.ops.metrics import Metrics

    with library_errors(ctx):
        settings = options(ctx).settings()
        if note := admin.no_state(settings):
            typer.echo(note, err=True)
        text = Metrics(settings).exposition()
    if output is None:
        typer.echo(text.decode(), nl=False)
        return
    try:
        with tempfile.NamedTemporaryFile("wb", dir=output.parent, prefix=".deltamark-",
                                         suffix=".prom", delete=False) as tmp:
            tmp.write(text)
        os.chmod(tmp.name, 0o644)  # a collector running as another user reads it
        os.replace(tmp.name, output)
    except OSError as exc:
        typer.echo(f"error: cannot write {output}: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None
