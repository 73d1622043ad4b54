"""Wrong arguments to the Python API get a cubeslab error that names the argument, and leave nothing
behind; the values that are right keep working (numpy is the oracle)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import cubeslab
from cubeslab.errors import InvalidInputError, LabelError, OptionError, SelectionError


@pytest.fixture
def cube(synthetic_segy, ingest_cube):
    return ingest_cube(synthetic_segy().path)


def test_truth_values_are_no_labels(cube):
    with pytest.raises(SelectionError, match="truth value"):
        cube.inline[True]
    with pytest.raises(SelectionError, match="truth value"):
        cube.axis("crossline")[np.True_]


@pytest.mark.parametrize("field", [189.7, True, None, (189,)])
def test_header_fields_are_names_or_whole_byte_positions(cube, field):
    with pytest.raises(LabelError, match="trace header field"):
        cube.headers[field]


def test_a_whole_numpy_byte_position_is_a_header_field(cube):
    np.testing.assert_array_equal(cube.headers[np.int64(189)], cube.headers["INLINE_3D"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dimension_names": ["a"]}, "1 dimension names"),
        ({"dimension_names": ["a", 3]}, "dimension_names must be a list of texts"),
        ({"chunks": [-1, 2]}, r"chunks=\[-1, 2\]"),
        ({"chunks": [2, 2], "shards": [4, 0]}, r"shards=\[4, 0\]"),
    ],
)
def test_a_create_refused_leaves_no_store(tmp_path, options, message):
    store = tmp_path / "a.zarr"
    options = {"chunks": [2, 3], **options}
    with pytest.raises(InvalidInputError, match=message):
        cubeslab.Array.create(store, (4, 6), "f4", **options)
    assert not store.exists()


def test_chunks_of_the_wrong_rank_are_named(cube):
    with pytest.raises(SelectionError, match=r"chunks=\(2,\): give one size per dimension"):
        cube.to_xarray(chunks=(2,))
    with pytest.raises(SelectionError, match="chunks='bogus'"):
        cube.to_dask("bogus")


def test_an_unknown_casting_rule_is_named(tmp_path):
    cubeslab.Array.from_numpy(tmp_path / "a.zarr", np.zeros((4, 4), "f4"), chunks=(2, 2))
    array = cubeslab.open(tmp_path / "a.zarr", mode="r+")
    with pytest.raises(InvalidInputError, match="casting='bogus'"):
        array.write(np.ones((4, 4)), casting="bogus")


def test_python_integers_beyond_int64_are_numbers(tmp_path):
    cubeslab.Array.from_numpy(tmp_path / "f.zarr", np.zeros((2, 3), "f4"), chunks=(2, 2))
    cubeslab.Array.from_numpy(tmp_path / "i.zarr", np.zeros((2, 3), "i4"), chunks=(2, 2))
    with cubeslab.open(tmp_path / "f.zarr", mode="r+") as floats:
        floats[0] = 2**70
        floats[1] = [1, 2**65, -(2**66)]
    np.testing.assert_array_equal(
        cubeslab.open(tmp_path / "f.zarr")[...], np.array([[2.0**70] * 3, [1, 2.0**65, -(2.0**66)]], "f4")
    )
    integers = cubeslab.open(tmp_path / "i.zarr", mode="r+")
    with pytest.raises(InvalidInputError, match="1180591620717411303424 is outside int32's range"):
        integers[0] = [1, 2**70, 3]
    integers.close()
    assert not cubeslab.open(tmp_path / "i.zarr")[...].any()


def test_python_integers_beyond_float64_are_refused_as_out_of_range(tmp_path):
    cubeslab.Array.from_numpy(tmp_path / "f.zarr", np.zeros(3), chunks=(3,))
    with (
        cubeslab.open(tmp_path / "f.zarr", mode="r+") as floats,
        pytest.raises(InvalidInputError, match="is outside float64's range"),
    ):
        floats[0] = 10**400
    assert not cubeslab.open(tmp_path / "f.zarr")[...].any()


def test_a_cache_beyond_a_64_bit_count_is_refused(tmp_path):
    cubeslab.Array.from_numpy(tmp_path / "f.zarr", np.zeros(3), chunks=(3,))
    with pytest.raises(
        InvalidInputError, match="cache=1180591620717411303424: more bytes than a 64-bit count"
    ):
        cubeslab.open(tmp_path / "f.zarr", mode="r+", cache=2**70)


def test_numpy_attribute_values_are_stored_as_json_numbers_and_lists(tmp_path):
    import zarr

    given = {"i": np.int64(7), "b": np.bool_(True), "f": np.float32(1.5), "a": np.arange(3), "n": None}
    cubeslab.create(tmp_path / "a.zarr", (4,), attributes=given).close()
    stored = zarr.open_array(tmp_path / "a.zarr", mode="r").attrs
    assert {key: stored[key] for key in given} == {"i": 7, "b": True, "f": 1.5, "a": [0, 1, 2], "n": None}


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"o": object()}, r"attributes\['o'\]: object values cannot be stored as JSON"),
        ({"a": {"b": [1, 2**70]}}, r"attributes\['a'\]\['b'\]\[1\]: 1180591620717411303424 is beyond 64-bit"),
    ],
)
@pytest.mark.parametrize("coords", [None, {"x": np.arange(4.0)}])
def test_attributes_json_cannot_hold_exactly_are_refused_naming_them_and_nothing_is_written(
    tmp_path, attributes, message, coords
):
    with pytest.raises(InvalidInputError, match=message):
        cubeslab.create(tmp_path / "a.zarr", (4,), dims=("x",), coords=coords, attributes=attributes)
    assert not (tmp_path / "a.zarr").exists()


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5"])
def test_a_thread_count_in_the_environment_that_is_no_count_is_said_to_be_ignored(value):
    env = {**os.environ, "CUBESLAB_THREADS": value}
    done = subprocess.run([sys.executable, "-c", "import cubeslab"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"CUBESLAB_THREADS={value!r} is not a whole number above 0; ignored" in done.stderr


@pytest.mark.parametrize("threads", [0, -1, 2.5, True, "4"])
def test_threads_that_are_no_count_are_refused(cube, threads):
    with pytest.raises(OptionError, match=f"threads={threads!r}: give a whole number"):
        cubeslab.open(cube.path, threads=threads)


def test_a_dataset_asked_of_a_store_folder_is_named(cube):
    with pytest.raises(OptionError, match="dataset= opens an HDF5 or NetCDF file in place; this is a folder"):
        cubeslab.open(cube.path, dataset="/x")


def test_a_numpy_array_is_stored_as_a_dask_one_is(tmp_path):
    values = np.arange(60, dtype="f4").reshape(6, 10)
    cubeslab.store(values, tmp_path / "n.zarr")
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "n.zarr")[...], values)


def test_a_coordinate_over_one_dimension_named_alone_is_taken_as_xarray_takes_it(tmp_path):
    import xarray as xr

    coords = {"time": ("time", np.arange(4.0) * 2), "lat": ("x", np.arange(3.0) + 0.5)}
    expected = xr.DataArray(np.zeros((4, 3), "f4"), dims=("time", "x"), coords=coords)
    cubeslab.create(tmp_path / "c.zarr", (4, 3), dims=("time", "x"), coords=coords).close()
    stored = xr.open_zarr(tmp_path / "c.zarr", consolidated=False)
    for name in coords:
        assert stored[name].dims == expected[name].dims
        np.testing.assert_array_equal(stored[name].values, expected[name].values)
