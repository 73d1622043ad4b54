"""Measurement helpers shared by the benchmarks: page-cache eviction, warm and cold timing,
and the physical bounds (memory copy and sequential disk bandwidth)."""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def files_under(path: Path) -> list[Path]:
    return [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]


def evict(paths: list[Path]) -> None:
    """Drop the files' pages from the page cache (they must not be mapped by this process)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def stats(times: list[float]) -> dict:
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "runs": len(times),
    }


def warm_runs(read: Callable[[], object], repeats: int) -> dict:
    read()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        read()
        times.append(time.perf_counter() - t0)
    return stats(times)


def cold_runs(open_reader: Callable[[], Callable[[], object]], paths: list[Path], repeats: int) -> dict:
    times = []
    for _ in range(repeats):
        gc.collect()
        evict(paths)
        read = open_reader()
        t0 = time.perf_counter()
        read()
        times.append(time.perf_counter() - t0)
        del read
    return stats(times)


def memory_bandwidth() -> float:
    """Single-thread memory copy bandwidth, bytes/s (median of 5 copies of 256 MiB)."""
    src = np.ones(32 << 20, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    return src.nbytes / statistics.median(times)


def disk_bandwidth(path: Path, limit: int = 512 << 20, repeats: int = 3) -> float:
    """Cold sequential read bandwidth of the file's device, bytes/s: the best of `repeats` reads of
    `limit` bytes in 16 MiB requests (the device's capability; a virtual disk varies run to run)."""
    best = 0.0
    for _ in range(repeats):
        evict([path])
        done = 0
        t0 = time.perf_counter()
        with open(path, "rb", buffering=0) as f:
            while done < limit:
                block = f.read(16 << 20)
                if not block:
                    break
                done += len(block)
        best = max(best, done / (time.perf_counter() - t0))
    return best
