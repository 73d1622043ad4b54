"""The JSON description of a store (axes, dtype, layout, codec, fill value, attributes): describe,
create from it, describe again gives the same; a bad description is refused naming its field."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cubeslab

SEGY = Path(__file__).resolve().parent / "data/segy/f3.sgy"
CLI = [sys.executable, "-m", "cubeslab.cli"]


def test_describe_create_describe_of_a_created_store_is_exact(tmp_path):
    first = tmp_path / "first.zarr"
    description = {
        "axes": [
            {"name": "x", "size": 10, "origin": -5.0, "step": 0.5, "unit": "m"},
            {"name": "y", "size": 20, "origin": 100.0, "step": 25.0, "unit": "m"},
            {"name": "t", "size": 30, "origin": 0.0, "step": 4.0, "unit": "ms"},
        ],
        "dtype": "int16",
        "chunks": [5, 5, 5],
        "shards": [10, 10, 15],
        "compress": "zstd:3",
        "fill_value": -7,
        "attributes": {"survey": "test", "nested": {"a": [1, 2]}},
    }
    cubeslab.create(first, description=description).close()
    described = cubeslab.describe(first)
    assert described == description
    again = tmp_path / "again.zarr"
    cubeslab.create(again, description=described).close()
    assert cubeslab.describe(again) == described
    assert np.array_equal(cubeslab.open(again)[...], np.full((10, 20, 30), -7, np.int16))


def test_describe_create_describe_of_an_ingested_survey_is_exact_through_the_command_line(
    ingest_cube, tmp_path
):
    store = ingest_cube(SEGY, compress="zstd:3").path
    text = subprocess.run(
        [*CLI, "describe", str(store), "--json"], capture_output=True, text=True, check=True
    ).stdout
    described = json.loads(text)
    names = [a["name"] for a in described["axes"]]
    assert names == ["inline", "crossline", "time"]
    cube = cubeslab.open(store)
    assert described["axes"][0]["origin"] == float(cube.coords["inline"][0])
    assert described["axes"][2]["step"] == float(np.diff(cube.coords["time"])[0])
    assert described["compress"] == "zstd:3"
    (tmp_path / "d.json").write_text(text)
    new = tmp_path / "new.zarr"
    subprocess.run([*CLI, "create", str(new), "--from-json", str(tmp_path / "d.json")], check=True)
    assert cubeslab.describe(new) == described


def test_an_unevenly_spaced_axis_is_described_by_its_values_and_made_again_from_them(tmp_path):
    import xarray as xr

    depths = [10.0, 20.0, 50.0, 120.0]
    cubeslab.create(tmp_path / "a.zarr", (4, 3), dims=("depth", "x"), coords={"depth": depths}).close()
    axis = cubeslab.describe(tmp_path / "a.zarr")["axes"][0]
    assert (axis["origin"], axis["step"], axis["values"]) == (None, None, depths)
    cubeslab.create(tmp_path / "b.zarr", description=cubeslab.describe(tmp_path / "a.zarr")).close()
    assert cubeslab.describe(tmp_path / "b.zarr") == cubeslab.describe(tmp_path / "a.zarr")
    assert xr.open_dataset(tmp_path / "b.zarr", engine="cubeslab")["depth"].values.tolist() == depths


def test_a_store_made_from_a_description_is_labelled_by_its_axes_for_every_reader(tmp_path):
    import xarray as xr

    description = {
        "axes": [
            {"name": "x", "size": 5, "origin": 100.0, "step": 4.0, "unit": "m"},
            {"name": "t", "size": 3},
        ],
        "dtype": "float32",
    }
    cubeslab.create(tmp_path / "d.zarr", description=description).close()
    expected = [100.0, 104.0, 108.0, 112.0, 116.0]
    assert cubeslab.open(tmp_path / "d.zarr").coords["x"].tolist() == expected
    assert xr.open_dataset(tmp_path / "d.zarr", engine="cubeslab")["x"].values.tolist() == expected
    assert xr.open_zarr(tmp_path / "d.zarr", consolidated=False)["x"].values.tolist() == expected


def test_statistics_of_the_data_go_with_its_first_change_and_never_into_a_description(ingest_cube):
    store = ingest_cube(SEGY).path
    assert "statsV1" in cubeslab.open(store).amplitude.attributes
    attributes = cubeslab.describe(store)["attributes"]
    assert "statsV1" not in attributes and "coordinates" not in attributes
    with cubeslab.open(store, "r+") as cube:
        cube[0, 0, 0] = 12345.0
    assert "statsV1" not in cubeslab.open(store).amplitude.attributes


@pytest.mark.parametrize(
    ("dtype", "fill", "words"),
    [
        ("int8", 300, r"fill_value 300 does not fit the array's type, int8 \(it would be stored as 44\)"),
        ("int32", 1.5, "fill_value 1.5 does not fit"),
        ("int32", "NaN", "fill_value 'NaN' does not fit the array's type, int32"),
        ("int16", "-9999.5", "fill_value '-9999.5' does not fit"),
        ("float32", "abc", "fill_value 'abc' is no value"),
        ("float32", 1e40, "would be stored as inf"),
        ("int32", [7], r"fill_value \[7\] is no value"),
        ("complex64", 0, "dtype complex64 is not one cubeslab stores"),
    ],
)
def test_a_fill_value_the_type_cannot_hold_is_refused_through_the_command_line(tmp_path, dtype, fill, words):
    description = {**GOOD, "dtype": dtype, "fill_value": fill}
    (tmp_path / "d.json").write_text(json.dumps(description))
    command = [*CLI, "create", str(tmp_path / "x.zarr"), "--from-json", str(tmp_path / "d.json")]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert re.search(words, " ".join(done.stderr.split())), done.stderr
    assert not (tmp_path / "x.zarr").exists()


def test_a_fill_value_written_out_as_text_is_read_as_numpy_reads_it(tmp_path):
    for dtype, fill, expected in (
        ("int16", "-9999", -9999),
        ("float32", "nan", np.nan),
        ("float64", "inf", np.inf),
    ):
        with cubeslab.create(tmp_path / f"{dtype}.zarr", (2,), dtype, fill_value=fill) as array:
            np.testing.assert_array_equal(array[...], np.full(2, expected, dtype))


def test_a_float_fill_value_may_be_named_or_given_by_its_bits_as_zarr_writes_them(tmp_path):
    for name, fill in (("nan", "NaN"), ("bits", "0x7fc00000"), ("inf", "-Infinity")):
        with cubeslab.create(tmp_path / f"{name}.zarr", (3,), "float32", fill_value=fill) as array:
            np.testing.assert_array_equal(
                array[...], np.full(3, np.float32(np.nan if name != "inf" else -np.inf))
            )


GOOD = {
    "axes": [{"name": "x", "size": 4}, {"name": "y", "size": 6}],
    "dtype": "float32",
    "chunks": [2, 3],
}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d.pop("axes"), "field 'axes' is missing"),
        (lambda d: d.pop("dtype"), "field 'dtype' is missing"),
        (lambda d: d["axes"][0].pop("size"), r"axes\[0\]: field 'size' is missing"),
        (lambda d: d["axes"][1].update(size=0), r"axes\[1\]: 'size' must be a positive integer"),
        (lambda d: d["axes"][1].update(name="x"), "axis names repeat"),
        (lambda d: d["axes"][0].update(step=0), "'step' cannot be 0"),
        (lambda d: d.update(chunks=[2]), "'chunks' must list 2 positive integers"),
        (lambda d: d.update(shards=[3, 3]), "multiple of the chunk's"),
        (lambda d: d.update(dtype="float128x"), "not a numpy type"),
        (lambda d: d.update(colour="red"), "unknown field 'colour'"),
        (lambda d: d.update(compress="zfp:snr=40"), "tuned on the data"),
        (lambda d: d["axes"][0].update(values=[1, 2, 3]), r"axes\[0\]: 'values' must list 4 numbers"),
        (lambda d: d["axes"][0].update(values=[1, 2, 3, 5], step=2), "'origin' and 'step', not both"),
    ],
    ids=["no-axes", "no-dtype", "no-size", "zero-size", "same-names", "zero-step", "chunks-of-wrong-rank",
         "shards-not-multiples", "bad-dtype", "unknown-field", "error-target", "values-too-few",
         "values-and-step"],
)  # fmt: skip
def test_a_bad_description_is_refused_naming_its_field_and_writes_nothing(tmp_path, change, words):
    description = copy.deepcopy(GOOD)
    change(description)
    with pytest.raises(cubeslab.InvalidInputError, match=words):
        cubeslab.create(tmp_path / "bad.zarr", description=description)
    assert not (tmp_path / "bad.zarr").exists()


def test_the_command_line_refuses_a_description_that_is_not_json(tmp_path):
    (tmp_path / "d.json").write_text("{not json")
    done = subprocess.run([*CLI, "create", str(tmp_path / "x.zarr"), "--from-json", str(tmp_path / "d.json")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 1 and "not JSON" in done.stderr
    assert not (tmp_path / "x.zarr").exists()


def test_a_coordinate_that_is_not_finite_is_described_as_json_and_made_again(tmp_path):
    import netCDF4

    source = tmp_path / "gaps.nc"
    with netCDF4.Dataset(source, "w") as f:
        f.createDimension("t", 4)
        f.createDimension("z", 2)
        f.createVariable("t", "f8", ("t",))[:] = [0.0, np.nan, np.inf, 3.0]
        f.createVariable("v", "f4", ("t", "z"))[:] = np.ones((4, 2))
    store = tmp_path / "gaps.zarr"
    subprocess.run([*CLI, "ingest", str(source), str(store)], check=True, capture_output=True)
    text = subprocess.run(
        [*CLI, "describe", str(store), "--json"], capture_output=True, text=True, check=True
    ).stdout
    described = json.loads(text, parse_constant=lambda name: pytest.fail(f"bare {name} in JSON"))
    assert described["axes"][0]["values"] == [0.0, "NaN", "Infinity", 3.0]
    table = subprocess.run([*CLI, "describe", str(store)], capture_output=True, text=True, check=True).stdout
    assert "uneven" in table and "labels" not in table
    (tmp_path / "d.json").write_text(text)
    made = tmp_path / "made.zarr"
    subprocess.run([*CLI, "create", str(made), "--from-json", str(tmp_path / "d.json")], check=True)
    assert cubeslab.describe(made) == described
    assert np.array_equal(cubeslab.open(made).coords["t"], [0.0, np.nan, np.inf, 3.0], equal_nan=True)


def test_the_command_line_names_the_description_file_with_a_field_it_refuses(tmp_path):
    (tmp_path / "d.json").write_text(json.dumps({"node_type": "array"}))
    done = subprocess.run([*CLI, "create", str(tmp_path / "x.zarr"), "--from-json", str(tmp_path / "d.json")],
                          capture_output=True, text=True)  # fmt: skip
    said = " ".join(done.stderr.split())
    assert done.returncode == 1 and f"{tmp_path / 'd.json'}: description: unknown field 'node_type'" in said
    assert not (tmp_path / "x.zarr").exists()
