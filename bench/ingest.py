"""Ingest speed and the default layout, on the 600 x 800 x 1000 float32 benchmark volume.

1. Ingest speed: the default ingest and the ingest with `--views inline,crossline,time`, each from a
   warm source (read through the page cache first) and a cold one (its pages evicted), in MB/s of
   SEG-Y. The time is the ingest call's; shards are written past the page cache, so they are on the
   device when it returns. Bounds beside them: the source copied once at the memory's copy rate (warm)
   or read at the disk's sequential rate (cold), both from the disk's profile, and the volumes written
   at the disk's fsynced write rate.
2. Layouts, read side by side: the default a new user gets (no saved profile: the ingest measures
   a quick one first), the default with the built-in machine (no measurement allowed), the layout
   planned with a full profile of this disk (`cubeslab profile`), and TensorStore's Zarr v3 with
   64^3 chunks. For each, the slowest of the three middle planes, warm (median of repeated reads
   after a warm-up) and cold (files evicted and the array opened afresh before each read), in rounds
   that read every store in turn, forwards and backwards in turn, so a slow spell of this VM falls on
   all alike.

With `--baseline SITE` (a folder holding another build of the package, e.g. installed with
`pip install --no-deps --target SITE cubeslab-*.whl` from an older commit), that build's default and
views ingests are timed in the same rounds, and its default layout is read beside the others.

Usage: python bench/ingest.py [--size full|small] [--runs 5] [--out bench/results] [--baseline SITE]
       [--same-profile]
Writes OUT/ingest.json and OUT/ingest.md; the volume is generated once into bench/data.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np

import cubeslab
from cubeslab.plan import measure_profile
from cubeslab_bench.formats import disk_write_bandwidth
from cubeslab_bench.measure import evict, files_under, remove, settle, stats, timed, warm_up
from cubeslab_bench.seismic import open_tensorstore, planes, read_through, survey

ROOT = Path(__file__).resolve().parent
SIZES = {"full": (600, 800, 1000), "small": (300, 400, 500)}
VIEWS = ["inline", "crossline", "time"]
WARM_TIMED = 9


@contextmanager
def environment(**values: str | None):
    """Environment variables set (or removed, for None) inside the block."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


INGEST = """
import json, sys, time, cubeslab
t0 = time.perf_counter()
summary = cubeslab.ingest(sys.argv[1], sys.argv[2], views=json.loads(sys.argv[3]))
print(json.dumps({"seconds": time.perf_counter() - t0, "passes": summary.get("source_passes")}))
"""


SAME_PROFILE = False
"""With ``--same-profile``, the other build plans with this build's profile (two builds that both
measure profiles); otherwise with none, as a new user's first ingest did before profiles were
measured on the fly."""


def timed_ingest(sgy: Path, store: Path, views: list[str], site: Path | None) -> tuple[float, int | None]:
    """One ingest in a fresh interpreter (``site`` first on its path: another build), timed there."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="cubeslab-bench-baseline-") as empty:
        if site is not None:
            env["PYTHONPATH"] = str(site)
        if site is not None and not SAME_PROFILE:
            env["CUBESLAB_PROFILE_DIR"] = empty
        run = subprocess.run(
            [sys.executable, "-W", "ignore", "-c", INGEST, str(sgy), str(store), json.dumps(views)],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
    result = json.loads(run.stdout.strip().splitlines()[-1])
    return result["seconds"], result["passes"]


def ingest_speed(sgy: Path, scratch: Path, runs: int, profile_dir: Path, baseline: Path | None) -> dict:
    """MB/s of the default ingest and of the ingest with views, warm and cold source, in rounds that
    take the builds and cases in turn."""
    size = sgy.stat().st_size
    builds = {"": None} if baseline is None else {"": None, "baseline ": baseline}
    cases = {
        f"{b}{c}": (site, views)
        for b, site in builds.items()
        for c, views in (("default", []), ("views", VIEWS))
    }
    times: dict[str, dict[str, list[float]]] = {c: {"warm": [], "cold": []} for c in cases}
    passes: dict[str, int | None] = {}
    with environment(CUBESLAB_PROFILE_DIR=str(profile_dir)):
        # What a new user's first ingest measures, measured here beforehand so no timed run includes it.
        measure_profile(scratch, quick=True)
        for r in range(runs):
            for case, (site, views) in list(cases.items())[:: 1 if r % 2 == 0 else -1]:
                for state in ("warm", "cold") if r % 2 == 0 else ("cold", "warm"):
                    store = scratch / "speed.zarr"
                    remove(store)
                    os.sync()
                    if state == "warm":
                        read_through(sgy)
                    else:
                        evict([sgy])
                    settle()
                    seconds, passes[case] = timed_ingest(sgy, store, views, site)
                    times[case][state].append(seconds)
                    remove(store)
    out = {}
    for case in cases:
        out[case] = {
            state: {**stats(ts), "MB_per_s": size / 1e6 / statistics.median(ts)}
            for state, ts in times[case].items()
        }
        out[case]["source_passes"] = passes[case]
    return out


def write_tensorstore(path: Path, volume: np.ndarray) -> None:
    import tensorstore as ts

    remove(path)
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(path)},
        "metadata": {
            "shape": list(volume.shape),
            "data_type": "float32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [64, 64, 64]}},
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        },
        "create": True,
    }
    ts.open(spec).result().write(volume).result()


def layouts(
    sgy: Path, scratch: Path, baseline: Path | None
) -> tuple[dict[str, Path], dict[str, str], dict, dict]:
    """The four stores side by side: their paths and layouts, the full profile, and how long the
    profiles took."""
    stores: dict[str, Path] = {}
    described: dict[str, str] = {}
    measured: dict = {}
    empty = scratch / "profiles"
    remove(empty)
    runs = {
        "default, new user (quick profile measured)": {"CUBESLAB_PROFILE_DIR": str(empty / "auto")},
        "default, built-in machine": {
            "CUBESLAB_PROFILE_DIR": str(empty / "none"),
            "CUBESLAB_AUTO_PROFILE": "0",
        },
    }
    for label, env in runs.items():
        store = scratch / f"layout-{len(stores)}.zarr"
        remove(store)
        with environment(**env):
            t0 = time.perf_counter()
            summary = cubeslab.ingest(sgy, store)
            if label.startswith("default, new user"):
                measured["quick_profile_and_ingest_s"] = time.perf_counter() - t0
        stores[label] = store
        described[label] = summary["plan"]["layout"]
    if baseline is not None:
        store = scratch / "layout-baseline.zarr"
        remove(store)
        timed_ingest(sgy, store, [], baseline)
        label = "baseline build's default, no profile"
        stores[label] = store
        described[label] = cubeslab.open(store).attributes["cubeslab"]["plan"]["layout"]
    full = empty / "full"
    with environment(CUBESLAB_PROFILE_DIR=str(full)):
        t0 = time.perf_counter()
        profile = measure_profile(scratch)
        measured["full_profile_s"] = time.perf_counter() - t0
        store = scratch / "layout-profiled.zarr"
        remove(store)
        summary = cubeslab.ingest(sgy, store)
    stores["auto, this disk's full profile"] = store
    described["auto, this disk's full profile"] = summary["plan"]["layout"]
    volume = cubeslab.open(stores["auto, this disk's full profile"])[...]
    ts_path = scratch / "tensorstore-64.zarr"
    write_tensorstore(ts_path, volume)
    stores["TensorStore, Zarr v3 64^3"] = ts_path
    described["TensorStore, Zarr v3 64^3"] = "64x64x64 (no shards)"
    del volume
    os.sync()
    return stores, described, profile, measured


def reader(label: str, path: Path):
    if label.startswith("TensorStore"):
        return open_tensorstore(path)
    return cubeslab.open(path).amplitude.read


def planes_side_by_side(stores: dict[str, Path], shape, runs: int) -> dict:
    keys = planes(shape)
    warm = {label: {k: [] for k in keys} for label in stores}
    cold = {label: {k: [] for k in keys} for label in stores}
    readers = {label: reader(label, path) for label, path in stores.items()}
    settle()
    for r in range(runs):
        for label in list(stores)[:: 1 if r % 2 == 0 else -1]:
            for k, key in keys.items():
                read = partial(readers[label], key)
                warm_up(read)
                warm[label][k] += [timed(read) for _ in range(WARM_TIMED)]
    readers.clear()
    files = {label: files_under(path) for label, path in stores.items()}
    for r in range(runs):
        for label in list(stores)[:: 1 if r % 2 == 0 else -1]:
            for k, key in keys.items():
                evict(files[label])
                fresh = reader(label, stores[label])
                cold[label][k].append(timed(partial(fresh, key)))
    out = {}
    for label in stores:
        per = {k: {"warm": stats(warm[label][k]), "cold": stats(cold[label][k])} for k in keys}
        slowest = {state: max(per[k][state]["median_s"] for k in keys) for state in ("warm", "cold")}
        out[label] = {"planes": per, "slowest_plane_s": slowest}
    return out


def ingest_bounds(results: dict, copies: int) -> tuple[float, float]:
    """MB/s of SEG-Y an ingest writing ``copies`` volumes could reach at most, warm and cold source: the
    source copied in memory or read from the disk, then the volumes written at the disk's write rate."""
    bounds = results["bounds"]
    source = results["source_bytes"] / 1e6
    written = copies * int(np.prod(results["shape"])) * 4 / 1e6
    write_s = written / bounds["disk_write_MB_per_s"]
    warm = source / max(source / bounds["memory_copy_MB_per_s"], write_s)
    cold = source / (source / bounds["disk_sequential_MB_per_s"] + write_s)
    return warm, cold


def markdown(results: dict) -> str:
    size_mb = results["source_bytes"] / 1e6
    bounds = results["bounds"]
    lines = [
        f"# Ingest speed and the default layout ({'x'.join(map(str, results['shape']))} float32, "
        f"{size_mb:,.0f} MB of SEG-Y)",
        "",
        f"Run {results['date']}, {results['runs']} runs per figure (medians; min-max in ingest.json).",
        "",
        "## Ingest speed (MB/s of SEG-Y)",
        "",
        "| ingest | source passes | warm source | cold source |",
        "|---|---:|---:|---:|",
    ]
    for case, v in results["ingest"].items():
        lines.append(
            f"| {case} | {v['source_passes'] or ''} | {v['warm']['MB_per_s']:,.0f} "
            f"({v['warm']['min_s']:.2f}-{v['warm']['max_s']:.2f} s) | {v['cold']['MB_per_s']:,.0f} "
            f"({v['cold']['min_s']:.2f}-{v['cold']['max_s']:.2f} s) |"
        )
    for case, copies in (("default", 1), ("views", 1 + len(VIEWS))):
        warm, cold = ingest_bounds(results, copies)
        lines.append(
            f"| bound, {case}: the source copied in memory (warm) or read from the disk (cold), and "
            f"{copies} volume{'s' if copies > 1 else ''} written at the disk's write rate | | {warm:,.0f} | "
            f"{cold:,.0f} |"
        )
    lines += [
        "",
        f"Disk: {bounds['disk_sequential_MB_per_s']:,.0f} MB/s read, "
        f"{bounds['disk_write_MB_per_s']:,.0f} MB/s written (fsynced); memory copy "
        f"{bounds['memory_copy_MB_per_s']:,.0f} MB/s. Shards are written past the page cache, "
        "so every volume written costs the disk's write rate, warm source or cold.",
        "",
        "## The slowest of the three middle planes, side by side",
        "",
        "| layout | chunks/shards | warm ms | cold ms | warm vs full profile | cold vs full profile | "
        "TensorStore / this, warm | cold |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    reads = results["planes"]
    ref = reads["auto, this disk's full profile"]["slowest_plane_s"]
    ts = reads["TensorStore, Zarr v3 64^3"]["slowest_plane_s"]
    for label, v in reads.items():
        s = v["slowest_plane_s"]
        lines.append(
            f"| {label} | {results['layouts'][label]} | {s['warm'] * 1e3:.2f} | {s['cold'] * 1e3:.1f} | "
            f"{s['warm'] / ref['warm']:.2f}x | {s['cold'] / ref['cold']:.2f}x | "
            f"{ts['warm'] / s['warm']:.1f}x | {ts['cold'] / s['cold']:.1f}x |"
        )
    plane_mb = results["plane_bytes"] / 1e6
    lines += [
        f"| bound: the largest plane ({plane_mb:.1f} MB) copied once (warm) / read at the sequential "
        "rate (cold) "
        f"| | {bounds['plane_warm_s'] * 1e3:.2f} | {bounds['plane_cold_s'] * 1e3:.1f} | | | | |",
        "",
        "Quick profile and ingest (a new user's first run): "
        f"{results['timing']['quick_profile_and_ingest_s']:.1f} s; "
        f"full profile: {results['timing']['full_profile_s']:.1f} s.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=SIZES, default="full")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    parser.add_argument("--baseline", type=Path, help="a folder holding another build of the package")
    parser.add_argument(
        "--same-profile", action="store_true", help="the other build plans with this build's profile"
    )
    args = parser.parse_args()
    global SAME_PROFILE
    SAME_PROFILE = args.same_profile
    shape = SIZES[args.size]
    data = ROOT / "data"
    data.mkdir(exist_ok=True)
    sgy = survey(data, shape)
    scratch = data / "ingest-scratch"
    scratch.mkdir(exist_ok=True)
    print(f"ingest speed on {sgy} ...", flush=True)
    speed = ingest_speed(sgy, scratch, args.runs, scratch / "profiles-speed", args.baseline)
    print("layouts ...", flush=True)
    stores, described, profile, timing = layouts(sgy, scratch, args.baseline)
    reads = planes_side_by_side(stores, shape, args.runs)
    # Per-thread copy rate with every thread busy, times the threads; the best cold rate measured.
    memory = profile["memory"]["copy"] * profile["threads"] * 1e-6
    disk = max(max(row) for row in profile["io"]["cold"]) * 1e-6
    plane_bytes = max(shape[0] * shape[1], shape[0] * shape[2], shape[1] * shape[2]) * 4
    results = {
        "shape": shape,
        "source_bytes": sgy.stat().st_size,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "runs": args.runs,
        "ingest": speed,
        "layouts": described,
        "planes": reads,
        "timing": timing,
        "bounds": {
            "memory_copy_MB_per_s": memory,
            "disk_sequential_MB_per_s": disk,
            "disk_write_MB_per_s": disk_write_bandwidth(scratch, 1 << 30) / 1e6,
            "plane_warm_s": plane_bytes / (memory * 1e6),
            "plane_cold_s": plane_bytes / (disk * 1e6),
        },
        "plane_bytes": plane_bytes,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ingest.json").write_text(json.dumps(results, indent=1))
    (args.out / "ingest.md").write_text(markdown(results))
    print(markdown(results))
    for path in stores.values():
        remove(path)


if __name__ == "__main__":
    main()
