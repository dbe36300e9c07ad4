"""deltamark ui"""

import secrets
from typing import Annotated

import typer

from framework.cli._common import library_errors, options
from framework.ops import admin


def ui(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port to listen on.")] = 8765,
    allow_actions: Annotated[bool, typer.Option(
        help="Allow rewind, reset, abort and resume from the page, with the token printed "
             "here.")] = False,
    backlog_every: Annotated[float, typer.Option(
        help="/metrics plans each job's input waiting again after this many seconds (or "
             "when the job ran since).")] = 60,
) -> None:
    """Serve the operations page: jobs, runs, bookmarks, data quality and workflows, read
    from the state tables (no JVM)."""
    from werkzeug.serving import make_server

    from framework.ui.app import create_app

    with library_errors(ctx):
        settings = options(ctx).settings()
        if note := admin.no_state(settings):
            typer.echo(note)
    token = secrets.token_urlsafe(24) if allow_actions else None
    address = f"http://{host}:{port}/"
    typer.echo(f"deltamark ui for {settings.state_root}: {address}"
               + (f"?token={token}  (actions allowed with this token)" if token else
                  "  (read-only; --allow-actions for rewind, reset, abort, resume)"))
    server = make_server(host, port, create_app(settings, token=token,
                                                  backlog_every=backlog_every), threaded=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.server_close()
