"""The ``deltamark`` admin CLI. Commands are thin: parse, call the library, render.

Exit codes: 0 success, 1 runtime error (one line on stderr), 2 usage error, 128 + N for
a run stopped by signal N.
Read-only commands never import pyspark, so they start no JVM.
"""

import os

# Arrow's buffers from the C allocator, unless the environment names one: pyarrow's
# default (mimalloc) holds ~30 MB more than a command uses (a skip among 10,000 files:
# 200 MB against 170). Arrow reads this once, when pyarrow is first imported; Spark's
# Python workers inherit it.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

import atexit
import sys
import threading
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from framework.cli import bookmarks, dq, runs, server, state, watermarks, workflow
from framework.cli._coercion import Group
from framework.cli._common import CliOptions
from framework.cli.metrics import metrics
from framework.cli.run import run
from framework.cli.sql import sql
from framework.cli.ui import ui

__all__ = ["app", "main"]

app = typer.Typer(
    name="deltamark",
    cls=Group,  # values coerced without importing pydantic
    help="Glue-style job bookmarks for PySpark, with the state in Delta tables.",
    no_args_is_help=True,
    # help texts are Markdown: a paragraph's line breaks are not kept (typer's Rich mode
    # keeps them, breaking the wrapped lines of every docstring), in every command group
    rich_markup_mode="markdown",
    pretty_exceptions_show_locals=False,
)
app.add_typer(runs.app, name="runs")
app.add_typer(bookmarks.app, name="bookmarks")
app.add_typer(watermarks.app, name="watermarks")
app.add_typer(dq.app, name="dq")
app.add_typer(workflow.app, name="workflow")
app.add_typer(server.app, name="server")
app.add_typer(state.app, name="state")
app.command("run")(run)
app.command("sql")(sql)
app.command("ui")(ui)
app.command("metrics")(metrics)


@app.callback()
def _global_options(
    ctx: typer.Context,
    conf_dir: Annotated[Path | None, typer.Option(
        help="Configuration directory (env: DELTAMARK_CONF_DIR; default: conf).")] = None,
    state_root: Annotated[str | None, typer.Option(
        help="Where the state tables live, a path or s3:// URI (env: DELTAMARK_STATE_ROOT)."
    )] = None,
    debug: Annotated[bool, typer.Option(help="Show tracebacks of errors.")] = False,
) -> None:
    # ctx.obj: the command line main() was given (None for a caller of the app)
    ctx.obj = CliOptions(conf_dir=conf_dir, state_root=state_root, debug=debug,
                         argv=ctx.obj)


def main() -> None:
    try:
        app(obj=tuple(sys.argv[1:]))
    except SystemExit as exc:
        _exit(exc.code)
    _exit(0)


def _exit(code: str | int | None) -> NoReturn:
    """Exit with ``code`` (as ``sys.exit`` takes it). Where the command ran no Spark and
    left no thread behind, without tearing down, one by one, the hundreds of modules it
    imported: its exit handlers run and its output is flushed first."""
    if "pyspark" in sys.modules or threading.active_count() > 1:
        sys.exit(code)
    if isinstance(code, str):
        print(code, file=sys.stderr)
    atexit._run_exitfuncs()  # the exit handlers run as at any exit (logging's flush too)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)
