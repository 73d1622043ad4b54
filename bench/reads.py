"""Plane reads of this build against another one (``--baseline``), on the 600 x 800 x 1000 float32
benchmark volume: what the reliability checks of a read cost.

Each build ingests the volume into its own store with the same explicit layout, then reads the three
middle planes (inline, crossline, time slice) in a fresh interpreter of its own:
- warm, held: one open handle, pages cached (median of repeated reads after a warm-up);
- warm, fresh: a new handle for every read, pages cached: every touched shard is opened again (its
  index read and checked, and in this build its identity block too);
- cold: the store's pages evicted and a new handle for every read.

The builds run in turn, round after round, forwards and backwards, so a slow spell of this VM falls
on both alike; each figure is the median over rounds of each round's median, with the spread of the
round medians. The bounds: the plane's bytes copied once at one thread's memory copy rate (warm)
and read at the disk's sequential rate (cold).

Usage: python bench/reads.py --baseline SITE [--rounds 5] [--size full|small] [--out bench/results]
(SITE: a folder holding another build, e.g. `pip install --no-deps --target SITE cubeslab-*.whl`.)
Writes OUT/reads.json and OUT/reads.md.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from cubeslab_bench.measure import bounds, remove, settle
from cubeslab_bench.seismic import survey

ROOT = Path(__file__).resolve().parent
SIZES = {"full": (600, 800, 1000), "small": (300, 400, 500)}
LAYOUT = "16x16x16/128x128x128"
PLANES = ("inline", "crossline", "time")

# Runs inside the build under test: only the public API, so any build can run it.
READER = """
import json, os, statistics, sys, time
from pathlib import Path
import cubeslab

store, repeats = Path(sys.argv[1]), int(sys.argv[2])
files = [p for p in store.rglob("*") if p.is_file()]
shape = cubeslab.open(store).shape
keys = {
    "inline": (shape[0] // 2, slice(None), slice(None)),
    "crossline": (slice(None), shape[1] // 2, slice(None)),
    "time": (slice(None), slice(None), shape[2] // 2),
}

def evict():
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

def timed(action):
    t0 = time.perf_counter()
    action()
    return time.perf_counter() - t0

out = {"open": statistics.median(timed(lambda: cubeslab.open(store)) for _ in range(repeats))}
held = cubeslab.open(store)
for name, key in keys.items():
    for _ in range(3):
        held[key]
    out[f"{name} warm held"] = statistics.median(timed(lambda: held[key]) for _ in range(repeats))
    out[f"{name} warm fresh"] = statistics.median(
        timed(lambda: cubeslab.open(store)[key]) for _ in range(repeats)
    )
    cold = []
    for _ in range(max(3, repeats // 3)):
        evict()
        cold.append(timed(lambda: cubeslab.open(store)[key]))
    out[f"{name} cold"] = statistics.median(cold)
print(json.dumps(out))
"""

INGEST = """
import sys, cubeslab
cubeslab.ingest(sys.argv[1], sys.argv[2], layout=sys.argv[3])
"""


def in_build(site: Path | None, code: str, *args: str) -> str:
    """Run ``code`` in a fresh interpreter with ``site`` (another build) first on its path."""
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    command = [sys.executable, "-W", "ignore", "-c", code, *args]
    run = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return run.stdout


def shards_touched(shape: tuple[int, ...]) -> dict[str, int]:
    """Shards each middle plane opens with ``LAYOUT``."""
    shard = [int(s) for s in LAYOUT.split("/")[1].split("x")]
    grid = [-(-n // s) for n, s in zip(shape, shard, strict=True)]
    return {"inline": grid[1] * grid[2], "crossline": grid[0] * grid[2], "time": grid[0] * grid[1]}


def markdown(results: dict) -> str:
    shape = "x".join(map(str, results["shape"]))
    lines = [
        f"# Plane reads: this build against the baseline ({results['date']})",
        "",
        f"{shape} float32, layout {LAYOUT}, each build's own store; {results['rounds']} rounds of "
        f"{results['repeats']} reads (cold: a third as many), builds in turn. Milliseconds: median over "
        "rounds of each round's median (spread: lowest-highest round median). Ratio: this build's time "
        "over the baseline's (below 1 is faster).",
        "",
        "| plane, state | this build ms | baseline ms | ratio | bound ms |",
        "|---|---|---|---|---|",
    ]
    for case, row in results["cases"].items():
        if case == "open":
            continue
        now, base = row["this"], row["baseline"]
        bound = results["bounds_ms"][case.split()[0]]["cold" if case.endswith("cold") else "warm"]
        lines.append(
            f"| {case} | {now['median_ms']:.2f} ({now['low_ms']:.2f}-{now['high_ms']:.2f}) | "
            f"{base['median_ms']:.2f} ({base['low_ms']:.2f}-{base['high_ms']:.2f}) | "
            f"{now['median_ms'] / base['median_ms']:.2f} | {bound:.2f} |"
        )
    lines += [
        "",
        "Opening a shard again (warm fresh, minus warm held, minus opening the store: per shard touched), "
        "microseconds:",
        "",
    ]
    lines += ["| plane | shards | this build | baseline |", "|---|---|---|---|"]
    for plane, n in results["shards_touched"].items():
        per = results["per_shard_open_us"][plane]
        lines.append(f"| {plane} | {n} | {per['this']:.1f} | {per['baseline']:.1f} |")
    lines += [
        "",
        "The identity is checked once per shard opened (its block lies on the index's page), never per "
        "chunk: the held-handle rows are the per-chunk cost.",
        f"Opening the store (group, coordinates): {results['cases']['open']['this']['median_ms']:.2f} ms "
        f"this build, {results['cases']['open']['baseline']['median_ms']:.2f} ms baseline.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a folder holding another build")
    parser.add_argument("--size", choices=SIZES, default="full")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    args = parser.parse_args()
    shape = SIZES[args.size]
    data = ROOT / "data"
    data.mkdir(exist_ok=True)
    sgy = survey(data, shape)
    scratch = data / "reads-scratch"
    scratch.mkdir(exist_ok=True)
    builds = {"this": None, "baseline": args.baseline}
    stores = {name: scratch / f"{name}.zarr" for name in builds}
    for name, site in builds.items():
        print(f"ingest with {name} build ...", flush=True)
        remove(stores[name])
        in_build(site, INGEST, str(sgy), str(stores[name]), LAYOUT)
    os.sync()
    rounds: dict[str, list[dict]] = {name: [] for name in builds}
    for r in range(args.rounds):
        for name in list(builds)[:: 1 if r % 2 == 0 else -1]:
            settle()
            print(f"round {r + 1}: {name} ...", flush=True)
            measured = in_build(builds[name], READER, str(stores[name]), str(args.repeats))
            rounds[name].append(json.loads(measured))
    cases = list(rounds["this"][0])
    table = {
        case: {
            name: {
                "median_ms": statistics.median(x[case] for x in rounds[name]) * 1e3,
                "low_ms": min(x[case] for x in rounds[name]) * 1e3,
                "high_ms": max(x[case] for x in rounds[name]) * 1e3,
            }
            for name in builds
        }
        for case in cases
    }
    touched = shards_touched(shape)

    def ms(case: str, name: str) -> float:
        return table[case][name]["median_ms"]

    per_shard = {
        plane: {
            name: (ms(f"{plane} warm fresh", name) - ms(f"{plane} warm held", name) - ms("open", name))
            * 1e3
            / touched[plane]
            for name in builds
        }
        for plane in PLANES
    }
    rates = bounds(scratch)
    plane_bytes = {
        "inline": shape[1] * shape[2] * 4,
        "crossline": shape[0] * shape[2] * 4,
        "time": shape[0] * shape[1] * 4,
    }
    results = {
        "shape": shape,
        "layout": LAYOUT,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "rounds": args.rounds,
        "repeats": args.repeats,
        "cases": table,
        "shards_touched": touched,
        "per_shard_open_us": per_shard,
        "bounds_ms": {
            plane: {
                "warm": n / rates["memory_copy_Bps"] * 1e3,
                "cold": n / rates["disk_read_Bps"] * 1e3,
            }
            for plane, n in plane_bytes.items()
        },
        "rounds_raw": rounds,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "reads.json").write_text(json.dumps(results, indent=1))
    (args.out / "reads.md").write_text(markdown(results))
    print(markdown(results))
    for store in stores.values():
        remove(store)


if __name__ == "__main__":
    main()
