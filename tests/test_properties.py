"""Property tests: any array written through the engine reads back equal to numpy, for random shapes
(sides that are not multiples of the chunk), random chunk and shard shapes, dtypes, every lossless
compression (zstd, gzip, blosc with each shuffle, ZFP's reversible mode) and random windows with steps
(numpy is the oracle): lossless codecs round-trip bit-exactly."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cubeslab

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "float32", "float64"]
ZFP_DTYPES = ("int32", "int64", "float32", "float64")  # the types zfp codes


@st.composite
def arrays_and_layouts(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 13), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    sharded = draw(st.booleans())
    shards = tuple(c * draw(st.integers(1, 3)) for c in chunks) if sharded else None
    dtype = draw(st.sampled_from(DTYPES))
    lossless = [None, "zstd:1", "gzip:1", "blosc-lz4", "blosc-zstd:3,shuffle=bit", "blosc-lz4:1,shuffle=none"]
    if dtype in ZFP_DTYPES:
        lossless.append("zfp:reversible")
    compress = draw(st.sampled_from(lossless))
    return shape, chunks, shards, np.dtype(dtype), compress


@st.composite
def index_for(draw, shape):
    key = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "full"]))
        if kind == "int":
            key.append(draw(st.integers(-n, n - 1)))
        elif kind == "full":
            key.append(slice(None))
        else:
            start = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            step = draw(st.one_of(st.none(), st.integers(1, 5), st.integers(-5, -1)))
            key.append(slice(start, stop, step))
    return tuple(key)


def random_data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=arrays_and_layouts(), data=st.data(), seed=st.integers(0, 2**16))
def test_windows_read_equal_to_numpy(tmp_path_factory, layout, data, seed):
    shape, chunks, shards, dtype, compress = layout
    expected = random_data(shape, dtype, seed)
    path = tmp_path_factory.mktemp("prop") / "a.zarr"
    array = cubeslab.Array.from_numpy(path, expected, chunks=chunks, shards=shards, compress=compress)
    assert np.array_equal(array[...], expected)
    for _ in range(5):
        key = data.draw(index_for(shape))
        for verify in (True, False):
            got = array.read(key, verify=verify)
            assert got.shape == expected[key].shape
            assert np.array_equal(got, expected[key]), (key, verify)


def test_every_thread_and_in_flight_setting_gives_the_same_answer(tmp_path):
    expected = random_data((37, 29, 41), np.dtype("float32"), 1)
    array = cubeslab.Array.from_numpy(tmp_path / "a.zarr", expected, chunks=(4, 5, 6), shards=(8, 10, 18))
    key = (slice(3, 30, 2), 7, slice(None, None, -3))
    for threads, in_flight in itertools.product([1, 2, 7], [1, 3, 64]):
        assert np.array_equal(array.read(key, threads=threads, in_flight=in_flight), expected[key])


def test_out_buffer_is_filled_in_place(tmp_path):
    expected = random_data((20, 30), np.dtype("int16"), 2)
    array = cubeslab.Array.from_numpy(tmp_path / "a.zarr", expected, chunks=(7, 8), shards=(14, 16))
    out = np.zeros((10, 30), dtype=np.int16)
    result = array.read((slice(5, 15),), out=out)
    assert result is out
    assert np.array_equal(out, expected[5:15])


@pytest.mark.parametrize(
    "key",
    [
        (1, slice(None, None, -1)),
        (slice(None, None, -2), 3),
        (slice(18, 2, -3), slice(None, None, -1)),
        (slice(None, None, -1),),
    ],
)
@pytest.mark.parametrize("keep_integer_axes", [False, True])
def test_out_buffer_of_a_reversed_window_holds_the_result(tmp_path, key, keep_integer_axes):
    expected = random_data((20, 30), np.dtype("float32"), 3)
    array = cubeslab.Array.from_numpy(tmp_path / "a.zarr", expected, chunks=(7, 8), shards=(14, 16))
    want = expected[key]
    full = key + (slice(None),) * (expected.ndim - len(key))
    kept = tuple(slice(k, k + 1) if isinstance(k, int) else k for k in full)
    shape = expected[kept].shape if keep_integer_axes else want.shape
    out = np.full(shape, np.nan, np.float32)
    result = array.read(key, out=out)
    assert result is out
    assert np.array_equal(out.reshape(want.shape), want)


def test_non_integer_slice_bounds_are_refused_with_a_clear_error(tmp_path):
    array = cubeslab.Array.from_numpy(tmp_path / "a.zarr", np.zeros((4, 4), np.float32), chunks=(2, 2))
    with pytest.raises(cubeslab.SelectionError, match="whole numbers"):
        array[0.5:2]
    with pytest.raises(cubeslab.SelectionError, match="whole numbers"):
        array[:, 0:2:1.0]


def test_out_buffer_of_wrong_shape_or_dtype_is_refused(tmp_path):
    array = cubeslab.Array.from_numpy(tmp_path / "a.zarr", np.zeros((4, 4), np.float32), chunks=(2, 2))
    with pytest.raises(cubeslab.SelectionError, match="out must be"):
        array.read((), out=np.zeros((4, 5), np.float32))
    with pytest.raises(cubeslab.SelectionError, match="out must be"):
        array.read((), out=np.zeros((4, 4), np.float64))


def test_fancy_indices_are_refused_with_a_clear_error(tmp_path):
    array = cubeslab.Array.from_numpy(tmp_path / "a.zarr", np.zeros((4, 4), np.float32), chunks=(2, 2))
    with pytest.raises(cubeslab.SelectionError, match="unsupported index"):
        array[[0, 2]]
    with pytest.raises(IndexError, match="out of bounds"):
        array[4]


@pytest.mark.parametrize(
    "compress", [None, "zstd:1", "zstd:-3", "gzip:2", "blosc-lz4", "blosc-zstd:5,shuffle=bit"]
)
@pytest.mark.parametrize("sharded", [True, False])
def test_zarr_python_reads_what_the_engine_writes(tmp_path, compress, sharded):
    import zarr

    expected = random_data((23, 18, 75), np.dtype("float32"), 3)
    shards = (16, 16, 32) if sharded else None
    cubeslab.Array.from_numpy(
        tmp_path / "a.zarr", expected, chunks=(8, 8, 16), shards=shards, compress=compress
    )
    assert np.array_equal(zarr.open_array(tmp_path / "a.zarr", mode="r")[...], expected)
