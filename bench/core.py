"""Core benchmark: ingest throughput and plane / trace / sub-volume read times on a generated
600 x 800 x 1000 float32 survey, for cubeslab and, in the same run, segyio (on the SEG-Y), h5py
(HDF5 chunked 64^3), zarr-python (64^3) and TensorStore (the zarr-python store).

Warm: the files are in the page cache (each access read once before timing). Cold: every file of the
tool's data is evicted with posix_fadvise(DONTNEED) before each timed read, and the tool's handle is
reopened so that no process-side cache survives. Every figure is the median of the runs, with min and
max. Beside each figure: the physical bound — bytes that must move divided by the measured bandwidth
(memory copy for warm, sequential disk read for cold) — and the ratio to it.

Usage: python bench/core.py [--shape 600,800,1000] [--warm 7] [--cold 5] [--out bench/results]
"""

from __future__ import annotations

import os

# BLAS worker threads spin after numpy calls made for the peers; on two cores
# they would steal time from whichever tool runs next.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import platform
import shutil
import sys
import time
from pathlib import Path

import numpy as np

import cubeslab
from cubeslab.bench.measure import cold_runs, disk_bandwidth, files_under, memory_bandwidth, warm_runs
from cubeslab.synthetic import SyntheticSurvey, write_segy

ROOT = Path(__file__).resolve().parent
DATA = ROOT / "data"


# -- the accesses ----------------------------------------------------------------------------------
def accesses(shape):
    """name → (numpy index, bytes that must move)."""
    n_il, n_xl, ns = shape
    il, xl, k = n_il // 2, n_xl // 2, ns // 2
    item = 4

    def cube_at(side: int, fraction: int) -> tuple[slice, ...]:
        sides = [min(side, n) for n in shape]
        return tuple(
            slice(min(n // fraction, n - s), min(n // fraction, n - s) + s)
            for n, s in zip(shape, sides, strict=True)
        )

    s64, s256 = cube_at(64, 3), cube_at(256, 4)
    return {
        "inline": ((il, slice(None), slice(None)), n_xl * ns * item),
        "crossline": ((slice(None), xl, slice(None)), n_il * ns * item),
        "time slice": ((slice(None), slice(None), k), n_il * n_xl * item),
        "trace": ((il, xl, slice(None)), ns * item),
        "subvolume 64^3": (s64, int(np.prod([s.stop - s.start for s in s64])) * item),
        "subvolume 256^3": (s256, int(np.prod([s.stop - s.start for s in s256])) * item),
    }


def segyio_reader(path: Path, shape):
    import segyio

    f = segyio.open(path, "r")
    n_xl = shape[1]

    def read(key):
        il, xl, k = key
        if isinstance(il, int) and isinstance(xl, slice) and isinstance(k, slice) and xl == slice(None):
            return f.iline[f.ilines[il]]
        if isinstance(xl, int) and isinstance(il, slice) and il == slice(None):
            return f.xline[f.xlines[xl]]
        if isinstance(k, int):
            return f.depth_slice[k]
        if isinstance(il, int) and isinstance(xl, int):
            return f.trace[il * n_xl + xl]
        # Sub-volume: the inlines it spans, cut (what a segyio user writes).
        return np.stack([f.iline[f.ilines[i]][xl, k] for i in range(il.start, il.stop)])

    return read


def tensorstore_reader(path: Path):
    import tensorstore as ts

    store = ts.open(
        {
            "driver": "zarr3",
            "kvstore": {"driver": "file", "path": str(path)},
            "context": {"cache_pool": {"total_bytes_limit": 0}},
        }
    ).result()
    return lambda key: store[key].read().result()


# -- main ------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="600,800,1000")
    parser.add_argument("--warm", type=int, default=7)
    parser.add_argument("--cold", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    parser.add_argument("--peers", default="segyio,h5py,zarr,tensorstore")
    args = parser.parse_args()
    shape = tuple(int(x) for x in args.shape.split(","))
    peers = [p for p in args.peers.split(",") if p]
    DATA.mkdir(parents=True, exist_ok=True)
    tag = "x".join(map(str, shape))
    sgy = DATA / f"bench-{tag}.sgy"
    if not sgy.exists():
        print(f"generating {sgy} ...", flush=True)
        write_segy(sgy, SyntheticSurvey(*shape), inlines_per_block=32)
    threads, in_flight = cubeslab._engine.default_parallelism()
    results: dict = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
        },
        "shape": shape,
        "dtype": "float32",
        "cubeslab": {"threads": threads, "in_flight": in_flight},
    }
    mem_bw = memory_bandwidth()
    disk_bw = disk_bandwidth(sgy)
    results["bandwidth"] = {"memory_copy_Bps": mem_bw, "disk_read_Bps": disk_bw}
    print(f"memory copy {mem_bw / 1e9:.1f} GB/s, disk read {disk_bw / 1e9:.2f} GB/s", flush=True)

    # Ingest (SEG-Y in the page cache, as the target specifies).
    sgy.read_bytes() if sgy.stat().st_size < 8 << 30 else None
    ingest: dict = {}
    stores = {"cubeslab": DATA / f"cubeslab-{tag}.zarr", "cubeslab zstd": DATA / f"cubeslab-zstd-{tag}.zarr"}
    for name, compress in (("cubeslab", None), ("cubeslab zstd", "zstd:1")):
        with open(sgy, "rb") as f:  # keep it warm
            while f.read(64 << 20):
                pass
        t0 = time.perf_counter()
        cubeslab.ingest(sgy, stores[name], overwrite=True, compress=compress)
        dt = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in files_under(stores[name]))
        ingest[name] = {"seconds": dt, "MBps": sgy.stat().st_size / dt / 1e6, "store_bytes": size}
        print(f"ingest {name}: {dt:.2f} s, {sgy.stat().st_size / dt / 1e6:.0f} MB/s", flush=True)

    volume = cubeslab.open(stores["cubeslab"])[...]
    peer_paths: dict[str, Path] = {"segyio": sgy}
    if "h5py" in peers:
        import h5py

        path = DATA / f"h5py-{tag}.h5"
        t0 = time.perf_counter()
        with h5py.File(path, "w") as f:
            f.create_dataset("amplitude", data=volume, chunks=(64, 64, 64))
        dt = time.perf_counter() - t0
        ingest["h5py (write from memory)"] = {"seconds": dt, "MBps": volume.nbytes / dt / 1e6}
        peer_paths["h5py"] = path
    if "zarr" in peers or "tensorstore" in peers:
        import zarr

        path = DATA / f"zarr-{tag}.zarr"
        shutil.rmtree(path, ignore_errors=True)
        t0 = time.perf_counter()
        z = zarr.create_array(path, shape=shape, chunks=(64, 64, 64), dtype="float32", compressors=None)
        z[...] = volume
        dt = time.perf_counter() - t0
        ingest["zarr-python (write from memory)"] = {"seconds": dt, "MBps": volume.nbytes / dt / 1e6}
        peer_paths["zarr"] = peer_paths["tensorstore"] = path
    del volume
    results["ingest"] = ingest

    def open_tool(tool: str):
        if tool.startswith("cubeslab"):
            verify = "no verify" not in tool
            cube = cubeslab.open(stores["cubeslab zstd" if "zstd" in tool else "cubeslab"], verify=verify)
            return cube.amplitude.read
        if tool == "segyio":
            return segyio_reader(sgy, shape)
        if tool == "h5py":
            import h5py

            dataset = h5py.File(peer_paths["h5py"], "r")["amplitude"]
            return lambda key: dataset[key]
        if tool == "zarr":
            import zarr

            array = zarr.open_array(peer_paths["zarr"], mode="r")
            return lambda key: array[key]
        if tool == "tensorstore":
            return tensorstore_reader(peer_paths["tensorstore"])
        raise ValueError(tool)

    tools = ["cubeslab", "cubeslab no verify", "cubeslab zstd", *[p for p in peers if p in peer_paths]]
    data_paths = {
        "cubeslab": stores["cubeslab"],
        "cubeslab no verify": stores["cubeslab"],
        "cubeslab zstd": stores["cubeslab zstd"],
        **peer_paths,
    }
    reads: dict = {}
    for access, (key, nbytes) in accesses(shape).items():
        reads[access] = {"bytes": nbytes, "bound_warm_s": nbytes / mem_bw, "bound_cold_s": nbytes / disk_bw}
        for tool in tools:
            paths = files_under(data_paths[tool])
            reader = open_tool(tool)
            warm = warm_runs(lambda reader=reader, key=key: reader(key), args.warm)
            del reader

            def opener(tool=tool, key=key):
                reader = open_tool(tool)
                return lambda: reader(key)

            cold = cold_runs(opener, paths, args.cold)
            reads[access][tool] = {"warm": warm, "cold": cold}
            w, c = warm["median_s"] * 1e3, cold["median_s"] * 1e3
            print(f"{access:16s} {tool:20s} warm {w:9.2f} ms   cold {c:9.2f} ms", flush=True)
    results["reads"] = reads
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "core.json").write_text(json.dumps(results, indent=2))
    (args.out / "core.md").write_text(markdown(results, tools))
    print(f"wrote {args.out / 'core.json'} and {args.out / 'core.md'}")


def markdown(results: dict, tools: list[str]) -> str:
    bw, machine = results["bandwidth"], results["machine"]
    volume = " x ".join(map(str, results["shape"]))
    lines = [
        "# Core benchmark",
        "",
        f"Volume {volume} float32; machine: {machine['cores']} cores, {machine['memory_gib']} GiB; "
        f"memory copy {bw['memory_copy_Bps'] / 1e9:.1f} GB/s (one thread), "
        f"disk sequential read {bw['disk_read_Bps'] / 1e9:.2f} GB/s (cold).",
        "Medians in ms (min–max in core.json). Warm: page cache warm. Cold: files evicted with "
        "posix_fadvise(DONTNEED) and handles reopened before each run. Bound: bytes that must move ÷ "
        "bandwidth (memory for warm, disk for cold); ×bound: cubeslab's time over the bound.",
        "",
        "## Ingest",
        "",
        "| writer | seconds | MB/s |",
        "|---|---:|---:|",
    ]
    for name, r in results["ingest"].items():
        lines.append(f"| {name} | {r['seconds']:.2f} | {r['MBps']:.0f} |")
    for mode in ("warm", "cold"):
        lines += ["", f"## Reads, {mode}", ""]
        lines.append(
            "| access | bound | " + " | ".join(tools) + " | ×bound (cubeslab) | best peer ÷ cubeslab |"
        )
        lines.append("|---|---:|" + "---:|" * len(tools) + "---:|---:|")
        for access, r in results["reads"].items():
            bound = r[f"bound_{mode}_s"]
            ours = r["cubeslab"][mode]["median_s"]
            peers = [r[t][mode]["median_s"] for t in tools if not t.startswith("cubeslab")]
            cells = " | ".join(f"{r[t][mode]['median_s'] * 1e3:.2f}" for t in tools)
            best = min(peers) if peers else float("nan")
            lines.append(
                f"| {access} | {bound * 1e3:.3f} | {cells} | {ours / bound:.1f} | {best / ours:.1f}x |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
