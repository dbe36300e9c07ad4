"""deltamark bookmarks ..."""

import json
from typing import Annotated, Any

import typer

from framework.cli._common import library_errors, options, plain
from framework.status import describe_bookmarks

app = typer.Typer(help="Bookmarks: what each job context has processed.", no_args_is_help=True)


@app.command("show")
def show(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="The job.")],
    context: Annotated[str | None, typer.Option("--ctx", help="Only this context.")] = None,
    files: Annotated[bool, typer.Option(
        "--files", help="List the files each file context tracks by name.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Show the current bookmark of each context of JOB, readably."""
    with library_errors(ctx):
        described = describe_bookmarks(options(ctx).store(), job, context, list_files=files)
    if as_json:
        typer.echo(json.dumps([plain(d) for d in described], default=str))
    elif not described:
        typer.echo(f"{job}: no bookmarks yet (no run has committed one).")
    else:
        typer.echo("\n".join(_text(job, d) for d in described))


def _text(job: str, entry: dict[str, Any]) -> str:
    lines = [f"{job} / {entry['context']}  ({entry['kind']}; {entry['event']} by run "
             f"{entry['run_seq']}, {entry['run_id']}, at {entry['committed_at']:%Y-%m-%d %H:%M:%S} "
             "UTC)"]
    state = entry["state"]
    if entry["kind"] == "files":
        lines += [
            f"  high-water mark : {state['settled_at']} (files modified at or before it "
            "count as processed)",
            f"  window          : {entry['window_files']} files modified after it, tracked by "
            "name",
            f"  totals          : {state['files_total']} files, {state['bytes_total']} bytes "
            "read by all runs",
        ]
        for f in entry.get("files", []):
            lines.append(f"    {f['modified_at']:%Y-%m-%d %H:%M:%S.%f}"[:-3]
                         + f"  {f['size']:>10}  run {f['run_seq']:<4} {f['path']}")
    else:
        lines += [f"  {key}: {value}" for key, value in state.items()]
    return "\n".join(lines)
