"""HDF5 datasets and NetCDF 4 variables read in place (`cubeslab.open(file, dataset=...)`): the engine
reads the file's chunks itself, so every window must equal h5py's (and netCDF4's) reading of the same
file — every filter it decodes, both byte orders, chunked, contiguous and never-written datasets, files
written by other tools — and what it cannot read is refused naming the file, the dataset and why.

The plugin filters (zstd, lz4, blosc) are written by hdf5plugin in a fresh interpreter and checked against
the values written: in a process where netCDF4 has pointed HDF5_PLUGIN_PATH at its own plugins, h5py's
blosc filter fails, so this process never loads hdf5plugin."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import netcdf_named_like_dimensions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cubeslab
from cubeslab import _engine

NETCDF_DIR = "netcdf"

BUILTIN_FILTERS = {
    "none": {},
    "deflate": {"compression": "gzip", "compression_opts": 4},
    "shuffle+deflate+fletcher32": {"compression": "gzip", "shuffle": True, "fletcher32": True},
    "fletcher32": {"fletcher32": True},
}
PLUGIN_FILTERS = ["zstd", "lz4", "blosc-lz4-shuffle", "blosc-zstd-bitshuffle"]
FILTERED = (37, 29, 45)


def plugin_options(name: str) -> dict:
    import hdf5plugin

    return {
        "zstd": dict(hdf5plugin.Zstd()),
        "lz4": dict(hdf5plugin.LZ4()),
        "blosc-lz4-shuffle": dict(hdf5plugin.Blosc(cname="lz4", shuffle=hdf5plugin.Blosc.SHUFFLE)),
        "blosc-zstd-bitshuffle": dict(hdf5plugin.Blosc(cname="zstd", shuffle=hdf5plugin.Blosc.BITSHUFFLE)),
    }[name]


def values(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    data = rng.standard_normal(shape) * 100
    return (np.abs(data) if np.dtype(dtype).kind == "u" else data).astype(dtype)


def write_test_file(path) -> None:
    """One file holding a dataset per filter and type, with edge chunks on every axis."""
    with h5py.File(path, "w") as f:
        for name, options in BUILTIN_FILTERS.items():
            f.create_dataset(name, data=values(FILTERED, ">f4"), chunks=(8, 16, 10), **options)
        for name in PLUGIN_FILTERS:
            f.create_dataset(name, data=values(FILTERED, ">f4"), chunks=(8, 16, 10), **plugin_options(name))
        for dtype in ["<i2", ">i4", "<f8", ">u2", "|u1", "<i8"]:
            f.create_dataset(
                f"chunked{dtype}", data=values((23, 31), dtype, 1), chunks=(5, 7), compression="gzip"
            )
            f.create_dataset(f"contiguous{dtype}", data=values((23, 31), dtype, 2))
        f.create_dataset(
            "one-d", data=values((1001,), "<f4"), chunks=(100,), shuffle=True, compression="gzip"
        )
        f.create_dataset("four-d", data=values((5, 6, 7, 8), "<f4"), chunks=(2, 3, 4, 5), compression="lzf")
        f.create_dataset("four-d-ok", data=values((5, 6, 7, 8), "<f4"), chunks=(2, 3, 4, 5))
        sparse = f.create_dataset("sparse", shape=(40, 40), dtype="<f8", chunks=(8, 8), fillvalue=-7.5)
        sparse[10:20, 3:9] = 1.25
        f.create_dataset("unwritten", shape=(10, 12), dtype="<i4", fillvalue=42)


@pytest.fixture(scope="module")
def h5_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("h5") / "many.h5"
    here = Path(__file__)
    code = (
        f"import sys; sys.path.insert(0, {str(here.parent)!r}); import {here.stem} as t; "
        "t.write_test_file(sys.argv[1])"
    )
    environment = {k: v for k, v in os.environ.items() if k != "HDF5_PLUGIN_PATH"}
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, env=environment)
    return path


def expected_of(h5_file, name: str, window=...) -> np.ndarray:
    """h5py's reading for the filters it has; the values written for the plugin filters."""
    if name in PLUGIN_FILTERS:
        return values(FILTERED, ">f4")[window]
    with h5py.File(h5_file) as f:
        return f[name][window]


@pytest.mark.parametrize("name", [*BUILTIN_FILTERS, *PLUGIN_FILTERS])
def test_every_filter_reads_as_h5py_does(h5_file, name):
    got = cubeslab.open(h5_file, dataset=name)
    expected = expected_of(h5_file, name)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_array_equal(got[...], expected)
    np.testing.assert_array_equal(got[:, 17, :], expected[:, 17, :])
    np.testing.assert_array_equal(got[3, ::-2, 40], expected[3, ::-2, 40])


@pytest.mark.parametrize(
    "name",
    [
        f"{kind}{dtype}"
        for kind in ("chunked", "contiguous")
        for dtype in ["<i2", ">i4", "<f8", ">u2", "|u1", "<i8"]
    ]
    + ["one-d", "four-d-ok", "sparse", "unwritten"],
)
def test_types_byte_orders_and_layouts_read_as_h5py_does(h5_file, name):
    got = cubeslab.open(h5_file, dataset=name)
    with h5py.File(h5_file) as f:
        expected = f[name][...]
    assert got.dtype == expected.dtype.newbyteorder("=")
    np.testing.assert_array_equal(got[...], expected)


def window_strategy(shape):
    def one(n):
        return st.tuples(st.integers(0, n - 1), st.integers(0, n), st.integers(1, 4)).map(
            lambda t: slice(t[0], max(t[0] + 1, t[1]), t[2])
        )

    return st.tuples(*[st.one_of(one(n), st.integers(0, n - 1)) for n in shape])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    name=st.sampled_from(["deflate", "shuffle+deflate+fletcher32", "none", "blosc-lz4-shuffle"]),
)
def test_random_windows_equal_h5py(h5_file, data, name):
    window = data.draw(window_strategy(FILTERED))
    got = cubeslab.open(h5_file, dataset=name, threads=data.draw(st.sampled_from([1, 2])))[window]
    np.testing.assert_array_equal(got, expected_of(h5_file, name, window))


@pytest.mark.parametrize(
    ("shape", "largest", "chunks", "libver"),
    [
        ((12, 16, 10), (12, None, 10), (6, 4, 5), "latest"),  # one unlimited dimension, not the first
        ((12, 16, 10), (20, None, 30), (6, 4, 5), "latest"),  # other sides able to grow, but bounded
        ((5, 7, 9, 4), (5, 7, None, 4), (2, 3, 2, 3), "latest"),
        ((5, 7, 9, 4), (5, 7, 9, None), (2, 3, 4, 3), "latest"),
        ((9, 8), (None, 8), (2, 3), "latest"),  # the unlimited dimension first
        ((12, 16, 10), (12, None, 10), (6, 4, 5), "earliest"),  # HDF5 1.8's B-tree index
    ],
)
def test_chunks_of_a_dataset_that_can_grow_are_read_where_h5py_reads_them(
    tmp_path, shape, largest, chunks, libver
):
    """HDF5 2.0.0 reports the chunk origins of an extensible-array index (one unlimited dimension, not
    the first) in the index's order: read as reported, chunks land in the wrong place."""
    values = np.random.default_rng(7).normal(size=shape).astype("f4")
    path = tmp_path / "grow.h5"
    with h5py.File(path, "w", libver=libver) as f:
        data = f.create_dataset(
            "d", shape=shape, chunks=chunks, maxshape=largest, dtype="f4", compression="gzip"
        )
        written = tuple(slice(n // 3, n) for n in shape)  # some chunks never written: fill values
        data[written] = values[written]
    with h5py.File(path) as f:
        expected = f["d"][()]
    np.testing.assert_array_equal(cubeslab.open(path, dataset="/d")[...], expected)
    cubeslab.ingest(path, tmp_path / "grow.zarr", dataset="/d")
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "grow.zarr")[...], expected)


def test_a_netcdf4_file_from_another_tool_reads_as_netcdf4_does(data_dir):
    import netCDF4

    path = data_dir / NETCDF_DIR / "20171025_2056.Cloud_Top_Height.nc"
    got = cubeslab.open(path, variable="HT")
    with netCDF4.Dataset(path) as d:
        variable = d["HT"]
        variable.set_auto_maskandscale(False)
        expected = variable[...]
        scale = variable.scale_factor
    assert got.shape == (300, 500) and got.chunks == (300, 250)
    np.testing.assert_array_equal(got[...], expected)  # raw, as stored
    np.testing.assert_array_equal(got[::7, 250:], expected[::7, 250:])
    assert got.attributes["scale_factor"] == pytest.approx(scale)  # the CF attributes travel, unapplied
    assert "_Netcdf4Dimid" not in got.attributes and "DIMENSION_LIST" not in got.attributes


def test_a_shuffled_netcdf4_variable_from_another_tool_reads_as_h5py_does(data_dir):
    path = data_dir / NETCDF_DIR / "issue672.nc"
    got = cubeslab.open(path, variable="azi_angle_trip")
    with h5py.File(path) as f:
        expected = f["azi_angle_trip"][...]
        assert [f["azi_angle_trip"].id.get_create_plist().get_filter(i)[0] for i in range(2)] == [2, 1]
    np.testing.assert_array_equal(got[...], expected)
    np.testing.assert_array_equal(got[100:2000:13, :, 0], expected[100:2000:13, :, 0])


@pytest.mark.parametrize("variable", ["x", "grp/z"])
def test_a_netcdf4_variable_named_like_a_dimension_it_is_not_the_coordinate_of_reads_as_netcdf4_does(
    tmp_path, variable
):
    import netCDF4

    # netCDF-C keeps such a variable as HDF5 dataset _nc4_non_coord_<name>; <name> is the dimension's scale.
    netcdf_named_like_dimensions(tmp_path / "n.nc")
    got = cubeslab.open(tmp_path / "n.nc", variable=variable)
    with netCDF4.Dataset(tmp_path / "n.nc") as d:
        expected = d[variable][...].data
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got[...], expected)
    np.testing.assert_array_equal(got[1::2, ::3], expected[1::2, ::3])


def test_a_netcdf4_dimension_without_a_variable_is_no_variable(tmp_path):
    netcdf_named_like_dimensions(tmp_path / "n.nc")
    with pytest.raises(cubeslab.InvalidInputError, match=r"no variable y; the variables: .*grp/z, grp/v"):
        cubeslab.open(tmp_path / "n.nc", variable="y")


def test_a_classic_netcdf_file_is_refused_with_what_to_do(data_dir):
    with pytest.raises(cubeslab.InvalidInputError, match=r"CRM032_test1\.nc: not a NetCDF 4 file.*ingest it"):
        cubeslab.open(data_dir / NETCDF_DIR / "CRM032_test1.nc", variable="MSLP")


def test_an_unsupported_filter_is_named_with_its_id_and_h5py_offered(h5_file):
    # lzf (32000) is h5py's own filter; cubeslab does not decode it.
    with pytest.raises(
        cubeslab.InvalidInputError, match=r"dataset /four-d: filter 32000 \(lzf\).*h5py can read it"
    ):
        cubeslab.open(h5_file, dataset="four-d")


def test_a_missing_dataset_lists_those_that_exist(h5_file):
    with pytest.raises(cubeslab.InvalidInputError, match=r"no dataset /nope; the datasets: .*/deflate"):
        cubeslab.open(h5_file, dataset="/nope")


@pytest.mark.parametrize("chunks", [None, (4, 5)])
def test_an_empty_dataset_is_refused_as_empty(tmp_path, chunks):
    with h5py.File(tmp_path / "e.h5", "w") as f:
        f.create_dataset("e", shape=(0, 5), dtype="f4", chunks=chunks, maxshape=(None, 5) if chunks else None)
    with pytest.raises(cubeslab.InvalidInputError, match=r"dataset /e has shape \(0, 5\): no values"):
        cubeslab.open(tmp_path / "e.h5", dataset="/e")


@pytest.mark.parametrize(
    ("name", "words"), [("compound-dtype-complex.h5", "holds"), ("vlen_string_dset.h5", "holds")]
)
def test_types_that_are_not_numbers_are_refused(data_dir, name, words):
    path = data_dir / "hdf5" / name
    with h5py.File(path) as f:
        dataset = next(iter(f))
    with pytest.raises(cubeslab.InvalidInputError, match=rf"{name}: dataset /{dataset} {words}"):
        cubeslab.open(path, dataset=dataset)


def test_virtual_and_compact_datasets_are_refused(tmp_path):
    source = tmp_path / "part.h5"
    with h5py.File(source, "w") as f:
        f["x"] = np.arange(10.0)
    layout = h5py.VirtualLayout(shape=(10,), dtype="f8")
    layout[:] = h5py.VirtualSource(source, "x", shape=(10,))
    with h5py.File(tmp_path / "v.h5", "w") as f:
        f.create_virtual_dataset("v", layout)
        space = h5py.h5s.create_simple((4,))
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_layout(h5py.h5d.COMPACT)
        h5py.h5d.create(f.id, b"compact", h5py.h5t.NATIVE_INT32, space, plist)
    with pytest.raises(cubeslab.InvalidInputError, match=r"dataset /v is virtual"):
        cubeslab.open(tmp_path / "v.h5", dataset="v")
    with pytest.raises(cubeslab.InvalidInputError, match=r"dataset /compact is stored compact"):
        cubeslab.open(tmp_path / "v.h5", dataset="compact")


def test_a_truncated_file_is_refused_naming_the_chunk_past_its_end(tmp_path):
    path = tmp_path / "t.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=values((64, 64), "<f4"), chunks=(16, 64))
        offsets = []
        f["x"].id.chunk_iter(lambda c: offsets.append(c.byte_offset))
    # HDF5 keeps the file's metadata before the data here; cut into the last chunk.
    with open(path, "r+b") as file:
        file.truncate(max(offsets) + 100)
    with pytest.raises(cubeslab.InvalidInputError, match=r"t\.h5: .*truncated"):
        cubeslab.open(path, dataset="x")


def test_a_chunk_index_pointing_past_the_end_is_refused_by_the_engine(tmp_path):
    # h5py itself refuses a file shorter than its superblock says; the engine checks every chunk anyway.
    path = tmp_path / "short.bin"
    path.write_bytes(bytes(1000))
    table = np.array([[0, 0, 900, 400, 0]], dtype=np.uint64)
    with pytest.raises(
        cubeslab.CorruptDataError,
        match=r"short\.bin: dataset /x: chunk \[0, 0\] is stored at bytes 900\.\.1300, past the end",
    ):
        _engine.ChunkedFileArray(
            path, "/x", [10, 10], "float32", False, bytes(4), chunk_shape=[10, 10], chunks=table
        )


def test_damaged_chunk_bytes_fail_naming_the_chunk(tmp_path):
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset(
            "x", data=values((32, 32), "<f4"), chunks=(16, 16), compression="gzip", fletcher32=True
        )
        chunks = []
        f["x"].id.chunk_iter(lambda c: chunks.append((c.chunk_offset, c.byte_offset, c.size)))
    (origin, offset, size) = chunks[1]
    with open(path, "r+b") as file:
        file.seek(offset + size // 2)
        byte = file.read(1)
        file.seek(offset + size // 2)
        file.write(bytes([byte[0] ^ 0xFF]))
    array = cubeslab.open(path, dataset="x")
    position = tuple(o // 16 for o in origin)
    with pytest.raises(
        cubeslab.CorruptDataError, match=rf"d\.h5: dataset /x: chunk \[{position[0]}, {position[1]}\]"
    ):
        array[...]
    np.testing.assert_array_equal(array[16:, :16], h5py.File(path)["x"][16:, :16])  # the others still read


def test_it_is_read_only_pickles_by_path_and_says_what_it_is(h5_file):
    array = cubeslab.open(h5_file, dataset="deflate")
    with pytest.raises(cubeslab.InvalidInputError, match="read-only; ingest it to write"):
        array[0] = 1
    with pytest.raises(cubeslab.InvalidInputError, match="read-only"):
        cubeslab.open(h5_file, "r+", dataset="deflate")
    again = pickle.loads(pickle.dumps(array))
    np.testing.assert_array_equal(again[5], array[5])
    assert "dataset='/deflate'" in repr(array) and array.chunks == (8, 16, 10)


def test_without_a_dataset_the_only_one_is_taken_or_the_choice_listed(tmp_path, h5_file):
    single = tmp_path / "one.h5"
    with h5py.File(single, "w") as f:
        f["only"] = values((6, 7), "<f4")
    np.testing.assert_array_equal(cubeslab.open(single)[...], values((6, 7), "<f4"))
    with pytest.raises(
        cubeslab.InvalidInputError, match=r"more than one N-D numeric dataset; choose one with dataset="
    ):
        cubeslab.open(h5_file)


def test_a_copy_of_the_file_reads_the_same(tmp_path, h5_file):
    # The chunk index is the file's own: a copy (new inode, same bytes) reads identically.
    copy = tmp_path / "copy.h5"
    shutil.copy(h5_file, copy)
    np.testing.assert_array_equal(
        cubeslab.open(copy, dataset="zstd")[...], cubeslab.open(h5_file, dataset="zstd")[...]
    )


def test_an_external_link_is_read_from_the_file_it_points_into(tmp_path):
    data = values((20, 30), "<f4", 5)
    with h5py.File(tmp_path / "target.h5", "w") as f:
        f.create_dataset("pad", data=np.zeros(5000))  # so the two files' offsets differ
        f.create_dataset("d", data=data, chunks=(8, 8), compression="gzip")
    with h5py.File(tmp_path / "links.h5", "w") as f:
        f["x"] = h5py.ExternalLink("target.h5", "/d")
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "links.h5", dataset="x")[...], data)
    cubeslab.ingest(tmp_path / "links.h5", tmp_path / "s.zarr", dataset="x")
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "s.zarr").amplitude[...], data)


def test_a_truncated_netcdf_file_is_refused_naming_it(tmp_path, data_dir):
    path = tmp_path / "cut.nc"
    whole = (data_dir / NETCDF_DIR / "issue672.nc").read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(cubeslab.InvalidInputError, match=r"cut\.nc: "):
        cubeslab.ingest(path, tmp_path / "x.zarr", variable="azi_angle_trip")
    with pytest.raises(cubeslab.InvalidInputError, match=r"cut\.nc: "):
        cubeslab.open(path, variable="azi_angle_trip")
    assert not (tmp_path / "x.zarr").exists()


@pytest.mark.parametrize("deflate", [False, True])
def test_edge_chunks_a_file_stores_unfiltered_are_read_unfiltered(tmp_path, deflate):
    import ctypes

    import netCDF4  # noqa: F401  (a second HDF5 library in the process, as in a session using both)

    from cubeslab.hdf5_array import DONT_FILTER_PARTIAL_CHUNKS, _hdf5_library

    path = tmp_path / "edges.h5"
    values = np.arange(23 * 19 * 11, dtype="f4").reshape(23, 19, 11)
    with h5py.File(path, "w", libver="latest") as f:
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_chunk((5, 4, 3))
        plist.set_shuffle()
        if deflate:
            plist.set_deflate(4)
        # h5py has no call for this option; HDF5 then writes chunks past the edge without their filters.
        library = _hdf5_library(plist.id)
        assert library is not None, "the HDF5 library h5py runs on was not found"
        options = ctypes.c_uint(DONT_FILTER_PARTIAL_CHUNKS)
        assert library.H5Pset_chunk_opts(ctypes.c_int64(plist.id), options) >= 0
        space = h5py.h5s.create_simple(values.shape)
        h5py.h5d.create(f.id, b"x", h5py.h5t.py_create(values.dtype), space, dcpl=plist).write(
            h5py.h5s.ALL, h5py.h5s.ALL, values
        )
    with h5py.File(path) as f:
        oracle = f["x"][...]
    np.testing.assert_array_equal(cubeslab.open(path, dataset="/x")[...], oracle)
    cubeslab.ingest(path, tmp_path / "s.zarr")
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "s.zarr")[...], oracle)


def test_a_filter_only_h5py_decodes_is_refused_in_place_and_ingested_through_h5py(tmp_path):
    import hdf5plugin

    path = tmp_path / "b.h5"
    values = np.arange(600, dtype="f4").reshape(30, 20)
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=values, chunks=(7, 6), **hdf5plugin.Bitshuffle())
    with pytest.raises(cubeslab.InvalidInputError, match="32008"):
        cubeslab.open(path, dataset="/x")
    done = subprocess.run(
        [sys.executable, "-m", "cubeslab.cli", "ingest", path, tmp_path / "s.zarr"],
        capture_output=True,
        text=True,
    )  # a fresh interpreter, where only cubeslab can have registered the plugin with HDF5
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "s.zarr")[...], values)
