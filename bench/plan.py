"""Planner validation: the cost model's predictions against measured reads over a sweep of layouts.

For each generated volume (cube-like, long in the last dimension like an MSI cube, flat), the
planner ranks every admissible layout for the volume's access mix; the sweep writes and reads a
spread of them (the pick, its runners-up, the picks for warm and for cold reads alone, cube:N,
pyrus-formula's formula, and layouts drawn evenly from the rest of the ranking), measuring every
access warm and cold beside the model's prediction for the written store. Reported: the median
absolute error of the predictions per access type and cache state, and the measured objective (the
slowest access cold plus the slowest warm, weighed as the planner weighs the two states) of the
optimizer's pick against the best layout of the sweep; where they differ, the two are then
measured again side by side (`--rounds`), since the best of thirty noisy medians is partly luck.

Then, on the 600 x 800 x 1000 float32 benchmark volume: the slowest plane of the `auto` layout
against `pyrus-formula` and 64^3 chunks, and of the planner's pick for warm reads alone (the four
stored side by side and read in turn), and each plane read from the orientation copies (`--views`),
warm, and cold against the device's sequential bandwidth, measured in turn with the planes on a file
written just after the views.

A volume's layouts are all written first (each followed by a sync and a wait until the CPUs
settle), then read side by side: each round reads every access of every layout in turn, forwards
and backwards in turn, so a slow spell of this shared VM falls on all layouts alike instead of on
whichever was being measured then. All warm rounds come before any cold one, as evictions leave the
kernel busy for a while. Warm: the page cache holds the files and the handle has just read the
same window. Cold: the array's files are evicted with posix_fadvise(DONTNEED) and the handle
reopened before each read. Medians of the runs (min and max in the JSON). The model plans with
the device profile of the disk holding bench/data, measured again before each volume
(`--reuse-profile` keeps a saved one).

Usage: python bench/plan.py [--size small|full] [--layouts 30] [--out bench/results]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import math
import shutil
import statistics
import time
from functools import partial
from pathlib import Path

import numpy as np
from plan_report import WARM_ONLY, markdown, scatter
from plan_views import SEQUENTIAL_BYTES, plane_windows, views_against_sequential, write_scratch

import cubeslab
from cubeslab import _engine
from cubeslab.plan import measure_profile, plan
from cubeslab.profiles import profile_path
from cubeslab.selection import normalize_key
from cubeslab.synthetic import SyntheticSurvey, write_segy
from cubeslab_bench.measure import (
    cold_runs,
    disk_bandwidth,
    files_under,
    settle,
    stats,
    timed,
    warm_up,
)

ROOT = Path(__file__).resolve().parent
DATA = ROOT / "data"

PLANES = "inline,crossline,time"
MSI = "spectra:5,ion-images:25,box:5x5x1000"

VOLUMES = {
    # name: (shape at full size, at small size, dtype, access mix)
    "cube": ((384, 384, 512), (96, 96, 128), "float32", PLANES),
    "msi": ((64, 64, 40000), (24, 24, 8000), "uint16", MSI),
    "flat": ((1024, 1024, 64), (256, 256, 32), "float32", PLANES),
}


def volume_data(shape, dtype) -> np.ndarray:
    if np.dtype(dtype) == np.float32:
        return SyntheticSurvey(*shape, seed=5).block(0, shape[0])
    # MSI-like counts: a baseline with sparse peaks along m/z.
    rng = np.random.default_rng(5)
    data = rng.poisson(2.0, size=shape).astype(np.uint16)
    peaks = rng.choice(shape[-1], size=max(shape[-1] // 200, 1), replace=False)
    data[..., peaks] += rng.integers(50, 5000, size=(*shape[:-1], len(peaks)), dtype=np.uint16)
    return data


def layout_key(entry: dict) -> str:
    return "x".join(map(str, entry["layout"]["inner"])) + "/" + "x".join(map(str, entry["layout"]["shard"]))


def sweep_layouts(shape, dtype, access, count) -> tuple[list[dict], dict]:
    """The layouts to measure, each with its planner evaluation and how it was chosen; and the pick."""
    profile = profile_path(DATA)
    ranked = plan(shape, dtype, access=access, profile=profile, top=1_000_000)
    chosen: dict[str, dict] = {}

    def add(entry, why):
        chosen.setdefault(layout_key(entry), {**entry, "why": why})

    for i, entry in enumerate(ranked[:5]):
        add(entry, "pick" if i == 0 else f"runner-up {i}")
    # The planner's picks for each cache state alone: the sweep spans the layouts either state favours.
    for state in ("warm", "cold"):
        add(plan(shape, dtype, access=access, profile=profile, state=state, top=1)[0], f"{state} pick")
    for name in ("pyrus-formula", "cube:8", "cube:16", "cube:32", "cube:64", "cube:128"):
        add(plan(shape, dtype, layout=name, access=access, profile=profile)[0], name)
    rest = ranked[5:]
    wanted = max(count - len(chosen), 0)
    for i in np.linspace(0, len(rest) - 1, num=min(wanted, len(rest))).astype(int):
        add(rest[i], f"rank {i + 6} of {len(ranked)}")
    return list(chosen.values()), ranked[0]


def write_layout(path: Path, entry: dict, data: np.ndarray) -> None:
    inner, shard = entry["layout"]["inner"], entry["layout"]["shard"]
    if path.exists():
        shutil.rmtree(path)
    cubeslab.Array.from_numpy(path, data, chunks=inner, shards=shard)
    os.sync()  # written back: stores are read long after they are written
    settle()


def access_keys(entry: dict) -> dict:
    return {a["access"]: tuple(slice(lo, hi) for lo, hi in a["window"]) for a in entry["accesses"]}


def cold_time(path: Path, key, runs: int) -> dict:
    def opener():
        fresh = cubeslab.Array(path)
        return lambda: fresh.read(key)

    return cold_runs(opener, files_under(path), runs)


def predictions(path: Path, entry: dict, profile: str) -> dict:
    """The cost model's warm and cold time of each access, for the store as written."""
    model = _engine.CostModel([str(path)], profile=profile)
    out = {}
    for a in entry["accesses"]:
        starts = [lo for lo, _ in a["window"]]
        stops = [hi for _, hi in a["window"]]
        steps = [1] * len(starts)
        out[a["access"]] = {
            f"predicted_{state}_s": json.loads(model.predict(0, starts, stops, steps, state == "cold"))[
                "seconds"
            ]
            for state in ("warm", "cold")
        }
    return out


def measure_layouts(name: str, entries: dict[str, dict], data: np.ndarray, warm: int, cold: int) -> dict:
    """Every layout written, then read side by side (:func:`side_by_side`): every access warm in
    `warm` rounds, then cold in `cold` rounds. Returns "measured": {label: {access: {"warm": stats,
    "cold": stats}}} and "paths": {label: store}, the stores left for the caller to remove."""
    paths = {label: DATA / f"plan-{name}-{label}.zarr" for label in entries}
    for label, entry in entries.items():
        write_layout(paths[label], entry, data)
    accesses = {label: access_keys(e) for label, e in entries.items()}
    keys = next(iter(accesses.values()))
    assert all(k == keys for k in accesses.values()), "every layout is read at the same windows"
    times = {state: side_by_side(paths, keys, runs, cold=state == "cold") for state, runs in
             (("warm", warm), ("cold", cold))}  # fmt: skip
    measured = {
        label: {a: {state: times[state][label][a] for state in times} for a in keys} for label in entries
    }
    return {"paths": paths, "measured": measured}


def slowest(measured: dict, weights: dict) -> float:
    """The objective, measured: the slowest access's warm median and the slowest's cold median (maybe
    another access), weighed as the planner weighs the two cache states."""
    return sum(weights[s] * max(m[s]["median_s"] for m in measured.values()) for s in ("warm", "cold"))


def head_to_head(name: str, entries: dict[str, dict], data: np.ndarray, rounds: int, weights: dict) -> dict:
    """The pick and the sweep's best measured again side by side, `rounds` rounds warm and cold.
    (The best of thirty noisy medians is biased low: it won partly by luck, which this second
    measurement does not repeat.)"""
    run = measure_layouts(f"{name}-final", entries, data, rounds, rounds)
    for path in run["paths"].values():
        shutil.rmtree(path)
    return {
        label: {"layout": layout_key(entries[label]), "accesses": m, "score_s": slowest(m, weights)}
        for label, m in run["measured"].items()
    }


def relative_error(predicted: float, measured: float) -> float:
    return abs(predicted - measured) / measured


def run_volume(name: str, shape, dtype, access, args, profile: str) -> dict:
    print(f"\n== {name}: {shape} {dtype}, accesses {access}", flush=True)
    data = volume_data(shape, dtype)
    layouts, pick = sweep_layouts(shape, dtype, access, args.layouts)
    t0 = time.perf_counter()
    entries = {str(i): entry for i, entry in enumerate(layouts)}
    run = measure_layouts(name, entries, data, args.warm, args.cold)
    # The device measured again, straight after the reads: how far it moved while they ran, and the
    # errors had the model been given the device as it was at the end.
    after = None if args.reuse_profile else current_profile(False)
    rows = []
    for i, (label, entry) in enumerate(entries.items()):
        predicted = predictions(run["paths"][label], entry, profile)
        measured = {a: {**m, **predicted[a]} for a, m in run["measured"][label].items()}
        if after:
            again = predictions(run["paths"][label], entry, after)
            for a, m in measured.items():
                m["after"] = again[a]
        row = {
            "layout": layout_key(entry),
            "why": entry["why"],
            "padding": entry["padding"],
            "predicted_score_s": entry["score"],
            "accesses": measured,
        }
        row["measured_score_s"] = slowest(measured, pick["weights"])
        rows.append(row)
        cells = "  ".join(
            f"{a} {m['warm']['median_s'] * 1e3:.2f}/{m['predicted_warm_s'] * 1e3:.2f} "
            f"{m['cold']['median_s'] * 1e3:.1f}/{m['predicted_cold_s'] * 1e3:.1f}"
            for a, m in measured.items()
        )
        print(f"[{i + 1}/{len(layouts)}] {row['layout']:28s} {entry['why']:18s} {cells}", flush=True)
    for path in run["paths"].values():
        shutil.rmtree(path)
    print(f"{len(layouts)} layouts written and read in {time.perf_counter() - t0:.0f} s", flush=True)
    errors = prediction_errors(rows, lambda m: m)
    errors_after = prediction_errors(rows, lambda m: m["after"]) if after else None
    best = min(rows, key=lambda r: r["measured_score_s"])
    picked = next(r for r in rows if r["layout"] == layout_key(pick))
    final = None
    if best is not picked:
        by_key = {layout_key(e): e for e in layouts}
        final = head_to_head(name, {"pick": by_key[picked["layout"]], "best": by_key[best["layout"]]}, data,
                             args.rounds, pick["weights"])  # fmt: skip
        final["pick_over_best"] = final["pick"]["score_s"] / final["best"]["score_s"]
        pick_ms, best_ms = final["pick"]["score_s"] * 1e3, final["best"]["score_s"] * 1e3
        print(f"head to head ({args.rounds} rounds): pick {pick_ms:.1f} ms, best {best_ms:.1f} ms, "
              f"ratio {final['pick_over_best']:.2f}", flush=True)  # fmt: skip
    return {
        "shape": list(shape),
        "dtype": dtype,
        "access": access,
        "layouts_ranked": None,
        "rows": rows,
        "errors": errors,
        "errors_after": errors_after,
        "drift": profile_drift(json.loads(profile), json.loads(after)) if after else None,
        "weights": pick["weights"],
        "pick": picked["layout"],
        "pick_score_s": picked["measured_score_s"],
        "best": best["layout"],
        "best_score_s": best["measured_score_s"],
        "pick_over_best": picked["measured_score_s"] / best["measured_score_s"],
        "head_to_head": final,
    }


def prediction_errors(rows: list[dict], predicted) -> dict:
    """Median and largest relative error per access and cache state, over the sweep's rows;
    `predicted` picks the predictions out of a row's access (those of the profile before the sweep,
    or after it)."""
    errors = {}
    for a in rows[0]["accesses"]:
        for state in ("warm", "cold"):
            e = [
                relative_error(
                    predicted(r["accesses"][a])[f"predicted_{state}_s"], r["accesses"][a][state]["median_s"]
                )
                for r in rows
            ]
            errors[f"{a} {state}"] = {"median": statistics.median(e), "max": max(e)}
    return errors


def profile_drift(before: dict, after: dict) -> dict:
    """A few of the rates the predictions lean on, in the profile measured before a sweep and in the
    one measured after it: {quantity: [before, after]}."""

    def rates(p: dict) -> dict:
        memory, io = p["memory"], p["io"]
        within = {w["bytes"]: w["crc"] for w in memory["crc_within"]}
        cold = io["cold"][io["sizes"].index(1 << 20)][io["depths"].index(8)]
        return {
            "crc32c from memory, GB/s per thread": memory["crc"] / 1e9,
            "crc32c over 8 MiB checked again and again, GB/s per thread": within.get(8 << 20, math.nan) / 1e9,
            "memory copy, GB/s per thread": memory["copy"] / 1e9,
            "two threads' efficiency": p["engine"]["parallel_efficiency"],
            "cold 1 MiB reads, 8 in flight, GB/s": cold / 1e9,
        }

    b, a = rates(before), rates(after)
    return {k: [b[k], a[k]] for k in b}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=("small", "full"), default="full")
    parser.add_argument("--layouts", type=int, default=30)
    parser.add_argument("--warm", type=int, default=9)
    parser.add_argument("--cold", type=int, default=7)
    parser.add_argument(
        "--rounds", type=int, default=31, help="rounds of the pick against the best, side by side"
    )
    parser.add_argument("--volumes", default=",".join(VOLUMES))
    parser.add_argument("--benchmark-volume", default="600,800,1000", help="'' to skip that part")
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    parser.add_argument(
        "--reuse-profile", action="store_true", help="plan with the saved profile if there is one"
    )
    args = parser.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    results: dict = {"profile": None, "size": args.size, "disk_read_Bps": None, "volumes": {}}
    for name in [v for v in args.volumes.split(",") if v]:
        full, small, dtype, access = VOLUMES[name]
        shape = full if args.size == "full" else small
        profile = current_profile(args.reuse_profile)
        results["profile"] = json.loads(profile)
        results["volumes"][name] = run_volume(name, shape, dtype, access, args, profile)
        results["volumes"][name]["profile"] = json.loads(profile)
    if args.benchmark_volume:
        shape = tuple(int(x) for x in args.benchmark_volume.split(","))
        profile = current_profile(args.reuse_profile)
        results["profile"] = json.loads(profile)
        results["benchmark_volume"] = benchmark_volume(shape, args, profile)
        results["disk_read_Bps"] = results["benchmark_volume"]["disk_read_Bps"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "plan.json").write_text(json.dumps(results, indent=1))
    (args.out / "plan.md").write_text(markdown(results))
    scatter(results, args.out / "plan.png")
    print(f"wrote {args.out / 'plan.json'}, plan.md and plan.png")


def current_profile(reuse: bool) -> str:
    """The device profile of bench/data as JSON text, measured now (unless `reuse` and one is saved).

    Measured again before each volume: this virtual disk's speed drifts by tens of percent within
    an hour, and a model is judged with the device as it is when its layouts are read, as a user
    would profile before planning."""
    path = profile_path(DATA)
    if not (reuse and path.is_file()):
        print("measuring the device profile of bench/data (about 30 s)", flush=True)
        # The previous volume's stores were just deleted: a profile measured while the kernel is
        # still busy with them took 4 ms for a worker to arrive (not 2 us) and read 4 KiB cold at
        # a fifth of the usual rate.
        os.sync()
        settle()
        measure_profile(DATA)
    return path.read_text()


def benchmark_volume(shape, args, profile: str) -> dict:
    """Auto against pyrus-formula, 64^3 and the warm-only pick on the benchmark volume; planes
    cold from the views."""
    print(f"\n== benchmark volume {shape}", flush=True)
    tag = "x".join(map(str, shape))
    sgy = DATA / f"bench-{tag}.sgy"
    if not sgy.exists():
        print(f"generating {sgy} ...", flush=True)
        write_segy(sgy, SyntheticSurvey(*shape), inlines_per_block=32)
        os.sync()  # dirty pages cannot be evicted: the bandwidth below would be the page cache's
    disk = disk_bandwidth(sgy)
    out: dict = {"shape": list(shape), "disk_read_Bps": disk, "strategies": {}}
    # Strategy name -> layout. The last, the planner's pick for warm reads alone, shows how far any
    # layout gets warm against 64^3 while every chunk read is checked whole.
    warm_only = plan(shape, "float32", state="warm", profile=profile_path(DATA), top=1)[0]
    strategies = {
        "auto": "auto",
        "pyrus-formula": "pyrus-formula",
        "cube:64": "cube:64",
        WARM_ONLY: layout_key(warm_only),
    }
    stores = {s: DATA / f"plan-bench-{i}.zarr" for i, s in enumerate(strategies)}
    summaries = {}
    for strategy, store in stores.items():
        kwargs = {"views": ["inline", "crossline", "time"]} if strategy == "auto" else {}
        t0 = time.perf_counter()
        summaries[strategy] = cubeslab.ingest(
            sgy, store, overwrite=True, layout=strategies[strategy], **kwargs
        )
        summaries[strategy]["seconds"] = time.perf_counter() - t0
        os.sync()  # ingest leaves its writes to the kernel; "cold" reads must not meet dirty pages
    settle()
    # The views' yardstick, written now so it is as old as they are on the disk.
    scratch = write_scratch(DATA / "plan-sequential.bin", SEQUENTIAL_BYTES)
    planes = plane_windows(shape)
    arrays = {strategy: store / "amplitude" for strategy, store in stores.items()}
    warm = side_by_side(arrays, planes, args.warm, cold=False)
    cold = side_by_side(arrays, planes, args.cold, cold=True)
    for strategy, store in stores.items():
        summary = summaries[strategy]
        entry = {
            "layout": summary["plan"]["layout"],
            "ingest_s": summary["seconds"],
            "planes": {p: {"warm": warm[strategy][p], "cold": cold[strategy][p]} for p in planes},
            "bounds": plane_bounds(arrays[strategy], shape, planes, profile, disk),
        }
        for p, m in entry["planes"].items():
            w_ms, c_ms = m["warm"]["median_s"] * 1e3, m["cold"]["median_s"] * 1e3
            print(f"{strategy:14s} {p:10s} warm {w_ms:8.2f} ms  cold {c_ms:8.1f} ms", flush=True)
        if strategy == "auto":
            entry["views"] = views_against_sequential(store, shape, scratch, args.cold)
            entry["stored_bytes"] = summary["stored_bytes"]
            entry["view_bytes"] = {k: v["stored_bytes"] for k, v in summary["views"].items()}
        out["strategies"][strategy] = entry
    scratch.unlink()
    for store in stores.values():
        shutil.rmtree(store)
    for state in ("warm", "cold"):
        slowest = {
            s: max(p[state]["median_s"] for p in e["planes"].values()) for s, e in out["strategies"].items()
        }
        out[f"slowest_{state}_s"] = slowest
        out[f"auto_speedup_{state}"] = {s: slowest[s] / slowest["auto"] for s in slowest if s != "auto"}
    return out


def plane_bounds(array: Path, shape, planes: dict, profile: str, disk_Bps: float) -> dict:
    """The physical bound of each plane's read, beside its measured time. Warm: the bytes of the
    chunks the plane touches, each read whole to check its crc32c, at the profile's checksum rate
    on all threads (memory bandwidth, near enough: the check is what moves those bytes). Cold: the
    bytes the read requests from the device, at the disk's sequential rate."""
    model = _engine.CostModel([str(array)], profile=profile)
    rates = json.loads(profile)
    crc_Bps = rates["memory"]["crc"] * rates["threads"]
    out = {}
    for plane, key in planes.items():
        (starts, stops, steps), _, _ = normalize_key(key, shape)
        warm = json.loads(model.predict(0, starts, stops, steps, False))
        cold = json.loads(model.predict(0, starts, stops, steps, True))
        out[plane] = {
            "chunk_bytes": warm["touched_bytes"],
            "warm_bound_s": warm["touched_bytes"] / crc_Bps,
            "device_bytes": cold["device_bytes"],
            "cold_bound_s": cold["device_bytes"] / disk_Bps,
        }
    return out


WARM_TIMED = 3
"""Warm reads timed in each round, one after another."""


def side_by_side(arrays: dict[str, Path], keys: dict, runs: int, cold: bool) -> dict:
    """Each window of each array timed in rounds that read every array in turn, forwards and
    backwards in turn: a slow spell of this shared VM falls on all arrays alike, not on whichever was
    measured then. Warm: every array open, and each timed read follows reads of the same window, as
    the model's warm prediction assumes (a read of other arrays in between leaves a small window's
    chunks and mappings out of the CPU's caches: here 1.5-3x slower for reads under 2 ms): as many
    as `warm_up` makes, until the read has settled. (On this VM the first read after the CPUs idle
    for 10 ms or more is 2.5-4x slower, and the second still up to 2x, until about a millisecond of
    work has passed.) Then `WARM_TIMED` reads are timed: a single read of a tenth of a millisecond
    catches a stall of this VM often enough to move a median of nine.
    Cold: the array's files evicted and the array opened afresh before each read."""
    times = {label: {k: [] for k in keys} for label in arrays}
    readers = {} if cold else {label: cubeslab.Array(path) for label, path in arrays.items()}
    for r in range(runs):
        for label, path in list(arrays.items())[:: 1 if r % 2 == 0 else -1]:
            for k, key in keys.items():
                if cold:
                    times[label][k].append(cold_time(path, key, 1)["median_s"])
                else:
                    read = partial(readers[label].read, key)
                    warm_up(read)
                    times[label][k] += [timed(read) for _ in range(WARM_TIMED)]
    return {label: {k: stats(ts) for k, ts in per_key.items()} for label, per_key in times.items()}


if __name__ == "__main__":
    main()
