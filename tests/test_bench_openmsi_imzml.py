"""The OpenMSI study's imzML part at its tiny size: the study's cube written as imzML by pyimzML and the
format's example files ingested by cubeslab, each checked against pyimzML; the ion image, spectrum and
sub-cube read by cubeslab, pyimzML and h5py (the study's HDF5 layouts), cold and warm, each a median of
enough runs with its physical bound beside it; and a tool whose result differs from pyimzML's fails the
study."""

from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import numpy as np
import pytest

from cubeslab_bench.openmsi_imzml import READS, Selection, Tool, measure_tool
from cubeslab_bench.study import ms, ratio

HAVE_H5PY = importlib.util.find_spec("h5py") is not None
HAVE_PYIMZML = importlib.util.find_spec("pyimzml") is not None
needs_pyimzml = pytest.mark.skipif(not HAVE_PYIMZML, reason="pyimzML is not installed (the part is skipped)")
GENERATED = "generated 8 x 8 x 4096"
CONTINUOUS = (GENERATED, "Example_Continuous")
TOOLS = {"pyimzML", "cubeslab"} | (
    {"HDF5 contiguous", "HDF5 4x4x2048", "HDF5 4x4x2048 gzip-4"} if HAVE_H5PY else set()
)


@pytest.fixture(scope="module")
def doc(tiny_bench):
    return json.loads((tiny_bench / "openmsi.json").read_text())


@pytest.fixture(scope="module")
def files(doc):
    return doc["results"]["imzml"]["files"]


def table(doc: dict, starts: str) -> dict:
    found = [t for t in doc["tables"] if t["title"].startswith(starts)]
    assert len(found) == 1, [t["title"] for t in doc["tables"]]
    return found[0]


def check_timing(t: dict, runs: int, where: str) -> None:
    assert t["runs"] >= max(5, runs), where
    assert 0 < t["min_s"] <= t["median_s"] <= t["max_s"], where


@needs_pyimzml
def test_every_file_was_ingested_and_checked_against_pyimzml(doc, files):
    assert list(files) == [GENERATED, "Example_Continuous", "Example_Processed"]
    assert doc["results"]["imzml"]["intensity_dtype"] == "float32"
    assert files[GENERATED]["shape"] == [8, 8, 4096] and files[GENERATED]["spectra"] == 64
    assert files["Example_Continuous"]["shape"] == [3, 3, 8399]
    for name, e in files.items():
        mode = "processed" if name == "Example_Processed" else "continuous"
        assert e["mode"] == mode, name
        n = e["spectra"]
        expected = f"{n} of {n} spectra = " + ("pyimzML's" if mode == "continuous" else "numpy's binning")
        assert e["check"].startswith(expected), (name, e["check"])
        check_timing(e["ingest"], doc["runs"], f"{name} ingest")
        assert e["ingest_MBps"] == pytest.approx(e["ibd_bytes"] / e["ingest"]["median_s"] / 1e6)
        assert e["ibd_sequential_MBps"] > 0 and e["store_bytes"] > 0, name
        bound = (e["ibd_bytes"] + e["store_bytes"]) / doc["bandwidth"]["disk_read_Bps"]
        assert e["bound_s"] > 0 and e["bound_s"] == pytest.approx(bound), name
    assert "tools" not in files["Example_Processed"]  # its binned cube is not what pyimzML reads


@needs_pyimzml
def test_every_read_was_checked_and_timed_with_its_bound(doc, files):
    disk, mem = doc["bandwidth"]["disk_read_Bps"], doc["bandwidth"]["memory_copy_Bps"]
    for name in CONTINUOUS:
        tools = files[name]["tools"]
        assert set(tools) == TOOLS, name
        for tool, reads in tools.items():
            assert set(reads) == set(READS), (name, tool)
            for read, t in reads.items():
                where = f"{name} {tool} {read}"
                for state in ("cold", "warm"):
                    check_timing(t[state], doc["runs"], f"{where} {state}")
                assert t["bound_cold_s"] > 0 and t["bound_cold_s"] == pytest.approx(t["cold_bytes"] / disk)
                assert t["bound_warm_s"] > 0 and t["bound_warm_s"] == pytest.approx(t["warm_bytes"] / mem)
                expected = "—" if read == "open" else "reference" if tool == "pyimzML" else "= pyimzML"
                assert t["result"] == expected, where
        selection = files[name]["selection"]
        window = selection["window"]
        assert window[1] - window[0] == 5, name  # m/z ± 2.5 bins: 5 bins, edges between bins
        # Cold, a tool fetches at least the pages of the values it selects.
        for tool, reads in tools.items():
            for read in ("ion image", "spectrum", "sub-cube"):
                if "gzip" not in tool:
                    assert reads[read]["cold_bytes"] >= reads[read]["warm_bytes"], (name, tool, read)


@needs_pyimzml
def test_tables_show_the_recorded_figures(doc, files):
    ingest = table(doc, "imzML ingest")
    assert [row[0] for row in ingest["rows"]] == list(files)
    column = ingest["columns"].index("ingest ms")
    assert [row[column] for row in ingest["rows"]] == [ms(e["ingest"]) for e in files.values()]
    reads = table(doc, "imzML reads")
    assert len(reads["rows"]) == sum(len(files[n]["tools"]) * len(READS) for n in CONTINUOUS)
    c = {name: i for i, name in enumerate(reads["columns"])}
    for row in reads["rows"]:
        name, read, tool = row[c["file"]], row[c["read"]], row[c["tool"]]
        t, base = files[name]["tools"][tool][read], files[name]["tools"]["cubeslab"][read]
        assert row[c["cold ms"]] == ms(t["cold"]) and row[c["warm ms"]] == ms(t["warm"])
        assert row[c["cold ÷ cubeslab"]] == ratio(t["cold"]["median_s"] / base["cold"]["median_s"])
        assert row[c["warm ÷ cubeslab"]] == ratio(t["warm"]["median_s"] / base["warm"]["median_s"])
    assert "cold" in reads["note"].lower() and "bound" in reads["note"]


def test_a_result_that_differs_from_pyimzmls_fails_the_study():
    selection = Selection(
        (3, 3, 10),
        (1, 1),
        np.arange(10.0),
        5.0,
        1.0,
        slice(4, 7),
        (2, 2),
        (slice(0, 3), slice(0, 3), slice(0, 10)),
    )
    reference = {"ion image": np.zeros((3, 3)), "spectrum": np.zeros(10), "sub-cube": np.zeros((3, 3, 10))}
    reads = {
        "ion image": lambda _: np.zeros((3, 3)),
        "spectrum": lambda _: np.r_[np.zeros(9), 1.0],  # one value off
        "sub-cube": lambda _: np.zeros((3, 3, 10)),
    }
    tool = Tool("wrong", [], lambda: None, lambda _: None, reads, dict.fromkeys(READS, 1.0))
    run = SimpleNamespace(runs=5, bandwidth={"disk_read_Bps": 1e9, "memory_copy_Bps": 1e10})
    with pytest.raises(AssertionError, match="wrong's spectrum"):
        measure_tool(run, tool, selection, reference, 4)
