"""The scale study's ingest rows: a SEG-Y ingested to a local folder by one process, and as tasks on a
real Dask cluster of one and of two single-threaded worker processes on this machine. From the scheduler's
task stream: the workers' compute time, the overhead per task (wall time times workers, less the
compute, per task), and the share of the wall time the workers were not computing (the scheduler, the
transfers and this process's scan and finish). Every store is checked equal to the one-process one."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np

from .dask_cluster import DaskCluster
from .measure import settle

LAYOUT = "20x20x50/100x100x750"
"""Shards of 100 x 100 traces: a task each (20 on the full survey), so that two workers share the work."""


def run(source: Path, store: Path, **options) -> tuple[float, dict]:
    import cubeslab

    shutil.rmtree(store, ignore_errors=True)
    settle()
    started = time.perf_counter()
    summary = cubeslab.ingest(source, store, layout=LAYOUT, **options)
    return time.perf_counter() - started, summary


def on_cluster(source: Path, store: Path, workers: int, runs: int, folder: Path) -> dict:
    from distributed import Client, get_task_stream

    walls, computes, tasks = [], [], 0
    with (
        DaskCluster(folder / f"dask-{workers}", workers=workers) as cluster,
        Client(cluster.address) as client,
    ):
        for _ in range(runs):
            with get_task_stream(client) as stream:
                seconds, _ = run(source, store, client=client)
            ours = [t for t in stream.data if str(t["key"]).startswith("cubeslab-ingest-")]
            tasks = len(ours)
            computes.append(
                sum(s["stop"] - s["start"] for t in ours for s in t["startstops"] if s["action"] == "compute")
            )
            walls.append(seconds)
    wall, compute = float(np.median(walls)), float(np.median(computes))
    return {
        "workers": workers,
        "tasks": tasks,
        "seconds": wall,
        "runs_s": walls,
        "compute_s": compute,
        "overhead_per_task_s": max(wall * workers - compute, 0.0) / max(tasks, 1),
        "not_computing_share": max(1.0 - compute / (wall * workers), 0.0),
    }


def measure(source: Path, folder: Path, runs: int) -> dict:
    import cubeslab

    local = folder / "cluster-local.zarr"
    walls = [run(source, local)[0] for _ in range(runs)]
    rows = {"one process": {"seconds": float(np.median(walls)), "runs_s": walls}}
    expected = cubeslab.open(local).amplitude[...]
    for workers in (1, 2):
        store = folder / f"cluster-{workers}.zarr"
        rows[f"{workers} worker{'s' if workers > 1 else ''}"] = on_cluster(
            source, store, workers, runs, folder
        )
        np.testing.assert_array_equal(cubeslab.open(store).amplitude[...], expected)
    return {"layout": LAYOUT, "source_bytes": source.stat().st_size, "rows": rows}


def table(report: dict) -> list[str]:
    mb = report["source_bytes"] / 1e6
    lines = [
        "",
        f"## Ingest on a Dask cluster (local folder, layout {report['layout']}, source in the page cache)",
        "",
        "| run by | tasks | seconds (median) | MB/s | workers computing | overhead per task "
        "| not computing |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in report["rows"].items():
        if "tasks" not in row:
            lines.append(f"| {name} | | {row['seconds']:.2f} | {mb / row['seconds']:,.0f} | | | |")
            continue
        lines.append(
            f"| {name} | {row['tasks']} | {row['seconds']:.2f} | {mb / row['seconds']:,.0f} | "
            f"{row['compute_s']:.2f} s | {row['overhead_per_task_s'] * 1e3:.0f} ms | "
            f"{row['not_computing_share']:.0%} |"
        )
    return lines
