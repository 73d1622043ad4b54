"""Overview levels: each level equals numpy's 2x block mean (or decimation) of the survey segyio reads;
the group describes them with OME-Zarr multiscales, which zarr-python opens; a read at max_shape takes
the coarsest level that covers the window; a window write makes them stale (readers skip them, verify
says so) until they are built again; verify finds a level whose values were changed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import segyio

import cubeslab
from cubeslab.errors import InvalidInputError

CLI = Path(sys.executable).parent / "cubeslab"
SHAPE = (60, 50, 100)


def block_mean(values: np.ndarray) -> np.ndarray:
    """The oracle: every 2x2x2 block averaged, NaN ignored, odd ends padded with NaN."""
    padded = np.pad(values.astype(np.float64), [(0, n % 2) for n in values.shape], constant_values=np.nan)
    a, b, c = (n // 2 for n in padded.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN block
        return np.nanmean(padded.reshape(a, 2, b, 2, c, 2), axis=(1, 3, 5)).astype(values.dtype)


@pytest.fixture
def survey(synthetic_segy, tmp_path) -> tuple[Path, np.ndarray]:
    segy = synthetic_segy(*SHAPE)
    store = tmp_path / "survey.zarr"
    cubeslab.ingest(segy.path, store, layout="8x8x16/16x16x32")
    with segyio.open(segy.path) as f:
        return store, segyio.tools.cube(f)


def test_each_level_is_the_block_mean_of_the_one_above(survey):
    store, values = survey
    described = cubeslab.build_pyramid(store, max_side=16)
    levels = described["cubeslab"]["pyramid"]["levels"]
    assert [level["factors"] for level in levels] == [
        [2, 2, 2],
        [4, 4, 4],
        [8, 8, 8],
    ]  # 100 -> 50 -> 25 -> 13
    expected = values
    for level in levels:
        expected = block_mean(expected)
        got = cubeslab.Array(store / level["array"])[...]
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert cubeslab.verify(store)["ok"]


def test_decimation_keeps_every_other_sample(survey):
    store, values = survey
    described = cubeslab.build_pyramid(store, max_side=30, method="decimate", axes=["inline", "time"])
    [first, second] = described["cubeslab"]["pyramid"]["levels"]
    assert first["factors"] == [2, 1, 2] and second["factors"] == [4, 1, 4]
    np.testing.assert_array_equal(cubeslab.Array(store / first["array"])[...], values[::2, :, ::2])
    np.testing.assert_array_equal(cubeslab.Array(store / second["array"])[...], values[::4, :, ::4])


def test_other_tools_find_the_levels_by_the_ome_zarr_multiscales(survey):
    import zarr

    store, _ = survey
    cubeslab.build_pyramid(store, max_side=16)
    group = zarr.open_group(store, mode="r")
    [multiscale] = group.attrs["ome"]["multiscales"]
    assert [axis["name"] for axis in multiscale["axes"]] == ["inline", "crossline", "time"]
    for dataset in multiscale["datasets"]:
        scale, *translation = dataset["coordinateTransformations"]
        factors = [int(s) for s in scale["scale"]]
        assert group[dataset["path"]].shape == tuple(-(-n // f) for n, f in zip(SHAPE, factors, strict=True))
        # A mean's sample i averages the data's samples f*i .. f*i + f - 1: it sits at their centre.
        centre = [(f - 1) / 2 for f in factors]
        assert translation == (
            [] if factors == [1, 1, 1] else [{"type": "translation", "translation": centre}]
        )


def test_xarray_opens_a_store_with_levels_as_it_opened_it_before(survey, tmp_path):
    """xarray reads the arrays beside the main one as variables sharing its dimensions: the levels, whose
    sides differ, sit in a group of their own, which it leaves out."""
    import xarray as xr

    store, values = survey
    before = xr.open_zarr(store, consolidated=False)
    cubeslab.build_pyramid(store, max_side=16)
    after = xr.open_zarr(store, consolidated=False)
    assert sorted(after.variables) == sorted(before.variables)
    np.testing.assert_array_equal(after.amplitude.values, values)
    with cubeslab.create(tmp_path / "c.zarr", (20, 30), dims=("y", "x"), coords={"y": np.arange(20)}) as c:
        c[...] = np.arange(600, dtype="float32").reshape(20, 30)
    cubeslab.build_pyramid(tmp_path / "c.zarr", max_side=4)
    np.testing.assert_array_equal(
        xr.open_zarr(tmp_path / "c.zarr", consolidated=False).data.values, np.arange(600).reshape(20, 30)
    )


def test_a_read_at_max_shape_takes_the_coarsest_level_that_covers_it(survey):
    store, values = survey
    cubeslab.build_pyramid(store, max_side=16)
    cube = cubeslab.open(store)
    # An inline: 50 crosslines x 100 samples. Level 1 has 25 x 50 of them, level 2 13 x 25.
    plane = cube.amplitude.read((30,), max_shape=(20, 20))
    np.testing.assert_allclose(plane, block_mean(values)[15], rtol=1e-6, atol=1e-6)
    assert cube.amplitude.read((30,), max_shape=(10, 20)).shape == (13, 25)  # level 2
    assert cube.amplitude.read((30,), max_shape=(50, 100)).shape == (50, 100)  # only the data covers it
    np.testing.assert_array_equal(cube.amplitude.read((30,), max_shape=(50, 100)), values[30])
    level, window = cube.amplitude.overview_for((slice(10, 50), 7), max_shape=(5, 5))
    assert level.shape == (8, 7, 13) and window == (slice(1, 7, 1), 0, slice(0, 13, 1))


def test_a_read_at_max_shape_takes_no_level_that_only_thins_the_axis_it_cuts_across(survey):
    """Levels halving time alone make no time slice smaller: the slice comes from the data, not from a
    level's mean of 8 slices (or, decimated, from slice 96 for 100). A decimated level along the plane's
    axis holds the plane only where its index is a multiple of the factor."""
    store, values = survey
    cubeslab.build_pyramid(store, max_side=16, axes=["time"])
    cube = cubeslab.open(store)
    np.testing.assert_array_equal(cube.amplitude.read((slice(None), slice(None), 37), max_shape=(10, 10)),
                                  values[:, :, 37])  # fmt: skip
    cubeslab.build_pyramid(store, max_side=16, method="decimate")
    cube = cubeslab.open(store)
    np.testing.assert_array_equal(cube.amplitude.read((37,), max_shape=(10, 10)), values[37])
    np.testing.assert_array_equal(cube.amplitude.read((36,), max_shape=(10, 10)), values[36, ::4, ::4])


def test_a_window_write_makes_the_levels_stale_until_they_are_built_again(survey):
    store, _ = survey
    cubeslab.build_pyramid(store, max_side=16)
    with cubeslab.open(store, "r+") as cube:
        cube.amplitude[0, 0, 0] = 1000.0
        # Not yet written back: the handle's own read sees the change, so it skips the levels too.
        assert cube.amplitude.read((0,), max_shape=(4, 4)).shape == (50, 100)
    reopened = cubeslab.open(store)
    assert reopened.amplitude.read((0,), max_shape=(4, 4)).shape == (50, 100)  # stale levels are skipped
    report = cubeslab.verify(store)
    assert not report["ok"] and "stale" in report["pyramid"]["problems"][0]
    done = subprocess.run([str(CLI), "verify", str(store)], capture_output=True, text=True)
    assert done.returncode == 1 and "stale" in done.stdout
    done = subprocess.run(
        [str(CLI), "pyramid", str(store), "--max-side", "16"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert cubeslab.verify(store)["ok"]
    assert cubeslab.open(store).amplitude.read((0,), max_shape=(4, 4)).shape == (7, 13)


def test_verify_finds_a_level_whose_values_were_changed(survey):
    store, _ = survey
    described = cubeslab.build_pyramid(store, max_side=16)
    second = described["cubeslab"]["pyramid"]["levels"][1]["array"]
    with cubeslab.Array(store / second, cache="64MiB") as level:
        level[3, 3, 3] = 12345.0
    report = cubeslab.verify(store)
    assert not report["ok"]
    # The changed level, and the one made from it, which no longer matches it.
    assert re.fullmatch(
        rf"{second}: \[0:\d+, 0:\d+\] differs from the level above, downsampled",
        report["pyramid"]["problems"][0],
    )
    assert len(report["pyramid"]["problems"]) == 2


def test_ingest_with_pyramid_and_what_is_refused(synthetic_segy, tmp_path):
    segy = synthetic_segy(*SHAPE)
    done = subprocess.run(
        [str(CLI), "ingest", str(segy.path), str(tmp_path / "s.zarr"), "--pyramid"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    # Below 1024 per side: no level is needed, and the record says so.
    attributes = json.loads((tmp_path / "s.zarr" / "zarr.json").read_text())["attributes"]
    assert attributes["cubeslab"]["pyramid"]["levels"] == []
    cubeslab.create(tmp_path / "lone.zarr", (40, 40), "float32")
    with pytest.raises(InvalidInputError, match="lone array"):
        cubeslab.build_pyramid(tmp_path / "lone.zarr", max_side=8)
    with pytest.raises(InvalidInputError, match="method='median'"):
        cubeslab.build_pyramid(tmp_path / "s.zarr", method="median")
    with pytest.raises(InvalidInputError, match="object storage"):
        cubeslab.build_pyramid("s3://bucket/s.zarr")


def whole_block_oracle(values: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Each 2x block (along ``axes``) averaged with Python's exact fractions, NaN left out, rounded half
    to even for integers: element by element, independent of numpy's reductions."""
    from fractions import Fraction
    from itertools import product

    shape = tuple((n + 1) // 2 if d in axes else n for d, n in enumerate(values.shape))
    out = np.empty(shape, values.dtype)
    for at in product(*map(range, shape)):
        block = values[tuple(slice(2 * i, 2 * i + 2) if d in axes else i for d, i in enumerate(at))].ravel()
        if values.dtype.kind == "f":
            kept = [Fraction(float(v)) for v in block if not np.isnan(v)]
            out[at] = float(sum(kept) / len(kept)) if kept else np.nan
        else:
            out[at] = round(Fraction(sum(int(v) for v in block), len(block)))
    return out


@pytest.mark.parametrize(
    ("dtype", "axes"),
    [
        ("float32", (0, 1, 2)),
        ("float64", (1, 2)),
        ("int64", (0, 1, 2)),
        ("uint64", (0, 2)),
        ("int16", (0, 1, 2)),
    ],
)
def test_a_level_is_the_mean_of_each_whole_block_nan_left_out_and_exact_for_64_bit_integers(
    tmp_path, dtype, axes
):
    """Missing values (NaN) are left out of the block, not out of each pair first (a mean of means
    weighs them wrongly), and 64-bit integers near their limits neither wrap nor lose their last digits."""
    rng = np.random.default_rng(5)
    shape = (9, 7, 11)
    if dtype.startswith("float"):
        values = rng.normal(size=shape).astype(dtype)
        values[rng.random(shape) < 0.3] = np.nan
    elif dtype == "uint64":
        values = rng.integers(2**64 - 9, 2**64 - 1, size=shape, dtype=np.uint64, endpoint=True)
    else:
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    coords = {"a": np.arange(shape[0])}  # a group, to hold the levels
    with cubeslab.create(
        tmp_path / "a.zarr", shape, dtype, dims=["a", "b", "c"], coords=coords, layout="4x4x4"
    ) as array:
        array[...] = values
    dims = ["a", "b", "c"]
    described = cubeslab.build_pyramid(tmp_path / "a.zarr", axes=[dims[d] for d in axes], max_side=5)
    first = described["cubeslab"]["pyramid"]["levels"][0]["array"]
    got = cubeslab.Array(tmp_path / "a.zarr" / first)[...]
    expected = whole_block_oracle(values, axes)
    if dtype.startswith("float"):
        np.testing.assert_allclose(got, expected, rtol=1e-6 if dtype == "float32" else 1e-12)
        assert np.array_equal(np.isnan(got), np.isnan(expected))
    else:
        assert np.array_equal(got, expected)


def test_a_rebuild_that_stops_midway_leaves_no_level_a_reader_uses(survey, monkeypatch):
    """The record goes before any level is touched and comes back last: a build that fails after
    rewriting some levels leaves readers on the data, never on half-written levels, and removes what it
    wrote; the next build replaces every earlier level, however many there were."""
    import cubeslab.pyramid as pyramid

    store, values = survey
    cubeslab.build_pyramid(store, max_side=8)  # four levels
    cube = cubeslab.open(store)
    assert len(cube.amplitude.overviews) == 4
    real_fill, filled = pyramid.fill_level, []

    def fill_then_stop(source, target, *args):
        if filled:
            raise KeyboardInterrupt  # as Ctrl-C would, after the first level is rewritten
        filled.append(target.path)
        real_fill(source, target, *args)

    monkeypatch.setattr(pyramid, "fill_level", fill_then_stop)
    with pytest.raises(KeyboardInterrupt):
        cubeslab.build_pyramid(store, max_side=8)
    assert cube.amplitude.overviews == []  # the open cube sees it too, not only a new one
    window = (slice(None), 3, slice(None))
    assert np.array_equal(cube.amplitude.read(window, max_shape=(5, 5)), values[window])
    assert cubeslab.verify(store)["ok"]
    assert not [p for p in store.iterdir() if "_level" in p.name]
    monkeypatch.undo()
    cubeslab.build_pyramid(store, max_side=32)  # two levels: the other two go
    levels = sorted(p.name for p in (store / "amplitude_levels").iterdir() if p.is_dir())
    assert levels == ["1", "2"]


def test_levels_made_stale_elsewhere_are_skipped_by_a_cube_already_open(survey):
    """Freshness is checked at each read: another process's write makes an open cube's levels stale,
    and so does a writer that was open across the rebuild and wrote again after it."""
    from cubeslab.viewer.planes import PlaneSource

    store, values = survey
    cubeslab.build_pyramid(store, max_side=16)
    cube, viewer = cubeslab.open(store), PlaneSource(store)
    assert cube.amplitude.overviews and viewer.description["levels"]
    region = (0, SHAPE[1], 0, SHAPE[2])
    assert viewer.plane(0, 7, region, (10, 10))[1]["factors"] == [4, 8]  # level 2, every 2nd sample
    write = "import cubeslab, sys\nwith cubeslab.open(sys.argv[1], mode='r+') as c:\n    c[0, 0, 0] = 5.0\n"
    subprocess.run([sys.executable, "-c", write, str(store)], check=True)
    assert cube.amplitude.overviews == [] and viewer.description["levels"] == []
    plane, where = viewer.plane(0, 7, region, (10, 10))  # from the data now, every 3rd and 5th sample
    assert where["factors"] == [3, 5] and np.array_equal(plane, values[7, ::3, ::5])

    with cubeslab.open(store, mode="r+", cache="1MiB") as writer:
        writer[0:20] = 1.0  # beyond the cache: some chunks written back already
        subprocess.run([str(CLI), "pyramid", str(store), "--max-side", "16"], check=True, capture_output=True)
        assert cubeslab.open(store).amplitude.overviews  # fresh: made after those write-backs
        writer[40:60] = 2.0  # written back by this same writer after the rebuild
    assert cubeslab.open(store).amplitude.overviews == []
    assert any("stale" in p for p in cubeslab.verify(store)["pyramid"]["problems"])


@pytest.mark.parametrize("compress", ["zfp:tolerance=0.01", None])
def test_a_level_is_written_in_whole_chunks_when_a_row_of_them_is_beyond_the_memory_limit(tmp_path, compress):
    """A tiny memory limit splits each slab across its second dimension too, in whole chunks, which a
    lossy codec requires; a lossless level still equals the block mean."""
    values = np.random.default_rng(2).normal(size=(40, 48, 64)).astype("float32")
    with cubeslab.create(
        tmp_path / "a.zarr", values.shape, "float32", dims=["a", "b", "c"], coords={"a": np.arange(40)},
        layout="8x8x16/16x16x32", compress=compress,
    ) as array:  # fmt: skip
        array[...] = values
        stored = array[...]
    cubeslab.build_pyramid(tmp_path / "a.zarr", max_side=10, memory_limit=1 << 16)
    level = cubeslab.Array(tmp_path / "a.zarr" / "data_levels" / "1")[...]
    if compress is None:
        np.testing.assert_allclose(level, block_mean(stored), rtol=1e-6)
    else:
        np.testing.assert_allclose(level, block_mean(stored), atol=0.02)
    assert cubeslab.verify(tmp_path / "a.zarr")["ok"]


def test_bad_axes_and_max_shapes_are_refused_naming_them(survey):
    store, _ = survey
    done = subprocess.run(
        [str(CLI), "pyramid", str(store), "--axes", "nosuch"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "axes: 'nosuch' is not a dimension of" in " ".join(done.stderr.split())
    done = subprocess.run(
        [str(CLI), "pyramid", str(store), "--axes", "2", "--max-side", "50"], capture_output=True
    )
    assert done.returncode == 0, done.stderr
    [level] = cubeslab.open(store).amplitude.overviews
    assert level[0] == (1, 1, 2)
    array = cubeslab.open(store).amplitude
    for bad in [("a", 5), (0, 0), (-5, 5), (5,), (2.5, 3)]:
        with pytest.raises(cubeslab.SelectionError, match="max_shape="):
            array.read((0,), max_shape=bad)
    with pytest.raises(cubeslab.SelectionError, match="at least one axis"):
        array.read((0, 0, 0), max_shape=())


def test_verify_names_the_levels_a_killed_build_left(survey):
    """A build killed midway leaves level arrays the group no longer records: readers skip them, and
    verify says where they came from and what to run."""
    store, _ = survey
    build = (
        "import sys, cubeslab.pyramid as p\n"
        "real = p.fill_level\n"
        "def fill(source, target, *a):\n"
        "    real(source, target, *a)\n"
        "    if target.path.endswith('levels/2'):\n"
        "        import os, signal; os.kill(os.getpid(), signal.SIGKILL)\n"
        "p.fill_level = fill\n"
        "p.build_pyramid(sys.argv[1], max_side=8)\n"
    )
    done = subprocess.run([sys.executable, "-c", build, str(store)], capture_output=True)
    assert done.returncode == -9
    assert cubeslab.open(store).amplitude.overviews == []
    report = cubeslab.verify(store)
    assert not report["ok"]
    [problem] = report["pyramid"]["problems"]
    assert problem.startswith("amplitude_levels/1, amplitude_levels/2: left by a build that did not finish")
    done = subprocess.run([str(CLI), "verify", str(store)], capture_output=True, text=True)
    assert done.returncode == 1 and "run `cubeslab pyramid` again" in " ".join(done.stdout.split())
    cubeslab.build_pyramid(store, max_side=8)
    assert cubeslab.verify(store)["ok"]


@pytest.mark.parametrize("shape, ome", [((40, 30), True), ((12, 10, 8, 30), False), ((600,), False)])
def test_ome_multiscales_are_written_only_where_the_array_fits_ome_zarr(tmp_path, shape, ome):
    """OME-Zarr allows 2 or 3 space axes: a 4-D or 1-D array gets cubeslab's record alone, and its
    levels are used all the same."""
    import zarr

    values = np.random.default_rng(5).normal(size=shape).astype(np.float32)
    store, dims = tmp_path / "v.zarr", [f"d{i}" for i in range(len(shape))]
    with cubeslab.create(store, shape, "float32", dims=dims, coords={"d0": np.arange(shape[0])}) as written:
        written.amplitude[...] = values
    described = cubeslab.build_pyramid(store, max_side=8)
    levels = described["cubeslab"]["pyramid"]["levels"]
    assert levels
    attrs = zarr.open_group(store, mode="r").attrs
    assert ("ome" in attrs) == ome
    if ome:
        axes = attrs["ome"]["multiscales"][0]["axes"]
        assert [axis["type"] for axis in axes] == ["space"] * len(shape)
    assert cubeslab.open(store).amplitude.overviews


def test_fill_values_are_left_out_of_the_means_and_levels_decode_as_the_data_does(tmp_path):
    """A NetCDF variable packed in int16 with a _FillValue: a level's mean leaves the fill out (a block of
    40s and fills is 40, not -8162), a block of fills alone stays the fill, and the level carries the
    packing, so xarray decodes it as it decodes the data."""
    import netCDF4
    import xarray as xr
    import zarr

    raw = np.full((8, 8), 40, np.int16)
    raw[0, 0] = raw[2:4, 2:4] = -32768
    with netCDF4.Dataset(tmp_path / "p.nc", "w") as f:
        f.createDimension("y", 8)
        f.createDimension("x", 8)
        v = f.createVariable("v", "i2", ("y", "x"), fill_value=-32768)
        v.set_auto_maskandscale(False)
        v.scale_factor, v.add_offset, v.units = 3.0, 0.0, "K"
        v[...] = raw
    store = tmp_path / "p.zarr"
    cubeslab.ingest(tmp_path / "p.nc", store)
    described = cubeslab.build_pyramid(store, max_side=4)
    [level] = described["cubeslab"]["pyramid"]["levels"]
    got = cubeslab.Array(store / level["array"])[...]
    expected = np.full((4, 4), 40, np.int16)
    expected[1, 1] = -32768
    np.testing.assert_array_equal(got, expected)
    attributes = zarr.open_array(store / level["array"], mode="r").attrs
    assert (attributes["scale_factor"], attributes["units"]) == (3.0, "K")
    decoded = xr.decode_cf(xr.Dataset({"v": (("y", "x"), got, dict(attributes))}))["v"].values
    assert np.isnan(decoded[1, 1]) and (np.delete(decoded.ravel(), 5) == 120.0).all()
    assert cubeslab.verify(store)["ok"]
