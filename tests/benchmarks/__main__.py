"""Run the benchmarks, each in its own process (its own Spark session and JVM):

    python -m tests.benchmarks [delta_io] [delta_changes] [state_store] [state_size]
                               [incremental_files] [files_scale] [s3_files] [noop]
                               [workflow] [jdbc] [relationalize] [quality] [ui]
                               [iceberg_source] [connect_files]

Exits 1 if any of them failed to run (a missed target is printed, not an error).
"""

import subprocess
import sys
import time

BENCHMARKS = ("delta_io", "delta_changes", "state_store", "state_size", "incremental_files",
              "files_scale", "s3_files", "noop", "workflow", "jdbc", "relationalize", "quality",
              "ui", "iceberg_source", "connect_files")


def ran(name: str) -> bool:
    """Whether bench_``name`` ran to the end; prints how long it took."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", f"tests.benchmarks.bench_{name}"])
    print(f"(bench_{name}: {time.monotonic() - started:.0f} s)", flush=True)
    return done.returncode == 0


failed = [name for name in sys.argv[1:] or BENCHMARKS if not ran(name)]
if failed:
    sys.exit(f"benchmarks that did not run to the end: {', '.join(failed)}")
