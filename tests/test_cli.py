"""The ``cubeslab`` command, run as a user runs it (a subprocess of the installed entry point):
ingest, info, read (planes and windows to .npy and .png), export, --overwrite and demo.
segyio is the oracle for the values; the file system and zarr-python for the store's size and layout.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import segyio
import zarr

import cubeslab

CLI = Path(sys.executable).parent / "cubeslab"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(*args, expect: int = 0) -> subprocess.CompletedProcess:
    result = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert result.returncode == expect, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    return result


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR" and data[-8:-4] == b"IEND"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 0 and height > 0


@pytest.fixture(scope="module")
def f3(segy_dir):
    with segyio.open(segy_dir / "f3.sgy") as f:
        return {
            "path": segy_dir / "f3.sgy",
            "cube": segyio.tools.cube(f),
            "ilines": np.array(f.ilines),
            "xlines": np.array(f.xlines),
            "samples": np.array(f.samples),
        }


@pytest.fixture(scope="module")
def store(f3, tmp_path_factory):
    """f3.sgy ingested through the CLI once, with the default options."""
    path = tmp_path_factory.mktemp("cli") / "f3.zarr"
    result = run("ingest", f3["path"], path)
    assert re.search(r"ingested 414 traces \(0 missing\)", result.stdout), result.stdout
    return path


# -- help ------------------------------------------------------------------------------------------


def test_help_gives_each_command_its_whole_summary_on_one_line():
    wide = subprocess.run(
        [str(CLI), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "250"},
    ).stdout
    lines = {
        line.split()[1]: line for line in wide.splitlines() if line.startswith("│ ") and len(line.split()) > 2
    }
    assert "an ion image or a spectrum (a plot with an m/z axis)" in lines["read"]
    assert "HDF5, NetCDF 4 or FITS" in lines["export"]
    assert "and the error against the source" in lines["verify"]


# -- ingest ----------------------------------------------------------------------------------------


def test_ingest_exits_0_and_creates_a_complete_store_equal_to_segyio(f3, store):
    assert (store / "zarr.json").is_file()
    cube = cubeslab.open(store)
    assert cube.attributes["cubeslab"]["state"] == "complete"
    assert np.array_equal(cube[...], f3["cube"].astype(np.float32))


def test_ingest_options_reach_the_store(f3, tmp_path):
    path = tmp_path / "opts.zarr"
    run(
        "ingest", f3["path"], path,
        "--dtype", "native", "--compress", "zstd:5", "--layout", "4x4x8/8x8x24",
        "--endian", "big", "--threads", "1",
    )  # fmt: skip
    amplitude = zarr.open_array(path / "amplitude", mode="r")
    assert amplitude.dtype == np.int16
    assert amplitude.chunks == (4, 4, 8) and amplitude.shards == (8, 8, 24)
    assert np.array_equal(amplitude[...], f3["cube"])
    sharding = json.loads((path / "amplitude" / "zarr.json").read_text())["codecs"][0]
    inner = sharding["configuration"]["codecs"]
    assert {"name": "zstd", "configuration": {"level": 5, "checksum": False}} in inner


def test_ingest_with_byte_locations_and_depth_axis(segy_dir, tmp_path):
    path = tmp_path / "depth.zarr"
    run("ingest", segy_dir / "small.sgy", path, "--inline-byte", "189", "--crossline-byte", "193", "--depth")
    cube = cubeslab.open(path)
    assert cube.dims == ["inline", "crossline", "depth"]
    with segyio.open(segy_dir / "small.sgy") as f:
        assert np.array_equal(cube.coords["depth"], f.samples)
        out = tmp_path / "d.npy"
        run("read", path, "--depth", f.samples[7], "-o", out)
        assert np.array_equal(np.load(out), f.depth_slice[7])


def test_ingest_allow_truncated_warns_on_stderr_and_exits_0(segy_dir, tmp_path):
    raw = (segy_dir / "f3.sgy").read_bytes()
    cut = tmp_path / "cut.sgy"
    cut.write_bytes(raw[: 3600 + 100 * 390 + 50])  # 100 whole traces and a piece
    run("ingest", cut, tmp_path / "cut.zarr", expect=1)
    result = run("ingest", cut, tmp_path / "cut.zarr", "--allow-truncated")
    assert "warning:" in result.stderr and "100 whole traces" in result.stderr
    assert "ingested 100 traces" in result.stdout


def test_ingest_refuses_an_existing_store_and_overwrite_replaces_it(segy_dir, f3, tmp_path):
    path = tmp_path / "o.zarr"
    run("ingest", segy_dir / "small.sgy", path)
    before = (path / "zarr.json").read_bytes()
    result = run("ingest", f3["path"], path, expect=1)
    assert "already exists" in result.stderr and str(path) in result.stderr
    assert (path / "zarr.json").read_bytes() == before
    run("ingest", f3["path"], path, "--overwrite")
    assert np.array_equal(cubeslab.open(path)[...], f3["cube"].astype(np.float32))


# -- info ------------------------------------------------------------------------------------------


def test_info_prints_geometry_layout_and_state(store):
    out = run("info", store).stdout
    chunks = cubeslab.open(store).amplitude.chunks
    for pattern in (
        r"state\s+complete",
        r"inline': 23",
        r"crossline': 18",
        r"time': 75",
        rf"chunks\s+\[{', '.join(map(str, chunks))}\]",
        r"layout\s+\d+x\d+x\d+/\d+x\d+x\d+ \(auto\)",
    ):
        assert re.search(pattern, out), (pattern, out)
    assert re.search(r"compression_ratio\s+[\d.]+", out)


def test_info_json_reports_dims_chunks_compression_ratio_and_state(f3, store):
    report = json.loads(run("info", "--json", store).stdout)
    assert report["state"] == "complete"
    assert report["dims"] == {"inline": 23, "crossline": 18, "time": 75}
    amplitude = zarr.open_array(store / "amplitude", mode="r")
    assert tuple(report["chunks"]) == amplitude.chunks
    assert tuple(report["shards"]) == amplitude.shards
    size = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    data_bytes = f3["cube"].size * 4
    assert report["size_bytes"] == size
    assert report["data_bytes"] == data_bytes
    volume = sum(p.stat().st_size for p in (store / "amplitude").rglob("*") if p.is_file())
    assert report["volume_bytes"] == volume
    assert report["compression_ratio"] == pytest.approx(data_bytes / volume, abs=1e-3)
    assert "ratio_with_views" not in report
    assert report["live_traces"] == 414 and report["missing_traces"] == 0
    assert report["ranges"]["inline"] == [float(f3["ilines"][0]), float(f3["ilines"][-1])]
    assert report["ranges"]["time"] == [float(f3["samples"][0]), float(f3["samples"][-1])]


def test_info_compression_ratio_grows_with_compression(f3, tmp_path):
    plain, packed = tmp_path / "plain.zarr", tmp_path / "packed.zarr"
    run("ingest", f3["path"], plain, "--dtype", "native")
    run("ingest", f3["path"], packed, "--dtype", "native", "--compress", "zstd:9")
    ratio = {p: json.loads(run("info", "--json", p).stdout)["compression_ratio"] for p in (plain, packed)}
    assert ratio[packed] > ratio[plain]


def test_info_of_a_zfp_store_whose_write_error_is_not_finite_says_inf(tmp_path):
    """A version before NaN was refused under ZFP recorded a NaN's error as null (JSON has no infinity)."""
    np.save(tmp_path / "ones.npy", np.ones((16, 16, 16), "f4"))
    run("ingest", tmp_path / "ones.npy", tmp_path / "nan.zarr", "--compress", "zfp:rate=8")
    with cubeslab.open(tmp_path / "nan.zarr", "r+") as cube:
        shard = tuple(slice(0, n) for n in cube.amplitude.shards)
        cube[shard] = 2.0
    metadata = tmp_path / "nan.zarr" / "data" / "zarr.json"
    recorded = json.loads(metadata.read_text())
    recorded["attributes"]["cubeslab"]["rewrites"]["max_abs_error"] = None
    metadata.write_text(json.dumps(recorded))
    said = " ".join(run("info", tmp_path / "nan.zarr").stdout.split())
    assert "written since, max |error| inf" in said, said
    report = json.loads(run("info", tmp_path / "nan.zarr", "--json").stdout)
    assert "max |error| inf" in report["error_of_writes"]


def test_info_of_a_missing_path_or_a_folder_without_a_store_exits_1_saying_which(tmp_path):
    result = run("info", tmp_path / "none.zarr", expect=1)
    assert "none.zarr: no such file or folder" in " ".join(result.stderr.split())
    (tmp_path / "folder").mkdir()
    result = run("info", tmp_path / "folder", expect=1)
    assert "no Zarr store here" in result.stderr


# -- read ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("plane", ["inline", "crossline", "time"])
def test_read_plane_to_npy_equals_segyio(f3, store, tmp_path, plane):
    out = tmp_path / f"{plane}.npy"
    with segyio.open(f3["path"]) as f:
        if plane == "inline":
            label, expected = f3["ilines"][9], f.iline[f3["ilines"][9]]
        elif plane == "crossline":
            label, expected = f3["xlines"][4], f.xline[f3["xlines"][4]]
        else:
            label, expected = f3["samples"][40], f.depth_slice[40]
    result = run("read", store, f"--{plane}", label, "-o", out)
    got = np.load(out)
    assert got.dtype == np.float32
    assert np.array_equal(got, expected.astype(np.float32))
    assert str(got.shape) in result.stdout


def test_read_window_to_npy_equals_numpy_slicing_of_segyio(f3, store, tmp_path):
    out = tmp_path / "w.npy"
    run("read", store, "--window", "2:20:3,5,::-4", "-o", out)
    assert np.array_equal(np.load(out), f3["cube"][2:20:3, 5, ::-4].astype(np.float32))


@pytest.mark.parametrize("selection", [["--inline", "120"], ["--time", "100"], ["--window", "0:10,3,:"]])
def test_read_to_png_writes_a_valid_png(store, tmp_path, selection):
    out = tmp_path / "plane.png"
    run("read", store, *selection, "-o", out)
    assert_png(out)


def test_read_a_label_not_in_the_survey_exits_1_naming_it(store, tmp_path):
    result = run("read", store, "--inline", 999, "-o", tmp_path / "x.npy", expect=1)
    assert "inline 999" in result.stderr and "111..133" in result.stderr
    assert not (tmp_path / "x.npy").exists()


@pytest.mark.parametrize("window", ["a:b", "1:2:3:4", "0.5"])
def test_read_a_window_that_is_none_is_a_usage_error(store, tmp_path, window):
    result = run("read", store, "--window", window, "-o", tmp_path / "x.npy", expect=2)
    assert f"--window {window!r}: not a window" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "x.npy").exists()


def test_read_a_3d_window_to_png_exits_1(store, tmp_path):
    result = run("read", store, "--window", "0:2,0:2,0:2", "-o", tmp_path / "x.png", expect=1)
    assert "2-D" in result.stderr


# -- export ----------------------------------------------------------------------------------------


def test_export_writes_segy_equal_to_the_source_in_segyio(f3, store, tmp_path):
    out = tmp_path / "out.sgy"
    result = run("export", store, out)
    assert "wrote 414 traces" in result.stdout
    with segyio.open(out) as dst, segyio.open(f3["path"]) as src:
        assert np.array_equal(segyio.tools.cube(dst), segyio.tools.cube(src))
        assert all(dict(dst.header[i]) == dict(src.header[i]) for i in range(src.tracecount))
        assert bytes(dst.text[0]) == bytes(src.text[0])
        assert dict(dst.bin) == dict(src.bin)
    assert out.read_bytes() == f3["path"].read_bytes()


def test_export_format_option_changes_the_sample_format(f3, store, tmp_path):
    out = tmp_path / "ibm.sgy"
    run("export", store, out, "--format", 1)
    with segyio.open(out) as f:
        assert f.bin[segyio.BinField.Format] == 1
        assert np.array_equal(segyio.tools.cube(f), f3["cube"].astype(np.float32))


def test_export_refuses_an_existing_file_unless_overwrite(store, tmp_path):
    out = tmp_path / "exists.sgy"
    out.write_bytes(b"not segy")
    result = run("export", store, out, expect=1)
    assert "already exists" in result.stderr
    assert out.read_bytes() == b"not segy"
    run("export", store, out, "--overwrite")
    with segyio.open(out) as f:
        assert f.tracecount == 414


def test_export_refuses_a_name_of_no_format_and_seg_y_of_a_store_that_holds_no_survey(store, tmp_path):
    result = run("export", store, tmp_path / "out.xyz", expect=1)
    assert "says no format cubeslab writes" in result.stderr and ".sgy" in result.stderr
    np.save(tmp_path / "a.npy", np.zeros((3, 4, 5), np.float32))
    run("ingest", tmp_path / "a.npy", tmp_path / "a.zarr")
    result = run("export", tmp_path / "a.zarr", tmp_path / "a.SEGY", expect=1)
    assert "holds an N-D array: export it to .npy" in " ".join(result.stderr.split())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "a.zarr"]


def test_read_by_survey_label_is_refused_on_a_store_without_that_axis(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(60, dtype=np.float32).reshape(3, 4, 5))
    run("ingest", tmp_path / "a.npy", tmp_path / "a.zarr")
    for option in ("--inline", "--crossline", "--time"):
        result = run("read", tmp_path / "a.zarr", "-o", tmp_path / "p.npy", option, "1", expect=2)
        assert "this store's axes are dim_0, dim_1, dim_2: choose positions with --window" in " ".join(
            result.stderr.split()
        )
    assert not (tmp_path / "p.npy").exists()
    run("read", tmp_path / "a.zarr", "-o", tmp_path / "p.npy", "--window", "1")
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), np.load(tmp_path / "a.npy")[1])


# -- demo ------------------------------------------------------------------------------------------


def test_demo_small_writes_three_png_planes_and_a_store_equal_to_its_segy(tmp_path):
    directory = tmp_path / "demo"
    result = run("demo", "--size", "small", "--dir", directory, "--repeats", "1")
    assert "ingested" in result.stdout
    assert f"cubeslab view {directory / 'synthetic-small.zarr'}" in " ".join(result.stdout.split())
    for name in ("inline.png", "crossline.png", "time_slice.png"):
        assert_png(directory / name)
    sgy = directory / "synthetic-small.sgy"
    with segyio.open(sgy) as f:
        assert np.array_equal(cubeslab.open(directory / "synthetic-small.zarr")[...], segyio.tools.cube(f))


def test_usage_errors_exit_2(store, tmp_path):
    result = run("read", store, "--inline", 111, "--crossline", 880, "-o", tmp_path / "x.npy", expect=2)
    assert "exactly one of" in result.stderr
    result = run("ingest", "a.sgy", tmp_path / "x.zarr", "--layout", "fast", expect=2)
    assert "unknown layout" in result.stderr


@pytest.mark.parametrize("name", ["f3.sgy", "f3-lsb.sgy", "small-ps.sgy", "small_hole.sgy"])
def test_info_describes_a_segy_file_before_ingest_as_segyio_sees_it(segy_dir, name):
    path = segy_dir / name
    report = json.loads(run("info", path, "--json").stdout)
    endian = "little" if "lsb" in name else "big"
    with segyio.open(path, ignore_geometry=True, endian=endian) as f:
        inlines = sorted({h[segyio.TraceField.INLINE_3D] for h in f.header})
        crosslines = sorted({h[segyio.TraceField.CROSSLINE_3D] for h in f.header})
        offsets = sorted({h[segyio.TraceField.offset] for h in f.header})
        assert report["traces"] == f.tracecount
        assert report["samples_per_trace"] == len(f.samples)
        assert report["first_sample_ms"] == f.samples[0]
        assert report["sample_format"] == f.bin[segyio.BinField.Format]
        assert report["endianness"] == endian
    assert report["inline"] == {"count": len(inlines), "first": inlines[0], "last": inlines[-1]}
    assert report["crossline"] == {"count": len(crosslines), "first": crosslines[0], "last": crosslines[-1]}
    assert report["live_traces"] == report["traces"]
    cells = len(inlines) * len(crosslines) * (len(offsets) if report["offset"] else 1)
    assert report["missing_traces"] == cells - report["traces"]
    if len(offsets) > 1:
        assert report["offset"]["count"] == len(offsets)


def test_info_on_a_segy_file_without_geometry_fails_with_a_hint(segy_dir):
    result = run("info", segy_dir / "shot-gather.sgy", expect=1)
    assert "inline-byte" in result.stderr and "Traceback" not in result.stderr


def test_info_gives_the_volume_ratio_and_the_ratio_with_views_apart(f3, tmp_path):
    store = tmp_path / "zfp.zarr"
    run("ingest", f3["path"], store, "--compress", "zfp:tolerance=0.5", "--views", "inline,time")
    report = json.loads(run("info", "--json", store).stdout)

    def stored(name: str) -> int:
        return sum(p.stat().st_size for p in (store / name).rglob("*") if p.is_file())

    data_bytes = f3["cube"].size * 4
    volume = stored("amplitude")
    views = stored("amplitude_inline") + stored("amplitude_time")
    assert report["compression_ratio"] == pytest.approx(data_bytes / volume, abs=1e-3)
    assert report["ratio_with_views"] == pytest.approx(data_bytes / (volume + views), abs=1e-3)
    assert report["compression_ratio"] > 2 * report["ratio_with_views"]
