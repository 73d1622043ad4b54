"""xarray through cubeslab's engine: the backend ``engine="cubeslab"`` and ``Cube.to_xarray``.

Oracles: xarray's own Zarr engine (``xr.open_zarr``, zarr-python underneath) for values, coordinates
and attributes; numpy indexing of the whole volume (read once) for lazy selections.
"""

from __future__ import annotations

import asyncio
import json
import pickle
from pathlib import Path

import dask
import numpy as np
import pytest
import xarray as xr
import zarr

import cubeslab
from cubeslab.xarray_backend import CubeslabBackendEntrypoint

ENGINE = CubeslabBackendEntrypoint  # the class itself: works without the installed entry point
# f3 is 23 x 18 x 75: several shards along inline and crossline, several inner chunks per shard
LAYOUT = "4x6x25/8x12x75"
SHARD_CHUNKS = ((8, 8, 7), (12, 6), (75,))

pytestmark = pytest.mark.filterwarnings(
    # xarray's Zarr engine on stores without consolidated metadata (every Zarr v3 store)
    "ignore:Failed to open Zarr store with consolidated metadata:RuntimeWarning",
    # f3.sgy's binary and trace headers disagree on the sample count (cubeslab warns, and copes)
    "ignore::cubeslab.IngestWarning",
    # chunks=(...) that split shards, asked for on purpose
    "ignore:The specified chunks separate the stored chunks:UserWarning",
)


@pytest.fixture
def f3_store(ingest_cube, segy_dir) -> Path:
    return ingest_cube(segy_dir / "f3.sgy", layout=LAYOUT).path


def amplitude_codec(store: Path) -> str:
    """Name of the amplitude's array-to-bytes codec (inside the sharding codec when sharded)."""
    codecs = json.loads((store / "amplitude" / "zarr.json").read_text())["codecs"]
    if codecs[0]["name"] == "sharding_indexed":
        codecs = codecs[0]["configuration"]["codecs"]
    names = [c["name"] for c in codecs]
    return next(n for n in names if n in ("bytes", "zfp", "numcodecs.zfpy"))


# -- the backend against xarray's Zarr engine -------------------------------------------------------


def test_engine_gives_the_values_coordinates_and_attributes_xarray_zarr_gives(f3_store):
    ours = xr.open_dataset(f3_store, engine=ENGINE)
    theirs = xr.open_zarr(f3_store)
    assert set(ours.data_vars) == {"amplitude", "trace_mask"}
    assert set(ours.coords) == {"inline", "crossline", "time", "cdp_x", "cdp_y"}
    assert set(ours.indexes) == {"inline", "crossline", "time"}
    assert ours["cdp_x"].dims == ("inline", "crossline")
    # values, coordinates (cdp_x / cdp_y included) and dimension order
    xr.testing.assert_equal(ours, theirs[["amplitude", "trace_mask"]])
    assert ours["amplitude"].dims == theirs["amplitude"].dims == ("inline", "crossline", "time")
    # the group's attributes, but cubeslab's own bookkeeping
    assert ours.attrs == {k: v for k, v in theirs.attrs.items() if k != "cubeslab"}
    assert ours.attrs["name"] == "PostStack3DTime"
    # units: the sample axis in ms (4.0, 8.0 ... as segyio counts), the CDP coordinates in m
    assert ours["time"].attrs["units"] == "ms"
    assert ours["time"].values[:2].tolist() == [4.0, 8.0]
    assert ours["cdp_x"].attrs["units"] == ours["cdp_y"].attrs["units"] == "m"
    assert ours["cdp_x"].attrs["unitsV1"] == theirs["cdp_x"].attrs["unitsV1"]
    # the encoding says what xarray's Zarr engine says about chunks and shards
    for key in ("chunks", "shards"):
        assert ours["amplitude"].encoding[key] == theirs["amplitude"].encoding[key]
    assert ours["amplitude"].encoding["preferred_chunks"] == {"inline": 8, "crossline": 12, "time": 75}


def test_engine_opens_lazily_and_reads_only_what_a_selection_needs(f3_store, monkeypatch):
    reads = []
    original = cubeslab.Array.read

    def spy(self, window=(), *args, **kwargs):
        if self.path.endswith("amplitude"):
            reads.append(window)
        return original(self, window, *args, **kwargs)

    monkeypatch.setattr(cubeslab.Array, "read", spy)
    ds = xr.open_dataset(f3_store, engine=ENGINE)
    assert reads == [], "open_dataset read amplitudes before they were asked for"
    plane = ds["amplitude"].isel(inline=4).values
    assert plane.shape == (18, 75)
    assert reads == [(4, slice(None), slice(None))]  # one read: the one inline


def test_lazy_selections_equal_numpy(f3_store):
    ds = xr.open_dataset(f3_store, engine=ENGINE)
    cube = cubeslab.open(f3_store)
    full = cube[...]
    amplitude = ds["amplitude"]
    # basic: integers, slices with steps, negative steps
    assert np.array_equal(amplitude.isel(inline=3).values, full[3])
    assert np.array_equal(amplitude.isel(crossline=slice(2, 17, 3), time=-1).values, full[:, 2:17:3, -1])
    assert np.array_equal(amplitude.isel(inline=slice(None, None, -2)).values, full[::-2])
    # outer: lists of positions evenly spaced (one read), close together (one span), spread out
    # (plane by plane), unsorted and repeated (xarray sorts, we read, xarray reorders)
    for positions in ([1, 5, 9], [2, 3, 5, 6], [0, 11, 22], [20, 0, 7, 7]):
        expected = full[positions][:, 4:16, ::-7]
        got = amplitude.isel(inline=positions, crossline=slice(4, 16), time=slice(None, None, -7)).values
        assert np.array_equal(got, expected), positions
        assert np.array_equal(amplitude.isel(time=positions, crossline=5).values, full[:, 5][:, positions])
    got = amplitude.isel(inline=[0, 11, 22], crossline=[1, 2, 17], time=[3, 50]).values
    assert np.array_equal(got, full[np.ix_([0, 11, 22], [1, 2, 17], [3, 50])])
    # vectorized (pointwise): one trace per point
    il = xr.DataArray([0, 5, 22], dims="point")
    xl = xr.DataArray([17, 3, 0], dims="point")
    assert np.array_equal(amplitude.isel(inline=il, crossline=xl).values, full[[0, 5, 22], [17, 3, 0]])
    # by label
    assert np.array_equal(amplitude.sel(inline=120, time=100.0).values, full[9, :, 24])
    assert np.array_equal(ds["cdp_x"].isel(inline=[2, 7]).values, cube.headers["cdp_x"][[2, 7]])


def test_async_loads_equal_numpy(f3_store):
    ds = xr.open_dataset(f3_store, engine=ENGINE)
    full = cubeslab.open(f3_store)[...]

    async def load_two():
        return await asyncio.gather(
            ds["amplitude"].isel(inline=3).load_async(), ds["amplitude"].isel(time=[1, 40]).load_async()
        )

    plane, samples = asyncio.run(load_two())
    assert np.array_equal(plane.values, full[3])
    assert np.array_equal(samples.values, full[:, :, [1, 40]])


def test_chunks_empty_gives_one_dask_chunk_per_shard(f3_store):
    ds = xr.open_dataset(f3_store, engine=ENGINE, chunks={})
    assert ds["amplitude"].chunks == SHARD_CHUNKS
    assert ds["trace_mask"].chunks == ds["cdp_x"].chunks == SHARD_CHUNKS[:2]
    # xarray's Zarr engine, for contrast, chunks by the inner chunks (here 4 x 6 x 25)
    assert xr.open_zarr(f3_store)["amplitude"].chunks == ((4,) * 5 + (3,), (6,) * 3, (25,) * 3)
    # ... and takes the shards when told to: the one argument open_zarr users need
    shards = xr.open_zarr(f3_store, chunks=None)["amplitude"].encoding["shards"]
    told = xr.open_zarr(f3_store, chunks=dict(zip(("inline", "crossline", "time"), shards, strict=True)))
    assert told["amplitude"].chunks == SHARD_CHUNKS
    full = cubeslab.open(f3_store)[...]
    assert np.array_equal(ds["amplitude"].values, full)
    assert np.isclose(float(ds["amplitude"].mean()), full.astype(np.float64).mean(), rtol=1e-6)
    window = ds["amplitude"].isel(inline=slice(5, 20), crossline=[0, 9, 17], time=slice(70, 2, -3))
    assert np.array_equal(window.values, full[5:20][:, [0, 9, 17]][:, :, 70:2:-3])


def test_to_xarray_is_lazy_by_default_and_dask_backed_on_request(f3_store):
    cube = cubeslab.open(f3_store)
    full = cube[...]
    lazy = cube.to_xarray()
    assert lazy["amplitude"].chunks is None  # numpy-backed, no dask
    assert not lazy["amplitude"].variable._in_memory
    for chunks in ({}, "shards"):
        assert cube.to_xarray(chunks=chunks)["amplitude"].chunks == SHARD_CHUNKS
    assert cube.to_xarray(chunks=(10, 18, 40))["amplitude"].chunks == ((10, 10, 3), (18,), (40, 35))
    assert cube.to_xarray(chunks={"inline": 5})["amplitude"].chunks == ((5,) * 4 + (3,), (12, 6), (75,))
    xr.testing.assert_identical(lazy, xr.open_dataset(f3_store, engine=ENGINE))
    # many small chunks, computed by dask's threads at once: the engine's reads are thread-safe
    small = cube.to_xarray(chunks=(2, 3, 10))["amplitude"]
    assert small.data.npartitions == 12 * 6 * 8
    with dask.config.set(scheduler="threads", num_workers=8):
        assert np.array_equal(small.values, full)
    # dask's process and distributed schedulers move tasks by pickle
    assert np.array_equal(pickle.loads(pickle.dumps(small)).values, full)
    assert np.array_equal(pickle.loads(pickle.dumps(lazy))["amplitude"].values, full)


def test_to_xarray_keeps_the_cube_open_and_its_read_settings(f3_store):
    cube = cubeslab.open(f3_store, threads=1, verify=False)
    ds = cube.to_xarray()
    backend = ds["amplitude"].variable._data
    while not isinstance(backend, cubeslab.xarray_backend.CubeslabBackendArray):
        backend = backend.array
    assert backend.array is cube.amplitude
    ds.close()
    assert np.array_equal(cube.inline[111], ds["amplitude"].sel(inline=111).values)


def test_engine_options_pass_to_cubeslab_open(f3_store):
    ds = xr.open_dataset(f3_store, engine=ENGINE, threads=1, in_flight=2, verify=False)
    backend = ds["amplitude"].variable._data
    while not isinstance(backend, cubeslab.xarray_backend.CubeslabBackendArray):
        backend = backend.array
    assert backend.array.settings == cubeslab.ReadSettings(threads=1, in_flight=2, verify=False)
    dropped = xr.open_dataset(f3_store, engine=ENGINE, drop_variables=["trace_mask", "cdp_y"])
    assert set(dropped.variables) == {"amplitude", "inline", "crossline", "time", "cdp_x"}


# -- stores other readers cannot decode -------------------------------------------------------------


def test_zfp_store_opens_through_the_engine(ingest_cube, segy_dir):
    cube = ingest_cube(segy_dir / "f3.sgy", compress="zfp:tolerance=0.01")
    ds = xr.open_dataset(cube.path, engine=ENGINE, chunks={})
    assert np.array_equal(ds["amplitude"].values, cube[...])
    source = cubeslab.open(ingest_cube(segy_dir / "f3.sgy").path)[...]
    assert np.abs(ds["amplitude"].values - source).max() <= 0.01
    assert np.array_equal(ds["inline"].values, cube.coords["inline"])
    # numcodecs' zfpy, which zarr-python decodes bit for bit as cubeslab does
    assert amplitude_codec(cube.path) == "numcodecs.zfpy"
    assert np.array_equal(xr.open_zarr(cube.path)["amplitude"].values, cube[...])


def test_info_names_the_readers_of_each_zfp_store_and_they_do_read_it(ingest_cube, segy_dir):
    from cubeslab.cli import store_report

    readable = ingest_cube(segy_dir / "f3.sgy", compress="zfp:rate=8")
    assert "zarr-python / xarray.open_zarr" in store_report(readable.path)["readable_by"]
    assert np.array_equal(zarr.open_array(readable.path / "amplitude")[...], readable[...])
    # ZFP's expert mode exists only in zarrs' own codec: cubeslab and its xarray engine read it
    expert = ingest_cube(segy_dir / "f3.sgy", compress="zfp:minbits=1,maxbits=200,maxprec=64,minexp=-10")
    assert amplitude_codec(expert.path) == "zfp"
    assert store_report(expert.path)["readable_by"] == ["cubeslab", 'xarray engine="cubeslab"']
    with pytest.raises(zarr.errors.UnknownCodecError, match="zfp"):
        xr.open_zarr(expert.path)
    ds = xr.open_dataset(expert.path, engine=ENGINE)
    assert np.array_equal(ds["amplitude"].values, expert[...])


# -- other stores -----------------------------------------------------------------------------------


def test_missing_traces_are_nan_and_false_in_the_mask(ingest_cube, segy_dir):
    cube = ingest_cube(segy_dir / "small_hole.sgy")
    ds = xr.open_dataset(cube.path, engine=ENGINE)
    mask = ds["trace_mask"].values
    assert not mask.all() and mask.any()
    assert np.isnan(ds["amplitude"].values[~mask]).all()
    xr.testing.assert_equal(ds, xr.open_zarr(cube.path)[["amplitude", "trace_mask"]])


def test_prestack_store_has_the_offset_dimension(ingest_cube, segy_dir):
    cube = ingest_cube(segy_dir / "small-ps.sgy")
    ds = xr.open_dataset(cube.path, engine=ENGINE, chunks={})
    assert ds["amplitude"].dims == ("inline", "crossline", "offset", "time")
    assert ds["cdp_x"].dims == ("inline", "crossline", "offset")
    assert ds.attrs["name"] == "PreStackCdpOffsetGathers3DTime"
    xr.testing.assert_equal(ds, xr.open_zarr(cube.path)[["amplitude", "trace_mask"]])


def test_depth_store_has_its_axis_in_metres(ingest_cube, segy_dir):
    cube = ingest_cube(segy_dir / "small.sgy", vertical="depth")
    ds = cube.to_xarray()
    assert ds["amplitude"].dims[-1] == "depth"
    assert ds["depth"].attrs["units"] == "m"


def test_mdio_store_opens_through_the_engine_with_its_statistics(mdio_f3):
    ds = xr.open_dataset(mdio_f3, engine=ENGINE, chunks={})
    # xarray's Zarr engine cannot open this store at all: zarr-python has no "struct" data type,
    # which MDIO gives its trace headers (drop_variables comes too late to help)
    with pytest.raises(ValueError, match="No Zarr data type found"):
        xr.open_zarr(mdio_f3, drop_variables=["headers"])
    for name in ("amplitude", "trace_mask", "inline", "crossline", "time", "cdp_x", "cdp_y"):
        stored = zarr.open_array(mdio_f3 / name, mode="r")
        assert np.array_equal(ds[name].values, stored[...], equal_nan=stored.dtype.kind == "f"), name
        assert ds[name].dims == tuple(stored.metadata.dimension_names), name
    assert ds.attrs == zarr.open_group(mdio_f3, mode="r").attrs.asdict()
    # MDIO's statistics as MDIO writes them: a JSON string in the amplitude's attributes
    stored = zarr.open_array(mdio_f3 / "amplitude", mode="r").attrs["statsV1"]
    assert ds["amplitude"].attrs["statsV1"] == stored
    stats = json.loads(stored)
    assert set(stats) == {"count", "sum", "sumSquares", "min", "max", "histogram"}
    values = ds["amplitude"].values.astype(np.float64)
    assert stats["count"] == np.count_nonzero(values) < values.size  # MDIO leaves zero samples out
    assert stats["sum"] == values.sum() and stats["sumSquares"] == (values**2).sum()
    assert stats["min"] == values.min() and stats["max"] == values.max()
    assert "_FillValue" not in ds["amplitude"].attrs  # MDIO's base64 fill value is encoding, not data
    assert ds["time"].attrs["units"] == "ms"
    assert ds["amplitude"].chunks == ((23,), (18,), (75,))  # MDIO's 128^3 chunk covers it all


def test_a_plain_array_store_gives_one_variable_over_positions(tmp_path):
    data = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)
    path = tmp_path / "plain.zarr"
    cubeslab.Array.from_numpy(path, data, chunks=(2, 3, 5), shards=(4, 6, 5))
    ds = cubeslab.open(path).to_xarray(chunks={})
    assert list(ds.data_vars) == ["amplitude"]
    assert ds["amplitude"].chunks == ((4,), (6,), (5,))
    assert np.array_equal(ds["amplitude"].values, data)


# -- which stores the engine claims -------------------------------------------------------------------


def test_guess_can_open_claims_only_stores_cubeslab_wrote(f3_store, mdio_f3, tmp_path):
    backend = CubeslabBackendEntrypoint()
    assert backend.guess_can_open(f3_store)
    assert backend.guess_can_open(str(f3_store))
    plain_array = tmp_path / "plain-array.zarr"
    zarr.create_array(plain_array, data=np.zeros((4, 5), dtype=np.float32))
    plain_group = tmp_path / "plain-group.zarr"
    zarr.open_group(plain_group, mode="w", attributes={"title": "not cubeslab"})
    ours_by_array = tmp_path / "array.zarr"
    cubeslab.Array.from_numpy(ours_by_array, np.zeros((4, 5), dtype=np.float32), chunks=(2, 5))
    for other in (plain_array, plain_group, ours_by_array, mdio_f3, tmp_path / "absent.zarr", tmp_path):
        assert not backend.guess_can_open(other), other
    assert not backend.guess_can_open(b"CDF\x01")


def test_engine_name_cubeslab_is_registered(f3_store):
    """The entry point in pyproject.toml, registered when the package is installed (pip install -e .
    or maturin develop): xr.open_dataset(store, engine="cubeslab") and, for stores cubeslab wrote,
    xr.open_dataset(store) with no engine (cubeslab is asked before the Zarr engine)."""
    assert "cubeslab" in xr.backends.list_engines(), "reinstall the package to register the entry point"
    ds = xr.open_dataset(f3_store, engine="cubeslab", chunks={})
    assert ds["amplitude"].chunks == SHARD_CHUNKS
    xr.testing.assert_identical(ds.compute(), xr.open_dataset(f3_store, engine=ENGINE).compute())
    assert xr.open_dataset(f3_store, chunks={})["amplitude"].chunks == SHARD_CHUNKS


@pytest.mark.parametrize("packing_type", [np.float64, np.float32])
def test_a_netcdf_ingest_decodes_through_the_engine_as_xarray_opens_the_file(tmp_path, packing_type):
    """Packed values (scale_factor, add_offset, _FillValue) and CF times: engine="cubeslab" and
    ``to_xarray`` give what xarray.open_dataset gives from the NetCDF file, float32 packing decoded to
    float32 (its JSON attributes alone would give float64); decode_cf=False the raw."""
    pytest.importorskip("netCDF4")
    import pandas as pd

    values = np.array([[10.0, 60.0, np.nan], [12.5, 13.0, 13.5]])
    source = xr.Dataset(
        {"v": (("time", "x"), values, {"long_name": "packed"})},
        coords={"time": pd.date_range("2020-01-01", periods=2), "x": [1, 2, 3]},
    )
    scale, offset = packing_type(0.5), packing_type(10)
    packing = {"dtype": "int16", "scale_factor": scale, "add_offset": offset, "_FillValue": -32767}
    source.to_netcdf(tmp_path / "p.nc", encoding={"v": packing})
    cubeslab.ingest(tmp_path / "p.nc", tmp_path / "p.zarr")
    expected = xr.open_dataset(tmp_path / "p.nc")["v"].load().reset_coords(drop=True)
    assert expected.dtype == packing_type

    mine = xr.open_dataset(tmp_path / "p.zarr", engine="cubeslab")["v"].load().reset_coords(drop=True)
    xr.testing.assert_identical(mine, expected)
    through_cube = cubeslab.open(tmp_path / "p.zarr").to_xarray()["v"].load().reset_coords(drop=True)
    xr.testing.assert_identical(through_cube, expected)
    assert mine.dtype == through_cube.dtype == expected.dtype  # identical() does not compare types
    raw = xr.open_dataset(tmp_path / "p.zarr", engine="cubeslab", decode_cf=False)
    assert raw["v"].dtype == np.int16 and raw["v"].values[0, 2] == -32767
    assert raw["time"].values.tolist() == [0, 1]


def test_dimensions_without_a_stored_coordinate_are_left_unlabelled_as_xarray_s_zarr_engine_leaves_them(
    tmp_path,
):
    """A store with a coordinate for one dimension of two: the engine gives that one alone, as xarray's
    Zarr engine does (positions made up as labels would make ``sel`` and alignment differ)."""
    values = np.arange(12, dtype="f4").reshape(3, 4)
    with cubeslab.create(tmp_path / "c.zarr", (3, 4), dims=["t", "x"], coords={"t": [0.5, 1.5, 2.5]}) as c:
        c[...] = values
    mine = xr.open_dataset(tmp_path / "c.zarr", engine="cubeslab")
    theirs = xr.open_zarr(tmp_path / "c.zarr", consolidated=False)
    assert list(mine.coords) == list(theirs.coords) == ["t"]
    xr.testing.assert_identical(mine["data"].load(), theirs["data"].load())
    mine.to_netcdf(tmp_path / "c.nc")  # no nested record among the attributes
    with xr.open_dataset(tmp_path / "c.nc") as back:
        xr.testing.assert_identical(back["data"].load(), theirs["data"].load())


def test_packed_coordinates_decode_as_xarray_decodes_the_file_s_so_labels_select(tmp_path):
    """A coordinate packed with a float32 scale_factor (as GOES packs x and y) decodes to float32, as
    xarray decodes it from the file: a label read from the file selects, and the two align."""
    pytest.importorskip("netCDF4")
    x = np.linspace(-0.1, 0.1, 300)
    source = xr.Dataset({"v": (("x",), np.arange(300.0))}, coords={"x": x})
    packing = {"dtype": "int16", "scale_factor": np.float32(1e-5), "add_offset": np.float32(0.0)}
    source.to_netcdf(tmp_path / "c.nc", encoding={"x": packing})
    cubeslab.ingest(tmp_path / "c.nc", tmp_path / "c.zarr", variable="v")
    expected = xr.open_dataset(tmp_path / "c.nc")
    mine = xr.open_dataset(tmp_path / "c.zarr", engine="cubeslab")
    assert mine["x"].dtype == expected["x"].dtype == np.float32
    np.testing.assert_array_equal(mine["x"].values, expected["x"].values)
    label = expected["x"].values[17]
    assert float(mine["v"].sel(x=label)) == 17.0
    assert xr.align(expected["v"], mine["v"], join="inner")[0].size == 300
