"""The benchmark's request bound reads the right bytes: the chunk ranges it finds in the shard indexes
of a store cubeslab wrote hold exactly the chunks numpy cuts from the same array."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import cubeslab
from cubeslab_bench.requests import chunk_ranges, device_time

CHUNKS, SHARDS = (4, 3, 5), (8, 6, 10)


def test_chunk_ranges_hold_the_window_s_chunks(tmp_path: Path) -> None:
    values = np.random.default_rng(3).standard_normal((16, 12, 20)).astype("<f4")
    store = tmp_path / "cube.zarr"
    with cubeslab.create(store, values.shape, "float32", chunks=CHUNKS, shards=SHARDS) as cube:
        cube[...] = values
    window = (slice(0, 16), slice(5, 9), slice(12, 13))
    ranges = chunk_ranges(store, window)
    # x: all 4 chunks; y 5..8: chunks 1 and 2; z 12: chunk 2.
    assert len(ranges) == 4 * 2 * 1
    found = set()
    for path, offset, length in ranges:
        with open(path, "rb") as f:
            f.seek(offset)
            raw = f.read(length)
        chunk = np.frombuffer(raw[: np.prod(CHUNKS) * 4], dtype="<f4").reshape(CHUNKS)
        shard = tuple(int(i) for i in path.relative_to(store / "c").parts)
        matches = [
            (i, j, k)
            for i in range(4)
            for j in (1, 2)
            for k in (2,)
            if (i // 2, j // 2, k // 2) == shard
            and np.array_equal(chunk, values[i * 4 : i * 4 + 4, j * 3 : j * 3 + 3, k * 5 : k * 5 + 5])
        ]
        assert len(matches) == 1, (path, offset)
        found.add(matches[0])
    assert len(found) == 8

    timing = device_time(ranges, runs=2)
    assert timing["requests"] == 8 and timing["bytes"] == sum(n for _, _, n in ranges)
    assert 0 < timing["min_s"] <= timing["median_s"] <= timing["max_s"]
