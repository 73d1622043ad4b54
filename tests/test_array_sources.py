"""N-D array files as ingest sources: .npy (written by numpy) and raw bytes described by shape, type,
order and offset (written with numpy's tofile), against numpy reading the same file; formats cubeslab
recognises but does not ingest yet are refused, never read as SEG-Y."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr
from conftest import netcdf_file, netcdf_named_like_dimensions

import cubeslab
from cubeslab.store_report import store_report

CLI = [sys.executable, "-m", "cubeslab.cli"]


def volume(shape=(40, 30, 50), dtype="float32", seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 100).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "int16", "uint8", "float64", ">f4", "<i4"])
def test_an_npy_file_ingests_exactly(tmp_path, dtype):
    data = volume(dtype=dtype)
    np.save(tmp_path / "v.npy", data)
    summary = cubeslab.ingest(tmp_path / "v.npy", tmp_path / "v.zarr", memory_limit=1 << 20)
    assert summary["shape"] == list(data.shape)
    oracle = np.load(tmp_path / "v.npy")
    stored = cubeslab.open(tmp_path / "v.zarr")[...]
    assert stored.dtype == oracle.dtype.newbyteorder("=") and np.array_equal(stored, oracle)
    assert np.array_equal(zarr.open_group(tmp_path / "v.zarr", mode="r")["data"][...], oracle)
    assert np.array_equal(xr.open_zarr(tmp_path / "v.zarr", consolidated=False).data.values, oracle)
    assert cubeslab.verify(tmp_path / "v.zarr")["ok"]


def test_an_array_file_ingest_plans_its_shards_within_the_memory_limit(tmp_path):
    data = np.random.default_rng(3).normal(size=(64, 128, 128)).astype("f4")  # 4 MiB
    np.save(tmp_path / "v.npy", data)
    shard_bytes = {}
    for limit in (1 << 20, 1 << 30):
        store = tmp_path / f"{limit}.zarr"
        cubeslab.ingest(tmp_path / "v.npy", store, memory_limit=limit)
        array = cubeslab.open(store).amplitude
        shard_bytes[limit] = int(np.prod(array.shards or array.chunks)) * 4
        np.testing.assert_array_equal(array[...], data)
    assert shard_bytes[1 << 20] <= (1 << 20) < shard_bytes[1 << 30]


@pytest.mark.parametrize("order", ["C", "F"])
def test_raw_bytes_ingest_exactly_in_either_order_after_an_offset(tmp_path, order):
    data = volume((24, 33, 17), "int32")
    raw = tmp_path / "v.raw"
    with open(raw, "wb") as f:
        f.write(b"HEADER--" * 16)  # 128 bytes before the array
        f.write(data.tobytes(order=order))
    cubeslab.ingest(raw, tmp_path / "v.zarr", shape=data.shape, dtype="int32", order=order, offset=128)
    oracle = np.fromfile(raw, dtype="int32", offset=128).reshape(data.shape, order=order)
    assert np.array_equal(cubeslab.open(tmp_path / "v.zarr")[...], oracle)


def test_the_command_line_ingests_raw_bytes_and_a_wrong_size_is_refused(tmp_path):
    data = volume((10, 20, 30))
    data.tofile(tmp_path / "v.bin")
    source = str(tmp_path / "v.bin")
    done = subprocess.run([*CLI, "ingest", source, str(tmp_path / "v.zarr"), "--shape", "10,20,30"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert np.array_equal(cubeslab.open(tmp_path / "v.zarr")[...], data)
    wrong = subprocess.run([*CLI, "ingest", source, str(tmp_path / "w.zarr"), "--shape", "10,20,31"],
                           capture_output=True, text=True)  # fmt: skip
    assert wrong.returncode == 1
    assert "24,000 bytes" in wrong.stderr and "needs 24,800" in wrong.stderr
    assert not (tmp_path / "w.zarr").exists()


def test_a_netcdf_file_without_the_variable_asked_for_lists_those_it_has(tmp_path):
    netcdf_file(tmp_path / "t.nc", "NETCDF4")
    with pytest.raises(
        cubeslab.InvalidInputError, match="no variable pressure; the variables: time, lat, lon, temp"
    ):
        cubeslab.ingest(tmp_path / "t.nc", tmp_path / "x.zarr", variable="pressure")
    empty = tmp_path / "empty.nc"
    empty.write_bytes(b"CDF\x01" + b"\0" * 4000)
    with pytest.raises(cubeslab.InvalidInputError, match="no data variable"):
        cubeslab.ingest(empty, tmp_path / "x.zarr")
    assert not (tmp_path / "x.zarr").exists()


def test_an_object_npy_file_is_refused(tmp_path):
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(cubeslab.InvalidInputError, match=r"not an \.npy file cubeslab reads"):
        cubeslab.ingest(tmp_path / "o.npy", tmp_path / "o.zarr")


def test_an_array_ingest_is_published_only_when_complete_and_overwrite_replaces(tmp_path):
    first, second = volume(seed=1), volume(seed=2)
    np.save(tmp_path / "a.npy", first)
    np.save(tmp_path / "b.npy", second)
    cubeslab.ingest(tmp_path / "a.npy", tmp_path / "s.zarr")
    with pytest.raises(cubeslab.StoreExistsError):
        cubeslab.ingest(tmp_path / "b.npy", tmp_path / "s.zarr")
    assert np.array_equal(cubeslab.open(tmp_path / "s.zarr")[...], first)
    cubeslab.ingest(tmp_path / "b.npy", tmp_path / "s.zarr", overwrite=True)
    assert np.array_equal(cubeslab.open(tmp_path / "s.zarr")[...], second)
    assert not list(Path(tmp_path).glob(".s.zarr.cubeslab-new"))
    assert store_report(tmp_path / "s.zarr")["state"] == "complete"  # written whole by cubeslab


def test_info_describes_an_npy_file_before_ingest(tmp_path):
    data = volume((5, 6, 7), ">i2")
    np.save(tmp_path / "v.npy", np.asfortranarray(data))
    done = subprocess.run([*CLI, "info", str(tmp_path / "v.npy"), "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    import json

    report = json.loads(done.stdout)
    assert (report["format"], report["shape"], report["dtype"], report["order"]) == (
        "npy",
        [5, 6, 7],
        ">i2",
        "F",
    )


def test_export_to_npy_round_trips_exactly(tmp_path, ingest_cube):
    data = volume((13, 21, 34), "float64")
    np.save(tmp_path / "v.npy", data)
    cubeslab.ingest(tmp_path / "v.npy", tmp_path / "v.zarr")
    done = subprocess.run([*CLI, "export", str(tmp_path / "v.zarr"), str(tmp_path / "back.npy")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert np.array_equal(np.load(tmp_path / "back.npy"), data)
    survey = ingest_cube(Path(__file__).resolve().parent / "data/segy/f3.sgy").path
    cubeslab.export(survey, tmp_path / "survey.npy")
    assert np.array_equal(np.load(tmp_path / "survey.npy"), cubeslab.open(survey)[...], equal_nan=True)
    with pytest.raises(cubeslab.StoreExistsError):
        cubeslab.export(survey, tmp_path / "survey.npy")


def write_seplib(folder: Path, data: np.ndarray, fmt: str = "xdr_float") -> Path:
    """A SEPlib pair the documented way: the binary holds axis 1 fastest (Fortran order of n1, n2, n3)."""
    dtype = ">f4" if fmt == "xdr_float" else "<f4"
    (folder / "cube.H@").write_bytes(data.astype(dtype).tobytes(order="F"))
    n1, n2, n3 = data.shape
    header = folder / "cube.H"
    header.write_text(
        f"n1={n1} o1=0 d1=0.004 label1=time unit1=s\n"
        f"n2={n2} o2=100 d2=25 label2=crossline\n"
        f'n3={n3} o3=10 d3=2 label3="inline"\n'
        f"esize=4 data_format={fmt}\nin=cube.H@\n"
    )
    return header


@pytest.mark.parametrize("fmt", ["xdr_float", "native_float"])
def test_a_seplib_cube_ingests_with_its_axes_reversed_and_described(tmp_path, fmt):
    n = (50, 12, 7)  # n1 (fastest), n2, n3
    data = volume(n)
    header = write_seplib(tmp_path, data, fmt=fmt)
    cubeslab.ingest(header, tmp_path / "s.zarr")
    # numpy reading the binary the documented way: Fortran order of (n1, n2, n3)
    dtype = ">f4" if fmt == "xdr_float" else "<f4"
    oracle = np.fromfile(tmp_path / "cube.H@", dtype=dtype).reshape(n, order="F")
    stored = cubeslab.open(tmp_path / "s.zarr")[...]
    assert stored.shape == (7, 12, 50)
    assert np.array_equal(stored, oracle.transpose(2, 1, 0))
    axes = cubeslab.describe(tmp_path / "s.zarr")["axes"]
    assert [(a["name"], a["origin"], a["step"], a["unit"]) for a in axes] == [
        ("inline", 10.0, 2.0, None),
        ("crossline", 100.0, 25.0, None),
        ("time", 0.0, 0.004, "s"),
    ]
    # The unit reaches the coordinate array, where xarray looks for it.
    assert xr.open_zarr(tmp_path / "s.zarr", consolidated=False)["time"].attrs["units"] == "s"
    assert "units" not in xr.open_zarr(tmp_path / "s.zarr", consolidated=False)["inline"].attrs


def test_an_hdf5_dimension_scale_s_units_reach_xarray_so_times_decode(tmp_path):
    import h5py

    with h5py.File(tmp_path / "t.h5", "w") as f:
        f["time"] = np.arange(3.0)
        f["time"].attrs["units"] = "days since 2000-01-01"
        f["time"].make_scale("time")
        f["v"] = np.arange(6.0).reshape(3, 2)
        f["v"].dims[0].attach_scale(f["time"])
    cubeslab.ingest(tmp_path / "t.h5", tmp_path / "t.zarr", dataset="v")
    times = xr.open_zarr(tmp_path / "t.zarr", consolidated=False)["time"].values
    assert times.tolist() == np.array(["2000-01-01", "2000-01-02", "2000-01-03"], "datetime64[ns]").tolist()


def test_axis_labels_that_are_no_folder_names_never_lead_outside_the_store(tmp_path):
    from astropy.io import fits

    (tmp_path / "project").mkdir()
    header = write_seplib(tmp_path, volume((5, 4, 3)))
    labels = {"label1=time": 'label1=".."', "label2=crossline": "label2=m/s", 'label3="inline"': "label3=m/s"}
    text = header.read_text()
    for old, new in labels.items():
        text = text.replace(old, new)
    header.write_text(text)
    cubeslab.ingest(header, tmp_path / "project" / "s.zarr")
    image = fits.PrimaryHDU(np.zeros((3, 4), ">f4"))
    image.header.update(CTYPE1="../../escaped", CDELT1=2.0, CTYPE2="data", CDELT2=3.0)
    image.writeto(tmp_path / "cube.fits")
    cubeslab.ingest(tmp_path / "cube.fits", tmp_path / "project" / "f.zarr")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cube.H", "cube.H@", "cube.fits", "project"]
    assert sorted(p.name for p in (tmp_path / "project").iterdir()) == ["f.zarr", "s.zarr"]
    # Each axis keeps its label where it can name a folder, made so where it holds a separator.
    assert cubeslab.open(tmp_path / "project" / "s.zarr").dims == ["m_s", "dim_1", "dim_2"]
    assert cubeslab.open(tmp_path / "project" / "f.zarr").dims == ["dim_0", "dim_1"]
    with pytest.raises(cubeslab.InvalidInputError, match=r"'\.\.' starts with '\.'"):
        cubeslab.create(tmp_path / "c.zarr", (2, 3), dims=("..", "t"), coords={"..": [1, 2]})
    with pytest.raises(cubeslab.InvalidInputError, match="names a dimension twice"):
        cubeslab.create(tmp_path / "c.zarr", (2, 3), dims=("t", "t"), coords={"t": [1, 2]})
    assert not (tmp_path / "c.zarr").exists()


def test_a_seplib_header_whose_sizes_disagree_with_its_binary_gives_both_numbers(tmp_path):
    header = write_seplib(tmp_path, volume((50, 12, 7)))
    header.write_text(header.read_text().replace("n3=7", "n3=8"))
    with pytest.raises(cubeslab.InvalidInputError, match=r"16,800 bytes.*needs 19,200"):
        cubeslab.ingest(header, tmp_path / "s.zarr")


@pytest.mark.parametrize(("change", "words"), [("in=cube.H@", "no in="), ("in=cube.H@", "no such file")])
def test_a_seplib_header_without_its_binary_is_refused(tmp_path, change, words):
    header = write_seplib(tmp_path, volume((5, 4, 3)))
    text = header.read_text()
    header.write_text(text.replace(change, "") if words == "no in=" else text.replace(change, "in=gone.H@"))
    with pytest.raises(cubeslab.InvalidInputError, match=words):
        cubeslab.ingest(header, tmp_path / "s.zarr")
    assert not (tmp_path / "s.zarr").exists()


def test_a_seplib_cube_round_trips_through_a_store(tmp_path):
    data = volume((30, 8, 5))
    header = write_seplib(tmp_path, data)
    cubeslab.ingest(header, tmp_path / "s.zarr")
    back = tmp_path / "out" / "back.H"
    back.parent.mkdir()
    cubeslab.export(tmp_path / "s.zarr", back)
    assert (tmp_path / "out" / "back.H@").read_bytes() == (tmp_path / "cube.H@").read_bytes()
    cubeslab.ingest(back, tmp_path / "again.zarr")
    again, first = cubeslab.describe(tmp_path / "again.zarr"), cubeslab.describe(tmp_path / "s.zarr")
    again["attributes"].pop("source"), first["attributes"].pop("source")  # where each came from
    assert again == first


def fits_cube(path: Path, data: np.ndarray, **cards) -> None:
    from astropy.io import fits

    hdu = fits.PrimaryHDU(data)
    for key, value in cards.items():
        hdu.header[key] = value
    hdu.writeto(path)


@pytest.mark.parametrize(
    ("raw", "cards"),
    [
        (np.arange(-300, 300, dtype=np.int16).reshape(6, 10, 10), {"BSCALE": 0.5, "BZERO": 10.0, "BLANK": 5}),
        (np.arange(600, dtype=np.int32).reshape(6, 10, 10) - 300, {"BSCALE": 2.5, "BZERO": -1.0}),
        (np.arange(600, dtype=np.int16).reshape(6, 10, 10) - 300, {"BZERO": 32768, "BSCALE": 1}),
        (np.arange(600, dtype=np.int16).reshape(6, 10, 10), {"BLANK": 1.5}),
        (np.arange(600, dtype=np.int16).reshape(6, 10, 10), {"BLANK": True}),
        (
            volume((6, 10, 10)),
            {"CTYPE1": "FREQ", "CRVAL1": 1.4e9, "CDELT1": 1e6, "CRPIX1": 1, "CUNIT1": "Hz"},
        ),
    ],
    ids=[
        "int16-scaled-blank",
        "int32-scaled",
        "uint16-convention",
        "int16-blank-not-an-integer",
        "int16-blank-true",
        "float32-wcs",
    ],
)
def test_a_fits_image_ingests_as_astropy_reads_it(tmp_path, raw, cards):
    from astropy.io import fits

    path = tmp_path / "image.fits"
    fits_cube(path, raw, **cards)
    cubeslab.ingest(path, tmp_path / "f.zarr", memory_limit=1 << 16)
    oracle = fits.getdata(path)  # astropy applies BSCALE, BZERO and BLANK
    stored = cubeslab.open(tmp_path / "f.zarr")[...]
    assert stored.dtype == oracle.dtype.newbyteorder("=")
    assert np.array_equal(stored, oracle, equal_nan=True)
    header = cubeslab.open(tmp_path / "f.zarr").amplitude.attributes["fits_header"]
    assert header["NAXIS1"] == raw.shape[-1]
    if "CRVAL1" in cards:
        axis = cubeslab.describe(tmp_path / "f.zarr")["axes"][-1]
        assert (axis["name"], axis["origin"], axis["step"], axis["unit"]) == ("FREQ", 1.4e9, 1e6, "Hz")


def astropy_world(header, fits_axis: int, size: int) -> np.ndarray:
    """astropy.wcs's world coordinate along FITS axis ``fits_axis`` (the other pixels at 0)."""
    from astropy.wcs import WCS

    wcs = WCS(header)
    pixels = [np.zeros(size)] * header["NAXIS"]
    pixels[fits_axis - 1] = np.arange(size, dtype=float)
    return wcs.pixel_to_world_values(*pixels)[fits_axis - 1]


@pytest.mark.parametrize(
    "cards",
    [
        {"CTYPE1": "FREQ", "CRVAL1": 1e9, "CDELT1": 1e6, "CUNIT1": "Hz", "CTYPE2": "VRAD", "CRVAL2": 5.0},
        {"CTYPE1": "FREQ", "CRVAL1": 1e9, "CRPIX1": 3.0, "CD1_1": 1e6, "CD2_2": 2.0, "CD3_3": 0.1},
        {"CTYPE1": "FREQ", "CRPIX1": 3.0, "CDELT1": 1e6, "PC1_1": 2.0, "CDELT2": 2.0, "CDELT3": 4.0},
        {"CTYPE1": "WAVE", "CRVAL1": 5e-7, "CDELT1": 1e-9, "CD1_1": 7.0, "PC1_1": 2.0, "PC3_3": 3.0},
        {"CTYPE1": "X", "CRPIX1": 2.0, "CDELT1": 1.5, "PC001001": 3.0, "CTYPE3": "VELO-LSR", "CDELT3": 5.0},
    ],
    ids=["crpix-missing", "cd-diagonal", "pc-diagonal", "pc-before-cd", "pc-old-form-and-aips-velocity"],
)
def test_fits_linear_axes_take_the_world_coordinates_astropy_wcs_gives(tmp_path, cards):
    from astropy.io import fits

    fits_cube(tmp_path / "wcs.fits", volume((4, 5, 6)), **cards)
    cubeslab.ingest(tmp_path / "wcs.fits", tmp_path / "f.zarr")
    header = fits.getheader(tmp_path / "wcs.fits")
    store = cubeslab.open(tmp_path / "f.zarr")
    for dim, axis in zip(store.dims, cubeslab.describe(tmp_path / "f.zarr")["axes"], strict=True):
        fits_axis = 3 - store.dims.index(dim)
        if not any(key.endswith(str(fits_axis)) for key in cards):  # an axis the header is silent about
            continue
        world = astropy_world(header, fits_axis, axis["size"])
        np.testing.assert_allclose(store.coords[dim], world, rtol=1e-12)
        assert (tmp_path / "f.zarr" / dim / "zarr.json").is_file()  # a coordinate array xarray shows


@pytest.mark.parametrize(
    ("cards", "pixel_axes"),
    [
        (
            {
                "CTYPE1": "RA---TAN", "CRVAL1": 10.0, "CRPIX1": 3.0, "CDELT1": -0.01, "CUNIT1": "deg",
                "CTYPE2": "DEC--TAN", "CRVAL2": 20.0, "CRPIX2": 2.0, "CDELT2": 0.01, "CUNIT2": "deg",
                "CTYPE3": "VRAD", "CRVAL3": 1000.0, "CDELT3": 500.0, "CUNIT3": "m/s",
            },
            ("RA---TAN", "DEC--TAN"),
        ),
        (
            {
                "CTYPE1": "X", "CRVAL1": 4.0, "CUNIT1": "m", "CD1_1": 0.5, "CD1_2": -0.5,
                "CTYPE2": "Y", "CRVAL2": 8.0, "CUNIT2": "m", "CD2_1": 0.5, "CD2_2": 0.5,
                "CTYPE3": "FREQ", "CRVAL3": 1e9, "CD3_3": 1e6, "CUNIT3": "Hz",
            },
            ("X", "Y"),
        ),
        (
            {
                "CTYPE1": "FREQ-LOG", "CRVAL1": 1e9, "CDELT1": 1e6, "CUNIT1": "Hz",
                "CTYPE2": "RA", "CRVAL2": 1.0, "CDELT2": 1.0, "CUNIT2": "deg",
                "CTYPE3": "DEC", "CRVAL3": 1.0, "CDELT3": 1.0, "CUNIT3": "deg", "CROTA3": 30.0,
            },
            ("FREQ-LOG", "RA", "DEC"),
        ),
    ],
    ids=["celestial-projection", "rotated-cd-matrix", "logarithmic-and-crota"],
)  # fmt: skip
def test_fits_axes_without_a_linear_separable_wcs_stay_pixel_indices_without_a_unit(
    tmp_path, cards, pixel_axes
):
    from astropy.io import fits

    fits_cube(tmp_path / "sky.fits", volume((4, 5, 6)), **cards)
    cubeslab.ingest(tmp_path / "sky.fits", tmp_path / "f.zarr")
    header = fits.getheader(tmp_path / "sky.fits")
    store = cubeslab.open(tmp_path / "f.zarr")
    kept = store.amplitude.attributes["fits_header"]
    assert {key: kept[key] for key in cards} == cards  # the WCS stays in the header cards
    for d, axis in enumerate(cubeslab.describe(tmp_path / "f.zarr")["axes"]):
        if axis["name"] in pixel_axes:
            assert (axis["origin"], axis["step"], axis["unit"]) == (0.0, 1.0, None)
            assert not (tmp_path / "f.zarr" / axis["name"] / "zarr.json").exists()
        else:  # the linear axis beside them keeps its coordinates
            world = astropy_world(header, 3 - d, axis["size"])
            np.testing.assert_allclose(store.coords[axis["name"]], world, rtol=1e-12)


def test_a_fits_hdu_without_data_is_refused(tmp_path):
    from astropy.io import fits

    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(volume((3, 4, 5)))]).writeto(tmp_path / "two.fits")
    with pytest.raises(cubeslab.InvalidInputError, match="HDU 0 holds no image data"):
        cubeslab.ingest(tmp_path / "two.fits", tmp_path / "x.zarr", hdu=0)
    cubeslab.ingest(tmp_path / "two.fits", tmp_path / "y.zarr")  # the first with data: HDU 1
    assert np.array_equal(cubeslab.open(tmp_path / "y.zarr")[...], fits.getdata(tmp_path / "two.fits", 1))


def test_a_damaged_fits_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "broken.fits"
    path.write_bytes(b"SIMPLE  =                    T" + b"\0" * 4000)
    with pytest.raises(cubeslab.InvalidInputError, match=r"broken\.fits: not a FITS file astropy reads"):
        cubeslab.ingest(path, tmp_path / "out.zarr")
    assert not (tmp_path / "out.zarr").exists()


@pytest.mark.parametrize(
    ("dtype", "chunks"), [("<f4", (8, 8, 8)), (">f8", None), (">i2", (4, 16, 16)), ("uint8", (40, 1, 50))]
)
def test_an_hdf5_dataset_ingests_as_h5py_reads_it(tmp_path, dtype, chunks):
    import h5py

    data = volume((40, 30, 50), dtype)
    with h5py.File(tmp_path / "v.h5", "w") as f:
        group = f.create_group("seismic")
        d = group.create_dataset("volume", data=data, chunks=chunks)
        d.attrs["survey"] = "test"
        d.attrs["scale"] = np.float32(0.5)
        for i, (name, start, step) in enumerate(
            [("inline", 100, 2), ("crossline", 10, 1), ("time", 0.0, 4.0)]
        ):
            f[name] = start + step * np.arange(data.shape[i], dtype=float)
            f[name].make_scale(name)
            d.dims[i].attach_scale(f[name])
        f["other"] = np.zeros(3)
    with pytest.raises(
        cubeslab.InvalidInputError, match=r"more than one N-D numeric dataset.*/seismic/volume"
    ):
        cubeslab.ingest(tmp_path / "v.h5", tmp_path / "x.zarr")
    cubeslab.ingest(tmp_path / "v.h5", tmp_path / "v.zarr", dataset="/seismic/volume", memory_limit=1 << 18)
    with h5py.File(tmp_path / "v.h5", "r") as f:
        oracle = f["/seismic/volume"][...]
    store = cubeslab.open(tmp_path / "v.zarr")
    assert np.array_equal(store[...], oracle) and store.dtype == oracle.dtype.newbyteorder("=")
    assert store.amplitude.attributes["survey"] == "test" and store.amplitude.attributes["scale"] == 0.5
    axes = cubeslab.describe(tmp_path / "v.zarr")["axes"]
    assert [(a["name"], a["origin"], a["step"]) for a in axes] == [
        ("inline", 100.0, 2.0),
        ("crossline", 10.0, 1.0),
        ("time", 0.0, 4.0),
    ]


def test_an_uneven_dimension_scale_is_kept_as_its_values(tmp_path):
    import h5py
    import xarray as xr

    with h5py.File(tmp_path / "u.h5", "w") as f:
        data = f.create_dataset("v", data=np.arange(15, dtype="f4").reshape(5, 3))
        scale = f.create_dataset("depth", data=np.array([0, 1, 3, 6, 10], "f4"))
        scale.make_scale("depth")
        data.dims[0].attach_scale(scale)
        expected = scale[...].astype(np.float64)
    cubeslab.ingest(tmp_path / "u.h5", tmp_path / "u.zarr")
    np.testing.assert_array_equal(xr.open_zarr(tmp_path / "u.zarr", consolidated=False)["depth"], expected)
    assert cubeslab.describe(tmp_path / "u.zarr")["axes"][0]["values"] == expected.tolist()
    with pytest.raises(cubeslab.InvalidInputError, match="axis depth is unevenly spaced, which a SEPlib"):
        cubeslab.export(tmp_path / "u.zarr", tmp_path / "u.H")
    assert not (tmp_path / "u.H").exists() and not (tmp_path / "u.H@").exists()


def test_an_hdf5_dataset_that_does_not_exist_lists_those_that_do(tmp_path):
    import h5py

    with h5py.File(tmp_path / "v.h5", "w") as f:
        f["a"] = np.zeros((4, 4))
        f["names"] = np.array([b"x", b"y"])
    with pytest.raises(cubeslab.InvalidInputError, match=r"no dataset /b; the datasets: /a, /names"):
        cubeslab.ingest(tmp_path / "v.h5", tmp_path / "x.zarr", dataset="/b")
    with pytest.raises(cubeslab.InvalidInputError, match=r"/names holds \|S1, not numbers"):
        cubeslab.ingest(tmp_path / "v.h5", tmp_path / "x.zarr", dataset="/names")
    assert not (tmp_path / "x.zarr").exists()


def test_coordinates_a_dataset_lists_by_a_relative_name_are_found_in_its_own_group(tmp_path):
    import h5py

    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    with h5py.File(tmp_path / "g.h5", "w") as f:
        group = f.create_group("model")
        group["temp"] = values
        group["temp"].attrs["coordinates"] = "lat lon"
        group["lat"] = np.ones((3, 4))  # CF resolves "lat" in /model, the group of the dataset listing it
        group["lon"] = np.ones((3, 4))
    cubeslab.ingest(tmp_path / "g.h5", tmp_path / "g.zarr")
    assert cubeslab.open(tmp_path / "g.zarr").amplitude.attributes["hdf5_dataset"] == "/model/temp"
    with h5py.File(tmp_path / "g.h5", "r") as f:
        np.testing.assert_array_equal(cubeslab.open(tmp_path / "g.zarr")[...], f["model/temp"][...])


def test_a_damaged_hdf5_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "broken.h5"
    path.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 4000)
    with pytest.raises(cubeslab.InvalidInputError, match=r"broken\.h5: not an HDF5 file h5py reads"):
        cubeslab.ingest(path, tmp_path / "out.zarr")
    assert not (tmp_path / "out.zarr").exists()


@pytest.mark.parametrize("fmt", ["NETCDF4", "NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET"])
def test_a_netcdf_variable_opens_in_xarray_as_the_file_does(tmp_path, fmt):
    import xarray as xr

    netcdf_file(tmp_path / "t.nc", fmt)
    cubeslab.ingest(tmp_path / "t.nc", tmp_path / "t.zarr")
    expected = xr.open_dataset(tmp_path / "t.nc")
    got = xr.open_zarr(tmp_path / "t.zarr")
    # Zarr's reader shows the store's own record (the generation its shards carry) beside the file's
    # attributes; cubeslab's engine, which xarray picks for the store, leaves it out.
    assert got["temp"].attrs.pop("cubeslab")["generation"]
    xr.testing.assert_identical(got["temp"].load(), expected["temp"])  # values, NaN fill, CF decoding, coords
    xr.testing.assert_identical(xr.open_dataset(tmp_path / "t.zarr")["temp"].load(), expected["temp"])
    assert store_report(tmp_path / "t.zarr")["state"] == "complete"
    assert got.attrs["title"] == "a test grid"
    raw = cubeslab.open(tmp_path / "t.zarr")[...]
    assert raw.dtype == np.int16 and raw[0, 0, 0] == -999  # stored raw, decoded by the reader


@pytest.mark.parametrize("fmt", ["NETCDF4", "NETCDF3_CLASSIC"])
def test_float_fill_values_and_non_finite_attributes_as_xarray_writes_them(tmp_path, fmt):
    """xarray's own default: float variables and coordinates with _FillValue NaN; beside it a float
    _FillValue of -999 and non-finite attribute values, which JSON has no numbers for."""
    import xarray as xr

    values = np.arange(12, dtype="f4").reshape(3, 4)
    values[1, 2] = -999.0
    written = xr.Dataset(
        {"t": (("x", "y"), values, {"valid_max": np.float32(np.inf)})},
        coords={"x": [1.0, 2.0, 3.0], "y": np.arange(4)},
        attrs={"missing": np.nan, "title": "fills"},
    )
    written["t"].encoding["_FillValue"] = np.float32(-999.0)
    written.to_netcdf(tmp_path / "f.nc", format=fmt)
    cubeslab.ingest(tmp_path / "f.nc", tmp_path / "f.zarr")
    expected = xr.open_dataset(tmp_path / "f.nc")
    got = xr.open_zarr(tmp_path / "f.zarr").load()
    assert np.isnan(got["t"].values[1, 2])  # masked by the reader, as by the file's
    xr.testing.assert_equal(got["t"], expected["t"])
    xr.testing.assert_identical(got["x"], expected["x"])
    assert got["t"].encoding["_FillValue"] == -999.0
    # Stored by name, as Zarr v3 names non-finite fill values.
    assert (got.attrs["missing"], got["t"].attrs["valid_max"]) == ("NaN", "Infinity")
    cubeslab.export(tmp_path / "f.zarr", tmp_path / "back.nc")
    back = xr.open_dataset(tmp_path / "back.nc")
    assert back["t"].encoding["_FillValue"] == -999.0
    xr.testing.assert_equal(back["t"], expected["t"])


def as_xarray_reads_it(store: Path, name: str):
    """Variable ``name`` of ``store`` as xarray's Zarr engine reads it, less the store's own record (the
    generation its shards carry, beside the source's attributes), which must be there; checked equal to
    what xarray reads with cubeslab's engine, which leaves the record out."""
    got = xr.open_zarr(store, consolidated=False)[name].load()
    assert got.attrs.pop("cubeslab")["generation"]
    for coordinate in got.coords.values():
        coordinate.attrs.pop("cubeslab", None)
    xr.testing.assert_identical(xr.open_dataset(store)[name].load(), got)
    return got


def test_a_netcdf_variable_named_like_a_dimension_it_does_not_label_ingests_as_xarray_reads_it(tmp_path):
    import xarray as xr

    netcdf_named_like_dimensions(tmp_path / "n.nc")
    command = ["ingest", str(tmp_path / "n.nc"), str(tmp_path / "n.zarr"), "--variable", "x"]
    done = subprocess.run([*CLI, *command], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    expected = xr.open_dataset(tmp_path / "n.nc")["x"]
    xr.testing.assert_identical(as_xarray_reads_it(tmp_path / "n.zarr", "x"), expected)
    store = cubeslab.open(tmp_path / "n.zarr")
    np.testing.assert_array_equal(store[...], expected.values)
    assert store.dims == ["y", "x"] and list(store.coords["x"]) == [0, 1, 2, 3, 4]  # x labels no axis


def test_a_curvilinear_netcdf_grid_ingests_its_one_data_variable_with_lat_and_lon(tmp_path):
    """lat(y, x) and lon(y, x), listed in the data variable's ``coordinates``, are coordinates as xarray
    takes them: the variable is chosen without --variable, and they come with it."""
    import xarray as xr

    rng = np.random.default_rng(4)
    grid = {"lat": (("y", "x"), rng.random((3, 4))), "lon": (("y", "x"), rng.random((3, 4)))}
    xr.Dataset({"temp": (("y", "x"), rng.random((3, 4)).astype("f4"))}, coords=grid).to_netcdf(
        tmp_path / "c.nc"
    )
    done = subprocess.run(
        [*CLI, "ingest", str(tmp_path / "c.nc"), str(tmp_path / "c.zarr")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    expected = xr.open_dataset(tmp_path / "c.nc")["temp"].load()
    xr.testing.assert_identical(as_xarray_reads_it(tmp_path / "c.zarr", "temp"), expected)


def test_a_coordinate_another_variable_lists_comes_with_the_variable_ingested(tmp_path):
    import netCDF4
    import xarray as xr

    with netCDF4.Dataset(tmp_path / "a.nc", "w") as d:
        d.createDimension("y", 2)
        d.createDimension("x", 3)
        d.createVariable("lat", "f4", ("y", "x"))[:] = np.arange(6).reshape(2, 3)
        a = d.createVariable("a", "f4", ("y", "x"))
        a[:], a.coordinates = 1.0, "lat"
        d.createVariable("b", "f4", ("y", "x"))[:] = 2.0
    cubeslab.ingest(tmp_path / "a.nc", tmp_path / "b.zarr", variable="b")
    expected = xr.open_dataset(tmp_path / "a.nc")["b"].load()
    assert "lat" in expected.coords  # xarray gives a dataset's coordinates to each variable over their dims
    xr.testing.assert_identical(as_xarray_reads_it(tmp_path / "b.zarr", "b"), expected)


def test_a_netcdf_variable_in_a_group_is_ingested_by_its_path(tmp_path):
    import netCDF4

    netcdf_named_like_dimensions(tmp_path / "n.nc")
    listed = r"no variable nope; the variables: t, x, grp/z, grp/v$"
    with pytest.raises(cubeslab.InvalidInputError, match=listed):
        cubeslab.ingest(tmp_path / "n.nc", tmp_path / "x.zarr", variable="nope")
    with netCDF4.Dataset(tmp_path / "n.nc") as d:
        expected = {name: d[name][...].data for name in ("grp/v", "grp/z", "t")}
    for name in ("grp/v", "grp/z"):
        store = tmp_path / f"{name.replace('/', '_')}.zarr"
        assert cubeslab.ingest(tmp_path / "n.nc", store, variable=name)["variable"] == name
        np.testing.assert_array_equal(cubeslab.open(store)[...], expected[name])
    # v's dimension t is the root group's, and so is its coordinate variable.
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "grp_v.zarr").coords["t"], expected["t"])


def test_info_lists_a_netcdf_files_variables(tmp_path):
    import json

    netcdf_file(tmp_path / "t.nc", "NETCDF4")
    done = subprocess.run([*CLI, "info", str(tmp_path / "t.nc"), "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["variables"]["temp"] == "int16 {'time': 4, 'lat': 5, 'lon': 6}"
    assert report["attributes"]["title"] == "a test grid"


def test_info_lists_an_hdf5_files_datasets(tmp_path):
    import json

    import h5py

    with h5py.File(tmp_path / "v.h5", "w") as f:
        f["a/b"] = np.zeros((4, 5), np.float32)
        f["c"] = np.arange(3)
        f["c"].make_scale("c")
    done = subprocess.run([*CLI, "info", str(tmp_path / "v.h5"), "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    datasets = json.loads(done.stdout)["datasets"]
    assert datasets == {"/a/b": "float32 [4, 5]", "/c": "int64 [3] (dimension scale)"}


def test_a_chunked_source_is_planned_for_reads_of_its_own_chunks(tmp_path):
    import h5py

    with h5py.File(tmp_path / "c.h5", "w") as f:
        f.create_dataset("chunked", data=volume(), chunks=(10, 15, 25))
        f.create_dataset("contiguous", data=volume())
    chunked = cubeslab.ingest(tmp_path / "c.h5", tmp_path / "a.zarr", dataset="chunked")
    assert chunked["plan"]["access"] == "box:10x15x25"
    assert (
        cubeslab.ingest(tmp_path / "c.h5", tmp_path / "b.zarr", dataset="contiguous")["plan"]["access"]
        == "planes"
    )
    given = cubeslab.ingest(tmp_path / "c.h5", tmp_path / "d.zarr", dataset="chunked", access="inline")
    assert given["plan"]["access"] == "inline"
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "a.zarr").amplitude[...], volume())


def test_a_dataset_behind_an_external_link_is_listed_and_ingested(tmp_path):
    """h5py reads through an external link; info lists the dataset there, and ingest (no --dataset) and
    the in-place reader read the other file's values."""
    import h5py

    values = np.random.default_rng(9).random((40, 24)).astype("f4")
    with h5py.File(tmp_path / "target.h5", "w") as f:
        f.create_dataset("d", data=values, chunks=(8, 8), compression="gzip")
    with h5py.File(tmp_path / "links.h5", "w") as f:
        f["linked"] = h5py.ExternalLink("target.h5", "/d")
    done = subprocess.run([*CLI, "info", "links.h5"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and "/linked" in done.stdout and "target.h5" in done.stdout, done.stderr
    done = subprocess.run(
        [*CLI, "ingest", "links.h5", "l.zarr"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "l.zarr")[...], values)
    np.testing.assert_array_equal(
        cubeslab.open(tmp_path / "links.h5", dataset="/linked")[5:30, ::3], values[5:30, ::3]
    )


def _sources_to_verify(folder: Path) -> dict:
    """Files of each N-D format (written by h5py, netCDF4, astropy, numpy), each with the options its
    ingest needs and its values as that format's own library reads them."""
    import h5py
    import netCDF4
    from astropy.io import fits

    data = volume((9, 6, 5), ">f4")
    data[2, 3, 1] = np.nan  # NaN in both the file and the store is no difference
    whole = volume((9, 6, 5), "int16", seed=1)
    with h5py.File(folder / "a.h5", "w") as f:
        f.create_dataset("g/x", data=data, chunks=(4, 6, 5), compression="gzip")
        f["other"] = np.zeros(3, "i2")
    with netCDF4.Dataset(folder / "b.nc", "w") as f:
        for name, n in zip("tzx", whole.shape, strict=True):
            f.createDimension(name, n)
        variable = f.createGroup("grp").createVariable("v", "i2", ("t", "z", "x"))
        variable[:], variable.scale_factor = whole, 0.01  # compared raw, as stored
    fits.PrimaryHDU(whole).writeto(folder / "c.fits")
    np.save(folder / "d.npy", data.astype("<f8"))
    (folder / "e.f32").write_bytes(b"\0" * 16 + data.tobytes(order="F"))
    header = write_seplib(folder, np.nan_to_num(data))
    with (
        h5py.File(folder / "a.h5") as f,
        netCDF4.Dataset(folder / "b.nc") as n,
        fits.open(folder / "c.fits") as c,
    ):
        n.set_auto_maskandscale(False)
        read = {"a.h5": f["g/x"][...], "b.nc": n["grp/v"][...], "c.fits": c[0].data}
    return {
        "a.h5": (["--dataset", "/g/x"], read["a.h5"]),
        "b.nc": (["--variable", "grp/v"], read["b.nc"]),
        "c.fits": ([], read["c.fits"]),
        "d.npy": ([], np.load(folder / "d.npy")),
        "e.f32": (  # raw bytes named by no suffix cubeslab knows: the store's record says how to read them
            ["--shape", "9,6,5", "--dtype", ">f4", "--order", "F", "--offset", "16"],
            np.fromfile(folder / "e.f32", ">f4", offset=16).reshape((9, 6, 5), order="F"),
        ),
        header.name: ([], np.fromfile(folder / "cube.H@", ">f4").reshape((9, 6, 5), order="F").transpose()),
    }


def test_verify_against_compares_a_store_with_the_array_file_it_came_from(tmp_path):
    for name, (options, values) in _sources_to_verify(tmp_path).items():
        store = tmp_path / f"{name}.zarr"
        subprocess.run(
            [*CLI, "ingest", str(tmp_path / name), str(store), *options], check=True, capture_output=True
        )
        run = subprocess.run(
            [*CLI, "verify", str(store), "--against", str(tmp_path / name)], capture_output=True, text=True
        )
        assert run.returncode == 0, (name, run.stdout, run.stderr)
        assert f"({np.count_nonzero(~np.isnan(values.astype(float))):,} values): max |error| 0," in " ".join(
            run.stdout.split()
        ), name
        # One value changed in the store: found, and counted.
        with cubeslab.open(store, "r+") as cube:
            cube[1, 1, 1] = values[1, 1, 1] + 1
        report = cubeslab.verify(store, against=tmp_path / name)
        assert not report["ok"] and report["against"]["differing"] == 1, name
        assert report["against"]["max_abs_error"] == 1.0, name
        assert "differs from its source in 1 values" in report["against"]["problem"]


def test_verify_against_measures_a_lossy_store_and_refuses_a_file_that_is_not_its_source(tmp_path):
    data = volume((20, 16, 12), "float32")
    np.save(tmp_path / "v.npy", data)
    cubeslab.ingest(tmp_path / "v.npy", tmp_path / "v.zarr", compress="zfp:tolerance=0.5")
    against = cubeslab.verify(tmp_path / "v.zarr", against=tmp_path / "v.npy")["against"]
    error = np.abs(cubeslab.open(tmp_path / "v.zarr")[...].astype(np.float64) - data)
    assert against["lossy"] and "problem" not in against
    assert against["max_abs_error"] == pytest.approx(error.max()) and error.max() <= 0.5
    assert against["differing"] == np.count_nonzero(error)
    np.save(tmp_path / "w.npy", data[:, :, :5])
    run = subprocess.run(
        [*CLI, "verify", str(tmp_path / "v.zarr"), "--against", str(tmp_path / "w.npy")],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and "holds an array of shape [20, 16, 5]" in run.stderr
    assert "Traceback" not in run.stderr
    segy = Path(__file__).resolve().parent / "data/segy/f3.sgy"
    for against, words in (
        (tmp_path / "gone.npy", "no such file"),
        (segy, "holds no survey from SEG-Y"),
    ):
        with pytest.raises(cubeslab.InvalidInputError, match=words):
            cubeslab.verify(tmp_path / "v.zarr", against=against)


def test_an_hdf5_datasets_auxiliary_coordinates_are_stored_beside_it_and_survive_an_export(tmp_path):
    import h5py
    import xarray as xr

    rng = np.random.default_rng(3)
    temp, lat, lon = rng.random((3, 4, 5)), rng.random((4, 5)) * 90, rng.random((4, 5)) * 180
    with h5py.File(tmp_path / "grid.h5", "w") as f:
        f["temp"] = temp.astype(np.float32)
        for name, n in (("t", 3), ("y", 4), ("x", 5)):
            f[name] = np.arange(n, dtype=np.float64) * 2
            f[name].make_scale(name)
        for d, name in enumerate("tyx"):
            f["temp"].dims[d].attach_scale(f[name])
        f["lat"], f["lon"] = lat, lon
        f["lat"].attrs["units"] = "degrees_north"
        f["lon"].dims[0].attach_scale(f["y"])  # placed by its scales; lat by its sizes
        f["lon"].dims[1].attach_scale(f["x"])
        f["site"] = np.array(["a", "b", "c", "d", "e"], dtype=h5py.string_dtype())
        f["data"] = np.zeros(5)  # named as the store's own array
        f["temp"].attrs["coordinates"] = "lat lon site missing data"
    with pytest.warns(cubeslab.IngestWarning) as warned:
        cubeslab.ingest(tmp_path / "grid.h5", tmp_path / "grid.zarr")
    messages = " ".join(str(w.message) for w in warned)
    assert "coordinate missing of /temp is no dataset" in messages
    assert "coordinate data is the name of the store's own array" in messages
    for dataset in (
        xr.open_dataset(tmp_path / "grid.zarr", engine="cubeslab"),
        xr.open_zarr(tmp_path / "grid.zarr", consolidated=False),
    ):
        assert dataset["lat"].dims == ("y", "x") and dataset["site"].dims == ("x",)
        np.testing.assert_array_equal(dataset["lat"].values, lat)
        np.testing.assert_array_equal(dataset["lon"].values, lon)
        assert dataset["site"].values.tolist() == list("abcde")
        assert dataset["lat"].attrs["units"] == "degrees_north"
    cubeslab.export(tmp_path / "grid.zarr", tmp_path / "back.h5")
    cubeslab.ingest(tmp_path / "back.h5", tmp_path / "again.zarr")
    again = xr.open_dataset(tmp_path / "again.zarr", engine="cubeslab")
    np.testing.assert_array_equal(again["lon"].values, lon)
    assert again["lon"].dims == ("y", "x") and again["site"].values.tolist() == list("abcde")


def test_info_names_xarray_open_zarr_only_for_stores_it_opens(tmp_path):
    """xarray's open_zarr opens a group, not a store that is one array alone (as create makes without
    coordinates): info says which tools read each, and they do."""
    np.save(tmp_path / "v.npy", np.arange(24, dtype="f4").reshape(2, 3, 4))
    cubeslab.ingest(tmp_path / "v.npy", tmp_path / "ingested.zarr")
    cubeslab.create(tmp_path / "created.zarr", (2, 3, 4)).close()
    for name, opens in (("ingested.zarr", True), ("created.zarr", False)):
        readers = store_report(tmp_path / name)["readable_by"]
        assert ("zarr-python / xarray.open_zarr" in readers) is opens and "zarr-python" in " ".join(readers)
        assert zarr.open(tmp_path / name, mode="r") is not None
        if opens:
            xr.open_zarr(tmp_path / name, consolidated=False)
        else:
            with pytest.raises(Exception, match="array"):
                xr.open_zarr(tmp_path / name, consolidated=False)


def test_info_of_a_fits_file_gives_the_type_astropy_reads_and_ingest_stores(tmp_path):
    import json

    from astropy.io import fits

    fits.PrimaryHDU(np.arange(24, dtype="u2").reshape(2, 3, 4) + 40000).writeto(tmp_path / "u16.fits")
    scaled = fits.PrimaryHDU(np.arange(24, dtype=">i2").reshape(2, 3, 4), do_not_scale_image_data=True)
    scaled.header["BSCALE"], scaled.header["BZERO"] = 0.5, 10.0
    scaled.writeto(tmp_path / "scaled.fits")
    for name in ("u16.fits", "scaled.fits"):
        done = subprocess.run([*CLI, "info", str(tmp_path / name), "--json"], capture_output=True, text=True)
        report = json.loads(done.stdout)
        expected = fits.getdata(tmp_path / name).dtype.newbyteorder("=")
        assert report["dtype"] == ">i2" and np.dtype(report["stored_dtype"]) == expected
        cubeslab.ingest(tmp_path / name, tmp_path / f"{name}.zarr")
        assert cubeslab.open(tmp_path / f"{name}.zarr").dtype == expected


def one_element_attribute_files(tmp_path) -> list[tuple[Path, str]]:
    """An HDF5 file whose attributes are arrays of one (as netCDF-C and many HDF5 writers store a single
    value), and a NetCDF 4 file, which netCDF-C writes so, to be read as HDF5."""
    import h5py
    import netCDF4

    with h5py.File(tmp_path / "a.h5", "w") as f:
        d = f.create_dataset("v", data=np.array([[1, 2], [-1, 4]], "i2"))
        d.attrs["_FillValue"] = np.array([-1], "i2")
        d.attrs["scale_factor"] = np.array([0.5], "f4")
        d.attrs["label"] = np.array([b"abc"])
        d.attrs["valid_range"] = np.array([-1, 4], "i2")
        f["w"] = np.array([[1.5, -9], [2, 3]], "f4")
        f["w"].attrs["_FillValue"] = np.array([-9], "f4")
    with netCDF4.Dataset(tmp_path / "b.nc", "w") as n:
        n.createDimension("x", 3)
        t = n.createVariable("t", "i2", ("x",), fill_value=np.int16(-999))
        t.scale_factor = 0.5
        t[:] = np.ma.masked_array([1.0, 2.0, 3.0], [False, True, False])
    return [(tmp_path / "a.h5", "/v"), (tmp_path / "a.h5", "/w"), (tmp_path / "b.nc", "/t")]


def test_one_element_hdf5_attributes_are_stored_as_the_scalars_netcdf4_reads(tmp_path):
    for i, (path, dataset) in enumerate(one_element_attribute_files(tmp_path)):
        store = tmp_path / f"s{i}.zarr"
        cubeslab.ingest(path, store, dataset=dataset)
        with xr.open_dataset(path, engine="netcdf4", mask_and_scale=False) as source:
            expected = source[dataset.lstrip("/")]
            got = xr.open_zarr(store, consolidated=False, mask_and_scale=False)["data"]
            own = {k: v for k, v in got.attrs.items() if k not in ("source", "hdf5_dataset", "cubeslab")}
            assert own.keys() == expected.attrs.keys()
            for name, value in expected.attrs.items():
                assert np.shape(own[name]) == np.shape(value), name
                np.testing.assert_array_equal(own[name], value, err_msg=name)
        with xr.open_dataset(path, engine="netcdf4") as source:
            decoded = xr.open_zarr(store, consolidated=False)["data"].values
            np.testing.assert_array_equal(decoded, source[dataset.lstrip("/")].values)


def test_one_element_hdf5_attributes_export_back_to_hdf5_as_netcdf4_reads_them(tmp_path):
    path, dataset = one_element_attribute_files(tmp_path)[0]
    cubeslab.ingest(path, tmp_path / "s.zarr", dataset=dataset)
    cubeslab.export(tmp_path / "s.zarr", tmp_path / "out.h5")
    with xr.open_dataset(path, engine="netcdf4") as a, xr.open_dataset(tmp_path / "out.h5") as b:
        np.testing.assert_array_equal(b["data"].values, a["v"].values)
        assert b["data"].encoding["_FillValue"] == a["v"].encoding["_FillValue"] == -1
        assert b["data"].encoding["dtype"] == np.int16


def test_one_element_hdf5_attributes_read_in_place_as_the_scalars_netcdf4_reads(tmp_path):
    import netCDF4

    for path, dataset in one_element_attribute_files(tmp_path):
        with netCDF4.Dataset(path) as n:
            variable = n[dataset.lstrip("/")]
            expected = {k: variable.getncattr(k) for k in variable.ncattrs()}
        got = cubeslab.open(path, dataset=dataset).attributes
        assert got.keys() == expected.keys()
        for name, value in expected.items():
            assert np.shape(got[name]) == np.shape(value), name
            np.testing.assert_array_equal(got[name], value, err_msg=name)
