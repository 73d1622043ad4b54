"""Random sequences of window writes, reads, flushes and reopens against a numpy oracle: the write-back
cache, its evictions under a small bound, partial-chunk read-modify-write, and the plane runs it holds
back ("staging": planes of 256 KiB or more across an axis whose chunk stride is under a cache line)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import zarr

import cubeslab


@dataclass(frozen=True)
class Layout:
    shape: tuple[int, ...]
    dtype: str
    chunks: tuple[int, ...]
    shards: tuple[int, ...] | None
    stage_axis: int  # the axis whose full planes are held back
    cache: str
    compress: str | None = None
    fill: float | None = 0  # None: the dtype's default (NaN for floats)
    prefilled: bool = True  # random values on disk before the writer opens: untouched ones must stay
    coords: bool = False  # a group with coordinates: the array is its "data" member
    holds_back: bool = True  # whether full planes across stage_axis are held back (within cache / 8)


LAYOUTS = {
    # Time slices into trace-major shards; the cache holds ~2/3 of the array, runs of up to 3 planes.
    "f32-time-evicting": Layout((256, 300, 40), "float32", (32, 32, 8), (64, 64, 16), 2, "8MiB"),
    # The cache just holds a plane's shards: starting a run evicts some of them (written back unchanged).
    "f32-time-run-evicts-own": Layout((256, 300, 40), "float32", (32, 32, 8), (64, 64, 16), 2, "5MiB"),
    # A cache of four shards: every plane evicts; a plane is past an eighth of it: never held back.
    "f32-tiny-cache": Layout(
        (256, 300, 40), "float32", (32, 32, 8), (64, 64, 16), 2, "1MiB", coords=True, holds_back=False
    ),
    # Middle-axis planes (shard stride 16 bytes, 4 planes a line), zstd, edge shards on two axes.
    "f32-middle-zstd": Layout((20480, 22, 4), "float32", (256, 4, 4), (2048, 8, 4), 1, "6MiB", "zstd:3"),
    # Long runs of int8 planes (64 a line, 32 a shard), blosc, never written before: fill value.
    "i8-long-runs": Layout(
        (520, 512, 40), "int8", (26, 32, 16), (130, 128, 32), 2, "40MiB", "blosc-lz4", prefilled=False
    ),
    # float64 time slices (8 a line) under a cache 3/4 of the array, stepped sub-planes held back too;
    # fill value NaN, an edge shard along the middle axis.
    "f64-evicting": Layout((256, 272, 24), "float64", (16, 32, 8), (32, 64, 8), 2, "10MiB", fill=None),
    # uint16 planes into unsharded chunks, gzip.
    "u16-unsharded-gzip": Layout((384, 350, 20), "uint16", (64, 50, 10), None, 2, "8MiB", "gzip:1"),
    # Columns of a 2-D store (edge shards on both axes), never written before.
    "f32-2d-columns": Layout((70000, 22), "float32", (2048, 8), (8192, 8), 1, "8MiB", prefilled=False),
}


def random_values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def random_window(rng, shape, shards):
    """Slices with random bounds and steps, some dimensions an integer, many starting just before a
    shard boundary or ending at the array's edge."""
    key = []
    for n, side in zip(shape, shards, strict=True):
        start = int(rng.integers(0, n))
        if rng.random() < 0.3 and n > side:  # just before a shard boundary
            start = int(rng.integers(1, -(-n // side))) * side - int(rng.integers(1, 4))
        if rng.random() < 0.15:
            key.append(start)
            continue
        stop = n if rng.random() < 0.3 else int(start + rng.integers(1, min(n - start, 3 * side) + 1))
        key.append(slice(start, stop, int(rng.choice([1, 1, 2, 3, 7]))))
    return tuple(key)


def plane_run(rng, layout):
    """Consecutive planes along one axis (the staging one most often), each with the same window
    across the other axes (full, a sub-window, or stepped), sometimes with a plane skipped or repeated."""
    ndim = len(layout.shape)
    axis = layout.stage_axis if rng.random() < 0.7 else int(rng.integers(0, ndim))
    n = layout.shape[axis]
    first = int(rng.integers(0, n))
    count = int(rng.integers(1, min(20, n - first) + 1))
    as_slice = rng.random() < 0.25  # k:k+1 keeps the axis, and is held back as k is
    rest = [slice(None)] * ndim
    if rng.random() < 0.3:
        d = int(rng.choice([d for d in range(ndim) if d != axis]))
        rest[d] = slice(
            int(rng.integers(0, 3)), layout.shape[d] - int(rng.integers(0, 3)), int(rng.integers(1, 3))
        )
    planes = list(range(first, first + count))
    if count > 3 and rng.random() < 0.3:
        planes[count // 2] = planes[count // 2 - 1]  # the same plane again breaks the run
    keys = []
    for k in planes:
        key = list(rest)
        key[axis] = slice(k, k + 1) if as_slice else k
        keys.append(tuple(key))
    return keys


def check_read(cube, oracle, key):
    np.testing.assert_array_equal(cube[key], oracle[key], err_msg=f"read of {key}")


def run_random_session(store, layout, seed, steps=70):
    """Drive one writer through random operations, mirrored on the oracle; returns the oracle."""
    rng = np.random.default_rng(seed)
    shards = layout.shards or layout.chunks
    fill = np.asarray(np.nan if layout.fill is None else layout.fill).astype(layout.dtype)
    oracle = np.full(layout.shape, fill, layout.dtype)
    coords = {"d0": np.arange(layout.shape[0])} if layout.coords else None
    cube = cubeslab.create(
        store, layout.shape, layout.dtype, dims=[f"d{i}" for i in range(len(layout.shape))], coords=coords,
        chunks=layout.chunks, shards=layout.shards, compress=layout.compress, fill_value=layout.fill,
        cache=layout.cache,
    )  # fmt: skip
    if layout.prefilled:
        oracle[...] = random_values(rng, layout.shape, layout.dtype)
        cube[...] = oracle
        cube.close()
        cube = cubeslab.open(store, mode="r+", cache=layout.cache)
    for step in range(steps):
        op = rng.choice(["window", "scalar", "row", "run", "run", "read", "flush", "reopen"],
                        p=[0.22, 0.1, 0.08, 0.2, 0.1, 0.2, 0.05, 0.05])  # fmt: skip
        if op in ("window", "scalar", "row"):
            key = random_window(rng, layout.shape, shards)
            shape = oracle[key].shape
            if op == "scalar" or not shape:
                values = random_values(rng, (), layout.dtype)[()]
            elif op == "row":
                values = random_values(rng, shape[-1:], layout.dtype)  # broadcast over the window
            else:
                values = random_values(rng, shape, layout.dtype)
            cube[key] = values
            oracle[key] = values
        elif op == "run":
            keys = plane_run(rng, layout)
            for i, key in enumerate(keys):
                values = random_values(rng, oracle[key].shape, layout.dtype)
                if values.size and rng.random() < 0.2:
                    values = values.flat[0]  # a scalar plane
                cube[key] = values
                oracle[key] = values
                if rng.random() < 0.1:  # a read in the middle of a run sees every plane so far
                    check_read(cube, oracle, keys[int(rng.integers(0, i + 1))])
        elif op == "read":
            check_read(cube, oracle, random_window(rng, layout.shape, shards))
        elif op == "flush":
            cube.flush()
            assert cube.amplitude.cache_info()["dirty_bytes"] == 0, f"step {step}"
        else:
            cube.close()
            cube = cubeslab.open(store, mode="r+", cache=layout.cache)
        info = cube.amplitude.cache_info()
        assert 0 <= info["dirty_bytes"] <= info["bytes"], f"step {step}: {info}"
    np.testing.assert_array_equal(cube[...], oracle, err_msg="whole array before the last flush")
    cube.close()
    return oracle


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_random_window_writes_match_a_numpy_oracle_after_reopen(tmp_path, name, seed):
    """Guards every path of the write-back cache at once: what reads see mid-session, and what is on
    disk afterwards, read by cubeslab and by zarr-python, equal the numpy oracle bit for bit."""
    layout = LAYOUTS[name]
    store = tmp_path / "w.zarr"
    oracle = run_random_session(store, layout, seed=seed * 1000 + len(name))
    np.testing.assert_array_equal(cubeslab.open(store)[...], oracle, err_msg="cubeslab after reopen")
    main = store / "data" if layout.coords else store
    np.testing.assert_array_equal(zarr.open_array(main, mode="r")[...], oracle, err_msg="zarr-python")
    assert cubeslab.verify(store)["ok"]


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_each_layout_really_holds_its_planes_back(tmp_path, name):
    """Guards the tests above against testing nothing: a full plane across each layout's staging axis
    is held back (the cache counts bytes reserved for the run beyond its dirty chunks; not under a tiny
    cache), and reads, the next plane and flush each see it."""
    layout = LAYOUTS[name]
    store = tmp_path / "s.zarr"
    oracle = np.zeros(layout.shape, layout.dtype)
    rng = np.random.default_rng(5)
    with cubeslab.create(
        store, layout.shape, layout.dtype, chunks=layout.chunks, shards=layout.shards,
        compress=layout.compress, fill_value=0, cache=layout.cache,
    ) as cube:  # fmt: skip
        for k in (0, 1):
            key = tuple(k if d == layout.stage_axis else slice(None) for d in range(len(layout.shape)))
            values = random_values(rng, oracle[key].shape, layout.dtype)
            cube[key] = values
            oracle[key] = values
            info = cube.amplitude.cache_info()
            if k == 0:
                held = info["bytes"] > info["dirty_bytes"]
                assert held == layout.holds_back, (
                    f"plane held back: {held}, expected {layout.holds_back}: {info}"
                )
        edge = tuple(slice(n - 3, n) for n in layout.shape)
        check_read(cube, oracle, edge)
        check_read(cube, oracle, tuple(slice(0, 2) for _ in layout.shape))
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[...], oracle)


def test_stepped_sub_planes_are_held_back_and_land_on_their_elements(tmp_path):
    """Guards a run of planes that select every other row: held back together, then copied with the
    step, leaving the rows between them and the rest of each shard as they were."""
    layout = LAYOUTS["f64-evicting"]
    store = tmp_path / "stepped.zarr"
    rng = np.random.default_rng(11)
    oracle = random_values(rng, layout.shape, layout.dtype)
    with cubeslab.create(
        store, layout.shape, layout.dtype, chunks=layout.chunks, shards=layout.shards
    ) as cube:
        cube[...] = oracle
    with cubeslab.open(store, mode="r+", cache=layout.cache) as cube:
        for k in range(3, 8):
            key = (slice(1, None, 2), slice(5, None), k)
            values = random_values(rng, oracle[key].shape, layout.dtype)
            cube[key] = values
            oracle[key] = values
            if k == 3:
                info = cube.amplitude.cache_info()
                assert info["bytes"] > info["dirty_bytes"], f"the stepped plane was not held back: {info}"
        check_read(cube, oracle, (slice(None), slice(None), slice(2, 9)))
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[...], oracle)


@pytest.mark.parametrize("before", ["written", "absent"])
def test_a_shard_another_writer_replaced_after_this_one_read_it_is_not_reverted(tmp_path, before):
    """A shard another writer replaced (or created) after this handle read it: this handle's next
    write to it starts from the other writer's version, so both writers' values stay."""
    store = tmp_path / "two.zarr"
    with cubeslab.create(store, (8, 8), "float32", chunks=(2, 2), shards=(4, 4), fill_value=0) as cube:
        if before == "written":
            cube[...] = 1.0
    first = cubeslab.open(store, mode="r+", cache="1MiB")
    first[0:2, 4:6]  # a read: shard (0, 1) is now held open by this handle
    with cubeslab.open(store, mode="r+", cache="1MiB") as second:
        second[0, 4] = 7.0
    first[1, 5] = 9.0  # the same shard, another element
    first.close()
    after = cubeslab.open(store)
    assert after[0, 4] == 7.0, "the other writer's value was reverted"
    assert after[1, 5] == 9.0
    expected = np.full((8, 8), 1.0 if before == "written" else 0.0, dtype=np.float32)
    expected[0, 4], expected[1, 5] = 7.0, 9.0
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[...], expected)
