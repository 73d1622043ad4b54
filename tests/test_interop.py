"""Interoperability: other tools read cubeslab stores (zarr-python 3, xarray) and cubeslab reads theirs
(MDIO, plain Zarr v3 arrays written by zarr-python); the xarray and dask views agree with segyio/numpy.

Oracles: segyio for the F3 survey, numpy for plain arrays, zarr-python for the raw contents of stores.
"""

from __future__ import annotations

import numpy as np
import pytest
import segyio
import xarray as xr
import zarr
from zarr.codecs import BloscCodec, BytesCodec, GzipCodec, ZstdCodec

import cubeslab


@pytest.fixture(scope="module")
def f3(segy_dir):
    """segyio's view of f3.sgy: the cube, its axes, and every trace's CDP coordinates."""
    path = segy_dir / "f3.sgy"
    with segyio.open(path) as f:
        scalar = f.attributes(segyio.TraceField.SourceGroupScalar)[:]
        assert (scalar < 0).all()  # f3: divide
        shape = (len(f.ilines), len(f.xlines))
        return {
            "path": path,
            "cube": segyio.tools.cube(f),
            "ilines": np.array(f.ilines),
            "xlines": np.array(f.xlines),
            "samples": np.array(f.samples),
            "cdp_x": (f.attributes(segyio.TraceField.CDP_X)[:] / -scalar).reshape(shape),
            "cdp_y": (f.attributes(segyio.TraceField.CDP_Y)[:] / -scalar).reshape(shape),
            "sorting": f.sorting,
        }


@pytest.fixture(scope="module")
def f3_store(f3, tmp_path_factory):
    store = tmp_path_factory.mktemp("interop") / "f3.zarr"
    cubeslab.ingest(f3["path"], store)
    return store


def test_is_inline_sorted_so_segyio_cube_is_inline_crossline_time(f3):
    assert f3["sorting"] == segyio.TraceSortingFormat.INLINE_SORTING
    assert f3["cube"].shape == (len(f3["ilines"]), len(f3["xlines"]), len(f3["samples"]))


# -- zarr-python reads cubeslab stores -------------------------------------------------------------


def test_zarr_python_reads_amplitude_equal_to_segyio(f3, f3_store):
    group = zarr.open_group(f3_store, mode="r")
    amplitude = group["amplitude"]
    assert amplitude.shape == f3["cube"].shape
    assert amplitude.dtype == np.float32
    assert np.array_equal(amplitude[...], f3["cube"].astype(np.float32))
    assert np.array_equal(amplitude[5, :, 10:40], f3["cube"][5, :, 10:40].astype(np.float32))
    assert list(amplitude.metadata.dimension_names) == ["inline", "crossline", "time"]


def test_zarr_python_sees_the_sharding_cubeslab_reports(f3_store):
    amplitude = zarr.open_array(f3_store / "amplitude", mode="r")
    ours = cubeslab.Array(f3_store / "amplitude")
    assert ours.shards is not None
    assert amplitude.shards == ours.shards
    assert amplitude.chunks == ours.chunks


def test_zarr_python_reads_coordinate_arrays_equal_to_segyio(f3, f3_store):
    group = zarr.open_group(f3_store, mode="r")
    assert np.array_equal(group["inline"][...], f3["ilines"])
    assert np.array_equal(group["crossline"][...], f3["xlines"])
    assert np.array_equal(group["time"][...], f3["samples"])
    assert np.array_equal(group["cdp_x"][...], f3["cdp_x"])
    assert np.array_equal(group["cdp_y"][...], f3["cdp_y"])
    assert group["trace_mask"][...].all()
    assert group.attrs["cubeslab"]["state"] == "complete"


def test_zarr_python_reads_the_raw_trace_headers_as_in_the_file(f3, f3_store):
    raw_headers = zarr.open_array(f3_store / "raw_headers", mode="r")[...]
    data = f3["path"].read_bytes()
    ns = len(f3["samples"])
    n_xl = len(f3["xlines"])
    for trace in (0, 1, 17, 200, 413):
        start = 3600 + trace * (240 + 2 * ns)
        assert raw_headers[trace // n_xl, trace % n_xl].tobytes() == data[start : start + 240]


@pytest.mark.parametrize("compress", ["none", "zstd", "gzip:3", "blosc-lz4", "blosc-zstd"])
def test_zarr_python_decodes_every_cubeslab_compression(f3, tmp_path, compress):
    store = tmp_path / "c.zarr"
    cubeslab.ingest(f3["path"], store, compress=compress, dtype="native")
    amplitude = zarr.open_array(store / "amplitude", mode="r")
    assert amplitude.dtype == np.int16
    assert np.array_equal(amplitude[...], f3["cube"])


def test_zarr_python_reads_missing_traces_as_nan_and_mask_false(segy_dir, tmp_path):
    store = tmp_path / "hole.zarr"
    cubeslab.ingest(segy_dir / "small_hole.sgy", store)
    group = zarr.open_group(store, mode="r")
    mask = group["trace_mask"][...]
    assert (~mask).sum() == 1
    assert np.isnan(group["amplitude"][...][~mask]).all()
    assert not np.isnan(group["amplitude"][...][mask]).any()
    assert np.array_equal(mask, cubeslab.open(store).trace_mask)


# -- xarray reads cubeslab stores ------------------------------------------------------------------


def test_xarray_open_zarr_gives_amplitude_and_coords_equal_to_segyio(f3, f3_store):
    ds = xr.open_zarr(f3_store, consolidated=False)
    assert ds["amplitude"].dims == ("inline", "crossline", "time")
    assert np.array_equal(ds["inline"].values, f3["ilines"])
    assert np.array_equal(ds["crossline"].values, f3["xlines"])
    assert np.array_equal(ds["time"].values, f3["samples"])
    assert np.array_equal(ds["amplitude"].values, f3["cube"].astype(np.float32))
    il, xl = int(f3["ilines"][7]), int(f3["xlines"][3])
    assert np.array_equal(ds["amplitude"].sel(inline=il).values, f3["cube"][7].astype(np.float32))
    assert np.array_equal(ds["amplitude"].sel(crossline=xl).values, f3["cube"][:, 3].astype(np.float32))
    assert np.array_equal(ds["cdp_x"].values, f3["cdp_x"])


# -- cubeslab reads MDIO ---------------------------------------------------------------------------


def test_cubeslab_reads_the_mdio_store_equal_to_segyio(f3, mdio_f3):
    cube = cubeslab.open(mdio_f3)
    assert cube.dims == ["inline", "crossline", "time"]
    assert cube.amplitude.shards is None  # MDIO writes unsharded blosc chunks
    assert cube.dtype == np.float32
    assert np.array_equal(cube[...], f3["cube"].astype(np.float32))
    for i, il in enumerate(f3["ilines"]):
        assert np.array_equal(cube.inline[il], f3["cube"][i].astype(np.float32))
    for j, xl in enumerate(f3["xlines"]):
        assert np.array_equal(cube.crossline[xl], f3["cube"][:, j].astype(np.float32))


def test_cubeslab_reads_mdio_coordinates_equal_to_segyio_and_zarr_python(f3, mdio_f3):
    cube = cubeslab.open(mdio_f3)
    group = zarr.open_group(mdio_f3, mode="r", use_consolidated=False)
    assert np.array_equal(cube.coords["inline"], f3["ilines"])
    assert np.array_equal(cube.coords["crossline"], f3["xlines"])
    # MDIO 1.2.3 wrote the time axis from 0 ms, ignoring f3.sgy's 4 ms delay recording time, which segyio
    # applies: cubeslab reports what the store holds; the sample interval agrees with segyio's.
    assert np.array_equal(cube.coords["time"], zarr.open_array(mdio_f3 / "time", mode="r")[...])
    assert np.array_equal(np.diff(cube.coords["time"]), np.diff(f3["samples"]))
    # MDIO scaled the CDP coordinates itself (to within rounding of segyio's / 10): read them as stored
    for name in ("cdp_x", "cdp_y"):
        stored = zarr.open_array(mdio_f3 / name, mode="r")[...]
        assert np.array_equal(cube.headers[name], stored)
        assert np.allclose(cube.headers[name], f3[name], rtol=1e-12, atol=0)
    assert np.array_equal(cube.trace_mask, zarr.open_array(mdio_f3 / "trace_mask", mode="r")[...])
    assert "amplitude" in group


def test_mdio_text_header_equals_the_one_cubeslab_decodes_from_the_source(f3, f3_store, mdio_f3):
    assert cubeslab.open(mdio_f3).text_header == cubeslab.open(f3_store).text_header


def test_mdio_store_to_xarray_selects_like_segyio(f3, mdio_f3):
    ds = cubeslab.open(mdio_f3).to_xarray()
    il = int(f3["ilines"][10])
    assert np.array_equal(ds["amplitude"].sel(inline=il).values, f3["cube"][10].astype(np.float32))


# -- cubeslab reads plain Zarr v3 arrays written by zarr-python ------------------------------------

DTYPES = [
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "bool",
]
COMPRESSORS = {
    "default": "auto",
    "none": None,
    "zstd": ZstdCodec(level=1),
    "gzip": GzipCodec(),
    "blosc": BloscCodec(),
}


def random_array(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) > 0.5
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)


@pytest.mark.parametrize("sharded", [False, True], ids=["unsharded", "sharded"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cubeslab_reads_zarr_python_arrays_of_every_dtype(tmp_path, dtype, sharded):
    data = random_array((13, 25, 17), dtype)
    path = tmp_path / "a.zarr"
    written = zarr.create_array(
        path, shape=data.shape, dtype=dtype, chunks=(4, 6, 5), shards=(8, 12, 10) if sharded else None
    )
    written[...] = data
    array = cubeslab.Array(path)
    assert array.dtype == data.dtype
    assert (array.shards is not None) == sharded
    assert np.array_equal(array[...], data)
    for key in [(3, slice(None), 5), (slice(2, 12, 3), slice(None, None, -4), slice(1, 16)), (-1, -1, -1)]:
        assert np.array_equal(array[key], data[key]), key


@pytest.mark.parametrize("sharded", [False, True], ids=["unsharded", "sharded"])
@pytest.mark.parametrize("compressor", list(COMPRESSORS))
def test_cubeslab_reads_zarr_python_arrays_with_every_compressor(tmp_path, compressor, sharded):
    data = random_array((30, 20, 9), "float32", seed=3)
    path = tmp_path / "a.zarr"
    written = zarr.create_array(
        path,
        shape=data.shape,
        dtype=data.dtype,
        chunks=(7, 5, 9),
        shards=(14, 10, 9) if sharded else None,
        compressors=COMPRESSORS[compressor],
    )
    written[...] = data
    assert np.array_equal(cubeslab.Array(path)[...], data)
    assert np.array_equal(cubeslab.Array(path)[:, 3], data[:, 3])


def test_cubeslab_reads_unwritten_chunks_as_the_fill_value(tmp_path):
    path = tmp_path / "sparse.zarr"
    written = zarr.create_array(
        path, shape=(20, 20), dtype="int16", chunks=(5, 5), shards=(10, 10), fill_value=-7
    )
    written[0:3, 0:3] = 1
    written[12:20, 15:20] = 9
    assert np.array_equal(cubeslab.Array(path)[...], written[...])


def test_cubeslab_reads_big_endian_chunks(tmp_path):
    path = tmp_path / "be.zarr"
    data = random_array((20, 12), "float64", seed=5)
    written = zarr.create_array(
        path, shape=data.shape, dtype=data.dtype, chunks=(5, 4), serializer=BytesCodec(endian="big")
    )
    written[...] = data
    assert np.array_equal(cubeslab.Array(path)[...], data)


def test_cubeslab_opens_a_plain_array_as_a_cube_with_its_dimension_names(tmp_path):
    path = tmp_path / "plain.zarr"
    data = random_array((6, 7, 8), "float32", seed=9)
    written = zarr.create_array(
        path, shape=data.shape, dtype=data.dtype, chunks=(3, 3, 3), dimension_names=["x", "y", "z"]
    )
    written[...] = data
    cube = cubeslab.open(path)
    assert cube.dims == ["x", "y", "z"]
    assert all(
        np.array_equal(cube.coords[d], np.arange(n)) for d, n in zip(cube.dims, data.shape, strict=True)
    )
    assert np.array_equal(cube[2:5, ::2, -1], data[2:5, ::2, -1])
    assert cube.trace_mask.all() and cube.trace_mask.shape == (6, 7)


def test_cubeslab_opens_an_xarray_dataset_by_its_one_data_variable(tmp_path):
    """xarray writes a group of arrays: its data variables, and its coordinates (1-D, named as their
    dimension). With one data variable, cubeslab reads that one; with several it names them, and each
    opens by its path. A Zarr v2 store is named as such, not reported missing."""
    temperature = random_array((4, 5, 6), "float32", seed=3)
    ds = xr.Dataset(
        {"temperature": (("t", "y", "x"), temperature)},
        coords={"t": np.arange(4), "y": np.linspace(0, 1, 5), "x": np.arange(6.0)},
    )
    ds.to_zarr(tmp_path / "one.zarr", zarr_format=3, consolidated=False)
    cube = cubeslab.open(tmp_path / "one.zarr")
    assert cube.dims == ["t", "y", "x"]
    assert np.array_equal(cube[1:3, ::2, -1], xr.open_zarr(tmp_path / "one.zarr").temperature[1:3, ::2, -1])

    ds["rain"] = ds.temperature * 2
    ds.to_zarr(tmp_path / "two.zarr", zarr_format=3, consolidated=False)
    with pytest.raises(
        cubeslab.InvalidInputError, match=r"two\.zarr: .* data arrays: rain, temperature; open"
    ):
        cubeslab.open(tmp_path / "two.zarr")
    assert np.array_equal(cubeslab.open(tmp_path / "two.zarr" / "rain")[...], 2 * temperature)

    ds.to_zarr(tmp_path / "v2.zarr", zarr_format=2, consolidated=False)
    for path, node in ((tmp_path / "v2.zarr", "group"), (tmp_path / "v2.zarr" / "rain", "array")):
        with pytest.raises(cubeslab.InvalidInputError, match=f"a Zarr v2 {node} .* cubeslab reads Zarr v3"):
            cubeslab.open(path)


@pytest.mark.parametrize("compress", [None, "zstd:2", "gzip", "blosc-lz4"])
def test_zarr_python_reads_arrays_written_by_cubeslab(tmp_path, compress):
    data = random_array((19, 23, 11), "int32", seed=11)
    path = tmp_path / "ours.zarr"
    cubeslab.Array.from_numpy(path, data, chunks=(4, 5, 6), shards=(8, 10, 12), compress=compress)
    assert np.array_equal(zarr.open_array(path, mode="r")[...], data)


# -- cubeslab's xarray and dask views --------------------------------------------------------------


def test_to_xarray_is_lazy_and_sel_reads_only_the_selected_plane(f3, f3_store, monkeypatch):
    cube = cubeslab.open(f3_store)
    reads = []
    original = cubeslab.Array.read

    def spy(self, window=(), *args, **kwargs):
        if self.path.endswith("amplitude"):
            reads.append(window)
        return original(self, window, *args, **kwargs)

    monkeypatch.setattr(cubeslab.Array, "read", spy)
    ds = cube.to_xarray()
    assert reads == [], "to_xarray() read amplitudes before they were asked for"
    il = int(f3["ilines"][4])
    plane = ds["amplitude"].sel(inline=il).values
    assert np.array_equal(plane, f3["cube"][4].astype(np.float32))
    assert len(reads) >= 1
    for window in reads:  # one inline only, never the whole cube
        first = window[0] if isinstance(window, tuple) else window
        touched = [int(first)] if isinstance(first, (int, np.integer)) else list(range(*first.indices(23)))
        assert touched == [4], window


def test_to_xarray_selections_equal_segyio(f3, f3_store):
    ds = cubeslab.open(f3_store).to_xarray()
    assert np.array_equal(ds["inline"].values, f3["ilines"])
    assert np.array_equal(ds["crossline"].values, f3["xlines"])
    assert np.array_equal(ds["time"].values, f3["samples"])
    cube = f3["cube"].astype(np.float32)
    xl, t = int(f3["xlines"][11]), float(f3["samples"][30])
    assert np.array_equal(ds["amplitude"].sel(crossline=xl).values, cube[:, 11])
    assert np.array_equal(ds["amplitude"].sel(time=t).values, cube[..., 30])
    window = ds["amplitude"].isel(inline=slice(2, 9, 3), time=slice(None, None, -5)).values
    assert np.array_equal(window, cube[2:9:3, :, ::-5])
    assert np.array_equal(ds["cdp_x"].values, f3["cdp_x"])
    assert ds["trace_mask"].values.all()


def test_to_dask_computes_to_the_numpy_oracle(tmp_path):
    data = random_array((37, 29, 41), "float32", seed=13)
    path = tmp_path / "d.zarr"
    cubeslab.Array.from_numpy(path, data, chunks=(4, 5, 6), shards=(8, 10, 12))
    cube = cubeslab.open(path)
    lazy = cube.to_dask()
    assert lazy.chunksize == (8, 10, 12)  # one task per shard
    assert np.array_equal(lazy.compute(), data)
    assert np.array_equal(lazy[3:30:4, 5, ::-2].compute(), data[3:30:4, 5, ::-2])
    assert np.isclose(float(lazy.sum().compute()), float(data.astype(np.float64).sum()), rtol=1e-5)


def test_to_dask_of_a_survey_equals_segyio(f3, f3_store):
    lazy = cubeslab.open(f3_store).to_dask(chunks=(5, 7, 16))
    assert np.array_equal(lazy.compute(), f3["cube"].astype(np.float32))


def test_arrays_travel_between_processes_by_path(f3, f3_store):
    """Dask's process scheduler pickles the array into real worker processes, which reopen it by path."""
    import pickle

    import dask

    amplitude = cubeslab.open(f3_store).amplitude
    clone = pickle.loads(pickle.dumps(amplitude))
    assert clone.path == amplitude.path and np.array_equal(clone[3], amplitude[3])
    lazy = cubeslab.open(f3_store).to_dask(chunks=(8, 9, 25))
    (computed,) = dask.compute(lazy.sum(axis=2), scheduler="processes", num_workers=2)
    assert np.allclose(computed, f3["cube"].astype(np.float32).sum(axis=2, dtype=np.float64), rtol=1e-5)


def test_cubeslab_reads_a_zarr_python_array_with_non_finite_attributes(tmp_path):
    """zarr-python writes NaN and Infinity attributes as bare words, which JSON has not: cubeslab reads
    them (as the strings Zarr v3 names non-finite fill values by) and the values as zarr-python does."""
    path = tmp_path / "za.zarr"
    written = zarr.create_array(
        path, shape=(4, 5), chunks=(2, 5), dtype="f4", zarr_format=3,
        attributes={"missing": float("nan"), "range": [float("-inf"), 1.5]},
    )  # fmt: skip
    written[...] = np.arange(20, dtype="f4").reshape(4, 5)
    assert "NaN" in (path / "zarr.json").read_text()  # not JSON: the case this covers
    cube = cubeslab.open(path)
    np.testing.assert_array_equal(cube[...], zarr.open_array(path, mode="r")[...])
    assert cube.amplitude.metadata["attributes"] == {"missing": "NaN", "range": ["-Infinity", 1.5]}


def tensorstore_reads_every_array(store) -> bool:
    """TensorStore (the oracle) opens and reads each array of the store."""
    import json

    import tensorstore as ts

    for node in sorted(store.rglob("zarr.json")):
        if json.loads(node.read_text())["node_type"] != "array":
            continue
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(node.parent)}}
        try:
            ts.open(spec).result().read().result()
        except ValueError:
            return False
    return True


def zarr_python_reads_every_array(store) -> bool:
    """zarr-python (the oracle) opens and reads each array of the store."""
    import json

    for node in sorted(store.rglob("zarr.json")):
        if json.loads(node.read_text())["node_type"] != "array":
            continue
        try:
            zarr.open_array(node.parent, mode="r")[...]
        except (ValueError, TypeError, KeyError):
            return False
    return True


def test_info_names_only_the_tools_that_read_every_array_of_the_store(tmp_path, f3_store, data_dir):
    """A text-label coordinate (Zarr's string type), which TensorStore refuses, or MDIO's struct headers,
    which zarr-python refuses, take the tool off readable_by; the oracles open each array."""
    from cubeslab.store_report import store_report

    labelled = xr.Dataset(
        {"t": (("site", "x"), np.arange(6, dtype="f4").reshape(3, 2))},
        coords={"site": ["a", "bb", "c"], "x": [0.5, 1.5]},
    )
    labelled.to_netcdf(tmp_path / "labels.nc")
    cubeslab.ingest(tmp_path / "labels.nc", tmp_path / "labels.zarr")
    stores = [tmp_path / "labels.zarr", f3_store, data_dir / "mdio" / "f3.mdio"]
    expected = [(False, True), (True, True), (False, False)]
    for store, (by_tensorstore, by_zarr) in zip(stores, expected, strict=True):
        readers = store_report(store)["readable_by"]
        assert tensorstore_reads_every_array(store) is by_tensorstore, store
        assert zarr_python_reads_every_array(store) is by_zarr, store
        assert ("TensorStore" in readers) is by_tensorstore, (store, readers)
        assert ("zarr-python / xarray.open_zarr" in readers) is by_zarr, (store, readers)
        assert 'xarray engine="cubeslab"' in readers
        xr.open_dataset(store, engine="cubeslab")
