"""The device's own time for the reads a window needs: the byte ranges of the inner chunks it touches in
a sharded Zarr v3 array (found in the shards' indexes), read with direct I/O, many at once. This is the
bound of a cold read that is limited by requests rather than bytes, which the sequential disk rate
hides: hundreds of small chunks cost what the device needs per request, not their bytes over its
bandwidth."""

from __future__ import annotations

import itertools
import json
import mmap
import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

QUEUE_DEPTH = 64
"""Reads in flight: deeper than any queue the engine keeps, so the device, not the reader, is the limit."""

BLOCK = 4096
"""Direct I/O offsets and lengths are multiples of this."""


def chunk_ranges(array: Path, window: tuple[slice, ...]) -> list[tuple[Path, int, int]]:
    """(shard file, offset, length) of every stored inner chunk that ``window`` (slices with unit
    steps, one per dimension) touches, in a sharded array whose index sits at the end of each shard."""
    meta = json.loads((array / "zarr.json").read_text())
    shape = meta["shape"]
    shard = meta["chunk_grid"]["configuration"]["chunk_shape"]
    (sharding,) = [c for c in meta["codecs"] if c["name"] == "sharding_indexed"]
    inner = sharding["configuration"]["chunk_shape"]
    if sharding["configuration"].get("index_location", "end") != "end":
        raise ValueError(f"{array}: shard index at the start")
    per_shard = [s // i for s, i in zip(shard, inner, strict=True)]
    n_chunks = int(np.prod(per_shard))
    separator = meta.get("chunk_key_encoding", {}).get("configuration", {}).get("separator", "/")
    spans = [
        range(w.indices(n)[0] // c, (w.indices(n)[1] - 1) // c + 1)
        for w, n, c in zip(window, shape, inner, strict=True)
    ]
    by_shard: dict[tuple[int, ...], list[int]] = {}
    for chunk in itertools.product(*spans):
        key = tuple(g // p for g, p in zip(chunk, per_shard, strict=True))
        local = np.ravel_multi_index(tuple(g % p for g, p in zip(chunk, per_shard, strict=True)), per_shard)
        by_shard.setdefault(key, []).append(int(local))
    ranges = []
    for key, locals_ in by_shard.items():
        path = array / ("c" + separator + separator.join(map(str, key)))
        if not path.exists():
            continue
        size = path.stat().st_size
        index_bytes = n_chunks * 16
        with open(path, "rb") as f:
            f.seek(size - index_bytes - 4)  # the index, then its crc32c
            index = np.frombuffer(f.read(index_bytes), dtype="<u8").reshape(-1, 2)
        for local in locals_:
            offset, length = (int(v) for v in index[local])
            if offset != 2**64 - 1:
                ranges.append((path, offset, length))
    return ranges


def device_time(ranges: list[tuple[Path, int, int]], runs: int = 5) -> dict:
    """Seconds to read ``ranges`` with direct I/O, :data:`QUEUE_DEPTH` at a time (median, min, max of
    ``runs``), and the number of requests and bytes."""
    spans = []
    for path, offset, length in ranges:
        start = offset // BLOCK * BLOCK
        spans.append((path, start, -(-(offset + length - start) // BLOCK) * BLOCK))
    largest = max(n for _, _, n in spans)
    local = threading.local()  # one page-aligned buffer per worker thread, as direct reads need
    times = []
    with ThreadPoolExecutor(QUEUE_DEPTH) as pool:
        for _ in range(runs):
            files = {p: os.open(p, os.O_RDONLY | os.O_DIRECT) for p in {p for p, _, _ in spans}}

            def read(span, files=files):
                if not hasattr(local, "buffer"):
                    local.buffer = mmap.mmap(-1, largest)
                path, start, n = span
                os.preadv(files[path], [memoryview(local.buffer)[:n]], start)

            t0 = time.perf_counter()
            list(pool.map(read, spans))
            times.append(time.perf_counter() - t0)
            for fd in files.values():
                os.close(fd)
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "requests": len(spans),
        "bytes": sum(n for _, _, n in ranges),
    }
