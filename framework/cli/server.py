"""deltamark server ..."""

from pathlib import Path
from typing import Annotated

import typer

from framework.cli._common import library_errors, options, render

app = typer.Typer(help="A warm Spark JVM kept between runs: deltamark run and workflow run "
                       "use it from this directory.", no_args_is_help=True)


@app.command("start")
def start(
    ctx: typer.Context,
    idle_minutes: Annotated[float, typer.Option(
        help="Stop after this long without commands (0: never).")] = 180,
    driver_memory: Annotated[str | None, typer.Option(
        help="The JVM's memory, shared by the jobs running at once (default: twice the "
             "conf's spark.driver.memory, else 2g).")] = None,
) -> None:
    """Start a server for this directory, conf and environment (or say which one runs)."""
    from framework.server import start_server

    with library_errors(ctx):
        server, new = start_server(options(ctx).settings(), idle_minutes=idle_minutes,
                                   memory=driver_memory)
        status = server.status()
    typer.echo(f"deltamark server {'started' if new else 'already running'}: pid "
               f"{status['pid']}, socket {server.address}, log "
               f"{server.address.with_suffix('.log')}. deltamark run and workflow run from "
               f"{status['cwd']} use it; deltamark server stop stops it.")


@app.command("status")
def status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Every running server of this user; 'this' marks the one runs here would use."""
    from framework.server import find_server, running_servers

    with library_errors(ctx):
        here = find_server(options(ctx).settings())
        servers = running_servers()
    this = [here is not None and s["socket"] == str(here.address) for s in servers]
    if as_json:
        render([{**s, "this": t} for s, t in zip(servers, this, strict=True)], as_json=True)
        return
    render([{"this": "*" if t else "", "pid": s["pid"], "cwd": s["cwd"],
             "conf_dir": s["conf_dir"], "started_at": s["started_at"][:19],
             "jvm": "running" if s["jvm_pid"] else "not started",
             "running": len(s["commands"]), "commands_run": s["commands_run"]}
            for s, t in zip(servers, this, strict=True)], as_json=False)


@app.command("stop")
def stop(
    ctx: typer.Context,
    now: Annotated[bool, typer.Option(
        help="Kill the commands it runs instead of letting them end.")] = False,
    all_: Annotated[bool, typer.Option(
        "--all", help="Stop every server of this user (those started with other conf, "
                      "environment or code too).")] = False,
) -> None:
    """Stop the server that runs would use here, once its commands end (or --now)."""
    from framework.server import Server, find_server, running_servers

    with library_errors(ctx):
        if all_:
            servers = [Server(Path(s["socket"])) for s in running_servers()]
        else:
            servers = [s for s in [find_server(options(ctx).settings())] if s is not None]
        if not servers:
            typer.echo("no deltamark server runs" + ("" if all_ else " for this directory, "
                                                     "conf and environment"))
            return
        for server in servers:
            running = server.stop(now=now)["commands"]
            typer.echo(f"deltamark server {server.address} stops" + (
                f" once its {running} running commands end" if running and not now else ""))
