"""The OpenMSI study's cube as real imzML, ingested by cubeslab: the reads MSI users make, by cubeslab on
its store, by pyimzML on the file, and by h5py on the study's HDF5 layouts of the same cube.

Files: the study's generated cube written by pyimzML's writer (continuous mode, float32 intensities:
imzML has no 16-bit integer type, and float32 holds every uint16 count exactly), and the imzML format's
own example files (tests/data/imzml, continuous and processed). Each is ingested with
``ingest_imzml`` (timed with its ``.ibd`` evicted, its store synced, beside a sequential cold read of
the ``.ibd``) and checked against pyimzML: every spectrum (up to 256 spread through the file) of a
continuous file equal, a processed file's bins equal to numpy's binning of pyimzML's spectra.

Reads, on each continuous file: opening it; an ion image (the sum over m/z ± tol at every pixel);
one spectrum; a 5 x 5 pixels x 1000 m/z sub-cube. Cold: the tool's files evicted, opened afresh, read
and closed, timed together; warm: one handle held open on files in the page cache. Every tool's result
is checked against pyimzML's (a mismatch raises and fails the study). Bounds: cold, the bytes the
tool must fetch (4 KiB pages of metadata opened, whole chunks or spectra touched) ÷ the disk's
sequential bandwidth; warm, the cube values the read selects ÷ memory copy bandwidth.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np

import cubeslab
from cubeslab.create import MAIN_ARRAY
from cubeslab.msi import MsiCube

from .measure import (
    cold_runs,
    disk_bandwidth,
    evict,
    files_under,
    remove,
    repeat,
    size_on_disk,
    stats,
    warm_up,
)
from .msi import PAGE, Layout, clip, cold_bytes, key_bytes, warm_files
from .study import StudyRun, mib, ms, ms_value, ratio

EXAMPLES = Path(__file__).resolve().parents[2] / "tests" / "data" / "imzml"
"""The imzML format's example files, in the repository beside the bench package."""
EXAMPLE_OPTIONS: dict[str, dict] = {
    "Example_Continuous": {},
    # Bins start off the file's m/z grid (multiples of 1/12), so no value sits on a bin edge.
    "Example_Processed": {"mz_bin": "0.1", "mz_range": "100.01:800"},
}
MZ_RANGE = (100.0, 1100.0)
READS = ("open", "ion image", "spectrum", "sub-cube")
BOX = (5, 5, 1000)
"""The sub-cube: pixels x, pixels y, m/z values (the study's 5 x 5 x 1000)."""
CHECKED_SPECTRA = 256
RTOL = 1e-6


@dataclass
class ImzmlFile:
    name: str
    source: Path
    block: Callable[[int, int], np.ndarray]
    """x rows [x0, x1) of the cube as the file holds it, to write the HDF5 layouts from."""
    options: dict = field(default_factory=dict)

    @property
    def ibd(self) -> Path:
        return self.source.with_suffix(".ibd")


@dataclass
class Selection:
    """What each read selects: by value and pixel number for the MSI APIs, as positions for h5py."""

    shape: tuple[int, int, int]
    origin: tuple[int, int]  # file coordinates (x, y) of position (0, 0)
    mz: np.ndarray
    centre: float  # the ion image's m/z and its tolerance (Da)
    tol: float
    window: slice  # positions on the m/z axis within centre ± tol
    pixel: tuple[int, int]  # the spectrum's pixel, file coordinates
    box: tuple[slice, slice, slice]  # the sub-cube, positions

    def keys(self) -> dict[str, tuple[slice, slice, slice]]:
        i, j = self.pixel[0] - self.origin[0], self.pixel[1] - self.origin[1]
        return {
            "ion image": (slice(None), slice(None), self.window),
            "spectrum": (slice(i, i + 1), slice(j, j + 1), slice(None)),
            "sub-cube": self.box,
        }

    def pixels(self) -> list[tuple[int, int]]:
        """The sub-cube's pixels, file coordinates, x outer."""
        (ox, oy), (bx, by, _) = self.origin, self.box
        return [(ox + i, oy + j) for i in range(bx.start, bx.stop) for j in range(by.start, by.stop)]


@dataclass
class Tool:
    """One way to read the file's cube: open a handle, read with it, close it; the files a cold run
    evicts, and the bytes each read must fetch cold (bound)."""

    name: str
    files: list[Path]
    open: Callable[[], Any]
    close: Callable[[Any], None]
    reads: dict[str, Callable[[Any], np.ndarray]]
    fetched: dict[str, float]
    """Bytes a cold run of each read must fetch from the device, the opening included."""


# -- the files -------------------------------------------------------------------------------------


def write_imzml(path: Path, data: np.ndarray) -> None:
    """The cube as a continuous imzML, written as instruments lay spectra out: rows of y, x inner."""
    from pyimzml.ImzMLWriter import ImzMLWriter

    nx, ny, nz = data.shape
    mz = np.linspace(*MZ_RANGE, nz)
    with ImzMLWriter(str(path), mode="continuous", mz_dtype=np.float64, intensity_dtype=np.float32) as w:
        for y in range(ny):
            for x in range(nx):
                w.addSpectrum(mz, data[x, y].astype(np.float32), (x + 1, y + 1, 1))


def parser_cube(source: Path) -> np.ndarray:
    """A small continuous file's cube (x, y, m/z) as pyimzML reads it."""
    from pyimzml.ImzMLParser import ImzMLParser

    with ImzMLParser(str(source)) as p:
        xy = np.array(p.coordinates)[:, :2]
        low = xy.min(axis=0)
        first = p.getspectrum(0)[1]
        cube = np.zeros((*(xy.max(axis=0) - low + 1), len(first)), dtype=first.dtype)
        for i, (x, y) in enumerate(xy):
            cube[x - low[0], y - low[1]] = p.getspectrum(i)[1]
    return cube


def imzml_files(r: StudyRun, data: np.ndarray, scratch: Path) -> list[ImzmlFile]:
    generated = scratch / "generated.imzML"
    write_imzml(generated, data)
    name = "generated " + " x ".join(map(str, data.shape))
    files = [ImzmlFile(name, generated, lambda x0, x1: data[x0:x1].astype(np.float32))]
    if not EXAMPLES.is_dir():
        r.note(f"The imzML example files were not found ({EXAMPLES}): only the generated file is measured.")
        return files
    for example, options in EXAMPLE_OPTIONS.items():
        source = EXAMPLES / f"{example}.imzML"
        # The cube is read (once) only if asked for: for a continuous file's HDF5 layouts.
        files.append(ImzmlFile(example, source, rows_of(cache(partial(parser_cube, source))), options))
    return files


def rows_of(load: Callable[[], np.ndarray]) -> Callable[[int, int], np.ndarray]:
    def block(x0: int, x1: int) -> np.ndarray:
        return load()[x0:x1]

    return block


def open_msi(store: Path) -> MsiCube:
    """``cubeslab.open`` on an ingested imzML store: an :class:`MsiCube`, or the ingest went wrong."""
    msi = cubeslab.open(store)
    if not isinstance(msi, MsiCube):
        raise AssertionError(f"{store}: cubeslab.open gave a {type(msi).__name__}, not an MsiCube")
    return msi


# -- ingest and its check --------------------------------------------------------------------------


def ingest(r: StudyRun, f: ImzmlFile, store: Path) -> dict:
    """``ingest_imzml`` timed ``r.runs`` times, the source evicted before each, the store synced."""
    from cubeslab.msi.ingest import ingest_imzml

    times, summary = [], {}
    for _ in range(r.runs):
        remove(store)
        evict([f.source, f.ibd])
        t0 = time.perf_counter()
        summary = ingest_imzml(f.source, store, **f.options)
        os.sync()
        times.append(time.perf_counter() - t0)
    ibd_bytes = f.ibd.stat().st_size
    timing = stats(times)
    sequential = disk_bandwidth(f.ibd, limit=ibd_bytes, repeats=r.runs)
    return {
        "mode": summary["mode"],
        "options": f.options,
        "shape": summary["shape"],
        "dtype": summary["dtype"],
        "layout": summary["plan"]["layout"],
        "spectra": summary["spectra"],
        "ibd_bytes": ibd_bytes,
        "imzml_bytes": f.source.stat().st_size,
        "store_bytes": size_on_disk(store),
        "ingest": timing,
        "ingest_MBps": ibd_bytes / timing["median_s"] / 1e6,
        "ibd_sequential_MBps": sequential / 1e6,
        "bound_s": (ibd_bytes + size_on_disk(store)) / r.bandwidth["disk_read_Bps"],
    }


def check_store(f: ImzmlFile, store: Path, mode: str) -> str:
    """The store against pyimzML reading the same file; raises on any difference."""
    from pyimzml.ImzMLParser import ImzMLParser

    msi = open_msi(store)
    with ImzMLParser(str(f.source)) as p, msi:
        n = len(p.coordinates)
        if mode == "continuous":
            np.testing.assert_array_equal(msi.mz, np.asarray(p.getspectrum(0)[0], dtype=np.float64))
            picks = np.unique(np.linspace(0, n - 1, min(n, CHECKED_SPECTRA)).astype(int))
            for i in picks:
                x, y, _ = p.coordinates[i]
                np.testing.assert_array_equal(
                    msi.spectrum(x, y)[1], p.getspectrum(int(i))[1], err_msg=f"{f.name}: spectrum {i}"
                )
            return f"{len(picks)} of {n} spectra = pyimzML's"
        # Processed: numpy's binning of pyimzML's peaks onto the store's bins (edges from the options).
        low, width = float(f.options["mz_range"].split(":")[0]), float(f.options["mz_bin"])
        edges = low + width * np.arange(msi.shape[2] + 1)
        for i, (x, y, _) in enumerate(p.coordinates):
            mz, intensity = p.getspectrum(i)
            expected = np.histogram(mz, bins=edges, weights=intensity.astype(np.float64))[0]
            np.testing.assert_allclose(
                msi.spectrum(x, y)[1], expected, rtol=RTOL, atol=1e-3, err_msg=f"{f.name}: spectrum {i}"
            )
        return f"{n} of {n} spectra = numpy's binning of pyimzML's ({width:g} Da bins)"


# -- the reads -------------------------------------------------------------------------------------


def select(store: Path, source: Path) -> Selection:
    """The ion image at the mean spectrum's strongest m/z (tol 2.5 bins: edges fall between bins), the
    spectrum of the middle pixel, the sub-cube in the middle of the cube."""
    from pyimzml.ImzMLParser import ImzMLParser

    with ImzMLParser(str(source)) as p:
        xy = np.array(p.coordinates)[:, :2]
        mz = np.asarray(p.getspectrum(0)[0], dtype=np.float64)
    ox, oy = (int(v) for v in xy.min(axis=0))
    nx, ny = (int(v) for v in xy.max(axis=0) - xy.min(axis=0) + 1)
    nz = len(mz)
    msi = open_msi(store)
    with msi:
        mean = msi.mean_spectrum()[1]
    k = 3 + int(np.argmax(mean[3 : nz - 3]))
    centre, tol = float(mz[k]), 2.5 * float(mz[k + 1] - mz[k])
    window = slice(
        int(np.searchsorted(mz, centre - tol, "left")), int(np.searchsorted(mz, centre + tol, "right"))
    )
    bx, by, bz = (min(b, n) for b, n in zip(BOX, (nx, ny, nz), strict=True))
    box = tuple(
        slice((n - b) // 2, (n - b) // 2 + b) for b, n in zip((bx, by, bz), (nx, ny, nz), strict=True)
    )
    return Selection(
        (nx, ny, nz),
        (ox, oy),
        mz,
        centre,
        tol,
        window,
        (ox + nx // 2, oy + ny // 2),
        (box[0], box[1], box[2]),
    )


def page_bytes(starts, stops) -> int:
    """Bytes of the 4 KiB pages byte ranges [start, stop) fall in, each page counted once."""
    first, last = np.asarray(starts) // PAGE, (np.asarray(stops) - 1) // PAGE
    return PAGE * len(
        np.unique(np.concatenate([np.arange(a, b + 1) for a, b in zip(first, last, strict=True)]))
    )


def file_pages(paths: list[Path]) -> int:
    return sum(PAGE * -(-p.stat().st_size // PAGE) for p in paths)


def pyimzml_tool(f: ImzmlFile, s: Selection) -> Tool:
    from pyimzml.ImzMLParser import ImzMLParser, getionimage

    def open_():
        p = ImzMLParser(str(f.source))
        return p, {(x, y): i for i, (x, y, _) in enumerate(p.coordinates)}

    (ox, oy), (nx, ny, _) = s.origin, s.shape
    sub = s.box[2]
    reads = {
        # getionimage's image is (y, x), from pixel 1.
        "ion image": lambda h: getionimage(h[0], s.centre, tol=s.tol).T[
            ox - 1 : ox - 1 + nx, oy - 1 : oy - 1 + ny
        ],
        "spectrum": lambda h: h[0].getspectrum(h[1][s.pixel])[1],
        "sub-cube": lambda h: np.stack([h[0].getspectrum(h[1][xy])[1][sub] for xy in s.pixels()]).reshape(
            s.box[0].stop - s.box[0].start, s.box[1].stop - s.box[1].start, sub.stop - sub.start
        ),
    }
    with ImzMLParser(str(f.source)) as p:
        size = p.sizeDict
        # Each spectrum's m/z array, then its intensities: byte ranges [start, end) in the .ibd.
        start = np.array([p.mzOffsets, p.intensityOffsets], dtype=np.int64)
        length = np.array([p.mzLengths, p.intensityLengths], dtype=np.int64)
        end = start + length * np.array([[size[p.mzPrecision]], [size[p.intensityPrecision]]])
        index = {(x, y): i for i, (x, y, _) in enumerate(p.coordinates)}

    def spectra(chosen) -> int:  # getspectrum reads a spectrum's m/z and intensity arrays whole
        chosen = np.asarray(chosen)
        return page_bytes(start[:, chosen].ravel(), end[:, chosen].ravel())

    opening = float(file_pages([f.source]))
    fetched = {
        "open": opening,
        "ion image": opening + spectra(np.arange(start.shape[1])),
        "spectrum": opening + spectra([index[s.pixel]]),
        "sub-cube": opening + spectra([index[xy] for xy in s.pixels()]),
    }
    return Tool("pyimzML", [f.source, f.ibd], open_, lambda h: h[0].m.close(), reads, fetched)


def cubeslab_tool(store: Path, s: Selection, itemsize: int) -> Tool:
    (ox, oy), (bx, by, bz) = s.origin, s.box
    reads = {
        "ion image": lambda msi: msi.ion_image(s.centre, tol=s.tol),
        "spectrum": lambda msi: msi.spectrum(*s.pixel)[1],
        # Labels, not positions: pixel numbers inclusive, m/z by value (both ends kept).
        "sub-cube": lambda msi: msi.subcube[
            ox + bx.start : ox + bx.stop - 1,
            oy + by.start : oy + by.stop - 1,
            s.mz[bz.start] : s.mz[bz.stop - 1],
        ],
    }
    with open_msi(store) as cube:
        chunks = cube.amplitude.chunks
    main = store / MAIN_ARRAY
    opening = file_pages(
        [
            store / "zarr.json",
            main / "zarr.json",
            *(p for d in ("x", "y", "mz") for p in files_under(store / d)),
        ]
    )
    chunked = Layout("cubeslab", "cubeslab", main, chunks)
    raw = itemsize * math.prod(s.shape)
    fetched = {"open": float(opening)}
    for read, key in s.keys().items():
        fetched[read] = opening + cold_bytes(chunked, key, s.shape, raw, raw, 0, itemsize)
    fetched["spectrum"] += file_pages(files_under(store / "pixel_mask"))  # the pixel is checked first
    return Tool(
        "cubeslab", files_under(store), partial(open_msi, store), lambda msi: msi.close(), reads, fetched
    )


def write_h5(layout: Layout, f: ImzmlFile, shape, dtype: np.dtype) -> int:
    """The cube into an HDF5 layout by h5py, in slabs of whole chunk rows (at most 256 MiB: the cube
    of the large size is not copied whole); returns the data's offset in a contiguous file, else 0."""
    import h5py

    options: dict[str, Any] = {"chunks": layout.chunks} if layout.chunks else {}
    if layout.gzip_level is not None:
        options.update(compression="gzip", compression_opts=layout.gzip_level)
    step = (layout.chunks or (1,))[0]
    rows = max(step, (256 << 20) // (dtype.itemsize * shape[1] * shape[2]) // step * step)
    with h5py.File(layout.path, "w") as out:
        d = out.create_dataset("data", shape=shape, dtype=dtype, **options)
        for x0 in range(0, shape[0], rows):
            d[x0 : x0 + rows] = f.block(x0, min(x0 + rows, shape[0]))
        return int(d.id.get_offset() or 0) if layout.chunks is None else 0


def h5py_tools(f: ImzmlFile, s: Selection, scratch: Path, study_chunks, dtype: np.dtype) -> Iterator[Tool]:
    """The study's HDF5 layouts of this cube, each written just before it is measured and removed
    once the next is asked for (one layout on disk at a time)."""
    import h5py

    chunks = clip(study_chunks, s.shape)
    text = "x".join(map(str, study_chunks))
    keys = s.keys()
    reads = {
        "ion image": lambda h: h[1][keys["ion image"]].sum(axis=2, dtype=np.float64),
        "spectrum": lambda h: h[1][keys["spectrum"]][0, 0],
        "sub-cube": lambda h: h[1][keys["sub-cube"]],
    }
    for layout in (
        Layout("HDF5 contiguous", "h5py", scratch / "imzml-contiguous.h5"),
        Layout(f"HDF5 {text}", "h5py", scratch / "imzml-chunked.h5", chunks),
        Layout(f"HDF5 {text} gzip-4", "h5py", scratch / "imzml-gzip4.h5", chunks, None, "gzip:4"),
    ):
        offset = write_h5(layout, f, s.shape, dtype)
        file_bytes, raw = size_on_disk(layout.path), dtype.itemsize * math.prod(s.shape)
        fetched = {"open": float(PAGE)}  # the superblock and the dataset's header: a page at least
        for read, key in keys.items():
            fetched[read] = PAGE + cold_bytes(layout, key, s.shape, file_bytes, raw, offset, dtype.itemsize)

        def open_(path=layout.path):
            handle = h5py.File(path, "r")
            return handle, handle["data"]

        yield Tool(layout.name, [layout.path], open_, lambda h: h[0].close(), reads, fetched)
        remove(layout.path)


def cold(tool: Tool, read: Callable[[Any], object] | None, runs: int) -> dict:
    """Each run: the tool's files evicted, opened afresh, read (if any), closed; timed together."""

    def open_reader():
        def once():
            handle = tool.open()
            try:
                if read is not None:
                    read(handle)
            finally:
                tool.close(handle)

        return once

    return cold_runs(open_reader, tool.files, runs)


def warm(tool: Tool, read: Callable[[Any], object] | None, runs: int) -> dict:
    """Files in the page cache; a read on one open handle (an opening: open and close again)."""
    warm_files(tool.files)
    if read is None:
        action: Callable[[], object] = lambda: tool.close(tool.open())  # noqa: E731
        warm_up(action, reads=3, seconds=0.02)
        return repeat(action, runs)
    handle = tool.open()
    try:
        action = partial(read, handle)
        warm_up(action, reads=3, seconds=0.02)
        return repeat(action, runs)
    finally:
        tool.close(handle)


def measure_tool(
    r: StudyRun, tool: Tool, s: Selection, reference: dict | None, itemsize: int
) -> tuple[dict, dict]:
    """The tool's reads checked against pyimzML's (``reference``; None: this is pyimzML), then timed."""
    handle = tool.open()
    try:
        got = {read: np.asarray(fn(handle)) for read, fn in tool.reads.items()}
    finally:
        tool.close(handle)
    if reference is not None:
        for read, values in got.items():
            np.testing.assert_allclose(values, reference[read], rtol=RTOL, err_msg=f"{tool.name}'s {read}")
    keys, disk, mem = s.keys(), r.bandwidth["disk_read_Bps"], r.bandwidth["memory_copy_Bps"]
    found = {}
    for read in READS:
        fn = tool.reads.get(read)
        selected = key_bytes(keys[read], s.shape, itemsize) if read in keys else tool.fetched["open"]
        found[read] = {
            "cold": cold(tool, fn, r.runs),
            "warm": warm(tool, fn, r.runs),
            "cold_bytes": tool.fetched[read],
            "warm_bytes": selected,
            "bound_cold_s": tool.fetched[read] / disk,
            "bound_warm_s": selected / mem,
            "result": "—" if read == "open" else "reference" if reference is None else "= pyimzML",
        }
    return found, got


def measure_reads(
    r: StudyRun, f: ImzmlFile, store: Path, scratch: Path, study_chunks, with_hdf5: bool
) -> dict:
    s = select(store, f.source)
    dtype = f.block(0, 1).dtype
    size = dtype.itemsize
    found, reference = measure_tool(r, pyimzml_tool(f, s), s, None, size)
    tools = {
        "pyimzML": found,
        "cubeslab": measure_tool(r, cubeslab_tool(store, s, size), s, reference, size)[0],
    }
    if with_hdf5:
        for tool in h5py_tools(f, s, scratch, study_chunks, dtype):
            tools[tool.name] = measure_tool(r, tool, s, reference, size)[0]
    box = [[k.start, k.stop] for k in s.box]
    return {
        "selection": {"mz": s.centre, "tol_Da": s.tol, "window": [s.window.start, s.window.stop],
                      "pixel": list(s.pixel), "box": box},
        "tools": tools,
    }  # fmt: skip


# -- the study's part ------------------------------------------------------------------------------


def run(r: StudyRun, data: np.ndarray, scratch: Path, study_chunks, with_hdf5: bool) -> None:
    """The imzML part of the OpenMSI study: files, ingest, reads, tables (skipped without pyimzML,
    which writes the generated file and is the reference every read is checked against)."""
    if not r.peer("pyimzml"):
        return
    found = {}
    for f in imzml_files(r, data, scratch):
        store = scratch / "imzml.zarr"
        entry = ingest(r, f, store)
        entry["check"] = check_store(f, store, entry["mode"])
        if entry["mode"] == "continuous":
            entry.update(measure_reads(r, f, store, scratch, study_chunks, with_hdf5))
        found[f.name] = entry
        remove(store)
    remove(scratch / "generated.imzML")
    remove(scratch / "generated.ibd")
    r.results["imzml"] = {"intensity_dtype": "float32", "mz_range": list(MZ_RANGE), "files": found}
    tables(r, found)


INGEST_NOTE = (
    "the .imzML and .ibd evicted from the page cache before each, the store synced to disk. Beside it, "
    "the .ibd read sequentially cold (16 MiB requests). Bound: the .ibd read and the store written once at "
    "the disk's sequential rate. The generated file is the study's cube written by pyimzML's ImzMLWriter "
    "(continuous, float32 intensities: imzML has no 16-bit integer type); the examples are the imzML "
    "format's own (tests/data/imzml), the processed one binned at 0.1 Da from m/z 100.01."
)
READS_NOTE = (
    "Cold: the tool's files evicted (posix_fadvise DONTNEED), opened afresh, read and closed, timed "
    "together; bound: the bytes it must fetch (4 KiB pages of the metadata it opens; whole chunks, pages "
    "of a contiguous file, or the whole spectra pyimzML's getspectrum reads) ÷ sequential disk bandwidth. "
    "Warm: one handle held open on files in the page cache (cubeslab keeps decoded chunks, HDF5 its 1 MiB "
    "chunk cache), after warm-up reads; bound: the cube values the read selects ÷ memory copy bandwidth "
    "(open: the metadata's pages). Ion image: the sum over m/z ± 2.5 bins at every pixel (cubeslab "
    "ion_image, pyimzML getionimage, h5py [:, :, window].sum); spectrum: the middle pixel (cubeslab "
    "spectrum, pyimzML getspectrum, h5py [x, y, :]); sub-cube: 5 x 5 pixels x 1000 m/z (cubeslab subcube "
    "by labels, pyimzML getspectrum per pixel, h5py a hyperslab). ÷ cubeslab: the tool's median ÷ "
    "cubeslab's (above 1: cubeslab is faster). Every result equals pyimzML's (relative tolerance 1e-6; "
    "a difference fails the study)."
)


def tables(r: StudyRun, found: dict) -> None:
    rows = []
    for name, e in found.items():
        nx, ny, nz = e["shape"]
        rows.append(
            [name, e["mode"], f"{nx} x {ny}", nz, mib(e["ibd_bytes"]), ms(e["ingest"]),
             f"{e['ingest_MBps']:.0f}", f"{e['ibd_sequential_MBps']:.0f}", ms_value(e["bound_s"]),
             mib(e["store_bytes"]), e["layout"], e["check"]]
        )  # fmt: skip
    r.table(
        "imzML ingest: real imzML files into cubeslab (ingest_imzml), checked against pyimzML",
        ["file", "mode", "pixels", "m/z values", ".ibd MiB", "ingest ms", "MB/s of .ibd",
         ".ibd cold sequential MB/s", "bound ms", "store MiB", "chunks / shards", "check"],
        rows,
        note=f"Median (min–max) of {r.runs} ingests, {INGEST_NOTE}",
    )  # fmt: skip
    rows = []
    for name, e in found.items():
        tools = e.get("tools", {})  # none for a processed file: its binned cube is not pyimzML's
        for read in READS:
            for tool, reads in tools.items():
                t, base = reads[read], tools["cubeslab"][read]
                rows.append(
                    [name, read, tool, ms(t["cold"]), ms_value(t["bound_cold_s"]), ms(t["warm"]),
                     ms_value(t["bound_warm_s"]), ratio(t["cold"]["median_s"] / base["cold"]["median_s"]),
                     ratio(t["warm"]["median_s"] / base["warm"]["median_s"]), t["result"]]
                )  # fmt: skip
    r.table(
        "imzML reads: ion image, spectrum and sub-cube by cubeslab, pyimzML and h5py on the same file",
        ["file", "read", "tool", "cold ms", "cold bound ms", "warm ms", "warm bound ms", "cold ÷ cubeslab",
         "warm ÷ cubeslab", "result"],
        rows,
        note=f"Median (min–max) of {r.runs} runs, ms. {READS_NOTE}",
    )  # fmt: skip
