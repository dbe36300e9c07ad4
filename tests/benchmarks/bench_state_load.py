"""A wave of jobs on one state root, as a scheduler starts them at the top of the hour: N
``deltamark run`` processes at once, most of them finding nothing new (skipped, no JVM) and
REAL of them first runs that read and write, the first of which is killed before its run
is recorded succeeded and run again after the wave (the commit protocol recovers it). On
a local state root, then on an S3 server on 127.0.0.1 (moto), with the same jobs.

Figures: runs that failed (target 0), skip jobs that did not skip (target 0), state rows
doubled (target 0), the wave's wall time against the same N skips one after another in one
process, and each skip's own seconds in the wave (p50, p95) against a lone skip's. The
wave's wall time against what its processes' CPU must take on this machine's cores (N times a
lone skip's CPU time, and the real runs' own, divided by the cores): target <= 1.3.

DELTAMARK_BENCH_LOAD_JOBS sets N (default 200), DELTAMARK_BENCH_LOAD_REAL the real runs
(default 6), DELTAMARK_BENCH_LOAD_ON the state roots (default "local,s3").
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOB = '''from framework import IncrementalJob


class CopyOrders(IncrementalJob):
    def run(self, ctx):
        df = ctx.read_files(ctx.params["landing"], format="json",
                            transformation_ctx="orders_src")
        ctx.write_delta(df, ctx.params["target"], mode="append")
'''
ORDERS = '{"id": 1, "amount": 9.5}\n{"id": 2, "amount": 20.0}\n'


def project(scratch: Path, skips: int, real: int) -> list[str]:
    """The README's job as ``skip_1..skip_N`` (one landing directory, each job run once
    already) and, per state root, ``real_<place>_k`` (a landing directory each, never
    run); returns the real jobs' places."""
    (scratch / "jobs").mkdir()
    (scratch / "jobs" / "copy_orders.py").write_text(JOB)
    (scratch / "conf" / "jobs").mkdir(parents=True)
    (scratch / "conf" / "deltamark.yaml").write_text(f"state_root: {scratch / 'state'}\n")
    (scratch / "landing" / "shared").mkdir(parents=True)
    (scratch / "landing" / "shared" / "batch-1.json").write_text(ORDERS)
    for k in range(1, skips + 1):
        _declare(scratch, f"skip_{k}", scratch / "landing" / "shared", scratch / "lake" / "shared")
    places = ["local", "s3"]
    for place in places:
        for k in range(1, real + 1):
            landing = scratch / "landing" / f"real_{place}_{k}"
            landing.mkdir()
            (landing / "batch-1.json").write_text(ORDERS)
            _declare(scratch, f"real_{place}_{k}", landing, scratch / "lake" / f"real_{place}_{k}")
    return places


def _declare(scratch: Path, job: str, landing: Path, target: Path) -> None:
    (scratch / "conf" / "jobs" / f"{job}.yaml").write_text(json.dumps({
        "class": "../jobs/copy_orders.py:CopyOrders",
        "params": {"landing": str(landing), "target": str(target)}}))


def seed(conf_dir: str, skips: str) -> None:
    """Run ``skip_1`` once (Spark), then record the same first run for the other skip jobs
    (their conf differs only in name: the rows are skip_1's, with each job's fingerprint)."""
    import dataclasses
    import uuid

    from framework import load_settings, run_job
    from framework.run.preflight import fingerprint
    from framework.run.spec import load_job
    from framework.state.table_io import open_store

    settings = load_settings(conf_dir=conf_dir)
    assert run_job(settings, "skip_1").status == "succeeded"
    store = open_store(settings.state_root)
    first = store.runs("skip_1")[-1]
    bookmarks, files = store.run_plan("skip_1", first.run_seq)
    for k in range(2, int(skips) + 1):
        job = f"skip_{k}"
        run = dataclasses.replace(first, job=job, run_id=uuid.uuid4().hex, fingerprint=fingerprint(
            settings, load_job(settings, job), first.arguments, first.mode))
        store.record_run(run, bookmarks=[dataclasses.replace(b, job=job, run_id=run.run_id)
                                         for b in bookmarks],
                         files=[dataclasses.replace(f, job=job, run_id=run.run_id)
                                for f in files])


def one_after_another(conf_dir: str, state_root: str, skips: str) -> None:
    """The baseline: the N skips in this one process, one after another."""
    from framework import load_settings, run_job

    settings = load_settings(conf_dir=conf_dir, state_root=state_root)
    for k in range(1, int(skips) + 1):
        assert run_job(settings, f"skip_{k}").status == "skipped"


def wave(command: list[str], jobs: list[str], crashed: str | None, out: Path
         ) -> tuple[dict[str, float], dict[str, int], dict[str, dict], dict[str, float]]:
    """Start ``command + [job, "--json"]`` for every job at once: when each ended (seconds
    from the start), each exit code, each printed report and each process's CPU time."""
    out.mkdir()
    started = time.perf_counter()
    children, started_processes = {}, []
    for job in jobs:
        with open(out / f"{job}.out", "wb") as stdout, open(out / f"{job}.err", "wb") as err:
            env = {**os.environ, **({"DELTAMARK_CRASH_AT": "returned"} if job == crashed
                                    else {})}
            # kept: a Popen let go is reaped by the next one's start, unseen by wait4
            started_processes.append(subprocess.Popen(
                [*command, job, "--json"], stdout=stdout, stderr=err, env=env))
            children[started_processes[-1].pid] = job
    ended, codes, cpu = {}, {}, {}
    while len(ended) < len(children):
        pid, status, usage = os.wait4(-1, 0)
        job = children[pid]
        ended[job] = time.perf_counter() - started
        codes[job] = os.waitstatus_to_exitcode(status)
        cpu[job] = usage.ru_utime + usage.ru_stime
    for job, code in codes.items():
        if code != 0 and job != crashed:
            said = (out / f"{job}.err").read_text().strip().splitlines() or [""]
            error = next((line for line in said if line.startswith("error:")), said[-1])
            print(f"  {job} exited {code}: {error[:300]}")
    reports = {job: json.loads((out / f"{job}.out").read_text())
               for job, code in codes.items() if code == 0}
    return ended, codes, reports, cpu


def recorded_skips(state_root: str) -> int:
    """The skipped runs the state holds."""
    from framework.state.table_io import open_store

    return sum(r.status == "skipped" for r in open_store(state_root).runs())


def doubled_rows(state_root: str) -> dict[str, int]:
    """Each state table's rows that repeat another row exactly."""
    from framework.delta import log
    from framework.state.table_io import open_store
    from state_tables.schemas import TABLES

    store = open_store(state_root)
    doubled = {}
    for table in TABLES.values():
        rows = log.read_rows(store.path(table))
        if rows is not None and len(rows):
            distinct = rows.group_by(rows.column_names, use_threads=False).aggregate([])
            doubled[table.name] = len(rows) - len(distinct)
    return doubled


WAVE_TARGET = 1.3


def _timed(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench_state_load: {' '.join(command[2:])} failed:\n"
                         f"{done.stderr[-2000:]}")
    return time.perf_counter() - started, done.stdout


def _cpu_of(command: list[str]) -> float:
    """The CPU time (user and system, s) of ``command``'s process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    _timed(command)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    from tests.s3 import S3Server

    jobs = int(os.environ.get("DELTAMARK_BENCH_LOAD_JOBS", 200))
    real = int(os.environ.get("DELTAMARK_BENCH_LOAD_REAL", 6))
    skips = jobs - real
    wanted = os.environ.get("DELTAMARK_BENCH_LOAD_ON", "local,s3").split(",")
    scratch = Path(tempfile.mkdtemp(prefix="deltamark-bench-load-"))
    server = S3Server() if "s3" in wanted else None
    if server:
        os.environ.update(server.environment)
    python = sys.executable
    conf = str(scratch / "conf")
    results = []
    try:
        places = project(scratch, skips, real)
        _timed([python, "-m", "tests.benchmarks.bench_state_load", "seed", conf, str(skips)])
        roots = {"local": str(scratch / "state")}
        if server:
            roots["s3"] = f"{server.bucket()}/state"
            _copy_tree(roots["local"], roots["s3"])
        for place in places:
            if place not in wanted:
                continue
            root = roots[place]
            run = [python, "-m", "framework", "--conf-dir", conf, "--state-root", root, "run"]
            lone_wall, out = _timed([*run, "skip_1", "--json"])
            lone = json.loads(out)["seconds"]
            lone_cpu = _cpu_of([*run, "skip_1", "--json"])
            in_one, _ = _timed([python, "-m", "tests.benchmarks.bench_state_load",
                                "one_after_another", conf, root, str(skips)])
            reals = [f"real_{place}_{k}" for k in range(1, real + 1)]
            crashed = reals[0] if reals else None
            ended, codes, reports, cpu = wave(run, [f"skip_{k}" for k in range(1, skips + 1)]
                                         + reals, crashed, scratch / f"wave-{place}")
            wall = max(ended[f"skip_{k}"] for k in range(1, skips + 1))  # the skips' wave
            failed = sum(code != 0 for job, code in codes.items() if job != crashed)
            exact = True
            if crashed:
                killed = codes[crashed] == -9
                _, out = _timed([*run, crashed, "--json"])  # recovers the killed run
                exact = killed and bool(json.loads(out)["recovered"])
            # every real job's file landed in its target once (the killed one's included)
            exact = exact and all(_target_rows(scratch / "lake" / job) == 2 for job in reals)
            skipped = [r["seconds"] for job, r in reports.items() if r["status"] == "skipped"]
            # the lone skip, the skips one by one, the wave's: each recorded once
            lost = 2 + skips + len(skipped) - recorded_skips(root)
            real_ok = sum(reports.get(job, {}).get("status") == "succeeded" for job in reals)
            # the skips' CPU as a lone skip's, and the real runs' (their JVMs) as measured
            bound = (skips * lone_cpu + sum(cpu[job] for job in reals)) / (os.cpu_count() or 1)
            results.append((place, wall, in_one, failed, lost, len(skipped), real_ok, exact,
                            _percentile(skipped, 50), _percentile(skipped, 95), lone,
                            lone_wall, doubled_rows(root), wall / bound))
    finally:
        if server:
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"\nbench_state_load: {jobs} jobs started at once on one state root ({skips} "
          f"skips, {real} real runs, the first killed before its state commit), "
          f"{os.cpu_count()} cores")
    print("(wave: until the last skip ended; one by one: the same skips in one process)")
    print(f"{'state root':>10}{'wave':>9}{'one by one':>12}{'ratio':>7}{'failed':>8}"
          f"{'doubled rows':>14}  skip p50 / p95 (lone)")
    for (place, wall, in_one, failed, lost, skipped, real_ok, exact, p50, p95, lone,
         lone_wall, doubled, against_cpu) in results:
        twice = sum(doubled.values())
        held = (failed == 0 and twice == 0 and lost == 0 and exact and skipped == skips
                and against_cpu <= WAVE_TARGET)
        print(f"{place:>10}{wall:>8.1f}s{in_one:>11.1f}s{wall / in_one:>7.2f}"
              f"{failed:>8}{twice:>14}  {p50:.2f} / {p95:.2f} s ({lone:.2f} s)  "
              f"{'ok' if held else 'MISSED'}")
        print(f"{'':>10}  {skipped} of {skips} skip jobs skipped ({lost} skips not "
              f"recorded), {real_ok} real runs succeeded; the killed one recovered, every "
              f"real run's rows in its target {'once' if exact else 'NOT exactly once'}; a "
              f"lone skip's whole process {lone_wall:.2f} s; doubled by table: {doubled}")
        print(f"{'':>10}  the wave against its CPU on {os.cpu_count()} cores ({skips} x a "
              f"lone skip's, and the real runs' own, / cores): {against_cpu:.2f}  <= "
              f"{WAVE_TARGET}")


def _copy_tree(local: str, uri: str) -> None:
    """The local state root's files, as they are, under ``uri``."""
    import pyarrow.fs as pafs

    from framework import storage

    filesystem, base, _ = storage.filesystem(uri)
    pafs.copy_files(local, base, destination_filesystem=filesystem)


def _target_rows(path: Path) -> int:
    from framework.delta import log

    rows = log.read_rows(str(path))
    return 0 if rows is None else len(rows)


def _percentile(values: list[float], percent: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[percent - 1]


if __name__ == "__main__":
    if sys.argv[1:2] == ["seed"]:
        seed(*sys.argv[2:4])
    elif sys.argv[1:2] == ["one_after_another"]:
        one_after_another(*sys.argv[2:5])
    else:
        main()
