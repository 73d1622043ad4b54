"""Planes written one after another across the chunks' fastest axis (time slices into trace-major chunks)
are held back and copied into their chunks a cache line's worth at a time. Whatever the order of
writes, reads and flushes around such a run, the result is the numpy oracle's, and zarr-python reads
the same store."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import cubeslab

# Planes of 256 x 300 elements: above the size below which planes are written at once.
SHAPE, CHUNKS, SHARDS = (256, 300, 40), (32, 32, 8), (64, 64, 16)


def time_slice(k, rows=slice(None), cols=slice(None)):
    return (rows, cols, k)


@pytest.fixture
def filled(tmp_path):
    """A store holding random values already, open for writing, and its oracle."""
    rng = np.random.default_rng(7)
    oracle = rng.standard_normal(SHAPE).astype(np.float32)
    store = tmp_path / "t.zarr"
    with cubeslab.create(store, SHAPE, chunks=CHUNKS, shards=SHARDS, fill_value=0) as cube:
        cube[...] = oracle
    return store, oracle, rng


def test_time_slices_in_order_over_existing_values_keep_the_values_around_them(filled):
    store, oracle, rng = filled
    with cubeslab.open(store, mode="r+", cache="8MiB") as cube:
        for k in range(3, 37):  # runs starting and ending inside chunks and cache lines
            key = time_slice(k, slice(5, 250), slice(None, None, 3))
            values = rng.standard_normal(oracle[key].shape).astype(np.float32)
            cube[key] = values
            oracle[key] = values
    assert np.array_equal(cubeslab.open(store)[...], oracle)
    assert np.array_equal(zarr.open_array(store, mode="r")[...], oracle)
    assert cubeslab.verify(store)["ok"]


def test_reads_in_the_middle_of_a_run_see_every_plane_written(filled):
    store, oracle, rng = filled
    with cubeslab.open(store, mode="r+") as cube:
        for k in range(16):
            values = rng.standard_normal(SHAPE[:2]).astype(np.float32)
            cube[time_slice(k)] = values
            oracle[time_slice(k)] = values
            if k in (2, 9):
                np.testing.assert_array_equal(cube[:, :, :16], oracle[:, :, :16])
                np.testing.assert_array_equal(cube[100, 17], oracle[100, 17])


def test_a_later_write_over_a_plane_still_held_wins(filled):
    store, oracle, rng = filled
    with cubeslab.open(store, mode="r+") as cube:
        for k in range(8, 12):
            values = rng.standard_normal(SHAPE[:2]).astype(np.float32)
            cube[time_slice(k)] = values
            oracle[time_slice(k)] = values
        # Over planes of the run, then the run's next plane: neither may undo the other.
        cube[10:20, 10:20, 9:11] = -5.0
        oracle[10:20, 10:20, 9:11] = -5.0
        cube[time_slice(12)] = 3.0
        oracle[time_slice(12)] = 3.0
        cube[time_slice(12, slice(0, 4))] = 4.0  # the same plane again: not the run's next
        oracle[time_slice(12, slice(0, 4))] = 4.0
    assert np.array_equal(zarr.open_array(store, mode="r")[...], oracle)


def test_a_run_left_unfinished_is_written_by_flush_and_counted_dirty_meanwhile(filled):
    store, oracle, _ = filled
    cube = cubeslab.open(store, mode="r+", cache="16MiB")
    for k in range(20, 25):
        cube[time_slice(k)] = float(k)
        oracle[time_slice(k)] = float(k)
    info = cube.cache_info()
    assert info["dirty_bytes"] > 0 and info["bytes"] <= info["limit"]
    cube.flush()
    assert cube.cache_info()["dirty_bytes"] == 0
    assert np.array_equal(zarr.open_array(store, mode="r")[...], oracle)
    cube[time_slice(25)] = 1.5  # a run left in a writer that is dropped
    oracle[time_slice(25)] = 1.5
    del cube
    assert np.array_equal(zarr.open_array(store, mode="r")[...], oracle)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float64"])
def test_runs_of_every_element_size_match_the_oracle(tmp_path, dtype):
    shape = (128, 2048 // np.dtype(dtype).itemsize, 70)
    oracle = np.zeros(shape, dtype)
    rng = np.random.default_rng(3)
    store = tmp_path / f"{dtype}.zarr"
    with cubeslab.create(
        store, shape, dtype, chunks=(16, 16, 32), shards=(64, 64, 64), fill_value=0, cache="4MiB"
    ) as cube:
        for k in range(shape[2]):
            values = rng.integers(0, 100, shape[:2]).astype(dtype)
            cube[:, :, k] = values
            oracle[:, :, k] = values
        np.testing.assert_array_equal(cube[...], oracle)
    assert np.array_equal(zarr.open_array(store, mode="r")[...], oracle)


def test_planes_of_a_four_dimensional_array_across_its_last_axis(tmp_path):
    shape = (4, 160, 200, 24)
    oracle = np.zeros(shape, np.float32)
    store = tmp_path / "4d.zarr"
    with cubeslab.create(store, shape, chunks=(2, 32, 32, 8), fill_value=0, cache="8MiB") as cube:
        for k in range(shape[3]):
            cube[:, :, :, k] = k + 0.5
            oracle[:, :, :, k] = k + 0.5
    assert np.array_equal(zarr.open_array(store, mode="r")[...], oracle)
