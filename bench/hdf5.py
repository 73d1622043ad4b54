"""HDF5 read in place: a float32 cube in a chunked HDF5 file (64^3 chunks), uncompressed and deflated,
read plane by plane along each axis by cubeslab (`cubeslab.open(file, dataset=...)`: the engine reads
the file's chunks in parallel), h5py (the HDF5 library, one chunk after another), and zarr-python over
kerchunk's references to the same chunks (the "HDF5 as Zarr" route).

Cold: before each run the file is evicted from the page cache (posix_fadvise DONTNEED) and the reader
opened afresh. Warm: the plane was read before. Each figure is the median of `--runs` runs. The bound
beside each: cold, the stored bytes of the chunks the plane touches at the disk's sequential read rate;
warm, the plane (raw chunks) or the touched chunks' decoded bytes (deflate) at one core's copy rate.

Usage: python bench/hdf5.py [--size small|full] [--runs 3] [--out bench/results]
Writes OUT/hdf5.json and OUT/hdf5.md; the files are generated once into bench/data/hdf5/.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import gc
import json
import platform
import time
from pathlib import Path

import numpy as np

from cubeslab_bench.measure import bounds, cold_runs, evict, settle, warm_runs

ROOT = Path(__file__).resolve().parent
SIZES = {"full": (640, 640, 640), "small": (320, 320, 320)}
CHUNK = (64, 64, 64)
CODECS = {"raw": {}, "deflate": {"compression": "gzip", "compression_opts": 4}}
TOOLS = ("cubeslab", "h5py", "kerchunk+zarr")
TARGETS = {"cold": 3.0, "warm": 2.0}


def generate(path: Path, shape, codec: str) -> None:
    """A band-limited cube (sums of sines and a little noise, rounded to 1e-3) so deflate has something
    to find, as it would in seismic amplitudes; written slab by slab."""
    import h5py

    if path.exists():
        with h5py.File(path) as f:
            if f["cube"].shape == tuple(shape):
                return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial")
    rng = np.random.default_rng(7)
    y = np.arange(shape[1], dtype=np.float32)[:, None]
    z = np.arange(shape[2], dtype=np.float32)[None, :]
    with h5py.File(tmp, "w") as f:
        cube = f.create_dataset("cube", shape=shape, dtype="float32", chunks=CHUNK, **CODECS[codec])
        for i in range(0, shape[0], CHUNK[0]):
            n = min(CHUNK[0], shape[0] - i)
            x = np.arange(i, i + n, dtype=np.float32)[:, None, None]
            slab = np.sin(0.05 * x + 0.03 * y) * np.cos(0.11 * z) + 0.05 * rng.standard_normal(
                (n, *shape[1:])
            )
            cube[i : i + n] = np.round(slab, 3).astype(np.float32)
    tmp.rename(path)


def planes(shape) -> dict[str, tuple]:
    return {
        "axis 0": (shape[0] // 2, slice(None), slice(None)),
        "axis 1": (slice(None), shape[1] // 2, slice(None)),
        "axis 2": (slice(None), slice(None), shape[2] // 2),
    }


def touched_bytes(path: Path, key) -> tuple[int, int]:
    """Stored and decoded bytes of the chunks a plane touches."""
    import h5py

    with h5py.File(path) as f:
        d = f["cube"]
        stored = decoded = 0
        for i in range(d.id.get_num_chunks()):
            c = d.id.get_chunk_info(i)
            if all(
                isinstance(k, slice) or o <= k < o + n
                for k, o, n in zip(key, c.chunk_offset, CHUNK, strict=True)
            ):
                stored += c.size
                decoded += int(np.prod(CHUNK)) * 4
        return stored, decoded


def reader(tool: str, path: Path, key):
    """Open ``path`` with ``tool`` afresh; returns a function reading the plane ``key``."""
    if tool == "cubeslab":
        import cubeslab

        array = cubeslab.open(path, dataset="cube")
        return lambda: array[key]
    if tool == "h5py":
        import h5py

        f = h5py.File(path)
        dataset = f["cube"]
        return lambda: dataset[key]
    import fsspec
    import zarr

    refs = kerchunk_refs(path)
    fs = fsspec.filesystem("reference", fo=refs, remote_protocol="file", asynchronous=True)
    store = zarr.storage.FsspecStore(fs, read_only=True, path="")
    array = zarr.open_array(store, path="cube", mode="r", zarr_format=2)
    return lambda: array[key]


_REFS: dict[Path, dict] = {}


def kerchunk_refs(path: Path) -> dict:
    """kerchunk's references to the file's chunks (built once per file, not timed)."""
    if path not in _REFS:
        from kerchunk.hdf import SingleHdf5ToZarr

        with open(path, "rb") as f:
            _REFS[path] = SingleHdf5ToZarr(f, str(path), inline_threshold=0).translate()
    return _REFS[path]


def measure(path: Path, shape, runs: int, tools) -> dict:
    out: dict = {}
    expected_planes = {}
    for name, key in planes(shape).items():
        expected_planes[name] = reader("h5py", path, key)()
    for name, key in planes(shape).items():
        stored, decoded = touched_bytes(path, key)
        row: dict = {"stored_bytes": stored, "decoded_bytes": decoded, "tools": {}}
        for tool in tools:
            try:
                got = reader(tool, path, key)()
            except Exception as error:  # a peer that cannot read the file is reported, not fatal
                row["tools"][tool] = {"error": f"{type(error).__name__}: {error}"}
                continue
            if not np.array_equal(got, expected_planes[name]):
                raise SystemExit(f"{tool} read {name} of {path.name} differently from h5py")
            gc.collect()
            settle()
            cold = cold_runs(lambda tool=tool, key=key: reader(tool, path, key), [path], runs)
            warm = warm_runs(reader(tool, path, key), runs)
            row["tools"][tool] = {"cold": cold, "warm": warm}
        out[name] = row
    evict([path])
    return out


def table(results: dict) -> str:
    bw = results["bounds"]
    lines = [
        "# HDF5 read in place",
        "",
        f"Cube {results['shape']} float32 in 64^3 chunks, one HDF5 file per codec; plane at the middle of"
        f" each axis. Median of {results['runs']} runs, seconds; last column the ratio h5py / cubeslab"
        f" (targets: cold >= {TARGETS['cold']:g}x, warm >= {TARGETS['warm']:g}x on {results['cores']} cores)."
        " Bound: cold,"
        " the touched chunks' stored bytes at the disk's sequential rate"
        f" ({bw['disk_read_Bps'] / 1e6:.0f} MB/s); warm, the plane (raw) or the touched chunks decoded"
        " (deflate) at one core's copy rate"
        f" ({bw['memory_copy_Bps'] / 1e9:.1f} GB/s).",
        "",
        "| codec | plane | state | cubeslab | h5py | kerchunk+zarr | bound | h5py / cubeslab |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for codec, per_plane in results["codecs"].items():
        for plane, row in per_plane.items():
            for state in ("cold", "warm"):
                cells = []
                for tool in TOOLS:
                    t = row["tools"].get(tool, {})
                    cells.append(f"{t[state]['median_s']:.3f}" if state in t else "n/a")
                bound = bound_s(results, codec, row, state)
                ratio = ratio_of(row, state)
                lines.append(
                    f"| {codec} | {plane} | {state} | {' | '.join(cells)} | {bound:.3f} | {ratio:.1f}x |"
                    if ratio
                    else f"| {codec} | {plane} | {state} | {' | '.join(cells)} | {bound:.3f} | n/a |"
                )
    lines += [
        "",
        "Slowest plane per codec and state (each tool's own slowest). The last column is the most any reader"
        " could gain on h5py there: h5py's time over the bound of cubeslab's slowest plane.",
        "",
        "| codec | state | cubeslab | h5py | h5py / cubeslab | target | h5py / bound |",
        "|---|---|---|---|---|---|---|",
    ]
    for codec, per_plane in results["codecs"].items():
        for state in ("cold", "warm"):
            slowest = max(
                per_plane.values(), key=lambda r, state=state: r["tools"]["cubeslab"][state]["median_s"]
            )
            ours = slowest["tools"]["cubeslab"][state]["median_s"]
            theirs = max(r["tools"]["h5py"][state]["median_s"] for r in per_plane.values())
            bound = bound_s(results, codec, slowest, state)
            verdict = "met" if theirs / ours >= TARGETS[state] else "not met"
            lines.append(
                f"| {codec} | {state} | {ours:.3f} | {theirs:.3f} | {theirs / ours:.1f}x | "
                f">= {TARGETS[state]:g}x: {verdict} | {theirs / bound:.1f}x |"
            )
    errors = {
        f"{codec} {plane} {tool}": t["error"]
        for codec, per_plane in results["codecs"].items()
        for plane, row in per_plane.items()
        for tool, t in row["tools"].items()
        if "error" in t
    }
    if errors:
        lines += ["", "Peers that failed:", ""] + [f"- {k}: {v}" for k, v in errors.items()]
    return "\n".join(lines) + "\n"


def bound_s(results: dict, codec: str, row: dict, state: str) -> float:
    """Cold: the touched chunks' stored bytes from disk. Warm: the plane copied once (raw chunks are
    copied from where they lie), or every touched chunk decoded once (deflated ones)."""
    bw = results["bounds"]
    if state == "cold":
        return row["stored_bytes"] / bw["disk_read_Bps"]
    plane_bytes = 4 * int(np.prod(results["shape"])) // results["shape"][0]
    return (plane_bytes if codec == "raw" else row["decoded_bytes"]) / bw["memory_copy_Bps"]


def ratio_of(row: dict, state: str) -> float | None:
    tools = row["tools"]
    if state not in tools.get("cubeslab", {}) or state not in tools.get("h5py", {}):
        return None
    return tools["h5py"][state]["median_s"] / tools["cubeslab"][state]["median_s"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "hdf5")
    parser.add_argument("--tools", default=",".join(TOOLS))
    args = parser.parse_args()
    shape = SIZES[args.size]
    tools = [t for t in args.tools.split(",") if t]
    results: dict = {
        "shape": list(shape),
        "chunks": list(CHUNK),
        "runs": args.runs,
        "cores": os.cpu_count(),
        "machine": platform.node(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "bounds": bounds(args.data if args.data.exists() else ROOT),
        "codecs": {},
    }
    for codec in CODECS:
        path = args.data / f"cube-{args.size}-{codec}.h5"
        generate(path, shape, codec)
        results["codecs"][codec] = measure(path, shape, args.runs, tools)
        results.setdefault("file_bytes", {})[codec] = path.stat().st_size
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "hdf5.json").write_text(json.dumps(results, indent=1))
    text = table(results)
    (args.out / "hdf5.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
