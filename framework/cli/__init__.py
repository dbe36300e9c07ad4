"""The ``deltamark`` admin CLI. Commands are thin: parse, call the library, render.

Exit codes: 0 success, 1 runtime error (one line on stderr), 2 usage error, 128 + N for
a run stopped by signal N.
Read-only commands never import pyspark, so they start no JVM. ``deltamark run`` takes
one of the machine's run slots (``framework.run.slots``) before it loads the commands.
"""

import os

# Arrow's buffers from the C allocator, unless the environment names one: pyarrow's
# default (mimalloc) holds ~30 MB more than a command uses (a skip among 10,000 files:
# 200 MB against 170). Arrow reads this once, when pyarrow is first imported; Spark's
# Python workers inherit it.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

import atexit
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from framework.run import slots

if TYPE_CHECKING:
    from framework.cli.commands import app as app

__all__ = ["app", "main"]

#: the global options that take a value (framework.cli.commands)
_VALUED_OPTIONS = ("--conf-dir", "--state-root")


def main() -> None:
    """The ``deltamark`` executable."""
    argv = tuple(sys.argv[1:])
    if _command(argv) == "run" and "--help" not in argv:
        try:
            slots.take()
        except ValueError as exc:
            _exit(f"Error: {exc}")
        except KeyboardInterrupt:  # stopped while it waited: nothing ran
            _exit(128 + signal.SIGINT)
    from framework.cli.commands import app

    try:
        app(obj=argv)
    except SystemExit as exc:
        _exit(exc.code)
    _exit(0)


def __getattr__(name: str) -> Any:
    if name == "app":  # loaded on first use: main() may wait for a run slot first
        from framework.cli.commands import app

        return app
    raise AttributeError(f"module 'framework.cli' has no attribute {name!r}")


def _command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (its first word after the global options)."""
    words = iter(argv)
    for word in words:
        if word in _VALUED_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


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
