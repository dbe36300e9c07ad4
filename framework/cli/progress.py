"""What ``deltamark run`` shows while it works.

On a terminal: its log lines (planning: the sources and files found; the writes and
commits) scroll above a live line of Spark's work (each active stage's tasks done, from
Spark's status tracker, polled every ``POLL_SECONDS``). Elsewhere (a pipe, a file, or with
``--json``): the same log lines, plain, with their time.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["POLL_SECONDS", "run_progress"]

POLL_SECONDS = 0.25


@contextlib.contextmanager
def run_progress(*, terminal: bool) -> Iterator[None]:
    """Show the run's progress on stderr while the block runs (see the module docstring)."""
    if not terminal:
        logging.basicConfig(format="%(asctime)s %(name)s: %(message)s")
        yield
        return
    from rich.console import Console
    from rich.logging import RichHandler

    console = Console(stderr=True)
    logging.basicConfig(format="%(name)s: %(message)s", handlers=[
        RichHandler(console=console, show_path=False, show_level=False, markup=False)])
    stop = threading.Event()
    with console.status("planning") as status:
        poller = threading.Thread(target=_poll, args=(status, stop), name="progress",
                                  daemon=True)
        poller.start()
        try:
            yield
        finally:
            stop.set()
            poller.join()


def _poll(status: Any, stop: threading.Event) -> None:
    while not stop.wait(POLL_SECONDS):
        with contextlib.suppress(Exception):  # the session may be starting or stopping
            if (line := _spark_line()) is not None:
                status.update(line)


def _spark_line() -> str | None:
    """Spark's active stages and their tasks, or None before Spark is used."""
    if "pyspark" not in sys.modules:  # never import it here: a skipped run starts no JVM
        return None
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is None:
        return None
    tracker = context.statusTracker()
    stages = [info for info in map(tracker.getStageInfo, tracker.getActiveStageIds()) if info]
    if not stages:
        return "Spark: between stages"
    return "Spark: " + "; ".join(
        f"stage {s.stageId} ({s.name.split(' at ')[0]}): {s.numCompletedTasks}/{s.numTasks} "
        f"tasks done" + (f", {s.numActiveTasks} running" if s.numActiveTasks else "")
        for s in sorted(stages, key=lambda s: s.stageId))
