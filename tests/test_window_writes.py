"""Window writes through the write-back cache, against an independent oracle: a numpy array that
receives the same writes, and zarr-python reading the store afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

import cubeslab
from cubeslab import _engine

SEGY = Path(__file__).resolve().parent / "data/segy/f3.sgy"
SHAPE = (37, 41, 53)
CHUNKS, SHARDS = (8, 8, 8), (16, 16, 24)
SHARD_BYTES = 16 * 16 * 24 * 4


def random_window(rng, shape):
    """A window of 1-D slices with random bounds and steps, some dimensions indexed by an integer."""
    key = []
    for n in shape:
        start = int(rng.integers(0, n))
        if rng.random() < 0.15:
            key.append(start)
            continue
        stop = int(start + rng.integers(1, n - start + 1))
        step = int(rng.integers(1, 4))
        key.append(
            slice(stop - 1, start - 1 if start else None, -step)
            if rng.random() < 0.1
            else slice(start, stop, step)
        )
    return tuple(key)


def random_whole_shards(rng, shape):
    """A window of whole shards (edge shards clipped to the array)."""
    key = []
    for n, side in zip(shape, SHARDS, strict=True):
        count = -(-n // side)
        first = int(rng.integers(0, count))
        last = int(rng.integers(first, count))
        key.append(slice(first * side, min(n, (last + 1) * side)))
    return tuple(key)


@pytest.mark.parametrize(
    ("compress", "tolerance"),
    [(None, 0), ("zstd:3", 0), ("zfp:tolerance=0.01", 0.01)],
    ids=["raw", "zstd", "zfp-tolerance"],
)
@pytest.mark.parametrize(
    "cache", [SHARD_BYTES, 3 * SHARD_BYTES, 10 * np.prod(SHAPE) * 4], ids=["one-shard", "three", "larger"]
)
def test_random_windows_in_random_order_match_a_numpy_oracle(tmp_path, compress, tolerance, cache):
    rng = np.random.default_rng(int(cache) + len(compress or ""))
    # A lossy store takes whole chunks only (see the test below): its windows are whole shards.
    windows = random_whole_shards if tolerance else random_window
    store = tmp_path / "w.zarr"
    oracle = np.zeros(SHAPE, np.float32)
    with cubeslab.create(
        store, SHAPE, chunks=CHUNKS, shards=SHARDS, compress=compress, fill_value=0, cache=int(cache)
    ) as cube:
        for i in range(120):
            key = windows(rng, SHAPE)
            values = rng.standard_normal(oracle[key].shape).astype(np.float32)
            cube[key] = values
            oracle[key] = values
            if i % 20 == 0:  # reads see the writes before any flush (lossy ones only after a write-back)
                np.testing.assert_allclose(cube[...], oracle, rtol=0, atol=2 * tolerance)
        info = cube.cache_info()
    assert info["misses"] > 0 and info["bytes"] <= max(int(cache), SHARD_BYTES)
    if cache < np.prod(SHAPE) * 4:
        assert info["evictions"] > 0 and info["flushes"] >= info["evictions"]
    reopened = cubeslab.open(store)[...]
    theirs = zarr.open_array(store, mode="r")[...]
    if tolerance:
        assert np.abs(reopened - oracle).max() <= tolerance
    else:
        assert np.array_equal(reopened, oracle)
    assert np.array_equal(theirs, reopened)
    assert cubeslab.verify(store)["ok"]


@pytest.mark.parametrize("axis", [0, 2], ids=["inlines", "time-slices"])
def test_planes_across_many_shards_match_a_numpy_oracle(tmp_path, axis):
    # Planes of over 1 MiB across 80 shards: each is copied into its shards on all threads.
    shape, chunks, shards = (512, 640, 8), (32, 32, 4), (64, 64, 8)
    if axis == 0:
        shape, chunks, shards = shape[::-1], chunks[::-1], shards[::-1]
    rng = np.random.default_rng(axis)
    oracle = np.zeros(shape, np.float32)
    with cubeslab.create(
        tmp_path / "p.zarr", shape, chunks=chunks, shards=shards, fill_value=0, cache=4 << 20
    ) as cube:
        for k in rng.permutation(shape[axis]):
            key = tuple(int(k) if d == axis else slice(None) for d in range(3))
            values = rng.standard_normal(oracle[key].shape).astype(np.float32)
            cube[key] = values
            oracle[key] = values
        np.testing.assert_array_equal(cube[...], oracle)
        assert cube.cache_info()["evictions"] > 0
    assert np.array_equal(zarr.open_array(tmp_path / "p.zarr", mode="r")[...], oracle)


def test_scalars_broadcast_and_rows_broadcast_over_a_window(tmp_path):
    cube = cubeslab.create(tmp_path / "b.zarr", (6, 7, 8), "int16", chunks=(2, 3, 4), fill_value=-1)
    oracle = np.full((6, 7, 8), -1, np.int16)
    cube[1:5, ::2, 3] = 9
    oracle[1:5, ::2, 3] = 9
    row = np.arange(8, dtype=np.int16)
    cube[2, 1:4] = row
    oracle[2, 1:4] = row
    cube.flush()
    assert np.array_equal(cubeslab.open(tmp_path / "b.zarr")[...], oracle)


def test_whole_chunks_are_written_without_reading_them(tmp_path):
    cube = cubeslab.create(
        tmp_path / "c.zarr", (16, 16), "float32", chunks=(4, 4), shards=(8, 8), cache="1MiB"
    )
    cube[0:8, 0:8] = 1.0  # one whole shard
    assert cube.cache_info()["misses"] == 1
    cube[0:8, 8:16] = np.ones((8, 8), np.float32)
    cube.close()
    info = cube.cache_info()
    assert info["flushes"] == 2 and info["dirty_bytes"] == 0
    assert np.array_equal(cubeslab.open(tmp_path / "c.zarr")[0:8], np.ones((8, 16), np.float32))


@pytest.mark.parametrize("coords", [None, {"x": np.arange(40) * 2.5}])
def test_a_created_store_says_so_and_verify_takes_its_unwritten_shards_for_fill_values(tmp_path, coords):
    path = tmp_path / "c.zarr"
    with cubeslab.create(path, (40, 10), dims=("x", "y"), coords=coords, chunks=(10, 10)) as cube:
        cube[:10] = 1.0  # one shard of four
    report = cubeslab.verify(path)
    assert report["state"] == "created" and report["ok"]
    assert report["arrays"]["data" if coords else "."]["absent_shards"] == 3
    info = subprocess.run(
        [str(Path(sys.executable).with_name("cubeslab")), "info", str(path), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert '"state": "created"' in info.stdout
    expected = np.full((40, 10), np.nan, np.float32)
    expected[:10] = 1.0
    assert np.array_equal(zarr.open_array(path / "data" if coords else path)[...], expected, equal_nan=True)


def test_an_ingested_survey_written_in_place_reads_back_and_verifies(ingest_cube):
    store = ingest_cube(SEGY).path
    before = cubeslab.open(store)[...]
    with cubeslab.open(store, mode="r+", cache="2MiB") as cube:
        plane = np.full(cube.shape[1:], 3.5, cube.dtype)
        cube[5] = plane
        cube[:, :, 7] = 0.25
    after = cubeslab.open(store)[...]
    expected = before.copy()
    expected[5] = 3.5
    expected[:, :, 7] = 0.25
    assert np.array_equal(after, expected)
    assert cubeslab.verify(store)["ok"]


# -- bad input: a clear error, nothing changed on disk -------------------------------------------------


@pytest.fixture
def small(tmp_path) -> Path:
    store = tmp_path / "s.zarr"
    cubeslab.create(store, (8, 8), "int32", chunks=(4, 4), fill_value=0).close()
    return store


def files_of(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("key", "values", "error", "words"),
    [
        ((-9, 0), 1, cubeslab.SelectionError, "out of bounds"),
        ((9, 0), 1, cubeslab.SelectionError, "out of bounds"),
        ((slice(0, 4), slice(0, 4)), np.ones((3, 4), np.int32), cubeslab.SelectionError, "do not fit"),
        ((0, 0), 1.5, cubeslab.InvalidInputError, "float64 values into this int32"),
        ((0, 0), 2**31, cubeslab.InvalidInputError, "2147483648 is outside int32's range"),
        ((0, slice(0, 2)), [5, -(2**31) - 1], cubeslab.InvalidInputError, "-2147483649 is outside"),
        ((0, slice(0, 2)), np.array([5, 2**40]), cubeslab.InvalidInputError, "1099511627776 is outside"),
        ((0, 0), None, cubeslab.InvalidInputError, r"object values \(None, text, objects\) are no numbers"),
        ((np.array([True] * 8), 0), 1, cubeslab.SelectionError, "unsupported index"),
    ],
    ids=[
        "index-before-the-start",
        "index-past-the-end",
        "wrong-shape",
        "lossy-cast",
        "int-too-big",
        "ints-too-small",
        "int64-array-too-big",
        "none-is-no-value",
        "boolean-mask",
    ],
)
def test_a_bad_write_is_refused_and_changes_nothing(small, key, values, error, words):
    before = files_of(small)
    with cubeslab.open(small, mode="r+") as cube, pytest.raises(error, match=words):
        cube[key] = values
    assert files_of(small) == before


def test_a_finite_float_that_would_become_infinite_is_refused(tmp_path):
    with cubeslab.create(tmp_path / "f.zarr", (4,), "float32") as array:
        with pytest.raises(cubeslab.InvalidInputError, match=r"1e\+40 is outside float32's range"):
            array[:2] = np.array([1e40, 1.0])
        array[:2] = np.array([np.inf, 0.1])  # infinite already, and rounded: as numpy's astype
        np.testing.assert_array_equal(array[:2], np.array([np.inf, 0.1], np.float32))


def test_values_with_leading_axes_of_one_fit_a_window_as_numpy_takes_them(tmp_path):
    oracle = np.zeros((3, 5), np.float32)
    with cubeslab.create(tmp_path / "r.zarr", (3, 5), "float32", fill_value=0) as array:
        array[1] = oracle[1] = np.arange(5).reshape(1, 1, 5)
        np.testing.assert_array_equal(array[...], oracle)
        with pytest.raises(cubeslab.SelectionError, match="do not fit"):
            array[1] = np.ones((2, 5))


def test_integers_that_fit_go_into_any_integer_array(tmp_path):
    with cubeslab.create(tmp_path / "u.zarr", (4,), "uint8") as array:
        array[1] = 5
        array[2:] = np.array([6, 255])  # int64, numpy's default
        np.testing.assert_array_equal(array[...], [0, 5, 6, 255])


def test_an_explicit_unsafe_cast_is_allowed(small):
    with cubeslab.open(small, mode="r+") as cube:
        cube.write((0, 0), 2.9, casting="unsafe")
    assert cubeslab.open(small)[0, 0] == 2


def test_writing_a_store_opened_to_read_is_refused(small):
    cube = cubeslab.open(small)
    with pytest.raises(cubeslab.InvalidInputError, match='open it with mode="r\\+"'):
        cube[0, 0] = 1
    with pytest.raises(cubeslab.InvalidInputError, match="mode"):
        cubeslab.open(small, mode="w")


def test_writing_an_incomplete_store_is_refused(tmp_path):
    store = tmp_path / "stopped.zarr"
    job = _engine.Ingest(str(SEGY), str(store), _engine.IngestOptions(layout="8x8x40/8x8x120", threads=1))
    job.step(1)
    del job  # stopped after one task: the store stays incomplete
    with pytest.raises(cubeslab.IncompleteStoreError):
        cubeslab.open(store, mode="r+")


def test_a_store_with_orientation_views_refuses_writes(ingest_cube):
    store = ingest_cube(SEGY, views=["inline", "time"]).path
    with pytest.raises(cubeslab.InvalidInputError, match="orientation views"):
        cubeslab.open(store, mode="r+")


def test_a_lossy_store_refuses_a_write_to_part_of_a_chunk_it_would_have_to_decode(tmp_path):
    store = tmp_path / "z.zarr"
    cube = cubeslab.create(
        store, (16, 16), chunks=(4, 4), shards=(8, 8), compress="zfp:tolerance=0.01", fill_value=0
    )
    cube[0:8, 0:8] = 1.5  # a whole shard: encoded once
    cube[0, 0] = 2.5  # still cached, exact: no second encoding
    cube.flush()
    before = files_of(store)
    cube2 = cubeslab.open(store, mode="r+")
    with pytest.raises(cubeslab.InvalidInputError, match="compressed a second time"):
        cube2[1, 1] = 3.0
    cube2.close()
    assert files_of(store) == before
    data = cubeslab.open(store)[...]
    assert abs(data[0, 0] - 2.5) <= 0.01 and np.abs(data[1:8, 0:8] - 1.5).max() <= 0.01


@pytest.mark.parametrize("shards", [None, (32, 32)])
def test_a_new_lossy_store_takes_planes_into_chunks_never_written(tmp_path, shards):
    """Planes that cut chunks, into a new zfp store whose cache holds a row of chunks: each chunk is
    encoded once, from the fill value and the planes, so the values keep the bound."""
    store = tmp_path / "planes.zarr"
    values = np.random.default_rng(8).normal(size=(32, 64)).astype("f4") * 10
    with cubeslab.create(
        store, values.shape, "f4", chunks=(16, 16), shards=shards, compress="zfp:tolerance=0.01", fill_value=0
    ) as cube:
        for row in range(32):
            cube[row, :] = values[row]
    back = cubeslab.open(store)[...]
    assert np.abs(back - values).max() <= 0.01
    assert cubeslab.verify(store)["ok"]
    with (
        cubeslab.open(store, mode="r+") as again,
        pytest.raises(cubeslab.InvalidInputError, match="written before"),
    ):
        again[0, 0:4] = 1.0  # now written: its other values would be encoded a second time


def test_create_refuses_an_error_target_that_needs_data_to_tune_on(tmp_path):
    with pytest.raises(cubeslab.InvalidInputError, match="tuned on the data"):
        cubeslab.create(tmp_path / "t.zarr", (8, 8), compress="zfp:snr=40")
    assert not (tmp_path / "t.zarr").exists()


def test_create_refuses_inner_chunks_that_do_not_tile_the_shards(tmp_path):
    with pytest.raises(cubeslab.InvalidInputError, match=r"inner chunks \[3, 4\] do not divide the shards"):
        cubeslab.create(tmp_path / "t.zarr", (8, 8), chunks=(3, 4), shards=(8, 8))
    assert not (tmp_path / "t.zarr").exists()


def test_create_plans_a_layout_when_given_no_chunks(tmp_path):
    cube = cubeslab.create(tmp_path / "p.zarr", (64, 80, 120), dims=("x", "y", "z"))
    assert cube.dims == ["x", "y", "z"]
    assert cube.amplitude.shards is not None and all(c > 0 for c in cube.amplitude.chunks)


# -- two writers --------------------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys, numpy as np, cubeslab
    store, row, value = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    with cubeslab.open(store, mode="r+") as cube:
        cube[row, 0:4] = value
        print("written", flush=True)
        sys.stdin.readline()
    """
)


def test_two_processes_writing_different_shards_both_succeed(tmp_path):
    store = tmp_path / "two.zarr"
    cubeslab.create(store, (8, 8), "float32", chunks=(4, 4), fill_value=0).close()
    a = subprocess.Popen([sys.executable, "-c", WRITER, store, "0", "1"], stdin=subprocess.PIPE, text=True,
                         stdout=subprocess.PIPE)  # fmt: skip
    b = subprocess.Popen([sys.executable, "-c", WRITER, store, "4", "2"], stdin=subprocess.PIPE, text=True,
                         stdout=subprocess.PIPE)  # fmt: skip
    for p in (a, b):
        assert p.stdout is not None and p.stdout.readline().strip() == "written"
    for p in (a, b):
        p.communicate("\n", timeout=60)
        assert p.returncode == 0
    data = cubeslab.open(store)[...]
    assert (data[0, 0:4] == 1).all() and (data[4, 0:4] == 2).all()


def test_a_second_writer_of_the_same_shard_is_refused_not_merged(tmp_path):
    store = tmp_path / "same.zarr"
    cubeslab.create(store, (8, 8), "float32", chunks=(4, 4), fill_value=0).close()
    first = cubeslab.open(store, mode="r+")
    second = cubeslab.open(store, mode="r+")
    first[0, 0:2] = 1.0
    second[1, 0:2] = 2.0  # both read the same chunk before either wrote it back
    first.flush()
    with pytest.raises(cubeslab.StoreBusyError, match="another writer replaced this chunk"):
        second.flush()
    data = cubeslab.open(store)[...]
    assert (data[0, 0:2] == 1).all() and (data[1, 0:2] == 0).all()


# -- crashes -----------------------------------------------------------------------------------------

FLUSHER = textwrap.dedent(
    """
    import sys, numpy as np, cubeslab
    store = sys.argv[1]
    cube = cubeslab.open(store, mode="r+", cache=1)  # every chunk written back as soon as the next comes
    after = np.arange(np.prod(cube.shape), dtype=np.float32).reshape(cube.shape)
    print("writing", flush=True)
    while True:
        cube[...] = after
    """
)


def shard_files(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted((store / "c").rglob("*")) if p.is_file()
            and not p.name.endswith(".tmp") and ".tmp" not in p.name}  # fmt: skip


def test_kill_9_during_write_backs_leaves_every_shard_before_or_after_and_the_store_verified(tmp_path):
    store = tmp_path / "k.zarr"
    shape = (16, 16, 32)
    with cubeslab.create(store, shape, chunks=(8, 8, 8), shards=(8, 8, 16), fill_value=0) as cube:
        cube[...] = np.full(shape, -1, np.float32)
    before = shard_files(store)
    rng = np.random.default_rng(9)
    snapshots = []
    for _ in range(10):
        p = subprocess.Popen([sys.executable, "-c", FLUSHER, str(store)], stdout=subprocess.PIPE, text=True)
        assert p.stdout is not None and p.stdout.readline().strip() == "writing"
        time.sleep(float(rng.uniform(0.0, 0.3)))
        p.kill()
        p.wait()
        assert cubeslab.verify(store)["ok"]
        snapshots.append(shard_files(store))
    # Let one writer finish: the after state of every shard.
    with cubeslab.open(store, mode="r+", cache=1) as cube:
        cube[...] = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    after = shard_files(store)
    assert set(after) == set(before) and all(after[k] != before[k] for k in before)
    changed = 0
    for snapshot in snapshots:
        assert set(snapshot) == set(before)
        for key, data in snapshot.items():
            assert data in (before[key], after[key]), key
            changed += data == after[key]
    assert changed > 0  # the writers got some shards written before they were killed


def test_a_full_disk_during_flush_names_the_store_and_leaves_whole_shards(small_disk):
    store = small_disk / "full.zarr"
    shape = (64, 64, 64)  # 16 shards of 64 KiB, none on disk yet (an empty store)
    cubeslab.create(store, shape, chunks=(16, 16, 16), shards=(16, 16, 64), fill_value=0).close()
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * max(0, free - 300 * 1024))  # room for about four of them
    after_values = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    cube = cubeslab.open(store, mode="r+", cache="64MiB")
    cube[...] = after_values
    with pytest.raises(cubeslab.CubeslabIOError, match=str(store)):
        cube.flush()
    assert not [p for p in store.rglob("*.tmp*")]  # no half-written file left behind
    written = shard_files(store)
    assert 0 < len(written) < 16
    data = cubeslab.open(store)[...].reshape(4, 16, 4, 16, 64)
    reference = after_values.reshape(4, 16, 4, 16, 64)
    whole = 0
    for i in range(4):
        for j in range(4):
            shard = data[i, :, j]
            assert (shard == 0).all() or np.array_equal(shard, reference[i, :, j])
            whole += np.array_equal(shard, reference[i, :, j])
    assert whole == len(written)
    filler.unlink()
    cube.flush()  # with room again, the rest is written
    assert np.array_equal(cubeslab.open(store)[...], after_values)
    assert cubeslab.verify(store)["ok"]


def test_info_reports_the_error_of_lossy_chunks_written_after_the_ingest(ingest_cube):
    from cubeslab.cli import store_report

    store = ingest_cube(SEGY, compress="zfp:tolerance=0.01").path
    assert "error_of_writes" not in store_report(store)
    with cubeslab.open(store, mode="r+") as cube:
        shard = cube.amplitude.shards
        assert shard is not None
        block = tuple(slice(0, min(s, n)) for s, n in zip(shard, cube.shape, strict=True))
        values = np.random.default_rng(3).standard_normal(cube[block].shape).astype(np.float32)
        cube[block] = values
    report = store_report(store)
    assert report["error"].startswith("at ingest: ")
    assert report["error_of_writes"].startswith("1 chunks written since, max |error| ")
    recorded = cubeslab.open(store).amplitude.attributes["cubeslab"]["rewrites"]
    read_back = cubeslab.open(store)[block]
    assert recorded["chunks"] == 1
    assert recorded["max_abs_error"] == pytest.approx(float(np.abs(read_back - values).max()), rel=1e-6)
    assert recorded["max_abs_error"] <= 0.01
    assert cubeslab.verify(store)["ok"]


@pytest.mark.parametrize("shards", [None, (32, 32, 32)])
def test_the_error_of_lossy_writes_is_recorded_sharded_or_not(tmp_path, shards):
    from cubeslab.cli import store_report

    store = tmp_path / "z.zarr"
    values = np.random.default_rng(5).normal(size=(32, 32, 32)).astype("f4") * 100
    with cubeslab.create(
        store, values.shape, "f4", chunks=(16, 16, 16), shards=shards, compress="zfp:tolerance=0.01"
    ) as a:
        a[...] = values
    recorded = cubeslab.open(store).amplitude.attributes["cubeslab"]["rewrites"]
    measured = float(np.abs(cubeslab.open(store)[...] - values).max())
    assert recorded["max_abs_error"] == pytest.approx(measured, rel=1e-6)
    assert 0 < recorded["max_abs_error"] <= 0.01
    assert store_report(store)["error_of_writes"].startswith(f"{recorded['chunks']} chunks written since")


def test_an_array_written_whole_through_zfp_records_its_error(tmp_path):
    values = np.random.default_rng(6).normal(size=(20, 30)).astype("f4")
    array = cubeslab.Array.from_numpy(
        tmp_path / "w.zarr", values, chunks=(8, 8), compress="zfp:tolerance=0.001"
    )
    recorded = cubeslab.Array(tmp_path / "w.zarr").attributes["cubeslab"]["rewrites"]
    assert recorded["chunks"] == 12
    assert recorded["max_abs_error"] == pytest.approx(float(np.abs(array[...] - values).max()), rel=1e-6)


def test_changes_left_in_the_cache_are_written_when_the_array_is_dropped(tmp_path):
    store = tmp_path / "dropped.zarr"
    cube = cubeslab.create(store, (8, 8), "float32", chunks=(4, 4), fill_value=0)
    cube[2:6, 2:6] = 5.0
    del cube  # no flush, no close
    import gc

    gc.collect()
    assert (cubeslab.open(store)[2:6, 2:6] == 5).all()


@pytest.mark.parametrize("ndim", [1, 2, 5, 8])
def test_windows_of_any_dimension_count_the_engine_reads(tmp_path, ndim):
    rng = np.random.default_rng(ndim)
    shape = tuple(int(n) for n in rng.integers(3, 7, ndim))
    chunks = tuple(max(1, n // 2) for n in shape)
    oracle = np.zeros(shape, np.float64)
    with cubeslab.create(tmp_path / "n.zarr", shape, "float64", chunks=chunks, fill_value=0, cache=1) as cube:
        for _ in range(20):
            key = random_window(rng, shape)
            values = rng.standard_normal(oracle[key].shape)
            cube[key] = values
            oracle[key] = values
        assert np.array_equal(cube[...], oracle)
    assert np.array_equal(cubeslab.open(tmp_path / "n.zarr")[...], oracle)
    assert np.array_equal(zarr.open_array(tmp_path / "n.zarr", mode="r")[...], oracle)


def test_a_whole_array_write_to_a_store_opened_to_read_is_refused_too(small):
    before = files_of(small)
    with pytest.raises(cubeslab.InvalidInputError, match="reading only"):
        cubeslab.open(small)[...] = np.ones((8, 8), np.int32)
    assert files_of(small) == before


def test_create_with_coordinates_makes_a_group_that_xarray_reads_labelled(tmp_path):
    import xarray as xr

    store = tmp_path / "labelled.zarr"
    x = np.linspace(100.0, 190.0, 10)
    with cubeslab.create(
        store, (10, 6), dims=("x", "t"), coords={"x": x}, layout="cube:4", fill_value=0
    ) as cube:
        cube[3] = 7.0
        assert cube.amplitude.chunks == (4, 4)
    assert np.array_equal(cubeslab.open(store).coords["x"], x)
    ds = xr.open_dataset(store, engine="cubeslab")
    assert np.array_equal(ds["x"].values, x)
    assert float(ds["data"].sel(x=130.0)[0]) == 7.0
    axis = cubeslab.describe(store)["axes"][0]
    assert (axis["origin"], axis["step"]) == (100.0, 10.0)
    with pytest.raises(cubeslab.InvalidInputError, match="length 6"):
        cubeslab.create(tmp_path / "bad.zarr", (10, 6), dims=("x", "t"), coords={"t": [1, 2]})


@pytest.mark.parametrize(
    ("coords", "words"),
    [
        ({"lat": np.zeros(10)}, "give another coordinate as \\(dimensions, values\\)"),
        ({"lat": (("x", "q"), np.zeros((10, 6)))}, "not distinct dimensions"),
        ({"lat": (("x", "x"), np.zeros((10, 10)))}, "not distinct dimensions"),
        ({"lat": (("x", "t"), np.zeros((6, 10)))}, "must have shape \\(10, 6\\)"),
        ({"x": (("t",), np.zeros(6))}, "its coordinate lies along it alone"),
        ({"lat": (("x",), np.zeros(10), "m")}, "attributes must be a dict"),
    ],
)
def test_create_refuses_a_coordinate_off_the_arrays_axes_and_writes_nothing(tmp_path, coords, words):
    with pytest.raises(cubeslab.InvalidInputError, match=words):
        cubeslab.create(tmp_path / "bad.zarr", (10, 6), dims=("x", "t"), coords=coords)
    assert not (tmp_path / "bad.zarr").exists()


def test_create_stores_a_coordinate_over_several_axes_as_xarray_takes_it(tmp_path):
    import xarray as xr

    lat = np.arange(60.0).reshape(10, 6)
    with cubeslab.create(
        tmp_path / "c.zarr", (10, 6), dims=("x", "t"), coords={"lat": (("x", "t"), lat, {"units": "deg"})},
        attributes={"coordinates": "other"},
    ) as cube:  # fmt: skip
        cube[...] = 1.0
    for dataset in (
        xr.open_dataset(tmp_path / "c.zarr", engine="cubeslab"),
        xr.open_zarr(tmp_path / "c.zarr", consolidated=False),
    ):
        assert dataset["lat"].dims == ("x", "t") and dataset["lat"].attrs == {"units": "deg"}
        np.testing.assert_array_equal(dataset["lat"].values, lat)
    assert cubeslab.open(tmp_path / "c.zarr").amplitude.attributes["coordinates"] == "other lat"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"cache": True}, "cache=True: give the write cache's size"),
        ({"cache": "12 parsecs"}, "'12 parsecs' is not a size"),
        ({"compress": "zstd:3", "description": {"axes": [{"name": "x", "size": 3}], "dtype": "int8"}},
         "a description says all of it; give it or shape, compress, not both"),
        ({"dims": ("a", "a"), "coords": {"a": [1, 2, 3]}}, "names a dimension twice"),
    ],
)  # fmt: skip
def test_create_refuses_contradictory_or_malformed_options_leaving_nothing(tmp_path, options, words):
    with pytest.raises(cubeslab.InvalidInputError, match=words):
        cubeslab.create(tmp_path / "c.zarr", (3, 3), **options)
    assert not (tmp_path / "c.zarr").exists()


@pytest.mark.parametrize("shards", [None, ()])
def test_a_zero_dimensional_array_takes_writes(tmp_path, shards):
    # One element, sharded or not: written whole and through the window cache, as zarr-python reads it.
    store = tmp_path / "scalar.zarr"
    cubeslab.Array.from_numpy(store, np.array(3.5, np.float32), chunks=(), shards=shards)
    assert zarr.open_array(store)[()] == 3.5
    with cubeslab.open(store, mode="r+") as array:
        array[()] = 7
        assert array.read() == 7
        array[...] = np.float32(-2.25)
    assert cubeslab.open(store).read() == -2.25
    assert zarr.open_array(store)[()] == -2.25


REFUSED_ONCE = textwrap.dedent(
    """
    import sys, cubeslab
    store = sys.argv[1]
    first, second = cubeslab.open(store, mode="r+"), cubeslab.open(store, mode="r+")
    first[0, 0:2] = 1.0
    second[1, 0:2] = 2.0
    first.flush()
    try:
        second.flush()
    except cubeslab.StoreBusyError as error:
        print("refused:", error, flush=True)
    second[5, 0] = 3.0  # another shard: still written
    second.close()
    """
)


def test_a_write_refused_for_another_writers_is_reported_once_and_the_rest_still_written(tmp_path):
    store = tmp_path / "once.zarr"
    cubeslab.create(store, (8, 8), "float32", chunks=(4, 4), fill_value=0).close()
    done = subprocess.run([sys.executable, "-c", REFUSED_ONCE, store], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert said.count("another writer replaced this chunk") == 1, said
    data = cubeslab.open(store)[...]
    assert (data[0, 0:2] == 1).all() and (data[1, 0:2] == 0).all() and data[5, 0] == 3
