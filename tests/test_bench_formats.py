"""The formats study ([Pourmal]) runs end to end at its tiny size: a table per case with a row per size
and a column per installed tool, every timing a median of at least five runs, the plots and the report
written, the scratch data removed, and a tool that returns wrong data stops the study."""

from __future__ import annotations

import html
import json

import numpy as np
import pytest
from conftest import timings

import cubeslab_bench as bench
from cubeslab_bench import file_formats, formats, tools

# Peers runs use a smaller tiny (what they check does not depend on the sizes), its hyperslab source not one
# of the written sizes, as at the medium size.
FEWER = {"write_mib": (1,), "slab_source_mib": 2, "slab_mib": (0.25,), "datasets": 3, "scratch": 16 << 20}


@pytest.fixture(scope="module")
def tiny(tiny_bench):
    doc = json.loads((tiny_bench / "formats.json").read_text())
    return {
        "report": tiny_bench / "report.html",
        "out": tiny_bench,
        "data": tiny_bench.parent / "data",
        "doc": doc,
    }


def installed_labels() -> list[str]:
    return [t.label for t in file_formats.all_tools() if t.peer is None or tools.missing(t.peer) is None]


def case_table(doc: dict, case: int) -> dict:
    found = [t for t in doc["tables"] if t["title"].startswith(f"{case}. ")]
    assert len(found) == 1, [t["title"] for t in doc["tables"]]
    return found[0]


def test_a_table_per_case_with_a_row_per_size_and_a_column_per_tool(tiny):
    doc, p = tiny["doc"], formats.SIZES["tiny"]
    labels = installed_labels()
    expected_rows = {1: len(p["write_mib"]), 2: 2 * len(p["write_mib"]), 3: 2 * len(p["slab_mib"]),
                     4: 2 * len(p["slab_mib"]), 5: 3}  # fmt: skip
    for case, n_rows in expected_rows.items():
        table = case_table(doc, case)
        assert len(table["rows"]) == n_rows, (case, table["rows"])
        tool_columns = [c for c in table["columns"] if c.split(" ")[0] in labels]
        assert [c.split(" ")[0] for c in tool_columns] == labels, (case, table["columns"])
        assert any(c.startswith("bound") for c in table["columns"]), table["columns"]
        for row in table["rows"]:
            assert len(row) == len(table["columns"])
            assert "—" not in row, (case, row)  # every tool measured every size
            assert float(row[-1].replace(",", "")) > 0  # the physical bound
    sizes = {f"{m:g}" for m in p["write_mib"]}
    for label in labels:
        assert set(doc["results"]["write"][label]) == sizes
        assert set(doc["results"]["read"]["cold"][label]) == sizes
    assert set(doc["results"]["tools"]) == set(labels)
    assert doc["skipped"] == {}


def test_every_timing_is_a_median_of_at_least_five_runs(tiny):
    found = list(timings(tiny["doc"]["results"]))
    p = formats.SIZES["tiny"]
    # per tool: write, then read cold and warm, per size; hyperslab and strided, cold and warm, per
    # hyperslab; create, cold and warm in case 5
    per_tool = 3 * len(p["write_mib"]) + 4 * len(p["slab_mib"]) + 3
    assert len(found) == len(installed_labels()) * per_tool
    for where, t in found:
        assert t["runs"] >= 5, where
        assert 0 < t["min_s"] <= t["median_s"] <= t["max_s"], (where, t)
    bandwidth = tiny["doc"]["bandwidth"]
    assert (
        bandwidth["memory_copy_Bps"] > 0
        and bandwidth["disk_read_Bps"] > 0
        and bandwidth["disk_write_Bps"] > 0
    )


def test_published_conclusions_sit_beside_this_runs_ratios(tiny):
    published = [t for t in tiny["doc"]["tables"] if t["published"]]
    assert len(published) == 1
    rows = published[0]["rows"]
    assert any("2-6 times faster" in row[0] for row in rows)
    if "HDF5" in installed_labels():
        native = next(row for row in rows if "native write/read" in row[0])
        assert "write:" in native[1] and "read:" in native[1] and "x" in native[2]


def test_plots_report_and_scratch(tiny):
    doc, out = tiny["doc"], tiny["out"]
    assert len(doc["plots"]) >= 2
    for plot in doc["plots"]:
        data = (out / plot["file"]).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, plot["file"]
    report = tiny["report"].read_text()
    for table in doc["tables"]:
        assert html.escape(table["title"]) in report, table["title"]
    assert not (tiny["data"] / "formats").exists()  # the study's scratch folder


def test_peers_selects_the_tools_measured(tmp_path, monkeypatch):
    monkeypatch.setitem(formats.SIZES, "tiny", FEWER)
    bench.run("formats", size="tiny", peers="h5py", out=tmp_path / "out", data=tmp_path / "data")
    doc = json.loads((tmp_path / "out" / "formats.json").read_text())
    for tool in ("netcdf4", "astropy", "numpy", "pyhdf"):
        assert "not selected" in doc["skipped"][tool], doc["skipped"]
    # h5py writes the HDF5 files that cubeslab also reads in place.
    expected = ["cubeslab"] + (["HDF5", "cubeslab:HDF5"] if tools.missing("h5py") is None else [])
    assert list(doc["results"]["tools"]) == expected
    assert [c.split(" ")[0] for c in case_table(doc, 2)["columns"][2:-1]] == expected


def test_a_tool_returning_other_data_stops_the_study(tmp_path, monkeypatch):
    monkeypatch.setitem(formats.SIZES, "tiny", FEWER)
    honest = file_formats.Cubeslab.read

    def off_by_one(self, path, name, key):
        data = honest(self, path, name, key)
        data.flat[0] ^= np.uint16(1)
        return data

    monkeypatch.setattr(file_formats.Cubeslab, "read", off_by_one)
    with pytest.raises(RuntimeError, match="cubeslab: whole read"):
        bench.run("formats", size="tiny", peers="numpy", out=tmp_path / "out", data=tmp_path / "data")
    assert [p for p in (tmp_path / "data").rglob("*") if p.is_file()] == []


@pytest.mark.skipif(tools.missing("netcdf4") is not None, reason="netCDF4 is not installed")
def test_the_classic_netcdf_format_is_left_out_of_case_5_past_its_limit(tmp_path, monkeypatch):
    monkeypatch.setitem(formats.SIZES, "tiny", FEWER)
    monkeypatch.setattr(file_formats, "CLASSIC_MANY", FEWER["datasets"] - 1)
    bench.run("formats", size="tiny", peers="netcdf4", out=tmp_path / "out", data=tmp_path / "data")
    doc = json.loads((tmp_path / "out" / "formats.json").read_text())
    many = doc["results"]["many"]
    assert set(many["tools"]) == {"cubeslab", "netCDF-4", "cubeslab:netCDF-4"}
    assert "not run" in many["not_run"]["netCDF-CDF5"]
    table = case_table(doc, 5)
    column = table["columns"].index("netCDF-CDF5 ms")
    assert all(row[column].startswith("not run") for row in table["rows"])
    assert "netCDF-CDF5: not run" in table["note"]
    assert set(doc["results"]["hyperslab"]["cold"]["netCDF-CDF5"]) == {"0.25"}  # measured in the other cases
