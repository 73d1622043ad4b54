"""Mass-spectrometry imaging from imzML: a generated continuous-mode file (written by pyimzML's writer,
float32 intensities, sparse peaks on noise) ingested by cubeslab, then the reads MSI users make — an ion
image, a spectrum, a sub-cube — by cubeslab on the store and by pyimzML on the file (getionimage,
getspectrum), cold and warm.

The same cube is also ingested with ``--views spectra,ion-images`` (orientation copies), and its ion
image and spectrum timed. Cold: the file's ``.ibd`` (pyimzML) or the store's files (cubeslab) evicted
from the page cache (posix_fadvise DONTNEED) before each run, the reader opened afresh (pyimzML's XML
parse is not timed; cubeslab's opening of the store is); and, for the ion image, "cold, opened before":
the store opened before the eviction, its open not timed, as pyimzML's parse is not. Warm: read
before. Medians of ``--runs`` runs.
Bounds: cold, the bytes the read must fetch (the touched chunks for cubeslab, the spectra for pyimzML) at
the disk's sequential rate, and the device's own time for cubeslab's chunk reads (direct I/O, many in
flight; hundreds of small chunks cost requests more than bytes); warm, the result at one core's copy
rate. Each cold ingest is set beside a sequential cold read of the whole ``.ibd`` made just before it,
and beside the rate of the SHA-1 it checks.

Usage: python bench/msi.py [--size small|full] [--runs 3] [--out bench/results]
Writes OUT/msi.json and OUT/msi.md; the imzML file is generated once into bench/data/msi/.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import gc
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from cubeslab_bench.measure import bounds, disk_bandwidth, evict, files_under, settle, stats
from cubeslab_bench.requests import QUEUE_DEPTH, chunk_ranges, device_time

ROOT = Path(__file__).resolve().parent
SIZES = {"full": (100, 100, 25_000), "small": (40, 30, 12_500)}
"""Pixels x, pixels y, m/z values: full is a 1.0 GB .ibd of float32 intensities."""
ION_MZ, ION_TOL = 612.3, 0.05
SPECTRUM_PIXEL = (37, 21)
TARGETS = {"ion image": 100.0, "spectrum warm ms": 1.0, "ingest share": 0.5}


def generate(path: Path, shape) -> None:
    from pyimzml.ImzMLWriter import ImzMLWriter

    if path.exists() and path.with_suffix(".ibd").exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    nx, ny, n = shape
    rng = np.random.default_rng(11)
    mz = np.linspace(100.0, 1100.0, n)
    peaks = rng.integers(0, n, 300)
    with ImzMLWriter(str(path), mode="continuous", mz_dtype=np.float64, intensity_dtype=np.float32) as w:
        for y in range(1, ny + 1):
            for x in range(1, nx + 1):
                intensity = rng.exponential(1.0, n).astype(np.float32)
                intensity[peaks] += rng.uniform(10, 100, peaks.size).astype(np.float32)
                w.addSpectrum(mz, intensity, (x, y, 1))


def read_while_writing(ibd: Path, directory: Path) -> float:
    """Seconds this device takes to read the .ibd cold while writing as many bytes (direct I/O, 8 MiB
    requests) into a scratch file in ``directory``: what an ingest that stores the values as they are
    moves, the device's bound on it when reads and writes share its bandwidth."""
    import mmap
    import threading

    size = ibd.stat().st_size
    scratch = directory / ".cubeslab-duplex.bin"
    block = mmap.mmap(-1, 8 << 20)  # page-aligned, as direct writes need
    block.write(np.random.default_rng(0).integers(0, 255, 8 << 20, dtype=np.uint8).tobytes())

    def read() -> None:
        with open(ibd, "rb", buffering=0) as f:
            piece = bytearray(8 << 20)
            while f.readinto(piece):
                pass

    def write() -> None:
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT)
        try:
            for _ in range(size // len(block)):
                os.write(fd, block)
        finally:
            os.close(fd)

    evict([ibd])
    settle()
    threads = [threading.Thread(target=read), threading.Thread(target=write)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    scratch.unlink()
    return seconds


def checksum_rate(ibd: Path) -> float:
    """Bytes/s of SHA-1 (the generated file's checksum, which ingest checks) over the warm .ibd on one
    core: a bound of its own on an ingest that checks it."""
    import hashlib

    digest, piece = hashlib.new("sha1"), bytearray(16 << 20)
    t0 = time.perf_counter()
    with open(ibd, "rb", buffering=0) as f:
        while got := f.readinto(piece):
            digest.update(memoryview(piece)[:got])
    return ibd.stat().st_size / (time.perf_counter() - t0)


def timed_runs(read, paths: list[Path], runs: int, cold: bool) -> dict:
    times = []
    if not cold:
        read()
    for _ in range(runs):
        gc.collect()
        if cold:
            evict(paths)
        t0 = time.perf_counter()
        read()
        times.append(time.perf_counter() - t0)
    return stats(times)


def measure(source: Path, store: Path, runs: int) -> dict:
    from pyimzml.ImzMLParser import ImzMLParser, getionimage

    import cubeslab

    ibd = source.with_suffix(".ibd")
    results: dict = {}
    cubeslab.ingest(source, store, overwrite=True)  # untimed first ingest: the store's old files exist
    # Each cold ingest beside a cold sequential read of the .ibd made just before it: this disk's rate
    # drifts by tens of percent within minutes.
    ingests, reads, duplex = [], [], []
    for _ in range(runs):
        reads.append(disk_bandwidth(ibd, limit=ibd.stat().st_size, repeats=1))
        duplex.append(read_while_writing(ibd, store.parent))
        evict([ibd])
        settle()
        t0 = time.perf_counter()
        cubeslab.ingest(source, store, overwrite=True)
        ingests.append(time.perf_counter() - t0)
    results["ingest"] = {
        **stats(ingests),
        "seconds_each": ingests,
        "read_Bps_each": reads,
        "read_while_writing_s_each": duplex,
        "ibd_bytes": ibd.stat().st_size,
        "checksum_Bps": checksum_rate(ibd),
    }
    parser = ImzMLParser(str(source))
    index = {(x, y): i for i, (x, y, _) in enumerate(parser.coordinates)}
    store_files = files_under(store)

    def fresh():
        return cubeslab.open(store)

    x, y = SPECTRUM_PIXEL
    mz_axis = fresh().mz
    lo, hi = int(np.searchsorted(mz_axis, 600.0)), int(np.searchsorted(mz_axis, 620.0))
    reads = {
        "ion image": (
            lambda: fresh().ion_image(ION_MZ, tol=ION_TOL),
            lambda: getionimage(parser, ION_MZ, tol=ION_TOL),
        ),
        "spectrum": (lambda: fresh().spectrum(x, y), lambda: parser.getspectrum(index[(x, y)])),
        "sub-cube 10x10 pixels, m/z 600-620": (
            lambda: fresh().subcube[10:19, 10:19, 600.0:620.0],
            lambda: np.stack(
                [parser.getspectrum(index[(i, j)])[1][lo:hi] for i in range(10, 20) for j in range(10, 20)]
            ),
        ),
    }
    expected = getionimage(parser, ION_MZ, tol=ION_TOL).T
    got = fresh().ion_image(ION_MZ, tol=ION_TOL)
    if not np.allclose(got, expected, rtol=1e-5):
        raise SystemExit("cubeslab's ion image differs from pyimzML's")
    for name, (ours, theirs) in reads.items():
        results[name] = {
            "cubeslab": {s: timed_runs(ours, store_files, runs, s == "cold") for s in ("cold", "warm")},
            "pyimzML": {s: timed_runs(theirs, [ibd], runs, s == "cold") for s in ("cold", "warm")},
        }
    # The same cube with orientation copies (--views): each read goes to the copy laid out for it.
    viewed = store.with_name(store.stem + "-views.zarr")
    cubeslab.ingest(source, viewed, overwrite=True, views=["spectra", "ion-images"])
    viewed_files = files_under(viewed)
    kept = cubeslab.open(viewed)  # warm runs read through a cube held open, as for the default layout
    for name, read in (
        ("ion image", lambda cube: cube.ion_image(ION_MZ, tol=ION_TOL)),
        ("spectrum", lambda cube: cube.spectrum(x, y)),
    ):
        cold = timed_runs(lambda read=read: read(cubeslab.open(viewed)), viewed_files, runs, True)
        warm = timed_runs(lambda read=read: read(kept), [], max(runs, 5), False)
        results[f"{name} (--views)"] = {
            "cubeslab": {"cold": cold, "warm": warm},
            "pyimzML": results[name]["pyimzML"],
        }
    # The first ion image read from a store opened before the eviction: its open is not timed, as
    # pyimzML's parse is not (pyimzML's cold runs already read through a parser made beforehand).
    for name, path, files in (
        ("ion image", store, store_files),
        ("ion image (--views)", viewed, viewed_files),
    ):
        times = []
        for _ in range(runs):
            cube = cubeslab.open(path)
            gc.collect()
            evict(files)
            t0 = time.perf_counter()
            cube.ion_image(ION_MZ, tol=ION_TOL)
            times.append(time.perf_counter() - t0)
        results[name]["cubeslab"]["cold, opened before"] = stats(times)
    # Warm spectra take microseconds: the cube opened once, as a user holds it.
    held = fresh()
    results["spectrum"]["cubeslab"]["warm"] = timed_runs(
        lambda: held.spectrum(x, y), [], max(runs, 20), False
    )
    results["ion image"]["cubeslab"]["warm"] = timed_runs(
        lambda: held.ion_image(ION_MZ, tol=ION_TOL), [], max(runs, 5), False
    )
    chunks = held.amplitude.chunks
    nx, ny, _ = held.shape
    chunk_bytes = int(np.prod(chunks)) * held.dtype.itemsize
    results["touched"] = {
        "ion image": int(np.ceil(nx / chunks[0]) * np.ceil(ny / chunks[1])) * chunk_bytes,
        "spectrum": int(np.ceil(held.shape[2] / chunks[2])) * chunk_bytes,
        "pyimzML ion image": ibd.stat().st_size // 2 + 1,  # every intensity array (m/z is shared)
    }
    results["layout"] = {"chunks": list(chunks), "shards": list(held.amplitude.shards or chunks)}
    # The device's own time for the chunk reads each cold ion image makes, at a deep queue.
    results["device"] = {}
    for name, cube in (("ion image", held), ("ion image (--views)", kept)):
        mz = cube.mz
        near = np.searchsorted(mz, ION_MZ - ION_TOL, "left"), np.searchsorted(mz, ION_MZ + ION_TOL, "right")
        window = (slice(0, nx), slice(0, ny), slice(int(near[0]), int(near[1])))
        target = Path(cube.amplitude.source_for(window))
        results["device"][name] = device_time(chunk_ranges(target, window), max(runs, 5))
    evict([ibd, *store_files, *viewed_files])
    return results


def table(r: dict) -> str:
    bw = r["bounds"]
    disk, memory = bw["disk_read_Bps"], bw["memory_copy_Bps"]
    ingest = r["results"]["ingest"]
    ingest_rate = ingest["ibd_bytes"] / ingest["median_s"]
    shares = [
        ingest["ibd_bytes"] / seconds / read
        for seconds, read in zip(ingest["seconds_each"], ingest["read_Bps_each"], strict=True)
    ]
    share = statistics.median(shares)
    sequential = statistics.median(ingest["read_Bps_each"])
    duplex_s = statistics.median(ingest["read_while_writing_s_each"])
    lines = [
        "# MSI: imzML in, ion images and spectra out",
        "",
        f"A continuous imzML of {r['shape'][0]} x {r['shape'][1]} pixels x {r['shape'][2]:,} m/z values"
        f" (float32 intensities, {ingest['ibd_bytes'] / 1e9:.2f} GB .ibd) written by pyimzML; cubeslab layout"
        " chunks"
        f" {r['results']['layout']['chunks']} in shards {r['results']['layout']['shards']}. Median of"
        f" {r['runs']} runs, milliseconds; {r['cores']} cores; disk {disk / 1e6:.0f} MB/s, copy"
        f" {memory / 1e9:.1f} GB/s.",
        "",
        "| read | state | cubeslab | pyimzML | pyimzML / cubeslab |",
        "|---|---|---|---|---|",
    ]
    for name in (
        "ion image",
        "ion image (--views)",
        "spectrum",
        "spectrum (--views)",
        "sub-cube 10x10 pixels, m/z 600-620",
    ):
        row = r["results"][name]
        for state in ("cold", "cold, opened before", "warm"):
            if state not in row["cubeslab"]:
                continue
            ours = row["cubeslab"][state]["median_s"]
            theirs = row["pyimzML"][state.split(",")[0]]["median_s"]
            lines.append(
                f"| {name} | {state} | {ours * 1e3:.3f} | {theirs * 1e3:.1f} | {theirs / ours:,.0f}x |"
            )
    touched = r["results"]["touched"]
    image = r["results"]["ion image"]
    cold_x, warm_x = (
        image["pyimzML"][state]["median_s"] / image["cubeslab"][state]["median_s"]
        for state in ("cold", "warm")
    )
    viewed = r["results"]["ion image (--views)"]
    viewed_x = viewed["pyimzML"]["cold"]["median_s"] / viewed["cubeslab"]["cold"]["median_s"]
    opened_x, viewed_opened_x = (
        row["pyimzML"]["cold"]["median_s"] / row["cubeslab"]["cold, opened before"]["median_s"]
        for row in (image, viewed)
    )
    spectrum_ms = r["results"]["spectrum"]["cubeslab"]["warm"]["median_s"] * 1e3
    ours, theirs = touched["ion image"], touched["pyimzML ion image"]
    fetched = (
        f"cubeslab fetches {ours / 1e6:.1f} MB ({ours / disk * 1e3:.1f} ms), "
        f"pyimzML {theirs / 1e6:.0f} MB ({theirs / disk * 1e3:.0f} ms)"
    )
    pyimzml_cold = image["pyimzML"]["cold"]["median_s"]

    def device(name: str) -> str:
        # The device's time for the chunk reads alone, and the ratio it would allow at most.
        d = r["results"]["device"][name]
        return (
            f"the device reads its {d['requests']} chunks ({d['bytes'] / 1e6:.1f} MB) in"
            f" {d['median_s'] * 1e3:.2f} ms at queue depth {QUEUE_DEPTH}: at most"
            f" {pyimzml_cold / d['median_s']:,.0f}x"
        )

    sha_cap = ingest["checksum_Bps"] / sequential
    lines += [
        "",
        "| target | measured | bound | met |",
        "|---|---|---|---|",
        f"| ion image >= 100x pyimzML, cold | {cold_x:,.0f}x | {fetched}; {device('ion image')} |"
        f" {_yes(cold_x >= 100)} |",
        f"| ion image >= 100x pyimzML, warm | {warm_x:,.0f}x | | {_yes(warm_x >= 100)} |",
        f"| ion image >= 100x pyimzML, cold, with --views | {viewed_x:,.0f}x |"
        f" {device('ion image (--views)')} | {_yes(viewed_x >= 100)} |",
        f"| ion image >= 100x pyimzML, cold, store opened before (as pyimzML's parse) | {opened_x:,.0f}x | |"
        f" {_yes(opened_x >= 100)} |",
        f"| the same with --views | {viewed_opened_x:,.0f}x | | {_yes(viewed_opened_x >= 100)} |",
        f"| spectrum warm <= 1 ms | {spectrum_ms:.3f} ms | | {_yes(spectrum_ms <= 1)} |",
        f"| ingest >= 50 % of a sequential cold read of the .ibd (run by run) | {ingest_rate / 1e6:.0f} MB/s;"
        f" {share:.0%} (runs {min(shares):.0%}-{max(shares):.0%}) | cold read {sequential / 1e6:.0f} MB/s;"
        f" read and written at once {ingest['ibd_bytes'] / duplex_s / 1e6:.0f} MB/s = {duplex_s:.2f} s,"
        f" {ingest['ibd_bytes'] / duplex_s / sequential:.0%} of the read;"
        f" its SHA-1 alone {ingest['checksum_Bps'] / 1e6:.0f} MB/s (one core), which caps the ingest at"
        f" {sha_cap:.0%} of the read | {_yes(share >= 0.5)} |",
    ]
    return "\n".join(lines) + "\n"


def _yes(met: bool) -> str:
    return "yes" if met else "no"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "msi")
    args = parser.parse_args()
    shape = SIZES[args.size]
    source = args.data / f"tissue-{args.size}.imzML"
    generate(source, shape)
    report = {
        "shape": list(shape),
        "runs": args.runs,
        "cores": os.cpu_count(),
        "machine": platform.node(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "bounds": bounds(args.data),
    }
    report["results"] = measure(source, args.data / f"tissue-{args.size}.zarr", args.runs)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "msi.json").write_text(json.dumps(report, indent=1))
    text = table(report)
    (args.out / "msi.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
