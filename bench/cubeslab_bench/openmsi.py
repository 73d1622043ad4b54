"""[OpenMSI-IO] (OpenMSI, HDF5 I/O for mass-spectrometry imaging) re-run on this machine: an MSI-like
uint16 cube (x, y, m/z), long in m/z, stored in cubeslab layouts beside the study's HDF5 layouts.

Measured, for each layout: file size and padding, the study's three selections (25 consecutive
m/z slices, 5 x 5 full spectra, a 5 x 5 x 1000 sub-cube) on first access (files evicted, opened
afresh) and sustained (open handle, page cache warm), the study's pass/fail score; the write
strategies of the 4 x 4 x 2048 layout; gzip levels 1..8 against cubeslab's codecs; the variance
of 20 % of the m/z slices computed with 1..N Dask worker processes; and real imzML (the cube written by
pyimzML, the format's example files) ingested by cubeslab, its ion image, spectrum and sub-cube read by
cubeslab, by pyimzML and by h5py on the study's HDF5 layouts (:mod:`.openmsi_imzml`).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

import cubeslab
from cubeslab.array import ReadSettings

from . import openmsi_imzml
from .measure import (
    bounds,
    remove,
    size_on_disk,
    stats,
    timed,
)
from .msi import (
    CASES,
    CRITERIA_S,
    SEED,
    TOOL_LABELS,
    Layout,
    clip,
    clip_shards,
    cold_bytes,
    first_access,
    key_bytes,
    load_cube,
    selection_keys,
    sustained,
    write_layout,
)
from .openmsi_plots import plot_compression, plot_selections, plot_variance
from .study import StudyRun, mib, ms, ms_value

TITLE = "OpenMSI: layouts, selections, writes and compression of an MSI cube (HDF5 vs cubeslab)"
REFERENCES = "the OpenMSI study (HDF5 I/O for mass-spectrometry imaging cubes, LBNL)"

SIZES = {
    # shape: the cube; peaks: m/z positions with signal; one_spectrum_rows: x rows written one spectrum
    # at a time (that strategy is slow; the study's other strategies write the whole cube);
    # compress_write_mz: m/z bins (whole images, from the middle of the cube) each codec's write speed
    # is timed on (the ratio and the reads use the whole cube); compress_reads: sustained selections
    # per case and codec;
    # disk_probe_mib: size of the scratch file the disk bandwidth is measured on.
    "tiny": {
        "shape": (8, 8, 4096),
        "peaks": 64,
        "one_spectrum_rows": 8,
        "compress_write_mz": 4096,
        "compress_reads": 5,
        "disk_probe_mib": 64,
    },
    "small": {
        "shape": (32, 32, 16384),
        "peaks": 256,
        "one_spectrum_rows": 8,
        "compress_write_mz": 2048,
        "compress_reads": 5,
        "disk_probe_mib": 128,
    },
    "medium": {
        "shape": (100, 100, 100000),
        "peaks": 300,
        "one_spectrum_rows": 4,
        "compress_write_mz": 8192,
        "compress_reads": 10,
        "disk_probe_mib": 512,
    },
    "large": {
        "shape": (200, 200, 100000),
        "peaks": 400,
        "one_spectrum_rows": 2,
        "compress_write_mz": 4096,
        "compress_reads": 10,
        "disk_probe_mib": 512,
    },
}

ACCESS = "spectra:5,ion-images:25,box:5x5x1000"
STUDY_CHUNKS = (4, 4, 2048)
SPECTRA_AT_A_TIME = 4  # the study's m x m strategy, aligned with the 4 x 4 chunk footprint

PUBLISHED_SIZE_MB, PUBLISHED_RAW_MB = 2100, 2000
SIZE_LIMIT_FACTOR = PUBLISHED_SIZE_MB / PUBLISHED_RAW_MB

HDF5_GZIP_LEVELS = tuple(range(1, 9))
CUBESLAB_CODECS = (*(f"gzip:{n}" for n in HDF5_GZIP_LEVELS), "zstd:3", "blosc-lz4:5", "blosc-zstd:5")


# -- the study's parts -----------------------------------------------------------------------------


def plan_layouts(r: StudyRun, shape, scratch: Path, with_hdf5: bool) -> list[Layout]:
    from cubeslab.plan import plan

    auto = plan(shape, "uint16", access=ACCESS, near=r.data, top=1)[0]
    chunks = clip(STUDY_CHUNKS, shape)
    study = plan(shape, "uint16", layout="x".join(map(str, chunks)), access=ACCESS, near=r.data, top=1)[0]
    r.results["plan"] = {"auto": auto, "study_chunks": study}
    study_shards = tuple(study["layout"]["shard"])
    layouts = [
        Layout("cubeslab auto", "cubeslab", scratch / "auto.zarr", tuple(auto["layout"]["inner"]),
               tuple(auto["layout"]["shard"])),
        Layout("cubeslab 4x4x2048", "cubeslab", scratch / "c4.zarr", chunks, study_shards),
        Layout("cubeslab 4x4x2048 gzip:4", "cubeslab", scratch / "c4-gzip4.zarr", chunks, study_shards,
               "gzip:4"),
    ]  # fmt: skip
    if with_hdf5:
        layouts += [
            Layout("HDF5 contiguous", "h5py", scratch / "contiguous.h5"),
            Layout("HDF5 4x4x2048 gzip-4", "h5py", scratch / "c4-gzip4.h5", chunks, None, "gzip:4"),
            Layout("HDF5 4x4x2048", "h5py", scratch / "c4.h5", chunks),
        ]
    return layouts


def hdf5_data_offset(layout: Layout) -> int:
    if layout.tool != "h5py" or layout.chunks is not None:
        return 0
    import h5py

    with h5py.File(layout.path, "r") as f:
        return int(f["data"].id.get_offset() or 0)


def measure_layouts(r: StudyRun, layouts: list[Layout], data: np.ndarray) -> dict:
    shape, raw = data.shape, data.nbytes
    keys = {c: selection_keys(c, shape, r.runs * 4 + 1, seed=1) for c in CASES}
    first_keys = {c: selection_keys(c, shape, r.runs, seed=2) for c in CASES}
    mem, disk = r.bandwidth["memory_copy_Bps"], r.bandwidth["disk_read_Bps"]
    found = {}
    for layout in layouts:
        write_layout(layout, data)
        file_bytes = size_on_disk(layout.path)
        offset = hdf5_data_offset(layout)
        entry: dict[str, Any] = {
            "tool": layout.tool,
            "layout": layout.describe(),
            "compress": layout.compress or "none",
            "file_bytes": file_bytes,
            "raw_bytes": raw,
            "overhead": file_bytes / raw - 1,
            "cases": {},
        }
        for case in CASES:
            touched = [cold_bytes(layout, k, shape, file_bytes, raw, offset) for k in first_keys[case]]
            entry["cases"][case] = {
                "first": first_access(layout, first_keys[case]),
                "sustained": sustained(layout, keys[case]),
                "selection_bytes": key_bytes(keys[case][0], shape),
                "cold_device_bytes": float(np.median(touched)),
                "bound_warm_s": key_bytes(keys[case][0], shape) / mem,
                "bound_cold_s": float(np.median(touched)) / disk,
            }
        found[layout.name] = entry
    r.results["layouts"] = found
    return found


def size_table(r: StudyRun, found: dict) -> None:
    rows = [
        [name, e["layout"], e["compress"], mib(e["file_bytes"]), mib(e["raw_bytes"]),
         f"{100 * e['overhead']:+.2f}", f"{e['raw_bytes'] / e['file_bytes']:.2f}"]
        for name, e in found.items()
    ]  # fmt: skip
    r.table(
        "File size and padding overhead per layout",
        ["layout", "chunks / shards", "compression", "file MiB", "raw MiB", "overhead %", "ratio raw ÷ file"],
        rows,
        note="Overhead = bytes on disk ÷ raw bytes − 1 (padding of edge chunks, indexes, metadata; "
        "negative when compressed). Sizes are apparent file sizes (os.stat), as the study measured them.",
    )


WARM_NOTE = (
    "Bound: the selection's bytes ÷ memory copy bandwidth (one copy into the result). Compressed layouts: "
    "cubeslab keeps decoded chunks of an open array (LRU, 256 MiB), HDF5 1 MiB of them, so once a cube "
    "smaller than 256 MiB has been read, cubeslab's selections no longer decode."
)


def selection_tables(r: StudyRun, found: dict) -> None:
    for state, title, bound, note in (
        ("sustained", "Selections, sustained: random selections on an open handle (page cache warm)",
         "bound_warm_s", WARM_NOTE),
        ("first", "Selections, first access: files evicted, opened afresh, one selection (max = worst case)",
         "bound_cold_s", "Bound: bytes the device must deliver (whole chunks touched at their stored size; "
         "the 4 KiB pages of a contiguous file) ÷ sequential disk bandwidth."),
    ):  # fmt: skip
        columns = ["layout"]
        for case in CASES:
            columns += [f"{case} ms", f"{case} bound ms"]
        rows = []
        for name, e in found.items():
            row = [name]
            for case in CASES:
                row += [ms(e["cases"][case][state]), ms_value(e["cases"][case][bound])]
            rows.append(row)
        runs = next(iter(found.values()))["cases"]["spectra"][state]["runs"]
        r.table(title, columns, rows, note=f"Median (min–max) of {runs} random selections, ms. {note}")


def score_layouts(r: StudyRun, found: dict) -> dict:
    """The study's score: how many of its four criteria a layout meets, on the sustained medians and
    the file size (limit scaled from 2100 MB for the 2000 MB cube)."""
    scores = {}
    for name, e in found.items():
        medians = {c: e["cases"][c]["sustained"]["median_s"] for c in CASES}
        limit = e["raw_bytes"] * SIZE_LIMIT_FACTOR
        passed = {c: medians[c] < CRITERIA_S[c] for c in CASES}
        passed["size"] = e["file_bytes"] < limit
        scores[name] = {
            "medians_s": medians,
            "file_bytes": e["file_bytes"],
            "size_limit_bytes": limit,
            "passed": passed,
            "score": int(sum(passed.values())),
        }
    r.results["criteria"] = {"seconds": CRITERIA_S, "size_limit_factor": SIZE_LIMIT_FACTOR}
    r.results["score"] = scores
    return scores


def score_tables(r: StudyRun, scores: dict) -> None:
    def mark(ok: bool) -> str:
        return "pass" if ok else "fail"

    rows = []
    for name, s in scores.items():
        row = [name]
        for c in CASES:
            row += [ms_value(s["medians_s"][c]), mark(s["passed"][c])]
        row += [
            f"{s['file_bytes'] / 1e6:.1f}",
            f"{s['size_limit_bytes'] / 1e6:.1f}",
            mark(s["passed"]["size"]),
        ]
        rows.append([*row, s["score"]])
    r.table(
        "Score: the study's four criteria applied to the sustained medians measured here",
        ["layout", "z-slices ms", "< 100 ms", "spectra ms", "< 50 ms", "subcube ms", "< 2 ms",
         "file MB", "limit MB", "size", "score (0..4)"],
        rows,
        note="Limits as published, except the file size limit, scaled from 2100 MB for the 2000 MB cube "
        "(5 % overhead) to this cube. On a cube smaller than the published one the time limits are easier "
        "to meet (smaller z-slices and spectra); medium is the published shape.",
    )  # fmt: skip
    r.table(
        "The study's criteria (as published)",
        ["criterion", "published limit"],
        [
            ["median z-slice selection (100 x 100 x 25)", "< 0.1 s"],
            ["median spectra selection (5 x 5 x 100000)", "< 0.05 s"],
            ["median 3-D sub-cube selection (5 x 5 x 1000)", "< 0.002 s"],
            ["total file size (2000 MB of data)", "< 2100 MB"],
            ["score", "criteria met, 4 = best; 8 chunkings of 4 (hopper /scratch)"],
        ],
        published="OpenMSI HDF5 I/O study (LBNL), section Summary",
    )


# -- write strategies ------------------------------------------------------------------------------


def _h5_write(path: Path, data: np.ndarray, chunks, strategy: str) -> None:
    import h5py

    nx, ny, nz = data.shape
    with h5py.File(path, "w") as f:
        d = f.create_dataset("data", shape=data.shape, dtype=data.dtype, chunks=chunks)
        if strategy == "one spectrum at a time":
            for x in range(nx):
                for y in range(ny):
                    d[x, y, :] = data[x, y]
        elif strategy == "m x m spectra at a time":
            m = SPECTRA_AT_A_TIME
            for x in range(0, nx, m):
                for y in range(0, ny, m):
                    d[x : x + m, y : y + m, :] = data[x : x + m, y : y + m]
        elif strategy == "chunk at a time":
            cx, cy, cz = chunks
            for x in range(0, nx, cx):
                for y in range(0, ny, cy):
                    for z in range(0, nz, cz):
                        d[x : x + cx, y : y + cy, z : z + cz] = data[x : x + cx, y : y + cy, z : z + cz]
        else:
            d[...] = data


def timed_writes(write, path: Path, runs: int) -> dict:
    """``write()`` into a fresh ``path`` ``runs`` times (the previous file removed untimed)."""
    times = []
    for _ in range(runs):
        remove(path)
        times.append(timed(write))
    remove(path)
    return stats(times)


def measure_writes(r: StudyRun, p: dict, data: np.ndarray, study: Layout, with_hdf5: bool, scratch: Path):
    chunks, mem = study.chunks, r.bandwidth["memory_copy_Bps"]
    part = data[: p["one_spectrum_rows"]]
    rows, found = [], {}

    def add(tool, strategy, layout, block, timing, note=""):
        found[f"{tool}: {strategy}"] = {"bytes": block.nbytes, **timing}
        rate = block.nbytes / timing["median_s"] / 1e6
        rows.append([tool, strategy, layout, mib(block.nbytes), ms(timing), f"{rate:.0f}",
                     ms_value(block.nbytes / mem), note])  # fmt: skip

    if with_hdf5:
        target = scratch / "write.h5"
        for strategy, block in (
            ("one spectrum at a time", part),
            ("m x m spectra at a time", data),
            ("chunk at a time", data),
        ):
            timing = timed_writes(lambda s=strategy, b=block: _h5_write(target, b, chunks, s), target, r.runs)
            note = (
                f"first {len(part)} of {len(data)} x rows" if block is part and len(part) < len(data) else ""
            )
            add("HDF5", strategy, study.describe(), block, timing, note)
        timing = timed_writes(lambda: _h5_write(target, data, None, "whole"), target, r.runs)
        add("HDF5", "whole array, one call", "contiguous", data, timing)
    target = scratch / "write.zarr"
    timing = timed_writes(
        lambda: cubeslab.Array.from_numpy(target, data, chunks=chunks, shards=study.shards), target, r.runs
    )
    add("cubeslab", "chunk at a time (Array.from_numpy, shards in parallel)", study.describe(), data, timing)
    for strategy in ("one spectrum at a time", "m x m spectra at a time"):
        rows.append(["cubeslab", strategy, study.describe(), "—", "not supported yet", "—", "—",
                     "window (partial) writes are on the roadmap"])  # fmt: skip
    r.results["writes"] = found
    r.table(
        "Write strategies, 4 x 4 x 2048 chunks (uncompressed) and HDF5 contiguous",
        ["tool", "strategy", "layout", "MiB written", "time ms", "MB/s (median)", "bound ms", "note"],
        rows,
        note=f"Median (min–max) of {r.runs} writes of a new file (create, write, close; no fsync: the data "
        f"lands in the page cache, as both tools leave it). m = {SPECTRA_AT_A_TIME}. Bound: bytes ÷ memory "
        "copy bandwidth (one copy into the page cache). HDF5's default chunk cache (1 MiB).",
    )


# -- compression -----------------------------------------------------------------------------------


def codec_layouts(study: Layout, scratch: Path, with_hdf5: bool) -> list[Layout]:
    chunks, shards = study.chunks, study.shards
    layouts = [Layout("cubeslab", "cubeslab", scratch / "codec.zarr", chunks, shards, c) for c in
               ("none", *CUBESLAB_CODECS)]  # fmt: skip
    if with_hdf5:
        layouts = [Layout("HDF5", "h5py", scratch / "codec.h5", chunks, None, c) for c in
                   ("none", *(f"gzip:{n}" for n in HDF5_GZIP_LEVELS))] + layouts  # fmt: skip
    return layouts


def codec_label(layout: Layout) -> str:
    if layout.tool == "h5py" and layout.gzip_level is not None:
        return f"gzip-{layout.gzip_level}"
    return layout.compress or "none"


def write_block(data: np.ndarray, mz: int) -> np.ndarray:
    """``mz`` whole m/z images from the middle of the cube, chunk-aligned: every x, y shard of the cube
    is there, so a writer that works shard by shard in parallel keeps its parallelism."""
    nz = data.shape[2]
    mz = min(mz, nz)
    z0 = (nz - mz) // 2 // STUDY_CHUNKS[2] * STUDY_CHUNKS[2]
    return np.ascontiguousarray(data[:, :, z0 : z0 + mz])


def measure_codec(r: StudyRun, p: dict, layout: Layout, data: np.ndarray) -> dict:
    """Ratio and sustained selections on the whole cube; write speed on a block of its m/z images."""
    write_layout(layout, data)
    file_bytes = size_on_disk(layout.path)
    reads = {c: sustained(layout, selection_keys(c, data.shape, max(p["compress_reads"], r.runs) + 1, 3))
             for c in CASES}  # fmt: skip
    remove(layout.path)
    block = write_block(data, p["compress_write_mz"])
    chunks = clip(layout.chunks, block.shape)
    shards = clip_shards(layout.shards, chunks, block.shape) if layout.shards else None
    sub = Layout(layout.name, layout.tool, layout.path, chunks, shards, layout.compress)
    write = timed_writes(lambda: write_layout(sub, block), layout.path, r.runs)
    return {
        "tool": layout.tool,
        "compress": codec_label(layout),
        "file_bytes": file_bytes,
        "ratio": data.nbytes / file_bytes,
        "write": write,
        "write_bytes": block.nbytes,
        "write_MBps": block.nbytes / write["median_s"] / 1e6,
        "reads": reads,
    }


def measure_compression(r: StudyRun, p: dict, data: np.ndarray, study: Layout, with_hdf5: bool, scratch):
    found = [measure_codec(r, p, layout, data) for layout in codec_layouts(study, scratch, with_hdf5)]
    r.results["compression"] = found
    mem = r.bandwidth["memory_copy_Bps"]
    bounds = {c: key_bytes(selection_keys(c, data.shape, 1, 3)[0], data.shape) / mem for c in CASES}
    rows = []
    for e in found:
        row = [TOOL_LABELS[e["tool"]], e["compress"], f"{e['ratio']:.2f}", mib(e["file_bytes"]),
               ms(e["write"]), f"{e['write_MBps']:.0f}", ms_value(e["write_bytes"] / mem)]  # fmt: skip
        for c in CASES:
            row += [ms(e["reads"][c]), ms_value(bounds[c])]
        rows.append(row)
    columns = ["tool", "compression", "ratio", "file MiB", "write ms", "write MB/s", "write bound ms"]
    for c in CASES:
        columns += [f"{c} ms", f"{c} bound ms"]
    block = write_block(data, p["compress_write_mz"])
    r.table(
        "Compression: gzip levels (HDF5, cubeslab) and cubeslab's codecs, 4 x 4 x 2048 chunks",
        columns,
        rows,
        note=f"Ratio = raw bytes ÷ file bytes, whole cube. Write: median (min–max) of {r.runs} writes of "
        f"{block.shape[2]} m/z images from the middle of the cube ({mib(block.nbytes)} MiB; HDF5 in one "
        "call, compressing chunk by chunk; cubeslab shards in parallel on every core). Selections: "
        f"sustained, median (min–max) of {max(p['compress_reads'], r.runs)} random selections, page cache "
        "warm. Bounds: bytes ÷ memory copy bandwidth (decoding not counted).",
    )
    return found


# -- variance with Dask workers --------------------------------------------------------------------


def variance_range(nz: int) -> tuple[int, int]:
    """A contiguous 20 % of the m/z slices at a seeded random start (the study's zstart)."""
    width = max(1, nz // 5)
    z0 = int(np.random.default_rng([SEED, 7]).integers(0, nz - width + 1))
    return z0, z0 + width


def dask_variance(path: Path, shape, z0: int, z1: int, x_block: int):
    """var over m/z of [:, :, z0:z1], one task per block of x rows (the study split along x)."""
    from cubeslab.adapters import to_dask

    nz = shape[2]
    z_chunks = tuple(n for n in (z0, z1 - z0, nz - z1) if n)
    array = cubeslab.Array(path, ReadSettings(threads=1))  # one reader thread per worker process
    return to_dask(array, chunks=(x_block, shape[1], z_chunks))[:, :, z0:z1].var(axis=2)


def measure_variance(r: StudyRun, data: np.ndarray, layouts: list[Layout]) -> dict:
    from dask.distributed import Client, LocalCluster

    z0, z1 = variance_range(data.shape[2])
    expected = data[:, :, z0:z1].var(axis=2)
    x_block = max((layouts[0].chunks or (1,))[0], 4 * math.ceil(data.shape[0] / 32))
    workers = list(range(1, (os.cpu_count() or 1) + 1))
    found = {"z0": z0, "z1": z1, "x_block": x_block, "workers": workers, "by_layout": {}, "max_abs_diff": 0.0}
    for k in workers:
        with (
            LocalCluster(n_workers=k, threads_per_worker=1, processes=True, dashboard_address=None,
                         silence_logs=logging.ERROR) as cluster,
            Client(cluster),
        ):  # fmt: skip
            for layout in layouts:
                lazy = dask_variance(layout.path, data.shape, z0, z1, x_block)
                result = lazy.compute()  # also brings the files into the page cache
                diff = float(np.max(np.abs(result - expected)))
                if not np.allclose(result, expected, rtol=1e-9, atol=1e-9):
                    raise AssertionError(f"{layout.name}: Dask variance with {k} workers differs by {diff}")
                found["max_abs_diff"] = max(found["max_abs_diff"], diff)
                times = [timed(lazy.compute) for _ in range(r.runs)]
                found["by_layout"].setdefault(layout.name, {})[str(k)] = stats(times)
    found["matches_numpy"] = True
    r.results["variance"] = found
    return found


def variance_table(r: StudyRun, found: dict, nbytes: int) -> None:
    mem = r.bandwidth["memory_copy_Bps"]
    rows = []
    for name, by_k in found["by_layout"].items():
        base = by_k["1"]["median_s"]
        for k in found["workers"]:
            t = by_k[str(k)]
            rows.append([name, k, ms(t), f"{base / t['median_s']:.2f}", ms_value(nbytes / (mem * k))])
    r.table(
        "Variance over 20 % of the m/z slices with k Dask worker processes",
        ["layout", "workers", "time ms", "speed-up vs 1", "bound ms"],
        rows,
        note=f"cubeslab.adapters.to_dask(...)[:, :, {found['z0']}:{found['z1']}].var(axis=2) on a "
        f"dask.distributed LocalCluster (k processes, 1 thread each; cubeslab reads with 1 thread per "
        f"worker), tasks of {found['x_block']} x rows. Median (min–max) of {r.runs} computes after one "
        "untimed compute (page cache warm) whose result is checked against numpy's var of the same data "
        f"(max |difference| {found['max_abs_diff']:.1e}). Bound: bytes selected ÷ (memory copy × k).",
    )


# -- plots -----------------------------------------------------------------------------------------


def notes(r: StudyRun, data: np.ndarray, p: dict) -> None:
    nx, ny, nz = data.shape
    r.note(
        f"Cube: {nx} x {ny} x {nz} uint16 (x, y, m/z), {data.nbytes / 1e6:.1f} MB; the study's is "
        "100 x 100 x 100000 (2000 MB, the medium size). Generated: a low Poisson background "
        f"(mean {data.mean():.2f} counts over the cube) plus {p['peaks']} peaks at fixed m/z positions "
        "whose abundance varies smoothly over x, y, counts Poisson-distributed; deterministic seed. "
        "The study filled its cube from a real MSI file."
    )
    r.note(
        "First access: the layout's files are evicted from the page cache (posix_fadvise DONTNEED), the "
        f"file is opened afresh and one random selection read; open and read are timed together, {r.runs} "
        "times; the max is the study's worst case. Sustained: one open handle on files in the page cache, "
        f"{r.runs * 4} random selections, each timed; the median is the study's figure. The same random "
        "positions for every layout. cubeslab reads with its default threads (one per core) and verifies "
        "checksums, and keeps decoded chunks of an open array (LRU, 256 MiB); h5py reads in one thread "
        "with HDF5's default chunk cache (1 MiB)."
    )


def run(r: StudyRun, p: dict) -> None:
    with_hdf5 = r.peer("h5py")
    with_dask = r.peer("dask")
    r.bandwidth = bounds(r.data, p["disk_probe_mib"] << 20)
    data = load_cube(r, p)
    r.results["shape"] = list(data.shape)
    r.results["raw_bytes"] = data.nbytes
    notes(r, data, p)
    scratch = r.data / f"openmsi-scratch-{r.size}"
    remove(scratch)
    scratch.mkdir(parents=True)
    try:
        layouts = plan_layouts(r, data.shape, scratch, with_hdf5)
        found = measure_layouts(r, layouts, data)
        size_table(r, found)
        selection_tables(r, found)
        score_tables(r, score_layouts(r, found))
        plot_selections(r, found)
        study = layouts[1]
        if with_dask:
            z0, z1 = variance_range(data.shape[2])
            variance = measure_variance(r, data, layouts[1:3])
            variance_table(r, variance, data[:, :, z0:z1].nbytes)
            plot_variance(r, variance)
        for layout in layouts:
            remove(layout.path)
        measure_writes(r, p, data, study, with_hdf5, scratch)
        plot_compression(r, measure_compression(r, p, data, study, with_hdf5, scratch))
        # Real imzML: the cube written by pyimzML and the format's examples, ingested and read by each tool.
        openmsi_imzml.run(r, data, scratch, STUDY_CHUNKS, with_hdf5)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
