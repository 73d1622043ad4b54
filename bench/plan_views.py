"""The planner benchmark's views check: each plane read cold from the orientation copy the reader
routes it to, against the disk's sequential rate and against the same shard files read plainly (one
read() per file, and in pieces at once)."""

from __future__ import annotations

import json
import math
import os
import statistics
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from plan_report import LONE_READ_PIECES

import cubeslab
from cubeslab_bench.measure import (
    disk_bandwidth,
    evict,
    files_under,
    stats,
    timed,
    warm_runs,
)


def plane_windows(shape, shift: int = 0):
    """The middle planes, or planes `shift` away from them."""
    n0, n1, n2 = (n // 2 + shift for n in shape)
    return {
        "inline": (n0, slice(None), slice(None)),
        "crossline": (slice(None), n1, slice(None)),
        "time": (slice(None), slice(None), n2),
    }


SEQUENTIAL_BYTES = 256 << 20


def write_scratch(path: Path, size: int) -> Path:
    block = np.random.default_rng(1).integers(0, 255, 16 << 20, dtype=np.uint8).tobytes()
    with open(path, "wb") as f:
        for _ in range(size // len(block)):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    return path


def views_against_sequential(store: Path, shape, scratch: Path, runs: int) -> dict:
    """Each plane read cold through the survey (so from the copy the reader routes it to), and the
    same shard files read whole by plain read() calls (what the disk gives those files), in turn
    first; in each round after the planes, a cold sequential read of `scratch`, written beside the
    views just after them: the same disk, data of the same age, at the same moments. Each round
    reads planes at new positions: a virtual disk's host may still cache a file read a round ago."""
    cube = cubeslab.open(store)
    times: dict = {plane: [] for plane in plane_windows(shape)}
    plain: dict = {plane: [] for plane in times}
    parallel: dict = {plane: [] for plane in times}
    touched_bytes: dict = {plane: [] for plane in times}
    rates = []
    files = files_under(store)
    # Warm, through the survey as a user reads it: each plane from the copy made for it.
    planes = plane_windows(shape)
    warm = {p: warm_runs(lambda key=key: cube.amplitude.read(key), 9) for p, key in planes.items()}
    for r in range(runs):
        shift = r - runs // 2
        for plane, key in plane_windows(shape, shift).items():
            touched = shards_touched(Path(cube.amplitude.source_for(key)), key)
            touched_bytes[plane].append(sum(f.stat().st_size for f in touched))

            def through_cubeslab(key=key, plane=plane):
                evict(files)
                fresh = cubeslab.open(store).amplitude
                fresh.source_for(key)  # routing is set up once per open, before the data is read
                times[plane].append(timed(lambda: fresh.read(key)))

            def by_read(touched=touched, plane=plane):
                evict(touched)
                plain[plane].append(timed(lambda: [f.read_bytes() for f in touched]))

            def by_parallel_reads(touched=touched, plane=plane):
                evict(touched)
                parallel[plane].append(timed(lambda: read_in_pieces(touched, LONE_READ_PIECES)))

            order = [through_cubeslab, by_read, by_parallel_reads]
            for measure in order[r % 3 :] + order[: r % 3]:
                measure()
        rates.append(disk_bandwidth(scratch, limit=SEQUENTIAL_BYTES, repeats=1))
    sequential = statistics.median(rates)
    views: dict = {"sequential_Bps": sequential, "sequential_rates_Bps": rates, "planes": {}}
    for plane, key in plane_windows(shape).items():
        nbytes = int(np.prod(cube.amplitude.read(key).shape)) * 4
        cold = stats(times[plane])
        v = views["planes"][plane] = {
            "source": Path(cube.amplitude.source_for(key)).name,
            "warm": warm[plane],
            "cold": cold,
            "bytes": nbytes,
            "fraction_of_sequential": nbytes / cold["median_s"] / sequential,
            "shard_files": len(shards_touched(Path(cube.amplitude.source_for(key)), key)),
            "shard_bytes": statistics.median(touched_bytes[plane]),
            "plain_read": stats(plain[plane]),
        }
        v["plain_fraction_of_sequential"] = v["shard_bytes"] / v["plain_read"]["median_s"] / sequential
        v["parallel_read"] = stats(parallel[plane])
        v["parallel_fraction_of_sequential"] = v["shard_bytes"] / v["parallel_read"]["median_s"] / sequential
        ms, plain_ms = cold["median_s"] * 1e3, v["plain_read"]["median_s"] * 1e3
        print(f"{'views':14s} {plane:10s} from {v['source']:22s} cold {ms:8.2f} ms "
              f"= {v['fraction_of_sequential']:.0%} of sequential ({sequential / 1e9:.2f} GB/s); "
              f"{v['shard_files']} shard files by read(): {plain_ms:.2f} ms "
              f"= {v['plain_fraction_of_sequential']:.0%}, by {LONE_READ_PIECES} reads at once: "
              f"{v['parallel_fraction_of_sequential']:.0%}", flush=True)  # fmt: skip
    return views


# A lone file read as this many pieces at once, each by a thread of its own (the GIL is released
# while a read waits): the device sees that many requests in flight. The threads are started
# once, before any timing.
_PIECE_READERS = ThreadPoolExecutor(LONE_READ_PIECES)


def read_in_pieces(paths: list[Path], pieces: int) -> None:
    def piece(job):
        fd, offset, size = job
        os.pread(fd, size, offset)

    fds = [os.open(path, os.O_RDONLY) for path in paths]
    try:
        jobs = []
        for fd, path in zip(fds, paths, strict=True):
            size = path.stat().st_size
            step = math.ceil(size / pieces / 4096) * 4096  # a piece each, in whole pages
            jobs += [(fd, offset, min(step, size - offset)) for offset in range(0, size, step)]
        list(_PIECE_READERS.map(piece, jobs))
    finally:
        for fd in fds:
            os.close(fd)


def shards_touched(array: Path, key) -> list[Path]:
    """The shard files of a sharded array that a window (a tuple of ints and slices) touches."""
    meta = json.loads((array / "zarr.json").read_text())
    shard = meta["chunk_grid"]["configuration"]["chunk_shape"]
    ranges = []
    for k, n, s in zip(key, meta["shape"], shard, strict=True):
        lo, hi = (k, k + 1) if isinstance(k, int) else k.indices(n)[:2]
        ranges.append(range(lo // s, (hi - 1) // s + 1))
    files = (
        array.joinpath("c", *(str(r[i]) for r, i in zip(ranges, idx, strict=True)))
        for idx in np.ndindex(*map(len, ranges))
    )
    return [f for f in files if f.exists()]
