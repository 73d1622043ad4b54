"""Study ``queue-depth`` ([Pyrus-IO], Figure 1): what requests in flight buy on this machine's disk.

1. The device: read IOPS and MB/s against requests in flight (1 .. 64) for request sizes 4 KiB .. 16 MiB,
   cold, measured the way cubeslab's reader reads (a memory map, ``madvise(WILLNEED)`` requests kept
   ahead by each worker; every cell after ``posix_fadvise(DONTNEED)``, no block read twice): the same
   measurement as ``cubeslab profile``, repeated so each cell is a median with min and max.
2. cubeslab's own plane reads, cold, against its thread count and requests in flight
   (``cubeslab.open(..., threads=, in_flight=)``).
"""

from __future__ import annotations

import json
import os
import shutil
from functools import partial

import numpy as np

import cubeslab
from cubeslab import _engine

from . import seismic
from .measure import bounds, cold_runs, files_under, stats, warm_runs
from .study import StudyRun, ms, ms_value

TITLE = "Queue depth: throughput against requests in flight, and cubeslab's parallel reads"
REFERENCES = "the Pyrus parallel IO study, its Figure 1 and its 16-thread reader"

SIZES = {
    "tiny": {"file_bytes": 8 << 20, "cell_seconds": 0.002, "shape": (48, 40, 64),
             "threads": (1, 2), "in_flight": (1, 16), "scratch": 32 << 20},
    "small": {"file_bytes": 256 << 20, "cell_seconds": 0.03, "shape": (256, 256, 512),
              "threads": (1, 2, 4, 8), "in_flight": (1, 4, 16, 64), "scratch": 256 << 20},
    "medium": {"file_bytes": 1 << 30, "cell_seconds": 0.1, "shape": (600, 800, 1000),
               "threads": (1, 2, 4, 8, 16), "in_flight": (1, 4, 16, 64), "scratch": 512 << 20},
    "large": {"file_bytes": 4 << 30, "cell_seconds": 0.15, "shape": (1024, 1024, 1024),
              "threads": (1, 2, 4, 8, 16), "in_flight": (1, 4, 16, 64), "scratch": 1 << 30},
}  # fmt: skip

PUBLISHED = "Pyrus parallel IO study: SATA III SSD, 1966 x 1103 x 3001 HDF5 file"
SHOWN_SIZES = (4096, 65536, 1 << 20, 16 << 20)


def run(r: StudyRun, p: dict) -> None:
    r.bandwidth = bounds(r.data, p["scratch"])
    device(r, p)
    plane_reads(r, p)


# -- 1. the device ------------------------------------------------------------------------------------------


def measure_cells(directory, p: dict) -> dict:
    """One pass over the (request size x in flight) grid: sizes, depths and bytes/s per cell."""
    sample = np.zeros((4, 4, 16), np.float32)  # the profile's codec part is not used here
    text = _engine.measure_profile(
        os.fspath(directory),
        sample.reshape(-1).view(np.uint8),
        list(sample.shape),
        "float32",
        codecs=[],
        file_bytes=p["file_bytes"],
        cell_seconds=p["cell_seconds"],
    )
    return json.loads(text)["io"]


def device(r: StudyRun, p: dict) -> None:
    scratch = r.data / "queue-depth-scratch"
    scratch.mkdir(exist_ok=True)
    try:
        passes = [measure_cells(scratch, p) for _ in range(r.runs)]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    sizes, depths = passes[0]["sizes"], passes[0]["depths"]
    # One timing-like summary per cell: seconds per byte, so median/min/max read as throughput.
    cells = {
        (size, depth): stats([1 / pas["cold_measured"][i][j] for pas in passes])
        for i, size in enumerate(sizes)
        for j, depth in enumerate(depths)
    }
    r.results["device"] = {
        "sizes": sizes,
        "depths": depths,
        "bytes_per_second": [[[pas["cold_measured"][i][j] for pas in passes] for j in range(len(depths))]
                             for i in range(len(sizes))],
        "file_bytes": p["file_bytes"],
        "cell_seconds": p["cell_seconds"],
    }  # fmt: skip
    disk = r.bandwidth["disk_read_Bps"]
    rows = []
    for size in sizes:
        row = [_size(size)]
        for depth in depths:
            c = cells[(size, depth)]
            mbps = 1 / c["median_s"] / 1e6
            spread = f"{1 / c['max_s'] / 1e6:.0f}–{1 / c['min_s'] / 1e6:.0f}"
            row.append(f"{mbps:.0f} MB/s, {mbps * 1e6 / size:,.0f} IOPS ({spread})")
        rows.append(row)
    r.table(
        "Cold read throughput and IOPS against requests in flight",
        ["request size", *(f"{d} in flight" for d in depths)],
        rows,
        note=f"Median of {r.runs} passes over a {p['file_bytes'] >> 20} MiB scratch file, each cell "
        f"{p['cell_seconds'] * 1e3:.0f} ms of reads; MB/s range (min–max) in brackets. Bound: the sequential "
        f"read bandwidth, {disk / 1e6:.0f} MB/s (16 MiB reads, one at a time).",
    )  # fmt: skip
    r.table(
        "Reading with one request at a time against many in flight, as published",
        ["reader", "queue depth", "MB/s"],
        [["HDF5 Java Native Interface, one thread", "about 1", "about 32"],
         ["jHDF, one chunk per thread, 16 threads", "more than 12", "nearly 330"]],
        published=PUBLISHED,
    )  # fmt: skip
    plot_device(r, sizes, depths, cells, disk)


def plot_device(r: StudyRun, sizes, depths, cells, disk: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for size in sizes:
        if size not in SHOWN_SIZES and len(sizes) > 4:
            continue
        mbps = np.array([1 / cells[(size, d)]["median_s"] / 1e6 for d in depths])
        lo = np.array([1 / cells[(size, d)]["max_s"] / 1e6 for d in depths])
        hi = np.array([1 / cells[(size, d)]["min_s"] / 1e6 for d in depths])
        line = left.plot(depths, mbps * 1e6 / size, marker="o", label=_size(size))[0]
        left.fill_between(depths, lo * 1e6 / size, hi * 1e6 / size, color=line.get_color(), alpha=0.15)
        right.plot(depths, mbps, marker="o", color=line.get_color(), label=_size(size))
        right.fill_between(depths, lo, hi, color=line.get_color(), alpha=0.15)
    right.axhline(disk / 1e6, color="grey", linestyle=":", label="sequential bound")
    for ax, label in ((left, "read IOPS"), (right, "MB/s")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(depths, [str(d) for d in depths])
        ax.set_xlabel("requests in flight (queue depth)")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    fig.suptitle("Cold reads against queue depth on this machine (Pyrus parallel IO study, Figure 1)")
    r.plot(fig, "device", "IOPS (left) and MB/s (right) against requests in flight, per request size; "
           "shaded: min–max of the passes; dotted: sequential read bandwidth.")  # fmt: skip


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


# -- 2. cubeslab's plane reads against threads and requests in flight ----------------------------------------


def plane_reads(r: StudyRun, p: dict) -> None:
    shape = tuple(p["shape"])
    sgy = seismic.survey(r.data, shape)
    store = r.data / "queue-depth.zarr"
    cubeslab.ingest(sgy, store, overwrite=True)
    files = files_under(store)
    planes = seismic.planes(shape)
    found: dict = {}
    try:
        for threads in p["threads"]:
            for in_flight in p["in_flight"]:
                for plane, key in planes.items():

                    def fresh(key=key, threads=threads, in_flight=in_flight):
                        cube = cubeslab.open(store, threads=threads, in_flight=in_flight)
                        return lambda: cube.amplitude.read(key)

                    found[(threads, in_flight, plane)] = cold_runs(fresh, files, r.runs)
            cube = cubeslab.open(store, threads=threads)
            for plane, key in planes.items():
                found[(threads, "warm", plane)] = warm_runs(partial(cube.amplitude.read, key), r.runs)
    finally:
        shutil.rmtree(store, ignore_errors=True)
    r.results["planes"] = [
        {"threads": t, "in_flight": f, "plane": n, **timing} for (t, f, n), timing in found.items()
    ]
    bytes_ = {n: seismic.key_bytes(shape, k) for n, k in planes.items()}
    disk, memory = r.bandwidth["disk_read_Bps"], r.bandwidth["memory_copy_Bps"]
    rows = []
    for threads in p["threads"]:
        for in_flight in (*p["in_flight"], "warm"):
            row = [threads, in_flight]
            for n in planes:
                t = found[(threads, in_flight, n)]
                row += [ms(t), f"{bytes_[n] / t['median_s'] / 1e6:.0f}"]
            rows.append(row)
    bound_row = ["bound", "cold / warm"]
    for n in planes:
        bound_row += [f"{ms_value(bytes_[n] / disk)} / {ms_value(bytes_[n] / memory)}", ""]
    rows.append(bound_row)
    r.table(
        f"cubeslab plane reads against threads and requests in flight ({'x'.join(map(str, shape))}), ms",
        ["threads", "in flight", *(c for n in planes for c in (f"{n} ms", f"{n} MB/s"))],
        rows,
        note="Cold unless 'warm'. MB/s: the plane's bytes over the time. The store has the planner's default "
        f"layout; this machine has {r.machine['cores']} cores.",
    )  # fmt: skip
    plot_planes(r, p, found, planes, bytes_, disk)


def plot_planes(r: StudyRun, p: dict, found: dict, planes: dict, bytes_: dict, disk: float) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(planes), figsize=(14, 4), sharey=True)
    for ax, plane in zip(axes, planes, strict=True):
        for threads in p["threads"]:
            ys = [found[(threads, f, plane)]["median_s"] * 1e3 for f in p["in_flight"]]
            ax.plot(p["in_flight"], ys, marker="o", label=f"{threads} threads")
        ax.axhline(bytes_[plane] / disk * 1e3, color="grey", linestyle=":", label="bound (sequential)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(p["in_flight"], [str(f) for f in p["in_flight"]])
        ax.set_xlabel("requests in flight per read")
        ax.set_title(f"{plane}, cold")
    axes[0].set_ylabel("ms")
    axes[0].legend(fontsize=8)
    fig.suptitle("cubeslab cold plane reads against threads and requests in flight")
    r.plot(fig, "planes", "cubeslab's cold plane read time against requests in flight, one line per thread "
           "count; dotted: the plane's bytes at the sequential read bandwidth.")  # fmt: skip
