"""Overview levels: each level equals numpy's 2x block mean (or decimation) of the survey segyio reads;
the group describes them with OME-Zarr multiscales, which zarr-python opens; a read at max_shape takes
the coarsest level that covers the window; a window write makes them stale (readers skip them, verify
says so) until they are built again; verify finds a level whose values were changed."""

from __future__ import annotations

import json
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
        [transform] = dataset["coordinateTransformations"]
        scale = transform["scale"]
        assert group[dataset["path"]].shape == tuple(
            -(-n // int(s)) for n, s in zip(SHAPE, scale, strict=True)
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


def test_a_window_write_makes_the_levels_stale_until_they_are_built_again(survey):
    store, _ = survey
    cubeslab.build_pyramid(store, max_side=16)
    with cubeslab.open(store, "r+") as cube:
        cube.amplitude[0, 0, 0] = 1000.0
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
    assert report["pyramid"]["problems"][0] == f"{second}: rows 0:8 differ from the level above, downsampled"
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
