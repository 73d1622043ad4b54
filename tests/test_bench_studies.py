"""The benchmark studies at their tiny size: each runs whole, its tables agree with its raw results,
and the report renders in a real headless Chromium with every study's tables and plots."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

import cubeslab_bench as bench
from cubeslab.plan import plan

OUT = "out"
CLI = Path(sys.executable).parent / "cubeslab"


@pytest.fixture(scope="module")
def tiny(tiny_bench) -> Path:
    return tiny_bench


def load(folder: Path, study: str) -> dict:
    return json.loads((folder / f"{study}.json").read_text())


def table(doc: dict, title_start: str) -> dict:
    found = [t for t in doc["tables"] if t["title"].startswith(title_start)]
    assert len(found) == 1, [t["title"] for t in doc["tables"]]
    return found[0]


def assert_timing(t: dict) -> None:
    assert t["runs"] >= 5
    assert 0 < t["min_s"] <= t["median_s"] <= t["max_s"]


def test_pyrus_chunk_sweep_covers_every_tool_and_size(tiny):
    doc = load(tiny, "pyrus")
    cubes = bench.study_module("pyrus").SIZES["tiny"]["cubes"]
    sweep = doc["results"]["chunk_size"]
    assert set(sweep["tools"]) == {"cubeslab", "h5py", "zarr", "tensorstore"}
    for per_size in sweep["tools"].values():
        assert [int(n) for n in per_size] == list(cubes)
        for planes in per_size.values():
            for plane in ("inline", "crossline", "time slice"):
                assert_timing(planes[plane]["warm"])
                assert_timing(planes[plane]["cold"])
    cold = table(doc, "Read time per float against cube chunk size, cold")
    assert len(cold["rows"]) == 4 * len(cubes) + 1  # every tool at every size, and segyio
    # The average column is the mean of the three planes' ns per float, from the raw runs.
    planes = sweep["tools"]["h5py"][str(cubes[0])]
    expected = np.mean([planes[p]["cold"]["median_s"] / planes[p]["floats"] * 1e9 for p in planes])
    row = next(r for r in cold["rows"] if r[0] == "h5py" and r[1] == f"{cubes[0]}³")
    assert float(row[-1].replace(",", "")) == pytest.approx(expected, rel=0.01)


def test_pyrus_formula_pick_is_the_published_formula(tiny):
    doc = load(tiny, "pyrus")
    shape = bench.study_module("pyrus").SIZES["tiny"]["shape"]
    picks = doc["results"]["picks"]
    formula = plan(shape, layout="pyrus-formula")[0]["layout"]["inner"]
    assert list(picks["cubeslab pyrus-formula (published formula)"]["chunks"]) == formula
    assert list(picks["h5py with the published formula's chunks"]["chunks"]) == formula
    knobs = {(s["kib"], s["ratio"], s["asymmetry"]) for s in doc["results"]["shape_sweep"]}
    assert len(knobs) == len(doc["results"]["shape_sweep"])  # no layout measured twice
    published = [t for t in doc["tables"] if t["published"]]
    assert published and "Pyrus chunk-shape study" in published[0]["published"]


def test_queue_depth_grid_and_plane_reads(tiny):
    doc = load(tiny, "queue-depth")
    p = bench.study_module("queue-depth").SIZES["tiny"]
    device = doc["results"]["device"]
    assert len(device["bytes_per_second"]) == len(device["sizes"])
    for per_size in device["bytes_per_second"]:
        assert len(per_size) == len(device["depths"])
        assert all(len(cell) >= 5 and min(cell) > 0 for cell in per_size)
    planes = doc["results"]["planes"]
    assert len(planes) == len(p["threads"]) * (len(p["in_flight"]) + 1) * 3
    for entry in planes:
        assert_timing(entry)
    reads = table(doc, "cubeslab plane reads")
    assert len(reads["rows"]) == len(p["threads"]) * (len(p["in_flight"]) + 1) + 1


def test_peers_read_the_same_survey(tiny):
    doc = load(tiny, "peers")
    tools = doc["results"]["tools"]
    expected = {"cubeslab", "cubeslab + views", "MDIO", "OpenVDS", "seismic-zfp", "segyio", "h5py"}
    assert expected | {"zarr-python", "TensorStore"} == set(tools), doc["skipped"]
    for name, entry in tools.items():
        if name == "seismic-zfp":  # lossy by design
            assert entry["check"].startswith("SNR")
        else:
            assert entry["check"] == "exact", name
        assert entry["bytes"] > 0
        for access in entry["reads"].values():
            assert_timing(access["warm"])
            assert_timing(access["cold"])
    stands = table(doc, "Where cubeslab stands")
    mdio = next(r for r in stands["rows"] if r[0] == "MDIO")
    ratio = (
        tools["MDIO"]["reads"]["inline"]["warm"]["median_s"]
        / tools["cubeslab"]["reads"]["inline"]["warm"]["median_s"]
    )
    assert float(mdio[1].rstrip("x")) == pytest.approx(ratio, rel=0.06)


def test_unselected_peers_are_listed_as_skipped(tmp_path):
    bench.run("peers", size="tiny", peers="h5py", out=tmp_path / OUT, data=tmp_path / "data")
    doc = load(tmp_path / OUT, "peers")
    assert set(doc["results"]["tools"]) == {"cubeslab", "cubeslab + views", "h5py"}
    assert doc["skipped"]["mdio"] == "not selected (--peers)"
    assert doc["skipped"]["tensorstore"] == "not selected (--peers)"


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="unknown study"):
        bench.run("nope")
    with pytest.raises(ValueError, match="unknown peer"):
        bench.tools.parse_selection("h5py,hdf9")


def chromium() -> str:
    for name in ("chromium-headless-shell", "chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("no Chromium on PATH: `make test` installs chromium-headless-shell")


def test_report_renders_every_table_and_plot_in_chromium(tiny):
    report = tiny / "report.html"
    docs = [load(tiny, s) for s in bench.STUDIES]
    assert [d["study"] for d in docs] == list(bench.STUDIES)
    browser = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run(
        [*browser, "--virtual-time-budget=5000", "--dump-dom", report.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    plots = sum(len(d["plots"]) for d in docs)
    assert f'data-plots-decoded="{plots}"' in dom and f'data-plots="{plots}"' in dom
    assert '<section id="summary">' in dom and dom.index('id="summary"') < dom.index('id="pyrus"')
    for doc in docs:
        assert f'<section id="{doc["study"]}">' in dom
        for t in doc["tables"]:
            assert t["title"].replace("&", "&amp;") in dom
        assert dom.count(f'data-study="{doc["study"]}"') == len(doc["tables"])
    shot = tiny / "report.png"
    subprocess.run(
        [*browser, "--window-size=1280,2400", f"--screenshot={shot}", report.as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (2400, 1280)
    assert pixels[..., :3].std() > 0.05  # text, tables and plots, not a blank page


def test_the_summary_picks_the_fastest_tool_per_need_from_the_tables():
    from cubeslab_bench import summary

    reads = {
        "title": "Reads, cold (ms)",
        "columns": [
            "access",
            "bound",
            "cubeslab",
            "cubeslab + views",
            "segyio",
            "zfp",
            "fastest peer ÷ cubeslab",
        ],
        "rows": [
            ["inline", "0.5", "14 (11–15)", "4.3 (2.7–7.9)", "4.6 (2.9–5.0)", "18 (13–19)", "0.33x"],
            ["trace", "0.001", "2.8 (2.4–4.0)", "1.4 (1.3–1.7)", "0.27 (0.25–0.37)", "0.5", "0.10x"],
        ],
    }
    warm = {
        **reads,
        "title": "Reads, warm (ms)",
        "rows": [["inline", "0.1", "1.2", "0.49", "0.51", "0.004", "—"]],
    }
    doc = {"study": "peers", "tables": [warm, reads], "results": {"tools": {"zfp": {"own_cache": True}}}}
    rows = {r[0]: r for r in summary.rows([doc])}
    assert rows["inline of a 3-D survey, cold"][1:] == [
        "cubeslab + views",
        "cubeslab + views 4.3 ms",
        "segyio 4.6 ms",
        f"{4.6 / 4.3:.2g}x",
    ]
    assert rows["trace of a 3-D survey, cold"][1] == "segyio"
    # A tool answering warm repeats from its own process memory is left out of the warm rows.
    assert rows["inline of a 3-D survey, warm"][1:4] == [
        "cubeslab + views",
        "cubeslab + views 0.49 ms",
        "segyio 0.51 ms",
    ]
    html = summary.render([doc])
    assert "fastest in 2 of 3" in html and "(zfp)" in html


def test_small_ratios_keep_two_significant_digits():
    from cubeslab_bench.study import ratio

    assert (ratio(0.0042), ratio(0.05), ratio(3.14159)) == ("0.0042x", "0.05x", "3.1x")


def test_cli_runs_a_study(tmp_path):
    done = subprocess.run(
        [str(CLI), "bench", "queue-depth",
         "--size", "tiny", "--out", str(tmp_path / OUT)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / OUT / "report.html").is_file()
    assert load(tmp_path / OUT, "queue-depth")["size"] == "tiny"
    bad = subprocess.run(
        [str(CLI), "bench", "nope"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "unknown study" in bad.stderr


def test_cli_bench_without_the_studies_says_how_to_get_them(tmp_path):
    """A wheel install has no studies (they are the repository's bench/ folder, not the package)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(CLI), "bench", "queue-depth"], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path
    )
    assert done.returncode == 1
    assert "make bench" in done.stderr and "[bench]" in done.stderr and "Traceback" not in done.stderr
