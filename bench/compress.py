"""Compression benchmark: every `--compress` setting against today's tools, in one run.

For the real F3 crop (tests/data/segy/f3.sgy) and a generated survey, each setting is ingested
with its own planned layout and measured: compression ratio (data bytes over stored amplitude bytes),
achieved SNR and maximum error (recorded by ingest, exact against the source), codec encode and decode
MB/s per core (one thread, on inner chunks of the volume), and the slowest of the three planes read warm
and cold (cold: files evicted with posix_fadvise(DONTNEED), handles reopened; medians of --runs).

Beside them, where installed: seismic-zfp at 2, 4 and 8 bits per sample (and cubeslab tuned to the SNR
each of those reached, for a same-SNR comparison), MDIO's default (blosc zstd), OpenVDS (Zip, and its
wavelet codec when the build has it). A tool that is not installed, or a mode it lacks, is listed as
skipped with the reason, never faked.

Writes bench/results/compress.json, compress.md and compress.png (ratio against SNR per tool).

Usage: python bench/compress.py [--size tiny|small|full] [--runs 5] [--out bench/results]
(tiny: the test that keeps this script working; small: a 59 MB survey; full: 600 x 800 x 1000, 1.9 GB)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import time
from pathlib import Path

import numpy as np
import segyio

import cubeslab
from cubeslab import _engine
from cubeslab.synthetic import SyntheticSurvey, write_segy
from cubeslab_bench import seismic, tools
from cubeslab_bench.measure import cold_runs, disk_bandwidth, files_under, memory_bandwidth, warm_runs

ROOT = Path(__file__).resolve().parent
DATA = ROOT / "data"
F3 = ROOT.parent / "tests" / "data" / "segy" / "f3.sgy"
SIZES = {"tiny": (24, 20, 100), "small": (192, 192, 400), "full": (600, 800, 1000)}
SETTINGS = [
    "none", "zstd:3", "gzip:5", "blosc-lz4:5", "blosc-zstd:5", "blosc-zstd:5,shuffle=bit", "bitround:12",
    "zfp:rate=2", "zfp:rate=4", "zfp:rate=8", "zfp:snr=30", "zfp:snr=40", "zfp:snr=50", "zfp:max-error=1%",
]  # fmt: skip
TRIAL_BYTES = 32 << 20


def reference_cube(path: Path) -> np.ndarray:
    with segyio.open(path) as f:
        return segyio.tools.cube(f).astype(np.float32)


def snr_db(reference: np.ndarray, decoded: np.ndarray) -> float:
    error = decoded.astype(np.float64) - reference
    energy = float((error**2).sum())
    return (
        math.inf
        if energy == 0
        else 10 * math.log10(float((reference.astype(np.float64) ** 2).sum()) / energy)
    )


def planes(shape):
    n0, n1, n2 = shape
    return {"inline": n0 // 2, "crossline": n1 // 2, "time": n2 // 2}


def plane_times(read_plane, open_reader, paths, shape, runs) -> dict:
    """Warm and cold median times of each plane; `read_plane(reader, axis, index)`."""
    out = {}
    for axis, (name, index) in enumerate(planes(shape).items()):
        reader = open_reader()
        warm = warm_runs(lambda r=reader, a=axis, i=index: read_plane(r, a, i), runs)

        def fresh(a=axis, i=index):
            reader = open_reader()
            return lambda: read_plane(reader, a, i)

        cold = cold_runs(fresh, paths, runs)
        out[name] = {"warm": warm, "cold": cold}
    return out


def slowest(times: dict, state: str) -> float:
    return max(p[state]["median_s"] for p in times.values())


def trial_chunks(volume: np.ndarray, inner) -> np.ndarray:
    """Whole inner chunks spread over the volume, back to back, up to TRIAL_BYTES."""
    inner = [min(c, n) for c, n in zip(inner, volume.shape, strict=True)]
    grid = [n // c for n, c in zip(volume.shape, inner, strict=True)]
    per_chunk = int(np.prod(inner)) * volume.itemsize
    count = max(1, min(int(np.prod(grid)), TRIAL_BYTES // per_chunk))
    picks = np.linspace(0, int(np.prod(grid)) - 1, count).astype(int)
    blocks = []
    for p in picks:
        corner = np.unravel_index(p, grid)
        window = tuple(slice(c * s, (c + 1) * s) for c, s in zip(corner, inner, strict=True))
        blocks.append(np.ascontiguousarray(volume[window]))
    return np.concatenate([b.reshape(-1) for b in blocks]), inner


# -- cubeslab ----------------------------------------------------------------------------------------


def cubeslab_setting(sgy: Path, volume: np.ndarray, setting: str, work: Path, runs: int) -> dict:
    store = work / "cubeslab.zarr"
    shutil.rmtree(store, ignore_errors=True)
    t0 = time.perf_counter()
    summary = cubeslab.ingest(sgy, store, compress=setting)
    ingest_s = time.perf_counter() - t0
    os.sync()
    recorded = summary["compression"]
    achieved = recorded.get("achieved", {})
    cube = cubeslab.open(store)
    inner = cube.amplitude.chunks
    chunks, inner = trial_chunks(volume, inner)
    trial = json.loads(_engine.codec_trial(recorded["codec"], chunks.view(np.uint8), list(inner), "float32"))
    amplitude = store / "amplitude"

    def open_reader():
        return cubeslab.Array(amplitude)

    def read_plane(reader, axis, index):
        key = [slice(None)] * 3
        key[axis] = index
        return reader[tuple(key)]

    times = plane_times(read_plane, open_reader, files_under(amplitude), volume.shape, runs)
    entry = {
        "tool": "cubeslab",
        "setting": setting,
        "codec": recorded["codec"],
        "layout": summary["plan"]["layout"],
        "ratio": recorded["ratio"],
        "store_ratio": volume.nbytes / sum(p.stat().st_size for p in files_under(store)),
        "snr_db": achieved.get("snr_db") if recorded["lossy"] else math.inf,
        "max_abs_error": achieved.get("max_abs_error", 0.0),
        "ingest_s": ingest_s,
        "encode_MBps_per_core": trial["bytes"] / trial["encode_seconds"] / 1e6,
        "decode_MBps_per_core": trial["bytes"] / trial["decode_seconds"] / 1e6,
        "planes": times,
    }
    if entry["snr_db"] is None:  # exact (null in JSON)
        entry["snr_db"] = math.inf
    shutil.rmtree(store)
    return entry


# -- peers -------------------------------------------------------------------------------------------


def seismic_zfp(sgy: Path, reference: np.ndarray, bits: int, work: Path, runs: int) -> dict:
    reason = tools.missing("seismic-zfp")
    if reason:
        return {"tool": "seismic-zfp", "setting": f"{bits} bits", "skipped": reason}
    from seismic_zfp.read import SgzReader

    out = work / f"sz{bits}.sgz"
    t0 = time.perf_counter()
    seismic.ingest_seismic_zfp(sgy, out, bits)
    ingest_s = time.perf_counter() - t0
    os.sync()
    reader = SgzReader(str(out))
    t0 = time.perf_counter()
    decoded = reader.read_volume()
    decode_s = time.perf_counter() - t0
    readers = {0: "read_inline", 1: "read_crossline", 2: "read_zslice"}
    times = plane_times(
        lambda r, axis, index: getattr(r, readers[axis])(index),
        lambda: SgzReader(str(out)),
        [out],
        reference.shape,
        runs,
    )
    entry = {
        "tool": "seismic-zfp",
        "setting": f"{bits} bits",
        "codec": f"zfp fixed rate {bits}",
        "ratio": None,  # one file: amplitudes and headers are not told apart
        "store_ratio": reference.nbytes / out.stat().st_size,
        "snr_db": snr_db(reference, decoded),
        "max_abs_error": float(np.abs(decoded - reference).max()),
        "ingest_s": ingest_s,
        "decode_MBps_per_core": reference.nbytes / decode_s / 1e6,  # read_volume runs on one thread
        "planes": times,
    }
    out.unlink()
    return entry


def mdio_default(sgy: Path, reference: np.ndarray, work: Path, runs: int) -> dict:
    reason = tools.missing("mdio")
    if reason:
        return {"tool": "MDIO", "setting": "default", "skipped": reason}
    import mdio

    out = work / "mdio.mdio"
    t0 = time.perf_counter()
    seismic.ingest_mdio(sgy, out)
    ingest_s = time.perf_counter() - t0
    os.sync()
    variable = out / "amplitude"

    def open_reader():
        return mdio.open_mdio(out)["amplitude"]

    def read_plane(reader, axis, index):
        return reader.isel({reader.dims[axis]: index}).values

    decoded = open_reader().values
    times = plane_times(read_plane, open_reader, files_under(out), reference.shape, runs)
    entry = {
        "tool": "MDIO",
        "setting": "default (blosc zstd)",
        "codec": "blosc zstd",
        "ratio": reference.nbytes / sum(p.stat().st_size for p in files_under(variable)),
        "store_ratio": reference.nbytes / sum(p.stat().st_size for p in files_under(out)),
        "snr_db": snr_db(reference, decoded),
        "max_abs_error": float(np.abs(decoded - reference).max()),
        "ingest_s": ingest_s,
        "planes": times,
    }
    shutil.rmtree(out)
    return entry


def openvds(sgy: Path, reference: np.ndarray, method: str, work: Path, runs: int) -> dict:
    reason = tools.missing("openvds")
    if reason:
        return {"tool": "OpenVDS", "setting": method, "skipped": reason}
    out = work / f"vds-{method}.vds"
    t0 = time.perf_counter()
    try:
        seismic.ingest_openvds(sgy, out, method)
    except RuntimeError as error:  # a build without this codec
        return {"tool": "OpenVDS", "setting": method, "skipped": str(error)[:200]}
    ingest_s = time.perf_counter() - t0

    def read_plane(read, axis, index):
        key = [slice(None)] * 3
        key[axis] = index
        return read(tuple(key))

    decoded = seismic.open_openvds(out)((slice(None),) * 3)
    times = plane_times(read_plane, lambda: seismic.open_openvds(out), [out], reference.shape, runs)
    entry = {
        "tool": "OpenVDS",
        "setting": method,
        "codec": method,
        "ratio": None,
        "store_ratio": reference.nbytes / out.stat().st_size,
        "snr_db": snr_db(reference, decoded),
        "max_abs_error": float(np.abs(decoded - reference).max()),
        "ingest_s": ingest_s,
        "planes": times,
    }
    out.unlink()
    return entry


# -- the run -----------------------------------------------------------------------------------------


def run_volume(name: str, sgy: Path, args, work: Path) -> dict:
    print(f"\n== {name}: {sgy}", flush=True)
    reference = reference_cube(sgy)
    results = []

    def record(entry):
        results.append(entry)
        if "skipped" in entry:
            print(f"{entry['tool']:12s} {entry['setting']:26s} skipped: {entry['skipped']}", flush=True)
        else:
            warm, cold = (slowest(entry["planes"], state) * 1e3 for state in ("warm", "cold"))
            print(f"{entry['tool']:12s} {entry['setting']:26s} store ratio {entry['store_ratio']:6.2f}  "
                  f"SNR {entry['snr_db']:6.1f} dB  slowest plane warm {warm:7.2f} ms cold {cold:7.1f} ms",
                  flush=True)  # fmt: skip

    for setting in SETTINGS:
        record(cubeslab_setting(sgy, reference, setting, work, args.runs))
    for bits in (2, 4, 8):
        peer = seismic_zfp(sgy, reference, bits, work, args.runs)
        record(peer)
        if "skipped" not in peer:  # cubeslab at the SNR seismic-zfp reached
            entry = cubeslab_setting(sgy, reference, f"zfp:snr={peer['snr_db']:.1f}", work, args.runs)
            entry["same_snr_as"] = peer["setting"]
            record(entry)
    record(mdio_default(sgy, reference, work, args.runs))
    for method in ("Zip", "Wavelet"):
        record(openvds(sgy, reference, method, work, args.runs))
    return {"name": name, "path": str(sgy), "shape": list(reference.shape), "results": results}


def verdicts(volume: dict) -> dict:
    rows = [r for r in volume["results"] if "skipped" not in r]
    cube = {r["setting"]: r for r in rows if r["tool"] == "cubeslab"}
    same = [
        {
            "seismic_zfp": r["same_snr_as"],
            "snr_db": r["snr_db"],
            "cubeslab_ratio": r["store_ratio"],
            "seismic_zfp_ratio": next(
                p["store_ratio"]
                for p in rows
                if p["tool"] == "seismic-zfp" and p["setting"] == r["same_snr_as"]
            ),
        }
        for r in rows
        if r.get("same_snr_as")
    ]  # fmt: skip
    zfp_decode = [
        r["decode_MBps_per_core"] for r in rows if r["tool"] == "cubeslab" and r["codec"].startswith("zfp")
    ]
    warm_ratio = slowest(cube["zfp:snr=40"]["planes"], "warm") / slowest(cube["none"]["planes"], "warm")
    return {
        "same_snr": same,
        "ratio_at_least_seismic_zfp": bool(same)
        and all(s["cubeslab_ratio"] >= s["seismic_zfp_ratio"] for s in same),
        "zfp_decode_min_MBps_per_core": min(zfp_decode),
        "zfp_decode_at_least_300": min(zfp_decode) >= 300,
        "zfp40_slowest_warm_over_none": warm_ratio,
        "zfp40_slowest_warm_within_2x": warm_ratio <= 2.0,
    }  # fmt: skip


def markdown(results: dict) -> str:
    lines = [
        "# Compression benchmark",
        "",
        f"Machine: {results['machine']}. Disk sequential read (cold) "
        f"{results['disk_read_Bps'] / 1e9:.2f} GB/s; memory copy {results['memory_Bps'] / 1e9:.1f} GB/s "
        f"(one thread). Plane times are medians of {results['runs']} runs: warm (page cache, and the "
        "tool's own cache of decoded data where it has one) and cold (files evicted with "
        "posix_fadvise(DONTNEED), handle reopened). Ratio: float32 data bytes over the stored amplitude "
        "bytes; store ratio: over the whole store (headers, coordinates and indexes included, as "
        "seismic-zfp's single file holds them too). SNR: exact against the source (cubeslab records it "
        "at ingest; peers are measured here). Encode/decode: one core, on the volume's own inner chunks.",
    ]  # fmt: skip
    for volume in results["volumes"]:
        v = verdicts(volume) if volume.get("verdicts") else None
        lines += ["", f"## {volume['name']}: {' x '.join(map(str, volume['shape']))} float32", ""]
        plane_mb = (
            min(volume["shape"][0] * volume["shape"][1], volume["shape"][1] * volume["shape"][2]) * 4 / 1e6
        )
        bound_ms = plane_mb / (results["disk_read_Bps"] / 1e6) * 1e3
        lines.append(
            f"Physical bound for a cold plane: about {bound_ms:.2f} ms for the smallest plane "
            f"({plane_mb:.2f} MB, uncompressed) at the disk's sequential rate."
        )
        lines += [
            "",
            "| tool | setting | codec | ratio | store ratio | SNR dB | max abs error | encode MB/s/core "
            "| decode MB/s/core | slowest plane warm ms | slowest plane cold ms |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in volume["results"]:
            if "skipped" in r:
                lines.append(f"| {r['tool']} | {r['setting']} | skipped: {r['skipped']} | | | | | | | | |")
                continue
            fmt = lambda x, f: "" if x is None else ("exact" if x == math.inf else format(x, f))  # noqa: E731
            lines.append(
                f"| {r['tool']} | {r['setting']} | {r.get('codec', '')} | {fmt(r['ratio'], '.2f')} "
                f"| {r['store_ratio']:.2f} | {fmt(r['snr_db'], '.1f')} "
                f"| {fmt(r['max_abs_error'], '.3g')} | {fmt(r.get('encode_MBps_per_core'), '.0f')} "
                f"| {fmt(r.get('decode_MBps_per_core'), '.0f')} | {slowest(r['planes'], 'warm') * 1e3:.2f} "
                f"| {slowest(r['planes'], 'cold') * 1e3:.1f} |"
            )  # fmt: skip
        if v:
            lines += ["", "Acceptance checks on this volume:", ""]
            for s in v["same_snr"]:
                lines.append(
                    f"- at {s['snr_db']:.1f} dB (seismic-zfp {s['seismic_zfp']}): cubeslab store ratio "
                    f"{s['cubeslab_ratio']:.2f} vs seismic-zfp {s['seismic_zfp_ratio']:.2f}"
                )
            decode = v["zfp_decode_min_MBps_per_core"]
            lines.append(f"- ZFP decode, slowest setting: {decode:.0f} MB/s per core (target 300)")
            over = v["zfp40_slowest_warm_over_none"]
            lines.append(f"- slowest plane warm, zfp:snr=40 over uncompressed: {over:.2f}x (target <= 2)")
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    volumes = results["volumes"]
    fig, axes = plt.subplots(1, len(volumes), figsize=(6.5 * len(volumes), 4.8), squeeze=False)
    for ax, volume in zip(axes[0], volumes, strict=True):
        rows = [r for r in volume["results"] if "skipped" not in r]
        finite = [r["snr_db"] for r in rows if math.isfinite(r["snr_db"])]
        exact_x = (max(finite) + 15) if finite else 100
        groups = {}
        for r in rows:
            tuned = r["codec"].startswith("zfp:tolerance") or "minbits" in r["codec"]
            label = r["tool"] if r["tool"] != "cubeslab" else (
                "cubeslab zfp (snr / max-error)" if tuned
                else "cubeslab zfp (fixed rate)" if r["codec"].startswith("zfp:rate")
                else "cubeslab (lossless / bitround)")  # fmt: skip
            x = r["snr_db"] if math.isfinite(r["snr_db"]) else exact_x
            groups.setdefault(label, []).append((x, r["store_ratio"]))
        markers = iter("osD^v<>p*")
        for label, points in groups.items():
            points.sort()
            curve = "zfp" in label or label == "seismic-zfp"  # settings along one knob
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            ax.plot(xs, ys, marker=next(markers), linestyle="-" if curve else "", label=label)
        ax.axvline(exact_x - 7, color="grey", linewidth=0.5)
        ax.text(
            exact_x, 0.02, "exact", ha="center", va="bottom", fontsize=8, transform=ax.get_xaxis_transform()
        )
        ax.set_yscale("log")
        ax.set_xlabel("SNR against the source (dB)")
        ax.set_ylabel("compression ratio (whole store)")
        ax.set_title(f"{volume['name']} {' x '.join(map(str, volume['shape']))}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def replot(path: Path) -> None:
    """Redraw compress.png from a recorded compress.json (exact results are null there)."""
    results = json.loads(path.read_text())
    for volume in results["volumes"]:
        for r in volume["results"]:
            if "skipped" not in r and r["snr_db"] is None:
                r["snr_db"] = math.inf
    plot(results, path.with_suffix(".png"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=tuple(SIZES), default="small")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    parser.add_argument("--replot", type=Path, help="only redraw the PNG of a recorded compress.json")
    args = parser.parse_args()
    if args.replot:
        replot(args.replot)
        return
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    DATA.mkdir(parents=True, exist_ok=True)
    work = DATA / "compress-work"
    work.mkdir(exist_ok=True)
    shape = SIZES[args.size]
    tag = "x".join(map(str, shape))
    generated = DATA / f"bench-{tag}.sgy"
    if not generated.exists():
        print(f"generating {generated} ...", flush=True)
        write_segy(generated, SyntheticSurvey(*shape), inlines_per_block=32)
    results = {
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores",
        "runs": args.runs,
        "size": args.size,
        "disk_read_Bps": disk_bandwidth(generated),
        "memory_Bps": memory_bandwidth(),
        "volumes": [],
    }
    f3 = run_volume("F3 crop (real)", F3, args, work)
    gen = run_volume("generated", generated, args, work)
    gen["verdicts"] = verdicts(gen)
    results["volumes"] = [f3, gen]
    shutil.rmtree(work, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    clean = json.loads(json.dumps(results, default=float).replace("Infinity", "null"))
    (args.out / "compress.json").write_text(json.dumps(clean, indent=1))
    (args.out / "compress.md").write_text(markdown(results))
    plot(results, args.out / "compress.png")
    print(markdown(results))


if __name__ == "__main__":
    main()
