"""Measurement helpers shared by every benchmark: page-cache eviction, warm and cold timing,
and the physical bounds (memory copy and sequential disk bandwidth).

Every timed figure is a list of runs summarised as median, min and max (:func:`stats`).
"""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

MIN_RUNS = 5
"""Fewest runs behind any figure a study reports."""


def files_under(path: Path) -> list[Path]:
    path = Path(path)
    return [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]


def size_on_disk(path: Path) -> int:
    """Bytes of every file under ``path`` (apparent sizes: what a copy would move)."""
    return sum(p.stat().st_size for p in files_under(path))


def remove(path: Path) -> None:
    """Delete a file or a folder, if it exists (scratch stores between measurements)."""
    path = Path(path)
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def evict(paths: list[Path]) -> None:
    """Drop the files' pages from the page cache (they must not be mapped by this process)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def settle(idle: float = 0.9, most_s: float = 10.0, step_s: float = 0.25) -> float:
    """Wait until the CPUs are at least `idle` idle over a `step_s` stretch (at most `most_s`);
    returns the seconds waited. Writing a store leaves the kernel busy with it for seconds after
    the writes (and `os.sync()`) return; reads timed then ran up to 1.5x slower here warm."""

    def busy_and_total() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle_ticks = fields[3] + fields[4]  # idle + iowait
        return sum(fields) - idle_ticks, sum(fields)

    if not os.path.exists("/proc/stat"):
        return 0.0
    start = time.perf_counter()
    while time.perf_counter() - start < most_s:
        busy0, total0 = busy_and_total()
        time.sleep(step_s)
        busy1, total1 = busy_and_total()
        if total1 > total0 and (busy1 - busy0) / (total1 - total0) <= 1 - idle:
            break
    return time.perf_counter() - start


def stats(times: list[float]) -> dict:
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "runs": len(times),
    }


def timed(action: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    action()
    return time.perf_counter() - t0


def repeat(action: Callable[[], object], runs: int = MIN_RUNS) -> dict:
    """``action`` timed ``runs`` times as it is (no warm-up, no eviction)."""
    return stats([timed(action) for _ in range(runs)])


def warm_up(read: Callable[[], object], reads: int = 6, seconds: float = 1e-3) -> None:
    """Repeat `read` at least `reads` times and for at least `seconds`: caches filled, and the
    CPUs up to speed after an idle spell. Six reads, because after reads of other data a warm
    read of a few hundred microseconds here settles only by its fifth repeat (a 16x16x8-chunk
    inline: 0.52, 0.37, 0.28, 0.26, then 0.25 ms each): the CPU's caches take back a working set
    of megabytes over several passes, not one."""
    start, done = time.perf_counter(), 0
    while done < reads or time.perf_counter() - start < seconds:
        read()
        done += 1


def warm_runs(read: Callable[[], object], repeats: int) -> dict:
    warm_up(read)
    return repeat(read, repeats)


def cold_runs(open_reader: Callable[[], Callable[[], object]], paths: list[Path], repeats: int) -> dict:
    """Each run: the files evicted, the reader opened afresh (no process-side cache survives),
    then one read timed."""
    times = []
    for _ in range(repeats):
        gc.collect()
        evict(paths)
        read = open_reader()
        times.append(timed(read))
        del read
    return stats(times)


def memory_bandwidth() -> float:
    """Single-thread memory copy bandwidth, bytes/s (median of 5 copies of 256 MiB)."""
    src = np.ones(32 << 20, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    return src.nbytes / repeat(lambda: np.copyto(dst, src))["median_s"]


def disk_bandwidth(path: Path, limit: int = 256 << 20, repeats: int = 5) -> float:
    """Cold sequential read bandwidth of the file's device, bytes/s: the median of `repeats` reads
    of `limit` bytes in 16 MiB requests, each from its own evicted stretch of the file where the
    file is long enough. A median, as every timing beside it: a virtual disk varies from run to
    run, and its best run (or a stretch the host still caches) is not what reads meet."""
    size = Path(path).stat().st_size
    span = max(size - limit, 0)
    rates = []
    for i in range(repeats):
        evict([path])
        start = (span * i // max(repeats - 1, 1)) // 4096 * 4096
        done = 0
        t0 = time.perf_counter()
        with open(path, "rb", buffering=0) as f:
            f.seek(start)
            while done < limit:
                block = f.read(16 << 20)
                if not block:
                    break
                done += len(block)
        rates.append(done / (time.perf_counter() - t0))
    return statistics.median(rates)


def scratch_file_bandwidth(directory: Path, size: int = 256 << 20) -> float:
    """:func:`disk_bandwidth` measured on a scratch file written in ``directory`` (then removed)."""
    path = Path(directory) / ".cubeslab-bandwidth.bin"
    block = np.random.default_rng(0).integers(0, 255, 16 << 20, dtype=np.uint8).tobytes()
    with open(path, "wb") as f:
        for _ in range(max(1, size // len(block))):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    try:
        return disk_bandwidth(path, limit=size)
    finally:
        path.unlink()


def bounds(directory: Path, scratch_bytes: int = 256 << 20) -> dict:
    """The bandwidths a study's physical bounds divide by: memory copy and cold sequential disk read
    (on a scratch file in ``directory``, the filesystem the study's data lives on)."""
    return {
        "memory_copy_Bps": memory_bandwidth(),
        "disk_read_Bps": scratch_file_bandwidth(directory, scratch_bytes),
    }
