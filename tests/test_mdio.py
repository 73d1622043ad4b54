"""MDIO v1 stores as MDIO writes them (tests/data/mdio/f3.mdio: f3.sgy ingested by MDIO 1.2.3) work
throughout: trace headers by MDIO's and segyio's names, verify, plan, info and export. segyio reading
f3.sgy is the oracle. Stores that a test changes are copies in tmp_path."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import segyio

import cubeslab
from cubeslab.mdio import MDIO_TRACE_FIELDS
from cubeslab.trace_fields import TRACE_FIELDS

CLI = Path(sys.executable).parent / "cubeslab"
UNKEPT = ("UnassignedInt1", "UnassignedInt2")  # bytes 233-240: MDIO's rev 1 headers stop at 232


def run(*args) -> subprocess.CompletedProcess:
    result = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=300)
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.fixture(scope="module")
def f3(segy_dir):
    """What segyio reads from f3.sgy: the cube, the samples and every trace header field on the grid."""
    with segyio.open(segy_dir / "f3.sgy") as f:
        grid = (len(f.ilines), len(f.xlines))
        return {
            "path": segy_dir / "f3.sgy",
            "cube": segyio.tools.cube(f),
            "samples": np.array(f.samples),
            "fields": {
                name: f.attributes(getattr(segyio.TraceField, name))[:].reshape(grid) for name in TRACE_FIELDS
            },
        }


@pytest.fixture
def mdio_copy(mdio_f3, tmp_path) -> Path:
    store = tmp_path / "f3.mdio"
    shutil.copytree(mdio_f3, store)
    for path in [store, *store.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return store


# -- trace headers ---------------------------------------------------------------------------------


def test_every_segyio_header_field_of_the_mdio_store_equals_segyio(f3, mdio_f3):
    headers = cubeslab.open(mdio_f3).headers
    for name, expected in f3["fields"].items():
        if name in UNKEPT:
            continue
        got = headers[name]
        assert got.shape == (23, 18) and got.dtype == np.int32, name
        assert np.array_equal(got, expected), name


def test_mdio_field_names_and_byte_positions_give_the_same_header_bytes_as_segyio(f3, mdio_f3):
    headers = cubeslab.open(mdio_f3).headers
    segyio_by_byte = {byte: name for name, (byte, _) in TRACE_FIELDS.items()}
    for name, (byte, _) in MDIO_TRACE_FIELDS.items():
        if name in ("cdp_x", "cdp_y", "trace_header_name"):  # cdp_x: the scaled coordinate; no rev 2 name
            continue
        assert np.array_equal(headers[name], f3["fields"][segyio_by_byte[byte]]), name
        assert np.array_equal(headers[byte], f3["fields"][segyio_by_byte[byte]]), byte
    # the examples
    assert np.array_equal(headers["SourceX"], headers["source_coord_x"])
    assert np.array_equal(headers["INLINE_3D"][:, 0], np.arange(111, 134))
    assert np.array_equal(headers["CDP_X"], f3["fields"]["CDP_X"])
    assert {"SourceX", "source_coord_x", "INLINE_3D", "inline"} <= set(headers.keys())
    assert len(headers.keys()) == len(set(headers.keys()))


def test_scaled_cdp_coordinates_of_the_mdio_store_match_segyio(f3, mdio_f3):
    headers = cubeslab.open(mdio_f3).headers
    scale = f3["fields"]["SourceGroupScalar"]
    assert (scale == -10).all()
    assert np.allclose(headers["cdp_x"], f3["fields"]["CDP_X"] / 10, rtol=1e-12, atol=0)
    assert np.allclose(headers["cdp_y"], f3["fields"]["CDP_Y"] / 10, rtol=1e-12, atol=0)


def test_header_bytes_mdio_did_not_keep_are_refused_by_name(mdio_f3):
    headers = cubeslab.open(mdio_f3).headers
    for name in UNKEPT:
        with pytest.raises(cubeslab.LabelError, match="did not keep trace header bytes"):
            headers[name]
    with pytest.raises(cubeslab.LabelError, match="unknown trace header field"):
        headers["NoSuchField"]


def test_a_moved_mdio_field_is_read_by_its_mdio_name_and_never_by_a_guessed_byte(f3, mdio_copy):
    # MDIO lets users read "inline" from another byte without recording which: such a field sits out
    # of byte order in the struct (here swapped with energy_source_point_num, byte 17).
    meta_path = mdio_copy / "headers" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    fields = meta["data_type"]["configuration"]["fields"]
    names = [f["name"] for f in fields]
    a, b = names.index("energy_source_point_num"), names.index("inline")
    fields[a]["name"], fields[b]["name"] = "inline", "energy_source_point_num"
    meta["fill_value"] = {f["name"]: 0 for f in fields}
    meta_path.write_text(json.dumps(meta))
    headers = cubeslab.open(mdio_copy).headers
    assert np.array_equal(headers["inline"], f3["fields"]["EnergySourcePoint"])
    with pytest.raises(cubeslab.LabelError, match="not MDIO's standard SEG-Y layout"):
        headers["INLINE_3D"]


# -- verify, plan, info ----------------------------------------------------------------------------


def test_verify_passes_on_the_mdio_store_and_reads_its_struct_headers(mdio_copy):
    result = run("verify", mdio_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "unreadable" not in result.stdout and "ok" in result.stdout
    report = cubeslab.verify(mdio_copy)
    assert report["ok"] and report["unreadable"] == []
    assert report["arrays"]["headers"]["shards_read"] == 1
    assert report["arrays"]["segy_file_header"]["bad"] == []


def test_verify_finds_a_damaged_mdio_header_chunk(mdio_copy):
    chunk = mdio_copy / "headers" / "c" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[40::97] = bytes(b ^ 0x5A for b in data[40::97])
    chunk.write_bytes(bytes(data))
    result = run("verify", mdio_copy)
    assert result.returncode == 1
    assert "bad headers/c/0/0" in " ".join(result.stdout.split())
    report = cubeslab.verify(mdio_copy)
    assert not report["ok"] and report["arrays"]["headers"]["bad"]
    with pytest.raises(cubeslab.CorruptDataError, match="headers/c/0/0"):
        cubeslab.open(mdio_copy).headers["SourceX"]


def test_plan_works_on_the_mdio_store(mdio_copy):
    result = run("plan", mdio_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "blosc-zstd:5" in result.stdout
    from cubeslab.plan import plan_store

    planned = plan_store(mdio_copy)
    assert planned["store"]["compression"] == "blosc-zstd:5"
    assert planned["store"]["copies"][0]["layout"] == "128x128x128/128x128x128"


def test_info_says_mdio_starts_the_time_axis_at_0_where_segyio_starts_at_4_ms(f3, mdio_f3):
    assert f3["samples"][0] == 4.0  # the file's delay recording time
    assert cubeslab.open(mdio_f3).coords["time"][0] == 0.0  # MDIO 1.2.3 ignored it
    assert np.array_equal(cubeslab.open(mdio_f3).coords["time"] + 4, f3["samples"])
    result = run("info", mdio_f3, "--json")
    assert result.returncode == 0, result.stderr
    note = json.loads(result.stdout)["note"]
    assert "from 0 ms" in note and "is 4 ms" in note and "segyio" in note


@pytest.mark.filterwarnings("ignore::cubeslab.IngestWarning")  # f3.sgy's trace headers say 462 samples
def test_info_has_no_time_axis_note_for_a_store_cubeslab_wrote(f3, tmp_path):
    cubeslab.ingest(f3["path"], tmp_path / "f3.zarr")
    result = run("info", tmp_path / "f3.zarr", "--json")
    assert result.returncode == 0 and "note" not in json.loads(result.stdout)


# -- export ----------------------------------------------------------------------------------------


def test_export_of_the_mdio_store_gives_back_f3_sgy(f3, mdio_copy, tmp_path):
    out = tmp_path / "out.sgy"
    result = run("export", mdio_copy, out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "wrote 414 traces" in result.stdout
    with segyio.open(f3["path"]) as source, segyio.open(out) as back:
        assert np.array_equal(segyio.tools.cube(back), f3["cube"])
        assert np.array_equal(back.samples, f3["samples"])
        assert back.text[0] == source.text[0]
        assert dict(back.bin) == dict(source.bin)
        for i in range(source.tracecount):
            assert dict(back.header[i]) == dict(source.header[i]), i
    assert out.read_bytes() == f3["path"].read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f3.mdio", "out.sgy"]  # no scratch left


def test_export_of_the_mdio_store_in_another_format_and_refusing_to_overwrite(f3, mdio_copy, tmp_path):
    out = tmp_path / "out.sgy"
    assert cubeslab.export(mdio_copy, out, format=5) == 414
    with segyio.open(out) as back:
        assert back.bin[segyio.BinField.Format] == 5
        assert np.array_equal(segyio.tools.cube(back), f3["cube"].astype(np.float32))
    result = run("export", mdio_copy, out)
    assert result.returncode == 1 and "already exists" in result.stderr
