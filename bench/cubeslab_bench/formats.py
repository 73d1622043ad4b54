"""Study ``formats`` ([Pourmal]): HDF5 against NetCDF, FITS and raw binary, with cubeslab beside them.

The five experiments of the NCSA benchmark, on 2-D arrays of unsigned 16-bit integers as published:

1. create and write one contiguous dataset (file created, dataset written, closed, fsynced);
2. read it back whole (open, read, close), cold and warm;
3. read contiguous hyperslabs (row blocks) of the largest dataset;
4. read every second element of those hyperslabs (``[r0:r1:2, ::2]``);
5. create N datasets of 1 MiB in one file, then read back the last one created.

Each tool is an adapter (:mod:`cubeslab_bench.file_formats`): ``write(path, arrays)`` creates the file or
folder holding every named array; ``read(path, name, key)`` opens it, reads ``key`` of one array, closes it.
"""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path

import numpy as np

from .file_formats import COLUMNS, DTYPE, ROW_BYTES, WHOLE, Cubeslab, Tool, all_tools
from .measure import bounds, cold_runs, files_under, remove, stats, timed, warm_runs
from .study import StudyRun, ms, ms_value, number

TITLE = "Formats: HDF5 against NetCDF, FITS and raw binary (uint16 2-D datasets)"
REFERENCES = "Pourmal's HDF5 vs NetCDF vs FITS benchmarks (NCSA)"
PUBLISHED = "Pourmal (NCSA), HDF5 vs NetCDF vs FITSIO benchmarks"

SIZES = {
    "tiny": {"write_mib": (1, 2), "slab_source_mib": 2, "slab_mib": (0.25, 1), "datasets": 10,
             "scratch": 64 << 20},
    "small": {"write_mib": (2, 8, 32, 64), "slab_source_mib": 64, "slab_mib": (1, 4, 16), "datasets": 100,
              "scratch": 256 << 20},
    "medium": {"write_mib": (2, 8, 32, 128, 512), "slab_source_mib": 256, "slab_mib": (1, 4, 16, 64),
               "datasets": 1000, "scratch": 512 << 20},
    "large": {"write_mib": (2, 8, 32, 128, 512), "slab_source_mib": 256, "slab_mib": (1, 4, 16, 64),
              "datasets": 1000, "scratch": 512 << 20},
}  # fmt: skip

MB = 1e6
"""Throughput is in MB/s (10^6 bytes); dataset sizes are in MiB (2^20 bytes)."""


def selected_tools(r: StudyRun) -> list[Tool]:
    return [t for t in all_tools() if t.peer is None or r.peer(t.peer)]


# -- keys, data, files ---------------------------------------------------------------------------------


def row_block(rows: int, n: int) -> tuple[slice, slice]:
    """``n`` rows in the middle of ``rows``."""
    r0 = (rows - n) // 2
    return (slice(r0, r0 + n), slice(None))


def strided(key) -> tuple[slice, slice]:
    return (slice(key[0].start, key[0].stop, 2), slice(None, None, 2))


def rows_of(mib: float) -> int:
    return int(mib * 2**20) // ROW_BYTES


def random_rows(rows: int, seed: int | None = None) -> np.ndarray:
    # Random values: a read that returns the wrong rows or columns cannot match by chance. Seeded by the
    # row count, so the hyperslab source kept from case 1 and the array checked against it agree.
    seed = rows if seed is None else seed
    return np.random.default_rng(seed).integers(0, 1 << 16, (rows, COLUMNS), dtype=DTYPE)


def fsync_tree(path: Path) -> None:
    """fsync every file under ``path`` and the folders holding them (so the new names are durable)."""
    files = files_under(path)
    for p in [*files, *{f.parent for f in files}]:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def disk_write_bandwidth(directory: Path, size: int, repeats: int = 3) -> float:
    """Sequential write bandwidth with fsync, bytes/s: best of ``repeats`` writes of ``size`` bytes in
    16 MiB requests to a scratch file (then removed)."""
    path = Path(directory) / ".formats-write-bandwidth.bin"
    block = np.random.default_rng(1).integers(0, 255, 16 << 20, dtype=np.uint8).tobytes()
    best = 0.0
    try:
        for _ in range(repeats):
            remove(path)
            os.sync()
            t0 = time.perf_counter()
            with open(path, "wb", buffering=0) as f:
                for _ in range(max(1, size // len(block))):
                    f.write(block)
                os.fsync(f.fileno())
            best = max(best, max(1, size // len(block)) * len(block) / (time.perf_counter() - t0))
    finally:
        remove(path)
    return best


# -- timing --------------------------------------------------------------------------------------------


def time_writes(tool: Tool, path: Path, arrays: dict[str, np.ndarray], runs: int) -> dict:
    """Create + write + close + fsync, each run into a fresh file (the previous one removed, untimed)."""

    def write() -> None:
        tool.write(path, arrays)
        fsync_tree(path)

    times = []
    for _ in range(runs):
        remove(path)
        os.sync()  # no earlier dirty page is flushed inside the timed write
        gc.collect()
        times.append(timed(write))
    return stats(times)


def check(tool: Tool, got: np.ndarray, expected: np.ndarray, what: str) -> None:
    if got.dtype != DTYPE or not np.array_equal(got, expected):
        raise RuntimeError(
            f"{tool.label}: {what} returned other data than was written ({got.dtype} {got.shape})"
        )


def time_reads(tool: Tool, path: Path, name: str, key, expected: np.ndarray, runs: int, what: str) -> dict:
    """{"cold", "warm"} timings of open + read ``key`` + close; the data checked once first."""
    check(tool, tool.read(path, name, key), expected, what)

    def read():
        return tool.read(path, name, key)

    return {
        "cold": cold_runs(lambda: read, files_under(path), runs),
        "warm": warm_runs(read, runs),
    }


# -- the study -----------------------------------------------------------------------------------------


def run(r: StudyRun, p: dict) -> None:
    tools = selected_tools(r)
    r.bandwidth = bounds(r.data, p["scratch"])
    r.bandwidth["disk_write_Bps"] = disk_write_bandwidth(r.data, p["scratch"])
    scratch = r.data / "formats"
    remove(scratch)
    scratch.mkdir(parents=True)
    r.results.update(
        load_average={"start": os.getloadavg()[0]},
        tools={t.label: t.peer or "cubeslab" for t in tools},
        columns=COLUMNS,
        cubeslab_layouts={},
    )
    # Each cold run starts with gc.collect(); with h5py, netCDF4 and astropy loaded a full collection takes
    # tens of ms, hundreds of times. Frozen, it scans only the objects the study makes.
    gc.freeze()
    try:
        whole_datasets(r, p, tools, scratch)
        subsets(r, p, tools, scratch)
        many_datasets(r, p, tools, scratch)
    finally:
        gc.unfreeze()
        remove(scratch)
    r.results["load_average"]["end"] = os.getloadavg()[0]
    layouts(r, tools)
    tables(r, p, tools)
    plots(r, p, tools)
    notes(r, p)


def slab_rows(p: dict) -> list[int]:
    return [rows_of(m) for m in p["slab_mib"]]


def whole_datasets(r: StudyRun, p: dict, tools: list[Tool], scratch: Path) -> None:
    """Cases 1 and 2, one size at a time (only one size's files on disk at once)."""
    # tool -> size -> timings; read: by cache state first
    write: dict[str, dict[str, dict]] = {}
    read: dict[str, dict[str, dict[str, dict]]] = {"cold": {}, "warm": {}}
    for mib in p["write_mib"]:
        data = random_rows(rows_of(mib))
        size = f"{mib:g}"
        for tool in tools:
            tool.prepare(data.shape, boxes_for(p, mib), r.data)
            path = scratch / f"{size}{tool.suffix}"
            timing = time_writes(tool, path, {"d0": data}, r.runs)
            write.setdefault(tool.label, {})[size] = {**timing, "MBps": data.nbytes / timing["median_s"] / MB}
            timings = time_reads(tool, path, "d0", WHOLE, data, r.runs, f"whole read of {size} MiB")
            for state in ("cold", "warm"):
                read[state].setdefault(tool.label, {})[size] = timings[state]
            if mib != p["slab_source_mib"]:
                remove(path)
    r.results["write"], r.results["read"] = write, read


def boxes_for(p: dict, mib: float) -> list[int]:
    return [rows_of(mib), *slab_rows(p)] if mib == p["slab_source_mib"] else [rows_of(mib)]


def subsets(r: StudyRun, p: dict, tools: list[Tool], scratch: Path) -> None:
    """Cases 3 and 4 on the slab source (kept from case 1 if it was one of its sizes)."""
    mib = p["slab_source_mib"]
    data = random_rows(rows_of(mib))
    found: dict[str, dict[str, dict]] = {
        "hyperslab": {"cold": {}, "warm": {}},
        "strided": {"cold": {}, "warm": {}},
    }
    for tool in tools:
        path = scratch / f"{mib:g}{tool.suffix}"
        if not path.exists():
            tool.prepare(data.shape, boxes_for(p, mib), r.data)
            tool.write(path, {"d0": data})
            fsync_tree(path)  # dirty pages would survive the cold runs' eviction
        for slab_mib, n in zip(p["slab_mib"], slab_rows(p), strict=True):
            contiguous = row_block(data.shape[0], n)
            for case, key in (("hyperslab", contiguous), ("strided", strided(contiguous))):
                what = f"{case} {slab_mib:g} MiB of {mib:g} MiB"
                timings = time_reads(tool, path, "d0", key, data[key], r.runs, what)
                for state in ("cold", "warm"):
                    found[case][state].setdefault(tool.label, {})[f"{slab_mib:g}"] = timings[state]
        remove(path)
    r.results.update(found)
    r.results["slab_source_mib"] = mib


def many_datasets(r: StudyRun, p: dict, tools: list[Tool], scratch: Path) -> None:
    """Case 5: N datasets of 1 MiB in one file (a folder for cubeslab and raw), the last one read back."""
    n = p["datasets"]
    rows = rows_of(1)
    # Dataset i is the pool shifted by i rows: every dataset differs, and none is a copy in memory.
    pool = random_rows(rows + n, seed=1000)
    arrays = {f"d{i}": pool[i : i + rows] for i in range(n)}
    last = f"d{n - 1}"
    found, not_run = {}, {}
    for tool in tools:
        if tool.many_limit is not None and n > tool.many_limit:
            not_run[tool.label] = (
                f"not run: more than {tool.many_limit} datasets (creating N variables in the classic "
                f"format moves about N²/2 MiB through netCDF4-python's define mode, "
                f"{n * n / 2 / 1024:,.0f} GiB here)"
            )
            continue
        tool.prepare((rows, COLUMNS), [rows], r.data)
        path = scratch / f"many{tool.suffix}"
        create = time_writes(tool, path, arrays, r.runs)
        timings = time_reads(tool, path, last, WHOLE, arrays[last], r.runs, f"dataset {n} of {n}")
        found[tool.label] = {"create": create, **timings}
        remove(path)
    r.results["many"] = {"datasets": n, "dataset_mib": 1, "tools": found, "not_run": not_run}


# -- tables ----------------------------------------------------------------------------------------------


def bound_s(nbytes: float, bandwidth: float) -> float:
    return nbytes / bandwidth


def read_bound(r: StudyRun, state: str, disk_bytes: float, memory_bytes: float) -> float:
    """Cold: the pages holding the data from disk; warm: the output copied once in memory."""
    if state == "cold":
        return bound_s(disk_bytes, r.bandwidth["disk_read_Bps"])
    return bound_s(memory_bytes, r.bandwidth["memory_copy_Bps"])


def write_cell(timing: dict) -> str:
    return f"{ms(timing)} · {number(3)(timing['MBps'])} MB/s"


def tables(r: StudyRun, p: dict, tools: list[Tool]) -> None:
    labels = [t.label for t in tools]
    write_table(r, p, labels)
    read_table(r, p, labels)
    subset_tables(r, p, labels)
    many_table(r, p, labels)
    published_table(r, labels)


def write_table(r: StudyRun, p: dict, labels: list[str]) -> None:
    rows = []
    for mib in p["write_mib"]:
        size = f"{mib:g}"
        bound = bound_s(mib * 2**20, r.bandwidth["disk_read_Bps"])
        rows.append([size, *(write_cell(r.results["write"][t][size]) for t in labels), ms_value(bound)])
    r.table(
        "1. Create and write a contiguous dataset (create, write, close, fsync)",
        ["dataset MiB", *(f"{t} ms · MB/s" for t in labels), "bound ms (disk)"],
        rows,
        note="Median (min–max) ms of the runs, and MB/s at the median. Bound: the dataset's bytes at the "
        "measured sequential disk read bandwidth (the device's capability; the fsynced sequential write "
        f"measured {r.bandwidth['disk_write_Bps'] / MB:,.0f} MB/s in this run).",
    )


def state_rows(r: StudyRun, results: dict, labels: list[str], sizes, size_bytes) -> list[list]:
    """A row per (size, cold/warm): the tools' timings and the bound; ``size_bytes(size)`` gives
    (bytes from disk cold, bytes copied warm)."""
    rows = []
    for size in sizes:
        for state in ("cold", "warm"):
            cells = [ms(results[state][t].get(f"{size:g}")) for t in labels]
            rows.append([f"{size:g}", state, *cells, ms_value(read_bound(r, state, *size_bytes(size)))])
    return rows


def read_table(r: StudyRun, p: dict, labels: list[str]) -> None:
    rows = state_rows(r, r.results["read"], labels, p["write_mib"], lambda m: (m * 2**20, m * 2**20))
    r.table(
        "2. Read the whole dataset (open, read, close)",
        ["dataset MiB", "cache", *(f"{t} ms" for t in labels), "bound ms"],
        rows,
        note="Bound: cold, the dataset's bytes at the measured disk read bandwidth; warm, one memory copy.",
    )


def subset_tables(r: StudyRun, p: dict, labels: list[str]) -> None:
    source = f"{p['slab_source_mib']:g} MiB"
    rows = state_rows(r, r.results["hyperslab"], labels, p["slab_mib"], lambda m: (m * 2**20, m * 2**20))
    r.table(
        f"3. Read a contiguous hyperslab (a row block) of the {source} dataset",
        ["hyperslab MiB", "cache", *(f"{t} ms" for t in labels), "bound ms"],
        rows,
        note="Rows in the middle of the dataset, all columns; open, read, close timed.",
    )
    # Every other row is read whole from disk (a row is one 4 KiB page); a quarter of it is returned.
    rows = state_rows(r, r.results["strided"], labels, p["slab_mib"], lambda m: (m * 2**19, m * 2**18))
    for row, slab in zip(rows, [m for m in p["slab_mib"] for _ in (0, 1)], strict=True):
        row.insert(0, f"{slab / 4:g}")
    r.table(
        f"4. Read every second element of a hyperslab ([r0:r1:2, ::2]) of the {source} dataset",
        ["selection MiB", "hyperslab MiB", "cache", *(f"{t} ms" for t in labels), "bound ms"],
        rows,
        note="Bound: cold, the rows holding selected elements (every other row, whole 4 KiB pages) at the "
        "disk read bandwidth; warm, the selection copied once.",
    )


def many_table(r: StudyRun, p: dict, labels: list[str]) -> None:
    many = r.results["many"]
    n, found = many["datasets"], many["tools"]
    one = 2**20
    phases = (
        (f"create {n} and write", "create", bound_s(n * one, r.bandwidth["disk_read_Bps"])),
        (f"read dataset {n}, cold", "cold", read_bound(r, "cold", one, one)),
        (f"read dataset {n}, warm", "warm", read_bound(r, "warm", one, one)),
    )

    def cell(tool: str, key: str) -> str:
        return ms(found[tool][key]) if tool in found else "not run (see note)"

    rows = [[title, *(cell(t, key) for t in labels), ms_value(bound)] for title, key, bound in phases]
    skipped = " ".join(f"{t}: {why}." for t, why in many["not_run"].items())
    r.table(
        f"5. {n} datasets of 1 MiB in one file: create them, then read the last one",
        ["", *(f"{t} ms" for t in labels), "bound ms"],
        rows,
        note="One file holds every dataset (HDF5 datasets, netCDF variables, FITS HDUs); cubeslab writes "
        "one array per dataset in a folder, raw one file per dataset. Create: file(s) created, every "
        "dataset written, closed, fsynced. Read: open, read dataset N, close. Bound: create, N MiB at the "
        f"disk read bandwidth; read, 1 MiB from disk (cold) or copied in memory (warm). {skipped}".strip(),
    )


# -- the published conclusions beside this run --------------------------------------------------------------


OTHERS = ("netCDF-4", "netCDF-CDF5", "FITS")
BASE = "HDF5"


def ratio_span(groups: list[dict], tool: str) -> tuple[float, float] | None:
    """min and max over every size of ``tool``'s median time ÷ HDF5's, in ``groups`` (tool → size →
    timing)."""
    ratios = [
        timings[size]["median_s"] / group[BASE][size]["median_s"]
        for group in groups
        if tool in group and BASE in group
        for timings in [group[tool]]
        for size in timings
    ]
    return (min(ratios), max(ratios)) if ratios else None


def span_label(lo: float, hi: float) -> str:
    low, high = number(2)(lo), number(2)(hi)
    return f"{low}x" if low == high else f"{low}–{high}x"


def span_text(parts: dict[str, list[dict]], tools) -> str:
    """'write: netCDF-4 1.1–1.4x, ...; read: ...': per part, each tool's range of time ÷ HDF5's."""
    texts = []
    for part, groups in parts.items():
        spans = [(tool, ratio_span(groups, tool)) for tool in tools]
        found = [f"{tool} {span_label(*span)}" for tool, span in spans if span]
        if found:
            texts.append(f"{part}: {', '.join(found)}")
    return "; ".join(texts) or "—"


def comparisons(r: StudyRun) -> dict[str, dict[str, list[dict]]]:
    """Per published conclusion, its parts, each a list of groups (tool → size → timing)."""
    res = r.results
    many = {
        state: [{t: {"last": v[state]} for t, v in res["many"]["tools"].items()}]
        for state in ("cold", "warm")
    }
    return {
        "native": {"write": [res["write"]], "read": [res["read"]["cold"], res["read"]["warm"]]},
        "subsets": {
            "hyperslab": [res["hyperslab"]["cold"], res["hyperslab"]["warm"]],
            "every second element": [res["strided"]["cold"], res["strided"]["warm"]],
        },
        "many": {f"read the last, {state}": groups for state, groups in many.items()},
    }


def published_table(r: StudyRun, labels: list[str]) -> None:
    compared = comparisons(r)
    others = [t for t in OTHERS if t in labels]

    def this_run(key: str) -> str:
        return "HDF5 (h5py) not run" if BASE not in labels else span_text(compared[key], others)

    def cubeslab(key: str) -> str:
        if BASE not in labels:
            return "HDF5 (h5py) not run"
        in_place = [t for t in labels if t.startswith("cubeslab:")]
        return span_text(compared[key], ["cubeslab", *in_place])

    def hdf4(key: str) -> str:
        return "not run" if BASE not in labels or "HDF4" not in labels else span_text(compared[key], ["HDF4"])

    rows = [
        ["HDF5 is 2-6 times faster when performs native write/read", this_run("native"), cubeslab("native")],
        ["HDF5 needs some tuning when datatype conversion is used",
         "not measured: no tool converts types here, except FITS, which stores uint16 as int16 + BZERO 32768 "
         "(no unsigned type in FITS) on every write and read", "—"],
        ["When subsetting is used, HDF5 performs about the same as FITSIO and NetCDF, and 2-6 times faster "
         "than HDF4", this_run("subsets") + "; HDF4: " + hdf4("subsets"), cubeslab("subsets")],
        ["HDF5 is an order of magnitude faster in accessing datasets within the file with many objects",
         this_run("many"), cubeslab("many")],
    ]  # fmt: skip
    r.table(
        "Published conclusions (Pourmal, summary) and the same comparisons in this run",
        ["published", "this run: NetCDF and FITS time ÷ HDF5's", "this run: cubeslab time ÷ HDF5's"],
        rows,
        note="This run: the range over every size (and cold and warm, where both were timed) of each tool's "
        "median time divided by HDF5's; above 1, HDF5 was faster. Native write/read: cases 1 and 2; "
        "subsetting: cases 3 and 4; many objects: case 5.",
        published=PUBLISHED,
    )


# -- plots and notes ---------------------------------------------------------------------------------------


def draw(ax, results: dict, labels: list[str], sizes, value) -> None:
    """A line per tool of ``value(size, seconds)`` at the median, bars from the min and max runs."""
    for label in labels:
        timings = [results[label][f"{s:g}"] for s in sizes]
        mid = [value(s, t["median_s"]) for s, t in zip(sizes, timings, strict=True)]
        ends = [
            sorted((value(s, t["min_s"]), value(s, t["max_s"]))) for s, t in zip(sizes, timings, strict=True)
        ]
        yerr = [[m - lo for m, (lo, _) in zip(mid, ends, strict=True)],
                [hi - m for m, (_, hi) in zip(mid, ends, strict=True)]]  # fmt: skip
        ax.errorbar(sizes, mid, yerr=yerr, marker="o", ms=4, capsize=3, label=label)


def finish(ax, sizes, xlabel: str, ylabel: str, title: str) -> None:
    ax.set(xscale="log", xlabel=xlabel, ylabel=ylabel, title=title)
    ax.set_xticks(sizes, [f"{s:g}" for s in sizes])
    ax.minorticks_off()
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")


def plots(r: StudyRun, p: dict, tools: list[Tool]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [t.label for t in tools]
    sizes = list(p["write_mib"])
    axis = f"dataset MiB (uint16, {COLUMNS} columns)"

    fig, ax = plt.subplots(figsize=(7, 4.2))
    draw(ax, r.results["write"], labels, sizes, lambda mib, seconds: mib * 2**20 / seconds / MB)
    ax.axhline(r.bandwidth["disk_read_Bps"] / MB, color="k", ls="--", lw=1, label="bound (disk read)")
    ax.axhline(
        r.bandwidth["disk_write_Bps"] / MB, color="grey", ls=":", lw=1, label="disk write + fsync, 16 MiB"
    )
    finish(ax, sizes, axis, "MB/s (median, min–max)", "1. Create + write + close + fsync one dataset")
    caption = (
        "Case 1: create, write, close and fsync one contiguous dataset, MB/s against dataset size per "
        "tool (median of the runs, bars min–max); dashed: the bound, the disk's sequential read bandwidth; "
        "dotted: sequential writes of 16 MiB with fsync, measured in this run."
    )
    r.plot(fig, "write", caption)

    fig, ax = plt.subplots(figsize=(7, 4.2))
    draw(ax, r.results["read"]["cold"], labels, sizes, lambda mib, seconds: seconds * 1e3)
    bound = [mib * 2**20 / r.bandwidth["disk_read_Bps"] * 1e3 for mib in sizes]
    ax.plot(sizes, bound, "k--", lw=1, label="bound (disk read)")
    ax.set_yscale("log")
    finish(ax, sizes, axis, "ms (median, min–max)", "2. Read the whole dataset, cold")
    caption = (
        "Case 2: open, read and close the whole dataset, page cache evicted before each run: time against "
        "size per tool (log-log; median, bars min–max); dashed: the dataset's bytes at the measured disk "
        "read bandwidth."
    )
    r.plot(fig, "read-cold", caption)


def layouts(r: StudyRun, tools: list[Tool]) -> None:
    for tool in tools:
        if isinstance(tool, Cubeslab):
            r.results["cubeslab_layouts"] = {
                f"{rows}x{cols}": layout for (rows, cols), layout in tool.layouts.items()
            }


def notes(r: StudyRun, p: dict) -> None:
    picks = "; ".join(
        f"{shape}: chunks {'x'.join(map(str, lay['inner']))} in shards {'x'.join(map(str, lay['shard']))}"
        for shape, lay in r.results["cubeslab_layouts"].items()
    )
    r.note(
        f"Datasets are 2-D arrays of unsigned 16-bit integers, as published, {COLUMNS} columns wide (a row "
        "is 4 KiB); sizes in MiB, throughput in MB/s (10^6 bytes/s). Values are random, and every read is "
        "checked against the array written (np.array_equal) before it is timed."
    )
    r.note(
        "Case 1 times creating the file, the dataset, writing it, closing, and fsync of every file written "
        "(and the folders holding them), each run into a fresh file; the published 'write time only' is "
        "not measured separately. Cases 2–5 time open, read, close: cold after posix_fadvise(DONTNEED) "
        "of every file of the tool's data, warm after one untimed read. Case 5 writes N datasets "
        "(create time, same rules as case 1) and reads back the last one created."
    )
    r.note(
        f"The original took the best of 10 runs per figure; here each figure is the median of {r.runs} "
        "runs, with min–max, on this machine, from Python."
    )
    r.note(
        "cubeslab: the layout is cubeslab.plan's pick for each shape with the accesses this study makes "
        "(box: the whole array and each hyperslab, each weighted by the array's rows over its own, so "
        "the small reads count as much per byte as the whole one), uncompressed, read with checksums "
        f"verified: {picks}. "
        "HDF5: h5py, contiguous datasets (no chunks). netCDF: the netCDF4 package with its defaults (fill "
        "on); netCDF-4 is the HDF5-based format with contiguous variables, netCDF-CDF5 the classic format "
        "that netCDF 3.5 (the version measured) wrote, in its 64-bit-data variant, the one with unsigned "
        "16-bit integers; every variable is defined before any is written. FITS: astropy.io.fits, "
        "dataset i in HDU i (primary array, then image extensions), the list written once; FITS has "
        "no unsigned 16-bit type, so astropy stores int16 with BZERO = 32768 and converts on every write "
        "and read; hyperslabs through HDU.section, steps taken in numpy. raw: numpy tofile, np.fromfile "
        "at the hyperslab's offset (steps in numpy), one file per dataset in case 5. HDF4: pyhdf's SD "
        "interface, one scientific dataset per array. 'cubeslab:HDF5' and 'cubeslab:netCDF-4' read "
        "the files h5py and netCDF4 wrote, in place (cubeslab.open(file, dataset= / variable=)): h5py finds "
        "the dataset and its layout at each open, the engine reads its bytes. FITS and raw files are read "
        "by cubeslab after ingest only (the cubeslab column)."
    )
    load = r.results["load_average"]
    r.note(
        f"Bounds: bytes that must move at the disk read bandwidth ({r.bandwidth['disk_read_Bps'] / MB:,.0f} "
        "MB/s, cold 16 MiB reads) for cold reads and fsynced writes, at the one-thread memory copy bandwidth "
        f"({r.bandwidth['memory_copy_Bps'] / MB:,.0f} MB/s) for warm reads; fsynced sequential writes of "
        f"16 MiB ran at {r.bandwidth['disk_write_Bps'] / MB:,.0f} MB/s; all measured in this run on "
        f"{p['scratch'] >> 20} MiB. Load average (1 min) {load['start']:.1f} at the start, {load['end']:.1f} "
        f"at the end, on {os.cpu_count()} cores: other work on the machine widens the min–max ranges."
    )
