"""Run every benchmark: python -m tests.benchmarks [delta_io] [state_store] [incremental_files]
[jdbc]."""

import sys

from tests.benchmarks import bench_delta_io, bench_incremental_files, bench_jdbc, bench_state_store

BENCHMARKS = {"delta_io": bench_delta_io.main, "state_store": bench_state_store.main,
              "incremental_files": bench_incremental_files.main, "jdbc": bench_jdbc.main}

for name in sys.argv[1:] or BENCHMARKS:
    BENCHMARKS[name]()
