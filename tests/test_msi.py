"""Mass-spectrometry imaging: imzML files (the format's own examples in tests/data/imzml, and files written
here by pyimzML's writer) ingested and read back in MSI terms, against pyimzML reading the same file:
continuous mode exactly, processed mode against an independent numpy binning (np.histogram) of pyimzML's
spectra; bad files refused naming the file and the element or byte."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from pyimzml.ImzMLParser import ImzMLParser, getionimage
from pyimzml.ImzMLWriter import ImzMLWriter

import cubeslab
from cubeslab.msi import MsiCube

CLI = [sys.executable, "-m", "cubeslab.cli"]


def example(data_dir, tmp_path, mode: str):
    """A copy of the imzML example of ``mode`` (Continuous or Processed), its .ibd beside it."""
    for suffix in (".imzML", ".ibd"):
        shutil.copy(data_dir / "imzml" / f"Example_{mode}{suffix}", tmp_path / f"e{suffix}")
    return tmp_path / "e.imzML"


def test_a_continuous_file_stores_every_spectrum_exactly(tmp_path, data_dir):
    source = example(data_dir, tmp_path, "Continuous")
    summary = cubeslab.ingest(source, tmp_path / "s.zarr")
    assert summary["mode"] == "continuous" and summary["plan"]["access"] == "spectra,ion-images"
    msi = cubeslab.open(tmp_path / "s.zarr")
    assert isinstance(msi, MsiCube)
    parser = ImzMLParser(str(source))
    for i, (x, y, _) in enumerate(parser.coordinates):
        mz, intensity = parser.getspectrum(i)
        got_mz, got = msi.spectrum(x, y)
        np.testing.assert_array_equal(got, intensity)
        np.testing.assert_array_equal(got_mz, np.asarray(mz, dtype=np.float64))
    for mz, tol in ((500.0, 0.5), (150.1, 0.05), (799.0, 2)):
        np.testing.assert_allclose(msi.ion_image(mz, tol=tol), getionimage(parser, mz, tol=tol).T, rtol=1e-6)
    stack = msi.ion_image([300.0, 600.0], tol=1.0)
    assert stack.shape == (2, 3, 3)
    np.testing.assert_allclose(stack[1], getionimage(parser, 600.0, tol=1.0).T, rtol=1e-6)
    tic = np.array([[parser.getspectrum(parser.coordinates.index((x, y, 1)))[1].sum() for y in (1, 2, 3)]
                    for x in (1, 2, 3)])  # fmt: skip
    np.testing.assert_allclose(msi.tic(), tic, rtol=1e-6)
    spectra = np.array([parser.getspectrum(i)[1] for i in range(len(parser.coordinates))], dtype=np.float64)
    np.testing.assert_allclose(msi.mean_spectrum()[1], spectra.mean(axis=0), rtol=1e-6)
    assert msi.amplitude.attributes["imzml"]["pixel_size_um"] == [100.0, 100.0]
    assert msi.amplitude.attributes["imzml"]["polarity"] == "negative"


def histogram_binning(parser, edges: np.ndarray, nx: int, ny: int) -> np.ndarray:
    cube = np.zeros((nx, ny, len(edges) - 1))
    for i, (x, y, _) in enumerate(parser.coordinates):
        mz, intensity = parser.getspectrum(i)
        cube[x - 1, y - 1] = np.histogram(mz, bins=edges, weights=intensity)[0]
    return cube


@pytest.mark.parametrize("mz_bin", ["0.1", "500ppm"])
def test_a_processed_file_is_binned_as_numpy_bins_pyimzmls_spectra(tmp_path, data_dir, mz_bin):
    source = example(data_dir, tmp_path, "Processed")
    # The range starts off the m/z values' grid (k/12), so no value sits on a bin edge.
    summary = cubeslab.ingest(source, tmp_path / "s.zarr", mz_bin=mz_bin, mz_range="100.01:800")
    msi = cubeslab.open(tmp_path / "s.zarr")
    n = msi.shape[2]
    if mz_bin.endswith("ppm"):
        edges = 100.01 * (1 + 500e-6) ** np.arange(n + 1)
    else:
        edges = 100.01 + 0.1 * np.arange(n + 1)
    assert edges[-2] <= 800 < edges[-1]
    parser = ImzMLParser(str(source))
    expected = histogram_binning(parser, edges, 3, 3)
    np.testing.assert_allclose(msi[...], expected, rtol=1e-6, atol=1e-3)
    # Each bin's m/z: its middle, geometric for ppm bins (equal relative width either side).
    middle = np.sqrt(edges[:-1] * edges[1:]) if mz_bin.endswith("ppm") else (edges[:-1] + edges[1:]) / 2
    np.testing.assert_allclose(msi.mz, middle, rtol=1e-9)
    below = sum(int((parser.getspectrum(i)[0] < 100.01).sum()) for i in range(9))
    assert summary["outside_range"] == below
    assert summary["mz_bin"] == ("0.1 Da" if mz_bin == "0.1" else "500 ppm")


def test_without_a_bin_width_one_is_chosen_from_the_data_and_reported(tmp_path, data_dir):
    source = example(data_dir, tmp_path, "Processed")
    summary = cubeslab.ingest(source, tmp_path / "s.zarr")
    assert summary["mz_bin"].endswith("Da (chosen from the data)")
    assert summary["merged"] == 0 and summary["outside_range"] == 0
    parser = ImzMLParser(str(source))
    total = sum(parser.getspectrum(i)[1].sum(dtype=np.float64) for i in range(9))
    assert cubeslab.open(tmp_path / "s.zarr")[...].sum(dtype=np.float64) == pytest.approx(total, rel=1e-6)


def write_imzml(path, mode: str, mz_dtype, intensity_dtype, *, missing=((2, 2),), nx=4, ny=3, seed=0):
    """A small imzML written by pyimzML: a pixel grid with ``missing`` pixels left out."""
    rng = np.random.default_rng(seed)
    shared = np.sort(rng.uniform(100, 1000, 50)).astype(mz_dtype)
    written = {}
    with ImzMLWriter(str(path), mz_dtype=mz_dtype, intensity_dtype=intensity_dtype, mode=mode) as w:
        for y in range(1, ny + 1):
            for x in range(1, nx + 1):
                if (x, y) in missing:
                    continue
                mz = shared if mode == "continuous" else np.sort(rng.uniform(100, 1000, 30)).astype(mz_dtype)
                intensity = (rng.uniform(0, 1000, len(mz))).astype(intensity_dtype)
                w.addSpectrum(mz, intensity, (x, y, 1))
                written[(x, y)] = (mz, intensity)
    return written


@pytest.mark.parametrize("mz_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("intensity_dtype", [np.float32, np.int32, np.float64])
def test_generated_continuous_files_with_missing_pixels(tmp_path, mz_dtype, intensity_dtype):
    written = write_imzml(tmp_path / "g.imzML", "continuous", mz_dtype, intensity_dtype)
    cubeslab.ingest(tmp_path / "g.imzML", tmp_path / "s.zarr")
    msi = cubeslab.open(tmp_path / "s.zarr")
    assert msi.dtype == np.dtype(intensity_dtype)
    assert not msi.pixel_mask()[1, 1] and msi.pixel_mask().sum() == len(written)
    with pytest.raises(cubeslab.LabelError, match="no spectrum at pixel x=2, y=2"):
        msi.spectrum(2, 2)
    assert (msi[1, 1] == 0).all()
    for (x, y), (mz, intensity) in written.items():
        got_mz, got = msi.spectrum(x, y)
        np.testing.assert_array_equal(got, intensity)
        np.testing.assert_array_equal(got_mz, mz.astype(np.float64))


@pytest.mark.parametrize("intensity_dtype", [np.float32, np.int32])
def test_generated_processed_files_bin_as_numpy_does(tmp_path, intensity_dtype):
    written = write_imzml(tmp_path / "g.imzML", "processed", np.float64, intensity_dtype)
    summary = cubeslab.ingest(tmp_path / "g.imzML", tmp_path / "s.zarr", mz_bin=0.5, mz_range="100.25:1000")
    msi = cubeslab.open(tmp_path / "s.zarr")
    edges = 100.25 + 0.5 * np.arange(msi.shape[2] + 1)
    merged = 0
    for (x, y), (mz, intensity) in written.items():
        expected = np.histogram(mz, bins=edges, weights=intensity.astype(np.float64))[0]
        np.testing.assert_allclose(msi.spectrum(x, y)[1], expected, rtol=1e-6)
        inside = (mz >= edges[0]) & (mz < edges[-1])
        merged += int(inside.sum()) - len(np.unique(np.floor((mz[inside] - 100.25) / 0.5)))
    assert summary["merged"] == merged


def test_subcube_by_labels_and_xarray(tmp_path):
    written = write_imzml(tmp_path / "g.imzML", "continuous", np.float64, np.float32, missing=())
    cubeslab.ingest(tmp_path / "g.imzML", tmp_path / "s.zarr")
    msi = cubeslab.open(tmp_path / "s.zarr")
    mz = msi.mz
    cut = msi.subcube[2:3, 1:2, mz[10] : mz[20]]
    assert cut.shape == (2, 2, 11)
    np.testing.assert_array_equal(cut[0, 1], written[(2, 2)][1][10:21])
    da = msi.to_xarray()
    np.testing.assert_array_equal(da["mz"].values, mz)
    np.testing.assert_array_equal(da.sel(x=3, y=1).values, written[(3, 1)][1])


def test_a_subcube_carries_the_labels_of_what_was_cut(tmp_path):
    import xarray as xr

    write_imzml(tmp_path / "g.imzML", "continuous", np.float64, np.float32, missing=())
    cubeslab.ingest(tmp_path / "g.imzML", tmp_path / "s.zarr")
    msi = cubeslab.open(tmp_path / "s.zarr")
    mz = msi.mz
    cut = msi.subcube[2:3, 1:2, mz[10] : mz[20]]
    np.testing.assert_array_equal(cut.x, [2, 3])
    np.testing.assert_array_equal(cut.y, [1, 2])
    np.testing.assert_array_equal(cut.mz, mz[10:21])
    # The same labelled array as cutting to_xarray() by the same labels (xarray's are inclusive too).
    whole = msi.to_xarray().sel(x=slice(2, 3), y=slice(1, 2), mz=slice(mz[10], mz[20]))
    xr.testing.assert_identical(cut, whole)
    xr.testing.assert_identical(msi.subcube[:, 3:, :], msi.to_xarray().sel(y=slice(3, None)))


@pytest.mark.parametrize(
    ("key", "refusal"),
    [
        ((slice(1, 3, 2), slice(None), slice(None)), "the x range 1:3:2 has a step"),
        ((slice(None), slice(None, None, 1), slice(None)), "the y range ::1 has a step"),
        ((slice(3, 1), slice(None), slice(None)), "the x range 3:1 runs backwards"),
        ((slice(None), slice(None), slice(500.5, 300)), "the mz range 500.5:300 runs backwards"),
        ((slice("a", "b"), slice(None), slice(None)), "the x range a:b takes numbers, not 'a'"),
    ],
)
def test_a_subcube_refuses_a_step_or_a_backwards_range_naming_it(tmp_path, key, refusal):
    write_imzml(tmp_path / "g.imzML", "continuous", np.float64, np.float32, missing=())
    cubeslab.ingest(tmp_path / "g.imzML", tmp_path / "s.zarr")
    with pytest.raises(cubeslab.InvalidInputError, match=f"subcube: {refusal}"):
        cubeslab.open(tmp_path / "s.zarr").subcube[key]


def test_the_m_z_axis_handed_out_cannot_be_edited_under_the_cube(tmp_path, data_dir):
    cubeslab.ingest(example(data_dir, tmp_path, "Continuous"), tmp_path / "s.zarr")
    msi = cubeslab.open(tmp_path / "s.zarr")
    before = msi.ion_image(500.0, tol=0.5)
    for handed_out in (msi.spectrum(1, 1)[0], msi.mean_spectrum()[0], msi.mz, msi.pixel_mask()):
        with pytest.raises(ValueError, match="read-only"):
            handed_out[:] = 0
    np.testing.assert_array_equal(msi.ion_image(500.0, tol=0.5), before)
    assert msi.spectrum(1, 1)[0][0] == pytest.approx(100.083, abs=1e-3)


def test_an_ion_image_off_the_m_z_axis_is_refused_one_touching_it_is_read(tmp_path, data_dir):
    source = example(data_dir, tmp_path, "Continuous")
    cubeslab.ingest(source, tmp_path / "s.zarr")
    msi = cubeslab.open(tmp_path / "s.zarr")
    axis = r"outside the m/z axis \(100\.083\d*\.\.799\.916\d*\)"
    for mz, tol in ((900.0, 0.5), (50.0, "10ppm")):
        with pytest.raises(cubeslab.InvalidInputError, match=rf"s\.zarr: m/z {mz:g} .*{axis}"):
            msi.ion_image(mz, tol=tol)
    for mz in (float("nan"), float("inf")):
        with pytest.raises(cubeslab.InvalidInputError, match=rf"s\.zarr: m/z {mz}: give a finite number"):
            msi.ion_image(mz, tol=1)
    with pytest.raises(cubeslab.InvalidInputError, match=rf"m/z 1000 .*{axis}"):
        msi.ion_image([500.0, 1000.0], tol=1)
    # A window reaching past the axis's ends reads the values it does cover, as pyimzML does.
    parser = ImzMLParser(str(source))
    for mz in (800.3, 99.8):
        np.testing.assert_allclose(msi.ion_image(mz, tol=0.5), getionimage(parser, mz, tol=0.5).T, rtol=1e-6)


def test_zlib_compressed_arrays_are_read(tmp_path):
    from pyimzml.compression import ZlibCompression

    rng = np.random.default_rng(4)
    mz = np.sort(rng.uniform(100, 500, 40))
    written = [rng.uniform(0, 10, 40).astype(np.float32) for _ in (1, 2)]
    with ImzMLWriter(
        str(tmp_path / "z.imzML"), mode="continuous", intensity_compression=ZlibCompression()
    ) as w:
        for x, intensity in zip((1, 2), written, strict=True):
            w.addSpectrum(mz, intensity, (x, 1, 1))
    cubeslab.ingest(tmp_path / "z.imzML", tmp_path / "s.zarr")
    # pyimzML's parser hands out the compressed bytes undecoded here, so the oracle is what was written.
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "s.zarr").spectrum(2, 1)[1], written[1])


def test_bad_files_are_refused_naming_what_is_wrong(tmp_path, data_dir):
    source = example(data_dir, tmp_path, "Continuous")
    ibd = tmp_path / "e.ibd"
    whole = ibd.read_bytes()
    ibd.write_bytes(b"\0" + whole[1:])
    with pytest.raises(
        cubeslab.InvalidInputError, match=r"e\.ibd: UUID .* disagrees with the imzML's 554a27fa"
    ):
        cubeslab.ingest(source, tmp_path / "x.zarr")
    ibd.write_bytes(whole[:1000])
    with pytest.raises(
        cubeslab.InvalidInputError, match=r"e\.ibd: spectrum \d+'s .* past the end of the 1000-byte"
    ):
        cubeslab.ingest(source, tmp_path / "x.zarr")
    ibd.write_bytes(whole[:16] + bytes(len(whole) - 16))  # same UUID and size: the SHA-1 tells
    with pytest.raises(
        cubeslab.InvalidInputError, match=r"e\.ibd: SHA1 .* disagrees with the imzML's a5be532d"
    ):
        cubeslab.ingest(source, tmp_path / "x.zarr")
    ibd.unlink()
    with pytest.raises(
        cubeslab.InvalidInputError, match=r"e\.imzML: its binary file .*e\.ibd does not exist"
    ):
        cubeslab.ingest(source, tmp_path / "x.zarr")
    ibd.write_bytes(whole)
    text = source.read_text(encoding="latin-1")
    float32 = 'accession="MS:1000521" name="32-bit float"'
    for data_type, refusal in (
        (
            'accession="MS:1000999" name="128-bit float"',
            r"\(Scan=1\): unknown data type 128-bit float \(MS:1000999\)",
        ),
        ('accession="XX:1" name="half precision"', r"knows \(its other parameters: XX:1 'half precision'\)"),
    ):
        source.write_text(text.replace(float32, data_type, 1), encoding="latin-1")
        with pytest.raises(cubeslab.InvalidInputError, match=rf"e\.imzML: spectrum 0 .*{refusal}"):
            cubeslab.ingest(source, tmp_path / "x.zarr")
    source.write_text(
        text.replace('name="position x" value="2"', 'name="position x" value="1"', 1), encoding="latin-1"
    )
    with pytest.raises(cubeslab.InvalidInputError, match=r"spectra 0 and 1 are both at pixel x=1, y=1"):
        cubeslab.ingest(source, tmp_path / "x.zarr")
    (tmp_path / "n.imzML").write_text("<?xml version='1.0'?><html><body/></html>")
    with pytest.raises(cubeslab.InvalidInputError, match=r"n\.imzML: not imzML"):
        cubeslab.ingest(tmp_path / "n.imzML", tmp_path / "x.zarr")
    assert not (tmp_path / "x.zarr").exists()


def test_unsorted_mz_and_3d_files_are_refused(tmp_path):
    with ImzMLWriter(str(tmp_path / "u.imzML"), mode="processed") as w:
        w.addSpectrum(np.array([100.0, 300.0, 200.0]), np.ones(3, np.float32), (1, 1, 1))
    with pytest.raises(cubeslab.InvalidInputError, match=r"u\.imzML: spectrum 0's m/z array is not sorted"):
        cubeslab.ingest(tmp_path / "u.imzML", tmp_path / "x.zarr", mz_bin=1)
    with ImzMLWriter(str(tmp_path / "z.imzML"), mode="processed") as w:
        for z in (1, 2):
            w.addSpectrum(np.array([100.0, 200.0]), np.ones(2, np.float32), (1, 1, z))
    with pytest.raises(cubeslab.InvalidInputError, match=r"z\.imzML: a 3-D imzML"):
        cubeslab.ingest(tmp_path / "z.imzML", tmp_path / "x.zarr")
    assert not (tmp_path / "x.zarr").exists()


def test_the_command_line_reports_the_binning(tmp_path, data_dir):
    source = example(data_dir, tmp_path, "Processed")
    done = subprocess.run(
        [*CLI, "ingest", str(source), str(tmp_path / "s.zarr"), "--mz-bin", "10ppm", "--mz-range", "100:800"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "m/z bins 10 ppm over 100..800" in done.stdout


def test_the_command_line_reports_the_views_it_wrote(tmp_path, data_dir):
    source = example(data_dir, tmp_path, "Continuous")
    command = [*CLI, "ingest", str(source), str(tmp_path / "s.zarr"), "--views", "spectra,ion-images"]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    for access in ("spectra", "ion-images"):  # each copy holds the whole volume again
        assert re.search(
            rf"view for {access}: layout \S+, [0-9.]+ MB \(\+10[0-3]% of the volume", done.stdout
        )


def test_a_m_z_range_that_holds_no_peak_is_refused_rather_than_ingested_as_zeros(tmp_path, data_dir):
    source = example(data_dir, tmp_path, "Processed")
    with pytest.raises(
        cubeslab.InvalidInputError, match=r"e.imzML: every one of its [0-9,]+ peaks lies outside"
    ):
        cubeslab.ingest(source, tmp_path / "s.zarr", mz_bin=1, mz_range="2000:3000")
    assert not (tmp_path / "s.zarr").exists()


def test_the_command_line_reads_ion_images_and_spectra(tmp_path, data_dir):
    source = example(data_dir, tmp_path, "Continuous")
    cubeslab.ingest(source, tmp_path / "s.zarr")
    store = str(tmp_path / "s.zarr")
    command = [*CLI, "read", store, "--ion-image", "500", "--tol", "0.5", "-o", str(tmp_path / "i.npy")]
    image = subprocess.run(command, capture_output=True, text=True)
    assert image.returncode == 0, image.stderr
    parser = ImzMLParser(str(source))
    np.testing.assert_allclose(np.load(tmp_path / "i.npy"), getionimage(parser, 500.0, tol=0.5).T, rtol=1e-6)
    for option, value in (("--ion-image", "500"), ("--spectrum", "2,3")):
        picture = tmp_path / f"{option[2:]}.png"
        done = subprocess.run(
            [*CLI, "read", store, option, value, "-o", str(picture)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    spectrum = subprocess.run([*CLI, "read", store, "--spectrum", "2,3", "-o", str(tmp_path / "s.npy")],
                              capture_output=True, text=True)  # fmt: skip
    assert spectrum.returncode == 0
    mz, intensity = np.load(tmp_path / "s.npy")
    np.testing.assert_array_equal(mz, cubeslab.open(store).mz)
    np.testing.assert_array_equal(intensity, parser.getspectrum(parser.coordinates.index((2, 3, 1)))[1])
    missing = subprocess.run([*CLI, "read", store, "--spectrum", "9,9", "-o", str(tmp_path / "m.npy")],
                             capture_output=True, text=True)  # fmt: skip
    assert missing.returncode == 1 and "no spectrum at pixel x=9, y=9" in missing.stderr + missing.stdout


@pytest.mark.parametrize("mode", ["Continuous", "Processed"])
def test_a_small_memory_limit_writes_in_slabs_of_m_z_with_the_same_result(tmp_path, data_dir, mode):
    source = example(data_dir, tmp_path, mode)
    options = {} if mode == "Continuous" else {"mz_bin": "0.1", "mz_range": "100.01:800"}
    whole = cubeslab.ingest(source, tmp_path / "a.zarr", **options)
    # 3 x 3 pixels: 64 KiB holds a few hundred m/z values of every pixel, not a pixel's whole spectrum.
    sliced = cubeslab.ingest(
        source, tmp_path / "b.zarr", memory_limit=64 << 10, layout="3x3x128/3x3x256", **options
    )
    a, b = cubeslab.open(tmp_path / "a.zarr"), cubeslab.open(tmp_path / "b.zarr")
    np.testing.assert_array_equal(b[...], a[...])
    np.testing.assert_allclose(b.tic(), a.tic())
    np.testing.assert_allclose(b.mean_spectrum()[1], a.mean_spectrum()[1])
    assert sliced.get("merged") == whole.get("merged") and sliced.get("outside_range") == whole.get(
        "outside_range"
    )


def test_info_describes_an_imzml_file_before_ingest(tmp_path):
    write_imzml(tmp_path / "g.imzML", "continuous", np.float64, np.int32)
    done = subprocess.run([*CLI, "info", str(tmp_path / "g.imzML"), "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["format"] == "imzML, continuous mode"
    assert report["spectra"] == 11 and report["pixels"] == "x 1..4, y 1..3 (1 of 12 missing)"
    assert report["mz_type"] == "float64" and report["intensity_type"] == "int32"
    assert report["mz"].startswith("50 values")


def test_views_hold_the_same_cube_and_take_the_reads_they_are_laid_out_for(tmp_path):
    written = write_imzml(
        tmp_path / "g.imzML", "continuous", np.float64, np.float32, missing=(), nx=12, ny=10
    )
    summary = cubeslab.ingest(tmp_path / "g.imzML", tmp_path / "v.zarr", views=["spectra", "ion-images"])
    assert set(summary["views"]) == {"spectra", "ion-images"}
    msi = cubeslab.open(tmp_path / "v.zarr")
    assert isinstance(msi, MsiCube) and len(msi.amplitude.copies) == 2
    for copy in msi.amplitude.copies:  # each copy, read on its own, is the cube
        np.testing.assert_array_equal(cubeslab.Array(copy)[...], msi.amplitude.read(verify=True))
    assert msi.amplitude.source_for((3, 4, slice(None))).endswith("data-spectra")
    np.testing.assert_array_equal(msi.spectrum(4, 5)[1], written[(4, 5)][1])
    assert cubeslab.verify(tmp_path / "v.zarr")["ok"]
    info = subprocess.run([*CLI, "info", str(tmp_path / "v.zarr"), "--json"], capture_output=True, text=True)
    report = json.loads(info.stdout)
    assert report["state"] == "complete" and set(report["views"]) == {"spectra", "ion-images"}


def test_a_cube_larger_than_the_free_disk_is_refused_before_anything_is_written(tmp_path):
    write_imzml(tmp_path / "w.imzML", "processed", np.float64, np.float32)
    free = shutil.disk_usage(tmp_path).free
    # Bins so narrow that the cube is larger than the disk's free space.
    width = 900 * 12 * 4 / free / 4
    with pytest.raises(cubeslab.InvalidInputError, match=r"w\.imzML: the cube .* GB free; choose wider bins"):
        cubeslab.ingest(tmp_path / "w.imzML", tmp_path / "w.zarr", mz_bin=width, mz_range="100:1000")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.ibd", "w.imzML"]
    # Narrower still, with compression (no room to check): the m/z axis alone would not fit in memory.
    with pytest.raises(cubeslab.InvalidInputError, match=r"w\.imzML: [\d,]+ bins .* over the memory limit"):
        cubeslab.ingest(tmp_path / "w.imzML", tmp_path / "w.zarr", mz_bin=1e-9, compress="zstd:3")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.ibd", "w.imzML"]


def test_a_bin_width_chosen_for_sparse_peaks_keeps_the_axis_to_a_few_bins_a_peak(tmp_path):
    # 30 centroided peaks a spectrum, spread at random over 100..1000: their smallest spacings are
    # tiny, and bins that narrow would be millions.
    write_imzml(tmp_path / "c.imzML", "processed", np.float64, np.float32, nx=5, ny=4)
    summary = cubeslab.ingest(tmp_path / "c.imzML", tmp_path / "c.zarr")
    assert summary["mz_bin"].endswith("Da (chosen from the data)")
    bins = cubeslab.open(tmp_path / "c.zarr").shape[2]
    assert 30 <= bins <= 4 * 30 + 1


def binned_oracle(written, edges, high):
    """Per pixel, numpy's histogram of pyimzML-written peaks up to ``high`` (the range's end)."""
    return {
        pixel: np.histogram(mz[mz <= high], bins=edges, weights=intensity[mz <= high].astype(np.float64))[0]
        for pixel, (mz, intensity) in written.items()
    }


def test_an_ion_image_of_a_binned_store_sums_the_bins_its_window_overlaps(tmp_path):
    """A window narrower than a bin (1 ppm inside 0.5 Da bins) read nothing but zeros: it held no bin
    centre. It reads the bin it falls in, and near the axis's ends the bins there."""
    written = write_imzml(tmp_path / "g.imzML", "processed", np.float64, np.float32, missing=())
    cubeslab.ingest(tmp_path / "g.imzML", tmp_path / "s.zarr", mz_bin=0.5, mz_range="100.25:1000")
    msi = cubeslab.open(tmp_path / "s.zarr")
    edges = 100.25 + 0.5 * np.arange(msi.shape[2] + 1)
    expected = binned_oracle(written, edges, 1000)
    for peak in (written[(1, 1)][0][3], written[(2, 3)][0][-1], 100.3, edges[-1] - 0.01):
        k = int(np.floor((peak - 100.25) / 0.5))
        image = msi.ion_image(peak, tol="1ppm")
        for (x, y), row in expected.items():
            assert image[x - 1, y - 1] == pytest.approx(row[k], rel=1e-6), (peak, x, y)
    # A window over two bins sums both.
    k = 10
    both = msi.ion_image(edges[k + 1], tol=0.01)
    for (x, y), row in expected.items():
        assert both[x - 1, y - 1] == pytest.approx(row[k] + row[k + 1], rel=1e-6)


def test_peaks_past_the_end_of_the_m_z_range_are_outside_it_though_the_last_bin_reaches_further(tmp_path):
    written = write_imzml(tmp_path / "g.imzML", "processed", np.float64, np.float32, missing=())
    # The range ends just below a peak that the last bin (of 7 Da from 100) still spans.
    peaks = np.sort(np.concatenate([mz for mz, _ in written.values()]))
    high = next(float(p) - 1e-6 for p in peaks if p > 300 and (p - 100) // 7 == (p - 1e-6 - 100) // 7)
    summary = cubeslab.ingest(tmp_path / "g.imzML", tmp_path / "s.zarr", mz_bin=7, mz_range=f"100:{high!r}")
    msi = cubeslab.open(tmp_path / "s.zarr")
    edges = 100 + 7.0 * np.arange(msi.shape[2] + 1)
    assert edges[-2] <= high < edges[-1] and ((peaks > high) & (peaks < edges[-1])).any()
    for (x, y), row in binned_oracle(written, edges, high).items():
        np.testing.assert_allclose(msi.spectrum(x, y)[1], row, rtol=1e-6)
    assert summary["outside_range"] == int(((peaks < 100) | (peaks > high)).sum())


def test_non_finite_m_z_a_wrong_data_type_and_scattered_pixels_are_refused(tmp_path):
    with ImzMLWriter(str(tmp_path / "n.imzML"), mode="continuous") as w:
        w.addSpectrum(np.array([100.0, np.nan, 200.0]), np.ones(3, np.float32), (1, 1, 1))
    with pytest.raises(cubeslab.InvalidInputError, match=r"n\.imzML: spectrum 0's m/z value 1 is nan"):
        cubeslab.ingest(tmp_path / "n.imzML", tmp_path / "x.zarr")
    # 64-bit intensities declared 32-bit: read so, each value would be two halves of one.
    write_imzml(tmp_path / "d.imzML", "processed", np.float64, np.float64)
    text = (tmp_path / "d.imzML").read_text()
    (tmp_path / "d.imzML").write_text(
        text.replace(
            'accession="MS:1000523" name="64-bit float"', 'accession="MS:1000521" name="32-bit float"', 1
        )
    )
    with pytest.raises(
        cubeslab.InvalidInputError,
        match=r"d\.imzML: spectrum 0's .* array is \d+ bytes for \d+ values of the float32",
    ):
        cubeslab.ingest(tmp_path / "d.imzML", tmp_path / "x.zarr", mz_bin=1)
    with ImzMLWriter(str(tmp_path / "s.imzML"), mode="continuous") as w:
        for position in ((1, 1, 1), (1_000_000, 1_000_000, 1)):
            w.addSpectrum(np.array([100.0, 200.0]), np.ones(2, np.float32), position)
    with pytest.raises(
        cubeslab.InvalidInputError, match=r"s\.imzML: its 2 spectra lie on a grid of 1,000,000 x"
    ):
        cubeslab.ingest(tmp_path / "s.imzML", tmp_path / "x.zarr", compress="zstd:3")
    assert not (tmp_path / "x.zarr").exists()


def test_a_malformed_tolerance_is_a_clear_error(tmp_path, data_dir):
    source = example(data_dir, tmp_path, "Continuous")
    cubeslab.ingest(source, tmp_path / "s.zarr")
    for tol in ("1.2.3", "e", "+-1", "inf"):
        done = subprocess.run(
            [*CLI, "read", str(tmp_path / "s.zarr"), "--ion-image", "500", "--tol", tol, "-o",
             str(tmp_path / "i.npy")], capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert f"tol={tol!r}" in done.stderr, done.stderr


@pytest.mark.parametrize(
    "options, refusal",
    [
        ({"mz_bin": "1.2.3"}, r"--mz-bin '1\.2\.3': give a width"),
        ({"mz_bin": "e"}, r"--mz-bin 'e': give a width"),
        ({"mz_bin": float("inf")}, r"--mz-bin inf: the width must be a positive number"),
        ({"mz_bin": 1e-300}, r"pixels x \d\.\d+e\+\d+ m/z values, float32\) takes \d\.\d+e\+\d+ GB"),
        ({"mz_bin": 1, "mz_range": "100:inf"}, r"--mz-range '100:inf': LOW and HIGH must be finite"),
    ],
)
def test_bin_options_that_cannot_be_binned_are_clear_errors(tmp_path, options, refusal):
    write_imzml(tmp_path / "g.imzML", "processed", np.float64, np.float32)
    with pytest.raises(cubeslab.InvalidInputError, match=refusal):
        cubeslab.ingest(tmp_path / "g.imzML", tmp_path / "x.zarr", **options)
    assert not (tmp_path / "x.zarr").exists()


def test_pixels_are_whole_numbers_and_an_empty_list_has_no_ion_image(tmp_path, data_dir):
    cubeslab.ingest(example(data_dir, tmp_path, "Continuous"), tmp_path / "s.zarr")
    msi = cubeslab.open(tmp_path / "s.zarr")
    with pytest.raises(cubeslab.LabelError, match="pixels are whole numbers"):
        msi.spectrum(1.7, 1)
    with pytest.raises(cubeslab.InvalidInputError, match="empty list"):
        msi.ion_image([])


def test_a_window_between_two_m_z_values_reads_an_image_of_zeros_as_pyimzml_does(tmp_path, data_dir):
    source = example(data_dir, tmp_path, "Continuous")
    cubeslab.ingest(source, tmp_path / "s.zarr")
    msi = cubeslab.open(tmp_path / "s.zarr")
    between = float((msi.mz[100] + msi.mz[101]) / 2)
    image = msi.ion_image(between, tol=1e-6)
    expected = getionimage(ImzMLParser(str(source)), between, tol=1e-6).T
    assert image.shape == expected.shape and not image.any()
    np.testing.assert_array_equal(image, expected)


def test_the_tic_and_mean_spectrum_follow_window_writes_to_the_cube(tmp_path, data_dir):
    source = example(data_dir, tmp_path, "Continuous")
    cubeslab.ingest(source, tmp_path / "s.zarr")
    kept = cubeslab.open(tmp_path / "s.zarr").tic()
    with cubeslab.open(tmp_path / "s.zarr", "r+") as msi:
        msi[1, 2, 100:200] = 1000.0
        # Not yet written back: the handle's own sums see the change too.
        np.testing.assert_allclose(msi.tic(), msi[...].astype(np.float64).sum(axis=2), rtol=1e-9)
    msi = cubeslab.open(tmp_path / "s.zarr")
    cube = msi[...].astype(np.float64)
    np.testing.assert_allclose(msi.tic(), cube.sum(axis=2), rtol=1e-9)
    assert not np.allclose(msi.tic(), kept)  # the ingest's sums no longer hold
    np.testing.assert_allclose(msi.mean_spectrum()[1], cube[msi.pixel_mask()].mean(axis=0), rtol=1e-9)


def test_a_write_into_a_pixel_the_file_lacks_leaves_the_mean_spectrum_over_the_files_pixels(tmp_path):
    mz = np.array([100.0, 200.0, 300.0])
    with ImzMLWriter(str(tmp_path / "t.imzML"), mode="continuous") as writer:  # (1, 2) and (2, 1) missing
        writer.addSpectrum(mz, np.array([1, 2, 3], "f4"), (1, 1, 1))
        writer.addSpectrum(mz, np.array([3, 4, 5], "f4"), (2, 2, 1))
    cubeslab.ingest(tmp_path / "t.imzML", tmp_path / "t.zarr")
    with cubeslab.open(tmp_path / "t.zarr", "r+") as msi:
        assert not msi.pixel_mask()[0, 1]
        msi[0, 1, :] = 1000.0
    msi = cubeslab.open(tmp_path / "t.zarr")
    np.testing.assert_array_equal(msi.mean_spectrum()[1], [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(msi.tic(), msi[...].astype(np.float64).sum(axis=2))


def test_an_ion_image_of_a_huge_m_z_is_outside_the_axis_and_an_unusable_window_is_refused(tmp_path, data_dir):
    """10 ppm of 1e308 is 1e303 Da, no overflow to a window over the whole axis; pyimzML, the oracle,
    reads no peak there."""
    source = example(data_dir, tmp_path, "Continuous")
    cubeslab.ingest(source, tmp_path / "s.zarr")
    msi = cubeslab.open(tmp_path / "s.zarr")
    axis = r"outside the m/z axis \(100\.083\d*\.\.799\.916\d*\)"
    assert not getionimage(ImzMLParser(str(source)), 1e308, tol=1e303).any()
    for mz, tol in ((1e308, "10ppm"), (1e308, 1e300), (1.7e308, "1e4ppm")):
        with pytest.raises(
            cubeslab.InvalidInputError, match=rf"s\.zarr: m/z {re.escape(f'{mz:.10g}')} .*{axis}"
        ):
            msi.ion_image(mz, tol=tol)
    for mz, tol in ((1e308, 1e308), (1e308, "1e7ppm"), (1.7e308, 1.7e308)):
        with pytest.raises(cubeslab.InvalidInputError, match=r"s\.zarr: m/z .* Da is no finite window"):
            msi.ion_image(mz, tol=tol)
    for mz in (0.0, -0.0, -500.0, float("-inf"), float("nan")):
        with pytest.raises(
            cubeslab.InvalidInputError, match=r"s\.zarr: m/z .*: give a (finite|positive) number"
        ):
            msi.ion_image(mz, tol=1e4)
    for tol in (float("nan"), -1.0, "-10ppm", float("inf")):
        with pytest.raises(cubeslab.InvalidInputError, match=re.escape(f"tol={tol!r}")):
            msi.ion_image(500.0, tol=tol)
    with pytest.raises(cubeslab.InvalidInputError, match=rf"m/z 1e\+308 .*{axis}"):
        msi.ion_image([500.0, 1e308])
